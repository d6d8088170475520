//! The io_uring engine on its own: each behaviour once per uring send strategy (splice, copy),
//! what only uring has (completions counted instead of reads, `sendfile` refused, the probe's
//! refusal and the `SLUICE_FORCE_EPOLL` override), and a pipelined client that never reads.
//!
//! The shared engine matrix runs the whole suite on uring too; these tests stay focused and
//! readable without the macro.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// The engine matrix macro is not used here.
#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

const SPLICE: &[&str] = &["--engine", "uring", "--workers", "2", "--send", "splice"];
const COPY: &[&str] = &["--engine", "uring", "--workers", "2", "--send", "copy"];

fn both(test: fn(&[&str])) {
    for engine in [SPLICE, COPY] {
        test(engine);
    }
}

#[test]
fn keep_alive_20_requests_cost_no_read_or_write_calls() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &[]);
        let t1 = fx.file("t1.html");
        let mut c = Conn::open(server.addr());
        // Accepted before the first scrape (which goes to the admin listener on its own
        // connection): one request first.
        c.send(get("/t1.html", &[]));
        c.response().expect_status(200, "warm-up");
        let before = server.scrape();
        for i in 0..20 {
            c.send(get("/t1.html", &[]));
            let r = c.response();
            r.expect_status(200, &format!("request {i}"));
            assert_bytes_eq(&r.body, &t1, &format!("request {i}"));
            assert!(!r.says_close());
        }
        let after = server.scrape();
        let delta = |name: &str| metric(&after, name) - metric(&before, name);
        let sys = |kind: &str| delta(&format!("sluice_syscalls_total{{kind=\"{kind}\"}}"));
        // Reads arrive as multishot receive completions and writes leave as ring operations:
        // none of them is a system call of its own.
        for kind in ["read", "write", "sendfile", "splice", "pread", "epoll_wait", "accept"] {
            assert_eq!(sys(kind), 0, "{engine:?}: {kind} calls on uring\n{after}");
        }
        assert_eq!(delta("sluice_connections_accepted_total"), 0);
        assert!(sys("io_uring_enter") >= 20, "{engine:?}: at least one enter per round trip\n{after}");
        assert!(delta("sluice_io_uring_completed_total") >= 40, "{engine:?}: receive + send per request");
        assert!(delta("sluice_io_uring_submitted_total") >= 20, "{engine:?}\n{after}");
        assert!(delta("sluice_bytes_sent_total") >= 20 * 1000);
        assert!(delta("sluice_bytes_received_total") > 0);
    });
}

#[test]
fn client_pipelining_without_reading_is_bounded_and_dropped() {
    // A client that sends requests for a large file back to back and never reads: the server
    // must stop taking its input (not buffer it without bound) and drop it at the send deadline.
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &["--send-timeout", "2s"]);
        let baseline = idle_fd_baseline(&server);
        let mut c = Conn::from_stream(connect_small_rcvbuf(server.addr(), 4096));
        c.stream.set_write_timeout(Some(Duration::from_millis(200))).unwrap();
        let req = get("/1m.bin", &[]);
        let start = Instant::now();
        let mut sent = 0usize;
        while start.elapsed() < Duration::from_secs(1) {
            match c.try_send(&req) {
                Ok(()) => sent += req.len(),
                Err(_) => break,
            }
        }
        let mut now = 0;
        let dropped = poll_until(Duration::from_secs(10), || {
            now = server.fd_count();
            now <= baseline
        });
        assert!(dropped, "{engine:?}: a client that never reads still holds {now} fds ({baseline} idle)");
        assert!(sent > 0);
        fetch_get(server.addr(), "/t1.html", &[("Connection", "close")]).expect_status(200, "after");
    });
}

#[test]
fn waiting_requests_do_not_block_the_ring() {
    let fx = Fixture::new();
    let server = Server::serve(&["--engine", "uring", "--workers", "1", "--send", "splice"], &fx, &[]);
    let addr = server.addr();
    let start = Instant::now();
    let clients: Vec<_> = (0..50)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Conn::open(addr);
                c.send(get("/bench/latency?ms=200", &[]));
                let first = c.response().status;
                c.send(get("/bench/cpu?n=20", &[]));
                (first, c.response().body_text())
            })
        })
        .collect();
    for client in clients {
        assert_eq!(client.join().unwrap(), (200, "Fibonacci(20) = 6765".to_string()));
    }
    let took = start.elapsed();
    assert!(took < Duration::from_secs(2), "50 waits of 200 ms took {took:?} on one ring");
}

/// Runs `sluice serve` with `args` (and the environment `env`), expecting it to exit by itself.
fn serve_exits(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let fx = Fixture::new();
    let root = fx.root_arg();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--rtsp-listen", "127.0.0.1:0", "--root", &root])
        .args(["--admin-listen", "127.0.0.1:0"])
        .args(args)
        .env_remove("SLUICE_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (status, _, stderr) = run_bounded(&mut cmd, IO_TIMEOUT);
    (status, String::from_utf8_lossy(&stderr).into_owned())
}

#[test]
fn sendfile_is_refused_on_uring() {
    let (status, log) = serve_exits(&["--engine", "uring", "--send", "sendfile"], &[]);
    assert_eq!(status.code(), Some(2), "uring with sendfile is a configuration error:\n{log}");
    assert!(
        log.contains("cannot send with sendfile") && log.contains("splice, copy"),
        "the refusal does not say why and what works:\n{log}"
    );
}

#[test]
fn demanded_uring_that_is_refused_exits_with_the_reason() {
    let (status, log) =
        serve_exits(&["--engine", "uring", "--send", "splice"], &[("SLUICE_FORCE_EPOLL", "1")]);
    assert!(!status.success(), "--engine uring ran although io_uring was refused:\n{log}");
    assert!(
        log.contains("io_uring unavailable") && log.contains("SLUICE_FORCE_EPOLL"),
        "the exit does not give the reason:\n{log}"
    );
}

#[test]
fn uring_requested_by_config_falls_back_to_epoll() {
    let fx = Fixture::new();
    let config = fx.base.join("sluice.toml");
    std::fs::write(&config, "[engine]\nkind = \"uring\"\nsend = \"splice\"\n").unwrap();
    let config = config.to_str().unwrap().to_string();
    let mut cmd_args = vec!["--config", config.as_str()];
    cmd_args.extend(["--log-level", "info"]);
    // Server::start reads the environment of the test process; set the override for the child
    // only by going through Command directly.
    let root = fx.root_arg();
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--listen", "127.0.0.1:0", "--rtsp-listen", "127.0.0.1:0", "--root", &root])
        .args(["--admin-listen", "127.0.0.1:0"])
        .args(&cmd_args)
        .env("SLUICE_FORCE_EPOLL", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    let deadline = Instant::now() + IO_TIMEOUT;
    while Instant::now() < deadline && !log.contains("listening on http://") {
        let mut line = String::new();
        if std::io::BufRead::read_line(&mut stderr, &mut line).unwrap_or(0) == 0 {
            break;
        }
        log.push_str(&line);
    }
    let addr = log.lines().find_map(parse_listen_line);
    let _ = child.kill();
    let _ = child.wait();
    assert!(addr.is_some(), "uring from the config file did not fall back to epoll:\n{log}");
    assert!(log.contains("engine=epoll"), "{log}");
    assert!(log.contains("SLUICE_FORCE_EPOLL"), "the fallback does not say why:\n{log}");
}
