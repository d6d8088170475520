//! Ending a run early from another thread: the one flag an HTTP run ([`crate::run`]) and an upload
//! batch ([`crate::upload::run_upload`]) look at. A program that stops on a signal (the lab, whose
//! servers are already gone by then) raises it, and the run stops beginning requests and reports
//! what it did until then, instead of sending the rest of its schedule at servers that are no
//! longer there. It does not install signal handlers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Raised once to end the runs that share it; clones share it.
#[derive(Debug, Clone, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// A flag not raised yet.
    pub fn new() -> StopFlag {
        StopFlag::default()
    }

    /// Ends the runs that look at it: no request begins after it (those in flight finish,
    /// bounded by their timeout).
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether it was raised.
    pub fn raised(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Two flags are equal when they are the same flag (a configuration compares by it).
impl PartialEq for StopFlag {
    fn eq(&self, other: &StopFlag) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}
