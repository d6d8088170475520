//! Camera sources (`[[source]]`), on every engine: GStreamer's RTSP server (the harness's, on a
//! free port, asking for a user and password by Digest) plays a 3 s 320x180 H.264 and AAC clip
//! as the camera; sluice pulls it into `/live/cam1` with the URL's credentials, and ffprobe
//! reads it from sluice and counts frames consistent with the clip. `/streams` shows the
//! source's state with the camera's URL without its password; a publisher is refused the path
//! (409). The camera is stopped: the path ends, `/streams` shows the source retrying with the
//! error; the camera is started again on the same port and the path is live and plays again
//! within the back-off.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::rtsp::*;
use common::*;
use sluice_harness::gstreamer::GstRtspServer;

rtsp_matrix!(a_camera_is_pulled_and_survives_its_restart);

/// The camera's clip: 3 s at 25 fps, a keyframe every 25 frames.
const CLIP_FRAMES: u64 = 75;

/// The credentials the camera asks for.
const USER: &str = "cam";
const PASSWORD: &str = "s3cret";

/// What a publisher announces (any valid H.264 SDP: it is refused before use).
const SDP: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n\
    a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z2QADKzZQUH7ARAAAAMAEAAAAwMg8UKZYA==,aOvjyyLA\r\n\
    a=control:streamid=0\r\n";

/// The back-off's ceiling in the test's configuration.
const RECONNECT_MAX: Duration = Duration::from_secs(1);

/// Writes the camera's clip into `dir`.
fn clip(dir: &Path) -> PathBuf {
    let path = dir.join("cam.mp4");
    let mut cmd = tool("ffmpeg");
    cmd.args([
        "-v",
        "error",
        "-f",
        "lavfi",
        "-i",
        "testsrc2=size=320x180:rate=25",
        "-f",
        "lavfi",
        "-i",
        "sine",
    ]);
    cmd.args(["-t", "3", "-c:v", "libx264", "-g", "25", "-c:a", "aac", "-y"]).arg(&path);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    assert!(status.success(), "ffmpeg: {}", String::from_utf8_lossy(&err));
    path
}

/// Starts the camera on `port`, serving `clip` at `/cam` (each viewer from the start).
fn camera(clip: &Path, port: u16, work: &Path) -> GstRtspServer {
    let extra = ["--no-shared".to_string(), "--digest".to_string(), format!("{USER}:{PASSWORD}")];
    GstRtspServer::start(clip, "cam", port, &extra, work, |_| {})
        .unwrap_or_else(|e| panic!("GStreamer's RTSP server: {e}"))
}

/// The `/streams` entry of the source `path`, and of its live path if live.
fn entries(server: &Server, path: &str) -> (serde_json::Value, Option<serde_json::Value>) {
    let streams: serde_json::Value = serde_json::from_str(&server.streams()).unwrap();
    let find =
        |list: &str| streams[list].as_array().and_then(|a| a.iter().find(|e| e["path"] == path).cloned());
    (find("sources").unwrap_or_else(|| panic!("{path} is not among the sources: {streams}")), find("live"))
}

/// Whether the source `path` is live and its media has come.
fn playing(server: &Server, path: &str) -> bool {
    let (source, live) = entries(server, path);
    source["state"] == "live" && live.is_some_and(|l| l["ready"] == true)
}

fn a_camera_is_pulled_and_survives_its_restart(engine: &[&str]) {
    let fx = Fixture::new();
    let work = fx.base.join("camera");
    std::fs::create_dir_all(&work).unwrap();
    let clip = clip(&work);
    let port = sluice_harness::port::free_port().unwrap();
    let mut cam = camera(&clip, port, &work);
    let config = format!(
        "[rtsp]\npublish_stall = \"1s\"\n\n\
         [[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
         [[source]]\npath = \"cam1\"\nurl = \"rtsp://{USER}:{PASSWORD}@127.0.0.1:{port}/cam\"\n\
         reconnect_min = \"200ms\"\nreconnect_max = \"1s\"\n"
    );
    fx.write("sluice.toml", config.as_bytes());
    let config = fx.path("sluice.toml");
    let server = Server::serve(engine, &fx, &["--config", config.to_str().unwrap()]);
    let url = format!("rtsp://{}/live/cam1", server.rtsp_addr());

    assert!(
        poll_until(IO_TIMEOUT, || playing(&server, "/live/cam1")),
        "the camera is pulled:\n{}\n{}",
        server.streams(),
        server.log_text()
    );
    let (source, live) = entries(&server, "/live/cam1");
    assert_eq!(source["url"], format!("rtsp://{USER}@127.0.0.1:{port}/cam"), "{source}");
    assert_eq!(source["rtsp"], url, "{source}");
    assert_eq!(live.unwrap()["publisher"], format!("127.0.0.1:{port}"));
    assert!(
        !server.streams().contains(PASSWORD) && !server.log_text().contains(PASSWORD),
        "the password is shown"
    );

    // No publisher takes a source's path.
    let mut c = RtspConn::open(server.rtsp_addr());
    let length = SDP.len().to_string();
    c.send_request("ANNOUNCE", &url, &[("Content-Type", "application/sdp"), ("Content-Length", &length)]);
    c.send_raw(SDP);
    c.response().unwrap().expect(409, "ANNOUNCE of a camera source's path");

    // Read from sluice while the camera plays its clip; the path ends when the clip does.
    let (frames, stderr) = ffprobe_video_frames(&url);
    let frames: u64 = frames.parse().unwrap_or_else(|_| panic!("ffprobe counted {frames:?}: {stderr}"));
    // The viewer joins within a second of the path being live, at the keyframe before (a GOP
    // of 25 frames earlier at most): it cannot see more than the clip, and misses at most 50.
    assert!(
        frames <= CLIP_FRAMES && frames + 50 >= CLIP_FRAMES,
        "ffprobe read {frames} of the camera's {CLIP_FRAMES} frames"
    );

    // The camera stops: the path ends for its viewers and the source retries, saying why.
    cam.stop();
    assert!(
        poll_until(IO_TIMEOUT, || {
            let (source, live) = entries(&server, "/live/cam1");
            source["state"] == "retrying"
                && source["last_error"].as_str().is_some_and(|e| e.contains("cannot connect"))
                && source["retry_in_secs"].as_u64().is_some_and(|s| s <= RECONNECT_MAX.as_secs())
                && live.is_none()
        }),
        "the source retries while the camera is away:\n{}",
        server.streams()
    );

    // Back on the same port, it is live again within the back-off's ceiling (and the exchange).
    let _cam = camera(&clip, port, &work);
    let back = Instant::now();
    assert!(
        poll_until(RECONNECT_MAX + Duration::from_secs(4), || playing(&server, "/live/cam1")),
        "the source is live again:\n{}\n{}",
        server.streams(),
        server.log_text()
    );
    let mut c = RtspConn::open(server.rtsp_addr());
    let describe = c.request("DESCRIBE", &url, &[]);
    describe.expect(200, "DESCRIBE of the camera's path once it is back");
    let sdp = String::from_utf8_lossy(&describe.body);
    assert!(sdp.contains("H264"), "{sdp}");
    let log = server.log_text();
    assert!(
        log.matches("camera source /live/cam1: live from").count() >= 2,
        "each time live is logged ({:?} after the restart):\n{log}",
        back.elapsed()
    );
}

/// `serve --check` prints a source without its password, and refuses a source whose URL is not
/// an `rtsp://` URL with the reason (exit 2), as `serve` would at start.
#[test]
fn sources_are_checked_and_shown_without_their_password() {
    let fx = Fixture::new();
    let check = |url: &str| {
        let text = format!("[[source]]\npath = \"cam1\"\nurl = \"{url}\"\n");
        fx.write("sluice.toml", text.as_bytes());
        let config = fx.path("sluice.toml");
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args(["serve", "--root", &fx.root_arg(), "--config", config.to_str().unwrap(), "--check"]);
        cmd.env_remove("SLUICE_CONFIG");
        let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(30));
        (
            status.code(),
            String::from_utf8_lossy(&out).into_owned(),
            String::from_utf8_lossy(&err).into_owned(),
        )
    };
    let (code, out, err) = check("rtsp://cam:s3cret@127.0.0.1:8554/cam");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("[[source]]\npath = \"cam1\"\nurl = \"rtsp://cam@127.0.0.1:8554/cam\"\n"), "{out}");
    assert!(
        out.contains("reconnect_min = \"1s\"\nreconnect_max = \"30s\"\n") && !out.contains("s3cret"),
        "{out}"
    );
    let (code, _, err) = check("http://cam:s3cret@127.0.0.1/cam");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("cam1") && err.contains("not an rtsp:// URL") && !err.contains("s3cret"), "{err}");
}
