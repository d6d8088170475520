//! HLS end to end, on every engine: the demo MP4 packaged on the fly as fMP4 HLS is played by
//! clients we did not write (ffprobe counts the same video frames over `master.m3u8` as over
//! the MP4, `ffmpeg -f null` decodes it to the end without a word on stderr), every segment and
//! the init segment decode with a box parser (`mp4-atom`) and carry the file's own sample bytes
//! (sent as file slices, so through each engine's send strategy), validators and ranges work on
//! segments, and files that cannot be packaged get a clear status and a log line.
//!
//! The expected numbers come from the MP4 itself (ffprobe on it, `sluice_media`'s sample
//! tables), never from constants. Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use mp4_atom::Decode;
use sluice_media::fuzzing::SegmentWalk;
use sluice_media::mp4::Mp4File;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");

/// The demo at 2 s segments: its keyframes are 2 s apart, so it makes three segments.
const SEGMENT: &[&str] = &["--hls-segment", "2s"];

fn demo_server(engine: &[&str]) -> (Server, Fixture) {
    let fx = Fixture::new();
    fx.write("films/demo.mp4", &std::fs::read(DEMO).unwrap());
    let server = Server::serve(engine, &fx, SEGMENT);
    (server, fx)
}

/// ffprobe's count of the MP4's video frames, once per test binary.
fn frames_in_the_mp4() -> &'static str {
    static FRAMES: OnceLock<String> = OnceLock::new();
    FRAMES.get_or_init(|| {
        let fx = Fixture::new();
        fx.write("demo.mp4", &std::fs::read(DEMO).unwrap());
        let server = Server::serve(&["--engine", "epoll"], &fx, &[]);
        ffprobe_video_frames(&format!("http://{}/demo.mp4", server.addr())).0
    })
}

fn ok(addr: std::net::SocketAddr, target: &str) -> Response {
    let r = fetch_get(addr, target, &[]);
    assert_eq!(r.status, 200, "{target}: {}", r.head_text());
    r
}

fn playlists_and_players(engine: &[&str]) {
    let (server, _fx) = demo_server(engine);
    let addr = server.addr();
    let master = ok(addr, "/films/demo.mp4/master.m3u8");
    assert_eq!(master.header("content-type"), Some("application/vnd.apple.mpegurl"));
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
        panic!("not a master playlist: {}", master.body_text())
    };
    let variant = &m.variants[0];
    assert_eq!(variant.codecs.as_deref(), Some("avc1.4d401e,mp4a.40.2"));
    let res = variant.resolution.unwrap();
    assert_eq!((res.width, res.height), (640, 360));
    assert!(variant.bandwidth > 0);
    let media = ok(addr, &format!("/films/demo.mp4/{}", variant.uri));
    let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(&media.body).unwrap() else {
        panic!("not a media playlist: {}", media.body_text())
    };
    assert_eq!(p.playlist_type, Some(m3u8_rs::MediaPlaylistType::Vod));
    assert!(p.end_list);
    assert_eq!(p.segments.len(), 3);
    assert!(p.segments.iter().all(|s| f64::from(s.duration).round() as u64 <= p.target_duration));
    let total: f32 = p.segments.iter().map(|s| s.duration).sum();
    assert!((total - 6.0).abs() < 0.05, "{total}");
    assert_eq!(p.segments[0].map.as_ref().unwrap().uri, "video-init.mp4");
    // The audio is a rendition of its own (an audio group), cut at the same times.
    let audio = m.alternatives.iter().find(|a| a.media_type == m3u8_rs::AlternativeMediaType::Audio).unwrap();
    assert_eq!(variant.audio.as_deref(), Some(audio.group_id.as_str()));
    let audio = ok(addr, &format!("/films/demo.mp4/{}", audio.uri.as_deref().unwrap()));
    let m3u8_rs::Playlist::MediaPlaylist(a) = m3u8_rs::parse_playlist_res(&audio.body).unwrap() else {
        panic!("not a media playlist: {}", audio.body_text())
    };
    // Each EXTINF is the audio's own: its segments end on AAC frames (1,024 samples at 48 kHz,
    // 21.3 ms), within a frame of the video's cuts (the first also holds the encoder's priming).
    assert_eq!(a.segments.len(), p.segments.len());
    for (audio, video) in a.segments.iter().zip(&p.segments) {
        assert!((audio.duration - video.duration).abs() < 2.0 * 1024.0 / 48_000.0, "{}", audio.uri);
    }
    assert!(a.segments.iter().zip(&p.segments).any(|(a, v)| a.duration != v.duration), "not the video's");
    assert!(a.segments.iter().all(|s| f64::from(s.duration).round() as u64 <= a.target_duration));
    // The muxed rendition is still there for clients that kept its URLs.
    let muxed = ok(addr, "/films/demo.mp4/media.m3u8");
    assert!(muxed.body_text().contains("#EXT-X-MAP:URI=\"init.mp4\""), "{}", muxed.body_text());

    // Clients we did not write.
    let url = format!("http://{addr}/films/demo.mp4/master.m3u8");
    // The HLS demuxer also lists its streams under a program: the same count, printed twice.
    let (frames, _) = ffprobe_video_frames(&url);
    let counts: Vec<&str> = frames.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!counts.is_empty());
    for count in counts {
        assert_eq!(count, frames_in_the_mp4(), "video frames over HLS and over the MP4");
    }
    let mut ffmpeg = Command::new(require_tool("ffmpeg", "ffmpeg"));
    ffmpeg.args(["-nostdin", "-v", "error", "-rw_timeout", "10000000", "-i", &url, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut ffmpeg, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffmpeg decoding {url}: {status}: {err}");
}

fn segments_decode_and_carry_the_files_bytes(engine: &[&str]) {
    let (server, _fx) = demo_server(engine);
    let addr = server.addr();
    let data = std::fs::read(DEMO).unwrap();
    let file = Mp4File::from_bytes(&data).unwrap();

    let init = ok(addr, "/films/demo.mp4/init.mp4");
    let mut buf = init.body.as_slice();
    mp4_atom::Ftyp::decode(&mut buf).unwrap();
    let moov = mp4_atom::Moov::decode(&mut buf).unwrap();
    assert!(buf.is_empty(), "init segment is ftyp + moov");
    assert_eq!(moov.trak.len(), file.tracks.len());

    // Every sample of every track, in order, in exactly one segment, with the file's bytes at
    // the place its trun says; tfdt carries on where the previous segment ended (the check is
    // shared with sluice-media's unit test).
    let mut walk = SegmentWalk::new(&file);
    for n in 0..3 {
        let seg = ok(addr, &format!("/films/demo.mp4/seg-{n}.m4s"));
        assert_eq!(seg.header("content-type"), Some("video/iso.segment"));
        walk.check(&file, &data, n, &seg.body);
    }
    walk.finish(&file);
    assert_eq!(fetch_get(addr, "/films/demo.mp4/seg-3.m4s", &[]).status, 404, "past the end");
    assert_eq!(fetch_get(addr, "/films/demo.mp4/seg-01.m4s", &[]).status, 404, "one name per segment");
}

fn validators_and_ranges(engine: &[&str]) {
    let (server, _fx) = demo_server(engine);
    let addr = server.addr();
    let target = "/films/demo.mp4/seg-1.m4s";
    let whole = ok(addr, target);
    let etag = whole.header("etag").unwrap().to_string();
    assert!(whole.header("cache-control").unwrap().contains("max-age"));
    assert_eq!(fetch_get(addr, target, &[("If-None-Match", &etag)]).status, 304);
    assert_eq!(ok(addr, target).header("etag"), Some(etag.as_str()), "stable across requests");
    let len = whole.body.len();
    // One range straddling the generated header and the file's bytes, one in the tail, and
    // both at once (multipart).
    for (start, end) in [(100, 2999), (len - 500, len - 1)] {
        let r = fetch_get(addr, target, &[("Range", &format!("bytes={start}-{end}"))]);
        assert_eq!(r.status, 206);
        assert_eq!(r.header("content-range"), Some(format!("bytes {start}-{end}/{len}").as_str()));
        assert_bytes_eq(&r.body, &whole.body[start..=end], "range of a segment");
    }
    let r = fetch_get(addr, target, &[("Range", "bytes=0-9,2000-2009")]);
    assert_eq!(r.status, 206);
    let parts = parse_multipart(&r).unwrap();
    assert_eq!(parts.len(), 2);
    assert_bytes_eq(&parts[1].data, &whole.body[2000..2010], "second part");
    let playlist = ok(addr, "/films/demo.mp4/media.m3u8");
    assert_eq!(playlist.header("cache-control"), Some("no-cache"));
    assert!(playlist.header("etag").is_some());
}

/// A clear per-track segment of an interleaved file (its samples in many pieces of the file)
/// goes out as file slices every time, never made in memory: written from memory it would cost
/// a copy `sendfile` does not (HLS viewers held fell by two thirds when it was). The memory of
/// packaged segments is for encrypted ones.
fn clear_segments_go_out_as_file_slices(engine: &[&str]) {
    let (server, _fx) = demo_server(engine);
    let addr = server.addr();
    let target = "/films/demo.mp4/video-seg-1.m4s";
    let first = ok(addr, target);
    for _ in 0..2 {
        assert_bytes_eq(&ok(addr, target).body, &first.body, "asked again");
    }
    let m = server.scrape();
    let made = metric(&m, "sluice_segment_cache_misses_total") + metric(&m, "sluice_segment_cache_entries");
    assert_eq!(made, 0, "a clear segment asked for three times is never made in memory:\n{m}");
}

/// Inputs that cannot be packaged: the status says which kind, the body says why, a log line
/// names the file, and the server goes on serving.
fn bad_inputs(engine: &[&str]) {
    let fx = Fixture::new();
    let bad = bad_files();
    fx.write("demo.mp4", &std::fs::read(DEMO).unwrap());
    fx.write("text.mp4", b"this is not a film\n");
    fx.write("truncated.mp4", &std::fs::read(DEMO).unwrap()[..20_000]);
    fx.write("fragmented.mp4", &bad.fragmented);
    fx.write("mpeg4-part2.mp4", &bad.mpeg4_part2);
    let server = Server::serve(engine, &fx, SEGMENT);
    let addr = server.addr();
    for (name, status) in
        [("text.mp4", 500), ("truncated.mp4", 500), ("fragmented.mp4", 501), ("mpeg4-part2.mp4", 415)]
    {
        for resource in ["master.m3u8", "seg-0.m4s"] {
            let r = fetch_get(addr, &format!("/{name}/{resource}"), &[]);
            assert_eq!(r.status, status, "{name}/{resource}: {}", r.body_text());
            assert!(r.body_text().contains(name), "the body names the file: {}", r.body_text());
        }
        assert!(
            poll_until(IO_TIMEOUT, || server.logs().iter().any(|l| l.contains("HLS") && l.contains(name))),
            "a log line for {name}: {}",
            server.log_text()
        );
    }
    // The page offers no Play for them (a black player) but says why each cannot play.
    let page = fetch_get(addr, "/", &[]).body_text();
    for (name, why) in [
        ("text.mp4", "not a playable MP4"),
        ("truncated.mp4", "not a playable MP4"),
        ("fragmented.mp4", "fragmented"),
        ("mpeg4-part2.mp4", "cannot package mpeg4-part2.mp4 as HLS"),
    ] {
        let item = page
            .split("<li")
            .find(|li| li.contains(&format!(">{name}</a>")))
            .unwrap_or_else(|| panic!("{page}"));
        assert!(!item.contains("class=\"play\""), "no Play for {name}: {item}");
        assert!(item.contains("Cannot be played in the browser: ") && item.contains(why), "{name}: {item}");
    }
    assert!(page.contains("data-hls=\"./demo.mp4/master.m3u8\""), "the demo plays: {page}");
    for (target, status) in [
        ("/t1.html/master.m3u8", 404),
        ("/missing.mp4/master.m3u8", 404),
        ("/demo.mp4/other.m3u8", 404),
        ("/demo.mp4/seg-1000000.m4s", 404),
        ("/demo.mp4/master.m3u8", 200),
    ] {
        assert_eq!(fetch_get(addr, target, &[]).status, status, "{target}");
    }
}

struct BadFiles {
    fragmented: Vec<u8>,
    mpeg4_part2: Vec<u8>,
}

/// A fragmented copy of the demo cut before its first fragment is whole, and an MPEG-4 Part 2
/// video, made by ffmpeg once per run.
fn bad_files() -> &'static BadFiles {
    static FILES: OnceLock<BadFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
        let ffmpeg = require_tool("ffmpeg", "ffmpeg");
        let frag = out("frag.mp4");
        let part2 = out("part2.mp4");
        for args in [
            vec!["-i", DEMO, "-c", "copy", "-movflags", "frag_keyframe+empty_moov", &frag],
            vec!["-f", "lavfi", "-i", "testsrc=size=64x64:rate=5:duration=1", "-c:v", "mpeg4", &part2],
        ] {
            let mut cmd = Command::new(&ffmpeg);
            cmd.args(["-nostdin", "-v", "error", "-y"]).args(&args);
            let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
            assert!(status.success(), "ffmpeg {args:?}: {}", String::from_utf8_lossy(&err));
        }
        // A recording that has only just started: the moov, and the head of its first fragment.
        let mut fragmented = std::fs::read(&frag).unwrap();
        let first_moof = fragmented.windows(4).position(|w| w == b"moof").unwrap() - 4;
        fragmented.truncate(first_moof + 16);
        BadFiles { fragmented, mpeg4_part2: std::fs::read(&part2).unwrap() }
    })
}

engine_matrix!(
    playlists_and_players,
    segments_decode_and_carry_the_files_bytes,
    validators_and_ranges,
    clear_segments_go_out_as_file_slices,
    bad_inputs
);
