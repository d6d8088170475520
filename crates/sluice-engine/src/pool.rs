//! The CPU worker pool event loops hand jobs to, so that no loop ever runs CPU-bound work.
//!
//! A fixed number of threads take jobs from one bounded queue. When the queue is full a job is
//! refused at once, and the session answers 503. Letting jobs pile up without limit would turn a
//! CPU overload into unbounded memory and latency. Each result goes back to the loop that asked,
//! through that loop's [`Mailbox`], which wakes it with an eventfd. This module does not know what
//! jobs compute.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

use sluice_proto::{Job, JobOutput};

use crate::{cvt, EngineError};

/// A finished job on its way back: which connection (slab key and identity) and what it made.
pub(crate) type Delivery = (usize, u64, JobOutput);

/// Where a loop collects finished jobs.
pub(crate) struct Mailbox {
    done: Mutex<Vec<Delivery>>,
    event: OwnedFd,
}

impl Mailbox {
    pub fn new() -> Result<Arc<Mailbox>, EngineError> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })
            .map_err(|source| EngineError::Setup { what: "eventfd", source })?;
        // SAFETY: a fresh descriptor we own.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Arc::new(Mailbox { done: Mutex::new(Vec::new()), event }))
    }

    /// The descriptor that becomes readable when deliveries wait.
    pub fn fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    fn deliver(&self, delivery: Delivery) {
        if let Ok(mut done) = self.done.lock() {
            done.push(delivery);
        }
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd.
        unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Takes every waiting delivery (and resets the eventfd) into `into`.
    pub fn collect(&self, into: &mut Vec<Delivery>) {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN (nothing waiting) is fine.
        unsafe { libc::read(self.event.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        if let Ok(mut done) = self.done.lock() {
            into.append(&mut done);
        }
    }
}

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
