//! A mailbox one thread fills and an event loop empties: items behind a mutex, and an eventfd
//! that is readable while items wait, so the loop's epoll set or io_uring ring wakes for them.
//!
//! The CPU pool delivers finished jobs to the loop that asked through one ([`crate::pool`]), and
//! RTSP loops hand each other control connections through one each ([`crate::rtsp`]'s hand-over).
//! Owns the queue and the eventfd; not what the items are or what the loop does with them.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use crate::sys::fd as sys_fd;

/// See the module docs.
pub(crate) struct Mailbox<T> {
    items: Mutex<Vec<T>>,
    event: OwnedFd,
}

impl<T> Mailbox<T> {
    /// An empty mailbox with its eventfd.
    pub(crate) fn new() -> io::Result<Mailbox<T>> {
        let event = sys_fd::eventfd()?;
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
        sys_fd::eventfd_signal(self.event.as_raw_fd());
    }

    /// Takes every waiting item (and resets the eventfd) into `into`.
    pub(crate) fn collect(&self, into: &mut Vec<T>) {
        sys_fd::eventfd_clear(self.event.as_raw_fd());
        into.append(&mut self.items.lock().unwrap_or_else(|e| e.into_inner()));
    }
}
