//! Request heads: parsing with `httparse`, framing rules of RFC 9112 §6, and the typed view a
//! handler sees.
//!
//! This module turns bytes into a [`Request`] (with its [`Framing`]) or a [`RequestError`] that already knows its status code.
//! It does not read bodies ([`super::body`] does) and does not decide what a request means.

use super::body::{BodyError, BodyFraming};
use super::response::Status;
use super::Limits;

/// Most header fields accepted in one request; more is 431.
pub const MAX_HEADERS: usize = 64;

/// Request methods sluice knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET
    Get,
    /// HEAD
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// OPTIONS
    Options,
    /// PATCH
    Patch,
    /// TRACE
    Trace,
    /// CONNECT
    Connect,
}

impl Method {
    /// Recognises a method token; unknown tokens are `None` (answered with 501).
    pub fn from_token(token: &str) -> Option<Method> {
        Some(match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "PATCH" => Method::Patch,
            "TRACE" => Method::Trace,
            "CONNECT" => Method::Connect,
            _ => return None,
        })
    }

    /// The method's token as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Options => "OPTIONS",
            Method::Patch => "PATCH",
            Method::Trace => "TRACE",
            Method::Connect => "CONNECT",
        }
    }
}

/// HTTP/1.0 or HTTP/1.1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// HTTP/1.0: close unless the client asks for keep-alive.
    Http10,
    /// HTTP/1.1: keep-alive unless the client says close.
    Http11,
}

/// Why a request was refused before reaching the handler; each kind knows its status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The head is not HTTP/1.x syntax.
    #[error("malformed request head: {0}")]
    Malformed(&'static str),
    /// The request line is longer than the limit.
    #[error("request line longer than {0} bytes")]
    RequestLineTooLong(usize),
    /// The head (or the number of fields) is over the limit.
    #[error("request head over {0} bytes or {MAX_HEADERS} fields")]
    HeadTooLarge(usize),
    /// A method token sluice does not implement.
    #[error("unknown method")]
    UnknownMethod,
    /// Not HTTP/1.0 or HTTP/1.1.
    #[error("unsupported HTTP version")]
    UnsupportedVersion,
    /// HTTP/1.1 without exactly one Host field (RFC 9112 §3.2).
    #[error("missing or repeated Host")]
    BadHost,
    /// Content-Length is not a number, or two differ.
    #[error("invalid Content-Length")]
    BadContentLength,
    /// Both Transfer-Encoding and Content-Length: ambiguous framing, a smuggling vector.
    #[error("both Transfer-Encoding and Content-Length")]
    AmbiguousFraming,
    /// Transfer-Encoding other than a final `chunked`.
    #[error("unsupported Transfer-Encoding")]
    UnsupportedTransferEncoding,
    /// A body larger than the server will read.
    #[error("request body over {0} bytes")]
    BodyTooLarge(u64),
    /// The chunked body is not valid chunked coding.
    #[error("malformed chunked body")]
    BadChunk,
    /// The head (or body) did not arrive within its deadline.
    #[error("request not received in time")]
    Timeout,
}

impl From<BodyError> for RequestError {
    fn from(e: BodyError) -> Self {
        match e {
            BodyError::TooLarge(max) => RequestError::BodyTooLarge(max),
            BodyError::BadChunk => RequestError::BadChunk,
        }
    }
}

impl RequestError {
    /// The status code that answers this error.
    pub fn status(&self) -> Status {
        match self {
            RequestError::Malformed(_)
            | RequestError::BadHost
            | RequestError::BadContentLength
            | RequestError::AmbiguousFraming
            | RequestError::BadChunk => Status::BAD_REQUEST,
            RequestError::RequestLineTooLong(_) => Status::URI_TOO_LONG,
            RequestError::HeadTooLarge(_) => Status::HEADER_FIELDS_TOO_LARGE,
            RequestError::UnknownMethod | RequestError::UnsupportedTransferEncoding => {
                Status::NOT_IMPLEMENTED
            }
            RequestError::UnsupportedVersion => Status::HTTP_VERSION_NOT_SUPPORTED,
            RequestError::BodyTooLarge(_) => Status::CONTENT_TOO_LARGE,
            RequestError::Timeout => Status::REQUEST_TIMEOUT,
        }
    }
}

/// A parsed request head, borrowing the connection's input buffer.
#[derive(Debug)]
pub struct Request<'a> {
    /// The method.
    pub method: Method,
    /// The request-target exactly as sent.
    pub target: &'a str,
    /// The protocol version.
    pub version: Version,
    /// The header fields, in order.
    pub headers: &'a [httparse::Header<'a>],
}

impl<'a> Request<'a> {
    /// The first value of a header field (name compared ASCII case-insensitively).
    pub fn header(&self, name: &str) -> Option<&'a [u8]> {
        self.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }

    /// Every value of a header field, in order.
    pub fn header_values<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'a [u8]> + 's {
        self.headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }

    /// The path part of the target, still percent-encoded: origin-form up to `?`, or the path of
    /// an absolute-form target (RFC 9112 §3.2.2). `*` and authority-form give `None`.
    pub fn path(&self) -> Option<&'a str> {
        let t = self.target;
        let rest = if t.starts_with('/') {
            t
        } else {
            let after_scheme = t
                .strip_prefix("http://")
                .or_else(|| t.strip_prefix("https://"))
                .or_else(|| t.strip_prefix("HTTP://"))
                .or_else(|| t.strip_prefix("HTTPS://"))?;
            match after_scheme.find('/') {
                Some(i) => &after_scheme[i..],
                None => "/",
            }
        };
        Some(rest.split(['?', '#']).next().unwrap_or(rest))
    }

    /// The query string after `?`, if any.
    pub fn query(&self) -> Option<&'a str> {
        self.target.split_once('?').map(|(_, q)| q.split('#').next().unwrap_or(q))
    }
}

/// The parts of a head that the session needs after the handler is done with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framing {
    /// How the request body (if any) is delimited.
    pub body: BodyFraming,
    /// Whether the client allows the connection to stay open.
    pub keep_alive: bool,
    /// HTTP/1.0 keep-alive needs saying so in the response.
    pub version: Version,
    /// The client sent `Expect: 100-continue` and waits before sending the body.
    pub expects_continue: bool,
}

/// The outcome of offering bytes to [`parse_head`].
#[derive(Debug)]
pub enum Parsed<'a> {
    /// A whole head: the request, how it is framed, and how many bytes it took.
    Complete {
        /// The request for the handler.
        request: Request<'a>,
        /// Body and connection framing.
        framing: Framing,
        /// Bytes of input that the head took, including the blank line.
        head_len: usize,
    },
    /// Not a whole head yet, and within limits: read more.
    Partial,
}

/// Parses a request head from the start of `input`.
///
/// `headers` is caller-owned scratch, so the parser allocates nothing. Leading empty lines are
/// skipped as RFC 9112 §2.2 allows.
pub fn parse_head<'h, 'b: 'h>(
    input: &'b [u8],
    headers: &'h mut [httparse::Header<'b>; MAX_HEADERS],
    limits: &Limits,
) -> Result<Parsed<'h>, RequestError> {
    let mut req = httparse::Request::new(headers);
    let status = req.parse(input);
    match status {
        Ok(httparse::Status::Partial) => {
            check_partial(input, limits)?;
            Ok(Parsed::Partial)
        }
        Ok(httparse::Status::Complete(head_len)) => {
            if head_len > limits.max_head {
                return Err(RequestError::HeadTooLarge(limits.max_head));
            }
            let line_len = request_line_len(input).unwrap_or(head_len);
            if line_len > limits.max_request_line {
                return Err(RequestError::RequestLineTooLong(limits.max_request_line));
            }
            let method_token = req.method.ok_or(RequestError::Malformed("no method"))?;
            let target = req.path.ok_or(RequestError::Malformed("no target"))?;
            let version = match req.version {
                Some(0) => Version::Http10,
                Some(1) => Version::Http11,
                _ => return Err(RequestError::UnsupportedVersion),
            };
            let method = Method::from_token(method_token).ok_or(RequestError::UnknownMethod)?;
            let headers: &'h [httparse::Header<'b>] = req.headers;
            let request = Request { method, target, version, headers };
            let framing = framing_of(&request)?;
            Ok(Parsed::Complete { request, framing, head_len })
        }
        Err(httparse::Error::TooManyHeaders) => Err(RequestError::HeadTooLarge(limits.max_head)),
        Err(httparse::Error::Version) => {
            // httparse reports any non-1.x version this way, including HTTP/2.0 and HTTP/3.
            if looks_like_other_http_version(input) {
                Err(RequestError::UnsupportedVersion)
            } else {
                Err(RequestError::Malformed("version"))
            }
        }
        Err(httparse::Error::Token) => {
            // A request line longer than the limit usually fails as Partial, but a long target
            // with a stray byte should still be reported as too long rather than malformed.
            if request_line_len(input).unwrap_or(input.len()) > limits.max_request_line {
                Err(RequestError::RequestLineTooLong(limits.max_request_line))
            } else {
                Err(RequestError::Malformed("token"))
            }
        }
        Err(e) => Err(RequestError::Malformed(error_name(e))),
    }
}

fn error_name(e: httparse::Error) -> &'static str {
    match e {
        httparse::Error::HeaderName => "header name",
        httparse::Error::HeaderValue => "header value",
        httparse::Error::NewLine => "line ending",
        httparse::Error::Status => "status",
        httparse::Error::Token => "token",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "version",
    }
}

/// Whether the request line is well formed (method, target, version, one space apart) with a
/// version that is some other HTTP's: that is 505, anything else (`GET /a b.txt HTTP/1.1`) is 400.
fn looks_like_other_http_version(input: &[u8]) -> bool {
    let start = input.iter().position(|&b| b != b'\r' && b != b'\n').unwrap_or(0);
    let line = &input[start..start + request_line_len(input).unwrap_or(input.len() - start)];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let parts: Vec<&[u8]> = line.split(|&b| b == b' ').collect();
    parts.len() == 3 && parts.iter().all(|p| !p.is_empty()) && parts[2].starts_with(b"HTTP/")
}

/// Length of the first line (after leading empty lines), without its line ending.
fn request_line_len(input: &[u8]) -> Option<usize> {
    let start = input.iter().position(|&b| b != b'\r' && b != b'\n')?;
    input[start..].iter().position(|&b| b == b'\n')
}

/// Limits that apply before a head is complete: a request line or head that can no longer fit.
fn check_partial(input: &[u8], limits: &Limits) -> Result<(), RequestError> {
    match request_line_len(input) {
        None => {
            if input.len() > limits.max_request_line {
                return Err(RequestError::RequestLineTooLong(limits.max_request_line));
            }
        }
        Some(n) if n > limits.max_request_line => {
            return Err(RequestError::RequestLineTooLong(limits.max_request_line))
        }
        Some(_) => {}
    }
    if input.len() > limits.max_head {
        return Err(RequestError::HeadTooLarge(limits.max_head));
    }
    Ok(())
}

fn framing_of(req: &Request<'_>) -> Result<Framing, RequestError> {
    let mut content_length: Option<u64> = None;
    let mut chunked = false;
    let mut codings = 0;
    let mut transfer_encoding = false;
    let mut hosts = 0;
    let mut close = false;
    let mut keep_alive_token = false;
    let mut expects_continue = false;
    for h in req.headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            // Two fields are refused even when equal (RFC 9112 §6.3 allows merging them; nginx
            // does not, and neither may any proxy in front that reads only one of them).
            if content_length.is_some() {
                return Err(RequestError::BadContentLength);
            }
            content_length = Some(parse_content_length(h.value)?);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            // sluice implements no transfer coding but chunked, so anything besides one lone
            // `chunked` (`gzip, chunked`, `identity, chunked`, two fields) is 501 (RFC 9112 §6.1):
            // reading such a body as plain chunked is how a front end and we would disagree.
            for coding in h.value.split(|&b| b == b',') {
                codings += 1;
                chunked = trim(coding).eq_ignore_ascii_case(b"chunked");
            }
            transfer_encoding = true;
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("connection") {
            for token in h.value.split(|&b| b == b',') {
                let token = trim(token);
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("expect") {
            expects_continue = trim(h.value).eq_ignore_ascii_case(b"100-continue");
        }
    }
    if req.version == Version::Http11 && hosts != 1 || hosts > 1 {
        return Err(RequestError::BadHost);
    }
    let body = if transfer_encoding {
        if content_length.is_some() {
            return Err(RequestError::AmbiguousFraming);
        }
        if req.version == Version::Http10 {
            // RFC 9112 §6.1: HTTP/1.0 has no transfer codings; the framing cannot be trusted.
            return Err(RequestError::AmbiguousFraming);
        }
        if !chunked || codings != 1 {
            return Err(RequestError::UnsupportedTransferEncoding);
        }
        BodyFraming::Chunked
    } else {
        match content_length {
            Some(0) | None => BodyFraming::None,
            Some(n) => BodyFraming::Length(n),
        }
    };
    let keep_alive = match req.version {
        Version::Http11 => !close,
        Version::Http10 => keep_alive_token && !close,
    };
    Ok(Framing {
        body,
        keep_alive,
        version: req.version,
        expects_continue: expects_continue && body != BodyFraming::None,
    })
}

fn parse_content_length(value: &[u8]) -> Result<u64, RequestError> {
    let value = trim(value);
    if value.is_empty() || value.len() > 19 || !value.iter().all(u8::is_ascii_digit) {
        return Err(RequestError::BadContentLength);
    }
    value
        .iter()
        .try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add((d - b'0') as u64))
        .ok_or(RequestError::BadContentLength)
}

/// `s` without leading and trailing spaces and tabs (HTTP's optional whitespace).
pub fn trim_ows(s: &[u8]) -> &[u8] {
    trim(s)
}

pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &[u8]) -> Result<Option<(Method, String, Framing, usize)>, RequestError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match parse_head(input, &mut headers, &Limits::default())? {
            Parsed::Partial => Ok(None),
            Parsed::Complete { request, framing, head_len } => {
                Ok(Some((request.method, request.target.to_string(), framing, head_len)))
            }
        }
    }

    #[test]
    fn simple_get() {
        let r = parse(b"GET /a.mp4 HTTP/1.1\r\nHost: x\r\n\r\nrest").unwrap().unwrap();
        assert_eq!(r.0, Method::Get);
        assert_eq!(r.1, "/a.mp4");
        assert!(r.2.keep_alive);
        assert_eq!(r.2.body, BodyFraming::None);
        assert_eq!(r.3, 32);
    }

    #[test]
    fn partial_until_blank_line() {
        assert!(parse(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap().is_none());
    }

    #[test]
    fn framing_errors_have_their_status() {
        let cases: &[(&[u8], u16)] = &[
            (b"GET / HTTP/1.1\r\n\r\n", 400),
            (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
            (b"BREW / HTTP/1.1\r\nHost: a\r\n\r\n", 501),
            (b"GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505),
            (b"GET / FOO/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET /\x01 HTTP/1.1\r\nHost: a\r\n\r\n", 400),
        ];
        assert_statuses(cases);
    }

    /// Each head is refused with its status.
    fn assert_statuses(cases: &[(&[u8], u16)]) {
        for (input, status) in cases {
            let err = parse(input).unwrap_err();
            assert_eq!(err.status().0, *status, "{:?}: {err}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn strict_framing_rfc9112_section6() {
        let cases: &[(&[u8], u16)] = &[
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity, chunked\r\n\r\n", 501),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
            (b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 501),
            (b"GET /a b.txt HTTP/1.1\r\nHost: a\r\n\r\n", 400),
            (b"GET / HTTP/3\r\nHost: a\r\n\r\n", 505),
        ];
        assert_statuses(cases);
        let r =
            parse(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  Chunked \r\n\r\n").unwrap().unwrap();
        assert_eq!(r.2.body, BodyFraming::Chunked);
    }

    #[test]
    fn http10_keep_alive_only_when_asked() {
        let r = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap().unwrap();
        assert!(!r.2.keep_alive);
        let r = parse(b"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").unwrap().unwrap();
        assert!(r.2.keep_alive);
        let r = parse(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n").unwrap().unwrap();
        assert!(!r.2.keep_alive);
    }

    #[test]
    fn limits() {
        let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(9000));
        assert_eq!(parse(long.as_bytes()).unwrap_err().status().0, 414);
        let partial_long = format!("GET /{}", "a".repeat(9000));
        assert_eq!(parse(partial_long.as_bytes()).unwrap_err().status().0, 414);
        let big = format!("GET / HTTP/1.1\r\nHost: a\r\nX: {}\r\n\r\n", "b".repeat(17000));
        assert_eq!(parse(big.as_bytes()).unwrap_err().status().0, 431);
        let many: String = (0..70).map(|i| format!("X-{i}: y\r\n")).collect();
        let many = format!("GET / HTTP/1.1\r\nHost: a\r\n{many}\r\n");
        assert_eq!(parse(many.as_bytes()).unwrap_err().status().0, 431);
    }

    #[test]
    fn absolute_form_path() {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let input = b"GET http://example.com/x/y.mp4?t=1 HTTP/1.1\r\nHost: example.com\r\n\r\n";
        let Parsed::Complete { request, .. } = parse_head(input, &mut headers, &Limits::default()).unwrap()
        else {
            panic!("partial")
        };
        assert_eq!(request.path(), Some("/x/y.mp4"));
        assert_eq!(request.query(), Some("t=1"));
    }
}
