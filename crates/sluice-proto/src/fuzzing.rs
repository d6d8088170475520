//! The properties the fuzz targets check, shared with the tests that replay the committed corpus.
//!
//! Each function takes arbitrary bytes and panics only when a property fails, so `cargo fuzz`
//! (in `fuzz/`) and `cargo test` (replaying `fuzz/corpus/`) exercise exactly the same checks. The
//! central property is the sans-I/O one: however the bytes are split across reads, a parser
//! gives the same answer as when it sees them whole.

use std::borrow::Cow;
use std::io::IoSlice;
use std::time::Instant;

use crate::conn::{Clock, Outbox, Session};
use crate::http::range::{resolve_range, RangeOutcome};
use crate::http::request::{parse_head, Parsed, MAX_HEADERS};
use crate::http::{Body, Handler, HttpSession, Limits, Reply, Request, Response, Status};

/// A handler that answers every request with its method and target, so that the output shows
/// which requests the session saw.
struct Echo(Limits);

impl Handler for Echo {
    fn limits(&self) -> &Limits {
        &self.0
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        let body = format!("{} {}", req.method.as_str(), req.target);
        Reply::Now(Response {
            status: Status::OK,
            headers: Vec::new(),
            body: Body::Bytes(Cow::Owned(body.into_bytes())),
        })
    }
}

fn drain(out: &mut Outbox, into: &mut Vec<u8>) {
    while !out.is_empty() {
        let mut slots = [IoSlice::new(&[]); 8];
        let n = out.leading_slices(&mut slots);
        let len: usize = slots[..n].iter().map(|s| s.len()).sum();
        for s in &slots[..n] {
            into.extend_from_slice(s);
        }
        out.advance(len as u64);
    }
}

/// Runs a session over `chunks` as successive reads; returns everything it wrote.
fn run_session(chunks: &[&[u8]]) -> (Vec<u8>, bool) {
    let clock = Clock::new(Instant::now(), 1_700_000_000);
    let mut session =
        HttpSession::new(Echo(Limits { max_head: 2048, max_request_line: 512, ..Limits::default() }), &clock);
    let mut out = Outbox::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut written = Vec::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        // Offer until the session stops consuming, draining between offers like an engine.
        loop {
            let used = session.receive(&pending, &mut out, &clock);
            pending.drain(..used);
            let had_output = !out.is_empty();
            drain(&mut out, &mut written);
            if had_output {
                session.on_drained(&clock);
            }
            if out.closing() || used == 0 || pending.is_empty() {
                break;
            }
        }
        if out.closing() {
            break;
        }
    }
    (written, out.closing())
}

/// An HTTP session gives the same output for `data` whole and split at any point, and every
/// response it writes is a well-formed HTTP/1.1 status line.
pub fn http_session(data: &[u8]) {
    let (whole, closed) = run_session(&[data]);
    if !whole.is_empty() {
        assert!(whole.starts_with(b"HTTP/1.1 "), "output does not start with a status line");
    }
    // Splitting at every byte is quadratic; long inputs are split at a spread of points instead.
    let step = (data.len() / 64).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        let (split_out, split_closed) = run_session(&[a, b]);
        assert_eq!(split_out, whole, "split at {split} changed the output");
        assert_eq!(split_closed, closed, "split at {split} changed whether the connection closes");
    }
}

/// A request head parses to the same result whole as when it arrives a byte at a time: every
/// proper prefix of a complete head is `Partial` (or the same error), never a different request.
pub fn request_head(data: &[u8]) {
    let limits = Limits { max_head: 2048, max_request_line: 512, ..Limits::default() };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let whole = match parse_head(data, &mut headers, &limits) {
        Ok(Parsed::Complete { request, head_len, framing }) => {
            assert!(head_len <= data.len());
            Some(Ok((format!("{:?} {} {:?}", request.method, request.target, framing), head_len)))
        }
        Ok(Parsed::Partial) => None,
        Err(e) => Some(Err(e)),
    };
    if let Some(Ok((_, head_len))) = &whole {
        for end in 0..*head_len {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            match parse_head(&data[..end], &mut headers, &limits) {
                Ok(Parsed::Partial) | Err(_) => {}
                Ok(Parsed::Complete { .. }) => panic!("a prefix of {end} bytes parsed as a whole head"),
            }
        }
    }
}

/// Range resolution never panics and every range it returns lies inside the representation,
/// with the total never more than the representation itself.
pub fn range_header(data: &[u8]) {
    let (len, header) = match data.split_first_chunk::<8>() {
        Some((n, rest)) => (u64::from_le_bytes(*n) % (1 << 40), rest),
        None => (1000, data),
    };
    let max_ranges = 16;
    match resolve_range(header, len, max_ranges) {
        RangeOutcome::Full | RangeOutcome::Unsatisfiable => {}
        RangeOutcome::Single(r) => {
            assert!(r.start <= r.end && r.end < len, "{r:?} outside 0..{len}");
        }
        RangeOutcome::Multiple(ranges) => {
            assert!(ranges.len() <= max_ranges);
            let mut total = 0u64;
            for r in &ranges {
                assert!(r.start <= r.end && r.end < len, "{r:?} outside 0..{len}");
                total += r.end - r.start + 1;
            }
            assert!(total <= len, "ranges add up to {total}, more than {len}");
        }
    }
}
