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
//! Why this lives in `sluice-media` and not in `sluice-proto`: a session is about an indexed MP4
//! (its tracks, SDP, sample tables and keyframes), and `sluice-proto` must not depend on
//! `sluice-media`. A trait in `sluice-proto` mirroring `Mp4File` would copy its shape, and, since
//! `sluice-proto` only reaches `sluice-media` as a dev-dependency, its tests could not exercise
//! the real implementation (the dev-dependency links a second copy of `sluice-proto`, whose trait
//! is a different one). So the direction is `sluice-media` → `sluice-proto`: the wire pieces
//! (request framing, headers, replies, packetizers, the viewer queue) stay in `sluice-proto`, and
//! the state that ties them to media is here.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rtsp_types::headers;
use rtsp_types::{Method, Request, Url};
use sluice_proto::rtp::StreamConfig;
use sluice_proto::rtsp::{
    cseq, parse_range, parse_transport, read_message, session_id, ConnectionContext, Limits, Message,
    NptStart, Release, Reply, RtpInfoEntry, RtspError, StatusCode, TransportSpec,
};

use super::playable::{checked, Refusal, Unplayable, REASON_HEADER};
use super::stream::{StreamTrack, Streamer};
use crate::mp4::Mp4File;
use crate::sdp::{payload_type, session_description, to_bytes, SdpOptions};

/// The methods sluice answers (the `Public` header of `OPTIONS`).
pub const METHODS: [Method; 7] = [
    Method::Options,
    Method::Describe,
    Method::Setup,
    Method::Play,
    Method::Pause,
    Method::Teardown,
    Method::GetParameter,
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
    /// (which a Digest response covers), the URL's query and its `Authorization` header:
    /// `Err(401 or 403)` when not. Asked on `DESCRIBE`, and on a `SETUP` of a path the
    /// connection was not already allowed. The default allows everyone.
    fn authorize(
        &self,
        _method: &str,
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
}

/// What the server does when one more viewer would take more than the RTSP loop has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overload {
    /// Answer the newcomer's `SETUP` (or first `PLAY`) with 453 Not Enough Bandwidth, so the
    /// viewers already playing keep every packet.
    Refuse,
    /// Admit everyone up to [`RtspConfig::max_viewers`]; when the loop falls behind, every late
    /// viewer drops whole frames up to its next keyframe, so the loss is shared evenly. The
    /// default: admission by load is a choice of the operator's (a debug build or a busy machine
    /// makes the loop look loaded).
    #[default]
    Degrade,
}

/// How often a request held for a presentation the server is still fetching
/// ([`Refusal::Warming`]) is asked again: a few ticks of the loop, so a warm-up that finished is
/// seen within a frame's time, while a held request costs the loop a lookup now and then.
pub const WARM_RETRY: Duration = Duration::from_millis(20);
/// A request held this long for a presentation the server is still fetching is answered 504,
/// with the reason: the origin did not answer in time (the server's own origin timeout usually
/// answers first, with its reason).
pub const WARM_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings and bounds of the RTSP side.
#[derive(Debug, Clone)]
pub struct RtspConfig {
    /// A session without a request (or RTCP report) for this long is released; the `Session`
    /// header tells clients (RFC 2326 §12.37).
    pub session_timeout: Duration,
    /// Size limits of one request.
    pub limits: Limits,
    /// Requests answered per [`RtspConnection::receive`] call; the rest wait until the engine
    /// has written the replies and calls again, so a pipelining client cannot queue unbounded
    /// replies.
    pub max_pipelined: usize,
    /// Sessions one connection may hold.
    pub max_sessions_per_connection: usize,
    /// Sessions in the table in all.
    pub max_sessions: usize,
    /// Sessions one client address may hold (0: no limit); one more is refused with 503. A
    /// client's connections all meet on one loop (they are spread by address), so the loop's
    /// table counts them all.
    pub max_sessions_per_ip: usize,
    /// Tracks one session may set up.
    pub max_tracks_per_session: usize,
    /// The server's RTP and RTCP UDP ports (the engine's shared sockets), `None` to refuse UDP
    /// with 461 so clients fall back to TCP.
    pub udp_server_ports: Option<(u16, u16)>,
    /// Largest RTP payload (the path MTU minus IP, UDP and RTP headers).
    pub max_payload: usize,
    /// Whether each answered request is recorded in [`Output::access`] for the access log.
    pub access_log: bool,
    /// Viewers (sessions) served at once at most: one more is answered 453, whatever the load.
    pub max_viewers: usize,
    /// What to do when the loop's headroom runs out.
    pub overload: Overload,
}

impl Default for RtspConfig {
    fn default() -> Self {
        RtspConfig {
            session_timeout: Duration::from_secs(60),
            limits: Limits::default(),
            max_pipelined: 16,
            max_sessions_per_connection: 8,
            max_sessions: 10_000,
            max_sessions_per_ip: 0,
            max_tracks_per_session: 8,
            udp_server_ports: Some((6970, 6971)),
            max_payload: 1400,
            access_log: false,
            max_viewers: 10_000,
            overload: Overload::Degrade,
        }
    }
}

/// A session id: 64 random bits, written as 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(pub u64);

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl SessionId {
    /// The id a `Session` header names, if it is one sluice could have issued.
    pub fn parse(s: &str) -> Option<SessionId> {
        // Exactly 16 hex digits: anything else cannot be ours, and need not be looked up.
        if s.len() != 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u64::from_str_radix(s, 16).ok().map(SessionId)
    }
}

/// The engine's name for a control connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnectionId(pub u64);

/// Where a track's packets go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// UDP datagrams from the server's RTP/RTCP ports to these client addresses.
    Udp {
        /// The client's RTP address.
        rtp: SocketAddr,
        /// The client's RTCP address.
        rtcp: SocketAddr,
    },
    /// Interleaved frames on the control connection, on these channels.
    Interleaved {
        /// Channel of RTP packets.
        rtp: u8,
        /// Channel of RTCP packets.
        rtcp: u8,
    },
}

/// One track of a session.
#[derive(Debug, Clone)]
pub struct SessionTrack {
    /// The URL the `SETUP` used (`RTP-Info` names it).
    pub url: Url,
    /// Where its packets go.
    pub delivery: Delivery,
    /// Which track of the file, and its RTP identity.
    pub stream: StreamTrack,
}

/// One RTSP session: a file, the tracks set up, and once played, its [`Streamer`].
#[derive(Debug)]
pub struct RtspSession {
    id: SessionId,
    owner: ConnectionId,
    peer: IpAddr,
    path: String,
    file: Arc<Mp4File>,
    tracks: Vec<SessionTrack>,
    streamer: Option<Streamer>,
    deadline: Instant,
}

impl RtspSession {
    /// The session's id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The connection that set it up.
    pub fn owner(&self) -> ConnectionId {
        self.owner
    }

    /// The URL path of the presentation, as the [`Catalogue`] was asked for it.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The file it plays.
    pub fn file(&self) -> &Arc<Mp4File> {
        &self.file
    }

    /// Its tracks, in the order of their `SETUP`s ([`super::Due::track`] indexes this).
    pub fn tracks(&self) -> &[SessionTrack] {
        &self.tracks
    }

    /// Its pacing state, once it has been played.
    pub fn streamer_mut(&mut self) -> Option<&mut Streamer> {
        self.streamer.as_mut()
    }

    /// Whether it is sending.
    pub fn is_playing(&self) -> bool {
        self.streamer.as_ref().is_some_and(Streamer::is_playing)
    }

    /// When it times out unless a request or report refreshes it.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether a request on `conn` from `peer` may use it: the connection that set it up, or,
    /// when all of its tracks go over UDP, any connection from the same client address.
    fn usable_from(&self, conn: ConnectionId, peer: IpAddr) -> bool {
        self.owner == conn
            || (self.peer == peer && self.tracks.iter().all(|t| matches!(t.delivery, Delivery::Udp { .. })))
    }
}

/// What the engine must act on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A session was set up (count it; nothing to send yet).
    Created(SessionId),
    /// The session plays: ask its streamer what is due now and at its next wake-up.
    Play(SessionId),
    /// The session paused: stop waking for it.
    Pause(SessionId),
    /// The session is gone: drop its queue and timers.
    Released(SessionId, Release),
}

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

/// The sessions every RTSP loop's [`SessionTable`] holds, counted against
/// [`RtspConfig::max_viewers`]: with several loops the bound is the server's, not each loop's, so
/// the tables take and give back places here (an atomic count, no lock) rather than comparing
/// their own sizes.
#[derive(Debug)]
pub struct ViewerBudget {
    max: usize,
    held: AtomicUsize,
}

impl ViewerBudget {
    /// A budget of `max` sessions, none held.
    pub fn new(max: usize) -> Arc<ViewerBudget> {
        Arc::new(ViewerBudget { max, held: AtomicUsize::new(0) })
    }

    /// Sessions held now, over every table sharing it.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether no place is left.
    fn is_full(&self) -> bool {
        self.held() >= self.max
    }

    /// Takes a place; `false` when all `max` are held.
    fn take(&self) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1))
            .is_ok()
    }

    fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Random numbers for ids, SSRCs, sequence numbers and timestamp offsets.
type Entropy = Box<dyn FnMut() -> u64 + Send>;

/// All sessions of one engine worker (or of the whole server), by id.
pub struct SessionTable {
    config: RtspConfig,
    sessions: HashMap<SessionId, RtspSession>,
    entropy: Entropy,
    /// Viewers the loop says it can carry now (its headroom), below `config.max_viewers`.
    room: usize,
    /// The places of `config.max_viewers`, shared with the other loops' tables.
    budget: Arc<ViewerBudget>,
}

impl Drop for SessionTable {
    fn drop(&mut self) {
        self.budget.give_back(self.sessions.len());
    }
}

impl fmt::Debug for SessionTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionTable")
            .field("config", &self.config)
            .field("sessions", &self.sessions)
            .finish()
    }
}

impl SessionTable {
    /// An empty table whose random numbers (session ids, SSRCs, initial sequence numbers and
    /// timestamps) come from `entropy`: a server passes the OS random number generator (ids must
    /// be unguessable; reading it is a system call, so the engine does it), tests and fuzzing a
    /// reproducible sequence.
    pub fn with_entropy(config: RtspConfig, entropy: impl FnMut() -> u64 + Send + 'static) -> SessionTable {
        let budget = ViewerBudget::new(config.max_viewers);
        SessionTable {
            config,
            sessions: HashMap::new(),
            entropy: Box::new(entropy),
            room: usize::MAX,
            budget,
        }
    }

    /// The same table drawing its sessions from `budget` (shared by every loop's table, so
    /// [`RtspConfig::max_viewers`] bounds the server) instead of a budget of its own.
    pub fn sharing(mut self, budget: Arc<ViewerBudget>) -> SessionTable {
        self.budget.give_back(self.sessions.len());
        for _ in 0..self.sessions.len() {
            budget.take();
        }
        self.budget = budget;
        self
    }

    /// The budget this table draws from.
    pub fn budget(&self) -> &Arc<ViewerBudget> {
        &self.budget
    }

    /// How many viewers the loop can carry now, from its measured headroom: a new session
    /// beyond it (or beyond [`RtspConfig::max_viewers`]) is refused with 453, and so is the
    /// first `PLAY` of a session beyond it.
    pub fn set_room(&mut self, viewers: usize) {
        self.room = viewers;
    }

    /// Viewers admitted at most now: the smaller of the room and the configured bound.
    pub fn admits(&self) -> usize {
        self.room.min(self.config.max_viewers)
    }

    /// Sessions whose streams have started (played at least once).
    pub fn started(&self) -> usize {
        self.sessions.values().filter(|s| s.streamer.is_some()).count()
    }

    /// The settings.
    pub fn config(&self) -> &RtspConfig {
        &self.config
    }

    /// Sessions held.
    pub fn len(&self) -> usize {
        self.sessions.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// A session.
    pub fn get(&self, id: SessionId) -> Option<&RtspSession> {
        self.sessions.get(&id)
    }

    /// A session, to drive its streamer.
    pub fn get_mut(&mut self, id: SessionId) -> Option<&mut RtspSession> {
        self.sessions.get_mut(&id)
    }

    /// The sessions, e.g. to find those playing.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut RtspSession> {
        self.sessions.values_mut()
    }

    /// Refreshes a session's timeout, e.g. when an RTCP receiver report arrives for it over UDP.
    pub fn touch(&mut self, id: SessionId, now: Instant) {
        let timeout = self.config.session_timeout;
        if let Some(s) = self.sessions.get_mut(&id) {
            s.deadline = now + timeout;
        }
    }

    /// The earliest session deadline: the engine calls [`SessionTable::expire`] then.
    pub fn deadline(&self) -> Option<Instant> {
        self.sessions.values().map(|s| s.deadline).min()
    }

    /// Releases the sessions whose deadline has passed at `now`.
    pub fn expire(&mut self, now: Instant, events: &mut Vec<Event>) {
        self.release_where(|s| s.deadline <= now, Release::Timeout, events);
    }

    /// The control connection `conn` closed: its interleaved sessions go at once (nothing can
    /// reach the client any more); its UDP sessions stay until they time out, since the client
    /// may come back on another connection.
    pub fn connection_closed(&mut self, conn: ConnectionId, events: &mut Vec<Event>) {
        self.release_where(
            |s| {
                s.owner == conn && s.tracks.iter().any(|t| matches!(t.delivery, Delivery::Interleaved { .. }))
            },
            Release::ConnectionClosed,
            events,
        );
    }

    fn release_where(&mut self, f: impl Fn(&RtspSession) -> bool, why: Release, events: &mut Vec<Event>) {
        let mut gone: Vec<SessionId> = self.sessions.values().filter(|s| f(s)).map(|s| s.id).collect();
        // Sorted so the events do not depend on the hash map's order.
        gone.sort_by_key(|id| id.0);
        for id in gone {
            self.remove(id);
            events.push(Event::Released(id, why));
        }
    }

    /// Removes a session and gives its place back.
    fn remove(&mut self, id: SessionId) -> Option<RtspSession> {
        let gone = self.sessions.remove(&id);
        if gone.is_some() {
            self.budget.give_back(1);
        }
        gone
    }

    fn random(&mut self) -> u64 {
        (self.entropy)()
    }

    /// A fresh id no session has.
    fn new_id(&mut self) -> SessionId {
        loop {
            let id = SessionId(self.random());
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}

/// The URL path of a presentation and, for a track URL (`.../trackID=N`, the `a=control` of
/// the SDP), the track.
fn split_url(url: &Url) -> (String, Option<Result<usize, RtspError>>) {
    let path = url.path().trim_end_matches('/');
    match path.rsplit_once('/') {
        Some((base, last)) if last.starts_with("trackID=") => {
            let track = last["trackID=".len()..].parse::<usize>().map_err(|_| RtspError::NotFound);
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
        self.last_activity + table.config.session_timeout
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
                Ok(Message::Interleaved { consumed: n, .. }) => {
                    consumed += n;
                    self.touch_all(table, now);
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
        if self.allowed.contains(&path) {
            return Ok(None);
        }
        let authorization = x.request.header(&headers::AUTHORIZATION).map(|v| v.as_str());
        let method = <&str>::from(x.request.method());
        match x.catalogue.authorize(method, &path, url.query(), authorization, self.peer.ip()) {
            Ok(()) => {
                // Bounded: a connection plays a few presentations, not thousands.
                if self.allowed.len() < 16 {
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
        let file = match x.catalogue.open_playable(&path) {
            Ok(file) => file,
            Err(refusal) => return refuse(x, path, refusal),
        };
        let options = SdpOptions { session_name: path, ..SdpOptions::default() };
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
        let file = match existing {
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
                s.file.clone()
            }
            None => {
                self.sessions.retain(|id| x.table.sessions.contains_key(id));
                if self.sessions.len() >= x.table.config.max_sessions_per_connection
                    || x.table.sessions.len() >= x.table.config.max_sessions
                {
                    return Err(RtspError::Overloaded);
                }
                let per_ip = x.table.config.max_sessions_per_ip;
                if per_ip > 0
                    && x.table.sessions.values().filter(|s| s.peer == self.peer.ip()).count() >= per_ip
                {
                    return Err(RtspError::Overloaded);
                }
                // This loop's room, then the server's bound (taken for real below, when the
                // session is inserted: the other loops may have taken the last place since).
                if x.table.sessions.len() >= x.table.room.min(x.table.config.max_viewers)
                    || x.table.budget.is_full()
                {
                    return Err(RtspError::NotEnoughBandwidth);
                }
                match x.catalogue.open_playable(&path) {
                    Ok(file) => file,
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
        if index >= file.tracks.len() {
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
                if !x.table.budget.take() {
                    return Err(RtspError::NotEnoughBandwidth);
                }
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
        // The room may have shrunk since this session's SETUP: the streams already started come
        // first.
        if starting && x.table.started() >= x.table.admits() {
            return Err(RtspError::NotEnoughBandwidth);
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
        let streamer = session.streamer.as_mut().expect("created above");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mp4::TrackKind;
    use rtsp_types::headers::{RtpInfos, Transport, Transports};
    use rtsp_types::Response;
    use sluice_proto::rtp::{AacAccessUnits, H264Depacketizer, Packets, RtpPacket};

    const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    const URL: &str = "rtsp://127.0.0.1:8554/sluice-demo.mp4";

    struct Demo(Arc<Mp4File>);

    impl Catalogue for Demo {
        fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
            if path == "/sluice-demo.mp4" {
                Ok(self.0.clone())
            } else {
                Err(NotFound)
            }
        }
    }

    fn demo() -> Demo {
        Demo(Arc::new(Mp4File::open(DEMO).unwrap()))
    }

    fn counter() -> impl FnMut() -> u64 + Send {
        let mut n = 0x1234_5678_9abc_def0u64;
        move || {
            n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            n
        }
    }

    /// The demo catalogue, a table with reproducible ids, and a start time.
    fn fixture() -> (Demo, SessionTable, Instant) {
        (demo(), table(), Instant::now())
    }

    fn play(id: &str) -> String {
        format!("PLAY {URL} RTSP/1.0\r\nCSeq: 9\r\nSession: {id}\r\n\r\n")
    }

    /// A SETUP of `url`, in `session` if given, asking for `transport`.
    fn setup(url: &str, session: Option<&str>, transport: &str) -> String {
        let session = session.map(|s| format!("Session: {s}\r\n")).unwrap_or_default();
        format!("SETUP {url} RTSP/1.0\r\nCSeq: 3\r\n{session}Transport: {transport}\r\n\r\n")
    }

    fn table() -> SessionTable {
        SessionTable::with_entropy(RtspConfig::default(), counter())
    }

    /// One client connection: sends requests, returns the parsed responses.
    struct Client {
        conn: RtspConnection,
        out: Output,
        events: Vec<Event>,
    }

    impl Client {
        fn new(id: u64, ip: [u8; 4]) -> Client {
            Client {
                conn: RtspConnection::new(ConnectionId(id), SocketAddr::from((ip, 40000)), Instant::now()),
                out: Output::default(),
                events: Vec::new(),
            }
        }

        fn send_raw(
            &mut self,
            bytes: &[u8],
            now: Instant,
            table: &mut SessionTable,
            cat: &Demo,
        ) -> Vec<Response<Vec<u8>>> {
            let mut pending = bytes.to_vec();
            let mut responses = Vec::new();
            loop {
                self.out.clear();
                let used = self.conn.receive(&pending, now, table, cat, &mut self.out);
                pending.drain(..used);
                self.events.append(&mut self.out.events);
                responses.extend(parse_responses(&self.out.replies));
                if used == 0 || self.out.close {
                    break;
                }
            }
            responses
        }

        fn send(
            &mut self,
            text: &str,
            now: Instant,
            table: &mut SessionTable,
            cat: &Demo,
        ) -> Response<Vec<u8>> {
            let mut r = self.send_raw(text.as_bytes(), now, table, cat);
            assert_eq!(r.len(), 1, "{text}");
            r.pop().unwrap()
        }
    }

    fn parse_responses(mut bytes: &[u8]) -> Vec<Response<Vec<u8>>> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            match rtsp_types::Message::<Vec<u8>>::parse(bytes).expect("our replies parse") {
                (rtsp_types::Message::Response(r), n) => {
                    out.push(r);
                    bytes = &bytes[n..];
                }
                other => panic!("{other:?}"),
            }
        }
        out
    }

    fn status(r: &Response<Vec<u8>>) -> u16 {
        u16::from(r.status())
    }

    fn header<'a>(r: &'a Response<Vec<u8>>, name: &headers::HeaderName) -> &'a str {
        r.header(name).map(|v| v.as_str()).unwrap_or_else(|| panic!("no {name} in {r:?}"))
    }

    fn session_of(r: &Response<Vec<u8>>) -> String {
        let v = header(r, &headers::SESSION);
        assert!(v.ends_with(";timeout=60"), "{v}");
        v.split(';').next().unwrap().to_string()
    }

    fn video_audio(file: &Mp4File) -> (usize, usize) {
        let v = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::H264(_))).unwrap();
        let a = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::Aac(_))).unwrap();
        (v, a)
    }

    #[test]
    fn scripted_exchange_delivers_every_access_unit_in_order() {
        let cat = demo();
        let file = cat.0.clone();
        let data = std::fs::read(DEMO).unwrap();
        let (video, audio) = video_audio(&file);
        let mut table = table();
        let mut c = Client::new(1, [127, 0, 0, 1]);
        let t0 = Instant::now();

        let r = c.send("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n", t0, &mut table, &cat);
        assert_eq!(status(&r), 200);
        assert_eq!(header(&r, &headers::CSEQ), "1");
        assert!(header(&r, &headers::PUBLIC).contains("PLAY"));

        let r = c.send(
            &format!("DESCRIBE {URL} RTSP/1.0\r\nCSeq: 2\r\nAccept: application/sdp\r\n\r\n"),
            t0,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 200);
        assert_eq!(header(&r, &headers::CONTENT_TYPE), "application/sdp");
        let base = header(&r, &headers::CONTENT_BASE).to_string();
        assert_eq!(base, format!("{URL}/"));
        let sdp = sdp_types::Session::parse(r.body()).unwrap();
        let controls: Vec<String> = sdp
            .medias
            .iter()
            .map(|m| m.get_first_attribute_value("control").unwrap().unwrap().to_string())
            .collect();
        assert_eq!(controls.len(), file.tracks.len());

        let udp = |port: u16| format!("RTP/AVP;unicast;client_port={port}-{}", port + 1);
        let track_url = |track: usize| format!("{base}{}", controls[track]);
        let r = c.send(&setup(&track_url(video), None, &udp(5000)), t0, &mut table, &cat);
        assert_eq!(status(&r), 200, "{r:?}");
        let id = session_of(&r);
        assert_eq!(id.len(), 16);
        let transport = r.typed_header::<Transports>().unwrap().unwrap();
        let Transport::Rtp(rtp) = &transport[0] else { panic!() };
        assert_eq!(rtp.params.server_port, Some((6970, Some(6971))));
        assert_eq!(rtp.params.client_port, Some((5000, Some(5001))));
        let r = c.send(&setup(&track_url(audio), Some(&id), &udp(5002)), t0, &mut table, &cat);
        assert_eq!(status(&r), 200, "{r:?}");
        assert_eq!(session_of(&r), id);
        assert_eq!(c.events, [Event::Created(SessionId::parse(&id).unwrap())]);

        let r = c.send(
            &format!("PLAY {URL} RTSP/1.0\r\nCSeq: 5\r\nSession: {id}\r\nRange: npt=0-\r\n\r\n"),
            t0,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 200, "{r:?}");
        let sid = SessionId::parse(&id).unwrap();
        assert_eq!(c.events.last(), Some(&Event::Play(sid)));
        let Some(RtpInfos::V1(infos)) = r.typed_header::<RtpInfos>().unwrap() else { panic!() };
        assert_eq!(infos.len(), 2);
        assert_eq!(infos[0].uri.as_str(), format!("{base}{}", controls[video]));
        let (v_seq, v_rtptime) = (infos[0].seq.unwrap(), infos[0].rtptime.unwrap());
        let (a_seq, a_rtptime) = (infos[1].seq.unwrap(), infos[1].rtptime.unwrap());

        // The engine's loop: wake, read what is due, packetize, "send" (depacketize here).
        let session = table.get_mut(sid).unwrap();
        assert!(session.is_playing());
        assert!(matches!(session.tracks()[0].delivery, Delivery::Udp { rtp, .. } if rtp.port() == 5000));
        let streamer = session.streamer_mut().unwrap();
        let mut depack = H264Depacketizer::new(1 << 22);
        let (mut video_aus, mut audio_frames) = (0usize, 0usize);
        let (mut next_v_seq, mut next_a_seq) = (v_seq, a_seq);
        let mut packets = Packets::new();
        let mut due = Vec::new();
        let mut now = t0;
        let mut reports = 0;
        let vt = &file.tracks[video];
        let at = &file.tracks[audio];
        let rate = |t: &crate::mp4::Track, i: usize, clock: u64| {
            let s = t.samples[i];
            ((i128::from(s.composition_time()) - i128::from(t.edit_start)) * i128::from(clock)
                / i128::from(t.timescale)) as u32
        };
        while let Some(wake) = streamer.next_wake() {
            now = now.max(wake);
            due.clear();
            streamer.due(now, &mut due);
            // RTCP every 5 s of a stream's life, one per track.
            let mut rtcp = Vec::new();
            streamer.sender_reports(now, Duration::from_secs(1_700_000_000), "sluice", &mut rtcp);
            reports += rtcp.len();
            for d in &due {
                assert!(d.time <= now - t0, "sent early");
                let bytes = &data[d.offset as usize..][..d.size as usize];
                packets.clear();
                streamer.packetize(d, bytes, &mut packets).unwrap();
                for p in packets.iter() {
                    let p = RtpPacket::parse(p).unwrap();
                    if d.track == 0 {
                        assert_eq!(p.sequence, next_v_seq);
                        next_v_seq = next_v_seq.wrapping_add(1);
                        if let Some(au) = depack.push(&p).unwrap() {
                            assert_eq!(d.sample, video_aus);
                            assert_eq!(au.data, bytes, "access unit {video_aus}");
                            assert_eq!(au.timestamp, v_rtptime.wrapping_add(rate(vt, video_aus, 90_000)));
                            video_aus += 1;
                        }
                    } else {
                        assert_eq!(p.sequence, next_a_seq);
                        next_a_seq = next_a_seq.wrapping_add(1);
                        let frames: Vec<&[u8]> = AacAccessUnits::parse(&p).unwrap().collect();
                        assert_eq!(frames, [bytes]);
                        let clock = match &at.kind {
                            TrackKind::Aac(a) => u64::from(a.sample_rate),
                            TrackKind::H264(_) => unreachable!(),
                        };
                        assert_eq!(p.timestamp, a_rtptime.wrapping_add(rate(at, audio_frames, clock)));
                        audio_frames += 1;
                    }
                }
            }
        }
        assert!(streamer.is_done());
        let secs = (now - t0).as_secs() as usize;
        assert_eq!(reports, 2 * (secs / 5 + 1), "after {secs} s");
        assert_eq!(video_aus, vt.samples.len());
        assert_eq!(audio_frames, at.samples.len());
        assert_eq!(depack.lost_packets(), 0);

        // Keep-alive, then TEARDOWN releases everything.
        let later = now + Duration::from_secs(30);
        let r = c.send(
            &format!("GET_PARAMETER {URL} RTSP/1.0\r\nCSeq: 6\r\nSession: {id}\r\n\r\n"),
            later,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 200);
        assert_eq!(table.deadline(), Some(later + Duration::from_secs(60)));
        let r = c.send(
            &format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 7\r\nSession: {id}\r\n\r\n"),
            later,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 200);
        assert_eq!(c.events.last(), Some(&Event::Released(sid, Release::Teardown)));
        assert!(table.is_empty());
    }

    fn setup_udp(c: &mut Client, table: &mut SessionTable, cat: &Demo, now: Instant) -> String {
        let udp = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP;unicast;client_port=5000-5001");
        let r = c.send(&udp, now, table, cat);
        assert_eq!(status(&r), 200, "{r:?}");
        session_of(&r)
    }

    #[test]
    fn error_cases() {
        let (cat, mut table, now) = fixture();
        let mut c = Client::new(1, [10, 0, 0, 1]);

        // PLAY (and PAUSE) before SETUP.
        let r = c.send(&format!("PLAY {URL} RTSP/1.0\r\nCSeq: 2\r\n\r\n"), now, &mut table, &cat);
        assert_eq!((status(&r), header(&r, &headers::CSEQ)), (455, "2"));
        let track0 = format!("{URL}/trackID=0");
        let cases = [
            // Unknown session, and one that cannot be ours.
            (play("0123456789abcdef"), 454),
            (play("xyz"), 454),
            // Unsupported transports.
            (setup(&track0, None, "RTP/AVP;multicast"), 461),
            (setup(&track0, None, "RTP/SAVP;unicast;client_port=1-2"), 461),
            (setup(&track0, None, "RTP/AVP;unicast;client_port=5000;mode=record"), 461),
            // The aggregate URL of a two-track file, missing tracks and files.
            (setup(URL, None, "RTP/AVP/TCP;unicast"), 459),
            (setup(&format!("{URL}/trackID=7"), None, "RTP/AVP/TCP;unicast"), 404),
            ("DESCRIBE rtsp://127.0.0.1:8554/nope.mp4 RTSP/1.0\r\nCSeq: 5\r\n\r\n".to_string(), 404),
            // A method sluice does not do.
            (format!("RECORD {URL} RTSP/1.0\r\nCSeq: 6\r\n\r\n"), 501),
        ];
        for (request, want) in &cases {
            assert_eq!(status(&c.send(request, now, &mut table, &cat)), *want, "{request}");
        }
        // UDP when the server has no UDP ports.
        let mut no_udp = SessionTable::with_entropy(
            RtspConfig { udp_server_ports: None, ..RtspConfig::default() },
            counter(),
        );
        let udp = setup(&track0, None, "RTP/AVP;unicast;client_port=5000-5001");
        assert_eq!(status(&c.send(&udp, now, &mut no_udp, &cat)), 461);
        // A request without CSeq.
        let r = c.send("OPTIONS * RTSP/1.0\r\n\r\n", now, &mut table, &cat);
        assert_eq!(status(&r), 400);
        assert!(r.header(&headers::CSEQ).is_none());
        // PAUSE before PLAY.
        let id = setup_udp(&mut c, &mut table, &cat, now);
        let r = c.send(
            &format!("PAUSE {URL} RTSP/1.0\r\nCSeq: 7\r\nSession: {id}\r\n\r\n"),
            now,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 455);
        // A bad Range is 457 and leaves the session ready.
        let r = c.send(
            &format!("PLAY {URL} RTSP/1.0\r\nCSeq: 8\r\nSession: {id}\r\nRange: npt=9999-\r\n\r\n"),
            now,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 457);
        // Malformed: 400, and the connection closes without reading further.
        assert!(!c.conn.is_closed());
        let replies =
            c.send_raw(b"GARBAGE\r\n\r\nOPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n", now, &mut table, &cat);
        assert_eq!(replies.len(), 1);
        assert_eq!(status(&replies[0]), 400);
        assert!(c.out.close && c.conn.is_closed());
    }

    #[test]
    fn refusals_name_their_byte_position_and_connection() {
        let (cat, mut table, now) = fixture();
        let mut c = Client::new(5, [10, 0, 0, 1]);
        let options = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n";
        c.send(options, now, &mut table, &cat);
        // A request refused for what it asks: it keeps the connection, and is placed.
        let mut out = Output::default();
        let foreign = play("0123456789abcdef");
        c.conn.receive(foreign.as_bytes(), now, &mut table, &cat, &mut out);
        assert_eq!(status(&parse_responses(&out.replies)[0]), 454);
        let refused = &out.refused[0];
        assert_eq!(refused.kind(), &RtspError::SessionNotFound);
        assert_eq!(refused.position(), Some(options.len() as u64));
        // Framing lost two messages later: the position counts every byte before it.
        let at = options.len() + foreign.len();
        out.clear();
        c.conn.receive(b"GARBAGE\r\n\r\n", now, &mut table, &cat, &mut out);
        assert_eq!(status(&parse_responses(&out.replies)[0]), 400);
        let refused = &out.refused[0];
        assert_eq!(refused.kind(), &RtspError::Malformed("request head"));
        assert_eq!(refused.position(), Some(at as u64));
        let conn = refused.connection().unwrap();
        assert_eq!((conn.id, conn.peer), (5, SocketAddr::from(([10, 0, 0, 1], 40000))));
        assert!(refused.to_string().contains(&format!("byte {at} of connection 0x5 from 10.0.0.1:40000")));
    }

    #[test]
    fn sessions_are_bound_to_their_connection() {
        let (cat, mut table, now) = fixture();
        let mut a = Client::new(1, [10, 0, 0, 1]);
        // Interleaved: only its own connection, even from the same address.
        let tcp = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP/TCP;unicast;interleaved=0-1");
        let r = a.send(&tcp, now, &mut table, &cat);
        assert_eq!(status(&r), 200);
        let tcp_id = session_of(&r);
        let mut same_ip = Client::new(2, [10, 0, 0, 1]);
        assert_eq!(status(&same_ip.send(&play(&tcp_id), now, &mut table, &cat)), 454);
        let teardown = format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 9\r\nSession: {tcp_id}\r\n\r\n");
        assert_eq!(status(&same_ip.send(&teardown, now, &mut table, &cat)), 454);
        // UDP: another connection from the same address may use it, another address may not.
        let udp_id = setup_udp(&mut a, &mut table, &cat, now);
        let mut other_ip = Client::new(3, [10, 0, 0, 2]);
        assert_eq!(status(&other_ip.send(&play(&udp_id), now, &mut table, &cat)), 454);
        let tcp_track = setup(&format!("{URL}/trackID=1"), Some(&udp_id), "RTP/AVP/TCP;unicast");
        assert_eq!(
            status(&same_ip.send(&tcp_track, now, &mut table, &cat)),
            454,
            "interleaved on another connection"
        );
        assert_eq!(status(&same_ip.send(&play(&udp_id), now, &mut table, &cat)), 200);
        // The interleaved session goes with its connection; the UDP one stays until its timeout.
        let mut events = Vec::new();
        table.connection_closed(a.conn.id(), &mut events);
        assert_eq!(events, [Event::Released(SessionId::parse(&tcp_id).unwrap(), Release::ConnectionClosed)]);
        assert_eq!(table.len(), 1);
        events.clear();
        table.expire(now + Duration::from_secs(59), &mut events);
        assert!(events.is_empty());
        table.expire(now + Duration::from_secs(60), &mut events);
        assert_eq!(events, [Event::Released(SessionId::parse(&udp_id).unwrap(), Release::Timeout)]);
        assert_eq!(table.deadline(), None);
        assert_eq!(status(&same_ip.send(&play(&udp_id), now, &mut table, &cat)), 454);
    }

    #[test]
    fn interleaved_channels_pause_resume_and_seek() {
        let (cat, mut table, now) = fixture();
        let file = cat.0.clone();
        let mut c = Client::new(1, [10, 0, 0, 1]);
        let tcp = "RTP/AVP/TCP;unicast;interleaved=0-1";
        let (track0, track1) = (format!("{URL}/trackID=0"), format!("{URL}/trackID=1"));
        let r = c.send(&setup(&track0, None, tcp), now, &mut table, &cat);
        let id = session_of(&r);
        // The second track asks for the same channels and gets the next free pair.
        let r = c.send(&setup(&track1, Some(&id), tcp), now, &mut table, &cat);
        assert_eq!(status(&r), 200);
        let transport = r.typed_header::<Transports>().unwrap().unwrap();
        let Transport::Rtp(rtp) = &transport[0] else { panic!() };
        assert_eq!(rtp.params.interleaved, Some((2, Some(3))));
        assert_eq!(rtp.params.server_port, None);
        let sid = SessionId::parse(&id).unwrap();
        let deliveries: Vec<Delivery> = table.get(sid).unwrap().tracks().iter().map(|t| t.delivery).collect();
        assert_eq!(
            deliveries,
            [Delivery::Interleaved { rtp: 0, rtcp: 1 }, Delivery::Interleaved { rtp: 2, rtcp: 3 }]
        );

        // PLAY from 2.5 s starts at the keyframe at or before it, and says so in Range.
        let r = c.send(
            &format!("PLAY {URL} RTSP/1.0\r\nCSeq: 2\r\nSession: {id}\r\nRange: npt=2.5-\r\n\r\n"),
            now,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 200);
        let range = header(&r, &headers::RANGE).to_string();
        let (video, _) = video_audio(&file);
        let key = super::super::stream::start_sample(&file.tracks[video], Duration::from_millis(2500));
        assert!(file.tracks[video].samples[key].is_sync());
        assert!(range.starts_with("npt="), "{range}");
        let start: f64 = range["npt=".len()..range.len() - 1].parse().unwrap();
        assert!(start <= 2.5, "{range}");
        // The first packets carry the timestamps RTP-Info announced for the Range start: the
        // video keyframe, and audio a little later at its own clock (within a tick of rounding).
        let Some(RtpInfos::V1(infos)) = r.typed_header::<RtpInfos>().unwrap() else { panic!() };
        let streamer = table.get_mut(sid).unwrap().streamer_mut().unwrap();
        let mut due = Vec::new();
        streamer.due(now + Duration::from_secs(1), &mut due);
        let data = std::fs::read(DEMO).unwrap();
        for (i, info) in infos.iter().enumerate() {
            let d = due.iter().find(|d| d.track == i).unwrap();
            let mut packets = Packets::new();
            streamer.packetize(d, &data[d.offset as usize..][..d.size as usize], &mut packets).unwrap();
            let p = RtpPacket::parse(packets.get(0).unwrap()).unwrap();
            assert_eq!(p.sequence, info.seq.unwrap());
            let track = &file.tracks[d.track];
            let s = track.samples[d.sample];
            let rate = i64::from(crate::sdp::clock_rate(track));
            // Presentation time after the start, in the track's RTP clock.
            let after = (s.composition_time() as i64 - track.edit_start as i64) * rate
                / i64::from(track.timescale)
                - (start * rate as f64).round() as i64;
            let expected = info.rtptime.unwrap().wrapping_add(after as u32);
            assert!(
                p.timestamp.wrapping_sub(expected).wrapping_add(1) <= 2,
                "track {i}: {} vs {expected}",
                p.timestamp
            );
        }
        // SETUP while playing is refused.
        let r = c.send(&setup(&track1, Some(&id), tcp), now, &mut table, &cat);
        assert_eq!(status(&r), 455);
        // PAUSE, then PLAY without Range resumes where it was.
        let t1 = now + Duration::from_secs(1);
        let r = c.send(
            &format!("PAUSE {URL} RTSP/1.0\r\nCSeq: 3\r\nSession: {id}\r\n\r\n"),
            t1,
            &mut table,
            &cat,
        );
        assert_eq!(status(&r), 200);
        assert_eq!(c.events.last(), Some(&Event::Pause(sid)));
        assert!(!table.get(sid).unwrap().is_playing());
        let t2 = t1 + Duration::from_secs(10);
        let r =
            c.send(&format!("PLAY {URL} RTSP/1.0\r\nCSeq: 4\r\nSession: {id}\r\n\r\n"), t2, &mut table, &cat);
        assert_eq!(status(&r), 200);
        let resumed: f64 = header(&r, &headers::RANGE)["npt=".len()..].trim_end_matches('-').parse().unwrap();
        assert!((resumed - (start + 1.0)).abs() < 1e-6, "{resumed} after {start}");
        assert_eq!(c.events.last(), Some(&Event::Play(sid)));
        // Interleaved RTCP from the client refreshes the session.
        let t3 = t2 + Duration::from_secs(50);
        let mut frame = sluice_proto::rtsp::interleaved_header(1, 4).unwrap().to_vec();
        frame.extend_from_slice(&[0x80, 201, 0, 0]);
        assert!(c.send_raw(&frame, t3, &mut table, &cat).is_empty());
        assert_eq!(table.deadline(), Some(t3 + Duration::from_secs(60)));
        assert_eq!(c.conn.deadline(&table), t3 + Duration::from_secs(60));
        let mut events = Vec::new();
        table.connection_closed(c.conn.id(), &mut events);
        assert!(table.is_empty());
    }

    #[test]
    fn bounds_on_pipelining_sessions_and_tracks() {
        let cat = demo();
        let config = RtspConfig {
            max_pipelined: 3,
            max_sessions_per_connection: 2,
            max_tracks_per_session: 1,
            ..RtspConfig::default()
        };
        let mut table = SessionTable::with_entropy(config, counter());
        let now = Instant::now();
        let mut c = Client::new(1, [10, 0, 0, 1]);
        let five = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n".repeat(5);
        let mut out = Output::default();
        let used = c.conn.receive(five.as_bytes(), now, &mut table, &cat, &mut out);
        assert_eq!(out.answered, 3);
        assert_eq!(used, five.len() / 5 * 3);
        out.clear();
        assert_eq!(
            c.conn.receive(&five.as_bytes()[used..], now, &mut table, &cat, &mut out),
            five.len() / 5 * 2
        );
        assert_eq!(out.answered, 2);

        let id = setup_udp(&mut c, &mut table, &cat, now);
        let second_track = setup(&format!("{URL}/trackID=1"), Some(&id), "RTP/AVP/TCP;unicast");
        assert_eq!(status(&c.send(&second_track, now, &mut table, &cat)), 503, "tracks per session");
        setup_udp(&mut c, &mut table, &cat, now);
        let third_session = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP/TCP;unicast");
        assert_eq!(status(&c.send(&third_session, now, &mut table, &cat)), 503, "sessions per connection");
    }

    #[test]
    fn tables_sharing_a_budget_hold_max_viewers_between_them() {
        let cat = demo();
        let config = RtspConfig { max_viewers: 3, ..RtspConfig::default() };
        let budget = ViewerBudget::new(config.max_viewers);
        let mut a = SessionTable::with_entropy(config.clone(), counter()).sharing(budget.clone());
        let mut b = SessionTable::with_entropy(config, counter()).sharing(budget.clone());
        let now = Instant::now();
        let (mut ca, mut cb) = (Client::new(1, [10, 0, 0, 1]), Client::new(2, [10, 0, 0, 2]));
        let udp = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP;unicast;client_port=5000-5001");
        setup_udp(&mut ca, &mut a, &cat, now);
        let gone = setup_udp(&mut ca, &mut a, &cat, now);
        setup_udp(&mut cb, &mut b, &cat, now);
        assert_eq!(budget.held(), 3);
        // The fourth is refused by whichever table it reaches.
        assert_eq!(status(&cb.send(&udp, now, &mut b, &cat)), 453);
        assert_eq!(status(&Client::new(3, [10, 0, 0, 3]).send(&udp, now, &mut a, &cat)), 453);
        // A TEARDOWN on one table makes room on the other; a timeout gives places back too.
        let teardown = format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 7\r\nSession: {gone}\r\n\r\n");
        assert_eq!(status(&ca.send(&teardown, now, &mut a, &cat)), 200);
        assert_eq!(budget.held(), 2);
        setup_udp(&mut cb, &mut b, &cat, now);
        assert_eq!(budget.held(), 3);
        let mut events = Vec::new();
        b.expire(now + Duration::from_secs(3600), &mut events);
        assert_eq!((events.len(), budget.held()), (2, 1));
        drop(a);
        assert_eq!(budget.held(), 0, "a table dropped gives its places back");
    }

    #[test]
    fn session_ids_are_distinct_and_long() {
        let mut table = table();
        let a = table.new_id();
        let b = table.new_id();
        assert_ne!(a, b);
        assert_eq!(a.to_string().len(), 16);
        assert_eq!(SessionId::parse(&a.to_string()), Some(a));
    }

    /// A library with one fragmented MP4 (indexed, nothing to stream) and one damaged file.
    struct Unstreamable;

    impl Catalogue for Unstreamable {
        fn open(&self, _: &str) -> Result<Arc<Mp4File>, NotFound> {
            Err(NotFound)
        }

        fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
            match path {
                "/frag.mp4" => checked(Arc::new(Mp4File {
                    tracks: vec![],
                    skipped: vec![crate::mp4::SkippedTrack { id: 1, reason: "no samples".into() }],
                    file_len: 1000,
                    fragmented: true,
                })),
                "/broken.mp4" => Err(Refusal::Unplayable(Unplayable::unreadable(
                    &Mp4File::from_bytes(b"\0\0\0\x08free").unwrap_err(),
                ))),
                _ => Err(Refusal::NotFound),
            }
        }
    }

    #[test]
    fn unstreamable_files_are_refused_with_the_reason() {
        let mut table = table();
        let mut conn =
            RtspConnection::new(ConnectionId(1), SocketAddr::from(([10, 0, 0, 1], 40000)), Instant::now());
        let mut out = Output::default();
        let requests = [
            ("DESCRIBE", "frag.mp4", "", 501, "fragmented MP4"),
            ("SETUP", "frag.mp4/trackID=0", "Transport: RTP/AVP/TCP;unicast\r\n", 501, "fragmented MP4"),
            ("PLAY", "frag.mp4", "Session: 0123456789abcdef\r\n", 501, "fragmented MP4"),
            ("DESCRIBE", "broken.mp4", "", 500, "no moov box"),
            ("DESCRIBE", "missing.mp4", "", 404, ""),
            ("PLAY", "missing.mp4", "Session: 0123456789abcdef\r\n", 454, ""),
        ];
        for (cseq, (method, path, extra, status, reason)) in requests.into_iter().enumerate() {
            let text =
                format!("{method} rtsp://127.0.0.1:8554/{path} RTSP/1.0\r\nCSeq: {cseq}\r\n{extra}\r\n");
            out.clear();
            conn.receive(text.as_bytes(), Instant::now(), &mut table, &Unstreamable, &mut out);
            let replies = parse_responses(&out.replies);
            assert_eq!(replies.len(), 1, "{text}");
            let r = &replies[0];
            assert_eq!(u16::from(r.status()), status, "{text}");
            let header = headers::HeaderName::from_static_str(REASON_HEADER).unwrap();
            match r.header(&header) {
                Some(v) if !reason.is_empty() => {
                    let v = v.as_str();
                    assert!(v.contains(reason) && v.contains(path.split('/').next().unwrap()), "{v}");
                    let body = String::from_utf8(r.body().clone()).unwrap();
                    assert!(body.starts_with(&format!("{status} ")) && body.contains(reason), "{body}");
                    assert_eq!(out.unplayable.len(), 1);
                }
                None if reason.is_empty() => assert!(out.unplayable.is_empty()),
                other => panic!("{text}: reason header {other:?}"),
            }
        }
        assert!(table.is_empty(), "no session for a file that cannot be streamed");
    }
}
