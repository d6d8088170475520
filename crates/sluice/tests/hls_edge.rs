//! HLS from an S3-backed edge, on every engine, against a real SeaweedFS: an MP4 in the bucket is
//! packaged by an edge (`sluice serve --store s3://…`) exactly as by a local root. Clients we did
//! not write decide: ffprobe counts the same video frames over the edge's `master.m3u8` as over
//! the MP4, `ffmpeg -f null` decodes it without a word on stderr, Chromium plays it through the
//! edge's library page; segments span slice boundaries (the MP4 is several 4 MiB slices, its
//! `moov` at the end), so they are sent from several cached slice files. The page and `/streams`
//! offer HLS and RTSP URLs only for what packages and streams. However many players start at
//! once, the catalogue reads a version's `moov` once and SeaweedFS serves each slice once.
//!
//! Also here: the catalogue's byte accounting against what the allocator really holds, and (run
//! by hand, `--ignored`) the resident memory of one catalogue over 1,000 one-hour files.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use common::browser::{Browser, ONE_BROWSER_AT_A_TIME, PLAY_THROUGH};
use common::edge::multi_slice_clip as big_mp4;
use common::edge::{put_object, weed_slice_gets};
use common::*;
use serde_json::{json, Value};
use sluice_harness::seaweedfs::SeaweedFs;

engine_matrix!(
    an_edge_packages_hls_that_players_decode_whole,
    the_edge_page_and_streams_offer_only_what_works,
    many_players_starting_at_once_read_the_moov_once
);

const SLICE: usize = 4 << 20;
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");

fn weed() -> &'static SeaweedFs {
    shared_seaweedfs("hlsedge")
}

/// An edge serving `s3://LOCATION` with its cache in `cache`, 2 s HLS segments.
fn edge(engine: &[&str], location: &str, cache: &Path) -> Server {
    let store = format!("s3://{location}");
    let cache = cache.to_str().unwrap().to_string();
    let args = [
        "--store",
        &store,
        "--s3-endpoint",
        &weed().s3_endpoint,
        "--cache-dir",
        &cache,
        "--cache-size",
        "256M",
        "--hls-segment",
        "2s",
    ];
    Server::start(engine, &args)
}

/// The objects of the shared library: the clip, the demo, and an "MP4" that is not one.
fn library() -> &'static str {
    static PUT: OnceLock<()> = OnceLock::new();
    PUT.get_or_init(|| {
        put_object("hlsedge/lib", "films/clip.mp4", big_mp4());
        put_object("hlsedge/lib", "films/demo.mp4", &std::fs::read(DEMO).unwrap());
        put_object("hlsedge/lib", "films/broken.mp4", b"not a film at all\n");
    });
    "hlsedge/lib"
}

fn ok(addr: std::net::SocketAddr, target: &str, headers: &[(&str, &str)]) -> Response {
    let r = fetch_get(addr, target, headers);
    assert_eq!(r.status, 200, "{target}: {}", r.head_text());
    r
}

/// ffprobe's count of the clip's video frames, read as a file (no HLS) from a local root.
fn frames_in_the_clip() -> &'static str {
    static FRAMES: OnceLock<String> = OnceLock::new();
    FRAMES.get_or_init(|| {
        let fx = Fixture::new();
        fx.write("clip.mp4", big_mp4());
        let server = Server::serve(&["--engine", "epoll"], &fx, &[]);
        ffprobe_video_frames(&format!("http://{}/clip.mp4", server.addr())).0
    })
}

fn an_edge_packages_hls_that_players_decode_whole(engine: &[&str]) {
    let location = library();
    let cache = tempfile::tempdir().unwrap();
    let server = edge(engine, location, cache.path());
    let master = format!("http://{}/films/clip.mp4/master.m3u8", server.addr());
    // ffprobe reports the video stream once per program of the master playlist.
    let (frames, stderr) = ffprobe_video_frames(&master);
    let counts: Vec<&str> = frames.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!counts.is_empty(), "{stderr}");
    for count in counts {
        assert_eq!(count, frames_in_the_clip(), "video frames over the edge's HLS ({stderr})");
    }
    let mut ffmpeg = Command::new(require_tool("ffmpeg", "ffmpeg"));
    ffmpeg.args(["-v", "error", "-rw_timeout", "10000000", "-i", &master, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut ffmpeg, Duration::from_secs(120));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffmpeg decoding {master}: {status}: {err}");
    // Validators and ranges on a segment, as for a local file's.
    let addr = server.addr();
    let seg = ok(addr, "/films/clip.mp4/seg-1.m4s", &[]);
    let etag = seg.header("etag").expect("a segment's ETag").to_string();
    assert!(etag.contains("-hls2000"), "the tag names the packaging: {etag}");
    let again = fetch_get(addr, "/films/clip.mp4/seg-1.m4s", &[("If-None-Match", &etag)]);
    assert_eq!(again.status, 304, "{}", again.head_text());
    let from = seg.body.len() / 3;
    let range = format!("bytes={from}-{}", from + 99_999);
    let part = fetch_get(addr, "/films/clip.mp4/seg-1.m4s", &[("Range", &range)]);
    assert_eq!(part.status, 206, "{}", part.head_text());
    assert_bytes_eq(&part.body, &seg.body[from..from + 100_000], "a range of a segment");
    // The same segment from a local root is the same bytes.
    let fx = Fixture::new();
    fx.write("films/clip.mp4", big_mp4());
    let local = Server::serve(engine, &fx, &["--hls-segment", "2s"]);
    let local_seg = ok(local.addr(), "/films/clip.mp4/seg-1.m4s", &[]);
    assert_bytes_eq(&seg.body, &local_seg.body, "a segment from the edge and from a local root");
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_http_responses_cut_total"), 0, "{text}");
    assert!(metric(&text, "sluice_catalogue_entries") >= 2, "{text}");
    assert!(metric(&text, "sluice_catalogue_bytes") > 0, "{text}");
}

/// The page's `<li>` of `name`.
fn item<'a>(page: &'a str, name: &str) -> &'a str {
    let at = page.find(&format!("data-name=\"{name}\"")).unwrap_or_else(|| panic!("{name} listed:\n{page}"));
    let end = page[at..].find("</li>").unwrap();
    &page[at..at + end]
}

fn the_edge_page_and_streams_offer_only_what_works(engine: &[&str]) {
    let location = library();
    let cache = tempfile::tempdir().unwrap();
    let server = edge(engine, location, cache.path());
    let page = ok(server.addr(), "/films/", &[]);
    let page = String::from_utf8(page.body).unwrap();
    let demo = item(&page, "demo.mp4");
    assert!(demo.contains("data-hls=\"./demo.mp4/master.m3u8\""), "{demo}");
    assert!(demo.contains("6.0 s \u{b7} 640\u{d7}360 \u{b7} avc1."), "the demo's details: {demo}");
    let rtsp = format!("rtsp://{}/films/demo.mp4", server.rtsp_addr());
    assert!(demo.contains(&rtsp), "{demo}");
    let clip = item(&page, "clip.mp4");
    assert!(clip.contains("data-hls=\"./clip.mp4/master.m3u8\"") && clip.contains("rtsp://"), "{clip}");
    let broken = item(&page, "broken.mp4");
    assert!(!broken.contains("data-hls") && !broken.contains("rtsp://"), "nothing but the file: {broken}");
    // The RTSP URL the page offers plays.
    let (frames, stderr) = ffprobe_video_frames(&rtsp);
    assert_eq!(frames, "180", "the demo's frames over the edge's RTSP ({stderr})");
    // /streams says the same.
    let mut c = Conn::open(server.admin_addr());
    c.send(request("GET", "/streams", &[]));
    let streams: Value = serde_json::from_slice(&c.response().body).unwrap();
    let of = |path: &str| {
        let items = streams["items"].as_array().unwrap();
        items.iter().find(|i| i["path"] == json!(path)).unwrap_or_else(|| panic!("{path}: {streams}")).clone()
    };
    let demo = of("/films/demo.mp4");
    assert!(demo["hls"].as_str().unwrap().ends_with("/films/demo.mp4/master.m3u8"), "{demo}");
    assert!(demo["rtsp"].as_str().unwrap().ends_with("/films/demo.mp4"), "{demo}");
    let broken = of("/films/broken.mp4");
    assert!(broken["hls"].is_null() && broken["rtsp"].is_null(), "{broken}");
    assert!(broken["http"].as_str().unwrap().ends_with("/films/broken.mp4"), "{broken}");
}

fn many_players_starting_at_once_read_the_moov_once(engine: &[&str]) {
    // An object of its own per engine, so every run starts cold at the origin too.
    let name = format!("{}-{}.mp4", engine[1], engine.last().unwrap());
    let location = "hlsonce/p";
    put_object(location, &name, big_mp4());
    let cache = tempfile::tempdir().unwrap();
    let server = edge(engine, location, cache.path());
    let before = server.scrape();
    let gets_before = weed_slice_gets("hlsonce");
    const PLAYERS: usize = 8;
    let start = std::sync::Barrier::new(PLAYERS);
    let wrong = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..PLAYERS {
            let (start, wrong, name, addr) = (&start, &wrong, &name, server.addr());
            s.spawn(move || {
                start.wait();
                for resource in ["master.m3u8", "media.m3u8", "init.mp4"] {
                    if fetch_get(addr, &format!("/{name}/{resource}"), &[]).status != 200 {
                        wrong.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "responses that were not 200");
    let text = server.scrape();
    // One index of the version (its sample tables, then its packaging), however many asked.
    let misses =
        metric(&text, "sluice_catalogue_misses_total") - metric(&before, "sluice_catalogue_misses_total");
    assert_eq!(misses, 2, "before:\n{before}\nafter:\n{text}");
    // Reading the index reads the first slice (the top-level box headers) and the slices of
    // the moov, at the end: each fetched from the origin once.
    let (moov_start, moov_end) = moov_of(big_mp4());
    let mut slices: Vec<usize> = (moov_start / SLICE..=(moov_end - 1) / SLICE).collect();
    if slices[0] != 0 {
        slices.insert(0, 0);
    }
    let fetched = metric(&text, "sluice_cache_misses_total") - metric(&before, "sluice_cache_misses_total");
    assert_eq!(fetched, slices.len() as u64, "slices {slices:?} fetched once each: {text}");
    assert_eq!(
        weed_slice_gets("hlsonce") - gets_before,
        slices.len() as u64,
        "ranged GETs SeaweedFS counted"
    );
}

/// Where the top-level `moov` box of `mp4` starts and ends.
fn moov_of(mp4: &[u8]) -> (usize, usize) {
    let mut at = 0;
    while at + 8 <= mp4.len() {
        let mut size = u32::from_be_bytes(mp4[at..at + 4].try_into().unwrap()) as usize;
        if size == 1 {
            size = u64::from_be_bytes(mp4[at + 8..at + 16].try_into().unwrap()) as usize;
        }
        assert!(size >= 8, "a box of {size} bytes at {at}");
        if &mp4[at + 4..at + 8] == b"moov" {
            return (at, at + size);
        }
        at += size;
    }
    panic!("no moov box");
}

/// Chromium plays the edge's HLS through the edge's page, on one engine
/// (`common::browser::BROWSER_ENGINE` says why), one browser at a time, as tests/hls_browser.rs
/// does for a local root.
fn hls_js_plays_from_an_edge(engine: &[&str]) {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    put_object("hlsedge/browser", "demo.mp4", &std::fs::read(DEMO).unwrap());
    let cache = tempfile::tempdir().unwrap();
    let server = edge(engine, "hlsedge/browser", cache.path());
    let mut browser = Browser::start();
    browser.open_page(&format!("http://{}/", server.addr()));
    let r = browser.eval(PLAY_THROUGH);
    assert_eq!(r["hlsJs"], json!(true), "hls.js played: {r}");
    assert_eq!(r["src"], json!("./demo.mp4/master.m3u8"), "{r}");
    assert!(r["first"]["error"].is_null() && r["error"].is_null(), "no media error: {r}");
    let duration = r["first"]["duration"].as_f64().unwrap();
    assert!((duration - 6.0).abs() < 0.2, "duration {duration}: {r}");
    assert!(r["first"]["at"].as_f64().unwrap() >= duration - 0.1, "played to the end: {r}");
    let demo = sluice_media::mp4::Mp4File::from_bytes(&std::fs::read(DEMO).unwrap()).unwrap();
    let video = demo.tracks.iter().find(|t| matches!(t.kind, sluice_media::TrackKind::H264(_))).unwrap();
    assert_eq!(r["first"]["frames"].as_u64(), Some(video.samples.len() as u64), "frames played: {r}");
    let (mid, landed) = (r["mid"].as_f64().unwrap(), r["landed"].as_f64().unwrap());
    assert!((landed - mid).abs() <= 2.0, "the seek to {mid} landed at {landed}");
    assert!(r["after"].as_f64().unwrap() >= landed + 0.5, "played on after the seek: {r}");
}

#[test]
fn hls_js_plays_from_an_edge_on_epoll() {
    hls_js_plays_from_an_edge(common::browser::BROWSER_ENGINE);
}

// --- Memory -------------------------------------------------------------------------------------

/// Counts the bytes each thread holds on the heap, so a test can see what one value retains.
struct Counting;

thread_local! {
    static HELD: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: every call goes to the system allocator with the same arguments; the counter is a
// thread-local integer that allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = HELD.try_with(|h| h.set(h.get() + layout.size() as isize));
        // SAFETY: as the caller's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = HELD.try_with(|h| h.set(h.get() - layout.size() as isize));
        // SAFETY: as the caller's contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        let _ = HELD.try_with(|h| h.set(h.get() + new as isize - layout.size() as isize));
        // SAFETY: as the caller's contract.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn held() -> isize {
    HELD.with(Cell::get)
}

/// An hour of tiny video (30 fps, a keyframe every 2 s) and 48 kHz AAC, made in `dir`: ten
/// seconds encoded, looped to an hour without re-encoding.
fn one_hour_mp4(dir: &Path) -> std::path::PathBuf {
    let ten = dir.join("ten.mp4");
    let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
    cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=64x36:rate=30"])
        .args(["-f", "lavfi", "-i", "sine=sample_rate=48000", "-t", "10", "-c:v", "libx264"])
        .args(["-preset", "ultrafast", "-g", "60", "-c:a", "aac", "-b:a", "16k"])
        .arg(&ten);
    assert!(run_bounded(&mut cmd, Duration::from_secs(120)).0.success());
    let hour = dir.join("hour.mp4");
    let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
    cmd.args(["-v", "error", "-y", "-stream_loop", "359", "-i"]).arg(&ten).args(["-c", "copy"]).arg(&hour);
    assert!(run_bounded(&mut cmd, Duration::from_secs(300)).0.success());
    hour
}

/// What the catalogue counts for an entry is what the allocator holds for it, within a margin:
/// the estimate is what keeps its bound honest.
#[test]
fn the_catalogue_counts_the_bytes_its_indexes_hold() {
    use sluice_server::library::catalogue::{tables_cost, Described};
    let dir = tempfile::tempdir().unwrap();
    let hour = std::fs::read(one_hour_mp4(dir.path())).unwrap();
    for (name, bytes) in [("one hour", hour), ("demo", std::fs::read(DEMO).unwrap())] {
        let before = held();
        let tables: sluice_server::library::catalogue::Tables =
            Ok(Arc::new(sluice_media::mp4::Mp4File::from_bytes(&bytes).unwrap()));
        let tables_held = held() - before;
        let before = held();
        let described = Described::of(name, &tables, Duration::from_secs(2));
        let described_held = held() - before;
        for (what, estimate, real) in
            [("tables", tables_cost(&tables), tables_held), ("description", described.cost(), described_held)]
        {
            let real = real as f64;
            eprintln!("{name} {what}: estimated {estimate} B, held {real} B");
            assert!(
                estimate as f64 >= 0.9 * real && estimate as f64 <= 1.5 * real,
                "{name} {what}: estimated {estimate} B, the allocator holds {real} B"
            );
        }
    }
}

/// One catalogue for 1,000 one-hour files, each asked for by RTSP (its sample tables) and HLS
/// (its packaging) and the page: the process's resident memory grows by at most 64 MiB. Run by
/// hand (it makes a one-hour MP4 with ffmpeg and indexes 2,000 times):
/// `cargo test --release -p sluice --test hls_edge -- --ignored --nocapture a_thousand`.
#[test]
#[ignore]
fn a_thousand_one_hour_files_fit_one_catalogue() {
    use sluice_server::library::catalogue::{Catalogue, CATALOGUE_BYTES};
    use sluice_server::library::Library;
    let dir = tempfile::tempdir().unwrap();
    let hour = one_hour_mp4(dir.path());
    let root = dir.path().join("library");
    std::fs::create_dir(&root).unwrap();
    for i in 0..1000 {
        std::fs::hard_link(&hour, root.join(format!("film-{i:04}.mp4"))).unwrap();
    }
    let rss = || -> u64 {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        statm.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 4096
    };
    let library = Library::local(&root, Catalogue::new(CATALOGUE_BYTES, Duration::from_secs(6))).unwrap();
    let started = Instant::now();
    let before = rss();
    let mut peak = before;
    for i in 0..1000 {
        let relative = format!("film-{i:04}.mp4");
        let version = library.file(&relative, true).unwrap().unwrap();
        // RTSP's DESCRIBE, then HLS's playlists and the page.
        let tables = library.tables(&relative, &version, true).unwrap().unwrap();
        assert!(tables.tracks.iter().all(|t| !t.samples.is_empty()));
        drop(tables);
        assert!(library.described(&relative, &version, true).unwrap().hls.is_ok());
        peak = peak.max(rss());
    }
    let after = rss();
    let stats = library.catalogue().stats();
    let held = stats.bytes.load(Ordering::Relaxed);
    eprintln!(
        "1,000 one-hour files in {:?}: RSS {} MiB -> {} MiB (peak {} MiB); catalogue {} entries, {} MiB \
         estimated, {} evictions",
        started.elapsed(),
        before >> 20,
        after >> 20,
        peak >> 20,
        stats.entries.load(Ordering::Relaxed),
        held >> 20,
        stats.evictions.load(Ordering::Relaxed),
    );
    assert!(held <= CATALOGUE_BYTES as u64);
    assert!(after - before <= 64 << 20, "RSS grew by {} MiB", (after - before) >> 20);
}
