//! The engine's system calls: every `unsafe` of the crate, each behind a small safe function or
//! type (as mio's `src/sys/`). Sockets and addresses ([`socket`]), descriptors, eventfds, pipes and
//! `poll` ([`fd`]), file-to-socket moves ([`file`]), kernel TLS keys and records ([`ktls`]), epoll
//! ([`epoll`]), io_uring submission ([`uring`]) and its provided-buffer ring ([`buf_ring`]). The
//! callers keep what the kernel needs alive (io_uring entries name memory the caller owns until the
//! completion); this module says so on each function and does not know connections, sessions or
//! protocols.

pub(crate) mod buf_ring;
pub(crate) mod epoll;
pub(crate) mod fd;
pub(crate) mod file;
pub(crate) mod ktls;
pub(crate) mod socket;
pub(crate) mod uring;

/// Turns a `-1` return into the thread's `errno` as an `io::Error`.
#[inline]
pub(crate) fn cvt(ret: libc::c_int) -> std::io::Result<libc::c_int> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Same as [`cvt`] for calls returning `ssize_t`.
#[inline]
pub(crate) fn cvt_size(ret: libc::ssize_t) -> std::io::Result<usize> {
    if ret < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}
