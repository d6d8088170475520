//! A worker's bookkeeping, written once for every engine: admission against the connection
//! limit, the deadline sweep, graceful shutdown, handing CPU jobs to the pool and their results
//! back, and the rate-limited warning for accept failures.
//!
//! The event-loop engines (epoll, io_uring) keep this state in a [`LoopCore`] and implement
//! [`EventLoop`], so that [`sweep`], [`begin_drain`] and [`deliver_jobs`] are the same code on
//! both; the blocking and task engines (threads, tokio) use the counters' [`ConnectionLimit`] and
//! [`AcceptWarnings`] directly, and their per-connection deadlines are `Connection`'s. This module
//! does not wait for anything and owns no socket: how a loop waits, accepts, reads and sends is
//! each engine's own.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_proto::{Clock, Job, Session};

use crate::clock::new_clock;
use crate::config::EngineConfig;
use crate::connection::Connection;
use crate::counters::{count_closed, ConnectionLimit, Event, Shard};
use crate::error::EngineError;
use crate::pool::{CpuPool, Delivery, Mailbox};

/// Longest sleep between deadline sweeps. A loop wakes earlier for any nearer deadline (a
/// `latency?ms=` reply is due to the millisecond), so this only bounds how stale the sweep's view
/// of far deadlines (idle connections) can get, and how often idle pools are trimmed.
pub(crate) const SWEEP: Duration = Duration::from_millis(250);

/// Warnings about failing accepts (`EMFILE` and its kin), at most one line a second for the whole
/// process with the number held back since the last one: a descriptor shortage makes every
/// accept fail, and one line per failure (about 900 in 5 s on tokio) buried everything else.
#[derive(Debug)]
pub(crate) struct AcceptWarnings {
    /// Unix time in milliseconds of the last line written.
    last_ms: AtomicU64,
    suppressed: AtomicU64,
}

/// New connections a loop takes per turn while it is behind on its sends (a connection used its
/// turn's budget with more of its response to go): the rest wait, so a flash crowd does not split
/// the loop between itself and the viewers already being served; a loop that keeps up takes every
/// waiting connection at once. At a quarter core with 12 s 1080p HLS players (a busy machine, one
/// round each, `scripts/bench_hls.py --viewers`), taking newcomers one per turn held 967 viewers
/// with no stall where taking all at once held 440, and this rule 744–967 over three rounds
/// against nginx's 967 (docs/benchmarks/2026-11-27.md); nginx takes one per wake-up without
/// `multi_accept`.
pub(crate) const ACCEPTS_PER_TURN_BEHIND: usize = 1;

/// The process's accept warnings, shared by every engine and listener.
pub(crate) static ACCEPT_WARNINGS: AcceptWarnings = AcceptWarnings::new();

impl AcceptWarnings {
    const INTERVAL_MS: u64 = 1000;

    const fn new() -> AcceptWarnings {
        AcceptWarnings { last_ms: AtomicU64::new(0), suppressed: AtomicU64::new(0) }
    }

    /// Counts a failed accept on `what` (e.g. "http"), writing a line unless one was written in
    /// the last second. Returns whether a line was written.
    pub fn warn(&self, what: &str, error: &io::Error, counters: &Shard) -> bool {
        counters.add(Event::AcceptErrors, 1);
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let last = self.last_ms.load(Ordering::Relaxed);
        let due = now.saturating_sub(last) >= Self::INTERVAL_MS;
        if !due || self.last_ms.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        let held_back = self.suppressed.swap(0, Ordering::Relaxed);
        if held_back > 0 {
            tracing::warn!(
                "{what} accept: {error}; connections wait in the backlog ({held_back} more such failures in the last {}s)",
                now.saturating_sub(last).div_ceil(1000)
            );
        } else {
            tracing::warn!("{what} accept: {error}; connections wait in the backlog");
        }
        true
    }
}

/// What an event-loop worker (epoll, io_uring) keeps besides its connections: its share of the
/// engine, its clock, its wake-up time and its drain state.
pub(crate) struct LoopCore<'a> {
    pub config: &'a EngineConfig,
    pub counters: &'a Shard,
    pub limit: &'a ConnectionLimit,
    pool: &'a CpuPool,
    mailbox: Arc<Mailbox>,
    pub clock: Clock,
    next_id: u64,
    /// When the loop must next sweep deadlines: the nearest deadline, at most `SWEEP` away.
    pub next_wake: Instant,
    /// Set once shutdown has begun: the end of the grace period.
    pub draining_until: Option<Instant>,
    deliveries: Vec<Delivery>,
    /// Reused by the sweep and the drain so that neither allocates.
    keys: Vec<usize>,
}

impl<'a> LoopCore<'a> {
    /// The bookkeeping of a new worker.
    pub fn new(
        config: &'a EngineConfig,
        counters: &'a Shard,
        limit: &'a ConnectionLimit,
        pool: &'a CpuPool,
    ) -> Result<LoopCore<'a>, EngineError> {
        Ok(LoopCore {
            config,
            counters,
            limit,
            pool,
            mailbox: Arc::new(
                Mailbox::new().map_err(|source| EngineError::Setup { what: "eventfd", source })?,
            ),
            clock: new_clock(),
            next_id: 0,
            next_wake: Instant::now() + SWEEP,
            draining_until: None,
            deliveries: Vec::new(),
            keys: Vec::new(),
        })
    }

    /// The descriptor that becomes readable when finished jobs wait for this worker.
    pub fn mailbox_fd(&self) -> RawFd {
        self.mailbox.fd()
    }

    /// Admits a connection just accepted: its identity, or `None` when the worker is draining
    /// or the engine is at its connection limit (the connection is then counted as closed and
    /// the caller drops it).
    pub fn admit(&mut self) -> Option<u64> {
        if self.draining_until.is_some() {
            count_closed(self.counters);
            return None;
        }
        if !self.limit.admit(self.counters) {
            return None;
        }
        self.next_id += 1;
        Some(self.next_id)
    }

    /// A connection admitted by [`LoopCore::admit`] has closed.
    pub fn closed(&self) {
        self.limit.leave();
        count_closed(self.counters);
    }

    /// Sends a connection's CPU job to the pool; when the pool's queue is full the session is
    /// told at once (it answers 503).
    pub fn run_job<S: Session, T: AsRawFd>(&self, key: usize, conn: &mut Connection<S, T>, job: Job) {
        if self.pool.submit_to(job, key, conn.id, &self.mailbox).is_err() {
            conn.job_refused(&self.clock);
        }
    }

    /// Makes the loop wake by `deadline` at the latest.
    pub fn wake_by(&mut self, deadline: Option<Instant>) {
        if let Some(d) = deadline {
            self.next_wake = self.next_wake.min(d);
        }
    }

    /// How long the loop may sleep before its next sweep, in whole milliseconds rounded up:
    /// waking a little late is harmless, waking early just spins.
    pub fn sleep(&self) -> Duration {
        let left = self.next_wake.saturating_duration_since(self.clock.now());
        Duration::from_millis(left.as_micros().div_ceil(1000).min(u64::MAX as u128) as u64)
    }

    /// Whether a sweep is due.
    pub fn sweep_due(&self) -> bool {
        self.clock.now() >= self.next_wake
    }

    /// Whether the loop is done: draining, and with no connection left or the grace over.
    pub fn finished(&self, live: usize) -> bool {
        self.draining_until.is_some_and(|until| live == 0 || self.clock.now() >= until)
    }
}

/// A connection borrowed together with its worker's bookkeeping.
pub(crate) type Parts<'c, 'a, S, T> = (&'c mut Connection<S, T>, &'c mut LoopCore<'a>);

/// An event-loop worker as the shared bookkeeping sees it: its [`LoopCore`], its connections by
/// key, and the two things only the engine knows how to do, driving and closing one.
pub(crate) trait EventLoop<'a> {
    /// The protocol session of a connection.
    type Session: Session;
    /// The socket as the engine holds it.
    type Stream: AsRawFd;

    /// The worker's bookkeeping.
    fn core(&mut self) -> &mut LoopCore<'a>;

    /// The connection in `key` and the bookkeeping, unless the connection is gone or closing.
    fn parts(&mut self, key: usize) -> Option<Parts<'_, 'a, Self::Session, Self::Stream>>;

    /// Calls `each` with the key of every open (not closing) connection and its deadline.
    fn each_deadline(&self, send_timeout: Duration, each: impl FnMut(usize, Option<Instant>));

    /// Moves a connection forward after an event, a job or a deadline.
    fn drive(&mut self, key: usize);

    /// Closes a connection now.
    fn close(&mut self, key: usize);
}

/// Handles every passed deadline (a slow header, an idle keep-alive, a stalled send, a lingering
/// close) and sets the next wake-up to the nearest future one, `SWEEP` at the latest.
pub(crate) fn sweep<'a, L: EventLoop<'a>>(l: &mut L) {
    let core = l.core();
    let now = core.clock.now();
    let timeout = core.config.send_timeout;
    let mut due = std::mem::take(&mut core.keys);
    due.clear();
    let mut next = now + SWEEP;
    l.each_deadline(timeout, |key, deadline| match deadline {
        Some(d) if d <= now => due.push(key),
        Some(d) => next = next.min(d),
        None => {}
    });
    l.core().next_wake = next;
    for &key in &due {
        let Some((conn, core)) = l.parts(key) else { continue };
        if conn.expire(&core.clock, core.counters) {
            l.drive(key);
        } else {
            l.close(key);
        }
    }
    l.core().keys = due;
}

/// Starts the worker's graceful shutdown (the engine has already stopped accepting): the grace
/// period begins, and every connection's session says whether it closes now (idle) or finishes
/// what it is sending.
pub(crate) fn begin_drain<'a, L: EventLoop<'a>>(l: &mut L) {
    let core = l.core();
    if core.draining_until.is_some() {
        return;
    }
    core.draining_until = Some(core.clock.now() + core.config.shutdown_grace);
    let mut keys = std::mem::take(&mut core.keys);
    keys.clear();
    l.each_deadline(Duration::ZERO, |key, _| keys.push(key));
    for &key in &keys {
        let Some((conn, _)) = l.parts(key) else { continue };
        if conn.lingering.is_none() && conn.session.on_shutdown(&mut conn.out) {
            l.close(key);
        } else {
            l.drive(key);
        }
    }
    l.core().keys = keys;
}

/// Hands finished CPU jobs back to their connections, if those are still the ones that asked.
pub(crate) fn deliver_jobs<'a, L: EventLoop<'a>>(l: &mut L) {
    let core = l.core();
    core.mailbox.collect(&mut core.deliveries);
    let mut deliveries = std::mem::take(&mut core.deliveries);
    for (key, id, output) in deliveries.drain(..) {
        let Some((conn, core)) = l.parts(key) else { continue };
        if conn.id == id {
            conn.job_done(output, &core.clock);
            l.drive(key);
        }
    }
    l.core().deliveries = deliveries;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::Counters;

    #[test]
    fn the_limit_admits_up_to_max_and_counts_the_rest() {
        let counters = Counters::new();
        let shard = counters.shard(0);
        let limit = ConnectionLimit::new(2);
        assert!(limit.admit(shard));
        assert!(limit.admit(shard));
        assert!(!limit.admit(shard));
        assert_eq!(limit.open(), 2);
        assert_eq!(limit.leave(), 1);
        assert!(limit.admit(shard));
        assert_eq!(counters.events(Event::ConnectionsRejected), 1);
    }

    #[test]
    fn accept_warnings_write_one_line_a_second() {
        let counters = Counters::new();
        let shard = counters.shard(0);
        let warnings = AcceptWarnings::new();
        let e = io::Error::from_raw_os_error(libc::EMFILE);
        let written = (0..1000).filter(|_| warnings.warn("http", &e, shard)).count();
        // A thousand failures within far less than a second: one line (two if the clock's second
        // turned over between them).
        assert!((1..=2).contains(&written), "{written} lines for 1000 failures");
        assert!(warnings.suppressed.load(Ordering::Relaxed) >= 998);
        assert_eq!(counters.events(Event::AcceptErrors), 1000);
    }
}
