//! `/metrics` and `/bench/` on every engine: counters move as the engine's work says they must,
//! benchmark endpoints compute the seed's results, and waiting endpoints never block an event loop.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::*;

engine_matrix!(
    requests_and_accepts_are_counted,
    send_strategy_shows_in_syscalls,
    bench_endpoints_compute_the_seed_results,
    bench_values_are_validated,
    cpu_work_runs_with_one_cpu_worker,
    latency_waits_at_least_its_time,
    no_bench_turns_the_endpoints_off,
);

fn requests_and_accepts_are_counted(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = Conn::open(server.addr());
    // A first request, so that the server has accepted the connection before the first scrape
    // (the scrapes go to the admin listener, over connections of their own).
    c.send(get("/t1.html", &[]));
    c.response().expect_status(200, "t1");
    let before = server.scrape();
    for _ in 0..10 {
        c.send(get("/t1.html", &[]));
        c.response().expect_status(200, "t1");
    }
    let after = server.scrape();
    // Ten files, all over the one connection accepted before the first scrape; the admin
    // listener's work never shows in the media engine's counters.
    let delta = |name| metric(&after, name) - metric(&before, name);
    assert_eq!(delta("sluice_http_requests_total"), 10, "{after}");
    assert_eq!(delta("sluice_http_responses_total{class=\"2xx\"}"), 10);
    assert_eq!(delta("sluice_connections_accepted_total"), 0, "one keep-alive connection, accepted once");
    assert!(metric(&after, "sluice_connections_accepted_total") >= 1);
    assert!(metric(&after, "sluice_connections_open") >= 1);
    assert!(delta("sluice_bytes_sent_total") >= 10 * 1000, "ten 1000-byte bodies at least");
    assert!(delta("sluice_bytes_received_total") > 0);
}

fn send_strategy_shows_in_syscalls(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let strategy = engine.iter().skip_while(|a| **a != "--send").nth(1).copied().unwrap_or("sendfile");
    let mut c = Conn::open(server.addr());
    let before = server.scrape();
    c.send(get("/1m.bin", &[]));
    let r = c.response();
    r.expect_status(200, "1m");
    assert_eq!(r.body.len(), 1 << 20);
    let after = server.scrape();
    let delta = |kind: &str| {
        let name = format!("sluice_syscalls_total{{kind=\"{kind}\"}}");
        metric(&after, &name) - metric(&before, &name)
    };
    if engine.contains(&"uring") {
        // On io_uring, file reads and splices are ring operations, not system calls: the calls
        // that moved the file are io_uring_enter, and none of the others may appear.
        assert!(delta("io_uring_enter") > 0, "{after}");
        assert!(
            metric(&after, "sluice_io_uring_submitted_total")
                > metric(&before, "sluice_io_uring_submitted_total")
        );
        for kind in ["sendfile", "splice", "pread", "read", "write"] {
            assert_eq!(delta(kind), 0, "uring: no {kind} system calls expected\n{after}");
        }
        return;
    }
    let (used, unused): (&str, &[&str]) = match strategy {
        "sendfile" => ("sendfile", &["splice", "pread"]),
        "splice" => ("splice", &["sendfile", "pread"]),
        "copy" => ("pread", &["sendfile", "splice"]),
        other => panic!("unknown strategy {other}"),
    };
    assert!(delta(used) > 0, "{strategy}: expected {used} calls\n{after}");
    for kind in unused {
        assert_eq!(delta(kind), 0, "{strategy}: no {kind} calls expected\n{after}");
    }
}

fn bench_endpoints_compute_the_seed_results(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = Conn::open(server.addr());
    for (target, body) in [
        ("/bench/hello", "Hello, World!"),
        ("/bench/health", "OK"),
        ("/bench/cpu?n=35", "Fibonacci(35) = 9227465"),
        ("/bench/cpu", "Fibonacci(35) = 9227465"),
        ("/bench/cpu-heavy?limit=10000", "Primes up to 10000: 1229"),
        ("/bench/mixed", "Mixed workload result: 6765"),
        ("/bench/latency?ms=5", "Delayed response after 5ms"),
    ] {
        c.send(get(target, &[]));
        let r = c.response();
        r.expect_status(200, target);
        assert_eq!(r.body_text(), body, "{target}");
    }
    c.send(get("/bench/json", &[]));
    let r = c.response();
    r.expect_status(200, "json");
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert!(r.body_text().starts_with("{\"status\":\"success\",\"timestamp\":"), "{}", r.body_text());
    // Deferred replies keep pipelined order: a slow one first still answers first.
    c.send(
        [get("/bench/latency?ms=50", &[]), get("/bench/cpu?n=10", &[]), get("/bench/hello", &[])].concat(),
    );
    assert_eq!(c.response().body_text(), "Delayed response after 50ms");
    assert_eq!(c.response().body_text(), "Fibonacci(10) = 55");
    assert_eq!(c.response().body_text(), "Hello, World!");
}

/// One CPU worker (the default on a one-core machine) is enough to answer CPU-bound requests,
/// one after another and on several connections.
fn cpu_work_runs_with_one_cpu_worker(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--cpu-workers", "1"]);
    for _ in 0..3 {
        let mut c = Conn::open(server.addr());
        for _ in 0..2 {
            c.send(get("/bench/cpu?n=30", &[]));
            let r = c.response();
            r.expect_status(200, "cpu with one worker");
            assert_eq!(r.body_text(), "Fibonacci(30) = 832040");
        }
    }
}

fn bench_values_are_validated(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    for target in [
        "/bench/cpu?n=94",
        "/bench/cpu?n=-1",
        "/bench/cpu?n=abc",
        "/bench/cpu-heavy?limit=99999999999",
        "/bench/latency?ms=10001",
        "/bench/latency?ms=",
        "/bench/latency?ms=99999999999999999999",
    ] {
        // Every 400 closes its connection (RFC 9112 §6.3; issue 11), so each gets its own.
        let mut c = Conn::open(server.addr());
        c.send(get(target, &[]));
        let r = c.response();
        r.expect_status(400, target);
        assert!(r.says_close(), "{target}: a 400 closes the connection");
    }
    let mut c = Conn::open(server.addr());
    c.send(get("/bench/nothing", &[]));
    c.response().expect_status(404, "unknown bench endpoint");
}

fn latency_waits_at_least_its_time(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = Conn::open(server.addr());
    let start = Instant::now();
    c.send(get("/bench/latency?ms=200", &[]));
    c.response().expect_status(200, "latency");
    assert!(start.elapsed() >= Duration::from_millis(200), "answered after {:?}", start.elapsed());
}

fn no_bench_turns_the_endpoints_off(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--no-bench"]);
    fetch_get(server.addr(), "/bench/hello", &[]).expect_status(404, "/bench off");
    fetch_get(server.addr(), "/metrics", &[]).expect_status(404, "/metrics is not on the media port");
    fetch_get(server.admin_addr(), "/metrics", &[]).expect_status(200, "/metrics on the admin port");
}

/// On an event-loop engine with one worker, waiting requests must not hold the loop: 50
/// concurrent `latency?ms=200` all finish within 1 s (serially they would take 10 s).
fn concurrent_latency_does_not_block_the_loop(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--workers", "1"]);
    let addr = server.addr();
    let start = Instant::now();
    let clients: Vec<_> = (0..50)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(get("/bench/latency?ms=200", &[]));
                c.response().status
            })
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap(), 200);
    }
    let took = start.elapsed();
    assert!(took >= Duration::from_millis(200), "{took:?}");
    assert!(took < Duration::from_secs(1), "50 waits of 200 ms took {took:?} on one worker");
}

#[test]
fn epoll_latency_does_not_block_the_loop() {
    concurrent_latency_does_not_block_the_loop(&["--engine", "epoll", "--send", "sendfile"]);
}

#[test]
fn tokio_latency_does_not_block_the_loop() {
    concurrent_latency_does_not_block_the_loop(&["--engine", "tokio", "--send", "sendfile"]);
}

#[test]
fn uring_latency_does_not_block_the_loop() {
    concurrent_latency_does_not_block_the_loop(&["--engine", "uring", "--send", "splice"]);
}
