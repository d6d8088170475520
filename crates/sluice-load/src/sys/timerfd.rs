//! The open model's `timerfd`: made non-blocking and registered with the current tokio runtime,
//! armed at an absolute `CLOCK_MONOTONIC` deadline, and read when it fires. Why a timerfd at all
//! is the timer module's to say.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use tokio::io::unix::AsyncFd;

/// A new timerfd registered with the current runtime; `None` when one cannot be had.
pub(crate) fn registered() -> Option<AsyncFd<OwnedFd>> {
    // SAFETY: timerfd_create takes no pointers; a non-negative result is a new descriptor
    // that nothing else owns.
    let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
    if raw < 0 {
        return None;
    }
    // SAFETY: `raw` is a fresh descriptor owned by nothing else; the OwnedFd moves into
    // the AsyncFd, which keeps it open and unreplaced for as long as it is registered.
    unsafe { AsyncFd::register(OwnedFd::from_raw_fd(raw)) }.ok()
}

/// Reads the expiration count of the timerfd `fd` (clearing it); `WouldBlock` when it has not
/// fired.
pub(crate) fn read_expirations(fd: &OwnedFd) -> io::Result<()> {
    let mut expirations = [0u8; 8];
    // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
    let n = unsafe { libc::read(fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Arms the timerfd `fd` to fire once, `after` from now on `CLOCK_MONOTONIC`.
pub(crate) fn arm(fd: &OwnedFd, after: Duration) -> io::Result<()> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into a live one.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sec = now.tv_sec + after.as_secs() as libc::time_t;
    let mut nsec = now.tv_nsec + libc::c_long::from(after.subsec_nanos() as i32);
    if nsec >= 1_000_000_000 {
        sec += 1;
        nsec -= 1_000_000_000;
    }
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: sec, tv_nsec: nsec },
    };
    // SAFETY: a valid timerfd and a pointer to a live itimerspec; the old value is not wanted.
    if unsafe { libc::timerfd_settime(fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) }
        != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
