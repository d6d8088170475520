//! The per-file segment index: where each HLS segment starts in every packaged track.
//!
//! This module owns cutting a file into segments: at the video track's keyframes, a new segment
//! at the first keyframe at least the target duration after the current segment's start (as
//! ffmpeg's HLS muxer cuts), audio samples assigned to the segment their presentation time falls
//! in. It keeps only 16 bytes per segment plus the variant's attributes (codecs, resolution,
//! bandwidth), so a library's indexes can stay cached: a one-hour file at 6 s segments costs
//! under 10 KiB (see the `one_hour_index_is_small` test). The sample tables themselves are not
//! kept here; building a segment's boxes ([`super::fmp4`]) takes them from the [`Mp4File`].

use std::ops::Range;
use std::time::Duration;

use crate::codec::VideoRange;
use crate::mp4::{Mp4File, NothingToStream, Track, TrackKind};

use super::HlsError;

/// Most segments one file is cut into: 100,000 segments of 6 s is 166 hours. A file with more is
/// hostile (a few bytes of `stts` can declare any duration) and is refused.
pub const MAX_SEGMENTS: usize = 100_000;

/// Where one segment starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SegmentStart {
    /// Decode time of the segment's first sample of the main track (video, else audio).
    time: u64,
    /// Index of its first video sample.
    video: u32,
    /// Index of its first audio sample.
    audio: u32,
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct SegmentIndex {
    video: Option<usize>,
    audio: Option<usize>,
    /// One entry per segment, then one for the end of the file.
    starts: Box<[SegmentStart]>,
    timescale: u32,
    peak_bps: u64,
    average_bps: u64,
    codecs: Box<str>,
    resolution: Option<(u16, u16)>,
    /// Peak segment bit rate of the video and of the audio alone (a per-track rendition's
    /// `BANDWIDTH`).
    track_peak_bps: [u64; 2],
    /// Video frames per second, without video `None`.
    frame_rate: Option<f64>,
    /// The video's dynamic range, when its sample entry says.
    video_range: Option<VideoRange>,
    /// The video's Dolby Vision string and brand, when it is backward compatible.
    supplemental_codecs: Option<Box<str>>,
}

/// Which packaged track.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Packaged {
    /// The H.264 track (fMP4 track id 1).
    Video = 0,
    /// The AAC track (fMP4 track id 1 without video, else 2).
    Audio = 1,
}

impl Packaged {
    /// The name its per-track resources start with (`video.m3u8`, `audio-seg-3.m4s`).
    pub fn name(self) -> &'static str {
        match self {
            Packaged::Video => "video",
            Packaged::Audio => "audio",
        }
    }
}

impl SegmentIndex {
    /// Cuts `file` into segments of about `target` (at least one tick).
    pub fn build(file: &Mp4File, target: Duration) -> Result<SegmentIndex, HlsError> {
        let video = file.tracks.iter().position(|t| t.kind.is_video());
        let audio = file.tracks.iter().position(|t| !t.kind.is_video());
        file.streamable().map_err(|why| match why {
            NothingToStream::Fragmented => HlsError::Fragmented,
            NothingToStream::NoTrack(reasons) => HlsError::UnsupportedCodec(reasons),
        })?;
        // Every track indexed is video or audio, and there is one.
        let main = match video.or(audio) {
            Some(i) => &file.tracks[i],
            None => return Err(HlsError::UnsupportedCodec("no tracks".into())),
        };
        let audio_track = audio.map(|i| &file.tracks[i]);
        let target_ticks = (target.as_secs_f64() * f64::from(main.timescale)).max(1.0) as u64;
        let mut starts = vec![SegmentStart { time: main.samples[0].decode_time(), video: 0, audio: 0 }];
        for (i, s) in main.samples.iter().enumerate().skip(1) {
            let current = starts.last().map_or(0, |s| s.time);
            if s.is_sync() && s.decode_time().saturating_sub(current) >= target_ticks {
                if starts.len() >= MAX_SEGMENTS {
                    return Err(HlsError::TooManySegments(MAX_SEGMENTS));
                }
                let i = i as u32; // at most MAX_SAMPLES_PER_TRACK samples
                                  // Never before the previous segment's first audio sample: composition offsets
                                  // need not grow with decode order (and a damaged file's can be anything).
                let previous = starts.last().map_or(0, |s| s.audio);
                let audio_first = match (video, audio_track) {
                    (Some(_), Some(a)) => {
                        first_audio_at(a, presentation(main, s), main.timescale).max(previous)
                    }
                    _ => 0,
                };
                let (video_first, audio_first) = if video.is_some() { (i, audio_first) } else { (0, i) };
                starts.push(SegmentStart { time: s.decode_time(), video: video_first, audio: audio_first });
            }
        }
        let last = main.samples.len() - 1;
        let end = main.samples[last].decode_time() + u64::from(sample_duration(main, last));
        starts.push(SegmentStart {
            time: end,
            video: video.map_or(0, |i| file.tracks[i].samples.len() as u32),
            audio: audio_track.map_or(0, |a| a.samples.len() as u32),
        });
        Ok(SegmentIndex::assemble(file, video, audio, main.timescale, starts))
    }

    /// An index of `file` cut where someone else cut it (a live stream's segments): each cut is
    /// the main track's decode time at the segment's start and the index of its first video and
    /// first audio sample, and the last is where the last segment ends (the main track's end
    /// time, the video and audio sample counts). Cuts must be in order and within the tracks.
    pub fn from_cuts(file: &Mp4File, cuts: &[(u64, usize, usize)]) -> Result<SegmentIndex, HlsError> {
        let video = file.tracks.iter().position(|t| t.kind.is_video());
        let audio = file.tracks.iter().position(|t| !t.kind.is_video());
        let main = video.or(audio).map(|i| &file.tracks[i]);
        let counts = |i: Option<usize>| i.map_or(0, |i| file.tracks[i].samples.len());
        let in_order = cuts.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1 && w[0].2 <= w[1].2);
        let within = cuts.iter().all(|c| c.1 <= counts(video) && c.2 <= counts(audio));
        let (Some(main), true, true, 2..) =
            (main.filter(|m| !m.samples.is_empty()), in_order, within, cuts.len())
        else {
            return Err(HlsError::UnsupportedCodec("no cuts to index".into()));
        };
        let starts = cuts
            .iter()
            .map(|&(time, v, a)| SegmentStart { time, video: v as u32, audio: a as u32 })
            .collect();
        Ok(SegmentIndex::assemble(file, video, audio, main.timescale, starts))
    }

    fn assemble(
        file: &Mp4File,
        video: Option<usize>,
        audio: Option<usize>,
        timescale: u32,
        starts: Vec<SegmentStart>,
    ) -> SegmentIndex {
        let mut index = SegmentIndex {
            video,
            audio,
            starts: starts.into_boxed_slice(),
            timescale,
            peak_bps: 0,
            average_bps: 0,
            codecs: codecs(file, video, audio).into_boxed_str(),
            resolution: video.and_then(|i| file.tracks[i].kind.resolution()),
            track_peak_bps: [0; 2],
            frame_rate: None,
            video_range: video.and_then(|i| match &file.tracks[i].kind {
                TrackKind::Video(v) => v.video_range(),
                _ => None,
            }),
            supplemental_codecs: video.and_then(|i| match &file.tracks[i].kind {
                TrackKind::Video(v) => v.supplemental_codecs().map(String::into_boxed_str),
                _ => None,
            }),
        };
        if let Some(v) = video.map(|i| &file.tracks[i]) {
            let n = v.samples.len();
            let ticks = v.samples[n - 1].decode_time() + u64::from(sample_duration(v, n - 1))
                - v.samples[0].decode_time();
            if ticks > 0 {
                index.frame_rate = Some(n as f64 * f64::from(v.timescale) / ticks as f64);
            }
        }
        index.measure_bandwidth(file);
        index
    }

    /// Peak and average bits per second over the segments (the master playlist's `BANDWIDTH`
    /// and `AVERAGE-BANDWIDTH`).
    fn measure_bandwidth(&mut self, file: &Mp4File) {
        let mut total_bytes = 0u64;
        for n in 0..self.segments() {
            let mut bytes = 0u64;
            let secs = self.segment_duration(n);
            for (track, which) in self.tracks(file) {
                let range = self.samples(n, which);
                let track_bytes = track.samples[range].iter().map(|s| u64::from(s.size())).sum::<u64>();
                bytes += track_bytes;
                if secs > 0.0 {
                    let peak = &mut self.track_peak_bps[which as usize];
                    *peak = (*peak).max((track_bytes as f64 * 8.0 / secs).ceil() as u64);
                }
            }
            total_bytes += bytes;
            if secs > 0.0 {
                self.peak_bps = self.peak_bps.max((bytes as f64 * 8.0 / secs).ceil() as u64);
            }
        }
        let secs = self.duration();
        if secs > 0.0 {
            self.average_bps = (total_bytes as f64 * 8.0 / secs).ceil() as u64;
        }
        self.peak_bps = self.peak_bps.max(self.average_bps).max(1);
    }

    /// The packaged tracks of `file` (which must be the file this index was built from), video
    /// first, with which each is.
    pub fn tracks<'f>(&self, file: &'f Mp4File) -> impl Iterator<Item = (&'f Track, Packaged)> {
        let video = self.video.and_then(|i| file.tracks.get(i)).map(|t| (t, Packaged::Video));
        let audio = self.audio.and_then(|i| file.tracks.get(i)).map(|t| (t, Packaged::Audio));
        video.into_iter().chain(audio)
    }

    /// How many media segments there are.
    pub fn segments(&self) -> usize {
        self.starts.len() - 1
    }

    /// The sample indexes of segment `n` (which must exist) in the `which` track.
    pub fn samples(&self, n: usize, which: Packaged) -> Range<usize> {
        let (a, b) = (self.starts[n], self.starts[n + 1]);
        match which {
            Packaged::Video => a.video as usize..b.video as usize,
            Packaged::Audio => a.audio as usize..b.audio as usize,
        }
    }

    /// Segment `n`'s duration in seconds (0 past the end).
    pub fn segment_duration(&self, n: usize) -> f64 {
        match (self.starts.get(n), self.starts.get(n + 1)) {
            (Some(a), Some(b)) => b.time.saturating_sub(a.time) as f64 / f64::from(self.timescale),
            _ => 0.0,
        }
    }

    /// The whole duration in seconds.
    pub fn duration(&self) -> f64 {
        let (first, last) = (self.starts[0].time, self.starts[self.starts.len() - 1].time);
        last.saturating_sub(first) as f64 / f64::from(self.timescale)
    }

    /// How long the segments present, in seconds: [`Self::duration`], or longer where the audio
    /// outlasts the video (an AAC track's last frame commonly ends a few milliseconds after the
    /// last picture). A DASH presentation must reach its media's end: dash.js, finding the
    /// playhead past the MPD's duration before the element's own `ended`, seeks back and
    /// pauses there.
    pub fn presented_duration(&self, file: &Mp4File) -> f64 {
        let main = self.duration();
        let Some(audio) = self.tracks(file).find(|(_, w)| *w == Packaged::Audio).map(|(t, _)| t) else {
            return main;
        };
        match self.track_times(file, Packaged::Audio) {
            // The priming frames before the edit's start are presented before 0.
            Some((timescale, times)) if self.has(Packaged::Video) => {
                let (first, last) = (times[0].max(audio.edit_start), times[times.len() - 1]);
                main.max(last.saturating_sub(first) as f64 / f64::from(timescale.max(1)))
            }
            _ => main,
        }
    }

    /// When segment `n` begins to be shown, in seconds of the main track's media time: its first
    /// sample's composition time less the edit's start (a live track is shown a little after it
    /// is decoded); where it is decoded when the track has no sample there.
    pub fn presented_start(&self, file: &Mp4File, n: usize) -> f64 {
        let decoded = self.start_ticks(n) as f64 / f64::from(self.timescale.max(1));
        let Some((track, which)) = self.tracks(file).next() else { return decoded };
        let Some(first) = track.samples.get(self.samples(n, which).start) else { return decoded };
        let presented = first.composition_time().saturating_sub(track.edit_start);
        presented as f64 / f64::from(track.timescale.max(1))
    }

    /// The `CODECS` attribute: the video's and the audio's codec strings (RFC 6381).
    pub fn codecs(&self) -> &str {
        &self.codecs
    }

    /// Whether the file has the `which` track packaged.
    pub fn has(&self, which: Packaged) -> bool {
        match which {
            Packaged::Video => self.video.is_some(),
            Packaged::Audio => self.audio.is_some(),
        }
    }

    /// The `CODECS` of the `which` track alone (`avc1.PPCCLL`, `opus`); `None` without it.
    pub fn track_codecs(&self, which: Packaged) -> Option<&str> {
        let mut each = self.codecs.split(',');
        match which {
            Packaged::Video => self.video.and(each.next()),
            Packaged::Audio => self.audio.and(each.next_back()),
        }
    }

    /// Peak segment bit rate of the `which` track alone (bits per second, at least 1).
    pub fn track_peak_bandwidth(&self, which: Packaged) -> u64 {
        self.track_peak_bps[which as usize].max(1)
    }

    /// Video frames per second; `None` without video.
    pub fn frame_rate(&self) -> Option<f64> {
        self.frame_rate
    }

    /// The main track's timescale (video's, else audio's): the unit of [`Self::start_ticks`].
    pub fn timescale(&self) -> u32 {
        self.timescale
    }

    /// Decode time of segment `n`'s first sample of the main track, in [`Self::timescale`]
    /// ticks; `n == segments()` gives the end of the last segment.
    pub fn start_ticks(&self, n: usize) -> u64 {
        self.starts.get(n).map_or(0, |s| s.time)
    }

    /// Where segment `n` starts in milliseconds of media time, rounded (`n == segments()`: where
    /// the last ends): the cut times of a text track (timescale 1000) that follows the segments.
    pub fn start_ms(&self, n: usize) -> u64 {
        let scale = u128::from(self.timescale.max(1));
        let ms = (u128::from(self.start_ticks(n)) * 1000 + scale / 2) / scale;
        u64::try_from(ms).unwrap_or(u64::MAX)
    }

    /// The `which` track's own times of the segments, in its timescale: the decode time of each
    /// segment's first sample of that track (a segment without one starts where the one before
    /// does), then where its last sample ends. Each segment of the track lasts the difference,
    /// which is what both its DASH timeline and its HLS `EXTINF`s say. `None` without the track.
    pub fn track_times(&self, file: &Mp4File, which: Packaged) -> Option<(u32, Vec<u64>)> {
        let track = self.tracks(file).find(|(_, w)| *w == which).map(|(t, _)| t)?;
        let last = track.samples.len().checked_sub(1)?;
        let segments = self.segments();
        let mut times = Vec::with_capacity(segments + 1);
        for n in 0..segments {
            let first = track.samples.get(self.samples(n, which).start).map(|s| s.decode_time());
            times.push(first.unwrap_or_else(|| times.last().copied().unwrap_or(0)));
        }
        times.push(track.samples[last].decode_time() + u64::from(sample_duration(track, last)));
        Some((track.timescale, times))
    }

    /// Each segment's duration in seconds in the `which` track's own times (see
    /// [`Self::track_times`]); the main track's without the track.
    pub fn track_durations(&self, file: &Mp4File, which: Packaged) -> Vec<f64> {
        match self.track_times(file, which) {
            Some((timescale, times)) => times
                .windows(2)
                .map(|w| w[1].saturating_sub(w[0]) as f64 / f64::from(timescale.max(1)))
                .collect(),
            None => (0..self.segments()).map(|n| self.segment_duration(n)).collect(),
        }
    }

    /// Where each segment starts, in seconds from the first: what must match between
    /// renditions a player switches between.
    pub fn boundaries(&self) -> impl Iterator<Item = f64> + '_ {
        let first = self.starts[0].time;
        self.starts[..self.starts.len() - 1]
            .iter()
            .map(move |s| s.time.saturating_sub(first) as f64 / f64::from(self.timescale))
    }

    /// Segment `n`'s start and end in seconds from the first segment's start (what a subtitles
    /// segment covers); `(0, 0)` past the end.
    pub fn segment_times(&self, n: usize) -> (f64, f64) {
        let first = self.starts[0].time;
        let at = |i: usize| {
            self.starts
                .get(i)
                .map_or(0.0, |s| s.time.saturating_sub(first) as f64 / f64::from(self.timescale))
        };
        if n >= self.segments() {
            return (0.0, 0.0);
        }
        (at(n), at(n + 1))
    }

    /// The video's `VIDEO-RANGE`, when its sample entry names its transfer characteristics.
    pub fn video_range(&self) -> Option<VideoRange> {
        self.video_range
    }

    /// The video's HLS `SUPPLEMENTAL-CODECS` (`dvh1.08.07/db1p`): a backward-compatible Dolby
    /// Vision stream's own codec string and brand, where `CODECS` names its base layer's codec.
    pub fn supplemental_codecs(&self) -> Option<&str> {
        self.supplemental_codecs.as_deref()
    }

    /// The video's width and height, without video `None`.
    pub fn resolution(&self) -> Option<(u16, u16)> {
        self.resolution
    }

    /// Peak segment bit rate (bits per second).
    pub fn peak_bandwidth(&self) -> u64 {
        self.peak_bps
    }

    /// Average bit rate over the file (bits per second).
    pub fn average_bandwidth(&self) -> u64 {
        self.average_bps
    }

    /// Bytes this index holds on the heap, besides its own fixed size: what a cache of indexes
    /// counts against its budget.
    pub fn heap_bytes(&self) -> usize {
        std::mem::size_of_val(&*self.starts) + self.codecs.len()
    }
}

/// Presentation time of a sample in its track's ticks: the composition time with the edit list's
/// start taken off, as the file and the packaged segments (whose init segment carries the same
/// edit, see [`super::fmp4`]) present it.
fn presentation(track: &Track, s: &crate::mp4::Sample) -> u64 {
    s.composition_time().saturating_sub(track.edit_start)
}

/// Index of the first audio sample presented at or after `time` (in `timescale` ticks). An
/// AAC frame's composition time is its decode time; the priming frames before the edit's start
/// are presented before 0.
fn first_audio_at(audio: &Track, time: u64, timescale: u32) -> u32 {
    let at = u128::from(time) * u128::from(audio.timescale);
    audio.samples.partition_point(|s| {
        u128::from(s.decode_time().saturating_sub(audio.edit_start)) * u128::from(timescale) < at
    }) as u32
}

/// Duration of sample `i` of `track` in its ticks: up to the next sample's decode time; the last
/// sample lasts as long as the one before it (a file's last `stts` delta is not reliable, and
/// the track duration is the edit's, not the media's), a lone sample the track's duration.
pub(crate) fn sample_duration(track: &Track, i: usize) -> u32 {
    let s = &track.samples;
    let delta = match (s.get(i), s.get(i + 1)) {
        (Some(a), Some(b)) => b.decode_time().saturating_sub(a.decode_time()),
        _ if i > 0 && i < s.len() => s[i].decode_time().saturating_sub(s[i - 1].decode_time()),
        _ => track.duration,
    };
    u32::try_from(delta).unwrap_or(u32::MAX).max(1)
}

fn codecs(file: &Mp4File, video: Option<usize>, audio: Option<usize>) -> String {
    let out: Vec<String> =
        video.into_iter().chain(audio).map(|i| file.tracks[i].kind.codec_string()).collect();
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mp4::{AacConfig, H264Config, Sample};

    use crate::mp4::demo_file as demo;

    #[test]
    fn demo_cuts_at_its_keyframes() {
        let file = demo();
        // Keyframes every 2 s (ffprobe): a 2 s target cuts at each, a 6 s one never.
        let two = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
        assert_eq!(two.segments(), 3);
        let video: Vec<_> = (0..3).map(|n| two.samples(n, Packaged::Video)).collect();
        assert_eq!(video, [0..60, 60..120, 120..180]);
        for n in 0..3 {
            assert!((two.segment_duration(n) - 2.0).abs() < 0.01, "{}", two.segment_duration(n));
        }
        // Every audio sample is in exactly one segment, in order.
        let audio: Vec<_> = (0..3).map(|n| two.samples(n, Packaged::Audio)).collect();
        assert_eq!(audio[0].start, 0);
        assert_eq!(audio[0].end, audio[1].start);
        assert_eq!(audio[1].end, audio[2].start);
        assert_eq!(audio[2].end, 283);
        assert!((two.duration() - 6.0).abs() < 0.01);
        assert_eq!(two.codecs(), "avc1.4d401e,mp4a.40.2");
        assert_eq!(two.resolution(), Some((640, 360)));
        assert!(two.peak_bandwidth() >= two.average_bandwidth() && two.average_bandwidth() > 10_000);
        let six = SegmentIndex::build(&file, Duration::from_secs(6)).unwrap();
        assert_eq!(six.segments(), 1);
        assert_eq!(six.samples(0, Packaged::Video), 0..180);
    }

    /// A synthetic one-hour file (30 fps video with a keyframe every 2 s, 48 kHz AAC), the
    /// shape of a typical library file: its index must be small enough that 1,000 of them fit
    /// in 64 MiB with room to spare.
    #[test]
    fn one_hour_index_is_small() {
        let frames = 3600 * 30;
        let video = Track {
            id: 1,
            kind: TrackKind::H264(H264Config {
                sps: vec![vec![0x67]],
                pps: vec![vec![0x68]],
                nal_length_size: 4,
                profile_level_id: [0x64, 0, 0x28],
                width: 1920,
                height: 1080,
            }),
            timescale: 90_000,
            duration: 3600 * 90_000,
            edit_start: 0,
            samples: (0..frames).map(|i| Sample::new(i * 1000, 1000, i * 3000, 0, i % 60 == 0)).collect(),
        };
        let audio_frames = 3600 * 48_000 / 1024;
        let audio = Track {
            id: 2,
            kind: TrackKind::Aac(AacConfig {
                audio_specific_config: vec![0x11, 0x90],
                sample_rate: 48_000,
                channels: 2,
            }),
            timescale: 48_000,
            duration: 3600 * 48_000,
            edit_start: 0,
            samples: (0..audio_frames).map(|i| Sample::new(i * 10, 10, i * 1024, 0, true)).collect(),
        };
        let file =
            Mp4File { tracks: vec![video, audio], skipped: vec![], file_len: 1 << 40, fragmented: false };
        let index = SegmentIndex::build(&file, Duration::from_secs(6)).unwrap();
        assert_eq!(index.segments(), 600);
        let cost = index.heap_bytes() + std::mem::size_of::<SegmentIndex>();
        assert!(cost < 10 * 1024, "{cost} bytes");
        assert!(cost * 1000 < 64 << 20);
    }

    #[test]
    fn files_without_packagable_tracks_are_refused() {
        let file = Mp4File { tracks: vec![], skipped: vec![], file_len: 0, fragmented: true };
        assert!(matches!(SegmentIndex::build(&file, Duration::from_secs(6)), Err(HlsError::Fragmented)));
        let file = Mp4File {
            tracks: vec![],
            skipped: vec![crate::mp4::SkippedTrack { id: 1, reason: "video codec HEVC".into() }],
            file_len: 0,
            fragmented: false,
        };
        let err = SegmentIndex::build(&file, Duration::from_secs(6)).unwrap_err();
        assert!(err.to_string().contains("HEVC"), "{err}");
    }
}
