//! What every worker thread shares between its tasks: the resolved targets, the run's clock and
//! limits, and the [`Recorder`] that turns request records into the worker's totals and
//! per-second buckets. One worker = one thread = one single-threaded tokio runtime, so this state
//! is `Rc`/`RefCell`, never locked. Which requests to send is the models' business (`closed`,
//! `open`); merging workers is `run`'s.

use std::cell::RefCell;
use std::sync::mpsc::Sender;
use std::time::Duration;

use tokio::time::Instant;

use crate::client::{ConnectionMode, ExpectedStatus};
use crate::stats::{RequestRecord, SecondBucket, Totals};
use crate::target::Target;

/// Settings every task of a worker reads.
pub(crate) struct WorkerCtx {
    /// Index of this worker (0-based) and how many there are.
    pub index: usize,
    pub workers: usize,
    pub targets: Vec<Target>,
    /// The common start of the run on every worker.
    pub start: Instant,
    pub timeout: Duration,
    pub connections: ConnectionMode,
    pub expected: ExpectedStatus,
    pub recorder: RefCell<Recorder>,
    /// Raised to end the run early.
    pub stop: Option<crate::StopFlag>,
}

impl WorkerCtx {
    /// Whether the run was told to stop: no request begins after it.
    pub fn stopped(&self) -> bool {
        self.stop.as_ref().is_some_and(crate::StopFlag::raised)
    }
}

/// A worker's totals plus the bucket of the current second.
pub(crate) struct Recorder {
    pub totals: Totals,
    bucket: SecondBucket,
    start: Instant,
    sink: Sender<SecondBucket>,
}

impl Recorder {
    pub fn new(targets: usize, start: Instant, sink: Sender<SecondBucket>) -> Self {
        Recorder { totals: Totals::new(targets), bucket: SecondBucket::new(0), start, sink }
    }

    /// Ships every finished second up to the one containing `now`. Empty seconds are shipped
    /// too, so the collector sees every second from every worker.
    pub fn roll(&mut self, now: Instant) {
        let second = now.saturating_duration_since(self.start).as_secs();
        while self.bucket.second < second {
            let next = SecondBucket::new(self.bucket.second + 1);
            let done = std::mem::replace(&mut self.bucket, next);
            // A closed channel means the collector has gone; the totals still arrive.
            let _ = self.sink.send(done);
        }
    }

    /// A user arrived (open) or a virtual user began a request (closed).
    pub fn arrival(&mut self, now: Instant) {
        self.roll(now);
        self.totals.scheduled += 1;
        self.bucket.arrivals += 1;
    }

    /// A user arrived (open: the arrival itself; closed: a virtual user starting).
    pub fn user_arrived(&mut self, now: Instant) {
        self.roll(now);
        self.bucket.users_arrived += 1;
    }

    /// A user left (open: its request finished or was dropped; closed: a virtual user stopping).
    pub fn user_left(&mut self, now: Instant) {
        self.roll(now);
        self.bucket.users_left += 1;
    }

    /// A request is about to be sent.
    pub fn sent(&mut self, now: Instant) {
        self.roll(now);
        self.totals.sent += 1;
        self.bucket.sent += 1;
    }

    /// A request finished (or was dropped).
    pub fn finish(&mut self, now: Instant, r: &RequestRecord) {
        self.roll(now);
        self.totals.record(r);
        self.bucket.record(r);
    }

    /// Ships the last, partial second and hands back the totals.
    pub fn close(mut self) -> Totals {
        let _ = self.sink.send(self.bucket);
        std::mem::take(&mut self.totals)
    }
}

/// Rolls the recorder at every second boundary so idle seconds still reach the collector (the
/// live display and the time series must not stall when nothing completes).
pub(crate) async fn tick_seconds(ctx: std::rc::Rc<WorkerCtx>) {
    let mut next = ctx.start + Duration::from_secs(1);
    loop {
        tokio::time::sleep_until(next).await;
        ctx.recorder.borrow_mut().roll(Instant::now());
        next += Duration::from_secs(1);
    }
}
