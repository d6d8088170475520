//! What goes in comes out under its own name, on every engine, on a local root and on an edge
//! serving a real SeaweedFS bucket: a file and its `.gz` namesake are two objects (a stored gzip
//! form never takes a user's name), names with spaces, non-ASCII, `+`, `&`, `%` round-trip through
//! PUT, the page's links, GET and HLS, an object another S3 client wrote under a UTF-8 key is
//! served, control characters are refused with a reason, racing create-only uploads have one
//! winner, a path under a file is 404, a refused upload leaves no directory behind and a
//! crash-left temporary upload file is swept at start.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::rtsp::RtspConn;
use common::*;
use sluice_harness::seaweedfs::SeaweedFs;

engine_matrix!(
    a_file_and_its_gz_namesake_are_two_objects_locally,
    a_file_and_its_gz_namesake_are_two_objects_on_an_edge,
    names_round_trip_locally,
    names_round_trip_on_an_edge,
    an_object_another_client_wrote_under_a_utf8_key_is_served,
    control_characters_and_reserved_names_are_refused_with_a_reason,
    racing_create_only_uploads_have_one_winner_locally,
    racing_create_only_uploads_through_two_edges_have_one_winner,
    a_path_under_a_file_is_not_found,
    a_refused_upload_leaves_no_directory_and_says_why,
    a_crash_left_temporary_upload_file_is_swept_at_start,
);

const TOKEN: &str = "names-token-0123456789";

/// HLS from an s3:// library: flip once edges package HLS, and every edge round trip checks it.
const HLS_ON_EDGES: bool = true;

/// The names every round trip uses, exactly as the user gave them (`caf%C3%A9.mp4` literally).
const NAMES: [&str; 4] = ["my clip – été 日本.mp4", "a+b=c&d.mp4", "100%.mp4", "caf%C3%A9.mp4"];

/// The SeaweedFS this binary's tests share.
fn weed() -> &'static SeaweedFs {
    shared_seaweedfs("names")
}

/// A file of upload tokens holding `TOKEN`, in a directory that lives as long as the test.
fn token_file() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens");
    std::fs::write(&path, format!("{TOKEN}\n")).unwrap();
    let path = path.to_str().unwrap().to_string();
    (dir, path)
}

/// A server over a local root that accepts `TOKEN`.
struct Local {
    fx: Fixture,
    server: Server,
    _tokens: tempfile::TempDir,
}

fn local(engine: &[&str], extra: &[&str]) -> Local {
    let fx = Fixture::new();
    let (dir, tokens) = token_file();
    let mut args = vec!["--upload-token-file", tokens.as_str()];
    args.extend_from_slice(extra);
    let server = Server::serve(engine, &fx, &args);
    Local { fx, server, _tokens: dir }
}

/// An edge serving `s3://names/PREFIX` that accepts `TOKEN`, with its cache and tokens.
struct Edge {
    server: Server,
    prefix: String,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

/// A prefix of the shared bucket that is this test's and this engine's alone.
fn prefix_for(test: &str, engine: &[&str]) -> String {
    format!("{test}-{}", engine.join("-"))
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect()
}

fn edge(engine: &[&str], prefix: &str) -> Edge {
    let weed = weed();
    let cache = tempfile::tempdir().unwrap();
    let (tokens_dir, tokens) = token_file();
    let store = format!("s3://{}/{prefix}", weed.bucket);
    let args = [
        "--store",
        &store,
        "--s3-endpoint",
        &weed.s3_endpoint,
        "--cache-dir",
        cache.path().to_str().unwrap(),
        "--cache-revalidate",
        "1s",
        "--upload-token-file",
        &tokens,
    ];
    let server = Server::start(engine, &args);
    Edge { server, prefix: prefix.to_string(), _dirs: (cache, tokens_dir) }
}

/// Percent-encodes every byte of a path segment but the unreserved ones (RFC 3986 §2.3).
fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Decodes `%XX` escapes once (as the server does), leaving everything else.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex =
            bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).unwrap()
}

/// One request with `headers` (name, value) and `body` on a fresh connection.
fn send(server: &Server, method: &str, target: &str, headers: &[(&str, &str)], body: &[u8]) -> Response {
    let mut raw = request(method, target, headers);
    raw.extend_from_slice(body);
    let mut c = Conn::open(server.addr());
    let _ = c.try_send(raw);
    c.read_response(method == "HEAD").unwrap_or_else(|e| panic!("{method} {target}: {e}"))
}

fn put(server: &Server, target: &str, content_type: &str, body: &[u8]) -> Response {
    let len = body.len().to_string();
    let auth = format!("Bearer {TOKEN}");
    let headers =
        [("Authorization", auth.as_str()), ("Content-Length", len.as_str()), ("Content-Type", content_type)];
    send(server, "PUT", target, &headers, body)
}

fn delete(server: &Server, target: &str) -> Response {
    let auth = format!("Bearer {TOKEN}");
    send(server, "DELETE", target, &[("Authorization", auth.as_str())], b"")
}

fn get(server: &Server, target: &str) -> Response {
    send(server, "GET", target, &[], b"")
}

/// The body of an error response, which must say why in one line after the status.
#[track_caller]
fn reason(r: &Response) -> String {
    let text = String::from_utf8_lossy(&r.body).into_owned();
    let prefix = format!("{} ", r.status);
    assert!(text.starts_with(&prefix) && text.contains(": "), "no reason in {r:?}: {text:?}");
    assert_eq!(text.trim_end().lines().count(), 1, "one line: {text:?}");
    text
}

/// The relative links (`./…`) of a directory page, decoded once as a browser's request would be.
fn page_links(page: &[u8]) -> Vec<String> {
    let page = String::from_utf8_lossy(page);
    page.split("href=\"./").skip(1).filter_map(|rest| rest.split('"').next()).map(str::to_string).collect()
}

/// Waits (bounded) until the directory page lists every one of `names`; the page's links.
#[track_caller]
fn links_listing(server: &Server, dir: &str, names: &[&str]) -> Vec<String> {
    let mut links = Vec::new();
    let listed = poll_until(Duration::from_secs(15), || {
        let page = get(server, dir);
        links = if page.status == 200 { page_links(&page.body) } else { Vec::new() };
        names.iter().all(|n| links.iter().any(|l| decode(l) == *n))
    });
    assert!(listed, "{dir} lists {names:?}: links {links:?}");
    links
}

fn email() -> Vec<u8> {
    sluice_load::payload::email_html(50_000, 7)
}

/// A real gzip file, different from the email: a user's own `.gz`.
fn users_gz() -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(6));
    std::io::Write::write_all(&mut enc, &pseudo_random(20_000, 3)).unwrap();
    enc.finish().unwrap()
}

/// `x.html` and `x.html.gz`, uploaded in both orders under `base`, stay two objects: each served
/// byte-exact with its own type, both listed by their names, and deleting one leaves the other.
fn two_representations(server: &Server, base: &str) {
    let (html, gz) = (email(), users_gz());
    for (dir, html_first) in [("first-html", true), ("first-gz", false)] {
        let d = format!("{base}/{dir}");
        let put_html = || put(server, &format!("{d}/x.html"), "text/html; charset=utf-8", &html);
        let put_gz = || put(server, &format!("{d}/x.html.gz"), "application/gzip", &gz);
        if html_first {
            put_html().expect_status(201, "x.html first");
            put_gz().expect_status(201, "x.html.gz is a new object, not x.html's form");
        } else {
            put_gz().expect_status(201, "x.html.gz first");
            put_html().expect_status(201, "x.html is a new object");
        }
        let check_html = || {
            let r = get(server, &format!("{d}/x.html"));
            r.expect_status(200, "GET x.html");
            assert_bytes_eq(&r.body, &html, "x.html");
            assert!(r.header("content-type").unwrap().starts_with("text/html"), "{r:?}");
        };
        let check_gz = || {
            for accept in [None, Some("gzip")] {
                let headers: Vec<(&str, &str)> = accept.map(|a| ("Accept-Encoding", a)).into_iter().collect();
                let r = send(server, "GET", &format!("{d}/x.html.gz"), &headers, b"");
                r.expect_status(200, "GET x.html.gz");
                assert_bytes_eq(&r.body, &gz, "x.html.gz, served as itself");
                assert_eq!(r.header("content-type"), Some("application/gzip"));
                assert_eq!(r.header("content-encoding"), None, "a .gz file is not an encoding of another");
            }
        };
        check_html();
        check_gz();
        let links = links_listing(server, &format!("{d}/"), &["x.html", "x.html.gz"]);
        assert_eq!(links.len(), 2, "only the two names, no stored form: {links:?}");
        delete(server, &format!("{d}/x.html")).expect_status(204, "DELETE x.html");
        get(server, &format!("{d}/x.html")).expect_status(404, "x.html is gone");
        check_gz();
        put_html().expect_status(201, "x.html again");
        delete(server, &format!("{d}/x.html.gz")).expect_status(204, "DELETE x.html.gz");
        get(server, &format!("{d}/x.html.gz")).expect_status(404, "x.html.gz is gone");
        check_html();
    }
}

fn a_file_and_its_gz_namesake_are_two_objects_locally(engine: &[&str]) {
    let l = local(engine, &[]);
    two_representations(&l.server, "/reps");
    // The email is stored gzipped, under a hidden name no client can upload or request.
    let hidden = l.fx.path("reps/first-gz/.sluice-gzip.x.html");
    assert!(hidden.is_file(), "the gzip form is kept under its hidden name");
    get(&l.server, "/reps/first-gz/.sluice-gzip.x.html")
        .expect_status(404, "a stored form is not requestable");
    let r = put(&l.server, "/reps/first-gz/.sluice-gzip.x.html", "text/html", b"x");
    r.expect_status(400, "a reserved name is not uploadable");
    assert!(reason(&r).contains("reserved"), "{}", reason(&r));
    // /streams lists the uploaded names, never a stored form.
    let streams: serde_json::Value = serde_json::from_str(&l.server.streams()).unwrap();
    let paths: Vec<&str> =
        streams["items"].as_array().unwrap().iter().filter_map(|i| i["path"].as_str()).collect();
    assert!(paths.contains(&"/reps/first-gz/x.html"), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains(".sluice")), "{paths:?}");
}

fn a_file_and_its_gz_namesake_are_two_objects_on_an_edge(engine: &[&str]) {
    let e = edge(engine, &prefix_for("reps", engine));
    two_representations(&e.server, "/reps");
}

/// The demo MP4, the body every name carries (so its HLS packaging can be checked).
fn demo_mp4() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4")).unwrap()
}

/// Every name round-trips: PUT under its encoded path, its link on the page, GET through that
/// link, RTSP `DESCRIBE`, and (when `hls`) its `master.m3u8`, with ffprobe reading the first
/// name's video over RTSP and HLS.
fn round_trip(server: &Server, hls: bool) {
    let mp4 = demo_mp4();
    for name in NAMES {
        put(server, &format!("/n/sub/{}", encode(name)), "video/mp4", &mp4).expect_status(201, name);
    }
    let links = links_listing(server, "/n/sub/", &NAMES);
    for name in NAMES {
        let link = links.iter().find(|l| decode(l) == name).unwrap();
        let r = get(server, &format!("/n/sub/{link}"));
        r.expect_status(200, &format!("GET {name} through the page's link {link}"));
        assert_bytes_eq(&r.body, &mp4, name);
        if hls {
            let r = get(server, &format!("/n/sub/{link}/master.m3u8"));
            r.expect_status(200, &format!("{name}'s master.m3u8"));
            assert!(r.body.starts_with(b"#EXTM3U"), "{name}: {r:?}");
        }
    }
    // RTSP: every name DESCRIBEs to a session description with its video, and ffprobe plays the
    // first (spaces, a dash and non-ASCII) whole over RTSP.
    let mut rtsp = RtspConn::open(server.rtsp_addr());
    for name in NAMES {
        let url = rtsp.url(&format!("/n/sub/{}", encode(name)));
        let r = rtsp.request("DESCRIBE", &url, &[("Accept", "application/sdp")]);
        r.expect(200, &format!("DESCRIBE {name}"));
        assert!(String::from_utf8_lossy(&r.body).contains("m=video"), "{name}: no video in its SDP");
    }
    let url = format!("rtsp://{}/n/sub/{}", server.rtsp_addr(), encode(NAMES[0]));
    let (frames, stderr) = ffprobe_video_frames(&url);
    assert_eq!(frames, "180", "frames over {url} ({stderr})");
    if hls {
        let url = format!("http://{}/n/sub/{}/master.m3u8", server.addr(), encode(NAMES[0]));
        // The HLS demuxer also lists its streams under a program: the same count, printed twice.
        let (frames, stderr) = ffprobe_video_frames(&url);
        let counts: Vec<&str> = frames.lines().filter(|l| !l.trim().is_empty()).collect();
        assert!(
            !counts.is_empty() && counts.iter().all(|c| *c == "180"),
            "frames over {url}: {frames:?} ({stderr})"
        );
    }
}

fn names_round_trip_locally(engine: &[&str]) {
    let l = local(engine, &[]);
    round_trip(&l.server, true);
    for name in NAMES {
        assert_eq!(l.fx.file(&format!("n/sub/{name}")), demo_mp4(), "stored under the name itself: {name}");
    }
}

/// Keys in the shared bucket under `prefix/`, as boto3 (a client sluice did not write) lists them.
fn keys_by_boto3(prefix: &str) -> Vec<String> {
    let weed = weed();
    let script = "import boto3,sys\n\
        s3=boto3.client('s3',endpoint_url=sys.argv[1],aws_access_key_id=sys.argv[2],\
        aws_secret_access_key=sys.argv[3],region_name='us-east-1')\n\
        r=s3.list_objects_v2(Bucket=sys.argv[4],Prefix=sys.argv[5])\n\
        print('\\n'.join(o['Key'] for o in r.get('Contents',[])))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &weed.s3_endpoint, sluice_harness::seaweedfs::ACCESS_KEY])
        .args([sluice_harness::seaweedfs::SECRET_KEY, &weed.bucket, &format!("{prefix}/")])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "boto3 list: {}", String::from_utf8_lossy(&out.stderr));
    let mut keys: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
    keys.sort();
    keys
}

/// Writes `body` under `key` of the shared bucket with boto3.
fn put_by_boto3(key: &str, body: &[u8]) {
    let weed = weed();
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), body).unwrap();
    let script = "import boto3,sys\n\
        s3=boto3.client('s3',endpoint_url=sys.argv[1],aws_access_key_id=sys.argv[2],\
        aws_secret_access_key=sys.argv[3],region_name='us-east-1')\n\
        s3.put_object(Bucket=sys.argv[4],Key=sys.argv[5],Body=open(sys.argv[6],'rb').read())\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &weed.s3_endpoint, sluice_harness::seaweedfs::ACCESS_KEY])
        .args([sluice_harness::seaweedfs::SECRET_KEY, &weed.bucket, key, file.path().to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "boto3 put: {}", String::from_utf8_lossy(&out.stderr));
}

fn names_round_trip_on_an_edge(engine: &[&str]) {
    let e = edge(engine, &prefix_for("names", engine));
    round_trip(&e.server, HLS_ON_EDGES);
    let mut expected: Vec<String> = NAMES.iter().map(|n| format!("{}/n/sub/{n}", e.prefix)).collect();
    expected.sort();
    assert_eq!(keys_by_boto3(&e.prefix), expected, "each key is the name as given, byte for byte");
}

fn an_object_another_client_wrote_under_a_utf8_key_is_served(engine: &[&str]) {
    let prefix = prefix_for("boto", engine);
    let body = pseudo_random(100_000, 11);
    put_by_boto3(&format!("{prefix}/boto/été 日本.mp4"), &body);
    let e = edge(engine, &prefix);
    let target = "/boto/%C3%A9t%C3%A9%20%E6%97%A5%E6%9C%AC.mp4";
    let r = get(&e.server, target);
    r.expect_status(200, "GET of boto3's UTF-8 key");
    assert_bytes_eq(&r.body, &body, "boto3's object");
    send(&e.server, "HEAD", target, &[], b"").expect_status(200, "HEAD of boto3's UTF-8 key");
    let links = links_listing(&e.server, "/boto/", &["été 日本.mp4"]);
    let r = get(&e.server, &format!("/boto/{}", links[0]));
    r.expect_status(200, "GET through the page's link");
    assert_bytes_eq(&r.body, &body, "boto3's object through the link");
}

/// PUTs that must be refused with 400 and a reason naming why.
fn refused_names(server: &Server) {
    for (target, why) in [
        ("/c/a%01b.txt", "control character"),
        ("/c/line%0Abreak.txt", "control character"),
        ("/c/del%7F.txt", "control character"),
        ("/c/%FF%FE.txt", "UTF-8"),
        ("/c/.sluice-gzip.x.html", "reserved"),
    ] {
        let r = put(server, target, "text/plain", b"x");
        r.expect_status(400, target);
        assert!(reason(&r).contains(why), "{target}: {}", reason(&r));
        get(server, target).expect_status(if why == "UTF-8" { 400 } else { 404 }, target);
    }
}

fn control_characters_and_reserved_names_are_refused_with_a_reason(engine: &[&str]) {
    let l = local(engine, &[]);
    refused_names(&l.server);
    assert!(!l.fx.path("c").exists(), "a refused name creates nothing");
    let e = edge(engine, &prefix_for("control", engine));
    refused_names(&e.server);
    assert!(keys_by_boto3(&e.prefix).is_empty(), "a refused name stores nothing");
}

/// Two uploads of one key with `If-None-Match: *` at once, one to each server: exactly one 201
/// and one 412, and the winner's bytes are stored. Five rounds.
fn race(a: &Server, b: &Server) {
    for round in 0..5 {
        let target = format!("/race/k{round}.bin");
        let barrier = std::sync::Barrier::new(2);
        let statuses: Vec<(u16, Vec<u8>)> = std::thread::scope(|s| {
            let racers: Vec<_> = [(a, 1u8), (b, 2u8)]
                .into_iter()
                .map(|(server, who)| {
                    let (target, barrier) = (&target, &barrier);
                    s.spawn(move || {
                        let body = vec![who; 64 * 1024];
                        let len = body.len().to_string();
                        let auth = format!("Bearer {TOKEN}");
                        let mut raw = request(
                            "PUT",
                            target,
                            &[("Authorization", &auth), ("Content-Length", &len), ("If-None-Match", "*")],
                        );
                        raw.extend_from_slice(&body);
                        let mut c = Conn::open(server.addr());
                        barrier.wait();
                        c.send(raw);
                        (c.response().status, body)
                    })
                })
                .collect();
            racers.into_iter().map(|r| r.join().unwrap()).collect()
        });
        let mut codes: Vec<u16> = statuses.iter().map(|(s, _)| *s).collect();
        codes.sort();
        assert_eq!(codes, [201, 412], "round {round}");
        let winner = &statuses.iter().find(|(s, _)| *s == 201).unwrap().1;
        let r = get(a, &target);
        r.expect_status(200, "the winner");
        assert_bytes_eq(&r.body, winner, "the winner's bytes");
    }
}

fn racing_create_only_uploads_have_one_winner_locally(engine: &[&str]) {
    let l = local(engine, &[]);
    race(&l.server, &l.server);
}

fn racing_create_only_uploads_through_two_edges_have_one_winner(engine: &[&str]) {
    let prefix = prefix_for("race", engine);
    let (a, b) = (edge(engine, &prefix), edge(engine, &prefix));
    race(&a.server, &b.server);
}

fn a_path_under_a_file_is_not_found(engine: &[&str]) {
    let l = local(engine, &[]);
    for method in ["GET", "HEAD"] {
        send(&l.server, method, "/t1.html/x", &[], b"").expect_status(404, method);
    }
    let r = delete(&l.server, "/t1.html/x");
    r.expect_status(404, "DELETE under a file");
    reason(&r);
    let r = put(&l.server, "/t1.html/x", "text/plain", b"x");
    r.expect_status(409, "PUT under a file");
    assert!(reason(&r).contains("directory"), "{}", reason(&r));
    assert_eq!(l.fx.file("t1.html"), t1_html());
    let e = edge(engine, &prefix_for("under", engine));
    put(&e.server, "/a.txt", "text/plain", b"a").expect_status(201, "a file on the edge");
    for method in ["GET", "HEAD"] {
        send(&e.server, method, "/a.txt/x", &[], b"").expect_status(404, method);
    }
    delete(&e.server, "/a.txt/x").expect_status(404, "DELETE under a file on the edge");
}

fn a_refused_upload_leaves_no_directory_and_says_why(engine: &[&str]) {
    let l = local(engine, &["--max-upload", "1000"]);
    let s = &l.server;
    let r = put(s, "/r413/a/b.bin", "application/octet-stream", &[1; 2000]);
    r.expect_status(413, "over the limit");
    assert!(reason(&r).contains("the upload is 2000 bytes, the limit is 1000"), "{}", reason(&r));
    let r = send(s, "PUT", "/r401/a/b.bin", &[("Content-Length", "1")], b"x");
    r.expect_status(401, "no token");
    reason(&r);
    let auth = format!("Bearer {TOKEN}");
    let headers = [("Authorization", auth.as_str()), ("Content-Length", "1"), ("If-Match", "\"1-1\"")];
    let r = send(s, "PUT", "/r412/a/b.bin", &headers, b"x");
    r.expect_status(412, "If-Match on a missing key");
    reason(&r);
    let headers = [
        ("Authorization", auth.as_str()),
        ("Content-Length", "5"),
        ("Content-MD5", "XUFAKrxLKna5cZ2REBfFkg=="),
    ];
    let r = send(s, "PUT", "/r400/a/b.bin", &headers, b"hellO");
    r.expect_status(400, "checksum mismatch");
    assert!(reason(&r).contains("nothing was stored"), "{}", reason(&r));
    for dir in ["r413", "r401", "r412", "r400"] {
        assert!(!l.fx.path(dir).exists(), "{dir} was created by a refused upload");
    }
    let stray: Vec<PathBuf> = std::fs::read_dir(&l.fx.root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(".sluice-upload"))
        .collect();
    assert!(stray.is_empty(), "temporary files left: {stray:?}");
    let (_dir, tokens) = token_file();
    drop(l);
    // Uploads off: 403 with the reason.
    let fx = Fixture::new();
    let off = Server::serve(engine, &fx, &[]);
    let r = put(&off, "/r403/a.bin", "text/plain", b"x");
    r.expect_status(403, "uploads off");
    assert!(reason(&r).contains("uploads are off"), "{}", reason(&r));
    let _ = tokens;
}

fn a_crash_left_temporary_upload_file_is_swept_at_start(engine: &[&str]) {
    let fx = Fixture::new();
    // What a SIGKILLed upload leaves: a temporary file named after a process that is gone (no pid
    // reaches a billion).
    fx.write("sub/.sluice-upload-999999999-3", b"half an upload");
    fx.write(".sluice-upload-999999998-0", b"another half");
    let (_dir, tokens) = token_file();
    let server = Server::serve(engine, &fx, &["--upload-token-file", &tokens]);
    assert!(!fx.path("sub/.sluice-upload-999999999-3").exists());
    assert!(!fx.path(".sluice-upload-999999998-0").exists());
    assert_eq!(fx.file("sub/inner.txt"), b"inner file\n", "other files stay");
    let logged =
        poll_until(Duration::from_secs(5), || server.log_text().contains("removed 2 temporary upload file"));
    assert!(logged, "one line says how many: {}", server.log_text());
}
