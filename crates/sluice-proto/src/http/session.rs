//! One HTTP/1.1 connection as a state machine: the [`Session`] that engines drive.
//!
//! It owns the connection's reading state (between requests, inside a head, inside a body), its
//! deadlines, keep-alive and pipelining, and the serialisation of each [`Response`] into the
//! [`Outbox`], including a streamed body's later steps: each is a job the engine runs once the
//! steps before it have been sent, so every engine streams with the job delivery it already has. It does not own what a request means (the [`Handler`]) or the socket (the engine).

use std::time::Instant;

use super::body::{BodyDecoder, BodyFraming};
use super::request::{parse_head, Framing, Method, Parsed, RequestError, Version, MAX_HEADERS};
use super::response::{
    write_head, Body, BodySink, BodyTail, BodyTailError, Persistence, Reply, Response, Status,
};
use super::Handler;
use crate::conn::{Clock, Job, JobOutput, Outbox, Segment, Session};

/// A body may take at most this many body timeouts in all: progress extends the pause allowed,
/// never the whole (a byte every few seconds must not hold a connection for days).
const BODY_TIMEOUTS: u32 = 6;

/// Bodies up to this size are copied into the head's buffer so head and body leave in one write.
const INLINE_BODY_MAX: usize = 4096;

/// What happens once a response has been queued.
#[derive(Debug)]
struct Then {
    method: Method,
    persistence: Persistence,
    keep_alive: bool,
}

/// A reply that is not ready yet.
enum Wait {
    /// Released at this time, by the engine's timer.
    Until(Instant, Response),
    /// Being computed off the loop; the closure until the engine takes it.
    Job(Option<Box<dyn FnOnce() -> Reply + Send>>),
}

impl std::fmt::Debug for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wait::Until(t, r) => f.debug_tuple("Until").field(t).field(&r.status).finish(),
            Wait::Job(j) => f.debug_tuple("Job").field(&j.is_some()).finish(),
        }
    }
}

/// A response whose head and first segments are queued and whose body's tail is still to come.
struct Streaming {
    /// The tail, until the engine takes it to produce the next segments.
    tail: Option<Box<dyn BodyTail>>,
    /// Body bytes the tail has yet to produce.
    left: u64,
}

impl std::fmt::Debug for Streaming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streaming").field("tail", &self.tail.is_some()).field("left", &self.left).finish()
    }
}

/// What a body's tail produced in a job: the tail itself comes back with its segments.
struct TailStep {
    tail: Box<dyn BodyTail>,
    segments: Result<Vec<Segment>, BodyTailError>,
}

/// Where a request body's payload goes while the session reads it.
enum BodyUse {
    /// To the handler's sink (an upload), whose `finish` gives the reply.
    Sink(Box<dyn BodySink>),
    /// Nowhere: the body is read past (a body on GET) and then this reply is sent. Replying only
    /// after the body has been read lets a malformed body still be answered 400.
    Discard(Reply),
}

impl std::fmt::Debug for BodyUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyUse::Sink(_) => f.write_str("Sink"),
            BodyUse::Discard(r) => f.debug_tuple("Discard").field(r).finish(),
        }
    }
}

/// Where the connection is in its stream of requests.
#[derive(Debug)]
enum ReadState {
    /// Between requests: nothing of the next one has arrived.
    Idle,
    /// Part of a request head has arrived.
    Head,
    /// Inside a request body; its reply comes once it has ended. `until` bounds the whole body,
    /// however steadily it trickles in, when it is thrown away; a kept body (an upload) is bounded
    /// by the pause between reads only, since a large one may rightly take long.
    Body { decoder: BodyDecoder, body: BodyUse, then: Then, until: Option<Instant> },
    /// A reply is deferred; pipelined requests wait behind it.
    Waiting { wait: Wait, then: Then },
    /// A response's body is being produced a step at a time; pipelined requests wait behind it.
    Streaming { body: Streaming, then: Then },
    /// No more requests will be read; the connection closes once the outbox drains.
    Closed,
}

/// An HTTP/1.1 connection's protocol state.
#[derive(Debug)]
pub struct HttpSession<H> {
    handler: H,
    state: ReadState,
    deadline: Option<Instant>,
    requests: u64,
    shutting_down: bool,
}

impl<H: Handler> HttpSession<H> {
    /// A session for a connection accepted at `clock`'s time; the first request must arrive
    /// within the header timeout.
    pub fn new(handler: H, clock: &Clock) -> Self {
        let deadline = Some(clock.now() + handler.limits().header_timeout);
        HttpSession { handler, state: ReadState::Idle, deadline, requests: 0, shutting_down: false }
    }

    /// Requests answered so far on this connection.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    fn refuse(&mut self, error: RequestError, out: &mut Outbox, clock: &Clock) {
        let status = error.status();
        self.handler.refused(status, &error);
        let response = Response::refusal(status, &error);
        let _ = queue_response(&self.handler, out, Method::Get, response, Persistence::Close, clock);
        self.close(out);
    }

    fn close(&mut self, out: &mut Outbox) {
        out.close_after_flush();
        self.state = ReadState::Closed;
        self.deadline = None;
    }

    fn after_response(&mut self, keep_alive: bool, out: &mut Outbox, clock: &Clock) {
        // A body that ends after shutdown began must not reopen the connection for 75 s.
        if keep_alive && !self.shutting_down {
            self.state = ReadState::Idle;
            self.deadline = Some(clock.now() + self.handler.limits().keepalive_timeout);
        } else {
            self.close(out);
        }
    }

    /// Handles one complete head: asks the handler, then reads the body (into its sink or past
    /// it) or queues the reply.
    fn on_head(&mut self, request: &super::Request<'_>, framing: Framing, out: &mut Outbox, clock: &Clock) {
        let limits = self.handler.limits();
        self.requests += 1;
        let reply = self.handler.respond(request);
        let has_body = framing.body != BodyFraming::None;
        let sink = matches!(reply, Reply::Body(_));
        // A client waiting for 100-continue that gets a final answer will not send the body we
        // would have to read past, so the connection cannot continue (RFC 9110 §10.1.1).
        let keep_alive = framing.keep_alive
            && !self.shutting_down
            && (sink || !framing.expects_continue)
            && self.requests < limits.max_requests_per_connection;
        let persistence = match (keep_alive, framing.version) {
            (false, _) => Persistence::Close,
            (true, Version::Http11) => Persistence::KeepAlive11,
            (true, Version::Http10) => Persistence::KeepAlive10,
        };
        let then = Then { method: request.method, persistence, keep_alive };
        let (max, body) = match reply {
            Reply::Body(sink) => (sink.max_len(), BodyUse::Sink(sink)),
            reply if has_body && !framing.expects_continue => {
                (limits.max_discarded_body, BodyUse::Discard(reply))
            }
            reply => return self.deliver(reply, then, out, clock),
        };
        let decoder = match BodyDecoder::new(framing.body, max) {
            Ok(d) => d,
            Err(e) => return self.refuse(e.into(), out, clock),
        };
        if framing.expects_continue && framing.version == Version::Http11 && has_body {
            out.push(Segment::Static(b"HTTP/1.1 100 Continue\r\n\r\n"));
        }
        let timeout = limits.body_timeout;
        let until = matches!(body, BodyUse::Discard(_)).then(|| clock.now() + timeout * BODY_TIMEOUTS);
        self.deadline = Some(clock.now() + timeout);
        self.state = ReadState::Body { decoder, body, then, until };
        // A sink for a request without a body finishes at once.
        self.on_body_bytes(&[], out, clock);
    }

    /// Feeds body bytes to the current body; returns how many were consumed.
    fn on_body_bytes(&mut self, input: &[u8], out: &mut Outbox, clock: &Clock) -> usize {
        let ReadState::Body { decoder, body, until, .. } = &mut self.state else { return 0 };
        let mut refusal = None;
        let decoded = match body {
            BodyUse::Sink(sink) => decoder.decode_with(input, |payload| {
                if refusal.is_none() {
                    if let Err(response) = sink.write(payload) {
                        refusal = Some(response);
                    }
                }
            }),
            BodyUse::Discard(_) => decoder.decode(input),
        };
        let until = *until;
        match (decoded, refusal) {
            (_, Some(response)) => {
                self.state = ReadState::Idle;
                let _ = queue_response(&self.handler, out, Method::Get, response, Persistence::Close, clock);
                self.close(out);
                input.len()
            }
            (Err(e), None) => {
                self.refuse(e.into(), out, clock);
                input.len()
            }
            (Ok(d), None) => {
                if d.consumed > 0 {
                    let next = clock.now() + self.handler.limits().body_timeout;
                    self.deadline = Some(until.map_or(next, |u| next.min(u)));
                }
                if d.done {
                    if let ReadState::Body { body, then, .. } =
                        std::mem::replace(&mut self.state, ReadState::Idle)
                    {
                        let reply = match body {
                            BodyUse::Sink(sink) => sink.finish(),
                            BodyUse::Discard(reply) => reply,
                        };
                        self.deliver(reply, then, out, clock);
                    }
                }
                d.consumed
            }
        }
    }

    /// Queues a reply that is ready, or parks the connection until it is.
    fn deliver(&mut self, reply: Reply, mut then: Then, out: &mut Outbox, clock: &Clock) {
        match reply {
            Reply::Now(mut response) => {
                // A 400 says the server could not understand the request; what follows it on the
                // connection cannot be trusted either (RFC 9112 §6.3, as nginx does). A handler
                // that says `Connection: close` (a refusal that must not keep its connection's
                // place on a capped listener) is obeyed, and the header written once.
                let handler_closes = take_connection_close(&mut response);
                if self.shutting_down || response.status == Status::BAD_REQUEST || handler_closes {
                    then.keep_alive = false;
                    then.persistence = Persistence::Close;
                }
                match queue_response(&self.handler, out, then.method, response, then.persistence, clock) {
                    Some(body) => {
                        self.deadline = None;
                        self.state = ReadState::Streaming { body, then };
                    }
                    None => self.after_response(then.keep_alive, out, clock),
                }
            }
            Reply::After(delay, response) => {
                let at = clock.now() + delay;
                self.deadline = Some(at);
                self.state = ReadState::Waiting { wait: Wait::Until(at, response), then };
            }
            Reply::Compute(job) => {
                self.deadline = None;
                self.state = ReadState::Waiting { wait: Wait::Job(Some(job)), then };
            }
            Reply::Body(_) => {
                // Only a head's first reply may take the body; later it is gone.
                let response = Response::error(Status::INTERNAL_SERVER_ERROR);
                self.deliver(Reply::Now(response), then, out, clock)
            }
        }
    }

    /// Queues the segments a streamed body's tail produced; the response ends when the last byte
    /// of `Content-Length` is queued. A failed or misbehaving tail cuts the response: the head
    /// promised more bytes than will come, so the connection closes after what is queued.
    fn continue_stream(&mut self, step: TailStep, out: &mut Outbox, clock: &Clock) {
        let ReadState::Streaming { body, .. } = &mut self.state else { return };
        let segments = match step.segments {
            Ok(segments) => segments,
            Err(_) => return self.close(out),
        };
        let len: u64 = segments.iter().map(Segment::len).sum();
        if len == 0 || len > body.left {
            return self.close(out);
        }
        for segment in segments {
            out.push(segment);
        }
        body.left -= len;
        if body.left > 0 {
            body.tail = Some(step.tail);
        } else if let ReadState::Streaming { then, .. } = std::mem::replace(&mut self.state, ReadState::Idle)
        {
            self.after_response(then.keep_alive, out, clock);
        }
    }

    /// Takes the parked reply's continuation, leaving the state to be set by `deliver`.
    fn take_then(&mut self) -> Option<Then> {
        match std::mem::replace(&mut self.state, ReadState::Idle) {
            ReadState::Waiting { then, .. } => Some(then),
            other => {
                self.state = other;
                None
            }
        }
    }
}

impl<H: Handler> Session for HttpSession<H> {
    fn receive(&mut self, input: &[u8], out: &mut Outbox, clock: &Clock) -> usize {
        let mut pos = 0;
        loop {
            match &mut self.state {
                ReadState::Closed => return input.len(),
                ReadState::Waiting { .. } | ReadState::Streaming { .. } => return pos,
                ReadState::Body { .. } => {
                    let used = self.on_body_bytes(&input[pos..], out, clock);
                    pos += used;
                    if matches!(self.state, ReadState::Body { .. }) {
                        return pos;
                    }
                }
                ReadState::Idle | ReadState::Head => {
                    if pos == input.len() || out.queued_responses() >= self.handler.limits().max_pipelined {
                        return pos;
                    }
                    if matches!(self.state, ReadState::Idle) {
                        self.state = ReadState::Head;
                        self.deadline = Some(clock.now() + self.handler.limits().header_timeout);
                    }
                    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
                    match parse_head(&input[pos..], &mut headers, self.handler.limits()) {
                        Ok(Parsed::Partial) => return pos,
                        Ok(Parsed::Complete { request, framing, head_len }) => {
                            self.on_head(&request, framing, out, clock);
                            pos += head_len;
                        }
                        Err(e) => {
                            self.refuse(e, out, clock);
                            return input.len();
                        }
                    }
                }
            }
        }
    }

    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    fn on_drained(&mut self, clock: &Clock) {
        if matches!(self.state, ReadState::Streaming { .. }) {
            // The queue ran dry between two steps of a body: the response is not whole yet.
            return;
        }
        self.handler.drained();
        if matches!(self.state, ReadState::Idle) {
            self.deadline = Some(clock.now() + self.handler.limits().keepalive_timeout);
        }
    }

    fn on_deadline(&mut self, out: &mut Outbox, clock: &Clock) {
        match &self.state {
            ReadState::Waiting { wait: Wait::Until(at, _), .. } => {
                if clock.now() >= *at {
                    if let ReadState::Waiting { wait: Wait::Until(_, response), then } =
                        std::mem::replace(&mut self.state, ReadState::Idle)
                    {
                        self.deliver(Reply::Now(response), then, out, clock);
                    }
                }
            }
            // A job has no deadline of its own; the engine always reports back.
            ReadState::Waiting { wait: Wait::Job(_), .. } | ReadState::Streaming { .. } => {}
            ReadState::Head => self.refuse(RequestError::Timeout, out, clock),
            // Not answered yet: the body's reply waits for the body. Dropping the state drops an
            // upload's sink, which discards what it received.
            ReadState::Body { .. } => {
                self.state = ReadState::Head;
                self.refuse(RequestError::Timeout, out, clock);
            }
            ReadState::Idle | ReadState::Closed => self.close(out),
        }
    }

    fn wants_input(&self) -> bool {
        !matches!(self.state, ReadState::Waiting { .. } | ReadState::Streaming { .. })
    }

    fn take_job(&mut self) -> Option<Job> {
        match &mut self.state {
            ReadState::Waiting { wait: Wait::Job(job), .. } => {
                let job = job.take()?;
                Some(Box::new(move || Box::new(job()) as JobOutput))
            }
            ReadState::Streaming { body, .. } => {
                let mut tail = body.tail.take()?;
                Some(Box::new(move || {
                    let segments = tail.next();
                    Box::new(TailStep { tail, segments }) as JobOutput
                }))
            }
            _ => None,
        }
    }

    fn job_done(&mut self, output: JobOutput, out: &mut Outbox, clock: &Clock) {
        let reply = match output.downcast::<Reply>() {
            Ok(reply) => *reply,
            Err(output) => match output.downcast::<TailStep>() {
                Ok(step) => return self.continue_stream(*step, out, clock),
                Err(_) => Reply::Now(Response::error(Status::INTERNAL_SERVER_ERROR)),
            },
        };
        if let Some(then) = self.take_then() {
            self.deliver(reply, then, out, clock);
        }
    }

    fn job_refused(&mut self, out: &mut Outbox, clock: &Clock) {
        if matches!(self.state, ReadState::Streaming { .. }) {
            // No job can run the tail now, and the head is gone: the response is cut.
            return self.close(out);
        }
        if let Some(then) = self.take_then() {
            let busy = Response::error(Status::SERVICE_UNAVAILABLE).with_header("Retry-After", "1");
            self.deliver(Reply::Now(busy), then, out, clock);
        }
    }

    fn on_overload(&mut self, out: &mut Outbox, clock: &Clock) {
        let busy = Response::error(Status::SERVICE_UNAVAILABLE).with_header("Retry-After", "1");
        let _ = queue_response(&self.handler, out, Method::Get, busy, Persistence::Close, clock);
        self.close(out);
    }

    fn on_close(&mut self, out: &Outbox) {
        self.handler.closed(out.sent_total());
    }

    fn on_shutdown(&mut self, out: &mut Outbox) -> bool {
        self.shutting_down = true;
        match self.state {
            ReadState::Idle if out.is_empty() => true,
            ReadState::Idle => {
                self.close(out);
                false
            }
            ReadState::Closed => out.is_empty(),
            ReadState::Head
            | ReadState::Body { .. }
            | ReadState::Waiting { .. }
            | ReadState::Streaming { .. } => false,
        }
    }
}

/// Whether the handler's headers say `Connection: close`; such a field is removed, as the
/// session writes the `Connection` header itself.
fn take_connection_close(response: &mut Response) -> bool {
    let says_close = |(name, value): &(&'static str, super::HeaderValue)| {
        name.eq_ignore_ascii_case("connection")
            && value.split(',').any(|t| t.trim().eq_ignore_ascii_case("close"))
    };
    let before = response.headers.len();
    response.headers.retain(|field| !says_close(field));
    response.headers.len() != before
}

/// Serialises a response into the outbox, and tells the handler where it lies in the stream.
/// HEAD and bodiless statuses send the head alone. A streamed body's ready segments are queued
/// and its tail returned, still to run; the handler is told where the whole body will end.
fn queue_response<H: Handler>(
    handler: &H,
    out: &mut Outbox,
    method: Method,
    response: Response,
    persistence: Persistence,
    clock: &Clock,
) -> Option<Streaming> {
    let Response { status, mut headers, body } = response;
    headers.extend(handler.always_headers().iter().cloned());
    let mut head = out.buffer();
    let content_length = (!status.forbids_body()).then(|| body.len());
    write_head(&mut head, status, &headers, content_length, persistence, clock);
    let start = out.queued_total();
    let body_start = start + head.len() as u64;
    let send_body = method != Method::Head && !status.forbids_body();
    let mut streaming = None;
    if !send_body {
        out.push(Segment::Bytes(head));
    } else {
        match body {
            Body::Empty => out.push(Segment::Bytes(head)),
            Body::Bytes(b) if b.len() <= INLINE_BODY_MAX => {
                head.extend_from_slice(&b);
                out.push(Segment::Bytes(head));
            }
            Body::Bytes(std::borrow::Cow::Borrowed(b)) => {
                out.push(Segment::Bytes(head));
                out.push(Segment::Static(b));
            }
            Body::Bytes(std::borrow::Cow::Owned(b)) => {
                out.push(Segment::Bytes(head));
                out.push(Segment::Bytes(b));
            }
            Body::File(f) => {
                out.push(Segment::Bytes(head));
                out.push(Segment::File(f));
            }
            Body::Parts(parts) => {
                out.push(Segment::Bytes(head));
                for part in parts {
                    out.push(part);
                }
            }
            Body::Streamed(body) => {
                out.push(Segment::Bytes(head));
                for part in body.ready {
                    out.push(part);
                }
                let left = (body_start + body.len).saturating_sub(out.queued_total());
                streaming = (left > 0).then_some(Streaming { tail: Some(body.tail), left });
            }
        }
    }
    out.note_response();
    let end = out.queued_total() + streaming.as_ref().map_or(0, |s| s.left);
    handler.queued(&super::Queued { status, start, body_start, end });
    streaming
}

#[cfg(test)]
mod tests;
