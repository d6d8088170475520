//! Every operating-system call of the load generator that needs `unsafe`, each behind a small
//! safe function or type (as mio's `sys`): resource limits and usage, socket options, the
//! open model's `timerfd` ([`timerfd`]), and the RTSP receiver threads' epoll set and
//! `recvmmsg` batch ([`epoll`], [`mmsg`]). Nothing outside this module says `unsafe`.
//!
//! It owns the system calls and the soundness of their arguments. It does not own what the
//! callers do with the results (schedules, counting, which options to set).

pub(crate) mod epoll;
pub(crate) mod mmsg;
pub(crate) mod timerfd;

use std::io;
use std::os::fd::RawFd;

/// Raises the soft limit of `resource` to its hard limit when it is lower.
pub(crate) fn raise_soft_limit_to_hard(resource: libc::__rlimit_resource_t) -> io::Result<()> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a pointer to a live rlimit.
    unsafe {
        if libc::getrlimit(resource, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(resource, &lim) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// Sets the integer socket option `level`/`name` of `fd` (a socket the caller owns).
pub(crate) fn set_socket_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: passes a live c_int and its size; a descriptor that is not a socket is an error.
    let set = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if set == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads the integer socket option `level`/`name` of `fd`.
#[cfg(test)]
pub(crate) fn socket_int(fd: RawFd, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into a live c_int.
    let got = unsafe { libc::getsockopt(fd, level, name, (&mut v as *mut libc::c_int).cast(), &mut len) };
    if got == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}
