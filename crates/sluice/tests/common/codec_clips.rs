//! Short clips of every codec sluice packages beyond H.264 and AAC, made by ffmpeg once per test
//! binary (2 s of 160x90 at 25 fps, a keyframe a second, a 440 Hz tone): what tests/codecs.rs
//! plays through ffmpeg and tests/codecs_browser.rs through Chromium.

#![allow(dead_code)]

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use super::*;

/// The clips: `(name, video encoder arguments, audio encoder arguments)`.
pub const CLIPS: &[(&str, &[&str], &[&str])] = &[
    (
        "hevc8-hev1-eac3.mp4",
        &["-c:v", "libx265", "-preset", "ultrafast", "-x265-params", "log-level=error:keyint=25:open-gop=0"],
        &["-c:a", "eac3", "-b:a", "96k"],
    ),
    (
        "hevc10-hvc1-ac3.mp4",
        &[
            "-c:v",
            "libx265",
            "-preset",
            "ultrafast",
            "-x265-params",
            "log-level=error:keyint=25:open-gop=0",
            "-pix_fmt",
            "yuv420p10le",
            "-tag:v",
            "hvc1",
        ],
        &["-c:a", "ac3", "-b:a", "96k"],
    ),
    (
        "av1-pq-opus.mp4",
        &[
            "-c:v",
            "libsvtav1",
            "-preset",
            "12",
            "-g",
            "25",
            "-pix_fmt",
            "yuv420p10le",
            "-color_primaries",
            "bt2020",
            "-color_trc",
            "smpte2084",
            "-colorspace",
            "bt2020nc",
        ],
        &["-c:a", "libopus", "-b:a", "48k"],
    ),
    (
        "vp9-opus.mp4",
        &["-c:v", "libvpx-vp9", "-deadline", "realtime", "-cpu-used", "8", "-g", "25"],
        &["-c:a", "libopus", "-b:a", "48k"],
    ),
];

/// The clips' bytes, made once per test binary.
pub fn clips() -> &'static Vec<(&'static str, Vec<u8>)> {
    static CLIPS_MADE: OnceLock<Vec<(&'static str, Vec<u8>)>> = OnceLock::new();
    CLIPS_MADE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        CLIPS
            .iter()
            .map(|(name, video, audio)| {
                let out = dir.path().join(name);
                let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
                cmd.args([
                    "-nostdin",
                    "-v",
                    "error",
                    "-y",
                    "-f",
                    "lavfi",
                    "-i",
                    "testsrc2=size=160x90:rate=25",
                ])
                .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2"])
                .args(*video)
                .args(*audio)
                .args(["-movflags", "+faststart"])
                .arg(&out);
                let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
                assert!(status.success(), "ffmpeg made no {name}: {}", String::from_utf8_lossy(&err));
                (*name, std::fs::read(&out).unwrap())
            })
            .collect()
    })
}
