//! File bytes to sockets: `pread`, `sendfile` and `splice`, the calls of the send strategies.
//! Counting them and choosing between them is `crate::send`'s; this module only makes the calls.

use std::io;
use std::os::fd::RawFd;

use super::cvt_size;

/// `pread(2)` of at most `into.len()` bytes at `offset`.
#[inline]
pub(crate) fn pread(fd: RawFd, into: &mut [u8], offset: u64) -> io::Result<usize> {
    // SAFETY: reads at most `into.len()` bytes into `into`.
    cvt_size(unsafe { libc::pread(fd, into.as_mut_ptr().cast(), into.len(), offset as libc::off_t) })
}

/// `sendfile(2)` of `count` bytes of `file` from `offset` to `sock`.
#[inline]
pub(crate) fn sendfile(sock: RawFd, file: RawFd, offset: u64, count: usize) -> io::Result<usize> {
    let mut off = offset as libc::off_t;
    // SAFETY: off is a live off_t; no other pointers.
    cvt_size(unsafe { libc::sendfile(sock, file, &mut off, count) })
}

/// `splice(2)` of `count` bytes from `file` at `offset` into pipe end `pipe`.
#[inline]
pub(crate) fn splice_from_file(
    file: RawFd,
    offset: u64,
    pipe: RawFd,
    count: usize,
    flags: libc::c_uint,
) -> io::Result<usize> {
    let mut off = offset as libc::loff_t;
    // SAFETY: off is a live loff_t; no other pointers.
    cvt_size(unsafe { libc::splice(file, &mut off, pipe, std::ptr::null_mut(), count, flags) })
}

/// `splice(2)` of `count` bytes from pipe end `pipe` into socket `sock` (no offsets: pipes and
/// sockets take none).
#[inline]
pub(crate) fn splice_to_socket(
    pipe: RawFd,
    sock: RawFd,
    count: usize,
    flags: libc::c_uint,
) -> io::Result<usize> {
    // SAFETY: null offsets are required for pipes and sockets; no other pointers.
    cvt_size(unsafe { libc::splice(pipe, std::ptr::null_mut(), sock, std::ptr::null_mut(), count, flags) })
}
