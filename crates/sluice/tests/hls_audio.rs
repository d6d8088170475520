//! HLS presents audio and video when the MP4 does, on every engine: for an MP4 made by ffmpeg
//! here (H.264 with B-frames, AAC at 44.1 kHz, whose encoder delay of 1,024 samples ffmpeg writes
//! as an edit list), ffprobe reading the server's `master.m3u8` finds each track's first packet at
//! the presentation time it finds in the MP4 itself (within 1 ms), so the audio keeps its place
//! against the video; and ffmpeg decodes the packaging without a complaint.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;

engine_matrix!(hls_audio_starts_where_the_mp4_starts_it);

const NAME: &str = "av-primed.mp4";

/// The MP4 (3 s of 320x240 H.264 at 25 fps with two B-frames, and a 440 Hz tone in AAC),
/// made once per test process.
fn primed_mp4() -> &'static Vec<u8> {
    static FILE: OnceLock<Vec<u8>> = OnceLock::new();
    FILE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join(NAME);
        let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
        cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=320x240:rate=25"])
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100", "-t", "3"])
            .args(["-c:v", "libx264", "-bf", "2", "-g", "25", "-pix_fmt", "yuv420p"])
            .args(["-c:a", "aac", "-shortest", "-movflags", "+faststart"])
            .arg(&out);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
        assert!(status.success(), "ffmpeg: {status}: {}", String::from_utf8_lossy(&err));
        std::fs::read(&out).unwrap()
    })
}

/// The presentation time (seconds) of the first packet of the video and of the audio stream,
/// as ffprobe reads `target`.
fn first_pts(target: &str) -> (f64, f64) {
    let mut cmd = Command::new(require_tool("ffprobe", "ffmpeg"));
    for v in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    cmd.args(["-v", "error", "-rw_timeout", "10000000", "-of", "json"])
        .args(["-show_entries", "stream=index,codec_type:packet=stream_index,pts_time", "-show_packets"])
        .arg(target);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "ffprobe {target}: {status}: {}", String::from_utf8_lossy(&err));
    let info: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let index_of = |kind: &str| {
        info["streams"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["codec_type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} stream in {target}"))["index"]
            .as_u64()
            .unwrap()
    };
    let first = |kind: &str| {
        let index = index_of(kind);
        let packet = info["packets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["stream_index"].as_u64() == Some(index))
            .unwrap_or_else(|| panic!("no {kind} packet in {target}"));
        packet["pts_time"].as_str().unwrap().parse::<f64>().unwrap()
    };
    (first("video"), first("audio"))
}

fn hls_audio_starts_where_the_mp4_starts_it(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write(NAME, primed_mp4());
    let file: PathBuf = fx.path(NAME);
    let (mp4_video, mp4_audio) = first_pts(file.to_str().unwrap());
    // The AAC encoder's priming is presented before 0 (ffmpeg marks the samples to skip): the
    // case this test is about.
    assert!(mp4_audio < -0.020, "the MP4's audio starts with priming: first packet at {mp4_audio}");
    assert!(mp4_video.abs() < 1e-9, "the MP4's video starts at 0: {mp4_video}");

    let server = Server::serve(engine, &fx, &["--hls-segment", "1s"]);
    let master = format!("http://{}/{NAME}/master.m3u8", server.addr());
    let (hls_video, hls_audio) = first_pts(&master);
    let ms = |s: f64| format!("{:.3} ms", s * 1000.0);
    assert!(
        (hls_audio - mp4_audio).abs() < 0.001,
        "the first audio packet over HLS at {}, in the MP4 at {}",
        ms(hls_audio),
        ms(mp4_audio)
    );
    assert!(
        (hls_video - mp4_video).abs() < 0.001,
        "the first video packet over HLS at {}, in the MP4 at {}",
        ms(hls_video),
        ms(mp4_video)
    );
    let (hls_gap, mp4_gap) = (hls_audio - hls_video, mp4_audio - mp4_video);
    assert!(
        (hls_gap - mp4_gap).abs() < 0.001,
        "audio starts {} after the video over HLS, {} in the MP4",
        ms(hls_gap),
        ms(mp4_gap)
    );

    // ffmpeg decodes the packaging to the end without a word.
    let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
    cmd.args(["-v", "error", "-rw_timeout", "10000000", "-i", &master, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&err);
    assert!(status.success() && stderr.trim().is_empty(), "ffmpeg decoding {master}: {status}: {stderr}");
}
