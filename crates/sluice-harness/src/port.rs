//! Free loopback ports. Every server a test or the lab starts gets ports picked here, so none
//! ever takes a default one and servers started side by side never collide. It binds nothing
//! for longer than the question takes.

use std::io;
use std::net::{Ipv4Addr, TcpListener, UdpSocket};

/// A TCP port free on 127.0.0.1 now (the caller's server binds it right after).
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// A UDP port free on 127.0.0.1 now.
pub fn free_udp_port() -> io::Result<u16> {
    Ok(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_can_be_bound() {
        let tcp = free_port().expect("a TCP port");
        assert!(TcpListener::bind((Ipv4Addr::LOCALHOST, tcp)).is_ok());
        let udp = free_udp_port().expect("a UDP port");
        assert!(UdpSocket::bind((Ipv4Addr::LOCALHOST, udp)).is_ok());
    }
}
