//! The sessions of one RTSP loop: the [`SessionTable`] (by id, with the session timeout as a
//! deadline the loop's timer checks, the bounds on sessions and tracks, and the headroom's room
//! for viewers), each [`RtspSession`] (a file, its tracks and where each one's packets go, and
//! once played its [`Streamer`]), the ids (at least 64 random bits, bound to the connection that
//! set them up) and the [`ViewerBudget`] the loops' tables share for `--rtsp-max-viewers`.
//!
//! It owns the state, not what requests do to it (a connection's requests, in [`super::session`]),
//! whether a viewer is admitted to it ([`super::admission`]) nor the sending of the sessions'
//! packets (the [`super::RtspServer`]).

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use sluice_proto::rtsp::Release;

use super::config::RtspConfig;
use super::live::LiveStream;
use super::stream::{StreamTrack, Streamer};
use rtsp_types::Url;
use sluice_media::mp4::Mp4File;

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
    pub(super) id: SessionId,
    pub(super) owner: ConnectionId,
    pub(super) peer: IpAddr,
    pub(super) path: String,
    pub(super) file: Arc<Mp4File>,
    pub(super) tracks: Vec<SessionTrack>,
    pub(super) streamer: Option<Streamer>,
    pub(super) deadline: Instant,
    /// The live stream it plays, and how many samples of each track had gone from the front of
    /// the table `file` is (see [`super::live`]); `None` for a file.
    pub(super) live: Option<(Arc<LiveStream>, Vec<u64>)>,
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

    /// The live stream it plays, if it plays one.
    pub fn live(&self) -> Option<&Arc<LiveStream>> {
        self.live.as_ref().map(|(stream, _)| stream)
    }

    /// For a live session, takes its stream's newer table into `file` and the streamer; returns
    /// whether the stream has ended (its publisher is gone), `None` for a file.
    pub fn refresh_live(&mut self) -> Option<bool> {
        let (stream, dropped) = self.live.as_mut()?;
        let ended = stream.has_ended();
        let snapshot = stream.snapshot();
        if !Arc::ptr_eq(&snapshot.file, &self.file) {
            let shift: Vec<u64> = snapshot
                .dropped
                .iter()
                .zip(dropped.iter())
                .map(|(now, then)| now.saturating_sub(*then))
                .collect();
            if let Some(streamer) = self.streamer.as_mut() {
                streamer.extend(Arc::clone(&snapshot.file), &shift);
            }
            self.file = snapshot.file;
            *dropped = snapshot.dropped;
        }
        Some(ended)
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
    pub(super) fn usable_from(&self, conn: ConnectionId, peer: IpAddr) -> bool {
        self.owner == conn
            || (self.peer == peer && self.tracks.iter().all(|t| matches!(t.delivery, Delivery::Udp { .. })))
    }
}

/// The sessions every RTSP loop's [`SessionTable`] holds, counted against
/// [`RtspConfig::max_viewers`]: with several loops the bound is the server's, not each loop's, so
/// the tables take and give back places here (an atomic count, no lock) rather than comparing
/// their own sizes.
#[derive(Debug)]
pub struct ViewerBudget {
    pub(super) max: usize,
    pub(super) held: AtomicUsize,
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
    pub(super) fn is_full(&self) -> bool {
        self.held() >= self.max
    }

    /// Takes a place; `false` when all `max` are held.
    pub(super) fn take(&self) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max).then_some(n + 1))
            .is_ok()
    }

    pub(super) fn give_back(&self, n: usize) {
        self.held.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Random numbers for ids, SSRCs, sequence numbers and timestamp offsets.
type Entropy = Box<dyn FnMut() -> u64 + Send>;

/// All sessions of one engine worker (or of the whole server), by id.
pub struct SessionTable {
    pub(super) config: RtspConfig,
    pub(super) sessions: HashMap<SessionId, RtspSession>,
    pub(super) entropy: Entropy,
    /// Viewers the loop says it can carry now (its headroom), below `config.max_viewers`.
    pub(super) room: usize,
    /// The places of `config.max_viewers`, shared with the other loops' tables.
    pub(super) budget: Arc<ViewerBudget>,
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
    /// first `PLAY` of a session beyond it ([`super::admission`] decides).
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

    pub(super) fn release_where(
        &mut self,
        f: impl Fn(&RtspSession) -> bool,
        why: Release,
        events: &mut Vec<Event>,
    ) {
        let mut gone: Vec<SessionId> = self.sessions.values().filter(|s| f(s)).map(|s| s.id).collect();
        // Sorted so the events do not depend on the hash map's order.
        gone.sort_by_key(|id| id.0);
        for id in gone {
            self.remove(id);
            events.push(Event::Released(id, why));
        }
    }

    /// Removes a session and gives its place back.
    pub(super) fn remove(&mut self, id: SessionId) -> Option<RtspSession> {
        let gone = self.sessions.remove(&id);
        if gone.is_some() {
            self.budget.give_back(1);
        }
        gone
    }

    pub(super) fn random(&mut self) -> u64 {
        (self.entropy)()
    }

    /// A fresh id no session has.
    pub(super) fn new_id(&mut self) -> SessionId {
        loop {
            let id = SessionId(self.random());
            if !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }
}
