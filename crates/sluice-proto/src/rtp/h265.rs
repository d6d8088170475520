//! H.265 over RTP, RFC 7798, without decoding order numbers (`sprop-max-don-diff` 0).
//!
//! The packetizer owns turning one access unit as an MP4 stores it (NAL units each behind a 1-,
//! 2- or 4-byte length) into RTP packets: NAL units that fit together in one packet go as an
//! aggregation packet (AP, §4.4.2: the parameter sets and SEI before a keyframe's slice are one
//! packet instead of four), a NAL unit that fits alone as a single NAL unit packet (§4.4.1), and
//! one that does not as fragmentation units (FU, §4.4.3); the marker bit is on the access unit's
//! last packet and the 90 kHz timestamp on all. The depacketizer owns the reverse for tests and
//! fuzzing: it emits access units with 4-byte lengths and drops an access unit a packet of which
//! is missing or malformed. Neither decodes NAL units beyond their two-byte header.

use super::fragments::{write_fragments, Fragmented};
use super::h264::NalUnits;
use super::packet::{Packets, RtpPacket, RtpStream, StreamConfig};
use super::{DepacketizeError, PacketizeError};

/// Aggregation packet (RFC 7798 §4.4.2).
const AP: u8 = 48;
/// Fragmentation unit (§4.4.3).
const FU: u8 = 49;

fn nal_type(header: &[u8]) -> u8 {
    (header[0] >> 1) & 0x3f
}

/// Packetizes the access units of one H.265 stream.
#[derive(Debug, Clone)]
pub struct H265Packetizer {
    stream: RtpStream,
    max_payload: usize,
    length_size: usize,
}

impl H265Packetizer {
    /// A packetizer for samples whose NAL units are behind `nal_length_size`-byte lengths,
    /// writing at most `max_payload` bytes after each RTP header.
    pub fn new(
        config: StreamConfig,
        max_payload: usize,
        nal_length_size: u8,
    ) -> Result<Self, PacketizeError> {
        // An FU carries the payload header, the FU header and at least one byte.
        if max_payload < 4 {
            return Err(PacketizeError::PayloadLimitTooSmall(max_payload));
        }
        if !matches!(nal_length_size, 1 | 2 | 4) {
            return Err(PacketizeError::BadNalLengthSize(nal_length_size));
        }
        Ok(H265Packetizer {
            stream: RtpStream::new(config),
            max_payload,
            length_size: usize::from(nal_length_size),
        })
    }

    /// The stream's header state.
    pub fn stream(&self) -> &RtpStream {
        &self.stream
    }

    /// Appends the packets of one access unit to `out`; returns how many. A malformed access
    /// unit (a length past its end, a NAL unit shorter than its two-byte header) is rejected
    /// before anything is written. Empty NAL units are skipped.
    pub fn packetize(
        &mut self,
        access_unit: &[u8],
        timestamp: u32,
        out: &mut Packets,
    ) -> Result<usize, PacketizeError> {
        let mut nals: Vec<&[u8]> = Vec::new();
        for nal in (NalUnits { data: access_unit, pos: 0, length_size: self.length_size }) {
            let nal = nal?;
            match nal.len() {
                0 => continue,
                1 => return Err(PacketizeError::MalformedAccessUnit(0)),
                _ => nals.push(nal),
            }
        }
        if nals.is_empty() {
            return Err(PacketizeError::EmptyAccessUnit);
        }
        let before = out.len();
        let mut i = 0;
        while i < nals.len() {
            // As many NAL units from here as fit in one aggregation packet: its 2-byte header,
            // then each behind a 2-byte size.
            let mut bytes = 2;
            let mut end = i;
            while end < nals.len() && bytes + 2 + nals[end].len() <= self.max_payload {
                bytes += 2 + nals[end].len();
                end += 1;
            }
            let last = end == nals.len();
            if end - i >= 2 {
                self.aggregate(&nals[i..end], last, timestamp, out);
                i = end;
            } else if nals[i].len() <= self.max_payload {
                self.stream.write(out, i + 1 == nals.len(), timestamp, &[nals[i]]);
                i += 1;
            } else {
                self.fragment(nals[i], i + 1 == nals.len(), timestamp, out);
                i += 1;
            }
        }
        Ok(out.len() - before)
    }

    fn aggregate(&mut self, nals: &[&[u8]], marker: bool, timestamp: u32, out: &mut Packets) {
        // §4.4.2: F is the OR of the units' F bits, LayerId and TID the lowest of theirs.
        let forbidden = nals.iter().fold(0, |f, n| f | n[0] & 0x80);
        let layer = nals.iter().map(|n| u16::from(n[0] & 1) << 5 | u16::from(n[1] >> 3)).min().unwrap_or(0);
        let tid = nals.iter().map(|n| n[1] & 7).min().unwrap_or(1);
        let header = [forbidden | AP << 1 | (layer >> 5) as u8, ((layer & 0x1f) as u8) << 3 | tid];
        let sizes: Vec<[u8; 2]> = nals.iter().map(|n| (n.len() as u16).to_be_bytes()).collect();
        let mut parts: Vec<&[u8]> = vec![&header];
        for (size, nal) in sizes.iter().zip(nals) {
            parts.push(size);
            parts.push(nal);
        }
        self.stream.write(out, marker, timestamp, &parts);
    }

    fn fragment(&mut self, nal: &[u8], end_of_au: bool, timestamp: u32, out: &mut Packets) {
        // §4.4.3: the payload header is the NAL unit's with type 49; the FU header carries the
        // start and end bits and the NAL unit's type; the NAL header itself is not repeated.
        let fu = Fragmented {
            header: &[nal[0] & 0x81 | FU << 1, nal[1]],
            nal_type: nal_type(nal),
            body: &nal[2..],
        };
        write_fragments(&mut self.stream, out, fu, self.max_payload, end_of_au, timestamp);
    }
}

/// Reassembles the access units of one H.265 RTP stream (single NAL unit packets, APs and FUs,
/// without decoding order numbers).
#[derive(Debug)]
pub struct H265Depacketizer {
    buf: Vec<u8>,
    max_access_unit: usize,
    timestamp: Option<u32>,
    /// Offset in `buf` of the length of the NAL unit an FU is filling.
    fragment: Option<usize>,
    last_sequence: Option<u16>,
    damaged: bool,
    emitted: bool,
}

impl H265Depacketizer {
    /// A depacketizer that refuses access units larger than `max_access_unit` bytes.
    pub fn new(max_access_unit: usize) -> H265Depacketizer {
        H265Depacketizer {
            buf: Vec::new(),
            max_access_unit,
            timestamp: None,
            fragment: None,
            last_sequence: None,
            damaged: false,
            emitted: false,
        }
    }

    fn reset(&mut self) {
        self.buf.clear();
        self.timestamp = None;
        self.fragment = None;
        self.damaged = false;
    }

    /// Takes one packet; returns the access unit (NAL units behind 4-byte lengths) this packet
    /// completes. A malformed packet is an error and its access unit is dropped; so is one
    /// whose packets are not consecutive.
    pub fn push(&mut self, packet: &RtpPacket<'_>) -> Result<Option<&[u8]>, DepacketizeError> {
        if std::mem::take(&mut self.emitted) {
            self.reset();
        }
        let lost = self.last_sequence.is_some_and(|last| packet.sequence != last.wrapping_add(1));
        self.last_sequence = Some(packet.sequence);
        if self.timestamp.is_some_and(|ts| ts != packet.timestamp) {
            self.reset();
        }
        if lost {
            self.buf.clear();
            self.fragment = None;
            self.damaged = true;
        }
        self.timestamp = Some(packet.timestamp);
        if !self.damaged {
            if let Err(e) = self.take_payload(packet.payload) {
                self.damaged = true;
                if packet.marker {
                    self.reset();
                }
                return Err(e);
            }
        }
        if !packet.marker {
            return Ok(None);
        }
        if self.damaged || self.fragment.is_some() || self.buf.is_empty() {
            self.reset();
            return Ok(None);
        }
        self.emitted = true;
        Ok(Some(&self.buf))
    }

    fn take_payload(&mut self, payload: &[u8]) -> Result<(), DepacketizeError> {
        if payload.len() < 2 {
            return Err(DepacketizeError::EmptyPayload);
        }
        let in_fragment = self.fragment.is_some();
        match nal_type(payload) {
            AP if !in_fragment => {
                let mut rest = &payload[2..];
                if rest.is_empty() {
                    return Err(DepacketizeError::BadAggregate);
                }
                while !rest.is_empty() {
                    let len = match rest {
                        [a, b, ..] => usize::from(u16::from_be_bytes([*a, *b])),
                        _ => return Err(DepacketizeError::BadAggregate),
                    };
                    let nal = rest
                        .get(2..2 + len)
                        .filter(|n| n.len() >= 2)
                        .ok_or(DepacketizeError::BadAggregate)?;
                    self.append_nal(nal)?;
                    rest = &rest[2 + len..];
                }
                Ok(())
            }
            FU => {
                let &fu = payload.get(2).ok_or(DepacketizeError::BadFragment)?;
                let (start, end) = (fu & 0x80 != 0, fu & 0x40 != 0);
                let body = &payload[3..];
                if (start && end) || body.is_empty() {
                    return Err(DepacketizeError::BadFragment);
                }
                let header = [payload[0] & 0x81 | (fu & 0x3f) << 1, payload[1]];
                match (start, self.fragment) {
                    (true, None) => {
                        let at = self.buf.len();
                        self.append_nal(&header)?;
                        self.fragment = Some(at);
                    }
                    (false, Some(at)) if self.buf[at + 4..at + 6] == header => {}
                    _ => return Err(DepacketizeError::BadFragment),
                }
                let at = self.fragment.expect("set above");
                self.grow(body.len())?;
                self.buf.extend_from_slice(body);
                let len = (self.buf.len() - at - 4) as u32;
                self.buf[at..at + 4].copy_from_slice(&len.to_be_bytes());
                if end {
                    self.fragment = None;
                }
                Ok(())
            }
            0..=47 if !in_fragment => self.append_nal(payload),
            AP | 0..=47 => Err(DepacketizeError::BadFragment),
            t => Err(DepacketizeError::UnsupportedNalType(t)),
        }
    }

    fn grow(&self, more: usize) -> Result<(), DepacketizeError> {
        if self.buf.len() + more > self.max_access_unit {
            return Err(DepacketizeError::AccessUnitTooLarge(self.max_access_unit));
        }
        Ok(())
    }

    fn append_nal(&mut self, nal: &[u8]) -> Result<(), DepacketizeError> {
        self.grow(4 + nal.len())?;
        self.buf.extend_from_slice(&(nal.len() as u32).to_be_bytes());
        self.buf.extend_from_slice(nal);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access_unit(nals: &[&[u8]]) -> Vec<u8> {
        let mut au = Vec::new();
        for n in nals {
            au.extend_from_slice(&(n.len() as u32).to_be_bytes());
            au.extend_from_slice(n);
        }
        au
    }

    fn config() -> StreamConfig {
        StreamConfig { ssrc: 7, payload_type: 96, initial_sequence: 0xfffe }
    }

    /// The payload types of each packet, and the access unit the depacketizer makes of them.
    fn roundtrip(packets: &Packets) -> (Vec<u8>, Vec<u8>) {
        let mut d = H265Depacketizer::new(1 << 20);
        let mut kinds = Vec::new();
        let mut au = None;
        for (i, bytes) in packets.iter().enumerate() {
            let p = RtpPacket::parse(bytes).unwrap();
            assert_eq!(p.marker, i + 1 == packets.len());
            kinds.push(nal_type(p.payload));
            if let Some(got) = d.push(&p).unwrap() {
                au = Some(got.to_vec());
            }
        }
        (kinds, au.expect("an access unit"))
    }

    #[test]
    fn parameter_sets_aggregate_slices_go_whole_or_in_fragments() {
        let (vps, sps, pps) = ([0x40u8, 1, 1, 2], [0x42u8, 1, 3, 4, 5], [0x44u8, 1, 6]);
        let slice: Vec<u8> = [0x26u8, 1].into_iter().chain((0..250).map(|i| i as u8)).collect();
        let au = access_unit(&[&vps, &sps, &pps, &slice]);
        let mut p = H265Packetizer::new(config(), 100, 4).unwrap();
        let mut out = Packets::new();
        let n = p.packetize(&au, 9000, &mut out).unwrap();
        // One AP (VPS, SPS, PPS), then the 252-byte slice in FUs of 97 bytes of body.
        assert_eq!(n, 1 + 3);
        let (kinds, back) = roundtrip(&out);
        assert_eq!(kinds, [AP, FU, FU, FU]);
        assert_eq!(back, au);
        assert!(out.iter().all(|b| b.len() <= 12 + 100));
        // A slice that fits goes alone; a lone small unit is not aggregated.
        let small = access_unit(&[&slice[..50]]);
        out.clear();
        p.packetize(&small, 9000, &mut out).unwrap();
        assert_eq!(roundtrip(&out), (vec![19], small));
    }

    #[test]
    fn aggregation_keeps_the_lowest_layer_and_tid_and_the_f_bit() {
        let mut p = H265Packetizer::new(config(), 1400, 2).unwrap();
        let a = [0x40u8, 0x02, 9];
        let b = [0xC2u8, 0x03, 8];
        let mut au = Vec::new();
        for n in [&a, &b] {
            au.extend_from_slice(&(n.len() as u16).to_be_bytes());
            au.extend_from_slice(n);
        }
        let mut out = Packets::new();
        assert_eq!(p.packetize(&au, 1, &mut out).unwrap(), 1);
        let packet = RtpPacket::parse(out.get(0).unwrap()).unwrap();
        assert_eq!(&packet.payload[..2], &[0x80 | AP << 1, 0x02]);
    }

    #[test]
    fn malformed_access_units_write_nothing() {
        let mut p = H265Packetizer::new(config(), 1400, 4).unwrap();
        let mut out = Packets::new();
        assert_eq!(p.packetize(&[0, 0, 0, 9, 1], 0, &mut out), Err(PacketizeError::MalformedAccessUnit(0)));
        assert_eq!(
            p.packetize(&[0, 0, 0, 1, 0x26], 0, &mut out),
            Err(PacketizeError::MalformedAccessUnit(0))
        );
        assert_eq!(p.packetize(&[0, 0, 0, 0], 0, &mut out), Err(PacketizeError::EmptyAccessUnit));
        assert!(out.is_empty());
        assert_eq!(p.stream().next_sequence(), 0xfffe);
        assert!(H265Packetizer::new(config(), 3, 4).is_err());
        assert!(H265Packetizer::new(config(), 1400, 3).is_err());
    }
}
