//! Which RTSP loop a control connection belongs to, and handing it there when another loop
//! accepted it.
//!
//! Every loop accepts on the one RTSP listener; a connection belongs to the loop its client's IP
//! address hashes to ([`owner`]), so all the connections of one client (ffmpeg and VLC send
//! `TEARDOWN` on a second one) meet its sessions in one table, and its RTCP, sent to the UDP
//! ports that loop's `SETUP` reply named, reaches the same loop. A connection accepted by
//! another loop is put in the owner's [`Handoff`] inbox and the owner is woken through an eventfd
//! that its epoll set or io_uring ring watches. Owns the hash and who holds which inbox; not the accept
//! itself or what a loop does with a connection (the loops').

use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::mailbox::Mailbox;

/// The loop (of `loops`) that serves clients at `ip`: a multiplicative hash of the address, so
/// neighbouring addresses spread.
pub(crate) fn owner(ip: IpAddr, loops: usize) -> usize {
    let bits = match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        // An IPv4-mapped IPv6 address is the same client as its IPv4 form.
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or_else(|| u128::from(v6), |v4| u128::from(u32::from(v4))),
    };
    let folded = (bits as u64) ^ ((bits >> 64) as u64);
    let mixed = folded.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((mixed >> 32) % loops.max(1) as u64) as usize
}

/// A control connection accepted by one loop for another.
pub(crate) type Arrival = (TcpStream, SocketAddr);

/// One loop's end of the hand-over: its index among the loops, and every loop's inbox (the
/// engine's [`Mailbox`], as the CPU pool's results come back).
pub(crate) struct Handoff {
    inboxes: Arc<[Mailbox<Arrival>]>,
    me: usize,
}

impl Handoff {
    /// One end per loop, `loops` in all.
    pub(crate) fn set(loops: usize) -> io::Result<Vec<Handoff>> {
        let inboxes = (0..loops.max(1)).map(|_| Mailbox::new()).collect::<io::Result<Arc<[_]>>>()?;
        Ok((0..inboxes.len()).map(|me| Handoff { inboxes: Arc::clone(&inboxes), me }).collect())
    }

    /// This loop's index.
    pub(crate) fn index(&self) -> usize {
        self.me
    }

    /// A connection this loop accepted from `peer`: returned when it is this loop's, else handed
    /// to its owner (woken) and `None`.
    pub(crate) fn route(&self, stream: TcpStream, peer: SocketAddr) -> Option<Arrival> {
        let to = owner(peer.ip(), self.inboxes.len());
        if to == self.me {
            return Some((stream, peer));
        }
        self.inboxes[to].deliver((stream, peer));
        None
    }

    /// The eventfd that is readable while other loops have handed this one connections.
    pub(crate) fn wake_fd(&self) -> RawFd {
        self.inboxes[self.me].fd()
    }

    /// Clears the wake-up and moves what was handed over into `into`.
    pub(crate) fn take(&self, into: &mut Vec<Arrival>) {
        self.inboxes[self.me].collect(into);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn neighbouring_addresses_spread_and_one_client_stays_on_one_loop() {
        let at = |last: u8| IpAddr::from([127, 0, 0, last]);
        let loops: Vec<usize> = (2..=9).map(|n| owner(at(n), 2)).collect();
        assert!(loops.contains(&0) && loops.contains(&1), "{loops:?}");
        assert_eq!(owner(at(5), 2), owner(at(5), 2));
        let mapped: IpAddr = "::ffff:127.0.0.5".parse().unwrap();
        assert_eq!(owner(mapped, 2), owner(at(5), 2));
        assert_eq!(owner(at(5), 1), 0);
        let four: std::collections::HashSet<usize> = (1..=40).map(|n| owner(at(n), 4)).collect();
        assert_eq!(four.len(), 4);
    }

    #[test]
    fn a_connection_for_another_loop_reaches_its_inbox_and_wakes_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, peer) = listener.accept().unwrap();
        let ends = Handoff::set(2).unwrap();
        let (mine, other) =
            if owner(peer.ip(), 2) == 0 { (&ends[0], &ends[1]) } else { (&ends[1], &ends[0]) };
        let kept = other.route(stream.try_clone().unwrap(), peer);
        assert!(kept.is_none(), "handed over");
        let mut fds = [libc::pollfd { fd: mine.wake_fd(), events: libc::POLLIN, revents: 0 }];
        assert_eq!(crate::sys::fd::poll(&mut fds, 0), 1, "the owner is woken");
        let mut arrivals = Vec::new();
        mine.take(&mut arrivals);
        assert_eq!(arrivals.len(), 1);
        assert_eq!(arrivals[0].1, peer);
        assert_eq!(crate::sys::fd::poll(&mut fds, 0), 0, "the wake-up is cleared");
        assert!(mine.route(stream, peer).is_some(), "its own connection stays");
    }
}
