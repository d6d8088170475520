//! Operating sluice, on every engine: exclusive ports, logs that cannot take the server down, the
//! admin listener apart from the library, the access line of a cut response, shutdown's exit
//! status, `serve --check`, and the exit codes of `sluice load` against a closed port.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

engine_matrix!(
    a_second_server_on_a_held_port_fails_with_one_line,
    a_closed_stderr_costs_nothing_but_the_lines,
    a_blocked_stderr_costs_nothing_but_the_lines,
    admin_endpoints_live_on_their_own_port,
    a_cut_response_is_logged_as_cut,
    the_grace_running_out_is_an_error,
    a_second_signal_exits_at_once,
);

fn sluice() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.env_remove("SLUICE_CONFIG").env_remove("RUST_LOG");
    cmd
}

fn a_second_server_on_a_held_port_fails_with_one_line(engine: &[&str]) {
    let fx = Fixture::new();
    let first = Server::serve(engine, &fx, &[]);
    let root = fx.root_arg();
    for (flag, addr) in [("--listen", first.addr()), ("--admin-listen", first.admin_addr())] {
        let other = if flag == "--listen" { "--admin-listen" } else { "--listen" };
        let mut cmd = sluice();
        cmd.args(["serve", "--root", &root, "--no-rtsp", other, "127.0.0.1:0"])
            .args([flag, &addr.to_string()])
            .args(engine);
        let (status, _, stderr) = run_bounded(&mut cmd, IO_TIMEOUT);
        let stderr = String::from_utf8_lossy(&stderr);
        assert_eq!(status.code(), Some(2), "{flag} {addr}: {stderr}");
        let lines: Vec<&str> = stderr.trim().lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        assert!(lines[0].contains(&addr.to_string()) && lines[0].contains(flag), "{stderr}");
    }
    // The first server still has the port to itself: every connection reaches its library.
    for _ in 0..20 {
        fetch_get(first.addr(), "/t1.html", &[("Connection", "close")]).expect_status(200, "first server");
    }
}

/// stderr is a pipe whose reading end is closed: every log write fails. The server serves 1,000
/// requests, counts the dropped lines, and stops cleanly on SIGTERM.
fn a_closed_stderr_costs_nothing_but_the_lines(engine: &[&str]) {
    stderr_trouble(engine, true);
}

/// stderr is a pipe nobody reads: once it is full, every log write would block. The server
/// serves 1,000 requests all the same, counts the dropped lines, and stops on SIGTERM.
fn a_blocked_stderr_costs_nothing_but_the_lines(engine: &[&str]) {
    stderr_trouble(engine, false);
}

fn stderr_trouble(engine: &[&str], close: bool) {
    let fx = Fixture::new();
    let (port, admin) = (free_port(), free_port());
    let (listen, admin_listen) = (format!("127.0.0.1:{port}"), format!("127.0.0.1:{admin}"));
    let mut child = sluice()
        .args(["serve", "--root", &fx.root_arg(), "--no-rtsp", "--listen", &listen])
        .args(["--admin-listen", &admin_listen, "--access-log", "true"])
        .args(engine)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Closed: the reading end goes now. Blocked: it stays open, unread, until the test ends.
    let stderr = child.stderr.take();
    let _unread = if close {
        drop(stderr);
        None
    } else {
        stderr
    };
    let pid = child.id() as i32;
    let addr: SocketAddr = listen.parse().unwrap();
    let up = poll_until(IO_TIMEOUT, || TcpStream::connect(addr).is_ok());
    let guard = KillOnDrop(pid);
    assert!(up, "the server never listened");
    let mut c = Conn::open(addr);
    for i in 0..1000 {
        if i % 100 == 99 {
            // Some on fresh connections, so the accept path logs too.
            c = Conn::open(addr);
        }
        c.send(get("/t1.html", &[]));
        c.response().expect_status(200, &format!("request {i}"));
    }
    if close {
        // One access line per request, each dropped (the writer thread gets to the last ones a
        // moment after the responses left). A blocked pipe only queues them (the queue holds far
        // more than 1,000 lines): what shows the loops never waited is that every request above
        // was answered.
        let admin: SocketAddr = admin_listen.parse().unwrap();
        let mut text = String::new();
        let dropped = poll_until(IO_TIMEOUT, || {
            text = metrics(&mut Conn::open(admin));
            metric(&text, "sluice_log_lines_dropped_total") >= 1000
        });
        assert!(dropped, "{text}");
    }
    // SAFETY: signalling the child we started, by its pid.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = wait_child(&mut child, IO_TIMEOUT).expect("exits within the grace after SIGTERM");
    std::mem::forget(guard);
    assert!(status.success(), "{status}");
}

fn admin_endpoints_live_on_their_own_port(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("metrics", b"a library file named metrics\n");
    fx.write("bench/hello", b"a library folder named bench\n");
    let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    fx.write("clip.mp4", &std::fs::read(demo).unwrap());
    fx.write("broken.mp4", b"not really a video");
    let server = Server::serve(engine, &fx, &["--no-bench"]);
    // The media port serves the library, whatever the names.
    let r = fetch_get(server.addr(), "/metrics", &[]);
    r.expect_status(200, "/metrics on the media port");
    assert_eq!(r.body, b"a library file named metrics\n");
    let r = fetch_get(server.addr(), "/bench/hello", &[]);
    r.expect_status(200, "/bench/hello without --bench");
    assert_eq!(r.body, b"a library folder named bench\n");
    fetch_get(server.addr(), "/healthz", &[]).expect_status(404, "no /healthz on the media port");
    // The admin port serves the operational endpoints.
    let admin = server.admin_addr();
    assert_ne!(admin.port(), server.addr().port());
    let text = server.scrape();
    assert!(text.contains("sluice_http_requests_total "), "{text}");
    assert!(fetch_get(admin, "/healthz", &[]).expect_status(200, "/healthz").body_text().contains("ok"));
    fetch_get(admin, "/readyz", &[]).expect_status(200, "/readyz");
    let r = fetch_get(admin, "/streams", &[]);
    r.expect_status(200, "/streams");
    let list: serde_json::Value = serde_json::from_slice(&r.body).expect("/streams is JSON");
    let items = list["items"].as_array().expect("items");
    let clip = items.iter().find(|i| i["path"] == "/clip.mp4").unwrap_or_else(|| panic!("{list}"));
    let rtsp = format!("rtsp://{}/clip.mp4", server.rtsp_addr());
    assert_eq!(clip["rtsp"], rtsp.as_str(), "{list}");
    let hls = format!("http://{}/clip.mp4/master.m3u8", server.addr());
    assert_eq!(clip["hls"], hls.as_str(), "{list}");
    // Only URLs that work: none for what is not a playable MP4.
    for path in ["/metrics", "/broken.mp4"] {
        assert!(
            items.iter().any(|i| i["path"] == path && i["rtsp"].is_null() && i["hls"].is_null()),
            "{list}"
        );
    }
    fetch_get(admin, "/t1.html", &[]).expect_status(404, "the admin port serves no library");
    // Prometheus's own linter reads the scrape (scripts/test installs it).
    let promtool = require_tool("promtool", "prometheus");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.txt");
    std::fs::write(&path, &text).unwrap();
    let mut cmd = Command::new(promtool);
    cmd.args(["check", "metrics"]).stdin(std::fs::File::open(&path).unwrap());
    let out = cmd.output().expect("run promtool");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check metrics: {said}");
    // The landing page shows the RTSP URL beside the player.
    let page = fetch_get(server.addr(), "/", &[]).body_text();
    assert!(page.contains(&rtsp), "{page}");
}

/// A download cut after 64 KiB: the access line says so, with the bytes actually sent, and
/// `/metrics` counts it.
fn a_cut_response_is_logged_as_cut(engine: &[&str]) {
    let fx = Fixture::new();
    fx.sparse("big.bin", 64 << 20);
    let server = Server::serve(engine, &fx, &["--access-log", "true"]);
    // Every engine runs CPU jobs on a pool whose workers /metrics counts, from when its loops
    // start (the listeners, bound before, may answer a moment earlier).
    let mut text = String::new();
    let counted = poll_until(IO_TIMEOUT, || {
        text = server.scrape();
        text.lines().any(|l| l.starts_with("sluice_cpu_pool_workers "))
    });
    assert!(counted && metric(&text, "sluice_cpu_pool_workers") >= 1, "{text}");
    let before = metric(&text, "sluice_http_responses_cut_total");
    let mut s = TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(&get("/big.bin", &[("User-Agent", "cut-test/1")])).unwrap();
    let mut got = 0;
    let mut buf = [0u8; 16 * 1024];
    while got < 64 * 1024 {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early");
        got += n;
    }
    set_linger_zero(&s);
    drop(s);
    let line = || server.logs().into_iter().find(|l| l.contains("sluice::access") && l.contains("/big.bin"));
    assert!(poll_until(IO_TIMEOUT, || line().is_some()), "no access line:\n{}", server.log_text());
    let line = line().unwrap();
    assert!(line.contains("complete=false") && line.contains("cut short"), "{line}");
    assert!(line.contains("cut-test/1") && line.contains("status=200"), "{line}");
    let bytes: u64 = line.split("bytes=").nth(1).and_then(|r| r.split(' ').next()).unwrap().parse().unwrap();
    assert!(bytes < 64 << 20, "{line}");
    let after = metric(&server.scrape(), "sluice_http_responses_cut_total");
    assert_eq!(after - before, 1, "one response cut");
}

/// A server with `grace` and a client that asked for a 256 MiB file and stopped reading after the
/// first bytes, so that its response stays in flight.
fn stalled_download(engine: &[&str], fx: &Fixture, grace: &str) -> (Server, TcpStream) {
    fx.sparse("big.bin", 256 << 20);
    let server = Server::serve(engine, fx, &["--shutdown-grace", grace]);
    let mut stalled = connect_small_rcvbuf(server.addr(), 4096);
    stalled.write_all(&get("/big.bin", &[])).unwrap();
    let mut head = [0u8; 512];
    let _ = stalled.read(&mut head).unwrap();
    (server, stalled)
}

/// A client that never reads a large download holds a response past a 1 s grace: the server
/// stops anyway, says how many it cut off, and exits 1.
fn the_grace_running_out_is_an_error(engine: &[&str]) {
    let fx = Fixture::new();
    let (mut server, _stalled) = stalled_download(engine, &fx, "1s");
    server.signal(libc::SIGTERM);
    let status = server.wait_exit(IO_TIMEOUT).expect("stops once the grace has run out");
    assert_eq!(status.code(), Some(1), "{}", server.log_text());
    let log = server.log_text();
    assert!(log.contains("finishing 1 connection(s)"), "{log}");
    assert!(log.contains("cut off"), "{log}");
}

/// With a long grace, a second SIGTERM does not wait for it.
fn a_second_signal_exits_at_once(engine: &[&str]) {
    let fx = Fixture::new();
    let (mut server, _stalled) = stalled_download(engine, &fx, "60s");
    server.signal(libc::SIGTERM);
    assert!(poll_until(IO_TIMEOUT, || server.log_text().contains("shutting down")), "{}", server.log_text());
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.running(), "the first signal waits for the stalled response");
    let sent = Instant::now();
    server.signal(libc::SIGTERM);
    let status = server.wait_exit(IO_TIMEOUT).expect("exits at once on a second signal");
    assert!(sent.elapsed() < Duration::from_secs(30), "well inside the 60 s grace");
    assert_eq!(status.code(), Some(1), "{}", server.log_text());
}

#[test]
fn check_validates_and_prints_the_effective_settings() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[http]\nlisten = \"localhost:8081\"\n[limits]\nheader_timeout = \"1.5s\"\n")
        .unwrap();
    let mut cmd = sluice();
    cmd.args(["serve", "--check", "--config", good.to_str().unwrap(), "--engine", "threads"]);
    let (status, stdout, stderr) = run_bounded(&mut cmd, IO_TIMEOUT);
    let (stdout, stderr) = (String::from_utf8_lossy(&stdout), String::from_utf8_lossy(&stderr));
    assert!(status.success(), "{stderr}");
    assert!(stdout.contains("listen = \"127.0.0.1:8081\""), "{stdout}");
    assert!(
        stdout.contains("header_timeout = \"1s 500ms\"") || stdout.contains("header_timeout = \"1s500ms\""),
        "{stdout}"
    );
    assert!(stdout.contains("kind = \"threads\"") && stdout.contains("send = \"sendfile\""), "{stdout}");
    // Nothing was bound: --check on a held port still passes.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[limits]\nheader_timeout = 10\n").unwrap();
    let mut cmd = sluice();
    cmd.args(["serve", "--check", "--config", bad.to_str().unwrap()]);
    let (status, _, stderr) = run_bounded(&mut cmd, IO_TIMEOUT);
    let stderr = String::from_utf8_lossy(&stderr);
    assert_eq!(status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("bad.toml:2:") && lines[0].contains("\"10s\""), "{stderr}");
}

#[test]
fn listen_takes_a_port_or_a_host_name() {
    for (given, expect) in [("PORT", "127.0.0.1:PORT"), ("localhost:PORT", "127.0.0.1:PORT")] {
        let port = free_port().to_string();
        let mut cmd = sluice();
        cmd.args(["serve", "--check", "--listen", &given.replace("PORT", &port)]);
        let (status, stdout, stderr) = run_bounded(&mut cmd, IO_TIMEOUT);
        assert!(status.success(), "{given}: {}", String::from_utf8_lossy(&stderr));
        let want = format!("listen = \"{}\"", expect.replace("PORT", &port));
        assert!(String::from_utf8_lossy(&stdout).contains(&want), "{given}");
    }
    let mut cmd = sluice();
    cmd.args(["serve", "--check", "--listen", "nowhere"]);
    let (status, _, _) = run_bounded(&mut cmd, IO_TIMEOUT);
    assert_eq!(status.code(), Some(2));
}

#[test]
fn help_lists_defaults_and_every_value() {
    let mut cmd = sluice();
    cmd.args(["serve", "--help"]);
    let (status, stdout, _) = run_bounded(&mut cmd, IO_TIMEOUT);
    assert!(status.success());
    let help = String::from_utf8_lossy(&stdout);
    for needle in [
        "[possible values: uring, epoll, threads, tokio]",
        "[possible values: sendfile, splice, copy]",
        "[possible values: pool, per-connection]",
        "[default: 127.0.0.1:8080]",
        "[default: 127.0.0.1:9090]",
        "[default: 10s]",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}:\n{help}");
    }
}

#[test]
fn load_rtsp_against_a_closed_port_exits_1_with_one_line() {
    let port = free_port();
    let mut cmd = sluice();
    cmd.args(["load", "rtsp", "--no-progress", "--quiet", "--clients", "2"])
        .args(["--setup-timeout", "2s"])
        .arg(format!("rtsp://127.0.0.1:{port}/x.mp4"));
    let (status, _, stderr) = run_bounded(&mut cmd, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&stderr);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("no viewer succeeded") && lines[0].contains("connect"), "{stderr}");
}

/// Kills a child by pid if the test panics before it stopped it.
struct KillOnDrop(i32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        // SAFETY: signalling the child we started, by its pid.
        unsafe { libc::kill(self.0, libc::SIGKILL) };
    }
}

fn wait_child(child: &mut std::process::Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// `load rtsp` against the demo stream, on both RTSP loops: thresholds decide the exit status
/// (99 when one fails), a viewer of the short demo clip ends `--idle-end` after the stream, not at
/// the far `--setup-timeout`, and the server logs each RTSP request and each session's start and
/// end.
#[test]
fn load_rtsp_thresholds_idle_end_and_rtsp_access_lines() {
    for engine in ["epoll", "uring"] {
        load_rtsp_against_the_demo(engine);
    }
}

fn load_rtsp_against_the_demo(engine: &str) {
    let mut server = Server::start(&["--engine", engine], &["--access-log", "true"]);
    let url = format!("rtsp://{}/sluice-demo.mp4", server.rtsp_addr());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("rtsp.json");
    let run = |extra: &[&str]| {
        let mut cmd = sluice();
        cmd.args(["load", "rtsp", "--no-progress", "--quiet", "--clients", "2", "--idle-end", "1s"])
            .args(["--setup-timeout", "40s", "--json", json.to_str().unwrap()])
            .args(extra)
            .arg(&url);
        let (status, _, stderr) = run_bounded(&mut cmd, Duration::from_secs(60));
        (status, String::from_utf8_lossy(&stderr).into_owned())
    };
    let (status, stderr) = run(&["--threshold", "perfect>99%", "--threshold", "samples_mean>=100"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // The demo plays for seconds; waiting for the 40 s setup timeout would show here.
    let took = report["duration_s"].as_f64().unwrap();
    assert!(took < 30.0, "the viewers waited for the setup timeout: {took} s");
    let ends = &report["summary"]["ends"];
    let over = ends["stream_end"].as_u64().unwrap() + ends["closed"].as_u64().unwrap();
    assert_eq!(over, 2, "both viewers saw the stream end: {ends}");
    let (status, stderr) = run(&["--expect-samples", "30", "--threshold", "samples_min>100000"]);
    assert_eq!(status.code(), Some(1), "a failed threshold is a failed run: {stderr}");
    assert!(stderr.contains("samples_min>100000"), "{stderr}");
    server.terminate();
    let logs = server.logs();
    let count = |needles: &[&str]| logs.iter().filter(|l| needles.iter().all(|n| l.contains(n))).count();
    // Four viewers in all, each DESCRIBE, SETUP (video and audio), PLAY, TEARDOWN or a close.
    assert_eq!(
        count(&["rtsp request", "method=\"DESCRIBE\"", "status=200", "sluice-demo.mp4"]),
        4,
        "{engine}"
    );
    assert!(count(&["rtsp request", "method=\"SETUP\"", "transport=\"RTP/AVP/TCP"]) >= 4, "{engine}");
    assert_eq!(count(&["rtsp session started", "sluice-demo.mp4"]), 4, "{engine}: {}", server.log_text());
    assert_eq!(count(&["rtsp session ended"]), 4, "{engine}: {}", server.log_text());
}

/// `--log-file`: lines go to the file; after a rename (logrotate), SIGUSR1 makes the server write
/// to a fresh file at the configured path.
#[test]
fn log_file_is_reopened_on_sigusr1() {
    let fx = Fixture::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sluice.log");
    let rotated = dir.path().join("sluice.log.1");
    let (port, admin) = (free_port(), free_port());
    let listen = format!("127.0.0.1:{port}");
    let mut child = sluice()
        .args(["serve", "--root", &fx.root_arg(), "--no-rtsp", "--listen", &listen])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}"), "--log-file", path.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as i32;
    let guard = KillOnDrop(pid);
    let read = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert!(poll_until(IO_TIMEOUT, || read(&path).contains("listening on http://")), "{}", read(&path));
    let addr: SocketAddr = listen.parse().unwrap();
    fetch_get(addr, "/t1.html", &[("Connection", "close")]).expect_status(200, "before the rotation");
    assert!(poll_until(IO_TIMEOUT, || read(&path).contains("uri=/t1.html")), "{}", read(&path));
    std::fs::rename(&path, &rotated).unwrap();
    // SAFETY: signalling the child we started, by its pid.
    unsafe { libc::kill(pid, libc::SIGUSR1) };
    assert!(poll_until(IO_TIMEOUT, || read(&path).contains("reopened")), "no fresh file");
    fetch_get(addr, "/64k.bin", &[("Connection", "close")]).expect_status(200, "after the rotation");
    assert!(poll_until(IO_TIMEOUT, || read(&path).contains("uri=/64k.bin")), "{}", read(&path));
    assert!(!read(&rotated).contains("/64k.bin"), "the old file got new lines");
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = wait_child(&mut child, IO_TIMEOUT).expect("stops on SIGTERM");
    std::mem::forget(guard);
    assert!(status.success(), "{status}");
    assert!(read(&path).contains("stopped"), "the last line is written before exit");
}
