//! io_uring submission: queuing entries on a ring. The entries themselves (what to read, send or
//! splice, into or from which memory) are built by the io_uring engine and the RTSP ring loop,
//! which keep that memory alive until the operation's completion: a connection's slot, freed
//! only after its last completion, the RTSP batch, cleared only when its sends completed, the
//! worker's buffer ring, or a loop's own receive state. That is the one promise these functions
//! rely on; they do not build entries.

use io_uring::{squeue, IoUring};

/// Queues `entry` on `ring`; false when the submission queue is full (submit, then try again).
///
/// The memory `entry` names must outlive its operation (see the module docs).
#[inline]
pub(crate) fn push(ring: &mut IoUring, entry: &squeue::Entry) -> bool {
    // SAFETY: the callers' entries point only at memory that outlives the operation (module docs).
    unsafe { ring.submission().push(entry) }.is_ok()
}

/// Queues `entries` together, or none of them (a linked chain a submit must not split); false
/// when the submission queue has no room for them all.
///
/// As [`push`], the memory each entry names must outlive its operation.
#[inline]
pub(crate) fn push_all(ring: &mut IoUring, entries: &[squeue::Entry]) -> bool {
    // SAFETY: as in `push`.
    unsafe { ring.submission().push_multiple(entries) }.is_ok()
}
