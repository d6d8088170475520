//! The system calls behind the crate's readers (`getrusage`, `sysconf`), each behind a safe
//! function. Nothing else in the crate says `unsafe`.

use crate::Usage;

/// Whose usage `getrusage` reports.
pub(crate) enum Who {
    /// Every thread of this process.
    Process,
    /// The calling thread.
    Thread,
}

/// `getrusage` for `who`; `None` when it fails.
pub(crate) fn rusage(who: Who) -> Option<Usage> {
    let who = match who {
        Who::Process => libc::RUSAGE_SELF,
        Who::Thread => libc::RUSAGE_THREAD,
    };
    // SAFETY: rusage is plain data; all-zero is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the live struct it is given.
    if unsafe { libc::getrusage(who, &mut usage) } != 0 {
        return None;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Some(Usage {
        user_s: secs(usage.ru_utime),
        system_s: secs(usage.ru_stime),
        voluntary_switches: usage.ru_nvcsw.max(0) as u64,
        involuntary_switches: usage.ru_nivcsw.max(0) as u64,
    })
}

/// Clock ticks a second, the unit of `/proc/PID/stat`'s CPU times (at least 1).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf takes no pointers and has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64
}
