//! Closing on io_uring: a connection's operations are cancelled and its slot, buffers and socket
//! kept until the last completion is in ([`Worker::close`], [`Worker::release`]), and at the end the
//! worker waits for the ring to let go of every buffer ([`Worker::finish`]); shutdown stops the
//! accept first ([`Worker::begin_shutdown`]). Owns the order of letting go, not what is sent or
//! received (the worker loop's, in [`super`]).

use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{opcode, types};

use super::{token, Service, Wait, Worker, ACCEPT, CANCEL, FINAL_DRAIN};
use crate::clock::read_clock;
use crate::worker;

impl<S: Service> Worker<'_, S> {
    /// Counts one operation of `key` as finished; returns true when the connection was closing
    /// and this was its last, so it has been released.
    pub(super) fn retire(&mut self, key: usize) -> bool {
        let u = &mut self.conns[key];
        u.inflight -= 1;
        if u.closing && u.inflight == 0 {
            self.release(key);
            return true;
        }
        u.closing
    }

    pub(super) fn begin_shutdown(&mut self) {
        if self.core.draining_until.is_some() {
            return;
        }
        if self.accept_armed {
            // The listener is closed when the accept's last completion arrives; closing it
            // while the accept holds it would keep it listening.
            let cancel = opcode::AsyncCancel::new(token(ACCEPT, 0, 0)).build().user_data(token(CANCEL, 0, 0));
            self.push(cancel);
        } else {
            self.listener = None;
        }
        worker::begin_drain(self);
    }

    // -- closing ----------------------------------------------------------------------------

    /// Starts closing a connection: cancels what it has on the ring; it is released when the
    /// last completion is in.
    pub(super) fn close(&mut self, key: usize) {
        let u = &mut self.conns[key];
        if u.closing {
            return;
        }
        u.closing = true;
        self.live -= 1;
        if u.inflight == 0 {
            self.release(key);
            return;
        }
        // Everything on the socket: the receive, a send or poll, a splice into it. A fill from a
        // file (on the pipe or buffer, not the socket) finishes on its own, and a linked drain
        // behind it then fails fast or sends into a socket we have not closed yet.
        let fd = u.conn.stream.as_raw_fd();
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
            .build()
            .user_data(token(CANCEL, 0, 0));
        self.push(cancel);
    }

    /// Frees a connection nothing on the ring refers to any more, and closes its socket.
    pub(super) fn release(&mut self, key: usize) {
        let mut u = self.conns.remove(key);
        // A pipe still held here belonged to a response cut short; what a fill put in it was
        // never accounted for, so it is closed, never pooled.
        drop(u.pipe.take());
        if let Some(b) = u.copy.take() {
            self.copies.put(b);
        }
        drop(u);
        self.core.closed();
        // A descriptor is free again: an accept stopped by EMFILE may succeed now (as epoll).
        if self.accept_retry && self.core.draining_until.is_none() && !self.accept_armed {
            self.accept_retry = false;
            self.arm_accept();
        }
    }

    /// Closes what is left and waits for the ring to let go of every buffer before they are
    /// freed.
    pub(super) fn finish(mut self) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.close(key);
        }
        let until = Instant::now() + FINAL_DRAIN;
        while !self.conns.is_empty() && Instant::now() < until {
            self.enter(Wait::One(Some(Duration::from_millis(100))));
            read_clock(&mut self.core.clock);
            self.reap();
        }
        if !self.conns.is_empty() {
            tracing::warn!(
                "{} connections still had io_uring operations in flight at exit; their buffers are leaked",
                self.conns.len()
            );
            // The kernel may still write into these; never free them.
            std::mem::forget(std::mem::take(&mut self.conns));
            let Worker { ring, bufs, .. } = self;
            drop(ring);
            std::mem::forget(bufs);
        }
    }
}
