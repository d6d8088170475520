//! Headless Chromium driven over the DevTools protocol on a pipe (Debian's `chromium`, no
//! network beyond 127.0.0.1), and the script that plays a library page's first HLS video through
//! to its end and seeks; for the tests that play HLS in a real browser.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::{mpsc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use super::require_tool;

/// Held while a browser runs, so that two browsers never compete for the two cores of CI.
pub static ONE_BROWSER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The engine a browser test runs its server on. One engine: a browser is the slowest kind of
/// test (the suite's time budget is 40 minutes on 2 cores), what it checks is the player's reading
/// of what sluice wrote, and the bytes each engine sends for the same resources are checked on
/// every engine by the tests without a browser (`hls`, `dash`, `codecs`, `iframes`, `hls_edge`).
pub const BROWSER_ENGINE: &[&str] = &["--engine", "epoll", "--workers", "2"];

/// The longest one DevTools command may take, a script awaiting playback included (the longest
/// the tests await is a clip played to its end, under a minute): past it the browser is taken
/// to be hung and the test fails saying so, rather than waiting as long as the suite runs.
const CALL_LIMIT: Duration = Duration::from_secs(180);

/// Chromium with its DevTools protocol on fds 3 (commands in) and 4 (replies out).
pub struct Browser {
    process: sluice_harness::Process,
    commands: File,
    /// The browser's messages, read off its pipe by a thread of their own so that a wait for
    /// one is bounded ([`CALL_LIMIT`]); the channel closes with the pipe.
    replies: mpsc::Receiver<Vec<u8>>,
    next_id: u64,
    /// The page session commands go to, once attached.
    pub session: Option<String>,
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
    /// Starts headless Chromium on `about:blank`.
    pub fn start() -> Browser {
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
        .arg("about:blank");
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
        // A harness process: Chromium's helper processes share its group and stop with it.
        let process =
            sluice_harness::Process::spawn_with_temp_log("chromium", cmd).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: the browser has its copies now; ours of its ends are closed, and the ends we
        // keep are owned by the Files from here on.
        let (commands, from_browser) = unsafe {
            libc::close(to_browser_r);
            libc::close(from_browser_w);
            (File::from_raw_fd(to_browser_w), File::from_raw_fd(from_browser_r))
        };
        let (sender, replies) = mpsc::channel();
        std::thread::spawn(move || {
            let mut from_browser = BufReader::new(from_browser);
            loop {
                let mut message = Vec::new();
                match from_browser.read_until(0, &mut message) {
                    Ok(n) if n > 0 && sender.send(message).is_ok() => {}
                    _ => return,
                }
            }
        });
        Browser { process, commands, replies, next_id: 0, session: None, _profile: profile }
    }

    /// Sends a command (to the attached page, once attached) and waits for its reply, skipping
    /// events; panics on a protocol error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut msg = json!({ "id": id, "method": method, "params": params });
        if let Some(s) = &self.session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        let deadline = std::time::Instant::now() + CALL_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let mut buf = match self.replies.recv_timeout(left) {
                Ok(buf) => buf,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the browser closed its DevTools pipe during {method}{}",
                        self.process.log_tail(20)
                    )
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!(
                    "the browser did not answer {method} within {CALL_LIMIT:?} ({params}){}",
                    self.process.log_tail(20),
                    params = msg["params"].to_string().chars().take(300).collect::<String>()
                ),
            };
            if buf.last() == Some(&0) {
                buf.pop();
            }
            let reply: Value = serde_json::from_slice(&buf).unwrap();
            if reply["id"] == json!(id) {
                assert!(reply.get("error").is_none(), "{method}: {reply}");
                return reply["result"].clone();
            }
        }
    }

    /// Evaluates `expression` in the page, awaiting a promise; its value.
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.call(
            "Runtime.evaluate",
            json!({ "expression": expression, "awaitPromise": true, "returnByValue": true }),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }
}

impl Browser {
    /// Attaches to the browser's page and loads `url` in it, waiting (bounded) until it and
    /// its hls.js have loaded.
    pub fn open_page(&mut self, url: &str) {
        self.open_until(url, "!!window.Hls", "the page and its hls.js load");
    }

    /// Attaches to the browser's page and loads `url` in it, waiting (bounded) until it has
    /// loaded and `ready` (a script expression) is true; `what` names the wait in a failure.
    pub fn open_until(&mut self, url: &str, ready: &str, what: &str) {
        let targets = self.call("Target.getTargets", json!({}));
        let page =
            targets["targetInfos"].as_array().unwrap().iter().find(|t| t["type"] == "page").unwrap().clone();
        let attached =
            self.call("Target.attachToTarget", json!({ "targetId": page["targetId"], "flatten": true }));
        self.session = Some(attached["sessionId"].as_str().unwrap().to_string());
        self.call("Page.navigate", json!({ "url": url }));
        let expression = format!("document.readyState === 'complete' && ({ready})");
        assert!(super::poll_until(super::IO_TIMEOUT, || self.eval(&expression) == json!(true)), "{what}");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // No grace: Chromium and its helpers (its process group) are killed at once.
        self.process.stop(std::time::Duration::ZERO);
    }
}

/// Presses Play on the first packaged video, waits (at most 30 s) for the end, seeks to the
/// middle and waits for half a second of playback after the seek.
pub const PLAY_THROUGH: &str = r#"(async () => {
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
