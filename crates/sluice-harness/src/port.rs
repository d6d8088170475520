//! Free loopback ports. Every server a test or the lab starts gets ports picked here, so none
//! ever takes a default one and servers started side by side never collide. It binds nothing
//! for longer than the question takes.

use std::io;
use std::net::{Ipv4Addr, TcpListener};

/// A TCP port free on 127.0.0.1 now (the caller's server binds it right after).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// `N` distinct free TCP ports on 127.0.0.1, for one server's listeners. Each is held until all
/// are chosen: ports asked for one at a time can come back the same (the kernel may hand a
/// just-released port out again), and a server given one port twice refuses to start.
pub fn free_ports<const N: usize>() -> io::Result<[u16; N]> {
    let listeners =
        (0..N).map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0))).collect::<io::Result<Vec<_>>>()?;
    let mut ports = [0; N];
    for (port, listener) in ports.iter_mut().zip(&listeners) {
        *port = listener.local_addr()?.port();
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct() {
        let [a, b, c] = free_ports::<3>().expect("three TCP ports");
        assert!(a != b && b != c && a != c, "{a} {b} {c}");
    }

    #[test]
    fn a_free_port_can_be_bound_at_once() {
        let port = free_port().expect("a TCP port");
        assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok());
    }
}
