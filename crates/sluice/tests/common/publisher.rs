//! A live publisher for the tests: ffmpeg sending a test source to a live path over RTSP,
//! killed by its pid and reaped when dropped, so a failing test leaves none behind.

use std::process::{Child, Command, Stdio};

use super::{tool, Server};

/// H.264 and AAC, a keyframe a second.
pub const H264_AAC: [&str; 6] = ["-c:v", "libx264", "-g", "25", "-c:a", "aac"];
/// H.265 and Opus, a keyframe a second.
pub const H265_OPUS: [&str; 8] = [
    "-c:v",
    "libx265",
    "-preset",
    "ultrafast",
    "-x265-params",
    "keyint=25:log-level=error",
    "-c:a",
    "libopus",
];

/// A publishing ffmpeg.
pub struct Publisher(pub Child);

/// The longest [`Publisher::finished`] waits.
pub const PUBLISH_LIMIT: std::time::Duration = std::time::Duration::from_secs(180);

impl Publisher {
    /// Sends `sig` to it.
    pub fn signal(&self, sig: libc::c_int) {
        // SAFETY: kill(2) on the pid of a child this test started and has not reaped.
        unsafe { libc::kill(self.0.id() as i32, sig) };
    }

    /// Waits for it to end; whether it succeeded. A publish lasts its `secs` in real time (a
    /// minute at most here): one still running [`PUBLISH_LIMIT`] after this is asked (a server
    /// that stopped reading holds ffmpeg's writes for ever) is killed, and has not succeeded.
    pub fn finished(&mut self) -> bool {
        let deadline = std::time::Instant::now() + PUBLISH_LIMIT;
        loop {
            match self.0.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(50))
                }
                Ok(None) | Err(_) => {
                    let _ = self.0.kill();
                    let _ = self.0.wait();
                    return false;
                }
            }
        }
    }
}

impl Drop for Publisher {
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// ffmpeg publishing `secs` of the test source (320x180, 25 fps, a sine tone) encoded with
/// `codecs` to `output` (its format options and URL), in real time.
pub fn publish_command(output: &[&str], codecs: &[&str], secs: u32) -> Command {
    let mut cmd = tool("ffmpeg");
    cmd.args(["-v", "error", "-re", "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25", "-f", "lavfi"]);
    cmd.args(["-i", "sine"]).args(codecs).args(["-t", &secs.to_string()]).args(output);
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    cmd
}

/// Starts ffmpeg publishing `secs` of the test source encoded with `codecs` to `url` over RTSP
/// `transport` (`tcp` or `udp`).
pub fn publish(url: &str, codecs: &[&str], transport: &str, secs: u32) -> Publisher {
    let output = ["-f", "rtsp", "-rtsp_transport", transport, url];
    Publisher(publish_command(&output, codecs, secs).spawn().expect("ffmpeg starts"))
}

/// ffmpeg publishing `secs` of the test source in H.264 and AAC to `url` over RTMP (FLV).
pub fn rtmp_command(url: &str, secs: u32) -> Command {
    publish_command(&["-f", "flv", url], &H264_AAC, secs)
}

/// Starts ffmpeg publishing `secs` of the test source over RTMP to `url`.
pub fn publish_rtmp(url: &str, secs: u32) -> Publisher {
    Publisher(rtmp_command(url, secs).spawn().expect("ffmpeg starts"))
}

/// The `/streams` entry of live path `path`, if listed.
pub fn live_entry(server: &Server, path: &str) -> Option<serde_json::Value> {
    let streams: serde_json::Value = serde_json::from_str(&server.streams()).ok()?;
    streams["live"].as_array()?.iter().find(|e| e["path"] == path).cloned()
}

/// A live viewer's count of the frames of a 4 s publish (`PUBLISHED_FRAMES`, 100 at 25 fps), as
/// ffprobe printed it with its `stderr`: the viewer joins within a second of the path being
/// listed (at most 25 frames in, as the encoder starts ahead of real time only by its
/// lookahead), at the keyframe before its PLAY (at most a GOP, 25 frames, earlier), so it cannot
/// see more than was published and misses at most those 50. `since` is when the path was listed.
pub fn assert_live_viewer_frames(path: &str, (frames, stderr): (String, String), since: std::time::Instant) {
    let frames: u64 =
        frames.parse().unwrap_or_else(|_| panic!("{path}: ffprobe counted {frames:?}: {stderr}"));
    assert!(
        frames <= PUBLISHED_FRAMES && frames + 50 >= PUBLISHED_FRAMES,
        "{path}: ffprobe read {frames} of {PUBLISHED_FRAMES} frames published, done {:?} after it was listed",
        since.elapsed()
    );
}

/// Frames a live test publishes: 4 s at 25 fps.
pub const PUBLISHED_FRAMES: u64 = 100;
