//! One RTSP viewer: waits for its start time, opens a retina session (DESCRIBE, SETUP of the
//! first video stream and optionally the audio stream, PLAY), then reads its RTP packets and
//! counts video access units, audio frames, bytes and lost RTP packets until the stream ends, the
//! expected count is reached or the run's deadline passes. Failures are typed ([`ViewerError`])
//! and counted by [`FailureKind`]; the viewer never panics on what the server sends.
//!
//! Access units are counted from the packets' marker bits and sequence numbers
//! ([`AccessUnits`]), not by depacketizing: RFC 6184 sets the marker on an access unit's last
//! packet, so a unit is complete when its marker arrives with no packet lost since the previous
//! one. Depacketizing cost more than everything else: retina's Annex B scan and `memchr` were 28%
//! of the generator's CPU receiving 100 × 23 Mbps (perf, 2026-11-22), and one core must receive
//! 300 of them. Nothing is allocated per packet here.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use retina::client::PacketItem;
use retina::client::{
    InitialTimestampPolicy, PlayOptions, Session, SessionGroup, SessionOptions, SetupOptions,
    TcpTransportOptions, Transport, UdpTransportOptions,
};
use tokio::time::Instant;

use super::report::ViewerResult;
use super::RtspTransport;

/// What every viewer of a run shares.
pub(crate) struct Plan {
    pub url: url::Url,
    pub transport: RtspTransport,
    pub expect_samples: Option<u64>,
    pub idle_end: Duration,
    pub setup_timeout: Duration,
    pub audio: bool,
    pub udp_receive_buffer: usize,
    pub group: Arc<SessionGroup>,
    pub run_start: Instant,
    pub deadline: Instant,
    pub live: super::Live,
}

/// Why a viewer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// No media for the idle span after playing: the stream's end.
    StreamEnd,
    /// The server ended the session (the stream closed).
    Closed,
    /// The expected number of samples arrived.
    Expected,
    /// The run's deadline passed first.
    Deadline,
    /// The viewer failed (see its failure kind).
    Failed,
}

/// What kind of failure stopped a viewer, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The TCP connection to the server could not be made.
    Connect,
    /// DESCRIBE failed (error status, bad SDP, connection lost).
    Describe,
    /// The presentation has no video stream.
    NoVideo,
    /// SETUP failed (for example 461 for an unsupported transport).
    Setup,
    /// PLAY failed.
    Play,
    /// Connecting, DESCRIBE, SETUP or PLAY took longer than the setup timeout.
    Timeout,
    /// Playing, but no video sample arrived within the setup timeout.
    NoMedia,
    /// The stream failed while playing (read error, malformed RTP, depacketization error).
    Stream,
    /// The viewer task panicked (a bug in the generator or retina).
    Panicked,
}

impl FailureKind {
    /// Every kind, in report order.
    pub const ALL: [FailureKind; 9] = [
        FailureKind::Connect,
        FailureKind::Describe,
        FailureKind::NoVideo,
        FailureKind::Setup,
        FailureKind::Play,
        FailureKind::Timeout,
        FailureKind::NoMedia,
        FailureKind::Stream,
        FailureKind::Panicked,
    ];

    /// The name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::Describe => "describe",
            FailureKind::NoVideo => "no_video",
            FailureKind::Setup => "setup",
            FailureKind::Play => "play",
            FailureKind::Timeout => "timeout",
            FailureKind::NoMedia => "no_media",
            FailureKind::Stream => "stream",
            FailureKind::Panicked => "panicked",
        }
    }
}

/// Why a viewer failed.
#[derive(Debug, thiserror::Error)]
pub enum ViewerError {
    /// No connection to the server.
    #[error("cannot connect: {0}")]
    Connect(retina::Error),
    /// DESCRIBE failed.
    #[error("DESCRIBE failed: {0}")]
    Describe(retina::Error),
    /// The SDP has no video stream.
    #[error("the presentation has no video stream")]
    NoVideo,
    /// SETUP failed.
    #[error("SETUP failed: {0}")]
    Setup(retina::Error),
    /// PLAY failed.
    #[error("PLAY failed: {0}")]
    Play(retina::Error),
    /// Setting up took too long.
    #[error("no PLAY response within {0:?} of starting")]
    Timeout(Duration),
    /// Playing but silent.
    #[error("no video sample within {0:?} of starting")]
    NoMedia(Duration),
    /// The stream failed while playing.
    #[error("stream failed: {0}")]
    Stream(retina::Error),
}

impl ViewerError {
    /// The kind this error is counted as.
    pub fn kind(&self) -> FailureKind {
        match self {
            ViewerError::Connect(_) => FailureKind::Connect,
            ViewerError::Describe(_) => FailureKind::Describe,
            ViewerError::NoVideo => FailureKind::NoVideo,
            ViewerError::Setup(_) => FailureKind::Setup,
            ViewerError::Play(_) => FailureKind::Play,
            ViewerError::Timeout(_) => FailureKind::Timeout,
            ViewerError::NoMedia(_) => FailureKind::NoMedia,
            ViewerError::Stream(_) => FailureKind::Stream,
        }
    }

    /// The first line of the message (retina appends connection context on further lines).
    pub fn short_message(&self) -> String {
        let text = self.to_string();
        text.lines().next().unwrap_or_default().to_string()
    }
}

/// Audio encodings retina depacketizes; others are left unset so `demuxed()` accepts the session.
fn audio_supported(encoding: &str) -> bool {
    ["mpeg4-generic", "pcmu", "pcma", "l16", "g722", "opus"].iter().any(|e| encoding.eq_ignore_ascii_case(e))
}

fn transport(t: RtspTransport) -> Transport {
    match t {
        RtspTransport::Tcp => Transport::Tcp(TcpTransportOptions::default()),
        RtspTransport::Udp => Transport::Udp(UdpTransportOptions::default()),
    }
}

/// The streams a viewer set up.
struct Streams {
    video: usize,
    /// The audio stream, and whether it is AAC (`mpeg4-generic`, counted by its AU headers).
    audio: Option<(usize, bool)>,
}

/// Counts the complete access units of one RTP stream; see the module docs.
#[derive(Debug, Default)]
pub(crate) struct AccessUnits {
    /// A packet of the unit in progress was lost.
    damaged: bool,
}

impl AccessUnits {
    /// One packet, `loss` packets after the one before it: `Some(complete)` when it ends a unit.
    pub(crate) fn push(&mut self, loss: u16, mark: bool) -> Option<bool> {
        self.damaged |= loss > 0;
        if !mark {
            return None;
        }
        Some(!std::mem::take(&mut self.damaged))
    }
}

/// The video samples a viewer was sent for the time it played, from the RTP timestamps of its
/// packets: the span of presentation times from the `PLAY`'s start (`RTP-Info`'s `rtptime`, time
/// 0 of retina's timestamps) to the latest one received, divided by the frame interval (the
/// smallest step between two packets' timestamps). A frame the server skipped (its
/// `degrade` policy drops whole frames before they are packetized, so no sequence number goes
/// missing) leaves a hole in that span, which is how a viewer that lost no packet can still fall
/// short. Constant memory per viewer: a viewer of an hour keeps the same five numbers as one of
/// a second. It assumes a constant frame rate (the smallest step is every step); a file with a
/// variable one is judged with `--expect-samples` instead.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct SentSpan {
    /// Earliest and latest presentation time received, in RTP clock ticks from the start.
    first: i64,
    last: Option<i64>,
    /// The previous packet's timestamp.
    previous: Option<i64>,
    /// The smallest nonzero step between consecutive packets' timestamps: one frame.
    interval: Option<i64>,
    /// How far behind the latest timestamp a packet arrived at most (B-frames come after the
    /// frame they precede): frames a viewer cut off mid-stream may still be owed at its end.
    behind: i64,
}

impl SentSpan {
    /// A video packet with RTP timestamp `ticks` since the start arrived.
    pub(crate) fn push(&mut self, ticks: i64) {
        self.first = self.first.min(ticks);
        let last = self.last.map_or(ticks, |l| l.max(ticks));
        self.behind = self.behind.max(last - ticks);
        self.last = Some(last);
        if let Some(step) = self.previous.map(|p| (ticks - p).abs()).filter(|&d| d > 0) {
            self.interval = Some(self.interval.map_or(step, |i| i.min(step)));
        }
        self.previous = Some(ticks);
    }

    /// The samples sent for the span played. `cut`: the viewer stopped before the stream's end,
    /// so the frames presented before its latest one but sent after it (reordered, at most
    /// the deepest reordering seen) are not owed.
    pub(crate) fn expected(&self, cut: bool) -> u64 {
        let Some(last) = self.last else { return 0 };
        let Some(interval) = self.interval else { return 1 };
        let frames = |ticks: i64| ((ticks + interval / 2) / interval) as u64;
        let span = frames(last - self.first) + 1;
        if cut {
            span.saturating_sub(frames(self.behind))
        } else {
            span
        }
    }
}

/// Audio frames in an RTP payload: the AU headers of AAC-hbr (RFC 3640 §3.2.1, 16 bits each), or
/// one frame a packet for other encodings.
fn audio_frames(payload: &[u8], aac: bool) -> u64 {
    match payload {
        [hi, lo, ..] if aac => u64::from(u16::from_be_bytes([*hi, *lo]) / 16),
        _ => 1,
    }
}

type Playing = std::pin::Pin<Box<Session<retina::client::Playing>>>;

/// Gives every UDP socket of this process at least `bytes` of receive buffer. retina opens the
/// RTP/RTCP sockets inside `SETUP` and offers no option for their size, so the viewer finds them
/// among the process's descriptors (every UDP socket here is a viewer's) right after its
/// `SETUP`s. Sockets already that large are left alone; `SO_RCVBUFFORCE` (root) passes
/// `net.core.rmem_max`, `SO_RCVBUF` is the fallback.
fn enlarge_udp_receive_buffers(bytes: usize) {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return };
    let want = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    for fd in dir.flatten().filter_map(|e| e.file_name().to_str()?.parse::<libc::c_int>().ok()) {
        let get = |opt: libc::c_int| {
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: getsockopt writes at most `len` bytes into a live c_int; a descriptor that
            // is not a socket (or closed meanwhile) just fails.
            let ok = unsafe {
                libc::getsockopt(fd, libc::SOL_SOCKET, opt, (&mut v as *mut libc::c_int).cast(), &mut len)
            };
            (ok == 0).then_some(v)
        };
        // The kernel reports double what was set (its bookkeeping share).
        if get(libc::SO_TYPE) != Some(libc::SOCK_DGRAM) || get(libc::SO_RCVBUF).is_some_and(|v| v >= want) {
            continue;
        }
        for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
            // SAFETY: passes a live c_int and its size.
            let set = unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    opt,
                    (&want as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if set == 0 {
                break;
            }
        }
    }
}

/// DESCRIBE, SETUP, PLAY; returns the playing session and which streams it set up.
async fn open(plan: &Plan) -> Result<(Playing, Streams), ViewerError> {
    let options = SessionOptions::default()
        .user_agent(concat!("sluice-load/", env!("CARGO_PKG_VERSION")).to_string())
        .session_group(plan.group.clone());
    let mut session = Session::describe(plan.url.clone(), options).await.map_err(|e| {
        // retina's error is opaque; its connect failure is the one that says so.
        if e.to_string().starts_with("Unable to connect") {
            ViewerError::Connect(e)
        } else {
            ViewerError::Describe(e)
        }
    })?;
    let video = session.streams().iter().position(|s| s.media() == "video").ok_or(ViewerError::NoVideo)?;
    let audio =
        session.streams().iter().position(|s| s.media() == "audio" && audio_supported(s.encoding_name()));
    session
        .setup(video, SetupOptions::default().transport(transport(plan.transport)))
        .await
        .map_err(ViewerError::Setup)?;
    let audio = audio.filter(|_| plan.audio);
    if let Some(audio) = audio {
        session
            .setup(audio, SetupOptions::default().transport(transport(plan.transport)))
            .await
            .map_err(ViewerError::Setup)?;
    }
    if plan.transport == RtspTransport::Udp && plan.udp_receive_buffer > 0 {
        enlarge_udp_receive_buffers(plan.udp_receive_buffer);
    }
    let aac = |i: usize| session.streams()[i].encoding_name().eq_ignore_ascii_case("mpeg4-generic");
    let streams = Streams { video, audio: audio.map(|a| (a, aac(a))) };
    // Permissive: a server that omits `rtptime` in RTP-Info still gets counted.
    let playing = session
        .play(PlayOptions::default().initial_timestamp(InitialTimestampPolicy::Permissive))
        .await
        .map_err(ViewerError::Play)?;
    Ok((Box::pin(playing), streams))
}

fn count_loss(result: &mut ViewerResult, plan: &Plan, loss: u16) {
    if loss > 0 {
        result.lost_packets += u64::from(loss);
        plan.live.lost_packets.fetch_add(u64::from(loss), Relaxed);
    }
}

fn ms_between(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_millis() as u64
}

/// Runs viewer `index`, starting at `at`, and returns what it received.
pub(crate) async fn run_viewer(index: usize, at: Instant, plan: &Plan) -> ViewerResult {
    let mut result = ViewerResult::new(index, ms_between(plan.run_start, at));
    if at >= plan.deadline {
        result.end = EndReason::Deadline;
        return result;
    }
    tokio::time::sleep_until(at).await;
    plan.live.started.fetch_add(1, Relaxed);
    let setup_deadline = (at + plan.setup_timeout).min(plan.deadline);
    let opened = tokio::time::timeout_at(setup_deadline, open(plan)).await;
    let (mut stream, streams) = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return result.failed(e),
        Err(_) if setup_deadline == plan.deadline => {
            result.end = EndReason::Deadline;
            return result;
        }
        Err(_) => return result.failed(ViewerError::Timeout(plan.setup_timeout)),
    };
    let playing_at = Instant::now();
    plan.live.playing.fetch_add(1, Relaxed);
    result.setup_ms = Some(ms_between(at, playing_at));
    // One timer for the whole stream: it is moved only when it fires, so frames cost no timer work.
    let mut last_media = playing_at;
    let limit = |got_first: bool, last_media: Instant| {
        if got_first { last_media + plan.idle_end } else { setup_deadline }.min(plan.deadline)
    };
    let mut units = AccessUnits::default();
    let mut sent = SentSpan::default();
    let timer = tokio::time::sleep_until(limit(false, last_media));
    tokio::pin!(timer);
    loop {
        let item = tokio::select! {
            biased;
            item = stream.next() => item,
            () = &mut timer => {
                let now = Instant::now();
                let got_first = result.samples > 0;
                let due = limit(got_first, last_media);
                if now < due {
                    timer.as_mut().reset(due);
                    continue;
                }
                if due >= plan.deadline {
                    result.end = EndReason::Deadline;
                } else if got_first {
                    result.end = EndReason::StreamEnd;
                } else {
                    result.playing_ms = Some(ms_between(playing_at, now));
                    return result.failed(ViewerError::NoMedia(plan.setup_timeout));
                }
                break;
            }
        };
        match item {
            Some(Ok(PacketItem::Rtp(packet))) => {
                last_media = Instant::now();
                let loss = packet.loss();
                count_loss(&mut result, plan, loss);
                result.bytes += packet.payload().len() as u64;
                let id = packet.stream_id();
                if id != streams.video {
                    if let Some((_, aac)) = streams.audio.filter(|(a, _)| *a == id) {
                        result.audio_frames += audio_frames(packet.payload(), aac);
                    }
                    continue;
                }
                result.video_lost_packets += u64::from(loss);
                sent.push(packet.timestamp().elapsed());
                if units.push(loss, packet.mark()) != Some(true) {
                    continue;
                }
                result.samples += 1;
                plan.live.samples.fetch_add(1, Relaxed);
                if result.samples == 1 {
                    result.first_sample_ms = Some(ms_between(at, last_media));
                    // The timer still waits for the setup deadline; from now on the stream's end
                    // is `idle_end` after the last media (a short clip must not wait for setup).
                    timer.as_mut().reset(limit(true, last_media));
                }
                if plan.expect_samples.is_some_and(|n| result.samples >= n) {
                    result.end = EndReason::Expected;
                    break;
                }
                // A stream that never pauses keeps the timer from being polled; check here too.
                if last_media >= plan.deadline {
                    result.end = EndReason::Deadline;
                    break;
                }
            }
            // RTCP (sender reports) goes on after the media ends, so it is not activity.
            Some(Ok(_)) => {}
            Some(Err(e)) => {
                result.playing_ms = Some(ms_between(playing_at, Instant::now()));
                return result.failed(ViewerError::Stream(e));
            }
            None => {
                result.end = EndReason::Closed;
                break;
            }
        }
    }
    result.playing_ms = Some(ms_between(playing_at, Instant::now()));
    // It was sent at least what it received (the reordering allowance of a cut-off viewer can
    // excuse more than was missing).
    let cut = matches!(result.end, EndReason::Deadline | EndReason::Expected);
    result.expected_samples = sent.expected(cut).max(result.samples);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_units_are_complete_without_loss() {
        let mut u = AccessUnits::default();
        // Three packets, the last marked: one complete unit.
        assert_eq!(u.push(0, false), None);
        assert_eq!(u.push(0, false), None);
        assert_eq!(u.push(0, true), Some(true));
        // A gap inside the next unit damages it, and only it.
        assert_eq!(u.push(0, false), None);
        assert_eq!(u.push(2, true), Some(false));
        assert_eq!(u.push(0, true), Some(true));
        // A loss right before a marker: that unit lost its first packets.
        assert_eq!(u.push(1, true), Some(false));
    }

    /// 30 fps at 90 kHz, two B-frames: decode order I0 P3 B1 B2 P6 B4 B5 ...
    const FRAME: i64 = 3000;

    fn ibbp(frames: usize) -> Vec<i64> {
        let order = [0, 3, 1, 2, 6, 4, 5, 9, 7, 8];
        order.iter().take(frames).map(|&f| f * FRAME).collect()
    }

    #[test]
    fn the_span_sent_counts_every_frame_of_a_stream_played_to_its_end() {
        let mut sent = SentSpan::default();
        // Several packets a frame (same timestamp), as a large frame is fragmented.
        for ts in ibbp(10) {
            sent.push(ts);
            sent.push(ts);
        }
        assert_eq!(sent.expected(false), 10);
        assert_eq!(SentSpan::default().expected(false), 0);
    }

    #[test]
    fn a_viewer_cut_off_is_not_owed_the_frames_reordered_past_its_end() {
        // Stopped right after P6: B4 and B5 were not sent yet; the five received are all.
        let mut sent = SentSpan::default();
        for ts in ibbp(5) {
            sent.push(ts);
        }
        assert_eq!(sent.expected(true), 5);
        // Played to the end, the same packets would be two short.
        assert_eq!(sent.expected(false), 7);
    }

    #[test]
    fn frames_the_server_skipped_are_owed() {
        // Frames 10 to 29 never sent (dropped up to the next keyframe), no sequence gap.
        let mut sent = SentSpan::default();
        for f in (0..10).chain(30..40) {
            sent.push(f * FRAME);
        }
        assert_eq!(sent.expected(false), 40);
        assert_eq!(sent.expected(true), 40, "no reordering, so nothing is excused at the end");
    }

    #[test]
    fn a_stream_started_at_a_seek_counts_from_its_start() {
        // Timestamps are from the PLAY's start; a keyframe slightly before it is still sent.
        let mut sent = SentSpan::default();
        for f in -1..29 {
            sent.push(f * FRAME);
        }
        assert_eq!(sent.expected(false), 30);
    }

    #[test]
    fn aac_packets_count_their_au_headers() {
        assert_eq!(audio_frames(&[0x00, 0x10, 0x01, 0x40, 0xaa], true), 1);
        assert_eq!(audio_frames(&[0x00, 0x30, 0, 0, 0, 0, 0, 0], true), 3);
        assert_eq!(audio_frames(&[0x00], true), 1);
        assert_eq!(audio_frames(&[0xff, 0xff], false), 1);
    }

    #[test]
    fn udp_receive_buffers_are_enlarged() {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let size = |fd| {
            let mut v: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: as in enlarge_udp_receive_buffers.
            unsafe {
                libc::getsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUF,
                    (&mut v as *mut libc::c_int).cast(),
                    &mut len,
                )
            };
            v
        };
        use std::os::fd::AsRawFd;
        let tcp_before = size(tcp.as_raw_fd());
        enlarge_udp_receive_buffers(1 << 20);
        assert!(size(socket.as_raw_fd()) >= 1 << 20, "{}", size(socket.as_raw_fd()));
        assert_eq!(size(tcp.as_raw_fd()), tcp_before, "only UDP sockets");
    }

    #[test]
    fn kinds_have_distinct_names() {
        let mut names: Vec<_> = FailureKind::ALL.iter().map(|k| k.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), FailureKind::ALL.len());
        assert_eq!(ViewerError::NoVideo.kind(), FailureKind::NoVideo);
        assert_eq!(ViewerError::Timeout(Duration::from_secs(1)).kind(), FailureKind::Timeout);
        assert_eq!(
            ViewerError::NoMedia(Duration::from_secs(1)).short_message(),
            "no video sample within 1s of starting"
        );
    }

    #[test]
    fn audio_codecs_retina_reads() {
        assert!(audio_supported("MPEG4-GENERIC"));
        assert!(audio_supported("opus"));
        assert!(!audio_supported("mpa"));
    }
}
