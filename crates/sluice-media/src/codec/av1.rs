//! The AV1 codec configuration record (`av1C`, AV1 Codec ISO Media File Format Binding §2.3)
//! and the AV1 codec string (§5: `av01.P.LLT.DD[.M.CCC.cp.tc.mc.F]`). It does not parse the
//! sequence header OBU the record may carry: the string's colour fields come from the sample
//! entry's `colr` box.

use super::{Bytes, Colour, ConfigError};

/// What an `av1C` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Av1Record {
    /// seq_profile (0 Main, 1 High, 2 Professional).
    pub profile: u8,
    /// seq_level_idx_0 (8 is level 4.0).
    pub level_idx: u8,
    /// seq_tier_0: the High tier.
    pub high_tier: bool,
    /// Bits per sample: 8, 10 or 12.
    pub bit_depth: u8,
    /// Monochrome (no chroma planes).
    pub monochrome: bool,
    /// chroma_subsampling_x, chroma_subsampling_y and chroma_sample_position, as the codec
    /// string's `CCC` digits.
    pub chroma: [u8; 3],
}

impl Av1Record {
    /// Parses the body of an `av1C` box.
    pub fn parse(data: &[u8]) -> Result<Av1Record, ConfigError> {
        let mut r = Bytes::new(data, "av1C");
        let head = r.u8()?;
        if head & 0x80 == 0 {
            return Err(r.invalid("marker bit is not set"));
        }
        if head & 0x7f != 1 {
            return Err(ConfigError::Version { record: "av1C", version: head & 0x7f });
        }
        let b = r.u8()?;
        let (profile, level_idx) = (b >> 5, b & 0x1f);
        if profile > 2 {
            return Err(r.invalid("seq_profile above 2"));
        }
        let f = r.u8()?;
        r.u8()?; // initial_presentation_delay
        let high_bitdepth = f & 0x40 != 0;
        let twelve_bit = f & 0x20 != 0;
        let bit_depth = match (profile, high_bitdepth, twelve_bit) {
            (2, true, true) => 12,
            (_, true, _) => 10,
            _ => 8,
        };
        let (x, y) = ((f >> 3) & 1, (f >> 2) & 1);
        // The position is only meaningful for 4:2:0; the string carries 0 otherwise.
        let position = if x == 1 && y == 1 { f & 3 } else { 0 };
        Ok(Av1Record {
            profile,
            level_idx,
            high_tier: f & 0x80 != 0,
            bit_depth,
            monochrome: f & 0x10 != 0,
            chroma: [x, y, position],
        })
    }

    /// The codec string: the short form, or the long one when `colour` says something the
    /// defaults (BT.709, limited range) do not and names every field (no "unspecified").
    pub fn codec_string(&self, colour: Option<&Colour>) -> String {
        let tier = if self.high_tier { 'H' } else { 'M' };
        let mut out = format!("av01.{}.{:02}{tier}.{:02}", self.profile, self.level_idx, self.bit_depth);
        let [x, y, p] = self.chroma;
        let default_chroma = self.chroma == [1, 1, 0] && !self.monochrome;
        if let Some(c) = colour.filter(|c| c.is_specified() && (!c.is_default() || !default_chroma)) {
            out.push_str(&format!(
                ".{}.{x}{y}{p}.{:02}.{:02}.{:02}.{}",
                u8::from(self.monochrome),
                c.primaries,
                c.transfer,
                c.matrix,
                u8::from(c.full_range)
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ten_bit_pq_names_itself_in_full() {
        // Main profile, level 4.0 (8), Main tier, 10-bit, 4:2:0 with an unknown position.
        let rec = Av1Record::parse(&[0x81, 0x08, 0x4C, 0x00]).unwrap();
        assert_eq!((rec.profile, rec.level_idx, rec.bit_depth), (0, 8, 10));
        let pq = Colour { primaries: 9, transfer: 16, matrix: 9, full_range: false };
        assert_eq!(rec.codec_string(Some(&pq)), "av01.0.08M.10.0.110.09.16.09.0");
        assert_eq!(rec.codec_string(None), "av01.0.08M.10");
        let bt709 = Colour { primaries: 1, transfer: 1, matrix: 1, full_range: false };
        assert_eq!(rec.codec_string(Some(&bt709)), "av01.0.08M.10", "the defaults need no long form");
        let unspecified = Colour { primaries: 2, transfer: 2, matrix: 2, full_range: false };
        assert_eq!(rec.codec_string(Some(&unspecified)), "av01.0.08M.10");
    }

    #[test]
    fn profiles_depths_and_errors() {
        let twelve = Av1Record::parse(&[0x81, 0x4D, 0xE0, 0]).unwrap();
        assert_eq!((twelve.profile, twelve.level_idx, twelve.high_tier, twelve.bit_depth), (2, 13, true, 12));
        assert_eq!(twelve.codec_string(None), "av01.2.13H.12");
        assert!(matches!(Av1Record::parse(&[0x01, 0, 0, 0]), Err(ConfigError::Invalid { .. })));
        assert!(matches!(Av1Record::parse(&[0x82, 0, 0, 0]), Err(ConfigError::Version { version: 2, .. })));
        assert!(matches!(Av1Record::parse(&[0x81, 0xE0, 0, 0]), Err(ConfigError::Invalid { .. })));
        for cut in 0..4 {
            assert!(Av1Record::parse(&[0x81, 0x08, 0x4C, 0x00][..cut]).is_err());
        }
    }
}
