//! AV1 (10-bit, PQ) with Opus and VP9 with Opus in a real browser: headless Chromium (driven over
//! the DevTools protocol, no network beyond 127.0.0.1) loads the library page, and the vendored
//! hls.js and dash.js each play both clips (made by ffmpeg, see `common::codec_clips`) to the
//! end with every video frame presented or dropped and no media error. The HEVC clips get a Play
//! button exactly when the browser's `MediaSource.isTypeSupported` accepts their codec strings
//! (Debian's Chromium has no HEVC decoder; ffmpeg plays those in tests/codecs.rs).
//!
//! On one engine (`common::browser::BROWSER_ENGINE` says why), serialised with the other browser
//! tests.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use common::browser::{Browser, ONE_BROWSER_AT_A_TIME};
use common::codec_clips::clips;
use common::*;
use serde_json::{json, Value};

/// Plays the video titled `title` with `via` (`hls` or `dash`) to its end.
fn play(browser: &mut Browser, title: &str, via: &str) -> Value {
    browser.eval(&format!(
        r#"(async (title, via) => {{
  const v = document.getElementById('player');
  document.getElementById('via').value = via;
  const b = [...document.querySelectorAll('button.play')].find(b => b.dataset.title === title);
  if (!b) return {{ missing: true }};
  if (b.disabled) return {{ disabled: true, why: b.title }};
  const ended = new Promise((res, rej) => {{
    const t = setTimeout(() => rej(new Error('no end by 30 s, at ' + v.currentTime + ', error ' + (v.error && v.error.message))), 30000);
    v.addEventListener('ended', () => {{ clearTimeout(t); res(); }}, {{ once: true }});
  }});
  b.click();
  await ended;
  const q = v.getVideoPlaybackQuality();
  return {{ frames: q.totalVideoFrames, duration: v.duration, at: v.currentTime, error: v.error && v.error.code,
           via: window.sluicePlayer && window.sluicePlayer.state.via }};
}})({title:?}, {via:?})"#
    ))
}

fn chromium_plays_av1_and_vp9(engine: &[&str]) {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fx = Fixture::new();
    for (name, bytes) in clips() {
        fx.write(name, bytes);
    }
    let server = Server::serve(engine, &fx, &["--hls-segment", "1s"]);
    let mut browser = Browser::start();
    browser.open_page(&format!("http://{}/", server.addr()));
    for (name, bytes) in clips() {
        let file = sluice_media::Mp4File::from_bytes(bytes).unwrap();
        let video = file.tracks.iter().find(|t| t.kind.is_video()).unwrap();
        let codecs: Vec<String> = file.tracks.iter().map(|t| t.kind.codec_string()).collect();
        let supported = browser
            .eval(&format!("MediaSource.isTypeSupported('video/mp4; codecs=\"{}\"')", codecs.join(",")));
        if name.starts_with("hevc") {
            let r = play(&mut browser, name, "hls");
            assert_eq!(
                r["disabled"] == json!(true),
                supported == json!(false),
                "{name}: {r}, supported {supported}"
            );
            continue;
        }
        assert_eq!(supported, json!(true), "Chromium decodes {codecs:?}");
        for via in ["hls", "dash"] {
            let r = play(&mut browser, name, via);
            assert_eq!(r["via"], json!(via), "{name} over {via}: {r}");
            assert!(r["error"].is_null(), "{name} over {via}: {r}");
            assert!(
                r["at"].as_f64().unwrap() >= r["duration"].as_f64().unwrap() - 0.1,
                "{name} over {via}: {r}"
            );
            assert_eq!(r["frames"].as_u64(), Some(video.samples.len() as u64), "{name} over {via}: {r}");
        }
    }
}

#[test]
fn on_epoll() {
    chromium_plays_av1_and_vp9(common::browser::BROWSER_ENGINE);
}
