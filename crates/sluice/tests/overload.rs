//! Floods on every engine: a thousand slow heads, slow readers, a storm of malformed requests and a
//! descriptor shortage. Each is bounded in count and time, and each decides by counts: connections
//! cut by their deadline, requests of a well-behaved client that succeeded, memory that stayed put,
//! log lines written.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;

engine_matrix!(
    slowloris_is_cut_on_time_while_a_keep_alive_client_is_served,
    slow_readers_are_dropped_while_a_keep_alive_client_is_served,
    a_malformed_storm_does_not_grow_memory,
    descriptor_shortage_is_logged_at_most_once_a_second,
    a_cpu_bound_flood_keeps_memory_bounded,
);

/// Slow clients in the flood (the issue asks for at least 1,000).
const SLOWLORIS: usize = 1000;
const HEADER_TIMEOUT_SECS: u64 = 3;

/// A well-behaved client that connected before a flood: small GETs on one keep-alive connection.
struct KeepAliveClient {
    conn: Conn,
    expected: Vec<u8>,
    ok: usize,
    failures: Vec<String>,
}

impl KeepAliveClient {
    fn connect(server: &Server, fx: &Fixture) -> KeepAliveClient {
        let mut client = KeepAliveClient {
            conn: Conn::open(server.addr()),
            expected: fx.file("t1.html"),
            ok: 0,
            failures: Vec::new(),
        };
        client.get();
        assert_eq!(client.ok, 1, "the keep-alive client's first GET failed: {:?}", client.failures);
        client
    }

    fn get(&mut self) {
        if let Err(e) = self.conn.try_send(get("/t1.html", &[])) {
            self.failures.push(format!("send: {e}"));
            return;
        }
        match self.conn.read_response(false) {
            Ok(r) if r.status == 200 && r.body == self.expected => self.ok += 1,
            Ok(r) => self.failures.push(format!("status {}, {} bytes", r.status, r.body.len())),
            Err(e) => self.failures.push(e),
        }
    }
}

/// Whether the server has closed `s` (EOF or reset), reading and discarding what it sent.
fn closed_by_server(mut s: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return true,
        }
    }
}

/// Opens up to `n` connections to `addr`, each sending `first` at once (non-blocking from then
/// on); a connection the server resets or refuses while it is out of descriptors is left out.
fn open_many(addr: SocketAddr, n: usize, first: &[u8]) -> Vec<TcpStream> {
    (0..n)
        .filter_map(|_| {
            let mut s = TcpStream::connect(addr).ok()?;
            s.write_all(first).ok()?;
            s.set_nonblocking(true).ok()?;
            Some(s)
        })
        .collect()
}

/// 1,000 connections send a request head one byte a second. Every one must be cut (408 or a
/// close; on the threads pool, a 503 for those that found every thread busy and the queue full)
/// within the header timeout plus one second of its start, and a keep-alive client that was
/// there first must have every GET answered meanwhile.
fn slowloris_is_cut_on_time_while_a_keep_alive_client_is_served(engine: &[&str]) {
    let fx = Fixture::new();
    let timeout = format!("{HEADER_TIMEOUT_SECS}s");
    let server = Server::serve(engine, &fx, &["--header-timeout", &timeout]);
    let mut client = KeepAliveClient::connect(&server, &fx);
    let head = b"GET /t1.html HTTP/1.1\r\nHost: localhost\r\nX-Slow: yes\r\n\r\n";
    let started = Instant::now();
    let mut slow = open_many(server.addr(), SLOWLORIS, &head[..1]);
    let opened_in = started.elapsed();
    // The threads pool answers 503 at once to those that find it full, and may close one before
    // its first byte is written; every other engine takes them all.
    assert!(slow.len() >= SLOWLORIS / 2, "only {} of {SLOWLORIS} slow clients could connect", slow.len());
    let cut_by = started + opened_in + Duration::from_secs(HEADER_TIMEOUT_SECS + 1);
    let mut sent = 1;
    let mut open: Vec<bool> = vec![true; slow.len()];
    // One byte a second on every connection still open, and a GET of the keep-alive client
    // every 200 ms, until the deadline by which all of them must have been cut.
    let mut next_byte = Instant::now() + Duration::from_secs(1);
    while Instant::now() < cut_by {
        if Instant::now() >= next_byte && sent < head.len() {
            for (s, open) in slow.iter_mut().zip(open.iter_mut()) {
                if *open && s.write(&head[sent..sent + 1]).is_err() {
                    *open = false;
                }
            }
            sent += 1;
            next_byte += Duration::from_secs(1);
        }
        client.get();
        std::thread::sleep(Duration::from_millis(200));
    }
    let still_open: Vec<usize> =
        slow.iter().enumerate().filter_map(|(i, s)| (!closed_by_server(s)).then_some(i)).collect();
    record_figure(
        "1,000 slow heads (header timeout 3 s)",
        engine,
        format!(
            "{} of {} cut within {:.1} s; keep-alive GETs {} of {} ok",
            slow.len() - still_open.len(),
            slow.len(),
            (cut_by - started).as_secs_f64(),
            client.ok,
            client.ok + client.failures.len()
        ),
    );
    assert!(
        still_open.is_empty(),
        "{} of {} slow heads were still open {:?} after the flood began (header timeout \
         {HEADER_TIMEOUT_SECS} s, opening them took {opened_in:?}); first: {:?}",
        still_open.len(),
        slow.len(),
        cut_by - started,
        &still_open[..still_open.len().min(10)]
    );
    assert!(
        client.failures.is_empty(),
        "the keep-alive client had {} of {} GETs fail during the flood: {:?}",
        client.failures.len(),
        client.ok + client.failures.len(),
        &client.failures[..client.failures.len().min(5)]
    );
    // The server is whole: a fresh client is served once the flood is gone.
    drop(slow);
    let fresh = poll_until(Duration::from_secs(5), || {
        let mut c = Conn::open(server.addr());
        c.send(get("/t1.html", &[("Connection", "close")]));
        c.read_response(false).is_ok_and(|r| r.status == 200)
    });
    assert!(fresh, "a fresh client was not served within 5 s of the flood's end");
}

/// Slow readers of a big file, more than the threads pool has threads: each is dropped at the send
/// timeout (those that found the pool full get a 503 at once) while a keep-alive client that was
/// there first has every GET answered.
fn slow_readers_are_dropped_while_a_keep_alive_client_is_served(engine: &[&str]) {
    const READERS: usize = 40;
    let fx = Fixture::new();
    fx.sparse("big.bin", 64 * 1024 * 1024);
    let server = Server::serve(engine, &fx, &["--send-timeout", "2s"]);
    let baseline = idle_fd_baseline(&server);
    let mut client = KeepAliveClient::connect(&server, &fx);
    let started = Instant::now();
    let readers: Vec<TcpStream> = (0..READERS)
        .map(|_| {
            let mut s = connect_small_rcvbuf(server.addr(), 4096);
            s.write_all(&get("/big.bin", &[])).expect("send the slow reader's request");
            s
        })
        .collect();
    // A dropped reader is seen from the server's side: its descriptor is closed (the client
    // sees no end of stream while the server's unsent bytes sit in front of the FIN). Pool mode
    // serves the readers a poolful at a time, each held for the 2 s send timeout: 40 readers
    // over 15 threads is three waves, 6 s; 15 s leaves room for a slow machine. The slack is the
    // keep-alive client's connection and the pipe its GETs may keep pooled.
    let limit = Duration::from_secs(15);
    let mut open = usize::MAX;
    while started.elapsed() < limit {
        client.get();
        open = server.fd_count();
        if open <= baseline + 4 {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    record_figure(
        "40 slow readers (send timeout 2 s)",
        engine,
        format!(
            "all dropped after {:.1} s: {}; keep-alive GETs {} of {} ok",
            started.elapsed().as_secs_f64(),
            open <= baseline + 4,
            client.ok,
            client.ok + client.failures.len()
        ),
    );
    assert!(
        open <= baseline + 4,
        "{READERS} slow readers (send timeout 2 s) were not all dropped within {limit:?}: {open} \
         descriptors open, {baseline} when idle"
    );
    assert!(
        client.failures.is_empty(),
        "the keep-alive client had {} of {} GETs fail among slow readers: {:?}",
        client.failures.len(),
        client.ok + client.failures.len(),
        &client.failures[..client.failures.len().min(5)]
    );
    drop(readers);
}

/// Resident memory of a process, in KiB.
fn rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/PID/status")
}

/// One round of the storm: `connections` connections over 4 client threads, each sending a few
/// malformed requests (bad bytes, bad framing, oversized fields) and reading until the close.
fn storm_round(addr: SocketAddr, connections: usize, round: usize) {
    const GARBAGE: [&[u8]; 8] = [
        b"GET /\x00\x01\x02 HTTP/1.1\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 tls hello to a plain port\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"GET /a%zz HTTP/1.1\r\nHost: x\r\n\r\n",
        b"BREW /pot HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: x\r\nX: \x7f\x7f\x7f\r\n\r\n",
    ];
    std::thread::scope(|scope| {
        for t in 0..4 {
            scope.spawn(move || {
                let mut buf = [0u8; 4096];
                for i in (t..connections).step_by(4) {
                    let Ok(mut s) = TcpStream::connect(addr) else { continue };
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let pick = (i + round) % GARBAGE.len();
                    let mut request = GARBAGE[pick].to_vec();
                    // Oversized fields now and then, so the session's buffers grow too.
                    if i % 7 == 0 {
                        request.splice(4..4, std::iter::repeat_n(b'a', 6000));
                    }
                    let _ = s.write_all(&request);
                    // The end of the request stream: the server answers and closes rather than
                    // waiting for a next request on connections its 400 left open.
                    let _ = s.shutdown(std::net::Shutdown::Write);
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 {
                            break;
                        }
                    }
                }
            });
        }
    });
}

/// After a warm-up round of malformed requests, five more rounds must not grow the server's
/// resident memory by more than 10% in all (it grew 33-106% over six rounds before this was fixed).
fn a_malformed_storm_does_not_grow_memory(engine: &[&str]) {
    const CONNECTIONS: usize = 1500;
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--log-level", "info,sluice::access=warn"]);
    storm_round(server.addr(), CONNECTIONS, 0);
    std::thread::sleep(Duration::from_millis(300));
    let warm = rss_kib(server.pid());
    let mut after = Vec::new();
    for round in 1..=5 {
        storm_round(server.addr(), CONNECTIONS, round);
        std::thread::sleep(Duration::from_millis(300));
        after.push(rss_kib(server.pid()));
    }
    let last = *after.last().unwrap();
    record_figure(
        "malformed storm, 6 rounds of 1,500 connections",
        engine,
        format!(
            "RSS {warm} → {last} KiB after the warm-up round ({:+.1}%)",
            (last as f64 / warm as f64 - 1.0) * 100.0
        ),
    );
    assert!(
        last * 10 <= warm * 11,
        "resident memory grew from {warm} KiB after the warm-up round to {last} KiB after five more \
         rounds of {CONNECTIONS} malformed connections (more than 10%); per round: {after:?}"
    );
    fetch_get(server.addr(), "/t1.html", &[("Connection", "close")])
        .expect_status(200, "GET after the storm");
}

/// With its descriptors used up, the server fails every accept; it must say so at most once a
/// second (with a count of the failures it held back), not once per failure, and serve again once
/// descriptors are free.
fn descriptor_shortage_is_logged_at_most_once_a_second(engine: &[&str]) {
    let fx = Fixture::new();
    let args = ["--root", &fx.root_arg(), "--no-rtsp"];
    // What this engine holds when idle, measured on an unlimited server, plus room for four
    // connections: fewer than a threads pool has threads, so the pool cannot shed its way out.
    let idle = {
        let server = Server::start(engine, &args);
        idle_fd_baseline(&server)
    };
    let nofile = (idle + 4) as libc::rlim_t;
    // The limit is set before the server starts, soft and hard alike (sluice raises its soft
    // limit to the hard one): io_uring's multishot accept reads the limit when it is armed.
    let server = Server::start_with(engine, &args, move |cmd| {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit is async-signal-safe and touches only the child being started.
        unsafe {
            cmd.pre_exec(move || {
                let limit = libc::rlimit { rlim_cur: nofile, rlim_max: nofile };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let started = Instant::now();
    let held = open_many(server.addr(), 60, b"GET /t1.html HTTP/1.1\r\nHost: x\r\n");
    std::thread::sleep(Duration::from_secs(3));
    let elapsed = started.elapsed();
    let warnings: Vec<String> =
        server.logs().into_iter().filter(|l| l.contains("accept:") && l.contains("WARN")).collect();
    record_figure(
        "descriptors used up (EMFILE) for 3 s",
        engine,
        format!("{} accept warning lines in {:.1} s", warnings.len(), elapsed.as_secs_f64()),
    );
    assert!(
        !warnings.is_empty(),
        "no accept warning with the descriptors used up ({} open of {nofile}, {} connections \
         opened); log:\n{}",
        server.fd_count(),
        held.len(),
        server.log_text()
    );
    assert!(
        warnings.len() as u64 <= elapsed.as_secs() + 2,
        "{} accept warnings in {elapsed:?}:\n{}",
        warnings.len(),
        warnings.join("\n")
    );
    drop(held);
    let served = poll_until(Duration::from_secs(5), || {
        let mut c = Conn::open(server.addr());
        c.send(get("/t1.html", &[("Connection", "close")]));
        c.read_response(false).is_ok_and(|r| r.status == 200)
    });
    assert!(served, "no request served within 5 s of descriptors coming back");
}

/// Peak resident memory of a process (`VmHWM`), in KiB.
fn peak_rss_kib(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/PID/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status")
}

/// Concurrent CPU-bound requests (each a 5 MB sieve) must not each get their own run at once:
/// at most `--cpu-workers` run, the rest wait in a bounded line (503 beyond it), on every engine.
/// Before, 600 of them took 626 MB on the threads pool and 3,991 MB with a thread per connection.
fn a_cpu_bound_flood_keeps_memory_bounded(engine: &[&str]) {
    const REQUESTS: usize = 8;
    let fx = Fixture::new();
    let server =
        Server::serve(engine, &fx, &["--cpu-workers", "2", "--log-level", "info,sluice::access=warn"]);
    let before = peak_rss_kib(server.pid());
    let statuses: Vec<u16> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..REQUESTS)
            .map(|_| {
                scope.spawn(|| {
                    let mut c = Conn::open(server.addr());
                    c.send(get("/bench/cpu-heavy?limit=5000000", &[("Connection", "close")]));
                    c.read_response(false).map_or(0, |r| r.status)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let peak = peak_rss_kib(server.pid());
    record_figure(
        "8 concurrent 5 MB cpu-heavy sieves (--cpu-workers 2)",
        engine,
        format!(
            "peak RSS +{:.1} MiB; {} × 200, {} × 503",
            (peak.saturating_sub(before)) as f64 / 1024.0,
            statuses.iter().filter(|&&s| s == 200).count(),
            statuses.iter().filter(|&&s| s == 503).count()
        ),
    );
    let answered = statuses.iter().filter(|&&s| s == 200 || s == 503).count();
    assert_eq!(answered, REQUESTS, "every CPU-bound request gets 200 or 503: {statuses:?}");
    assert!(statuses.contains(&200), "no CPU-bound request succeeded: {statuses:?}");
    // Two 5 MB sieves at a time: 25 MB more leaves room for the allocator, and is well below
    // eight sieves at once (40 MB), as a thread per request or a pool of 16 ran them.
    assert!(
        peak <= before + 25 * 1024,
        "peak resident memory went from {before} KiB to {peak} KiB for {REQUESTS} concurrent 5 MB sieves \
         with --cpu-workers 2"
    );
}
