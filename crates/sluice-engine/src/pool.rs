//! The one way sluice runs work that may block or burn CPU off an event loop or a connection's
//! thread: a pool of worker threads behind a bounded queue, the job runner of every engine. The
//! epoll and io_uring loops get each result back through their [`Mailbox`] (an eventfd wakes
//! them), the threads engine's connection thread waits for it ([`CpuPool::run_waiting`]), a tokio
//! task awaits it ([`CpuPool::run_async`]); the server's remote library runs its background origin
//! work (slices fetched ahead, MP4 indexes read for the RTSP loop) and gzip its compressions on
//! pools of their own of this type, detached ([`CpuPool::spawn`]).
//!
//! A fixed number of threads (`cpu_workers`) take jobs from one bounded queue (`cpu_queue`). A job
//! is refused at once, and the session answers 503, when `cpu_workers` jobs run and `cpu_queue`
//! wait: the bound counts jobs taken and not finished, not what sits in the channel, so a burst
//! that idle workers have not picked up yet is not refused (fifty dashboards opening at once on
//! the admin listener, whose queue is 4, were: all but a handful got 503 on a busy machine). Letting jobs pile up
//! without limit would turn a CPU overload into unbounded memory and latency: before the threads
//! engine shared these bounds, 600 concurrent `/bench/cpu-heavy` requests ran 600 jobs at once
//! and took 626 MB (pool) and 3,991 MB (a thread per connection) where the event-loop engines took
//! about 30 MB. Every pool counts its queue depth, busy workers and jobs ([`PoolStats`]) for
//! `/metrics`, so the `sluice_cpu_pool_*` series are the same on every engine. This module does
//! not know what jobs compute.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use sluice_proto::{Job, JobOutput};

use crate::error::EngineError;

/// A finished job on its way back: which connection (slab key and identity) and what it made.
pub(crate) type Delivery = (usize, u64, JobOutput);

/// Where a loop collects finished jobs.
pub(crate) type Mailbox = crate::mailbox::Mailbox<Delivery>;

type Task = Box<dyn FnOnce() + Send>;

/// Stack of a worker thread, set rather than left to `RUST_MIN_STACK`: jobs compress uploads with
/// gzip, whose compressor state (about 300 KiB) debug builds put on the stack, and overflowed the
/// threads engine's 256 KiB connection stacks when jobs ran there.
const JOB_STACK: usize = 2 << 20;

/// Runs a job, turning a panic into an output no session recognises (it answers 500), so that a
/// bug in one handler neither kills a pool thread nor leaves its connection waiting forever.
pub(crate) fn run_job(job: Job) -> JobOutput {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| {
        tracing::error!("a CPU job panicked; its request gets 500");
        Box::new(())
    })
}

/// What a pool is doing: gauges (`queued`, `busy`, `workers`) and counters (`jobs`, `refused`).
#[derive(Debug, Default)]
pub struct PoolStats {
    /// Worker threads.
    pub workers: AtomicU64,
    /// Jobs waiting for a worker.
    pub queued: AtomicU64,
    /// Workers running a job now.
    pub busy: AtomicU64,
    /// Jobs run to their end (a panicking one included).
    pub jobs: AtomicU64,
    /// Jobs refused because the queue was full.
    pub refused: AtomicU64,
}

/// The pool's queue was full (or it is stopping): the job was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the worker pool is full")]
pub struct PoolFull;

/// A bounded pool of worker threads; see the module docs.
pub struct CpuPool {
    queue: Option<SyncSender<Task>>,
    /// Jobs taken and not yet finished (running or waiting), at most `limit`.
    taken: Arc<AtomicU64>,
    /// Workers plus the queue's length.
    limit: u64,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Set when the engine stops: jobs still queued are dropped, not run for loops that are gone.
    closed: Arc<AtomicBool>,
    stats: Arc<PoolStats>,
}

impl std::fmt::Debug for CpuPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuPool").field("stats", &self.stats).finish_non_exhaustive()
    }
}

impl CpuPool {
    /// Starts `threads` CPU workers (`sluice-cpu-N`) behind a queue of `capacity` jobs.
    pub fn start(threads: usize, capacity: usize) -> Result<CpuPool, EngineError> {
        CpuPool::start_named("sluice-cpu", threads, capacity)
    }

    /// Starts `threads` workers named `name-N` behind a queue of `capacity` jobs.
    pub fn start_named(name: &str, threads: usize, capacity: usize) -> Result<CpuPool, EngineError> {
        // Room in the channel for every job the bound admits, so a send never fails while it does.
        let limit = (threads.max(1) + capacity) as u64;
        let (tx, rx) = sync_channel::<Task>(limit as usize);
        let rx = Arc::new(Mutex::new(rx));
        let stats = Arc::new(PoolStats::default());
        let taken = Arc::new(AtomicU64::new(0));
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads.max(1) {
            let rx: Arc<Mutex<Receiver<Task>>> = Arc::clone(&rx);
            let counts = Arc::clone(&stats);
            let taken = Arc::clone(&taken);
            let handle = std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .stack_size(JOB_STACK)
                .spawn(move || loop {
                    let task = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok(task) = task else { return };
                    // Out of the queue (counted in it before it was sent).
                    counts
                        .queued
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                        .ok();
                    counts.busy.fetch_add(1, Ordering::Relaxed);
                    task();
                    taken.fetch_sub(1, Ordering::AcqRel);
                    counts.busy.fetch_sub(1, Ordering::Relaxed);
                    counts.jobs.fetch_add(1, Ordering::Relaxed);
                })
                .map_err(|source| EngineError::Setup { what: "spawn cpu worker", source })?;
            handles.push(handle);
            stats.workers.fetch_add(1, Ordering::Relaxed);
        }
        Ok(CpuPool {
            queue: Some(tx),
            taken,
            limit,
            threads: handles,
            closed: Arc::new(AtomicBool::new(false)),
            stats,
        })
    }

    /// What the pool is doing, for `/metrics`.
    pub fn stats(&self) -> &PoolStats {
        &self.stats
    }

    /// The same, shared: it outlives the pool (the engine's counters keep it).
    pub(crate) fn stats_handle(&self) -> Arc<PoolStats> {
        Arc::clone(&self.stats)
    }

    /// Queues `task`, counting it; `Err` when the queue is full.
    fn queue(&self, task: Task) -> Result<(), PoolFull> {
        let Some(queue) = &self.queue else { return Err(PoolFull) };
        let limit = self.limit;
        if self
            .taken
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < limit).then_some(n + 1))
            .is_err()
        {
            self.stats.refused.fetch_add(1, Ordering::Relaxed);
            return Err(PoolFull);
        }
        // Counted before it is sent so a worker that takes it at once never counts below zero.
        self.stats.queued.fetch_add(1, Ordering::Relaxed);
        match queue.try_send(task) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.taken.fetch_sub(1, Ordering::AcqRel);
                self.stats
                    .queued
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                    .ok();
                self.stats.refused.fetch_add(1, Ordering::Relaxed);
                Err(PoolFull)
            }
        }
    }

    /// Runs `work` on a worker, detached: nobody is told when it ends (it sends its result where
    /// it needs to). A panic in it is logged and the worker lives on.
    pub fn spawn(&self, work: impl FnOnce() + Send + 'static) -> Result<(), PoolFull> {
        let closed = Arc::clone(&self.closed);
        self.queue(Box::new(move || {
            if !closed.load(Ordering::Relaxed)
                && std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).is_err()
            {
                tracing::error!("a background job panicked");
            }
        }))
    }

    /// Queues `job`; a worker runs it and hands its output to `done` (never called when the queue
    /// is full, nor for a job still queued when the pool stops).
    fn submit(&self, job: Job, done: impl FnOnce(JobOutput) + Send + 'static) -> Result<(), PoolFull> {
        let closed = Arc::clone(&self.closed);
        self.queue(Box::new(move || {
            if !closed.load(Ordering::Relaxed) {
                done(run_job(job));
            }
        }))
    }

    /// Queues `job` for connection (`key`, `id`) of an event loop; its output goes to `mailbox`.
    /// Gives the job back when the queue is full.
    pub(crate) fn submit_to(
        &self,
        job: Job,
        key: usize,
        id: u64,
        mailbox: &Arc<Mailbox>,
    ) -> Result<(), PoolFull> {
        let mailbox = Arc::clone(mailbox);
        self.submit(job, move |output| mailbox.deliver((key, id, output)))
    }

    /// Runs `job` on a worker while this thread waits for its output (the threads engine's
    /// connection thread); `None` when the queue is full or the pool stopped first.
    pub(crate) fn run_waiting(&self, job: Job) -> Option<JobOutput> {
        let (tx, rx) = sync_channel(1);
        self.submit(job, move |output| {
            let _ = tx.send(output);
        })
        .ok()?;
        rx.recv().ok()
    }

    /// Runs `job` on a worker while this task awaits its output (the tokio engine's connection
    /// task); `None` when the queue is full or the pool stopped first.
    pub(crate) async fn run_async(&self, job: Job) -> Option<JobOutput> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(job, move |output| {
            let _ = tx.send(output);
        })
        .ok()?;
        rx.await.ok()
    }
}

impl Drop for CpuPool {
    fn drop(&mut self) {
        // Queued jobs are skipped; closing the queue lets every worker finish its current job
        // and exit.
        self.closed.store(true, Ordering::Relaxed);
        self.queue = None;
        for t in self.threads.drain(..) {
            // A job may hold the last handle to its own pool (a background job that owns its
            // library); its thread cannot wait for itself.
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    /// Waits (a bounded time) until `done` holds.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let until = Instant::now() + Duration::from_secs(10);
        while !done() {
            if Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    #[test]
    fn a_burst_the_idle_workers_have_not_picked_up_is_not_refused() {
        // Four workers and no queue: four jobs offered at once all run, however slowly the
        // workers come to take them; a fifth, while they run, is refused.
        let pool = CpuPool::start_named("test-burst", 4, 0).unwrap();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        for i in 0..4 {
            let release_rx = Arc::clone(&release_rx);
            let taken = pool.spawn(move || {
                let _ = release_rx.lock().map(|rx| rx.recv());
            });
            assert!(taken.is_ok(), "job {i} of a burst that fits the workers was refused");
        }
        assert_eq!(pool.spawn(|| {}), Err(PoolFull), "past the workers and the queue");
        for _ in 0..4 {
            release_tx.send(()).unwrap();
        }
        assert!(eventually(|| pool.stats().jobs.load(Ordering::Relaxed) == 4));
        assert!(eventually(|| pool.spawn(|| {}).is_ok()), "room again once they finish");
    }

    #[test]
    fn detached_jobs_run_are_counted_and_refused_past_the_queue() {
        let pool = CpuPool::start_named("test-pool", 2, 1).unwrap();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Arc::new(Mutex::new(release_rx));
        let ran = Arc::new(AtomicUsize::new(0));
        let job = || {
            let (release_rx, ran) = (Arc::clone(&release_rx), Arc::clone(&ran));
            move || {
                let _ = release_rx.lock().map(|rx| rx.recv());
                ran.fetch_add(1, Ordering::SeqCst);
            }
        };
        // Two workers, one place in line: the first two run, the third waits, the fourth is
        // refused.
        // (The workers may not be waiting yet: each of the first two is offered until taken.)
        for _ in 0..2 {
            assert!(eventually(|| pool.spawn(job()).is_ok()));
        }
        assert!(eventually(|| pool.stats().busy.load(Ordering::Relaxed) == 2));
        assert_eq!(pool.stats().queued.load(Ordering::Relaxed), 0);
        let refused_before = pool.stats().refused.load(Ordering::Relaxed);
        let mut accepted = 2;
        let mut refused = 0;
        for _ in 0..2 {
            match pool.spawn(job()) {
                Ok(()) => accepted += 1,
                Err(PoolFull) => refused += 1,
            }
        }
        assert!(refused >= 1, "a full pool refuses");
        assert_eq!(pool.stats().refused.load(Ordering::Relaxed) - refused_before, refused);
        assert_eq!((accepted, pool.stats().queued.load(Ordering::Relaxed)), (3, 1));
        for _ in 0..accepted {
            release_tx.send(()).unwrap();
        }
        assert!(eventually(|| ran.load(Ordering::SeqCst) == accepted));
        assert!(eventually(|| pool.stats().jobs.load(Ordering::Relaxed) == accepted as u64));
        assert_eq!(pool.stats().workers.load(Ordering::Relaxed), 2);
        assert!(eventually(|| pool.stats().busy.load(Ordering::Relaxed) == 0));
        // A panicking job leaves the worker alive.
        pool.spawn(|| panic!("deliberate")).unwrap();
        let ran_after = Arc::clone(&ran);
        assert!(eventually(|| pool
            .spawn({
                let ran = Arc::clone(&ran_after);
                move || {
                    ran.fetch_add(1, Ordering::SeqCst);
                }
            })
            .is_ok()));
        assert!(eventually(|| ran.load(Ordering::SeqCst) == accepted + 1));
    }

    #[test]
    fn a_waiting_caller_gets_its_output_and_a_full_queue_refuses() {
        let pool = CpuPool::start_named("test-wait", 1, 1).unwrap();
        let output = pool.run_waiting(Box::new(|| Box::new(7u32) as JobOutput)).unwrap();
        assert_eq!(output.downcast_ref::<u32>(), Some(&7));
        // One worker held, one job in line: the next caller is refused, not queued.
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        let release_rx = Mutex::new(release_rx);
        assert!(eventually(|| pool.stats().busy.load(Ordering::Relaxed) == 0));
        std::thread::scope(|scope| {
            let held = scope.spawn(|| {
                pool.run_waiting(Box::new(move || {
                    let _ = release_rx.lock().map(|rx| rx.recv());
                    Box::new(()) as JobOutput
                }))
            });
            assert!(eventually(|| pool.stats().busy.load(Ordering::Relaxed) == 1));
            pool.spawn(|| {}).unwrap();
            assert!(pool.run_waiting(Box::new(|| Box::new(()) as JobOutput)).is_none());
            release_tx.send(()).unwrap();
            assert!(held.join().unwrap().is_some());
        });
        assert!(eventually(|| pool.stats().jobs.load(Ordering::Relaxed) == 3));
        assert_eq!(pool.stats().refused.load(Ordering::Relaxed), 1);
    }
}
