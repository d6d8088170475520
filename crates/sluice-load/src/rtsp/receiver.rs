//! The UDP side of the viewers: each viewer's own RTP/RTCP sockets ([`UdpViewer`], with
//! `UDP_GRO` enabled unless the run models players without it), and the receiver threads
//! ([`Receivers`]) that read them. A thread serves many viewers: it waits on all their sockets
//! with one epoll set and drains a ready socket with `recvmmsg`, 16 messages of up to 64 KiB a
//! call. With GRO a message is a whole burst the server sent as one GSO message (its segment
//! size comes in the `UDP_GRO` control message), so a thread reads 43 RTP packets with one
//! message instead of 43; without it every message is one datagram and the kernel segments the
//! server's bursts on the server's core, as for a player without GRO. The thread counts every
//! packet into the viewer's [`Reception`] and, every 10 ms, checks whether a viewer is done
//! (idle for `--idle-end`, expected count, deadline, no media, control connection closed); it
//! then closes that viewer's sockets and hands the counts back to the viewer's task.
//!
//! It owns the sockets and the threads. It does not own the RTSP exchange nor the counting rules.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use super::reception::{set_receive_buffer, stop_at, Limits, Reception, Stop};
use super::wire::{gro_segment_size, gro_segments};
use crate::sys::epoll::{self, Epoll};
use crate::sys::mmsg::Batch;

/// Messages per `recvmmsg`, bytes per message (a GSO message is at most 64 KiB), bytes of
/// control buffer per message (one `UDP_GRO` cmsg needs 24).
const BATCH: usize = 16;
const MESSAGE: usize = 64 * 1024;
const CONTROL: usize = 64;
/// How often a thread checks whether its viewers are done, and waits at most for a packet.
const SCAN: Duration = Duration::from_millis(10);
/// `SOL_UDP`, `UDP_GRO` (linux/udp.h).
const SOL_UDP: libc::c_int = 17;
const UDP_GRO: libc::c_int = 104;

/// One viewer's UDP sockets: RTP and RTCP of the video stream, then of the audio stream.
pub(crate) struct UdpViewer {
    sockets: Vec<UdpSocket>,
}

impl UdpViewer {
    /// Binds the sockets (an RTP port and the next one for RTCP, as players do), on the
    /// address family of `server`.
    pub(crate) fn bind(
        server: SocketAddr,
        audio: bool,
        receive_buffer: usize,
        gro: bool,
    ) -> std::io::Result<UdpViewer> {
        let any = match server.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        };
        let mut sockets = Vec::with_capacity(4);
        for _ in 0..if audio { 2 } else { 1 } {
            let (rtp, rtcp) = bind_pair(any)?;
            sockets.push(rtp);
            sockets.push(rtcp);
        }
        for (i, socket) in sockets.iter().enumerate() {
            socket.set_nonblocking(true)?;
            if i % 2 == 0 {
                if receive_buffer > 0 {
                    set_receive_buffer(socket.as_raw_fd(), receive_buffer);
                }
                if gro {
                    enable_gro(socket)?;
                }
            }
        }
        Ok(UdpViewer { sockets })
    }

    /// The RTP and RTCP ports of stream `i` (0 video, 1 audio).
    pub(crate) fn ports(&self, i: usize) -> (u16, u16) {
        let port = |s: &UdpSocket| s.local_addr().map_or(0, |a| a.port());
        (port(&self.sockets[2 * i]), port(&self.sockets[2 * i + 1]))
    }
}

/// A free port and the one after it.
fn bind_pair(any: IpAddr) -> std::io::Result<(UdpSocket, UdpSocket)> {
    let mut last = None;
    for _ in 0..64 {
        let rtp = UdpSocket::bind((any, 0))?;
        let port = rtp.local_addr()?.port();
        if port == u16::MAX {
            continue;
        }
        match UdpSocket::bind((any, port + 1)) {
            Ok(rtcp) => return Ok((rtp, rtcp)),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free pair of UDP ports")))
}

/// Asks the kernel to hand this socket coalesced GSO messages whole.
fn enable_gro(socket: &UdpSocket) -> std::io::Result<()> {
    crate::sys::set_socket_int(socket.as_raw_fd(), SOL_UDP, UDP_GRO, 1)
}

/// A viewer's counts when its thread is done with it.
pub(crate) struct Ended {
    pub reception: Reception,
    pub stop: Stop,
}

/// A viewer in a receiver thread.
struct Entry {
    udp: UdpViewer,
    reception: Reception,
    limits: Limits,
    /// Set by the viewer's task when the server closed the control connection.
    closed: Arc<AtomicBool>,
    reply: tokio::sync::oneshot::Sender<Ended>,
}

/// The receiver threads of a run.
pub(crate) struct Receivers {
    inboxes: Vec<mpsc::Sender<Entry>>,
    next: AtomicUsize,
    stop: Arc<AtomicBool>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

impl Receivers {
    /// Starts `threads` receiver threads.
    pub(crate) fn start(threads: usize) -> std::io::Result<Receivers> {
        let stop = Arc::new(AtomicBool::new(false));
        let mut inboxes = Vec::new();
        let mut handles = Vec::new();
        for i in 0..threads.max(1) {
            let (tx, rx) = mpsc::channel();
            let stop = stop.clone();
            let epoll = Epoll::new()?;
            handles.push(
                std::thread::Builder::new()
                    .name(format!("sluice-load-rtp-{i}"))
                    .spawn(move || receive(epoll, &rx, &stop))?,
            );
            inboxes.push(tx);
        }
        Ok(Receivers { inboxes, next: AtomicUsize::new(0), stop, threads: Mutex::new(handles) })
    }

    /// Gives a playing viewer to the next thread; returns the flag its task sets when the
    /// control connection closes and where the counts come back.
    pub(crate) fn add(
        &self,
        udp: UdpViewer,
        reception: Reception,
        limits: Limits,
    ) -> (Arc<AtomicBool>, tokio::sync::oneshot::Receiver<Ended>) {
        let closed = Arc::new(AtomicBool::new(false));
        let (reply, answer) = tokio::sync::oneshot::channel();
        let i = self.next.fetch_add(1, Relaxed) % self.inboxes.len();
        // A thread that is gone (it panicked) drops the entry, and the task learns it from the
        // closed reply.
        let _ = self.inboxes[i].send(Entry { udp, reception, limits, closed: closed.clone(), reply });
        (closed, answer)
    }

    /// Stops the threads (every viewer has ended) and waits for them.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Relaxed);
        let handles = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        for h in handles {
            let _ = h.join();
        }
    }
}

/// Reads every ready socket of `entry` that `role` names: 0 video RTP, 1 video RTCP, 2 audio
/// RTP, 3 audio RTCP.
fn drain(batch: &mut Batch, entry: &mut Entry, role: usize) {
    let Some(socket) = entry.udp.sockets.get(role) else { return };
    let fd = socket.as_raw_fd();
    // A bounded number of batches, so one busy viewer cannot starve the others.
    for _ in 0..8 {
        let n = batch.receive(fd);
        if n == 0 {
            return;
        }
        let now = Instant::now();
        let r = &mut entry.reception;
        r.counts.reads += n as u64;
        for i in 0..n {
            let (message, control) = batch.message(i);
            let segment = gro_segment_size(control);
            for datagram in gro_segments(message, segment) {
                match role {
                    0 => r.rtp(false, datagram, now),
                    2 => r.rtp(true, datagram, now),
                    _ => r.counts.datagrams += 1,
                }
            }
        }
        if n < BATCH {
            return;
        }
    }
}

/// A receiver thread: registers new viewers, reads ready sockets, ends viewers that are done.
fn receive(epoll: Epoll, inbox: &mpsc::Receiver<Entry>, stop: &AtomicBool) {
    let mut slots: Vec<Option<Entry>> = Vec::new();
    let mut batch = Batch::new(BATCH, MESSAGE, CONTROL);
    let mut events = epoll::events(256);
    let mut last_scan = Instant::now();
    loop {
        while let Ok(entry) = inbox.try_recv() {
            let slot = slots.iter().position(Option::is_none).unwrap_or_else(|| {
                slots.push(None);
                slots.len() - 1
            });
            for (role, s) in entry.udp.sockets.iter().enumerate() {
                epoll.control(libc::EPOLL_CTL_ADD, s.as_raw_fd(), (slot * 4 + role) as u64);
            }
            slots[slot] = Some(entry);
        }
        if stop.load(Relaxed) && slots.iter().all(Option::is_none) {
            return;
        }
        let n = epoll.wait(&mut events, SCAN);
        for event in &events[..n] {
            let token = event.u64 as usize;
            if let Some(Some(entry)) = slots.get_mut(token / 4) {
                drain(&mut batch, entry, token % 4);
            }
        }
        let now = Instant::now();
        if now.duration_since(last_scan) < SCAN {
            continue;
        }
        last_scan = now;
        for slot in &mut slots {
            let Some(entry) = slot else { continue };
            let l = entry.limits;
            let stopped = if entry.closed.load(Relaxed) {
                Some(Stop::Closed)
            } else {
                stop_at(&entry.reception, now, l.idle_end, l.setup_deadline, l.deadline)
            };
            let Some(stop) = stopped else { continue };
            let Some(entry) = slot.take() else { continue };
            for s in &entry.udp.sockets {
                epoll.control(libc::EPOLL_CTL_DEL, s.as_raw_fd(), 0);
            }
            let _ = entry.reply.send(Ended { reception: entry.reception, stop });
        }
    }
}
