//! Pacing one playing RTSP session: which samples are due now, their RTP packets, sender reports.
//!
//! This module owns time for a session's media: a [`Streamer`] maps the engine's monotonic `now`
//! (passed in, never read) to a position in the presentation, says which samples have become due
//! ([`Due`]: track, sample index, file offset and size, so the engine reads exactly those bytes
//! with `pread` or io_uring), turns the bytes it is handed into RTP packets with the track's
//! clock, and writes RTCP sender reports every [`SENDER_REPORT_INTERVAL`]. Samples go out when
//! their time comes, in real time, not as fast as the socket takes them. It does not read files,
//! send packets or queue them per viewer (that is `sluice_proto::rtp::queue`).
//!
//! Times: a sample's place in the presentation is its decode time minus the track's
//! `edit_start` (pacing must follow decode order, which is send order); its RTP timestamp is its
//! composition time minus `edit_start` in the RTP clock (90 kHz for H.264, the sampling rate for
//! AAC), plus the stream's random offset (RFC 3550 §5.1). So RTP time is media time, and a seek
//! or a pause moves both together; `RTP-Info` after a `PLAY` states the mapping.
//!
//! For fan-out, the due computation is pure: [`due_until`] depends only on the track, the first
//! sample not yet sent, and the presentation time reached. Viewers that started at the same
//! position and time can share one computation and one read of each sample; only the
//! packetization (their own SSRC, sequence numbers and timestamp offsets) is per viewer.

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_proto::rtp::{
    AacPacketizer, FrameFormat, FramePacketizer, H264Packetizer, H265Packetizer, PacketizeError, Packets,
    StreamConfig,
};

use sluice_media::mp4::{Mp4File, Track, TrackKind};
use sluice_media::sdp::clock_rate;

/// How often each stream gets an RTCP sender report (RFC 3550 suggests about 5 s at most for
/// a sender with a small session bandwidth share).
pub const SENDER_REPORT_INTERVAL: Duration = Duration::from_secs(5);

/// Why a sample could not be turned into packets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// The packetizer refused the sample (malformed access unit, frame too large).
    #[error(transparent)]
    Packetize(#[from] PacketizeError),
    /// The bytes handed in are not the size the sample table says.
    #[error("sample of {expected} bytes handed in with {got} bytes")]
    WrongSize {
        /// Size in the sample table.
        expected: u32,
        /// Bytes given.
        got: usize,
    },
    /// The [`Due`] names a track this streamer does not send.
    #[error("no such track in the session")]
    NoSuchTrack,
    /// The track's codec has no RTP payload format here.
    #[error("{0}")]
    NoPayloadFormat(String),
}

/// `ticks` of a track with `timescale` ticks per second, as a duration.
pub fn ticks_to_duration(ticks: u64, timescale: u32) -> Duration {
    let nanos = u128::from(ticks) * 1_000_000_000 / u128::from(timescale.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// `d` in a clock of `rate` ticks per second (rounded to the nearest tick, saturating).
///
/// Rounded, not truncated: a position that came from a sample's ticks (truncated to whole
/// nanoseconds by [`ticks_to_duration`]) must map back to exactly those ticks, or `RTP-Info`
/// after a seek would be a tick off the timestamps of the packets that follow (exact for clocks
/// up to 1 GHz; MP4 timescales are far below).
pub fn duration_to_ticks(d: Duration, rate: u32) -> u64 {
    u64::try_from((d.as_nanos() * u128::from(rate) + 500_000_000) / 1_000_000_000).unwrap_or(u64::MAX)
}

/// When sample `i` of `track` is due, relative to the presentation's start: its decode time
/// minus the edit's start.
pub fn sample_time(track: &Track, i: usize) -> Duration {
    let ticks = track.samples[i].decode_time().saturating_sub(track.edit_start);
    ticks_to_duration(ticks, track.timescale)
}

/// When sample `i` of `track` is shown, relative to the presentation's start: its composition
/// time minus the edit's start.
pub fn presentation_time(track: &Track, i: usize) -> Duration {
    let ticks = track.samples[i].composition_time().saturating_sub(track.edit_start);
    ticks_to_duration(ticks, track.timescale)
}

/// Where a track starts for a `PLAY` at `position`: the sync sample shown at or before it (so
/// the decoder gets a keyframe first); the end of the track when it has none.
pub fn start_sample(track: &Track, position: Duration) -> usize {
    if position.is_zero() {
        // From the start: every sample, including those before the edit's start (AAC priming
        // frames, video decoded ahead of its first presentation), which decoders need.
        return track.samples.iter().position(|s| s.is_sync()).unwrap_or(track.samples.len());
    }
    let ticks = duration_to_ticks(position, track.timescale).saturating_add(track.edit_start);
    let Some(mut i) = track.sync_sample_at_or_before(ticks) else { return track.samples.len() };
    // Decode order runs ahead of presentation with B-frames: a keyframe decoded before
    // `position` may be shown after it. Step back to one shown at or before it, if there is one.
    while presentation_time(track, i) > position {
        match track.samples[..i].iter().rposition(|s| s.is_sync()) {
            Some(earlier) => i = earlier,
            None => break,
        }
    }
    i
}

/// One past the last sample, from `from` on, whose time is at or before `reached`: samples
/// `from..due_until(..)` are due once the presentation has reached `reached`. Pure, so viewers at
/// the same place can share it.
pub fn due_until(track: &Track, from: usize, reached: Duration) -> usize {
    let from = from.min(track.samples.len());
    from + track.samples[from..].partition_point(|s| {
        ticks_to_duration(s.decode_time().saturating_sub(track.edit_start), track.timescale) <= reached
    })
}

/// One track a session sends: which track of the file, and its RTP identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamTrack {
    /// Index of the track in [`Mp4File::tracks`].
    pub index: usize,
    /// SSRC, payload type, first sequence number.
    pub config: StreamConfig,
    /// Random offset added to every RTP timestamp (RFC 3550 §5.1).
    pub timestamp_offset: u32,
}

/// A sample that is due: the engine reads `size` bytes at `offset` and hands them to
/// [`Streamer::packetize`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Due {
    /// Position of the track in the session's track list (the order of `SETUP`s).
    pub track: usize,
    /// Index of the sample in the file's track.
    pub sample: usize,
    /// Byte offset of the sample in the file.
    pub offset: u64,
    /// Size in bytes.
    pub size: u32,
    /// Whether the sample is a keyframe (the queue's drop policy needs it).
    pub keyframe: bool,
    /// Its place in the presentation.
    pub time: Duration,
}

#[derive(Debug, Clone)]
enum Packetizer {
    H264(H264Packetizer),
    H265(H265Packetizer),
    Aac(AacPacketizer),
    Frames(FramePacketizer),
}

impl Packetizer {
    fn stream(&self) -> &sluice_proto::rtp::RtpStream {
        match self {
            Packetizer::H264(p) => p.stream(),
            Packetizer::H265(p) => p.stream(),
            Packetizer::Aac(p) => p.stream(),
            Packetizer::Frames(p) => p.stream(),
        }
    }
}

#[derive(Debug, Clone)]
struct TrackState {
    spec: StreamTrack,
    packetizer: Packetizer,
    clock_rate: u32,
    /// The next sample to send.
    next: usize,
    /// One past the last sample to send (the end of the track, or of the `PLAY` range).
    end: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clock {
    /// Not sending; the presentation stands at `position`.
    Paused { position: Duration },
    /// Sending; at `since` the presentation stood at `position`.
    Playing { since: Instant, position: Duration },
}

/// The pacing state of one session's tracks.
#[derive(Debug, Clone)]
pub struct Streamer {
    file: Arc<Mp4File>,
    tracks: Vec<TrackState>,
    clock: Clock,
    next_report: Option<Instant>,
    /// The BYE went out (at the end, or at the server's shutdown) since the last `play`.
    said_bye: bool,
}

impl Streamer {
    /// A paused streamer at the start of `file`, sending `tracks` with packets of at most
    /// `max_payload` bytes after the RTP header. Tracks not in the file are skipped.
    pub fn new(
        file: Arc<Mp4File>,
        tracks: &[StreamTrack],
        max_payload: usize,
    ) -> Result<Streamer, StreamError> {
        let mut states = Vec::with_capacity(tracks.len());
        for spec in tracks {
            let track = file.tracks.get(spec.index).ok_or(StreamError::NoSuchTrack)?;
            let packetizer = match &track.kind {
                TrackKind::H264(h) => {
                    Packetizer::H264(H264Packetizer::new(spec.config, max_payload, h.nal_length_size)?)
                }
                TrackKind::Aac(_) => Packetizer::Aac(AacPacketizer::new(spec.config, max_payload)?),
                TrackKind::Video(sluice_media::codec::VideoEntry {
                    codec: sluice_media::codec::VideoCodec::Hevc(h),
                    ..
                }) => Packetizer::H265(H265Packetizer::new(spec.config, max_payload, h.nal_length_size)?),
                TrackKind::Audio(a) if sluice_media::sdp::rtp_payload_format(track).is_ok() => {
                    let format = match a.codec {
                        sluice_media::codec::AudioCodec::Opus(_) => FrameFormat::Opus,
                        sluice_media::codec::AudioCodec::Eac3(_) => FrameFormat::Eac3,
                        _ => FrameFormat::Ac3,
                    };
                    Packetizer::Frames(FramePacketizer::new(spec.config, max_payload, format)?)
                }
                TrackKind::Video(_) | TrackKind::Audio(_) => {
                    let why = sluice_media::sdp::rtp_payload_format(track).err().unwrap_or_default();
                    return Err(StreamError::NoPayloadFormat(why));
                }
            };
            states.push(TrackState {
                spec: *spec,
                packetizer,
                clock_rate: clock_rate(track),
                next: 0,
                end: track.samples.len(),
            });
        }
        let mut streamer = Streamer {
            file,
            tracks: states,
            clock: Clock::Paused { position: Duration::ZERO },
            next_report: None,
            said_bye: false,
        };
        streamer.seek(Duration::ZERO, None);
        Ok(streamer)
    }

    /// Moves every track to where a `PLAY` at `position` starts and stops sending after `end`;
    /// pauses. Video starts at its keyframe shown at or before `position`, other tracks at their
    /// sample at or before that keyframe's presentation time. Returns where the presentation now
    /// stands, the time `Range` and `RTP-Info` state: that keyframe's presentation time (from the
    /// start: zero).
    pub fn seek(&mut self, position: Duration, end: Option<Duration>) -> Duration {
        let file = Arc::clone(&self.file);
        // Where the presentation resumes: the earliest video keyframe's presentation time, so the
        // first picture shown is the first one sent. Other tracks (audio) start at their sample at
        // or before that time, not at `position`, or the stretch between would be silent.
        let anchor = (!position.is_zero()).then(|| {
            self.tracks
                .iter()
                .map(|t| &file.tracks[t.spec.index])
                .filter(|track| track.kind.is_video())
                .filter_map(|track| {
                    let i = start_sample(track, position);
                    (i < track.samples.len()).then(|| presentation_time(track, i))
                })
                .min()
                .unwrap_or(position)
        });
        let mut start = None::<Duration>;
        for t in &mut self.tracks {
            let track = &file.tracks[t.spec.index];
            t.next = match anchor {
                Some(anchor) if !track.kind.is_video() => start_sample(track, anchor),
                _ => start_sample(track, position),
            };
            t.end = match end {
                // Samples strictly before the end: `npt=a-b` excludes what starts at b.
                Some(end) => track.samples.partition_point(|s| {
                    ticks_to_duration(s.decode_time().saturating_sub(track.edit_start), track.timescale) < end
                }),
                None => track.samples.len(),
            };
            if t.next < t.end {
                let at = sample_time(track, t.next);
                start = Some(start.map_or(at, |s| s.min(at)));
            }
        }
        let position = anchor.or(start).unwrap_or(position);
        self.clock = Clock::Paused { position };
        position
    }

    /// Moves every track to the live edge of a live source's table and pauses: video to its
    /// latest keyframe (the earliest of them with several video tracks), other tracks to their
    /// first sample from that keyframe's time on (without video: to the end, so they start with
    /// what comes next). Returns where the presentation now stands.
    pub fn seek_live(&mut self) -> Duration {
        let file = Arc::clone(&self.file);
        let latest_keyframe = |track: &Track| track.samples.iter().rposition(|s| s.is_sync());
        let anchor = self
            .tracks
            .iter()
            .map(|t| &file.tracks[t.spec.index])
            .filter(|track| track.kind.is_video())
            .filter_map(|track| latest_keyframe(track).map(|i| sample_time(track, i)))
            .min();
        let mut edge = Duration::ZERO;
        for t in &mut self.tracks {
            let track = &file.tracks[t.spec.index];
            t.end = track.samples.len();
            if let Some(last) = track.samples.len().checked_sub(1) {
                edge = edge.max(sample_time(track, last));
            }
            t.next = match anchor {
                Some(anchor) if track.kind.is_video() => track
                    .samples
                    .iter()
                    .enumerate()
                    .rposition(|(i, s)| s.is_sync() && sample_time(track, i) <= anchor)
                    .unwrap_or(track.samples.len()),
                Some(anchor) => track.samples.partition_point(|s| {
                    ticks_to_duration(s.decode_time().saturating_sub(track.edit_start), track.timescale)
                        < anchor
                }),
                None => track.samples.len(),
            };
        }
        let position = anchor.unwrap_or(edge);
        self.clock = Clock::Paused { position };
        position
    }

    /// A live source's newer table ([`crate::live::LiveStream::snapshot`]): the samples of the
    /// one held, less `shift[i]` gone from the front of file track `i` since, and the ones that
    /// came after them. Positions move back by the shift; each track now ends where its newer
    /// table does.
    pub fn extend(&mut self, file: Arc<Mp4File>, shift: &[u64]) {
        for t in &mut self.tracks {
            let gone = usize::try_from(shift.get(t.spec.index).copied().unwrap_or(0)).unwrap_or(usize::MAX);
            t.next = t.next.saturating_sub(gone);
            t.end = file.tracks.get(t.spec.index).map_or(0, |track| track.samples.len());
        }
        self.file = file;
    }

    /// Starts (or resumes) sending at `now` from where the presentation stands.
    pub fn play(&mut self, now: Instant) {
        if let Clock::Paused { position } = self.clock {
            self.clock = Clock::Playing { since: now, position };
            // A report right away lets receivers synchronise audio and video from the start.
            self.next_report = Some(now);
            self.said_bye = false;
        }
    }

    /// Stops sending at `now`; the presentation stays where it reached.
    pub fn pause(&mut self, now: Instant) {
        self.clock = Clock::Paused { position: self.position(now) };
        self.next_report = None;
    }

    /// Whether the streamer is sending.
    pub fn is_playing(&self) -> bool {
        matches!(self.clock, Clock::Playing { .. })
    }

    /// Where the presentation stands at `now`.
    pub fn position(&self, now: Instant) -> Duration {
        match self.clock {
            Clock::Paused { position } => position,
            Clock::Playing { since, position } => position + now.saturating_duration_since(since),
        }
    }

    /// Whether every track has sent its last sample.
    pub fn is_done(&self) -> bool {
        self.tracks.iter().all(|t| t.next >= t.end)
    }

    /// The next sequence number and the RTP time of `position` of the track at `track` in the
    /// session's list: what `RTP-Info` says after a `PLAY`.
    pub fn rtp_info(&self, track: usize, position: Duration) -> Option<(u16, u32)> {
        let t = self.tracks.get(track)?;
        let seq = t.packetizer.stream().next_sequence();
        Some((seq, rtp_time(t, duration_to_ticks(position, t.clock_rate))))
    }

    /// Appends the samples due at `now` to `out`, in presentation order across tracks, and
    /// marks them sent. Nothing is due while paused.
    pub fn due(&mut self, now: Instant, out: &mut Vec<Due>) {
        if !self.is_playing() {
            return;
        }
        let reached = self.position(now);
        let first = out.len();
        for (i, t) in self.tracks.iter_mut().enumerate() {
            let track = &self.file.tracks[t.spec.index];
            let until = due_until(track, t.next, reached).min(t.end);
            for sample in t.next..until {
                let s = &track.samples[sample];
                out.push(Due {
                    track: i,
                    sample,
                    offset: s.offset(),
                    size: s.size(),
                    keyframe: s.is_sync(),
                    time: sample_time(track, sample),
                });
            }
            t.next = t.next.max(until);
        }
        // Stable: samples of one track keep their decode order.
        out[first..].sort_by_key(|d| d.time);
    }

    /// Appends the RTP packets of a due sample, given its bytes, to `out`; returns how many.
    pub fn packetize(&mut self, due: &Due, data: &[u8], out: &mut Packets) -> Result<usize, StreamError> {
        if data.len() != due.size as usize {
            return Err(StreamError::WrongSize { expected: due.size, got: data.len() });
        }
        let t = self.tracks.get_mut(due.track).ok_or(StreamError::NoSuchTrack)?;
        let track = &self.file.tracks[t.spec.index];
        let sample = track.samples.get(due.sample).ok_or(StreamError::NoSuchTrack)?;
        // Signed: a sample presented before the edit's start (an AAC priming frame) gets a
        // timestamp before the start's, as it should, rather than the same one.
        let ticks = i128::from(sample.composition_time()) - i128::from(track.edit_start);
        let clock_ticks = ticks * i128::from(t.clock_rate) / i128::from(track.timescale.max(1));
        let timestamp = rtp_time(t, clock_ticks as u64);
        Ok(match &mut t.packetizer {
            Packetizer::H264(p) => p.packetize(data, timestamp, out)?,
            Packetizer::H265(p) => p.packetize(data, timestamp, out)?,
            Packetizer::Frames(p) => p.packetize(data, timestamp, out)?,
            Packetizer::Aac(p) => {
                p.packetize(data, timestamp, out)?;
                1
            }
        })
    }

    /// When the streamer next has something to do: the next sample's time or the next sender
    /// report, whichever is first; `None` while paused or when done. At each wake-up call both
    /// [`Streamer::due`] and [`Streamer::sender_reports`]: a report left unsent stays due, and
    /// this keeps answering its (past) time.
    pub fn next_wake(&self) -> Option<Instant> {
        self.next_wake_in_slots(|at| at)
    }

    /// [`Streamer::next_wake`] with the next sample's time taken to the start of its send slot by
    /// `slot_start` (a caller that calls [`Streamer::due`] with the end of the slot sends a slot's
    /// samples together); sender reports keep their own time.
    pub fn next_wake_in_slots(&self, slot_start: impl Fn(Instant) -> Instant) -> Option<Instant> {
        let Clock::Playing { since, position } = self.clock else { return None };
        let samples = self
            .tracks
            .iter()
            .filter(|t| t.next < t.end)
            .map(|t| {
                let at = sample_time(&self.file.tracks[t.spec.index], t.next);
                since + at.saturating_sub(position)
            })
            .min()?;
        let samples = slot_start(samples);
        Some(self.next_report.map_or(samples, |r| r.min(samples)))
    }

    /// When the presentation's start was (or would have been) played, while playing: viewers of
    /// one file with the same origin are at the same sample.
    pub fn origin(&self) -> Option<Instant> {
        let Clock::Playing { since, position } = self.clock else { return None };
        Some(since.checked_sub(position).unwrap_or(since))
    }

    /// Appends the sender reports due at `now` as `(track, compound RTCP packet)`, with
    /// `wall_clock` the time since the Unix epoch at `now` (the NTP time reports carry).
    pub fn sender_reports(
        &mut self,
        now: Instant,
        wall_clock: Duration,
        cname: &str,
        out: &mut Vec<(usize, Vec<u8>)>,
    ) {
        match self.next_report {
            Some(at) if at <= now && self.is_playing() => {}
            _ => return,
        }
        self.write_reports(now, wall_clock, cname, false, out);
        self.next_report = Some(now + SENDER_REPORT_INTERVAL);
    }

    /// Appends, once every track has sent its last sample, each track's final report with an RTCP
    /// BYE (RFC 3550 §6.6): how receivers learn the presentation ended. Sends no more reports
    /// after it; returns whether it wrote them (once per play to the end).
    pub fn goodbyes(
        &mut self,
        now: Instant,
        wall_clock: Duration,
        cname: &str,
        out: &mut Vec<(usize, Vec<u8>)>,
    ) -> bool {
        if !self.is_playing() || !self.is_done() || self.next_report.is_none() {
            return false;
        }
        self.write_reports(now, wall_clock, cname, true, out);
        self.next_report = None;
        self.said_bye = true;
        true
    }

    /// Appends each track's final report with an RTCP BYE now, whether or not the presentation
    /// has ended, unless one went out already, and stops: the server is shutting down
    /// (RFC 3550 §6.6, a participant leaving the session). Returns whether it wrote them.
    pub fn farewell(
        &mut self,
        now: Instant,
        wall_clock: Duration,
        cname: &str,
        out: &mut Vec<(usize, Vec<u8>)>,
    ) -> bool {
        if self.said_bye {
            return false;
        }
        self.write_reports(now, wall_clock, cname, true, out);
        self.pause(now);
        self.said_bye = true;
        true
    }

    fn write_reports(
        &self,
        now: Instant,
        wall_clock: Duration,
        cname: &str,
        bye: bool,
        out: &mut Vec<(usize, Vec<u8>)>,
    ) {
        let position = self.position(now);
        let ntp = sluice_proto::rtp::ntp_timestamp(wall_clock);
        for (i, t) in self.tracks.iter().enumerate() {
            let stream = t.packetizer.stream();
            let report = stream.sender_report(ntp, rtp_time(t, duration_to_ticks(position, t.clock_rate)));
            let mut bytes = Vec::with_capacity(64);
            if bye {
                report.write_goodbye(cname, &mut bytes);
            } else {
                report.write_compound(cname, &mut bytes);
            }
            out.push((i, bytes));
        }
    }
}

/// The RTP timestamp of media time `clock_ticks` (in the track's RTP clock).
fn rtp_time(t: &TrackState, clock_ticks: u64) -> u32 {
    t.spec.timestamp_offset.wrapping_add(clock_ticks as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::rtp::{RtpPacket, SenderReport};

    const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");

    fn demo() -> Arc<Mp4File> {
        Arc::new(crate::demo_file())
    }

    fn specs(file: &Mp4File) -> Vec<StreamTrack> {
        (0..file.tracks.len())
            .map(|i| StreamTrack {
                index: i,
                config: StreamConfig {
                    ssrc: 100 + i as u32,
                    payload_type: 96 + i as u8,
                    initial_sequence: 65_530,
                },
                timestamp_offset: u32::MAX - 1000,
            })
            .collect()
    }

    #[test]
    fn paces_in_real_time_and_finishes() {
        let file = demo();
        let mut s = Streamer::new(file.clone(), &specs(&file), 1400).unwrap();
        let t0 = Instant::now();
        let mut due = Vec::new();
        s.due(t0, &mut due);
        assert!(due.is_empty(), "nothing before PLAY");
        assert_eq!(s.next_wake(), None);
        s.play(t0);
        let mut sent = vec![0usize; file.tracks.len()];
        let mut now = t0;
        let mut wakes = 0;
        while let Some(wake) = s.next_wake() {
            assert!(wake >= now || wake >= t0);
            now = now.max(wake);
            due.clear();
            s.due(now, &mut due);
            for d in &due {
                // Never early: the sample's time has been reached.
                assert!(d.time <= now - t0, "{d:?} sent at {:?}", now - t0);
                assert_eq!(d.sample, sent[d.track], "samples in order, none skipped");
                sent[d.track] += 1;
            }
            let mut reports = Vec::new();
            s.sender_reports(now, Duration::from_secs(1_700_000_000), "sluice", &mut reports);
            wakes += 1;
            assert!(wakes < 1_000_000);
        }
        assert!(s.is_done());
        for (i, t) in file.tracks.iter().enumerate() {
            assert_eq!(sent[i], t.samples.len());
        }
        // Real time: the last sample went out about when its time came, not at once.
        let last = file.tracks.iter().map(|t| sample_time(t, t.samples.len() - 1)).max().unwrap();
        assert!(now - t0 >= last && now - t0 < last + Duration::from_millis(1));
        // The end: one report with a BYE per track, once.
        let mut byes = Vec::new();
        assert!(s.goodbyes(now, Duration::from_secs(1_700_000_000), "sluice", &mut byes));
        assert_eq!(byes.len(), file.tracks.len());
        for (track, bytes) in &byes {
            let report = SenderReport::parse(bytes).unwrap();
            assert_eq!(report.ssrc, 100 + *track as u32);
            let bye = &bytes[bytes.len() - 8..];
            assert_eq!((bye[0], bye[1]), (0x81, 203), "ends with a BYE");
            assert_eq!(bye[4..8], report.ssrc.to_be_bytes());
        }
        assert!(!s.goodbyes(now, Duration::from_secs(1_700_000_000), "sluice", &mut byes), "only once");
    }

    #[test]
    fn seek_starts_where_the_keyframe_is_shown_and_audio_with_it() {
        let file = demo();
        let video = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::H264(_))).unwrap();
        let audio = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::Aac(_))).unwrap();
        let mut s = Streamer::new(file.clone(), &specs(&file), 1400).unwrap();
        let target = Duration::from_millis(2500);
        let start = s.seek(target, None);
        let keyframe = start_sample(&file.tracks[video], target);
        assert!(file.tracks[video].samples[keyframe].is_sync());
        assert_eq!(
            start,
            presentation_time(&file.tracks[video], keyframe),
            "Range names the picture shown first"
        );
        assert!(start <= target);
        let t0 = Instant::now();
        s.play(t0);
        let mut due = Vec::new();
        s.due(t0, &mut due);
        let first = |track: usize| *due.iter().find(|d| d.track == track).unwrap();
        let (v, a) = (first(video), first(audio));
        assert_eq!(v.sample, keyframe);
        // Audio starts at the keyframe's time, not at the requested one.
        let audio_at = presentation_time(&file.tracks[audio], a.sample);
        assert!(audio_at <= start && start - audio_at < Duration::from_millis(30), "audio from {audio_at:?}");
        // RTP-Info's rtptime is the first video packet's timestamp.
        let (_, rtptime) = s.rtp_info(video, start).unwrap();
        let t = &file.tracks[video];
        let data = std::fs::read(DEMO).unwrap();
        let mut packets = Packets::new();
        s.packetize(&v, &data[v.offset as usize..][..v.size as usize], &mut packets).unwrap();
        assert_eq!(RtpPacket::parse(packets.get(0).unwrap()).unwrap().timestamp, rtptime);
        assert!(
            t.samples[keyframe].composition_time() > t.samples[keyframe].decode_time(),
            "the demo has B-frames"
        );
    }

    #[test]
    fn seek_pause_resume_and_reports() {
        let file = demo();
        let mut s = Streamer::new(file.clone(), &specs(&file), 1400).unwrap();
        let video = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::H264(_))).unwrap();
        let target = Duration::from_millis(2500);
        let start = s.seek(target, None);
        assert!(start <= target);
        let t0 = Instant::now();
        s.play(t0);
        let mut due = Vec::new();
        s.due(t0, &mut due);
        let first_video = *due.iter().find(|d| d.track == video).expect("the keyframe is due at once");
        assert!(first_video.keyframe);
        assert_eq!(first_video.sample, start_sample(&file.tracks[video], target));
        // RTCP: one report per track right after PLAY, carrying the RTP time of the position.
        let mut reports = Vec::new();
        s.sender_reports(t0, Duration::from_secs(1_700_000_000), "sluice", &mut reports);
        assert_eq!(reports.len(), file.tracks.len());
        let (seq, rtptime) = s.rtp_info(0, start).unwrap();
        assert_eq!(seq, 65_530);
        assert_eq!(SenderReport::parse(&reports[0].1).unwrap().rtp_time, rtptime);
        reports.clear();
        s.sender_reports(t0 + Duration::from_secs(1), Duration::ZERO, "sluice", &mut reports);
        assert!(reports.is_empty(), "next report only after the interval");
        // Pause for an hour: nothing is due, and the position holds.
        let t1 = t0 + Duration::from_secs(1);
        s.pause(t1);
        due.clear();
        s.due(t1 + Duration::from_secs(3600), &mut due);
        assert!(due.is_empty());
        assert_eq!(s.position(t1 + Duration::from_secs(3600)), start + Duration::from_secs(1));
        s.play(t1 + Duration::from_secs(3600));
        assert_eq!(s.position(t1 + Duration::from_secs(3601)), start + Duration::from_secs(2));
        // Packetization of a due sample: timestamps in the track's clock, offset wrapped.
        let data = std::fs::read(DEMO).unwrap();
        let d = &first_video;
        let mut out = Packets::new();
        let n = s.packetize(d, &data[d.offset as usize..][..d.size as usize], &mut out).unwrap();
        assert_eq!(n, out.len());
        let track = &file.tracks[video];
        let sample = track.samples[d.sample];
        let expected = (u32::MAX - 1000).wrapping_add(
            ((i128::from(sample.composition_time()) - i128::from(track.edit_start)) * 90_000
                / i128::from(track.timescale)) as u32,
        );
        assert_eq!(RtpPacket::parse(out.get(0).unwrap()).unwrap().timestamp, expected);
        assert_eq!(
            s.packetize(d, &[0; 3], &mut out),
            Err(StreamError::WrongSize { expected: d.size, got: 3 })
        );
    }

    #[test]
    fn tick_conversions_round_trip() {
        // Exact up to 1 GHz: finer clocks cannot round-trip through whole nanoseconds.
        for rate in [1, 1000, 8000, 44_100, 48_000, 90_000, 1_000_000, 1_000_000_000] {
            for ticks in (0..2000u64).chain([1 << 32, u64::from(u32::MAX) * 3 + 7]) {
                let d = ticks_to_duration(ticks, rate);
                assert_eq!(duration_to_ticks(d, rate), ticks, "{ticks} at {rate} Hz");
            }
        }
        assert_eq!(ticks_to_duration(u64::MAX, 1), Duration::from_nanos(u64::MAX), "saturates");
    }

    #[test]
    fn range_end_stops_early() {
        let file = demo();
        let mut s = Streamer::new(file.clone(), &specs(&file), 1400).unwrap();
        s.seek(Duration::ZERO, Some(Duration::from_secs(1)));
        let t0 = Instant::now();
        s.play(t0);
        let mut due = Vec::new();
        s.due(t0 + Duration::from_secs(100), &mut due);
        assert!(s.is_done());
        assert!(due.iter().all(|d| d.time < Duration::from_secs(1)));
        assert!(!due.is_empty());
    }
}
