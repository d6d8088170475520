//! Clips and MP4 pseudo-streaming end to end, on every engine: `FILE.mp4?start=S&end=E` (nginx's
//! `ngx_http_mp4_module` arguments) and `FILE.mp4/clip/S-E.mp4` give a valid MP4 that ffprobe
//! and ffmpeg read without a word on stderr, lasting what was asked from the keyframe at or
//! before the start (so within a GOP of the asked length); nginx's mp4 module, serving the same
//! file, gives the same video frames for the same arguments; byte ranges over the clip are the
//! slices of its full body, validators carry the interval, and intervals the file does not have
//! get a 400 saying why.
//!
//! The file is made by ffmpeg for the test (20 s, B-frames, a keyframe every 2 s, AAC), so the
//! expected numbers come from ffprobe on it and the clip's own tables, never from constants. Every
//! wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use sluice_media::mp4::clip::{clip, Interval};
use sluice_media::mp4::Mp4File;

/// Seconds between the file's keyframes: the most a clip may start before its `start`.
const GOP_SECS: f64 = 2.0;
const FILE_SECS: f64 = 20.0;

/// The test's file: 20 s of 25 fps H.264 with two B-frames and a keyframe every 2 s, and AAC at
/// 44.1 kHz, made once per test binary.
fn film() -> &'static [u8] {
    static FILM: OnceLock<Vec<u8>> = OnceLock::new();
    FILM.get_or_init(|| {
        test_film(20, "-c:v libx264 -preset ultrafast -bf 2 -g 50 -keyint_min 50 -sc_threshold 0 -pix_fmt yuv420p -c:a aac -b:a 64k")
    })
}

fn film_server(engine: &[&str]) -> (Server, Fixture) {
    let fx = Fixture::new();
    fx.write("films/film.mp4", film());
    let server = Server::serve(engine, &fx, &[]);
    (server, fx)
}

fn ok(addr: SocketAddr, target: &str, extra: &[(&str, &str)]) -> Response {
    let r = fetch_get(addr, target, extra);
    assert!(r.status == 200 || r.status == 206, "{target}: {}", r.head_text());
    r
}

/// (video packets, container duration) ffprobe reads from `url`; panics on any word on stderr.
fn probe(url: &str) -> (usize, f64) {
    let mut cmd = tool("ffprobe");
    cmd.args(["-rw_timeout", "10000000", "-v", "error", "-select_streams", "v:0"])
        .args(["-show_entries", "packet=pts_time:format=duration", "-of", "csv=p=0"])
        .arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffprobe {url}: {status}: {err}");
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let (duration, packets) = lines.split_last().unwrap();
    (packets.len(), duration.trim_end_matches(',').parse().unwrap())
}

/// The intervals the tests ask for: (query, start, end or the file's end).
const INTERVALS: &[(&str, f64, Option<f64>)] = &[
    ("start=7.3&end=15", 7.3, Some(15.0)),
    ("start=7.3", 7.3, None),
    ("start=0&end=3", 0.0, Some(3.0)),
    ("start=13.96&end=17.5", 13.96, Some(17.5)),
    ("start=4", 4.0, None),
    ("end=0.5", 0.0, Some(0.5)),
];

fn clips_play_for_the_length_asked(engine: &[&str]) {
    let (server, _fx) = film_server(engine);
    let addr = server.addr();
    let file = Mp4File::from_bytes(film()).unwrap();
    for &(query, start, end) in INTERVALS {
        let url = format!("http://{addr}/films/film.mp4?{query}");
        let r = ok(addr, &format!("/films/film.mp4?{query}"), &[]);
        assert_eq!(r.header("content-type"), Some("video/mp4"), "{query}");
        let (packets, duration) = probe(&url);
        // From the keyframe at or before the start: up to a GOP longer than asked.
        let asked = end.unwrap_or(FILE_SECS) - start;
        assert!(duration >= asked - 0.1 && duration <= asked + GOP_SECS + 0.1, "{query}: {duration} s");
        // The frames the clip's own tables keep, and the bytes its plan says.
        let interval = Interval::from_query(query).unwrap().unwrap();
        let planned = clip(&file, interval).unwrap();
        assert_eq!(packets, planned.tracks[0].samples.len(), "{query}");
        assert_eq!(r.body.len() as u64, planned.plan.len(), "{query}");
        sluice_media::fuzzing::check_clip(&file, film(), &planned);
        assert_eq!(r.body, sluice_media::fuzzing::assemble(&planned, film()), "{query}: the planned bytes");
        decodes_cleanly(&url);
    }
    // The clip by name is the same bytes as by arguments.
    let by_name = ok(addr, "/films/film.mp4/clip/7.3-15.mp4", &[]);
    let by_query = ok(addr, "/films/film.mp4?start=7.3&end=15", &[]);
    assert!(by_name.body == by_query.body, "the named clip is the queried one");
    assert_eq!(by_name.header("etag"), by_query.header("etag"));
    decodes_cleanly(&format!("http://{addr}/films/film.mp4/clip/7.3-.mp4"));
}

fn clips_are_virtual_files_with_ranges_and_validators(engine: &[&str]) {
    let (server, _fx) = film_server(engine);
    let addr = server.addr();
    let target = "/films/film.mp4?start=7.3&end=15";
    let full = ok(addr, target, &[]);
    let body = &full.body;
    let len = body.len();
    let etag = full.header("etag").unwrap().to_string();
    let modified = full.header("last-modified").unwrap().to_string();
    assert_eq!(full.header("accept-ranges"), Some("bytes"));
    let whole_file = ok(addr, "/films/film.mp4", &[]);
    assert_eq!(whole_file.header("last-modified"), Some(modified.as_str()), "the file's Last-Modified");
    assert_ne!(whole_file.header("etag"), Some(etag.as_str()), "the interval is in the tag");
    let other = ok(addr, "/films/film.mp4?start=7.3&end=16", &[]);
    assert_ne!(other.header("etag"), Some(etag.as_str()), "each interval its own tag");
    // Ranges: in the generated header, across it into the file's bytes, deep in them, the end.
    let header_len = body.windows(4).position(|w| w == b"mdat").unwrap() + 4;
    for (a, b) in
        [(0, 99), (header_len - 10, header_len + 1000), (len / 2, len / 2 + 65_536), (len - 1, len - 1)]
    {
        let range = format!("bytes={a}-{b}");
        let r = fetch_get(addr, target, &[("Range", &range)]);
        assert_eq!(r.status, 206, "{range}: {}", r.head_text());
        assert_eq!(r.header("content-range"), Some(format!("bytes {a}-{b}/{len}").as_str()));
        assert!(r.body == body[a..=b], "{range}: the slice of the full body");
    }
    let suffix = fetch_get(addr, target, &[("Range", "bytes=-500")]);
    assert!(suffix.status == 206 && suffix.body == body[len - 500..]);
    let two = fetch_get(addr, target, &[("Range", "bytes=0-9,1000-1009")]);
    assert_eq!(two.status, 206);
    let parts = parse_multipart(&two).unwrap();
    assert!(parts.len() == 2 && parts[0].data == body[..10] && parts[1].data == body[1000..1010]);
    let past = fetch_get(addr, target, &[("Range", &format!("bytes={len}-"))]);
    assert_eq!(past.status, 416);
    // Validators.
    assert_eq!(fetch_get(addr, target, &[("If-None-Match", &etag)]).status, 304);
    assert_eq!(fetch_get(addr, target, &[("If-Modified-Since", &modified)]).status, 304);
    let stale = fetch_get(addr, target, &[("If-Range", "\"other\""), ("Range", "bytes=0-9")]);
    assert!(stale.status == 200 && stale.body == *body, "a stale If-Range gets the whole clip");
    let mut conn = Conn::open(addr);
    conn.send(request("HEAD", target, &[]));
    let head = conn.head_response();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(len as u64));
}

fn intervals_the_file_lacks_are_refused(engine: &[&str]) {
    let (server, _fx) = film_server(engine);
    let addr = server.addr();
    for (target, says) in [
        ("/films/film.mp4?start=21", "past the end"),
        ("/films/film.mp4?start=5&end=3", "not after start"),
        ("/films/film.mp4?start=abc", "number of seconds"),
        ("/films/film.mp4/clip/5-5.mp4", "not after start"),
        ("/films/film.mp4/clip/five.mp4", "number of seconds"),
    ] {
        let r = fetch_get(addr, target, &[]);
        assert_eq!(r.status, 400, "{target}: {}", r.head_text());
        assert!(r.body_text().contains(says), "{target}: {}", r.body_text());
    }
    // Arguments that are not an interval leave the file alone.
    let plain = ok(addr, "/films/film.mp4?v=2", &[]);
    assert!(plain.body == film());
    assert_eq!(fetch_get(addr, "/films/missing.mp4?start=1", &[]).status, 404);
    assert_eq!(fetch_get(addr, "/films/missing.mp4/clip/1-2.mp4", &[]).status, 404);
}

/// nginx (its mp4 module, `mp4_start_key_frame on` so that it too starts on the keyframe)
/// serving the same file gives the same video packets for the same arguments.
fn nginx_gives_the_same_frames(engine: &[&str]) {
    if !nginx_has_mp4_module() {
        panic!("nginx lacks ngx_http_mp4_module (`nginx -V` has no --with-http_mp4_module)");
    }
    let (server, fx) = film_server(engine);
    let nginx = Nginx::serve(&fx.root);
    for &(query, _, _) in INTERVALS {
        let ours = probe(&format!("http://{}/films/film.mp4?{query}", server.addr())).0;
        let theirs = probe(&format!("http://{}/films/film.mp4?{query}", nginx.addr)).0;
        assert_eq!(ours, theirs, "{query}: sluice's and nginx's video packets");
    }
}

fn nginx_has_mp4_module() -> bool {
    let out = Command::new(require_tool("nginx", "nginx")).arg("-V").output().unwrap();
    String::from_utf8_lossy(&out.stderr).contains("--with-http_mp4_module")
}

/// nginx serving `root` with its mp4 module, stopped by pid when dropped.
struct Nginx {
    _nginx: sluice_harness::nginx::Nginx,
    addr: SocketAddr,
    _work: tempfile::TempDir,
}

impl Nginx {
    fn serve(root: &std::path::Path) -> Nginx {
        let work = tempfile::tempdir().unwrap();
        let port = free_port();
        let w = work.path().display();
        // SAFETY: geteuid has no preconditions.
        let user = if unsafe { libc::geteuid() } == 0 { "user root;\n" } else { "" };
        let conf = format!(
            "{user}daemon off;\nworker_processes 1;\npid {w}/nginx.pid;\nerror_log {w}/error.log warn;\n\
             events {{ worker_connections 64; }}\nhttp {{\n  access_log off;\n\
             client_body_temp_path {w}/body;\n  proxy_temp_path {w}/proxy;\n  fastcgi_temp_path {w}/fastcgi;\n\
             uwsgi_temp_path {w}/uwsgi;\n  scgi_temp_path {w}/scgi;\n\
             server {{ listen 127.0.0.1:{port}; root {};\n    location ~ \\.mp4$ {{ mp4; mp4_start_key_frame on; }} }}\n}}\n",
            root.display()
        );
        let nginx = sluice_harness::nginx::Nginx::start(&conf, port, work.path(), |_| {})
            .unwrap_or_else(|e| panic!("{e}"));
        Nginx { _nginx: nginx, addr: SocketAddr::from(([127, 0, 0, 1], port)), _work: work }
    }
}

/// A clip packaged like a file: HLS (with its I-frame stream) and DASH of the interval, its
/// segments sent from the original file; ffprobe counts the clip's frames over its master, and
/// ffmpeg decodes it without a word.
fn clips_package_as_hls_and_dash(engine: &[&str]) {
    let (server, _fx) = film_server(engine);
    let addr = server.addr();
    let file = Mp4File::from_bytes(film()).unwrap();
    let planned = clip(&file, Interval::from_name("7.3-15").unwrap()).unwrap();
    let frames = planned.tracks[0].samples.len();
    let url = format!("http://{addr}/films/film.mp4/clip/7.3-15/master.m3u8");
    let mut cmd = tool("ffprobe");
    cmd.args(["-rw_timeout", "10000000", "-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"])
        .arg(&url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "{}", String::from_utf8_lossy(&err));
    let counts = String::from_utf8_lossy(&out);
    let counts: Vec<&str> =
        counts.lines().map(|l| l.trim().trim_end_matches(',')).filter(|l| !l.is_empty()).collect();
    assert!(
        !counts.is_empty() && counts.iter().all(|c| *c == frames.to_string()),
        "{counts:?}: {frames} frames"
    );
    decodes_cleanly(&url);
    decodes_cleanly(&format!("http://{addr}/films/film.mp4/clip/7.3-15/manifest.mpd"));
    let master = ok(addr, "/films/film.mp4/clip/7.3-15/master.m3u8", &[]).body_text();
    assert!(master.contains("URI=\"video-iframes.m3u8\""), "{master}");
    let iframes = ok(addr, "/films/film.mp4/clip/7.3-15/video-iframes.m3u8", &[]).body_text();
    // Keyframes at 6, 8, 10, 12 and 14 s.
    assert_eq!(iframes.matches("video-iframe-").count(), 5, "{iframes}");
    let mpd = ok(addr, "/films/film.mp4/clip/7.3-15/manifest.mpd", &[]).body_text();
    // From the keyframe at 6 s to 15 s, less the frame nginx's end rounds off.
    let duration: f64 = mpd
        .split("mediaPresentationDuration=\"PT")
        .nth(1)
        .unwrap()
        .split('S')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((duration - 9.0).abs() <= 0.08, "{mpd}");
    assert_eq!(fetch_get(addr, "/films/film.mp4/clip/21-30/master.m3u8", &[]).status, 400);
    assert_eq!(fetch_get(addr, "/films/film.mp4/clip/7.3-15/subtitles-en.m3u8", &[]).status, 404);
}

engine_matrix!(
    clips_package_as_hls_and_dash,
    clips_play_for_the_length_asked,
    clips_are_virtual_files_with_ranges_and_validators,
    intervals_the_file_lacks_are_refused,
    nginx_gives_the_same_frames,
);
