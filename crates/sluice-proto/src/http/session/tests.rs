//! The HTTP session's tests: framing, keep-alive, bodies, deadlines and errors, fed as an
//! engine would.

use super::*;
use crate::http::{Limits, Request};
use std::borrow::Cow;
use std::time::Duration;

struct Echo(Limits);

impl Handler for Echo {
    fn limits(&self) -> &Limits {
        &self.0
    }
    fn respond(&self, req: &Request<'_>) -> Reply {
        let body = format!("{} {}", req.method.as_str(), req.target);
        let response = Response {
            status: Status::OK,
            headers: vec![],
            body: Body::Bytes(Cow::Owned(body.into_bytes())),
        };
        match req.path() {
            Some("/upload") => Reply::Body(Box::new(Collect::default())),
            Some("/bad-target") => Reply::Now(Response::error(Status::BAD_REQUEST)),
            Some("/refused") => Reply::Now(
                Response::refusal(Status::SERVICE_UNAVAILABLE, "full").with_header("Connection", "close"),
            ),
            Some("/later") => Reply::After(Duration::from_millis(100), response),
            Some("/compute") => Reply::Compute(Box::new(move || Reply::Now(response))),
            Some("/streamed") => Reply::Now(streamed(false)),
            Some("/streamed-broken") => Reply::Now(streamed(true)),
            _ => Reply::Now(response),
        }
    }
}

/// Gives "cd" then "ef" (or fails after "cd" when `broken`).
struct Steps {
    steps: u32,
    broken: bool,
}

impl BodyTail for Steps {
    fn next(&mut self) -> Result<Vec<Segment>, BodyTailError> {
        self.steps += 1;
        match self.steps {
            1 => Ok(vec![Segment::Static(b"cd")]),
            _ if self.broken => Err(BodyTailError("the origin went away".into())),
            _ => Ok(vec![Segment::Bytes(b"ef".to_vec())]),
        }
    }
}

/// A six-byte body of which "ab" is ready.
fn streamed(broken: bool) -> Response {
    let tail = Box::new(Steps { steps: 0, broken });
    let body = super::super::StreamedBody { len: 6, ready: vec![Segment::Static(b"ab")], tail };
    Response { status: Status::OK, headers: vec![], body: Body::Streamed(body) }
}

/// Collects an upload's body; answers with what it received; a drop before `finish`
/// counts as a discarded upload.
#[derive(Default)]
struct Collect {
    body: Vec<u8>,
    finished: bool,
}

thread_local! {
    static DISCARDED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

impl BodySink for Collect {
    fn max_len(&self) -> u64 {
        100
    }
    fn write(&mut self, payload: &[u8]) -> Result<(), Response> {
        self.body.extend_from_slice(payload);
        Ok(())
    }
    fn finish(mut self: Box<Self>) -> Reply {
        self.finished = true;
        let text = format!("got {}", String::from_utf8_lossy(&self.body));
        Reply::Now(Response {
            status: Status::CREATED,
            headers: vec![],
            body: Body::Bytes(Cow::Owned(text.into_bytes())),
        })
    }
}

impl Drop for Collect {
    fn drop(&mut self) {
        if !self.finished {
            DISCARDED.with(|d| d.set(d.get() + 1));
        }
    }
}

fn discarded() -> u32 {
    DISCARDED.with(|d| d.get())
}

#[test]
fn an_upload_body_streams_to_the_sink_split_anywhere() {
    let input = b"PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    for split in 0..input.len() {
        let (_, mut out) = receive_in_two(input, split);
        let text = drain(&mut out);
        assert!(text.starts_with("HTTP/1.1 201 Created\r\n"), "{text}");
        assert!(text.contains("got abcde"));
        assert!(text.contains("GET /next"), "keep-alive after an upload");
    }
}

#[test]
fn expect_continue_is_answered_before_the_body_and_413_before_reading() {
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(
        b"PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n",
        &mut out,
        &clock(),
    );
    assert_eq!(drain(&mut out), "HTTP/1.1 100 Continue\r\n\r\n");
    s.receive(b"hi", &mut out, &clock());
    assert!(drain(&mut out).starts_with("HTTP/1.1 201 Created\r\n"));
    // Over the sink's limit: 413 at once, no 100, nothing read.
    let mut s = session();
    let before = discarded();
    let head = b"PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\nExpect: 100-continue\r\n\r\n";
    s.receive(head, &mut out, &clock());
    let text = drain(&mut out);
    assert!(text.starts_with("HTTP/1.1 413 Content Too Large\r\n"), "{text}");
    assert!(out.closing());
    assert_eq!(discarded(), before + 1);
}

#[test]
fn a_cut_or_malformed_upload_is_discarded() {
    let before = discarded();
    // Timed out half way: 408, sink dropped.
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(b"PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf", &mut out, &clock());
    let late = Clock::new(clock().now() + Duration::from_secs(60), 1_700_000_060);
    s.on_deadline(&mut out, &late);
    assert!(drain(&mut out).starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    assert_eq!(discarded(), before + 1);
    // Malformed chunked framing: 400 and close.
    let mut s = session();
    s.receive(
        b"PUT /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX",
        &mut out,
        &clock(),
    );
    assert!(drain(&mut out).starts_with("HTTP/1.1 400 Bad Request\r\n"));
    assert!(out.closing());
    assert_eq!(discarded(), before + 2);
    // Connection gone mid-body: the session (and its sink) is dropped.
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(b"PUT /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhalf", &mut out, &clock());
    drop(s);
    assert_eq!(discarded(), before + 3);
}

#[test]
fn a_malformed_body_on_get_is_answered_400_not_200() {
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(b"GET /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", &mut out, &clock());
    let text = drain(&mut out);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(!text.contains("200"));
    assert!(out.closing());
}

#[test]
fn every_400_closes_even_when_the_head_parsed() {
    let mut s = session();
    let mut out = Outbox::new();
    let input = b"GET /bad-target HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    s.receive(input, &mut out, &clock());
    let text = drain(&mut out);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("Connection: close\r\n"));
    assert!(!text.contains("GET /next"));
    assert!(out.closing());
}

#[test]
fn a_handler_saying_connection_close_closes_with_one_header() {
    let mut s = session();
    let mut out = Outbox::new();
    let input = b"GET /refused HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    s.receive(input, &mut out, &clock());
    let text = drain(&mut out);
    assert!(text.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{text}");
    assert_eq!(text.matches("Connection: close\r\n").count(), 1, "{text}");
    assert!(!text.contains("GET /next"), "{text}");
    assert!(out.closing());
}

fn clock() -> Clock {
    Clock::new(Instant::now(), 1_700_000_000)
}

/// Drains the outbox as text (it holds no files in these tests).
fn drain(out: &mut Outbox) -> String {
    let mut text = Vec::new();
    while !out.is_empty() {
        let mut slots = [std::io::IoSlice::new(&[]); 8];
        let n = out.leading_slices(&mut slots);
        let len: usize = slots[..n].iter().map(|s| s.len()).sum();
        for s in &slots[..n] {
            text.extend_from_slice(s);
        }
        out.advance(len as u64);
    }
    String::from_utf8(text).unwrap()
}

fn session() -> HttpSession<Echo> {
    HttpSession::new(Echo(Limits::default()), &clock())
}

/// A fresh session fed `input` in two reads split at `split`; checks that it took it all.
fn receive_in_two(input: &[u8], split: usize) -> (HttpSession<Echo>, Outbox) {
    let mut s = session();
    let mut out = Outbox::new();
    let used = s.receive(&input[..split], &mut out, &clock());
    let used2 = s.receive(&input[used..], &mut out, &clock());
    assert_eq!(used + used2, input.len(), "split {split}");
    (s, out)
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let mut s = session();
    let mut out = Outbox::new();
    let input = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nHEAD /b HTTP/1.1\r\nHost: x\r\n\r\nGET /c HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(s.receive(input, &mut out, &clock()), input.len());
    let text = drain(&mut out);
    let a = text.find("GET /a").unwrap();
    let c = text.find("GET /c").unwrap();
    assert!(a < c);
    assert!(!text.contains("HEAD /b"), "HEAD has no body: {text}");
    assert_eq!(text.matches("HTTP/1.1 200 OK").count(), 3);
    assert!(!out.closing());
}

#[test]
fn split_at_every_byte_gives_the_same_output() {
    let input = b"GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut whole = session();
    let mut out = Outbox::new();
    whole.receive(input, &mut out, &clock());
    let expected = drain(&mut out);
    for split in 0..input.len() {
        let (_, mut out) = receive_in_two(input, split);
        assert_eq!(drain(&mut out), expected, "split {split}");
        assert!(out.closing());
    }
}

#[test]
fn get_body_is_read_past_not_parsed_as_a_request() {
    let mut s = session();
    let mut out = Outbox::new();
    let input =
        b"GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 27\r\n\r\nGET /evil HTTP/1.1\r\nHost: x\r\n\r\n";
    s.receive(input, &mut out, &clock());
    let text = drain(&mut out);
    assert!(!text.contains("/evil"), "{text}");
}

#[test]
fn errors_close_the_connection() {
    let mut s = session();
    let mut out = Outbox::new();
    let input = b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_eq!(s.receive(input, &mut out, &clock()), input.len());
    let text = drain(&mut out);
    assert!(text.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{text}");
    assert!(text.contains("Connection: close\r\n"));
    assert!(!text.contains("/b"));
    assert!(out.closing());
}

#[test]
fn slow_head_times_out_with_408() {
    let limits = Limits { header_timeout: Duration::from_secs(2), ..Limits::default() };
    let start = clock();
    let mut s = HttpSession::new(Echo(limits), &start);
    let mut out = Outbox::new();
    assert_eq!(s.receive(b"GET / HT", &mut out, &start), 0);
    let deadline = s.deadline().unwrap();
    assert_eq!(deadline, start.now() + Duration::from_secs(2));
    s.on_deadline(&mut out, &start);
    assert!(drain(&mut out).starts_with("HTTP/1.1 408 Request Timeout\r\n"));
    assert!(out.closing());
}

#[test]
fn pipelining_is_bounded_until_the_outbox_drains() {
    let limits = Limits { max_pipelined: 2, ..Limits::default() };
    let mut s = HttpSession::new(Echo(limits), &clock());
    let mut out = Outbox::new();
    let one = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
    let input = one.repeat(5);
    let used = s.receive(&input, &mut out, &clock());
    assert_eq!(used, one.len() * 2);
    drain(&mut out);
    let used2 = s.receive(&input[used..], &mut out, &clock());
    assert_eq!(used2, one.len() * 2);
}

#[test]
fn a_delayed_reply_waits_for_its_deadline_and_holds_the_pipeline() {
    let start = clock();
    let mut s = HttpSession::new(Echo(Limits::default()), &start);
    let mut out = Outbox::new();
    let input = b"GET /later HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    let used = s.receive(input, &mut out, &start);
    assert!(out.is_empty(), "nothing is sent before the delay");
    assert_eq!(s.deadline(), Some(start.now() + Duration::from_millis(100)));
    // Early: nothing happens.
    s.on_deadline(&mut out, &start);
    assert!(out.is_empty());
    let later = Clock::new(start.now() + Duration::from_millis(100), 1_700_000_000);
    s.on_deadline(&mut out, &later);
    assert!(drain(&mut out).contains("GET /later"));
    assert!(s.wants_input());
    s.receive(&input[used..], &mut out, &later);
    assert!(drain(&mut out).contains("GET /next"));
}

#[test]
fn a_computed_reply_is_handed_to_the_engine_as_a_job() {
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(b"GET /compute HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    assert!(out.is_empty());
    let job = s.take_job().expect("a job");
    assert!(s.take_job().is_none(), "a job is taken once");
    s.job_done(job(), &mut out, &clock());
    assert!(drain(&mut out).contains("GET /compute"));
    let mut s = session();
    s.receive(b"GET /compute HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    let _ = s.take_job();
    s.job_refused(&mut out, &clock());
    assert!(drain(&mut out).starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
}

#[test]
fn a_streamed_body_goes_out_a_step_at_a_time_and_holds_the_pipeline() {
    let mut s = session();
    let mut out = Outbox::new();
    let input = b"GET /streamed HTTP/1.1\r\nHost: x\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n";
    let used = s.receive(input, &mut out, &clock());
    let first = drain(&mut out);
    assert!(first.contains("Content-Length: 6\r\n"), "{first}");
    assert!(first.ends_with("\r\n\r\nab"), "the head and the ready part go first: {first}");
    assert!(!s.wants_input(), "the next request waits for the body");
    s.on_drained(&clock());
    let mut body = String::new();
    while let Some(job) = s.take_job() {
        assert!(s.take_job().is_none(), "one step at a time");
        s.job_done(job(), &mut out, &clock());
        body.push_str(&drain(&mut out));
    }
    assert_eq!(body, "cdef");
    assert!(s.wants_input() && !out.closing(), "keep-alive once the body is whole");
    s.receive(&input[used..], &mut out, &clock());
    assert!(drain(&mut out).contains("GET /next"));
}

#[test]
fn a_failed_tail_cuts_the_response_and_closes() {
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(b"GET /streamed-broken HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    let mut text = drain(&mut out);
    while let Some(job) = s.take_job() {
        s.job_done(job(), &mut out, &clock());
        text.push_str(&drain(&mut out));
    }
    assert!(text.ends_with("\r\n\r\nabcd"), "{text}");
    assert!(out.closing(), "fewer bytes than Content-Length, then the connection closes");
    // A tail the engine cannot run (its queue is full) cuts the response too.
    let mut s = session();
    s.receive(b"GET /streamed HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    let _ = s.take_job();
    s.job_refused(&mut out, &clock());
    assert!(out.closing());
    // HEAD sends the head alone and runs no tail.
    let mut s = session();
    let mut out = Outbox::new();
    s.receive(b"HEAD /streamed HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    assert!(drain(&mut out).ends_with("Content-Length: 6\r\n\r\n"));
    assert!(s.take_job().is_none() && s.wants_input());
}

#[test]
fn shutdown_closes_idle_and_finishes_in_flight() {
    let mut s = session();
    let mut out = Outbox::new();
    assert!(s.on_shutdown(&mut out));
    let mut s = session();
    s.receive(b"GET / HTTP/1.1\r\n", &mut out, &clock());
    assert!(!s.on_shutdown(&mut out));
    s.receive(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    assert!(drain(&mut out).contains("Connection: close\r\n"));
    assert!(out.closing());
}

#[test]
fn overload_answers_503_and_closes() {
    let mut s = session();
    let mut out = Outbox::new();
    s.on_overload(&mut out, &clock());
    let text = drain(&mut out);
    assert!(text.starts_with("HTTP/1.1 503 "), "{text}");
    assert!(text.contains("Retry-After: 1\r\n"), "{text}");
    assert!(text.contains("Connection: close\r\n"), "{text}");
    assert!(out.closing());
}

/// Echo with a header for every response, as HTTPS adds Strict-Transport-Security.
struct Always(Echo, [(&'static str, crate::http::HeaderValue); 1]);

impl Handler for Always {
    fn limits(&self) -> &Limits {
        self.0.limits()
    }
    fn respond(&self, req: &Request<'_>) -> Reply {
        self.0.respond(req)
    }
    fn always_headers(&self) -> &[(&'static str, crate::http::HeaderValue)] {
        &self.1
    }
}

#[test]
fn always_headers_go_on_answers_errors_and_refusals() {
    let field = "\r\nStrict-Transport-Security: max-age=60\r\n";
    // An answer, then the handler's error (which closes); then the session's own refusal.
    let inputs: [&[u8]; 2] = [
        b"GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /bad-target HTTP/1.1\r\nHost: x\r\n\r\n",
        b"GET /c HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
    ];
    let mut text = String::new();
    for input in inputs {
        let handler = Always(Echo(Limits::default()), [("Strict-Transport-Security", "max-age=60".into())]);
        let mut out = Outbox::new();
        HttpSession::new(handler, &clock()).receive(input, &mut out, &clock());
        text += &drain(&mut out);
    }
    let statuses: Vec<&str> = text.match_indices("HTTP/1.1 ").map(|(at, _)| &text[at + 9..at + 12]).collect();
    assert_eq!(statuses, ["200", "400", "400"], "{text}");
    assert_eq!(text.matches(field).count(), 3, "{text}");
    // Without it, none.
    let mut out = Outbox::new();
    session().receive(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", &mut out, &clock());
    assert!(!drain(&mut out).contains("Strict-Transport-Security"));
}
