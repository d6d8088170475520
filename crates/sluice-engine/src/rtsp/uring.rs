//! The RTSP loop on io_uring: accepts, receives and sends of control connections, and one
//! `sendmsg` submission per datagram of a batch, all submitted and reaped by one
//! `io_uring_enter` per turn whose timeout is the next packet's time.
//!
//! Owns the ring and the lifetime of memory the kernel reads: a connection's receive buffer and
//! the output slice being sent stay in its slot until their completions arrive (a closing
//! connection is shut down so they do, then freed), and a datagram batch is refilled only when
//! every `sendmsg` of it has completed. A poll on the hand-over eventfd brings the connections
//! other loops accepted for this one ([`super::handoff`]). Everything else is the
//! [`RtspCore`]'s.

use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};
use sluice_proto::rtsp::{Port, RtspCore};

use super::datagrams::Datagrams;
use super::handoff::Handoff;
use super::{wall_clock, Demand, LoopSockets, Parts, DRAIN, DRAIN_TURN};
use crate::counters::{ConnectionLimit, Place};
use crate::counters::{Event, Shard, Syscall};
use crate::error::EngineError;
use crate::shutdown::Shutdown;
use crate::sys::socket::{self, socket_addr_from};
use crate::sys::{fd as sys_fd, uring as sys_uring};

const ACCEPT: u64 = 1;
const SHUTDOWN: u64 = 2;
const RTCP: u64 = 3;
const RECV: u64 = 4;
const SEND: u64 = 5;
const DATAGRAM: u64 = 6;
const INBOX: u64 = 7;
const RTP_IN: u64 = 8;
const RECV_BUFFER: usize = 16 * 1024;

fn token(kind: u64, key: usize) -> u64 {
    kind << 56 | key as u64
}

/// A control connection as this loop holds it.
pub(crate) struct Socket {
    /// Its place under the connection limit, given back when the slot is freed.
    _place: Place,
    stream: TcpStream,
    buf: Box<[u8]>,
    /// The `sendmsg` in flight: its header and iovecs (replies and frame headers, and payloads
    /// in the shared samples), on the heap so they stay put while the slot moves.
    send: Box<SendSlices>,
    recv_armed: bool,
    send_armed: bool,
    closing: bool,
}

/// A control connection's `sendmsg`: what the kernel reads until the send completes.
struct SendSlices {
    hdr: libc::msghdr,
    iovs: Vec<libc::iovec>,
}

/// Slices one `sendmsg` of a control connection takes at most (the kernel's `UIO_MAXIOV` is 1024).
const SEND_SLICES: usize = 256;

/// A UDP port's receive (the RTCP port's, and the RTP port's for publishers' RTP), at a stable
/// address while armed.
struct RtcpRecv {
    hdr: libc::msghdr,
    iov: libc::iovec,
    addr: libc::sockaddr_storage,
    buf: [u8; 1500],
}

/// A `recvmsg` into `r` on `socket`, completing with `user_data`.
fn recv_entry(r: &mut RtcpRecv, socket: &UdpSocket, user_data: u64) -> squeue::Entry {
    r.iov = libc::iovec { iov_base: r.buf.as_mut_ptr().cast(), iov_len: r.buf.len() };
    r.hdr.msg_name = (&mut r.addr as *mut libc::sockaddr_storage).cast();
    r.hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    r.hdr.msg_iov = &mut r.iov;
    r.hdr.msg_iovlen = 1;
    opcode::RecvMsg::new(types::Fd(socket.as_raw_fd()), &mut r.hdr).build().user_data(user_data)
}

/// The core as this loop holds it.
type Core<'a> = dyn RtspCore<Socket> + 'a;

struct Loop<'c, 'a> {
    // Declared first so it is dropped first: the kernel must be done with the memory below.
    ring: IoUring,
    core: &'c mut Core<'a>,
    counters: &'c Shard,
    batch: Datagrams,
    /// `sendmsg`s of the batch not yet completed, and what the completed ones carried.
    in_flight: usize,
    batch_sent: (usize, usize),
    rtcp_recv: Box<RtcpRecv>,
    rtp_recv: Box<RtcpRecv>,
    dirty: Vec<usize>,
    handoff: Handoff,
    arrivals: Vec<(TcpStream, SocketAddr)>,
    /// Completions taken off the ring, reused from reap to reap.
    completions: Vec<(u64, i32)>,
    /// Set at shutdown: until then the loop says goodbye to every viewer, then stops.
    draining: Option<Instant>,
    /// The connection limit control connections share with HTTP's.
    limit: Arc<ConnectionLimit>,
}

pub(crate) fn run(parts: Parts<'_, Socket>, shutdown: &Shutdown) -> Result<(), EngineError> {
    let Parts { mut core, counters, sockets, gso, limit } = parts;
    let demand = Demand::of_this_thread();
    let ring = IoUring::builder()
        .setup_cqsize(16 * 1024)
        .build(1024)
        .map_err(|source| EngineError::Setup { what: "io_uring_setup (rtsp)", source })?;
    let LoopSockets { control, rtp, rtcp, handoff } = sockets;
    // Its pointers are set before use.
    let udp_recv = || {
        Box::new(RtcpRecv {
            hdr: socket::empty_msghdr(),
            iov: libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 },
            addr: socket::empty_sockaddr(),
            buf: [0; 1500],
        })
    };
    let (rtcp_recv, rtp_recv) = (udp_recv(), udp_recv());
    let mut l = Loop {
        ring,
        core: &mut *core,
        counters,
        batch: Datagrams::new(gso),
        in_flight: 0,
        batch_sent: (0, 0),
        rtcp_recv,
        rtp_recv,
        dirty: Vec::new(),
        handoff,
        arrivals: Vec::new(),
        completions: Vec::new(),
        draining: None,
        limit,
    };
    l.push(
        opcode::PollAdd::new(types::Fd(shutdown.fd()), libc::POLLIN as u32)
            .build()
            .user_data(token(SHUTDOWN, 0)),
    );
    l.arm_accept(&control);
    l.arm_rtcp(&rtcp);
    l.arm_rtp(&rtp);
    l.arm_inbox();
    let mut now = Instant::now();
    loop {
        if l.draining.is_some_and(|until| (l.core.drained() && l.in_flight == 0) || now >= until) {
            break;
        }
        l.core.tick(now, wall_clock());
        l.core.take_dirty(&mut l.dirty);
        for key in std::mem::take(&mut l.dirty) {
            l.drive(key, now);
        }
        // Batch after batch while the queues fill them, as the epoll loop does: UDP sends
        // complete as they are submitted, so the next batch need not wait for a whole turn
        // (its scan of every viewer for due samples and wake-ups was twice the epoll loop's
        // share of the core at 450 plain viewers).
        while l.in_flight == 0 && l.send_batch([&rtp, &rtcp], now) {
            l.enter(Some(Duration::ZERO));
            l.reap(&control, [&rtp, &rtcp], now);
        }
        l.core.account(demand.now(), Instant::now());
        let mut timeout = l.core.next_wake().map(|at| at.saturating_duration_since(Instant::now()));
        if l.in_flight > 0 {
            // A batch is on the ring: nothing more can be sent until its completions come, and
            // they end the wait; a pacer's wake-up that has passed must not make every turn a
            // non-blocking enter meanwhile.
            timeout = timeout.map(|t| t.max(Duration::from_millis(1)));
        }
        if l.draining.is_some() {
            timeout = Some(timeout.map_or(DRAIN_TURN, |t| t.min(DRAIN_TURN)));
        }
        l.enter(timeout);
        now = Instant::now();
        l.reap(&control, [&rtp, &rtcp], now);
    }
    // Stop what is in flight before the memory goes: shut the sockets down, wait briefly.
    for key in l.core.keys() {
        if let Some(c) = l.core.control(key) {
            // A descriptor the slot owns.
            sys_fd::shutdown(c.io.stream.as_raw_fd(), libc::SHUT_RDWR);
        }
    }
    Ok(())
}

impl Loop<'_, '_> {
    fn push(&mut self, entry: squeue::Entry) {
        loop {
            // Every entry points at memory that outlives its operation: a connection's slot
            // (freed only after its completions), the batch (cleared only when all its sends
            // completed) or the loop's RTCP receive.
            if sys_uring::push(&mut self.ring, &entry) {
                return;
            }
            self.enter(Some(Duration::ZERO));
        }
    }

    /// Submits what is queued and waits for one completion or `timeout` (none: for ever).
    fn enter(&mut self, timeout: Option<Duration>) {
        let counters = self.counters;
        counters.syscall(Syscall::IoUringEnter);
        let before = self.ring.submission().len();
        let result = match timeout {
            Some(t) if t.is_zero() => self.ring.submit(),
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
            None => self.ring.submit_and_wait(1),
        };
        let after = self.ring.submission().len();
        counters.add(Event::UringSubmitted, before.saturating_sub(after) as u64);
        if let Err(e) = result {
            if !matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)) {
                tracing::warn!("rtsp io_uring_enter: {e}");
            }
        }
    }

    fn arm_accept(&mut self, listener: &std::net::TcpListener) {
        let accept =
            opcode::Accept::new(types::Fd(listener.as_raw_fd()), std::ptr::null_mut(), std::ptr::null_mut())
                .flags(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK)
                .build()
                .user_data(token(ACCEPT, 0));
        self.push(accept);
    }

    /// Watches the eventfd other loops wake this one with when they hand it connections.
    fn arm_inbox(&mut self) {
        let fd = types::Fd(self.handoff.wake_fd());
        self.push(opcode::PollAdd::new(fd, libc::POLLIN as u32).build().user_data(token(INBOX, 0)));
    }

    /// A connection this loop keeps: into the core, and its first operations.
    fn adopt(&mut self, stream: TcpStream, peer: SocketAddr, now: Instant) {
        if self.draining.is_some() {
            return; // shutting down: a newcomer is closed (dropped)
        }
        // Past --max-connections the connection is closed at once (dropped), as HTTP's are.
        let Some(place) = self.limit.place(self.counters) else { return };
        let _ = stream.set_nodelay(true);
        let socket = Socket {
            _place: place,
            stream,
            buf: vec![0; RECV_BUFFER].into_boxed_slice(),
            send: Box::new(SendSlices {
                // Its pointers are set before use.
                hdr: socket::empty_msghdr(),
                iovs: Vec::with_capacity(SEND_SLICES),
            }),
            recv_armed: false,
            send_armed: false,
            closing: false,
        };
        let key = self.core.accept(socket, peer, now);
        self.drive(key, now);
    }

    fn arm_rtcp(&mut self, rtcp: &UdpSocket) {
        let entry = recv_entry(&mut self.rtcp_recv, rtcp, token(RTCP, 0));
        self.push(entry);
    }

    /// A receive on the RTP port: publishers' RTP over UDP (viewers send nothing there).
    fn arm_rtp(&mut self, rtp: &UdpSocket) {
        let entry = recv_entry(&mut self.rtp_recv, rtp, token(RTP_IN, 0));
        self.push(entry);
    }

    /// Fills a batch from the viewers' queues and queues a `sendmsg` for each datagram; returns
    /// whether the batch filled up (more may be sendable at once).
    fn send_batch(&mut self, sockets: [&UdpSocket; 2], now: Instant) -> bool {
        self.batch.clear();
        let more = self.core.fill_datagrams(&mut self.batch, now);
        if self.batch.is_empty() {
            return false;
        }
        self.batch.prepare();
        self.batch_sent = (0, 0);
        for port in [Port::Rtp, Port::Rtcp] {
            let fd = sockets[port as usize].as_raw_fd();
            for i in 0..self.batch.count(port) {
                let data = token(DATAGRAM, (port as usize) << 32 | i);
                self.push(
                    opcode::SendMsg::new(types::Fd(fd), self.batch.header(port, i)).build().user_data(data),
                );
                self.in_flight += 1;
            }
        }
        more
    }

    /// Starts what `key` needs: a send of its output, a receive if the core wants input, or its
    /// close.
    fn drive(&mut self, key: usize, now: Instant) {
        let wants_input = self.core.wants_input(key);
        let Some(c) = self.core.control(key) else { return };
        if c.should_close || c.io.closing {
            self.close(key, now);
            return;
        }
        let fd = types::Fd(c.io.stream.as_raw_fd());
        let mut entries = [None, None];
        if !c.io.send_armed {
            let send = &mut *c.io.send;
            send.iovs.clear();
            // The slices stay put until the send completes and `advance` is called.
            send.iovs.extend(
                c.out
                    .pending_slices(SEND_SLICES)
                    .into_iter()
                    .map(|s| libc::iovec { iov_base: s.as_ptr() as *mut _, iov_len: s.len() }),
            );
            if !send.iovs.is_empty() {
                c.io.send_armed = true;
                send.hdr.msg_iov = send.iovs.as_mut_ptr();
                send.hdr.msg_iovlen = send.iovs.len() as _;
                entries[0] = Some(opcode::SendMsg::new(fd, &send.hdr).build().user_data(token(SEND, key)));
            }
        }
        if !c.io.recv_armed && wants_input {
            c.io.recv_armed = true;
            let buf = &mut c.io.buf;
            entries[1] = Some(
                opcode::Recv::new(fd, buf.as_mut_ptr(), buf.len() as u32).build().user_data(token(RECV, key)),
            );
        }
        for entry in entries.into_iter().flatten() {
            self.push(entry);
        }
    }

    /// Closes `key`: at once when nothing of it is in flight, else after its completions (a
    /// shutdown makes them come).
    fn close(&mut self, key: usize, now: Instant) {
        self.core.disconnect(key, now);
        let counters = self.counters;
        let Some(c) = self.core.control(key) else { return };
        if !c.io.recv_armed && !c.io.send_armed {
            self.core.remove(key, now);
            counters.syscall(Syscall::Close);
        } else if !c.io.closing {
            c.io.closing = true;
            counters.syscall(Syscall::Shutdown);
            // A descriptor the slot owns.
            sys_fd::shutdown(c.io.stream.as_raw_fd(), libc::SHUT_RDWR);
        }
    }

    fn reap(&mut self, listener: &std::net::TcpListener, [rtp, rtcp]: [&UdpSocket; 2], now: Instant) {
        let mut cqes = std::mem::take(&mut self.completions);
        cqes.clear();
        cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        self.counters.add(Event::UringCompleted, cqes.len() as u64);
        for &(data, res) in &cqes {
            let key = (data & ((1 << 56) - 1)) as usize;
            match data >> 56 {
                SHUTDOWN if self.draining.is_none() => {
                    self.core.farewell(now, wall_clock());
                    self.draining = Some(now + DRAIN);
                }
                ACCEPT => {
                    if res >= 0 {
                        // A fresh descriptor the kernel gave us.
                        let stream = socket::accepted_stream(res);
                        match stream.peer_addr() {
                            Ok(peer) => {
                                if let Some((stream, peer)) = self.handoff.route(stream, peer) {
                                    self.adopt(stream, peer, now);
                                }
                            }
                            Err(_) => self.counters.add(Event::SocketErrors, 1),
                        }
                    } else if -res != libc::ECONNABORTED && -res != libc::EINTR {
                        self.counters.add(Event::AcceptErrors, 1);
                    }
                    self.arm_accept(listener);
                }
                RTCP => {
                    if res >= 0 {
                        if let Some(from) = socket_addr_from(&self.rtcp_recv.addr) {
                            self.core.rtcp_from(from, now);
                        }
                    }
                    self.arm_rtcp(rtcp);
                }
                RTP_IN => {
                    if let (Ok(n), Some(from)) = (usize::try_from(res), socket_addr_from(&self.rtp_recv.addr))
                    {
                        let packet = &self.rtp_recv.buf[..n.min(self.rtp_recv.buf.len())];
                        self.core.rtp_from(from, packet, now);
                    }
                    self.arm_rtp(rtp);
                }
                INBOX => {
                    let mut arrivals = std::mem::take(&mut self.arrivals);
                    self.handoff.take(&mut arrivals);
                    for (stream, peer) in arrivals.drain(..) {
                        self.adopt(stream, peer, now);
                    }
                    self.arrivals = arrivals;
                    self.arm_inbox();
                }
                RECV => self.on_recv(key, res, now),
                SEND => self.on_send(key, res, now),
                DATAGRAM => {
                    let port = if key >> 32 == 0 { Port::Rtp } else { Port::Rtcp };
                    let i = key & 0xffff_ffff;
                    self.in_flight -= 1;
                    if res >= 0 {
                        let (datagrams, bytes) = self.batch.size_of(port, i);
                        self.batch_sent.0 += datagrams;
                        self.batch_sent.1 += bytes;
                    } else {
                        self.counters.add(Event::SocketErrors, 1);
                    }
                    if self.in_flight == 0 {
                        self.core.sent_datagrams(self.batch_sent.0, self.batch_sent.1);
                        self.batch.clear();
                    }
                }
                _ => {}
            }
        }
        self.completions = cqes;
    }

    fn on_recv(&mut self, key: usize, res: i32, now: Instant) {
        let Some(c) = self.core.control(key) else { return };
        c.io.recv_armed = false;
        if c.io.closing {
            self.close(key, now);
            return;
        }
        if res == 0 {
            // A half-close: what arrived before it is answered, and the connection closes once
            // the replies are out.
            self.core.input_ended(key, now);
            self.drive(key, now);
            return;
        }
        if res < 0 {
            if -res != libc::ECONNRESET {
                self.counters.add(Event::SocketErrors, 1);
            }
            self.close(key, now);
            return;
        }
        let buf = std::mem::take(&mut c.io.buf);
        self.core.received(key, &buf[..res as usize], now);
        if let Some(c) = self.core.control(key) {
            c.io.buf = buf;
        }
        self.drive(key, now);
    }

    fn on_send(&mut self, key: usize, res: i32, now: Instant) {
        let counters = self.counters;
        let Some(c) = self.core.control(key) else { return };
        c.io.send_armed = false;
        if c.io.closing || res < 0 {
            if res < 0 {
                counters.add(Event::SocketErrors, 1);
            }
            self.close(key, now);
            return;
        }
        counters.add(Event::BytesOut, res as u64);
        c.out.advance(res as usize);
        self.core.wrote(key, now);
        self.drive(key, now);
    }
}
