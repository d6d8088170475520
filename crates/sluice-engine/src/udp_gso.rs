//! UDP generic segmentation offload (Linux 4.18+): one `sendmsg` carries up to 64 datagrams of
//! one size (the last may be shorter) with a `UDP_SEGMENT` control message, and the kernel walks
//! its send path once for them and splits them late. This module owns the probe and the control
//! message; what to put in a message is the caller's (the RTSP loop's batch, the lab's ceiling
//! probe).

/// `SOL_UDP` and `UDP_SEGMENT` (linux/udp.h; not in every libc target).
pub(crate) const SOL_UDP: libc::c_int = 17;
pub(crate) const UDP_SEGMENT: libc::c_int = 103;
/// Most segments in one GSO message (the kernel's `UDP_MAX_SEGMENTS`).
pub const MAX_SEGMENTS: usize = 64;

/// Whether this kernel splits UDP GSO messages (`UDP_SEGMENT` is a known socket option).
pub fn supported(fd: libc::c_int) -> bool {
    crate::listener::set_int_opt(fd, SOL_UDP, UDP_SEGMENT, 0).is_ok()
}

/// A control buffer holding `UDP_SEGMENT = size`, or nothing; aligned for `cmsghdr`, at a
/// stable address for as long as the caller keeps it (io_uring reads it after submission).
#[derive(Clone, Copy)]
#[repr(C, align(8))]
pub struct SegmentControl([u8; 32]);

impl SegmentControl {
    /// The control message for segments of `size` bytes, or an empty buffer for `None`.
    pub fn new(size: Option<u16>) -> SegmentControl {
        let mut c = SegmentControl([0; 32]);
        if let Some(size) = size {
            // SAFETY: the buffer is aligned for cmsghdr and larger than CMSG_SPACE(2) (24 bytes
            // on 64-bit Linux); the header and data pointers stay inside it.
            unsafe {
                let cmsg = c.0.as_mut_ptr().cast::<libc::cmsghdr>();
                (*cmsg).cmsg_level = SOL_UDP;
                (*cmsg).cmsg_type = UDP_SEGMENT;
                (*cmsg).cmsg_len = libc::CMSG_LEN(2) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>(), size);
            }
        }
        c
    }

    /// Points `hdr`'s control data at this buffer.
    pub fn attach(&mut self, hdr: &mut libc::msghdr) {
        hdr.msg_control = self.0.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        hdr.msg_controllen = unsafe { libc::CMSG_SPACE(2) } as _;
    }
}
