//! The library page in a real browser: headless Chromium (Debian's `chromium`, driven over the
//! DevTools protocol on a pipe, no network beyond 127.0.0.1) loads the demo library's page,
//! presses Play, and the vendored hls.js plays the demo's HLS packaging to its end; a seek to the
//! middle lands within one segment and playback goes on from there. The page's screenshot is
//! left in the test's temporary directory (docs/hls-player.png is one of these).
//!
//! One run per engine (its default send strategy): a browser playing 6 s of video in real time
//! is the slowest test here, and the send strategies are covered byte for byte by tests/hls.rs.
//! Runs are serialised so that two browsers never compete for the two cores of CI.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use base64::Engine as _;
use common::*;
use serde_json::{json, Value};

/// Chromium with its DevTools protocol on fds 3 (commands in) and 4 (replies out).
struct Browser {
    child: Child,
    commands: File,
    replies: BufReader<File>,
    next_id: u64,
    session: Option<String>,
    _profile: tempfile::TempDir,
}

/// A pipe's two ends, moved above the standard descriptors and 3 and 4, close-on-exec.
fn pipe_high() -> (RawFd, RawFd) {
    let mut fds = [0; 2];
    // SAFETY: fds is a valid two-element array; the result is checked.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let high = fds.map(|fd| {
        // SAFETY: fd is a descriptor we own; F_DUPFD_CLOEXEC returns a new one >= 10 or -1.
        let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 10) };
        assert!(h >= 10);
        // SAFETY: closing the original, which nothing else uses.
        unsafe { libc::close(fd) };
        h
    });
    (high[0], high[1])
}

impl Browser {
    fn start() -> Browser {
        let chromium = require_tool("chromium", "chromium");
        let profile = tempfile::tempdir().unwrap();
        let (to_browser_r, to_browser_w) = pipe_high();
        let (from_browser_r, from_browser_w) = pipe_high();
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--mute-audio",
            "--no-first-run",
            "--no-proxy-server",
            "--disable-background-networking",
            "--disable-component-update",
            "--autoplay-policy=no-user-gesture-required",
            "--window-size=1100,900",
            "--remote-debugging-pipe",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("about:blank")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: between fork and exec only dup2 runs, which is async-signal-safe; dup2 leaves
        // the new descriptors without close-on-exec, so the browser inherits exactly 3 and 4.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(to_browser_r, 3) < 0 || libc::dup2(from_browser_w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap();
        // SAFETY: the browser has its copies now; ours of its ends are closed, and the ends we
        // keep are owned by the Files from here on.
        let (commands, replies) = unsafe {
            libc::close(to_browser_r);
            libc::close(from_browser_w);
            (File::from_raw_fd(to_browser_w), File::from_raw_fd(from_browser_r))
        };
        Browser {
            child,
            commands,
            replies: BufReader::new(replies),
            next_id: 0,
            session: None,
            _profile: profile,
        }
    }

    /// Sends a command (to the attached page, once attached) and waits for its reply, skipping
    /// events; panics on a protocol error.
    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        loop {
            let mut buf = Vec::new();
            let n = self.replies.read_until(0, &mut buf).unwrap();
            assert!(n > 0, "the browser closed its DevTools pipe during {method}");
            buf.pop();
            let reply: Value = serde_json::from_slice(&buf).unwrap();
            if reply["id"] == json!(id) {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// Evaluates `expression` in the page, awaiting a promise; its value.
    fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Stopped by its own pid (the whole tree goes with the browser process's pipe).
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Presses Play on the first packaged video, waits (at most 30 s) for the end, seeks to the
/// middle and waits for half a second of playback after the seek.
const PLAY_THROUGH: &str = r#"(async () => {
  const v = document.getElementById('player');
  const wait = (ev, ms) => new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error('no ' + ev + ' by ' + ms + ' ms, at ' + v.currentTime)), ms);
    v.addEventListener(ev, () => { clearTimeout(t); res(); }, { once: true });
  });
  const ended = wait('ended', 30000);
  document.querySelector('button.play[data-hls]').click();
  await ended;
  const q = v.getVideoPlaybackQuality();
  const first = { duration: v.duration, at: v.currentTime, frames: q.totalVideoFrames, error: v.error && v.error.code };
  const mid = v.duration / 2;
  const seeked = wait('seeked', 10000);
  v.currentTime = mid;
  await seeked;
  const landed = v.currentTime;
  await v.play();
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error('stalled after the seek, at ' + v.currentTime)), 10000);
    const on = () => { if (v.currentTime >= landed + 0.5) { clearTimeout(t); v.removeEventListener('timeupdate', on); res(); } };
    v.addEventListener('timeupdate', on);
  });
  v.pause();
  const p = window.sluicePlayer;
  return { hlsJs: !!(p && p.hls), version: window.Hls ? Hls.version : null, src: p && p.src, first, mid, landed,
           after: v.currentTime, error: v.error && v.error.code };
})()"#;

static ONE_BROWSER_AT_A_TIME: Mutex<()> = Mutex::new(());

fn hls_js_plays_the_demo(engine: &[&str]) {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let server = Server::start(engine, &["--hls-segment", "2s"]);
    let mut browser = Browser::start();
    let targets = browser.call("Target.getTargets", json!({}));
    let page =
        targets["targetInfos"].as_array().unwrap().iter().find(|t| t["type"] == "page").unwrap().clone();
    let attached =
        browser.call("Target.attachToTarget", json!({ "targetId": page["targetId"], "flatten": true }));
    browser.session = Some(attached["sessionId"].as_str().unwrap().to_string());
    browser.call("Page.navigate", json!({ "url": format!("http://{}/", server.addr()) }));
    assert!(
        poll_until(IO_TIMEOUT, || browser.eval("document.readyState === 'complete' && !!window.Hls")
            == json!(true)),
        "the page and its hls.js load"
    );
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
    // What the player fetched: both playlists, the init segment and every media segment.
    let log = server.log_text();
    for name in ["master.m3u8", "media.m3u8", "init.mp4", "seg-0.m4s", "seg-1.m4s", "seg-2.m4s", "hls.min.js"]
    {
        assert!(log.contains(name), "the access log shows {name} fetched:\n{log}");
    }
    let shot = browser.call("Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    let name = format!("hls-player-{}.png", engine[1]);
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name), png).unwrap();
    eprintln!("played and seeked in {:?}: {r}", started.elapsed());
}

macro_rules! browser_matrix {
    ($($name:ident: [$($arg:expr),*];)+) => {$(
        #[test]
        fn $name() {
            hls_js_plays_the_demo(&[$($arg),*]);
        }
    )+};
}

browser_matrix! {
    uring: ["--engine", "uring", "--workers", "2"];
    epoll: ["--engine", "epoll", "--workers", "2"];
    threads: ["--engine", "threads"];
    tokio: ["--engine", "tokio", "--workers", "2"];
}
