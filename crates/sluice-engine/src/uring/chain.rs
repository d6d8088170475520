//! A connection's output on the ring: the send chains (one send or `sendmsg` of in-memory bytes;
//! a linked fill-and-drain pair of splices through a pipe; a linked read-and-send through a copy
//! buffer; a poll for room) and how their results move the outbox on.
//!
//! What each strategy does is `send.rs`'s, written once for both kinds of driver: the same pipes
//! and pool, the same `MSG_MORE`/`SPLICE_F_MORE` rule, the same gather limit. This module only
//! expresses those operations as submissions whose results arrive later. It does not decide when
//! a connection sends (that is the worker's `pump`).

use std::io;
use std::os::fd::AsRawFd;

use io_uring::{opcode, types};
use sluice_proto::conn::Pending;

use super::{current, token, Worker, COPY_BUFFER, COPY_POOL_MAX, FILE_IN, POLL_OUT, SOCK_OUT};
use crate::config::SendStrategy;
use crate::counters::Event;
use crate::launch::Service;
use crate::send::{file_after, more_after_front, send_flags, splice_out_flags, MAX_IOVECS, SEND_TURN};

/// A copy buffer lent to a connection, with the read bytes not yet sent (`start..end`); they are
/// the next bytes of the connection's front file segment.
pub(super) struct CopyBuf {
    buf: Box<[u8]>,
    pub start: usize,
    pub end: usize,
}

/// Copy buffers a worker keeps between connections (the same trim policy as `send.rs`'s pipes).
#[derive(Default)]
pub(super) struct CopyPool {
    free: Vec<Box<[u8]>>,
    used: bool,
}

impl CopyPool {
    pub fn take(&mut self) -> CopyBuf {
        self.used = true;
        let buf = self.free.pop().unwrap_or_else(|| vec![0u8; COPY_BUFFER].into_boxed_slice());
        CopyBuf { buf, start: 0, end: 0 }
    }

    /// Whether no idle buffer is kept.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    pub fn put(&mut self, b: CopyBuf) {
        if self.free.len() < COPY_POOL_MAX {
            self.free.push(b.buf);
        }
    }

    pub fn trim(&mut self) {
        if !std::mem::take(&mut self.used) {
            self.free.clear();
        }
    }
}

/// What is on the ring for a connection's output.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum ChainKind {
    /// One send or sendmsg of in-memory segments.
    Bytes,
    /// splice file → pipe (optional) linked to splice pipe → socket.
    Splice,
    /// read file → buffer (optional) linked to send buffer → socket.
    Copy,
    /// A poll for writability after the socket was found full.
    PollOut,
}

/// The send chain in flight: its results arrive one completion at a time and are applied together
/// once all are in, so the order they are reaped in does not matter.
pub(super) struct Chain {
    pub kind: ChainKind,
    /// Whether the chain starts with a FILE_IN operation.
    with_in: bool,
    r_in: Option<i32>,
    r_out: Option<i32>,
}

impl Chain {
    fn complete(&self) -> bool {
        (!self.with_in || self.r_in.is_some()) && self.r_out.is_some()
    }
}

/// A `msghdr` and its iovecs at a stable address for an in-flight `sendmsg`.
pub(super) struct MsgSlot {
    hdr: libc::msghdr,
    iov: [libc::iovec; MAX_IOVECS],
}

impl<S: Service> Worker<'_, S> {
    /// Puts the next piece of the outbox on the ring. Returns false when it cannot (a pipe
    /// could not be made, or a file segment with no bytes to send was found).
    pub(super) fn start_send(&mut self, key: usize) -> bool {
        let strategy = self.core.config.send;
        let u = &mut self.conns[key];
        let id = u.conn.id;
        let sock = u.conn.stream.as_raw_fd();
        let out_token = token(SOCK_OUT, key, id);
        let in_token = token(FILE_IN, key, id);
        let more = more_after_front(&u.conn.out);
        let (file, offset, len) = match u.conn.out.front() {
            None => return true,
            Some(Pending::Bytes(_)) => {
                let mut slots = [io::IoSlice::new(&[]); MAX_IOVECS];
                let n = u.conn.out.leading_slices(&mut slots);
                let flags = send_flags(file_after(&u.conn.out, n));
                let entry = if n == 1 {
                    opcode::Send::new(types::Fd(sock), slots[0].as_ptr(), slots[0].len() as u32)
                        .flags(flags)
                        .build()
                } else {
                    let slot = u.msg.get_or_insert_with(|| {
                        Box::new(MsgSlot {
                            hdr: crate::sys::socket::empty_msghdr(),
                            iov: [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_IOVECS],
                        })
                    });
                    for (iov, s) in slot.iov.iter_mut().zip(&slots[..n]) {
                        *iov = libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() };
                    }
                    slot.hdr.msg_iov = slot.iov.as_mut_ptr();
                    slot.hdr.msg_iovlen = n;
                    opcode::SendMsg::new(types::Fd(sock), &slot.hdr).flags(flags as u32).build()
                };
                u.chain = Some(Chain { kind: ChainKind::Bytes, with_in: false, r_in: None, r_out: None });
                u.inflight += 1;
                self.push(entry.user_data(out_token));
                return true;
            }
            Some(Pending::File(slice)) => (slice.file.as_raw_fd(), slice.offset, slice.len),
        };
        if len == 0 {
            return false;
        }
        match strategy {
            SendStrategy::Splice => {
                let pipe = match u.pipe.take() {
                    Some(p) => p,
                    None => match self.pipes.take() {
                        Ok(p) => p,
                        Err(e) => {
                            tracing::warn!("pipe2: {e}");
                            return false;
                        }
                    },
                };
                let u = &mut self.conns[key];
                let (pipe_r, pipe_w, pending, cap) =
                    (pipe.read_fd(), pipe.write_fd(), pipe.pending, pipe.capacity());
                u.pipe = Some(pipe);
                let out_flags = splice_out_flags(more);
                if pending > 0 {
                    // Bytes left in the pipe by a short send go first.
                    let drain =
                        opcode::Splice::new(types::Fd(pipe_r), -1, types::Fd(sock), -1, pending as u32)
                            .flags(out_flags)
                            .build()
                            .user_data(out_token);
                    u.chain =
                        Some(Chain { kind: ChainKind::Splice, with_in: false, r_in: None, r_out: None });
                    u.inflight += 1;
                    self.push(drain);
                } else {
                    // One chain moves at most a turn's budget: a connection has one chain in
                    // flight per submission, so every connection gets its turn in each.
                    let n = (len as usize).min(cap).min(SEND_TURN as usize) as u32;
                    let fill = opcode::Splice::new(types::Fd(file), offset as i64, types::Fd(pipe_w), -1, n)
                        .flags(libc::SPLICE_F_MOVE)
                        .build()
                        .user_data(in_token);
                    // A short fill breaks the link: the drain then completes with ECANCELED and
                    // what did reach the pipe goes out in the next chain.
                    let drain = opcode::Splice::new(types::Fd(pipe_r), -1, types::Fd(sock), -1, n)
                        .flags(out_flags)
                        .build()
                        .user_data(out_token);
                    u.chain = Some(Chain { kind: ChainKind::Splice, with_in: true, r_in: None, r_out: None });
                    u.inflight += 2;
                    self.push_linked(fill, drain);
                }
            }
            SendStrategy::Copy | SendStrategy::Sendfile => {
                // (Sendfile never gets here: `run` refuses it for this engine.)
                let copies = &mut self.copies;
                let copy = u.copy.get_or_insert_with(|| copies.take());
                let flags = send_flags(more);
                if copy.start < copy.end {
                    let send = opcode::Send::new(
                        types::Fd(sock),
                        copy.buf[copy.start..].as_ptr(),
                        (copy.end - copy.start) as u32,
                    )
                    .flags(flags)
                    .build()
                    .user_data(out_token);
                    u.chain = Some(Chain { kind: ChainKind::Copy, with_in: false, r_in: None, r_out: None });
                    u.inflight += 1;
                    self.push(send);
                } else {
                    let n = (len as usize).min(copy.buf.len()) as u32;
                    copy.start = 0;
                    copy.end = 0;
                    let read = opcode::Read::new(types::Fd(file), copy.buf.as_mut_ptr(), n)
                        .offset(offset)
                        .build()
                        .user_data(in_token);
                    // A short read breaks the link (the send completes with ECANCELED) and the
                    // bytes read go out in the next chain.
                    let send = opcode::Send::new(types::Fd(sock), copy.buf.as_ptr(), n)
                        .flags(flags)
                        .build()
                        .user_data(out_token);
                    u.chain = Some(Chain { kind: ChainKind::Copy, with_in: true, r_in: None, r_out: None });
                    u.inflight += 2;
                    self.push_linked(read, send);
                }
            }
        }
        true
    }

    pub(super) fn on_send(&mut self, kind: u8, key: usize, generation: u64, res: i32) {
        let Some(u) = current(&mut self.conns, key, generation) else { return };
        if let Some(chain) = u.chain.as_mut() {
            if kind == FILE_IN {
                chain.r_in = Some(res);
            } else {
                chain.r_out = Some(res);
            }
        }
        if self.retire(key) {
            return;
        }
        let u = &mut self.conns[key];
        if u.closing || !u.chain.as_ref().is_some_and(Chain::complete) {
            return;
        }
        let chain = u.chain.take().expect("complete chain");
        match self.apply(key, &chain) {
            Ok(()) => {
                let u = &mut self.conns[key];
                // A send that moved bytes and left more: the connection goes on next turn, as an
                // epoll connection that used its budget does; the loop is behind.
                self.behind |= chain.r_out.is_some_and(|r| r > 0) && !u.conn.out.is_empty();
                if u.conn.out.is_empty() {
                    u.drained = true;
                    if let Some(p) = u.pipe.take() {
                        self.pipes.put(p);
                    }
                    if let Some(b) = u.copy.take() {
                        self.copies.put(b);
                    }
                }
                self.drive(key);
            }
            Err(()) => {
                self.core.counters.add(Event::SocketErrors, 1);
                self.close(key);
            }
        }
    }

    /// Applies a finished chain's results to the outbox. An error means the socket or the file
    /// failed and the connection is to be closed.
    fn apply(&mut self, key: usize, chain: &Chain) -> Result<(), ()> {
        let c = self.core.counters;
        let now = self.core.clock.now();
        let u = &mut self.conns[key];
        let r_out = chain.r_out.unwrap_or(-libc::ECANCELED);
        match chain.kind {
            ChainKind::PollOut => return if r_out < 0 && r_out != -libc::EINTR { Err(()) } else { Ok(()) },
            ChainKind::Bytes => {}
            ChainKind::Splice => {
                if let (Some(r_in), Some(pipe)) = (chain.r_in, u.pipe.as_mut()) {
                    if r_in <= 0 {
                        // 0: the file is shorter than its response.
                        return Err(());
                    }
                    pipe.pending += r_in as usize;
                }
                if r_out > 0 {
                    if let Some(pipe) = u.pipe.as_mut() {
                        pipe.pending -= (r_out as usize).min(pipe.pending);
                    }
                }
            }
            ChainKind::Copy => {
                if let (Some(r_in), Some(copy)) = (chain.r_in, u.copy.as_mut()) {
                    if r_in <= 0 {
                        return Err(());
                    }
                    copy.start = 0;
                    copy.end = r_in as usize;
                }
                if r_out > 0 {
                    if let Some(copy) = u.copy.as_mut() {
                        copy.start = (copy.start + r_out as usize).min(copy.end);
                    }
                }
            }
        }
        match r_out {
            n if n > 0 => {
                u.conn.out.advance(n as u64);
                u.conn.last_progress = now;
                c.add(Event::BytesOut, n as u64);
                Ok(())
            }
            0 => Err(()),
            // The link broke before the socket operation (a short fill): nothing was sent.
            e if e == -libc::ECANCELED && chain.with_in => Ok(()),
            e if e == -libc::EAGAIN => {
                // The socket is full: wait until it has room. Counts as the chain in flight.
                let id = u.conn.id;
                let poll = opcode::PollAdd::new(types::Fd(u.conn.stream.as_raw_fd()), libc::POLLOUT as u32)
                    .build()
                    .user_data(token(POLL_OUT, key, id));
                u.chain = Some(Chain { kind: ChainKind::PollOut, with_in: false, r_in: None, r_out: None });
                u.inflight += 1;
                self.push(poll);
                Ok(())
            }
            e if e == -libc::EINTR => Ok(()),
            _ => Err(()),
        }
    }
}
