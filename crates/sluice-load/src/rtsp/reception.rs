//! What one viewer counts as its packets arrive: complete access units from markers and
//! sequence numbers, audio frames, bytes, losses and the span of what the server sent, and when a
//! playing viewer stops. Shared by the receiver threads (UDP) and the viewer's own task (TCP); it
//! neither reads sockets (`receiver`, `viewer`) nor speaks RTSP (`client`).
//!
//! Access units are counted from the packets' marker bits and sequence numbers
//! ([`AccessUnits`]), not by depacketizing: RFC 6184 sets the marker on an access unit's last
//! packet, so a unit is complete when its marker arrives with no packet lost since the previous
//! one. Losses are sequence gaps, the first packet measured against `RTP-Info`'s `seq`; a packet
//! from before the latest (reordered or duplicated) is skipped. Nothing is allocated per packet.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use super::client::RtpInfo;
use super::outcome::EndReason;
use super::report::ViewerResult;
use sluice_proto::rtp::RtpPacket;

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
/// packets: the span of presentation times from the `PLAY`'s start (`RTP-Info`'s `rtptime`,
/// time 0 of the counted timestamps) to the latest one received, divided by the frame interval (the
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

/// Gives the UDP socket `fd` at least `bytes` of receive buffer: `SO_RCVBUFFORCE` (root) passes
/// `net.core.rmem_max`, `SO_RCVBUF` is the fallback. Players size theirs for bursts.
pub(crate) fn set_receive_buffer(fd: std::os::fd::RawFd, bytes: usize) {
    let want = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    for opt in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        if crate::sys::set_socket_int(fd, libc::SOL_SOCKET, opt, want).is_ok() {
            break;
        }
    }
}

/// Counting state of one RTP stream of a viewer.
#[derive(Debug, Default)]
pub(crate) struct TrackCounter {
    /// `RTP-Info`'s values for this stream.
    info: RtpInfo,
    /// The sequence number the next packet should carry.
    next_seq: Option<u16>,
    /// The latest packet's RTP timestamp and its ticks since the PLAY's start (unwrapped).
    last_timestamp: Option<(u32, i64)>,
    units: AccessUnits,
    /// Audio: AAC (counted by its AU headers).
    aac: bool,
}

impl TrackCounter {
    pub(crate) fn new(info: RtpInfo, aac: bool) -> TrackCounter {
        TrackCounter { info, aac, ..TrackCounter::default() }
    }

    /// The packets lost before this one, or `None` for a packet from before the latest.
    fn sequence(&mut self, seq: u16) -> Option<u16> {
        let loss = match self.next_seq.or(self.info.seq) {
            None => 0,
            Some(next) => {
                let gap = seq.wrapping_sub(next);
                if gap >= 0x8000 {
                    return None;
                }
                gap
            }
        };
        self.next_seq = Some(seq.wrapping_add(1));
        Some(loss)
    }

    /// Ticks since the PLAY's start (`RTP-Info`'s `rtptime`, else the first packet's).
    fn ticks(&mut self, timestamp: u32) -> i64 {
        let ticks = match self.last_timestamp {
            Some((last, ticks)) => ticks + i64::from(timestamp.wrapping_sub(last) as i32),
            None => i64::from(timestamp.wrapping_sub(self.info.rtptime.unwrap_or(timestamp)) as i32),
        };
        self.last_timestamp = Some((timestamp, ticks));
        ticks
    }
}

/// A viewer's running counts (their meanings are [`ViewerResult`]'s fields of the same names).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Counts {
    pub samples: u64,
    pub audio_frames: u64,
    pub lost_packets: u64,
    pub video_lost_packets: u64,
    pub bytes: u64,
    pub datagrams: u64,
    pub reads: u64,
}

/// What one viewer received, as its packets are counted (by the receiver thread over UDP, by
/// the viewer's task over TCP).
#[derive(Debug)]
pub(crate) struct Reception {
    pub video: TrackCounter,
    pub audio: Option<TrackCounter>,
    pub sent: SentSpan,
    pub counts: Counts,
    /// When the latest RTP packet and the first complete sample arrived.
    pub last_media: Option<std::time::Instant>,
    pub first_sample: Option<std::time::Instant>,
    /// The expected count, reached: counting stops.
    pub expect: Option<u64>,
    pub complete: bool,
    live: Arc<super::Live>,
}

impl Reception {
    pub(crate) fn new(
        video: TrackCounter,
        audio: Option<TrackCounter>,
        expect: Option<u64>,
        live: Arc<super::Live>,
    ) -> Reception {
        Reception {
            video,
            audio,
            sent: SentSpan::default(),
            counts: Counts::default(),
            last_media: None,
            first_sample: None,
            expect,
            complete: false,
            live,
        }
    }

    /// One RTP packet of the video (`audio` false) or audio stream, received at `now`.
    pub(crate) fn rtp(&mut self, audio: bool, packet: &[u8], now: std::time::Instant) {
        self.counts.datagrams += 1;
        if self.complete {
            return;
        }
        let Ok(header) = RtpPacket::parse(packet) else { return };
        let track = match (audio, self.audio.as_mut()) {
            (false, _) => &mut self.video,
            (true, Some(a)) => a,
            (true, None) => return,
        };
        let Some(loss) = track.sequence(header.sequence) else { return };
        self.last_media = Some(now);
        let payload = header.payload;
        self.counts.bytes += payload.len() as u64;
        if loss > 0 {
            self.counts.lost_packets += u64::from(loss);
            self.live.lost_packets.fetch_add(u64::from(loss), Relaxed);
        }
        if audio {
            self.counts.audio_frames += audio_frames(payload, track.aac);
            return;
        }
        self.counts.video_lost_packets += u64::from(loss);
        let ticks = track.ticks(header.timestamp);
        self.sent.push(ticks);
        if track.units.push(loss, header.marker) != Some(true) {
            return;
        }
        self.counts.samples += 1;
        self.live.samples.fetch_add(1, Relaxed);
        if self.counts.samples == 1 {
            self.first_sample = Some(now);
        }
        if self.expect.is_some_and(|n| self.counts.samples >= n) {
            self.complete = true;
        }
    }

    /// Copies the counts into the viewer's result and works out what it was owed.
    pub(crate) fn finish(&self, result: &mut ViewerResult) {
        let Counts { samples, audio_frames, lost_packets, video_lost_packets, bytes, datagrams, reads } =
            self.counts;
        *result = ViewerResult {
            samples,
            audio_frames,
            lost_packets,
            video_lost_packets,
            bytes,
            datagrams,
            reads,
            ..result.clone()
        };
        // It was sent at least what it received (the reordering allowance of a cut-off viewer
        // can excuse more than was missing).
        let cut = matches!(result.end, EndReason::Deadline | EndReason::Expected);
        result.expected_samples = self.sent.expected(cut).max(self.counts.samples);
    }
}

/// Why the counting of a playing viewer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    StreamEnd,
    Expected,
    Deadline,
    NoMedia,
    Closed,
}

/// When a playing viewer stops: `None` while it goes on.
pub(crate) fn stop_at(
    reception: &Reception,
    now: std::time::Instant,
    idle_end: Duration,
    setup_deadline: std::time::Instant,
    deadline: std::time::Instant,
) -> Option<Stop> {
    if reception.complete {
        return Some(Stop::Expected);
    }
    if now >= deadline {
        return Some(Stop::Deadline);
    }
    match (reception.first_sample, reception.last_media) {
        (Some(_), Some(last)) if now >= last + idle_end => Some(Stop::StreamEnd),
        (None, _) if now >= setup_deadline => Some(Stop::NoMedia),
        _ => None,
    }
}

/// When a playing viewer stops.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    pub idle_end: Duration,
    pub setup_deadline: std::time::Instant,
    pub deadline: std::time::Instant,
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
        use std::os::fd::AsRawFd;
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        set_receive_buffer(socket.as_raw_fd(), 1 << 20);
        let v = crate::sys::socket_int(socket.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF).unwrap();
        assert!(v >= 1 << 20, "{v}");
    }
}
