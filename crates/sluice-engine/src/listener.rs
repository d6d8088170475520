//! Listening sockets: one per worker with `SO_REUSEPORT`, so the kernel spreads connections over
//! event loops without a shared accept queue. `SO_REUSEPORT` is shared among this process's own
//! workers only: a first bind without it fails when any other socket listens on the address, so a
//! second server on a held port is an error rather than a silent split of its connections.
//!
//! Owns binding and socket options. It does not accept (each engine does, its own way).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::FromRawFd;

use crate::counters::{Event, Shard, Syscall};
use crate::{cvt, EngineError};

/// Bound listening sockets for one address, one per worker.
#[derive(Debug)]
pub struct Listeners {
    sockets: Vec<TcpListener>,
    local: SocketAddr,
}

impl Listeners {
    /// Binds `count` sockets to `addr` with `SO_REUSEPORT`. Port 0 picks a free port once; the
    /// others join it.
    pub fn bind(addr: SocketAddr, count: usize) -> Result<Self, EngineError> {
        if addr.port() != 0 {
            // The probe is closed before the group binds: the window is two system calls long.
            drop(bind_one(addr, false).map_err(|source| EngineError::Listen { addr, source })?);
        }
        let first = bind_one(addr, true).map_err(|source| EngineError::Listen { addr, source })?;
        let local = first.local_addr().map_err(|source| EngineError::Listen { addr, source })?;
        let mut sockets = vec![first];
        for _ in 1..count.max(1) {
            sockets.push(bind_one(local, true).map_err(|source| EngineError::Listen { addr, source })?);
        }
        Ok(Listeners { sockets, local })
    }

    /// The address actually bound (with the port the kernel chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Caps the kernel's send buffer of every connection these sockets accept (they inherit it)
    /// at `bytes`, turning off its growth: a client that stops reading then stalls its
    /// connection after that much, and the send deadline drops it, instead of the kernel taking
    /// megabytes on its behalf first.
    pub fn cap_send_buffer(&self, bytes: i32) -> Result<(), EngineError> {
        use std::os::fd::AsRawFd;
        for socket in &self.sockets {
            set_int_opt(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, bytes)
                .map_err(|source| EngineError::Listen { addr: self.local, source })?;
        }
        Ok(())
    }

    pub(crate) fn into_sockets(self) -> Vec<TcpListener> {
        self.sockets
    }
}

/// Binds a socket to `addr`; with `shared`, one of a `SO_REUSEPORT` group and listening, else an
/// exclusive probe that is bound but does not listen.
fn bind_one(addr: SocketAddr, shared: bool) -> std::io::Result<TcpListener> {
    let domain = if addr.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    // SAFETY: plain socket(2); the descriptor is owned by the TcpListener below or closed on error.
    let fd = cvt(unsafe { libc::socket(domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fd is fresh and ours; TcpListener takes ownership and closes it on drop.
    let listener = unsafe { TcpListener::from_raw_fd(fd) };
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if shared {
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    if addr.is_ipv6() {
        set_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    let (storage, len) = sockaddr_of(addr);
    // SAFETY: storage is a valid sockaddr of length len.
    cvt(unsafe { libc::bind(fd, (&storage as *const libc::sockaddr_storage).cast(), len) })?;
    if !shared {
        return Ok(listener);
    }
    // A deep backlog keeps bursts of connects (the lab's 4000-connection rows) from being refused
    // while the loops are busy; the kernel caps it at somaxconn.
    // SAFETY: listen on our socket.
    cvt(unsafe { libc::listen(fd, 4096) })?;
    Ok(listener)
}

pub(crate) fn set_int_opt(fd: i32, level: i32, name: i32, value: i32) -> std::io::Result<()> {
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

/// `addr` as a `sockaddr_storage` and the length of the address in it.
pub(crate) fn sockaddr_of(addr: SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
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

/// Decodes the peer address `accept4` filled in.
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

/// Accepts one connection with `accept4`, returning the owned stream and the peer.
pub(crate) fn accept(
    listener_fd: i32,
    nonblocking: bool,
    counters: &Shard,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    counters.syscall(Syscall::Accept);
    // SAFETY: zeroed storage is valid; accept4 writes at most `len` bytes into it.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: valid pointers to storage and len.
    let fd = cvt(unsafe {
        libc::accept4(listener_fd, (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len, flags)
    })?;
    // SAFETY: accept4 returned a fresh descriptor that we now own.
    let stream = unsafe { std::net::TcpStream::from_raw_fd(fd) };
    // Responses are written whole (head and body in as few calls as possible); Nagle would only
    // delay the last segment of each.
    counters.syscall(Syscall::Setsockopt);
    set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    counters.add(Event::ConnectionsAccepted, 1);
    let peer = socket_addr_from(&storage).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    Ok((stream, peer))
}
