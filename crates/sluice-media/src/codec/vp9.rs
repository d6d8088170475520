//! The VP codec configuration record (`vpcC` version 1, VP Codec ISO Media File Format Binding
//! §2.2) of a VP9 track, and the VP9 codec string (§5: `vp09.PP.LL.DD[.CC.cp.tc.mc.FF]`).

use super::{Bytes, Colour, ConfigError};

/// What a `vpcC` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vp9Record {
    /// Profile 0..=3.
    pub profile: u8,
    /// Level times ten (10 is level 1, 40 level 4).
    pub level: u8,
    /// Bits per sample: 8, 10 or 12.
    pub bit_depth: u8,
    /// chromaSubsampling: 0 and 1 are 4:2:0, 2 is 4:2:2, 3 is 4:4:4.
    pub chroma_subsampling: u8,
    /// The colour the record declares.
    pub colour: Colour,
}

impl Vp9Record {
    /// Parses the body of a `vpcC` box (a full box: version and flags first).
    pub fn parse(data: &[u8]) -> Result<Vp9Record, ConfigError> {
        let mut r = Bytes::new(data, "vpcC");
        let version = r.u8()?;
        if version != 1 {
            return Err(ConfigError::Version { record: "vpcC", version });
        }
        r.take(3)?; // flags
        let profile = r.u8()?;
        let level = r.u8()?;
        let b = r.u8()?;
        let (primaries, transfer, matrix) = (r.u8()?, r.u8()?, r.u8()?);
        let init_len = usize::from(r.u16()?);
        r.take(init_len)?;
        let bit_depth = b >> 4;
        if profile > 3 || !matches!(bit_depth, 8 | 10 | 12) {
            return Err(r.invalid("profile above 3 or a bit depth other than 8, 10 or 12"));
        }
        Ok(Vp9Record {
            profile,
            level,
            bit_depth,
            chroma_subsampling: (b >> 1) & 7,
            colour: Colour {
                primaries: u16::from(primaries),
                transfer: u16::from(transfer),
                matrix: u16::from(matrix),
                full_range: b & 1 != 0,
            },
        })
    }

    /// The codec string: the short form unless the chroma subsampling, the range or a named
    /// colour differs from the defaults (4:2:0, limited range, BT.709).
    pub fn codec_string(&self) -> String {
        let mut out = format!("vp09.{:02}.{:02}.{:02}", self.profile, self.level, self.bit_depth);
        let c = &self.colour;
        if self.chroma_subsampling > 1 || (c.is_specified() && !c.is_default()) {
            out.push_str(&format!(
                ".{:02}.{:02}.{:02}.{:02}.{:02}",
                self.chroma_subsampling,
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
    fn profile_2_ten_bit_names_itself() {
        // Profile 2, level 4.0, 10-bit 4:2:0 colocated, unspecified colour, no init data.
        let raw = [1, 0, 0, 0, 2, 40, 0xA2, 2, 2, 2, 0, 0];
        let rec = Vp9Record::parse(&raw).unwrap();
        assert_eq!((rec.profile, rec.level, rec.bit_depth, rec.chroma_subsampling), (2, 40, 10, 1));
        assert_eq!(rec.codec_string(), "vp09.02.40.10");
        let hlg = [1, 0, 0, 0, 2, 40, 0xA2, 9, 18, 9, 0, 0];
        assert_eq!(Vp9Record::parse(&hlg).unwrap().codec_string(), "vp09.02.40.10.01.09.18.09.00");
        for cut in 0..raw.len() {
            assert!(Vp9Record::parse(&raw[..cut]).is_err());
        }
        assert!(matches!(Vp9Record::parse(&[0, 0, 0, 0]), Err(ConfigError::Version { version: 0, .. })));
        assert!(matches!(
            Vp9Record::parse(&[1, 0, 0, 0, 2, 40, 0x92, 2, 2, 2, 0, 0]),
            Err(ConfigError::Invalid { .. })
        ));
    }
}
