//! The binary's one system call that Rust's standard library does not wrap (glibc's `mallopt`),
//! behind a safe function. Nothing else in the binary says `unsafe`.

/// Sets glibc's mmap threshold to `bytes`: blocks that large or larger come from `mmap` and go
/// back to the kernel when freed. Called before any thread starts.
pub(crate) fn set_mmap_threshold(bytes: libc::c_int) {
    // SAFETY: mallopt only changes allocator parameters.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, bytes) };
}
