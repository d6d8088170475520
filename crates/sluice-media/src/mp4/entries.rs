//! The raw first sample entry of each track of a `moov` box, by track id: what the codecs
//! `mp4parse` does not read (HEVC, AC-3, E-AC-3), and those it reads without keeping the
//! boxes a packager carries (AV1, VP9, Opus), are parsed from by [`crate::codec`]. And whether
//! an `hev1` track's first keyframe carries parameter sets of its own. It runs after
//! [`super::check_table_sizes`] accepted the boxes, so a malformed one only ends the walk.

use std::io::{Read, Seek, SeekFrom};

use super::{child_box, Track, TrackKind};
use crate::codec::{hevc, InBandParameterSets, VideoCodec};

/// Most bytes of an `hev1` keyframe read to find its leading parameter sets: they come first,
/// and a VPS, SPS and PPS together are a few hundred bytes.
const PARAMETER_SET_SCAN: u64 = 64 << 10;

/// The children of the box at the start of `data` (its body), by type.
pub(super) fn children(data: &[u8]) -> impl Iterator<Item = ([u8; 4], &[u8])> {
    let mut rest = data;
    std::iter::from_fn(move || {
        if rest.len() < 8 {
            return None;
        }
        let (kind, header, size) = child_box(rest).ok()?;
        let body = &rest[header..size];
        rest = &rest[size..];
        Some((kind, body))
    })
}

pub(super) fn child<'a>(data: &'a [u8], kind: &[u8; 4]) -> Option<&'a [u8]> {
    children(data).find(|(k, _)| k == kind).map(|(_, body)| body)
}

/// `(track id, first sample entry box)` for each `trak` of `moov` (the whole box, header
/// included) that has both.
pub(super) fn first_sample_entries(moov: &[u8]) -> Vec<(u32, Vec<u8>)> {
    let Some((_, moov)) = children(moov).find(|(k, _)| k == b"moov") else { return Vec::new() };
    let mut out = Vec::new();
    for (_, trak) in children(moov).filter(|(k, _)| k == b"trak") {
        let Some(tkhd) = child(trak, b"tkhd") else { continue };
        // Full box: version 1 has 64-bit creation and modification times before the id.
        let at = if tkhd.first() == Some(&1) { 20 } else { 12 };
        let Some(id) = tkhd.get(at..at + 4) else { continue };
        let id = u32::from_be_bytes(id.try_into().expect("4 bytes"));
        let stsd = child(trak, b"mdia")
            .and_then(|m| child(m, b"minf"))
            .and_then(|m| child(m, b"stbl"))
            .and_then(|s| child(s, b"stsd"));
        let Some(entries) = stsd.and_then(|s| s.get(8..)) else { continue };
        if entries.len() < 8 {
            continue;
        }
        if let Ok((_, _, size)) = child_box(entries) {
            out.push((id, entries[..size].to_vec()));
        }
    }
    out
}

/// Looks at the first keyframe of each `hev1` track for parameter sets the `hvcC` does not hold
/// (one read of at most [`PARAMETER_SET_SCAN`] bytes per such track).
pub(super) fn check_in_band_parameter_sets<R: Read + Seek>(src: &mut R, tracks: &mut [Track]) {
    for track in tracks {
        let first_sync = track.samples.iter().find(|s| s.is_sync()).copied();
        let TrackKind::Video(video) = &mut track.kind else { continue };
        let VideoCodec::Hevc(record) = &video.codec else { continue };
        if &video.fourcc() != b"hev1" {
            continue;
        }
        let Some(sample) = first_sync else { continue };
        let len = u64::from(sample.size()).min(PARAMETER_SET_SCAN) as usize;
        let mut head = vec![0u8; len];
        let read = src.seek(SeekFrom::Start(sample.offset())).and_then(|_| src.read_exact(&mut head));
        if read.is_err() {
            continue;
        }
        video.in_band = match hevc::leading_parameter_sets(&head, record.nal_length_size) {
            Ok(sets) if sets.is_empty() => InBandParameterSets::None,
            Ok(sets) if sets.iter().all(|s| record.holds(s)) => InBandParameterSets::SameAsRecord,
            Ok(_) => InBandParameterSets::Different,
            // A keyframe whose parameter sets run past the scan, or a damaged one: keep hev1.
            Err(_) => InBandParameterSets::Unknown,
        };
    }
}
