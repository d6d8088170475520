//! An epoll set for the RTSP receiver threads: created, told about sockets, waited on, closed
//! on drop. Which sockets and what a token means is the receiver's business.

use std::time::Duration;

/// What a wait reports: one ready descriptor's token per entry.
pub(crate) type Event = libc::epoll_event;

/// `events` empty entries for [`Epoll::wait`] to fill.
pub(crate) fn events(count: usize) -> Vec<Event> {
    vec![libc::epoll_event { events: 0, u64: 0 }; count]
}

/// An epoll set, closed on drop.
pub(crate) struct Epoll(libc::c_int);

impl Epoll {
    pub(crate) fn new() -> std::io::Result<Epoll> {
        // SAFETY: plain system call; the descriptor is owned by the returned value.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Epoll(fd))
    }

    /// `op` (`EPOLL_CTL_ADD`, `EPOLL_CTL_DEL`) for readability of `fd`, reported with `token`.
    pub(crate) fn control(&self, op: libc::c_int, fd: libc::c_int, token: u64) {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: `event` is a live epoll_event; a failure (a closed descriptor) leaves the set as it was.
        unsafe { libc::epoll_ctl(self.0, op, fd, &mut event) };
    }

    /// Waits up to `timeout` for readiness; how many entries of `events` were filled.
    pub(crate) fn wait(&self, events: &mut [Event], timeout: Duration) -> usize {
        // SAFETY: the kernel writes at most `events.len()` entries into the live slice.
        let n = unsafe {
            libc::epoll_wait(
                self.0,
                events.as_mut_ptr(),
                events.len() as libc::c_int,
                timeout.as_millis() as libc::c_int,
            )
        };
        usize::try_from(n).unwrap_or(0)
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns, once.
        unsafe { libc::close(self.0) };
    }
}
