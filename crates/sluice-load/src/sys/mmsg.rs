//! The buffers of one `recvmmsg` call: per message a data buffer and a control buffer, with the
//! `iovec`s and `mmsghdr`s that point into them, built once and reused for every call. How big
//! they are and what the messages mean is the receiver's business.

use std::os::fd::RawFd;

/// Buffers for up to `count` messages of `message` bytes with `control` bytes of control data each.
pub(crate) struct Batch {
    buffers: Vec<u8>,
    controls: Vec<u8>,
    iovecs: Vec<libc::iovec>,
    headers: Vec<libc::mmsghdr>,
    message: usize,
    control: usize,
}

// SAFETY: the raw pointers in `iovecs` and `headers` point into this value's own heap buffers,
// which move with it; the batch is used by one thread at a time.
unsafe impl Send for Batch {}

impl Batch {
    pub(crate) fn new(count: usize, message: usize, control: usize) -> Batch {
        let mut buffers = vec![0u8; count * message];
        let mut controls = vec![0u8; count * control];
        let iovecs: Vec<libc::iovec> = buffers
            .chunks_mut(message)
            .map(|b| libc::iovec { iov_base: b.as_mut_ptr().cast(), iov_len: b.len() })
            .collect();
        let mut batch = Batch {
            buffers: Vec::new(),
            controls: Vec::new(),
            iovecs,
            headers: Vec::with_capacity(count),
            message,
            control,
        };
        for i in 0..count {
            // SAFETY: mmsghdr is plain data; all-zero is a valid empty header.
            let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
            h.msg_hdr.msg_iov = &mut batch.iovecs[i];
            h.msg_hdr.msg_iovlen = 1;
            h.msg_hdr.msg_control = controls[i * control..].as_mut_ptr().cast();
            h.msg_hdr.msg_controllen = control as _;
            batch.headers.push(h);
        }
        batch.buffers = buffers;
        batch.controls = controls;
        batch
    }

    /// Reads up to `count` messages from `fd` without waiting; how many arrived.
    pub(crate) fn receive(&mut self, fd: RawFd) -> usize {
        for h in &mut self.headers {
            h.msg_hdr.msg_controllen = self.control as _;
            h.msg_len = 0;
        }
        // SAFETY: every header points at a live iovec over its own `message`-byte buffer and its
        // own control buffer of `control` bytes, all owned by `self`.
        let n = unsafe {
            libc::recvmmsg(
                fd,
                self.headers.as_mut_ptr(),
                self.headers.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        usize::try_from(n).unwrap_or(0)
    }

    /// Message `i` of the last receive and its control data.
    pub(crate) fn message(&self, i: usize) -> (&[u8], &[u8]) {
        let h = &self.headers[i];
        let len = (h.msg_len as usize).min(self.message);
        let control_len = h.msg_hdr.msg_controllen.min(self.control);
        let control = &self.controls[i * self.control..i * self.control + control_len];
        (&self.buffers[i * self.message..i * self.message + len], control)
    }
}
