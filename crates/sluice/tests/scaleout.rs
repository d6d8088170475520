//! Scale-out: stateless edges serving a real SeaweedFS bucket through their slice caches, alone
//! and two of them behind a real HAProxy running deploy/haproxy.cfg as shipped (addresses from
//! the environment). Counts decide: origin requests (sluice's and SeaweedFS's own), cache bytes,
//! frames, SHA-256 of bytes; the only clock is HAProxy's 3 s to mark a killed edge down.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::edge::{put_object, sha256_hex as sha256, start_edge as edge, weed_slice_gets};
use common::*;
use sluice_harness::haproxy::{Edge, Haproxy};
use sluice_harness::seaweedfs::SeaweedFs;
use sluice_harness::toxiproxy::{Stream, Toxiproxy};

engine_matrix!(
    ranges_pages_and_conditionals_come_from_the_cache,
    a_cold_whole_object_starts_before_its_last_slice_is_fetched,
    an_origin_failure_mid_body_cuts_the_response_and_the_edge_serves_on
);

const MIB: usize = 1 << 20;
const SLICE: usize = 4 * MIB;
const TOKEN: &str = "scaleout-token-0123456789";

/// The SeaweedFS this binary's tests share.
fn weed() -> &'static SeaweedFs {
    shared_seaweedfs("edges")
}

/// An edge like [`edge`]'s, reaching the store at `endpoint` (a toxiproxy in front of it).
fn edge_via(endpoint: &str, engine: &[&str], location: &str, cache: &Path, extra: &[&str]) -> Server {
    let store = format!("s3://{location}");
    let cache = cache.to_str().unwrap().to_string();
    let mut args = vec!["--store", &store, "--s3-endpoint", endpoint, "--cache-dir", &cache];
    args.extend_from_slice(extra);
    Server::start(engine, &args)
}

fn request(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Response {
    let mut c = Conn::open(addr);
    c.send(common::request(method, path, headers));
    c.read_response(method == "HEAD").unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

/// The object the engine matrix reads: three slices, the last one short.
fn ranges_object() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| {
        let data = pseudo_random(2 * SLICE + 12_345, 14);
        put_object("edges/ranges", "films/big.bin", &data);
        put_object("edges/ranges", "notes.txt", b"not a film\n");
        data
    })
}

fn ranges_pages_and_conditionals_come_from_the_cache(engine: &[&str]) {
    let data = ranges_object();
    let cache = tempfile::tempdir().unwrap();
    let server = edge(engine, "edges/ranges", cache.path(), &["--cache-size", "64M"]);
    let addr = server.addr();
    let full = request(addr, "GET", "/films/big.bin", &[]);
    full.expect_status(200, "a whole object");
    assert_bytes_eq(&full.body, data, "the whole object");
    let etag = full.header("etag").expect("an ETag").to_string();
    // One range across the first slice boundary, then several ranges in one response.
    let r = request(addr, "GET", "/films/big.bin", &[("Range", "bytes=4194000-4194999")]);
    r.expect_status(206, "a range across slices");
    assert_eq!(r.header("content-range"), Some(format!("bytes 4194000-4194999/{}", data.len()).as_str()));
    assert_bytes_eq(&r.body, &data[4_194_000..4_195_000], "a range across slices");
    let r = request(addr, "GET", "/films/big.bin", &[("Range", "bytes=0-9,8388600-8388700,-5")]);
    r.expect_status(206, "several ranges");
    let parts = parse_multipart(&r).unwrap();
    let n = data.len();
    for (part, (from, to)) in parts.iter().zip([(0, 9), (8_388_600, 8_388_700), (n - 5, n - 1)]) {
        assert_bytes_eq(&part.data, &data[from..=to], "a part of a multipart range");
    }
    assert_eq!(parts.len(), 3);
    // Validators are the store's: the same on every edge.
    request(addr, "GET", "/films/big.bin", &[("If-None-Match", &etag)]).expect_status(304, "If-None-Match");
    let r = request(addr, "GET", "/films/big.bin", &[("Range", "bytes=0-0"), ("If-Range", "\"other\"")]);
    r.expect_status(200, "If-Range with another tag gets the whole object");
    let head = request(addr, "HEAD", "/films/big.bin", &[]);
    assert_eq!(head.content_length(), Some(n as u64));
    // Pages and errors, as for a local root.
    let r = request(addr, "GET", "/films", &[]);
    r.expect_status(301, "a directory without its slash");
    assert_eq!(r.header("location"), Some("/films/"));
    let page = request(addr, "GET", "/", &[]);
    page.expect_status(200, "the root page");
    assert!(
        page.body_text().contains("films/") && page.body_text().contains("notes.txt"),
        "{}",
        page.body_text()
    );
    assert!(request(addr, "GET", "/films/", &[]).body_text().contains("big.bin"));
    request(addr, "GET", "/missing.bin", &[]).expect_status(404, "a missing object");
    request(addr, "GET", "/notes.txt/", &[]).expect_status(404, "an object named as a directory");
    // Each slice came from the origin once; everything after the first GET was a hit.
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 3, "{text}");
    assert_eq!(metric(&text, "sluice_cache_bytes_total{source=\"origin\"}"), n as u64);
    assert!(metric(&text, "sluice_cache_hits_total") >= 5, "{text}");
    let again = request(addr, "GET", "/films/big.bin", &[]);
    assert_eq!(sha256(&again.body), sha256(data));
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 3);
    // The bytes from the cache are the bodies sent from hits: the range, the three parts, the
    // whole object the If-Range got and this last one (the cold first GET came from the origin).
    let from_cache = 1000 + (10 + 101 + 5) + n as u64 + n as u64;
    assert_eq!(metric(&text, "sluice_cache_bytes_total{source=\"cache\"}"), from_cache, "{text}");
}

/// Slices of the object the streaming tests read cold through a slowed origin.
const STREAMED_SLICES: usize = 6;

/// Six slices, the last one short.
fn streamed_object() -> &'static [u8] {
    static DATA: OnceLock<Vec<u8>> = OnceLock::new();
    DATA.get_or_init(|| {
        let data = pseudo_random(STREAMED_SLICES * SLICE - 4321, 16);
        put_object("edges/streamed", "big.bin", &data);
        data
    })
}

/// An edge for `engine` reaching SeaweedFS through a toxiproxy that gives each connection
/// 8 MB/s, so that a slice takes about half a second to arrive: the edge's progress through a
/// cold object can be seen between two slices.
fn slowed_edge(engine: &[&str], dir: &Path) -> (Toxiproxy, Server) {
    assert!(Toxiproxy::available(), "toxiproxy missing (scripts/test installs it)");
    let toxiproxy = Toxiproxy::start(&dir.join("toxiproxy.log")).unwrap();
    let upstream: SocketAddr = weed().s3_endpoint.trim_start_matches("http://").parse().unwrap();
    let proxy = toxiproxy.proxy("s3", upstream).unwrap();
    toxiproxy.add_toxic("s3", "slow", "bandwidth", Stream::Downstream, 1.0, r#"{"rate":8192}"#).unwrap();
    let endpoint = format!("http://{proxy}");
    // Three background fetch workers (`--fetch-workers`): enough for the two slices fetched ahead.
    let extra = ["--cache-size", "64M", "--s3-timeout", "5s", "--fetch-workers", "3"];
    let server = edge_via(&endpoint, engine, "edges/streamed", &dir.join("cache"), &extra);
    (toxiproxy, server)
}

/// Sends a whole GET of the streamed object, checks its head (a 200 with the whole length and
/// the store's ETag) and reads the first slice of the body; returns the socket and the bytes read.
fn read_first_slice(server: &Server) -> (TcpStream, Vec<u8>) {
    let len = streamed_object().len();
    let (mut s, head, mut body) = open_download(server.addr(), "/big.bin");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    assert!(head.lines().any(|l| l == format!("content-length: {len}")), "{head}");
    assert!(head.contains("etag: "), "{head}");
    let mut chunk = vec![0u8; 256 << 10];
    while body.len() < SLICE {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed within the first slice");
        body.extend_from_slice(&chunk[..n]);
    }
    (s, body)
}

/// Reads until the server closes the connection or the body reaches `len` bytes.
fn read_rest(s: &mut TcpStream, body: &mut Vec<u8>, len: usize) -> bool {
    let mut chunk = vec![0u8; 256 << 10];
    while body.len() < len {
        match s.read(&mut chunk) {
            Ok(n) if n > 0 => body.extend_from_slice(&chunk[..n]),
            _ => return false,
        }
    }
    true
}

fn a_cold_whole_object_starts_before_its_last_slice_is_fetched(engine: &[&str]) {
    let data = streamed_object();
    let dir = tempfile::tempdir().unwrap();
    let (_toxiproxy, server) = slowed_edge(engine, dir.path());
    let (mut s, mut body) = read_first_slice(&server);
    // The head and a whole slice are here, and the edge has not fetched the object: the first
    // byte waited for its slice (and the two fetched ahead of it), not for the last one.
    let text = server.scrape();
    let fetched = metric(&text, "sluice_cache_misses_total");
    assert!((fetched as usize) < STREAMED_SLICES, "{fetched} of {STREAMED_SLICES} slices fetched: {text}");
    let from_origin = metric(&text, "sluice_cache_bytes_total{source=\"origin\"}");
    assert!((from_origin as usize) < data.len(), "{from_origin} bytes from the origin");
    assert!(read_rest(&mut s, &mut body, data.len()), "the body ended early");
    assert_eq!(body.len(), data.len());
    assert_eq!(sha256(&body), sha256(data), "the streamed object");
    // Each slice was fetched once, and the keep-alive connection goes on.
    s.write_all(&get("/big.bin", &[("Range", "bytes=0-99")])).unwrap();
    let mut rest = Vec::new();
    let mut chunk = [0u8; 4096];
    while find(&rest, b"\r\n\r\n").is_none_or(|end| rest.len() < end + 4 + 100) {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after a whole streamed body");
        rest.extend_from_slice(&chunk[..n]);
    }
    let rest = rest.split_off(find(&rest, b"\r\n\r\n").unwrap() + 4);
    assert_eq!(rest, data[..100], "a range on the same connection");
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_misses_total"), STREAMED_SLICES as u64, "{text}");
    assert_eq!(metric(&text, "sluice_cache_bytes_total{source=\"origin\"}"), data.len() as u64);
    assert_eq!(metric(&text, "sluice_http_responses_cut_total"), 0, "{text}");
    // Slices after the first were fetched ahead by the background workers.
    assert!(metric(&text, "sluice_fetch_pool_jobs_total") >= 1, "{text}");
    assert_eq!(metric(&text, "sluice_fetch_pool_workers"), 3, "as many as --fetch-workers: {text}");
}

fn an_origin_failure_mid_body_cuts_the_response_and_the_edge_serves_on(engine: &[&str]) {
    let data = streamed_object();
    let dir = tempfile::tempdir().unwrap();
    let (toxiproxy, server) = slowed_edge(engine, dir.path());
    let (mut s, mut body) = read_first_slice(&server);
    // The origin goes away with slices still to fetch: the head promised the whole object, so
    // the connection closes short of it.
    toxiproxy.set_enabled("s3", false).unwrap();
    assert!(!read_rest(&mut s, &mut body, data.len()), "a whole body from an origin that went away");
    assert!(body.len() < data.len());
    assert!(body == data[..body.len()], "what was sent is the object's start");
    // Counted as cut, with a line saying why; the edge serves what it has.
    let cut = poll_until(Duration::from_secs(5), || {
        metric(&server.scrape(), "sluice_http_responses_cut_total") == 1
    });
    assert!(cut, "the cut response was not counted: {}", server.scrape());
    let logs = server.log_text();
    assert!(logs.contains("the response is cut short"), "no line for the cut:\n{logs}");
    let r = request(server.addr(), "GET", "/big.bin", &[("Range", "bytes=0-99")]);
    r.expect_status(206, "a cached range after the cut");
    assert_eq!(r.body, data[..100]);
}

#[test]
fn a_hundred_cold_clients_make_one_origin_request_per_slice() {
    let data = pseudo_random(2 * SLICE + 1000, 15);
    put_object("coalesce/c", "one.bin", &data);
    let cache = tempfile::tempdir().unwrap();
    let server =
        edge(&["--engine", "epoll", "--workers", "2"], "coalesce/c", cache.path(), &["--cache-size", "64M"]);
    let gets_before = weed_slice_gets("coalesce");
    // The start-up line's first stream came from a listing.
    let origin_before = metric(&server.scrape(), "sluice_origin_requests_total");
    // Every request needs all three slices: five whole ones, and 95 with a range in each slice.
    let failures = AtomicUsize::new(0);
    let start = std::sync::Barrier::new(100);
    std::thread::scope(|s| {
        for i in 0..100 {
            let (data, failures, start, addr) = (&data, &failures, &start, server.addr());
            s.spawn(move || {
                let mut c = Conn::open(addr);
                start.wait();
                if i < 5 {
                    c.send(get("/one.bin", &[]));
                    let r = c.response();
                    if r.status != 200 || r.body != *data {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                } else {
                    c.send(get("/one.bin", &[("Range", "bytes=0-99,4194304-4194403,8388608-8388707")]));
                    let r = c.response();
                    let parts = parse_multipart(&r).unwrap_or_default();
                    let ok = r.status == 206
                        && parts.len() == 3
                        && parts[0].data == data[..100]
                        && parts[1].data == data[SLICE..SLICE + 100]
                        && parts[2].data == data[2 * SLICE..2 * SLICE + 100];
                    if !ok {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            });
        }
    });
    assert_eq!(failures.load(Ordering::Relaxed), 0, "responses that were wrong");
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 3, "{text}");
    // One HEAD for the object's version, one GET per slice, nothing else.
    assert_eq!(metric(&text, "sluice_origin_requests_total") - origin_before, 4, "{text}");
    assert_eq!(weed_slice_gets("coalesce") - gets_before, 3, "GETs SeaweedFS counted");
    let waits = metric(&text, "sluice_cache_coalesced_waits_total");
    let hits = metric(&text, "sluice_cache_hits_total");
    assert!(waits > 0, "nobody waited for a fetch: {text}");
    assert!(hits + waits + 3 >= 300, "{text}");
}

#[test]
fn origin_failures_answer_502_or_504_with_a_log_line_and_cached_objects_still_serve() {
    assert!(Toxiproxy::available(), "toxiproxy missing (scripts/test installs it)");
    let dir = tempfile::tempdir().unwrap();
    let toxiproxy = Toxiproxy::start(&dir.path().join("toxiproxy.log")).unwrap();
    let upstream: SocketAddr = weed().s3_endpoint.trim_start_matches("http://").parse().unwrap();
    let proxy = toxiproxy.proxy("s3", upstream).unwrap();
    for (name, seed) in [("a.bin", 41), ("b.bin", 42)] {
        put_object("edges/faults", name, &pseudo_random(100_000, seed));
    }
    let cache = dir.path().join("cache");
    let endpoint = format!("http://{proxy}");
    let engine = ["--engine", "epoll", "--workers", "2"];
    let extra = ["--s3-timeout", "1s", "--cache-revalidate", "1s"];
    let server = edge_via(&endpoint, &engine, "edges/faults", &cache, &extra);
    let r = request(server.addr(), "GET", "/a.bin", &[]);
    assert_eq!(r.body, pseudo_random(100_000, 41));
    // The store resets every connection: a cold object is a 502, a cached one still serves.
    toxiproxy.add_toxic("s3", "down", "reset_peer", Stream::Downstream, 1.0, r#"{"timeout":0}"#).unwrap();
    request(server.addr(), "GET", "/b.bin", &[]).expect_status(502, "a cold object while the store resets");
    // Past --cache-revalidate, the failed revalidation keeps the version last seen (stale on error).
    std::thread::sleep(Duration::from_millis(1100));
    let r = request(server.addr(), "GET", "/a.bin", &[]);
    r.expect_status(200, "a cached object while the store is down");
    assert_eq!(r.body, pseudo_random(100_000, 41));
    toxiproxy.remove_toxic("s3", "down").unwrap();
    // The store stops answering: past --s3-timeout (and its retries), a 504.
    toxiproxy.add_toxic("s3", "silent", "timeout", Stream::Downstream, 1.0, r#"{"timeout":0}"#).unwrap();
    request(server.addr(), "GET", "/b.bin", &[])
        .expect_status(504, "a cold object while the store is silent");
    toxiproxy.remove_toxic("s3", "silent").unwrap();
    let r = request(server.addr(), "GET", "/b.bin", &[]);
    r.expect_status(200, "the store is back");
    assert_eq!(r.body, pseudo_random(100_000, 42));
    let text = server.scrape();
    assert!(metric(&text, "sluice_origin_errors_total") >= 2, "{text}");
    let logs = server.log_text();
    assert!(
        logs.contains("revalidation failed, serving the cached version"),
        "no stale-on-error line:\n{logs}"
    );
    for status in ["status=502", "status=504"] {
        assert!(
            logs.lines().any(|l| l.contains("origin:") && l.contains(status)),
            "no {status} line:\n{logs}"
        );
    }
}

#[test]
fn an_upload_stored_gzipped_is_served_both_ways_and_a_replacement_at_once() {
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), format!("{TOKEN}\n")).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let engine = ["--engine", "threads", "--threads-mode", "pool", "--send", "sendfile"];
    let server =
        edge(&engine, "edges/gzip", cache.path(), &["--upload-token-file", tokens.path().to_str().unwrap()]);
    let page: Vec<u8> =
        (0..2000).flat_map(|i| format!("<p>paragraph {i} of a long page</p>\n").into_bytes()).collect();
    let mut c = Conn::open(server.addr());
    c.send(format!(
        "PUT /site/page.html HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
        page.len()
    ));
    c.send(&page);
    let stored = c.response();
    stored.expect_status(201, "an HTML upload");
    let stored_len: usize = stored.header("sluice-stored-length").unwrap().parse().unwrap();
    assert!(stored_len < page.len() / 4, "stored {stored_len} bytes: not the gzip form");
    let gz = request(server.addr(), "GET", "/site/page.html", &[("Accept-Encoding", "gzip")]);
    gz.expect_status(200, "the gzip form");
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    let mut inflated = Vec::new();
    flate2::read::GzDecoder::new(gz.body.as_slice()).read_to_end(&mut inflated).unwrap();
    assert!(inflated == page, "the gzip form inflates to the page");
    let plain = request(server.addr(), "GET", "/site/page.html", &[]);
    plain.expect_status(200, "the inflated form");
    assert_eq!(plain.header("content-encoding"), None);
    assert!(plain.body == page, "the inflated form is the page");
    for r in [&gz, &plain] {
        assert_eq!(r.header("vary"), Some("Accept-Encoding"));
    }
    assert_ne!(gz.header("etag"), plain.header("etag"), "two representations, two tags");
    let r = request(server.addr(), "GET", "/site/page.html", &[("Range", "bytes=10-19")]);
    assert_eq!(r.body, page[10..20], "a range of the inflated form");
    // A replacement through this edge is served at once, not after --cache-revalidate (60 s).
    let v2 = pseudo_random(100_000, 51);
    let mut c = Conn::open(server.addr());
    c.send(format!(
        "PUT /site/page.html HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
        v2.len()
    ));
    c.send(&v2);
    c.response().expect_status(204, "a replacement");
    let r = request(server.addr(), "GET", "/site/page.html", &[]);
    assert!(r.body == v2, "the replacement, at once");
}

/// Bytes in the cache files of `dir`.
fn cache_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum()
}

#[test]
fn the_cache_stays_within_its_size_and_a_changed_object_is_served_whole() {
    for i in 0..8 {
        put_object("edges/bounded", &format!("lib/{i}.bin"), &pseudo_random(SLICE, 100 + i));
    }
    let cache = tempfile::tempdir().unwrap();
    let server = edge(
        &["--engine", "tokio", "--workers", "2"],
        "edges/bounded",
        cache.path(),
        &["--cache-size", "16M", "--cache-revalidate", "3s"],
    );
    // A library twice the cache's size, read twice in order: the worst case for an LRU.
    let limit = 16 * MIB as u64;
    for round in 0..2 {
        for i in 0..8 {
            let r = request(server.addr(), "GET", &format!("/lib/{i}.bin"), &[]);
            r.expect_status(200, "a library file");
            assert_eq!(r.body, pseudo_random(SLICE, 100 + i), "round {round}, file {i}");
            let held = metric(&server.scrape(), "sluice_cache_bytes{state=\"held\"}");
            assert!(held <= limit, "the cache holds {held} bytes, above {limit}");
            assert!(cache_bytes(cache.path()) <= limit, "{} bytes on disk", cache_bytes(cache.path()));
        }
    }
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 16, "{text}");
    assert_eq!(metric(&text, "sluice_cache_evictions_total"), 12, "{text}");

    // A version is resolved once per response: an object replaced while one of its slices is
    // cached is never stitched from both.
    let v1 = pseudo_random(2 * SLICE + 500, 21);
    let v2 = pseudo_random(2 * SLICE + 500, 22);
    put_object("edges/bounded", "changing.bin", &v1);
    let r = request(server.addr(), "GET", "/changing.bin", &[("Range", "bytes=0-99")]);
    assert_eq!(r.body, v1[..100], "the first version's first slice");
    put_object("edges/bounded", "changing.bin", &v2);
    let r = request(server.addr(), "GET", "/changing.bin", &[]);
    r.expect_status(200, "a changed object");
    assert!(r.body == v2, "a changed object read before revalidation is served new and whole, never mixed");
    // And once revalidated, a replacement of another length is served new and whole.
    let v3 = pseudo_random(SLICE + 7, 23);
    put_object("edges/bounded", "changing.bin", &v3);
    std::thread::sleep(Duration::from_millis(3100));
    let r = request(server.addr(), "GET", "/changing.bin", &[]);
    assert_eq!(r.content_length(), Some(v3.len() as u64));
    assert!(r.body == v3, "the object after revalidation");
}

/// HAProxy running deploy/haproxy.cfg in front of edges `a` and `b`, its files in `work`, once
/// it sees every edge up.
fn start_haproxy(a: &Server, b: &Server, work: &Path) -> Haproxy {
    let edge = |s: &Server| Edge { http: s.addr(), rtsp: s.rtsp_addr(), admin_port: s.admin_addr().port() };
    let lb = Haproxy::start(edge(a), edge(b), work, |_| {}).unwrap_or_else(|e| panic!("{e}"));
    let servers = [
        ("edges_http", "edge-a"),
        ("edges_http", "edge-b"),
        ("edges_rtsp", "edge-a"),
        ("edges_rtsp", "edge-b"),
    ];
    lb.wait_up(&servers, Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    lb
}

/// Opens a GET through HAProxy and reads the head; the body is left on the socket.
fn open_download(addr: SocketAddr, path: &str) -> (TcpStream, String, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(&get(path, &[])).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 << 10];
    loop {
        let n = s.read(&mut chunk).unwrap();
        assert!(n > 0, "closed before the head");
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let body = buf[end + 4..].to_vec();
            return (s, head, body);
        }
    }
}

fn edge_of(r: &Response) -> String {
    r.header("x-sluice-edge").unwrap_or("").to_string()
}

#[test]
fn two_edges_behind_haproxy_survive_losing_one() {
    let tokens = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(tokens.path(), format!("{TOKEN}\n")).unwrap();
    let (cache_a, cache_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let token_arg = tokens.path().to_str().unwrap();
    let a = edge(
        &["--engine", "uring", "--workers", "2", "--send", "splice"],
        "edges/topology",
        cache_a.path(),
        &["--upload-token-file", token_arg],
    );
    let b = edge(
        &["--engine", "tokio", "--workers", "2", "--send", "sendfile"],
        "edges/topology",
        cache_b.path(),
        &[],
    );
    let lb_dir = tempfile::tempdir().unwrap();
    let lb = start_haproxy(&a, &b, lb_dir.path());
    // HAProxy hashes the path (balance uri): find a name each edge owns, asking for objects that
    // do not exist yet (the 404 says which edge answered).
    let owned_by = |edge: &str, stem: &str| {
        (0..64)
            .map(|i| format!("/{stem}-{i}.bin"))
            .find(|path| edge_of(&request(lb.http, "HEAD", path, &[])) == edge)
            .unwrap_or_else(|| panic!("no name of 64 hashed to {edge}"))
    };
    let (big_path, small_path) = (owned_by("edge-a", "big"), owned_by("edge-b", "small"));
    // Uploads go through edge A (the uploads issue's PUT) into the bucket.
    let big = pseudo_random(24 * MIB + 77, 31);
    let small = pseudo_random(6 * MIB + 5, 32);
    let mp4 =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4")).unwrap();
    for (path, body) in [(big_path.as_str(), &big), (small_path.as_str(), &small), ("/clips/demo.mp4", &mp4)]
    {
        let mut c = Conn::open(a.addr());
        let head = format!(
            "PUT {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        c.send(head);
        c.send(body.as_slice());
        c.response().expect_status(201, "an upload through edge A");
    }
    // Edge B remembers the 404 of its probe for up to a second.
    let visible =
        poll_until(Duration::from_secs(3), || request(lb.http, "HEAD", &small_path, &[]).status == 200);
    assert!(visible, "{small_path} did not appear on edge B");

    // Ranges through HAProxy, byte-exact, each object always from the edge that owns it: each
    // object is cached on one edge, not on both.
    for (path, data, owner) in [(&big_path, &big, "edge-a"), (&small_path, &small, "edge-b")] {
        for i in 0..6u64 {
            let from = i * 3_000_001 % (data.len() as u64 - 70_000);
            let range = format!("bytes={from}-{}", from + 65_535);
            let r = request(lb.http, "GET", path, &[("Range", &range)]);
            r.expect_status(206, "a range through HAProxy");
            assert_bytes_eq(&r.body, &data[from as usize..from as usize + 65_536], "a range through HAProxy");
            assert_eq!(edge_of(&r), owner, "{path} from another edge than its owner");
        }
    }
    let cached = |edge: &Server| metric(&edge.scrape(), "sluice_cache_bytes_total{source=\"origin\"}");
    assert!(cached(&b) <= small.len() as u64, "edge B fetched more than its own object");
    // RTSP through HAProxy's TCP frontend: every frame.
    let (frames, stderr) = ffprobe_video_frames(&format!("rtsp://{}/clips/demo.mp4", lb.rtsp));
    assert_eq!(frames, "180", "frames over RTSP through HAProxy ({stderr})");

    // A download that edge A serves (it owns the object), cut by killing A.
    let (mut download, head, mut body) = open_download(lb.http, &big_path);
    assert!(head.contains("x-sluice-edge: edge-a"), "{head}");
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let mut chunk = vec![0u8; 256 << 10];
    while body.len() < 2 * MIB {
        let n = download.read(&mut chunk).unwrap();
        assert!(n > 0, "the download ended early");
        body.extend_from_slice(&chunk[..n]);
    }
    a.signal(libc::SIGKILL);
    let killed = Instant::now();
    // New requests while HAProxy finds out: none may fail.
    let failed = AtomicUsize::new(0);
    let sent = AtomicUsize::new(0);
    let down_after = std::thread::scope(|s| {
        let (failed, sent, big, lb, big_path) = (&failed, &sent, &big, &lb, big_path.as_str());
        s.spawn(move || {
            while killed.elapsed() < Duration::from_secs(4) {
                let r = request(lb.http, "GET", big_path, &[("Range", "bytes=1000-1999")]);
                sent.fetch_add(1, Ordering::Relaxed);
                if r.status != 206 || r.body != big[1000..2000] {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        let down =
            poll_until(Duration::from_secs(3), || lb.status("edges_http", "edge-a").starts_with("DOWN"));
        let down_after = killed.elapsed();
        assert!(down, "HAProxy did not mark edge A down within 3 s");
        down_after
    });
    println!(
        "edge A marked down {down_after:?} after SIGKILL; {} requests meanwhile",
        sent.load(Ordering::Relaxed)
    );
    assert_eq!(failed.load(Ordering::Relaxed), 0, "requests failed while edge A was down");
    assert!(sent.load(Ordering::Relaxed) > 0);
    // The cut download resumes with Range and ends byte-exact.
    loop {
        match download.read(&mut chunk) {
            Ok(n) if n > 0 => body.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    assert!(body.len() < big.len(), "the download was not cut");
    let range = format!("bytes={}-", body.len());
    let rest = request(lb.http, "GET", &big_path, &[("Range", &range)]);
    rest.expect_status(206, "the resumed download");
    assert_eq!(edge_of(&rest), "edge-b");
    body.extend_from_slice(&rest.body);
    assert_eq!(sha256(&body), sha256(&big), "the resumed download");
    // A new RTSP viewer plays from edge B.
    assert!(lb.status("edges_rtsp", "edge-a").starts_with("DOWN"));
    let (frames, stderr) = ffprobe_video_frames(&format!("rtsp://{}/clips/demo.mp4", lb.rtsp));
    assert_eq!(frames, "180", "frames from edge B ({stderr})");
}
