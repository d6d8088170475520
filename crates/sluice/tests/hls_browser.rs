//! The library page in a real browser: headless Chromium (Debian's `chromium`, driven over the
//! DevTools protocol on a pipe, no network beyond 127.0.0.1) loads the demo library's page,
//! presses Play, and the vendored hls.js plays the demo's HLS packaging to its end; a seek to the
//! middle lands within one segment and playback goes on from there. The page's screenshot is
//! left in the test's temporary directory (docs/hls-player.png is one of these).
//!
//! One run, on `common::browser::BROWSER_ENGINE`: a browser playing 6 s of video in real time
//! is the slowest test here, and every engine and send strategy is covered byte for byte by
//! tests/hls.rs.
//! Runs are serialised so that two browsers never compete for the two cores of CI.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use std::time::Instant;

use base64::Engine as _;
use common::browser::{Browser, ONE_BROWSER_AT_A_TIME, PLAY_THROUGH};
use common::*;
use serde_json::json;

fn hls_js_plays_the_demo(engine: &[&str]) {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start(engine, &["--hls-segment", "2s"]);
    let mut browser = Browser::start();
    browser.open_page(&format!("http://{}/", server.addr()));
    let started = Instant::now();
    let r = browser.eval(PLAY_THROUGH);
    assert_eq!(r["hlsJs"], json!(true), "hls.js (not native HLS, not the file) played: {r}");
    assert_eq!(r["version"], json!("1.7.4"), "{r}");
    assert_eq!(r["src"], json!("./sluice-demo.mp4/master.m3u8"), "{r}");
    assert!(r["first"]["error"].is_null() && r["error"].is_null(), "no media error: {r}");
    let duration = r["first"]["duration"].as_f64().unwrap();
    assert!((duration - 6.0).abs() < 0.2, "duration {duration}: {r}");
    let at_end = r["first"]["at"].as_f64().unwrap();
    assert!(at_end >= duration - 0.1, "played to the end: {r}");
    // Every video frame of the file was decoded or, under load, dropped: Chromium counts both.
    let demo =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4")).unwrap();
    let file = sluice_media::mp4::Mp4File::from_bytes(&demo).unwrap();
    let video = file.tracks.iter().find(|t| matches!(t.kind, sluice_media::TrackKind::H264(_))).unwrap();
    assert_eq!(r["first"]["frames"].as_u64(), Some(video.samples.len() as u64), "frames played: {r}");
    let (mid, landed) = (r["mid"].as_f64().unwrap(), r["landed"].as_f64().unwrap());
    assert!((landed - mid).abs() <= 2.0, "the seek to {mid} landed at {landed}, more than a segment away");
    assert!(r["after"].as_f64().unwrap() >= landed + 0.5, "played on after the seek: {r}");
    // What the player fetched: the master, the video and audio renditions' playlists, their
    // init segments and every media segment.
    let log = server.log_text();
    for name in [
        "master.m3u8",
        "video.m3u8",
        "audio.m3u8",
        "video-init.mp4",
        "audio-init.mp4",
        "video-seg-0.m4s",
        "video-seg-1.m4s",
        "video-seg-2.m4s",
        "audio-seg-2.m4s",
        "hls.min.js",
    ] {
        assert!(log.contains(name), "the access log shows {name} fetched:\n{log}");
    }
    let shot = browser.call("Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let name = format!("hls-player-{}.png", engine[1]);
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name), png).unwrap();
    eprintln!("played and seeked in {:?}: {r}", started.elapsed());
}

#[test]
fn on_epoll() {
    hls_js_plays_the_demo(common::browser::BROWSER_ENGINE);
}
