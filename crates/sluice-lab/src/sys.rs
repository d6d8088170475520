//! The lab's system calls, each behind a small safe function: CPU affinity ([`CpuSet`]), what
//! runs between fork and exec of a server (pinning, joining its cgroup), socket options, an
//! epoll set, and the ceiling probe's batched `sendmmsg`/`recvmmsg` over buffers this module
//! points the kernel at itself. Nothing else in the crate says `unsafe`.
//!
//! It decides nothing: which CPUs, which group, what to send are the callers' (`machine`,
//! `peer`, `budget`, `ceiling`).

use std::net::UdpSocket;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::Command;

use sluice_engine::udp_gso::SegmentControl;

/// A set of CPUs, built once and applied where it is needed: to the runner's own thread
/// (`machine::pin`) or, between fork and exec, to a server it starts.
#[derive(Clone, Copy)]
pub struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    /// The set of `cpus`.
    pub fn new(cpus: &[usize]) -> CpuSet {
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET only writes into it.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            // SAFETY: as above.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        CpuSet(set)
    }

    /// Restricts the calling thread (and the threads and processes it starts afterwards) to the
    /// set. One system call and no allocation, so it is safe between fork and exec.
    pub fn apply(&self) -> std::io::Result<()> {
        // SAFETY: sched_setaffinity reads a live cpu_set_t of the size given.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &self.0) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }
}

/// CPUs online (at least 1).
pub(crate) fn online_cpus() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    n.max(1) as usize
}

/// This process's group.
#[cfg(test)]
pub(crate) fn process_group() -> u32 {
    // SAFETY: getpgrp has no preconditions.
    unsafe { libc::getpgrp() as u32 }
}

/// Whether this process runs as root.
pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Writes `0` to `fd` (a cgroup's `cgroup.procs`: the writer joins it): one `write` system call
/// and no allocation, so it is safe between fork and exec.
pub(crate) fn write_zero(fd: RawFd) -> std::io::Result<()> {
    // SAFETY: writing one byte from a static buffer to a descriptor the caller opened.
    if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Has `command`'s child, between fork and exec, apply `set` and join the cgroup whose
/// `cgroup.procs` is `procs`.
pub(crate) fn place_at_exec(command: &mut Command, set: Option<CpuSet>, procs: Option<RawFd>) {
    // SAFETY: the closure runs between fork and exec and only makes two system calls, on a set
    // built and a descriptor opened before the fork; it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            if let Some(set) = &set {
                set.apply()?;
            }
            if let Some(fd) = procs {
                write_zero(fd)?;
            }
            Ok(())
        });
    }
}

/// `setsockopt(level, name, value)` for an integer option.
pub(crate) fn set_int_option(
    socket: &UdpSocket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> std::io::Result<()> {
    // SAFETY: setsockopt reads `value` (a live c_int of the length given).
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// An epoll set, closed when dropped.
pub(crate) struct Epoll {
    fd: RawFd,
    events: Vec<libc::epoll_event>,
}

impl Epoll {
    /// A new set that reports at most `capacity` events a wait.
    pub(crate) fn new(capacity: usize) -> std::io::Result<Epoll> {
        // SAFETY: epoll_create1 has no pointer arguments.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Epoll { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; capacity.max(1)] })
    }

    /// Watches `socket` for input, edge-triggered, reporting `token`.
    pub(crate) fn add_readable(&self, socket: &UdpSocket, token: u64) -> std::io::Result<()> {
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLET) as u32, u64: token };
        // SAFETY: `ev` is a live epoll_event; both descriptors are open.
        if unsafe { libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, socket.as_raw_fd(), &mut ev) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The tokens ready within `timeout_ms` (none on a timeout or an interruption).
    pub(crate) fn wait(&mut self, timeout_ms: i32) -> Vec<u64> {
        // SAFETY: `events` is a live buffer of the length given.
        let n = unsafe {
            libc::epoll_wait(self.fd, self.events.as_mut_ptr(), self.events.len() as libc::c_int, timeout_ms)
        };
        self.events.iter().take(n.max(0) as usize).map(|e| e.u64).collect()
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // SAFETY: `fd` is this set's own descriptor, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// One message for [`send_all`]: its bytes in parts, where to, and whether it is a GSO message.
pub(crate) struct OutMessage<'a> {
    /// The parts, sent back to back.
    pub parts: Vec<&'a [u8]>,
    /// The destination.
    pub to: (libc::sockaddr_in, libc::socklen_t),
    /// Whether to attach the segment size (a message of more than one datagram).
    pub segmented: bool,
}

/// Sends every message with as few `sendmmsg` calls as the kernel takes, `control` attached to
/// the segmented ones; retries interrupted calls.
pub(crate) fn send_all(
    socket: &UdpSocket,
    messages: &[OutMessage<'_>],
    control: &SegmentControl,
) -> std::io::Result<()> {
    let mut iovs: Vec<libc::iovec> = Vec::new();
    let mut spans = Vec::with_capacity(messages.len());
    for m in messages {
        let from = iovs.len();
        iovs.extend(
            m.parts
                .iter()
                .map(|p| libc::iovec { iov_base: p.as_ptr() as *mut libc::c_void, iov_len: p.len() }),
        );
        spans.push((from, iovs.len() - from));
    }
    let mut controls: Vec<SegmentControl> = vec![*control; messages.len()];
    let mut names: Vec<libc::sockaddr_in> = messages.iter().map(|m| m.to.0).collect();
    let mut hdrs: Vec<libc::mmsghdr> = Vec::with_capacity(messages.len());
    for (i, m) in messages.iter().enumerate() {
        // SAFETY: msghdr is plain data; zero is a valid empty header.
        let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_in).cast();
        h.msg_namelen = m.to.1;
        let (from, count) = spans[i];
        h.msg_iov = iovs[from..].as_mut_ptr();
        h.msg_iovlen = count;
        if m.segmented {
            controls[i].attach(&mut h);
        }
        hdrs.push(libc::mmsghdr { msg_hdr: h, msg_len: 0 });
    }
    let mut done = 0;
    while done < hdrs.len() {
        // SAFETY: every header points at buffers built above from the messages' slices, the
        // names and the controls, which outlive the call; the count is the slice's length.
        let r = unsafe {
            libc::sendmmsg(
                socket.as_raw_fd(),
                hdrs[done..].as_mut_ptr(),
                (hdrs.len() - done) as libc::c_uint,
                0,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += r as usize;
    }
    Ok(())
}

/// Buffers for `recvmmsg` of up to `batch` messages of `message` bytes with `control` bytes
/// of control data each, owned here so the kernel is only pointed at live memory.
pub(crate) struct RecvBatch {
    buf: Vec<u8>,
    controls: Vec<u8>,
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
    control: usize,
}

impl RecvBatch {
    /// Buffers for `batch` messages.
    pub(crate) fn new(batch: usize, message: usize, control: usize) -> RecvBatch {
        let mut b = RecvBatch {
            buf: vec![0u8; batch * message],
            controls: vec![0u8; batch * control],
            iovs: Vec::with_capacity(batch),
            hdrs: Vec::with_capacity(batch),
            control,
        };
        b.iovs = b
            .buf
            .chunks_mut(message)
            .map(|c| libc::iovec { iov_base: c.as_mut_ptr().cast(), iov_len: c.len() })
            .collect();
        let controls = b.controls.chunks_mut(control);
        b.hdrs = b
            .iovs
            .iter_mut()
            .zip(controls)
            .map(|(iov, c)| {
                // SAFETY: msghdr is plain data; zero is a valid empty header.
                let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
                h.msg_iov = iov;
                h.msg_iovlen = 1;
                h.msg_control = c.as_mut_ptr().cast();
                h.msg_controllen = control as _;
                libc::mmsghdr { msg_hdr: h, msg_len: 0 }
            })
            .collect();
        b
    }

    /// Reads what `socket` has without waiting: each message's length and its control data;
    /// empty when nothing is there (or on an error).
    pub(crate) fn receive(&mut self, socket: &UdpSocket) -> Vec<(usize, &[u8])> {
        for h in &mut self.hdrs {
            h.msg_hdr.msg_controllen = self.control as _;
        }
        // SAFETY: the headers point at this batch's `iovs`, `buf` and `controls`, alive and
        // unaliased for the call; the count is the headers' number.
        let r = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                self.hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        let control = self.control;
        self.hdrs
            .iter()
            .take(r.max(0) as usize)
            .enumerate()
            .map(|(i, h)| {
                let len = h.msg_hdr.msg_controllen.min(control);
                (h.msg_len as usize, &self.controls[i * control..i * control + len])
            })
            .collect()
    }
}
