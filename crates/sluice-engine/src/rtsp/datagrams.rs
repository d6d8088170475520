//! A batch of RTP and RTCP datagrams to many viewers, laid out once as `mmsghdr`s so one
//! `sendmmsg` per port (epoll) or one `sendmsg` submission each (io_uring) sends it.
//!
//! With UDP GSO (Linux 4.18+, probed by the loop), consecutive datagrams to one viewer that are
//! all one size but the last (the FU-A fragments of a frame) become one message with a
//! `UDP_SEGMENT` control message: the kernel walks its send path once for up to 64 of them and
//! splits them late.
//!
//! A datagram is its own few bytes (the RTP header and the FU-A or AU headers, copied here) and
//! a [`BodyRef`]: a range of the one shared sample every viewer's packets refer to, held (not
//! copied) by the batch, once for each run of datagrams from the same sample. Each message's
//! `iovec`s alternate the two, so the kernel's copy into the socket buffer is the only copy of
//! the media: before, the packetizer copied each sample into each viewer's packets and this batch
//! copied them again (`__memmove` was 15.6% of the server's profile at 250 viewers).
//!
//! Owns the header bytes, the holds on the samples, the destination addresses and the message
//! headers pointing at them, and keeps them at stable addresses from [`Datagrams::prepare`]
//! until [`Datagrams::clear`]: io_uring reads them after submission. It does not decide what
//! goes in a batch (the RTSP core does, through [`DatagramSink`]) or make the call (the loops do).

use std::net::SocketAddr;

use std::sync::Arc;

use sluice_proto::rtp::BodyRef;
use sluice_proto::rtsp::{DatagramSink, Port};

use crate::sys::socket::{empty_msghdr, sockaddr_of};
pub(crate) use crate::udp_gso::supported as gso_supported;
use crate::udp_gso::SegmentControl;

/// Datagrams a batch holds at most: `sendmmsg` takes up to `UIO_MAXIOV` (1024) messages a
/// call, and a batch never has more messages than datagrams. 1024 datagrams of 1.4 KB is about
/// 1.4 MB, a few milliseconds of 400 viewers at 23 Mbps: one `sendmmsg` (or one
/// `io_uring_enter`) a turn rather than four.
pub(crate) const MAX_DATAGRAMS: usize = 1024;
/// Bytes a batch carries at most (most of them referred to in shared samples, not held here).
const MAX_BYTES: usize = MAX_DATAGRAMS * 1500;
/// Most segments in one GSO message and its largest payload.
const GSO_MAX_SEGMENTS: usize = crate::udp_gso::MAX_SEGMENTS;
const GSO_MAX_BYTES: usize = 60_000;

/// One datagram of the batch, in 28 bytes (it was 88, with its own copy of the address, and
/// the batch's records of 1,024 datagrams no longer fit the cache beside the viewers' queues).
struct Item {
    port: Port,
    /// The datagram's own bytes in `data` (its headers, or all of it).
    start: u32,
    head: u32,
    /// The rest: which of `held` it lies in, where it starts there and how long it is (0: none).
    body_sample: u32,
    body_start: u32,
    body_len: u32,
    /// Its destination in `dests`.
    dest: u32,
}

impl Item {
    fn len(&self) -> usize {
        (self.head + self.body_len) as usize
    }
}

/// One batch; see the module docs.
pub(crate) struct Datagrams {
    /// The datagrams' own bytes (RTP, FU-A and AU headers; whole RTCP packets).
    data: Vec<u8>,
    items: Vec<Item>,
    /// The shared samples the items' bodies lie in, held until the batch is cleared: one hold
    /// for each run of items from the same sample (a viewer's frame, or the same frame to
    /// viewers side by side), not one per datagram.
    held: Vec<Arc<Vec<u8>>>,
    /// The items' destinations, one entry for each run of items to the same viewer port.
    dests: Vec<SocketAddr>,
    /// Bytes of the items, bodies included.
    bytes: usize,
    /// Per port: headers, their iovecs (a message's are consecutive) and addresses, and how
    /// many have been sent.
    hdrs: [Vec<libc::mmsghdr>; 2],
    iovs: [Vec<libc::iovec>; 2],
    addrs: [Vec<(libc::sockaddr_storage, libc::socklen_t)>; 2],
    controls: [Vec<SegmentControl>; 2],
    /// Per message: its datagrams, its bytes, and where its iovecs start and how many.
    segments: [Vec<usize>; 2],
    lengths: [Vec<usize>; 2],
    iov_spans: [Vec<(usize, usize)>; 2],
    sent: [usize; 2],
    prepared: bool,
    gso: bool,
}

impl Datagrams {
    /// An empty batch; `gso` groups datagrams into `UDP_SEGMENT` messages.
    pub(crate) fn new(gso: bool) -> Datagrams {
        Datagrams {
            data: Vec::with_capacity(MAX_BYTES),
            items: Vec::with_capacity(MAX_DATAGRAMS),
            held: Vec::new(),
            dests: Vec::with_capacity(MAX_DATAGRAMS),
            bytes: 0,
            hdrs: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            // Two iovecs a datagram at most: reserved once, so they never move while prepared.
            iovs: [Vec::with_capacity(2 * MAX_DATAGRAMS), Vec::with_capacity(2 * MAX_DATAGRAMS)],
            addrs: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            controls: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            segments: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            lengths: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            iov_spans: [Vec::with_capacity(MAX_DATAGRAMS), Vec::with_capacity(MAX_DATAGRAMS)],
            sent: [0, 0],
            prepared: false,
            gso,
        }
    }

    /// Whether `len` more bytes fit.
    pub(crate) fn fits(&self, len: usize) -> bool {
        !self.prepared && self.items.len() < MAX_DATAGRAMS && self.bytes + len <= MAX_BYTES
    }

    /// Whether nothing is in the batch.
    pub(crate) fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Adds a datagram of `head` then `body`; the caller checked [`Datagrams::fits`] (an
    /// oversized one is refused). `head` is copied (a few header bytes, or a small RTCP packet);
    /// `body` is held, not copied: the message's `iovec` points into the shared sample.
    pub(crate) fn push(
        &mut self,
        port: Port,
        dest: SocketAddr,
        head: &[u8],
        body: Option<BodyRef<'_>>,
    ) -> bool {
        let len = head.len() + body.map_or(0, |b| b.len());
        if !self.fits(len) {
            return false;
        }
        // The batch's own offsets are within MAX_BYTES and its counts within MAX_DATAGRAMS; a
        // body's range lies in an MP4 sample, whose size is 32-bit.
        let narrow = |n: usize| u32::try_from(n).expect("batch offsets and sample ranges fit 32 bits");
        let start = narrow(self.data.len());
        self.data.extend_from_slice(head);
        self.bytes += len;
        let (body_sample, body_start, body_len) = match body {
            Some(b) => {
                if !self.held.last().is_some_and(|h| Arc::ptr_eq(h, b.sample())) {
                    self.held.push(Arc::clone(b.sample()));
                }
                (narrow(self.held.len() - 1), narrow(b.start()), narrow(b.len()))
            }
            None => (0, 0, 0),
        };
        if self.dests.last() != Some(&dest) {
            self.dests.push(dest);
        }
        let dest = narrow(self.dests.len() - 1);
        self.items.push(Item {
            port,
            start,
            head: narrow(head.len()),
            body_sample,
            body_start,
            body_len,
            dest,
        });
        true
    }

    /// Lays out the headers. No push until [`Datagrams::clear`]: the headers point into the data
    /// and into the held samples.
    pub(crate) fn prepare(&mut self) {
        if self.prepared {
            return;
        }
        self.forget_messages();
        self.prepared = true;
        let mut i = 0;
        while i < self.items.len() {
            let first = &self.items[i];
            let size = first.len();
            let (mut len, mut count) = (size, 1);
            while let Some(next) = self.items.get(i + count).filter(|_| self.gso) {
                let joins = next.port == first.port
                    && next.dest == first.dest
                    && next.len() <= size
                    && count < GSO_MAX_SEGMENTS
                    && len + next.len() <= GSO_MAX_BYTES;
                if !joins {
                    break;
                }
                len += next.len();
                count += 1;
                // Only the last segment may be short.
                if next.len() < size {
                    break;
                }
            }
            let p = first.port as usize;
            let from = self.iovs[p].len();
            for item in &self.items[i..i + count] {
                // The pointer is into `data`, which has its full capacity reserved and is not
                // pushed to while prepared, so it stays valid and unmoved.
                let head = self.data.as_mut_ptr().wrapping_add(item.start as usize);
                if item.head > 0 {
                    self.iovs[p].push(libc::iovec { iov_base: head.cast(), iov_len: item.head as usize });
                }
                if item.body_len > 0 {
                    // The kernel only reads it; the batch holds the sample until `clear`.
                    let (start, len) = (item.body_start as usize, item.body_len as usize);
                    let bytes = &self.held[item.body_sample as usize][start..start + len];
                    self.iovs[p]
                        .push(libc::iovec { iov_base: bytes.as_ptr() as *mut _, iov_len: bytes.len() });
                }
            }
            self.iov_spans[p].push((from, self.iovs[p].len() - from));
            self.addrs[p].push(sockaddr_of(self.dests[first.dest as usize]));
            self.controls[p].push(SegmentControl::new(if count > 1 { Some(size as u16) } else { None }));
            self.segments[p].push(count);
            self.lengths[p].push(len);
            i += count;
        }
        for p in 0..2 {
            for m in 0..self.iov_spans[p].len() {
                let mut hdr = empty_msghdr();
                let (addr, len) = &mut self.addrs[p][m];
                hdr.msg_name = (addr as *mut libc::sockaddr_storage).cast();
                hdr.msg_namelen = *len;
                let (from, n) = self.iov_spans[p][m];
                // `from..from + n` is in bounds of the reserved, no longer growing iovecs.
                hdr.msg_iov = self.iovs[p].as_mut_ptr().wrapping_add(from);
                hdr.msg_iovlen = n as _;
                if self.segments[p][m] > 1 {
                    self.controls[p][m].attach(&mut hdr);
                }
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

    /// Datagrams and bytes of prepared message `i` of `port`.
    pub(crate) fn size_of(&self, port: Port, i: usize) -> (usize, usize) {
        (self.segments[port as usize][i], self.lengths[port as usize][i])
    }

    /// Marks `n` more messages of `port` as sent (or given up on); returns their datagrams and
    /// bytes.
    pub(crate) fn advance(&mut self, port: Port, n: usize) -> (usize, usize) {
        let p = port as usize;
        let from = self.sent[p];
        let to = (from + n).min(self.hdrs[p].len());
        self.sent[p] = to;
        (self.segments[p][from..to].iter().sum(), self.lengths[p][from..to].iter().sum())
    }

    /// Empties the batch for the next turn, letting go of the samples it held.
    pub(crate) fn clear(&mut self) {
        self.data.clear();
        self.items.clear();
        self.held.clear();
        self.dests.clear();
        self.bytes = 0;
        self.forget_messages();
    }

    fn forget_messages(&mut self) {
        for p in 0..2 {
            self.hdrs[p].clear();
            self.iovs[p].clear();
            self.addrs[p].clear();
            self.controls[p].clear();
            self.segments[p].clear();
            self.lengths[p].clear();
            self.iov_spans[p].clear();
            self.sent[p] = 0;
        }
        self.prepared = false;
    }
}

impl DatagramSink for Datagrams {
    fn fits(&self, len: usize) -> bool {
        Datagrams::fits(self, len)
    }

    fn push(&mut self, port: Port, dest: SocketAddr, head: &[u8], body: Option<BodyRef<'_>>) {
        Datagrams::push(self, port, dest, head, body);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lays_out_messages_per_port_and_counts_bytes() {
        let mut d = Datagrams::new(false);
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let b: SocketAddr = "[::1]:5002".parse().unwrap();
        assert!(d.push(Port::Rtp, a, &[1; 100], None));
        assert!(d.push(Port::Rtcp, a, &[2; 40], None));
        assert!(d.push(Port::Rtp, b, &[3; 1400], None));
        d.prepare();
        assert!(!d.fits(1), "no push while prepared");
        assert_eq!((d.count(Port::Rtp), d.count(Port::Rtcp)), (2, 1));
        assert_eq!(d.size_of(Port::Rtp, 1), (1, 1400));
        let hdr = d.unsent(Port::Rtp)[1].msg_hdr;
        assert_eq!(hdr.msg_namelen as usize, std::mem::size_of::<libc::sockaddr_in6>());
        assert_eq!(crate::sys::socket::inspect::payload(&hdr).first(), Some(&3));
        assert_eq!(d.advance(Port::Rtp, 1), (1, 100));
        assert_eq!(d.advance(Port::Rtp, 5), (1, 1400), "clamped to what is there");
        assert_eq!(d.advance(Port::Rtcp, 1), (1, 40));
        d.clear();
        assert!(d.is_empty() && d.fits(1500));
    }

    #[test]
    fn groups_a_viewers_equal_datagrams_for_gso() {
        let mut d = Datagrams::new(true);
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:6000".parse().unwrap();
        for _ in 0..3 {
            d.push(Port::Rtp, a, &[1; 1400], None);
        }
        d.push(Port::Rtp, a, &[2; 700], None); // the short last fragment ends the group
        d.push(Port::Rtp, a, &[3; 1400], None); // a new frame: a new message
        d.push(Port::Rtcp, a, &[4; 40], None);
        d.push(Port::Rtp, b, &[5; 1400], None);
        d.prepare();
        assert_eq!(d.count(Port::Rtp), 3);
        assert_eq!(d.size_of(Port::Rtp, 0), (4, 3 * 1400 + 700));
        assert_eq!(d.size_of(Port::Rtp, 1), (1, 1400));
        assert_eq!(d.size_of(Port::Rtp, 2), (1, 1400));
        let hdr = d.unsent(Port::Rtp)[0].msg_hdr;
        assert!(hdr.msg_controllen > 0);
        let (level, kind, size) = crate::sys::socket::inspect::first_control(&hdr);
        assert_eq!((level, kind, size), (crate::udp_gso::SOL_UDP, crate::udp_gso::UDP_SEGMENT, 1400));
        assert_eq!(d.unsent(Port::Rtp)[1].msg_hdr.msg_controllen, 0, "a single datagram has no cmsg");
        assert_eq!(d.advance(Port::Rtp, 3), (6, 3 * 1400 + 700 + 2 * 1400));
    }

    /// The bytes of prepared message `i` of `port`, gathered from its iovecs.
    fn message_bytes(d: &mut Datagrams, port: Port, i: usize) -> Vec<u8> {
        // A prepared header's iovecs point into the batch's data and held samples, alive and
        // unmoved until `clear`.
        crate::sys::socket::inspect::payload(&d.unsent(port)[i].msg_hdr)
    }

    #[test]
    fn holds_a_sample_once_per_run_and_groups_only_neighbours_to_one_destination() {
        use sluice_proto::rtp::Body;
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:6000".parse().unwrap();
        let (first, second) = (Arc::new(vec![1u8; 4000]), Arc::new(vec![2u8; 4000]));
        let body = |s: &Arc<Vec<u8>>, at| Body::new(Arc::clone(s), at, 1388).unwrap();
        // To A from the first sample, to B from the second, to A from the first again.
        let sends = [(a, &first, 0), (a, &first, 1388), (b, &second, 0), (a, &first, 0), (a, &first, 1388)];
        let mut d = Datagrams::new(true);
        for (dest, sample, at) in sends {
            assert!(d.push(Port::Rtp, dest, &[9; 12], Some(body(sample, at).view())));
        }
        assert_eq!((Arc::strong_count(&first), Arc::strong_count(&second)), (3, 2), "a hold per run");
        d.prepare();
        assert_eq!(d.count(Port::Rtp), 3, "A twice, B, A twice: neighbours to one place group");
        assert_eq!((d.size_of(Port::Rtp, 0), d.size_of(Port::Rtp, 2)), ((2, 2800), (2, 2800)));
        let datagram = |fill: u8| [vec![9; 12], vec![fill; 1388]].concat();
        assert_eq!(message_bytes(&mut d, Port::Rtp, 0), [datagram(1), datagram(1)].concat());
        assert_eq!(message_bytes(&mut d, Port::Rtp, 1), datagram(2));
        assert_eq!(message_bytes(&mut d, Port::Rtp, 2), [datagram(1), datagram(1)].concat());
        d.clear();
        assert_eq!((Arc::strong_count(&first), Arc::strong_count(&second)), (1, 1), "let go at clear");
        // An RTCP datagram between two of A's RTP datagrams keeps them apart.
        d.push(Port::Rtp, a, &[1; 1400], None);
        d.push(Port::Rtcp, a, &[2; 40], None);
        d.push(Port::Rtp, a, &[1; 1400], None);
        d.prepare();
        assert_eq!((d.count(Port::Rtp), d.count(Port::Rtcp)), (2, 1));
    }

    #[test]
    fn gso_datagrams_arrive_split() {
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        use std::os::fd::AsRawFd;
        if !gso_supported(tx.as_raw_fd()) {
            return; // the kernel predates UDP GSO; the loop sends single datagrams there
        }
        let mut d = Datagrams::new(true);
        let to = rx.local_addr().unwrap();
        // Headers of their own and bodies in one shared sample, as the RTSP core queues them.
        let sample = std::sync::Arc::new([vec![8u8; 988], vec![9; 5]].concat());
        let body = |start, len| sluice_proto::rtp::Body::new(sample.clone(), start, len).unwrap();
        let (first, last) = (body(0, 988), body(988, 5));
        d.push(Port::Rtp, to, &[7; 1000], None);
        d.push(Port::Rtp, to, &[6; 12], Some(first.view()));
        d.push(Port::Rtp, to, &[5; 5], Some(last.view()));
        assert_eq!(std::sync::Arc::strong_count(&sample), 4, "one hold for the run of the sample");
        d.prepare();
        assert_eq!(d.size_of(Port::Rtp, 0), (3, 2010), "one GSO message");
        let counters = crate::counters::Counters::new();
        assert_eq!(
            super::super::sendmmsg(tx.as_raw_fd(), d.unsent(Port::Rtp), counters.shard(0)).unwrap(),
            1
        );
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 2000];
        let mut second = vec![6; 12];
        second.extend_from_slice(&[8; 988]);
        for expected in [vec![7; 1000], second, [[5; 5], [9; 5]].concat()] {
            let n = rx.recv(&mut buf).unwrap();
            assert_eq!(&buf[..n], &expected[..]);
        }
    }

    #[test]
    fn refuses_what_does_not_fit() {
        let mut d = Datagrams::new(false);
        let a: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        for _ in 0..MAX_DATAGRAMS {
            assert!(d.push(Port::Rtp, a, &[0; 10], None));
        }
        assert!(!d.push(Port::Rtp, a, &[0; 10], None));
    }
}
