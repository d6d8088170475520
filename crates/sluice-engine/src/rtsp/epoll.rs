//! The RTSP loop on epoll: edge-triggered readiness, `read`/`write` on control connections and one
//! `sendmmsg` per UDP port for a batch of datagrams to many viewers.
//!
//! Owns the descriptors' registration and the system calls (the shared listener, the loop's own
//! UDP pair, and the eventfd through which other loops hand it connections, [`super::handoff`]);
//! everything else is the [`RtspCore`]'s. The loop sleeps until the next packet is due (or a session or connection deadline), so pacing is
//! as exact as `epoll_wait`'s millisecond timeout, rounded up: a packet is never early.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

use sluice_proto::rtsp::{Port, RtspCore};

use super::datagrams::Datagrams;
use super::{sendmmsg, wall_clock, Demand, LoopSockets, Parts, DRAIN, DRAIN_TURN};
use crate::counters::Place;
use crate::counters::{Event, Shard, Syscall};
use crate::error::EngineError;
use crate::shutdown::Shutdown;
use crate::sys::epoll::Epoll;

const LISTENER: u64 = u64::MAX;
const SHUTDOWN: u64 = u64::MAX - 1;
const RTP: u64 = u64::MAX - 2;
const RTCP: u64 = u64::MAX - 3;
const INBOX: u64 = u64::MAX - 4;
const EVENTS: usize = 256;
/// Slices one `writev` of a control connection takes at most (the kernel's `UIO_MAXIOV` is 1024).
const WRITEV_SLICES: usize = 256;

/// The core as this loop holds it.
pub(crate) type Core<'a> = dyn RtspCore<Socket> + 'a;

pub(crate) fn run(parts: Parts<'_, Socket>, shutdown: &Shutdown) -> Result<(), EngineError> {
    let Parts { mut core, counters, sockets, gso, limit } = parts;
    let demand = Demand::of_this_thread();
    let core: &mut Core<'_> = &mut *core;
    let setup = |what| move |source| EngineError::Setup { what, source };
    let epoll = Epoll::new().map_err(setup("epoll_create1"))?;
    let register = |fd: RawFd, events: i32, token: u64| -> io::Result<()> {
        counters.syscall(Syscall::EpollCtl);
        epoll.add(fd, events, token)
    };
    let LoopSockets { control, rtp, rtcp, handoff } = sockets;
    register(control.as_raw_fd(), libc::EPOLLIN | libc::EPOLLET, LISTENER).map_err(setup("epoll_ctl"))?;
    register(shutdown.fd(), libc::EPOLLIN, SHUTDOWN).map_err(setup("epoll_ctl"))?;
    register(handoff.wake_fd(), libc::EPOLLIN, INBOX).map_err(setup("epoll_ctl"))?;
    register(rtp.as_raw_fd(), libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET, RTP)
        .map_err(setup("epoll_ctl"))?;
    register(rtcp.as_raw_fd(), libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET, RTCP)
        .map_err(setup("epoll_ctl"))?;

    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
    let mut batch = Datagrams::new(gso);
    let mut udp_blocked = false;
    let mut dirty = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut arrivals = Vec::new();
    // Set at shutdown: until then the loop says goodbye to every viewer, then returns.
    let mut draining: Option<Instant> = None;
    // A connection this loop keeps: registered edge-triggered, both ways.
    let adopt = |core: &mut Core<'_>, (stream, peer): (TcpStream, SocketAddr), now: Instant| {
        // Past --max-connections the connection is closed at once (dropped), as HTTP's are.
        let Some(place) = limit.place(counters) else { return };
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let _ = stream.set_nodelay(true);
        let fd = stream.as_raw_fd();
        let key = core.accept(Socket { stream, unread: false, _place: place }, peer, now);
        let flags = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
        if register(fd, flags, key as u64).is_err() {
            core.remove(key, now);
        }
    };
    loop {
        let now = Instant::now();
        let timeout = match core.next_wake() {
            None => -1,
            // Rounded up: a packet is never sent before its time.
            Some(at) => {
                at.saturating_duration_since(now).as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
            }
        };
        // A full UDP socket is retried within a millisecond even if its writable edge never
        // comes: the edge is the kernel's promise, this is the loop's guarantee of progress.
        let timeout = if udp_blocked { timeout.clamp(0, 1) } else { timeout };
        let timeout = match draining {
            Some(_) => timeout.clamp(0, DRAIN_TURN.as_millis() as i32),
            None => timeout,
        };
        counters.syscall(Syscall::EpollWait);
        let n = epoll.wait(&mut events, timeout);
        let now = Instant::now();
        for ev in events.iter().take(n.max(0) as usize) {
            match ev.u64 {
                SHUTDOWN => {
                    if draining.is_none() {
                        // Level-triggered and readable for good: out of the set, or every wait
                        // would return at once.
                        counters.syscall(Syscall::EpollCtl);
                        epoll.delete(shutdown.fd());
                        core.farewell(now, wall_clock());
                        draining = Some(now + DRAIN);
                    }
                }
                // Draining: no newcomers (they are closed when the loop returns).
                LISTENER | INBOX if draining.is_some() => {}
                LISTENER => loop {
                    counters.syscall(Syscall::Accept);
                    match control.accept() {
                        Ok((stream, peer)) => {
                            if let Some(mine) = handoff.route(stream, peer) {
                                adopt(core, mine, now);
                            }
                        }
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => {
                            crate::worker::ACCEPT_WARNINGS.warn("rtsp", &e, counters);
                            break;
                        }
                    }
                },
                INBOX => {
                    handoff.take(&mut arrivals);
                    for arrival in arrivals.drain(..) {
                        adopt(core, arrival, now);
                    }
                }
                // Writable again (the send below finds out), or a publisher's RTP to take in.
                RTP => drain_rtp(&rtp, core, counters, &mut buf, now),
                RTCP => drain_rtcp(&rtcp, core, counters, &mut buf, now),
                key => {
                    let key = key as usize;
                    let input = (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR) as u32;
                    if ev.events & input != 0 && read_control(core, counters, key, &mut buf, now).is_err() {
                        core.remove(key, now);
                        continue;
                    }
                    drive(core, counters, key, &mut buf, now);
                }
            }
        }
        core.tick(now, wall_clock());
        // Interleaved output first: control replies should not wait behind datagrams.
        core.take_dirty(&mut dirty);
        for &key in &dirty {
            drive(core, counters, key, &mut buf, now);
        }
        udp_blocked = send_datagrams(core, counters, &mut batch, [&rtp, &rtcp], now);
        core.account(demand.now(), Instant::now());
        if draining.is_some_and(|until| (core.drained() && !udp_blocked) || Instant::now() >= until) {
            return Ok(());
        }
    }
}

/// A control connection as this loop holds it.
pub(crate) struct Socket {
    stream: TcpStream,
    /// Input may be waiting that was not read because the core wanted none (an edge was spent).
    unread: bool,
    /// Its place under the connection limit, given back when the slot is freed.
    _place: Place,
}

/// Reads what `key` has, while it wants input; `Err` when the connection failed. End of file is
/// a half-close: the core answers what arrived before it, and closes once the replies are out.
fn read_control(
    core: &mut Core<'_>,
    counters: &Shard,
    key: usize,
    buf: &mut [u8],
    now: Instant,
) -> io::Result<()> {
    loop {
        let wants = core.wants_input(key);
        let Some(c) = core.control(key) else { return Ok(()) };
        c.io.unread = !wants;
        if !wants {
            return Ok(());
        }
        counters.syscall(Syscall::Read);
        match c.io.stream.read(buf) {
            Ok(0) => {
                core.input_ended(key, now);
                return Ok(());
            }
            Ok(n) => core.received(key, &buf[..n], now),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                counters.add(Event::SocketErrors, 1);
                return Err(e);
            }
        }
    }
}

/// Writes `key`'s output until done or the socket is full, reading input the core now wants;
/// closes the connection when the core says so.
fn drive(core: &mut Core<'_>, counters: &Shard, key: usize, buf: &mut [u8], now: Instant) {
    loop {
        if core.control(key).is_some_and(|c| c.io.unread)
            && read_control(core, counters, key, buf, now).is_err()
        {
            core.remove(key, now);
            return;
        }
        let Some(c) = core.control(key) else { return };
        if c.should_close {
            core.remove(key, now);
            return;
        }
        // Replies and frame headers, and payloads in the shared samples: one writev.
        let slices: Vec<io::IoSlice<'_>> =
            c.out.pending_slices(WRITEV_SLICES).into_iter().map(io::IoSlice::new).collect();
        if slices.is_empty() {
            return;
        }
        counters.syscall(Syscall::Write);
        match c.io.stream.write_vectored(&slices) {
            Ok(n) => {
                counters.add(Event::BytesOut, n as u64);
                c.out.advance(n);
                core.wrote(key, now);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                counters.add(Event::SocketErrors, 1);
                core.remove(key, now);
                return;
            }
        }
    }
}

/// Sends batches until the viewers' queues are empty or a socket is full; returns whether one is.
fn send_datagrams(
    core: &mut Core<'_>,
    counters: &Shard,
    batch: &mut Datagrams,
    sockets: [&UdpSocket; 2],
    now: Instant,
) -> bool {
    loop {
        let mut more = true;
        if batch.is_empty() {
            more = core.fill_datagrams(batch, now);
            if batch.is_empty() {
                return false;
            }
            batch.prepare();
        }
        for port in [Port::Rtp, Port::Rtcp] {
            while !batch.unsent(port).is_empty() {
                match sendmmsg(sockets[port as usize].as_raw_fd(), batch.unsent(port), counters) {
                    Ok(n) => {
                        let (datagrams, bytes) = batch.advance(port, n);
                        core.sent_datagrams(datagrams, bytes);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        // The first datagram failed for itself (no route, refused): skip it.
                        counters.add(Event::SocketErrors, 1);
                        batch.advance(port, 1);
                    }
                }
            }
        }
        batch.clear();
        if !more {
            return false;
        }
    }
}

/// Takes every datagram waiting on the server's RTP port: a publisher's RTP over UDP.
fn drain_rtp(rtp: &UdpSocket, core: &mut Core<'_>, counters: &Shard, buf: &mut [u8], now: Instant) {
    loop {
        counters.syscall(Syscall::Read);
        match rtp.recv_from(buf) {
            Ok((n, from)) => core.rtp_from(from, &buf[..n], now),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Takes every RTCP packet waiting on the server's RTCP port; each keeps its sender's session.
fn drain_rtcp(rtcp: &UdpSocket, core: &mut Core<'_>, counters: &Shard, buf: &mut [u8], now: Instant) {
    loop {
        counters.syscall(Syscall::Read);
        match rtcp.recv_from(buf) {
            Ok((_, from)) => core.rtcp_from(from, now),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}
