//! The bodies of RTMP's audio and video messages (FLV tag bodies, Adobe FLV 10.1 §E.4.2 and
//! §E.4.3) read into what a live track takes: H.264 and AAC codec parameters from their
//! sequence headers, and samples in MP4 layout (NAL units with 4-byte lengths; raw AAC
//! frames), with their times on the track's clock.
//!
//! Owns the parsing of one message body and the conversion of RTMP's millisecond timestamps.
//! It does not own the RTMP session (the server's, over rml_rtmp) nor the live stream. Enhanced RTMP (HEVC, AV1, Opus over FourCC headers) is not taken in: such a message
//! is [`FlvError::VideoCodec`].

use crate::codec::{AudioSpecificConfig, ConfigError};
use crate::mp4::{parse_avcc, AacConfig, H264Config, Mp4Error};

/// FLV's CodecID of AVC (H.264).
const AVC: u8 = 7;
/// FLV's SoundFormat of AAC.
const AAC: u8 = 10;
/// FLV's video FrameType of a video info/command frame (no picture).
const INFO_FRAME: u8 = 5;
/// The bit of the first byte that marks an Enhanced RTMP video header.
const EX_HEADER: u8 = 0x80;

/// Why an audio or video message cannot be taken in.
#[derive(Debug, thiserror::Error)]
pub enum FlvError {
    /// Shorter than its header says.
    #[error("a {0} message is truncated")]
    Truncated(&'static str),
    /// A video codec other than H.264.
    #[error("video codec {0} is not taken in over RTMP (H.264 is)")]
    VideoCodec(String),
    /// An audio format other than AAC.
    #[error("audio format {0} is not taken in over RTMP (AAC is)")]
    AudioFormat(u8),
    /// The AVCDecoderConfigurationRecord does not parse.
    #[error("the H.264 sequence header: {0}")]
    Avcc(#[from] Mp4Error),
    /// The AudioSpecificConfig does not parse.
    #[error("the AAC sequence header: {0}")]
    AudioSpecificConfig(#[from] ConfigError),
    /// A NAL unit's length runs past the message.
    #[error("an H.264 NAL unit's length runs past its message")]
    NalLength,
}

/// What one audio or video message carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tag {
    /// An H.264 sequence header: the track's parameters (the NAL length size its samples are
    /// sent with, which [`video`] is given).
    VideoConfig(H264Config),
    /// An H.264 access unit.
    Video {
        /// How long after its decode time it is shown (CompositionTime).
        composition_ms: i32,
        /// Its NAL units, with 4-byte lengths.
        data: Vec<u8>,
        /// Whether it holds an IDR picture.
        keyframe: bool,
    },
    /// An AAC sequence header.
    AudioConfig(AacConfig),
    /// A raw AAC frame.
    Audio(Vec<u8>),
    /// Nothing for a track (end of sequence, an info frame, an empty frame).
    Nothing,
}

/// Reads a video message's body; `nal_length_size` is the sequence header's (NAL units are
/// rewritten with 4-byte lengths when it is not 4).
pub fn video(body: &[u8], nal_length_size: u8) -> Result<Tag, FlvError> {
    let &first = body.first().ok_or(FlvError::Truncated("video"))?;
    if first & EX_HEADER != 0 {
        let fourcc = body.get(1..5).map(String::from_utf8_lossy).unwrap_or_default();
        return Err(FlvError::VideoCodec(format!("{fourcc:?} (Enhanced RTMP)")));
    }
    let (frame_type, codec) = (first >> 4, first & 0x0f);
    if frame_type == INFO_FRAME {
        return Ok(Tag::Nothing);
    }
    if codec != AVC {
        return Err(FlvError::VideoCodec(codec.to_string()));
    }
    let header = body.get(1..5).ok_or(FlvError::Truncated("video"))?;
    // CompositionTime: a signed 24-bit count of milliseconds.
    let composition_ms = i32::from_be_bytes([header[1], header[2], header[3], 0]) >> 8;
    let data = &body[5..];
    match header[0] {
        0 => Ok(Tag::VideoConfig(parse_avcc(0, data, 0, 0)?)),
        1 => {
            let data = four_byte_lengths(data, nal_length_size)?;
            if data.is_empty() {
                return Ok(Tag::Nothing);
            }
            // An IDR picture starts a GOP, as for RTP (the FLV frame type is the encoder's word).
            let keyframe = nal_units(&data).any(|n| n.first().is_some_and(|h| h & 0x1f == 5));
            Ok(Tag::Video { composition_ms, data, keyframe })
        }
        _ => Ok(Tag::Nothing),
    }
}

/// Reads an audio message's body.
pub fn audio(body: &[u8]) -> Result<Tag, FlvError> {
    let &first = body.first().ok_or(FlvError::Truncated("audio"))?;
    if first >> 4 != AAC {
        return Err(FlvError::AudioFormat(first >> 4));
    }
    let &packet_type = body.get(1).ok_or(FlvError::Truncated("audio"))?;
    let data = &body[2..];
    match packet_type {
        0 => {
            let asc = AudioSpecificConfig::parse(data)?;
            Ok(Tag::AudioConfig(AacConfig {
                audio_specific_config: data.to_vec(),
                sample_rate: asc.sample_rate,
                channels: asc.channels,
            }))
        }
        _ if data.is_empty() => Ok(Tag::Nothing),
        _ => Ok(Tag::Audio(data.to_vec())),
    }
}

/// `data`'s NAL units (each after a `size`-byte length) with 4-byte lengths.
fn four_byte_lengths(data: &[u8], size: u8) -> Result<Vec<u8>, FlvError> {
    if size == 4 {
        // Checked all the same: a sample whose lengths overrun it would reach every viewer.
        let mut rest = data;
        while !rest.is_empty() {
            let (len, after) = rest.split_first_chunk::<4>().ok_or(FlvError::NalLength)?;
            rest = after.get(u32::from_be_bytes(*len) as usize..).ok_or(FlvError::NalLength)?;
        }
        return Ok(data.to_vec());
    }
    let size = usize::from(size);
    if size == 0 {
        // No length to read: the loop below would never move on.
        return Err(FlvError::NalLength);
    }
    let mut out = Vec::with_capacity(data.len() + data.len() / 64);
    let mut rest = data;
    while !rest.is_empty() {
        let len = rest.get(..size).ok_or(FlvError::NalLength)?;
        let len = len.iter().fold(0usize, |n, b| n << 8 | usize::from(*b));
        let nal = rest.get(size..size + len).ok_or(FlvError::NalLength)?;
        out.extend_from_slice(&(len as u32).to_be_bytes());
        out.extend_from_slice(nal);
        rest = &rest[size + len..];
    }
    Ok(out)
}

/// The NAL units of 4-byte-length-prefixed `data` (checked by [`four_byte_lengths`]).
fn nal_units(mut data: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = data.split_first_chunk::<4>()?;
        let nal = rest.get(..u32::from_be_bytes(*len) as usize)?;
        data = &rest[nal.len()..];
        Some(nal)
    })
}

/// RTMP's 32-bit millisecond timestamps on one timeline: they wrap after 49 days, and audio and
/// video messages interleave slightly out of order, so each is taken as a signed step from the
/// last.
#[derive(Debug, Default)]
pub struct Clock {
    last: Option<(u32, i64)>,
}

impl Clock {
    /// `timestamp` (ms) on the unwrapped timeline.
    pub fn unwrap(&mut self, timestamp: u32) -> i64 {
        let ms = match self.last {
            Some((last, ms)) => ms + i64::from(timestamp.wrapping_sub(last) as i32),
            None => i64::from(timestamp),
        };
        self.last = Some((timestamp, ms));
        ms
    }
}

/// Milliseconds `ms` on a clock of `rate` Hz, as a live track's 32-bit timestamp (which wraps
/// as RTP's does).
pub fn ticks(ms: i64, rate: u32) -> u32 {
    (i128::from(ms) * i128::from(rate) / 1000) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An avcC of ffmpeg's libx264 at 320x180, High profile: one SPS, one PPS, 4-byte lengths.
    const AVCC: [u8; 42] = [
        0x01, 0x64, 0x00, 0x0c, 0xff, 0xe1, 0x00, 0x19, 0x67, 0x64, 0x00, 0x0c, 0xac, 0xd9, 0x41, 0x41, 0xfb,
        0x01, 0x10, 0x00, 0x00, 0x03, 0x00, 0x10, 0x00, 0x00, 0x03, 0x03, 0x20, 0xf1, 0x42, 0x99, 0x60, 0x01,
        0x00, 0x06, 0x68, 0xeb, 0xe3, 0xcb, 0x22, 0xc0,
    ];

    #[test]
    fn sequence_headers_give_the_tracks() {
        let mut body = vec![0x17, 0, 0, 0, 0];
        body.extend(AVCC);
        let Tag::VideoConfig(h) = video(&body, 4).unwrap() else { panic!() };
        assert_eq!(
            (h.sps.len(), h.pps.len(), h.profile_level_id, h.nal_length_size),
            (1, 1, [0x64, 0, 0x0c], 4)
        );
        assert!(video(&body[..body.len() - 2], 4).is_err(), "a cut PPS");
        let Tag::AudioConfig(a) = audio(&[0xaf, 0, 0x12, 0x08]).unwrap() else { panic!() };
        assert_eq!((a.sample_rate, a.channels, a.audio_specific_config), (44_100, 1, vec![0x12, 0x08]));
        assert_eq!(audio(&[0xaf, 1, 1, 2, 3]).unwrap(), Tag::Audio(vec![1, 2, 3]));
        assert!(matches!(audio(&[0x2f, 1, 1]), Err(FlvError::AudioFormat(2))), "MP3");
        assert!(matches!(video(&[0x1c, 0, 0, 0, 0], 4), Err(FlvError::VideoCodec(c)) if c == "12"));
        assert!(
            matches!(video(&[0x90, b'h', b'v', b'c', b'1'], 4), Err(FlvError::VideoCodec(c)) if c.contains("hvc1"))
        );
        assert_eq!(video(&[0x52, 0], 4).unwrap(), Tag::Nothing, "an info frame");
    }

    #[test]
    fn access_units_get_four_byte_lengths_and_their_composition_time() {
        // An IDR and a SEI, with 2-byte lengths, shown 80 ms after decoding.
        let body = [0x17, 1, 0, 0, 80, 0, 2, 0x65, 0x88, 0, 1, 0x06];
        let Tag::Video { composition_ms, data, keyframe } = video(&body, 2).unwrap() else { panic!() };
        assert_eq!((composition_ms, keyframe), (80, true));
        assert_eq!(data, [0, 0, 0, 2, 0x65, 0x88, 0, 0, 0, 1, 0x06]);
        // A P picture shown before its decode time would be (negative offsets are signed).
        let body = [0x27, 1, 0xff, 0xff, 0xd8, 0, 0, 0, 1, 0x41];
        let Tag::Video { composition_ms, keyframe, .. } = video(&body, 4).unwrap() else { panic!() };
        assert_eq!((composition_ms, keyframe), (-40, false));
        assert!(matches!(video(&[0x27, 1, 0, 0, 0, 0, 0, 0, 9, 0x41], 4), Err(FlvError::NalLength)));
        assert!(matches!(video(&[0x27, 1, 0, 0, 0, 0, 5, 0x41], 2), Err(FlvError::NalLength)));
    }

    /// A publisher's bytes are untrusted: every cut and every changed byte of real bodies is an
    /// error or a bounded tag, never a panic or a loop.
    #[test]
    fn cut_and_damaged_bodies_are_refused_or_bounded() {
        let mut config = vec![0x17, 0, 0, 0, 0];
        config.extend(AVCC);
        let bodies: [&[u8]; 4] = [
            &config,
            &[0x17, 1, 0, 0, 80, 0, 2, 0x65, 0x88, 0, 1, 0x06],
            &[0xaf, 0, 0x12, 0x08],
            &[0xaf, 1, 1, 2, 3],
        ];
        for body in bodies {
            for cut in 0..=body.len() {
                let mut variants = vec![body[..cut].to_vec()];
                for at in 0..cut {
                    for flip in [0x01, 0x80, 0xff] {
                        let mut b = body[..cut].to_vec();
                        b[at] ^= flip;
                        variants.push(b);
                    }
                }
                for b in variants {
                    for size in 0..=4 {
                        if let Ok(Tag::Video { data, .. }) = video(&b, size) {
                            assert!(data.len() <= 4 * b.len(), "{b:?}");
                        }
                    }
                    let _ = audio(&b);
                }
            }
        }
    }

    #[test]
    fn timestamps_unwrap_and_convert() {
        let mut clock = Clock::default();
        assert_eq!(clock.unwrap(u32::MAX - 10), i64::from(u32::MAX - 10));
        assert_eq!(clock.unwrap(5), i64::from(u32::MAX) + 6, "past the wrap");
        assert_eq!(clock.unwrap(1), i64::from(u32::MAX) + 2, "a step back");
        assert_eq!(ticks(40, 90_000), 3_600);
        assert_eq!(ticks(1_000, 44_100), 44_100);
        assert_eq!(ticks(i64::from(u32::MAX) * 2, 1000), u32::MAX.wrapping_mul(2), "wraps as RTP's clock");
    }
}
