//! One HTTP/1.1 request on a fresh loopback connection, for the control and status APIs of the
//! programs the harness runs (SeaweedFS's filer and metrics, toxiproxy's API, HAProxy's stats,
//! sluice's `/metrics`). Every request says `Connection: close` and the answer is read to its
//! end by sluice-proto's response reader (the one the load generator uses). It refuses any address outside
//! 127.0.0.0/8 and ::1, and is not a client for the data path (tests have their own).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use sluice_proto::client::http::{Progress, ResponseReader};

use crate::HarnessError;

/// How long connecting, and each read or write, may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// An answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Header fields as sent (names as written).
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked).
    pub body: Vec<u8>,
}

impl Response {
    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// `GET path`.
pub fn get(addr: SocketAddr, path: &str) -> Result<Response, HarnessError> {
    request(addr, "GET", path, &[], None)
}

/// `HEAD path` (the answer has no body).
pub fn head(addr: SocketAddr, path: &str) -> Result<Response, HarnessError> {
    request(addr, "HEAD", path, &[], None)
}

/// `PUT path` with `body` of `content_type`.
pub fn put(addr: SocketAddr, path: &str, content_type: &str, body: &[u8]) -> Result<Response, HarnessError> {
    request(addr, "PUT", path, &[("Content-Type", content_type)], Some(body))
}

/// `GET path` answered 200: its body as text; any other status is an error naming it.
pub fn get_ok_text(addr: SocketAddr, path: &str) -> Result<String, HarnessError> {
    let r = get(addr, path)?;
    if r.status != 200 {
        return Err(HarnessError::Refused {
            what: format!("GET {path}"),
            message: format!("status {}", r.status),
        });
    }
    Ok(r.text())
}

/// `method path` with `headers` and an optional body (sent with its `Content-Length`).
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> Result<Response, HarnessError> {
    let what = format!("{method} http://{addr}{path}");
    if !addr.ip().is_loopback() {
        return Err(HarnessError::Refused { what, message: "the harness only talks to loopback".into() });
    }
    let io = |e| HarnessError::io(what.clone(), e);
    let mut s = TcpStream::connect_timeout(&addr, TIMEOUT).map_err(io)?;
    s.set_read_timeout(Some(TIMEOUT)).map_err(io)?;
    s.set_write_timeout(Some(TIMEOUT)).map_err(io)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (name, value) in headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(body) = body {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body.unwrap_or_default());
    s.write_all(&out).map_err(io)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(io)?;
    parse(&raw, method == "HEAD").map_err(|message| HarnessError::Refused { what, message })
}

/// A whole response read to the connection's end.
fn parse(raw: &[u8], head_only: bool) -> Result<Response, String> {
    let mut reader = ResponseReader::keeping_head();
    reader.start_keeping_body(head_only, usize::MAX);
    match reader.feed(raw).map_err(|e| e.to_string())? {
        Progress::Complete { .. } => {}
        Progress::NeedMore { .. } => reader.finish().map_err(|e| e.to_string())?,
    }
    let body = reader.take_body();
    let head = reader.head().ok_or("no complete response head")?;
    Ok(Response { status: head.status, headers: head.headers.clone(), body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A one-shot server answering `answer` and handing back the request it read.
    fn serve_once(answer: &'static [u8]) -> (SocketAddr, std::thread::JoinHandle<String>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("binds");
        let addr = l.local_addr().expect("an address");
        let t = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accepts");
            let mut req = vec![0; 4096];
            let n = s.read(&mut req).expect("reads");
            s.write_all(answer).expect("writes");
            String::from_utf8_lossy(&req[..n]).into_owned()
        });
        (addr, t)
    }

    #[test]
    fn a_chunked_answer_is_decoded_and_the_request_closes() {
        let (addr, t) = serve_once(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        );
        let r = get(addr, "/metrics").expect("answers");
        assert_eq!((r.status, r.text().as_str()), (200, "abcde"));
        let req = t.join().expect("served");
        assert!(req.starts_with("GET /metrics HTTP/1.1\r\n") && req.contains("Connection: close"), "{req}");
    }

    #[test]
    fn put_sends_its_body_with_a_length() {
        let (addr, t) = serve_once(b"HTTP/1.1 201 Created\r\nX-A: b\r\n\r\n");
        let r = put(addr, "/k", "application/json", b"{}").expect("answers");
        assert_eq!((r.status, r.header("x-a")), (201, Some("b")));
        let req = t.join().expect("served");
        assert!(req.contains("Content-Length: 2\r\n") && req.ends_with("\r\n\r\n{}"), "{req}");
    }

    #[test]
    fn no_request_leaves_loopback() {
        let err = get(SocketAddr::from(([192, 0, 2, 1], 80)), "/").expect_err("refused");
        assert!(err.to_string().contains("loopback"), "{err}");
    }
}
