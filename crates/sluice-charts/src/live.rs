//! A live page's own small server, for a program that has none (`sluice load --dashboard`):
//! `GET /` answers the page, `GET /events` the hub's server-sent events, anything else 404.
//! Bounded: [`MAX_STREAMS`] followers at once (more get 503), a request head within 5 s, and a
//! follower whose socket takes nothing for 5 s is dropped; the run it watches never waits.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::Hub;

/// Pages following the events at once.
pub const MAX_STREAMS: usize = 16;
/// The longest a request head or a blocked write may take.
const DEADLINE: Duration = Duration::from_secs(5);
/// Most bytes of a request head.
const MAX_HEAD: usize = 8 * 1024;

/// The page being served; stops serving when dropped.
#[derive(Debug)]
pub struct LivePage {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
}

impl LivePage {
    /// Where the page is served.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for LivePage {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.acceptor.take() {
            let _ = t.join();
        }
    }
}

/// Serves `page` and `hub`'s events on `listener` from threads of their own.
pub fn serve(listener: TcpListener, page: String, hub: Arc<Hub>) -> io::Result<LivePage> {
    let addr = listener.local_addr()?;
    listener.set_nonblocking(true)?;
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Shared { page, hub, stop: Arc::clone(&stop), streams: AtomicUsize::new(0) });
    let acceptor = std::thread::Builder::new().name("sluice-live-page".into()).spawn(move || {
        while !shared.stop.load(Ordering::Relaxed) {
            match listener.accept() {
                Ok((stream, _)) => {
                    let shared = Arc::clone(&shared);
                    // A connection that cannot get a thread is closed, nothing more.
                    let _ = std::thread::Builder::new()
                        .name("sluice-live-conn".into())
                        .spawn(move || shared.answer(stream));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    })?;
    Ok(LivePage { addr, stop, acceptor: Some(acceptor) })
}

struct Shared {
    page: String,
    hub: Arc<Hub>,
    stop: Arc<AtomicBool>,
    streams: AtomicUsize,
}

impl Shared {
    fn answer(&self, mut stream: TcpStream) {
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_read_timeout(Some(DEADLINE));
        let _ = stream.set_write_timeout(Some(DEADLINE));
        let Some(path) = read_path(&mut stream) else {
            let _ = stream.write_all(&reply("400 Bad Request", "text/plain", b"bad request\n"));
            return;
        };
        match path.as_str() {
            "/" => {
                let _ = stream.write_all(&reply("200 OK", "text/html; charset=utf-8", self.page.as_bytes()));
            }
            "/events" => self.follow(stream),
            _ => {
                let _ = stream.write_all(&reply("404 Not Found", "text/plain", b"not found\n"));
            }
        }
    }

    fn follow(&self, mut stream: TcpStream) {
        if self.streams.fetch_add(1, Ordering::Relaxed) >= MAX_STREAMS {
            self.streams.fetch_sub(1, Ordering::Relaxed);
            let _ = stream.write_all(&reply(
                "503 Service Unavailable",
                "text/plain",
                b"too many pages follow this run\n",
            ));
            return;
        }
        let (head, mut cursor) = self.hub.start();
        let start = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n{head}"
        );
        let stop = || self.stop.load(Ordering::Relaxed);
        if stream.write_all(start.as_bytes()).is_ok() {
            while let Some(event) = self.hub.next_event(&mut cursor, &stop) {
                if stream.write_all(event.as_bytes()).is_err() {
                    break;
                }
            }
        }
        self.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The path of a `GET` request's head, if it is one.
fn read_path(stream: &mut TcpStream) -> Option<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).ok().filter(|n| *n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return None;
        }
    }
    let line = std::str::from_utf8(&head).ok()?.lines().next()?.to_string();
    let mut words = line.split(' ');
    let (method, target) = (words.next()?, words.next()?);
    (method == "GET").then(|| target.split('?').next().unwrap_or(target).to_string())
}

fn reply(status: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    #[test]
    fn the_page_and_its_events_are_served_until_dropped() {
        let hub = Arc::new(Hub::new(10));
        hub.publish(&serde_json::json!({"t": 1}));
        let live =
            serve(TcpListener::bind("127.0.0.1:0").unwrap(), "<html>page</html>".into(), Arc::clone(&hub))
                .unwrap();
        let mut s = TcpStream::connect(live.local_addr()).unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut page = String::new();
        s.read_to_string(&mut page).unwrap();
        assert!(page.starts_with("HTTP/1.1 200 OK") && page.ends_with("<html>page</html>"), "{page}");
        let mut s = TcpStream::connect(live.local_addr()).unwrap();
        s.write_all(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = BufReader::new(s);
        let mut lines = Vec::new();
        let mut line = String::new();
        while !lines.iter().any(|l: &String| l.starts_with("data: [")) {
            line.clear();
            r.read_line(&mut line).unwrap();
            lines.push(line.clone());
        }
        hub.publish(&serde_json::json!({"t": 2}));
        loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            if line.starts_with("data: ") {
                assert_eq!(line, "data: {\"t\":2}\n");
                break;
            }
        }
        drop(live);
    }
}
