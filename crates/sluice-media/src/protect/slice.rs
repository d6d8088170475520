//! Where an H.264 slice header ends, so that it stays clear under Common Encryption.
//!
//! Owns the little of ISO/IEC 14496-10 this needs: the fields of the SPS and PPS a slice header's
//! length depends on (§7.3.2.1, §7.3.2.2), and the slice header itself (§7.3.3, with the
//! reference list modifications, the weighted prediction table and the reference marking),
//! read from the RBSP (emulation prevention bytes removed, their places kept to count raw
//! bytes). Anything it does not read (slice groups, MVC and SVC NAL units, a header past the
//! bytes looked at) gives `None`, and the caller keeps its default lead clear. It does not decide
//! the subsample map ([`super::subsample`]).

/// Raw bytes of a NAL unit looked at: slice headers are far shorter.
const LOOKED_AT: usize = 512;
/// Entries read at most in a header's loops (reference list modifications, marking operations).
const MAX_LOOP: usize = 64;

/// The SPS fields a slice header depends on.
#[derive(Debug, Clone, Copy)]
struct Sps {
    id: u32,
    separate_colour_plane: bool,
    chroma_array_type: u32,
    log2_max_frame_num: u32,
    poc_type: u32,
    log2_max_poc_lsb: u32,
    delta_pic_order_always_zero: bool,
    frame_mbs_only: bool,
    /// The picture's width and height in pixels, after the frame cropping.
    size: (u16, u16),
}

/// The PPS fields a slice header depends on.
#[derive(Debug, Clone, Copy)]
struct Pps {
    id: u32,
    sps_id: u32,
    cabac: bool,
    bottom_field_pic_order_present: bool,
    num_ref_idx_default: [u32; 2],
    weighted_pred: bool,
    weighted_bipred_idc: u32,
    deblocking_filter_control_present: bool,
    redundant_pic_cnt_present: bool,
}

/// A track's parameter sets, read once, for finding its slice headers' ends.
#[derive(Debug, Clone, Default)]
pub struct SliceHeaders {
    sps: Vec<Sps>,
    pps: Vec<Pps>,
}

/// A bit reader over an RBSP (also reads HEVC's parameter sets, `crate::codec::hevc`).
pub(crate) struct Bits<'a> {
    pub(crate) data: &'a [u8],
    pub(crate) at: usize,
}

impl Bits<'_> {
    pub(crate) fn bit(&mut self) -> Option<u32> {
        let byte = *self.data.get(self.at / 8)?;
        let bit = (byte >> (7 - self.at % 8)) & 1;
        self.at += 1;
        Some(u32::from(bit))
    }

    pub(crate) fn bits(&mut self, n: u32) -> Option<u32> {
        (0..n).try_fold(0u32, |v, _| Some((v << 1) | self.bit()?))
    }

    pub(crate) fn flag(&mut self) -> Option<bool> {
        Some(self.bit()? == 1)
    }

    pub(crate) fn ue(&mut self) -> Option<u32> {
        let mut zeros = 0;
        while self.bit()? == 0 {
            zeros += 1;
            if zeros > 31 {
                return None;
            }
        }
        Some(((1u64 << zeros) - 1 + u64::from(self.bits(zeros)?)).min(u64::from(u32::MAX)) as u32)
    }

    fn se(&mut self) -> Option<()> {
        self.ue().map(|_| ())
    }
}

/// The RBSP of `nal` (after its header byte, at most [`LOOKED_AT`] raw bytes), and the raw index
/// of each RBSP byte.
pub(crate) fn rbsp(nal: &[u8]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::with_capacity(nal.len().min(LOOKED_AT));
    let mut raw = Vec::with_capacity(out.capacity());
    let mut zeros = 0;
    for (i, &b) in nal.iter().enumerate().take(LOOKED_AT).skip(1) {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        out.push(b);
        raw.push(i);
    }
    (out, raw)
}

fn parse_sps(nal: &[u8]) -> Option<Sps> {
    let (data, _) = rbsp(nal);
    let mut r = Bits { data: &data, at: 0 };
    let profile = r.bits(8)?;
    r.bits(16)?;
    let id = r.ue()?;
    let (mut chroma_format_idc, mut separate_colour_plane) = (1, false);
    if matches!(profile, 100 | 110 | 122 | 244 | 44 | 83 | 86 | 118 | 128 | 138 | 139 | 134 | 135) {
        chroma_format_idc = r.ue()?;
        if chroma_format_idc == 3 {
            separate_colour_plane = r.flag()?;
        }
        r.ue()?;
        r.ue()?;
        r.flag()?;
        if r.flag()? {
            for i in 0..if chroma_format_idc == 3 { 12 } else { 8 } {
                if r.flag()? {
                    let size = if i < 6 { 16 } else { 64 };
                    let (mut last, mut next) = (8i32, 8i32);
                    for _ in 0..size {
                        if next != 0 {
                            let code = r.ue()?;
                            let delta =
                                if code % 2 == 1 { (code / 2 + 1) as i32 } else { -((code / 2) as i32) };
                            next = (last + delta + 256).rem_euclid(256);
                        }
                        last = if next == 0 { last } else { next };
                    }
                }
            }
        }
    }
    let log2_max_frame_num = r.ue()?.checked_add(4).filter(|n| *n <= 16)?;
    let poc_type = r.ue()?;
    let (mut log2_max_poc_lsb, mut delta_pic_order_always_zero) = (0, false);
    match poc_type {
        0 => log2_max_poc_lsb = r.ue()?.checked_add(4).filter(|n| *n <= 16)?,
        1 => {
            delta_pic_order_always_zero = r.flag()?;
            r.se()?;
            r.se()?;
            for _ in 0..r.ue()?.min(256) {
                r.se()?;
            }
        }
        _ => {}
    }
    r.ue()?;
    r.flag()?;
    let width_in_macroblocks = r.ue()?.checked_add(1)?;
    let height_in_map_units = r.ue()?.checked_add(1)?;
    let frame_mbs_only = r.flag()?;
    let chroma_array_type = if separate_colour_plane { 0 } else { chroma_format_idc };
    // §7.4.2.1.1: frame cropping is in chroma samples (luma samples without chroma), and in
    // field pairs' rows when the picture may be coded as fields.
    let frame_height = height_in_map_units * if frame_mbs_only { 1 } else { 2 };
    let crop = if frame_mbs_only {
        r.flag()?;
        r.flag()?.then(|| Some([r.ue()?, r.ue()?, r.ue()?, r.ue()?])).flatten()
    } else {
        r.flag()?;
        r.flag()?;
        r.flag()?.then(|| Some([r.ue()?, r.ue()?, r.ue()?, r.ue()?])).flatten()
    };
    let (unit_x, unit_y) = match chroma_array_type {
        1 => (2, 2),
        2 => (2, 1),
        _ => (1, 1),
    };
    let unit_y = unit_y * if frame_mbs_only { 1 } else { 2 };
    let [left, right, top, bottom] = crop.unwrap_or([0; 4]);
    let width = (width_in_macroblocks * 16).checked_sub(unit_x * left.checked_add(right)?)?;
    let height = (frame_height * 16).checked_sub(unit_y * top.checked_add(bottom)?)?;
    let size = (u16::try_from(width).ok()?, u16::try_from(height).ok()?);
    Some(Sps {
        id,
        separate_colour_plane,
        chroma_array_type,
        log2_max_frame_num,
        poc_type,
        log2_max_poc_lsb,
        delta_pic_order_always_zero,
        frame_mbs_only,
        size,
    })
}

/// The width and height in pixels of the pictures of H.264 sequence parameter set `sps` (the
/// NAL unit, header byte first), when it reads.
pub fn picture_size(sps: &[u8]) -> Option<(u16, u16)> {
    parse_sps(sps).map(|s| s.size)
}

fn parse_pps(nal: &[u8]) -> Option<Pps> {
    let (data, _) = rbsp(nal);
    let mut r = Bits { data: &data, at: 0 };
    let id = r.ue()?;
    let sps_id = r.ue()?;
    let cabac = r.flag()?;
    let bottom_field_pic_order_present = r.flag()?;
    if r.ue()? != 0 {
        return None; // slice groups
    }
    let num_ref_idx_default = [r.ue()?.checked_add(1)?, r.ue()?.checked_add(1)?];
    let weighted_pred = r.flag()?;
    let weighted_bipred_idc = r.bits(2)?;
    r.se()?;
    r.se()?;
    r.se()?;
    let deblocking_filter_control_present = r.flag()?;
    r.flag()?;
    let redundant_pic_cnt_present = r.flag()?;
    Some(Pps {
        id,
        sps_id,
        cabac,
        bottom_field_pic_order_present,
        num_ref_idx_default,
        weighted_pred,
        weighted_bipred_idc,
        deblocking_filter_control_present,
        redundant_pic_cnt_present,
    })
}

impl SliceHeaders {
    /// Reads a track's SPSs and PPSs (NAL units with their header byte, as `avcC` holds them);
    /// those that do not read are left out.
    pub fn new(sps: &[Vec<u8>], pps: &[Vec<u8>]) -> SliceHeaders {
        SliceHeaders {
            sps: sps.iter().filter_map(|n| parse_sps(n)).collect(),
            pps: pps.iter().filter_map(|n| parse_pps(n)).collect(),
        }
    }

    /// Raw bytes of the slice NAL unit `nal` (from its header byte) up to and including the last
    /// byte holding its slice header; `None` when it cannot tell.
    pub fn header_len(&self, nal: &[u8]) -> Option<usize> {
        let header = *nal.first()?;
        let (nal_ref_idc, kind) = (header >> 5 & 3, header & 0x1f);
        if !(1..=5).contains(&kind) {
            return None;
        }
        let (data, raw) = rbsp(nal);
        let mut r = Bits { data: &data, at: 0 };
        r.ue()?;
        let slice_type = r.ue()? % 5;
        let (p, b, i, sp, si) =
            (slice_type == 0, slice_type == 1, slice_type == 2, slice_type == 3, slice_type == 4);
        let pps_id = r.ue()?;
        let pps = self.pps.iter().rev().find(|p| p.id == pps_id)?;
        let sps = self.sps.iter().rev().find(|s| s.id == pps.sps_id)?;
        if sps.separate_colour_plane {
            r.bits(2)?;
        }
        r.bits(sps.log2_max_frame_num)?;
        let mut field_pic = false;
        if !sps.frame_mbs_only {
            field_pic = r.flag()?;
            if field_pic {
                r.flag()?;
            }
        }
        if kind == 5 {
            r.ue()?;
        }
        if sps.poc_type == 0 {
            r.bits(sps.log2_max_poc_lsb)?;
            if pps.bottom_field_pic_order_present && !field_pic {
                r.se()?;
            }
        }
        if sps.poc_type == 1 && !sps.delta_pic_order_always_zero {
            r.se()?;
            if pps.bottom_field_pic_order_present && !field_pic {
                r.se()?;
            }
        }
        if pps.redundant_pic_cnt_present {
            r.ue()?;
        }
        if b {
            r.flag()?;
        }
        let mut refs = pps.num_ref_idx_default;
        if (p || sp || b) && r.flag()? {
            refs[0] = r.ue()?.checked_add(1)?;
            if b {
                refs[1] = r.ue()?.checked_add(1)?;
            }
        }
        let lists = if b { 2 } else { 1 };
        if !(i || si) {
            for _ in 0..lists {
                if r.flag()? {
                    let mut entries = 0;
                    while r.ue()? != 3 {
                        r.ue()?;
                        entries += 1;
                        if entries > MAX_LOOP {
                            return None;
                        }
                    }
                }
            }
        }
        if (pps.weighted_pred && (p || sp)) || (pps.weighted_bipred_idc == 1 && b) {
            r.ue()?;
            if sps.chroma_array_type != 0 {
                r.ue()?;
            }
            for count in &refs[..lists] {
                for _ in 0..(*count).min(32) {
                    if r.flag()? {
                        r.se()?;
                        r.se()?;
                    }
                    if sps.chroma_array_type != 0 && r.flag()? {
                        for _ in 0..4 {
                            r.se()?;
                        }
                    }
                }
            }
        }
        if nal_ref_idc != 0 {
            if kind == 5 {
                r.flag()?;
                r.flag()?;
            } else if r.flag()? {
                let mut entries = 0;
                loop {
                    let op = r.ue()?;
                    if op == 0 {
                        break;
                    }
                    if matches!(op, 1 | 3) {
                        r.ue()?;
                    }
                    if op == 2 {
                        r.ue()?;
                    }
                    if matches!(op, 3 | 6) {
                        r.ue()?;
                    }
                    if op == 4 {
                        r.ue()?;
                    }
                    entries += 1;
                    if entries > MAX_LOOP {
                        return None;
                    }
                }
            }
        }
        if pps.cabac && !(i || si) {
            r.ue()?;
        }
        r.se()?;
        if sp || si {
            if sp {
                r.flag()?;
            }
            r.se()?;
        }
        if pps.deblocking_filter_control_present && r.ue()? != 1 {
            r.se()?;
            r.se()?;
        }
        // The byte holding the header's last bit, as a raw index; one more for the count.
        let last = r.at.checked_sub(1)? / 8;
        raw.get(last).map(|&at| at + 1)
    }
}
