//! AAC over RTP, RFC 3640 in `mode=AAC-hbr` (13-bit AU sizes, 3-bit AU indices).
//!
//! The packetizer owns putting one AAC frame (an MP4 sample: a raw access unit, no ADTS header)
//! into one packet behind its AU-headers section, with the marker bit set and the sampling-rate
//! timestamp. One frame per packet keeps the timestamp arithmetic trivial and loss to one frame;
//! frames of a 48 kHz stream are a few hundred bytes, so the extra headers cost little. Frames
//! too large for one packet are refused rather than fragmented (AAC-hbr allows fragmentation,
//! but AAC-LC frames never reach 1400 bytes below several hundred kbit/s per channel).
//!
//! [`AacAccessUnits`] owns the reverse for receivers: one or more AUs per packet, validated
//! against the headers before any is handed out.

use super::packet::{Packets, RtpPacket, RtpStream, StreamConfig};
use super::{DepacketizeError, PacketizeError};

/// AU-headers-length (2 bytes) plus one 16-bit AU-header.
const HEADERS_LEN: usize = 4;
/// Largest AU the 13-bit AU-size field can describe.
const MAX_AU_SIZE: usize = (1 << 13) - 1;

/// Packetizes the frames of one AAC stream.
#[derive(Debug, Clone)]
pub struct AacPacketizer {
    stream: RtpStream,
    max_frame: usize,
}

impl AacPacketizer {
    /// A packetizer writing at most `max_payload` bytes after each RTP header.
    pub fn new(config: StreamConfig, max_payload: usize) -> Result<AacPacketizer, PacketizeError> {
        if max_payload <= HEADERS_LEN {
            return Err(PacketizeError::PayloadLimitTooSmall(max_payload));
        }
        Ok(AacPacketizer {
            stream: RtpStream::new(config),
            max_frame: (max_payload - HEADERS_LEN).min(MAX_AU_SIZE),
        })
    }

    /// The stream's header state (next sequence number, counts for sender reports).
    pub fn stream(&self) -> &RtpStream {
        &self.stream
    }

    /// Appends the packet of one frame to `out`, with `timestamp` in the sampling rate's clock.
    pub fn packetize(
        &mut self,
        frame: &[u8],
        timestamp: u32,
        out: &mut Packets,
    ) -> Result<(), PacketizeError> {
        if frame.is_empty() || frame.len() > self.max_frame {
            return Err(PacketizeError::FrameTooLarge { size: frame.len(), max: self.max_frame });
        }
        // AU-headers-length counts bits: one 16-bit header. AU-size in the top 13 bits, AU-index 0.
        let au_header = (frame.len() as u16) << 3;
        let headers = [0, 16, (au_header >> 8) as u8, au_header as u8];
        self.stream.write(out, true, timestamp, &[&headers, frame]);
        Ok(())
    }
}

/// The AAC frames of one received packet's payload, validated against its AU headers.
#[derive(Debug, Clone)]
pub struct AacAccessUnits<'a> {
    headers: &'a [u8],
    data: &'a [u8],
}

impl<'a> AacAccessUnits<'a> {
    /// Parses the AU-headers section of `packet` (AAC-hbr: 16-bit headers, AU-index and
    /// AU-index-delta 0, since frames are consecutive). Every AU must lie whole in the packet.
    pub fn parse(packet: &RtpPacket<'a>) -> Result<AacAccessUnits<'a>, DepacketizeError> {
        let payload = packet.payload;
        let (len_bits, rest) = match payload {
            [a, b, rest @ ..] => (usize::from(u16::from_be_bytes([*a, *b])), rest),
            _ => return Err(DepacketizeError::EmptyPayload),
        };
        if len_bits == 0 || len_bits % 16 != 0 || len_bits / 8 > rest.len() {
            return Err(DepacketizeError::BadAuHeaders);
        }
        let (headers, data) = rest.split_at(len_bits / 8);
        let mut total = 0;
        for h in headers.chunks_exact(2) {
            let h = u16::from_be_bytes([h[0], h[1]]);
            if h & 0x7 != 0 {
                return Err(DepacketizeError::BadAuHeaders);
            }
            let size = usize::from(h >> 3);
            if size == 0 {
                return Err(DepacketizeError::BadAuHeaders);
            }
            total += size;
        }
        if total > data.len() {
            // One AU larger than the packet is a fragment; several that do not fit are garbage.
            return Err(if headers.len() == 2 {
                DepacketizeError::FragmentedAu
            } else {
                DepacketizeError::BadAuHeaders
            });
        }
        if total < data.len() {
            return Err(DepacketizeError::BadAuHeaders);
        }
        Ok(AacAccessUnits { headers, data })
    }
}

impl<'a> Iterator for AacAccessUnits<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let (h, rest) = self.headers.split_first_chunk::<2>()?;
        self.headers = rest;
        let size = usize::from(u16::from_be_bytes(*h) >> 3);
        let (au, data) = self.data.split_at(size);
        self.data = data;
        Some(au)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: StreamConfig = StreamConfig { ssrc: 9, payload_type: 97, initial_sequence: 100 };

    fn parse(bytes: &[u8]) -> Result<Vec<Vec<u8>>, DepacketizeError> {
        let p = RtpPacket::parse(bytes).unwrap();
        AacAccessUnits::parse(&p).map(|aus| aus.map(<[u8]>::to_vec).collect())
    }

    #[test]
    fn one_frame_per_packet_round_trips() {
        let mut p = AacPacketizer::new(CONFIG, 1400).unwrap();
        let mut out = Packets::new();
        let frame: Vec<u8> = (0..300).map(|i| i as u8).collect();
        p.packetize(&frame, 1024, &mut out).unwrap();
        p.packetize(&frame[..5], 2048, &mut out).unwrap();
        let first = RtpPacket::parse(out.get(0).unwrap()).unwrap();
        assert!(first.marker);
        assert_eq!((first.sequence, first.timestamp, first.payload_type), (100, 1024, 97));
        // AU-headers-length 16 bits; AU-size 300 << 3.
        assert_eq!(first.payload[..4], [0, 16, (300u16 << 3 >> 8) as u8, (300u16 << 3) as u8]);
        assert_eq!(parse(out.get(0).unwrap()).unwrap(), std::slice::from_ref(&frame));
        assert_eq!(parse(out.get(1).unwrap()).unwrap(), [frame[..5].to_vec()]);
        assert_eq!((p.stream().packet_count(), p.stream().octet_count()), (2, 4 + 300 + 4 + 5));
    }

    #[test]
    fn oversized_frames_are_refused() {
        let mut p = AacPacketizer::new(CONFIG, 104).unwrap();
        let mut out = Packets::new();
        assert_eq!(
            p.packetize(&[0; 101], 0, &mut out),
            Err(PacketizeError::FrameTooLarge { size: 101, max: 100 })
        );
        assert_eq!(p.packetize(&[], 0, &mut out), Err(PacketizeError::FrameTooLarge { size: 0, max: 100 }));
        assert!(out.is_empty());
        let mut p = AacPacketizer::new(CONFIG, 65_000).unwrap();
        assert!(p.packetize(&[0; MAX_AU_SIZE + 1], 0, &mut out).is_err());
        assert!(p.packetize(&[0; MAX_AU_SIZE], 0, &mut out).is_ok());
        assert!(AacPacketizer::new(CONFIG, 4).is_err());
    }

    fn packet(payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x80, 0x80 | 97, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9];
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn depacketizer_reads_several_aus_and_rejects_bad_headers() {
        // Two AUs of 2 and 1 bytes.
        assert_eq!(parse(&packet(&[0, 32, 0, 2 << 3, 0, 1 << 3, 7, 8, 9])).unwrap(), [vec![7, 8], vec![9]]);
        assert_eq!(parse(&packet(&[0])), Err(DepacketizeError::EmptyPayload));
        assert_eq!(parse(&packet(&[0, 0, 1])), Err(DepacketizeError::BadAuHeaders));
        assert_eq!(parse(&packet(&[0, 8, 0, 8, 1])), Err(DepacketizeError::BadAuHeaders));
        assert_eq!(parse(&packet(&[0, 16, 0])), Err(DepacketizeError::BadAuHeaders));
        assert_eq!(
            parse(&packet(&[0, 16, 0, 1 << 3 | 1, 5])),
            Err(DepacketizeError::BadAuHeaders),
            "AU-index"
        );
        assert_eq!(parse(&packet(&[0, 16, 0, 0, 5])), Err(DepacketizeError::BadAuHeaders), "empty AU");
        assert_eq!(parse(&packet(&[0, 16, 0, 3 << 3, 5])), Err(DepacketizeError::FragmentedAu));
        assert_eq!(
            parse(&packet(&[0, 16, 0, 1 << 3, 5, 6])),
            Err(DepacketizeError::BadAuHeaders),
            "trailing bytes"
        );
        assert_eq!(parse(&packet(&[0, 32, 0, 1 << 3, 0, 2 << 3, 5, 6])), Err(DepacketizeError::BadAuHeaders));
    }
}
