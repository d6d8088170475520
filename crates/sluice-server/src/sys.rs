//! The server's calls into the operating system that Rust's standard library does not make: this
//! process's limits, the page size, the user id, and
//! the allocator's trim.
//!
//! Owns every `unsafe` block of the crate, each behind a small safe function. It holds no policy:
//! what is reported or when memory is given back is decided by the callers (`ops::metrics`,
//! `library`). Anonymous in-memory files come from `sluice_store::memory_file`, the one wrapper.

/// The soft limit on this process's open file descriptors (`RLIMIT_NOFILE`).
pub fn max_open_files() -> Option<u64> {
    // SAFETY: a zeroed rlimit is valid, and getrlimit fills it.
    let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a live rlimit we own.
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0).then_some(limit.rlim_cur)
}

/// The page size (`_SC_PAGESIZE`), the unit of `/proc/self/statm`.
pub fn page_size() -> libc::c_long {
    // SAFETY: sysconf takes no pointers.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) }
}

/// The real user id of this process.
pub fn user_id() -> u32 {
    // SAFETY: getuid takes nothing and cannot fail.
    unsafe { libc::getuid() }
}

/// Asks the allocator to give the pages of freed heap memory back to the kernel (glibc's
/// `malloc_trim`; nothing elsewhere).
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists and advises the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}
