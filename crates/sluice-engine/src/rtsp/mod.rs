//! RTSP/RTP serving: the sockets, and the loop that drives the RTSP server core (an
//! [`RtspCore`], which the server makes for each loop through [`RtspCores`]) and fans its paced
//! RTP packets out to every viewer from that one loop.
//!
//! Owns the RTSP side's descriptors (a TCP control listener, and the RTP and RTCP UDP sockets every
//! UDP viewer shares, on which the loop also reads viewers' RTCP and publishers' RTP), the choice of loop (io_uring on the `uring` engine; epoll on every other,
//! the `threads` and `tokio` engines included, which the start-up line and `--help` say), the
//! batching of datagrams (`sendmmsg`, UDP GSO; [`datagrams`]) and the timers. Both loops run the
//! same sans-I/O core, which holds control connections, the session table, each
//! viewer's bounded queue and the pacing, and tells the loop what to write where; the loops only
//! differ in how bytes reach and leave the kernel (readiness and `write`/`sendmmsg` for epoll,
//! submitted `send`/`sendmsg` operations for io_uring). A viewer is a queue and a timer entry, not
//! a thread or a task: 300 viewers are 300 entries in one loop.
//!
//! Several loops (`--rtsp-loops`, one thread each) share the work on a machine with the cores
//! for it: every loop accepts on the one control listener and keeps the connections of the
//! clients whose address hashes to it, handing the others to their loop ([`handoff`]); each loop
//! has its own RTP/RTCP port pair, which its `SETUP` replies name, so a client's RTCP reaches
//! the loop holding its session. What must hold for the server rather than a loop is shared: the
//! catalogue and the `--rtsp-max-viewers` places (the server's [`RtspCores`] shares them between
//! the cores it makes) and the counters (a shard per loop, added up, with the loop's gauges
//! labelled by its index). Each loop's core keeps its own sample cache: viewers on different
//! loops read a shared sample once per loop.
//!
//! Not here: what requests mean, SDP, packetization, interleaved framing, pacing (the core, which
//! the engine knows only as an [`RtspCore`]), which files exist, or the RTSP access log and session
//! lines (the server's, beside HTTP's access log; the engine counts the [`LoopNote`]s the core
//! gives and logs only its loops' health).

mod datagrams;
mod epoll;
mod handoff;
mod uring;

use std::io;
use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sluice_proto::rtsp::Release;
pub use sluice_proto::rtsp::{LoopNote, RtspCore};

use self::handoff::Handoff;

use crate::config::EngineKind;
use crate::counters::ConnectionLimit;
use crate::counters::{Counters, Event, Shard, Syscall};
use crate::error::EngineError;
use crate::listener::set_int_opt;
use crate::shutdown::Shutdown;

/// The RTSP side's sockets, bound before the server announces itself: the control listener
/// and an RTP/RTCP port pair per loop.
#[derive(Debug)]
pub struct RtspSockets {
    control: TcpListener,
    udp: Vec<(UdpSocket, UdpSocket)>,
}

/// One loop's sockets: the shared control listener, its own port pair, and its end of the
/// hand-over of connections between loops.
pub(crate) struct LoopSockets {
    control: TcpListener,
    rtp: UdpSocket,
    rtcp: UdpSocket,
    handoff: Handoff,
}

/// How long a loop keeps sending after shutdown starts, for the final RTCP BYE to every viewer
/// and the last writes to control connections ([`RtspCore::farewell`]), at most.
pub(crate) const DRAIN: Duration = Duration::from_secs(1);
/// The longest a draining loop sleeps between turns.
pub(crate) const DRAIN_TURN: Duration = Duration::from_millis(5);

/// Loops the counters can tell apart (each has a shard of its own at the top of the range).
pub const MAX_RTSP_LOOPS: usize = 32;

/// Set (to anything) to send every RTP datagram on its own instead of with UDP GSO, for
/// comparing the two.
pub const NO_GSO_ENV: &str = "SLUICE_NO_GSO";

/// Send buffer asked for on the shared RTP socket: a burst of keyframes for hundreds of viewers
/// leaves in one turn. The kernel caps it at `net.core.wmem_max` unless we may force it.
const UDP_SEND_BUFFER: i32 = 8 << 20;

impl RtspSockets {
    /// Binds the control listener at `addr` and, for each of `loops` loops, an RTP/RTCP pair of
    /// UDP ports (even, and the next odd one, RFC 3550 §11) on the same address.
    pub fn bind(addr: SocketAddr, loops: usize) -> Result<RtspSockets, EngineError> {
        RtspSockets::bind_in(addr, loops, None)
    }

    /// [`RtspSockets::bind`], taking the RTP/RTCP pairs from `rtp_ports` when given (a
    /// firewall's range): the first free even/odd pairs in it.
    pub fn bind_in(
        addr: SocketAddr,
        loops: usize,
        rtp_ports: Option<std::ops::RangeInclusive<u16>>,
    ) -> Result<RtspSockets, EngineError> {
        if !(1..=MAX_RTSP_LOOPS).contains(&loops) {
            return Err(EngineError::Config(format!(
                "RTSP loops must be 1 to {MAX_RTSP_LOOPS}, not {loops}"
            )));
        }
        let control = TcpListener::bind(addr).map_err(|source| EngineError::Listen { addr, source })?;
        control
            .set_nonblocking(true)
            .map_err(|source| EngineError::Setup { what: "RTSP listener O_NONBLOCK", source })?;
        let mut udp = Vec::with_capacity(loops);
        let mut next_in_range = rtp_ports.as_ref().map(|r| *r.start());
        for _ in 0..loops {
            let pair = match (&rtp_ports, &mut next_in_range) {
                (Some(range), Some(next)) => bind_udp_pair_in(addr, range, next),
                _ => bind_udp_pair(addr),
            };
            let (rtp, rtcp) = pair.map_err(|source| EngineError::Listen { addr, source })?;
            for s in [&rtp, &rtcp] {
                s.set_nonblocking(true)
                    .map_err(|source| EngineError::Setup { what: "UDP O_NONBLOCK", source })?;
            }
            // Best effort: a smaller buffer only means more, smaller sendmmsg batches.
            if set_int_opt(rtp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, UDP_SEND_BUFFER).is_err()
            {
                let _ = set_int_opt(rtp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, UDP_SEND_BUFFER);
            }
            udp.push((rtp, rtcp));
        }
        Ok(RtspSockets { control, udp })
    }

    /// How many loops the sockets are for.
    pub fn loops(&self) -> usize {
        self.udp.len()
    }

    /// The control address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.control.local_addr().expect("a bound listener has an address")
    }

    /// Each loop's RTP and RTCP ports, by loop.
    pub fn udp_ports(&self) -> Vec<(u16, u16)> {
        self.udp.iter().map(|(rtp, rtcp)| (port_of(rtp), port_of(rtcp))).collect()
    }
}

fn port_of(s: &UdpSocket) -> u16 {
    s.local_addr().map_or(0, |a| a.port())
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

/// Even/odd port pairs (RTP on the even port, RTCP on the next) that fit in `range`.
pub fn pairs_in(range: std::ops::RangeInclusive<u16>) -> usize {
    let first = u32::from(*range.start()).next_multiple_of(2);
    let last = u32::from(*range.end());
    if last < first + 1 {
        0
    } else {
        ((last - first - 1) / 2 + 1) as usize
    }
}

/// The first free even/odd pair in `range` at or after `next` (moved past it).
fn bind_udp_pair_in(
    addr: SocketAddr,
    range: &std::ops::RangeInclusive<u16>,
    next: &mut u16,
) -> io::Result<(UdpSocket, UdpSocket)> {
    let at = |port: u16| {
        let mut a = addr;
        a.set_port(port);
        a
    };
    let mut port = next.next_multiple_of(2);
    while port < *range.end() && port >= *range.start() {
        let rtp = UdpSocket::bind(at(port));
        let rtcp = rtp.as_ref().ok().map(|_| UdpSocket::bind(at(port + 1)));
        port = port.saturating_add(2);
        *next = port;
        if let (Ok(rtp), Some(Ok(rtcp))) = (rtp, rtcp) {
            return Ok((rtp, rtcp));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("no free even/odd RTP/RTCP port pair left in {}-{}", range.start(), range.end()),
    ))
}

/// What the server gives the RTSP loops: a core for each, made on the loop's own thread.
pub trait RtspCores: Sync {
    /// Loop `setup.index`'s core, holding the loop's per-connection state `T`, serving on
    /// `setup.udp_ports` (which its `SETUP` replies name), reporting what the loop counts to
    /// `counters`.
    fn core<'a, T: 'a>(
        &'a self,
        setup: LoopSetup,
        counters: &'a dyn Fn(LoopNote<'_>),
    ) -> Box<dyn RtspCore<T> + 'a>;
}

/// What a loop's core is made for.
#[derive(Debug, Clone, Copy)]
pub struct LoopSetup {
    /// The loop's index, from 0.
    pub index: usize,
    /// Its RTP and RTCP ports.
    pub udp_ports: (u16, u16),
    /// The time it starts at.
    pub now: Instant,
}

/// Runs the RTSP loops for `engine` (io_uring for `uring`, epoll for the others), one per port
/// pair of `sockets` on threads of their own, each driving a core from `cores`, until `shutdown`;
/// counts into `counters`, a shard per loop. A loop that fails triggers `shutdown`, so the others
/// stop and the error is reported.
pub fn run<C: RtspCores>(
    engine: EngineKind,
    sockets: RtspSockets,
    cores: &C,
    shutdown: &Shutdown,
    counters: &Counters,
) -> Result<(), EngineError> {
    let RtspSockets { control, udp } = sockets;
    let gso = std::env::var_os(NO_GSO_ENV).is_none()
        && udp.first().is_some_and(|(rtp, _)| datagrams::gso_supported(rtp.as_raw_fd()));
    let handoffs =
        Handoff::set(udp.len()).map_err(|source| EngineError::Setup { what: "eventfd", source })?;
    // Control connections take places under the server's --max-connections, as HTTP's do.
    let limit = counters.connection_limit(usize::MAX);
    let mut loops = Vec::with_capacity(udp.len());
    for ((rtp, rtcp), handoff) in udp.into_iter().zip(handoffs) {
        let control = control
            .try_clone()
            .map_err(|source| EngineError::Setup { what: "dup the RTSP listener", source })?;
        loops.push(LoopSockets { control, rtp, rtcp, handoff });
    }
    let run_one = &|sockets: LoopSockets| {
        let index = sockets.handoff.index();
        let shard = counters.rtsp_loop(index);
        let observer = LoopObserver { shard };
        let notes = |note: LoopNote<'_>| observer.note(note);
        let setup = LoopSetup {
            index,
            udp_ports: (port_of(&sockets.rtp), port_of(&sockets.rtcp)),
            now: Instant::now(),
        };
        let limit = Arc::clone(&limit);
        let result = match engine {
            EngineKind::Uring => {
                let core = cores.core(setup, &notes);
                uring::run(Parts { core, counters: shard, sockets, gso, limit }, shutdown)
            }
            _ => {
                let core = cores.core(setup, &notes);
                epoll::run(Parts { core, counters: shard, sockets, gso, limit }, shutdown)
            }
        };
        if result.is_err() {
            shutdown.trigger();
        }
        result
    };
    std::thread::scope(|scope| {
        let mut threads = Vec::new();
        let last = loops.pop().expect("at least one loop");
        for l in loops {
            let index = l.handoff.index();
            let spawned = std::thread::Builder::new()
                .name(format!("sluice-rtsp-{index}"))
                .spawn_scoped(scope, move || run_one(l))
                .map_err(|source| EngineError::Setup { what: "spawn rtsp loop", source });
            match spawned {
                Ok(t) => threads.push(t),
                Err(e) => {
                    shutdown.trigger();
                    return Err(e);
                }
            }
        }
        // The last loop runs on the calling thread.
        let mut result = run_one(last);
        for t in threads {
            let joined =
                t.join().unwrap_or_else(|_| Err(EngineError::Config("an RTSP loop panicked".into())));
            result = result.and(joined);
        }
        result
    })
}

/// What a loop starts with: the core (holding the loop's per-connection state `T`), the counters
/// it reports to, its sockets, whether UDP GSO may be used, and the connection limit its control
/// connections share with HTTP's.
pub(crate) struct Parts<'a, T> {
    core: Box<dyn RtspCore<T> + 'a>,
    counters: &'a Shard,
    sockets: LoopSockets,
    gso: bool,
    limit: Arc<ConnectionLimit>,
}

/// The time a loop's thread has needed the CPU, for the core's headroom ([`RtspCore::account`]):
/// the CPU time it used (user and system) plus the time it waited, runnable, for a CPU others
/// held (the scheduler's run delay, from `/proc/thread-self/schedstat`). On a core of its own the
/// wait is nil; on a shared one, CPU time alone made a loop look 0.6 to 0.7 busy while it was
/// already late, and under `refuse` it admitted 497 to 646 viewers where it kept 491 perfect
/// (shared machine, 2026-11-26). Opened on the loop's own thread; CPU time alone where the
/// file is missing.
pub(crate) struct Demand {
    schedstat: Option<std::fs::File>,
}

impl Demand {
    /// For the calling thread.
    pub(crate) fn of_this_thread() -> Demand {
        Demand { schedstat: std::fs::File::open("/proc/thread-self/schedstat").ok() }
    }

    /// CPU time used plus run delay, in all; one `pread` a turn.
    pub(crate) fn now(&self) -> Duration {
        let from_schedstat = self.schedstat.as_ref().and_then(|f| {
            use std::os::unix::fs::FileExt;
            let mut buf = [0u8; 96];
            let n = f.read_at(&mut buf, 0).ok()?;
            let text = std::str::from_utf8(&buf[..n]).ok()?;
            let mut fields = text.split_ascii_whitespace().map(|f| f.parse::<u64>().ok());
            let (cpu, waited) = (fields.next()??, fields.next()??);
            Some(Duration::from_nanos(cpu.saturating_add(waited)))
        });
        from_schedstat.unwrap_or_else(thread_cpu)
    }
}

/// CPU time the calling thread has used (user and system).
use crate::sys::fd::thread_cpu;

/// The wall-clock time for the core's sender reports.
pub(crate) fn wall_clock() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO)
}

/// Where a loop's reports go: the engine's counters and gauges, and the loop's own warning when
/// it falls behind.
pub(crate) struct LoopObserver<'a> {
    shard: &'a Shard,
}

impl LoopObserver<'_> {
    fn note(&self, note: LoopNote<'_>) {
        let shard = self.shard;
        match note {
            LoopNote::Connected => shard.add(Event::RtspConnections, 1),
            LoopNote::BytesIn(n) => shard.add(Event::BytesIn, n as u64),
            LoopNote::Answered(requests) => shard.add(Event::RtspRequests, requests as u64),
            LoopNote::SessionCreated(id) => {
                shard.add(Event::RtspSessionsCreated, 1);
                shard.rtsp_session_started(id);
            }
            LoopNote::SessionReleased(id, why) => {
                shard.rtsp_session_ended(id);
                shard.add(
                    match why {
                        Release::Teardown => Event::RtspReleasedTeardown,
                        Release::Timeout => Event::RtspReleasedTimeout,
                        Release::ConnectionClosed => Event::RtspReleasedConnectionClosed,
                    },
                    1,
                )
            }
            LoopNote::SampleRead => shard.syscall(Syscall::Pread),
            LoopNote::FrameDropped { packets } => {
                shard.add(Event::RtpFramesDropped, 1);
                shard.add(Event::RtpPacketsDropped, packets as u64);
            }
            LoopNote::PacketsSent { packets, bytes } => {
                shard.add(Event::RtpPacketsSent, packets as u64);
                shard.add(Event::RtpBytesSent, bytes as u64);
            }
            LoopNote::ViewerAdmitted => shard.add(Event::RtspViewersAdmitted, 1),
            LoopNote::ViewerRefused => shard.add(Event::RtspViewersRefused, 1),
            LoopNote::LateSends(n) => shard.add(Event::RtpLateSends, n as u64),
            LoopNote::StreamViewers { path, viewers } => shard.rtsp_gauges(|g| {
                if viewers == 0 {
                    g.streams.remove(path);
                } else {
                    g.streams.insert(path.to_string(), viewers as u64);
                }
            }),
            LoopNote::Headroom(h) => {
                shard.rtsp_gauges(|g| {
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
    // Every header points at live iovecs, buffers and addresses (see `Datagrams`).
    crate::sys::socket::sendmmsg(fd, hdrs)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every `.rs` file under `dir` whose text names `needle`.
    fn files_naming(dir: &Path, needle: &str, found: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).expect("read the source directory").flatten() {
            let path = entry.path();
            if path.is_dir() {
                files_naming(&path, needle, found);
            } else if path.extension().is_some_and(|e| e == "rs")
                && std::fs::read_to_string(&path).expect("read a source file").contains(needle)
            {
                found.push(path.display().to_string());
            }
        }
    }

    /// A thread's demand counts its CPU time: spinning for 20 ms adds about that much.
    #[test]
    fn demand_counts_the_threads_cpu_time() {
        // Robust to a busy machine (CI shares two cores): spinning grows it however long the
        // thread waits for a core, and sleeping does not grow it, however long the sleep lasts.
        let demand = super::Demand::of_this_thread();
        let before = demand.now();
        let start = std::time::Instant::now();
        while demand.now().saturating_sub(before) < std::time::Duration::from_millis(20) {
            std::hint::black_box(0u64);
            assert!(start.elapsed() < std::time::Duration::from_secs(30), "spinning never counted 20 ms");
        }
        let before = demand.now();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let grown = demand.now().saturating_sub(before);
        assert!(grown < std::time::Duration::from_millis(25), "a 50 ms sleep counted {grown:?} of CPU time");
    }

    /// The loops reach the RTSP core only through `RtspCore` (as HTTP's reach `Session`): the
    /// engine neither depends on `sluice-media` nor names its RTSP types.
    #[test]
    fn the_engine_reaches_the_rtsp_core_only_through_its_trait() {
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let tree = std::process::Command::new(cargo)
            .args(["tree", "-p", "sluice-engine", "-e", "normal", "--prefix", "none", "--offline"])
            .current_dir(manifest)
            .output()
            .expect("run cargo tree");
        let tree = String::from_utf8_lossy(&tree.stdout);
        assert!(tree.contains("sluice-proto"), "cargo tree gave no dependencies:\n{tree}");
        assert!(!tree.contains("sluice-media"), "sluice-engine depends on sluice-media:\n{tree}");
        let mut naming = Vec::new();
        // Spelled in two pieces so this file does not name it.
        let media = concat!("sluice", "_media");
        files_naming(&manifest.join("src"), media, &mut naming);
        assert!(naming.is_empty(), "sluice-engine sources name {media}: {naming:?}");
    }
}
