//! Hostile and unlucky clients on every engine × send strategy: path traversal, request limits,
//! framing, deadlines, descriptor leaks, stalled readers and graceful shutdown.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

engine_matrix!(
    directory_redirect_never_names_another_host,
    traversal_never_leaves_the_root,
    request_line_too_long_is_414,
    head_too_large_is_431,
    too_many_fields_is_431,
    transfer_encoding_with_content_length_is_400_and_closes,
    http11_without_host_is_400,
    other_methods_on_files_are_405,
    unknown_method_is_501,
    get_body_is_discarded_not_parsed,
    chunked_get_body_is_discarded_not_parsed,
    oversized_get_body_is_413,
    unsupported_version_is_505,
    max_connections_is_a_bound,
    slow_head_times_out_while_others_are_served,
    silent_connection_is_closed,
    idle_keep_alive_is_closed,
    reset_clients_leak_no_descriptors,
    stalled_reader_is_dropped,
    graceful_shutdown_finishes_in_flight_download,
    shutdown_grace_bounds_a_stalled_client,
);

/// Sends one raw request on a fresh connection; returns the response (if any) and every byte the
/// connection carried until it closed or 2 s passed.
fn exchange(addr: std::net::SocketAddr, raw: &[u8]) -> (Result<Response, String>, Vec<u8>) {
    let mut c = Conn::open(addr);
    // A server that closes early may make part of a write fail; the reply still counts.
    let _ = c.try_send(raw);
    let r = c.read_response(false);
    let _ = c.wait_close(Duration::from_secs(2));
    (r, c.transcript.clone())
}

fn traversal_never_leaves_the_root(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let targets = [
        "/../canary.txt",
        "/..%2fcanary.txt",
        "/%2e%2e/canary.txt",
        "/%2E%2E/%2e%2e/canary.txt",
        "/%2e%2e%2fcanary.txt",
        "/sub/../../canary.txt",
        "/sub/..%2f..%2fcanary.txt",
        "/sub/%2e%2e/%2e%2e/canary.txt",
        "/%252e%252e/canary.txt",
        "/..%5ccanary.txt",
        "/link-to-canary.txt",
        "/outside-dir/canary.txt",
        "/outside-dir/root/../canary.txt",
        "/outside-dir/",
        "/outside-dir",
        "/t1.html%00.txt",
        "/canary.txt%00",
        "http://x/../canary.txt",
        "http://x/%2e%2e/canary.txt",
        "../canary.txt",
    ];
    for target in targets {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        let (r, transcript) = exchange(server.addr(), raw.as_bytes());
        assert!(
            !contains(&transcript, CANARY_MARK),
            "{target}: the canary outside the root was served:\n{}",
            lossy_prefix(&transcript, 2000)
        );
        let r = r.unwrap_or_else(|e| panic!("{target}: no response: {e}"));
        assert!(matches!(r.status, 400 | 404), "{target}: expected 400 or 404, got\n{r:?}");
    }
    // Specific statuses the brief pins down.
    for (target, status) in
        [("/%252e%252e/canary.txt", 404), ("/t1.html%00.txt", 400), ("/%2e%2e/canary.txt", 404)]
    {
        let r = fetch_get(server.addr(), target, &[("Connection", "close")]);
        r.expect_status(status, target);
    }
}

fn request_line_too_long_is_414(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let raw = format!("GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(9000));
    let (r, _) = exchange(server.addr(), raw.as_bytes());
    let r = r.unwrap_or_else(|e| panic!("request line of 9000 bytes: no response: {e}"));
    r.expect_status(414, "request line of 9000 bytes");
    // Just under the limit is an ordinary (missing) file.
    let raw = format!("GET /{} HTTP/1.1\r\nHost: localhost\r\n\r\n", "a".repeat(8000));
    let (r, _) = exchange(server.addr(), raw.as_bytes());
    r.unwrap_or_else(|e| panic!("request line of 8000 bytes: {e}"))
        .expect_status(404, "request line of 8000 bytes");
}

fn head_too_large_is_431(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let mut raw = String::from("GET /t1.html HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..20 {
        raw.push_str(&format!("X-Filler-{i}: {}\r\n", "v".repeat(1000)));
    }
    raw.push_str("\r\n");
    let (r, _) = exchange(server.addr(), raw.as_bytes());
    r.unwrap_or_else(|e| panic!("20 KB head: no response: {e}")).expect_status(431, "20 KB head");
    // A 12 KB head is fine.
    let mut raw = String::from("GET /t1.html HTTP/1.1\r\nHost: localhost\r\n");
    for i in 0..12 {
        raw.push_str(&format!("X-Filler-{i}: {}\r\n", "v".repeat(1000)));
    }
    raw.push_str("\r\n");
    let (r, _) = exchange(server.addr(), raw.as_bytes());
    r.unwrap_or_else(|e| panic!("12 KB head: {e}")).expect_status(200, "12 KB head");
}

fn too_many_fields_is_431(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let head_with = |fields: usize| {
        // Host plus fields - 1 others.
        let mut raw = String::from("GET /t1.html HTTP/1.1\r\nHost: localhost\r\n");
        for i in 1..fields {
            raw.push_str(&format!("X-F{i}: {i}\r\n"));
        }
        raw.push_str("\r\n");
        raw
    };
    let (r, _) = exchange(server.addr(), head_with(65).as_bytes());
    r.unwrap_or_else(|e| panic!("65 fields: no response: {e}")).expect_status(431, "65 header fields");
    let (r, _) = exchange(server.addr(), head_with(100).as_bytes());
    r.unwrap_or_else(|e| panic!("100 fields: no response: {e}")).expect_status(431, "100 header fields");
    let (r, _) = exchange(server.addr(), head_with(64).as_bytes());
    r.unwrap_or_else(|e| panic!("64 fields: {e}")).expect_status(200, "64 header fields (the limit)");
}

fn transfer_encoding_with_content_length_is_400_and_closes(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = Conn::open(server.addr());
    // A smuggling attempt: the "body" holds a second request that must never be answered.
    c.send(
        "GET /t1.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 4\r\n\r\n\
         0\r\n\r\nGET /64k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n",
    );
    let r = c.response();
    r.expect_status(400, "Transfer-Encoding and Content-Length together");
    assert!(r.says_close(), "the 400 says Connection: close\n{r:?}");
    let closed = c.wait_close(Duration::from_secs(5));
    assert!(closed.closed, "the connection stayed open after ambiguous framing");
    assert!(
        closed.extra.is_empty(),
        "a request hidden after ambiguous framing was answered: {:?}",
        lossy_prefix(&closed.extra, 200)
    );
}

fn http11_without_host_is_400(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let (r, _) = exchange(server.addr(), b"GET /t1.html HTTP/1.1\r\n\r\n");
    r.unwrap_or_else(|e| panic!("no Host: no response: {e}")).expect_status(400, "HTTP/1.1 without Host");
    let (r, _) = exchange(server.addr(), b"GET /t1.html HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n");
    r.unwrap_or_else(|e| panic!("two Hosts: no response: {e}"))
        .expect_status(400, "HTTP/1.1 with two Host fields");
}

fn other_methods_on_files_are_405(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let mut c = Conn::open(server.addr());
    // PUT and DELETE are uploads, 403 while they are off (tests/uploads.rs).
    for raw in [
        "DELETE /t1.html HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "PUT /t1.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
    ] {
        c.send(raw);
        c.response().expect_status(403, raw);
    }
    let raw = "POST /t1.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello";
    c.send(raw);
    let r = c.response();
    r.expect_status(405, raw);
    let allow = r.header("allow").unwrap_or_else(|| panic!("{raw}: 405 without Allow\n{r:?}"));
    let mut methods: Vec<String> = allow.split(',').map(|m| m.trim().to_ascii_uppercase()).collect();
    methods.sort();
    assert_eq!(methods, ["GET", "HEAD"], "{raw}: Allow\n{r:?}");
    // The POST body was read past: the connection is still in sync.
    c.send(get("/t1.html", &[]));
    let r = c.response();
    r.expect_status(200, "GET after 405s");
    assert_bytes_eq(&r.body, &t1, "GET after 405s");
}

fn unknown_method_is_501(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let (r, _) = exchange(server.addr(), b"BREW /t1.html HTTP/1.1\r\nHost: localhost\r\n\r\n");
    r.unwrap_or_else(|e| panic!("BREW: no response: {e}")).expect_status(501, "BREW");
}

fn get_body_is_discarded_not_parsed(engine: &[&str]) {
    // The 10-byte body looks like the start of a request; it must be discarded, not answered.
    assert_body_is_read_past(
        engine,
        "GET /t1.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 10\r\n\r\nGET /x HTT\
         GET /sub/inner.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET with a body",
    );
}

fn chunked_get_body_is_discarded_not_parsed(engine: &[&str]) {
    assert_body_is_read_past(
        engine,
        "GET /t1.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n\
         a\r\nGET /x HTT\r\n0\r\n\r\n\
         GET /sub/inner.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
        "GET with a chunked body",
    );
}

/// Sends `requests` (a GET of t1.html carrying a body, then a GET of sub/inner.txt with
/// `Connection: close`) and checks that exactly those two are answered, in order, and the
/// connection then closes: the body was read past, never parsed as a request.
fn assert_body_is_read_past(engine: &[&str], requests: &str, what: &str) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let t1 = fx.file("t1.html");
    let inner = fx.file("sub/inner.txt");
    let mut c = Conn::open(server.addr());
    c.send(requests);
    let first = c.response();
    first.expect_status(200, what);
    assert_bytes_eq(&first.body, &t1, what);
    let second = c.response();
    second.expect_status(200, "the request after the body");
    assert_bytes_eq(&second.body, &inner, "the request after the body");
    let closed = c.wait_close(Duration::from_secs(5));
    assert!(
        closed.extra.is_empty(),
        "a third response (the body parsed as a request?): {:?}",
        lossy_prefix(&closed.extra, 200)
    );
    assert!(closed.closed, "Connection: close on the second request was not honoured");
}

fn oversized_get_body_is_413(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    // Over the 1 MB the server is willing to read and throw away.
    let mut c = Conn::open(server.addr());
    c.send("GET /t1.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000000\r\n\r\nxxxx");
    let r = c.response();
    r.expect_status(413, "GET with a 100 MB body");
    assert!(r.says_close(), "a 413 closes the connection\n{r:?}");
    let closed = c.wait_close(Duration::from_secs(5));
    assert!(closed.closed, "the connection stayed open after 413");
}

fn unsupported_version_is_505(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let (r, _) = exchange(server.addr(), b"GET /t1.html HTTP/2.0\r\nHost: localhost\r\n\r\n");
    r.unwrap_or_else(|e| panic!("HTTP/2.0: no response: {e}")).expect_status(505, "HTTP/2.0 request line");
}

fn max_connections_is_a_bound(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--max-connections", "4"]);
    let addr = server.addr();
    // Four kept-alive connections, each proven accepted by a response.
    let mut held: Vec<Conn> = (0..4)
        .map(|i| {
            let mut c = Conn::open(addr);
            c.send(get("/t1.html", &[]));
            c.response().expect_status(200, &format!("connection {i}"));
            c
        })
        .collect();
    // A fifth is closed without an answer.
    let mut fifth = Conn::open(addr);
    let _ = fifth.try_send(get("/t1.html", &[]));
    let closed = fifth.wait_close(Duration::from_secs(5));
    assert!(
        closed.extra.is_empty(),
        "a fifth connection with --max-connections 4 was answered: {:?}",
        lossy_prefix(&closed.extra, 200)
    );
    assert!(
        closed.closed,
        "a fifth connection with --max-connections 4 was neither served nor closed in 5 s"
    );
    // Once one closes, there is room again (the server notices the close on its own).
    drop(held.pop());
    let mut served = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && !served {
        let mut c = Conn::open(addr);
        if c.try_send(get("/t1.html", &[("Connection", "close")])).is_ok() {
            served = c.read_response(false).is_ok_and(|r| r.status == 200);
        }
        if !served {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    assert!(served, "no room for a new connection within 5 s after one of the four closed");
    drop(held);
}

/// Result of trickling a request head one byte per second.
struct Trickle {
    /// When, after connecting, the server answered or closed; None if it never did.
    ended_after: Option<Duration>,
    /// Everything received.
    received: Vec<u8>,
    /// Bytes of the head sent before the end.
    sent: usize,
}

fn trickle_head(addr: std::net::SocketAddr, limit: Duration) -> Trickle {
    let head = b"GET /t1.html HTTP/1.1\r\nHost: localhost\r\nX-Slow: yes\r\n\r\n";
    let mut c = Conn::open(addr);
    let start = Instant::now();
    let mut sent = 0;
    let mut received = Vec::new();
    while start.elapsed() < limit && sent < head.len() {
        if c.try_send(&head[sent..sent + 1]).is_err() {
            return Trickle { ended_after: Some(start.elapsed()), received, sent };
        }
        sent += 1;
        let closed = c.wait_close(Duration::from_secs(1));
        received.extend_from_slice(&closed.extra);
        if closed.closed || !received.is_empty() {
            if !closed.closed {
                // Got a response: read the rest until the close.
                let rest = c.wait_close(Duration::from_secs(3));
                received.extend_from_slice(&rest.extra);
            }
            return Trickle { ended_after: Some(start.elapsed()), received, sent };
        }
    }
    Trickle { ended_after: None, received, sent }
}

fn slow_head_times_out_while_others_are_served(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--header-timeout", "2s"]);
    let addr = server.addr();
    let slow = std::thread::spawn(move || trickle_head(addr, Duration::from_secs(12)));
    // Meanwhile other clients are served normally.
    let t1 = fx.file("t1.html");
    let mut served = 0;
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        let r = fetch_get(addr, "/t1.html", &[("Connection", "close")]);
        r.expect_status(200, "a normal client during a slow head");
        assert_bytes_eq(&r.body, &t1, "a normal client during a slow head");
        served += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(served >= 3, "only {served} normal requests served in 1.5 s");
    let t = slow.join().unwrap();
    let after = t.ended_after.unwrap_or_else(|| {
        panic!("a head sent at one byte per second ({} bytes so far) was not cut off within 12 s", t.sent)
    });
    assert!(
        after >= Duration::from_millis(1500) && after <= Duration::from_secs(6),
        "the 2 s header deadline fired after {after:?}"
    );
    if !t.received.is_empty() {
        let r = Response::parse(&t.received, false, true)
            .unwrap_or_else(|e| panic!("garbage after a header timeout: {e}"))
            .unwrap_or_else(|| {
                panic!("partial response after a header timeout: {:?}", lossy_prefix(&t.received, 200))
            })
            .0;
        r.expect_status(408, "slow head");
    }
}

fn silent_connection_is_closed(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--header-timeout", "2s"]);
    let mut c = Conn::open(server.addr());
    let closed = c.wait_close(Duration::from_secs(8));
    assert!(closed.closed, "a connection that sent nothing was kept open 8 s (header timeout 2 s)");
    assert!(closed.after >= Duration::from_millis(1500), "closed after only {:?}", closed.after);
    // It may say 408 first, nothing else.
    if !closed.extra.is_empty() {
        let r = Response::parse(&closed.extra, false, true).ok().flatten().map(|x| x.0);
        assert!(
            r.as_ref().is_some_and(|r| r.status == 408),
            "a silent connection got {:?}",
            lossy_prefix(&closed.extra, 200)
        );
    }
}

fn idle_keep_alive_is_closed(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--keepalive-timeout", "2s"]);
    let mut c = Conn::open(server.addr());
    c.send(get("/t1.html", &[]));
    c.response().expect_status(200, "GET before idling");
    let closed = c.wait_close(Duration::from_secs(8));
    assert!(closed.closed, "an idle keep-alive connection was kept open 8 s (keep-alive timeout 2 s)");
    assert!(closed.after >= Duration::from_millis(1500), "closed after only {:?}", closed.after);
    assert!(
        closed.after <= Duration::from_secs(6),
        "closed after {:?} (keep-alive timeout 2 s)",
        closed.after
    );
    assert!(closed.extra.is_empty(), "an idle connection was sent {:?}", lossy_prefix(&closed.extra, 200));
}

fn reset_clients_leak_no_descriptors(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let addr = server.addr();
    let baseline = idle_fd_baseline(&server);
    const CLIENTS: usize = 500;
    const THREADS: usize = 8;
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|_| {
            let next = Arc::clone(&next);
            std::thread::spawn(move || -> Result<(), String> {
                while next.fetch_add(1, Ordering::Relaxed) < CLIENTS {
                    if started.elapsed() > Duration::from_secs(60) {
                        return Err("500 resetting clients took over 60 s".into());
                    }
                    let mut c = Conn::try_open(addr).map_err(|e| format!("connect: {e}"))?;
                    c.send(get("/1m.bin", &[]));
                    let got = c.read_exact_raw(4096).map_err(|e| format!("reading the first 4 KB: {e}"))?;
                    if !got.starts_with(b"HTTP/1.1 200") {
                        return Err(format!("unexpected start {:?}", lossy_prefix(&got, 100)));
                    }
                    c.set_reset_on_close();
                    drop(c);
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap().unwrap_or_else(|e| panic!("a client failed: {e}"));
    }
    if let Err(now) = wait_fds(&server, baseline, Duration::from_secs(10)) {
        panic!("descriptors did not return to {baseline} within 10 s after 500 reset clients: {now} open");
    }
    // And the server still works.
    let r = fetch_get(addr, "/t1.html", &[("Connection", "close")]);
    r.expect_status(200, "GET after 500 resets");
    assert_bytes_eq(&r.body, &fx.file("t1.html"), "GET after 500 resets");
}

fn stalled_reader_is_dropped(engine: &[&str]) {
    let fx = Fixture::new();
    // Larger than any kernel buffering between us, so the server has to wait for us.
    fx.sparse("big.bin", 64 * 1024 * 1024);
    let server = Server::serve(engine, &fx, &["--send-timeout", "2s"]);
    let baseline = idle_fd_baseline(&server);
    let stream = connect_small_rcvbuf(server.addr(), 4096);
    let mut c = Conn::from_stream(stream);
    c.send(get("/big.bin", &[]));
    let sent = Instant::now();
    // Never read. The kernel buffers fill within milliseconds; from then on the server makes no
    // progress and must give up on us once the send timeout has passed.
    std::thread::sleep(Duration::from_millis(500));
    assert!(server.fd_count() > baseline, "the connection is not even open");
    if let Err(now) = wait_fds(&server, baseline, Duration::from_secs(12)) {
        panic!(
            "a client that stopped reading was not dropped within 12 s (send timeout 2 s): \
             {now} descriptors, {baseline} when idle"
        );
    }
    let dropped_after = sent.elapsed();
    assert!(
        dropped_after <= Duration::from_secs(5),
        "a client that stopped reading was dropped only {dropped_after:?} after its request (send timeout 2 s)"
    );
    // Others are still served.
    fetch_get(server.addr(), "/t1.html", &[("Connection", "close")])
        .expect_status(200, "GET after a stalled reader");
    drop(c);
}

fn graceful_shutdown_finishes_in_flight_download(engine: &[&str]) {
    let fx = Fixture::new();
    // 1 MB fits in the kernel's socket buffers on loopback (the server's send buffer grows to
    // 4 MB), so the server would have handed all of it to the kernel before SIGTERM and nothing
    // would be in flight. 16 MB keeps most of the response in the server when the signal comes.
    fx.write("slow.bin", &pseudo_random(16 * 1024 * 1024, 16));
    let big = fx.file("slow.bin");
    let mut server = Server::serve(engine, &fx, &["--shutdown-grace", "20s"]);
    let addr = server.addr();
    let stream = connect_small_rcvbuf(addr, 8192);
    let mut c = Conn::from_stream(stream);
    c.send(get("/slow.bin", &[]));
    // Read the head and a little of the body, then signal.
    let first = c.read_exact_raw(16 * 1024).expect("first 16 KB of the download");
    let head_end = find(&first, b"\r\n\r\n").expect("a response head within 16 KB") + 4;
    let (head, _) = Response::parse(&first[..head_end], true, false).unwrap().unwrap();
    head.expect_status(200, "the download");
    assert_eq!(head.content_length(), Some(big.len() as u64));
    server.signal(libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        server.running(),
        "sluice exited at once on SIGTERM with a download in flight:\n{}",
        server.log_text()
    );
    // A new connection after SIGTERM is refused or closed without an answer.
    let newcomer = std::thread::spawn(move || -> Result<(), String> {
        let mut c = match Conn::try_open(addr) {
            Ok(c) => c,
            Err(_) => return Ok(()), // refused
        };
        let _ = c.try_send(get("/t1.html", &[]));
        let closed = c.wait_close(IO_TIMEOUT);
        if !closed.extra.is_empty() {
            return Err(format!(
                "a connection made after SIGTERM was answered: {:?}",
                lossy_prefix(&closed.extra, 200)
            ));
        }
        if !closed.closed {
            return Err("a connection made after SIGTERM was neither refused nor closed within 10 s".into());
        }
        Ok(())
    });
    // Keep reading, slowly: the whole body must arrive.
    let mut body = first[head_end..].to_vec();
    let read_start = Instant::now();
    while body.len() < big.len() {
        assert!(
            read_start.elapsed() < Duration::from_secs(30),
            "download stalled at {} bytes after SIGTERM",
            body.len()
        );
        let want = (big.len() - body.len()).min(32 * 1024);
        match c.read_exact_raw(want) {
            Ok(chunk) => body.extend_from_slice(&chunk),
            Err(e) => panic!("download cut at {} of {} bytes after SIGTERM: {e}", body.len(), big.len()),
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_bytes_eq(&body, &big, "download across SIGTERM");
    let closed = c.wait_close(Duration::from_secs(5));
    assert!(closed.extra.is_empty(), "bytes after the download: {:?}", lossy_prefix(&closed.extra, 100));
    assert!(closed.closed, "the connection stayed open after the in-flight response during shutdown");
    let status = server
        .wait_exit(IO_TIMEOUT)
        .unwrap_or_else(|| panic!("sluice did not exit within 10 s after finishing in-flight work"));
    assert!(status.success(), "sluice exited with {status} after SIGTERM");
    newcomer.join().unwrap().unwrap_or_else(|e| panic!("{e}"));
}

fn shutdown_grace_bounds_a_stalled_client(engine: &[&str]) {
    let fx = Fixture::new();
    fx.sparse("big.bin", 64 * 1024 * 1024);
    let mut server = Server::serve(engine, &fx, &["--shutdown-grace", "2s", "--send-timeout", "60s"]);
    let stream = connect_small_rcvbuf(server.addr(), 4096);
    let mut c = Conn::from_stream(stream);
    c.send(get("/big.bin", &[]));
    c.read_exact_raw(1024).expect("the start of the response");
    let signalled = Instant::now();
    server.signal(libc::SIGTERM);
    let status = server.wait_exit(Duration::from_secs(8)).unwrap_or_else(|| {
        panic!("with a 2 s shutdown grace and a stalled client, sluice did not exit within 8 s of SIGTERM")
    });
    assert!(
        signalled.elapsed() >= Duration::from_millis(1500),
        "sluice exited {:?} after SIGTERM, before the grace period",
        signalled.elapsed()
    );
    // The response the grace cut off makes the exit status 1 (issue 12: a supervisor must see it).
    assert_eq!(status.code(), Some(1), "sluice exited with {status}");
    drop(c);
}

/// The trailing-slash redirect is built from the normalised path: `//evil.com/../sub` opens the
/// library's `sub/`, and its `Location` must be `/sub/`, never `//evil.com/../sub/` (which a
/// browser reads as another host).
fn directory_redirect_never_names_another_host(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    for target in ["//evil.com/../sub", "http://host//evil.com/../sub", "/./sub", "//sub"] {
        let r = fetch_get(server.addr(), target, &[]);
        r.expect_status(301, target);
        assert_eq!(r.header("location"), Some("/sub/"), "{target}: {r:?}");
    }
    let r = fetch_get(server.addr(), "/sub?x=1", &[]);
    assert_eq!(r.header("location"), Some("/sub/?x=1"));
}
