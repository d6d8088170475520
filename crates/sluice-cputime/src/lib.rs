//! CPU time as the kernel counts it, read in one place for the server's `/metrics`, the load
//! generator's own cost and the lab's measurements: this process's user and system time and its
//! context switches ([`process`]), the calling thread's ([`thread`]), and a process group's
//! from `/proc/PID/stat` ([`group_seconds`], [`parse_proc_stat`]).
//!
//! It reads; it does not sample over time or turn CPU time into rates (its callers do), and it
//! does not read the machine's `/proc/stat` totals (the lab's `machine` module does).

#![deny(missing_docs)]
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod sys;

pub use sys::clock_ticks;

/// CPU time and context switches of a process or a thread, as `getrusage` reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// User-mode CPU seconds.
    pub user_s: f64,
    /// Kernel-mode CPU seconds.
    pub system_s: f64,
    /// Times it gave up the CPU (waiting for I/O, a lock, a timer).
    pub voluntary_switches: u64,
    /// Times the scheduler took the CPU from it.
    pub involuntary_switches: u64,
}

impl Usage {
    /// User + system CPU seconds.
    pub fn cpu_s(&self) -> f64 {
        self.user_s + self.system_s
    }
}

/// This process so far: every thread, not its children; `None` if the kernel refuses.
pub fn process() -> Option<Usage> {
    sys::rusage(sys::Who::Process)
}

/// The calling thread so far; `None` if the kernel refuses.
pub fn thread() -> Option<Usage> {
    sys::rusage(sys::Who::Thread)
}

/// User + system CPU seconds of this process so far (0 if the kernel refuses).
pub fn process_seconds() -> f64 {
    process().map_or(0.0, |u| u.cpu_s())
}

/// User + system CPU seconds of the calling thread so far (0 if the kernel refuses).
pub fn thread_seconds() -> f64 {
    thread().map_or(0.0, |u| u.cpu_s())
}

/// User + system CPU seconds of every live process in process group `pgid` (threads included;
/// children that already exited and were reaped count through their parent's `cutime`/`cstime`).
pub fn group_seconds(pgid: u32) -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    let mut total = 0u64;
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some((group, cpu)) = parse_proc_stat(&stat) {
            if group == pgid {
                total += cpu;
            }
        }
    }
    total as f64 / clock_ticks()
}

/// (process group, utime + stime + cutime + cstime in clock ticks) from one `/proc/PID/stat`
/// line.
pub fn parse_proc_stat(stat: &str) -> Option<(u32, u64)> {
    // The command name is in parentheses and may contain spaces; fields count from after it.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) pgrp(2) ... utime(11) stime(12) cutime(13) cstime(14).
    let pgrp = fields.get(2)?.parse().ok()?;
    let cpu =
        (11..=14).map(|i| fields.get(i).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0).max(0) as u64).sum();
    Some((pgrp, cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_lines_give_their_group_and_ticks_whatever_the_name() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 0 0 0 0 0 7 3 2 1 20 0 1 0";
        assert_eq!(parse_proc_stat(line), Some((42, 13)));
        assert_eq!(parse_proc_stat("no parenthesis"), None);
        assert_eq!(parse_proc_stat("1 (x)"), None);
    }

    #[test]
    fn this_process_and_thread_have_spent_cpu_time() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(process_seconds() > 0.0);
        assert!(thread().is_some_and(|t| t.cpu_s() <= process_seconds() + 1e-3));
        let own_group = group_seconds(std::process::id());
        assert!(own_group >= 0.0);
        assert!(clock_ticks() >= 1.0);
    }
}
