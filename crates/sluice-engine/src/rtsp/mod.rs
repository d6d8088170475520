//! RTSP/RTP serving: the sockets, and the loop that drives `sluice_media::rtsp::RtspServer` and
//! fans its paced RTP packets out to every viewer from that one loop.
//!
//! Owns the RTSP side's descriptors (a TCP control listener, and the RTP and RTCP UDP sockets every
//! UDP viewer shares), the choice of loop (io_uring on the `uring` engine; epoll on every other,
//! the `threads` and `tokio` engines included, which the start-up line and `--help` say), the
//! batching of datagrams (`sendmmsg`, UDP GSO; [`datagrams`]) and the timers. Both loops run the
//! same sans-I/O [`RtspServer`], which holds control connections, the session table, each
//! viewer's bounded queue and the pacing, and tells the loop what to write where; the loops only
//! differ in how bytes reach and leave the kernel (readiness and `write`/`sendmmsg` for epoll,
//! submitted `send`/`sendmsg` operations for io_uring). A viewer is a queue and a timer entry, not
//! a thread or a task: 300 viewers are 300 entries in one loop.
//!
//! Not here: what requests mean, SDP, packetization, interleaved framing, pacing
//! (`sluice-media`, `sluice-proto`), or which files exist (the server's [`MediaLibrary`]). One
//! loop serves all RTSP clients: sessions may be used from a second connection of the same client
//! and RTCP arrives on one shared port, so the table lives in one place; spreading viewers over
//! several loops is left for a machine with more cores than this project's 2.

mod datagrams;
mod epoll;
mod uring;

use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use sluice_media::rtsp::MediaLibrary;
use sluice_media::rtsp::{Note, Observer, Release, RtspConfig, RtspServer, SessionTable};

use crate::counters::{Counters, Event, Shard, Syscall};
use crate::listener::set_int_opt;
use crate::{EngineError, EngineKind, Shutdown};

/// The RTSP side's sockets, bound before the server announces itself.
#[derive(Debug)]
pub struct RtspSockets {
    control: TcpListener,
    rtp: UdpSocket,
    rtcp: UdpSocket,
}

/// Set (to anything) to send every RTP datagram on its own instead of with UDP GSO, for
/// comparing the two.
pub const NO_GSO_ENV: &str = "SLUICE_NO_GSO";

/// Send buffer asked for on the shared RTP socket: a burst of keyframes for hundreds of viewers
/// leaves in one turn. The kernel caps it at `net.core.wmem_max` unless we may force it.
const UDP_SEND_BUFFER: i32 = 8 << 20;

impl RtspSockets {
    /// Binds the control listener at `addr` and an RTP/RTCP pair of UDP ports (even, and the next
    /// odd one, RFC 3550 §11) on the same address.
    pub fn bind(addr: SocketAddr) -> Result<RtspSockets, EngineError> {
        let control = TcpListener::bind(addr).map_err(|source| EngineError::Listen { addr, source })?;
        let (rtp, rtcp) = bind_udp_pair(addr).map_err(|source| EngineError::Listen { addr, source })?;
        for s in [&rtp, &rtcp] {
            s.set_nonblocking(true)
                .map_err(|source| EngineError::Setup { what: "UDP O_NONBLOCK", source })?;
        }
        control
            .set_nonblocking(true)
            .map_err(|source| EngineError::Setup { what: "RTSP listener O_NONBLOCK", source })?;
        // Best effort: a smaller buffer only means more, smaller sendmmsg batches.
        if set_int_opt(rtp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, UDP_SEND_BUFFER).is_err() {
            let _ = set_int_opt(rtp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, UDP_SEND_BUFFER);
        }
        Ok(RtspSockets { control, rtp, rtcp })
    }

    /// The control address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.control.local_addr().expect("a bound listener has an address")
    }

    /// The server's RTP and RTCP ports.
    pub fn udp_ports(&self) -> (u16, u16) {
        let port = |s: &UdpSocket| s.local_addr().map_or(0, |a| a.port());
        (port(&self.rtp), port(&self.rtcp))
    }
}

/// An even port and the odd one after it, both free. The kernel picks a port for the first
/// socket; if it is odd, or its neighbour is taken, try again, a bounded number of times.
fn bind_udp_pair(addr: SocketAddr) -> io::Result<(UdpSocket, UdpSocket)> {
    let at = |port: u16| {
        let mut a = addr;
        a.set_port(port);
        a
    };
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "no free even/odd UDP port pair");
    for _ in 0..64 {
        let rtp = UdpSocket::bind(at(0))?;
        let port = rtp.local_addr()?.port();
        if port % 2 != 0 || port == u16::MAX {
            continue;
        }
        match UdpSocket::bind(at(port + 1)) {
            Ok(rtcp) => return Ok((rtp, rtcp)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Runs the RTSP loop for `engine` (io_uring for `uring`, epoll for the others) until `shutdown`;
/// counts into `counters`. `config.udp_server_ports` is set from `sockets` here.
pub fn run<M: MediaLibrary + Send + Sync + 'static>(
    engine: EngineKind,
    mut config: RtspConfig,
    sockets: RtspSockets,
    media: Arc<M>,
    shutdown: &Shutdown,
    counters: &Counters,
) -> Result<(), EngineError> {
    config.udp_server_ports = Some(sockets.udp_ports());
    let gso = std::env::var_os(NO_GSO_ENV).is_none() && datagrams::gso_supported(sockets.rtp.as_raw_fd());
    // A shard of its own, past the event loops' (they use 0..workers).
    let shard = counters.shard(usize::MAX);
    match engine {
        EngineKind::Uring => uring::run(Parts::new(config, &*media, shard, sockets, gso), shutdown),
        _ => epoll::run(Parts::new(config, &*media, shard, sockets, gso), shutdown),
    }
}

/// What a loop starts with: the core (holding the loop's per-connection state `T`), the counters
/// it reports to, the sockets, and whether UDP GSO may be used.
pub(crate) struct Parts<'a, M: MediaLibrary, T> {
    core: RtspServer<'a, M, Shard, T>,
    counters: &'a Shard,
    sockets: RtspSockets,
    gso: bool,
}

impl<'a, M: MediaLibrary, T> Parts<'a, M, T> {
    fn new(config: RtspConfig, media: &'a M, counters: &'a Shard, sockets: RtspSockets, gso: bool) -> Self {
        let core = RtspServer::new(SessionTable::with_entropy(config, os_entropy), media, counters);
        Parts { core, counters, sockets, gso }
    }
}

/// Random numbers for the core's session ids and RTP identities, from the OS.
fn os_entropy() -> u64 {
    // getrandom fails only when the OS has no entropy source at all; a server cannot issue
    // unguessable ids then, and must not pretend to.
    getrandom::u64().expect("the OS random number generator is unavailable")
}

/// CPU time the calling thread has used (user and system), for the core's headroom
/// ([`RtspServer::account`]); one `clock_gettime` a turn.
pub(crate) fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a live timespec the call fills.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// The wall-clock time for the core's sender reports.
pub(crate) fn wall_clock() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO)
}

/// The RTSP core's reports become the engine's counters, the RTSP access log (a line per request
/// and per session start and end) and a warning for a file that cannot be read.
impl Observer for Shard {
    fn note(&self, note: Note<'_>) {
        match note {
            Note::Connected => self.add(Event::RtspConnections, 1),
            Note::BytesIn(n) => self.add(Event::BytesIn, n as u64),
            Note::Answered { requests, .. } => self.add(Event::RtspRequests, requests as u64),
            Note::Refused(error) => tracing::debug!("rtsp: refused: {error}"),
            Note::Access { peer, answered: a } => {
                let (session, transport) =
                    (a.session.as_deref().unwrap_or("-"), a.transport.as_deref().unwrap_or("-"));
                tracing::info!(target: "sluice::access", protocol = "rtsp", peer = %peer, method = a.method,
                    url = a.url, status = a.status, session, transport, "rtsp request");
            }
            Note::SessionCreated(id, path) => {
                self.add(Event::RtspSessionsCreated, 1);
                tracing::info!(target: "sluice::rtsp", session = %id, path, "rtsp session started");
            }
            Note::SessionReleased(id, why) => {
                tracing::info!(target: "sluice::rtsp", session = %id, reason = ?why, "rtsp session ended");
                self.add(
                    match why {
                        Release::Teardown => Event::RtspReleasedTeardown,
                        Release::Timeout => Event::RtspReleasedTimeout,
                        Release::ConnectionClosed => Event::RtspReleasedConnectionClosed,
                    },
                    1,
                )
            }
            Note::SampleRead => self.syscall(Syscall::Pread),
            Note::Unreadable { path, error } => {
                tracing::warn!("rtsp: cannot open {path} to stream it: {error}")
            }
            Note::FrameDropped { packets } => {
                self.add(Event::RtpFramesDropped, 1);
                self.add(Event::RtpPacketsDropped, packets as u64);
            }
            Note::PacketsSent { packets, bytes } => {
                self.add(Event::RtpPacketsSent, packets as u64);
                self.add(Event::RtpBytesSent, bytes as u64);
            }
            Note::ViewerAdmitted => self.add(Event::RtspViewersAdmitted, 1),
            Note::ViewerRefused => self.add(Event::RtspViewersRefused, 1),
            Note::LateSends(n) => self.add(Event::RtpLateSends, n as u64),
            Note::StreamViewers { path, viewers } => self.rtsp_gauges(|g| {
                if viewers == 0 {
                    g.streams.remove(path);
                } else {
                    g.streams.insert(path.to_string(), viewers as u64);
                }
            }),
            Note::Headroom(h) => {
                self.rtsp_gauges(|g| {
                    g.busy = h.busy;
                    g.room = (h.room != usize::MAX).then_some(h.room as u64);
                });
                let busy = format!("{:.2}", h.busy);
                let room = (h.room != usize::MAX).then_some(h.room);
                // A warning when the loop falls behind: viewers are losing frames (degrade) or
                // newcomers are refused (refuse) from now on.
                if h.late_sends > 0 {
                    tracing::warn!(target: "sluice::rtsp", busy, late_sends = h.late_sends, viewers = h.viewers,
                        room = ?room, "rtsp loop is late");
                } else {
                    tracing::debug!(target: "sluice::rtsp", busy, viewers = h.viewers, room = ?room, "rtsp headroom");
                }
            }
        }
    }
}

/// Counts a `sendmmsg` and makes it: `hdrs` are complete messages for `fd`.
pub(crate) fn sendmmsg(
    fd: i32,
    hdrs: &mut [libc::mmsghdr],
    counters: &crate::counters::Shard,
) -> io::Result<usize> {
    counters.syscall(Syscall::Sendmmsg);
    // SAFETY: every header points at live iovecs, buffers and addresses (see `Datagrams`).
    let n = unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), hdrs.len() as u32, libc::MSG_DONTWAIT) };
    crate::cvt(n).map(|n| n as usize)
}

#[cfg(test)]
mod tests {
    #[test]
    fn os_entropy_differs_call_to_call() {
        let draws: std::collections::HashSet<u64> = (0..64).map(|_| super::os_entropy()).collect();
        assert_eq!(draws.len(), 64);
    }
}
