//! RTSP control connections and the sessions they set up, as sans-I/O state machines.
//!
//! This module owns what RTSP requests *do*: an [`RtspConnection`] takes the bytes a client sent
//! (framed by `sluice_proto::rtsp::read_message`), answers each request in order into an
//! [`Output`], and reports [`Event`]s for the engine (a session started or stopped playing, or was
//! released). Sessions live in a [`SessionTable`] that the engine owns next to its connections,
//! because a session outlives a request and, over UDP, may be used from a second connection of
//! the same client (ffmpeg and VLC send `TEARDOWN` on a new one). The table owns the session ids
//! (at least 64 random bits from the OS, bound to the connection that set them up), the session
//! timeout (a deadline the engine's timer checks with [`SessionTable::deadline`] and
//! [`SessionTable::expire`]) and the bounds on sessions and tracks. Time is an argument; nothing
//! here reads a clock, touches a socket or a file: files are found through the [`Catalogue`] the
//! server implements, and samples are read by the engine when a session's [`Streamer`] says so.
//!
//! Why this lives in `sluice-rtsp` (beside `sluice-media`) and not in `sluice-proto`: a session
//! is about an indexed MP4 (its tracks, SDP, sample tables and keyframes), and `sluice-proto` must
//! not depend on `sluice-media`. A trait in `sluice-proto` mirroring `Mp4File` would copy its
//! shape, and, since `sluice-proto` only reaches `sluice-media` as a dev-dependency, its tests
//! could not exercise the real implementation (the dev-dependency links a second copy of
//! `sluice-proto`, whose trait is a different one). So the direction is `sluice-rtsp` →
//! `sluice-media` → `sluice-proto`: the wire pieces (request framing, headers, replies,
//! packetizers, the viewer queue) stay in `sluice-proto`, and the state that ties them to media
//! is here.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtsp_types::headers;
use rtsp_types::{Method, Request, Url};
use sluice_proto::rtp::StreamConfig;
use sluice_proto::rtsp::{
    cseq, parse_range, parse_transport, read_message, session_id, ConnectionContext, Message, NptStart,
    Release, Reply, RtpInfoEntry, RtspError, StatusCode, TransportSpec,
};

use super::admission;
use super::live::LiveRegistry;
use super::playable::{checked, Refusal, Unplayable, REASON_HEADER};
use super::stream::{StreamTrack, Streamer};
pub use super::table::Event;
use super::table::{ConnectionId, Delivery, RtspSession, SessionId, SessionTable, SessionTrack};
use sluice_media::mp4::Mp4File;
use sluice_media::sdp::{payload_type, session_description, to_bytes, SdpOptions, TRACK_CONTROL};

/// The methods sluice answers (the `Public` header of `OPTIONS`).
pub const METHODS: [Method; 9] = [
    Method::Options,
    Method::Describe,
    Method::Setup,
    Method::Play,
    Method::Pause,
    Method::Teardown,
    Method::GetParameter,
    Method::Announce,
    Method::Record,
];

/// The presentation the URL names does not exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("no such presentation")]
pub struct NotFound;

/// Where the server's MP4 files come from.
pub trait Catalogue {
    /// The indexed file at the URL path `path` (as in the request, e.g. `/films/a.mp4`, still
    /// percent-encoded). The server decodes it and confines it to the media root, as for HTTP.
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound>;

    /// The indexed file at `path` if RTSP can stream it, else why not. The default is
    /// [`Catalogue::open`] (every failure a 404) then [`super::playable()`]; a catalogue that tells a
    /// missing file from one it cannot index answers [`Refusal::Unplayable`] with
    /// [`Unplayable::unreadable`] for the latter, so the client (and the log) learns why.
    fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        checked(self.open(path).map_err(|NotFound| Refusal::NotFound)?)
    }

    /// Whether `peer` may play the presentation at URL path `path`, given the request's method
    /// and URL (`url`, a track's for a `SETUP`: what a Digest response covers), the URL's query
    /// and its `Authorization` header: `Err(401 or 403)` when not. Asked on `DESCRIBE`, and on a
    /// `SETUP` of a path the connection was not already allowed. The default allows everyone.
    fn authorize(
        &self,
        _method: &str,
        _url: &str,
        _path: &str,
        _query: Option<&str>,
        _authorization: Option<&str>,
        _peer: std::net::IpAddr,
    ) -> Result<(), u16> {
        Ok(())
    }

    /// The `WWW-Authenticate` challenges of a 401 for `path`, one header line each: Basic
    /// (where a token can be the password) unless the catalogue offers more, e.g. Digest with
    /// a fresh nonce beside Basic.
    fn challenges(&self, _path: &str) -> Vec<String> {
        vec!["Basic realm=\"sluice\"".to_string()]
    }

    /// The live paths publishers may `ANNOUNCE` and viewers play ([`super::live`]); `None` (the
    /// default) takes no publishers. [`Catalogue::authorize`] is asked for `ANNOUNCE` with the
    /// method named, so a catalogue can require a right to publish.
    fn live(&self) -> Option<&LiveRegistry> {
        None
    }
}

/// How often a request held for a presentation the server is still fetching
/// ([`Refusal::Warming`]) is asked again: a few ticks of the loop, so a warm-up that finished is
/// seen within a frame's time, while a held request costs the loop a lookup now and then.
pub const WARM_RETRY: Duration = Duration::from_millis(20);
/// A request held this long for a presentation the server is still fetching is answered 504,
/// with the reason: the origin did not answer in time (the server's own origin timeout usually
/// answers first, with its reason).
pub const WARM_TIMEOUT: Duration = Duration::from_secs(30);

/// What a connection produced: replies to write in order, events, and whether to close once
/// the replies are written. The engine owns one and clears it after acting on it.
#[derive(Debug, Default)]
pub struct Output {
    /// Serialized responses, in request order.
    pub replies: Vec<u8>,
    /// Responses written into `replies` (one per request answered).
    pub answered: usize,
    /// Events, in order.
    pub events: Vec<Event>,
    /// Close the connection once `replies` are written.
    pub close: bool,
    /// The requests refused, each in context (its byte position and the connection), in order.
    pub refused: Vec<RtspError>,
    /// What each answered request was, for the access log (when [`RtspConfig::access_log`]).
    pub access: Vec<Answered>,
    /// Presentations refused because they cannot be streamed, by URL path, with why (the
    /// server logs each the first time, see [`super::playable::first_refusal`]).
    pub unplayable: Vec<(String, Unplayable)>,
}

/// One answered request, as the access log tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    /// The method, e.g. `SETUP`.
    pub method: String,
    /// The request URL.
    pub url: String,
    /// The response's status code.
    pub status: u16,
    /// The `Session` header of the request or its response.
    pub session: Option<String>,
    /// The `Transport` header of the response (SETUP).
    pub transport: Option<String>,
}

impl Output {
    /// Forgets what was acted on, keeping the memory.
    pub fn clear(&mut self) {
        self.replies.clear();
        self.answered = 0;
        self.events.clear();
        self.close = false;
        self.refused.clear();
        self.access.clear();
        self.unplayable.clear();
    }
}

/// The URL path of a presentation and, for a track URL (`.../trackID=N`, the `a=control` of
/// the SDP), the track.
fn split_url(url: &Url) -> (String, Option<Result<usize, RtspError>>) {
    let path = url.path().trim_end_matches('/');
    match path.rsplit_once('/') {
        Some((base, last)) if last.starts_with(TRACK_CONTROL) => {
            let track = last[TRACK_CONTROL.len()..].parse::<usize>().map_err(|_| RtspError::NotFound);
            (base.to_string(), Some(track))
        }
        _ => (path.to_string(), None),
    }
}

/// The answer to a request for `path`, which the catalogue refused: 404, or the refusal's status
/// with its reason in the [`REASON_HEADER`] header and a `text/plain` body (and noted in
/// [`Output::unplayable`] for the log).
fn refuse(x: &mut Exchange<'_>, path: String, refusal: Refusal) -> Result<Reply, RtspError> {
    let unplayable = match refusal {
        Refusal::NotFound => return Err(RtspError::NotFound),
        Refusal::Unplayable(u) => u,
        Refusal::Warming if x.give_up => Unplayable {
            status: 504,
            reason: format!("the origin did not answer within {}s", WARM_TIMEOUT.as_secs()),
        },
        Refusal::Warming => {
            // Held, not answered: this error is never written (see `RtspConnection::answer`).
            x.held = true;
            return Err(RtspError::NotFound);
        }
    };
    let status = StatusCode::from(unplayable.status);
    // One line: a header value cannot hold a line break, and a path may hold anything.
    let reason: String = format!("cannot stream {path} over RTSP: {}", unplayable.reason)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let body = format!("{} {status}: {reason}\n", unplayable.status).into_bytes();
    let header = headers::HeaderName::from_static_str(REASON_HEADER).expect("an ASCII header name");
    x.out.unplayable.push((path, unplayable));
    Ok(Reply::new(status, Some(x.cseq)).header(header, reason).body("text/plain; charset=utf-8", body))
}

/// What answering one request works with.
struct Exchange<'a> {
    request: &'a Request<Vec<u8>>,
    cseq: u32,
    now: Instant,
    table: &'a mut SessionTable,
    catalogue: &'a dyn Catalogue,
    out: &'a mut Output,
    /// The request waited [`WARM_TIMEOUT`] already: a presentation still warming is refused.
    give_up: bool,
    /// Set when the presentation is still warming: the request is held, nothing is answered.
    held: bool,
}

/// One RTSP control connection.
#[derive(Debug)]
pub struct RtspConnection {
    id: ConnectionId,
    peer: SocketAddr,
    /// Bytes of input consumed so far: where the next message starts in the connection's input.
    position: u64,
    /// Sessions set up on this connection (some may have expired from the table since).
    sessions: Vec<SessionId>,
    closed: bool,
    /// The last time a request or an interleaved frame arrived (or the connection opened).
    last_activity: Instant,
    /// The request at the head of the input is held for a presentation the server is still
    /// fetching ([`Refusal::Warming`]): since when, and when it was last asked again. The
    /// requests pipelined behind it wait their turn (replies go out in order).
    held: Option<(Instant, Instant)>,
    /// The paths this connection was allowed to play (by [`Catalogue::authorize`]), so that the
    /// `SETUP`s after a `DESCRIBE` with a signed URL need not carry it again.
    allowed: Vec<String>,
    /// What this connection publishes, once it sent an `ANNOUNCE`.
    publishing: Option<publish::Publishing>,
}

impl RtspConnection {
    /// A connection the engine calls `id`, from client address `peer`, accepted at `now`.
    pub fn new(id: ConnectionId, peer: SocketAddr, now: Instant) -> RtspConnection {
        RtspConnection {
            id,
            peer,
            position: 0,
            sessions: Vec::new(),
            closed: false,
            last_activity: now,
            held: None,
            allowed: Vec::new(),
            publishing: None,
        }
    }

    /// When the engine must call [`RtspConnection::receive`] again (with the same input) for the
    /// request held while its presentation warms, if one is.
    pub fn retry_at(&self) -> Option<Instant> {
        self.held.map(|(_, tried)| tried + WARM_RETRY)
    }

    /// Whether a request is held while its presentation warms (the input is not all answered).
    pub fn is_holding(&self) -> bool {
        self.held.is_some()
    }

    /// The connection as errors name it.
    pub fn context(&self) -> ConnectionContext {
        ConnectionContext { id: self.id.0, peer: self.peer }
    }

    /// When the engine closes the connection unless it has received something: a control
    /// connection idle for the session timeout has nothing left to keep alive (its sessions have
    /// timed out too), like an HTTP keep-alive timeout.
    pub fn deadline(&self, table: &SessionTable) -> Instant {
        match &self.publishing {
            // A publisher whose path another one took over is cut off.
            Some(p) if p.is_taken_over() => self.last_activity,
            // A publisher whose media flows is dropped after the stall deadline without a byte
            // (before its first packet, an encoder may take seconds to start).
            Some(p) if p.is_flowing() => self.last_activity + table.config.publish_stall,
            _ => self.last_activity + table.config.session_timeout,
        }
    }

    /// The engine's id of the connection.
    pub fn id(&self) -> ConnectionId {
        self.id
    }

    /// Whether no more requests will be read (the engine closes once the replies are out).
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// Answers the complete requests at the start of `buf` (at most
    /// [`RtspConfig::max_pipelined`]) into `out`; returns the bytes consumed, which the engine
    /// drops from its buffer. Call again with the rest once the replies are written; a result of
    /// 0 means the rest is an incomplete request (or the connection is closing). Interleaved
    /// frames the client sends (RTCP receiver reports) are consumed and refresh its sessions.
    pub fn receive(
        &mut self,
        buf: &[u8],
        now: Instant,
        table: &mut SessionTable,
        catalogue: &dyn Catalogue,
        out: &mut Output,
    ) -> usize {
        let mut consumed = 0;
        let mut answered = 0;
        if !buf.is_empty() {
            self.last_activity = now;
        }
        while !self.closed && answered < table.config.max_pipelined {
            let rest = &buf[consumed..];
            match read_message(rest, &table.config.limits) {
                Ok(Message::NeedMore) => break,
                Ok(Message::Interleaved { consumed: n, channel, payload }) => {
                    consumed += n;
                    if !self.published(channel, payload, now) {
                        self.touch_all(table, now);
                    }
                }
                Ok(Message::Complete(request, n)) => {
                    let at = self.position + consumed as u64;
                    if !self.answer(&request, at, now, table, catalogue, out) {
                        // Held: the request stays in the input, and so does what follows it.
                        let since = self.held.map_or(now, |(since, _)| since);
                        self.held = Some((since, now));
                        break;
                    }
                    self.held = None;
                    consumed += n;
                    answered += 1;
                }
                Err(e) => {
                    // Framing is lost: answer, then close without reading further.
                    let at = self.position + consumed as u64;
                    consumed = buf.len();
                    Reply::error(&e, None).write(&mut out.replies);
                    out.answered += 1;
                    out.refused.push(e.in_context(at, self.context()));
                    self.close(out);
                }
            }
        }
        self.position += consumed as u64;
        consumed
    }

    fn close(&mut self, out: &mut Output) {
        self.closed = true;
        out.close = true;
    }

    fn touch_all(&self, table: &mut SessionTable, now: Instant) {
        for id in &self.sessions {
            table.touch(*id, now);
        }
    }

    /// Answers `request` into `out`; false when it is held instead (its presentation is still
    /// warming), with nothing written.
    fn answer(
        &mut self,
        request: &Request<Vec<u8>>,
        at: u64,
        now: Instant,
        table: &mut SessionTable,
        catalogue: &dyn Catalogue,
        out: &mut Output,
    ) -> bool {
        let cseq = cseq(request);
        let give_up =
            self.held.is_some_and(|(since, _)| now.saturating_duration_since(since) >= WARM_TIMEOUT);
        let mut held = false;
        let reply = cseq.clone().and_then(|cseq| {
            let mut x =
                Exchange { request, cseq, now, table, catalogue, out: &mut *out, give_up, held: false };
            let reply = self.handle(&mut x);
            held = x.held;
            reply
        });
        if held {
            return false;
        }
        let reply = reply.unwrap_or_else(|e| {
            if e.closes_connection() {
                self.close(out);
            }
            let reply = Reply::error(&e, cseq.ok());
            out.refused.push(e.in_context(at, self.context()));
            reply
        });
        if table.config.access_log {
            let text = |v: Option<&rtsp_types::HeaderValue>| v.map(|v| v.as_str().to_string());
            out.access.push(Answered {
                method: <&str>::from(request.method()).to_string(),
                url: request.request_uri().map_or_else(|| "*".to_string(), |u| u.to_string()),
                status: reply.status(),
                session: text(reply.header_value(&rtsp_types::headers::SESSION))
                    .or_else(|| text(request.header(&rtsp_types::headers::SESSION))),
                transport: text(reply.header_value(&rtsp_types::headers::TRANSPORT)),
            });
        }
        reply.write(&mut out.replies);
        out.answered += 1;
        true
    }

    fn handle(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        let ok = || Reply::new(StatusCode::Ok, Some(x.cseq));
        match x.request.method() {
            Method::Options => {
                // A keep-alive some clients use: refresh the session if it names one of ours.
                if let Ok(id) = self.session(x.request, x.table) {
                    x.table.touch(id, x.now);
                }
                Ok(ok().public(&METHODS))
            }
            Method::GetParameter => match session_id(x.request)? {
                None => Ok(ok()),
                Some(_) => {
                    let id = self.session(x.request, x.table)?;
                    x.table.touch(id, x.now);
                    Ok(ok().session(&id.to_string(), x.table.config.session_timeout))
                }
            },
            Method::Announce => {
                if let Some(denied) = self.authorize(x)? {
                    return Ok(denied);
                }
                self.announce(x)
            }
            Method::Record => self.record(x),
            Method::Setup if self.is_publishing_setup(x) => self.setup_record(x),
            Method::Teardown if self.is_publishing_teardown(x) => self.stop_publishing(x),
            Method::Describe | Method::Setup => {
                if let Some(denied) = self.authorize(x)? {
                    return Ok(denied);
                }
                match x.request.method() {
                    Method::Describe => self.describe(x),
                    _ => self.setup(x),
                }
            }
            Method::Play => self.play(x),
            Method::Pause => {
                let id = self.session(x.request, x.table)?;
                x.table.touch(id, x.now);
                let timeout = x.table.config.session_timeout;
                let session = x.table.sessions.get_mut(&id).ok_or(RtspError::SessionNotFound)?;
                let streamer = session.streamer.as_mut().ok_or(RtspError::MethodNotValidInState)?;
                if streamer.is_playing() {
                    streamer.pause(x.now);
                    x.out.events.push(Event::Pause(id));
                }
                Ok(ok().session(&id.to_string(), timeout))
            }
            Method::Teardown => {
                let id = self.session(x.request, x.table)?;
                x.table.remove(id);
                self.sessions.retain(|s| *s != id);
                x.out.events.push(Event::Released(id, Release::Teardown));
                Ok(ok())
            }
            _ => Err(RtspError::NotImplemented),
        }
    }

    /// The session the request names, if this connection may use it. No `Session` header is
    /// 455 (the client has set nothing up yet, e.g. `PLAY` before `SETUP`); a session that does
    /// not exist, or is another client's, is 454 (the two are not told apart, so ids of other
    /// clients cannot be probed).
    fn session(&self, request: &Request<Vec<u8>>, table: &SessionTable) -> Result<SessionId, RtspError> {
        let raw = session_id(request)?.ok_or(RtspError::MethodNotValidInState)?;
        let id = SessionId::parse(raw).ok_or(RtspError::SessionNotFound)?;
        match table.sessions.get(&id) {
            Some(s) if s.usable_from(self.id, self.peer.ip()) => Ok(id),
            _ => Err(RtspError::SessionNotFound),
        }
    }

    /// The reply refusing the request when the catalogue does not allow its path (401 asks for
    /// credentials, as MediaMTX does, with the catalogue's challenge); `None` when allowed.
    fn authorize(&mut self, x: &mut Exchange<'_>) -> Result<Option<Reply>, RtspError> {
        let url = x.request.request_uri().ok_or(RtspError::NotFound)?;
        let (path, _) = split_url(url);
        // What a connection may play says nothing of what it may publish: an ANNOUNCE is asked
        // every time, and allows no reading.
        let publishing = x.request.method() == Method::Announce;
        if !publishing && self.allowed.contains(&path) {
            return Ok(None);
        }
        let authorization = x.request.header(&headers::AUTHORIZATION).map(|v| v.as_str());
        let method = <&str>::from(x.request.method());
        match x.catalogue.authorize(method, url.as_str(), &path, url.query(), authorization, self.peer.ip()) {
            Ok(()) => {
                // Bounded: a connection plays a few presentations, not thousands.
                if !publishing && self.allowed.len() < 16 {
                    self.allowed.push(path);
                }
                Ok(None)
            }
            Err(401) => {
                let mut reply = Reply::new(StatusCode::Unauthorized, Some(x.cseq));
                for (i, challenge) in x.catalogue.challenges(&path).into_iter().enumerate() {
                    reply = match i {
                        0 => reply.header(headers::WWW_AUTHENTICATE, challenge),
                        _ => reply.another_header(headers::WWW_AUTHENTICATE, challenge),
                    };
                }
                Ok(Some(reply))
            }
            Err(_) => Ok(Some(Reply::new(StatusCode::Forbidden, Some(x.cseq)))),
        }
    }

    fn describe(&self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        let url = x.request.request_uri().ok_or(RtspError::NotFound)?;
        let (path, track) = split_url(url);
        if track.is_some() {
            return Err(RtspError::NotFound);
        }
        let (file, live) = match publish::open_presentation(x, &path) {
            Ok((file, live)) => (file, live.is_some()),
            Err(refusal) => return refuse(x, path, refusal),
        };
        let options = SdpOptions { session_name: path, live, ..SdpOptions::default() };
        let sdp = to_bytes(&session_description(&file, &options));
        // Track URLs (`a=control:trackID=N`) resolve against Content-Base, which must end in '/'.
        // A signed URL's query stays off it: the tracks are set up on this connection, which
        // the DESCRIBE allowed.
        let mut unsigned = url.clone();
        unsigned.set_query(None);
        let mut base = unsigned.to_string();
        if !base.ends_with('/') {
            base.push('/');
        }
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq))
            .header(headers::CONTENT_BASE, base)
            .body("application/sdp", sdp))
    }

    fn setup(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        let url = x.request.request_uri().ok_or(RtspError::NotFound)?.clone();
        let (path, track) = split_url(&url);
        let spec = parse_transport(x.request)?;
        if matches!(spec, TransportSpec::Udp { .. }) && x.table.config.udp_server_ports.is_none() {
            return Err(RtspError::UnsupportedTransport);
        }
        // An existing session (a second track) or a new one.
        let existing = match session_id(x.request)? {
            Some(_) => Some(self.session(x.request, x.table)?),
            None => None,
        };
        let (file, live) = match existing {
            Some(id) => {
                let s = &x.table.sessions[&id];
                if s.path != path {
                    // One session aggregates the tracks of one presentation only.
                    return Err(RtspError::AggregateNotAllowed);
                }
                if s.streamer.is_some() {
                    return Err(RtspError::MethodNotValidInState);
                }
                if s.owner != self.id && matches!(spec, TransportSpec::Interleaved { .. }) {
                    // Interleaved packets travel on the owner's connection: a UDP session used
                    // from a second connection cannot gain a track on this one.
                    return Err(RtspError::SessionNotFound);
                }
                (s.file.clone(), None)
            }
            None => {
                self.sessions.retain(|id| x.table.sessions.contains_key(id));
                admission::new_session(x.table, self.sessions.len(), self.peer.ip())?;
                match publish::open_presentation(x, &path) {
                    Ok(found) => found,
                    Err(refusal) => return refuse(x, path, refusal),
                }
            }
        };
        let index = match track {
            Some(t) => t?,
            // The aggregate URL names a track only when there is exactly one.
            None if file.tracks.len() == 1 => 0,
            None => return Err(RtspError::AggregateNotAllowed),
        };
        if file.tracks.get(index).is_none_or(|t| sluice_media::sdp::rtp_payload_format(t).is_err()) {
            return Err(RtspError::NotFound);
        }
        let (delivery, reply_spec) = match spec {
            TransportSpec::Udp { client_rtp, client_rtcp } => (
                Delivery::Udp {
                    rtp: SocketAddr::new(self.peer.ip(), client_rtp),
                    rtcp: SocketAddr::new(self.peer.ip(), client_rtcp),
                },
                spec,
            ),
            TransportSpec::Interleaved { channels } => {
                let (rtp, rtcp) = self.free_channels(x.table, channels)?;
                (
                    Delivery::Interleaved { rtp, rtcp },
                    TransportSpec::Interleaved { channels: Some((rtp, rtcp)) },
                )
            }
        };
        let r = x.table.random();
        let stream = StreamTrack {
            index,
            config: StreamConfig {
                ssrc: r as u32,
                payload_type: payload_type(index),
                initial_sequence: (r >> 32) as u16,
            },
            timestamp_offset: x.table.random() as u32,
        };
        let id = match existing {
            Some(id) => id,
            None => {
                admission::take_place(x.table)?;
                let id = x.table.new_id();
                x.table.sessions.insert(
                    id,
                    RtspSession {
                        id,
                        owner: self.id,
                        peer: self.peer.ip(),
                        path,
                        file,
                        tracks: Vec::new(),
                        streamer: None,
                        deadline: x.now,
                        live,
                    },
                );
                self.sessions.push(id);
                x.out.events.push(Event::Created(id));
                id
            }
        };
        let max_tracks = x.table.config.max_tracks_per_session;
        let timeout = x.table.config.session_timeout;
        let session = x.table.sessions.get_mut(&id).expect("inserted or found above");
        let new_track = SessionTrack { url, delivery, stream };
        // SETUP of a track already set up changes its transport (RFC 2326 §10.4).
        match session.tracks.iter().position(|t| t.stream.index == index) {
            Some(i) => session.tracks[i] = new_track,
            None if session.tracks.len() >= max_tracks => return Err(RtspError::Overloaded),
            None => session.tracks.push(new_track),
        }
        session.deadline = x.now + timeout;
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq)).session(&id.to_string(), timeout).transport(
            &reply_spec,
            x.table.config.udp_server_ports.filter(|_| matches!(delivery, Delivery::Udp { .. })),
            stream.config.ssrc,
        ))
    }

    /// Interleaved channels for a new track: the client's choice if no track on this connection
    /// uses them, else the lowest free even pair.
    fn free_channels(&self, table: &SessionTable, wanted: Option<(u8, u8)>) -> Result<(u8, u8), RtspError> {
        let used: Vec<u8> = self
            .sessions
            .iter()
            .filter_map(|id| table.sessions.get(id))
            .flat_map(|s| &s.tracks)
            .filter_map(|t| match t.delivery {
                Delivery::Interleaved { rtp, rtcp } => Some([rtp, rtcp]),
                Delivery::Udp { .. } => None,
            })
            .flatten()
            .collect();
        if let Some((a, b)) = wanted {
            if a != b && !used.contains(&a) && !used.contains(&b) {
                return Ok((a, b));
            }
        }
        (0..=254u8)
            .step_by(2)
            .find(|c| !used.contains(c) && !used.contains(&(c + 1)))
            .map(|c| (c, c + 1))
            .ok_or(RtspError::Overloaded)
    }

    fn play(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        let id = match self.session(x.request, x.table) {
            Ok(id) => id,
            Err(e) => {
                // No session can exist for a file that cannot be streamed: say why rather than
                // 455 or 454 (a client that skipped DESCRIBE, or ignored its answer).
                let path = x.request.request_uri().map(|url| split_url(url).0);
                if let Some(path) = path {
                    if let Err(refusal @ Refusal::Unplayable(_)) = x.catalogue.open_playable(&path) {
                        return refuse(x, path, refusal);
                    }
                }
                return Err(e);
            }
        };
        let range = parse_range(x.request)?;
        let max_payload = x.table.config.max_payload;
        let timeout = x.table.config.session_timeout;
        let starting =
            x.table.sessions.get(&id).is_some_and(|s| s.streamer.is_none() && !s.tracks.is_empty());
        if starting {
            admission::first_play(x.table)?;
        }
        let session = x.table.sessions.get_mut(&id).ok_or(RtspError::SessionNotFound)?;
        session.deadline = x.now + timeout;
        if session.tracks.is_empty() {
            return Err(RtspError::MethodNotValidInState);
        }
        if session.streamer.is_none() {
            let specs: Vec<StreamTrack> = session.tracks.iter().map(|t| t.stream).collect();
            let streamer = Streamer::new(session.file.clone(), &specs, max_payload)
                .map_err(|_| RtspError::MethodNotValidInState)?;
            session.streamer = Some(streamer);
        }
        let duration = Duration::try_from_secs_f64(session.file.duration_secs()).unwrap_or(Duration::ZERO);
        let live = session.live.is_some();
        let streamer = session.streamer.as_mut().expect("created above");
        let range = if live { None } else { range };
        let (start, end) = match range {
            Some(r) => match r.start {
                NptStart::At(at) => {
                    if at > duration {
                        return Err(RtspError::InvalidRange);
                    }
                    (Some(at), r.end)
                }
                NptStart::Now => (None, r.end),
            },
            None => (None, None),
        };
        let position = match (start, end) {
            (Some(at), end) => streamer.seek(at, end),
            (None, Some(end)) => {
                let here = streamer.position(x.now);
                streamer.seek(here, Some(end))
            }
            // A live stream starts at its latest keyframe, once; a second PLAY resumes.
            (None, None) if live && starting => streamer.seek_live(),
            (None, None) => streamer.position(x.now),
        };
        let was_playing = streamer.is_playing();
        streamer.play(x.now);
        if !was_playing {
            x.out.events.push(Event::Play(id));
        }
        let infos: Vec<RtpInfoEntry> = session
            .tracks
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let (seq, rtptime) = streamer.rtp_info(i, position)?;
                Some(RtpInfoEntry { url: t.url.clone(), seq, rtptime })
            })
            .collect();
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq))
            .session(&id.to_string(), timeout)
            .range(position, end)
            .rtp_info(&infos))
    }
}

mod publish;
#[cfg(test)]
mod tests;
