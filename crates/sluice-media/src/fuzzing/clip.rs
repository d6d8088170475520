//! The property the `mp4_clip` fuzz target checks: a clip of arbitrary bytes, when the bytes
//! index as an MP4, is itself an MP4 that indexes, holding exactly the samples the clip says it
//! keeps, with the file's bytes, sizes, sync flags, durations and composition offsets
//! ([`check_clip`], which the unit and integration tests share).

use crate::mp4::clip::{clip, Clip, Interval};
use crate::mp4::Mp4File;

/// Clips arbitrary bytes: the first eight bytes give the interval (start and end in tenths of
/// a second; an end of 0 is the file's end), the rest is the file. Never panics; a clip that
/// is made passes [`check_clip`].
pub fn mp4_clip(data: &[u8]) {
    let Some((head, file_bytes)) = data.split_first_chunk::<8>() else { return };
    let start_ms = u64::from(u32::from_be_bytes([head[0], head[1], head[2], head[3]])) * 100;
    let end = u64::from(u32::from_be_bytes([head[4], head[5], head[6], head[7]])) * 100;
    let Ok(file) = Mp4File::from_bytes(file_bytes) else { return };
    let interval = Interval { start_ms, end_ms: (end > start_ms).then_some(end) };
    if let Ok(clip) = clip(&file, interval) {
        check_clip(&file, file_bytes, &clip);
    }
}

/// The clip's bytes as a client receives them.
pub fn assemble(clip: &Clip, data: &[u8]) -> Vec<u8> {
    let mut out = clip.plan.header.clone();
    for r in &clip.plan.ranges {
        out.extend_from_slice(&data[r.start as usize..r.end as usize]);
    }
    out
}

/// Checks `clip` of `file` (whose bytes are `data`): it indexes as an MP4 with the tracks the
/// clip keeps, in order, each with exactly the kept samples (the file's bytes, sizes, sync
/// flags, composition offsets and decode times from 0), its edit starting presentation where
/// the clip says, and a video track starting on a keyframe. Panics, saying what differs.
pub fn check_clip(file: &Mp4File, data: &[u8], clip: &Clip) {
    let bytes = assemble(clip, data);
    assert_eq!(bytes.len() as u64, clip.plan.len());
    let parsed = Mp4File::from_bytes(&bytes).expect("the clip indexes as an MP4");
    assert_eq!(parsed.tracks.len(), clip.tracks.len(), "the clip's tracks");
    for (got, kept) in parsed.tracks.iter().zip(&clip.tracks) {
        let track = &file.tracks[kept.track];
        assert_eq!(got.kind, track.kind);
        assert_eq!(got.timescale, track.timescale);
        assert_eq!(got.edit_start, kept.media_time, "track {}: the edit's media time", kept.track);
        let samples = &track.samples[kept.samples.clone()];
        assert_eq!(got.samples.len(), samples.len(), "track {}: the samples kept", kept.track);
        let first = samples[0].decode_time();
        if matches!(track.kind, crate::mp4::TrackKind::H264(_)) {
            assert!(samples[0].is_sync(), "the video starts on a keyframe");
        }
        for (n, (g, s)) in got.samples.iter().zip(samples).enumerate() {
            assert_eq!(g.size(), s.size(), "track {} sample {n}: size", kept.track);
            assert_eq!(g.is_sync(), s.is_sync(), "track {} sample {n}: sync", kept.track);
            assert_eq!(g.composition_offset(), s.composition_offset(), "track {} sample {n}", kept.track);
            assert_eq!(
                g.decode_time(),
                s.decode_time() - first,
                "track {} sample {n}: decode time",
                kept.track
            );
            let (a, b) = (g.range(), s.range());
            assert!(
                bytes[a.start as usize..a.end as usize] == data[b.start as usize..b.end as usize],
                "track {} sample {n} differs from the file's bytes",
                kept.track
            );
        }
    }
}
