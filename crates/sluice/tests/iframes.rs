//! Trick play end to end, on every engine: the master playlist lists an I-frame stream, whose
//! `EXT-X-I-FRAMES-ONLY` playlist lists exactly the MP4's keyframes (their count, and their
//! times as ffprobe finds them with `-skip_frame nokey`), and each listed byte range, fetched
//! and put after the video's init segment, is decoded by ffprobe as one keyframe; the MPD has
//! the trick-mode set (`http://dashif.org/guidelines/trickmode`) with a segment per keyframe.
//!
//! The file is made by ffmpeg for the test with keyframes every 1.7 s (so they fall neither on
//! whole seconds nor on the 6 s segments' cuts), B-frames and AAC; the expected numbers come
//! from ffprobe on it. Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;

/// The test's file: 16 s of 25 fps H.264, a keyframe forced every 1.7 s and none otherwise, two
/// B-frames, and AAC; made once per test binary.
fn film() -> &'static [u8] {
    static FILM: OnceLock<Vec<u8>> = OnceLock::new();
    FILM.get_or_init(|| {
        test_film(16, "-c:v libx264 -preset ultrafast -bf 2 -g 1000 -sc_threshold 0 -force_key_frames expr:gte(t,n_forced*1.7) -pix_fmt yuv420p -c:a aac -b:a 64k")
    })
}

/// The keyframes' presentation times ffprobe finds in the MP4, once per test binary.
fn keyframe_times() -> &'static [f64] {
    static TIMES: OnceLock<Vec<f64>> = OnceLock::new();
    TIMES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("film.mp4");
        std::fs::write(&path, film()).unwrap();
        let mut cmd = tool("ffprobe");
        cmd.args(["-v", "error", "-skip_frame", "nokey", "-select_streams", "v:0"])
            .args(["-show_entries", "frame=pts_time", "-of", "csv=p=0"])
            .arg(&path);
        let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
        assert!(status.success(), "ffprobe: {}", String::from_utf8_lossy(&err));
        let text = String::from_utf8_lossy(&out);
        let times: Vec<f64> = text.lines().filter_map(|l| l.split(',').next()?.trim().parse().ok()).collect();
        assert!(times.len() >= 9, "a keyframe every 1.7 s of 16: {times:?}");
        times
    })
}

fn ok(addr: SocketAddr, target: &str, extra: &[(&str, &str)]) -> Response {
    let r = fetch_get(addr, target, extra);
    assert!(r.status == 200 || r.status == 206, "{target}: {}", r.head_text());
    r
}

fn media_playlist(r: &Response) -> m3u8_rs::MediaPlaylist {
    match m3u8_rs::parse_playlist_res(&r.body) {
        Ok(m3u8_rs::Playlist::MediaPlaylist(p)) => p,
        _ => panic!("not a media playlist: {}", r.body_text()),
    }
}

/// (frames, key frames, I pictures) ffprobe decodes from the MP4 at `path`.
fn decoded_frames(path: &std::path::Path) -> (usize, usize, usize) {
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-select_streams", "v:0", "-show_entries", "frame=key_frame,pict_type"])
        .args(["-of", "csv=p=0"])
        .arg(path);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffprobe {}: {status}: {err}", path.display());
    let text = String::from_utf8_lossy(&out);
    let frames: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let keys = frames.iter().filter(|l| l.starts_with('1')).count();
    let i_pictures = frames.iter().filter(|l| l.contains('I')).count();
    (frames.len(), keys, i_pictures)
}

fn iframe_playlists_list_exactly_the_keyframes(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("films/film.mp4", film());
    let server = Server::serve(engine, &fx, &["--hls-segment", "6s"]);
    let addr = server.addr();
    let master = ok(addr, "/films/film.mp4/master.m3u8", &[]);
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
        panic!("not a master playlist: {}", master.body_text())
    };
    let iframe = m.variants.iter().find(|v| v.is_i_frame).expect("an I-frame stream");
    let video = m.variants.iter().find(|v| !v.is_i_frame).unwrap();
    assert_eq!(iframe.uri, "video-iframes.m3u8");
    assert_eq!(iframe.resolution, video.resolution);
    assert_eq!(iframe.codecs.as_deref(), video.codecs.as_deref().and_then(|c| c.split(',').next()));

    let r = ok(addr, &format!("/films/film.mp4/{}", iframe.uri), &[]);
    assert_eq!(r.header("content-type"), Some("application/vnd.apple.mpegurl"));
    let p = media_playlist(&r);
    assert!(p.i_frames_only, "{}", r.body_text());
    assert!(p.version.unwrap() >= 4, "{}", r.body_text());
    let init_uri = &p.segments[0].map.as_ref().expect("EXT-X-MAP").uri;
    let init = ok(addr, &format!("/films/film.mp4/{init_uri}"), &[]).body;
    // Exactly the keyframes, at their times: each entry starts where the ones before end.
    let times = keyframe_times();
    assert_eq!(p.segments.len(), times.len(), "{}", r.body_text());
    let mut at = times[0];
    for (s, &t) in p.segments.iter().zip(times) {
        assert!((at - t).abs() < 0.002, "entry at {at} s, keyframe at {t} s: {}", r.body_text());
        at += f64::from(s.duration);
    }
    assert!(p.segments.iter().all(|s| f64::from(s.duration).round() as u64 <= p.target_duration));

    // Each entry's bytes, after the init segment, decode as one keyframe.
    let dir = tempfile::tempdir().unwrap();
    for (n, s) in p.segments.iter().enumerate() {
        let range = s.byte_range.as_ref().expect("EXT-X-BYTERANGE");
        let from = range.offset.unwrap_or(0);
        let to = from + range.length - 1;
        let fragment = fetch_get(
            addr,
            &format!("/films/film.mp4/{}", s.uri),
            &[("Range", &format!("bytes={from}-{to}"))],
        );
        assert!(fragment.status == 206 || fragment.status == 200, "{}: {}", s.uri, fragment.head_text());
        assert_eq!(fragment.body.len() as u64, range.length, "{}", s.uri);
        let path = dir.path().join(format!("keyframe-{n}.mp4"));
        std::fs::write(&path, [init.as_slice(), &fragment.body].concat()).unwrap();
        assert_eq!(decoded_frames(&path), (1, 1, 1), "{}: one keyframe, an I picture", s.uri);
    }
    let past = format!("/films/film.mp4/video-iframe-{}.m4s", times.len());
    assert_eq!(fetch_get(addr, &past, &[]).status, 404, "past the last keyframe");
    assert_eq!(fetch_get(addr, "/films/film.mp4/video-iframe-01.m4s", &[]).status, 404);
    // A fragment is cacheable and validates like a segment.
    let whole = ok(addr, "/films/film.mp4/video-iframe-1.m4s", &[]);
    let etag = whole.header("etag").unwrap();
    assert_eq!(fetch_get(addr, "/films/film.mp4/video-iframe-1.m4s", &[("If-None-Match", etag)]).status, 304);

    // DASH: the trick-mode set points at the video set, a segment per keyframe.
    let mpd = ok(addr, "/films/film.mp4/manifest.mpd", &[]).body_text();
    assert!(
        mpd.contains(
            "<EssentialProperty schemeIdUri=\"http://dashif.org/guidelines/trickmode\" value=\"0\"/>"
        ),
        "{mpd}"
    );
    let trick = &mpd[mpd.find("trickmode").unwrap()..];
    let timeline = &trick[..trick.find("</SegmentTimeline>").unwrap()];
    let segments: usize = timeline
        .split("<S ")
        .skip(1)
        .map(|s| {
            s.split("r=\"").nth(1).map_or(0, |r| r.split('"').next().unwrap().parse::<usize>().unwrap()) + 1
        })
        .sum();
    assert_eq!(segments, times.len(), "{timeline}");
    assert!(trick.contains("media=\"video-iframe-$Number$.m4s\""), "{trick}");
}

engine_matrix!(iframe_playlists_list_exactly_the_keyframes);
