//! Sample entries carried into an init segment byte for byte: the HEVC, AV1, VP9, Opus, AC-3 and
//! E-AC-3 entries of the source file (configuration record, colour, HDR and aspect boxes), with
//! an `hev1` entry renamed `hvc1` where [`crate::codec::VideoEntry::carried_fourcc`] allows.
//!
//! This module owns putting such an entry into the `stsd` of an init segment `mp4-atom` wrote
//! with an empty one (the crate models these entries but drops the boxes it does not know, such
//! as `mdcv` and `clli`, and cannot write an entry it holds as bytes): the entry goes at the end
//! of the `stsd`, its count becomes 1 and every box on the way grows by the entry's size. It does
//! not decide what goes in the init segment ([`super::fmp4`] does).

use super::HlsError;

/// The path from `moov` to a track's `stsd`, below the `trak`.
const STSD_PATH: [&[u8; 4]; 4] = [b"mdia", b"minf", b"stbl", b"stsd"];

/// Puts `entries[i]` (when `Some`) into the `stsd` of the `i`th `trak` of the init segment `out`.
pub(super) fn splice_sample_entries(out: &mut Vec<u8>, entries: &[Option<Vec<u8>>]) -> Result<(), HlsError> {
    // Last track first, so the boxes of the tracks before it stay where they were found.
    for (i, entry) in entries.iter().enumerate().rev() {
        let Some(entry) = entry else { continue };
        let path = stsd_path(out, i).ok_or(HlsError::Unrepresentable {
            segment: 0,
            what: "an init segment track without a sample description box",
        })?;
        let grow = u32::try_from(entry.len()).ok();
        for &start in &path {
            let size = u32::from_be_bytes(out[start..start + 4].try_into().expect("4 bytes"));
            let grown = grow
                .and_then(|g| size.checked_add(g))
                .ok_or(HlsError::Unrepresentable { segment: 0, what: "a sample entry of 4 GiB" })?;
            out[start..start + 4].copy_from_slice(&grown.to_be_bytes());
        }
        let stsd = *path.last().expect("a path");
        // Full box header, then the entry count.
        out[stsd + 12..stsd + 16].copy_from_slice(&1u32.to_be_bytes());
        let end = stsd + u32::from_be_bytes(out[stsd..stsd + 4].try_into().expect("4 bytes")) as usize
            - entry.len();
        out.splice(end..end, entry.iter().copied());
    }
    Ok(())
}

/// The start of each box from `moov` to the `stsd` of the `n`th `trak`, in `data` (an init
/// segment: `ftyp`, `moov`), or `None` when a box is missing or uses a 64-bit size.
fn stsd_path(data: &[u8], n: usize) -> Option<Vec<usize>> {
    let moov = find(data, 0, data.len(), b"moov", 0)?;
    let mut path = vec![moov];
    let trak = find(data, moov + 8, end(data, moov)?, b"trak", n)?;
    path.push(trak);
    let mut at = trak;
    for kind in STSD_PATH {
        at = find(data, at + 8, end(data, at)?, kind, 0)?;
        path.push(at);
    }
    Some(path)
}

fn end(data: &[u8], start: usize) -> Option<usize> {
    let size = u32::from_be_bytes(data.get(start..start + 4)?.try_into().ok()?) as usize;
    (size >= 8 && start + size <= data.len()).then_some(start + size)
}

/// The start of the `nth` box of type `kind` among the boxes in `data[from..to]`.
fn find(data: &[u8], from: usize, to: usize, kind: &[u8; 4], nth: usize) -> Option<usize> {
    let mut at = from;
    let mut seen = 0;
    while at + 8 <= to {
        let next = end(data, at)?;
        if &data[at + 4..at + 8] == kind {
            if seen == nth {
                return Some(at);
            }
            seen += 1;
        }
        at = next;
    }
    None
}
