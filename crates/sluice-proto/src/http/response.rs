//! Responses: status codes, bodies, the serialised response head, and what a handler may answer
//! ([`Reply`], including a [`BodySink`] that takes a request's body before answering).
//!
//! This module owns the wire form of a response head. It does not decide which status or
//! headers a request deserves (the handler and [`super::file`] do) nor send anything.

use std::borrow::Cow;

use super::HeaderValue;
use crate::conn::{Clock, FileSlice, Segment};

/// An HTTP status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Status(pub u16);

impl Status {
    /// 200
    pub const OK: Status = Status(200);
    /// 201: an upload created a new resource.
    pub const CREATED: Status = Status(201);
    /// 204: done, nothing to say (an upload replaced a resource, a delete).
    pub const NO_CONTENT: Status = Status(204);
    /// 206
    pub const PARTIAL_CONTENT: Status = Status(206);
    /// 301
    pub const MOVED_PERMANENTLY: Status = Status(301);
    /// 304
    pub const NOT_MODIFIED: Status = Status(304);
    /// 400
    pub const BAD_REQUEST: Status = Status(400);
    /// 403
    pub const FORBIDDEN: Status = Status(403);
    /// 401: no valid credentials.
    pub const UNAUTHORIZED: Status = Status(401);
    /// 404
    pub const NOT_FOUND: Status = Status(404);
    /// 405
    pub const METHOD_NOT_ALLOWED: Status = Status(405);
    /// 408
    pub const REQUEST_TIMEOUT: Status = Status(408);
    /// 409
    pub const CONFLICT: Status = Status(409);
    /// 411
    pub const LENGTH_REQUIRED: Status = Status(411);
    /// 412
    pub const PRECONDITION_FAILED: Status = Status(412);
    /// 413
    pub const CONTENT_TOO_LARGE: Status = Status(413);
    /// 414
    pub const URI_TOO_LONG: Status = Status(414);
    /// 416
    pub const RANGE_NOT_SATISFIABLE: Status = Status(416);
    /// 431
    pub const HEADER_FIELDS_TOO_LARGE: Status = Status(431);
    /// 429: the client asked more often than it may (sent with `Retry-After`).
    pub const TOO_MANY_REQUESTS: Status = Status(429);
    /// 500
    pub const INTERNAL_SERVER_ERROR: Status = Status(500);
    /// 501
    pub const NOT_IMPLEMENTED: Status = Status(501);
    /// 503
    pub const SERVICE_UNAVAILABLE: Status = Status(503);
    /// 502: the store behind the server failed.
    pub const BAD_GATEWAY: Status = Status(502);
    /// 415: the media cannot be served in the form asked for (an MP4 whose codecs HLS packaging
    /// cannot carry).
    pub const UNSUPPORTED_MEDIA_TYPE: Status = Status(415);
    /// 504: the store behind the server did not answer in time.
    pub const GATEWAY_TIMEOUT: Status = Status(504);
    /// 507: no room to store the upload.
    pub const INSUFFICIENT_STORAGE: Status = Status(507);
    /// 505
    pub const HTTP_VERSION_NOT_SUPPORTED: Status = Status(505);

    /// The reason phrase RFC 9110 gives the code.
    pub fn reason(self) -> &'static str {
        match self.0 {
            100 => "Continue",
            200 => "OK",
            201 => "Created",
            204 => "No Content",
            206 => "Partial Content",
            301 => "Moved Permanently",
            302 => "Found",
            304 => "Not Modified",
            400 => "Bad Request",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            409 => "Conflict",
            411 => "Length Required",
            429 => "Too Many Requests",
            412 => "Precondition Failed",
            413 => "Content Too Large",
            414 => "URI Too Long",
            415 => "Unsupported Media Type",
            416 => "Range Not Satisfiable",
            431 => "Request Header Fields Too Large",
            500 => "Internal Server Error",
            501 => "Not Implemented",
            502 => "Bad Gateway",
            503 => "Service Unavailable",
            504 => "Gateway Timeout",
            505 => "HTTP Version Not Supported",
            507 => "Insufficient Storage",
            _ => "Unknown",
        }
    }

    /// Whether a response with this status never carries content (RFC 9110 §6.4.1).
    pub fn forbids_body(self) -> bool {
        self.0 < 200 || self.0 == 204 || self.0 == 304
    }
}

/// A response body.
#[derive(Debug)]
pub enum Body {
    /// No content.
    Empty,
    /// Bytes in memory.
    Bytes(Cow<'static, [u8]>),
    /// A slice of a file.
    File(FileSlice),
    /// Several pieces in order (a `multipart/byteranges` body).
    Parts(Vec<Segment>),
    /// Pieces that become ready one after another (a cold object read through a cache): what is
    /// ready now goes out at once, the rest as its [`BodyTail`] produces it.
    Streamed(StreamedBody),
}

/// A body whose length is known before its bytes are: see [`Body::Streamed`].
pub struct StreamedBody {
    /// The whole body's length (what `Content-Length` says).
    pub len: u64,
    /// The leading segments, ready now.
    pub ready: Vec<Segment>,
    /// What produces the segments after them.
    pub tail: Box<dyn BodyTail>,
}

impl std::fmt::Debug for StreamedBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedBody").field("len", &self.len).field("ready", &self.ready).finish()
    }
}

/// The rest of a [`Body::Streamed`]. The session asks for the next segments once everything
/// queued before them has been sent, as a [`crate::conn::Job`], so `next` runs off the event
/// loop and may block (on an origin); one call at a time, never ahead of the client: a slow
/// reader holds the tail back instead of letting it pile bytes up in the outbox.
pub trait BodyTail: Send {
    /// The next segments, at least one byte; together with the earlier ones never more than
    /// the body's length. An error cuts the response: its head is gone, so the connection
    /// closes short of `Content-Length` (the implementation says why in the log).
    fn next(&mut self) -> Result<Vec<Segment>, BodyTailError>;
}

/// Why a [`BodyTail`] could not produce the rest of its body.
#[derive(Debug, thiserror::Error)]
#[error("the body's tail failed: {0}")]
pub struct BodyTailError(pub String);

impl Body {
    /// The body's length in bytes, which becomes `Content-Length`.
    pub fn len(&self) -> u64 {
        match self {
            Body::Empty => 0,
            Body::Bytes(b) => b.len() as u64,
            Body::File(f) => f.len,
            Body::Parts(parts) => parts.iter().map(Segment::len).sum(),
            Body::Streamed(s) => s.len,
        }
    }

    /// Whether the body has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a handler answers.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: Status,
    /// Header fields beyond those the session adds (`Date`, `Server`, `Content-Length`, `Connection`).
    pub headers: Vec<(&'static str, HeaderValue)>,
    /// The content; for HEAD the session sends only its length.
    pub body: Body,
}

impl Response {
    /// A response with no extra headers and no body.
    pub fn new(status: Status) -> Self {
        Response { status, headers: Vec::new(), body: Body::Empty }
    }

    /// A short plain-text response, as used for errors.
    pub fn text(status: Status, text: &'static str) -> Self {
        Response {
            status,
            headers: vec![("Content-Type", Cow::Borrowed("text/plain; charset=utf-8"))],
            body: Body::Bytes(Cow::Borrowed(text.as_bytes())),
        }
    }

    /// The standard error page for a status: its code and reason phrase as plain text.
    pub fn error(status: Status) -> Self {
        let text = format!("{} {}\n", status.0, status.reason());
        Response {
            status,
            headers: vec![("Content-Type", Cow::Borrowed("text/plain; charset=utf-8"))],
            body: Body::Bytes(Cow::Owned(text.into_bytes())),
        }
    }

    /// An error response whose body says why in one line: `413 Content Too Large: the upload
    /// is 2000 bytes, the limit is 1000`. The reason is folded onto one line whatever its text
    /// holds (an object store's XML error document has several).
    pub fn refusal(status: Status, why: impl std::fmt::Display) -> Self {
        let why = why.to_string().split_whitespace().collect::<Vec<_>>().join(" ");
        let text = format!("{} {}: {why}\n", status.0, status.reason());
        Response {
            status,
            headers: vec![("Content-Type", Cow::Borrowed("text/plain; charset=utf-8"))],
            body: Body::Bytes(Cow::Owned(text.into_bytes())),
        }
    }

    /// Adds a header field.
    pub fn with_header(mut self, name: &'static str, value: impl Into<HeaderValue>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The value of the first header field with this name (ASCII case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_ref())
    }
}

/// Where a handler sends a request's body (an upload): the payload arrives here as the connection
/// reads it, never buffered whole by the session, and the reply comes once the body has ended.
///
/// Dropping a sink without [`BodySink::finish`] means the body never completed (a cut connection,
/// a timeout, malformed chunked framing, a size over the limit): the sink must then discard
/// everything it was given. That is what makes a cut upload leave nothing behind on every engine.
pub trait BodySink: Send {
    /// Most payload bytes accepted. A declared `Content-Length` above it is answered 413 before a
    /// byte of the body is read (and before `100 Continue`); a chunked body that grows past it is
    /// cut with 413.
    fn max_len(&self) -> u64;

    /// The next payload bytes. An error response ends the request: the session sends it and closes
    /// the connection (the rest of the body is not read).
    fn write(&mut self, payload: &[u8]) -> Result<(), Response>;

    /// The body has ended; the reply to send (often [`Reply::Compute`], to commit off the loop).
    fn finish(self: Box<Self>) -> Reply;
}

/// A handler's answer: a response now, or one that must wait.
pub enum Reply {
    /// Send this response.
    Now(Response),
    /// Send this response once this much time has passed, without holding a thread: the wait is
    /// a deadline on the connection, served by the engine's timer.
    After(std::time::Duration, Response),
    /// Compute the reply off the event loop (CPU-bound work); it may itself be `After`.
    Compute(Box<dyn FnOnce() -> Reply + Send>),
    /// Read the request's body into this sink; its [`BodySink::finish`] gives the reply.
    Body(Box<dyn BodySink>),
}

impl std::fmt::Debug for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Reply::Now(r) => f.debug_tuple("Now").field(&r.status).finish(),
            Reply::After(d, r) => f.debug_tuple("After").field(d).field(&r.status).finish(),
            Reply::Compute(_) => f.write_str("Compute(..)"),
            Reply::Body(_) => f.write_str("Body(..)"),
        }
    }
}

impl From<Response> for Reply {
    fn from(r: Response) -> Reply {
        Reply::Now(r)
    }
}

/// How the connection continues after a response, as the `Connection` header says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Persistence {
    /// HTTP/1.1 default: no header needed.
    KeepAlive11,
    /// HTTP/1.0 client that asked for keep-alive: say `Connection: keep-alive`.
    KeepAlive10,
    /// Say `Connection: close` and close after sending.
    Close,
}

/// Writes a response head: status line, the session's headers, the handler's headers, blank line.
pub fn write_head(
    buf: &mut Vec<u8>,
    status: Status,
    headers: &[(&'static str, HeaderValue)],
    content_length: Option<u64>,
    persistence: Persistence,
    clock: &Clock,
) {
    buf.extend_from_slice(b"HTTP/1.1 ");
    let mut code = itoa_buf(status.0 as u64);
    buf.extend_from_slice(code.as_bytes());
    buf.push(b' ');
    buf.extend_from_slice(status.reason().as_bytes());
    buf.extend_from_slice(b"\r\nServer: sluice\r\nDate: ");
    buf.extend_from_slice(clock.http_date());
    buf.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        buf.extend_from_slice(name.as_bytes());
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(value.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    if let Some(len) = content_length {
        buf.extend_from_slice(b"Content-Length: ");
        code = itoa_buf(len);
        buf.extend_from_slice(code.as_bytes());
        buf.extend_from_slice(b"\r\n");
    }
    match persistence {
        Persistence::KeepAlive11 => {}
        Persistence::KeepAlive10 => buf.extend_from_slice(b"Connection: keep-alive\r\n"),
        Persistence::Close => buf.extend_from_slice(b"Connection: close\r\n"),
    }
    buf.extend_from_slice(b"\r\n");
}

/// Decimal digits of `n` without allocating.
struct Digits {
    buf: [u8; 20],
    start: usize,
}

impl Digits {
    fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }
}

fn itoa_buf(mut n: u64) -> Digits {
    let mut d = Digits { buf: [0; 20], start: 20 };
    loop {
        d.start -= 1;
        d.buf[d.start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant, UNIX_EPOCH};

    #[test]
    fn head_has_status_date_length_and_connection() {
        let clock = Clock::new(Instant::now(), 784111777);
        let mut buf = Vec::new();
        let headers = vec![("Content-Type", Cow::Borrowed("video/mp4"))];
        write_head(&mut buf, Status::PARTIAL_CONTENT, &headers, Some(1234), Persistence::Close, &clock);
        let text = String::from_utf8(buf).unwrap();
        assert!(text.starts_with("HTTP/1.1 206 Partial Content\r\n"), "{text}");
        assert!(text.contains("\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"), "{text}");
        assert!(text.contains("\r\nContent-Type: video/mp4\r\n"));
        assert!(text.contains("\r\nContent-Length: 1234\r\n"));
        assert!(text.ends_with("\r\nConnection: close\r\n\r\n"));
        let _ = UNIX_EPOCH + Duration::from_secs(1);
    }

    #[test]
    fn digits() {
        for n in [0u64, 7, 10, 99, 1234567890, u64::MAX] {
            assert_eq!(itoa_buf(n).as_bytes(), n.to_string().as_bytes());
        }
    }
}
