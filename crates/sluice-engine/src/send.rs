//! Writing an [`Outbox`] to a socket with a [`SendStrategy`]: the one send path every engine uses.
//!
//! Owns the choice of system call for each kind of segment: in-memory bytes go out with one
//! vectored `sendmsg` (with `MSG_MORE` when file data follows, so a response head and the first
//! file bytes share a TCP segment); file slices go out with `sendfile` or through a buffer the
//! caller owns (`copy`). It works for non-blocking sockets (returns [`Flush::Blocked`]) and for
//! blocking ones with a send timeout (the timeout surfaces as `WouldBlock`, which the caller treats
//! as a stalled client). It does not wait for writability; engines do that their own way.

use std::io::{self, IoSlice};
use std::os::fd::{AsRawFd, RawFd};

use sluice_proto::conn::Pending;
use sluice_proto::Outbox;

use crate::counters::{Event, Shard, Syscall};
use crate::{cvt_size, SendStrategy};

/// Slices gathered into one `sendmsg`.
const MAX_IOVECS: usize = 16;
/// Largest single `sendfile`; bounds how long one connection holds its loop.
const MAX_SENDFILE: usize = 1 << 20;

/// How a flush ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flush {
    /// Everything queued was written.
    Drained,
    /// The socket would block; wait for it to become writable.
    Blocked,
}

/// What a worker lends to every connection it serves: scratch memory and its counters.
pub(crate) struct SendBuffers<'a> {
    /// Scratch for the copy strategy.
    pub copy: &'a mut [u8],
    /// The worker's counter shard.
    pub counters: &'a Shard,
}

/// Writes as much of `out` as the socket takes; returns the bytes written and how it ended.
pub(crate) fn flush(
    fd: RawFd,
    out: &mut Outbox,
    strategy: SendStrategy,
    buffers: &mut SendBuffers<'_>,
) -> io::Result<(u64, Flush)> {
    let mut total = 0u64;
    loop {
        let step = match out.front() {
            None => return Ok((total, Flush::Drained)),
            Some(Pending::Bytes(_)) => {
                buffers.counters.syscall(Syscall::Write);
                send_bytes(fd, out)
            }
            Some(Pending::File(slice)) => {
                let (file_fd, offset, len) = (slice.file.as_raw_fd(), slice.offset, slice.len);
                match strategy {
                    SendStrategy::Sendfile => {
                        buffers.counters.syscall(Syscall::Sendfile);
                        send_file(fd, file_fd, offset, len)
                    }
                    SendStrategy::Splice => {
                        Err(io::Error::new(io::ErrorKind::Unsupported, "splice is being written"))
                    }
                    SendStrategy::Copy => {
                        buffers.counters.syscall(Syscall::Pread);
                        buffers.counters.syscall(Syscall::Write);
                        copy_file(fd, file_fd, offset, len, buffers.copy)
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

fn send_bytes(fd: RawFd, out: &Outbox) -> io::Result<usize> {
    let mut slots = [IoSlice::new(&[]); MAX_IOVECS];
    let n = out.leading_slices(&mut slots);
    let more_follows = out_has_file_after(out, n);
    // SAFETY: zeroed msghdr is valid. IoSlice is ABI-compatible with iovec on Unix, and `slots`
    // outlives the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = slots.as_mut_ptr().cast::<libc::iovec>();
    msg.msg_iovlen = n;
    let flags = libc::MSG_NOSIGNAL | if more_follows { libc::MSG_MORE } else { 0 };
    // SAFETY: msg describes live buffers; fd is a socket.
    cvt_size(unsafe { libc::sendmsg(fd, &msg, flags) })
}

/// Whether a file segment comes right after the first `n` in-memory segments.
fn out_has_file_after(out: &Outbox, n: usize) -> bool {
    out.segment_after(n).is_some_and(|s| matches!(s, sluice_proto::Segment::File(_)))
}

fn send_file(sock: RawFd, file: RawFd, offset: u64, len: u64) -> io::Result<usize> {
    let mut off = offset as libc::off_t;
    let count = (len as usize).min(MAX_SENDFILE);
    // SAFETY: off is a live off_t; both descriptors are open.
    let n = cvt_size(unsafe { libc::sendfile(sock, file, &mut off, count) })?;
    if n == 0 && count > 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its response"));
    }
    Ok(n)
}

fn copy_file(sock: RawFd, file: RawFd, offset: u64, len: u64, buf: &mut [u8]) -> io::Result<usize> {
    let want = (len as usize).min(buf.len());
    // SAFETY: reads at most `want` bytes into `buf`, which is at least that long.
    let got = cvt_size(unsafe { libc::pread(file, buf.as_mut_ptr().cast(), want, offset as libc::off_t) })?;
    if got == 0 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shorter than its response"));
    }
    // What the socket does not take is read again next time rather than kept per connection:
    // the page cache makes the re-read cheap and idle connections then hold no buffer at all.
    // SAFETY: sends `got` initialised bytes from `buf`.
    cvt_size(unsafe { libc::send(sock, buf.as_ptr().cast(), got, libc::MSG_NOSIGNAL) })
}
