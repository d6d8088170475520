//! HTTP behaviour on every engine × send strategy: whole files, byte ranges (nginx's range.t),
//! conditional requests, HEAD, keep-alive, pipelining and connection closing, directories.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use common::*;

engine_matrix!(
    whole_files_are_byte_exact,
    ranges_single,
    ranges_on_large_file_offsets,
    ranges_multipart,
    ranges_multipart_skips_unsatisfiable,
    ranges_multipart_binary,
    ranges_summing_past_the_file_get_200,
    ranges_unsatisfiable_or_malformed_get_416,
    ranges_beyond_max_ranges_get_200,
    etag_round_trip_gives_304,
    if_modified_since_gives_304,
    if_range_with_etag_gives_206,
    if_range_mismatch_gives_200,
    if_range_with_last_modified_gives_206,
    head_has_headers_and_no_body,
    keep_alive_20_sequential_requests,
    pipelined_requests_answered_in_order,
    connection_close_is_honoured,
    http10_closes_without_keep_alive,
    http10_keep_alive_when_asked,
    directories_redirect_and_list,
    missing_files_are_404,
    query_strings_and_encoded_names,
);

const T1_LEN: usize = 1000;

fn whole_files_are_byte_exact(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = Conn::open(server.addr());
    for (name, ctype) in [
        ("1m.bin", None),
        ("64k.bin", None),
        ("t1.html", Some("text/html")),
        ("sub/inner.txt", Some("text/plain")),
    ] {
        c.send(get(&format!("/{name}"), &[]));
        let r = c.response();
        r.expect_status(200, name);
        let expected = fx.file(name);
        assert_eq!(r.content_length(), Some(expected.len() as u64), "{name}: Content-Length\n{r:?}");
        assert_bytes_eq(&r.body, &expected, name);
        assert_eq!(r.header("accept-ranges"), Some("bytes"), "{name}: Accept-Ranges\n{r:?}");
        assert!(r.header("etag").is_some(), "{name}: no ETag\n{r:?}");
        assert!(r.header("last-modified").is_some(), "{name}: no Last-Modified\n{r:?}");
        assert!(r.header("date").is_some(), "{name}: no Date\n{r:?}");
        if let Some(ct) = ctype {
            let got = r.header("content-type").unwrap_or("");
            assert!(got.starts_with(ct), "{name}: Content-Type {got:?}, expected {ct}");
        }
        let lm = r.header("last-modified").unwrap();
        assert_eq!(lm, httpdate_of(FIXTURE_MTIME), "{name}: Last-Modified should be the file's mtime");
    }
}

/// The IMF-fixdate of a Unix time (only for whole-second times in 2021).
fn httpdate_of(secs: u64) -> &'static str {
    assert_eq!(secs, FIXTURE_MTIME);
    "Fri, 01 Jan 2021 00:00:00 GMT"
}

/// Sends a GET for `target` with `Range: range` and returns the response.
fn ranged(c: &mut Conn, target: &str, range: &str) -> Response {
    c.send(get(target, &[("Range", range)]));
    c.response()
}

#[track_caller]
fn assert_single_range(r: &Response, file: &[u8], first: usize, last: usize, what: &str) {
    r.expect_status(206, what);
    let expected_cr = format!("bytes {first}-{last}/{}", file.len());
    assert_eq!(r.header("content-range"), Some(expected_cr.as_str()), "{what}: Content-Range\n{r:?}");
    assert_eq!(r.content_length(), Some((last - first + 1) as u64), "{what}: Content-Length\n{r:?}");
    assert_bytes_eq(&r.body, &file[first..=last], what);
}

fn ranges_single(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    assert_eq!(t1.len(), T1_LEN);
    let mut c = Conn::open(server.addr());
    // nginx range.t
    let r = ranged(&mut c, "/t1.html", "bytes=0-8");
    assert_single_range(&r, &t1, 0, 8, "bytes=0-8");
    assert_eq!(r.body, b"X000XXXXX");
    let r = ranged(&mut c, "/t1.html", "bytes=-10");
    assert_single_range(&r, &t1, 990, 999, "bytes=-10");
    assert_eq!(r.body, b"X099XXXXXX");
    let r = ranged(&mut c, "/t1.html", "bytes=990-");
    assert_single_range(&r, &t1, 990, 999, "bytes=990-");
    let r = ranged(&mut c, "/t1.html", "bytes=990-1990");
    assert_single_range(&r, &t1, 990, 999, "bytes=990-1990 (clamped)");
    // A few more shapes: one byte, the whole file as a range, a suffix longer than the file.
    let r = ranged(&mut c, "/t1.html", "bytes=0-0");
    assert_single_range(&r, &t1, 0, 0, "bytes=0-0");
    let r = ranged(&mut c, "/t1.html", "bytes=999-999");
    assert_single_range(&r, &t1, 999, 999, "bytes=999-999");
    let r = ranged(&mut c, "/t1.html", "bytes=0-");
    assert_single_range(&r, &t1, 0, 999, "bytes=0-");
    let r = ranged(&mut c, "/t1.html", "bytes=-2000");
    assert_single_range(&r, &t1, 0, 999, "bytes=-2000");
}

fn ranges_on_large_file_offsets(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let big = fx.file("1m.bin");
    let mut c = Conn::open(server.addr());
    for (range, first, last) in [
        ("bytes=524288-589823", 524_288usize, 589_823usize),
        ("bytes=1000000-", 1_000_000, 1_048_575),
        ("bytes=-1", 1_048_575, 1_048_575),
        ("bytes=1-1048574", 1, 1_048_574),
        ("bytes=65535-65536", 65_535, 65_536),
    ] {
        let r = ranged(&mut c, "/1m.bin", range);
        assert_single_range(&r, &big, first, last, range);
    }
}

#[track_caller]
fn assert_parts(r: &Response, file: &[u8], expected: &[(usize, usize)], ctype: &str, what: &str) {
    r.expect_status(206, what);
    assert!(
        r.header("content-range").is_none(),
        "{what}: a multipart response has no top-level Content-Range\n{r:?}"
    );
    let parts = parse_multipart(r).unwrap_or_else(|e| panic!("{what}: bad multipart body: {e}\n{r:?}"));
    assert_eq!(parts.len(), expected.len(), "{what}: number of parts: {parts:?}");
    for (part, &(first, last)) in parts.iter().zip(expected) {
        assert_eq!(part.range, (first as u64, last as u64, file.len() as u64), "{what}: part range");
        assert_bytes_eq(&part.data, &file[first..=last], &format!("{what}: part {first}-{last}"));
        let ct = part.content_type.as_deref().unwrap_or("");
        assert!(ct.starts_with(ctype), "{what}: part Content-Type {ct:?}, expected {ctype}");
    }
}

fn ranges_multipart(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let r = ranged(&mut c, "/t1.html", "bytes=0-9,-10");
    assert_parts(&r, &t1, &[(0, 9), (990, 999)], "text/html", "bytes=0-9,-10");
    let r = ranged(&mut c, "/t1.html", "bytes=10-19, 20-29, 990-");
    assert_parts(&r, &t1, &[(10, 19), (20, 29), (990, 999)], "text/html", "three parts");
    let r = ranged(&mut c, "/t1.html", "bytes=0-0,100-109,-5");
    assert_parts(&r, &t1, &[(0, 0), (100, 109), (995, 999)], "text/html", "bytes=0-0,100-109,-5");
    // The connection is still in sync after multipart bodies.
    c.send(get("/t1.html", &[]));
    let r = c.response();
    r.expect_status(200, "GET after multipart");
    assert_bytes_eq(&r.body, &t1, "GET after multipart");
}

fn ranges_multipart_skips_unsatisfiable(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let r = ranged(&mut c, "/t1.html", "bytes=0-9,100000-,990-999");
    assert_parts(&r, &t1, &[(0, 9), (990, 999)], "text/html", "bytes=0-9,100000-,990-999");
}

fn ranges_multipart_binary(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let big = fx.file("1m.bin");
    let mut c = Conn::open(server.addr());
    // Each part carries the Content-Type the whole file is served with.
    c.send(request("HEAD", "/1m.bin", &[]));
    let head = c.head_response();
    let ctype = head
        .header("content-type")
        .unwrap_or_else(|| panic!("HEAD /1m.bin: no Content-Type\n{head:?}"))
        .to_string();
    let r = ranged(&mut c, "/1m.bin", "bytes=0-99,500000-565535,-4096");
    assert_parts(
        &r,
        &big,
        &[(0, 99), (500_000, 565_535), (1_048_576 - 4096, 1_048_575)],
        &ctype,
        "binary multipart",
    );
}

fn ranges_summing_past_the_file_get_200(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let r = ranged(&mut c, "/t1.html", "bytes=0-10001, 0-0");
    r.expect_status(200, "bytes=0-10001, 0-0 (ranges sum exceeds the file)");
    assert!(r.header("content-range").is_none(), "a 200 has no Content-Range\n{r:?}");
    assert_bytes_eq(&r.body, &t1, "bytes=0-10001, 0-0");
}

fn ranges_unsatisfiable_or_malformed_get_416(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    for range in
        ["bytes=100000-", "bytes=alpha", "bytes=10-alpha", "bytes=10", "bytes=10-11 12-", "bytes=1000-"]
    {
        let r = ranged(&mut c, "/t1.html", range);
        r.expect_status(416, range);
        assert_eq!(r.header("content-range"), Some("bytes */1000"), "{range}: Content-Range\n{r:?}");
        assert!(!contains(&r.body, &t1[..50]), "{range}: a 416 must not carry the file\n{r:?}");
    }
    // The connection survived every 416 in sync.
    c.send(get("/t1.html", &[]));
    let r = c.response();
    r.expect_status(200, "GET after 416s");
    assert_bytes_eq(&r.body, &t1, "GET after 416s");
}

fn ranges_beyond_max_ranges_get_200(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--max-ranges", "2"]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let r = ranged(&mut c, "/t1.html", "bytes=0-0,2-2,4-4");
    r.expect_status(200, "3 ranges with --max-ranges 2");
    assert_bytes_eq(&r.body, &t1, "3 ranges with --max-ranges 2");
    let r = ranged(&mut c, "/t1.html", "bytes=0-0,2-2");
    assert_parts(&r, &t1, &[(0, 0), (2, 2)], "text/html", "2 ranges with --max-ranges 2");
}

/// GET `/t1.html` and return its ETag and Last-Modified.
fn validators(c: &mut Conn) -> (String, String) {
    c.send(get("/t1.html", &[]));
    let r = c.response();
    r.expect_status(200, "GET /t1.html");
    let etag = r.header("etag").unwrap_or_else(|| panic!("no ETag\n{r:?}")).to_string();
    let lm = r.header("last-modified").unwrap_or_else(|| panic!("no Last-Modified\n{r:?}")).to_string();
    (etag, lm)
}

/// A GET on the same connection after a bodiless response: proves no stray body bytes were sent.
#[track_caller]
fn assert_in_sync(c: &mut Conn, t1: &[u8], what: &str) {
    c.send(get("/t1.html", &[]));
    let r = c.response();
    r.expect_status(200, &format!("GET after {what}"));
    assert_bytes_eq(&r.body, t1, &format!("GET after {what}"));
}

fn etag_round_trip_gives_304(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let (etag, _) = validators(&mut c);
    c.send(get("/t1.html", &[("If-None-Match", &etag)]));
    let r = c.response();
    r.expect_status(304, "If-None-Match with the ETag");
    assert_eq!(r.header("etag"), Some(etag.as_str()), "a 304 carries the ETag (RFC 9110 §15.4.5)\n{r:?}");
    assert_in_sync(&mut c, &t1, "304");
    // In a list, and `*`.
    c.send(get("/t1.html", &[("If-None-Match", &format!("\"nope\", {etag}"))]));
    c.response().expect_status(304, "If-None-Match with a list containing the ETag");
    c.send(get("/t1.html", &[("If-None-Match", "*")]));
    c.response().expect_status(304, "If-None-Match: *");
    // A different tag gets the file.
    c.send(get("/t1.html", &[("If-None-Match", "\"not-the-etag\"")]));
    let r = c.response();
    r.expect_status(200, "If-None-Match with another tag");
    assert_bytes_eq(&r.body, &t1, "If-None-Match with another tag");
    // HEAD with a matching tag is also 304.
    c.send(request("HEAD", "/t1.html", &[("If-None-Match", &etag)]));
    c.head_response().expect_status(304, "HEAD with If-None-Match");
    assert_in_sync(&mut c, &t1, "HEAD 304");
}

fn if_modified_since_gives_304(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let (_, lm) = validators(&mut c);
    c.send(get("/t1.html", &[("If-Modified-Since", &lm)]));
    let r = c.response();
    r.expect_status(304, "If-Modified-Since with Last-Modified");
    assert_in_sync(&mut c, &t1, "If-Modified-Since 304");
    // A later date is also not-modified; an earlier one gets the file.
    c.send(get("/t1.html", &[("If-Modified-Since", "Sat, 01 Jan 2022 00:00:00 GMT")]));
    c.response().expect_status(304, "If-Modified-Since a later date");
    c.send(get("/t1.html", &[("If-Modified-Since", "Wed, 01 Jan 2020 00:00:00 GMT")]));
    let r = c.response();
    r.expect_status(200, "If-Modified-Since an earlier date");
    assert_bytes_eq(&r.body, &t1, "If-Modified-Since an earlier date");
    // If-None-Match takes precedence over If-Modified-Since (RFC 9110 §13.1.3).
    c.send(get("/t1.html", &[("If-None-Match", "\"other\""), ("If-Modified-Since", &lm)]));
    let r = c.response();
    r.expect_status(200, "If-None-Match mismatch beats If-Modified-Since");
    assert_bytes_eq(&r.body, &t1, "If-None-Match mismatch beats If-Modified-Since");
}

fn if_range_with_etag_gives_206(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let (etag, _) = validators(&mut c);
    c.send(get("/t1.html", &[("Range", "bytes=0-8"), ("If-Range", &etag)]));
    let r = c.response();
    assert_single_range(&r, &t1, 0, 8, "If-Range with the ETag");
}

fn if_range_mismatch_gives_200(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    for if_range in ["\"some-other-etag\"", "Wed, 01 Jan 2020 00:00:00 GMT", "Sat, 01 Jan 2022 00:00:00 GMT"]
    {
        c.send(get("/t1.html", &[("Range", "bytes=0-8"), ("If-Range", if_range)]));
        let r = c.response();
        r.expect_status(200, &format!("If-Range: {if_range}"));
        assert!(r.header("content-range").is_none(), "If-Range mismatch: no Content-Range\n{r:?}");
        assert_bytes_eq(&r.body, &t1, &format!("If-Range: {if_range}"));
    }
}

fn if_range_with_last_modified_gives_206(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    let (_, lm) = validators(&mut c);
    c.send(get("/t1.html", &[("Range", "bytes=-10"), ("If-Range", &lm)]));
    let r = c.response();
    assert_single_range(&r, &t1, 990, 999, "If-Range with Last-Modified");
}

fn head_has_headers_and_no_body(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    c.send(request("HEAD", "/1m.bin", &[]));
    let r = c.head_response();
    r.expect_status(200, "HEAD /1m.bin");
    assert_eq!(r.content_length(), Some(1_048_576), "HEAD Content-Length\n{r:?}");
    assert_eq!(r.header("accept-ranges"), Some("bytes"), "HEAD Accept-Ranges\n{r:?}");
    assert!(r.header("etag").is_some() && r.header("last-modified").is_some(), "HEAD validators\n{r:?}");
    assert!(r.header("content-type").is_some(), "HEAD Content-Type\n{r:?}");
    // Had any of the megabyte been sent, this would read binary instead of a status line.
    assert_in_sync(&mut c, &t1, "HEAD /1m.bin");
    // HEAD with a range: 206 head, no body.
    c.send(request("HEAD", "/t1.html", &[("Range", "bytes=0-8")]));
    let r = c.head_response();
    r.expect_status(206, "HEAD with Range");
    assert_eq!(r.header("content-range"), Some("bytes 0-8/1000"), "HEAD with Range\n{r:?}");
    assert_in_sync(&mut c, &t1, "HEAD with Range");
    // HEAD of a directory page.
    c.send(request("HEAD", "/", &[]));
    c.head_response().expect_status(200, "HEAD /");
    assert_in_sync(&mut c, &t1, "HEAD /");
    assert!(
        c.buffered().is_empty(),
        "stray bytes after the last response: {:?}",
        lossy_prefix(c.buffered(), 100)
    );
}

fn keep_alive_20_sequential_requests(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let k64 = fx.file("64k.bin");
    let mut c = Conn::open(server.addr());
    for i in 0..20 {
        match i % 3 {
            0 => {
                c.send(get("/t1.html", &[]));
                let r = c.response();
                r.expect_status(200, &format!("request {i}"));
                assert_bytes_eq(&r.body, &t1, &format!("request {i}"));
                assert!(!r.says_close(), "request {i}: server closes a keep-alive connection\n{r:?}");
            }
            1 => {
                c.send(get("/64k.bin", &[]));
                let r = c.response();
                r.expect_status(200, &format!("request {i}"));
                assert_bytes_eq(&r.body, &k64, &format!("request {i}"));
                assert!(!r.says_close(), "request {i}: server closes a keep-alive connection\n{r:?}");
            }
            _ => {
                let first = i * 10;
                let r = ranged(&mut c, "/t1.html", &format!("bytes={first}-{}", first + 9));
                assert_single_range(&r, &t1, first, first + 9, &format!("request {i}"));
                assert!(!r.says_close(), "request {i}: server closes a keep-alive connection\n{r:?}");
            }
        }
    }
}

fn pipelined_requests_answered_in_order(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let k64 = fx.file("64k.bin");
    let big = fx.file("1m.bin");
    let inner = fx.file("sub/inner.txt");
    // (request, is HEAD, status, expected body)
    let reqs: Vec<(Vec<u8>, bool, u16, Vec<u8>)> = vec![
        (get("/t1.html", &[]), false, 200, t1.clone()),
        (get("/t1.html", &[("Range", "bytes=0-8")]), false, 206, t1[0..9].to_vec()),
        (get("/64k.bin", &[]), false, 200, k64.clone()),
        (get("/sub/inner.txt", &[]), false, 200, inner.clone()),
        (get("/1m.bin", &[("Range", "bytes=1000-1999")]), false, 206, big[1000..2000].to_vec()),
        (request("HEAD", "/1m.bin", &[]), true, 200, Vec::new()),
        (get("/missing.txt", &[]), false, 404, Vec::new()),
        (get("/1m.bin", &[]), false, 200, big.clone()),
        (get("/t1.html", &[("Range", "bytes=-10")]), false, 206, t1[990..].to_vec()),
        (get("/64k.bin", &[("Range", "bytes=65000-")]), false, 206, k64[65000..].to_vec()),
    ];
    let all: Vec<u8> = reqs.iter().flat_map(|r| r.0.clone()).collect();
    let mut c = Conn::open(server.addr());
    c.send(&all);
    for (i, (req, head, status, body)) in reqs.iter().enumerate() {
        let what = format!("pipelined #{i} {:?}", lossy_prefix(req, 40));
        let r = if *head { c.head_response() } else { c.response() };
        r.expect_status(*status, &what);
        if *status != 404 {
            assert_bytes_eq(&r.body, body, &what);
        }
        if *head {
            assert_eq!(r.content_length(), Some(1_048_576), "{what}\n{r:?}");
        }
    }
    // Nothing more than the 10 responses.
    let closed = c.wait_close(std::time::Duration::from_millis(300));
    assert!(
        closed.extra.is_empty(),
        "bytes beyond the 10th response: {:?}",
        lossy_prefix(&closed.extra, 100)
    );
    assert!(!closed.closed, "the server closed a pipelining connection");
}

fn connection_close_is_honoured(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    c.send(get("/t1.html", &[("Connection", "close")]));
    let r = c.response();
    r.expect_status(200, "Connection: close");
    assert_bytes_eq(&r.body, &t1, "Connection: close");
    assert!(r.says_close(), "the response to Connection: close says close\n{r:?}");
    let closed = c.wait_close(std::time::Duration::from_secs(5));
    assert!(closed.closed, "the server kept the connection open after Connection: close");
    assert!(closed.extra.is_empty(), "bytes after the response: {:?}", lossy_prefix(&closed.extra, 100));
}

fn http10_closes_without_keep_alive(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    c.send("GET /t1.html HTTP/1.0\r\n\r\n");
    let r = c.response();
    r.expect_status(200, "HTTP/1.0 GET");
    assert_bytes_eq(&r.body, &t1, "HTTP/1.0 GET");
    let closed = c.wait_close(std::time::Duration::from_secs(5));
    assert!(closed.closed, "the server kept an HTTP/1.0 connection open");
    assert!(closed.extra.is_empty(), "bytes after the response: {:?}", lossy_prefix(&closed.extra, 100));
}

fn http10_keep_alive_when_asked(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    for i in 0..2 {
        c.send("GET /t1.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
        let r = c.response();
        r.expect_status(200, &format!("HTTP/1.0 keep-alive #{i}"));
        assert_bytes_eq(&r.body, &t1, "HTTP/1.0 keep-alive");
        let conn = r.header("connection").unwrap_or("");
        assert!(
            conn.eq_ignore_ascii_case("keep-alive"),
            "HTTP/1.0 keep-alive response needs Connection: keep-alive\n{r:?}"
        );
    }
}

fn directories_redirect_and_list(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let addr = server.addr();
    let r = fetch_get(addr, "/sub", &[]);
    r.expect_status(301, "GET /sub");
    assert_eq!(r.header("location"), Some("/sub/"), "GET /sub\n{r:?}");
    let r = fetch_get(addr, "/sub?x=1", &[]);
    r.expect_status(301, "GET /sub?x=1");
    assert_eq!(r.header("location"), Some("/sub/?x=1"), "GET /sub?x=1\n{r:?}");
    let r = fetch_get(addr, "/sub/", &[]);
    r.expect_status(200, "GET /sub/");
    assert!(r.header("content-type").unwrap_or("").starts_with("text/html"), "GET /sub/\n{r:?}");
    assert!(r.body_text().contains("inner.txt"), "the listing of /sub/ names inner.txt\n{r:?}");
    let r = fetch_get(addr, "/index-less/", &[]);
    r.expect_status(200, "GET /index-less/");
    assert!(r.body_text().contains("clip.txt"), "the listing of /index-less/ names clip.txt\n{r:?}");
    let r = fetch_get(addr, "/with-index/", &[]);
    r.expect_status(200, "GET /with-index/");
    assert_eq!(r.body, fx.file("with-index/index.html"), "a directory with index.html serves it");
    let r = fetch_get(addr, "/", &[]);
    r.expect_status(200, "GET /");
    let page = r.body_text();
    assert!(
        page.contains("t1.html") && page.contains("1m.bin") && page.contains("sub"),
        "GET / lists the library\n{page}"
    );
    assert!(
        !page.contains("link-to-canary") && !page.contains("outside-dir"),
        "GET / lists links that leave the root\n{page}"
    );
    let r = fetch_get(addr, "/t1.html/", &[]);
    r.expect_status(404, "a file addressed as a directory");
}

fn missing_files_are_404(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    for target in ["/missing.txt", "/sub/missing", "/no/such/dir/", "/%252e%252e/t1.html"] {
        c.send(get(target, &[]));
        c.response().expect_status(404, target);
    }
    // 404s keep the connection usable.
    assert_in_sync(&mut c, &t1, "404s");
}

fn query_strings_and_encoded_names(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("my film.txt", b"spaces in the name\n");
    fx.write("caf\u{e9}.txt", b"utf-8 name\n");
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    c.send(get("/t1.html?v=1&x=%2e%2e", &[]));
    let r = c.response();
    r.expect_status(200, "a query string on a file");
    assert_bytes_eq(&r.body, &t1, "a query string on a file");
    c.send(get("/my%20film.txt", &[]));
    let r = c.response();
    r.expect_status(200, "/my%20film.txt");
    assert_eq!(r.body, b"spaces in the name\n");
    c.send(get("/caf%C3%A9.txt", &[]));
    let r = c.response();
    r.expect_status(200, "/caf%C3%A9.txt");
    assert_eq!(r.body, b"utf-8 name\n");
    c.send(get("/sub/./inner.txt", &[]));
    c.response().expect_status(200, "/sub/./inner.txt");
    c.send(get("//sub//inner.txt", &[]));
    c.response().expect_status(200, "//sub//inner.txt");
    c.send(get("/sub/../t1.html", &[]));
    let r = c.response();
    r.expect_status(200, "/sub/../t1.html stays inside the root");
    assert_bytes_eq(&r.body, &t1, "/sub/../t1.html");
}
