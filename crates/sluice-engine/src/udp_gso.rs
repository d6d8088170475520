//! UDP generic segmentation offload (Linux 4.18+): one `sendmsg` carries up to 64 datagrams of
//! one size (the last may be shorter) with a `UDP_SEGMENT` control message, and the kernel walks
//! its send path once for them and splits them late. This module owns the probe and the control
//! message; what to put in a message is the caller's (the RTSP loop's batch, the lab's ceiling
//! probe).

/// The control buffer lives with the crate's other system-call data, in `sys`.
pub use crate::sys::socket::SegmentControl;
pub(crate) use crate::sys::socket::{SOL_UDP, UDP_SEGMENT};

/// Most segments in one GSO message (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;

/// Whether this kernel splits UDP GSO messages (`UDP_SEGMENT` is a known socket option).
pub fn supported(fd: libc::c_int) -> bool {
    crate::listener::set_int_opt(fd, SOL_UDP, UDP_SEGMENT, 0).is_ok()
}
