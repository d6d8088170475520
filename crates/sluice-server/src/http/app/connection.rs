//! One HTTP connection's handler, as the engine drives it: who is on the other end, the
//! per-address connection limit (one too many is answered 429 and closed), and the access log
//! line of each response when it ends (sent whole or cut short), with the response metrics.
//!
//! It does not decide what a request is answered (see [`super::App`]) nor move bytes (the
//! engine and `sluice-proto`).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use sluice_proto::http::{
    Handler, HeaderValue, Limits, Queued, Reply, Request, RequestError, Response, Status,
};
use sluice_rtsp::Note;

use super::{route_kind, App};
use crate::ops::metrics::RouteKind;

/// The handler one connection uses: the shared app, who is on the other end, and the responses
/// queued and not yet known to be sent whole.
#[derive(Debug)]
pub struct ConnectionHandler {
    app: Arc<App>,
    peer: SocketAddr,
    log: RefCell<ConnectionLog>,
    /// `Some` when the connection is one too many for its address: every request is answered
    /// 429 and the connection closes after the first (these limits allow one request).
    refused: Option<Limits>,
    /// Header fields of every response on this connection (`Strict-Transport-Security` on
    /// HTTPS), shared by the connections of one listener.
    always: Arc<[(&'static str, HeaderValue)]>,
}

/// A connection's responses between being answered and being sent (or cut).
#[derive(Debug, Default)]
struct ConnectionLog {
    /// The request answered last, until its response is queued.
    answered: Option<Answered>,
    /// Responses queued and not yet sent whole, oldest first.
    queued: VecDeque<(Answered, Queued)>,
}

/// A request the app answered, kept until its response ends.
#[derive(Debug)]
struct Answered {
    /// When its request was answered, for the response-duration histogram.
    started: Instant,
    /// What it served, for the same.
    kind: RouteKind,
    /// The MP4 it served part of (its library path), for `/streams`' bytes sent.
    stream: Option<Box<str>>,
    /// What the access log says of it; `None` when the access log is off.
    line: Option<AccessLine>,
}

#[derive(Debug)]
struct AccessLine {
    started: Instant,
    method: &'static str,
    target: String,
    range: Option<String>,
    user_agent: Option<String>,
}

impl ConnectionHandler {
    /// A handler for a connection from `peer` whose every response carries `always`.
    pub fn new(app: Arc<App>, peer: SocketAddr, always: Arc<[(&'static str, HeaderValue)]>) -> Self {
        let refused = (!app.clients.connected(peer.ip()))
            .then(|| Limits { max_requests_per_connection: 1, ..app.settings.limits.clone() });
        ConnectionHandler { app, peer, log: RefCell::new(ConnectionLog::default()), refused, always }
    }

    /// Counts and logs responses that ended: whole up to `sent_total` bytes, and, when
    /// `closed`, the rest cut short.
    fn ended(&self, sent_total: Option<u64>) {
        let mut log = self.log.borrow_mut();
        while let Some((answered, queued)) = log.queued.pop_front() {
            let whole = sent_total.is_none_or(|sent| sent >= queued.end);
            let sent = sent_total.unwrap_or(queued.end);
            if !whole {
                self.app.requests.cut();
            }
            let body = queued.end - queued.body_start;
            let body_sent = sent.clamp(queued.body_start, queued.end) - queued.body_start;
            self.app.requests.ended(answered.kind, queued.status.0, body_sent, answered.started.elapsed());
            if let Some(stream) = answered.stream.as_deref().filter(|_| body_sent > 0) {
                self.app.requests.stream_sent(stream, answered.kind, body_sent);
            }
            let Some(line) = answered.line else { continue };
            let ms = (line.started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
            let ua = line.user_agent.as_deref().unwrap_or("-");
            let range = line.range.as_deref().unwrap_or("-");
            let (peer, method, status, target) = (self.peer, line.method, queued.status.0, &line.target);
            if whole {
                tracing::info!(target: "sluice::access", %peer, method, uri = %target, status, bytes = body_sent,
                    duration_ms = ms, user_agent = ua, range, complete = true, "response");
            } else {
                tracing::info!(target: "sluice::access", %peer, method, uri = %target, status, bytes = body_sent,
                    expected = body, duration_ms = ms, user_agent = ua, range, complete = false,
                    "response cut short: {body_sent} of {body} body bytes sent");
            }
        }
    }
}

/// The RTSP loops' reports the server logs (the engine counts them): the RTSP access log, a line
/// per request as HTTP's beside it, each session's start and end, and the files RTSP cannot
/// stream.
pub(crate) fn log_rtsp(note: &Note<'_>) {
    match note {
        Note::Access { peer, answered: a } => {
            let (session, transport) =
                (a.session.as_deref().unwrap_or("-"), a.transport.as_deref().unwrap_or("-"));
            tracing::info!(target: "sluice::access", protocol = "rtsp", peer = %peer, method = a.method,
                url = a.url, status = a.status, session, transport, "rtsp request");
        }
        Note::Refused(error) => tracing::debug!("rtsp: refused: {error}"),
        Note::SessionCreated(id, path) => {
            tracing::info!(target: "sluice::rtsp", session = %id, path, "rtsp session started");
        }
        Note::SessionReleased(id, why) => {
            tracing::info!(target: "sluice::rtsp", session = %id, reason = ?why, "rtsp session ended");
        }
        Note::Unplayable { path, status, reason } => {
            tracing::warn!(target: "sluice::rtsp", path, status, "rtsp: cannot stream {path}: {reason}")
        }
        Note::Unreadable { path, error } => tracing::warn!("rtsp: cannot open {path} to stream it: {error}"),
        _ => {}
    }
}

impl Drop for ConnectionHandler {
    fn drop(&mut self) {
        if self.refused.is_none() {
            self.app.clients.disconnected(self.peer.ip());
        }
    }
}

/// 429, saying which limit.
fn too_many(why: &str) -> Response {
    Response::refusal(Status::TOO_MANY_REQUESTS, why)
}

impl Handler for ConnectionHandler {
    fn limits(&self) -> &Limits {
        self.refused.as_ref().unwrap_or(&self.app.settings.limits)
    }

    fn always_headers(&self) -> &[(&'static str, HeaderValue)] {
        &self.always
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        let header = |name| req.header(name).map(|v| String::from_utf8_lossy(v).into_owned());
        let line = self.app.settings.access_log.then(|| AccessLine {
            started: Instant::now(),
            method: req.method.as_str(),
            target: req.target.to_string(),
            range: header("range"),
            user_agent: header("user-agent"),
        });
        let (kind, stream) = route_kind(req);
        self.log.borrow_mut().answered = Some(Answered { started: Instant::now(), kind, stream, line });
        if self.refused.is_some() {
            return too_many("too many connections from this address").with_header("Retry-After", "1").into();
        }
        if let Err(wait) = self.app.clients.request(self.peer.ip(), Instant::now()) {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            return too_many("too many requests from this address")
                .with_header("Retry-After", secs.to_string())
                .into();
        }
        self.app.route(req, self.peer)
    }

    fn refused(&self, status: Status, error: &RequestError) {
        self.app.requests.refused();
        if self.app.settings.access_log {
            tracing::info!(target: "sluice::access", peer = %self.peer, status = status.0, "refused: {error}");
        }
    }

    fn queued(&self, response: &Queued) {
        let mut log = self.log.borrow_mut();
        // Refused requests were counted and logged as refused; only answered ones go on.
        if let Some(answered) = log.answered.take() {
            self.app.requests.response(response.status.0);
            log.queued.push_back((answered, *response));
        }
    }

    fn drained(&self) {
        if !self.log.borrow().queued.is_empty() {
            self.ended(None);
        }
    }

    fn closed(&self, sent_total: u64) {
        self.ended(Some(sent_total));
    }
}
