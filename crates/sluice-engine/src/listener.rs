//! Listening sockets: one per worker with `SO_REUSEPORT`, so the kernel spreads connections over
//! event loops without a shared accept queue. `SO_REUSEPORT` is shared among this process's own
//! workers only: a first bind without it fails when any other socket listens on the address, so a
//! second server on a held port is an error rather than a silent split of its connections.
//!
//! Owns binding and socket options. It does not accept (each engine does, its own way).

use std::net::{SocketAddr, TcpListener};
use std::os::fd::AsRawFd;

use crate::counters::{Event, Shard, Syscall};
use crate::error::EngineError;
use crate::sys::socket;
pub(crate) use crate::sys::socket::{set_int_opt, socket_addr_from};

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
    let listener = socket::tcp_socket(domain)?;
    let fd = listener.as_raw_fd();
    set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)?;
    if shared {
        set_int_opt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    }
    if addr.is_ipv6() {
        set_int_opt(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
    }
    socket::bind(fd, addr)?;
    if !shared {
        return Ok(listener);
    }
    // A deep backlog keeps bursts of connects (the lab's 4000-connection rows) from being refused
    // while the loops are busy; the kernel caps it at somaxconn.
    socket::listen(fd, 4096)?;
    Ok(listener)
}

/// Accepts one connection with `accept4`, returning the owned stream and the peer.
pub(crate) fn accept(
    listener_fd: i32,
    nonblocking: bool,
    counters: &Shard,
) -> std::io::Result<(std::net::TcpStream, SocketAddr)> {
    counters.syscall(Syscall::Accept);
    let flags = libc::SOCK_CLOEXEC | if nonblocking { libc::SOCK_NONBLOCK } else { 0 };
    let (stream, storage) = socket::accept4(listener_fd, flags)?;
    // Responses are written whole (head and body in as few calls as possible); Nagle would only
    // delay the last segment of each.
    counters.syscall(Syscall::Setsockopt);
    set_int_opt(stream.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)?;
    counters.add(Event::ConnectionsAccepted, 1);
    let peer = socket_addr_from(&storage).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
    Ok((stream, peer))
}
