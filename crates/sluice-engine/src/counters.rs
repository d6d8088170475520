//! What an engine costs, counted by the engine itself: system calls by kind, io_uring operations,
//! bytes, connections and errors; and the one limit on connections open at once over all of an
//! engine's workers and RTSP loops, which counts what it refuses and closes.
//!
//! Every engine bumps these counters at the place it makes the call, so "system calls per request"
//! (the epoll vs io_uring report's central figure) comes from the server on every engine rather than
//! from strace. Counters are sharded: each event loop or thread adds to its own cache-line-padded
//! shard with relaxed atomics (an uncontended add, no lock), and a reader sums the shards. This module
//! does not format them (the server renders `/metrics`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// System calls engines make, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Syscall {
    /// `accept4`
    Accept,
    /// `read`/`recv` on a socket
    Read,
    /// `sendmsg`/`send`/`write` on a socket
    Write,
    /// `sendfile`
    Sendfile,
    /// `splice`
    Splice,
    /// `pread` of a file (copy strategy)
    Pread,
    /// `epoll_wait`
    EpollWait,
    /// `epoll_ctl`
    EpollCtl,
    /// `poll`
    Poll,
    /// `io_uring_enter`
    IoUringEnter,
    /// `close`
    Close,
    /// `shutdown`
    Shutdown,
    /// `setsockopt`
    Setsockopt,
    /// `sendmmsg` (RTP and RTCP datagrams, a batch a call)
    Sendmmsg,
}

impl Syscall {
    /// Every kind, in the order of their names in `/metrics`.
    pub const ALL: [Syscall; 14] = [
        Syscall::Accept,
        Syscall::Read,
        Syscall::Write,
        Syscall::Sendfile,
        Syscall::Splice,
        Syscall::Pread,
        Syscall::EpollWait,
        Syscall::EpollCtl,
        Syscall::Poll,
        Syscall::IoUringEnter,
        Syscall::Close,
        Syscall::Shutdown,
        Syscall::Setsockopt,
        Syscall::Sendmmsg,
    ];

    /// The label value used in `/metrics`.
    pub fn name(self) -> &'static str {
        match self {
            Syscall::Accept => "accept",
            Syscall::Read => "read",
            Syscall::Write => "write",
            Syscall::Sendfile => "sendfile",
            Syscall::Splice => "splice",
            Syscall::Pread => "pread",
            Syscall::EpollWait => "epoll_wait",
            Syscall::EpollCtl => "epoll_ctl",
            Syscall::Poll => "poll",
            Syscall::IoUringEnter => "io_uring_enter",
            Syscall::Close => "close",
            Syscall::Shutdown => "shutdown",
            Syscall::Setsockopt => "setsockopt",
            Syscall::Sendmmsg => "sendmmsg",
        }
    }
}

/// Events that are not system calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum Event {
    /// io_uring submission queue entries submitted.
    UringSubmitted,
    /// io_uring completions reaped.
    UringCompleted,
    /// Bytes read from sockets.
    BytesIn,
    /// Bytes written to sockets (file bytes included).
    BytesOut,
    /// Connections accepted.
    ConnectionsAccepted,
    /// Connections closed.
    ConnectionsClosed,
    /// Connections refused because `max_connections` was reached.
    ConnectionsRejected,
    /// Connections answered 503 and closed because every thread was busy and the queue of
    /// accepted connections was full (threads engine, pool mode).
    ConnectionsShed,
    /// Connections dropped because the client stopped reading (send deadline).
    SendTimeouts,
    /// Sockets that failed with an error (reset, broken pipe, …).
    SocketErrors,
    /// Accept calls that failed for want of descriptors (EMFILE/ENFILE).
    AcceptErrors,
    /// Turns in which a loop behind on its sends took at most one new connection, leaving any
    /// others in the backlog for later turns.
    AcceptsDeferred,
    /// RTSP control connections accepted.
    RtspConnections,
    /// RTSP requests answered.
    RtspRequests,
    /// RTSP sessions set up.
    RtspSessionsCreated,
    /// RTSP sessions released by `TEARDOWN`.
    RtspReleasedTeardown,
    /// RTSP sessions released by the session timeout.
    RtspReleasedTimeout,
    /// RTSP sessions released because their interleaved connection closed.
    RtspReleasedConnectionClosed,
    /// RTP and RTCP packets sent (datagrams or interleaved frames).
    RtpPacketsSent,
    /// Bytes of those packets (RTP headers included, interleaved framing not).
    RtpBytesSent,
    /// Frames a viewer's queue dropped because the viewer could not keep up.
    RtpFramesDropped,
    /// Packets of those frames.
    RtpPacketsDropped,
    /// RTSP viewers whose stream started (first `PLAY` admitted).
    RtspViewersAdmitted,
    /// RTSP viewers refused with 453 (viewer bound or headroom).
    RtspViewersRefused,
    /// Samples the RTSP loop queued late (past the core's late-send threshold) after their time.
    RtpLateSends,
    /// TLS handshakes completed.
    TlsHandshakes,
    /// TLS connections that ended before their handshake completed (not TLS, a bad or refused
    /// handshake, or the header deadline).
    TlsHandshakeFailures,
    /// TLS connections whose record layer the kernel took over (kTLS).
    TlsKernelConnections,
    /// Connections left in user-space TLS with kernel TLS on: the kernel has no `tls` ULP or
    /// does not take the negotiated suite.
    TlsKernelFallbackUnsupported,
    /// ... because bytes beyond the handshake had already been read in user space.
    TlsKernelFallbackInput,
    /// ... because `setsockopt(TCP_ULP, "tls")` failed on the connection.
    TlsKernelFallbackUlp,
    /// Connections closed because the kernel refused their keys after they left rustls.
    TlsKernelFallbackKeys,
}

impl Event {
    /// Every event, in `/metrics` order.
    pub const ALL: [Event; 32] = [
        Event::UringSubmitted,
        Event::UringCompleted,
        Event::BytesIn,
        Event::BytesOut,
        Event::ConnectionsAccepted,
        Event::ConnectionsClosed,
        Event::ConnectionsRejected,
        Event::ConnectionsShed,
        Event::SendTimeouts,
        Event::SocketErrors,
        Event::AcceptErrors,
        Event::AcceptsDeferred,
        Event::RtspConnections,
        Event::RtspRequests,
        Event::RtspSessionsCreated,
        Event::RtspReleasedTeardown,
        Event::RtspReleasedTimeout,
        Event::RtspReleasedConnectionClosed,
        Event::RtpPacketsSent,
        Event::RtpBytesSent,
        Event::RtpFramesDropped,
        Event::RtpPacketsDropped,
        Event::RtspViewersAdmitted,
        Event::RtspViewersRefused,
        Event::RtpLateSends,
        Event::TlsHandshakes,
        Event::TlsHandshakeFailures,
        Event::TlsKernelConnections,
        Event::TlsKernelFallbackUnsupported,
        Event::TlsKernelFallbackInput,
        Event::TlsKernelFallbackUlp,
        Event::TlsKernelFallbackKeys,
    ];

    /// The metric name (without the `sluice_` prefix) and its help text.
    pub fn describe(self) -> (&'static str, &'static str) {
        match self {
            Event::UringSubmitted => {
                ("io_uring_submitted_total", "io_uring submission queue entries submitted.")
            }
            Event::UringCompleted => ("io_uring_completed_total", "io_uring completions reaped."),
            Event::BytesIn => ("bytes_received_total", "Bytes read from client sockets."),
            Event::BytesOut => ("bytes_sent_total", "Bytes written to client sockets, file bytes included."),
            Event::ConnectionsAccepted => ("connections_accepted_total", "Connections accepted."),
            Event::ConnectionsClosed => ("connections_closed_total", "Connections closed."),
            Event::ConnectionsRejected => (
                "connections_rejected_total",
                "Connections closed at once because max_connections was reached.",
            ),
            Event::ConnectionsShed => (
                "connections_shed_total",
                "Connections answered 503 and closed because every thread was busy and the queue was full.",
            ),
            Event::SendTimeouts => {
                ("send_timeouts_total", "Connections dropped because the client stopped reading.")
            }
            Event::SocketErrors => ("socket_errors_total", "Connections that ended with a socket error."),
            Event::AcceptErrors => {
                ("accept_errors_total", "accept calls that failed for want of descriptors.")
            }
            Event::AcceptsDeferred => (
                "accepts_deferred_total",
                "Turns in which a loop behind on its sends took at most one new connection.",
            ),
            Event::RtspConnections => ("rtsp_connections_total", "RTSP control connections accepted."),
            Event::RtspRequests => ("rtsp_requests_total", "RTSP requests answered."),
            Event::RtspSessionsCreated => ("rtsp_sessions_created_total", "RTSP sessions set up."),
            Event::RtspReleasedTeardown
            | Event::RtspReleasedTimeout
            | Event::RtspReleasedConnectionClosed => {
                ("rtsp_sessions_released_total", "RTSP sessions released, by reason.")
            }
            Event::RtpPacketsSent => ("rtp_packets_sent_total", "RTP and RTCP packets sent to viewers."),
            Event::RtpBytesSent => ("rtp_bytes_sent_total", "Bytes of RTP and RTCP packets sent to viewers."),
            Event::RtpFramesDropped => {
                ("rtp_frames_dropped_total", "Frames dropped from queues of viewers that could not keep up.")
            }
            Event::RtpPacketsDropped => ("rtp_packets_dropped_total", "Packets of the frames dropped."),
            Event::RtspViewersAdmitted => {
                ("rtsp_viewers_admitted_total", "RTSP viewers whose stream started.")
            }
            Event::RtspViewersRefused => {
                ("rtsp_viewers_refused_total", "RTSP viewers refused with 453 Not Enough Bandwidth.")
            }
            Event::TlsHandshakes => ("tls_handshakes_total", "TLS handshakes completed."),
            Event::TlsHandshakeFailures => (
                "tls_handshake_failures_total",
                "TLS connections closed before their handshake completed (not TLS, refused, or too slow).",
            ),
            Event::TlsKernelConnections => (
                "tls_kernel_connections_total",
                "TLS connections handed to the kernel after their handshake (kTLS): sendfile and splice stay in use.",
            ),
            Event::TlsKernelFallbackUnsupported
            | Event::TlsKernelFallbackInput
            | Event::TlsKernelFallbackUlp
            | Event::TlsKernelFallbackKeys => (
                "tls_kernel_fallbacks_total",
                "TLS connections kept in user space with kernel TLS on, by reason (keys: closed instead).",
            ),
            Event::RtpLateSends => {
                ("rtp_late_sends_total", "Samples queued more than 50 ms after their time by the RTSP loop.")
            }
        }
    }

    /// The label that sets this event apart from others of the same metric name.
    pub fn label(self) -> Option<(&'static str, &'static str)> {
        match self {
            Event::RtspReleasedTeardown => Some(("reason", "teardown")),
            Event::RtspReleasedTimeout => Some(("reason", "timeout")),
            Event::RtspReleasedConnectionClosed => Some(("reason", "connection_closed")),
            Event::TlsKernelFallbackUnsupported => Some(("reason", "unsupported")),
            Event::TlsKernelFallbackInput => Some(("reason", "input_pending")),
            Event::TlsKernelFallbackUlp => Some(("reason", "ulp")),
            Event::TlsKernelFallbackKeys => Some(("reason", "keys")),
            _ => None,
        }
    }
}

const SYSCALLS: usize = Syscall::ALL.len();
const EVENTS: usize = Event::ALL.len();
/// Enough shards that the threads engine's pool spreads thin; event loops get one each.
const SHARDS: usize = 64;

/// The ways an RTSP session is released.
const RTSP_RELEASES: [Event; 3] =
    [Event::RtspReleasedTeardown, Event::RtspReleasedTimeout, Event::RtspReleasedConnectionClosed];

/// One thread's counters, on cache lines of their own.
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct Shard {
    syscalls: [AtomicU64; SYSCALLS],
    events: [AtomicU64; EVENTS],
    /// Set by an RTSP loop's shard only: its headroom and the viewers per stream.
    rtsp: Mutex<RtspGauges>,
    /// When each of the loop's live RTSP sessions started (bounded by the sessions a loop
    /// admits), for their durations.
    session_starts: Mutex<std::collections::HashMap<u64, std::time::Instant>>,
    /// Ended RTSP sessions by duration: one count per bound of [`RTSP_SESSION_BUCKETS`] (each
    /// session in the first bucket it fits), then those longer than all.
    session_durations: [AtomicU64; RTSP_SESSION_BUCKETS.len() + 1],
    /// The ended sessions' durations added up, in milliseconds.
    session_millis: AtomicU64,
}

/// Upper bounds (seconds) of the RTSP session-duration histogram: a glance at a clip to a
/// half-day stream.
pub const RTSP_SESSION_BUCKETS: [f64; 12] =
    [1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 14400.0, 43200.0];

/// RTSP sessions that ended, by duration (see [`Counters::rtsp_session_durations`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionDurations {
    /// Sessions at most each bound of [`RTSP_SESSION_BUCKETS`] long (cumulative).
    pub at_most: Vec<u64>,
    /// Every ended session.
    pub count: u64,
    /// Their durations added up, in seconds.
    pub sum_secs: f64,
}

/// What an RTSP loop last reported of its load (gauges, not counters).
#[derive(Debug, Default, Clone)]
pub struct RtspGauges {
    /// The loop's index, set when it starts (`None`: not an RTSP loop's shard).
    pub loop_index: Option<usize>,
    /// Share of the last window the loop spent working (CPU time over wall time).
    pub busy: f64,
    /// Viewers it admits at most now (`None`: no bound from the load).
    pub room: Option<u64>,
    /// Viewers streaming each presentation (URL path), those at zero left out.
    pub streams: BTreeMap<String, u64>,
}

impl Shard {
    /// Notes that RTSP session `id` started now.
    pub fn rtsp_session_started(&self, id: u64) {
        self.session_starts.lock().unwrap_or_else(|e| e.into_inner()).insert(id, std::time::Instant::now());
    }

    /// Notes that RTSP session `id` ended now, counting its duration.
    pub fn rtsp_session_ended(&self, id: u64) {
        let started = self.session_starts.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
        let Some(started) = started else { return };
        let secs = started.elapsed().as_secs_f64();
        let bucket =
            RTSP_SESSION_BUCKETS.iter().position(|b| secs <= *b).unwrap_or(RTSP_SESSION_BUCKETS.len());
        self.session_durations[bucket].fetch_add(1, Ordering::Relaxed);
        self.session_millis.fetch_add((secs * 1e3) as u64, Ordering::Relaxed);
    }

    /// Counts one system call.
    #[inline]
    pub fn syscall(&self, kind: Syscall) {
        self.syscalls[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Adds `n` to an event counter.
    #[inline]
    pub fn add(&self, event: Event, n: u64) {
        self.events[event as usize].fetch_add(n, Ordering::Relaxed);
    }

    /// RTSP sessions created and not yet released on this shard (an RTSP loop's).
    fn rtsp_sessions(&self) -> u64 {
        let get = |e: Event| self.events[e as usize].load(Ordering::Relaxed);
        get(Event::RtspSessionsCreated).saturating_sub(RTSP_RELEASES.iter().map(|&e| get(e)).sum())
    }

    /// Updates this shard's RTSP gauges.
    pub fn rtsp_gauges(&self, f: impl FnOnce(&mut RtspGauges)) {
        f(&mut self.rtsp.lock().unwrap_or_else(|e| e.into_inner()));
    }
}

/// Every counter of one engine, shared between its workers and whoever reports them.
#[derive(Debug)]
pub struct Counters {
    shards: Box<[Shard]>,
    /// The `max_connections` places the HTTP workers and the RTSP loops counted here share.
    connections: OnceLock<Arc<ConnectionLimit>>,
    /// The CPU pools of the engines counting here (one a run), for `/metrics`.
    cpu_pools: Mutex<Vec<Arc<crate::pool::PoolStats>>>,
}

impl Default for Counters {
    fn default() -> Self {
        Counters {
            shards: (0..SHARDS).map(|_| Shard::default()).collect(),
            connections: OnceLock::new(),
            cpu_pools: Mutex::new(Vec::new()),
        }
    }
}

impl Counters {
    /// A fresh set, all zero.
    pub fn new() -> Arc<Counters> {
        Arc::new(Counters::default())
    }

    /// Counts `pool` among the CPU pools of the engines counting here.
    pub(crate) fn add_cpu_pool(&self, pool: Arc<crate::pool::PoolStats>) {
        self.cpu_pools.lock().unwrap_or_else(|e| e.into_inner()).push(pool);
    }

    /// The CPU pools of the engines counting here (none for the threads and tokio engines, which
    /// run jobs on their own threads).
    pub fn cpu_pools(&self) -> Vec<Arc<crate::pool::PoolStats>> {
        self.cpu_pools.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sets the connection limit that every side counting here shares (HTTP connections and RTSP
    /// control connections alike) to `max`, unless one is set already; call it before starting
    /// them.
    pub fn limit_connections(&self, max: usize) {
        self.connection_limit(max);
    }

    /// The shared connection limit, made with `max` if none was set.
    pub(crate) fn connection_limit(&self, max: usize) -> Arc<ConnectionLimit> {
        Arc::clone(self.connections.get_or_init(|| Arc::new(ConnectionLimit::new(max))))
    }

    /// The shard for worker or thread number `index`.
    pub fn shard(&self, index: usize) -> &Shard {
        &self.shards[index % SHARDS]
    }

    /// The total of one system call kind over all shards.
    pub fn syscalls(&self, kind: Syscall) -> u64 {
        self.shards.iter().map(|s| s.syscalls[kind as usize].load(Ordering::Relaxed)).sum()
    }

    /// The total of one event over all shards.
    pub fn events(&self, event: Event) -> u64 {
        self.shards.iter().map(|s| s.events[event as usize].load(Ordering::Relaxed)).sum()
    }

    /// Ended RTSP sessions by duration, over every shard.
    pub fn rtsp_session_durations(&self) -> SessionDurations {
        let mut per_bucket = [0u64; RTSP_SESSION_BUCKETS.len() + 1];
        let mut millis = 0;
        for shard in self.shards.iter() {
            for (n, c) in per_bucket.iter_mut().zip(&shard.session_durations) {
                *n += c.load(Ordering::Relaxed);
            }
            millis += shard.session_millis.load(Ordering::Relaxed);
        }
        let at_most = per_bucket[..RTSP_SESSION_BUCKETS.len()]
            .iter()
            .scan(0, |total, n| {
                *total += n;
                Some(*total)
            })
            .collect();
        SessionDurations { at_most, count: per_bucket.iter().sum(), sum_secs: millis as f64 / 1e3 }
    }

    /// RTSP sessions alive now (created less released, over all shards: a loop's session is
    /// created and released on that loop's shard, but the totals need not be).
    pub fn rtsp_sessions(&self) -> u64 {
        let released = RTSP_RELEASES.iter().map(|&e| self.events(e)).sum();
        self.events(Event::RtspSessionsCreated).saturating_sub(released)
    }

    /// The shard of RTSP loop `index` (the event loops count from the bottom of the range, the
    /// RTSP loops from the top), marked as that loop's so its gauges carry the index.
    pub fn rtsp_loop(&self, index: usize) -> &Shard {
        let shard = &self.shards[SHARDS - 1 - index % (SHARDS / 2)];
        shard.rtsp_gauges(|g| g.loop_index = Some(index));
        shard
    }

    /// Each RTSP loop's gauges and the sessions it holds now, by loop index.
    pub fn rtsp_loops(&self) -> Vec<(usize, RtspGauges, u64)> {
        let mut loops: Vec<(usize, RtspGauges, u64)> = self
            .shards
            .iter()
            .filter_map(|shard| {
                let g = shard.rtsp.lock().unwrap_or_else(|e| e.into_inner()).clone();
                Some((g.loop_index?, g, shard.rtsp_sessions()))
            })
            .collect();
        loops.sort_by_key(|l| l.0);
        loops
    }

    /// The RTSP loops' gauges, over every shard: the busiest loop's share, the rooms and the
    /// per-stream viewers added up (`None` when no RTSP loop has reported).
    pub fn rtsp_gauges(&self) -> Option<RtspGauges> {
        let mut all: Option<RtspGauges> = None;
        for shard in self.shards.iter() {
            let g = shard.rtsp.lock().unwrap_or_else(|e| e.into_inner());
            if g.loop_index.is_none() && g.room.is_none() && g.busy == 0.0 && g.streams.is_empty() {
                continue;
            }
            let sum = all.get_or_insert_with(RtspGauges::default);
            sum.busy = sum.busy.max(g.busy);
            sum.room = match (sum.room, g.room) {
                (Some(a), Some(b)) => Some(a.saturating_add(b)),
                (a, b) => a.or(b),
            };
            for (path, n) in &g.streams {
                *sum.streams.entry(path.clone()).or_default() += n;
            }
        }
        all
    }

    /// Connections open now.
    pub fn open_connections(&self) -> u64 {
        self.events(Event::ConnectionsAccepted).saturating_sub(self.events(Event::ConnectionsClosed))
    }
}

/// The connections open at once over all of an engine's workers, against `max_connections`.
#[derive(Debug)]
pub(crate) struct ConnectionLimit {
    open: AtomicUsize,
    max: usize,
}

impl ConnectionLimit {
    /// A limit of `max` connections, none open.
    pub fn new(max: usize) -> ConnectionLimit {
        ConnectionLimit { open: AtomicUsize::new(0), max }
    }

    /// Takes a place for a connection just accepted. At the limit the connection is counted as
    /// rejected and closed and false is returned: the caller drops it (closing it at once).
    pub fn admit(&self, counters: &Shard) -> bool {
        self.admit_or(counters, || false)
    }

    /// Takes a place as [`ConnectionLimit::admit`] does, but at the limit first asks `reclaim`
    /// to make room. When it has (a waiting connection is closing), the newcomer is admitted at
    /// once, over the limit until that connection leaves: each reclaim closes a distinct
    /// connection, so the excess stays below the connections that were waiting.
    pub fn admit_or(&self, counters: &Shard, reclaim: impl FnOnce() -> bool) -> bool {
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.max && !reclaim() {
            self.open.fetch_sub(1, Ordering::AcqRel);
            counters.add(Event::ConnectionsRejected, 1);
            count_closed(counters);
            return false;
        }
        true
    }

    /// Takes a place for a connection as [`ConnectionLimit::admit`] does, returned when the
    /// [`Place`] is dropped (with the connection it travels with).
    pub fn place(self: &Arc<Self>, counters: &Shard) -> Option<Place> {
        self.admit(counters).then(|| Place(Arc::clone(self)))
    }

    /// Gives back the place of a connection that has closed; returns how many are still open.
    pub fn leave(&self) -> usize {
        self.open.fetch_sub(1, Ordering::AcqRel).saturating_sub(1)
    }

    /// Connections open now.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Acquire)
    }
}

/// A connection's place under a [`ConnectionLimit`], given back when dropped: an RTSP control
/// connection holds one in its loop's slot, however the slot is freed.
#[derive(Debug)]
pub(crate) struct Place(Arc<ConnectionLimit>);

impl Drop for Place {
    fn drop(&mut self) {
        self.0.leave();
    }
}

/// Counts a connection's socket closed.
pub(crate) fn count_closed(counters: &Shard) {
    counters.syscall(Syscall::Close);
    counters.add(Event::ConnectionsClosed, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_add_up() {
        let c = Counters::new();
        c.shard(0).syscall(Syscall::Accept);
        c.shard(1).syscall(Syscall::Accept);
        c.shard(SHARDS + 1).syscall(Syscall::Read);
        c.shard(3).add(Event::BytesOut, 10);
        c.shard(4).add(Event::BytesOut, 5);
        assert_eq!(c.syscalls(Syscall::Accept), 2);
        assert_eq!(c.syscalls(Syscall::Read), 1);
        assert_eq!(c.events(Event::BytesOut), 15);
        assert_eq!(std::mem::align_of::<Shard>(), 128);
    }
}
