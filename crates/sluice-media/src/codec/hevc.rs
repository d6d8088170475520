//! The HEVC decoder configuration record (`hvcC`, ISO/IEC 14496-15 §8.3.3.1) and what is
//! computed from it: the RFC 6381 codec string (ISO/IEC 14496-15 Annex E.3) and whether a
//! sample's in-band parameter sets are the record's own (so an `hev1` track may be carried as
//! `hvc1`), the `hvc1` sample entry of a record that came without one (a live publisher's
//! parameter sets), and the picture size its SPS declares. It does not read the rest of the
//! parameter sets.

use super::{Bytes, ConfigError};

/// NAL unit types of the parameter sets (ITU-T H.265 Table 7-1).
pub const VPS: u8 = 32;
/// Sequence parameter set.
pub const SPS: u8 = 33;
/// Picture parameter set.
pub const PPS: u8 = 34;

/// What an `hvcC` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HevcRecord {
    /// general_profile_space (0..=3).
    pub profile_space: u8,
    /// general_tier_flag: the High tier.
    pub high_tier: bool,
    /// general_profile_idc (1 Main, 2 Main 10, …).
    pub profile_idc: u8,
    /// general_profile_compatibility_flags, flag 0 in the most significant bit.
    pub compatibility: u32,
    /// general_constraint_indicator_flags, the 48 bits as six bytes.
    pub constraints: [u8; 6],
    /// general_level_idc: 30 times the level (153 is level 5.1).
    pub level_idc: u8,
    /// chroma_format_idc (1 is 4:2:0).
    pub chroma_format: u8,
    /// Luma bit depth.
    pub bit_depth_luma: u8,
    /// Chroma bit depth.
    pub bit_depth_chroma: u8,
    /// Bytes of the length before each NAL unit of a sample: 1, 2 or 4.
    pub nal_length_size: u8,
    /// Video parameter sets (NAL units with their two-byte header).
    pub vps: Vec<Vec<u8>>,
    /// Sequence parameter sets.
    pub sps: Vec<Vec<u8>>,
    /// Picture parameter sets.
    pub pps: Vec<Vec<u8>>,
}

impl HevcRecord {
    /// Parses the body of an `hvcC` box.
    pub fn parse(data: &[u8]) -> Result<HevcRecord, ConfigError> {
        let mut r = Bytes::new(data, "hvcC");
        let version = r.u8()?;
        if version != 1 {
            return Err(ConfigError::Version { record: "hvcC", version });
        }
        let general = r.u8()?;
        let compatibility = r.u32()?;
        let constraints: [u8; 6] = r.take(6)?.try_into().expect("6 bytes");
        let level_idc = r.u8()?;
        r.take(3)?; // min_spatial_segmentation_idc, parallelismType
        let chroma_format = r.u8()? & 0x03;
        let bit_depth_luma = (r.u8()? & 0x07) + 8;
        let bit_depth_chroma = (r.u8()? & 0x07) + 8;
        r.take(2)?; // avgFrameRate
        let nal_length_size = (r.u8()? & 0x03) + 1;
        if nal_length_size == 3 {
            return Err(r.invalid("NAL length size of 3 bytes"));
        }
        let arrays = r.u8()?;
        let (mut vps, mut sps, mut pps) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..arrays {
            let nal_type = r.u8()? & 0x3f;
            let count = r.u16()?;
            for _ in 0..count {
                let len = usize::from(r.u16()?);
                let nal = r.take(len)?;
                if nal.len() < 2 {
                    return Err(r.invalid("a NAL unit shorter than its header"));
                }
                if nal_unit_type(nal) != nal_type {
                    return Err(r.invalid("a NAL unit in the array of another type"));
                }
                match nal_type {
                    VPS => vps.push(nal.to_vec()),
                    SPS => sps.push(nal.to_vec()),
                    PPS => pps.push(nal.to_vec()),
                    _ => {} // SEI and others: decoders find them in-band too.
                }
            }
        }
        Ok(HevcRecord {
            profile_space: general >> 6,
            high_tier: general & 0x20 != 0,
            profile_idc: general & 0x1f,
            compatibility,
            constraints,
            level_idc,
            chroma_format,
            bit_depth_luma,
            bit_depth_chroma,
            nal_length_size,
            vps,
            sps,
            pps,
        })
    }

    /// The RFC 6381 codec string with sample entry type `fourcc` (`hvc1` or `hev1`), as ISO/IEC
    /// 14496-15 Annex E.3 builds it: profile space and profile, the compatibility flags in
    /// reverse bit order (hexadecimal), tier and level, then the constraint bytes without the
    /// trailing zero ones (`hvc1.2.4.L153.B0`).
    pub fn codec_string(&self, fourcc: &str) -> String {
        let space = ["", "A", "B", "C"][usize::from(self.profile_space & 3)];
        let tier = if self.high_tier { 'H' } else { 'L' };
        let mut out = format!(
            "{fourcc}.{space}{}.{:X}.{tier}{}",
            self.profile_idc,
            self.compatibility.reverse_bits(),
            self.level_idc
        );
        let used = self.constraints.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
        for b in &self.constraints[..used] {
            out.push_str(&format!(".{b:X}"));
        }
        out
    }

    /// Whether the record holds a VPS, an SPS and a PPS: what `hvc1` requires of it.
    pub fn has_parameter_sets(&self) -> bool {
        !self.vps.is_empty() && !self.sps.is_empty() && !self.pps.is_empty()
    }

    /// Whether `nal` (a parameter set found in a sample) is one of the record's own.
    pub fn holds(&self, nal: &[u8]) -> bool {
        self.vps.iter().chain(&self.sps).chain(&self.pps).any(|p| p == nal)
    }
}

/// The type of an HEVC NAL unit (its header's bits 1..7).
pub fn nal_unit_type(nal: &[u8]) -> u8 {
    nal.first().map_or(0xff, |b| (b >> 1) & 0x3f)
}

/// The parameter sets (VPS, SPS, PPS) a sample carries before its first slice, the sample being
/// NAL units each after a `length_size`-byte length. `data` may be the head of a sample only,
/// cut inside the first slice; a NAL unit before it cut off by the end is an error.
pub fn leading_parameter_sets(data: &[u8], length_size: u8) -> Result<Vec<&[u8]>, ConfigError> {
    let mut r = Bytes::new(data, "HEVC sample");
    let mut sets = Vec::new();
    while !r.rest().is_empty() {
        let len = r.take(usize::from(length_size))?.iter().fold(0usize, |acc, &b| acc << 8 | usize::from(b));
        // The first slice ends the search, read or not: parameter sets after it come too late
        // for this picture, and the head of a sample may end inside it.
        if nal_unit_type(r.rest()) <= 31 {
            break;
        }
        let nal = r.take(len)?;
        if matches!(nal_unit_type(nal), VPS | SPS | PPS) {
            sets.push(nal);
        }
    }
    Ok(sets)
}

/// The width and height in pixels of the pictures of HEVC sequence parameter set `sps` (the
/// NAL unit, its two header bytes first), after the conformance window (ITU-T H.265 §7.3.2.2),
/// when it reads.
pub fn picture_size(sps: &[u8]) -> Option<(u16, u16)> {
    use crate::protect::slice::{rbsp, Bits};
    // The reader skips one header byte; the second is the RBSP's first here.
    let (data, _) = rbsp(sps);
    let mut r = Bits { data: &data, at: 8 };
    r.bits(4)?; // sps_video_parameter_set_id
    let sub_layers = r.bits(3)?;
    r.bit()?; // sps_temporal_id_nesting_flag
    r.bits(8)?; // general profile space, tier and idc
    r.bits(32)?; // general compatibility flags
    r.bits(32)?; // general constraint flags (48 bits)
    r.bits(16)?;
    r.bits(8)?; // general_level_idc
    let mut present = Vec::new();
    for _ in 0..sub_layers {
        present.push((r.flag()?, r.flag()?));
    }
    if sub_layers > 0 {
        r.bits(2 * (8 - sub_layers))?;
    }
    for (profile, level) in present {
        if profile {
            r.bits(32)?;
            r.bits(32)?;
            r.bits(24)?;
        }
        if level {
            r.bits(8)?;
        }
    }
    r.ue()?; // sps_seq_parameter_set_id
    let chroma_format = r.ue()?;
    let separate_planes = chroma_format == 3 && r.flag()?;
    let (width, height) = (r.ue()?, r.ue()?);
    let (unit_x, unit_y) = match (chroma_format, separate_planes) {
        (1, _) => (2, 2),
        (2, _) => (2, 1),
        _ => (1, 1),
    };
    let [left, right, top, bottom] = match r.flag()? {
        true => [r.ue()?, r.ue()?, r.ue()?, r.ue()?],
        false => [0; 4],
    };
    let width = width.checked_sub(unit_x * left.checked_add(right)?)?;
    let height = height.checked_sub(unit_y * top.checked_add(bottom)?)?;
    Some((u16::try_from(width).ok()?, u16::try_from(height).ok()?))
}

impl HevcRecord {
    /// An `hvc1` sample entry carrying this record as its `hvcC`, for pictures of `width` x
    /// `height`: what a track whose parameter sets came another way (a live publisher's SDP)
    /// is packaged with.
    pub fn sample_entry(&self, width: u16, height: u16) -> Vec<u8> {
        use mp4_atom::{Encode, Hvc1, HvcCArray, Hvcc, Visual};
        let array = |nal_unit_type: u8, nalus: &[Vec<u8>]| HvcCArray {
            completeness: true,
            nal_unit_type,
            nalus: nalus.to_vec(),
        };
        let hvcc = Hvcc {
            configuration_version: 1,
            general_profile_space: self.profile_space,
            general_tier_flag: self.high_tier,
            general_profile_idc: self.profile_idc,
            general_profile_compatibility_flags: self.compatibility.to_be_bytes(),
            general_constraint_indicator_flags: self.constraints,
            general_level_idc: self.level_idc,
            chroma_format_idc: self.chroma_format,
            bit_depth_luma_minus8: self.bit_depth_luma.saturating_sub(8),
            bit_depth_chroma_minus8: self.bit_depth_chroma.saturating_sub(8),
            length_size_minus_one: self.nal_length_size.saturating_sub(1),
            num_temporal_layers: 1,
            temporal_id_nested: true,
            arrays: vec![array(VPS, &self.vps), array(SPS, &self.sps), array(PPS, &self.pps)],
            ..Hvcc::new()
        };
        let entry = Hvc1 {
            visual: Visual { data_reference_index: 1, width, height, depth: 0x18, ..Default::default() },
            hvcc,
            ..Default::default()
        };
        let mut out = Vec::new();
        // Encoding into a Vec fails only for fields out of range, which these are not.
        let _ = entry.encode(&mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `hvcC` as libx265 writes it for Main 10, level 5.1, progressive (constraint byte
    /// 0xB0), with one VPS, SPS and PPS.
    fn main10_record() -> Vec<u8> {
        let mut r =
            vec![1, 0x02, 0x20, 0, 0, 0, 0xB0, 0, 0, 0, 0, 0, 153, 0xF0, 0, 0xFC, 0xFD, 0xFA, 0xFA, 0, 0];
        r.push(0x0F); // constantFrameRate 0, one temporal layer, nested, 4-byte lengths
        r.push(3);
        for (t, nal) in [(VPS, vec![0x40, 1, 0xAA]), (SPS, vec![0x42, 1, 0xBB]), (PPS, vec![0x44, 1, 0xCC])] {
            r.push(0x80 | t);
            r.extend_from_slice(&1u16.to_be_bytes());
            r.extend_from_slice(&(nal.len() as u16).to_be_bytes());
            r.extend_from_slice(&nal);
        }
        r
    }

    #[test]
    fn main10_record_parses_and_names_itself() {
        let rec = HevcRecord::parse(&main10_record()).unwrap();
        assert_eq!((rec.profile_idc, rec.level_idc, rec.high_tier), (2, 153, false));
        assert_eq!((rec.bit_depth_luma, rec.nal_length_size), (10, 4));
        assert!(rec.has_parameter_sets());
        assert_eq!(rec.codec_string("hvc1"), "hvc1.2.4.L153.B0");
        assert!(rec.holds(&[0x42, 1, 0xBB]) && !rec.holds(&[0x42, 1, 0xBC]));
    }

    /// The best-known string: Main profile (compatible with Main and Main 10), level 3.1.
    #[test]
    fn main_profile_string() {
        let mut raw = main10_record();
        raw[1] = 0x01;
        raw[2..6].copy_from_slice(&0x6000_0000u32.to_be_bytes());
        raw[6] = 0x90;
        raw[12] = 93;
        let rec = HevcRecord::parse(&raw).unwrap();
        assert_eq!(rec.codec_string("hev1"), "hev1.1.6.L93.90");
        raw[6] = 0;
        raw[1] = 0x61; // profile space 1, high tier
        assert_eq!(HevcRecord::parse(&raw).unwrap().codec_string("hvc1"), "hvc1.A1.6.H93");
    }

    #[test]
    fn malformed_records_are_refused() {
        let raw = main10_record();
        for cut in 0..raw.len() {
            assert!(HevcRecord::parse(&raw[..cut]).is_err(), "cut at {cut}");
        }
        let mut v0 = raw.clone();
        v0[0] = 0;
        assert_eq!(HevcRecord::parse(&v0), Err(ConfigError::Version { record: "hvcC", version: 0 }));
        let mut wrong_type = raw;
        wrong_type[23] = 0x80 | SPS; // the VPS array now says SPS
        assert!(matches!(HevcRecord::parse(&wrong_type), Err(ConfigError::Invalid { .. })));
    }

    #[test]
    fn leading_parameter_sets_stop_at_the_first_slice() {
        let mut sample = Vec::new();
        for nal in [&[0x40u8, 1, 0xAA][..], &[0x4E, 1, 5], &[0x26, 1, 0xAF, 0x00], &[0x44, 1, 0xCC]] {
            sample.extend_from_slice(&(nal.len() as u32).to_be_bytes());
            sample.extend_from_slice(nal);
        }
        let sets = leading_parameter_sets(&sample, 4).unwrap();
        assert_eq!(sets, vec![&[0x40u8, 1, 0xAA][..]], "the PPS after the IDR slice is not leading");
        assert!(leading_parameter_sets(&sample[..5], 4).is_err());
        let slice_at = 7 + 7;
        assert_eq!(leading_parameter_sets(&sample[..slice_at + 5], 4).unwrap().len(), 1, "cut in the slice");
    }
}
