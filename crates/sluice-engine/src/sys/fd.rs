//! Descriptors that are not sockets: eventfds (wake-ups), pipes (for splice), `poll`, `shutdown`
//! on any socket descriptor, and the thread's clocks and limits the engine reads. It does not
//! know what a wake-up means.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use super::cvt;

/// A new non-blocking, close-on-exec eventfd.
pub(crate) fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; the result is checked.
    let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to eventfd `fd` (makes it readable). A full counter (`EAGAIN`) already means "wake
/// up", so the result is not looked at.
#[inline]
pub(crate) fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Resets eventfd `fd` (reads its counter); `EAGAIN` (nothing waiting) is fine.
#[inline]
pub(crate) fn eventfd_clear(fd: RawFd) {
    let mut count: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64.
    unsafe { libc::read(fd, (&mut count as *mut u64).cast(), 8) };
}

/// A non-blocking, close-on-exec pipe: (read end, write end).
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors are fresh and ours.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Asks for a pipe capacity of `size` bytes; what the kernel granted (`None`: it refused).
pub(crate) fn set_pipe_size(fd: RawFd, size: i32) -> Option<usize> {
    // SAFETY: fcntl on a descriptor; no pointers.
    let granted = unsafe { libc::fcntl(fd, libc::F_SETPIPE_SZ, size) };
    (granted > 0).then_some(granted as usize)
}

/// The pipe's capacity (`None`: unknown).
pub(crate) fn pipe_size(fd: RawFd) -> Option<usize> {
    // SAFETY: fcntl on a descriptor; no pointers.
    let size = unsafe { libc::fcntl(fd, libc::F_GETPIPE_SZ) };
    (size > 0).then_some(size as usize)
}

/// `shutdown(2)` of socket `fd` (`libc::SHUT_WR`, `SHUT_RDWR`); the result is not needed: a
/// socket already gone has nothing left to end.
#[inline]
pub(crate) fn shutdown(fd: RawFd, how: libc::c_int) {
    // SAFETY: no pointers; at worst EBADF or ENOTCONN.
    unsafe { libc::shutdown(fd, how) };
}

/// `poll(2)` on `fds` for at most `timeout_ms` (-1: no limit); the count of ready descriptors,
/// or -1 (`EINTR` and the like).
#[inline]
pub(crate) fn poll(fds: &mut [libc::pollfd], timeout_ms: libc::c_int) -> libc::c_int {
    // SAFETY: `fds` is a live slice of its length; negative descriptors are ignored.
    unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) }
}

/// Waits until `fd` is readable, retrying on `EINTR`.
pub(crate) fn wait_readable(fd: RawFd) {
    let mut pfd = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
    while poll(&mut pfd, -1) < 0 {}
}

/// The CPU time this thread has used.
pub(crate) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a live timespec the call fills.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The soft `RLIMIT_MEMLOCK` in bytes (0 when unreadable).
pub(crate) fn memlock_limit() -> u64 {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes one rlimit into a live local.
    unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) };
    lim.rlim_cur
}

/// The CPUs this thread may run on (`None` when the call fails).
pub(crate) fn thread_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: a zeroed cpu_set_t is valid (no CPUs).
    let mut cpus: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: passes a live cpu_set_t and its size.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut cpus) };
    (r == 0).then_some(cpus)
}
