//! The uploader's HTTP side: one worker's kept-alive connection to a sluice server, the `PUT`
//! it sends (with `Repr-Digest`, and `Expect: 100-continue` for large bodies) and what it makes
//! of the answer (status, stored length, the server's one-line reason). It does not retry or
//! count: [`super::run_upload`] decides that from the [`Failure`] or [`Answer`] it gets.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use base64::Engine as _;
use sha2::Digest as _;

use super::{Answer, Failure, Item};
use sluice_proto::client::http::{Progress, ResponseHead, ResponseReader};

/// Bodies from this size ask `Expect: 100-continue` first: a refusal then costs a round trip,
/// not the body. Smaller ones are sent at once (the round trip would cost more than the body).
const EXPECT_CONTINUE_FROM: usize = 1 << 20;

/// How long to wait for `100 Continue` before sending the body anyway (RFC 9110 section 10.1.1),
/// for servers that ignore `Expect`.
const CONTINUE_WAIT: Duration = Duration::from_secs(1);

/// One worker's connection to a sluice server.
pub(super) struct HttpConnection {
    pub(super) stream: Option<TcpStream>,
    pub(super) opened: u64,
    pub(super) buf: Vec<u8>,
}

impl HttpConnection {
    pub(super) fn put(
        &mut self,
        dest: (&SocketAddr, &str, &str, Option<&str>),
        item: &Item,
        body: &[u8],
        timeout: Duration,
    ) -> Result<u64, Failure> {
        let (addr, host, prefix, token) = dest;
        if self.stream.is_none() {
            let s = TcpStream::connect_timeout(addr, timeout).map_err(|e| Failure::io(&e))?;
            s.set_nodelay(true).ok();
            s.set_read_timeout(Some(timeout)).ok();
            s.set_write_timeout(Some(timeout)).ok();
            self.opened += 1;
            self.stream = Some(s);
            self.buf.clear();
        }
        let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body));
        let path = url_path(&item.key);
        let mut head = format!(
            "PUT {prefix}/{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: {}\r\nContent-Type: {}\r\nRepr-Digest: sha-256=:{digest}:\r\n",
            body.len(),
            item.content_type()
        );
        if let Some(t) = token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        let expect = body.len() >= EXPECT_CONTINUE_FROM;
        if expect {
            head.push_str("Expect: 100-continue\r\n");
        }
        head.push_str("\r\n");
        let answer = if expect {
            self.write(head.as_bytes())?;
            match self.read_answer(Some(CONTINUE_WAIT)) {
                Ok(a) if a.status == 100 => {
                    self.write(body)?;
                    self.read_answer(None)?
                }
                Ok(final_answer) => {
                    // Refused before the body: the connection is not worth reusing.
                    self.stream = None;
                    final_answer
                }
                // No answer yet: a server that ignores `Expect` waits for the body.
                Err(f) if f.kind == "timeout" && self.stream.is_some() => {
                    self.write(body)?;
                    self.read_answer(None)?
                }
                Err(f) => return Err(f),
            }
        } else {
            let mut request = head.into_bytes();
            request.extend_from_slice(body);
            self.write(&request)?;
            self.read_answer(None)?
        };
        match answer.status {
            200..=299 => Ok(answer.stored.unwrap_or(body.len() as u64)),
            _ => Err(Failure::http(&answer)),
        }
    }

    /// Sends `bytes`. When the server cut the connection while they went out, its answer (a 413
    /// or 401 sent before it closed) is read and becomes the failure; only without one is it a
    /// reset worth a retry.
    fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        let stream = self.stream.as_mut().ok_or_else(|| Failure::transient("closed"))?;
        match stream.write_all(bytes) {
            Ok(()) => Ok(()),
            Err(e) => {
                let answer = self.read_answer(Some(CONTINUE_WAIT));
                self.stream = None;
                match answer {
                    Ok(a) if a.status >= 200 => Err(Failure::http(&a)),
                    _ => Err(Failure::io(&e)),
                }
            }
        }
    }

    /// Reads one response (skipping nothing: a `100 Continue` is returned as such), waiting at most
    /// `wait` for each read when given, else the connection's timeout.
    fn read_answer(&mut self, wait: Option<Duration>) -> Result<Answer, Failure> {
        let Some(stream) = self.stream.as_mut() else { return Err(Failure::transient("closed")) };
        let previous = stream.read_timeout().ok().flatten();
        if wait.is_some() {
            stream.set_read_timeout(wait).ok();
        }
        let answer = self.read_answer_inner();
        if wait.is_some() {
            if let Some(stream) = self.stream.as_mut() {
                stream.set_read_timeout(previous).ok();
            }
        }
        answer
    }

    fn read_answer_inner(&mut self) -> Result<Answer, Failure> {
        let mut reader = ResponseReader::keeping_head();
        // The start of the body is enough for the reason an error body gives.
        reader.start_keeping_body_start(false, BODY_START);
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if !self.buf.is_empty() {
                match reader.feed(&self.buf) {
                    Ok(Progress::Complete { consumed }) => {
                        self.buf.drain(..consumed);
                        break;
                    }
                    Ok(Progress::NeedMore { consumed }) => {
                        self.buf.drain(..consumed);
                    }
                    Err(e) => {
                        self.stream = None;
                        return Err(Failure::transient(&format!("malformed response: {e}")));
                    }
                }
            }
            let Some(stream) = self.stream.as_mut() else { return Err(Failure::transient("closed")) };
            match stream.read(&mut chunk) {
                Ok(0) => {
                    self.stream = None;
                    if reader.head_done() && reader.finish().is_ok() {
                        break;
                    }
                    return Err(Failure::transient("closed"));
                }
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) =>
                {
                    // Still open: a caller waiting for `100 Continue` may go on.
                    return Err(Failure::io(&e));
                }
                Err(e) => {
                    self.stream = None;
                    return Err(Failure::io(&e));
                }
            }
        }
        if !reader.keep_alive() {
            self.stream = None;
        }
        let body_start = reader.take_body();
        let (stored, reason) = reader.head().map(|head| head_facts(head, &body_start)).unwrap_or_default();
        Ok(Answer { status: reader.status(), reason, stored })
    }
}

/// Bytes of a response body kept for its reason.
const BODY_START: usize = 8 << 10;

/// A key as a URL path: each `/`-separated segment percent-encoded once, so the server decodes
/// exactly the name given (`caf%C3%A9.mp4` goes out as `caf%25C3%25A9.mp4`).
pub(super) fn url_path(key: &str) -> String {
    key.split('/')
        .map(|s| percent_encoding::utf8_percent_encode(s, SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// Characters escaped in a path segment.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\')
    .add(b'+')
    .add(b'&')
    .add(b'=')
    .add(b';');

/// From a response's head and the start of its (decoded) body: its `Sluice-Stored-Length` and
/// its one-line reason (the body's first non-empty line, else the status line's phrase).
pub(super) fn head_facts(head: &ResponseHead, body_start: &[u8]) -> (Option<u64>, String) {
    let stored = head.header("sluice-stored-length").and_then(|v| v.parse().ok());
    let body = String::from_utf8_lossy(body_start);
    let mut lines = body.lines().map(str::trim).filter(|l| !l.is_empty());
    let phrase = head.reason.as_str();
    let code = format!("{} ", head.status);
    // The status line the body repeats (`413 Content Too Large`, or `413 Content Too Large: why`)
    // is said once: the phrase, then what the body adds.
    let adds = |line: &'_ str| -> String {
        let rest = line.strip_prefix(code.as_str()).unwrap_or(line);
        let rest = match rest.get(..phrase.len()) {
            Some(start) if !phrase.is_empty() && start.eq_ignore_ascii_case(phrase) => &rest[phrase.len()..],
            _ if rest.len() < line.len() => rest,
            _ => line,
        };
        rest.trim_start_matches([':', ' ']).chars().take(300).collect()
    };
    let reason = match lines.next().filter(|l| *l != "0").map(adds) {
        Some(line) if !line.is_empty() && phrase.is_empty() => line,
        Some(line) if !line.is_empty() => format!("{phrase}: {line}"),
        _ => phrase.to_string(),
    };
    (stored, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the uploader makes of a response that arrived as `raw`.
    fn answer(raw: &[u8]) -> (Option<u64>, String) {
        let mut reader = ResponseReader::keeping_head();
        reader.start_keeping_body_start(false, BODY_START);
        // Some of these bodies are shorter than their length says: the reason is read anyway.
        reader.feed(raw).expect("a response");
        let body_start = reader.take_body();
        head_facts(reader.head().expect("a head"), &body_start)
    }

    #[test]
    fn each_segment_is_percent_encoded_once() {
        assert_eq!(url_path("caf%C3%A9.mp4"), "caf%25C3%25A9.mp4");
        assert_eq!(
            url_path("sub/my clip – été 日本.mp4"),
            "sub/my%20clip%20%E2%80%93%20%C3%A9t%C3%A9%20%E6%97%A5%E6%9C%AC.mp4"
        );
        assert_eq!(url_path("a+b=c&d.mp4"), "a%2Bb%3Dc%26d.mp4");
        assert_eq!(url_path("100%.mp4"), "100%25.mp4");
    }

    #[test]
    fn the_reason_is_the_body_first_line_else_the_phrase() {
        let raw = b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 40\r\n\r\nthe upload is larger than 1024 bytes\n";
        assert_eq!(answer(raw).1, "Payload Too Large: the upload is larger than 1024 bytes");
        let raw = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 22\r\n\r\n413 Content Too Large\n";
        assert_eq!(answer(raw).1, "Content Too Large");
        // sluice's own bodies start with the status line: said once.
        let raw = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 60\r\n\r\n413 Content Too Large: the upload is larger than 1024 bytes\n";
        assert_eq!(answer(raw).1, "Content Too Large: the upload is larger than 1024 bytes");
        let raw = b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(answer(raw).1, "Unauthorized");
        let raw = b"HTTP/1.1 403 Forbidden\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nuploads are off\n\r\n0\r\n\r\n";
        assert_eq!(answer(raw).1, "Forbidden: uploads are off");
        let raw = b"HTTP/1.1 201 Created\r\nSluice-Stored-Length: 12\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(answer(raw).0, Some(12));
    }
}
