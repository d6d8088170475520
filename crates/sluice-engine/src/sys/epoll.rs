//! An epoll instance: create, add, delete, wait. The event loops (HTTP and RTSP) decide what
//! to watch and what a token means.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::cvt;

/// An epoll descriptor, closed on drop.
#[derive(Debug)]
pub(crate) struct Epoll(OwnedFd);

impl Epoll {
    /// A new close-on-exec epoll instance.
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: epoll_create1 takes no pointers; the result is checked.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: a fresh descriptor we own.
        Ok(Epoll(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `fd` for `events`, reported with `token`.
    #[inline]
    pub(crate) fn add(&self, fd: RawFd, events: i32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events: events as u32, u64: token };
        // SAFETY: ev is a live epoll_event.
        cvt(unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(|_| ())
    }

    /// Stops watching `fd` (a descriptor not watched is no error worth reporting).
    #[inline]
    pub(crate) fn delete(&self, fd: RawFd) {
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer on kernels since 2.6.9.
        unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    /// Waits at most `timeout_ms` (-1: no limit) for events into `events`; how many arrived, or
    /// -1 (`EINTR`).
    #[inline]
    pub(crate) fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: libc::c_int) -> libc::c_int {
        // SAFETY: `events` is a live slice of initialised slots of its length.
        unsafe { libc::epoll_wait(self.0.as_raw_fd(), events.as_mut_ptr(), events.len() as i32, timeout_ms) }
    }
}
