//! Dolby Vision signalling: the `DOVIDecoderConfigurationRecord` of a `dvcC`, `dvvC` or `dvwC` box
//! in an HEVC or AV1 sample entry (Dolby Vision Streams Within the ISO Base Media File Format
//! v2.x §3.2), and what HLS and DASH say about it.
//!
//! This module owns reading the record and the strings computed from it: the Dolby Vision codec
//! string (`dvh1.08.07`, `dav1.10.09`: sample entry type, profile and level, two digits each),
//! the brand of a backward-compatible profile (`db1p`, `db2g`, `db4h`, by the base layer's
//! signal compatibility id) and the range of that base layer. Which of these go in `CODECS` and
//! which in `SUPPLEMENTAL-CODECS` (Apple's HLS authoring specification, RFC 8216bis §4.4.6.2) is
//! decided here too ([`DolbyVision::backward_compatible`]); it does not write playlists or MPDs.

use super::{Bytes, ConfigError, VideoRange};

/// What a Dolby Vision configuration box says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DolbyVision {
    /// dv_profile (5, 8, 10, ...).
    pub profile: u8,
    /// dv_level (1..=13).
    pub level: u8,
    /// The stream has a base layer (a decoder of the base codec plays it).
    pub base_layer: bool,
    /// dv_bl_signal_compatibility_id: what the base layer is (0 none, 1 HDR10, 2 SDR, 4 HLG).
    pub compatibility: u8,
}

impl DolbyVision {
    /// Parses the body of a `dvcC`, `dvvC` or `dvwC` box: version major and minor, then 16 bits
    /// of profile (7), level (6) and the RPU, EL and BL present flags, then the compatibility id
    /// in the high 4 bits of the next byte (the reserved bytes after it are not needed).
    pub fn parse(data: &[u8]) -> Result<DolbyVision, ConfigError> {
        let mut r = Bytes::new(data, "dvcC");
        let _version = (r.u8()?, r.u8()?);
        let bits = r.u16()?;
        let compatibility = r.u8()? >> 4;
        let profile = (bits >> 9) as u8;
        let level = ((bits >> 3) & 0x3f) as u8;
        if level == 0 {
            return Err(r.invalid("Dolby Vision level 0"));
        }
        Ok(DolbyVision { profile, level, base_layer: bits & 1 != 0, compatibility })
    }

    /// Whether a player without Dolby Vision plays the base layer: profiles 8 and 10 with an
    /// HDR10, SDR or HLG base layer (8.1, 8.2, 8.4, 10.1, 10.2, 10.4). Then `CODECS` names the
    /// base codec and the Dolby Vision string goes in `SUPPLEMENTAL-CODECS`.
    pub fn backward_compatible(&self) -> bool {
        matches!(self.profile, 8 | 10) && self.base_layer && self.brand().is_some()
    }

    /// Whether the stream is Dolby Vision only (profile 5): `CODECS` is the Dolby Vision string.
    pub fn dolby_vision_only(&self) -> bool {
        self.profile == 5
    }

    /// The brand of the base layer's compatibility (Apple's HLS authoring specification).
    pub fn brand(&self) -> Option<&'static str> {
        match self.compatibility {
            1 => Some("db1p"),
            2 => Some("db2g"),
            4 => Some("db4h"),
            _ => None,
        }
    }

    /// The codec string with `fourcc` (`dvh1`, `dvhe`, `dav1`): `dvh1.08.07`.
    pub fn codec_string(&self, fourcc: &str) -> String {
        format!("{fourcc}.{:02}.{:02}", self.profile, self.level)
    }

    /// The range of what a player shows: the base layer's, or PQ for profile 5.
    pub fn video_range(&self) -> Option<VideoRange> {
        match (self.profile, self.compatibility) {
            (5, _) | (_, 1) => Some(VideoRange::Pq),
            (_, 2) => Some(VideoRange::Sdr),
            (_, 4) => Some(VideoRange::Hlg),
            _ => None,
        }
    }
}

/// The Dolby Vision sample entry type for a sample entry type: `dvh1` for `hvc1`, `dvhe` for
/// `hev1`, `dav1` for `av01` (and each of those for itself).
pub fn dolby_vision_fourcc(base: &[u8; 4]) -> Option<[u8; 4]> {
    match base {
        b"hvc1" | b"dvh1" => Some(*b"dvh1"),
        b"hev1" | b"dvhe" => Some(*b"dvhe"),
        b"av01" | b"dav1" => Some(*b"dav1"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record as the specification lays it out, written here bit by bit.
    pub(crate) fn record(profile: u8, level: u8, bl: bool, compatibility: u8) -> Vec<u8> {
        let bits = u16::from(profile) << 9 | u16::from(level) << 3 | 1 << 2 | u16::from(bl);
        let mut r = vec![1, 0];
        r.extend_from_slice(&bits.to_be_bytes());
        r.push(compatibility << 4);
        r.resize(24, 0);
        r
    }

    #[test]
    fn profiles_and_their_strings() {
        let p81 = DolbyVision::parse(&record(8, 7, true, 1)).unwrap();
        assert_eq!(p81, DolbyVision { profile: 8, level: 7, base_layer: true, compatibility: 1 });
        assert!(p81.backward_compatible() && !p81.dolby_vision_only());
        assert_eq!((p81.codec_string("dvh1"), p81.brand()), ("dvh1.08.07".into(), Some("db1p")));
        assert_eq!(p81.video_range(), Some(VideoRange::Pq));
        let p84 = DolbyVision::parse(&record(8, 4, true, 4)).unwrap();
        assert_eq!((p84.brand(), p84.video_range()), (Some("db4h"), Some(VideoRange::Hlg)));
        let p102 = DolbyVision::parse(&record(10, 9, true, 2)).unwrap();
        assert!(p102.backward_compatible());
        assert_eq!((p102.codec_string("dav1"), p102.brand()), ("dav1.10.09".into(), Some("db2g")));
        assert_eq!(p102.video_range(), Some(VideoRange::Sdr));
        let p5 = DolbyVision::parse(&record(5, 6, false, 0)).unwrap();
        assert!(!p5.backward_compatible() && p5.dolby_vision_only());
        assert_eq!((p5.codec_string("dvh1"), p5.video_range()), ("dvh1.05.06".into(), Some(VideoRange::Pq)));
        // Profile 7 (dual layer, for discs) is neither: the base codec alone is announced.
        let p7 = DolbyVision::parse(&record(7, 6, true, 6)).unwrap();
        assert!(!p7.backward_compatible() && !p7.dolby_vision_only());
    }

    #[test]
    fn malformed_records_are_errors() {
        let whole = record(8, 7, true, 1);
        for cut in 0..5 {
            assert!(DolbyVision::parse(&whole[..cut]).is_err(), "cut at {cut}");
        }
        assert!(DolbyVision::parse(&whole[..5]).is_ok());
        assert!(DolbyVision::parse(&record(8, 0, true, 1)).is_err());
    }
}
