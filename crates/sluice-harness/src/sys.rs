//! Every operating-system call of the harness that needs `unsafe`, each behind a small safe
//! function (as mio's `sys`): signalling a process or a process group, waiting for a child's exit
//! without reaping it, and tying a child to its parent's life before it runs. Nothing outside
//! this module says `unsafe`.
//!
//! It owns the system calls and the soundness of their arguments. It does not own which
//! processes exist or when to stop them: [`crate::process`] does.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// Sends `signal` to process `pid` (a child of this process, or 0 to probe one's existence);
/// whether it was delivered.
pub(crate) fn signal_process(pid: i32, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) takes no memory; signalling a pid has no effect on this process's memory.
    unsafe { libc::kill(pid, signal) == 0 }
}

/// Sends `signal` to the process group `pgid` (one this process created and has not reaped the
/// leader of, so the id is still ours).
pub(crate) fn signal_group(pgid: u32, signal: libc::c_int) {
    // SAFETY: as for `signal_process`; a negative pid names the group.
    unsafe { libc::kill(-(pgid as libc::pid_t), signal) };
}

/// Whether child `pid` has exited, leaving it unreaped (`WNOWAIT`); `None` when it is not
/// waitable (reaped elsewhere).
pub(crate) fn child_exited_unreaped(pid: u32) -> Option<bool> {
    // SAFETY: siginfo_t is plain data; all zeroes is a valid value.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WEXITED | libc::WNOHANG | libc::WNOWAIT;
    // SAFETY: waitid on our own child with a pointer to a live siginfo_t; WNOWAIT leaves it
    // unreaped.
    let r = unsafe { libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, flags) };
    if r != 0 {
        return None;
    }
    // SAFETY: waitid filled `info` (si_pid stays 0 when the child has not exited).
    Some(unsafe { info.si_pid() != 0 })
}

/// Makes the child `command` starts get SIGKILL when this process (`parent`) dies, and exit at
/// once if it already has.
pub(crate) fn die_with_parent(command: &mut Command, parent: u32) {
    // SAFETY: prctl and getppid are async-signal-safe; the closure touches nothing else.
    unsafe {
        command.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The parent died before the death signal was armed: go with it.
            if libc::getppid() as u32 != parent {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}
