//! `sluice load rtsp` end to end against a real RTSP server: GStreamer's, through
//! scripts/gst-rtsp-server.py (run by the system python3), serving the demo MP4 (180 video
//! frames) on a free loopback port. Five viewers over TCP and over UDP must each receive all 180
//! samples, without video loss or failure; the JSON report is read back with the library's type. The
//! server is a harness process: its own process group, stopped through that group (never by name).
//! scripts/test installs GStreamer; without it these tests fail and say which packages are missing.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use sluice_harness::gstreamer::GstRtspServer;

use sluice_load::rtsp::{RtspReport, RtspTransport};

const DEMO_VIDEO_FRAMES: u64 = 180;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// GStreamer's RTSP server (sluice-harness's launcher) with its work directory, stopped by
/// process group on drop.
struct GstServer {
    _server: GstRtspServer,
    url: String,
    _work: tempfile::TempDir,
}

impl GstServer {
    fn start(extra: &[&str]) -> GstServer {
        let work = tempfile::tempdir().unwrap();
        let demo = repo_root().join("crates/sluice-server/demo/sluice-demo.mp4");
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        let server = GstRtspServer::start(&demo, "demo.mp4", 0, &extra, work.path(), |_| {})
            .unwrap_or_else(|e| panic!("GStreamer's RTSP server: {e}"));
        let url = server.url.clone();
        GstServer { _server: server, url, _work: work }
    }
}

fn temp_json(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("sluice-load-rtsp-{}-{name}.json", std::process::id()))
}

/// Runs `sluice load rtsp` with `args` and returns its JSON report.
fn load_rtsp(url: &str, name: &str, args: &[&str]) -> RtspReport {
    let json = temp_json(name);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "rtsp", url, "--json"])
        .arg(&json)
        .args(["--duration", "40s", "--idle-end", "2s", "--threads", "2"])
        .args(args)
        .output()
        .expect("run sluice load rtsp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "sluice load rtsp failed: {}\n{stdout}\n{stderr}", out.status);
    let text = std::fs::read_to_string(&json).expect("the --json file");
    let _ = std::fs::remove_file(&json);
    let report = RtspReport::from_json(&text).expect("the JSON report reads back");
    assert!(stdout.contains("viewers received all"), "{stdout}");
    report
}

fn assert_every_viewer_got_every_sample(report: &RtspReport, clients: usize) {
    let s = &report.summary;
    let detail = || format!("{s:#?}\n{:#?}", report.viewers);
    assert_eq!(s.clients, clients, "{}", detail());
    assert_eq!(s.failures.total(), 0, "{}", detail());
    assert_eq!(s.playing_clients, clients, "{}", detail());
    for v in &report.viewers {
        assert_eq!(v.samples, DEMO_VIDEO_FRAMES, "viewer {}: {}", v.index, detail());
        assert!(v.audio_frames > 0, "viewer {} got no audio: {}", v.index, detail());
    }
    assert_eq!(s.perfect_clients, clients, "{}", detail());
    assert_eq!(s.reference_samples, DEMO_VIDEO_FRAMES);
    assert_eq!(s.samples_stdev, 0.0);
    assert_eq!(s.video_lost_packets, 0, "{}", detail());
    // Against GStreamer a viewer counts one audio packet lost, even over TCP where
    // nothing can be lost: a gap between the RTP-Info `seq` the server announces and its first
    // AAC packet. Video must be complete and nothing more may go missing.
    for v in &report.viewers {
        assert!(v.lost_packets <= 1, "viewer {}: {}", v.index, detail());
    }
    assert_eq!(s.ends.stream_end, clients as u64, "{}", detail());
}

fn every_viewer_gets_every_sample(transport: RtspTransport) {
    // Unshared media: every viewer's PLAY starts the file from its first frame, so each one
    // must get all 180. Shared media seeks the one pipeline back to 0 on every PLAY with the viewers'
    // `Range: npt=0.000-` (measured: 5 viewers over 1 s got 179 to 212 samples), see the script.
    let server = GstServer::start(&["--no-shared"]);
    let report = load_rtsp(
        &server.url,
        transport.name(),
        &["--clients", "5", "--transport", transport.name(), "--ramp", "1s"],
    );
    assert_eq!(report.settings.transport, transport);
    assert_every_viewer_got_every_sample(&report, 5);
}

#[test]
fn five_viewers_over_tcp_get_every_sample() {
    every_viewer_gets_every_sample(RtspTransport::Tcp);
}

#[test]
fn five_viewers_over_udp_get_every_sample() {
    every_viewer_gets_every_sample(RtspTransport::Udp);
}

#[test]
fn expected_count_stops_viewers_and_defines_perfect() {
    let server = GstServer::start(&["--no-shared"]);
    let report = load_rtsp(&server.url, "expect", &["--clients", "2", "--expect-samples", "30"]);
    let s = &report.summary;
    assert_eq!((s.perfect_clients, s.reference_samples, s.ends.expected), (2, 30, 2), "{s:#?}");
    assert!(report.viewers.iter().all(|v| v.samples == 30));
}

/// A ramp with a deadline before the file's end: every viewer plays less of it than the one
/// before, none loses anything, so each is perfect against what it was sent in its own time
/// (judged against the first viewer's count, only that one would be).
#[test]
fn viewers_cut_off_by_the_deadline_are_judged_by_what_they_were_sent() {
    let server = GstServer::start(&["--no-shared"]);
    let json = temp_json("ramp");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "rtsp", &server.url, "--json"])
        .arg(&json)
        .args(["--clients", "6", "--ramp", "3s", "--duration", "5s", "--idle-end", "2s", "--threads", "2"])
        .output()
        .expect("run sluice load rtsp");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "sluice load rtsp failed: {}\n{stdout}", out.status);
    let report = RtspReport::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let _ = std::fs::remove_file(&json);
    let s = &report.summary;
    let detail = || format!("{s:#?}\n{:#?}", report.viewers);
    assert_eq!(s.failures.total(), 0, "{}", detail());
    assert_eq!(s.ends.deadline, 6, "the deadline stops every viewer before the end: {}", detail());
    assert!(
        s.samples_max - s.samples_min >= 60,
        "the ramp gives the viewers different shares of the file: {}",
        detail()
    );
    for v in &report.viewers {
        // What a viewer was owed follows from how long it played: 30 frames a second, give or
        // take the first frame's wait and the frames in flight at the deadline.
        let played = v.playing_ms.unwrap() as f64 / 1000.0;
        let owed = v.expected_samples as f64;
        assert!(
            owed <= played * 30.0 + 15.0 && owed >= played * 30.0 - 30.0,
            "viewer {} played {played:.2} s and was owed {owed}: {}",
            v.index,
            detail()
        );
        assert_eq!(v.samples, v.expected_samples, "viewer {}: {}", v.index, detail());
        assert_eq!(v.video_lost_packets, 0, "viewer {}: {}", v.index, detail());
    }
    assert_eq!(s.perfect_clients, 6, "{}", detail());
    assert!(stdout.contains("6 of 6 viewers received all samples sent to them"), "{stdout}");
}

#[test]
fn non_loopback_targets_are_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "rtsp", "rtsp://192.0.2.1:554/x", "--clients", "1"])
        .output()
        .expect("run sluice load rtsp");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--allow-non-loopback"), "{stderr}");
}
