//! H.264 over RTP, RFC 6184, packetization mode 1 (non-interleaved).
//!
//! The packetizer owns turning one access unit as an MP4 stores it (NAL units each behind a 1-,
//! 2- or 4-byte big-endian length) into single NAL unit packets where a NAL unit fits the payload
//! limit and FU-A fragments where it does not, with the marker bit on the access unit's last
//! packet and the 90 kHz timestamp on all. It does not aggregate (STAP-A): access units of a
//! streamed file are dominated by one large slice, and aggregating the small parameter sets
//! saves a packet per keyframe at most.
//!
//! The depacketizer owns the reverse for receivers (tests, the load generator): single NAL units,
//! STAP-A and FU-A, loss detection by sequence number, and access units delimited by the marker
//! bit or a timestamp change. It emits access units in the MP4 layout with 4-byte lengths.

use super::fragments::{write_fragments, Fragmented};
use super::packet::{Packets, RtpPacket, RtpStream, StreamConfig};
use super::{DepacketizeError, PacketizeError};

const STAP_A: u8 = 24;
const FU_A: u8 = 28;

/// Splits an access unit of length-prefixed NAL units (MP4 sample layout).
pub(crate) struct NalUnits<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) length_size: usize,
}

impl<'a> Iterator for NalUnits<'a> {
    type Item = Result<&'a [u8], PacketizeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.pos >= self.data.len() {
            return None;
        }
        let at = self.pos;
        let Some(prefix) = self.data.get(at..at + self.length_size) else {
            self.pos = self.data.len();
            return Some(Err(PacketizeError::MalformedAccessUnit(at)));
        };
        let len = prefix.iter().fold(0usize, |acc, b| acc << 8 | usize::from(*b));
        let start = at + self.length_size;
        match self.data.get(start..start.saturating_add(len)) {
            Some(nal) => {
                self.pos = start + len;
                Some(Ok(nal))
            }
            None => {
                self.pos = self.data.len();
                Some(Err(PacketizeError::MalformedAccessUnit(at)))
            }
        }
    }
}

/// Packetizes the access units of one H.264 stream.
#[derive(Debug, Clone)]
pub struct H264Packetizer {
    stream: RtpStream,
    max_payload: usize,
    length_size: usize,
}

impl H264Packetizer {
    /// A packetizer for a stream whose samples prefix NAL units with `nal_length_size` bytes,
    /// writing packets with at most `max_payload` bytes after the RTP header (the path MTU minus
    /// IP, UDP and RTP headers: 1400 is safe on most paths).
    pub fn new(
        config: StreamConfig,
        max_payload: usize,
        nal_length_size: u8,
    ) -> Result<Self, PacketizeError> {
        if max_payload < 3 {
            return Err(PacketizeError::PayloadLimitTooSmall(max_payload));
        }
        if !matches!(nal_length_size, 1 | 2 | 4) {
            return Err(PacketizeError::BadNalLengthSize(nal_length_size));
        }
        Ok(H264Packetizer {
            stream: RtpStream::new(config),
            max_payload,
            length_size: usize::from(nal_length_size),
        })
    }

    /// The stream's header state (next sequence number, counts for sender reports).
    pub fn stream(&self) -> &RtpStream {
        &self.stream
    }

    /// Appends the packets of one access unit to `out`; returns how many. A malformed access
    /// unit is rejected before anything is written, so `out` and the sequence numbers are
    /// unchanged. Empty NAL units carry nothing and are skipped.
    pub fn packetize(
        &mut self,
        access_unit: &[u8],
        timestamp: u32,
        out: &mut Packets,
    ) -> Result<usize, PacketizeError> {
        let nals = || NalUnits { data: access_unit, pos: 0, length_size: self.length_size };
        // First pass: validate, and find the last NAL unit, whose last packet gets the marker.
        let mut last = None;
        for (i, nal) in nals().enumerate() {
            if !nal?.is_empty() {
                last = Some(i);
            }
        }
        let last = last.ok_or(PacketizeError::EmptyAccessUnit)?;
        let before = out.len();
        for (i, nal) in nals().enumerate() {
            let nal = nal.expect("validated above");
            if nal.is_empty() {
                continue;
            }
            let end_of_au = i == last;
            if nal.len() <= self.max_payload {
                self.stream.write(out, end_of_au, timestamp, &[nal]);
                continue;
            }
            // FU-A (RFC 6184 §5.8): the NAL header's F and NRI bits go to the FU indicator, its
            // type to the FU header; the header byte itself is not repeated in the payload.
            let fu = Fragmented { header: &[nal[0] & 0xe0 | FU_A], nal_type: nal[0] & 0x1f, body: &nal[1..] };
            write_fragments(&mut self.stream, out, fu, self.max_payload, end_of_au, timestamp);
        }
        Ok(out.len() - before)
    }
}

/// One reassembled access unit, borrowed from the depacketizer until its next `push`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AccessUnit<'a> {
    /// RTP timestamp (90 kHz).
    pub timestamp: u32,
    /// NAL units, each behind a 4-byte big-endian length (the MP4 layout).
    pub data: &'a [u8],
}

impl<'a> AccessUnit<'a> {
    /// The NAL units, without their length prefixes.
    pub fn nal_units(&self) -> impl Iterator<Item = &'a [u8]> {
        NalUnits { data: self.data, pos: 0, length_size: 4 }.map_while(Result::ok)
    }
}

/// Reassembles the access units of one H.264 RTP stream.
#[derive(Debug)]
pub struct H264Depacketizer {
    buf: Vec<u8>,
    max_access_unit: usize,
    timestamp: Option<u32>,
    /// Offset in `buf` of the length prefix of the NAL unit an FU-A is filling.
    fragment: Option<usize>,
    last_sequence: Option<u16>,
    /// The access unit in progress lost a packet: drop the rest of it.
    damaged: bool,
    /// The previous call returned the access unit in `buf`: clear before the next packet.
    emitted: bool,
    lost_packets: u64,
    dropped_access_units: u64,
}

impl H264Depacketizer {
    /// A depacketizer that refuses access units larger than `max_access_unit` bytes.
    pub fn new(max_access_unit: usize) -> H264Depacketizer {
        H264Depacketizer {
            buf: Vec::new(),
            max_access_unit,
            timestamp: None,
            fragment: None,
            last_sequence: None,
            damaged: false,
            emitted: false,
            lost_packets: 0,
            dropped_access_units: 0,
        }
    }

    /// Packets missing from the sequence so far.
    pub fn lost_packets(&self) -> u64 {
        self.lost_packets
    }

    /// Access units discarded because a packet of theirs was lost or malformed.
    pub fn dropped_access_units(&self) -> u64 {
        self.dropped_access_units
    }

    fn reset(&mut self) {
        self.buf.clear();
        self.timestamp = None;
        self.fragment = None;
        self.damaged = false;
    }

    /// Abandons the access unit in progress; later packets with its timestamp are dropped, and
    /// it is counted as dropped when it ends.
    fn damage(&mut self) {
        self.buf.clear();
        self.fragment = None;
        self.damaged = true;
    }

    /// Ends the access unit in progress without emitting it.
    fn drop_access_unit(&mut self) {
        self.dropped_access_units += 1;
        self.reset();
    }

    /// Takes one packet; returns an access unit when this packet completes one. A malformed
    /// packet is an error and damages the access unit it belongs to; lost packets are counted,
    /// not errors (UDP loses packets), and the access units they may have belonged to are
    /// dropped. Each access unit that ends without being emitted counts once in
    /// [`H264Depacketizer::dropped_access_units`].
    pub fn push(&mut self, packet: &RtpPacket<'_>) -> Result<Option<AccessUnit<'_>>, DepacketizeError> {
        if std::mem::take(&mut self.emitted) {
            self.reset();
        }
        let mut lost = false;
        if let Some(last) = self.last_sequence {
            let gap = packet.sequence.wrapping_sub(last).wrapping_sub(1);
            // A "gap" of more than half the space is a reordered or duplicated packet.
            if gap != 0 && gap < 0x8000 {
                self.lost_packets += u64::from(gap);
                lost = true;
            }
        }
        self.last_sequence = Some(packet.sequence);
        if self.timestamp.is_some_and(|ts| ts != packet.timestamp) {
            // A new access unit started before the previous one's marker: that one lost its end.
            self.drop_access_unit();
        }
        if lost {
            // The lost packets belonged to this packet's access unit or to one before it; which,
            // the receiver cannot know, so this one is damaged too.
            self.damage();
        }
        self.timestamp = Some(packet.timestamp);
        if !self.damaged {
            if let Err(e) = self.take_payload(packet.payload) {
                self.damage();
                if packet.marker {
                    self.drop_access_unit();
                }
                return Err(e);
            }
        }
        if !packet.marker {
            return Ok(None);
        }
        if self.damaged || self.fragment.is_some() || self.buf.is_empty() {
            self.drop_access_unit();
            return Ok(None);
        }
        self.emitted = true;
        Ok(Some(AccessUnit { timestamp: packet.timestamp, data: &self.buf }))
    }

    fn take_payload(&mut self, payload: &[u8]) -> Result<(), DepacketizeError> {
        let &header = payload.first().ok_or(DepacketizeError::EmptyPayload)?;
        match header & 0x1f {
            1..=23 => {
                self.ensure_no_fragment()?;
                self.append_nal(payload)
            }
            STAP_A => {
                self.ensure_no_fragment()?;
                let mut rest = &payload[1..];
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
                        .filter(|n| !n.is_empty())
                        .ok_or(DepacketizeError::BadAggregate)?;
                    self.append_nal(nal)?;
                    rest = &rest[2 + len..];
                }
                Ok(())
            }
            FU_A => {
                let &fu = payload.get(1).ok_or(DepacketizeError::BadFragment)?;
                let (start, end) = (fu & 0x80 != 0, fu & 0x40 != 0);
                let body = &payload[2..];
                if (start && end) || body.is_empty() {
                    return Err(DepacketizeError::BadFragment);
                }
                let nal_header = header & 0xe0 | fu & 0x1f;
                match (start, self.fragment) {
                    (true, None) => {
                        let at = self.buf.len();
                        self.append_nal(&[nal_header])?;
                        self.fragment = Some(at);
                    }
                    (false, Some(at)) if self.buf[at + 4] == nal_header => {}
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
            t => Err(DepacketizeError::UnsupportedNalType(t)),
        }
    }

    fn ensure_no_fragment(&self) -> Result<(), DepacketizeError> {
        match self.fragment {
            Some(_) => Err(DepacketizeError::BadFragment),
            None => Ok(()),
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

    const CONFIG: StreamConfig = StreamConfig { ssrc: 7, payload_type: 96, initial_sequence: 65530 };

    fn access_unit(nals: &[&[u8]], length_size: usize) -> Vec<u8> {
        let mut au = Vec::new();
        for nal in nals {
            au.extend_from_slice(&(nal.len() as u32).to_be_bytes()[4 - length_size..]);
            au.extend_from_slice(nal);
        }
        au
    }

    fn roundtrip(packets: &Packets) -> Vec<(u32, Vec<Vec<u8>>)> {
        let mut d = H264Depacketizer::new(1 << 20);
        let mut out = Vec::new();
        for p in packets.iter() {
            let p = RtpPacket::parse(p).unwrap();
            if let Some(au) = d.push(&p).unwrap() {
                out.push((au.timestamp, au.nal_units().map(<[u8]>::to_vec).collect()));
            }
        }
        out
    }

    #[test]
    fn small_nal_units_go_whole_large_ones_in_fu_a() {
        let mut p = H264Packetizer::new(CONFIG, 100, 4).unwrap();
        let sps = [0x67, 1, 2, 3];
        let idr: Vec<u8> = std::iter::once(0x65).chain((0..250).map(|i| i as u8)).collect();
        let au = access_unit(&[&sps, &idr], 4);
        let mut out = Packets::new();
        assert_eq!(p.packetize(&au, 9000, &mut out).unwrap(), 4); // SPS + 250/98 = 3 fragments
        let parsed: Vec<RtpPacket> = out.iter().map(|b| RtpPacket::parse(b).unwrap()).collect();
        assert!(out.iter().all(|b| b.len() <= 12 + 100));
        assert_eq!(parsed[0].payload, sps);
        assert_eq!(parsed[1].payload[..2], [0x60 | 28, 0x80 | 5]);
        assert_eq!(parsed[2].payload[..2], [0x60 | 28, 5]);
        assert_eq!(parsed[3].payload[..2], [0x60 | 28, 0x40 | 5]);
        assert_eq!(parsed.iter().map(|p| p.marker).collect::<Vec<_>>(), [false, false, false, true]);
        assert_eq!(parsed.iter().map(|p| p.sequence).collect::<Vec<_>>(), [65530, 65531, 65532, 65533]);
        assert!(parsed.iter().all(|p| p.timestamp == 9000 && p.ssrc == 7 && p.payload_type == 96));
        // Sequence numbers continue across calls, and wrap.
        p.packetize(&access_unit(&[&[0x41, 9]], 4), 12000, &mut out).unwrap();
        let last = RtpPacket::parse(out.get(4).unwrap()).unwrap();
        assert_eq!((last.sequence, last.marker), (65534, true));
        assert_eq!(p.stream().packet_count(), 5);
        assert_eq!(roundtrip(&out), [(9000, vec![sps.to_vec(), idr.clone()]), (12000, vec![vec![0x41, 9]])]);
    }

    #[test]
    fn nal_exactly_at_the_limit_is_not_fragmented() {
        for length_size in [1, 2, 4] {
            let mut p = H264Packetizer::new(CONFIG, 50, length_size as u8).unwrap();
            let mut out = Packets::new();
            let nal = [0x41; 50];
            assert_eq!(p.packetize(&access_unit(&[&nal], length_size), 0, &mut out).unwrap(), 1);
            let nal = [0x41; 51];
            assert_eq!(p.packetize(&access_unit(&[&nal], length_size), 0, &mut out).unwrap(), 2);
        }
    }

    #[test]
    fn malformed_access_units_write_nothing() {
        let mut p = H264Packetizer::new(CONFIG, 100, 4).unwrap();
        let mut out = Packets::new();
        assert_eq!(
            p.packetize(&[0, 0, 0, 5, 1, 2], 0, &mut out),
            Err(PacketizeError::MalformedAccessUnit(0))
        );
        assert_eq!(
            p.packetize(&[0, 0, 0, 1, 0x41, 0, 0], 0, &mut out),
            Err(PacketizeError::MalformedAccessUnit(5))
        );
        assert_eq!(p.packetize(&[], 0, &mut out), Err(PacketizeError::EmptyAccessUnit));
        assert_eq!(p.packetize(&[0, 0, 0, 0], 0, &mut out), Err(PacketizeError::EmptyAccessUnit));
        assert!(out.is_empty());
        assert_eq!(p.stream().next_sequence(), CONFIG.initial_sequence);
        // An empty NAL unit at the end does not steal the marker.
        p.packetize(&[0, 0, 0, 1, 0x41, 0, 0, 0, 0], 0, &mut out).unwrap();
        assert!(RtpPacket::parse(out.get(0).unwrap()).unwrap().marker);
        assert!(H264Packetizer::new(CONFIG, 2, 4).is_err());
        assert!(H264Packetizer::new(CONFIG, 100, 3).is_err());
    }

    fn packet(seq: u16, ts: u32, marker: bool, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x80, u8::from(marker) << 7 | 96];
        v.extend_from_slice(&seq.to_be_bytes());
        v.extend_from_slice(&ts.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 7]);
        v.extend_from_slice(payload);
        v
    }

    fn push(d: &mut H264Depacketizer, bytes: &[u8]) -> Result<Option<Vec<u8>>, DepacketizeError> {
        let p = RtpPacket::parse(bytes).unwrap();
        d.push(&p).map(|au| au.map(|au| au.data.to_vec()))
    }

    #[test]
    fn depacketizer_handles_stap_a_loss_and_malformed_input() {
        let mut d = H264Depacketizer::new(1000);
        // STAP-A with two NAL units.
        let au = push(&mut d, &packet(1, 0, true, &[24, 0, 2, 0x67, 1, 0, 1, 0x68])).unwrap().unwrap();
        assert_eq!(au, [0, 0, 0, 2, 0x67, 1, 0, 0, 0, 1, 0x68]);
        // A lost packet in the middle of an access unit drops that access unit only.
        assert_eq!(push(&mut d, &packet(2, 3000, false, &[0x41, 1])), Ok(None));
        assert_eq!(push(&mut d, &packet(4, 3000, true, &[0x41, 2])), Ok(None));
        assert_eq!((d.lost_packets(), d.dropped_access_units()), (1, 1));
        assert_eq!(push(&mut d, &packet(5, 6000, true, &[0x41, 3])).unwrap().unwrap(), [0, 0, 0, 2, 0x41, 3]);
        // Packets lost between access units: the next one may have lost its start, so it goes.
        assert_eq!(push(&mut d, &packet(8, 7000, true, &[0x41, 5])), Ok(None));
        assert_eq!((d.lost_packets(), d.dropped_access_units()), (3, 2));
        // An access unit whose marker never came is dropped when the next one starts.
        assert_eq!(push(&mut d, &packet(9, 8000, false, &[0x41, 6])), Ok(None));
        assert_eq!(
            push(&mut d, &packet(10, 8500, true, &[0x41, 7])).unwrap().unwrap(),
            [0, 0, 0, 2, 0x41, 7]
        );
        assert_eq!((d.lost_packets(), d.dropped_access_units()), (3, 3));
        let mut seq = 10;
        let mut next = || {
            seq += 1;
            seq
        };
        // Malformed payloads.
        assert_eq!(push(&mut d, &packet(next(), 9000, true, &[])), Err(DepacketizeError::EmptyPayload));
        assert_eq!(
            push(&mut d, &packet(next(), 9000, true, &[25, 0])),
            Err(DepacketizeError::UnsupportedNalType(25))
        );
        assert_eq!(
            push(&mut d, &packet(next(), 9000, true, &[24, 0, 5, 1])),
            Err(DepacketizeError::BadAggregate)
        );
        assert_eq!(
            push(&mut d, &packet(next(), 9000, true, &[28, 0xc5, 1])),
            Err(DepacketizeError::BadFragment)
        );
        assert_eq!(
            push(&mut d, &packet(next(), 9000, true, &[28, 0x05, 1])),
            Err(DepacketizeError::BadFragment)
        );
        // A fragment start inside a fragmented NAL unit.
        assert_eq!(push(&mut d, &packet(next(), 12000, false, &[28, 0x85, 1])), Ok(None));
        assert_eq!(
            push(&mut d, &packet(next(), 12000, true, &[28, 0x85, 1])),
            Err(DepacketizeError::BadFragment)
        );
        // Too large.
        let big = vec![0x41; 1001];
        assert_eq!(
            push(&mut d, &packet(next(), 15000, true, &big)),
            Err(DepacketizeError::AccessUnitTooLarge(1000))
        );
        // And it recovers.
        assert_eq!(
            push(&mut d, &packet(next(), 18000, true, &[0x41, 4])).unwrap().unwrap(),
            [0, 0, 0, 2, 0x41, 4]
        );
        assert_eq!(d.lost_packets(), 3, "malformed packets are not lost ones");
    }
}
