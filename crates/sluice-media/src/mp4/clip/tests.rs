//! The clip writer's tests, on the built-in demo (6 s, keyframes at 0, 2 and 4 s, B-frames,
//! AAC with its priming frame) and a synthetic file large enough to need 64-bit offsets.

use super::*;
use crate::fuzzing::{assemble, check_clip};
use crate::mp4::tests::demo;
use crate::mp4::{AacConfig, H264Config, Sample, TrackKind};

fn interval(start_ms: u64, end_ms: Option<u64>) -> Interval {
    Interval { start_ms, end_ms }
}

#[test]
fn arguments_read_as_nginx_reads_them() {
    assert_eq!(Interval::from_query("start=12.5&end=30").unwrap(), Some(interval(12_500, Some(30_000))));
    assert_eq!(Interval::from_query("end=.25").unwrap(), Some(interval(0, Some(250))));
    assert_eq!(Interval::from_query("start=1.23456").unwrap(), Some(interval(1234, None)));
    assert_eq!(Interval::from_query("sig=abc&expires=9").unwrap(), None);
    assert_eq!(Interval::from_query("").unwrap(), None);
    for bad in ["start=", "start=-1", "start=1e3", "start=abc", "start=1.2.3", "end=99999999999999"] {
        assert!(matches!(Interval::from_query(bad), Err(ClipError::BadTime { .. })), "{bad}");
    }
    assert!(matches!(Interval::from_query("start=5&end=5"), Err(ClipError::EmptyInterval { .. })));
    assert!(matches!(Interval::from_query("start=5&end=2"), Err(ClipError::EmptyInterval { .. })));
    assert_eq!(Interval::from_name("2-4.5").unwrap(), interval(2000, Some(4500)));
    assert_eq!(Interval::from_name("2-").unwrap(), interval(2000, None));
    assert_eq!(Interval::from_name("-3").unwrap(), interval(0, Some(3000)));
    assert!(Interval::from_name("3").is_err() && Interval::from_name("a-b").is_err());
    assert_eq!(interval(2000, Some(4500)).tag(), "2000-4500");
    assert_eq!(interval(0, None).tag(), "0-");
}

/// The clip starts at the keyframe at or before `start`: 3.5 s starts at the keyframe of 2 s,
/// 4 s at its own; the audio starts with it (one frame of pre-roll before), and `end` cuts.
#[test]
fn clips_start_at_the_keyframe_at_or_before_start() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    for (start, end, keyframe, frames) in [
        (3500, None, 60, 120),
        (4000, None, 120, 60),
        (0, Some(1000), 0, 30),
        (2100, Some(3000), 60, 30),
        // nginx's end: 4.001 s after the frame decoding at 1.999 s (which starts at 1.967 s)
        // is before the last frame finishes.
        (1999, Some(6000), 0, 179),
        (1999, Some(6100), 0, 180),
    ] {
        let c = clip(&file, interval(start, end)).unwrap();
        check_clip(&file, &data, &c);
        let video = &c.tracks[0];
        assert_eq!(video.samples.start, keyframe, "{start}-{end:?}");
        assert_eq!(video.samples.len(), frames, "{start}-{end:?}");
        assert!((c.start_secs - keyframe as f64 / 30.0).abs() < 0.001, "{}", c.start_secs);
        // The video's edit hides the B-frame delay, as the file's does.
        assert_eq!(
            video.media_time,
            u64::try_from(file.tracks[0].samples[keyframe].composition_offset()).unwrap()
        );
        let audio = &c.tracks[1];
        let a = &file.tracks[1];
        // The audio's presentation starts at the keyframe's time, on its first frame after
        // the pre-roll frame.
        let first_decode = a.samples[audio.samples.start].decode_time();
        let start_media = first_decode + audio.media_time - a.edit_start;
        assert!((start_media as f64 / 48_000.0 - c.start_secs).abs() < 0.001, "{start}");
        assert!((1024..2048).contains(&audio.media_time), "pre-roll of one frame: {}", audio.media_time);
        let expected = end.map_or(6.0, |e| e as f64 / 1000.0).min(6.0) - c.start_secs;
        // The video to the frame; the audio, cut where nginx cuts it (by decode time, so less
        // its priming delay) within its priming frame and a frame either side.
        for (t, tolerance) in c.tracks.iter().zip([0.034, 3.0 * 1024.0 / 48_000.0]) {
            let secs = t.duration as f64 / f64::from(file.tracks[t.track].timescale);
            assert!((secs - expected).abs() < tolerance, "{start}-{end:?}: track {} lasts {secs}", t.track);
        }
    }
}

/// A clip from 0 to the end keeps every sample and the file's own edits.
#[test]
fn the_whole_interval_is_the_whole_file() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    let c = clip(&file, interval(0, None)).unwrap();
    check_clip(&file, &data, &c);
    for (t, track) in c.tracks.iter().zip(&file.tracks) {
        assert_eq!(t.samples, 0..track.samples.len());
        assert_eq!(t.media_time, track.edit_start);
    }
    let whole = Mp4File::from_bytes(&assemble(&c, &data)).unwrap();
    assert!((whole.duration_secs() - file.duration_secs()).abs() < 0.002, "{}", whole.duration_secs());
    // The demo is interleaved without gaps: the mdat is one range of the file.
    assert_eq!(c.plan.ranges.len(), 1, "{:?}", c.plan.ranges);
}

#[test]
fn starts_past_the_end_are_refused() {
    let file = Mp4File::from_bytes(&demo()).unwrap();
    assert!(matches!(clip(&file, interval(6000, None)), Err(ClipError::StartPastEnd { .. })));
    assert!(matches!(clip(&file, interval(60_000, Some(70_000))), Err(ClipError::StartPastEnd { .. })));
    let empty = Mp4File { tracks: vec![], skipped: vec![], file_len: 0, fragmented: false };
    assert!(matches!(clip(&empty, interval(0, None)), Err(ClipError::NothingToClip)));
}

/// Audio alone starts where asked (every AAC frame is a sync sample), less the pre-roll, and
/// lasts to `end` within the priming frame and a frame either side (the cut is by decode
/// time, as nginx's).
#[test]
fn audio_alone_starts_where_asked() {
    let data = demo();
    let mut file = Mp4File::from_bytes(&data).unwrap();
    file.tracks.remove(0);
    let c = clip(&file, interval(2500, Some(3500))).unwrap();
    check_clip(&file, &data, &c);
    assert!((c.start_secs - 2.5).abs() < 1e-9);
    let t = &c.tracks[0];
    assert!((t.duration as f64 / 48_000.0 - 1.0).abs() < 3.0 * 1024.0 / 48_000.0, "{}", t.duration);
}

/// A file whose samples lie past 4 GiB gets `co64` offsets and a 64-bit `mdat` size; its
/// sample tables are checked on the clip's `moov` alone (the data is not there).
#[test]
fn large_files_get_64_bit_offsets() {
    let frames = 600u64;
    let video = Track {
        id: 1,
        kind: TrackKind::H264(H264Config {
            sps: vec![vec![0x67, 0x4d, 0x40, 0x1e]],
            pps: vec![vec![0x68, 0xee]],
            nal_length_size: 4,
            profile_level_id: [0x4d, 0x40, 0x1e],
            width: 640,
            height: 360,
        }),
        timescale: 90_000,
        duration: frames * 3000,
        edit_start: 0,
        // 10 MB frames: 6 GB of video.
        samples: (0..frames)
            .map(|i| Sample::new(64 + i * 10_000_000, 10_000_000, i * 3000, 0, i % 60 == 0))
            .collect(),
    };
    let audio = Track {
        id: 2,
        kind: TrackKind::Aac(AacConfig {
            audio_specific_config: vec![0x11, 0x90],
            sample_rate: 48_000,
            channels: 2,
        }),
        timescale: 48_000,
        duration: frames * 1600,
        edit_start: 0,
        samples: (0..frames * 1600 / 1024)
            .map(|i| Sample::new(8_000_000_000 + i * 100, 100, i * 1024, 0, true))
            .collect(),
    };
    let file =
        Mp4File { tracks: vec![video, audio], skipped: vec![], file_len: 9_000_000_000, fragmented: false };
    let c = clip(&file, interval(1000, None)).unwrap();
    assert_eq!(c.tracks[0].samples, 0..600, "the keyframe at 0");
    assert_eq!(c.plan.ranges.len(), 2, "video and audio are far apart: {:?}", c.plan.ranges);
    let header = &c.plan.header;
    let mdat = header.len() - 16;
    assert_eq!(&header[mdat..mdat + 8], &[0, 0, 0, 1, b'm', b'd', b'a', b't']);
    assert_eq!(u64::from_be_bytes(header[mdat + 8..].try_into().unwrap()), c.plan.len() - mdat as u64);
    let mut buf = &header[..];
    mp4_atom::Ftyp::decode(&mut buf).unwrap();
    let moov = mp4_atom::Moov::decode(&mut buf).unwrap();
    let stbl = &moov.trak[1].mdia.minf.stbl;
    assert!(stbl.stco.is_none());
    let co64 = &stbl.co64.as_ref().unwrap().entries;
    // The audio's one chunk is the second range, right after the video's in the mdat.
    assert_eq!(co64.len(), 1);
    assert_eq!(co64[0], header.len() as u64 + 600 * 10_000_000);
    assert!(
        moov.trak[0].mdia.minf.stbl.stss.as_ref().unwrap().entries
            == [1, 61, 121, 181, 241, 301, 361, 421, 481, 541]
    );
}

use mp4_atom::Decode;

/// A clip's tables package as HLS like any file's: every kept sample in exactly one segment,
/// sent from the original file, decode times from 0, the clip's edits.
#[test]
fn clipped_tables_package_from_the_original_file() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    let c = clip(&file, interval(2500, Some(5000))).unwrap();
    let tables = clipped_tables(&file, interval(2500, Some(5000))).unwrap();
    assert_eq!(tables.tracks.len(), c.tracks.len());
    for (t, kept) in tables.tracks.iter().zip(&c.tracks) {
        assert_eq!(t.samples.len(), kept.samples.len());
        assert_eq!(t.samples[0].decode_time(), 0);
        assert_eq!(t.samples[0].range(), file.tracks[kept.track].samples[kept.samples.start].range());
        assert_eq!((t.edit_start, t.duration), (kept.media_time, kept.duration));
    }
    let index = crate::hls::SegmentIndex::build(&tables, std::time::Duration::from_secs(2)).unwrap();
    assert!((index.duration() - 3.0).abs() < 0.05, "from the keyframe at 2 s to 5 s: {}", index.duration());
    let mut walk = crate::fuzzing::SegmentWalk::new(&tables);
    for n in 0..index.segments() {
        let plan = crate::hls::media_segment(&tables, &index, n).unwrap();
        let mut bytes = plan.header.clone();
        for r in &plan.ranges {
            bytes.extend_from_slice(&data[r.start as usize..r.end as usize]);
        }
        walk.check(&tables, &data, n, &bytes);
    }
    walk.finish(&tables);
}
