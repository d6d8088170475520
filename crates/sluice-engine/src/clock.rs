//! The clocks an engine passes to sessions: a monotonic instant and the Unix time, read once per
//! wake-up so that every session of a turn sees the same time. It does not keep deadlines.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use sluice_proto::Clock;

/// Reads the clocks an engine passes to sessions.
pub(crate) fn read_clock(clock: &mut Clock) {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    clock.set(Instant::now(), unix);
}

/// A fresh clock.
pub(crate) fn new_clock() -> Clock {
    let unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    Clock::new(Instant::now(), unix)
}
