//! RTSP viewers (`sluice load rtsp`): N clients, each doing DESCRIBE, SETUP (RTP over UDP or
//! TCP interleaved) and PLAY against one URL in sluice's own code, and counting the complete
//! video access units (samples) it receives and the RTP packets it lost (sequence gaps). Viewers
//! start spread evenly over a ramp; their RTSP exchanges run as tasks on one tokio runtime. Over
//! UDP their packets arrive on their own sockets (`UDP_GRO` on unless `udp_gro` is off), read by
//! `threads` receiver threads, each serving many viewers with epoll and `recvmmsg`; over TCP
//! each viewer's task reads its connection in 64 KiB chunks. Each viewer stops at the stream's
//! end (no media for `idle_end`), at the expected sample count, or at the run's deadline,
//! whichever comes first, so every run is bounded in time. The result is an [`RtspReport`]:
//! per-viewer counts plus the E5 summary (perfect-sending clients, each judged against what it
//! was sent while it played, mean and standard deviation of samples, lost packets, failures by
//! kind) and the generator's own CPU per datagram and per viewer-second.
//!
//! It owns the viewers and their accounting. It does not own the command line nor any server.
//!
//! ```no_run
//! use sluice_load::rtsp::{run_rtsp, RtspConfig, RtspTransport};
//! let mut config = RtspConfig::new("rtsp://127.0.0.1:8554/sluice-demo.mp4", 50);
//! config.transport = RtspTransport::Udp;
//! config.ramp = std::time::Duration::from_secs(5);
//! let report = run_rtsp(&config, &mut sluice_load::NoObserver).unwrap();
//! println!("{} of {} viewers got every sample", report.summary.perfect_clients, report.summary.clients);
//! ```

mod client;
mod outcome;
mod receiver;
mod reception;
mod report;
mod viewer;
mod wire;

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

pub use client::ClientError;
pub use outcome::{EndReason, FailureKind, ViewerError};
pub use report::GeneratorCost;
pub use report::{
    EndCounts, FailureCounts, ReferenceSource, RtspReport, RtspSettings, RtspSummary, ViewerResult,
};
pub use wire::{fuzz_viewer_input, gro_segment_size, gro_segments};

use crate::error::LoadError;
use crate::progress::ViewerObserver;

/// How a viewer asks for its RTP packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtspTransport {
    /// RTP/AVP/TCP interleaved on the RTSP connection.
    #[default]
    Tcp,
    /// RTP/AVP over UDP unicast to a pair of client ports.
    Udp,
}

impl RtspTransport {
    /// `tcp` or `udp`.
    pub fn name(self) -> &'static str {
        match self {
            RtspTransport::Tcp => "tcp",
            RtspTransport::Udp => "udp",
        }
    }
}

/// The longest a run may last when no `duration` is given (a live stream never ends by itself).
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(3600);

/// [`RtspConfig::udp_receive_buffer`]'s default: 4 MiB, 1.4 s of a 23 Mbps stream.
pub const DEFAULT_UDP_RECEIVE_BUFFER: usize = 4 << 20;

/// What an RTSP viewer run does.
#[derive(Debug, Clone, PartialEq)]
pub struct RtspConfig {
    /// `rtsp://host[:port]/path`.
    pub url: String,
    /// Number of viewers.
    pub clients: usize,
    /// RTP transport.
    pub transport: RtspTransport,
    /// Viewers start evenly spread over this span (viewer `i` at `ramp * i / clients`).
    pub ramp: Duration,
    /// Deadline of the whole run, from its start (ramp included); `None` means
    /// [`DEFAULT_MAX_DURATION`], with viewers normally ending at the stream's end.
    pub duration: Option<Duration>,
    /// Video samples every viewer must receive to count as perfect (the whole file is
    /// expected); when `None` each viewer must receive every sample sent to it for the time it
    /// played, from its RTP timestamps. A viewer that reaches it stops.
    pub expect_samples: Option<u64>,
    /// A playing viewer that receives nothing for this long has reached the stream's end.
    pub idle_end: Duration,
    /// Deadline for connecting, DESCRIBE, SETUP, PLAY and the first video sample.
    pub setup_timeout: Duration,
    /// Also set up the audio stream when the server offers one.
    pub audio: bool,
    /// Receive buffer, in bytes, of the viewers' RTP/RTCP UDP sockets (0 leaves the kernel's
    /// default). Players size theirs for bursts (ffmpeg's RTP input asks for 1 MiB); the
    /// kernel's default, about 208 KiB, holds 70 ms of a 23 Mbps stream, so one late wake-up of a
    /// busy generator loses packets that the server sent on time.
    pub udp_receive_buffer: usize,
    /// Whether the viewers' RTP sockets take UDP GRO messages whole (`UDP_GRO`); off models
    /// players without it, whose every read is one datagram.
    pub udp_gro: bool,
    /// Receiver threads (UDP) and runtime worker threads (the RTSP exchanges, TCP reading);
    /// by default the cores this process may run on (its CPU affinity).
    pub threads: usize,
    /// Allow targets outside loopback.
    pub allow_non_loopback: bool,
}

impl RtspConfig {
    /// `clients` viewers of `url` over TCP, all at once, until the stream ends.
    pub fn new(url: impl Into<String>, clients: usize) -> RtspConfig {
        RtspConfig {
            url: url.into(),
            clients,
            transport: RtspTransport::Tcp,
            ramp: Duration::ZERO,
            duration: None,
            expect_samples: None,
            idle_end: Duration::from_secs(3),
            setup_timeout: Duration::from_secs(10),
            audio: true,
            udp_receive_buffer: DEFAULT_UDP_RECEIVE_BUFFER,
            udp_gro: true,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            allow_non_loopback: false,
        }
    }

    /// The run's hard deadline from its start.
    pub fn deadline(&self) -> Duration {
        self.duration.unwrap_or(DEFAULT_MAX_DURATION)
    }

    /// Checks the settings and the target; returns the parsed URL and the address it resolves to.
    pub fn validate(&self) -> Result<(url::Url, SocketAddr), LoadError> {
        let invalid = |m: &str| Err(LoadError::InvalidConfig(m.to_string()));
        if self.clients == 0 {
            return invalid("--clients must be at least 1");
        }
        if self.threads == 0 {
            return invalid("--threads must be at least 1");
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return invalid("--duration must be longer than zero");
        }
        if self.expect_samples == Some(0) {
            return invalid("--expect-samples must be at least 1");
        }
        if self.idle_end.is_zero() || self.setup_timeout.is_zero() {
            return invalid("--idle-end and --setup-timeout must be longer than zero");
        }
        if self.ramp >= self.deadline() {
            return invalid("--ramp must be shorter than --duration");
        }
        resolve_rtsp_url(&self.url, self.allow_non_loopback)
    }
}

/// Parses an `rtsp://` URL and resolves its host; refuses addresses outside loopback unless
/// `allow_non_loopback`.
pub fn resolve_rtsp_url(text: &str, allow_non_loopback: bool) -> Result<(url::Url, SocketAddr), LoadError> {
    let bad = |reason: String| LoadError::InvalidTarget { url: text.to_string(), reason };
    let url = url::Url::parse(text).map_err(|e| bad(e.to_string()))?;
    if url.scheme() != "rtsp" {
        return Err(bad("only rtsp:// URLs are supported".into()));
    }
    let host = url.host_str().filter(|h| !h.is_empty()).ok_or_else(|| bad("the URL has no host".into()))?;
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port().unwrap_or(554);
    let addr = (bare, port)
        .to_socket_addrs()
        .map_err(|e| bad(format!("cannot resolve: {e}")))?
        .next()
        .ok_or_else(|| bad("the host resolves to no address".into()))?;
    if !allow_non_loopback && !addr.ip().is_loopback() {
        return Err(LoadError::NonLoopbackTarget { url: text.to_string(), addr });
    }
    Ok((url, addr))
}

/// Where an RTSP run is, for live displays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RtspProgress {
    /// Time since the run's start.
    pub elapsed: Duration,
    /// Viewers started so far.
    pub started: u64,
    /// Viewers that got a PLAY response so far.
    pub playing: u64,
    /// Viewers that have stopped (failed ones included).
    pub ended: u64,
    /// Viewers that failed.
    pub failed: u64,
    /// Video samples received by all viewers so far.
    pub samples: u64,
    /// RTP packets lost by all viewers so far.
    pub lost_packets: u64,
}

impl std::fmt::Display for RtspProgress {
    /// One line for live displays (the CLI's status line, the lab's progress bar).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}s  viewers {} started, {} playing, {} ended, {} failed  samples {}  lost packets {}",
            self.elapsed.as_secs(),
            self.started,
            self.playing,
            self.ended,
            self.failed,
            self.samples,
            self.lost_packets
        )
    }
}

/// Counters the viewers bump as they go (relaxed atomics: a display, not a measurement).
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub viewers: crate::viewer_report::ViewerCounts,
    pub samples: AtomicU64,
    pub lost_packets: AtomicU64,
}

impl Live {
    fn snapshot(&self, elapsed: Duration) -> RtspProgress {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (started, playing, ended, failed) = self.viewers.now();
        RtspProgress {
            elapsed,
            started,
            playing,
            ended,
            failed,
            samples: get(&self.samples),
            lost_packets: get(&self.lost_packets),
        }
    }
}

/// When viewer `index` of `clients` starts, from the run's start.
pub fn start_offset(index: usize, clients: usize, ramp: Duration) -> Duration {
    if clients <= 1 {
        return Duration::ZERO;
    }
    ramp.mul_f64(index as f64 / clients as f64)
}

/// Runs `config.clients` viewers to the end and reports on them, telling `observer` about every
/// second.
/// `observer` is called on the thread that called it.
pub fn run_rtsp(
    config: &RtspConfig,
    observer: &mut dyn ViewerObserver<RtspProgress>,
) -> Result<RtspReport, LoadError> {
    let (url, addr) = config.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .thread_name("sluice-load-rtsp")
        .enable_all()
        .build()
        .map_err(LoadError::Runtime)?;
    let receivers = match config.transport {
        RtspTransport::Udp => {
            Some(Arc::new(receiver::Receivers::start(config.threads).map_err(LoadError::Runtime)?))
        }
        RtspTransport::Tcp => None,
    };
    let cpu_before = sluice_cputime::process_seconds();
    let started_at = SystemTime::now();
    let start = Instant::now();
    let live = Arc::new(Live::default());
    let results = runtime.block_on(async {
        let start = tokio::time::Instant::from_std(start);
        let deadline = start + config.deadline();
        let plan = Arc::new(viewer::Plan {
            url,
            addr,
            transport: config.transport,
            expect_samples: config.expect_samples,
            idle_end: config.idle_end,
            setup_timeout: config.setup_timeout,
            audio: config.audio,
            udp_receive_buffer: config.udp_receive_buffer,
            udp_gro: config.udp_gro,
            receivers: receivers.clone(),
            run_start: start,
            deadline,
            live: live.clone(),
        });
        let tasks: Vec<_> = (0..config.clients)
            .map(|index| {
                let plan = plan.clone();
                let at = start + start_offset(index, config.clients, config.ramp);
                tokio::spawn(async move {
                    let result = viewer::run_viewer(index, at, &plan).await;
                    plan.live.viewers.ended.fetch_add(1, Ordering::Relaxed);
                    if result.failure.is_some() {
                        plan.live.viewers.failed.fetch_add(1, Ordering::Relaxed);
                    }
                    result
                })
            })
            .collect();
        let results = crate::progress::join_ticking(tasks, start, ViewerResult::panicked, |elapsed| {
            observer.on_second(&plan.live.snapshot(elapsed))
        })
        .await;
        observer.on_finish();
        results
    });
    if let Some(r) = &receivers {
        r.stop();
    }
    runtime.shutdown_timeout(Duration::from_millis(100));
    let elapsed = start.elapsed();
    let cpu = sluice_cputime::process_seconds() - cpu_before;
    let mut report = RtspReport::build(config, started_at, elapsed, results);
    report.summary.generator = GeneratorCost::from_viewers(&report.viewers, cpu);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn viewers_spread_over_the_ramp() {
        let ramp = Duration::from_secs(5);
        assert_eq!(start_offset(0, 10, ramp), Duration::ZERO);
        assert_eq!(start_offset(5, 10, ramp), Duration::from_millis(2500));
        assert_eq!(start_offset(9, 10, ramp), Duration::from_millis(4500));
        assert_eq!(start_offset(0, 1, ramp), Duration::ZERO);
        assert_eq!(start_offset(3, 4, Duration::ZERO), Duration::ZERO);
    }

    #[test]
    fn urls_and_loopback() {
        let (url, addr) = resolve_rtsp_url("rtsp://127.0.0.1:8554/a/b.mp4", false).unwrap();
        assert_eq!((url.path(), addr.port()), ("/a/b.mp4", 8554));
        assert_eq!(resolve_rtsp_url("rtsp://127.0.0.1/x", false).unwrap().1.port(), 554);
        assert_eq!(resolve_rtsp_url("rtsp://[::1]:9/x", false).unwrap().1.port(), 9);
        for bad in ["http://127.0.0.1/x", "rtsp://", "not a url", "rtsp://127.0.0.1:99999/x"] {
            assert!(matches!(resolve_rtsp_url(bad, false), Err(LoadError::InvalidTarget { .. })), "{bad}");
        }
        assert!(matches!(
            resolve_rtsp_url("rtsp://192.0.2.1:554/x", false),
            Err(LoadError::NonLoopbackTarget { .. })
        ));
        assert!(resolve_rtsp_url("rtsp://192.0.2.1:554/x", true).is_ok());
    }

    #[test]
    fn settings_are_checked() {
        let ok = RtspConfig::new("rtsp://127.0.0.1:8554/x", 3);
        assert!(ok.validate().is_ok());
        let mut c = ok.clone();
        c.clients = 0;
        assert!(matches!(c.validate(), Err(LoadError::InvalidConfig(_))));
        let mut c = ok.clone();
        c.expect_samples = Some(0);
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.duration = Some(Duration::from_secs(2));
        c.ramp = Duration::from_secs(5);
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.idle_end = Duration::ZERO;
        assert!(c.validate().is_err());
        assert_eq!(ok.deadline(), DEFAULT_MAX_DURATION);
    }

    #[test]
    fn a_refused_connection_is_a_connect_failure() {
        // A port nothing listens on: bind, read the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut config = RtspConfig::new(format!("rtsp://127.0.0.1:{port}/none"), 2);
        config.threads = 1;
        config.setup_timeout = Duration::from_secs(5);
        config.duration = Some(Duration::from_secs(10));
        let report = run_rtsp(&config, &mut crate::NoObserver).unwrap();
        assert_eq!(report.summary.clients, 2);
        assert_eq!(report.summary.failures.connect, 2, "{:?}", report.viewers);
        assert_eq!(report.summary.playing_clients, 0);
        assert_eq!(report.summary.perfect_clients, 0);
        assert_eq!(report.summary.reference_samples, 0);
        assert!(report.viewers.iter().all(|v| v.end == EndReason::Failed && v.error.is_some()));
    }

    /// A listener on a free loopback port that handles each connection with `answer`.
    fn peer(answer: fn(std::net::TcpStream)) -> u16 {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for conn in listener.incoming().map_while(Result::ok) {
                std::thread::spawn(move || answer(conn));
            }
        });
        port
    }

    #[test]
    fn an_error_status_is_a_describe_failure_and_silence_a_timeout() {
        use std::io::{BufRead, BufReader, Write};
        let not_found = peer(|conn| {
            let mut reader = BufReader::new(conn.try_clone().unwrap());
            let mut cseq = String::new();
            let mut line = String::new();
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Some(v) = line.strip_prefix("CSeq:") {
                    cseq = v.trim().to_string();
                }
                if line == "\r\n" {
                    let mut w = &conn;
                    let _ = write!(w, "RTSP/1.0 404 Not Found\r\nCSeq: {cseq}\r\n\r\n");
                }
                line.clear();
            }
        });
        let mut config = RtspConfig::new(format!("rtsp://127.0.0.1:{not_found}/none"), 1);
        config.threads = 1;
        let report = run_rtsp(&config, &mut crate::NoObserver).unwrap();
        assert_eq!(report.summary.failures.describe, 1, "{:?}", report.viewers);
        assert!(report.viewers[0].error.as_deref().unwrap_or_default().contains("DESCRIBE"));

        let silent = peer(|conn| {
            std::thread::sleep(Duration::from_secs(3));
            drop(conn);
        });
        let mut config = RtspConfig::new(format!("rtsp://127.0.0.1:{silent}/none"), 1);
        config.threads = 1;
        config.setup_timeout = Duration::from_millis(300);
        let report = run_rtsp(&config, &mut crate::NoObserver).unwrap();
        assert_eq!(report.summary.failures.timeout, 1, "{:?}", report.viewers);

        // The run's deadline cutting a setup short ends the viewer without counting a failure.
        config.setup_timeout = Duration::from_secs(10);
        config.duration = Some(Duration::from_millis(300));
        let report = run_rtsp(&config, &mut crate::NoObserver).unwrap();
        assert_eq!((report.summary.failures.total(), report.summary.ends.deadline), (0, 1));
    }
}
