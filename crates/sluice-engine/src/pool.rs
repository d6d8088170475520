//! The CPU worker pool event loops hand jobs to, so that no loop ever runs CPU-bound work.
//!
//! A fixed number of threads take jobs from one bounded queue. When the queue is full a job is
//! refused at once, and the session answers 503. Letting jobs pile up without limit would turn a
//! CPU overload into unbounded memory and latency. Each result goes back to the loop that asked,
//! through that loop's [`Mailbox`], which wakes it with an eventfd. This module does not know what
//! jobs compute.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};

use sluice_proto::{Job, JobOutput};

use crate::EngineError;

/// A finished job on its way back: which connection (slab key and identity) and what it made.
pub(crate) type Delivery = (usize, u64, JobOutput);

/// Where a loop collects finished jobs.
pub(crate) type Mailbox = crate::mailbox::Mailbox<Delivery>;

type Task = Box<dyn FnOnce() + Send>;

/// Runs a job, turning a panic into an output no session recognises (it answers 500), so that a
/// bug in one handler neither kills a pool thread nor leaves its connection waiting forever.
pub(crate) fn run_job(job: Job) -> JobOutput {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).unwrap_or_else(|_| {
        tracing::error!("a CPU job panicked; its request gets 500");
        Box::new(())
    })
}

/// A bounded pool of CPU worker threads.
pub(crate) struct CpuPool {
    queue: Option<SyncSender<Task>>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// Set when the engine stops: jobs still queued are dropped, not run for loops that are gone.
    closed: Arc<AtomicBool>,
}

impl CpuPool {
    /// Starts `threads` workers behind a queue of `capacity` jobs.
    pub fn start(threads: usize, capacity: usize) -> Result<CpuPool, EngineError> {
        let (tx, rx) = sync_channel::<Task>(capacity);
        let rx = Arc::new(Mutex::new(rx));
        let mut handles = Vec::with_capacity(threads);
        for i in 0..threads.max(1) {
            let rx: Arc<Mutex<Receiver<Task>>> = Arc::clone(&rx);
            let handle = std::thread::Builder::new()
                .name(format!("sluice-cpu-{i}"))
                .spawn(move || loop {
                    let task = match rx.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    match task {
                        Ok(task) => task(),
                        Err(_) => return,
                    }
                })
                .map_err(|source| EngineError::Setup { what: "spawn cpu worker", source })?;
            handles.push(handle);
        }
        Ok(CpuPool { queue: Some(tx), threads: handles, closed: Arc::new(AtomicBool::new(false)) })
    }

    /// Queues `job` for connection (`key`, `id`); its output goes to `mailbox`. Gives the job
    /// back when the queue is full.
    pub fn submit(&self, job: Job, key: usize, id: u64, mailbox: &Arc<Mailbox>) -> Result<(), ()> {
        let Some(queue) = &self.queue else { return Err(()) };
        let mailbox = Arc::clone(mailbox);
        let closed = Arc::clone(&self.closed);
        let task: Task = Box::new(move || {
            if !closed.load(Ordering::Relaxed) {
                mailbox.deliver((key, id, run_job(job)));
            }
        });
        match queue.try_send(task) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Err(()),
        }
    }
}

impl Drop for CpuPool {
    fn drop(&mut self) {
        // Queued jobs are skipped; closing the queue lets every worker finish its current job
        // and exit.
        self.closed.store(true, Ordering::Relaxed);
        self.queue = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Bounds CPU-bound work run on the threads that ask for it (the threads engine, where a job runs
/// on its connection's own thread as a servlet's would): at most `running` jobs at once, at most
/// `waiting` more waiting their turn, and beyond that a job is refused (the session answers 503).
/// Without it 600 concurrent `/bench/cpu-heavy` requests ran 600 jobs at once and took 626 MB
/// (pool) and 3,991 MB (a thread per connection) where the event-loop engines took about 30 MB.
pub(crate) struct JobGate {
    state: Mutex<GateState>,
    turn: Condvar,
    running: usize,
    waiting: usize,
}

#[derive(Default)]
struct GateState {
    running: usize,
    waiting: usize,
}

impl JobGate {
    /// At most `running` jobs at once (at least one) and `waiting` in line.
    pub fn new(running: usize, waiting: usize) -> JobGate {
        JobGate {
            state: Mutex::new(GateState::default()),
            turn: Condvar::new(),
            running: running.max(1),
            waiting,
        }
    }

    /// Runs `job` on this thread once its turn comes; `None` when the line is full.
    pub fn run(&self, job: Job) -> Option<JobOutput> {
        {
            let mut s = self.state.lock().ok()?;
            if s.running >= self.running {
                if s.waiting >= self.waiting {
                    return None;
                }
                s.waiting += 1;
                while s.running >= self.running {
                    s = self.turn.wait(s).ok()?;
                }
                s.waiting -= 1;
            }
            s.running += 1;
        }
        let output = run_job(job);
        if let Ok(mut s) = self.state.lock() {
            s.running -= 1;
        }
        self.turn.notify_one();
        Some(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn the_gate_bounds_running_jobs_and_refuses_past_its_line() {
        let gate = JobGate::new(2, 3);
        let running = Arc::new(AtomicUsize::new(0));
        let peak = Arc::new(AtomicUsize::new(0));
        let (done, refused) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|scope| {
            for _ in 0..20 {
                let (running, peak) = (Arc::clone(&running), Arc::clone(&peak));
                let (gate, done, refused) = (&gate, &done, &refused);
                scope.spawn(move || {
                    let job: Job = Box::new(move || {
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        peak.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(20));
                        running.fetch_sub(1, Ordering::SeqCst);
                        Box::new(()) as JobOutput
                    });
                    match gate.run(job) {
                        Some(_) => done.fetch_add(1, Ordering::Relaxed),
                        None => refused.fetch_add(1, Ordering::Relaxed),
                    };
                });
            }
        });
        assert!(peak.load(Ordering::SeqCst) <= 2, "{} jobs ran at once", peak.load(Ordering::SeqCst));
        assert_eq!(done.load(Ordering::Relaxed) + refused.load(Ordering::Relaxed), 20);
        assert!(done.load(Ordering::Relaxed) >= 2);
    }
}
