//! The store's calls into the operating system that Rust's standard library does not make: the
//! `*at` family on directory descriptors, `openat2(RESOLVE_BENEATH)`, anonymous in-memory files
//! and a process probe.
//!
//! Owns every `unsafe` block of the crate, each behind a small safe function that takes Rust
//! types (C strings, borrowed descriptors) and returns owned descriptors or `io::Result`. It
//! holds no policy: which paths are opened and what a failure means is decided by the callers
//! (`beneath`, `local`, the slice cache).

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `Ok` for a non-negative return, else the OS error it set.
fn check(ret: libc::c_int) -> io::Result<()> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// A descriptor from a call that returns one (or -1 and an OS error).
fn owned(fd: libc::c_int) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor the call just returned; nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `open(2)` of `path` with `flags`.
pub fn open(path: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: a valid C string; the result is checked.
    owned(unsafe { libc::open(path.as_ptr(), flags) })
}

/// `openat(2)` of `name` in `dir` with `flags` and `mode` (used with `O_CREAT`).
pub fn openat(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: libc::c_int,
    mode: libc::mode_t,
) -> io::Result<OwnedFd> {
    // SAFETY: a live directory descriptor and a valid C string; the result is checked.
    owned(unsafe { libc::openat(dir.as_raw_fd(), name.as_ptr(), flags, mode as libc::c_uint) })
}

/// `openat2(2)` of `path` in `dir` with `flags` and `resolve` (`RESOLVE_*`).
pub fn openat2(dir: BorrowedFd<'_>, path: &CStr, flags: libc::c_int, resolve: u64) -> io::Result<OwnedFd> {
    // SAFETY: a zeroed open_how is valid (all fields are integers); the used ones are set below.
    let mut how: libc::open_how = unsafe { std::mem::zeroed() };
    how.flags = flags as u64;
    how.resolve = resolve;
    // SAFETY: passes a valid C string and a live open_how of the right size.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_openat2,
            dir.as_raw_fd(),
            path.as_ptr(),
            &how as *const libc::open_how,
            std::mem::size_of::<libc::open_how>(),
        )
    };
    owned(fd as libc::c_int)
}

/// `mkdirat(2)`: the directory `name` in `dir` with `mode` (less the umask).
pub fn mkdirat(dir: BorrowedFd<'_>, name: &CStr, mode: libc::mode_t) -> io::Result<()> {
    // SAFETY: a live directory descriptor and a valid C string.
    check(unsafe { libc::mkdirat(dir.as_raw_fd(), name.as_ptr(), mode) })
}

/// `renameat(2)`: `from` in `from_dir` to `to` in `to_dir`, replacing what is there.
pub fn renameat(from_dir: BorrowedFd<'_>, from: &CStr, to_dir: BorrowedFd<'_>, to: &CStr) -> io::Result<()> {
    // SAFETY: live directory descriptors and valid C strings.
    check(unsafe { libc::renameat(from_dir.as_raw_fd(), from.as_ptr(), to_dir.as_raw_fd(), to.as_ptr()) })
}

/// `linkat(2)` with flags 0 (a final symlink is not followed): `EEXIST` when `to` exists.
pub fn linkat(from_dir: BorrowedFd<'_>, from: &CStr, to_dir: BorrowedFd<'_>, to: &CStr) -> io::Result<()> {
    // SAFETY: live directory descriptors and valid C strings.
    check(unsafe { libc::linkat(from_dir.as_raw_fd(), from.as_ptr(), to_dir.as_raw_fd(), to.as_ptr(), 0) })
}

/// `unlinkat(2)` of the file `name` in `dir`.
pub fn unlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<()> {
    // SAFETY: a live directory descriptor and a valid C string.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), name.as_ptr(), 0) })
}

/// `fsync(2)` of `fd` (a directory's, so that its entries survive a crash).
pub fn fsync(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: a live descriptor.
    check(unsafe { libc::fsync(fd.as_raw_fd()) })
}

/// An anonymous in-memory file (`memfd_create(2)`, close-on-exec) named `name` in
/// `/proc/self/fd`: a descriptor the engine sends from like any file (sendfile, splice and reads
/// all work on it).
pub fn memory_file(name: &CStr) -> io::Result<File> {
    // SAFETY: a valid C string and flags; no memory is retained.
    owned(unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) }).map(File::from)
}

/// `kill(pid, 0)`: `Ok` when the process exists and may be signalled; `EPERM` when it exists
/// but belongs to another user, `ESRCH` when there is none.
pub fn signal_zero(pid: libc::pid_t) -> io::Result<()> {
    // SAFETY: signal 0 sends nothing; it only checks the process.
    check(unsafe { libc::kill(pid, 0) })
}
