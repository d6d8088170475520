//! Free loopback ports. Every server a test or the lab starts gets ports picked here, so none
//! ever takes a default one and servers started side by side never collide. It binds nothing
//! for longer than the question takes.

use std::io;
use std::net::{Ipv4Addr, TcpListener};

/// A TCP port free on 127.0.0.1 now (the caller's server binds it right after).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_can_be_bound_at_once() {
        let port = free_port().expect("a TCP port");
        assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok());
    }
}
