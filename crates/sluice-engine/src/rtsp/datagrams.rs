//! A batch of RTP and RTCP datagrams to many viewers, laid out once as `mmsghdr`s so one
//! `sendmmsg` per port (epoll) or one `sendmsg` submission each (io_uring) sends it.
//!
//! Owns the bytes, the destination addresses and the message headers pointing at them, and keeps
//! them at stable addresses from [`Datagrams::prepare`] until [`Datagrams::clear`]: io_uring
//! reads them after submission. It does not decide what goes in a batch (the core does) or make the
//! call (the loops do).

use std::net::SocketAddr;

/// Which of the server's two UDP sockets a datagram leaves from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Port {
    /// The RTP port (media).
    Rtp = 0,
    /// The RTCP port (sender reports).
    Rtcp = 1,
}

/// Datagrams a batch holds at most: `sendmmsg` takes up to `UIO_MAXIOV` (1024) a call. 256
/// datagrams of 1.4 KB is about 360 KB a batch, a turn's worth for 300 viewers at 23 Mbps.
pub(crate) const MAX_DATAGRAMS: usize = 256;
/// Bytes a batch holds at most (reserved once, so the data never moves while prepared).
const MAX_BYTES: usize = MAX_DATAGRAMS * 1500;

struct Item {
    port: Port,
    start: usize,
    len: usize,
    dest: SocketAddr,
}

/// One batch; see the module docs.
pub(crate) struct Datagrams {
    data: Vec<u8>,
    items: Vec<Item>,
    /// Per port: headers, their iovecs and addresses, and how many have been sent.
    hdrs: [Vec<libc::mmsghdr>; 2],
    iovs: [Vec<libc::iovec>; 2],
    addrs: [Vec<libc::sockaddr_storage>; 2],
    sent: [usize; 2],
    prepared: bool,
}

impl Datagrams {
    pub(crate) fn new() -> Datagrams {
        Datagrams {
            data: Vec::with_capacity(MAX_BYTES),
            items: Vec::with_capacity(MAX_DATAGRAMS),
            hdrs: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            iovs: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            addrs: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            sent: [0, 0],
            prepared: false,
        }
    }

    /// Whether `len` more bytes fit.
    pub(crate) fn fits(&self, len: usize) -> bool {
        !self.prepared && self.items.len() < MAX_DATAGRAMS && self.data.len() + len <= MAX_BYTES
    }

    /// Whether nothing is in the batch.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds a datagram; the caller checked [`Datagrams::fits`] (an oversized one is refused).
    pub(crate) fn push(&mut self, port: Port, dest: SocketAddr, bytes: &[u8]) -> bool {
        if !self.fits(bytes.len()) {
            return false;
        }
        let start = self.data.len();
        self.data.extend_from_slice(bytes);
        self.items.push(Item { port, start, len: bytes.len(), dest });
        true
    }

    /// Lays out the headers. No push until [`Datagrams::clear`]: the headers point into the data.
    pub(crate) fn prepare(&mut self) {
        if self.prepared {
            return;
        }
        self.prepared = true;
        for p in 0..2 {
            self.hdrs[p].clear();
            self.iovs[p].clear();
            self.addrs[p].clear();
            self.sent[p] = 0;
        }
        for item in &self.items {
            let p = item.port as usize;
            // SAFETY: the pointer is into `data`, which has its full capacity reserved and is
            // not pushed to while prepared, so it stays valid and unmoved.
            let base = unsafe { self.data.as_mut_ptr().add(item.start) };
            self.iovs[p].push(libc::iovec { iov_base: base.cast(), iov_len: item.len });
            self.addrs[p].push(sockaddr(item.dest));
        }
        for p in 0..2 {
            for i in 0..self.iovs[p].len() {
                // SAFETY: msghdr is plain data; zero is a valid "no control data" header.
                let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
                hdr.msg_name = (&mut self.addrs[p][i] as *mut libc::sockaddr_storage).cast();
                hdr.msg_namelen = sockaddr_len(&self.addrs[p][i]);
                hdr.msg_iov = &mut self.iovs[p][i];
                hdr.msg_iovlen = 1;
                self.hdrs[p].push(libc::mmsghdr { msg_hdr: hdr, msg_len: 0 });
            }
        }
    }

    /// The prepared messages of `port` not yet sent.
    pub(crate) fn unsent(&mut self, port: Port) -> &mut [libc::mmsghdr] {
        let p = port as usize;
        let from = self.sent[p];
        &mut self.hdrs[p][from..]
    }

    /// The header of prepared message `i` of `port`, for an io_uring `sendmsg`.
    pub(crate) fn header(&self, port: Port, i: usize) -> *const libc::msghdr {
        &self.hdrs[port as usize][i].msg_hdr
    }

    /// Prepared messages of `port`.
    pub(crate) fn count(&self, port: Port) -> usize {
        self.hdrs[port as usize].len()
    }

    /// Bytes of prepared message `i` of `port`.
    pub(crate) fn len_of(&self, port: Port, i: usize) -> usize {
        self.iovs[port as usize][i].iov_len
    }

    /// Marks `n` more messages of `port` as sent (or given up on); returns their bytes.
    pub(crate) fn advance(&mut self, port: Port, n: usize) -> usize {
        let p = port as usize;
        let from = self.sent[p];
        let to = (from + n).min(self.hdrs[p].len());
        self.sent[p] = to;
        self.iovs[p][from..to].iter().map(|v| v.iov_len).sum()
    }

    /// Empties the batch for the next turn.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.items.clear();
        for p in 0..2 {
            self.hdrs[p].clear();
            self.iovs[p].clear();
            self.addrs[p].clear();
            self.sent[p] = 0;
        }
        self.prepared = false;
    }
}

/// `addr` as a `sockaddr_storage`.
pub(crate) fn sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain data; all zero is valid.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage, which is aligned for it.
            unsafe { std::ptr::write((&mut storage as *mut libc::sockaddr_storage).cast(), sin) };
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
        }
    }
    storage
}

/// The length of the address in `storage`.
pub(crate) fn sockaddr_len(storage: &libc::sockaddr_storage) -> libc::socklen_t {
    if storage.ss_family == libc::AF_INET6 as libc::sa_family_t {
        std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
    } else {
        std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lays_out_messages_per_port_and_counts_bytes() {
        let mut d = Datagrams::new();
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let b: SocketAddr = "[::1]:5002".parse().unwrap();
        assert!(d.push(Port::Rtp, a, &[1; 100]));
        assert!(d.push(Port::Rtcp, a, &[2; 40]));
        assert!(d.push(Port::Rtp, b, &[3; 1400]));
        d.prepare();
        assert!(!d.fits(1), "no push while prepared");
        assert_eq!((d.count(Port::Rtp), d.count(Port::Rtcp)), (2, 1));
        assert_eq!(d.len_of(Port::Rtp, 1), 1400);
        let hdr = d.unsent(Port::Rtp)[1].msg_hdr;
        assert_eq!(hdr.msg_namelen as usize, std::mem::size_of::<libc::sockaddr_in6>());
        // SAFETY: the header points at the batch's live iovec.
        assert_eq!(unsafe { *(*hdr.msg_iov).iov_base.cast::<u8>() }, 3);
        assert_eq!(d.advance(Port::Rtp, 1), 100);
        assert_eq!(d.advance(Port::Rtp, 5), 1400, "clamped to what is there");
        assert_eq!(d.advance(Port::Rtcp, 1), 40);
        d.clear();
        assert!(d.is_empty() && d.fits(1500));
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let mut d = Datagrams::new();
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        for _ in 0..MAX_DATAGRAMS {
            assert!(d.push(Port::Rtp, a, &[0; 10]));
        }
        assert!(!d.push(Port::Rtp, a, &[0; 10]));
    }
}
