//! Graceful shutdown: one trigger that every worker, blocked or polling, notices.
//!
//! Owns an `eventfd` that is written once and never read, so it stays readable: every epoll loop
//! and every thread blocked in `poll` wakes on it, however many there are. It does not decide what
//! a worker does on waking (each engine does: stop accepting, let sessions finish).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::error::EngineError;
use crate::sys::fd as sys_fd;

/// A shared shutdown signal; clone it freely.
#[derive(Debug, Clone)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    triggered: AtomicBool,
    event: OwnedFd,
}

impl Shutdown {
    /// A signal not yet triggered.
    pub fn new() -> Result<Self, EngineError> {
        let event = sys_fd::eventfd().map_err(|source| EngineError::Setup { what: "eventfd", source })?;
        Ok(Shutdown { inner: Arc::new(Inner { triggered: AtomicBool::new(false), event }) })
    }

    /// Starts the shutdown; safe to call from a signal-handling thread, and more than once.
    pub fn trigger(&self) {
        if !self.inner.triggered.swap(true, Ordering::SeqCst) {
            sys_fd::eventfd_signal(self.inner.event.as_raw_fd());
        }
    }

    /// Whether shutdown has started.
    pub fn is_triggered(&self) -> bool {
        self.inner.triggered.load(Ordering::SeqCst)
    }

    /// The descriptor that becomes readable on shutdown.
    pub(crate) fn fd(&self) -> RawFd {
        self.inner.event.as_raw_fd()
    }
}
