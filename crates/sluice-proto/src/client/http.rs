//! Reading HTTP/1.1 responses, sans-I/O: a [`ResponseReader`] is fed bytes and the end of the
//! stream, and answers "need more", "complete" or a classified failure. It owns framing (head via
//! `httparse`, `Content-Length`, chunked through the server's own [`BodyDecoder`], read-until-close,
//! bodiless responses), the keep-alive decision, and, when asked, the parsed head
//! ([`ResponseHead`]: status, reason, header fields) and the body. It does not own sockets,
//! clocks or statistics; the load generator's connections, the uploader and the test harness
//! drive it and decide what a response means.
//!
//! Bodies are counted and discarded unless a caller asks to keep them, and the head's fields are
//! copied out only when asked, so the load generator's hot path allocates nothing per response.

/// Largest response head accepted; a larger one is a malformed response, not a reason to grow
/// buffers without bound.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;

use crate::http::body::{BodyDecoder, BodyFraming};
use crate::http::request::trim;

/// Most headers parsed in one response head.
const MAX_HEADERS: usize = 64;

/// What one call to [`ResponseReader::feed`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// The response is not complete; `consumed` bytes of the input were used and must not be
    /// given again, the rest (an incomplete head) must be given again with more bytes behind it.
    NeedMore {
        /// Bytes of the input used.
        consumed: usize,
    },
    /// The response is complete after `consumed` bytes of the input.
    Complete {
        /// Bytes of the input used; any after them are not part of this response.
        consumed: usize,
    },
}

/// Why a response could not be read to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum ResponseError {
    /// The connection closed before the response head was complete.
    #[error("connection closed before the response head was complete")]
    PrematureClose,
    /// The head arrived but the connection closed before the body promised by it.
    #[error("connection closed before the response body was complete")]
    ShortBody,
    /// The bytes are not an HTTP/1.x response (or break a limit of this reader).
    #[error("malformed response: {0}")]
    Malformed(&'static str),
}

/// Where the reader is inside the current response.
#[derive(Debug, Clone)]
enum State {
    Head,
    /// Body delimited by `Content-Length` or chunked coding, walked by the shared decoder.
    Framed(BodyDecoder),
    /// Body delimited by the end of the connection.
    UntilClose,
    Done,
}

/// Reads one response after another from a connection's bytes. Reuse it across responses with
/// [`ResponseReader::start`].
#[derive(Debug, Clone)]
pub struct ResponseReader {
    state: State,
    /// The request was `HEAD`: the response has no body whatever its headers say.
    head_request: bool,
    status: u16,
    keep_alive: bool,
    body_bytes: u64,
    /// The body as received, when the caller asked to keep it (manifests), up to a limit.
    kept: Option<KeptBody>,
    /// Whether the head's reason and fields are copied into `head` (kept across `start`).
    keeps_head: bool,
    head: Option<ResponseHead>,
}

/// A body being kept, with the most bytes it may grow to.
#[derive(Debug, Clone)]
struct KeptBody {
    bytes: Vec<u8>,
    limit: usize,
    /// Past the limit the rest is only counted (the start of an error body is enough for its
    /// reason), rather than the response being malformed.
    truncates: bool,
}

/// A response's head as sent: what a client that looks beyond the status needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The status code.
    pub status: u16,
    /// The reason phrase (may be empty).
    pub reason: String,
    /// Header fields in order, names as written, values without surrounding whitespace.
    pub headers: Vec<(String, String)>,
}

impl ResponseHead {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

impl ResponseReader {
    /// A reader waiting for the response to a request with a body-carrying method (`GET`).
    pub fn new() -> Self {
        ResponseReader {
            state: State::Head,
            head_request: false,
            status: 0,
            keep_alive: true,
            body_bytes: 0,
            kept: None,
            keeps_head: false,
            head: None,
        }
    }

    /// A reader that also keeps each response's head (see [`ResponseReader::head`]).
    pub fn keeping_head() -> Self {
        ResponseReader { keeps_head: true, ..ResponseReader::new() }
    }

    /// Prepares for the next response; `head_request` says whether the request was `HEAD`.
    pub fn start(&mut self, head_request: bool) {
        *self = ResponseReader { head_request, keeps_head: self.keeps_head, ..ResponseReader::new() };
    }

    /// Like [`ResponseReader::start`], and keeps the body (decoded from chunked framing) for
    /// [`ResponseReader::take_body`]; a body longer than `limit` bytes is a malformed response.
    /// For small documents such as playlists; media bodies are only counted.
    pub fn start_keeping_body(&mut self, head_request: bool, limit: usize) {
        self.start(head_request);
        self.kept = Some(KeptBody { bytes: Vec::new(), limit, truncates: false });
    }

    /// Like [`ResponseReader::start`], and keeps the first `limit` bytes of the body (decoded
    /// from chunked framing); the rest is counted only. For the reason an error body gives.
    pub fn start_keeping_body_start(&mut self, head_request: bool, limit: usize) {
        self.start(head_request);
        self.kept = Some(KeptBody { bytes: Vec::new(), limit, truncates: true });
    }

    /// The head of the current response, once read, when made by [`ResponseReader::keeping_head`].
    pub fn head(&self) -> Option<&ResponseHead> {
        self.head.as_ref()
    }

    /// The body kept since [`ResponseReader::start_keeping_body`] (empty when not keeping).
    pub fn take_body(&mut self) -> Vec<u8> {
        self.kept.take().map(|k| k.bytes).unwrap_or_default()
    }

    /// The status code, once the head has been read (0 before).
    pub fn status(&self) -> u16 {
        self.status
    }

    /// Whether the connection may carry another request after this response.
    pub fn keep_alive(&self) -> bool {
        self.keep_alive && !matches!(self.state, State::UntilClose)
    }

    /// Whether the head has been read.
    pub fn head_done(&self) -> bool {
        !matches!(self.state, State::Head)
    }

    /// Body bytes seen so far (after transfer decoding of chunk framing).
    pub fn body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Consumes response bytes. Bytes after a complete response are left unconsumed.
    pub fn feed(&mut self, input: &[u8]) -> Result<Progress, ResponseError> {
        let mut used = 0;
        if matches!(self.state, State::Head) {
            match self.parse_head(input)? {
                Some(n) => used = n,
                None => return Ok(Progress::NeedMore { consumed: 0 }),
            }
        }
        used += self.feed_body(&input[used..])?;
        if matches!(self.state, State::Done) {
            Ok(Progress::Complete { consumed: used })
        } else {
            Ok(Progress::NeedMore { consumed: used })
        }
    }

    /// The connection reached end of stream: completes a close-delimited body, or says what was
    /// missing.
    pub fn finish(&mut self) -> Result<(), ResponseError> {
        match self.state {
            State::Done => Ok(()),
            State::UntilClose => {
                self.state = State::Done;
                Ok(())
            }
            State::Head => Err(ResponseError::PrematureClose),
            State::Framed(_) => Err(ResponseError::ShortBody),
        }
    }

    /// Parses the head when it is complete; returns its length.
    fn parse_head(&mut self, input: &[u8]) -> Result<Option<usize>, ResponseError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let len = match response.parse(input) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) => {
                return if input.len() >= MAX_HEAD_BYTES {
                    Err(ResponseError::Malformed("response head too large"))
                } else {
                    Ok(None)
                };
            }
            Err(httparse::Error::TooManyHeaders) => return Err(ResponseError::Malformed("too many headers")),
            Err(_) => return Err(ResponseError::Malformed("invalid response head")),
        };
        let status = response.code.unwrap_or(0);
        let version = response.version.unwrap_or(1);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        // HTTP/1.1 keeps the connection by default, HTTP/1.0 closes it unless asked.
        let mut keep_alive = version == 1;
        for h in response.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let value = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .ok_or(ResponseError::Malformed("invalid Content-Length"))?;
                if content_length.is_some_and(|c| c != value) {
                    return Err(ResponseError::Malformed("conflicting Content-Length headers"));
                }
                content_length = Some(value);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                // Only the final coding decides the framing (RFC 9112 section 6.1).
                let last = h.value.rsplit(|&b| b == b',').next().unwrap_or_default();
                chunked = trim(last).eq_ignore_ascii_case(b"chunked");
                if !chunked {
                    return Err(ResponseError::Malformed("unsupported Transfer-Encoding"));
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = trim(token);
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive = true;
                    }
                }
            }
        }
        self.status = status;
        self.keep_alive = keep_alive;
        if self.keeps_head {
            let text = |b: &[u8]| String::from_utf8_lossy(b).trim().to_string();
            self.head = Some(ResponseHead {
                status,
                reason: response.reason.unwrap_or_default().trim().to_string(),
                headers: response.headers.iter().map(|h| (h.name.to_string(), text(h.value))).collect(),
            });
        }
        let bodiless = self.head_request || (100..200).contains(&status) || status == 204 || status == 304;
        self.state = if bodiless || (content_length == Some(0) && !chunked) {
            State::Done
        } else if chunked {
            State::Framed(BodyDecoder::lenient(BodyFraming::Chunked))
        } else if let Some(len) = content_length {
            State::Framed(BodyDecoder::lenient(BodyFraming::Length(len)))
        } else {
            State::UntilClose
        };
        Ok(Some(len))
    }

    /// Consumes body bytes; returns how many were used.
    fn feed_body(&mut self, input: &[u8]) -> Result<usize, ResponseError> {
        match &mut self.state {
            State::Head | State::Done => Ok(0),
            State::Framed(decoder) => {
                let mut kept = Ok(());
                let kept_body = &mut self.kept;
                let decoded = decoder
                    .decode_with(input, |payload| {
                        if kept.is_ok() {
                            kept = keep(kept_body, payload);
                        }
                    })
                    .map_err(|_| ResponseError::Malformed("invalid chunked framing"))?;
                kept?;
                self.body_bytes += decoded.payload;
                if decoded.done {
                    self.state = State::Done;
                }
                Ok(decoded.consumed)
            }
            State::UntilClose => {
                keep(&mut self.kept, input)?;
                self.body_bytes += input.len() as u64;
                Ok(input.len())
            }
        }
    }
}

/// Keeps `bytes` of the body when asked to.
fn keep(kept: &mut Option<KeptBody>, bytes: &[u8]) -> Result<(), ResponseError> {
    if let Some(k) = kept {
        if k.bytes.len() + bytes.len() > k.limit {
            if !k.truncates {
                return Err(ResponseError::Malformed("body larger than the limit for documents"));
            }
            let room = k.limit.saturating_sub(k.bytes.len());
            k.bytes.extend_from_slice(&bytes[..room]);
            return Ok(());
        }
        k.bytes.extend_from_slice(bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `bytes` in pieces of `step` bytes the way a connection would, keeping unconsumed
    /// bytes; returns the reader and the total consumed when complete.
    fn feed_in_steps(bytes: &[u8], step: usize) -> (ResponseReader, Result<usize, ResponseError>) {
        feed_reader_in_steps(ResponseReader::new(), bytes, step)
    }

    fn feed_reader_in_steps(
        mut r: ResponseReader,
        bytes: &[u8],
        step: usize,
    ) -> (ResponseReader, Result<usize, ResponseError>) {
        let mut pending: Vec<u8> = Vec::new();
        let mut total = 0;
        for piece in bytes.chunks(step) {
            pending.extend_from_slice(piece);
            match r.feed(&pending) {
                Ok(Progress::Complete { consumed }) => return (r, Ok(total + consumed)),
                Ok(Progress::NeedMore { consumed }) => {
                    total += consumed;
                    pending.drain(..consumed);
                }
                Err(e) => return (r, Err(e)),
            }
        }
        let res = r.finish().map(|()| total + pending.len());
        (r, res)
    }

    #[test]
    fn kept_bodies_are_decoded_in_any_split_and_bounded() {
        let keeping = |limit| {
            let mut r = ResponseReader::new();
            r.start_keeping_body(false, limit);
            r
        };
        for resp in [
            &b"HTTP/1.1 200 OK\r\nContent-Length: 15\r\n\r\nhello0123456789"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\n\r\n",
            b"HTTP/1.0 200 OK\r\n\r\nhello0123456789",
        ] {
            for step in 1..=resp.len() {
                let (mut r, res) = feed_reader_in_steps(keeping(64), resp, step);
                assert_eq!(res, Ok(resp.len()), "step {step}");
                assert_eq!(r.take_body(), b"hello0123456789", "step {step}");
            }
            let (_, res) = feed_reader_in_steps(keeping(14), resp, 7);
            assert!(matches!(res, Err(ResponseError::Malformed(_))), "{res:?}");
        }
        // Not keeping: nothing is kept, and starting again forgets what was.
        let (mut r, _) = feed_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi", 1);
        assert!(r.take_body().is_empty());
    }

    #[test]
    fn the_head_is_kept_when_asked_in_any_split() {
        let resp = b"HTTP/1.1 413 Content Too Large\r\nSluice-Stored-Length:  12 \r\nX-A: b\r\n\
            Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n123\r\n0\r\n\r\n";
        for step in 1..=resp.len() {
            let mut r = ResponseReader::keeping_head();
            r.start_keeping_body_start(false, 6);
            let (mut r, res) = feed_reader_in_steps(r, resp, step);
            assert_eq!(res, Ok(resp.len()), "step {step}");
            let head = r.head().expect("kept").clone();
            assert_eq!((head.status, head.reason.as_str()), (413, "Content Too Large"));
            assert_eq!((head.header("sluice-stored-length"), head.header("x-a")), (Some("12"), Some("b")));
            assert_eq!(head.headers.len(), 3);
            // The start of the body only; the rest is counted.
            assert_eq!((r.take_body(), r.body_bytes()), (b"hello1".to_vec(), 8), "step {step}");
        }
        // Not asked: no head; starting again keeps asking.
        let (r, _) = feed_in_steps(resp, 7);
        assert!(r.head().is_none());
        let mut r = ResponseReader::keeping_head();
        r.feed(b"HTTP/1.1 204 No Content\r\n\r\n").unwrap();
        r.start(false);
        assert!(r.head().is_none(), "a new response forgets the last head");
        r.feed(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert_eq!(r.head().map(|h| h.status), Some(200));
    }

    #[test]
    fn content_length_in_any_split() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
        for step in 1..=resp.len() {
            let (r, res) = feed_in_steps(resp, step);
            assert_eq!(res, Ok(resp.len()), "step {step}");
            assert_eq!(r.status(), 200);
            assert_eq!(r.body_bytes(), 13);
            assert!(r.keep_alive());
        }
    }

    #[test]
    fn leaves_bytes_of_the_next_response_alone() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1";
        let mut r = ResponseReader::new();
        assert_eq!(r.feed(resp), Ok(Progress::Complete { consumed: resp.len() - 8 }));
    }

    #[test]
    fn chunked_in_any_split_with_extensions_and_trailers() {
        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
        for step in 1..=resp.len() {
            let (r, res) = feed_in_steps(resp, step);
            assert_eq!(res, Ok(resp.len()), "step {step}");
            assert_eq!(r.body_bytes(), 15);
        }
    }

    #[test]
    fn bad_chunk_framing_is_malformed() {
        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n";
        let (_, res) = feed_in_steps(resp, 64);
        assert!(matches!(res, Err(ResponseError::Malformed(_))));
        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX";
        let (_, res) = feed_in_steps(resp, 64);
        assert!(matches!(res, Err(ResponseError::Malformed(_))));
    }

    #[test]
    fn chunk_lines_ended_by_a_bare_lf_are_read() {
        let resp = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\nHTTP";
        for step in 1..=resp.len() {
            let (r, res) = feed_in_steps(resp, step);
            assert_eq!(res, Ok(resp.len() - 4), "step {step}");
            assert_eq!(r.body_bytes(), 5);
        }
    }

    #[test]
    fn close_delimited_body_completes_at_end_of_stream() {
        let resp = b"HTTP/1.0 200 OK\r\n\r\nsome body";
        let (r, res) = feed_in_steps(resp, 4);
        assert_eq!(res, Ok(resp.len()));
        assert_eq!(r.body_bytes(), 9);
        assert!(!r.keep_alive());
    }

    #[test]
    fn closes_are_classified() {
        let (_, res) = feed_in_steps(b"", 1);
        assert_eq!(res, Err(ResponseError::PrematureClose));
        let (_, res) = feed_in_steps(b"HTTP/1.1 200 OK\r\nContent-Le", 5);
        assert_eq!(res, Err(ResponseError::PrematureClose));
        let (_, res) = feed_in_steps(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", 5);
        assert_eq!(res, Err(ResponseError::ShortBody));
        let (_, res) = feed_in_steps(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 5);
        assert_eq!(res, Err(ResponseError::ShortBody));
    }

    #[test]
    fn bodiless_responses() {
        let mut r = ResponseReader::new();
        r.start(true);
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(r.feed(resp), Ok(Progress::Complete { consumed: resp.len() }));
        r.start(false);
        let resp = b"HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\n";
        assert_eq!(r.feed(resp), Ok(Progress::Complete { consumed: resp.len() }));
        assert_eq!(r.status(), 304);
    }

    #[test]
    fn connection_header_decides_keep_alive() {
        let mut r = ResponseReader::new();
        r.feed(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert!(!r.keep_alive());
        r.start(false);
        r.feed(b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n").unwrap();
        assert!(r.keep_alive());
    }

    #[test]
    fn garbage_and_limits_are_malformed() {
        let mut r = ResponseReader::new();
        assert!(matches!(r.feed(b"NOT HTTP AT ALL\r\n\r\n"), Err(ResponseError::Malformed(_))));
        let mut r = ResponseReader::new();
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n";
        assert!(matches!(r.feed(resp), Err(ResponseError::Malformed(_))));
        let mut r = ResponseReader::new();
        let mut big = b"HTTP/1.1 200 OK\r\nX: ".to_vec();
        big.resize(MAX_HEAD_BYTES + 10, b'a');
        assert!(matches!(r.feed(&big), Err(ResponseError::Malformed(_))));
    }
}
