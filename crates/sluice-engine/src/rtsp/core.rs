//! The RTSP loop's state, the same on every loop: control connections, the session table, one
//! bounded queue per viewer, pacing, and what to write where.
//!
//! A loop hands the core what it read ([`Core::received`]), calls [`Core::tick`] when
//! [`Core::next_wake`] comes, and asks what to write: a control connection's [`OutBuf`] (replies,
//! and interleaved packets moved from its viewers' queues while the buffer is short) and a
//! [`Datagrams`] batch filled from UDP viewers' queues ([`Core::fill_datagrams`]). Each viewer's
//! packets enter its own `ViewerQueue`, so a viewer whose connection is full loses whole frames up
//! to the next keyframe (counted) instead of holding the loop or the others. Sample bytes are read
//! here, with `pread` from the page cache, once per viewer and sample.
//!
//! The core makes no socket calls and holds no readiness state; `T` is the loop's own
//! per-connection state (its socket, buffers, operations in flight), kept in the same slot so both
//! share one key.

use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use slab::Slab;
use sluice_media::rtsp::{
    ConnectionId, Delivery, Due, Event as RtspEvent, Output, Release, RtspConfig, RtspConnection, SessionId,
    SessionTable,
};
use sluice_proto::rtp::{Offer, Packets, QueueLimits, ViewerQueue};

use super::datagrams::{Datagrams, Port};
use super::MediaLibrary;
use crate::counters::{Event, Shard, Syscall};

/// Bytes a control connection may have waiting to be written before its viewers' packets stay in
/// their queues. Small enough that a stalled TCP viewer overflows its queue (and loses frames)
/// rather than growing this buffer; large enough for a keyframe of a 23 Mbps stream at once.
const OUTPUT_HIGH: usize = 512 * 1024;
/// The CNAME of the server's sender reports.
const CNAME: &str = "sluice";
/// A UDP viewer's packets leave at up to this multiple of its presentation's mean bit rate, in
/// bursts of at most [`PACE_BURST`] bytes, rather than a whole frame at once. A keyframe of the
/// 23 Mbps test stream is about 160 KB, 115 datagrams: sent in one burst to each of 50 viewers, it
/// overflowed the receivers' default 208 KiB socket buffers (the kernel charges about 2.3 KB a
/// datagram), and 49 of 50 viewers lost packets (2,893 lost, `RcvbufErrors` rising; 2026-11-22).
/// At 4× the mean rate a frame still leaves within about a third of its interval.
const PACE_RATE_FACTOR: f64 = 4.0;
/// Bytes a UDP viewer may be sent back to back.
const PACE_BURST: f64 = 32.0 * 1024.0;
/// The loop wakes for pacing at most this often: a 23 Mbps viewer at 4× earns a packet's worth
/// every 120 µs, and waking for each (io_uring's timeouts are exact, epoll's are whole
/// milliseconds) made the io_uring loop use 72% of a core for 50 UDP viewers against epoll's
/// 22% (E5, 2026-11-22). A millisecond adds 12 KB to a bucket of 32 KB.
const PACE_TICK: Duration = Duration::from_millis(1);
/// The pacing rate for a presentation whose size and duration are unknown (8 MB/s).
const PACE_FALLBACK_RATE: f64 = 8.0e6;

/// What a control connection has to write, in two buffers so bytes handed to the kernel stay put
/// while more are appended (io_uring reads them after submission).
#[derive(Debug, Default)]
pub(crate) struct OutBuf {
    queued: Vec<u8>,
    sending: Vec<u8>,
    sent: usize,
}

impl OutBuf {
    fn push(&mut self, bytes: &[u8]) {
        self.queued.extend_from_slice(bytes);
    }

    /// Bytes not yet written.
    pub(crate) fn len(&self) -> usize {
        self.queued.len() + self.sending.len() - self.sent
    }

    /// Whether everything has been written.
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes to write next (stable until [`OutBuf::advance`]), or `None` when done.
    pub(crate) fn next(&mut self) -> Option<&[u8]> {
        if self.sent == self.sending.len() {
            self.sending.clear();
            self.sent = 0;
            std::mem::swap(&mut self.queued, &mut self.sending);
        }
        (!self.sending.is_empty()).then(|| &self.sending[self.sent..])
    }

    /// `n` bytes of what [`OutBuf::next`] gave were written.
    pub(crate) fn advance(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.sending.len());
    }
}

/// One control connection.
pub(crate) struct Control<T> {
    /// The loop's state for it.
    pub(crate) io: T,
    pub(crate) out: OutBuf,
    rtsp: RtspConnection,
    /// The client, for the access log.
    peer: SocketAddr,
    input: Vec<u8>,
    /// Interleaved viewers whose packets go out on this connection.
    viewers: Vec<SessionId>,
    /// Closed by the core (timed out, or done after a `Connection: close`): the loop closes it
    /// once `out` is written, or at once when `drop_output`.
    closing: bool,
    drop_output: bool,
    /// Gone from the core's point of view (its sessions were released); the slot waits for the
    /// loop to [`Core::remove`] it.
    disconnected: bool,
}

impl<T> Control<T> {
    /// Whether the loop should close the connection now.
    pub(crate) fn should_close(&self) -> bool {
        self.closing && (self.drop_output || self.out.is_empty())
    }
}

/// A token bucket: how many bytes a viewer may be sent now.
struct Pacer {
    /// Bytes per second.
    rate: f64,
    tokens: f64,
    at: Instant,
}

impl Pacer {
    fn new(rate: f64, now: Instant) -> Pacer {
        Pacer { rate, tokens: PACE_BURST, at: now }
    }

    /// Takes `n` bytes' worth if the bucket has them (a packet larger than the burst is let
    /// through on a full bucket).
    fn take(&mut self, n: usize, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(PACE_BURST);
        self.at = now;
        let n = (n as f64).min(PACE_BURST);
        if self.tokens >= n {
            self.tokens -= n;
            true
        } else {
            false
        }
    }

    /// When the bucket will have `n` bytes.
    fn ready_at(&self, n: usize) -> Instant {
        let missing = (n as f64).min(PACE_BURST) - self.tokens;
        self.at + Duration::from_secs_f64((missing / self.rate).max(0.0))
    }
}

/// One session's sending side.
struct Viewer {
    /// The control connection (slab key) its interleaved packets go out on, if any.
    control: Option<usize>,
    file: Option<File>,
    deliveries: Vec<Delivery>,
    queue: ViewerQueue,
    next_wake: Option<Instant>,
    /// Listed in `udp_ready`.
    ready: bool,
    pacer: Pacer,
}

/// See the module docs.
pub(crate) struct Core<'a, M: MediaLibrary, T> {
    media: &'a M,
    pub(crate) counters: &'a Shard,
    table: SessionTable,
    controls: Slab<Control<T>>,
    generation: u32,
    viewers: HashMap<SessionId, Viewer>,
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
    sample: Vec<u8>,
    reports: Vec<(usize, Vec<u8>)>,
    scratch_ids: Vec<SessionId>,
}

impl<'a, M: MediaLibrary, T> Core<'a, M, T> {
    pub(crate) fn new(config: RtspConfig, media: &'a M, counters: &'a Shard) -> Self {
        Core {
            media,
            counters,
            table: SessionTable::new(config),
            controls: Slab::with_capacity(256),
            generation: 0,
            viewers: HashMap::new(),
            queue_limits: QueueLimits::default(),
            udp_ready: VecDeque::new(),
            pace_wake: None,
            dirty: Vec::new(),
            output: Output::default(),
            due: Vec::new(),
            packets: Packets::new(),
            sample: Vec::new(),
            reports: Vec::new(),
            scratch_ids: Vec::new(),
        }
    }

    /// A connection accepted from `peer`; returns its key.
    pub(crate) fn accept(&mut self, io: T, peer: SocketAddr, now: Instant) -> usize {
        self.generation = self.generation.wrapping_add(1);
        let key = self.controls.vacant_key();
        // The id carries the slot and a generation, so a session of a closed connection can never
        // be taken for one of the connection that reuses its slot.
        let id = ConnectionId((u64::from(self.generation) << 32) | key as u64);
        self.counters.add(Event::RtspConnections, 1);
        self.controls.insert(Control {
            io,
            out: OutBuf::default(),
            rtsp: RtspConnection::new(id, peer.ip(), now),
            peer,
            input: Vec::new(),
            viewers: Vec::new(),
            closing: false,
            drop_output: false,
            disconnected: false,
        })
    }

    pub(crate) fn control(&mut self, key: usize) -> Option<&mut Control<T>> {
        self.controls.get_mut(key)
    }

    /// Keys of every connection (for shutdown).
    pub(crate) fn keys(&self) -> Vec<usize> {
        self.controls.iter().map(|(k, _)| k).collect()
    }

    /// Connections whose output or state changed since the last call.
    pub(crate) fn take_dirty(&mut self, into: &mut Vec<usize>) {
        into.clear();
        into.append(&mut self.dirty);
        into.sort_unstable();
        into.dedup();
    }

    fn mark(&mut self, key: usize) {
        self.dirty.push(key);
    }

    /// Bytes the client sent on `key`.
    pub(crate) fn received(&mut self, key: usize, bytes: &[u8], now: Instant) {
        let Some(c) = self.controls.get_mut(key) else { return };
        if c.closing || c.disconnected {
            return;
        }
        self.counters.add(Event::BytesIn, bytes.len() as u64);
        c.input.extend_from_slice(bytes);
        self.answer(key, now);
    }

    /// Answers what `key` has buffered, as far as its output allows.
    fn answer(&mut self, key: usize, now: Instant) {
        loop {
            let Some(c) = self.controls.get_mut(key) else { return };
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
            self.counters.add(Event::RtspRequests, self.output.answered as u64);
            for a in &self.output.access {
                let (session, transport) =
                    (a.session.as_deref().unwrap_or("-"), a.transport.as_deref().unwrap_or("-"));
                tracing::info!(target: "sluice::access", protocol = "rtsp", peer = %c.peer, method = a.method,
                    url = a.url, status = a.status, session, transport, "rtsp request");
            }
            self.mark(key);
            let events = std::mem::take(&mut self.output.events);
            self.apply(&events, now);
            self.output.events = events;
            if consumed == 0 {
                break;
            }
        }
    }

    /// Whether `key` will take more input now (its requests are all answered).
    pub(crate) fn wants_input(&self, key: usize) -> bool {
        self.controls.get(key).is_some_and(|c| {
            !c.closing && !c.disconnected && c.out.len() <= OUTPUT_HIGH && c.input.len() <= 64 * 1024
        })
    }

    /// `key` wrote some output: refill it from its viewers and answer what waited on it.
    pub(crate) fn wrote(&mut self, key: usize, now: Instant) {
        self.feed_interleaved(key);
        self.answer(key, now);
    }

    /// The connection `key` is gone (closed by the client, failed, or closed by the loop): its
    /// interleaved sessions are released. The loop calls [`Core::remove`] when its operations
    /// have finished.
    pub(crate) fn disconnect(&mut self, key: usize, now: Instant) {
        let Some(c) = self.controls.get_mut(key) else { return };
        if c.disconnected {
            return;
        }
        c.disconnected = true;
        c.closing = true;
        c.drop_output = true;
        let id = c.rtsp.id();
        let mut events = Vec::new();
        self.table.connection_closed(id, &mut events);
        self.apply(&events, now);
    }

    /// Frees `key`'s slot, returning the loop's state for it.
    pub(crate) fn remove(&mut self, key: usize, now: Instant) -> Option<T> {
        self.disconnect(key, now);
        self.controls.try_remove(key).map(|c| c.io)
    }

    /// An RTCP packet arrived from `from` on the server's RTCP port: it keeps that viewer's
    /// session alive.
    pub(crate) fn rtcp_from(&mut self, from: SocketAddr, now: Instant) {
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

    fn apply(&mut self, events: &[RtspEvent], now: Instant) {
        for event in events {
            match *event {
                RtspEvent::Created(id) => {
                    self.counters.add(Event::RtspSessionsCreated, 1);
                    let path = self.table.get_mut(id).map(|s| s.path().to_string()).unwrap_or_default();
                    tracing::info!(target: "sluice::rtsp", session = %id, path, "rtsp session started");
                    self.viewers.insert(
                        id,
                        Viewer {
                            control: None,
                            file: None,
                            deliveries: Vec::new(),
                            queue: ViewerQueue::new(self.queue_limits),
                            next_wake: None,
                            ready: false,
                            pacer: Pacer::new(PACE_FALLBACK_RATE, now),
                        },
                    );
                }
                RtspEvent::Play(id) => self.play(id, now),
                RtspEvent::Pause(id) => {
                    if let Some(v) = self.viewers.get_mut(&id) {
                        v.next_wake = None;
                    }
                }
                RtspEvent::Released(id, why) => {
                    tracing::info!(target: "sluice::rtsp", session = %id, reason = ?why, "rtsp session ended");
                    self.counters.add(
                        match why {
                            Release::Teardown => Event::RtspReleasedTeardown,
                            Release::Timeout => Event::RtspReleasedTimeout,
                            Release::ConnectionClosed => Event::RtspReleasedConnectionClosed,
                        },
                        1,
                    );
                    if let Some(v) = self.viewers.remove(&id) {
                        if let Some(c) = v.control.and_then(|k| self.controls.get_mut(k)) {
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
        v.deliveries = session.tracks().iter().map(|t| t.delivery).collect();
        if v.file.is_none() {
            match self.media.open_bytes(session.path()) {
                Ok(f) => v.file = Some(f),
                Err(e) => tracing::warn!("rtsp: cannot open {} to stream it: {e}", session.path()),
            }
        }
        let interleaved = v.deliveries.iter().any(|d| matches!(d, Delivery::Interleaved { .. }));
        if interleaved && v.control.is_none() {
            let owner = session.owner().0 as u32 as usize;
            if let Some(c) = self.controls.get_mut(owner).filter(|c| c.rtsp.id() == session.owner()) {
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
        v.next_wake = session.streamer_mut().and_then(|s| s.next_wake());
    }

    /// When the loop must call [`Core::tick`] next, if ever.
    pub(crate) fn next_wake(&self) -> Option<Instant> {
        let viewers = self.viewers.values().filter_map(|v| v.next_wake).min();
        let controls =
            self.controls.iter().filter(|(_, c)| !c.closing).map(|(_, c)| c.rtsp.deadline(&self.table)).min();
        [viewers, controls, self.table.deadline(), self.pace_wake].into_iter().flatten().min()
    }

    /// Sends what is due at `now`, expires sessions and idle connections.
    pub(crate) fn tick(&mut self, now: Instant) {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
        if self.table.deadline().is_some_and(|d| d <= now) {
            let mut events = Vec::new();
            self.table.expire(now, &mut events);
            self.apply(&events, now);
        }
        let idle: Vec<usize> = self
            .controls
            .iter()
            .filter(|(_, c)| !c.closing && c.rtsp.deadline(&self.table) <= now)
            .map(|(k, _)| k)
            .collect();
        for key in idle {
            if let Some(c) = self.controls.get_mut(key) {
                c.closing = true;
                c.drop_output = true;
            }
            self.mark(key);
        }
        let mut due_ids = std::mem::take(&mut self.scratch_ids);
        due_ids.clear();
        due_ids.extend(
            self.viewers.iter().filter(|(_, v)| v.next_wake.is_some_and(|w| w <= now)).map(|(id, _)| *id),
        );
        for &id in &due_ids {
            self.stream(id, now, wall);
        }
        self.scratch_ids = due_ids;
    }

    /// Queues what `id` has due at `now` and hands it towards its delivery.
    fn stream(&mut self, id: SessionId, now: Instant, wall: Duration) {
        let Some(session) = self.table.get_mut(id) else { return };
        let Some(v) = self.viewers.get_mut(&id) else { return };
        let Some(streamer) = session.streamer_mut() else { return };
        self.due.clear();
        streamer.due(now, &mut self.due);
        for d in &self.due {
            self.sample.resize(d.size as usize, 0);
            let read = match &v.file {
                Some(f) => {
                    self.counters.syscall(Syscall::Pread);
                    f.read_exact_at(&mut self.sample, d.offset)
                }
                None => Err(std::io::ErrorKind::NotFound.into()),
            };
            self.packets.clear();
            if read.is_err() || streamer.packetize(d, &self.sample, &mut self.packets).is_err() {
                // The file changed under its index, or the sample is malformed: the viewer
                // misses it, as it would a lost frame; the stream goes on.
                continue;
            }
            if v.queue.push_packets((d.track * 2) as u8, d.keyframe, &self.packets) == Offer::Dropped {
                self.counters.add(Event::RtpFramesDropped, 1);
                self.counters.add(Event::RtpPacketsDropped, self.packets.len() as u64);
            }
        }
        self.reports.clear();
        streamer.sender_reports(now, wall, CNAME, &mut self.reports);
        streamer.goodbyes(now, wall, CNAME, &mut self.reports);
        for (track, report) in &self.reports {
            let _ = v.queue.push_packet((track * 2 + 1) as u8, report);
        }
        v.next_wake = streamer.next_wake();
        if v.queue.is_empty() {
            return;
        }
        match v.control {
            Some(key) => self.feed_interleaved(key),
            None => {
                if !v.ready {
                    v.ready = true;
                    self.udp_ready.push_back(id);
                }
            }
        }
    }

    /// Moves queued packets of `key`'s viewers into its output while it is short.
    fn feed_interleaved(&mut self, key: usize) {
        let Some(c) = self.controls.get_mut(key) else { return };
        if c.closing {
            return;
        }
        let mut moved = false;
        for id in &c.viewers {
            let Some(v) = self.viewers.get_mut(id) else { continue };
            while c.out.len() < OUTPUT_HIGH {
                let Some((stream, packet)) = v.queue.front() else { break };
                let channel = match v.deliveries.get(usize::from(stream / 2)) {
                    Some(Delivery::Interleaved { rtp, rtcp }) => {
                        Some(if stream % 2 == 0 { *rtp } else { *rtcp })
                    }
                    _ => None,
                };
                if let Some(channel) = channel {
                    let len = packet.len() as u16;
                    c.out.push(&[b'$', channel, (len >> 8) as u8, len as u8]);
                    c.out.push(packet);
                    self.counters.add(Event::RtpPacketsSent, 1);
                    self.counters.add(Event::RtpBytesSent, packet.len() as u64);
                    moved = true;
                }
                v.queue.pop();
            }
        }
        if moved {
            self.mark(key);
        }
    }

    /// Moves queued packets of UDP viewers into `batch`, viewer by viewer, as far as each one's
    /// pacer allows; returns whether the batch filled up (more may be sendable at once).
    pub(crate) fn fill_datagrams(&mut self, batch: &mut Datagrams, now: Instant) -> bool {
        self.pace_wake = None;
        // Each ready viewer once per call: those still holding packets (held by their pacer)
        // go round again at the next call.
        for _ in 0..self.udp_ready.len() {
            let Some(id) = self.udp_ready.pop_front() else { break };
            let Some(v) = self.viewers.get_mut(&id) else { continue };
            while let Some((stream, packet)) = v.queue.front() {
                if !batch.fits(packet.len()) {
                    // Full: this viewer and the ones behind it go first next time.
                    self.udp_ready.push_front(id);
                    return true;
                }
                if !v.pacer.take(packet.len(), now) {
                    let at = v.pacer.ready_at(packet.len()).max(now + PACE_TICK);
                    self.pace_wake = Some(self.pace_wake.map_or(at, |w| w.min(at)));
                    break;
                }
                if let Some(Delivery::Udp { rtp, rtcp }) = v.deliveries.get(usize::from(stream / 2)) {
                    let (port, dest) = if stream % 2 == 0 { (Port::Rtp, *rtp) } else { (Port::Rtcp, *rtcp) };
                    batch.push(port, dest, packet);
                }
                v.queue.pop();
            }
            if v.queue.is_empty() {
                v.ready = false;
            } else {
                self.udp_ready.push_back(id);
            }
        }
        false
    }

    /// Counts datagrams that left.
    pub(crate) fn sent_datagrams(&self, count: usize, bytes: usize) {
        self.counters.add(Event::RtpPacketsSent, count as u64);
        self.counters.add(Event::RtpBytesSent, bytes as u64);
    }
}
