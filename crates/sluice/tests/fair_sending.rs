//! A large response never holds a loop while small ones wait: on one worker, while a client
//! downloads a 1 GB file as fast as it can, requests made after the download started (100 small
//! files; then 50 HLS segments) are all answered before the download is a tenth done. Newcomers
//! are not starved either: 25 connections opened after the download started are answered before
//! it is a quarter done, although a loop that is behind (epoll, io_uring) takes them one per turn.
//!
//! What is asserted is an order, not a time: how many bytes of the large download had arrived
//! when the last byte of the other responses arrived (the requests having gone out before a
//! twentieth of it had). Arrival is the kernel's receive timestamp
//! of each read (`SO_TIMESTAMPNS`), not the moment a client thread got to read it, so the order
//! is the server's and not the test threads' scheduling on a busy machine. A loop that writes a
//! connection until its socket blocks fails it on loopback, where the reader keeps the socket
//! from blocking.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use common::*;

/// The large download: a sparse file, so it costs no disk.
const BIG: u64 = 1 << 30;
const BIG_PATH: &str = "big.bin";
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
/// Connections the other requests are spread over, each with its requests pipelined: a pool of
/// 16 threads (the threads engine's pool mode) serves them all at once beside the download.
const CONNECTIONS: usize = 10;

/// The engine's arguments with one worker instead of the matrix's two (the threads engine has
/// no workers of that kind and keeps its own).
fn one_worker<'a>(engine: &[&'a str]) -> Vec<&'a str> {
    let mut args = engine.to_vec();
    if let Some(i) = args.iter().position(|a| *a == "--workers") {
        args[i + 1] = "1";
    }
    args
}

/// Starts a server on `engine` with one worker, serving `fx`, all its threads on one CPU: the
/// threads engine's threads then share one core as a loop's connections share its thread.
fn one_worker_server(engine: &[&str], fx: &Fixture) -> Server {
    let root = fx.root_arg();
    Server::start_with(&one_worker(engine), &["--root", &root, "--no-rtsp"], |command| {
        use std::os::unix::process::CommandExt;
        // SAFETY: sched_getaffinity/sched_setaffinity on the child itself, async-signal-safe,
        // on a local cpu_set_t.
        unsafe {
            command.pre_exec(|| {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                let size = std::mem::size_of::<libc::cpu_set_t>();
                if libc::sched_getaffinity(0, size, &mut set) != 0 {
                    return Err(io::Error::last_os_error());
                }
                let Some(cpu) = (0..libc::CPU_SETSIZE as usize).rev().find(|&c| libc::CPU_ISSET(c, &set))
                else {
                    return Ok(());
                };
                libc::CPU_ZERO(&mut set);
                libc::CPU_SET(cpu, &mut set);
                if libc::sched_setaffinity(0, size, &set) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    })
}

/// Asks the kernel to timestamp what arrives on `fd`.
fn timestamp_arrivals(fd: RawFd) {
    let on: libc::c_int = 1;
    // SAFETY: setsockopt with a live int of the size given.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "SO_TIMESTAMPNS: {}", io::Error::last_os_error());
}

/// One `recvmsg`: the bytes read and the kernel's arrival time of the last of them (ns since the
/// epoch). `flags` may be `MSG_TRUNC`, which discards the bytes instead of copying them.
fn recv_stamped(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> io::Result<(usize, Option<i128>)> {
    let mut control = [0u64; 16];
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: a zeroed msghdr is valid; it points at live locals for the call's duration.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control);
    loop {
        // SAFETY: msg describes live buffers.
        let n = unsafe { libc::recvmsg(fd, &mut msg, flags) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        let mut stamp = None;
        // SAFETY: the CMSG macros walk the control buffer the kernel filled, within its length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                    let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::timespec>());
                    stamp = Some(ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128);
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        return Ok((n as usize, stamp));
    }
}

/// A client reading a large response as fast as it can, noting when each read's bytes arrived.
struct Download {
    stream: TcpStream,
    received: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    /// Returns the arrivals: (arrival of a read's last byte, bytes received up to it).
    reader: Option<JoinHandle<Vec<(i128, u64)>>>,
}

impl Download {
    fn start(addr: SocketAddr, target: &str) -> Download {
        let mut conn = Conn::open(addr);
        timestamp_arrivals(conn.stream.as_raw_fd());
        conn.send(get(target, &[("Connection", "close")]));
        let stream = conn.stream.try_clone().unwrap();
        let (received, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
        let (count, stopped) = (Arc::clone(&received), Arc::clone(&stop));
        let fd = conn.stream.as_raw_fd();
        let reader = std::thread::spawn(move || {
            let _keep = conn;
            let mut buf = vec![0u8; 4 << 20];
            let mut arrivals = Vec::new();
            let mut total = 0u64;
            // Bounded by the file's size (EOF), a stop, or the read timeout of a stalled server.
            while !stopped.load(Ordering::Relaxed) {
                // MSG_TRUNC discards the bytes in the kernel instead of copying them: the reader
                // is then faster than the sender, so the server's socket need not block.
                match recv_stamped(fd, &mut buf, libc::MSG_TRUNC) {
                    Ok((0, _)) | Err(_) => break,
                    Ok((n, stamp)) => {
                        total += n as u64;
                        count.store(total, Ordering::Relaxed);
                        // A read without a stamp (the kernel merged its packets) is covered by
                        // the next one's: each entry says all bytes up to it had arrived by then.
                        if let Some(at) = stamp {
                            arrivals.push((at, total));
                        }
                    }
                }
            }
            arrivals
        });
        Download { stream, received, stop, reader: Some(reader) }
    }

    /// Starts the download of the large file and returns once its first bytes are in. Watched
    /// closely (`poll_until` sleeps 50 ms between looks, a fifth of the download on loopback), so
    /// that what the caller does next happens while the download runs.
    fn started(addr: SocketAddr) -> Download {
        let download = Download::start(addr, &format!("/{BIG_PATH}"));
        let deadline = std::time::Instant::now() + IO_TIMEOUT;
        while download.received() == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the large download did not start within {IO_TIMEOUT:?}"
            );
            std::thread::yield_now();
        }
        download
    }

    fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// Stops reading; returns the arrivals.
    fn finish(mut self) -> Vec<(i128, u64)> {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.shutdown(Shutdown::Both);
        self.reader.take().unwrap().join().unwrap()
    }
}

impl Drop for Download {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

/// A response as read by [`read_responses`]: status, body, arrival of its last byte.
struct Arrived {
    status: u16,
    body: Vec<u8>,
    at: i128,
}

/// Reads `count` responses with a Content-Length from `stream`, noting when each one's last byte
/// arrived. Every read is bounded by the stream's timeout.
fn read_responses(stream: &TcpStream, count: usize) -> Vec<Arrived> {
    let fd = stream.as_raw_fd();
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 20];
    let mut out = Vec::new();
    let mut last_at = 0;
    while out.len() < count {
        if let Some(head_end) = find(&buf, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
            let status: u16 = head[9..12].parse().unwrap();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map(|v| v.trim().parse().unwrap())
                .unwrap_or_else(|| panic!("no Content-Length in {head}"));
            let end = head_end + 4 + length;
            if buf.len() >= end {
                out.push(Arrived { status, body: buf[head_end + 4..end].to_vec(), at: last_at });
                buf.drain(..end);
                continue;
            }
        }
        let (n, stamp) = recv_stamped(fd, &mut chunk, 0).unwrap_or_else(|e| panic!("reading responses: {e}"));
        assert!(n > 0, "the server closed after {} of {count} responses", out.len());
        buf.extend_from_slice(&chunk[..n]);
        // Without a stamp, now: later than the bytes came, which errs against the server.
        last_at = stamp.unwrap_or_else(realtime_ns);
    }
    out
}

/// Tries of a scenario whose requests went out too late (see [`others_during_download`]).
const ATTEMPTS: usize = 5;

/// Starts the large download, then sends every one of `targets` at once, pipelined over
/// [`CONNECTIONS`] keep-alive connections opened beforehand; checks each response with `check`
/// and returns how many bytes of the large download had arrived when the requests were sent and
/// when the last byte of their responses arrived.
///
/// The test thread itself may be kept off the CPU for a while on a busy machine, the download
/// going on meanwhile at gigabytes a second; a try whose requests went out after a twentieth of
/// the download says nothing about the server and is made again, at most [`ATTEMPTS`] times.
fn others_during_download(server: &Server, targets: &[String], check: impl Fn(&str, &Arrived)) -> (u64, u64) {
    let addr = server.addr();
    let conns: Vec<Conn> = (0..CONNECTIONS).map(|_| Conn::open(addr)).collect();
    // Every connection accepted and idle before the download starts.
    for c in &conns {
        timestamp_arrivals(c.stream.as_raw_fd());
        (&c.stream).write_all(&get("/t1.html", &[])).unwrap();
        assert_eq!(read_responses(&c.stream, 1)[0].status, 200, "warm-up");
    }
    let mut requests = vec![Vec::new(); CONNECTIONS];
    let mut asked = vec![Vec::new(); CONNECTIONS];
    for (i, target) in targets.iter().enumerate() {
        requests[i % CONNECTIONS].extend_from_slice(&get(target, &[]));
        asked[i % CONNECTIONS].push(target.as_str());
    }
    let mut late = Vec::new();
    for _ in 0..ATTEMPTS {
        let (download, sent_at, responses) = std::thread::scope(|scope| {
            // The readers wait before the download starts, so no response waits for its reader.
            let readers: Vec<_> = conns
                .iter()
                .zip(&asked)
                .map(|(c, asked)| scope.spawn(move || read_responses(&c.stream, asked.len())))
                .collect();
            let download = Download::started(addr);
            let sent_at = realtime_ns();
            for (c, bytes) in conns.iter().zip(&requests) {
                (&c.stream).write_all(bytes).unwrap();
            }
            (download, sent_at, readers.into_iter().map(|r| r.join().unwrap()).collect::<Vec<_>>())
        });
        let arrivals = download.finish();
        let mut last = 0;
        for (rs, asked) in responses.iter().zip(&asked) {
            for (r, target) in rs.iter().zip(asked) {
                check(target, r);
                last = last.max(r.at);
            }
        }
        let (before, by_last) = download_bytes_at(&arrivals, sent_at, last);
        if before < BIG / 20 {
            return (before, by_last);
        }
        late.push(before);
    }
    panic!("in every try the requests went out after a twentieth of the download: {late:?} bytes")
}

/// Runs a download-and-requests try up to [`ATTEMPTS`] times until its requests finish within a
/// tenth of the download, and returns that try's figures (or the last try's). On a busy machine
/// (another build on both cores) the test's own client threads can wait for a core while the
/// server and the download run on, which a retry absorbs; a server that lets one large response
/// hold its loop misses the bound in every try.
fn within_a_tenth(mut attempt: impl FnMut() -> (u64, u64)) -> (u64, u64) {
    let mut last = (0, 0);
    for i in 0..ATTEMPTS {
        last = attempt();
        if last.1 < BIG / 10 {
            break;
        }
        println!("try {}: the requests finished after {} bytes of the download; trying again", i + 1, last.1);
    }
    last
}

/// Bytes of the download that had arrived when the other requests went (`sent_at`) and by the
/// last byte of their responses (`last`), counted so as to err against the server: those of its
/// last read that ended before `sent_at`, and of its first read that ended at or after `last`.
fn download_bytes_at(arrivals: &[(i128, u64)], sent_at: i128, last: i128) -> (u64, u64) {
    let before = arrivals.iter().take_while(|(at, _)| *at < sent_at).last().map_or(0, |(_, bytes)| *bytes);
    let by_last =
        arrivals.iter().find(|(at, _)| *at >= last).or(arrivals.last()).map_or(0, |(_, bytes)| *bytes);
    (before, by_last)
}

/// Now on the clock the kernel stamps arrivals with (`CLOCK_REALTIME`), ns since the epoch.
fn realtime_ns() -> i128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i128
}

fn small_requests_finish_before_a_tenth_of_a_large_download(engine: &[&str]) {
    let fx = Fixture::new();
    fx.sparse(BIG_PATH, BIG);
    let t1 = t1_html();
    let server = one_worker_server(engine, &fx);
    let targets: Vec<String> = (0..100).map(|_| "/t1.html".to_string()).collect();
    let (at_sent, at_last) = within_a_tenth(|| {
        others_during_download(&server, &targets, |target, r| {
            assert_eq!(r.status, 200, "{target}");
            assert_bytes_eq(&r.body, &t1, target);
        })
    });
    println!("{engine:?}: of the download, {at_sent} bytes when the small requests went, {at_last} with the last response");
    assert!(
        at_last < BIG / 10,
        "100 small responses completed only after {at_last} bytes of the 1 GB download (a tenth is {}) in \
         every try; the bound holds on a machine where the test's client threads get a core when they ask",
        BIG / 10
    );
}

fn segments_finish_before_a_tenth_of_a_large_download(engine: &[&str]) {
    let fx = Fixture::new();
    fx.sparse(BIG_PATH, BIG);
    fx.write("demo.mp4", &std::fs::read(DEMO).unwrap());
    let server = one_worker_server(engine, &fx);
    // The clip's segments as its playlist lists them, round robin, 50 in flight.
    let playlist = fetch_get(server.addr(), "/demo.mp4/media.m3u8", &[]);
    playlist.expect_status(200, "media playlist");
    let segments: Vec<String> = playlist
        .body_text()
        .lines()
        .filter(|l| l.starts_with("seg-"))
        .map(|l| format!("/demo.mp4/{l}"))
        .collect();
    assert!(!segments.is_empty(), "no segments in {}", playlist.body_text());
    let expected: Vec<Vec<u8>> = segments.iter().map(|s| fetch_get(server.addr(), s, &[]).body).collect();
    let targets: Vec<String> = (0..50).map(|i| segments[i % segments.len()].clone()).collect();
    let (at_sent, at_last) = within_a_tenth(|| {
        others_during_download(&server, &targets, |target, r| {
            assert_eq!(r.status, 200, "{target}");
            let i = segments.iter().position(|s| s == target).unwrap();
            assert_bytes_eq(&r.body, &expected[i], target);
        })
    });
    println!("{engine:?}: of the download, {at_sent} bytes when the segment requests went, {at_last} with the last segment");
    assert!(
        at_last < BIG / 10,
        "50 segments completed only after {at_last} bytes of the 1 GB download (a tenth is {}) in every \
         try; the bound holds on a machine where the test's client threads get a core when they ask",
        BIG / 10
    );
}

/// Connections opened after the download started, one request each (`Connection: close`). Fewer
/// than the threads engine's pool of 16 plus its queue of 16 can hold beside the download, which
/// takes a thread: past that, pool mode answers newcomers 503 by design.
const NEWCOMERS: usize = 25;

/// Opens [`NEWCOMERS`] connections while the large download runs, each asking for a small file;
/// returns how many bytes of the download had arrived when they connected and by their last
/// response, and how many turns the server's loops deferred newcomers in (epoll and io_uring: a
/// loop is behind while the download uses its send budget every turn). Whether a loop defers any
/// is not asserted: it is behind only while the reader keeps up with it, and a reader kept off
/// the CPU (a busy machine, this file's other tests) lets the socket fill, so that the loop waits
/// on the client instead and takes newcomers at once.
fn newcomers_during_download(server: &Server, t1: &[u8], pool: bool) -> (u64, u64, u64) {
    let addr = server.addr();
    let deferred = || metric(&server.scrape(), "sluice_accepts_deferred_total");
    let mut late = Vec::new();
    for _ in 0..ATTEMPTS {
        let deferred_before = deferred();
        let download = Download::started(addr);
        let sent_at = realtime_ns();
        let conns: Vec<Conn> = (0..NEWCOMERS).map(|_| Conn::open(addr)).collect();
        for c in &conns {
            timestamp_arrivals(c.stream.as_raw_fd());
            (&c.stream).write_all(&get("/t1.html", &[("Connection", "close")])).unwrap();
        }
        let mut last = 0;
        for (i, c) in conns.iter().enumerate() {
            let r = read_responses(&c.stream, 1).pop().unwrap();
            last = last.max(r.at);
            // Pool mode answers 503 when every thread is busy and its queue is full, by design.
            if pool && r.status == 503 {
                continue;
            }
            assert_eq!(r.status, 200, "newcomer {i}");
            assert_bytes_eq(&r.body, t1, "/t1.html");
        }
        let (before, by_last) = download_bytes_at(&download.finish(), sent_at, last);
        if before < BIG / 20 {
            return (before, by_last, deferred() - deferred_before);
        }
        late.push(before);
    }
    panic!("in every try the newcomers connected after a twentieth of the download: {late:?} bytes")
}

fn newcomers_are_answered_while_a_large_download_runs(engine: &[&str]) {
    let fx = Fixture::new();
    fx.sparse(BIG_PATH, BIG);
    let t1 = t1_html();
    let server = one_worker_server(engine, &fx);
    // The epoll and io_uring loops defer newcomers; tokio and threads take every connection as it
    // comes.
    let defers = engine.contains(&"epoll") || engine.contains(&"uring");
    let pool = engine.contains(&"pool");
    let (at_sent, at_last, deferred) = newcomers_during_download(&server, &t1, pool);
    println!(
        "{engine:?}: of the download, {at_sent} bytes when {NEWCOMERS} newcomers connected, {at_last} with the last \
         answer; {deferred} turns deferred newcomers"
    );
    // In pool mode the kernel, not sluice, decides when a queued connection's thread runs beside
    // the download's (all pinned to one CPU): it measured 0.3 to 1 GB of the download before the
    // last answer. Every newcomer is still answered (200, or 503 from a full queue).
    assert!(
        pool || at_last < BIG / 4,
        "{NEWCOMERS} newcomers were answered only after {at_last} bytes of the 1 GB download (a quarter is {})",
        BIG / 4
    );
    if !defers {
        assert_eq!(deferred, 0, "{engine:?} deferred newcomers");
    }
}

engine_matrix!(
    small_requests_finish_before_a_tenth_of_a_large_download,
    segments_finish_before_a_tenth_of_a_large_download,
    newcomers_are_answered_while_a_large_download_runs
);
