//! Trick play, MPEG-TS and clips from an S3-backed edge, on every engine, against a real
//! SeaweedFS: the MP4 in the bucket spans several 4 MiB slices with its `moov` at the end, so
//! keyframe fragments and clips are sent from cached slice files and TS segments are read
//! through the slice cache in a job. The I-frame playlist lists every keyframe and each one
//! decodes alone (ffprobe), a clip is byte for byte the clip the sample tables plan (ranges
//! too) and plays, and ffprobe counts every video frame over the TS master while
//! `ffmpeg -v error` decodes it without a word.
//!
//! Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use common::edge::{multi_slice_clip as big_mp4, put_object, start_edge};
use common::*;
use sluice_media::mp4::clip::{clip, Interval};
use sluice_media::mp4::Mp4File;

engine_matrix!(an_edge_serves_trick_play_ts_and_clips);

fn library() -> &'static str {
    static PUT: OnceLock<()> = OnceLock::new();
    PUT.get_or_init(|| put_object("trickedge/lib", "films/clip.mp4", big_mp4()));
    "trickedge/lib"
}

fn ok(addr: SocketAddr, target: &str, extra: &[(&str, &str)]) -> Response {
    let r = fetch_get(addr, target, extra);
    assert!(r.status == 200 || r.status == 206, "{target}: {}", r.head_text());
    r
}

/// ffprobe reading `url` (or a file): the video frames it decodes, panicking on any word on
/// stderr.
fn video_frames(url: &str) -> u64 {
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"])
        .arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffprobe {url}: {status}: {err}");
    String::from_utf8_lossy(&out).lines().next().unwrap().trim().trim_end_matches(',').parse().unwrap()
}

fn an_edge_serves_trick_play_ts_and_clips(engine: &[&str]) {
    let location = library();
    let cache = tempfile::tempdir().unwrap();
    let edge = start_edge(engine, location, cache.path(), &["--hls-segment", "2s"]);
    let addr = edge.addr();
    let data = big_mp4();
    let file = Mp4File::from_bytes(data).unwrap();
    let keyframes = file.tracks[0].samples.iter().filter(|s| s.is_sync()).count();

    // Trick play: every keyframe, each decoding alone after the video's init segment.
    let r = ok(addr, "/films/clip.mp4/video-iframes.m3u8", &[]);
    let Ok(m3u8_rs::Playlist::MediaPlaylist(p)) = m3u8_rs::parse_playlist_res(&r.body) else {
        panic!("not a media playlist: {}", r.body_text())
    };
    assert!(p.i_frames_only);
    assert_eq!(p.segments.len(), keyframes);
    let init = ok(addr, "/films/clip.mp4/video-init.mp4", &[]).body;
    let dir = tempfile::tempdir().unwrap();
    for (n, s) in p.segments.iter().enumerate() {
        let fragment = ok(addr, &format!("/films/clip.mp4/{}", s.uri), &[]).body;
        assert_eq!(fragment.len() as u64, s.byte_range.as_ref().unwrap().length);
        let path = dir.path().join(format!("keyframe-{n}.mp4"));
        std::fs::write(&path, [init.as_slice(), &fragment].concat()).unwrap();
        assert_eq!(video_frames(path.to_str().unwrap()), 1, "{}", s.uri);
    }

    // A clip: the bytes its tables plan, ranges of it, and it plays.
    let target = "/films/clip.mp4?start=2.5&end=5";
    let body = ok(addr, target, &[]).body;
    let planned = clip(&file, Interval::from_query("start=2.5&end=5").unwrap().unwrap()).unwrap();
    assert!(body == sluice_media::fuzzing::assemble(&planned, data), "the planned clip");
    let len = body.len();
    for (a, b) in [(0, 999), (len / 3, len / 3 + (5 << 20)), (len - 10, len - 1)] {
        let b = b.min(len - 1);
        let part = fetch_get(addr, target, &[("Range", &format!("bytes={a}-{b}"))]);
        assert_eq!(part.status, 206, "{}", part.head_text());
        assert!(part.body == body[a..=b], "bytes {a}-{b}");
    }
    assert_eq!(video_frames(&format!("http://{addr}{target}")), planned.tracks[0].samples.len() as u64);

    // MPEG-TS: every video frame, decoded without a word.
    let url = format!("http://{addr}/films/clip.mp4/ts/master.m3u8");
    assert_eq!(video_frames(&url), file.tracks[0].samples.len() as u64);
    let mut ffmpeg = tool("ffmpeg");
    ffmpeg.args(["-nostdin", "-v", "error", "-rw_timeout", "10000000", "-i", &url, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut ffmpeg, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffmpeg decoding {url}: {status}: {err}");
}
