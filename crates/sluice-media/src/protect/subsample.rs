//! The subsample map of an H.264 sample: which bytes stay clear and which are encrypted.
//!
//! Owns the rule, the same for `cenc` and `cbcs`: every NAL unit's length field stays clear; a
//! non-VCL NAL unit (SPS, PPS, SEI, AUD, filler) stays clear whole; a slice (NAL types 1 to 5)
//! keeps its NAL header and slice header clear, and at least its first [`CLEAR_LEAD`] bytes
//! (Apple's SAMPLE-AES rule; the slice header's end is read by [`super::slice`] when the track's
//! parameter sets are given), and has the rest encrypted in whole
//! 16-byte blocks placed at its end, the few bytes of a partial block staying clear after the
//! lead (ISO/IEC 23001-7 §10.2 recommends block-aligned protected ranges for AVC in `cenc`, and in
//! `cbcs` a partial block is never encrypted anyway). Bytes that do not parse as NAL units (a
//! length running past the sample) stay clear. It does not encrypt (see [`super::cipher`]).

use super::slice::SliceHeaders;

/// Bytes of a slice NAL unit (from its header) left clear at least.
pub const CLEAR_LEAD: usize = 32;

/// One subsample: clear bytes, then protected bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Subsample {
    /// `BytesOfClearData` (16 bits in `senc`).
    pub clear: u16,
    /// `BytesOfProtectedData`, a multiple of 16.
    pub protected: u32,
}

/// The subsample map of `sample`, whose NAL units are prefixed with `length_size`-byte lengths
/// (1, 2 or 4), with `slices` finding where slice headers end. The map covers the sample
/// exactly; runs of clear bytes longer than 65,535 are split.
pub fn subsamples(sample: &[u8], length_size: u8, slices: Option<&SliceHeaders>) -> Vec<Subsample> {
    let length_size = usize::from(length_size.clamp(1, 4));
    let mut map = Vec::new();
    let mut clear = 0usize;
    let mut pos = 0usize;
    while pos < sample.len() {
        let Some(length) = sample.get(pos..pos + length_size) else { break };
        let nal_len = length.iter().fold(0usize, |n, b| (n << 8) | usize::from(*b));
        let Some(nal_end) = (pos + length_size).checked_add(nal_len).filter(|&end| end <= sample.len())
        else {
            break;
        };
        let nal = &sample[pos + length_size..nal_end];
        let is_slice = nal_len > 0 && (1..=5).contains(&(nal[0] & 0x1f));
        let lead = CLEAR_LEAD.max(slices.and_then(|s| s.header_len(nal)).unwrap_or(0));
        let protected = if is_slice { nal_len.saturating_sub(lead) / 16 * 16 } else { 0 };
        clear += nal_end - pos - protected;
        if protected > 0 {
            push(&mut map, clear, protected);
            clear = 0;
        }
        pos = nal_end;
    }
    clear += sample.len() - pos;
    if clear > 0 {
        push(&mut map, clear, 0);
    }
    map
}

/// Appends `clear` clear bytes then `protected` protected ones, splitting the clear run into
/// 16-bit pieces.
fn push(map: &mut Vec<Subsample>, mut clear: usize, protected: usize) {
    while clear > usize::from(u16::MAX) {
        map.push(Subsample { clear: u16::MAX, protected: 0 });
        clear -= usize::from(u16::MAX);
    }
    // A protected run is bounded by a NAL unit's 32-bit length.
    map.push(Subsample { clear: clear as u16, protected: protected as u32 });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nal(kind: u8, len: usize) -> Vec<u8> {
        let mut out = (len as u32).to_be_bytes().to_vec();
        out.push(kind);
        out.extend(std::iter::repeat_n(0xab, len - 1));
        out
    }

    fn total(map: &[Subsample]) -> usize {
        map.iter().map(|s| usize::from(s.clear) + s.protected as usize).sum()
    }

    #[test]
    fn a_slice_keeps_its_header_clear_and_is_encrypted_in_whole_blocks_at_its_end() {
        let sample = nal(0x65, 1000);
        let map = subsamples(&sample, 4, None);
        // 1000 - 32 = 968 = 60 blocks + 8 bytes: 4 + 32 + 8 clear, 960 protected.
        assert_eq!(map, vec![Subsample { clear: 44, protected: 960 }]);
    }

    #[test]
    fn parameter_sets_and_sei_stay_clear_with_the_next_slice() {
        let mut sample = nal(0x67, 20);
        sample.extend(nal(0x68, 5));
        sample.extend(nal(0x06, 40));
        sample.extend(nal(0x41, 64));
        let map = subsamples(&sample, 4, None);
        assert_eq!(map, vec![Subsample { clear: (24 + 9 + 44 + 4 + 32) as u16, protected: 32 }]);
        assert_eq!(total(&map), sample.len());
    }

    #[test]
    fn a_short_slice_stays_clear_and_a_broken_length_leaves_the_rest_clear() {
        let mut sample = nal(0x65, 40);
        sample.extend([0, 0, 0xff, 0xff, 0x65, 1, 2, 3]);
        let map = subsamples(&sample, 4, None);
        assert_eq!(map, vec![Subsample { clear: sample.len() as u16, protected: 0 }]);
    }

    #[test]
    fn long_clear_runs_are_split_into_16_bit_pieces() {
        let mut sample = nal(0x06, 70_000);
        sample.extend(nal(0x65, 48 + 32));
        let map = subsamples(&sample, 4, None);
        assert_eq!(map[0], Subsample { clear: u16::MAX, protected: 0 });
        assert_eq!(map[1].protected, 48);
        assert_eq!(total(&map), sample.len());
    }
}
