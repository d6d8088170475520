//! The loopback ceiling of a fan-out experiment: how many constant-bitrate UDP viewers this
//! machine can carry from one core to another when neither side does anything but the system
//! calls, so that E5's rows can be read against what no server could beat here.
//!
//! A sender thread pinned to one CPU sends the viewers' datagrams the cheapest way Linux offers
//! (UDP GSO messages of up to 64 segments, 1,024 messages per `sendmmsg`, paced on a 2 ms grid as
//! sluice's RTSP loop is); a receiver thread pinned to another CPU drains every viewer's socket
//! with `recvmmsg` (64 messages a call). It measures both kinds of receiver: with `UDP_GRO` on
//! the receiving sockets (`gro`), a GSO message arrives whole, as on a NIC with segmentation
//! offload; without it (plain receivers, players without GRO) the kernel cuts every GSO message
//! into its datagrams on the sender's CPU and queues each one. On loopback the receiving
//! sockets' kernel work (segmenting, queueing, waking the receiver) runs on the sender's CPU, as
//! it does for a real server here. Each side's CPU is its
//! thread's own user + system time plus the softirq time of its CPU (`/proc/stat`).
//!
//! What the datagrams carry is the probe's [`Payload`]: one hot buffer for every viewer (the
//! cheapest case, a live stream whose viewers are in step), or datagrams as a server of files
//! sends them to viewers who started apart (each its own RTP-sized header beside a slice of the
//! content, every viewer at its own point of it), whose copies the sender's caches cannot hold.
//!
//! It owns the probe and its result. It does not own RTP, RTSP or any server; the lab's E5 rows
//! measure those.

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::machine::pin;
use crate::sys;

use sluice_engine::udp_gso::{SegmentControl, MAX_SEGMENTS as GSO_SEGMENTS};
use sluice_load::rtsp::gro_segment_size;

/// The payload of one GSO message at most: 60 KiB, about what sluice's RTSP loop puts in one
/// (60,000 bytes; a datagram's payload may not pass 65,507).
const GSO_BYTES: usize = 60 * 1024;
/// Messages per `sendmmsg` (`UIO_MAXIOV`) and datagrams per `recvmmsg`.
const SEND_BATCH: usize = 1024;
const RECV_BATCH: usize = 64;
/// The pacing grid of sluice's RTSP loop.
const TICK: Duration = Duration::from_millis(2);
/// `UDP_GRO` (linux/udp.h).
const UDP_GRO: libc::c_int = 104;
/// A received message at most (a whole GSO message), and its control buffer.
const MESSAGE: usize = 64 * 1024;
const CONTROL: usize = 64;

/// What to offer.
#[derive(Debug, Clone, Copy)]
pub struct CeilingProbe {
    /// Viewers (one receiving socket each).
    pub viewers: usize,
    /// Each viewer's bitrate in bits per second.
    pub bitrate: u64,
    /// Bytes of each datagram's payload (an RTP packet's size).
    pub datagram: usize,
    /// How long to send.
    pub duration: Duration,
    /// The sender's CPU.
    pub sender_cpu: usize,
    /// The receiver's CPU.
    pub receiver_cpu: usize,
    /// The receiving sockets take GSO messages whole (`UDP_GRO`).
    pub gro: bool,
    /// What the datagrams carry.
    pub payload: Payload,
}

/// What a ceiling probe's datagrams carry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Payload {
    /// One 60 KiB buffer, the whole of every GSO message, for every viewer: the sender copies
    /// bytes its cache holds, as for a live stream whose viewers are in step. The cheapest case,
    /// and E5's matching ceiling.
    Shared,
    /// Datagrams as a server of files sends them: each its own [`HEADER`]-byte header (an RTP
    /// header and the two bytes of H.264's FU-A, its own `iovec`) beside a slice of the content,
    /// the viewers spread evenly over `spread` of a content buffer at the probe's bitrate, as
    /// viewers who started that far apart (E5's ramp: 4 s, about 12 MB of its file). To 400
    /// plain receivers the sender spent 0.53 us a datagram with [`Payload::Shared`] and 0.71 us
    /// with this (2026-11-26, docs/BENCHMARKS.md): the kernel's copy reads memory, not cache.
    Staggered {
        /// How far apart the first and the last viewer are in the content.
        spread: Duration,
    },
}

/// Bytes of each datagram's own header under [`Payload::Staggered`]: 12 of RTP and 2 of FU-A.
pub const HEADER: usize = 14;

/// What one probe measured.
#[derive(Debug, Clone, Copy)]
pub struct CeilingResult {
    /// Datagrams the sender handed to the kernel.
    pub sent: u64,
    /// Datagrams the receiver read.
    pub received: u64,
    /// Datagrams the schedule asked for over the whole run: the viewers' bitrate × the duration
    /// (the sender could not keep pace when `sent` is lower).
    pub offered: u64,
    /// Wall seconds of the run.
    pub seconds: f64,
    /// The sender thread's CPU seconds (softirq work done in its context included).
    pub sender_cpu: f64,
    /// CPU seconds of the sender CPU's `ksoftirqd` (softirq work deferred to it).
    pub sender_softirq: f64,
    /// The receiver thread's CPU seconds.
    pub receiver_cpu: f64,
    /// CPU seconds of the receiver CPU's `ksoftirqd`.
    pub receiver_softirq: f64,
}

impl CeilingResult {
    /// The share of a core the sending side used (thread + its CPU's `ksoftirqd`).
    pub fn sender_load(&self) -> f64 {
        (self.sender_cpu + self.sender_softirq) / self.seconds
    }

    /// The share of a core the receiving side used.
    pub fn receiver_load(&self) -> f64 {
        (self.receiver_cpu + self.receiver_softirq) / self.seconds
    }

    /// Whether every datagram asked for was sent and read.
    pub fn delivered_all(&self) -> bool {
        self.sent >= self.offered && self.received >= self.sent
    }

    /// The share of the schedule the sender kept (1.0: it kept pace).
    pub fn kept_pace(&self) -> f64 {
        self.sent as f64 / self.offered.max(1) as f64
    }
}

/// Runs one probe.
pub fn run(probe: &CeilingProbe) -> std::io::Result<CeilingResult> {
    let receivers: Vec<UdpSocket> =
        (0..probe.viewers).map(|_| bind_receiver(probe.gro)).collect::<std::io::Result<_>>()?;
    let targets: Vec<std::net::SocketAddr> =
        receivers.iter().map(|s| s.local_addr()).collect::<std::io::Result<_>>()?;
    let sender = UdpSocket::bind("127.0.0.1:0")?;
    let stop = Arc::new(AtomicBool::new(false));
    let ksoftirqd = |cpu: usize| ksoftirqd_seconds(cpu);
    let softirq_before = [ksoftirqd(probe.sender_cpu), ksoftirqd(probe.receiver_cpu)];
    let started = Instant::now();
    let receiver_cpu = probe.receiver_cpu;
    let receiving = {
        let stop = stop.clone();
        std::thread::spawn(move || -> std::io::Result<(u64, f64)> {
            pin(&[receiver_cpu])?;
            let received = receive(&receivers, &stop)?;
            Ok((received, thread_cpu_seconds()))
        })
    };
    let p = *probe;
    let sending = std::thread::spawn(move || -> std::io::Result<(u64, u64, f64)> {
        pin(&[p.sender_cpu])?;
        let (sent, offered) = send(&sender, &targets, &p)?;
        Ok((sent, offered, thread_cpu_seconds()))
    });
    let (sent, offered, sender_cpu) = sending.join().map_err(|_| panicked())??;
    // Whatever is still queued arrives within a few ticks.
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    let (received, receiver_cpu) = receiving.join().map_err(|_| panicked())??;
    let seconds = started.elapsed().as_secs_f64();
    Ok(CeilingResult {
        sent,
        received,
        offered,
        seconds,
        sender_cpu,
        sender_softirq: ksoftirqd(probe.sender_cpu) - softirq_before[0],
        receiver_cpu,
        receiver_softirq: ksoftirqd(probe.receiver_cpu) - softirq_before[1],
    })
}

fn panicked() -> std::io::Error {
    std::io::Error::other("probe thread panicked")
}

fn bind_receiver(gro: bool) -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind("127.0.0.1:0")?;
    s.set_nonblocking(true)?;
    if gro {
        sys::set_int_option(&s, libc::IPPROTO_UDP, UDP_GRO, 1)?;
    }
    // The viewers' 4 MiB (`sluice load rtsp --udp-rcvbuf`), forced past rmem_max as root can
    // (refused without the privilege: the socket keeps its default).
    let _ = sys::set_int_option(&s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 4 << 20);
    Ok(s)
}

/// Sends each viewer its share of every 2 ms tick as GSO messages until the duration is over;
/// returns datagrams sent and datagrams the schedule asked for over the duration (a sender that
/// falls behind sends fewer: what it still owed at the end is not sent).
fn send(
    socket: &UdpSocket,
    targets: &[std::net::SocketAddr],
    p: &CeilingProbe,
) -> std::io::Result<(u64, u64)> {
    // Each viewer gets full GSO messages (sluice's pacing bursts), so the kernel's send path runs
    // once per 60 KB rather than once per tick.
    let burst = GSO_SEGMENTS.min(GSO_BYTES / p.datagram).max(1) as u64;
    let mut content = Content::new(p, targets.len(), burst as usize);
    let per_viewer_per_s = p.bitrate as f64 / 8.0 / p.datagram as f64;
    let addrs: Vec<(libc::sockaddr_in, libc::socklen_t)> = targets.iter().map(sockaddr_in).collect();
    let control = SegmentControl::new(Some(p.datagram as u16));
    let start = Instant::now();
    let mut owed_before = 0u64;
    let mut sent = 0u64;
    let scheduled = (p.duration.as_secs_f64() * per_viewer_per_s) as u64 / burst * burst;
    let mut messages: Vec<(usize, usize)> = Vec::with_capacity(SEND_BATCH); // (viewer, segments)
                                                                            // A sender keeping pace finishes the schedule within a tick of the end; one that cannot, stops
                                                                            // at a grace of a few ticks with the rest unsent.
    while owed_before < scheduled && start.elapsed() < p.duration + 5 * TICK {
        let due = (start.elapsed().as_secs_f64() * per_viewer_per_s) as u64;
        let owed = (due.min(scheduled) - owed_before) / burst * burst;
        owed_before += owed;
        for v in 0..targets.len() {
            let mut left = owed as usize;
            while left > 0 {
                let n = left.min(burst as usize);
                messages.push((v, n));
                left -= n;
                if messages.len() == SEND_BATCH {
                    sent += send_batch(socket, &messages, &addrs, &mut content, &control)?;
                    messages.clear();
                }
            }
        }
        if !messages.is_empty() {
            sent += send_batch(socket, &messages, &addrs, &mut content, &control)?;
            messages.clear();
        }
        let next =
            TICK.saturating_sub(Duration::from_nanos((start.elapsed().as_nanos() % TICK.as_nanos()) as u64));
        std::thread::sleep(next);
    }
    Ok((sent, scheduled * targets.len() as u64))
}

fn send_batch(
    socket: &UdpSocket,
    messages: &[(usize, usize)],
    addrs: &[(libc::sockaddr_in, libc::socklen_t)],
    content: &mut Content,
    control: &SegmentControl,
) -> std::io::Result<u64> {
    let parts: Vec<Vec<Part>> = messages.iter().map(|&(v, n)| content.message(v, n)).collect();
    let out: Vec<sys::OutMessage<'_>> = messages
        .iter()
        .zip(&parts)
        .map(|(&(v, n), parts)| sys::OutMessage {
            parts: parts.iter().map(|p| content.part(p)).collect(),
            to: addrs[v],
            segmented: n > 1,
        })
        .collect();
    sys::send_all(socket, &out, control)?;
    Ok(messages.iter().map(|&(_, n)| n as u64).sum())
}

/// A part of a message: viewer `v`'s header, or bytes of the content.
enum Part {
    Header(usize),
    Bytes(std::ops::Range<usize>),
}

/// The bytes the sender's messages point at, by [`Payload`]; see there.
struct Content {
    /// The shared buffer, or the content the staggered viewers play.
    bytes: Vec<u8>,
    /// Per viewer (staggered): its header bytes and where it is in `bytes`.
    headers: Vec<[u8; HEADER]>,
    positions: Vec<usize>,
    datagram: usize,
    staggered: bool,
}

impl Content {
    fn new(p: &CeilingProbe, viewers: usize, burst: usize) -> Content {
        match p.payload {
            Payload::Shared => Content {
                bytes: vec![0x5a; GSO_BYTES],
                headers: Vec::new(),
                positions: Vec::new(),
                datagram: p.datagram,
                staggered: false,
            },
            Payload::Staggered { spread } => {
                let body = p.datagram.saturating_sub(HEADER).max(1);
                // At least two whole messages, so that wrapping around always finds room.
                let len = ((spread.as_secs_f64() * p.bitrate as f64 / 8.0) as usize).max(2 * burst * body);
                // Bytes that differ, so that no page is shared (an all-zero buffer could be).
                let bytes: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
                let positions = (0..viewers).map(|v| v * len / viewers.max(1)).collect();
                let headers = (0..viewers).map(|v| [(v % 251) as u8; HEADER]).collect();
                Content { bytes, headers, positions, datagram: p.datagram, staggered: true }
            }
        }
    }

    /// The parts of viewer `v`'s next message of `segments` datagrams.
    fn message(&mut self, v: usize, segments: usize) -> Vec<Part> {
        if !self.staggered {
            return vec![Part::Bytes(0..(segments * self.datagram).min(self.bytes.len()))];
        }
        let body = self.datagram.saturating_sub(HEADER).max(1);
        let mut at = self.positions[v];
        if at + segments * body > self.bytes.len() {
            at = 0;
        }
        let mut parts = Vec::with_capacity(2 * segments);
        for _ in 0..segments {
            parts.push(Part::Header(v));
            // `at + body` is within `bytes` (checked above for the whole message).
            parts.push(Part::Bytes(at..at + body));
            at += body;
        }
        self.positions[v] = at;
        parts
    }

    /// The bytes of `part`.
    fn part(&self, part: &Part) -> &[u8] {
        match part {
            Part::Header(v) => &self.headers[*v],
            Part::Bytes(range) => &self.bytes[range.clone()],
        }
    }
}

/// Drains every socket until `stop`; returns the datagrams read (a GRO message counts its
/// segments).
fn receive(sockets: &[UdpSocket], stop: &AtomicBool) -> std::io::Result<u64> {
    let mut epoll = sys::Epoll::new(1024)?;
    for (i, s) in sockets.iter().enumerate() {
        epoll.add_readable(s, i as u64)?;
    }
    let mut batch = sys::RecvBatch::new(RECV_BATCH, MESSAGE, CONTROL);
    let mut received = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for token in epoll.wait(20) {
            let socket = &sockets[token as usize];
            loop {
                let messages = batch.receive(socket);
                if messages.is_empty() {
                    break;
                }
                for (len, control) in messages {
                    let segment = gro_segment_size(control);
                    received += segment.map_or(1, |s| len.div_ceil(s.max(1))) as u64;
                }
            }
        }
    }
    Ok(received)
}

/// The calling thread's user + system CPU seconds.
fn thread_cpu_seconds() -> f64 {
    sluice_cputime::thread_seconds()
}

/// CPU seconds so far of `ksoftirqd/CPU` (0 if it cannot be found). On a thread's own CPU, softirq
/// work that runs on the way out of its system calls is already in the thread's time; what the
/// kernel defers under load runs in this thread instead.
fn ksoftirqd_seconds(cpu: usize) -> f64 {
    let name = format!("ksoftirqd/{cpu}");
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0.0 };
    for entry in dir.flatten() {
        let path = entry.path();
        if std::fs::read_to_string(path.join("comm")).is_ok_and(|c| c.trim() == name) {
            let stat = std::fs::read_to_string(path.join("stat")).unwrap_or_default();
            return sluice_cputime::parse_proc_stat(&stat)
                .map_or(0.0, |(_, ticks)| ticks as f64 / sluice_cputime::clock_ticks());
        }
    }
    0.0
}

fn sockaddr_in(a: &std::net::SocketAddr) -> (libc::sockaddr_in, libc::socklen_t) {
    let ip = match a.ip() {
        std::net::IpAddr::V4(v4) => v4,
        std::net::IpAddr::V6(_) => std::net::Ipv4Addr::LOCALHOST,
    };
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
        sin_zero: [0; 8],
    };
    (sin, std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_probe_delivers_every_datagram_it_sends() {
        let cpus = crate::machine::all_cpus();
        let payloads = [Payload::Shared, Payload::Staggered { spread: Duration::from_millis(200) }];
        for (gro, payload) in [false, true].into_iter().flat_map(|g| payloads.map(|p| (g, p))) {
            let probe = CeilingProbe {
                viewers: 4,
                bitrate: 2_000_000,
                datagram: 1_300,
                duration: Duration::from_millis(300),
                sender_cpu: cpus[0],
                receiver_cpu: *cpus.last().unwrap_or(&0),
                gro,
                payload,
            };
            let r = run(&probe).expect("probe runs");
            assert!(r.offered > 100, "{r:?}");
            assert_eq!(r.sent, r.offered, "{r:?}");
            assert_eq!(r.received, r.sent, "{r:?}");
            assert!(r.sender_cpu > 0.0 || r.receiver_cpu > 0.0, "{r:?}");
        }
    }
}
