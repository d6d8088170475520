//! Audio whose MP4 samples are whole codec frames: Opus (RFC 7587), AC-3 (RFC 4184) and E-AC-3
//! (RFC 4598).
//!
//! The packetizer owns the payload of each: an Opus packet goes as it is (RFC 7587 §4.2), the
//! marker bit clear (it marks the end of a silence, which a file does not have); an AC-3 or E-AC-3
//! frame goes behind the two-byte payload header (six zero bits, the frame type FT, the count NF)
//! with the marker set. Whole frames are frame type 0 with NF the number of frames, several to a
//! packet when [`FramePacketizer::packetize_frames`] is given several that fit. A frame larger
//! than a packet goes in fragments, NF the count of fragments and the marker on the last: AC-3's
//! first fragment is type 1 when it carries at least five eighths of the frame (which its first
//! CRC covers), else 2, the rest 3; E-AC-3 has no CRC at five eighths and every fragment is type
//! 1 (what VLC's RFC 4598 receiver expects). The timestamp is in the sampling rate's clock, each
//! packet's that of its first frame. [`AudioFrames`] owns the reverse for tests and fuzzing.

use super::packet::{Packets, RtpPacket, RtpStream, StreamConfig};
use super::{DepacketizeError, PacketizeError};

/// The payload format of a [`FramePacketizer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFormat {
    /// Opus, RFC 7587.
    Opus,
    /// AC-3, RFC 4184.
    Ac3,
    /// E-AC-3, RFC 4598.
    Eac3,
}

/// RFC 4598's frame type of every fragment of an E-AC-3 frame. VLC's RFC 4598 depacketizer
/// (`modules/access/rtp/ac3.c`) reads the same: frame type 0 for whole frames, 1 for each
/// fragment, the fragment count in the first one's NF and the marker on the last.
const EAC3_FRAGMENT: u8 = 1;

/// The E-AC-3 sync frames `unit` holds back to back (an independent substream and its dependent
/// ones), split by the 11-bit `frmsiz` each sync frame's header states (ETSI TS 102 366 E.1.2.1:
/// words minus one); `None` when the sizes do not end exactly at the end of `unit`.
pub fn eac3_sync_frames(unit: &[u8]) -> Option<Vec<&[u8]>> {
    let mut frames = Vec::new();
    let mut rest = unit;
    while !rest.is_empty() {
        let size = sync_frame_size(rest)?;
        let (frame, tail) = rest.split_at(size);
        frames.push(frame);
        rest = tail;
    }
    (!frames.is_empty()).then_some(frames)
}

/// How many sync frames [`eac3_sync_frames`] finds in `unit`, without collecting them (the
/// packetizer asks for every frame it sends).
fn eac3_sync_frame_count(unit: &[u8]) -> Option<usize> {
    let (mut count, mut rest) = (0, unit);
    while !rest.is_empty() {
        rest = &rest[sync_frame_size(rest)?..];
        count += 1;
    }
    (count > 0).then_some(count)
}

/// The size of the sync frame `data` starts with, when its header is there and the frame fits.
fn sync_frame_size(data: &[u8]) -> Option<usize> {
    let [0x0b, 0x77, high, low, ..] = *data else { return None };
    let size = (usize::from(high & 0x07) << 8 | usize::from(low)) * 2 + 2;
    (size <= data.len()).then_some(size)
}

/// Packetizes the frames of one Opus, AC-3 or E-AC-3 stream.
#[derive(Debug, Clone)]
pub struct FramePacketizer {
    stream: RtpStream,
    max_payload: usize,
    format: FrameFormat,
}

impl FramePacketizer {
    /// A packetizer writing at most `max_payload` bytes after each RTP header.
    pub fn new(
        config: StreamConfig,
        max_payload: usize,
        format: FrameFormat,
    ) -> Result<Self, PacketizeError> {
        if max_payload < 3 {
            return Err(PacketizeError::PayloadLimitTooSmall(max_payload));
        }
        Ok(FramePacketizer { stream: RtpStream::new(config), max_payload, format })
    }

    /// The stream's header state.
    pub fn stream(&self) -> &RtpStream {
        &self.stream
    }

    /// Appends the packets of one frame to `out`; returns how many. An empty frame, or an Opus
    /// packet larger than a packet (RFC 7587 has no fragmentation), is refused. An E-AC-3 sample
    /// holding an independent substream and its dependent ones counts them all in NF.
    pub fn packetize(
        &mut self,
        frame: &[u8],
        timestamp: u32,
        out: &mut Packets,
    ) -> Result<usize, PacketizeError> {
        match self.format {
            FrameFormat::Opus => {
                if frame.is_empty() || frame.len() > self.max_payload {
                    return Err(PacketizeError::FrameTooLarge { size: frame.len(), max: self.max_payload });
                }
                self.stream.write(out, false, timestamp, &[frame]);
                Ok(1)
            }
            FrameFormat::Ac3 | FrameFormat::Eac3 => {
                if frame.is_empty() {
                    return Err(PacketizeError::EmptyAccessUnit);
                }
                let chunk = self.max_payload - 2;
                if frame.len() <= chunk {
                    let count = if self.format == FrameFormat::Eac3 { units_in(frame) } else { 1 };
                    self.stream.write(out, true, timestamp, &[&[0, count], frame]);
                    return Ok(1);
                }
                self.fragment(frame, timestamp, out)
            }
        }
    }

    /// Appends the packets of consecutive `frames` to `out`, the first at `timestamp` and each
    /// `frame_ticks` after the one before; returns how many. E-AC-3 sync frames that fit go
    /// several to a packet (RFC 4598: whole frames, in order, NF of them, at most 255), which a
    /// receiver splits by the size each frame's header states; a frame that does not fit goes
    /// alone, in fragments. Opus, AC-3 (whose depacketizer here takes one frame a packet) and
    /// bytes that are not sync frames go a frame a packet.
    pub fn packetize_frames(
        &mut self,
        frames: &[&[u8]],
        timestamp: u32,
        frame_ticks: u32,
        out: &mut Packets,
    ) -> Result<usize, PacketizeError> {
        let at = |i: usize| timestamp.wrapping_add(frame_ticks.wrapping_mul(i as u32));
        if self.format == FrameFormat::Opus {
            let mut packets = 0;
            for (i, frame) in frames.iter().enumerate() {
                packets += self.packetize(frame, at(i), out)?;
            }
            return Ok(packets);
        }
        if frames.iter().any(|f| f.is_empty()) {
            return Err(PacketizeError::EmptyAccessUnit);
        }
        let chunk = self.max_payload - 2;
        let mut header = [0u8; 2];
        let (mut packets, mut i) = (0, 0);
        while i < frames.len() {
            if frames[i].len() > chunk {
                packets += self.fragment(frames[i], at(i), out)?;
                i += 1;
                continue;
            }
            let (mut bytes, mut count, mut end) = (0, 0u8, i);
            while let Some(frame) = frames.get(end) {
                // Only sync frames whose sizes a receiver can read go several to a packet.
                let units = match self.format {
                    FrameFormat::Eac3 => eac3_sync_frame_count(frame).and_then(|n| u8::try_from(n).ok()),
                    _ => None,
                };
                let fits = bytes + frame.len() <= chunk;
                match units {
                    Some(units) if fits && usize::from(count) + usize::from(units) <= 255 => count += units,
                    None if end == i => count = 1,
                    _ => break,
                }
                bytes += frame.len();
                end += 1;
                if units.is_none() {
                    break;
                }
            }
            header[1] = count;
            let whole: &[&[u8]] = &frames[i..end];
            self.stream.write(
                out,
                true,
                at(i),
                &[&header[..]].iter().chain(whole).copied().collect::<Vec<_>>(),
            );
            packets += 1;
            i = end;
        }
        Ok(packets)
    }

    /// Writes `frame`, larger than a packet, as fragments.
    fn fragment(&mut self, frame: &[u8], timestamp: u32, out: &mut Packets) -> Result<usize, PacketizeError> {
        let chunk = self.max_payload - 2;
        let count = frame.len().div_ceil(chunk);
        let count_byte = u8::try_from(count)
            .map_err(|_| PacketizeError::FrameTooLarge { size: frame.len(), max: chunk * 255 })?;
        let (first, rest) = match self.format {
            FrameFormat::Eac3 => (EAC3_FRAGMENT, EAC3_FRAGMENT),
            _ if chunk * 8 >= frame.len() * 5 => (1, 3),
            _ => (2, 3),
        };
        for (j, part) in frame.chunks(chunk).enumerate() {
            let kind = if j == 0 { first } else { rest };
            self.stream.write(out, j + 1 == count, timestamp, &[&[kind, count_byte], part]);
        }
        Ok(count)
    }
}

/// How many E-AC-3 sync frames NF counts for `frame`: those its headers state, or one when
/// they do not add up or are more than NF can say (such bytes still go, as one frame).
fn units_in(frame: &[u8]) -> u8 {
    eac3_sync_frame_count(frame).and_then(|n| u8::try_from(n).ok()).unwrap_or(1)
}

/// Reassembles the frames of one Opus, AC-3 or E-AC-3 RTP stream.
#[derive(Debug)]
pub struct AudioFrames {
    format: FrameFormat,
    buf: Vec<u8>,
    /// Fragments still expected of the AC-3 frame in `buf`, and its timestamp.
    pending: Option<(u8, u32)>,
    emitted: bool,
}

impl AudioFrames {
    /// A depacketizer of `format`.
    pub fn new(format: FrameFormat) -> AudioFrames {
        AudioFrames { format, buf: Vec::new(), pending: None, emitted: false }
    }

    /// Takes one packet; returns the frames it completes (one Opus packet, or the AC-3 frame or
    /// the E-AC-3 sync frames it holds whole, or the frame its last fragment ends).
    pub fn push(&mut self, packet: &RtpPacket<'_>) -> Result<Vec<&[u8]>, DepacketizeError> {
        if std::mem::take(&mut self.emitted) {
            self.buf.clear();
        }
        let payload = packet.payload;
        if payload.is_empty() {
            return Err(DepacketizeError::EmptyPayload);
        }
        if self.format == FrameFormat::Opus {
            self.buf.extend_from_slice(payload);
            self.emitted = true;
            return Ok(vec![&self.buf]);
        }
        let [kind, count, body @ ..] = payload else { return Err(DepacketizeError::Truncated) };
        let eac3 = self.format == FrameFormat::Eac3;
        let continues = |kind: u8| if eac3 { kind == EAC3_FRAGMENT } else { kind == 3 };
        match (kind & 3, self.pending) {
            (0, None) if *count >= 1 && !body.is_empty() => {
                self.buf.extend_from_slice(body);
                self.emitted = true;
                if *count == 1 {
                    return Ok(vec![&self.buf]);
                }
                // Several frames: each E-AC-3 sync frame states its size; an AC-3 packet of
                // several is not something sluice sends.
                match eac3_sync_frames(&self.buf) {
                    Some(frames) if eac3 && frames.len() == usize::from(*count) => Ok(frames),
                    _ => Err(DepacketizeError::BadAggregate),
                }
            }
            (1, None) | (2, None) if *count >= 2 && !body.is_empty() && (!eac3 || kind & 3 == 1) => {
                self.buf.extend_from_slice(body);
                self.pending = Some((count - 1, packet.timestamp));
                Ok(Vec::new())
            }
            (k, Some((left, ts))) if continues(k) && ts == packet.timestamp && !body.is_empty() => {
                self.buf.extend_from_slice(body);
                if left == 1 {
                    self.pending = None;
                    self.emitted = true;
                    return Ok(vec![&self.buf]);
                }
                self.pending = Some((left - 1, ts));
                Ok(Vec::new())
            }
            _ => {
                self.buf.clear();
                self.pending = None;
                Err(DepacketizeError::BadFragment)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::RTP_HEADER_LEN;

    fn config() -> StreamConfig {
        StreamConfig { ssrc: 1, payload_type: 97, initial_sequence: 10 }
    }

    #[test]
    fn opus_packets_go_whole() {
        let mut p = FramePacketizer::new(config(), 100, FrameFormat::Opus).unwrap();
        let mut out = Packets::new();
        assert_eq!(p.packetize(&[0xfc, 1, 2, 3], 960, &mut out).unwrap(), 1);
        let packet = RtpPacket::parse(out.get(0).unwrap()).unwrap();
        assert!(!packet.marker);
        assert_eq!(AudioFrames::new(FrameFormat::Opus).push(&packet).unwrap(), vec![&[0xfc, 1, 2, 3][..]]);
        assert!(p.packetize(&[0; 101], 0, &mut out).is_err());
        assert!(p.packetize(&[], 0, &mut out).is_err());
    }

    #[test]
    fn ac3_frames_go_whole_or_in_fragments() {
        let frame: Vec<u8> = (0..250).map(|i| i as u8).collect();
        let mut p = FramePacketizer::new(config(), 300, FrameFormat::Ac3).unwrap();
        let mut out = Packets::new();
        assert_eq!(p.packetize(&frame, 1536, &mut out).unwrap(), 1);
        let packet = RtpPacket::parse(out.get(0).unwrap()).unwrap();
        assert!(packet.marker);
        assert_eq!(&packet.payload[..2], &[0, 1]);
        assert_eq!(AudioFrames::new(FrameFormat::Ac3).push(&packet).unwrap(), vec![frame.as_slice()]);
        // 250 bytes in 102-byte chunks: three fragments, the first under 5/8 of the frame.
        let mut p = FramePacketizer::new(config(), 104, FrameFormat::Ac3).unwrap();
        out.clear();
        assert_eq!(p.packetize(&frame, 1536, &mut out).unwrap(), 3);
        let mut d = AudioFrames::new(FrameFormat::Ac3);
        let mut got = Vec::new();
        for (i, bytes) in out.iter().enumerate() {
            let packet = RtpPacket::parse(bytes).unwrap();
            assert_eq!(packet.marker, i == 2);
            assert_eq!(&packet.payload[..2], &[if i == 0 { 2 } else { 3 }, 3]);
            got.extend(d.push(&packet).unwrap().into_iter().map(<[u8]>::to_vec));
        }
        assert_eq!(got, vec![frame.clone()]);
        // A first fragment with at least 5/8 of the frame is type 1.
        let mut p = FramePacketizer::new(config(), 200, FrameFormat::Ac3).unwrap();
        out.clear();
        p.packetize(&frame, 0, &mut out).unwrap();
        assert_eq!(RtpPacket::parse(out.get(0).unwrap()).unwrap().payload[0], 1);
    }

    /// An E-AC-3 sync frame of `size` bytes (even, at least 4): the sync word, `frmsiz` and filler.
    fn eac3_frame(size: usize, fill: u8) -> Vec<u8> {
        let words = size / 2 - 1;
        let mut f = vec![0x0b, 0x77, (words >> 8) as u8 & 0x07, words as u8];
        f.resize(size, fill);
        f
    }

    /// RFC 4598 §4 read by this test alone: a two-byte header (FT in the low bits of the first,
    /// NF the second); FT 0 holds NF whole frames, each as long as its `frmsiz` says; FT 1 holds
    /// one fragment of NF, the marker on the last. Returns the frames with their timestamps.
    fn rfc4598_frames(packets: &[Vec<u8>]) -> Vec<(u32, Vec<u8>)> {
        let (mut frames, mut partial, mut fragments) = (Vec::new(), Vec::new(), 0);
        for p in packets {
            let marker = p[1] & 0x80 != 0;
            let ts = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
            let (ft, nf, mut body) = (p[12] & 3, p[13], &p[14..]);
            assert_eq!(p[12] >> 2, 0, "MBZ bits");
            match ft {
                0 => {
                    assert!(marker, "a packet of whole frames is marked");
                    assert!(partial.is_empty());
                    for _ in 0..nf {
                        let size = (usize::from(body[2] & 7) << 8 | usize::from(body[3])) * 2 + 2;
                        frames.push((ts, body[..size].to_vec()));
                        body = &body[size..];
                    }
                    assert!(body.is_empty(), "NF frames fill the payload");
                }
                1 => {
                    fragments += 1;
                    partial.extend_from_slice(body);
                    assert_eq!(marker, fragments == nf, "the marker on the last fragment only");
                    if marker {
                        frames.push((ts, std::mem::take(&mut partial)));
                        fragments = 0;
                    }
                }
                other => panic!("frame type {other}"),
            }
        }
        assert!(partial.is_empty());
        frames
    }

    #[test]
    fn eac3_frames_go_several_to_a_packet_or_in_fragments() {
        // Four small frames, one larger than a packet, two small: with 300 bytes of payload the
        // first three share a packet (2 + 3 * 96 = 290), the fourth goes alone, the large one in
        // three fragments, the last two together.
        let sizes = [96, 96, 96, 96, 700, 100, 100];
        let frames: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| eac3_frame(n, i as u8)).collect();
        let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        let mut p = FramePacketizer::new(config(), 300, FrameFormat::Eac3).unwrap();
        let mut out = Packets::new();
        assert_eq!(p.packetize_frames(&refs, 1000, 1536, &mut out).unwrap(), 6);
        let packets: Vec<Vec<u8>> = (0..out.len()).map(|i| out.to_vec(i).unwrap()).collect();
        assert!(packets.iter().all(|p| p.len() <= RTP_HEADER_LEN + 300));
        let headers: Vec<[u8; 2]> = packets.iter().map(|p| [p[12], p[13]]).collect();
        assert_eq!(headers, [[0, 3], [0, 1], [1, 3], [1, 3], [1, 3], [0, 2]]);
        let got = rfc4598_frames(&packets);
        let expected: Vec<(u32, Vec<u8>)> = frames
            .iter()
            .enumerate()
            .map(|(i, f)| (1000 + 1536 * [0, 0, 0, 3, 4, 5, 5][i], f.clone()))
            .collect();
        assert_eq!(got, expected, "frames and each packet's timestamp (its first frame's)");

        // Our depacketizer agrees, and every packet cut short anywhere is refused or incomplete,
        // never a panic or a frame that was not sent.
        let mut d = AudioFrames::new(FrameFormat::Eac3);
        let mut back = Vec::new();
        for bytes in &packets {
            let packet = RtpPacket::parse(bytes).unwrap();
            back.extend(d.push(&packet).unwrap().into_iter().map(<[u8]>::to_vec));
            for cut in RTP_HEADER_LEN..bytes.len() {
                let mut fresh = AudioFrames::new(FrameFormat::Eac3);
                if let Ok(short) = RtpPacket::parse(&bytes[..cut]) {
                    if let Ok(got) = fresh.push(&short) {
                        assert!(got.iter().all(|f| !frames.iter().any(|s| s == f)), "cut at {cut}");
                    }
                }
            }
        }
        assert_eq!(back, frames);

        // One frame alone: type 0, NF 1; a sample holding a dependent substream counts two.
        out.clear();
        let mut both = eac3_frame(96, 1);
        both.extend(eac3_frame(40, 2));
        p.packetize(&both, 0, &mut out).unwrap();
        assert_eq!(&out.get(0).unwrap()[12..14], &[0, 2]);
        assert!(p.packetize(&[], 0, &mut out).is_err());
    }
}
