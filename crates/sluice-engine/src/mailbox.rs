//! A mailbox one thread fills and an event loop empties: items behind a mutex, and an eventfd
//! that is readable while items wait, so the loop's epoll set or io_uring ring wakes for them.
//!
//! The CPU pool delivers finished jobs to the loop that asked through one ([`crate::pool`]), and
//! RTSP loops hand each other control connections through one each ([`crate::rtsp`]'s hand-over).
//! Owns the queue and the eventfd; not what the items are or what the loop does with them.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::cvt;

/// See the module docs.
pub(crate) struct Mailbox<T> {
    items: Mutex<Vec<T>>,
    event: OwnedFd,
}

impl<T> Mailbox<T> {
    /// An empty mailbox with its eventfd.
    pub(crate) fn new() -> io::Result<Mailbox<T>> {
        // SAFETY: eventfd takes no pointers; the result is checked.
        let fd = cvt(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        // SAFETY: a fresh descriptor we own.
        let event = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Mailbox { items: Mutex::new(Vec::new()), event })
    }

    /// The descriptor that becomes readable when items wait.
    pub(crate) fn fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    /// Leaves `item` and wakes the loop.
    pub(crate) fn deliver(&self, item: T) {
        // A poisoned lock only means another sender panicked mid-push; the items are intact.
        self.items.lock().unwrap_or_else(|e| e.into_inner()).push(item);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our eventfd. A full counter (EAGAIN) already
        // means "wake up".
        unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Takes every waiting item (and resets the eventfd) into `into`.
    pub(crate) fn collect(&self, into: &mut Vec<T>) {
        let mut count: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64; EAGAIN (nothing waiting) is fine.
        unsafe { libc::read(self.event.as_raw_fd(), (&mut count as *mut u64).cast(), 8) };
        into.append(&mut self.items.lock().unwrap_or_else(|e| e.into_inner()));
    }
}
