//! Sockets: creating, binding and listening, options, accepting, socket addresses in and out of
//! their C form, reads, sends and batched datagram sends, and the UDP GSO control message.
//! Which options a listener gets and when a send happens is the callers'.

use std::io::{self, IoSlice};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

use super::{cvt, cvt_size};

/// `SOL_UDP` and `UDP_SEGMENT` (linux/udp.h; not in every libc target).
pub(crate) const SOL_UDP: libc::c_int = 17;
pub(crate) const UDP_SEGMENT: libc::c_int = 103;

/// A new close-on-exec TCP socket of `domain`, not yet bound, as the listener it will become.
pub(crate) fn tcp_socket(domain: libc::c_int) -> io::Result<TcpListener> {
    // SAFETY: plain socket(2); no pointers.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is fresh and ours; TcpListener takes ownership and closes it on drop.
    Ok(unsafe { TcpListener::from_raw_fd(fd) })
}

/// A new close-on-exec TCP socket of `domain`, as a plain descriptor (a probe).
pub(crate) fn probe_socket(domain: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); no pointers.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is fresh and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `bind(2)` of socket `fd` to `addr`.
pub(crate) fn bind(fd: RawFd, addr: SocketAddr) -> io::Result<()> {
    let (storage, len) = sockaddr_of(addr);
    // SAFETY: storage is a valid sockaddr of length len.
    cvt(unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) }).map(|_| ())
}

/// `listen(2)` on socket `fd` with a queue of `backlog`.
pub(crate) fn listen(fd: RawFd, backlog: libc::c_int) -> io::Result<()> {
    // SAFETY: no pointers.
    cvt(unsafe { libc::listen(fd, backlog) }).map(|_| ())
}

/// Sets an integer socket option.
pub(crate) fn set_int_opt(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: passes a pointer to a live c_int and its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    })
    .map(|_| ())
}

/// Sets a socket option whose value is bytes (a name such as `TCP_ULP`'s).
pub(crate) fn set_bytes_opt(fd: RawFd, level: i32, name: i32, value: &[u8]) -> io::Result<()> {
    // SAFETY: passes a live buffer of the given length.
    cvt(unsafe { libc::setsockopt(fd, level, name, value.as_ptr().cast(), value.len() as libc::socklen_t) })
        .map(|_| ())
}

/// An all-zero `sockaddr_storage` (family unspecified), for the kernel to fill.
pub(crate) fn empty_sockaddr() -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage.
    unsafe { std::mem::zeroed() }
}

/// An all-zero `msghdr`: no name, no buffers, no control data.
pub(crate) fn empty_msghdr() -> libc::msghdr {
    // SAFETY: all-zero is a valid msghdr (null pointers, zero lengths).
    unsafe { std::mem::zeroed() }
}

/// `addr` as a C socket address and its length.
pub(crate) fn sockaddr_of(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    let mut storage = empty_sockaddr();
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than sockaddr_in and suitably aligned.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for sockaddr_in6.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// Decodes a socket address the kernel filled in.
pub(crate) fn socket_addr_from(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let sin: &libc::sockaddr_in = unsafe { &*(storage as *const _ as *const libc::sockaddr_in) };
            let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let sin6: &libc::sockaddr_in6 = unsafe { &*(storage as *const _ as *const libc::sockaddr_in6) };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(sin6.sin6_port))))
        }
        _ => None,
    }
}

/// `accept4(2)` with `flags` (`SOCK_CLOEXEC`, `SOCK_NONBLOCK`): the owned stream and the peer's
/// address as the kernel gave it.
pub(crate) fn accept4(
    listener: RawFd,
    flags: libc::c_int,
) -> io::Result<(TcpStream, libc::sockaddr_storage)> {
    let mut storage = empty_sockaddr();
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid pointers to storage and len.
    let fd = cvt(unsafe {
        libc::accept4(listener, (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len, flags)
    })?;
    // SAFETY: accept4 returned a fresh descriptor that we now own.
    Ok((unsafe { TcpStream::from_raw_fd(fd) }, storage))
}

/// The connection an io_uring accept completion carries: its result `fd`, a fresh descriptor
/// the kernel gave this process and nobody else owns. Only for that result.
pub(crate) fn accepted_stream(fd: RawFd) -> TcpStream {
    debug_assert!(fd >= 0);
    // SAFETY: the caller passes a successful accept completion's result, a fresh descriptor.
    unsafe { TcpStream::from_raw_fd(fd) }
}

/// The peer address of a connected socket.
pub(crate) fn peer_of(fd: RawFd) -> Option<SocketAddr> {
    let mut storage = empty_sockaddr();
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid pointers to storage and len, which outlive the call.
    let r = unsafe { libc::getpeername(fd, (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len) };
    if r < 0 {
        return None;
    }
    socket_addr_from(&storage)
}

/// `read(2)` into `buf`.
#[inline]
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: reads at most buf.len() bytes into buf.
    cvt_size(unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) })
}

/// `recv(2)` into `buf` with `flags`; the raw result (-1 with `errno` set on failure).
#[inline]
pub(crate) fn recv_raw(fd: RawFd, buf: &mut [u8], flags: libc::c_int) -> isize {
    // SAFETY: reads at most buf.len() bytes into buf.
    unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), flags) }
}

/// `send(2)` of `bytes` with `flags`.
#[inline]
pub(crate) fn send(fd: RawFd, bytes: &[u8], flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: sends bytes.len() initialised bytes from bytes.
    cvt_size(unsafe { libc::send(fd, bytes.as_ptr().cast(), bytes.len(), flags) })
}

/// `sendmsg(2)` of `slices`, gathered, with `flags`.
#[inline]
pub(crate) fn send_slices(fd: RawFd, slices: &mut [IoSlice<'_>], flags: libc::c_int) -> io::Result<usize> {
    let mut msg = empty_msghdr();
    // IoSlice is ABI-compatible with iovec on Unix, and `slices` outlives the call.
    msg.msg_iov = slices.as_mut_ptr().cast::<libc::iovec>();
    msg.msg_iovlen = slices.len();
    // SAFETY: msg describes live buffers.
    cvt_size(unsafe { libc::sendmsg(fd, &msg, flags) })
}

/// `sendmmsg(2)` of `hdrs` without blocking; how many messages went.
///
/// Every header must point at live buffers, addresses and control data for the call: the one
/// caller, the RTSP batch (`crate::rtsp::datagrams`), keeps them until it is cleared.
#[inline]
pub(crate) fn sendmmsg(fd: RawFd, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    // SAFETY: the caller's headers point at live iovecs, buffers and addresses (see above).
    let n = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), hdrs.len() as u32, libc::MSG_DONTWAIT) };
    cvt(n).map(|n| n as usize)
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

/// What a prepared header says, for tests: the bytes its iovecs name, and its first control
/// message as (level, type, u16 value).
#[cfg(test)]
pub(crate) mod inspect {
    /// The bytes `hdr`'s iovecs name, in order.
    pub(crate) fn payload(hdr: &libc::msghdr) -> Vec<u8> {
        // SAFETY: a prepared header's iovecs point at live slices of their lengths.
        let iovs = unsafe { std::slice::from_raw_parts(hdr.msg_iov, hdr.msg_iovlen) };
        iovs.iter()
            // SAFETY: as above, each iovec is a live slice of its length.
            .flat_map(|v| unsafe { std::slice::from_raw_parts(v.iov_base.cast::<u8>(), v.iov_len) })
            .copied()
            .collect()
    }

    /// The first control message of `hdr`: level, type and its data read as a u16.
    pub(crate) fn first_control(hdr: &libc::msghdr) -> (libc::c_int, libc::c_int, u16) {
        // SAFETY: the header's control buffer is live and holds one cmsghdr.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(hdr);
            (
                (*cmsg).cmsg_level,
                (*cmsg).cmsg_type,
                std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<u16>()),
            )
        }
    }
}
