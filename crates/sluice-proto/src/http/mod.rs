//! HTTP/1.1 (RFC 9110, RFC 9112) as a sans-I/O state machine.
//!
//! [`HttpSession`] turns received bytes into [`Request`]s for a [`Handler`] and serialises the
//! [`Response`]s it returns. The pieces it is built from are public and usable alone: request-head
//! parsing ([`request`]), body framing ([`body`]), path normalisation ([`path`]), byte ranges
//! ([`range`]), conditional requests ([`conditional`]) and file responses (the `file` module). What a URL
//! means (routes, files on disk) is the handler's business, not this module's.

pub mod body;
pub mod conditional;
pub mod credentials;
pub mod file;
pub mod path;
pub mod range;
pub mod request;
pub mod response;
mod session;

use std::borrow::Cow;
use std::time::Duration;

pub use request::{Method, Request, RequestError, Version};
pub use response::{Body, BodySink, BodyTail, BodyTailError, Reply, Response, Status, StreamedBody};
pub use session::HttpSession;

/// A header value a handler attaches to a response.
pub type HeaderValue = Cow<'static, str>;

/// Bounds on what one client may make the server hold or wait for.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Longest request line (method, target, version) before 414.
    pub max_request_line: usize,
    /// Longest request head (request line and all header fields) before 431.
    pub max_head: usize,
    /// Largest request body the server reads and throws away (a body on GET) before 413.
    pub max_discarded_body: u64,
    /// From a request's first byte (or the connection's start) to its complete head; then 408.
    pub header_timeout: Duration,
    /// How long a kept-alive connection may sit idle between requests.
    pub keepalive_timeout: Duration,
    /// Longest pause between two reads of a request body.
    pub body_timeout: Duration,
    /// Most requests answered per connection before it is closed (bounds a client's hold).
    pub max_requests_per_connection: u64,
    /// Most responses queued ahead of the socket from pipelined requests.
    pub max_pipelined: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_head: 16 * 1024,
            max_discarded_body: 1024 * 1024,
            header_timeout: Duration::from_secs(10),
            keepalive_timeout: Duration::from_secs(75),
            body_timeout: Duration::from_secs(10),
            max_requests_per_connection: 100_000,
            max_pipelined: 16,
        }
    }
}

/// What answers requests: routing, files, pages. Called synchronously from [`HttpSession`].
pub trait Handler {
    /// The limits sessions served by this handler enforce.
    fn limits(&self) -> &Limits;

    /// Answers one request, now or later (see [`Reply`]). The session adds `Date`, `Server`,
    /// `Content-Length` and `Connection`, and leaves out the body for HEAD.
    fn respond(&self, req: &Request<'_>) -> Reply;

    /// Header fields the session adds to every response it writes, the refusals it makes itself
    /// included (as nginx's `add_header ... always`): `Strict-Transport-Security` over HTTPS.
    fn always_headers(&self) -> &[(&'static str, HeaderValue)] {
        &[]
    }

    /// Told of each request the session refused before it reached [`Handler::respond`]
    /// (malformed, too large, too slow), so that it can be logged.
    fn refused(&self, _status: Status, _error: &RequestError) {}

    /// Told of each response queued, with its place in the connection's output stream; the
    /// response is whole once the engine has sent up to its end.
    fn queued(&self, _response: &Queued) {}

    /// Everything queued so far has been sent.
    fn drained(&self) {}

    /// The connection closed after sending `sent_total` bytes in all (see [`Queued`]).
    fn closed(&self, _sent_total: u64) {}
}

/// Where a queued response sits in its connection's output stream, in bytes from the first byte
/// the connection sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queued {
    /// The response's status.
    pub status: Status,
    /// Where its head starts.
    pub start: u64,
    /// Where its body starts (the end of the head).
    pub body_start: u64,
    /// Where it ends.
    pub end: u64,
}

impl<T: Handler + ?Sized> Handler for std::sync::Arc<T> {
    fn limits(&self) -> &Limits {
        (**self).limits()
    }
    fn respond(&self, req: &Request<'_>) -> Reply {
        (**self).respond(req)
    }
    fn always_headers(&self) -> &[(&'static str, HeaderValue)] {
        (**self).always_headers()
    }
    fn refused(&self, status: Status, error: &RequestError) {
        (**self).refused(status, error)
    }
    fn queued(&self, response: &Queued) {
        (**self).queued(response)
    }
    fn drained(&self) {
        (**self).drained()
    }
    fn closed(&self, sent_total: u64) {
        (**self).closed(sent_total)
    }
}
