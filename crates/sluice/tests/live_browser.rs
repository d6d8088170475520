//! A live path in a real browser: ffmpeg publishes H.264 and AAC over RTSP to `/live/cam`, the
//! library's page lists it first, and headless Chromium plays it from the page live, with the
//! vendored hls.js (the live playlists) and then with dash.js (the dynamic MPD, timed by the
//! server's clock in the manifest): the video plays on, in step with the publisher, without a
//! media error.
//!
//! One run, on `common::browser::BROWSER_ENGINE`: tests/live_http.rs covers every engine with
//! ffprobe, and runs are serialised so that two browsers never compete for CI's two cores.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use common::browser::{Browser, BROWSER_ENGINE, ONE_BROWSER_AT_A_TIME};
use common::publisher::*;
use common::*;
use serde_json::json;

/// Chooses `via` on the page, presses the live path's Play, and reports how the video went
/// after it played 4 s of the stream (or 20 s passed).
fn play_live(via: &str) -> String {
    format!(
        r#"(async () => {{
  document.getElementById('via').value = '{via}';
  const v = document.getElementById('player');
  v.muted = true;
  document.querySelector('li.live button.play').click();
  const began = Date.now();
  let first = null;
  while (Date.now() - began < 20000) {{
    if (v.currentTime > 0 && first === null) first = v.currentTime;
    if (first !== null && v.currentTime > first + 4) break;
    await new Promise(r => setTimeout(r, 100));
  }}
  const q = v.getVideoPlaybackQuality();
  return {{ first, at: v.currentTime, error: v.error && v.error.code, frames: q.totalVideoFrames,
           hls: !!(window.sluicePlayer && window.sluicePlayer.hls), dash: !!(window.sluicePlayer && window.sluicePlayer.dash),
           width: v.videoWidth }};
}})()"#
    )
}

/// Plays `url` with `player` (`hls` or `dash`: the page's hls.js, or the vendored dash.js loaded
/// into it) on a video element of its own at twice real time, and reports how it ended: `ended`,
/// or at its duration for a second (dash.js may stop there without the event), or stalled for
/// 10 s, or 40 s passed.
fn play_span(player: &str, url: &str) -> String {
    format!(
        r#"(async () => {{
  const load = (src) => new Promise((res, rej) => {{
    const s = document.createElement('script'); s.src = src; s.onload = res; s.onerror = rej; document.head.appendChild(s);
  }});
  const v = document.createElement('video');
  v.muted = true;
  document.body.appendChild(v);
  let error = null;
  v.addEventListener('error', () => {{ error = v.error && v.error.code; }});
  v.addEventListener('loadedmetadata', () => {{ v.playbackRate = 2; }});
  if ('{player}' === 'dash') {{
    if (!window.dashjs) await load('/.sluice/dash.mediaplayer.min.js');
    const p = dashjs.MediaPlayer().create();
    p.initialize(v, '{url}', true);
  }} else {{
    const h = new Hls();
    h.loadSource('{url}');
    h.attachMedia(v);
    v.play().catch(() => {{}});
  }}
  const began = Date.now();
  let seen = -1, moved = began, atEnd = 0, ended = false;
  v.addEventListener('ended', () => {{ ended = true; }});
  while (!ended && error === null && Date.now() - began < 40000 && Date.now() - moved < 10000 && atEnd < 10) {{
    await new Promise(r => setTimeout(r, 100));
    if (v.currentTime !== seen) {{ seen = v.currentTime; moved = Date.now(); }}
    atEnd = isFinite(v.duration) && v.duration > 0 && v.currentTime >= v.duration - 0.3 ? atEnd + 1 : 0;
  }}
  const q = v.getVideoPlaybackQuality();
  const rs = []; for (let i = 0; i < v.buffered.length; i++) rs.push([v.buffered.start(i), v.buffered.end(i)]);
  return {{ ended, at: v.currentTime, duration: v.duration, frames: q.totalVideoFrames, error, rs, paused: v.paused, ready: v.readyState }};
}})()"#
    )
}

#[test]
fn hls_js_and_dash_js_play_a_live_path_from_the_page() {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fx = Fixture::new();
    fx.write(
        "sluice.toml",
        b"[[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
          [[record]]\nprefix = \"/live/\"\nfile_duration = \"4s\"\n",
    );
    let config = fx.path("sluice.toml");
    let server = Server::serve(BROWSER_ENGINE, &fx, &["--config", config.to_str().unwrap()]);
    let _publisher = publish(&format!("rtsp://{}/live/cam", server.rtsp_addr()), &H264_AAC, "tcp", 60);
    assert!(
        poll_until(IO_TIMEOUT, || fetch_get(server.addr(), "/live/cam/video.m3u8", &[]).status == 200),
        "the live path gets its first segment:\n{}",
        server.log_text()
    );
    let mut browser = Browser::start();
    browser.open_page(&format!("http://{}/", server.addr()));
    for via in ["hls", "dash"] {
        let r = browser.eval(&play_live(via));
        assert_eq!(r[via], json!(true), "{via}.js played: {r}");
        assert!(r["error"].is_null(), "{via}: no media error: {r}");
        assert_eq!(r["width"], json!(320), "{via}: the publisher's pictures: {r}");
        let (first, at) = (r["first"].as_f64().unwrap_or(-1.0), r["at"].as_f64().unwrap());
        assert!(first >= 0.0 && at >= first + 4.0, "{via}: 4 s played on, live: {r}");
        assert!(r["frames"].as_u64().unwrap() >= 100, "{via}: pictures decoded: {r}");
    }
    // The first 12 s recorded, three files of 4 s, as a span: dash.js plays its three Periods
    // and hls.js its playlist across the files, to the end.
    let timeline = || -> serde_json::Value {
        serde_json::from_slice(&fetch_get(server.admin_addr(), "/recordings?path=/live/cam", &[]).body)
            .unwrap()
    };
    assert!(
        poll_until(IO_TIMEOUT, || timeline()["recordings"].as_array().is_some_and(|r| r.len() >= 4)),
        "three whole files recorded: {}",
        timeline()
    );
    let start = timeline()["recordings"][0]["start"].as_str().unwrap().to_string();
    for (player, name) in [("dash", "manifest.mpd"), ("hls", "index.m3u8")] {
        let url = format!("/rec/live/cam/{name}?start={start}&duration=12s");
        let r = browser.eval(&play_span(player, &url));
        assert!(r["error"].is_null(), "{player}: no media error playing {url}: {r}");
        let (at, duration) = (r["at"].as_f64().unwrap(), r["duration"].as_f64().unwrap_or(0.0));
        // dash.js, finding its playhead at the stream's end before the element's own `ended`,
        // sometimes seeks back to that end and pauses, and Chromium then shows a picture half a
        // second before it (about one run in five here, with every segment buffered): the end is
        // reached when the playhead came within 0.6 s of it and everything is buffered.
        let buffered_to_end = r["rs"]
            .as_array()
            .is_some_and(|rs| rs.len() == 1 && rs[0][1].as_f64().is_some_and(|e| e >= duration - 0.05));
        let margin = if player == "dash" && buffered_to_end { 0.6 } else { 0.3 };
        assert!(
            (11.5..13.0).contains(&duration) && at >= duration - margin,
            "{player}: {url} played to its end: {r}"
        );
        assert!(r["frames"].as_u64().unwrap() >= 250, "{player}: the span's pictures decoded: {r}");
    }
    let log = server.log_text();
    for name in
        ["/live/cam/master.m3u8", "/live/cam/manifest.mpd", "/live/cam/video-seg-", "/live/cam/audio-seg-"]
    {
        assert!(log.contains(name), "the access log shows {name}:\n{log}");
    }
    // Each player fetched segments of all three files.
    let files: std::collections::BTreeSet<&str> = log
        .lines()
        .filter(|l| l.contains("uri=/recordings/live/cam/") && l.contains("video-seg-"))
        .filter_map(|l| l.split("uri=/recordings/live/cam/").nth(1)?.split('/').next())
        .collect();
    assert!(files.len() >= 3, "segments of three recording files played: {files:?}");
}
