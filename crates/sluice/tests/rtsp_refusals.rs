//! RTSP refuses what it cannot stream, and says why, on every engine: a fragmented MP4 with no
//! complete fragment yet (made by ffmpeg here with `-movflags frag_keyframe+empty_moov`, cut
//! inside its first `moof`), an MP4 whose only track is MPEG-4
//! Part 2 video, and a file named `.mp4` that is not an MP4 are answered at `DESCRIBE`, `SETUP`
//! and `PLAY` with the status HLS answers for the same file (501, 415, 500), the reason in the
//! `Sluice-Reason` header and in the body, and one warning each in the log however many requests
//! were refused. Beside them the demo MP4 still plays to its last frame (ffprobe counts them).

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::rtsp::*;
use common::*;

rtsp_matrix!(files_rtsp_cannot_stream_are_refused_with_the_reason);

const DEMO_NAME: &str = "sluice-demo.mp4";

fn demo_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-server/demo/sluice-demo.mp4")
}

/// Runs ffmpeg with `args`, writing `out`; its bytes.
fn ffmpeg(args: &[&str], out: &Path) -> Vec<u8> {
    let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
    cmd.args(["-v", "error", "-y"]).args(args).arg(out);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "ffmpeg {args:?}: {status}: {}", String::from_utf8_lossy(&err));
    std::fs::read(out).unwrap()
}

/// One file RTSP cannot stream, and what it must be answered.
struct Refused {
    name: &'static str,
    status: u16,
    /// Words of the reason.
    reason: &'static str,
}

const REFUSED: [Refused; 3] = [
    Refused { name: "fragmented.mp4", status: 501, reason: "fragmented MP4" },
    Refused {
        name: "mpeg4-part2.mp4",
        status: 415,
        reason: "no H.264, HEVC, AV1, VP9, AAC, Opus, AC-3 or E-AC-3 track",
    },
    Refused { name: "not-an-mp4.mp4", status: 500, reason: "not a playable MP4" },
];

/// The demo, and the three files RTSP cannot stream.
fn library() -> Fixture {
    let fx = Fixture::new();
    let demo = demo_path();
    fx.write(DEMO_NAME, &std::fs::read(&demo).unwrap());
    let work = tempfile::tempdir().unwrap();
    let demo = demo.to_str().unwrap();
    let fragmented = ffmpeg(
        &["-i", demo, "-c", "copy", "-movflags", "frag_keyframe+empty_moov", "-f", "mp4"],
        &work.path().join("f.mp4"),
    );
    let first_moof = fragmented.windows(4).position(|w| w == b"moof").unwrap() - 4;
    fx.write(REFUSED[0].name, &fragmented[..first_moof + 16]);
    let part2 = ffmpeg(
        &["-f", "lavfi", "-i", "testsrc=size=160x120:rate=10", "-t", "1", "-c:v", "mpeg4", "-f", "mp4"],
        &work.path().join("p.mp4"),
    );
    fx.write(REFUSED[1].name, &part2);
    fx.write(REFUSED[2].name, b"a text file under an .mp4 name\n");
    fx
}

#[track_caller]
fn expect_refused(r: &RtspResponse, file: &Refused, what: &str) {
    r.expect(file.status, what);
    let reason = r.header("sluice-reason").unwrap_or_else(|| panic!("{what}: no Sluice-Reason:\n{r:?}"));
    assert!(
        reason.contains(file.reason) && reason.contains(file.name),
        "{what}: the reason names the file and the problem ({}): {reason:?}",
        file.reason
    );
    let body = String::from_utf8_lossy(&r.body);
    assert!(
        body.starts_with(&format!("{} ", file.status)) && body.contains(reason),
        "{what}: the body gives the status and the reason:\n{r:?}"
    );
}

fn files_rtsp_cannot_stream_are_refused_with_the_reason(engine: &[&str]) {
    let fx = library();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = RtspConn::open(server.rtsp_addr());
    for file in &REFUSED {
        // Asked several times, in every way a client may start.
        for round in 0..2 {
            let url = c.url(file.name);
            expect_refused(
                &c.request("DESCRIBE", &url, &[]),
                file,
                &format!("DESCRIBE {} #{round}", file.name),
            );
            let track = format!("{url}/trackID=0");
            let r = c.request("SETUP", &track, &[("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")]);
            expect_refused(&r, file, &format!("SETUP {}", file.name));
            let r = c.request("PLAY", &url, &[("Session", "0123456789abcdef")]);
            expect_refused(&r, file, &format!("PLAY {}", file.name));
        }
        // HLS answers the same file with the same status.
        let hls = fetch_get(server.addr(), &format!("/{}/master.m3u8", file.name), &[]);
        assert_eq!(hls.status, file.status, "HLS and RTSP agree on {}: {:?}", file.name, hls.raw_head);
    }
    // A file that is not there is still 404, without a reason header.
    let r = c.request("DESCRIBE", &c.url("missing.mp4"), &[]);
    r.expect(404, "DESCRIBE of a missing file");
    assert!(r.header("sluice-reason").is_none(), "{r:?}");
    drop(c);

    // One warning per file, naming it and the reason, for the six requests refused each.
    let warned = |name: &str| {
        server
            .logs()
            .iter()
            .filter(|l| l.contains("WARN") && l.contains("cannot stream") && l.contains(name))
            .count()
    };
    assert!(
        poll_until(IO_TIMEOUT, || REFUSED.iter().all(|f| warned(f.name) >= 1)),
        "a warning for each refused file:\n{}",
        server.log_text()
    );
    for file in &REFUSED {
        assert_eq!(warned(file.name), 1, "one warning for {}:\n{}", file.name, server.log_text());
    }

    // The demo beside them plays to its last frame.
    let url = format!("rtsp://{}/{DEMO_NAME}", server.rtsp_addr());
    let (frames, stderr) = ffprobe_video_frames(&url);
    let (expected, _) = ffprobe_video_frames(demo_path().to_str().unwrap());
    assert_eq!(frames, expected, "video frames of the demo over RTSP vs in the file (stderr: {stderr})");
    assert!(stderr.trim().is_empty(), "ffprobe reported errors reading {url}: {stderr}");
}
