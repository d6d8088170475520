//! The CMAF view of a live stream: its samples cut into numbered segments at video keyframes,
//! each a complete `moof` + `mdat`, for live HLS and DASH and for the recorder.
//!
//! This module owns where a live stream is cut and the bytes of each cut. A segment starts at
//! the first keyframe at least [`LIVE_SEGMENT_TARGET`] after the previous segment's start (an
//! audio-only stream: at the first frame past it), the way [`SegmentIndex`] cuts a file, and
//! the audio frames go to the segment their presentation time falls in. A segment is listed
//! once it is complete: the keyframe that ends it has come, and the audio up to that keyframe
//! (or the video has run two targets past it without audio, so a stalled audio track does not
//! hold the video back). Segments are numbered from 0 at the publisher's first keyframe and
//! their decode times are the stream's own (0 is the publisher's first packet), so numbers and
//! times go on across every request and every viewer.
//!
//! The boxes are the ones files get: a segment's samples are put into a small [`Mp4File`] of
//! their own, laid out back to back, and the `sluice_media::hls` writer packages it; each
//! segment is built once, on first request, and shared by every later one. The cuts behind the
//! window (the last [`KEPT_SEGMENTS`]) are forgotten, as are those whose samples the stream no
//! longer keeps. It does not take RTP in ([`super`]), write playlists or manifests (the
//! server, with `sluice_media::hls::live`), nor store recordings.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use sluice_media::hls::{
    init_segment, media_segment, track_init_segment, track_media_segment, HlsError, Packaged, SegmentIndex,
};
use sluice_media::mp4::{Mp4File, Sample, Track};

use super::{LiveSnapshot, LiveStream};

/// How long a live segment is, at least (it ends at a keyframe). Two seconds keeps live HLS and
/// DASH some six seconds behind the publisher (three segments, as players start), where six
/// would put them near twenty.
pub const LIVE_SEGMENT_TARGET: Duration = Duration::from_secs(2);

/// Complete segments kept, newest last: a playlist lists the last few, and a viewer or the
/// recorder a little behind still finds the ones it has not fetched.
pub const KEPT_SEGMENTS: usize = 32;

/// One complete live segment.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveSegment {
    /// Its number, from 0 at the publisher's first keyframe.
    pub sequence: u64,
    /// When it starts on the stream's timeline, in seconds.
    pub start: f64,
    /// How long it lasts, in seconds (its main track's samples).
    pub duration: f64,
    /// The wall-clock time of its start (HLS `EXT-X-PROGRAM-DATE-TIME`).
    pub wallclock: SystemTime,
    /// Per packaged track (video, audio), the decode time of its first sample and how long its
    /// samples last, in that track's timescale: the DASH timeline of the track.
    pub times: [Option<(u64, u64)>; 2],
}

/// Why a live segment cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum LiveCmafError {
    /// No keyframe (or audio frame) has come yet.
    #[error("the live stream has no media yet")]
    NotReady,
    /// The packaging refused the samples.
    #[error(transparent)]
    Packaging(#[from] HlsError),
}

/// The cutting state of one stream, kept in its [`LiveStream`].
#[derive(Debug, Default)]
pub(crate) struct Cuts {
    state: Mutex<CutState>,
}

#[derive(Debug, Default)]
struct CutState {
    /// Which stream tracks are packaged, fixed at the first cut.
    packing: Option<Packing>,
    /// The segment being filled: its first samples and start, and how far it was looked at.
    open: Option<Open>,
    closed: VecDeque<Cut>,
    next_sequence: u64,
    /// Whether the stream ended and its last segment is cut: nothing more is.
    finished: bool,
    /// Init segments: muxed, video, audio.
    inits: [Option<Arc<Vec<u8>>>; 3],
}

/// The stream's track index of the packaged video and audio.
#[derive(Debug, Clone, Copy)]
struct Packing {
    video: Option<usize>,
    audio: Option<usize>,
}

impl Packing {
    /// The track segments are cut on: the video, else the audio.
    fn main(&self) -> Option<(usize, Packaged)> {
        match (self.video, self.audio) {
            (Some(v), _) => Some((v, Packaged::Video)),
            (None, Some(a)) => Some((a, Packaged::Audio)),
            _ => None,
        }
    }

    fn tracks(&self) -> impl Iterator<Item = (usize, Packaged)> {
        let v = self.video.map(|v| (v, Packaged::Video));
        v.into_iter().chain(self.audio.map(|a| (a, Packaged::Audio)))
    }
}

#[derive(Debug, Clone, Copy)]
struct Open {
    /// Sample numbers (counted from the publish's start) of the segment's first video and audio.
    first: [u64; 2],
    /// The main track's decode time at its start.
    time: u64,
    /// The next main sample number to look at for a cut.
    scanned: u64,
}

#[derive(Debug)]
struct Cut {
    segment: LiveSegment,
    /// Sample numbers per packaged track (video, audio).
    samples: [Range<u64>; 2],
    /// Its bytes once made: muxed, video alone, audio alone.
    built: [Option<Arc<Vec<u8>>>; 3],
}

fn slot(which: Option<Packaged>) -> usize {
    match which {
        None => 0,
        Some(Packaged::Video) => 1,
        Some(Packaged::Audio) => 2,
    }
}

/// The CMAF view of one live stream: [`LiveStream::cmaf`].
#[derive(Debug, Clone, Copy)]
pub struct LiveCmaf<'a> {
    pub(crate) stream: &'a LiveStream,
    pub(crate) cuts: &'a Cuts,
}

impl LiveCmaf<'_> {
    fn state(&self) -> MutexGuard<'_, CutState> {
        self.cuts.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The complete segments kept, oldest first (the one still filling is not among them until
    /// the stream ends).
    pub fn segments(&self) -> Vec<LiveSegment> {
        let snapshot = self.stream.snapshot();
        let mut state = self.state();
        refresh(&mut state, &snapshot, self.stream);
        state.closed.iter().map(|c| c.segment.clone()).collect()
    }

    /// Segment `sequence` with every packaged track (`which` `None`) or one alone; `None` once
    /// it is no longer kept, or before it is complete.
    pub fn segment(
        &self,
        sequence: u64,
        which: Option<Packaged>,
    ) -> Result<Option<Arc<Vec<u8>>>, LiveCmafError> {
        let snapshot = self.stream.snapshot();
        let mut state = self.state();
        refresh(&mut state, &snapshot, self.stream);
        let Some(packing) = state.packing else { return Ok(None) };
        if which.is_some_and(|w| !packing.tracks().any(|(_, p)| p == w)) {
            return Ok(None);
        }
        let Some(cut) = state.closed.iter_mut().find(|c| c.segment.sequence == sequence) else {
            return Ok(None);
        };
        if let Some(bytes) = &cut.built[slot(which)] {
            return Ok(Some(Arc::clone(bytes)));
        }
        let Some(bytes) = build(self.stream, &snapshot, packing, &cut.samples, sequence, which)? else {
            return Ok(None);
        };
        let bytes = Arc::new(bytes);
        cut.built[slot(which)] = Some(Arc::clone(&bytes));
        Ok(Some(bytes))
    }

    /// The init segment with every packaged track (`which` `None`) or one alone.
    pub fn init_segment(&self, which: Option<Packaged>) -> Result<Arc<Vec<u8>>, LiveCmafError> {
        let snapshot = self.stream.snapshot();
        let mut state = self.state();
        refresh(&mut state, &snapshot, self.stream);
        let packing = state.packing.ok_or(LiveCmafError::NotReady)?;
        if let Some(bytes) = &state.inits[slot(which)] {
            return Ok(Arc::clone(bytes));
        }
        // One sample a track is all the init segment's writer looks at (codec and timescale).
        let first: Vec<(usize, Packaged, Range<usize>)> = packing
            .tracks()
            .filter(|(i, _)| !snapshot.file.tracks[*i].samples.is_empty())
            .map(|(i, p)| (i, p, 0..1))
            .collect();
        if first.len() != packing.tracks().count() {
            return Err(LiveCmafError::NotReady);
        }
        let (file, _) = mini_file(&snapshot, &first);
        let index = SegmentIndex::build(&file, Duration::from_secs(1 << 30))?;
        let bytes = Arc::new(match which {
            None => init_segment(&file, &index)?,
            Some(w) if index.has(w) => track_init_segment(&file, &index, w)?,
            Some(_) => return Err(LiveCmafError::NotReady),
        });
        state.inits[slot(which)] = Some(Arc::clone(&bytes));
        Ok(bytes)
    }

    /// The last `window` complete segments (at most) as a file of their samples and an index
    /// cut where they are: what a live playlist or manifest lists and says of the stream
    /// (codecs, resolution, bit rates, each track's times). `None` before a segment is complete.
    pub fn window(&self, window: usize) -> Option<LiveWindow> {
        let snapshot = self.stream.snapshot();
        let mut state = self.state();
        refresh(&mut state, &snapshot, self.stream);
        let packing = state.packing?;
        let listed: Vec<&Cut> = state.closed.iter().rev().take(window.max(1)).rev().collect();
        let (first, last) = (listed.first()?, listed.last()?);
        let mut ranges = Vec::new();
        // Each track's window starts at its first listed segment's first sample.
        let base = [first.samples[0].start, first.samples[1].start];
        for (i, p) in packing.tracks() {
            let dropped = snapshot.dropped[i];
            let (from, to) = (first.samples[p as usize].start, last.samples[p as usize].end);
            let from = usize::try_from(from.checked_sub(dropped)?).ok()?;
            let to = usize::try_from(to.checked_sub(dropped)?).ok()?;
            if to <= from || to > snapshot.file.tracks[i].samples.len() {
                return None;
            }
            ranges.push((i, p, from..to));
        }
        let (file, _) = mini_file(&snapshot, &ranges);
        let main = packing.main()?.1 as usize;
        let relative = |n: u64, p: usize| n.saturating_sub(base[p]) as usize;
        let mut cuts: Vec<(u64, usize, usize)> = listed
            .iter()
            .map(|c| {
                let time = c.segment.times[main].map_or(0, |t| t.0);
                (time, relative(c.samples[0].start, 0), relative(c.samples[1].start, 1))
            })
            .collect();
        let end_time = last.segment.times[main].map_or(0, |t| t.0 + t.1);
        cuts.push((end_time, relative(last.samples[0].end, 0), relative(last.samples[1].end, 1)));
        let index = SegmentIndex::from_cuts(&file, &cuts).ok()?;
        let segments = listed.iter().map(|c| c.segment.clone()).collect();
        Some(LiveWindow { file, index, segments, origin: self.stream.origin_wallclock()? })
    }
}

/// A window of a live stream's segments: see [`LiveCmaf::window`].
#[derive(Debug)]
pub struct LiveWindow {
    /// The segments' samples (laid out anew: their offsets are nobody's).
    pub file: Mp4File,
    /// `file` cut where the segments are.
    pub index: SegmentIndex,
    /// The segments, oldest first.
    pub segments: Vec<LiveSegment>,
    /// The wall-clock time of the stream's timeline's 0.
    pub origin: SystemTime,
}

/// Cuts what came since the last call, and forgets what left the window.
fn refresh(state: &mut CutState, snapshot: &LiveSnapshot, stream: &LiveStream) {
    let tracks = &snapshot.file.tracks;
    let packing = *state.packing.get_or_insert_with(|| Packing {
        video: tracks.iter().position(|t| t.kind.is_video()),
        audio: tracks.iter().position(|t| !t.kind.is_video()),
    });
    let Some((main_index, main_kind)) = packing.main() else { return };
    if state.finished {
        return forget_gone(state, snapshot, packing);
    }
    let main = &tracks[main_index];
    let main_dropped = snapshot.dropped[main_index];
    let audio = packing.video.and(packing.audio).map(|a| (&tracks[a], snapshot.dropped[a]));
    let target = (LIVE_SEGMENT_TARGET.as_secs_f64() * f64::from(main.timescale)) as u64;
    // A segment still filling whose first samples the stream dropped cannot be made: start over.
    if state.open.is_some_and(|o| o.first[main_kind as usize] < main_dropped) {
        state.open = None;
    }
    if state.open.is_none() {
        let Some(i) = main.samples.iter().position(Sample::is_sync) else { return };
        let at = seconds(main.samples[i].composition_time(), main.timescale);
        let audio_first = match audio {
            Some((a, dropped)) => match first_at(a, at) {
                Some(j) => dropped + j as u64,
                None => return,
            },
            None => 0,
        };
        let number = main_dropped + i as u64;
        let mut first = [0; 2];
        first[main_kind as usize] = number;
        if main_kind == Packaged::Video {
            first[1] = audio_first;
        }
        let time = main.samples[i].decode_time();
        state.open = Some(Open { first, time, scanned: number + 1 });
    }
    let origin = stream.origin_wallclock().unwrap_or(SystemTime::UNIX_EPOCH);
    while let Some(open) = state.open {
        let from = usize::try_from(open.scanned.saturating_sub(main_dropped)).unwrap_or(usize::MAX);
        let found = main
            .samples
            .iter()
            .enumerate()
            .skip(from)
            .find(|(_, s)| s.is_sync() && s.decode_time().saturating_sub(open.time) >= target);
        let (end, end_time, audio_end) = match found {
            Some((i, s)) => {
                let at = seconds(s.composition_time(), main.timescale);
                let audio_end = match audio {
                    Some((a, dropped)) => match first_at(a, at) {
                        Some(j) => Some(dropped + j as u64),
                        // The audio up to the cut has not come: wait for it, unless the video
                        // ran two targets past the cut without it.
                        None if last_decode(main).saturating_sub(s.decode_time()) < 2 * target => {
                            state.open = Some(Open { scanned: main_dropped + i as u64, ..open });
                            break;
                        }
                        None => Some(dropped + a.samples.len() as u64),
                    },
                    None => None,
                };
                (main_dropped + i as u64, s.decode_time(), audio_end)
            }
            None if stream.has_ended() && last_decode(main) > open.time => {
                let end_time = last_decode(main) + u64::from(last_duration(main));
                let audio_end = audio.map(|(a, dropped)| dropped + a.samples.len() as u64);
                (main_dropped + main.samples.len() as u64, end_time, audio_end)
            }
            None => {
                state.open = Some(Open { scanned: main_dropped + main.samples.len() as u64, ..open });
                break;
            }
        };
        let mut samples = [0..0, 0..0];
        samples[main_kind as usize] = open.first[main_kind as usize]..end;
        let mut times = [None, None];
        times[main_kind as usize] = Some((open.time, end_time - open.time));
        if let (Some((a, dropped)), Some(audio_end)) = (audio, audio_end) {
            samples[1] = open.first[1]..audio_end.max(open.first[1]);
            times[1] = audio_times(a, dropped, &samples[1]);
        }
        let start = seconds(open.time, main.timescale);
        let sequence = state.next_sequence;
        state.next_sequence += 1;
        state.closed.push_back(Cut {
            segment: LiveSegment {
                sequence,
                start,
                duration: seconds(end_time - open.time, main.timescale),
                wallclock: origin + Duration::from_secs_f64(start),
                times,
            },
            samples,
            built: [None, None, None],
        });
        let ended = found.is_none();
        state.finished = ended;
        state.open = (!ended).then(|| {
            let mut first = [0; 2];
            if main_kind == Packaged::Video {
                first[1] = audio_end.unwrap_or(0);
            }
            first[main_kind as usize] = end;
            Open { first, time: end_time, scanned: end + 1 }
        });
    }
    forget_gone(state, snapshot, packing);
}

/// Forgets the segments behind the window, and those whose samples the stream no longer keeps.
fn forget_gone(state: &mut CutState, snapshot: &LiveSnapshot, packing: Packing) {
    while state.closed.len() > KEPT_SEGMENTS
        || state
            .closed
            .front()
            .is_some_and(|c| packing.tracks().any(|(i, p)| c.samples[p as usize].start < snapshot.dropped[i]))
    {
        state.closed.pop_front();
    }
}

/// The index of the first sample of audio track `a` presented at `at` seconds or later.
fn first_at(a: &Track, at: f64) -> Option<usize> {
    let j = a.samples.partition_point(|s| seconds(s.composition_time(), a.timescale) < at);
    (j < a.samples.len()).then_some(j)
}

/// The decode time of an audio segment's first frame, and how long its frames last (to the
/// next segment's first frame, else by the last frame's length).
fn audio_times(a: &Track, dropped: u64, numbers: &Range<u64>) -> Option<(u64, u64)> {
    let from = usize::try_from(numbers.start.checked_sub(dropped)?).ok()?;
    let to = usize::try_from(numbers.end.checked_sub(dropped)?).ok()?;
    let start = a.samples.get(from)?.decode_time();
    let end = match a.samples.get(to) {
        Some(next) => next.decode_time(),
        None => last_decode(a) + u64::from(last_duration(a)),
    };
    (to > from).then_some((start, end.saturating_sub(start)))
}

fn last_decode(t: &Track) -> u64 {
    t.samples.last().map_or(0, Sample::decode_time)
}

/// The last sample's length: the one before it's (a live track does not know when the next
/// sample comes).
fn last_duration(t: &Track) -> u32 {
    match t.samples.len() {
        0 | 1 => 1,
        n => (t.samples[n - 1].decode_time() - t.samples[n - 2].decode_time()).max(1) as u32,
    }
}

fn seconds(ticks: u64, timescale: u32) -> f64 {
    ticks as f64 / f64::from(timescale.max(1))
}

/// A file of the samples `ranges` (indexes into the snapshot's track, per packaged track) laid
/// out back to back, and each sample's live offset in that order.
fn mini_file(snapshot: &LiveSnapshot, ranges: &[(usize, Packaged, Range<usize>)]) -> (Mp4File, Vec<u64>) {
    let mut offset = 0u64;
    let mut live_offsets = Vec::new();
    let mut tracks = Vec::new();
    for (n, (i, _, range)) in ranges.iter().enumerate() {
        let source = &snapshot.file.tracks[*i];
        let samples: Vec<Sample> = source.samples[range.clone()]
            .iter()
            .map(|s| {
                let moved =
                    Sample::new(offset, s.size(), s.decode_time(), s.composition_offset(), s.is_sync());
                offset += u64::from(s.size());
                live_offsets.push(s.offset());
                moved
            })
            .collect();
        let span = match (samples.first(), samples.last()) {
            (Some(a), Some(b)) => b.decode_time() - a.decode_time() + u64::from(last_duration(source)),
            _ => 0,
        };
        tracks.push(Track {
            id: n as u32 + 1,
            kind: source.kind.clone(),
            timescale: source.timescale,
            duration: span,
            edit_start: 0,
            samples,
        });
    }
    let file = Mp4File { tracks, skipped: Vec::new(), file_len: offset, fragmented: false };
    (file, live_offsets)
}

/// The bytes of segment `sequence` made of `numbers` (per packaged track); `None` when a sample
/// is no longer kept.
fn build(
    stream: &LiveStream,
    snapshot: &LiveSnapshot,
    packing: Packing,
    numbers: &[Range<u64>; 2],
    sequence: u64,
    which: Option<Packaged>,
) -> Result<Option<Vec<u8>>, LiveCmafError> {
    let mut ranges = Vec::new();
    for (i, p) in packing.tracks() {
        let numbers = &numbers[p as usize];
        let dropped = snapshot.dropped[i];
        let (Some(from), Some(to)) = (numbers.start.checked_sub(dropped), numbers.end.checked_sub(dropped))
        else {
            return Ok(None);
        };
        let (from, to) = (from as usize, to as usize);
        if to > snapshot.file.tracks[i].samples.len() {
            return Ok(None);
        }
        if to > from {
            ranges.push((i, p, from..to));
        }
    }
    let (file, live_offsets) = mini_file(snapshot, &ranges);
    let index = SegmentIndex::build(&file, Duration::from_secs(1 << 30))?;
    let plan = match which {
        None => media_segment(&file, &index, 0)?,
        Some(w) if index.has(w) => track_media_segment(&file, &index, w, 0)?,
        Some(_) => return Ok(None),
    };
    let len = plan.len();
    let mut out = plan.header;
    // `mfhd`'s sequence number: the segment's, counted from 1 (the writer numbers from the file).
    if out.get(12..16) == Some(b"mfhd") {
        out[20..24].copy_from_slice(&(sequence as u32).wrapping_add(1).to_be_bytes());
    }
    // The plan's ranges are of the laid-out samples, in order: find each sample's live bytes.
    let laid_out: Vec<Sample> = file.tracks.iter().flat_map(|t| t.samples.iter().copied()).collect();
    for range in &plan.ranges {
        let first = laid_out.partition_point(|s| s.offset() < range.start);
        for (s, live) in laid_out[first..].iter().zip(&live_offsets[first..]) {
            if s.offset() >= range.end {
                break;
            }
            let Some(bytes) = stream.sample(*live) else { return Ok(None) };
            out.extend_from_slice(&bytes[..(s.size() as usize).min(bytes.len())]);
        }
    }
    debug_assert_eq!(out.len() as u64, len);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use super::*;
    use crate::live::{tracks_from_sdp, LiveRegistry};

    /// H.264 and AAC at 44.1 kHz, as ffmpeg announces them.
    const SDP: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n\
        a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z2QADKzZQUH7ARAAAAMAEAAAAwMg8UKZYA==,aOvjyyLA\r\n\
        a=control:streamid=0\r\nm=audio 0 RTP/AVP 97\r\na=rtpmap:97 MPEG4-GENERIC/44100/1\r\n\
        a=fmtp:97 profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;indexdeltalength=3; config=1208\r\n\
        a=control:streamid=1\r\n";

    /// One picture in one RTP packet (a single NAL unit, marker set): an IDR slice or not.
    fn picture(seq: u16, timestamp: u32, keyframe: bool) -> Vec<u8> {
        let mut p = vec![0x80, 0x80 | 96];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&timestamp.to_be_bytes());
        p.extend_from_slice(&7u32.to_be_bytes());
        p.push(if keyframe { 0x65 } else { 0x41 });
        p.extend_from_slice(&[0xab; 40]);
        p
    }

    fn aac_frame(seq: u16, timestamp: u32) -> Vec<u8> {
        let mut p = vec![0x80, 0x80 | 97];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&timestamp.to_be_bytes());
        p.extend_from_slice(&9u32.to_be_bytes());
        p.extend_from_slice(&[0x00, 0x10, 0x00, 0x20, 1, 2, 3, 4]);
        p
    }

    /// Publishes `seconds` of 25 fps video (a keyframe a second) and 44.1 kHz AAC.
    fn publish(stream: &LiveStream, seconds: u32, now: Instant) {
        let (mut video, mut audio) = (0u32, 0u32);
        for tick in 0..seconds * 1000 {
            if tick * 25 / 1000 >= video {
                stream.push_rtp(0, &picture(video as u16, video * 3600, video % 25 == 0), now);
                video += 1;
            }
            if u64::from(tick) * 44_100 / 1000 >= u64::from(audio) * 1024 {
                stream.push_rtp(1, &aac_frame(audio as u16, audio * 1024), now);
                audio += 1;
            }
        }
    }

    #[test]
    fn cuts_at_keyframes_numbers_on_and_builds_each_segment_once() {
        let registry = LiveRegistry::new("/live");
        let now = Instant::now();
        let tracks = tracks_from_sdp(SDP.as_bytes()).unwrap();
        let stream = registry.publish("/live/x", "10.0.0.1:1".parse().unwrap(), tracks, now).unwrap();
        assert!(stream.cmaf().segments().is_empty() && stream.cmaf().window(6).is_none());
        publish(&stream, 9, now);
        let cmaf = stream.cmaf();
        let segments = cmaf.segments();
        assert!(segments.len() >= 3, "9 s in segments of 2 s at least: {segments:?}");
        for (n, pair) in segments.windows(2).enumerate() {
            let (a, b) = (&pair[0], &pair[1]);
            assert_eq!((a.sequence, b.sequence), (n as u64, n as u64 + 1));
            assert!(a.duration >= 1.99 && (a.start + a.duration - b.start).abs() < 1e-9, "{a:?} {b:?}");
            for track in 0..2 {
                let (t, d) = a.times[track].unwrap();
                assert_eq!(t + d, b.times[track].unwrap().0, "track {track} runs on without a gap");
            }
        }
        let init = cmaf.init_segment(None).unwrap();
        assert_eq!(&init[4..8], b"ftyp");
        let first = cmaf.segment(0, None).unwrap().unwrap();
        assert_eq!((&first[4..8], &first[12..16]), (&b"moof"[..], &b"mfhd"[..]));
        assert_eq!(u32::from_be_bytes(first[20..24].try_into().unwrap()), 1, "mfhd counts from 1");
        assert!(Arc::ptr_eq(&first, &cmaf.segment(0, None).unwrap().unwrap()), "built once");
        let second = cmaf.segment(1, Some(Packaged::Audio)).unwrap().unwrap();
        assert_eq!(u32::from_be_bytes(second[20..24].try_into().unwrap()), 2);
        // The audio segment's mdat is its frames (4 bytes each) and nothing else.
        let frames = segments[1].times[1].unwrap().1 / 1024;
        let mdat = second.windows(4).position(|w| w == b"mdat").unwrap() - 4;
        assert_eq!((second.len() - mdat - 8) as u64, 4 * frames);
        assert!(cmaf.segment(99, None).unwrap().is_none());
        let window = cmaf.window(2).unwrap();
        assert_eq!(window.segments.len(), 2);
        assert_eq!(window.index.segments(), 2);
        assert_eq!(window.segments[0].sequence, segments[segments.len() - 2].sequence);
        // The publisher goes: what it sent last is a segment too, and every picture is in one.
        let before = segments.len();
        registry.end(&stream);
        let all = stream.cmaf().segments();
        assert_eq!(all.len(), before + 1);
        assert_eq!(stream.cmaf().segments(), all, "nothing is cut after the last segment");
        assert_eq!(stream.cmaf().window(KEPT_SEGMENTS).unwrap().segments, all);
        let pictures: u64 = {
            let state = stream.cmaf().cuts.state.lock().unwrap();
            state.closed.iter().map(|c| c.samples[0].end - c.samples[0].start).sum()
        };
        assert_eq!(pictures, 9 * 25);
    }

    #[test]
    fn an_audio_only_stream_is_cut_every_two_seconds() {
        let sdp = &SDP[SDP.find("m=audio").unwrap()..];
        let sdp = format!("v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\n{sdp}");
        let registry = LiveRegistry::new("/live");
        let now = Instant::now();
        let tracks = tracks_from_sdp(sdp.as_bytes()).unwrap();
        let stream = registry.publish("/live/a", "10.0.0.1:1".parse().unwrap(), tracks, now).unwrap();
        for i in 0..44_100 * 5 / 1024 {
            stream.push_rtp(0, &aac_frame(i as u16, i * 1024), now);
        }
        let segments = stream.cmaf().segments();
        assert_eq!(segments.len(), 2, "{segments:?}");
        assert!(segments.iter().all(|s| (2.0..2.1).contains(&s.duration)));
        assert!(stream.cmaf().segment(1, Some(Packaged::Audio)).unwrap().is_some());
        assert!(stream.cmaf().segment(1, Some(Packaged::Video)).unwrap().is_none());
        assert!(stream.cmaf().init_segment(None).is_ok());
    }
}
