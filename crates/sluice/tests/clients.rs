//! Clients we did not write (curl, ffprobe) against every engine × send strategy, and the
//! built-in demo library that `sluice serve` with no --root serves.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::process::Command;
use std::time::Duration;

use common::*;

engine_matrix!(
    curl_fetches_ranges_and_files,
    ffprobe_counts_the_demo_frames,
    demo_library_page_has_a_player,
    demo_video_is_served_with_ranges,
);

const DEMO_LEN: usize = 275_311;

/// curl with no proxy, a time limit, and the response head included in its output.
fn curl(url: &str, extra: &[&str]) -> Response {
    let curl = require_tool("curl", "curl");
    let mut cmd = Command::new(curl);
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        cmd.env_remove(v);
    }
    cmd.args(["-sS", "-i", "--noproxy", "*", "--max-time", "10"]).args(extra).arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(20));
    assert!(status.success(), "curl {extra:?} {url} failed ({status}): {}", String::from_utf8_lossy(&err));
    Response::parse(&out, false, true)
        .unwrap_or_else(|e| panic!("curl {extra:?} {url}: cannot parse its output: {e}"))
        .unwrap_or_else(|| panic!("curl {extra:?} {url}: incomplete response: {:?}", lossy_prefix(&out, 300)))
        .0
}

fn curl_fetches_ranges_and_files(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let base = format!("http://{}", server.addr());
    let r = curl(&format!("{base}/t1.html"), &["-r", "0-8"]);
    r.expect_status(206, "curl -r 0-8");
    assert_eq!(r.body, &t1[0..9], "curl -r 0-8");
    let r = curl(&format!("{base}/t1.html"), &["-r", "-10"]);
    r.expect_status(206, "curl -r -10");
    assert_eq!(r.body, &t1[990..], "curl -r -10");
    let r = curl(&format!("{base}/t1.html"), &["-r", "0-9,500-509,990-"]);
    r.expect_status(206, "curl multi-range");
    let parts = parse_multipart(&r).unwrap_or_else(|e| panic!("curl multi-range: {e}\n{r:?}"));
    let spans: Vec<_> = parts.iter().map(|p| p.range).collect();
    assert_eq!(spans, [(0, 9, 1000), (500, 509, 1000), (990, 999, 1000)], "curl multi-range parts");
    for p in &parts {
        assert_eq!(
            p.data,
            &t1[p.range.0 as usize..=p.range.1 as usize],
            "curl multi-range part {:?}",
            p.range
        );
    }
    let r = curl(&format!("{base}/1m.bin"), &[]);
    r.expect_status(200, "curl whole 1m.bin");
    assert_bytes_eq(&r.body, &fx.file("1m.bin"), "curl whole 1m.bin");
    // Two URLs in one curl run: the second reuses the kept-alive connection.
    let mut cmd = Command::new(require_tool("curl", "curl"));
    for v in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    cmd.args(["-sS", "--noproxy", "*", "--max-time", "10", "-o", "/dev/null", "-o", "/dev/null"])
        .args(["-w", "%{http_code} %{num_connects}\\n"])
        .arg(format!("{base}/t1.html"))
        .arg(format!("{base}/64k.bin"));
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(20));
    assert!(status.success(), "curl two URLs failed ({status}): {}", String::from_utf8_lossy(&err));
    assert_eq!(
        String::from_utf8_lossy(&out),
        "200 1\n200 0\n",
        "curl: two requests on one kept-alive connection"
    );
}

fn ffprobe_counts_the_demo_frames(engine: &[&str]) {
    let server = Server::start(engine, &[]);
    let (frames, stderr) = ffprobe_video_frames(&format!("http://{}/sluice-demo.mp4", server.addr()));
    assert_eq!(frames, "180", "ffprobe frame count (stderr: {stderr})");
    assert!(stderr.trim().is_empty(), "ffprobe reported errors reading over HTTP: {stderr}");
}

fn demo_library_page_has_a_player(engine: &[&str]) {
    let server = Server::start(engine, &[]);
    assert!(
        server.logs().iter().any(|l| l.contains("listening on http://") && l.contains("demo")),
        "the start-up line should say the demo library is served:\n{}",
        server.log_text()
    );
    let r = fetch_get(server.addr(), "/", &[]);
    r.expect_status(200, "GET / (demo)");
    let ct = r.header("content-type").unwrap_or("");
    assert!(ct.starts_with("text/html"), "GET / Content-Type {ct:?}");
    let page = r.body_text();
    assert!(page.contains("<video"), "the demo page has a <video> player:\n{page}");
    assert!(page.contains("sluice-demo.mp4"), "the demo page names sluice-demo.mp4:\n{page}");
}

fn demo_video_is_served_with_ranges(engine: &[&str]) {
    let server = Server::start(engine, &[]);
    let mut c = Conn::open(server.addr());
    c.send(get("/sluice-demo.mp4", &[]));
    let r = c.response();
    r.expect_status(200, "GET /sluice-demo.mp4");
    assert_eq!(r.header("content-type"), Some("video/mp4"), "demo Content-Type\n{r:?}");
    assert_eq!(r.content_length(), Some(DEMO_LEN as u64), "demo Content-Length\n{r:?}");
    assert_eq!(r.header("accept-ranges"), Some("bytes"), "demo Accept-Ranges\n{r:?}");
    assert_eq!(r.body.len(), DEMO_LEN);
    assert_eq!(&r.body[4..8], b"ftyp", "the demo file starts with an MP4 ftyp box");
    let whole = r.body;
    // What a browser's player asks for: an open range, then a seek near the end.
    c.send(get("/sluice-demo.mp4", &[("Range", "bytes=0-")]));
    let r = c.response();
    r.expect_status(206, "demo bytes=0-");
    assert_eq!(r.header("content-range"), Some(format!("bytes 0-{}/{DEMO_LEN}", DEMO_LEN - 1).as_str()));
    assert_bytes_eq(&r.body, &whole, "demo bytes=0-");
    c.send(get("/sluice-demo.mp4", &[("Range", "bytes=200000-")]));
    let r = c.response();
    r.expect_status(206, "demo bytes=200000-");
    assert_bytes_eq(&r.body, &whole[200_000..], "demo bytes=200000-");
}
