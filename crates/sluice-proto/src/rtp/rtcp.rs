//! RTCP sender reports (RFC 3550 §6.4.1), which let a receiver map RTP timestamps to wall-clock
//! time and so synchronise audio with video.
//!
//! This module owns the bytes of a sender report, optionally compounded with the SDES CNAME that
//! RFC 3550 §6.1 asks every compound packet to carry. It does not decide when to send one (the
//! streaming loop does, every few seconds) and does not read receiver reports.

/// Bytes of a sender report without report blocks.
pub const SENDER_REPORT_LEN: usize = 28;

const PT_SR: u8 = 200;
const PT_SDES: u8 = 202;
const PT_BYE: u8 = 203;

/// Seconds from the NTP epoch (1900) to the Unix epoch (1970).
const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// Why bytes are not a sender report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtcpError {
    /// Too short, wrong version, wrong packet type or a length that does not match.
    #[error("not an RTCP sender report")]
    NotASenderReport,
}

/// One sender report: what the stream has sent, and which RTP time is which wall-clock time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderReport {
    /// The stream's SSRC.
    pub ssrc: u32,
    /// Wall-clock time as a 64-bit NTP timestamp (32.32 fixed point since 1900); see
    /// [`ntp_timestamp`].
    pub ntp_time: u64,
    /// The same instant in the stream's RTP clock.
    pub rtp_time: u32,
    /// Packets sent since the stream started.
    pub packet_count: u32,
    /// Payload octets sent since the stream started.
    pub octet_count: u32,
}

/// The NTP timestamp of `since_unix_epoch` (a `SystemTime` since `UNIX_EPOCH`), as sender reports
/// carry it: seconds since 1900 in the high 32 bits, the fraction in the low 32.
pub fn ntp_timestamp(since_unix_epoch: std::time::Duration) -> u64 {
    let secs = since_unix_epoch.as_secs().wrapping_add(NTP_UNIX_OFFSET);
    let frac = (u64::from(since_unix_epoch.subsec_nanos()) << 32) / 1_000_000_000;
    secs << 32 | frac
}

impl SenderReport {
    /// The 28 bytes of the report (no reception report blocks: sluice only sends).
    pub fn to_bytes(&self) -> [u8; SENDER_REPORT_LEN] {
        let mut b = [0u8; SENDER_REPORT_LEN];
        b[0] = 0x80; // V=2, no padding, RC=0
        b[1] = PT_SR;
        b[2..4].copy_from_slice(&((SENDER_REPORT_LEN / 4 - 1) as u16).to_be_bytes());
        b[4..8].copy_from_slice(&self.ssrc.to_be_bytes());
        b[8..16].copy_from_slice(&self.ntp_time.to_be_bytes());
        b[16..20].copy_from_slice(&self.rtp_time.to_be_bytes());
        b[20..24].copy_from_slice(&self.packet_count.to_be_bytes());
        b[24..28].copy_from_slice(&self.octet_count.to_be_bytes());
        b
    }

    /// Appends the report and an SDES packet with `cname` (truncated to 255 bytes) to `out`: the
    /// compound packet RFC 3550 §6.1 prescribes.
    pub fn write_compound(&self, cname: &str, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
        let cname = &cname.as_bytes()[..cname.len().min(255)];
        // SSRC, CNAME item (type 1, length, text), then at least one zero byte ending the item
        // list, padded to a 32-bit boundary.
        let chunk_len = (4 + 2 + cname.len() + 1).div_ceil(4) * 4;
        out.push(0x81); // V=2, SC=1
        out.push(PT_SDES);
        out.extend_from_slice(&((chunk_len / 4) as u16).to_be_bytes());
        let start = out.len();
        out.extend_from_slice(&self.ssrc.to_be_bytes());
        out.push(1);
        out.push(cname.len() as u8);
        out.extend_from_slice(cname);
        out.resize(start + chunk_len, 0);
    }

    /// Appends the compound packet that ends a stream: the report, SDES with `cname`, and a BYE
    /// for the report's SSRC (RFC 3550 §6.6). Receivers such as ffmpeg take it as end of stream.
    pub fn write_goodbye(&self, cname: &str, out: &mut Vec<u8>) {
        self.write_compound(cname, out);
        out.push(0x81); // V=2, SC=1
        out.push(PT_BYE);
        out.extend_from_slice(&1u16.to_be_bytes());
        out.extend_from_slice(&self.ssrc.to_be_bytes());
    }

    /// Parses a sender report (the first packet of a compound packet).
    pub fn parse(data: &[u8]) -> Result<SenderReport, RtcpError> {
        let b = data.get(..SENDER_REPORT_LEN).ok_or(RtcpError::NotASenderReport)?;
        let words = usize::from(u16::from_be_bytes([b[2], b[3]])) + 1;
        if b[0] >> 6 != 2 || b[1] != PT_SR || words * 4 < SENDER_REPORT_LEN || words * 4 > data.len() {
            return Err(RtcpError::NotASenderReport);
        }
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Ok(SenderReport {
            ssrc: u32_at(4),
            ntp_time: u64::from(u32_at(8)) << 32 | u64::from(u32_at(12)),
            rtp_time: u32_at(16),
            packet_count: u32_at(20),
            octet_count: u32_at(24),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn ntp_time_of_known_instants() {
        assert_eq!(ntp_timestamp(Duration::ZERO), NTP_UNIX_OFFSET << 32);
        assert_eq!(ntp_timestamp(Duration::from_millis(1500)), (NTP_UNIX_OFFSET + 1) << 32 | 1 << 31);
    }

    #[test]
    fn sender_report_round_trips() {
        let sr = SenderReport {
            ssrc: 0x1234_5678,
            ntp_time: 0xaabb_ccdd_0011_2233,
            rtp_time: 90_000,
            packet_count: 10,
            octet_count: 14_000,
        };
        let bytes = sr.to_bytes();
        assert_eq!(bytes[..4], [0x80, 200, 0, 6]);
        assert_eq!(SenderReport::parse(&bytes), Ok(sr));
        let mut compound = Vec::new();
        sr.write_compound("sluice@example", &mut compound);
        assert_eq!(compound.len() % 4, 0);
        assert_eq!(SenderReport::parse(&compound), Ok(sr));
        let sdes = &compound[SENDER_REPORT_LEN..];
        assert_eq!(sdes[..2], [0x81, 202]);
        assert_eq!(usize::from(u16::from_be_bytes([sdes[2], sdes[3]])) * 4 + 4, sdes.len());
        assert_eq!(&sdes[10..10 + 14], b"sluice@example");
        assert_eq!(SenderReport::parse(&bytes[..27]), Err(RtcpError::NotASenderReport));
        let mut rr = bytes;
        rr[1] = 201;
        assert_eq!(SenderReport::parse(&rr), Err(RtcpError::NotASenderReport));
    }
}
