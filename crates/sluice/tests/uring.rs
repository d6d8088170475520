//! The io_uring engine on its own: each behaviour once per uring send strategy (splice, copy),
//! what only uring has (completions counted instead of reads, `sendfile` refused, the probe's
//! refusal and the `SLUICE_FORCE_EPOLL` override), and a pipelined client that never reads.
//!
//! The shared engine matrix runs the whole suite on uring too; these tests stay focused and
//! readable without the macro.

// The engine matrix macro is not used here.
#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;

const SPLICE: &[&str] = &["--engine", "uring", "--workers", "2", "--send", "splice"];
const COPY: &[&str] = &["--engine", "uring", "--workers", "2", "--send", "copy"];

fn both(test: fn(&[&str])) {
    for engine in [SPLICE, COPY] {
        test(engine);
    }
}

/// Reads one metric's value from `/metrics` text.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("{name}: {e}")) as u64
}

fn metrics(c: &mut Conn) -> String {
    c.send(get("/metrics", &[]));
    let r = c.response();
    r.expect_status(200, "/metrics");
    r.body_text()
}

#[test]
fn megabyte_file_is_byte_exact() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &[]);
        let r = fetch_get(server.addr(), "/1m.bin", &[]);
        r.expect_status(200, "1m.bin");
        assert_bytes_eq(&r.body, &fx.file("1m.bin"), &format!("{engine:?} 1m.bin"));
        // An odd size that is neither a pipe nor a copy buffer multiple.
        let odd = pseudo_random(3 * 1024 * 1024 + 12345, 7);
        fx.write("odd.bin", &odd);
        let r = fetch_get(server.addr(), "/odd.bin", &[]);
        r.expect_status(200, "odd.bin");
        assert_bytes_eq(&r.body, &odd, &format!("{engine:?} odd.bin"));
    });
}

#[test]
fn ranges_single_and_multipart() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &[]);
        let big = fx.file("1m.bin");
        let mut c = Conn::open(server.addr());
        for (range, first, last) in
            [("bytes=0-0", 0, 0), ("bytes=1000-1999", 1000, 1999), ("bytes=-100", 1048476, 1048575)]
        {
            c.send(get("/1m.bin", &[("Range", range)]));
            let r = c.response();
            r.expect_status(206, range);
            assert_eq!(
                parse_content_range(r.header("content-range").unwrap()).unwrap(),
                (first as u64, last as u64, big.len() as u64)
            );
            assert_bytes_eq(&r.body, &big[first..=last], range);
        }
        c.send(get("/1m.bin", &[("Range", "bytes=0-9,500000-500099,1048570-")]));
        let r = c.response();
        r.expect_status(206, "multipart");
        let parts = parse_multipart(&r).unwrap_or_else(|e| panic!("{e}\n{r:?}"));
        let expected = [(0usize, 9usize), (500000, 500099), (1048570, 1048575)];
        assert_eq!(parts.len(), expected.len());
        for (part, (a, b)) in parts.iter().zip(expected) {
            assert_eq!(part.range, (a as u64, b as u64, big.len() as u64));
            assert_bytes_eq(&part.data, &big[a..=b], "multipart part");
        }
    });
}

#[test]
fn pipelined_requests_answered_in_order() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &[]);
        let (t1, k64, big) = (fx.file("t1.html"), fx.file("64k.bin"), fx.file("1m.bin"));
        let reqs: Vec<(Vec<u8>, u16, Vec<u8>)> = vec![
            (get("/t1.html", &[]), 200, t1.clone()),
            (get("/1m.bin", &[]), 200, big.clone()),
            (get("/64k.bin", &[("Range", "bytes=100-199")]), 206, k64[100..200].to_vec()),
            (get("/missing", &[]), 404, Vec::new()),
            (get("/bench/hello", &[]), 200, b"Hello, World!".to_vec()),
            (get("/64k.bin", &[]), 200, k64.clone()),
        ];
        let mut c = Conn::open(server.addr());
        c.send(reqs.iter().flat_map(|r| r.0.clone()).collect::<Vec<u8>>());
        for (i, (_, status, body)) in reqs.iter().enumerate() {
            let r = c.response();
            r.expect_status(*status, &format!("pipelined #{i}"));
            if *status != 404 {
                assert_bytes_eq(&r.body, body, &format!("{engine:?} pipelined #{i}"));
            }
        }
        let closed = c.wait_close(Duration::from_millis(300));
        assert!(closed.extra.is_empty() && !closed.closed, "{engine:?}: {closed:?}");
    });
}

#[test]
fn keep_alive_20_requests_cost_no_read_or_write_calls() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &[]);
        let t1 = fx.file("t1.html");
        let mut c = Conn::open(server.addr());
        let before = metrics(&mut c);
        for i in 0..20 {
            c.send(get("/t1.html", &[]));
            let r = c.response();
            r.expect_status(200, &format!("request {i}"));
            assert_bytes_eq(&r.body, &t1, &format!("request {i}"));
            assert!(!r.says_close());
        }
        let after = metrics(&mut c);
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
fn slow_header_gets_408() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &["--header-timeout", "2s"]);
        let mut c = Conn::open(server.addr());
        c.send(b"GET /t1.html HTTP/1.1\r\nHost: loc");
        let start = Instant::now();
        let closed = c.wait_close(Duration::from_secs(8));
        let after = start.elapsed();
        assert!(closed.closed, "{engine:?}: a half-sent head was kept open 8 s (header timeout 2 s)");
        assert!(
            after >= Duration::from_millis(1500) && after <= Duration::from_secs(5),
            "{engine:?}: closed after {after:?}"
        );
        let r = Response::parse(&closed.extra, false, true).ok().flatten().map(|x| x.0);
        assert_eq!(r.map(|r| r.status), Some(408), "{engine:?}: {:?}", lossy_prefix(&closed.extra, 200));
    });
}

/// The descriptor count once the server is idle (stable over three samples 100 ms apart).
fn idle_fds(server: &Server) -> usize {
    let mut samples = vec![server.fd_count()];
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        samples.push(server.fd_count());
        let n = samples.len();
        if n >= 3 && samples[n - 1] == samples[n - 2] && samples[n - 2] == samples[n - 3] {
            break;
        }
    }
    *samples.last().unwrap()
}

#[test]
fn reset_clients_leak_no_descriptors() {
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &[]);
        let addr = server.addr();
        let warm = fetch_get(addr, "/t1.html", &[("Connection", "close")]);
        warm.expect_status(200, "warm-up");
        let baseline = idle_fds(&server);
        let next = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = (0..8)
            .map(|_| {
                let next = Arc::clone(&next);
                std::thread::spawn(move || {
                    while next.fetch_add(1, Ordering::Relaxed) < 500 {
                        let mut c = Conn::open(addr);
                        c.send(get("/1m.bin", &[]));
                        let got = c.read_exact_raw(4096).expect("the first 4 KB");
                        assert!(got.starts_with(b"HTTP/1.1 200"), "{:?}", lossy_prefix(&got, 100));
                        c.set_reset_on_close();
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let mut now = 0;
        let settled = poll_until(Duration::from_secs(10), || {
            now = server.fd_count();
            now <= baseline
        });
        assert!(settled, "{engine:?}: {now} descriptors 10 s after 500 resets, {baseline} before");
        fetch_get(addr, "/t1.html", &[("Connection", "close")]).expect_status(200, "after the resets");
    });
}

#[test]
fn client_pipelining_without_reading_is_bounded_and_dropped() {
    // A client that sends requests for a large file back to back and never reads: the server
    // must stop taking its input (not buffer it without bound) and drop it at the send deadline.
    both(|engine| {
        let fx = Fixture::new();
        let server = Server::serve(engine, &fx, &["--send-timeout", "2s"]);
        let baseline = {
            fetch_get(server.addr(), "/t1.html", &[("Connection", "close")]).expect_status(200, "warm-up");
            idle_fds(&server)
        };
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

#[test]
fn graceful_shutdown_finishes_the_download_and_exits_0() {
    both(|engine| {
        let fx = Fixture::new();
        fx.write("slow.bin", &pseudo_random(8 * 1024 * 1024, 8));
        let big = fx.file("slow.bin");
        let mut server = Server::serve(engine, &fx, &["--shutdown-grace", "20s"]);
        let mut c = Conn::from_stream(connect_small_rcvbuf(server.addr(), 8192));
        c.send(get("/slow.bin", &[]));
        let first = c.read_exact_raw(16 * 1024).expect("the start of the download");
        let head_end = find(&first, b"\r\n\r\n").expect("a head") + 4;
        server.signal(libc::SIGTERM);
        std::thread::sleep(Duration::from_millis(200));
        assert!(server.running(), "{engine:?}: exited at once with a download in flight");
        let rest = c.read_exact_raw(head_end + big.len() - first.len()).expect("the rest of the download");
        let body = [&first[head_end..], &rest[..]].concat();
        assert_bytes_eq(&body, &big, &format!("{engine:?} download across SIGTERM"));
        let status = server.wait_exit(IO_TIMEOUT).expect("exit after the download");
        assert!(status.success(), "{engine:?}: exit status {status}\n{}", server.log_text());
    });
}

/// Runs `sluice serve` with `args` (and the environment `env`), expecting it to exit by itself.
fn serve_exits(args: &[&str], env: &[(&str, &str)]) -> (std::process::ExitStatus, String) {
    let fx = Fixture::new();
    let root = fx.root_arg();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root", &root]).args(args).env_remove("SLUICE_CONFIG");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let (status, _, stderr) = run_bounded(&mut cmd, IO_TIMEOUT);
    (status, String::from_utf8_lossy(&stderr).into_owned())
}

#[test]
fn sendfile_is_refused_on_uring() {
    let (status, log) = serve_exits(&["--engine", "uring", "--send", "sendfile"], &[]);
    assert!(!status.success(), "uring with sendfile started:\n{log}");
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
        .args(["serve", "--listen", "127.0.0.1:0", "--root", &root])
        .args(&cmd_args)
        .env("SLUICE_FORCE_EPOLL", "1")
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    let deadline = Instant::now() + IO_TIMEOUT;
    while Instant::now() < deadline && !log.contains("listening on") {
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
