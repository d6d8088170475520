//! One RTSP viewer: waits for its start time, does its RTSP exchange in sluice's own code
//! (DESCRIBE, SETUP of the first video stream and optionally the audio stream, PLAY; see
//! `client`), then counts video access units, audio frames, bytes and lost RTP packets until the
//! stream ends, the expected count is reached or the run's deadline passes. Over UDP the packets
//! arrive on the viewer's own sockets, which a receiver thread reads together with many other
//! viewers' (see `receiver`); over TCP the viewer's task reads its connection in 64 KiB chunks.
//! Failures are typed ([`ViewerError`], in `outcome` with how a viewer ended, which the report
//! reads too) and counted by [`FailureKind`](super::outcome::FailureKind); the viewer never panics on what the server sends.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::client::{ClientError, Control, Medium};
use super::outcome::{EndReason, ViewerError};
use super::receiver::{Ended, Receivers, UdpViewer};
use super::reception::{stop_at, Limits, Reception, Stop, TrackCounter};
use super::report::ViewerResult;
use super::RtspTransport;
use sluice_proto::client::rtsp::Interleaved;

/// What every viewer of a run shares.
pub(crate) struct Plan {
    pub url: url::Url,
    pub addr: std::net::SocketAddr,
    pub transport: RtspTransport,
    pub expect_samples: Option<u64>,
    pub idle_end: Duration,
    pub setup_timeout: Duration,
    pub audio: bool,
    pub udp_receive_buffer: usize,
    pub udp_gro: bool,
    pub receivers: Option<Arc<Receivers>>,
    pub run_start: Instant,
    pub deadline: Instant,
    pub live: Arc<super::Live>,
}

/// The streams a viewer set up: video and, when wanted and offered, audio.
struct Streams {
    video: Medium,
    audio: Option<Medium>,
}

/// The interleaved channels of the video and audio RTP streams.
const VIDEO_CHANNEL: u8 = 0;
const AUDIO_CHANNEL: u8 = 2;

/// What the exchange set up.
struct Opened {
    control: Control,
    video: TrackCounter,
    audio: Option<TrackCounter>,
    udp: Option<UdpViewer>,
    /// The URL keep-alives and TEARDOWN name.
    url: String,
    keepalive: Duration,
}

fn session_header(control: &mut Control, response: &super::client::Response) -> Option<Duration> {
    let (id, timeout) = super::client::session_id(response.header("Session")?);
    control.session.get_or_insert(id);
    timeout
}

/// DESCRIBE, SETUP, PLAY.
async fn open(plan: &Plan) -> Result<Opened, ViewerError> {
    let url = plan.url.as_str().to_string();
    let mut control = Control::connect(plan.addr).await.map_err(ViewerError::Connect)?;
    let described = control
        .request("DESCRIBE", &url, &[("Accept", "application/sdp")])
        .await
        .map_err(ViewerError::Describe)?;
    let base =
        described.header("Content-Base").or(described.header("Content-Location")).unwrap_or(&url).to_string();
    let media = sluice_proto::client::sdp::media(&described.body, &base);
    let video = media.iter().find(|m| m.kind == "video").cloned().ok_or(ViewerError::NoVideo)?;
    let audio = media.iter().find(|m| m.kind == "audio").cloned().filter(|_| plan.audio);
    let streams = Streams { video, audio };
    let udp = match plan.transport {
        RtspTransport::Udp => Some(
            UdpViewer::bind(plan.addr, streams.audio.is_some(), plan.udp_receive_buffer, plan.udp_gro)
                .map_err(|e| ViewerError::Setup(ClientError::Io(e)))?,
        ),
        RtspTransport::Tcp => None,
    };
    let mut timeout = None;
    for (i, medium) in std::iter::once(&streams.video).chain(streams.audio.as_ref()).enumerate() {
        let transport = match &udp {
            Some(u) => {
                let (rtp, rtcp) = u.ports(i);
                format!("RTP/AVP;unicast;client_port={rtp}-{rtcp}")
            }
            None => {
                let ch = if i == 0 { VIDEO_CHANNEL } else { AUDIO_CHANNEL };
                format!("RTP/AVP/TCP;unicast;interleaved={ch}-{}", ch + 1)
            }
        };
        let response = control
            .request("SETUP", &medium.control, &[("Transport", &transport)])
            .await
            .map_err(ViewerError::Setup)?;
        timeout = session_header(&mut control, &response).or(timeout);
    }
    let play_url = if base.is_empty() { url.clone() } else { base.clone() };
    let played =
        control.request("PLAY", &play_url, &[("Range", "npt=0.000-")]).await.map_err(ViewerError::Play)?;
    let info = played.header("RTP-Info");
    let video = TrackCounter::new(super::client::rtp_info(info, &streams.video.control, 0), false);
    let audio = streams.audio.as_ref().map(|a| {
        TrackCounter::new(
            super::client::rtp_info(info, &a.control, 1),
            a.encoding.eq_ignore_ascii_case("mpeg4-generic"),
        )
    });
    // Keep-alives at a third of the session timeout (60 s when the server names none).
    let keepalive = timeout.unwrap_or(Duration::from_secs(60)).max(Duration::from_secs(3)) / 3;
    Ok(Opened { control, video, audio, udp, url: play_url, keepalive })
}

fn ms_between(from: Instant, to: Instant) -> u64 {
    to.saturating_duration_since(from).as_millis() as u64
}

fn end_reason(stop: Stop) -> EndReason {
    match stop {
        Stop::StreamEnd => EndReason::StreamEnd,
        Stop::Expected => EndReason::Expected,
        Stop::Deadline => EndReason::Deadline,
        Stop::Closed => EndReason::Closed,
        Stop::NoMedia => EndReason::Failed,
    }
}

/// Runs viewer `index`, starting at `at`, and returns what it received.
pub(crate) async fn run_viewer(index: usize, at: Instant, plan: &Plan) -> ViewerResult {
    let mut result = ViewerResult::new(index, ms_between(plan.run_start, at));
    if at >= plan.deadline {
        result.end = EndReason::Deadline;
        return result;
    }
    tokio::time::sleep_until(at).await;
    plan.live.viewers.started.fetch_add(1, Relaxed);
    let setup_deadline = (at + plan.setup_timeout).min(plan.deadline);
    let opened = tokio::time::timeout_at(setup_deadline, open(plan)).await;
    let opened = match opened {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return result.failed(e),
        Err(_) if setup_deadline == plan.deadline => {
            result.end = EndReason::Deadline;
            return result;
        }
        Err(_) => return result.failed(ViewerError::Timeout(plan.setup_timeout)),
    };
    let playing_at = Instant::now();
    plan.live.viewers.playing.fetch_add(1, Relaxed);
    result.setup_ms = Some(ms_between(at, playing_at));
    let Opened { mut control, video, audio, udp, url, keepalive } = opened;
    let reception = Reception::new(video, audio, plan.expect_samples, plan.live.clone());
    let limits = Limits {
        idle_end: plan.idle_end,
        setup_deadline: setup_deadline.into_std(),
        deadline: plan.deadline.into_std(),
    };
    let (reception, stop, error) = match (udp, plan.receivers.as_ref()) {
        (Some(udp), Some(receivers)) => {
            receive_udp(&mut control, receivers, udp, reception, limits, &url, keepalive).await
        }
        _ => receive_tcp(&mut control, reception, limits, &url, keepalive).await,
    };
    let now = Instant::now();
    result.playing_ms = Some(ms_between(playing_at, now));
    result.end = end_reason(stop);
    if let Some(first) = reception.first_sample {
        result.first_sample_ms = Some(first.saturating_duration_since(at.into_std()).as_millis() as u64);
    }
    reception.finish(&mut result);
    // TEARDOWN so the server frees the session now rather than at its timeout; not waited for long.
    let _ = tokio::time::timeout(Duration::from_millis(500), control.request("TEARDOWN", &url, &[])).await;
    if let Some(e) = error {
        return result.failed(e);
    }
    if stop == Stop::NoMedia {
        return result.failed(ViewerError::NoMedia(plan.setup_timeout));
    }
    result
}

/// Over UDP: hands the sockets to a receiver thread and keeps the control connection alive
/// until that thread says the viewer is done, or the server closes the connection.
async fn receive_udp(
    control: &mut Control,
    receivers: &Receivers,
    udp: UdpViewer,
    reception: Reception,
    limits: Limits,
    url: &str,
    keepalive: Duration,
) -> (Reception, Stop, Option<ViewerError>) {
    let (closed, mut ended) = receivers.add(udp, reception, limits);
    let mut ticks = tokio::time::interval_at(Instant::now() + keepalive, keepalive);
    let mut open = true;
    loop {
        tokio::select! {
            done = &mut ended => {
                return match done {
                    Ok(Ended { reception, stop }) => (reception, stop, None),
                    Err(_) => unreachable_reception(),
                };
            }
            _ = ticks.tick(), if open => {
                if control.send("GET_PARAMETER", url, &[]).await.is_err() {
                    open = false;
                    closed.store(true, Relaxed);
                }
            }
            read = control.fill(), if open => {
                control.buffer.clear();
                if read.is_err() {
                    open = false;
                    closed.store(true, Relaxed);
                }
            }
        }
    }
}

/// The receiver thread dropped a viewer without an answer: only when it panicked.
fn unreachable_reception() -> (Reception, Stop, Option<ViewerError>) {
    let live = Arc::new(super::Live::default());
    let reception = Reception::new(TrackCounter::default(), None, None, live);
    (
        reception,
        Stop::Closed,
        Some(ViewerError::Stream(ClientError::Malformed("the receiver thread stopped".into()))),
    )
}

/// Over TCP: reads the connection in large chunks and counts the interleaved frames.
async fn receive_tcp(
    control: &mut Control,
    mut reception: Reception,
    limits: Limits,
    url: &str,
    keepalive: Duration,
) -> (Reception, Stop, Option<ViewerError>) {
    let mut ticks = tokio::time::interval_at(Instant::now() + keepalive, keepalive);
    let check = Duration::from_millis(50);
    loop {
        let mut consumed = 0;
        let now = std::time::Instant::now();
        let mut bad = false;
        loop {
            match Interleaved::parse(&control.buffer[consumed..]) {
                Ok(Some((item, n))) => {
                    if let Interleaved::Frame { channel, data } = item {
                        match channel {
                            VIDEO_CHANNEL => reception.rtp(false, data, now),
                            AUDIO_CHANNEL => reception.rtp(true, data, now),
                            _ => reception.counts.datagrams += 1,
                        }
                    }
                    consumed += n;
                }
                Ok(None) => break,
                Err(()) => {
                    bad = true;
                    break;
                }
            }
        }
        control.buffer.drain(..consumed);
        if bad {
            let e = ClientError::Malformed("neither an interleaved frame nor an RTSP message".into());
            return (reception, Stop::Closed, Some(ViewerError::Stream(e)));
        }
        if let Some(stop) = stop_at(&reception, now, limits.idle_end, limits.setup_deadline, limits.deadline)
        {
            return (reception, stop, None);
        }
        tokio::select! {
            read = control.fill() => {
                reception.counts.reads += 1;
                if let Err(e) = read {
                    if e.kind() == std::io::ErrorKind::UnexpectedEof {
                        return (reception, Stop::Closed, None);
                    }
                    return (reception, Stop::Closed, Some(ViewerError::Stream(ClientError::Io(e))));
                }
            }
            _ = tokio::time::sleep(check) => {}
            _ = ticks.tick() => {
                let _ = control.send("GET_PARAMETER", url, &[]).await;
            }
        }
    }
}
