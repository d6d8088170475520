//! Writing an [`Outbox`] to a socket with a [`SendStrategy`]: the one send path every engine uses.
//!
//! Owns the choice of system call for each kind of segment: in-memory bytes go out with one
//! vectored `sendmsg` (with `MSG_MORE` when file data follows, so a response head and the first
//! file bytes share a TCP segment); file slices go out with `sendfile` or through a buffer the
//! caller owns (`copy`). It works for non-blocking sockets (returns [`Flush::Blocked`]) and for
//! blocking ones with a send timeout (the timeout surfaces as `WouldBlock`, which the caller treats
//! as a stalled client). It does not wait for writability; engines do that their own way.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use sluice_proto::conn::Pending;
use sluice_proto::Outbox;

use crate::config::SendStrategy;
use crate::counters::{Event, Shard, Syscall};
use crate::sys::{fd as sys_fd, file as sys_file, socket};

/// Slices gathered into one `sendmsg`.
pub(crate) const MAX_IOVECS: usize = 16;
/// Most bytes one connection writes in one turn of its loop before the loop serves the other
/// ready connections (nginx's `sendfile_max_chunk`, 2 MiB by default, has the same purpose). On
/// loopback a reader takes bytes as fast as they come, so without a bound one large response
/// holds the loop until it is sent whole while every other client waits. Every engine applies
/// it: epoll puts the connection at the back of its ready queue, tokio yields the task, the
/// threads engine yields the thread, io_uring sizes each connection's send chain by it (one
/// chain in flight per connection per submission).
///
/// The size is a latency choice, not a cost one: `sendfile` into a loopback socket cost the same
/// CPU per byte whatever the call size (0.13-0.15 s/GB for calls of 64 KiB to 4 MiB, 2 cores,
/// Linux 6.18, 2026-11-27), so a turn costs one extra `epoll_wait` and a queue push, about 1% of
/// the ~0.15 ms of `sendfile` a 1 MiB turn takes. With 1 MiB, 100 small responses went out
/// while a 1 GB download on the same worker moved 0.7-1.9 MB (`tests/fair_sending.rs`, epoll),
/// against 7-10 MB when a connection was written until its socket blocked.
pub(crate) const SEND_TURN: u64 = 1 << 20;

/// How far past [`SEND_TURN`] a turn's last file slice may run so that a response ends in this
/// turn instead of leaving a tail for the next: a 1 MiB file behind its response head was cut
/// 250 bytes short of its end, and that tail cost a turn of its own (an `epoll_wait` and a
/// `sendfile`: 4.15 system calls a request against 3.16 before turns were bounded, E1's capacity
/// rows at 1 MB, epoll with `sendfile`, 2026-11-28 against 2026-11-24).
const TURN_SLACK: u64 = SEND_TURN / 8;

/// The bytes of a file slice of `len` this turn sends, with `left` of its budget: all of them
/// when the rest would fit in [`TURN_SLACK`], else the budget.
fn turn_cut(len: u64, left: u64) -> u64 {
    if len <= left.saturating_add(TURN_SLACK) {
        len
    } else {
        left
    }
}

/// How a flush ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flush {
    /// Everything queued was written.
    Drained,
    /// The socket would block; wait for it to become writable.
    Blocked,
    /// The turn's [`SEND_TURN`] is used and more is queued; the socket may still have room, so
    /// the engine comes back to this connection after the others without waiting for it.
    Yielded,
}

/// What a worker lends to every connection it serves: scratch memory, pipes and its counters.
pub(crate) struct SendBuffers<'a> {
    /// Scratch for the copy strategy.
    pub copy: &'a mut [u8],
    /// Idle pipes for the splice strategy.
    pub pipes: &'a mut PipePool,
    /// The worker's counter shard.
    pub counters: &'a Shard,
}

/// A pipe for splicing file pages to a socket, with the bytes it still holds. Both kinds of
/// driver use it: the readiness engines splice through it in [`flush`], io_uring queues the same
/// two splices as a linked pair.
#[derive(Debug)]
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// What the kernel granted (`F_SETPIPE_SZ`): one fill moves at most this much.
    capacity: usize,
    /// Bytes spliced in from the file and not yet out to the socket. They are always the next
    /// bytes of the connection's front file segment.
    pub pending: usize,
}

/// Capacity asked for each pipe: one splice pair then moves up to this much. The kernel grants
/// up to `/proc/sys/fs/pipe-max-size` (1 MiB by default) and keeps the default 64 KiB otherwise.
const PIPE_SIZE: i32 = 1 << 20;

impl Pipe {
    fn new() -> io::Result<Pipe> {
        // Non-blocking both ends: a splice (in io_uring's case, in a kernel worker thread) must
        // never sleep on a pipe; ours are empty before a fill and sized for it, but a bug should
        // not hang a thread.
        let (read, write) = sys_fd::pipe()?;
        // When the kernel refuses the size, the pipe keeps its default.
        let capacity = sys_fd::set_pipe_size(write.as_raw_fd(), PIPE_SIZE)
            .or_else(|| sys_fd::pipe_size(write.as_raw_fd()))
            .unwrap_or(64 * 1024);
        Ok(Pipe { read, write, capacity, pending: 0 })
    }

    /// The end the socket side splices from.
    pub fn read_fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// The end the file side splices into.
    pub fn write_fd(&self) -> RawFd {
        self.write.as_raw_fd()
    }

    /// Most bytes one fill may move.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// Pipes a worker keeps between connections: a connection holds one only while bytes are in it,
/// so a worker needs about as many pipes as connections blocked mid-splice, not one per client.
///
/// A pipe whose content is not known exactly must never come back here: a connection closed
/// while a fill was in flight drops its pipe instead (the pooled pipe would hand the next
/// response the dead one's bytes).
#[derive(Debug, Default)]
pub(crate) struct PipePool {
    free: Vec<Pipe>,
    /// Whether a pipe was taken since the last [`PipePool::trim`].
    used: bool,
}

/// Idle pipes kept per worker; beyond this they are closed.
const POOL_MAX: usize = 64;

impl PipePool {
    /// An empty pipe: an idle one, or a new one.
    pub fn take(&mut self) -> io::Result<Pipe> {
        self.used = true;
        match self.free.pop() {
            Some(p) => Ok(p),
            None => Pipe::new(),
        }
    }

    /// Whether no idle pipe is kept.
    pub fn is_empty(&self) -> bool {
        self.free.is_empty()
    }

    /// Closes the idle pipes if none was taken since the last call: called from a periodic
    /// sweep, it keeps pipes through a burst and gives their descriptors back once it is over.
    pub fn trim(&mut self) {
        if !std::mem::take(&mut self.used) {
            self.free.clear();
        }
    }

    /// Closes every idle pipe.
    pub fn clear(&mut self) {
        self.free.clear();
    }

    /// Returns an empty pipe for reuse; a pipe with bytes in it is closed instead.
    pub fn put(&mut self, pipe: Pipe) {
        if pipe.pending == 0 && self.free.len() < POOL_MAX {
            self.free.push(pipe);
        }
    }
}

/// The flags of a `send`/`sendmsg`: `MSG_MORE` when the caller knows more bytes follow at once
/// (file bytes after a response head, [`file_after`]; anything after a copied file segment,
/// [`more_after_front`]), so the kernel fills a TCP segment instead of sending a short one.
pub(crate) fn send_flags(more_follows: bool) -> libc::c_int {
    libc::MSG_NOSIGNAL | if more_follows { libc::MSG_MORE } else { 0 }
}

/// The flags of the pipe → socket splice. `SPLICE_F_NONBLOCK` on the socket side: a full socket
/// answers `EAGAIN` and the engine waits for room its own way, instead of a thread (io_uring's
/// kernel worker) sleeping on a slow client. `SPLICE_F_MORE` as `MSG_MORE` above.
pub(crate) fn splice_out_flags(more_follows: bool) -> libc::c_uint {
    libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK | if more_follows { libc::SPLICE_F_MORE } else { 0 }
}

/// Whether a file segment comes right after the first `n` in-memory segments.
pub(crate) fn file_after(out: &Outbox, n: usize) -> bool {
    out.segment_after(n).is_some_and(|s| matches!(s, sluice_proto::Segment::File(_)))
}

/// Whether anything follows the front segment (so the kernel may hold a partial packet).
pub(crate) fn more_after_front(out: &Outbox) -> bool {
    out.segment_after(1).is_some()
}

/// Writes as much of `out` as the socket takes, up to `limit` bytes (what is left of the turn's
/// [`SEND_TURN`]); returns the bytes written and how it ended.
pub(crate) fn flush(
    fd: RawFd,
    out: &mut Outbox,
    strategy: SendStrategy,
    buffers: &mut SendBuffers<'_>,
    pipe: &mut Option<Pipe>,
    limit: u64,
) -> io::Result<(u64, Flush)> {
    let mut total = 0u64;
    loop {
        if total >= limit && !out.is_empty() {
            return Ok((total, Flush::Yielded));
        }
        // What this turn may still write: the last call of a turn is cut to it.
        let left = limit.saturating_sub(total);
        let gathered = match pipe {
            Some(p) if p.pending > 0 => 0,
            _ => small_run(out, buffers.copy.len(), left),
        };
        let step = match out.front() {
            None => return Ok((total, Flush::Drained)),
            Some(Pending::File(_)) if gathered > 0 => send_small_files(fd, out, gathered, buffers),
            Some(Pending::Bytes(_)) => {
                buffers.counters.syscall(Syscall::Write);
                send_bytes(fd, out)
            }
            Some(Pending::File(slice)) => {
                let (file_fd, offset, len) =
                    (slice.file.as_raw_fd(), slice.offset, turn_cut(slice.len, left));
                match strategy {
                    SendStrategy::Sendfile => {
                        buffers.counters.syscall(Syscall::Sendfile);
                        send_file(fd, file_fd, offset, len)
                    }
                    SendStrategy::Splice => {
                        let more = more_after_front(out);
                        splice_file(fd, file_fd, offset, len, pipe, buffers, more)
                    }
                    SendStrategy::Copy => {
                        buffers.counters.syscall(Syscall::Pread);
                        buffers.counters.syscall(Syscall::Write);
                        copy_file(fd, file_fd, offset, len, buffers.copy, more_after_front(out))
                    }
                }
            }
        };
        match step {
            Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "socket took nothing")),
            Ok(n) => {
                out.advance(n as u64);
                total += n as u64;
                buffers.counters.add(Event::BytesOut, n as u64);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok((total, Flush::Blocked)),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// File slices at most this long go out copied, gathered with the small slices behind them into
/// one `send`, instead of one `sendfile` (and one TCP segment) each. A per-track segment of an
/// interleaved MP4 is made of such pieces: in the 1080p 23 Mb/s benchmark file, each 2 s audio
/// segment (34 KB) was 60 ranges of about 680 bytes, one between every two video frames, and
/// cost 60 `sendfile`s and as many packets; gathered, it is 60 `pread`s and one `send`.
const SMALL_SLICE: u64 = 16 * 1024;

/// How many file slices at the front of `out` are small (each at most [`SMALL_SLICE`]) and fit
/// together in `room` bytes and the turn's `left`; 0 unless there are at least two (one alone
/// goes the usual way).
fn small_run(out: &Outbox, room: usize, left: u64) -> usize {
    let (mut n, mut bytes) = (0, 0u64);
    while let Some(sluice_proto::Segment::File(f)) = out.segment_after(n) {
        if f.len > SMALL_SLICE || bytes + f.len > (room as u64).min(left) {
            break;
        }
        bytes += f.len;
        n += 1;
    }
    if n >= 2 {
        n
    } else {
        0
    }
}

/// Reads the first `count` file slices of `out` (all small, see [`small_run`]) into the copy
/// buffer and sends them in one call, with `MSG_MORE` when more follows. What the socket does
/// not take is read again next time, as with the copy strategy.
fn send_small_files(
    fd: RawFd,
    out: &Outbox,
    count: usize,
    buffers: &mut SendBuffers<'_>,
) -> io::Result<usize> {
    let mut filled = 0;
    for i in 0..count {
        let Some(sluice_proto::Segment::File(f)) = out.segment_after(i) else { break };
        let mut read = 0;
        while read < f.len as usize {
            let into = &mut buffers.copy[filled + read..filled + f.len as usize];
            buffers.counters.syscall(Syscall::Pread);
            match sys_file::pread(f.file.as_raw_fd(), into, f.offset + read as u64) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file shorter than its response",
                    ))
                }
                Ok(n) => read += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        filled += read;
    }
    buffers.counters.syscall(Syscall::Write);
    let more = out.segment_after(count).is_some();
    socket::send(fd, &buffers.copy[..filled], send_flags(more))
}

fn send_bytes(fd: RawFd, out: &Outbox) -> io::Result<usize> {
    let mut slots = [IoSlice::new(&[]); MAX_IOVECS];
    let n = out.leading_slices(&mut slots);
    let flags = send_flags(file_after(out, n));
    socket::send_slices(fd, &mut slots[..n], flags)
}

/// Moves file bytes through the connection's pipe: refill it from the file when it is empty,
/// then drain as much as the socket takes. Returns bytes delivered to the socket.
fn splice_file(
    sock: RawFd,
    file: RawFd,
    offset: u64,
    len: u64,
    pipe: &mut Option<Pipe>,
    buffers: &mut SendBuffers<'_>,
    more: bool,
) -> io::Result<usize> {
    let p = match pipe {
        Some(p) => p,
        None => pipe.insert(buffers.pipes.take()?),
    };
    if p.pending == 0 {
        let count = (len as usize).min(p.capacity);
        buffers.counters.syscall(Syscall::Splice);
        let n = sys_file::splice_from_file(file, offset, p.write.as_raw_fd(), count, libc::SPLICE_F_MOVE)?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its response"));
        }
        p.pending = n;
    }
    let flags = splice_out_flags(more);
    buffers.counters.syscall(Syscall::Splice);
    // What the pipe holds is the front segment's next bytes; `len` is what this turn may move.
    let count = p.pending.min(len as usize);
    let n = sys_file::splice_to_socket(p.read.as_raw_fd(), sock, count, flags)?;
    p.pending -= n;
    Ok(n)
}

fn send_file(sock: RawFd, file: RawFd, offset: u64, len: u64) -> io::Result<usize> {
    let count = len as usize;
    let n = sys_file::sendfile(sock, file, offset, count)?;
    if n == 0 && count > 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its response"));
    }
    Ok(n)
}

fn copy_file(
    sock: RawFd,
    file: RawFd,
    offset: u64,
    len: u64,
    buf: &mut [u8],
    more: bool,
) -> io::Result<usize> {
    let want = (len as usize).min(buf.len());
    let got = sys_file::pread(file, &mut buf[..want], offset)?;
    if got == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its response"));
    }
    // What the socket does not take is read again next time rather than kept per connection:
    // the page cache makes the re-read cheap and idle connections then hold no buffer at all.
    socket::send(sock, &buf[..got], send_flags(more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_finishes_a_slice_whose_rest_is_small_and_cuts_a_large_one() {
        // A 1 MiB file behind a 250-byte head: sent whole in the head's turn.
        assert_eq!(turn_cut(SEND_TURN, SEND_TURN - 250), SEND_TURN);
        // Within the budget: as it is.
        assert_eq!(turn_cut(1000, SEND_TURN), 1000);
        // A 1 GB download: the budget, no more.
        assert_eq!(turn_cut(1 << 30, SEND_TURN), SEND_TURN);
        assert_eq!(turn_cut(SEND_TURN + TURN_SLACK + 1, SEND_TURN), SEND_TURN);
        assert_eq!(turn_cut(SEND_TURN + TURN_SLACK, SEND_TURN), SEND_TURN + TURN_SLACK);
    }
}
