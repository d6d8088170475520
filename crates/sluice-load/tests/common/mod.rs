//! A tiny HTTP/1.1 test server for the load generator's integration tests: one thread per
//! connection, keep-alive, a request counter, and a chosen misbehaviour (stall, reset, premature
//! close, no answer, bad status, short body). It listens on 127.0.0.1 only, and every wait is
//! bounded so a broken test cannot hang the suite.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What the server does with each request.
#[derive(Debug, Clone, Copy)]
pub enum Behaviour {
    /// `200 OK` with a 13-byte body, keep-alive.
    Ok,
    /// Like `Ok`, but between `after` and `after + stall` from the first request, answers
    /// nothing (every response waits until the stall is over).
    Stall { after: Duration, stall: Duration },
    /// Reads the request, then resets the connection.
    Reset,
    /// Reads the request, then closes without answering.
    PrematureClose,
    /// Reads the request and never answers (holds the connection for `hold`).
    NoAnswer { hold: Duration },
    /// `500 Internal Server Error` with a full body.
    Status500,
    /// A head promising 100 bytes, 10 bytes, then close.
    ShortBody,
}

struct Shared {
    behaviour: Behaviour,
    requests: AtomicU64,
    connections: AtomicU64,
    stop: AtomicBool,
    first_request: Mutex<Option<Instant>>,
}

/// A running test server; stops when dropped.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl TestServer {
    /// Starts a server with `behaviour` on a free loopback port.
    pub fn start(behaviour: Behaviour) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            behaviour,
            requests: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            first_request: Mutex::new(None),
        });
        let s = shared.clone();
        let accept = std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                s.connections.fetch_add(1, Ordering::SeqCst);
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        TestServer { addr, shared, accept: Some(accept) }
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Requests read so far.
    pub fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so its thread ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
    }
}

const BODY: &[u8] = b"Hello, World!";

fn serve(mut conn: TcpStream, s: &Shared) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = conn.set_nodelay(true);
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        // Read one request head (the generator sends no bodies).
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            match conn.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let close = buf[..end].windows(17).any(|w| w.eq_ignore_ascii_case(b"connection: close"));
        buf.drain(..end);
        s.requests.fetch_add(1, Ordering::SeqCst);
        let first = *s.first_request.lock().unwrap().get_or_insert_with(Instant::now);
        let ok = match s.behaviour {
            Behaviour::Ok => respond(&mut conn, "200 OK", BODY, close),
            Behaviour::Stall { after, stall } => {
                let (from, to) = (first + after, first + after + stall);
                let now = Instant::now();
                if now >= from && now < to {
                    std::thread::sleep(to - now);
                }
                respond(&mut conn, "200 OK", BODY, close)
            }
            Behaviour::Reset => {
                set_linger_zero(&conn);
                return;
            }
            Behaviour::PrematureClose => {
                let _ = conn.shutdown(std::net::Shutdown::Both);
                return;
            }
            Behaviour::NoAnswer { hold } => {
                std::thread::sleep(hold);
                return;
            }
            Behaviour::Status500 => respond(&mut conn, "500 Internal Server Error", b"oops", close),
            Behaviour::ShortBody => {
                let _ = conn.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789");
                return;
            }
        };
        if !ok || close {
            return;
        }
    }
}

fn respond(conn: &mut TcpStream, status: &str, body: &[u8], close: bool) -> bool {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: text/plain\r\n{}\r\n",
        body.len(),
        if close { "Connection: close\r\n" } else { "" }
    );
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    conn.write_all(&out).is_ok()
}

/// Makes the close send RST instead of FIN.
fn set_linger_zero(conn: &TcpStream) {
    let linger = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: setsockopt on a live socket with a pointer to a live, correctly sized linger.
    unsafe {
        libc::setsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}
