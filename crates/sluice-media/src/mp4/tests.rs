//! The MP4 demuxer's tests, on the built-in demo file and hand-made boxes.

use super::*;

pub(crate) fn demo() -> Vec<u8> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    std::fs::read(path).expect("demo file")
}

fn video(file: &Mp4File) -> &Track {
    file.tracks.iter().find(|t| matches!(t.kind, TrackKind::H264(_))).expect("video track")
}

fn audio(file: &Mp4File) -> &Track {
    file.tracks.iter().find(|t| matches!(t.kind, TrackKind::Aac(_))).expect("audio track")
}

/// Figures from `ffprobe -count_frames -show_streams` and `ffprobe -show_packets` on the demo
/// file: 180 H.264 frames at 1/15360 with 3 keyframes (GOP 60), 283 AAC packets at 48 kHz
/// mono (ffprobe decodes 282: the first is encoder priming it drops), 6.0 s each.
#[test]
fn demo_matches_ffprobe() {
    let file =
        Mp4File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4")).unwrap();
    assert_eq!(file.tracks.len(), 2, "{:?}", file.skipped);
    let v = video(&file);
    assert_eq!(v.samples.len(), 180);
    assert_eq!(v.samples.iter().filter(|s| s.is_sync()).count(), 3);
    assert_eq!(v.timescale, 15360);
    assert!((v.duration_secs() - 6.0).abs() < 0.01, "{}", v.duration_secs());
    let TrackKind::H264(h) = &v.kind else { unreachable!() };
    assert_eq!((h.width, h.height), (640, 360));
    assert_eq!(h.profile_level_id[0], 77, "Main profile");
    assert_eq!(h.profile_level_id[2], 30, "level 3.0");
    assert_eq!(h.nal_length_size, 4);
    assert_eq!(h.sps[0][0] & 0x1f, 7);
    assert_eq!(h.pps[0][0] & 0x1f, 8);
    let a = audio(&file);
    assert_eq!(a.samples.len(), 283);
    assert!(a.samples.iter().all(Sample::is_sync));
    let TrackKind::Aac(c) = &a.kind else { unreachable!() };
    assert_eq!((c.sample_rate, c.channels), (48000, 1));
    // AAC-LC (object type 2), 48 kHz (index 3), 1 channel: 0x11 0x88.
    assert_eq!(&c.audio_specific_config[..2], &[0x11, 0x88]);
    assert!((file.duration_secs() - 6.0).abs() < 0.05);
}

/// The fuzz seed `tiny-h264-aac.mp4` (ffmpeg: 0.6 s of 32x32 H.264 at 5 fps, GOP 2, and
/// 8 kHz AAC): ffprobe counts 3 video frames and 6 AAC packets.
#[test]
fn tiny_fixture_matches_ffprobe() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/mp4_demux/tiny-h264-aac.mp4");
    let file = Mp4File::open(path).unwrap();
    assert_eq!(video(&file).samples.len(), 3);
    assert_eq!(video(&file).samples.iter().filter(|s| s.is_sync()).count(), 2);
    assert_eq!(audio(&file).samples.len(), 6);
    let TrackKind::Aac(a) = &audio(&file).kind else { unreachable!() };
    assert_eq!((a.sample_rate, a.channels), (8000, 1));
}

#[test]
fn sample_table_is_consistent_with_the_bytes() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    let v = video(&file);
    let TrackKind::H264(h) = &v.kind else { unreachable!() };
    let mut last_dts = None;
    for s in &v.samples {
        assert!(last_dts < Some(s.decode_time()), "decode times increase");
        last_dts = Some(s.decode_time());
        // Every sample is a sequence of length-prefixed NAL units filling it exactly, and a
        // sync sample holds an IDR slice.
        let mut au = &data[s.offset() as usize..s.range().end as usize];
        let mut idr = false;
        while !au.is_empty() {
            let n = usize::from(h.nal_length_size);
            let len = au[..n].iter().fold(0usize, |acc, b| acc << 8 | usize::from(*b));
            idr |= au[n] & 0x1f == 5;
            au = &au[n + len..];
        }
        assert_eq!(idr, s.is_sync());
    }
    // Decode order with B-frames: composition offsets are not all zero.
    assert!(v.samples.iter().any(|s| s.composition_offset() != 0));
}

#[test]
fn sync_sample_lookup() {
    let file = Mp4File::from_bytes(&demo()).unwrap();
    let v = video(&file);
    let keys: Vec<usize> =
        v.samples.iter().enumerate().filter(|(_, s)| s.is_sync()).map(|(i, _)| i).collect();
    assert_eq!(keys, [0, 60, 120]);
    assert_eq!(v.sync_sample_at_or_before(0), Some(0));
    assert_eq!(v.sync_sample_at_or_before(v.ticks(1.9)), Some(0));
    assert_eq!(v.sync_sample_at_or_before(v.ticks(2.5)), Some(60));
    assert_eq!(v.sync_sample_at_or_before(v.ticks(4.0)), Some(120));
    assert_eq!(v.sync_sample_at_or_before(u64::MAX), Some(120));
    assert_eq!(v.ticks(-1.0), 0);
    assert_eq!(v.ticks(f64::NAN), 0);
    let a = audio(&file);
    let i = a.sync_sample_at_or_before(a.ticks(3.0)).unwrap();
    assert!(a.samples[i].decode_time() <= 3 * 48000 && a.samples[i + 1].decode_time() > 3 * 48000);
}

#[test]
fn truncated_files_are_errors_not_panics() {
    let data = demo();
    // The demo has its moov at the front (faststart): cutting inside it fails to find it
    // whole; cutting after it leaves samples past the end of the file.
    for cut in [0, 7, 8, 40, 100, 1000, 3000, 10_000, data.len() / 2, data.len() - 1] {
        assert!(Mp4File::from_bytes(&data[..cut]).is_err(), "cut at {cut} parsed");
    }
}

#[test]
fn corrupted_files_never_panic() {
    let data = demo();
    let moov_end = 10_000.min(data.len());
    // Flip bytes across the index one at a time (a deterministic spread, not random).
    for i in (0..moov_end).step_by(7) {
        let mut bad = data.clone();
        bad[i] ^= 0xff;
        let _ = Mp4File::from_bytes(&bad);
    }
}

#[test]
fn hostile_sizes_are_bounded() {
    // A moov that declares more than the limit.
    let mut big = Vec::new();
    big.extend_from_slice(&1u32.to_be_bytes());
    big.extend_from_slice(b"moov");
    big.extend_from_slice(&(MAX_MOOV_BYTES + 16).to_be_bytes());
    big.resize(MAX_MOOV_BYTES as usize + 16, 0);
    assert!(matches!(Mp4File::from_bytes(&big), Err(Mp4Error::MoovTooLarge { .. })));
    // A box smaller than its header, and one past the end.
    assert!(matches!(Mp4File::from_bytes(b"\0\0\0\x04ftypxxxx"), Err(Mp4Error::BadBox { .. })));
    assert!(matches!(Mp4File::from_bytes(b"\0\0\x01\0ftypxxxx"), Err(Mp4Error::BadBox { .. })));
    assert!(matches!(Mp4File::from_bytes(b"\0\0\0\x08free"), Err(Mp4Error::NoMoov)));
    assert!(matches!(Mp4File::from_bytes(b""), Err(Mp4Error::NoMoov)));
    // A table that declares 2^32 - 16 entries in a 20-byte box is refused before mp4parse
    // would reserve memory for them.
    let mut demo = demo();
    let stsz = demo.windows(4).position(|w| w == b"stsz").unwrap();
    demo[stsz + 12..stsz + 16].copy_from_slice(&0xffff_fff0u32.to_be_bytes());
    let err = Mp4File::from_bytes(&demo).unwrap_err();
    assert!(err.to_string().contains("more entries than its box holds"), "{err}");
}

#[test]
fn avcc_parsing() {
    let avcc = [1, 0x64, 0, 0x1f, 0xff, 0xe1, 0, 2, 0x67, 0x64, 1, 0, 2, 0x68, 0xee];
    let c = parse_avcc(1, &avcc, 0, 0).unwrap();
    assert_eq!(c.profile_level_id, [0x64, 0, 0x1f]);
    assert_eq!(c.nal_length_size, 4);
    assert_eq!(c.sps, [vec![0x67, 0x64]]);
    assert_eq!(c.pps, [vec![0x68, 0xee]]);
    for cut in 0..avcc.len() {
        assert!(parse_avcc(1, &avcc[..cut], 0, 0).is_err(), "cut at {cut}");
    }
    let mut three = avcc;
    three[4] = 0xfe;
    assert!(parse_avcc(1, &three, 0, 0).is_err());
}
