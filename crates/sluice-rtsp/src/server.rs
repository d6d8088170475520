//! The RTSP server core, sans-I/O: every control connection, the session table, one bounded queue
//! per viewer, pacing, and what to write where, for a loop that owns only sockets and timers.
//!
//! A loop hands the core what it read ([`RtspServer::received`], [`RtspServer::input_ended`] for a
//! half-close, [`RtspServer::rtcp_from`] for a datagram on the RTCP port) with the time, calls
//! [`RtspServer::tick`] when [`RtspServer::next_wake`] comes, and asks what to write: a control
//! connection's [`OutBuf`] (replies, and interleaved `$` frames moved from its viewers' queues while
//! the buffer is short) and datagrams for UDP viewers, put into the loop's [`DatagramSink`] with
//! their destination ([`RtspServer::fill_datagrams`]). Each viewer's packets enter its own
//! `ViewerQueue`, so a viewer whose connection is full loses whole frames up to the next keyframe
//! (counted) instead of holding the loop or the others. Everything the core counts, and every
//! request answered, session created or released, reaches the loop through one hook, the
//! [`Observer`]. At shutdown, [`RtspServer::farewell`] replaces every viewer's queued packets by a
//! final RTCP BYE per track and closes the connections once written; the loop sends until
//! [`RtspServer::drained`].
//!
//! The core makes no system calls: sample bytes come through the server's [`MediaLibrary`] (a
//! `pread` from the page cache there), read once for the viewers at the same position and kept
//! in a bounded [`SampleCache`]; packets refer to those shared bytes rather than copy them (a
//! queued packet is its headers and a [`Body`]), so the loop's `sendmmsg`/`sendmsg`/`writev` of
//! the slices is the only copy; the monotonic and wall-clock times, and the loop's CPU time
//! ([`RtspServer::account`]), are arguments.
//!
//! It also measures the loop's load for the overload policy: from the loop's CPU time per
//! [`LOAD_WINDOW`] [`crate::admission`] estimates what a viewer costs and how many the loop can
//! carry ([`Headroom`]); under [`Overload::Refuse`](crate::Overload::Refuse) a viewer beyond that
//! (or beyond [`RtspConfig::max_viewers`]) is answered 453 there so the ones playing stay perfect,
//! under [`Overload::Degrade`](crate::Overload::Degrade) a viewer whose samples fall
//! [`LATE_SEND`] behind drops whole frames, unread, up to its next keyframe. It does not own sockets, readiness, batching (`sendmmsg`, UDP GSO) or
//! timers: those are the engine's. `T` is the loop's own per-connection state (its socket,
//! buffers, operations in flight), kept in the same slot so both share one key.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use sluice_proto::rtp::{Packets, QueueLimits, ViewerQueue};
use sluice_proto::rtsp::{Headroom, LoopNote, OutBuf, RtspError};

use self::fanout::{open_bytes, Pacer};
use super::admission::{self, Admission, Window};
use super::config::RtspConfig;
use super::playable::first_refusal;
use super::samples::{SampleCache, SAMPLE_CACHE_BYTES};
use super::session::{Answered, Catalogue, Event, Output, RtspConnection};
use super::stream::Due;
use super::table::{ConnectionId, Delivery, SessionId, SessionTable};

/// Bytes a control connection may have waiting to be written before its viewers' packets stay in
/// their queues. Small enough that a stalled TCP viewer overflows its queue (and loses frames)
/// rather than growing this buffer; large enough for a keyframe of a 23 Mbps stream at once.
const OUTPUT_HIGH: usize = 512 * 1024;
/// Unanswered input a connection may hold before the loop stops reading it.
const INPUT_HIGH: usize = 64 * 1024;
/// The CNAME of the server's sender reports.
const CNAME: &str = "sluice";
/// A UDP viewer's packets leave at up to this multiple of its presentation's mean bit rate, in
/// bursts of at most [`PACE_BURST`] bytes, rather than a whole frame at once. A keyframe of the
/// 23 Mbps test stream is about 160 KB, 115 datagrams: sent in one burst to each of 50 viewers, it
/// overflowed the receivers' default 208 KiB socket buffers (the kernel charges about 2.3 KB a
/// datagram), and 49 of 50 viewers lost packets (2,893 lost, `RcvbufErrors` rising; 2026-11-22).
/// At 4× the mean rate a frame still leaves within about a third of its interval.
const PACE_RATE_FACTOR: f64 = 4.0;
/// Bytes a UDP viewer may be sent back to back: one UDP GSO message of full-size RTP packets
/// (42 of 1,412 bytes, within the kernel's 64 segments and the engine's 60,000 bytes), so a
/// burst costs the kernel's send path one walk. 42 datagrams take about 97 KB of a receiver's
/// buffer at 2.3 KB each, half the kernel's default 208 KiB.
const PACE_BURST: f64 = 60_000.0;
/// The loop is asked to wake for pacing at most this often: a 23 Mbps viewer at 4× earns a
/// packet's worth every 120 µs, and waking for each (io_uring's timeouts are exact, epoll's are
/// whole milliseconds) made the io_uring loop use 72% of a core for 50 UDP viewers against
/// epoll's 22% (E5, 2026-11-22). Two milliseconds add 23 KB to a bucket of 60 KB.
///
/// Every wake-up is also put on a grid of this step ([`RtspServer::next_wake`]): viewers'
/// samples fall due at their own times (30 video and 47 audio samples a second each, spread by
/// the ramp), and waking for each made the io_uring loop (exact timeouts) enter 7,600 times a
/// second and the epoll loop 3,200 times for 114 to 126 viewers, a few datagrams a turn
/// (2026-11-24). On the grid a turn serves every viewer due in the step.
pub const PACE_TICK: Duration = Duration::from_millis(2);
/// Samples are queued by send slots of this length on one clock for the whole loop: at the
/// start of a slot, every viewer gets the samples due before its end (up to a slot early), and
/// viewers at the same point of a file are served one after the other. Viewers who started a
/// few milliseconds apart then send a frame back to back, and the kernel copies it from the
/// cache for all but the first; each on its own due time, 400 viewers who started over 4 s
/// touched about 12 MB of samples and each copy read memory (`sluice lab ceiling`: 0.53 us a
/// datagram to plain receivers from one hot buffer, 0.68 us from content spread over 4 s,
/// 2026-11-26). A frame interval of 30 fps and a multiple of [`PACE_TICK`].
pub const SEND_SLOT: Duration = Duration::from_millis(32);
/// The pacing rate for a presentation whose size and duration are unknown (8 MB/s).
const PACE_FALLBACK_RATE: f64 = 8.0e6;
/// The loop's headroom is measured over windows this long: long enough to hold a few frame
/// intervals of every viewer (their keyframes fall at different times), short enough to follow a
/// ramp of newcomers.
pub const LOAD_WINDOW: Duration = Duration::from_millis(500);
/// A sample queued this long after it was due is a late send; under
/// [`Overload::Degrade`](crate::Overload::Degrade) its viewer drops frames up to the next keyframe
/// instead of sending them later still.
pub const LATE_SEND: Duration = Duration::from_millis(50);
/// Under [`Overload::Degrade`](crate::Overload::Degrade), a viewer this far behind (a tick, or its
/// backlog) drops frames up to its next keyframe. Longer than [`LATE_SEND`], so a loop that is
/// briefly descheduled on a busy machine counts late sends without costing anyone a GOP; shorter
/// than the viewer queue's one second, so the loop sheds before the queues overflow.
pub const DEGRADE_BEHIND: Duration = Duration::from_millis(500);
/// Under [`Overload::Degrade`](crate::Overload::Degrade), a UDP viewer whose queue holds this much
/// sending time (at its pace) drops frames up to its next keyframe: about 0.4 s of a 23 Mbps
/// stream, well before its queue's one second overflows.
pub const DEGRADE_BACKLOG: Duration = Duration::from_millis(100);

/// What the core serves: the indexed MP4 files of [`Catalogue`], and their bytes. The server
/// implements it; reading is its business (the core only asks).
pub trait MediaLibrary: Catalogue {
    /// An open presentation's bytes (a file handle, or the bytes themselves).
    type Bytes;

    /// A handle to read the samples of the presentation at URL path `path` (the same path the
    /// [`Catalogue`] indexed), confined to the library as the catalogue is.
    fn open_bytes(&self, path: &str) -> io::Result<Self::Bytes>;

    /// Fills `into` with the bytes at `offset` of `bytes`.
    fn read_at(&self, bytes: &Self::Bytes, offset: u64, into: &mut [u8]) -> io::Result<()>;
}

/// Something the core did, for the loop's counters and logs.
#[derive(Debug, Clone, Copy)]
pub enum Note<'a> {
    /// What the loop counts (bytes in, packets out, drops, admissions, its headroom).
    Loop(LoopNote<'a>),
    /// Requests were answered on `connection` (their replies are in its output).
    Answered {
        /// The connection.
        connection: ConnectionId,
        /// How many.
        requests: usize,
    },
    /// A request was refused with this error, in context (its byte position and connection).
    Refused(&'a RtspError),
    /// A request was answered (when [`RtspConfig::access_log`] is on): what the access log says.
    Access {
        /// The client.
        peer: SocketAddr,
        /// The request and its answer.
        answered: &'a Answered,
    },
    /// A session was set up for the presentation at this URL path.
    SessionCreated(SessionId, &'a str),
    /// A session is gone, and why.
    SessionReleased(SessionId, sluice_proto::rtsp::Release),
    /// A playing session's presentation could not be opened for reading: its viewer gets
    /// nothing and times out.
    Unreadable {
        /// The URL path.
        path: &'a str,
        /// Why.
        error: &'a io::Error,
    },
    /// A presentation cannot be streamed and requests for it are refused with `status`: noted the
    /// first time this process refuses the path for this reason (a warning for the operator),
    /// not on every request.
    Unplayable {
        /// The URL path.
        path: &'a str,
        /// The status the requests get.
        status: u16,
        /// Why.
        reason: &'a str,
    },
}

/// The loop's CPU time against wall time, window by window, and the viewers it can carry.
#[derive(Debug, Default)]
struct LoadMeter {
    /// The window's start and the loop's CPU time then.
    start: Option<(Instant, Duration)>,
    /// The last [`RtspServer::account`] call and the viewers streaming then.
    last: Option<(Instant, usize)>,
    /// Viewer-seconds streamed in the window so far.
    viewer_seconds: f64,
    late: usize,
    admission: Admission,
    /// Whether the last window closed had work in it (viewers, or a busy share worth showing):
    /// the loop then wakes to close the next one even with nothing else to do, so that the
    /// share it reports falls to nothing within two windows of the last viewer leaving rather
    /// than staying at its last value until something wakes the loop.
    active: bool,
}

/// A window busier than this (or with viewers) is reported again after the next: below it, the
/// share shows as 0.00 and the loop may sleep until something happens.
const ACTIVE_BUSY: f64 = 0.005;

/// The one hook through which the core reports what it did (counters, access logs).
pub trait Observer {
    /// Records `note`.
    fn note(&self, note: Note<'_>);
}

impl<O: Observer + ?Sized> Observer for &O {
    fn note(&self, note: Note<'_>) {
        (**self).note(note)
    }
}

impl Note<'_> {
    /// What of this note the loop counts, if anything (the access log, refusals and unreadable
    /// files are the server's to log).
    pub fn counted(&self) -> Option<LoopNote<'_>> {
        Some(match *self {
            Note::Loop(note) => note,
            Note::Answered { requests, .. } => LoopNote::Answered(requests),
            Note::SessionCreated(id, _) => LoopNote::SessionCreated(id.0),
            Note::SessionReleased(id, why) => LoopNote::SessionReleased(id.0, why),
            Note::Refused(_) | Note::Access { .. } | Note::Unplayable { .. } | Note::Unreadable { .. } => {
                return None
            }
        })
    }
}

/// One control connection.
#[derive(Debug)]
pub struct Control<T> {
    /// The loop's state for it.
    pub io: T,
    /// What to write to it.
    pub out: OutBuf,
    rtsp: RtspConnection,
    input: Vec<u8>,
    /// The client will send nothing more (it half-closed): what it sent is answered, then the
    /// connection closes once the replies are written.
    input_ended: bool,
    /// Interleaved viewers whose packets go out on this connection.
    viewers: Vec<SessionId>,
    /// Closed by the core (timed out, or done after a `Connection: close` or a half-close): the
    /// loop closes it once `out` is written, or at once when `drop_output`.
    closing: bool,
    drop_output: bool,
    /// Gone from the core's point of view (its sessions were released); the slot waits for the
    /// loop to [`RtspServer::remove`] it.
    disconnected: bool,
}

impl<T> Control<T> {
    /// Whether the loop should close the connection now.
    pub fn should_close(&self) -> bool {
        self.closing && (self.drop_output || self.out.is_empty())
    }
}

/// One session's sending side.
struct Viewer<B> {
    /// The URL path it streams, once its stream started (for the per-stream counts).
    started: Option<String>,
    /// Under [`Overload::Degrade`](crate::Overload::Degrade), late: its video samples are skipped up
    /// to the next keyframe.
    skipping: bool,
    /// Per track of the session, whether it is video (the only one whose frames are skipped).
    video: Vec<bool>,
    /// The control connection (slot key) its interleaved packets go out on, if any.
    control: Option<usize>,
    bytes: Option<B>,
    /// Opening the bytes failed for good (noted once): its samples are missed.
    unreadable: bool,
    /// Samples due but not sent because their bytes are still being fetched
    /// ([`io::ErrorKind::WouldBlock`] from [`MediaLibrary::read_at`]), in order, and since when:
    /// they go first at the viewer's next turn, [`WARM_RETRY`] later.
    stalled: VecDeque<Due>,
    stalled_since: Option<Instant>,
    deliveries: Vec<Delivery>,
    queue: ViewerQueue,
    next_wake: Option<Instant>,
    /// Listed in `udp_ready`.
    ready: bool,
    pacer: Pacer,
    /// Held by its pacer until its next burst is in the bucket: no turn before then sends it
    /// anything (see [`RtspServer::fill_datagrams`]).
    held_until: Option<Instant>,
    /// Its streamer's [`Streamer::origin`](super::stream::Streamer::origin) at its last PLAY:
    /// the order a slot's viewers are served in.
    origin: Option<Instant>,
}

/// See the module docs.
pub struct RtspServer<'a, M: MediaLibrary, O: Observer, T> {
    media: &'a M,
    observer: O,
    table: SessionTable,
    controls: Vec<Option<Control<T>>>,
    free: Vec<usize>,
    generation: u32,
    viewers: HashMap<SessionId, Viewer<M::Bytes>>,
    queue_limits: QueueLimits,
    /// UDP viewers with packets queued, served round robin: one that sent its share goes to the
    /// back, one the batch had no room for stays in front.
    udp_ready: VecDeque<SessionId>,
    /// When the first UDP viewer held back by its pacer may send again.
    pace_wake: Option<Instant>,
    /// Control connections with something new to write or to close.
    dirty: Vec<usize>,
    output: Output,
    due: Vec<Due>,
    packets: Packets,
    samples: SampleCache,
    reports: Vec<(usize, Vec<u8>)>,
    scratch_ids: Vec<(Option<Instant>, SessionId)>,
    load: LoadMeter,
    /// The origin of the wake-up grid.
    epoch: Instant,
    /// Viewers streaming each presentation.
    per_stream: HashMap<String, usize>,
    /// The monotonic and the wall-clock time of the first tick: sender reports take their NTP time
    /// from this anchor plus the monotonic time since, see [`RtspServer::report_clock`].
    wall_anchor: Option<(Instant, Duration)>,
}

impl<'a, M: MediaLibrary, O: Observer, T> RtspServer<'a, M, O, T> {
    /// A core serving `media` with the sessions of `table`, reporting to `observer`, started at
    /// `now` (the origin of its wake-up grid).
    pub fn new(mut table: SessionTable, media: &'a M, observer: O, now: Instant) -> Self {
        if let Some(room) = admission::first_room(table.config()) {
            table.set_room(room);
        }
        RtspServer {
            media,
            observer,
            table,
            controls: Vec::with_capacity(256),
            free: Vec::new(),
            generation: 0,
            viewers: HashMap::new(),
            queue_limits: QueueLimits::default(),
            udp_ready: VecDeque::new(),
            pace_wake: None,
            dirty: Vec::new(),
            output: Output::default(),
            due: Vec::new(),
            packets: Packets::new(),
            samples: SampleCache::new(SAMPLE_CACHE_BYTES),
            reports: Vec::new(),
            scratch_ids: Vec::new(),
            load: LoadMeter::default(),
            per_stream: HashMap::new(),
            epoch: now,
            wall_anchor: None,
        }
    }

    /// The settings.
    pub fn config(&self) -> &RtspConfig {
        self.table.config()
    }

    /// A connection accepted from `peer`; returns its key.
    pub fn accept(&mut self, io: T, peer: SocketAddr, now: Instant) -> usize {
        self.generation = self.generation.wrapping_add(1);
        let key = self.free.pop().unwrap_or(self.controls.len());
        // The id carries the slot and a generation, so a session of a closed connection can never
        // be taken for one of the connection that reuses its slot.
        let id = ConnectionId((u64::from(self.generation) << 32) | key as u64);
        self.observer.note(Note::Loop(LoopNote::Connected));
        let control = Control {
            io,
            out: OutBuf::default(),
            rtsp: RtspConnection::new(id, peer, now),
            input: Vec::new(),
            input_ended: false,
            viewers: Vec::new(),
            closing: false,
            drop_output: false,
            disconnected: false,
        };
        match self.controls.get_mut(key) {
            Some(slot) => *slot = Some(control),
            None => self.controls.push(Some(control)),
        }
        key
    }

    /// The connection at `key`.
    pub fn control(&mut self, key: usize) -> Option<&mut Control<T>> {
        self.controls.get_mut(key).and_then(Option::as_mut)
    }

    fn control_ref(&self, key: usize) -> Option<&Control<T>> {
        self.controls.get(key).and_then(Option::as_ref)
    }

    fn connections(&self) -> impl Iterator<Item = (usize, &Control<T>)> {
        self.controls.iter().enumerate().filter_map(|(k, c)| c.as_ref().map(|c| (k, c)))
    }

    /// Keys of every connection (for shutdown).
    pub fn keys(&self) -> Vec<usize> {
        self.connections().map(|(k, _)| k).collect()
    }

    /// Connections whose output or state changed since the last call.
    pub fn take_dirty(&mut self, into: &mut Vec<usize>) {
        into.clear();
        into.append(&mut self.dirty);
        into.sort_unstable();
        into.dedup();
    }

    fn mark(&mut self, key: usize) {
        self.dirty.push(key);
    }

    /// Bytes the client sent on `key`.
    pub fn received(&mut self, key: usize, bytes: &[u8], now: Instant) {
        let observer = &self.observer;
        let Some(c) = self.controls.get_mut(key).and_then(Option::as_mut) else { return };
        if c.closing || c.disconnected || c.input_ended {
            return;
        }
        observer.note(Note::Loop(LoopNote::BytesIn(bytes.len())));
        c.input.extend_from_slice(bytes);
        self.answer(key, now);
    }

    /// The client on `key` half-closed (the loop read end of file): it sends nothing more, but
    /// every complete request it sent is answered and the replies are written before the
    /// connection closes. Its sessions go when it closes.
    pub fn input_ended(&mut self, key: usize, now: Instant) {
        let Some(c) = self.control(key) else { return };
        c.input_ended = true;
        self.answer(key, now);
    }

    /// Answers what `key` has buffered, as far as its output allows; closes a half-closed
    /// connection once nothing it sent is left to answer.
    fn answer(&mut self, key: usize, now: Instant) {
        loop {
            let Some(c) = self.controls.get_mut(key).and_then(Option::as_mut) else { return };
            // A client pipelining faster than it reads its replies waits here, with its input
            // bounded by the request limits (reading stops while input waits unanswered).
            if c.closing || c.rtsp.is_closed() || c.out.len() > OUTPUT_HIGH || c.input.is_empty() {
                break;
            }
            self.output.clear();
            let consumed = c.rtsp.receive(&c.input, now, &mut self.table, self.media, &mut self.output);
            c.input.drain(..consumed);
            c.out.push(&self.output.replies);
            if self.output.close {
                c.closing = true;
            }
            if self.output.answered > 0 {
                let connection = c.rtsp.id();
                self.observer.note(Note::Answered { connection, requests: self.output.answered });
            }
            for error in &self.output.refused {
                if admission::is_viewer_refused(error.kind()) {
                    self.observer.note(Note::Loop(LoopNote::ViewerRefused));
                }
                self.observer.note(Note::Refused(error));
            }
            for (path, refusal) in &self.output.unplayable {
                if first_refusal(path, refusal) {
                    let (status, reason) = (refusal.status, refusal.reason.as_str());
                    self.observer.note(Note::Unplayable { path, status, reason });
                }
            }
            let peer = c.rtsp.context().peer;
            for answered in &self.output.access {
                self.observer.note(Note::Access { peer, answered });
            }
            self.mark(key);
            let events = std::mem::take(&mut self.output.events);
            self.apply(&events, now);
            self.output.events = events;
            if consumed == 0 {
                break;
            }
        }
        let Some(c) = self.control(key) else { return };
        // Waiting on output (more requests to answer once it drains) keeps it open; an
        // incomplete request at the end will never be completed.
        // A request held while its presentation warms is answered later, on a tick.
        let answered_all = !c.rtsp.is_holding() && (c.input.is_empty() || c.out.len() <= OUTPUT_HIGH);
        if c.input_ended && !c.closing && answered_all {
            c.closing = true;
            self.mark(key);
        }
    }

    /// Whether `key` will take more input now (its requests are all answered).
    pub fn wants_input(&self, key: usize) -> bool {
        self.control_ref(key).is_some_and(|c| {
            !c.closing
                && !c.disconnected
                && !c.input_ended
                && c.out.len() <= OUTPUT_HIGH
                && c.input.len() <= INPUT_HIGH
        })
    }

    /// `key` wrote some output: refill it from its viewers and answer what waited on it.
    pub fn wrote(&mut self, key: usize, now: Instant) {
        self.feed_interleaved(key);
        self.answer(key, now);
    }

    /// The connection `key` is gone (closed by the client, failed, or closed by the loop): its
    /// interleaved sessions are released. The loop calls [`RtspServer::remove`] when its
    /// operations have finished.
    pub fn disconnect(&mut self, key: usize, now: Instant) {
        let media = self.media;
        let Some(c) = self.control(key) else { return };
        if c.disconnected {
            return;
        }
        c.disconnected = true;
        c.closing = true;
        c.drop_output = true;
        c.rtsp.end_publishing(media);
        let id = c.rtsp.id();
        let mut events = Vec::new();
        self.table.connection_closed(id, &mut events);
        self.apply(&events, now);
    }

    /// Frees `key`'s slot, returning the loop's state for it.
    pub fn remove(&mut self, key: usize, now: Instant) -> Option<T> {
        self.disconnect(key, now);
        let c = self.controls.get_mut(key).and_then(Option::take)?;
        self.free.push(key);
        Some(c.io)
    }

    /// A datagram arrived from `from` on the server's RTCP port: a receiver report keeps that
    /// viewer's session alive.
    pub fn rtcp_from(&mut self, from: SocketAddr, now: Instant) {
        let found = self.viewers.iter().find_map(|(id, v)| {
            v.deliveries
                .iter()
                .any(|d| matches!(d, Delivery::Udp { rtcp, .. } if *rtcp == from))
                .then_some(*id)
        });
        if let Some(id) = found {
            self.table.touch(id, now);
        }
    }

    /// A datagram arrived from `from` on the server's RTP port: RTP of a publisher that set up a
    /// track over UDP from there, taken into its stream (anything else is dropped).
    pub fn rtp_from(&mut self, from: SocketAddr, packet: &[u8], now: Instant) {
        for c in self.controls.iter_mut().flatten() {
            if !c.disconnected && c.rtsp.published_datagram(from, packet, now) {
                return;
            }
        }
    }

    fn apply(&mut self, events: &[Event], now: Instant) {
        for event in events {
            match *event {
                Event::Created(id) => {
                    let path = self.table.get_mut(id).map(|s| s.path().to_string()).unwrap_or_default();
                    self.observer.note(Note::SessionCreated(id, &path));
                    self.viewers.insert(
                        id,
                        Viewer {
                            started: None,
                            skipping: false,
                            video: Vec::new(),
                            control: None,
                            bytes: None,
                            unreadable: false,
                            stalled: VecDeque::new(),
                            stalled_since: None,
                            deliveries: Vec::new(),
                            queue: ViewerQueue::new(self.queue_limits),
                            next_wake: None,
                            ready: false,
                            pacer: Pacer::new(PACE_FALLBACK_RATE, now),
                            held_until: None,
                            origin: None,
                        },
                    );
                }
                Event::Play(id) => self.play(id, now),
                Event::Pause(id) => {
                    if let Some(v) = self.viewers.get_mut(&id) {
                        v.next_wake = None;
                    }
                }
                Event::Released(id, why) => {
                    self.observer.note(Note::SessionReleased(id, why));
                    if let Some(v) = self.viewers.remove(&id) {
                        if let Some(path) = &v.started {
                            self.count_stream(path, false);
                        }
                        if let Some(c) = v.control.and_then(|k| self.controls.get_mut(k)?.as_mut()) {
                            c.viewers.retain(|s| *s != id);
                        }
                    }
                }
            }
        }
    }

    /// The session plays (again): where its packets go may have changed with more `SETUP`s.
    fn play(&mut self, id: SessionId, now: Instant) {
        let Some(session) = self.table.get_mut(id) else { return };
        let Some(v) = self.viewers.get_mut(&id) else { return };
        let first = v.started.is_none().then(|| session.path().to_string());
        if let Some(path) = &first {
            v.started = Some(path.clone());
        }
        v.deliveries = session.tracks().iter().map(|t| t.delivery).collect();
        let tracks = &session.file().tracks;
        v.video = session
            .tracks()
            .iter()
            .map(|t| tracks.get(t.stream.index).is_some_and(|t| t.kind.is_video()))
            .collect();
        if session.live().is_none() {
            open_bytes(self.media, &self.observer, v, session.path());
        }
        // A seek: what waited for its bytes belongs to the old position.
        v.stalled.clear();
        v.stalled_since = None;
        let interleaved = v.deliveries.iter().any(|d| matches!(d, Delivery::Interleaved { .. }));
        if interleaved && v.control.is_none() {
            let owner = session.owner().0 as u32 as usize;
            let control = self.controls.get_mut(owner).and_then(Option::as_mut);
            if let Some(c) = control.filter(|c| c.rtsp.id() == session.owner()) {
                c.viewers.push(id);
                v.control = Some(owner);
            }
        }
        // A seek while playing moved the streamer: what is queued belongs to the old position.
        v.queue = ViewerQueue::new(self.queue_limits);
        let file = session.file();
        let seconds = file.duration_secs();
        let rate = if seconds > 0.0 { file.file_len as f64 / seconds * PACE_RATE_FACTOR } else { 0.0 };
        v.pacer = Pacer::new(if rate > 0.0 { rate } else { PACE_FALLBACK_RATE }, now);
        let epoch = self.epoch;
        let streamer = session.streamer_mut();
        v.next_wake = streamer.as_ref().and_then(|s| s.next_wake_in_slots(|at| slot_start(epoch, at)));
        v.origin = streamer.and_then(|s| s.origin());
        if let Some(path) = first {
            self.observer.note(Note::Loop(LoopNote::ViewerAdmitted));
            self.count_stream(&path, true);
        }
    }

    fn count_stream(&mut self, path: &str, started: bool) {
        let n = self.per_stream.entry(path.to_string()).or_default();
        *n = if started { *n + 1 } else { n.saturating_sub(1) };
        let viewers = *n;
        if viewers == 0 {
            self.per_stream.remove(path);
        }
        self.observer.note(Note::Loop(LoopNote::StreamViewers { path, viewers }));
    }

    /// The loop's thread has used `cpu` of CPU time in all, at `now` (called once a turn): the
    /// core measures its headroom from it, window by window, and sets how many viewers it
    /// admits ([`Headroom`]).
    pub fn account(&mut self, cpu: Duration, now: Instant) {
        let streaming =
            self.viewers.values().filter(|v| v.next_wake.is_some() || !v.queue.is_empty()).count();
        // Viewers weighted by the time they streamed: a ramp's newcomers count for their part of
        // the window. The mean of the window's start and end, used before, counted viewers that
        // arrived early in a window at half and those that arrived late at half too.
        if let Some((at, viewers)) = self.load.last {
            self.load.viewer_seconds += viewers as f64 * now.saturating_duration_since(at).as_secs_f64();
        }
        self.load.last = Some((now, streaming));
        let Some((since, cpu_then)) = self.load.start else {
            self.load.start = Some((now, cpu));
            return;
        };
        let wall = now.saturating_duration_since(since);
        if wall < LOAD_WINDOW {
            return;
        }
        let seconds = wall.as_secs_f64();
        let busy = cpu.saturating_sub(cpu_then).as_secs_f64() / seconds;
        let late_sends = std::mem::take(&mut self.load.late);
        let viewers = std::mem::take(&mut self.load.viewer_seconds) / seconds;
        let window = Window { busy, viewers, late_sends, sessions: self.table.len() };
        let room = admission::room(self.table.config(), &mut self.load.admission, window);
        self.table.set_room(room);
        self.load.active = viewers > 0.0 || busy >= ACTIVE_BUSY;
        let viewers = viewers.round() as usize;
        self.observer.note(Note::Loop(LoopNote::Headroom(Headroom { busy, late_sends, viewers, room })));
        self.load.start = Some((now, cpu));
    }

    /// When the loop must call [`RtspServer::tick`] next, if ever.
    pub fn next_wake(&self) -> Option<Instant> {
        let viewers = self.viewers.values().filter_map(|v| v.next_wake).min();
        let controls = self
            .connections()
            .filter(|(_, c)| !c.drop_output)
            .map(|(_, c)| {
                let deadline = c.rtsp.deadline(&self.table);
                c.rtsp
                    .retry_at()
                    .filter(|_| !c.closing && c.out.len() <= OUTPUT_HIGH)
                    .map_or(deadline, |retry| retry.min(deadline))
            })
            .min();
        // The end of the current window while the last one had work (see `LoadMeter::active`).
        let report = self.load.start.filter(|_| self.load.active).map(|(since, _)| since + LOAD_WINDOW);
        let at =
            [viewers, controls, self.table.deadline(), self.pace_wake, report].into_iter().flatten().min()?;
        // Rounded up to the grid: never early, at most a step late.
        Some(grid_point(self.epoch, at, PACE_TICK, u128::div_ceil))
    }
}

/// The point of the grid of `step`s from `epoch` that `round` (`div_ceil` or `div`) takes `at` to.
fn grid_point(epoch: Instant, at: Instant, step: Duration, round: fn(u128, u128) -> u128) -> Instant {
    let step = step.as_nanos();
    let steps = round(at.saturating_duration_since(epoch).as_nanos(), step);
    epoch + Duration::from_nanos((steps * step) as u64)
}

/// The start of the [`SEND_SLOT`] holding `at`, slots counted from `epoch`.
fn slot_start(epoch: Instant, at: Instant) -> Instant {
    grid_point(epoch, at, SEND_SLOT, std::ops::Div::div)
}

/// The last instant of the [`SEND_SLOT`] holding `at`.
fn slot_end(epoch: Instant, at: Instant) -> Instant {
    slot_start(epoch, at) + SEND_SLOT - Duration::from_nanos(1)
}

mod fanout;
#[cfg(test)]
mod live_tests;
#[cfg(test)]
mod tests;
