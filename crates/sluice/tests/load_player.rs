//! `sluice load http --hls/--dash`, the stream players, against servers playing real packaging:
//! sluice's own per-file HLS on every engine, and nginx serving what ffmpeg packaged beforehand
//! (`-f hls` with fMP4 segments and two renditions, `-f dash` with two video representations and
//! separate audio) from a short clip made here. Each viewer fetches every segment once and the
//! bytes it counts are the files' sizes; a missing segment (404) is a failed request and spoils
//! the viewer; real-time pacing makes the clip last at least its duration; with a toxiproxy
//! bandwidth toxic in front of nginx, throughput-based switching goes down a rendition.
//!
//! Performance is never asserted: only counts, bytes and lower bounds of time. Every server and
//! proxy listens on a free loopback port and is stopped by its pid or process group.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use serde_json::Value;
use sluice_harness::toxiproxy::{Stream, Toxiproxy};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");

/// Length of the clip made for nginx, seconds (four 2 s segments a rendition).
const CLIP_SECONDS: f64 = 8.0;

/// Runs `sluice load http ARGS --json -` and returns its exit success and report.
fn player(args: &[&str]) -> (bool, Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["load", "http"]).args(args).args(["--quiet", "--no-progress", "--threads", "1", "--json", "-"]);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let report: Value = serde_json::from_slice(&out).unwrap_or_else(|e| {
        panic!("sluice load {args:?}: {e}; {status}; stderr: {}", String::from_utf8_lossy(&err))
    });
    (status.success(), report)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every viewer fetched `segments` segments of `segment_bytes` and `init_bytes`, no failure.
fn assert_every_viewer(report: &Value, viewers: u64, segments: u64, segment_bytes: u64, init_bytes: u64) {
    let s = &report["summary"];
    assert_eq!(u(&s["viewers"]), viewers, "{report:#}");
    assert_eq!(u(&s["perfect"]), viewers, "{report:#}");
    assert_eq!(u(&s["failed_requests"]), 0, "{report:#}");
    assert_eq!(u(&s["segments"]), viewers * segments, "{report:#}");
    for v in report["viewers"].as_array().unwrap() {
        assert_eq!(u(&v["segments"]), segments, "{v}");
        assert_eq!(u(&v["segment_bytes"]), segment_bytes, "{v}");
        assert_eq!(u(&v["init_bytes"]), init_bytes, "{v}");
        assert_eq!(v["end"], "complete", "{v}");
    }
}

fn players_fetch_every_segment_of_sluice_hls_once(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("films/demo.mp4", &std::fs::read(DEMO).unwrap());
    let server = Server::serve(engine, &fx, &["--hls-segment", "2s"]);
    let addr = server.addr();
    let base = "/films/demo.mp4";
    // The master lists the video rendition and its audio group (per-track CMAF): a player fetches
    // both playlists, both init segments and every segment of each. What they weigh, read with the
    // tests' own client.
    let (mut segments, mut sizes, mut init, mut video_segments) = (0u64, 0u64, 0u64, 0u64);
    for track in ["video", "audio"] {
        let playlist = fetch_get(addr, &format!("{base}/{track}.m3u8"), &[]);
        let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(&playlist.body).unwrap() else {
            panic!("{track}.m3u8 is not a media playlist")
        };
        segments += p.segments.len() as u64;
        if track == "video" {
            video_segments = p.segments.len() as u64;
        }
        sizes += p
            .segments
            .iter()
            .map(|s| fetch_get(addr, &format!("{base}/{}", s.uri), &[]).body.len() as u64)
            .sum::<u64>();
        init += fetch_get(addr, &format!("{base}/{track}-init.mp4"), &[]).body.len() as u64;
    }
    let url = format!("http://{addr}{base}/master.m3u8");
    let (ok, report) = player(&["--hls", &url, "--vus", "3", "--pace", "fast"]);
    assert!(ok, "{report:#}");
    assert_eq!(report["kind"], "hls");
    assert_eq!(u(&report["audio_tracks"]), 1, "{report:#}");
    assert_every_viewer(&report, 3, segments, sizes, init);
    assert_eq!(u(&report["renditions"][0]["segments"]), video_segments, "{report:#}");
    assert_eq!(u(&report["renditions"][0]["segments_played"]), 3 * video_segments, "{report:#}");
}

engine_matrix!(players_fetch_every_segment_of_sluice_hls_once);

/// ffmpeg's static packaging of one clip: `hls/` (fMP4, a 720p and a 360p variant with muxed
/// audio, 2 s segments) and `dash/` (two video representations and an audio one, SegmentTemplate
/// with SegmentTimeline and $Number$). Made once into cargo's test scratch directory and kept
/// there for later runs (made aside, then renamed into place whole).
fn packaged() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let done = Path::new(env!("CARGO_TARGET_TMPDIR")).join("load-player-clip-1");
        if done.join("dash/manifest.mpd").is_file() {
            return done;
        }
        let dir =
            Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("load-player-clip-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("hls")).unwrap();
        std::fs::create_dir_all(dir.join("dash")).unwrap();
        let input = [
            "-f",
            "lavfi",
            "-i",
            &format!("testsrc2=size=1280x720:rate=25:duration={CLIP_SECONDS}"),
            "-f",
            "lavfi",
            "-i",
            &format!("sine=frequency=440:sample_rate=48000:duration={CLIP_SECONDS}"),
        ]
        .map(String::from);
        let encode = [
            "-c:v",
            "libx264",
            "-preset",
            "ultrafast",
            "-g",
            "50",
            "-keyint_min",
            "50",
            "-sc_threshold",
            "0",
            "-b:v:0",
            "1500k",
            "-maxrate:v:0",
            "1500k",
            "-bufsize:v:0",
            "3000k",
            "-s:v:1",
            "640x360",
            "-b:v:1",
            "200k",
            "-maxrate:v:1",
            "200k",
            "-bufsize:v:1",
            "400k",
            "-c:a",
            "aac",
            "-b:a",
            "64k",
        ];
        let ffmpeg = |args: &[&str], cwd: &Path| {
            let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
            cmd.current_dir(cwd).args(["-nostdin", "-v", "error", "-y"]).args(&input).args(args);
            let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
            assert!(status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&err));
        };
        let hls: Vec<&str> = ["-map", "0:v", "-map", "0:v", "-map", "1:a", "-map", "1:a"]
            .into_iter()
            .chain(encode)
            .chain([
                "-f",
                "hls",
                "-hls_time",
                "2",
                "-hls_playlist_type",
                "vod",
                "-hls_segment_type",
                "fmp4",
                "-var_stream_map",
                "v:0,a:0 v:1,a:1",
                "-master_pl_name",
                "master.m3u8",
                "-hls_segment_filename",
                "v%v/seg-%d.m4s",
                "-hls_fmp4_init_filename",
                "init.mp4",
                "v%v/media.m3u8",
            ])
            .collect();
        ffmpeg(&hls, &dir.join("hls"));
        let dash: Vec<&str> = ["-map", "0:v", "-map", "0:v", "-map", "1:a"]
            .into_iter()
            .chain(encode)
            .chain([
                "-f",
                "dash",
                "-seg_duration",
                "2",
                "-use_template",
                "1",
                "-use_timeline",
                "1",
                "-adaptation_sets",
                "id=0,streams=v id=1,streams=a",
                "manifest.mpd",
            ])
            .collect();
        ffmpeg(&dash, &dir.join("dash"));
        if std::fs::rename(&dir, &done).is_err() {
            // Another run put it in place first.
            let _ = std::fs::remove_dir_all(&dir);
        }
        done
    })
}

/// Total size of the files in `dir` whose names satisfy `pick`.
fn size_of(dir: &Path, pick: impl Fn(&str) -> bool) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| pick(&e.file_name().to_string_lossy()))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn count_of(dir: &Path, pick: impl Fn(&str) -> bool) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| pick(&e.as_ref().unwrap().file_name().to_string_lossy()))
        .count() as u64
}

/// nginx (sluice-harness's launcher) serving `root` as static files on a free loopback port;
/// stopped (its process group) on drop.
struct Nginx {
    _nginx: sluice_harness::nginx::Nginx,
    addr: std::net::SocketAddr,
    _work: tempfile::TempDir,
}

impl Nginx {
    fn serve(root: &Path) -> Nginx {
        let work = tempfile::tempdir().unwrap();
        let port = free_port();
        let w = work.path().display();
        // SAFETY: geteuid has no preconditions.
        let user = if unsafe { libc::geteuid() } == 0 { "user root;\n" } else { "" };
        let conf = format!(
            "{user}daemon off;\nworker_processes 1;\npid {w}/nginx.pid;\nerror_log {w}/error.log warn;\n\
             events {{ worker_connections 256; }}\nhttp {{\n  access_log off;\n  sendfile on;\n\
             types {{ application/vnd.apple.mpegurl m3u8; application/dash+xml mpd; video/mp4 mp4 m4s; }}\n\
             client_body_temp_path {w}/body;\n  proxy_temp_path {w}/proxy;\n  fastcgi_temp_path {w}/fastcgi;\n\
             uwsgi_temp_path {w}/uwsgi;\n  scgi_temp_path {w}/scgi;\n\
             server {{ listen 127.0.0.1:{port}; root {}; }}\n}}\n",
            root.display()
        );
        let nginx = sluice_harness::nginx::Nginx::start(&conf, port, work.path(), |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        Nginx { _nginx: nginx, addr: std::net::SocketAddr::from(([127, 0, 0, 1], port)), _work: work }
    }
}

#[test]
fn players_fetch_every_segment_of_ffmpegs_hls_and_dash_from_nginx() {
    let dir = packaged();
    let nginx = Nginx::serve(dir);
    let addr = nginx.addr;

    // HLS, each rendition on its own: its segments (audio muxed in) and its init, once a viewer.
    for (index, sub) in [(0, "v0"), (1, "v1")] {
        let d = dir.join("hls").join(sub);
        let url = format!("http://{addr}/hls/master.m3u8");
        let (ok, report) =
            player(&["--hls", &url, "--vus", "2", "--pace", "fast", "--rendition", &index.to_string()]);
        assert!(ok, "{report:#}");
        let segments = count_of(&d, |n| n.ends_with(".m4s"));
        assert_eq!(segments, 4);
        assert_every_viewer(
            &report,
            2,
            segments,
            size_of(&d, |n| n.ends_with(".m4s")),
            size_of(&d, |n| n.starts_with("init")),
        );
        assert_eq!(report["renditions"].as_array().unwrap().len(), 2);
        assert_eq!(u(&report["renditions"][index]["segments_played"]), 2 * segments);
    }

    // DASH at 720p: the video representation's segments and the audio's, each with its init.
    let d = dir.join("dash");
    let url = format!("http://{addr}/dash/manifest.mpd");
    let (ok, report) = player(&["--dash", &url, "--vus", "2", "--pace", "fast", "--rendition", "720p"]);
    assert!(ok, "{report:#}");
    assert_eq!(report["kind"], "dash");
    assert_eq!(u(&report["audio_tracks"]), 1, "{report:#}");
    let video_and_audio = |n: &str| n.starts_with("chunk-stream0-") || n.starts_with("chunk-stream2-");
    let inits = |n: &str| n == "init-stream0.m4s" || n == "init-stream2.m4s";
    assert_every_viewer(
        &report,
        2,
        count_of(&d, video_and_audio),
        size_of(&d, video_and_audio),
        size_of(&d, inits),
    );
}

#[test]
fn a_missing_segment_is_a_failed_request_and_spoils_the_viewer() {
    let src = packaged().join("hls");
    let copy = tempfile::tempdir().unwrap();
    for sub in ["", "v0", "v1"] {
        std::fs::create_dir_all(copy.path().join(sub)).unwrap();
        for e in std::fs::read_dir(src.join(sub)).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), copy.path().join(sub).join(e.file_name())).unwrap();
            }
        }
    }
    let gone = copy.path().join("v1/seg-2.m4s").metadata().unwrap().len();
    std::fs::remove_file(copy.path().join("v1/seg-2.m4s")).unwrap();
    let nginx = Nginx::serve(copy.path());
    let url = format!("http://{}/master.m3u8", nginx.addr);
    let (ok, report) = player(&["--hls", &url, "--vus", "2", "--pace", "fast", "--rendition", "360p"]);
    assert!(ok, "the other segments played: {report:#}");
    let s = &report["summary"];
    assert_eq!((u(&s["failed_requests"]), u(&s["errors"]["bad_status"])), (2, 2), "{report:#}");
    assert_eq!(u(&s["perfect"]), 0, "{report:#}");
    let d = copy.path().join("v1");
    for v in report["viewers"].as_array().unwrap() {
        assert_eq!(u(&v["segments"]), 3, "the rest still fetched: {v}");
        assert_eq!(u(&v["segment_bytes"]), size_of(&d, |n| n.ends_with(".m4s")), "{v}");
        assert!(v["error"].as_str().unwrap().contains("seg-2.m4s"), "{v}");
        assert!(v["error"].as_str().unwrap().contains("404"), "{v}");
    }
    assert!(gone > 0);
}

#[test]
fn real_time_pacing_lasts_the_clip() {
    let nginx = Nginx::serve(packaged());
    let url = format!("http://{}/hls/master.m3u8", nginx.addr);
    let started = std::time::Instant::now();
    let (ok, report) = player(&["--hls", &url, "--vus", "2", "--rendition", "lowest", "--buffer", "2s"]);
    let took = started.elapsed().as_secs_f64();
    assert!(ok, "{report:#}");
    assert_eq!(u(&report["summary"]["segments"]), 8, "{report:#}");
    assert_eq!(u(&report["summary"]["complete"]), 2, "{report:#}");
    // A viewer stays until its playhead reaches the end: at least the clip's length (a lower
    // bound only; stalls on a busy machine may make it longer).
    assert!(took >= CLIP_SECONDS, "{took} s for an {CLIP_SECONDS} s clip: {report:#}");
    assert!(report["summary"]["startup"]["count"].as_u64().unwrap() == 2, "{report:#}");
}

#[test]
fn switching_goes_down_a_rendition_when_bandwidth_is_limited() {
    assert!(
        Toxiproxy::available(),
        "toxiproxy missing: go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 (scripts/test does)"
    );
    let nginx = Nginx::serve(packaged());
    let log = tempfile::tempdir().unwrap();
    let toxiproxy = Toxiproxy::start(&log.path().join("toxiproxy.log")).unwrap();
    let front = toxiproxy.proxy("nginx", nginx.addr).unwrap();
    // 100 KB/s (0.8 Mbit/s): the 720p variant (1.7 Mbit/s declared) cannot keep up, 360p can.
    toxiproxy.add_toxic("nginx", "narrow", "bandwidth", Stream::Downstream, 1.0, r#"{"rate":100}"#).unwrap();
    let url = format!("http://{front}/hls/master.m3u8");
    let (ok, report) = player(&["--hls", &url, "--vus", "1", "--pace", "fast", "--timeout", "20s"]);
    assert!(ok, "{report:#}");
    let s = &report["summary"];
    assert!(u(&s["switches_down"]) >= 1, "the first-listed 720p is too much for the link: {report:#}");
    assert!(u(&report["renditions"][1]["segments_played"]) >= 1, "{report:#}");
    // Every media time was played once, whichever rendition it came from.
    assert_eq!(u(&s["segments"]), 4, "{report:#}");
    assert_eq!(u(&s["failed_requests"]), 0, "{report:#}");
}
