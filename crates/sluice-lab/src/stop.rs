//! How a lab run stops early: the binary's signal handler calls [`stop`], which records the
//! signal, stops every server through the one mechanism that starts them (`peer::stop_all`:
//! no server starts after it) and raises the [`flag`] every load the lab runs looks at, so the
//! row's load ends with its servers rather than sending the rest of its schedule at nothing;
//! the runner then keeps the rows finished before it and marks the
//! run partial, and [`remove_cgroups`] takes away the CPU groups of rows cut short when the lab
//! exits without unwinding. It neither installs signal handlers (the binary does) nor writes
//! files (`output`).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::OnceLock;

use sluice_load::StopFlag;

/// The signal that stopped the lab; 0 while it runs.
static STOPPED_BY: AtomicI32 = AtomicI32::new(0);

/// Stops the lab on `signal`: records it, kills every server and lets no other start, and ends
/// the load running against them.
pub fn stop(signal: i32) {
    STOPPED_BY.store(signal.max(1), Ordering::SeqCst);
    crate::peer::stop_all();
    flag().raise();
}

/// The flag every load and upload the lab runs is given ([`sluice_load::LoadConfig::stop`]):
/// raised by [`stop`].
pub fn flag() -> StopFlag {
    static FLAG: OnceLock<StopFlag> = OnceLock::new();
    FLAG.get_or_init(StopFlag::new).clone()
}

/// The signal that stopped the lab, once one has.
pub fn stopped_by() -> Option<i32> {
    Some(STOPPED_BY.load(Ordering::SeqCst)).filter(|&s| s != 0)
}

/// `SIGINT`, `SIGTERM`, or `signal 7`.
pub fn signal_name(signal: i32) -> String {
    match signal {
        libc::SIGINT => "SIGINT".into(),
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGHUP => "SIGHUP".into(),
        other => format!("signal {other}"),
    }
}

/// Removes every CPU group of this lab still there (for an exit that skips their owners'
/// cleanup: a second signal, or a row that would not end).
pub fn remove_cgroups() {
    crate::budget::remove_live_groups();
}

#[cfg(test)]
mod tests {
    #[test]
    fn signals_read_by_name() {
        assert_eq!(super::signal_name(libc::SIGINT), "SIGINT");
        assert_eq!(super::signal_name(libc::SIGTERM), "SIGTERM");
        assert_eq!(super::signal_name(64), "signal 64");
    }
}
