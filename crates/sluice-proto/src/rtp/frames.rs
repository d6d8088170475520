//! Audio whose MP4 samples are whole codec frames, one frame per RTP packet: Opus (RFC 7587) and
//! AC-3 (RFC 4184).
//!
//! The packetizer owns the payload of each: an Opus packet goes as it is (RFC 7587 §4.2), the
//! marker bit clear (it marks the end of a silence, which a file does not have); an AC-3 frame
//! goes behind the two-byte payload header (RFC 4184 §4.1.1: frame type 0, one frame) with the
//! marker set, or, larger than a packet, in fragments (frame type 1 when the first carries at
//! least five eighths of the frame, else 2, then 3; the count of fragments; the marker on the
//! last). The timestamp is in the sampling rate's clock. [`AudioFrames`] owns the reverse for
//! tests and fuzzing.

use super::packet::{Packets, RtpPacket, RtpStream, StreamConfig};
use super::{DepacketizeError, PacketizeError};

/// The payload format of a [`FramePacketizer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFormat {
    /// Opus, RFC 7587.
    Opus,
    /// AC-3, RFC 4184.
    Ac3,
}

/// Packetizes the frames of one Opus or AC-3 stream.
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
    /// packet larger than a packet (RFC 7587 has no fragmentation), is refused.
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
            FrameFormat::Ac3 => {
                if frame.is_empty() {
                    return Err(PacketizeError::EmptyAccessUnit);
                }
                let chunk = self.max_payload - 2;
                if frame.len() <= chunk {
                    self.stream.write(out, true, timestamp, &[&[0, 1], frame]);
                    return Ok(1);
                }
                let count = frame.len().div_ceil(chunk);
                let count_byte = u8::try_from(count)
                    .map_err(|_| PacketizeError::FrameTooLarge { size: frame.len(), max: chunk * 255 })?;
                let first = if chunk * 8 >= frame.len() * 5 { 1 } else { 2 };
                for (j, part) in frame.chunks(chunk).enumerate() {
                    let kind = if j == 0 { first } else { 3 };
                    self.stream.write(out, j + 1 == count, timestamp, &[&[kind, count_byte], part]);
                }
                Ok(count)
            }
        }
    }
}

/// Reassembles the frames of one Opus or AC-3 RTP stream.
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

    /// Takes one packet; returns the frames it completes (one Opus packet, or the AC-3 frames it
    /// holds whole, or the frame its last fragment ends).
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
        match (kind & 3, self.pending) {
            (0, None) if *count == 1 && !body.is_empty() => {
                self.buf.extend_from_slice(body);
                self.emitted = true;
                Ok(vec![&self.buf])
            }
            (1 | 2, None) if *count >= 2 && !body.is_empty() => {
                self.buf.extend_from_slice(body);
                self.pending = Some((count - 1, packet.timestamp));
                Ok(Vec::new())
            }
            (3, Some((left, ts))) if ts == packet.timestamp && !body.is_empty() => {
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
}
