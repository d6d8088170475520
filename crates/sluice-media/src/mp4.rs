//! MP4 demux into sample tables.
//!
//! This module owns reading an MP4 file's index: it finds the `moov` box, hands it to `mp4parse`,
//! and turns every H.264, AAC, HEVC, AV1, VP9, Opus, AC-3 and E-AC-3 track into a [`Track`] with
//! its codec parameters and a compact table of [`Sample`]s (file offset, size, decode time,
//! composition offset, sync flag). The codecs beyond H.264 and AAC keep their whole sample entry,
//! parsed by [`crate::codec`] from the `moov`'s own bytes ([`entries`]). It does not read sample
//! data (but for the head of an `hev1` track's first keyframe, to see whether its parameter sets
//! are the `hvcC`'s), does not apply edit lists to timestamps (it reports the edit's start so
//! the caller can). The samples of a fragmented MP4 (`moof` boxes after the `moov`) are read by
//! [`fragments`] into the same tables, up to the last complete fragment of a growing file.
//!
//! Why `mp4parse` rather than the `mp4` crate: `mp4parse` is the demuxer Firefox ships, so it is
//! continuously fuzzed (OSS-Fuzz) against hostile files, it uses fallible allocation
//! (`TryVec`) for every table a file declares, and it exposes
//! `mp4parse::unstable::create_sample_table`, which already resolves `stsc`/`stco`/`stsz`/`stts`/
//! `ctts`/`stss` into per-sample offsets, times and sync flags with checked arithmetic. The `mp4`
//! crate reads whole boxes with infallible allocations sized by the file and its sample lookup
//! API answers one sample at a time, which is the wrong shape for building a table once.
//!
//! Bounded allocation: the `moov` box is read into memory only up to [`MAX_MOOV_BYTES`], and a
//! track's sample count is checked against [`MAX_SAMPLES_PER_TRACK`] and the file's size *before*
//! `mp4parse` expands the compact tables, because a few bytes of `stsc` can otherwise declare
//! billions of samples.

pub mod clip;
pub mod join;

use std::io::{Read, Seek, SeekFrom};

use mp4parse::unstable::{create_sample_table, CheckedInteger};
use mp4parse::{AudioCodecSpecific, CodecType, SampleEntry, TrackType, VideoCodecSpecific};

use crate::codec::{parse_sample_entry, AudioEntry, CodecEntry, VideoEntry};

mod entries;
mod fragments;

pub use fragments::{MAX_FRAGMENT_HEADER_BYTES, MAX_MOOF_BYTES};

/// Largest `moov` box read into memory. A 3-hour 60 fps H.264 file has a `moov` of a few MB;
/// anything beyond this is hostile or not a media file we want to index in memory.
pub const MAX_MOOV_BYTES: u64 = 64 << 20;

/// Most samples one track may have: 4 Mi samples is 19 hours of 60 fps video or 24 hours of
/// 48 kHz AAC. At 24 bytes a sample, a full table is 96 MiB.
pub const MAX_SAMPLES_PER_TRACK: u64 = 4 << 20;

/// Most tracks indexed from one file; RTP dynamic payload types (96..=127) bound this too.
pub const MAX_TRACKS: usize = 32;

/// Why a track without samples is skipped.
const NO_SAMPLES: &str = "no samples";

/// Most top-level boxes walked while looking for `moov` (each costs one seek).
const MAX_TOP_LEVEL_BOXES: usize = 4096;

/// Why a file could not be indexed. Every malformed input ends here, never in a panic.
#[derive(Debug, thiserror::Error)]
pub enum Mp4Error {
    /// Reading the file failed.
    #[error("reading the file: {0}")]
    Io(#[from] std::io::Error),
    /// The top-level box structure is broken (a box runs past the end, a size is impossible).
    #[error("malformed box structure at byte {offset}: {what}")]
    BadBox {
        /// Offset of the offending box header.
        offset: u64,
        /// What was wrong.
        what: &'static str,
    },
    /// No `moov` box: not an MP4 file, or a fragmented/truncated one.
    #[error("no moov box in the file")]
    NoMoov,
    /// The `moov` box is larger than [`MAX_MOOV_BYTES`].
    #[error("moov box of {size} bytes is larger than the limit of {limit}")]
    MoovTooLarge {
        /// Size the file declares.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// `mp4parse` rejected the `moov` box.
    #[error("malformed MP4 index: {0}")]
    Parse(#[from] mp4parse::Error),
    /// A movie fragment (`moof`) contradicts itself or the file.
    #[error("malformed movie fragment at byte {offset}: {what}")]
    BadFragment {
        /// Offset of the `moof` box.
        offset: u64,
        /// What was wrong.
        what: &'static str,
    },
    /// A track's sample tables are inconsistent or exceed the limits.
    #[error("track {track}: {what}")]
    BadSampleTable {
        /// The MP4 track id.
        track: u32,
        /// What was wrong.
        what: &'static str,
    },
    /// A codec configuration record (`avcC`, AudioSpecificConfig) is malformed.
    #[error("track {track}: malformed codec configuration: {what}")]
    BadCodecConfig {
        /// The MP4 track id.
        track: u32,
        /// What was wrong.
        what: &'static str,
    },
}

/// One sample (an H.264 access unit or an AAC frame), packed into 24 bytes because a long file
/// has millions of them and the table stays in memory while the file is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    offset: u64,
    decode_time: u64,
    /// Size in the low 31 bits, sync flag in the top bit.
    size_sync: u32,
    composition_offset: i32,
}

const SYNC_BIT: u32 = 1 << 31;

impl Sample {
    /// A sample built by hand (a live source's table, and tests of the modules that consume
    /// tables); `size` must be below 2 GiB.
    pub fn new(offset: u64, size: u32, decode_time: u64, composition_offset: i32, sync: bool) -> Sample {
        assert!(size & SYNC_BIT == 0);
        Sample { offset, decode_time, size_sync: size | if sync { SYNC_BIT } else { 0 }, composition_offset }
    }

    /// Byte offset of the sample in the file.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Size in bytes (samples of 2 GiB or more are rejected when indexing).
    pub fn size(&self) -> u32 {
        self.size_sync & !SYNC_BIT
    }

    /// Decode time in the track's timescale.
    pub fn decode_time(&self) -> u64 {
        self.decode_time
    }

    /// Composition (presentation) time minus decode time, in the track's timescale.
    pub fn composition_offset(&self) -> i32 {
        self.composition_offset
    }

    /// Presentation time in the track's timescale (decode time plus composition offset, at 0 at
    /// least: a negative composition offset on the first samples is clamped).
    pub fn composition_time(&self) -> u64 {
        self.decode_time.saturating_add_signed(i64::from(self.composition_offset))
    }

    /// Whether decoding can start at this sample (a keyframe; every AAC frame).
    pub fn is_sync(&self) -> bool {
        self.size_sync & SYNC_BIT != 0
    }

    /// The byte range of the sample in the file.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.offset..self.offset + u64::from(self.size())
    }
}

/// H.264 parameters from the `avcC` box, what RTP and SDP need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct H264Config {
    /// Sequence parameter sets (NAL units with their header byte, no length prefix).
    pub sps: Vec<Vec<u8>>,
    /// Picture parameter sets.
    pub pps: Vec<Vec<u8>>,
    /// Bytes of the length prefix before each NAL unit in a sample: 1, 2 or 4.
    pub nal_length_size: u8,
    /// profile_idc, constraint flags and level_idc: the SDP `profile-level-id`.
    pub profile_level_id: [u8; 3],
    /// Coded width in pixels, from the sample entry.
    pub width: u16,
    /// Coded height in pixels.
    pub height: u16,
}

/// AAC parameters from the `esds` box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AacConfig {
    /// The AudioSpecificConfig bytes: the SDP `config=` in hex.
    pub audio_specific_config: Vec<u8>,
    /// Sampling rate in Hz (also the RTP clock rate).
    pub sample_rate: u32,
    /// Channel count.
    pub channels: u16,
}

/// What a track carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TrackKind {
    /// H.264 video.
    H264(H264Config),
    /// AAC audio.
    Aac(AacConfig),
    /// HEVC, AV1 or VP9 video, with its sample entry.
    Video(VideoEntry),
    /// Opus, AC-3 or E-AC-3 audio, with its sample entry.
    Audio(AudioEntry),
}

impl TrackKind {
    /// Whether it is a video track.
    pub fn is_video(&self) -> bool {
        matches!(self, TrackKind::H264(_) | TrackKind::Video(_))
    }

    /// The RFC 6381 codec string (`avc1.4d401e`, `mp4a.40.2`, `hvc1.2.4.L153.B0`, `opus`).
    pub fn codec_string(&self) -> String {
        match self {
            TrackKind::H264(h) => {
                let [p, c, l] = h.profile_level_id;
                format!("avc1.{p:02x}{c:02x}{l:02x}")
            }
            // The audio object type is the AudioSpecificConfig's first five bits (2: AAC-LC).
            TrackKind::Aac(a) => format!("mp4a.40.{}", a.audio_specific_config.first().map_or(2, |b| b >> 3)),
            TrackKind::Video(v) => v.codec_string(),
            TrackKind::Audio(a) => a.codec_string().to_string(),
        }
    }

    /// The codec's name for people (`H.264`, `HEVC`, `E-AC-3`).
    pub fn name(&self) -> &'static str {
        match self {
            TrackKind::H264(_) => "H.264",
            TrackKind::Aac(_) => "AAC",
            TrackKind::Video(v) => v.name(),
            TrackKind::Audio(a) => a.name(),
        }
    }

    /// Width and height in pixels of a video track.
    pub fn resolution(&self) -> Option<(u16, u16)> {
        match self {
            TrackKind::H264(h) => Some((h.width, h.height)),
            TrackKind::Video(v) => Some((v.width, v.height)),
            _ => None,
        }
    }
}

/// One playable track.
#[derive(Debug, Clone)]
pub struct Track {
    /// The MP4 track id (`tkhd`).
    pub id: u32,
    /// Codec and its parameters.
    pub kind: TrackKind,
    /// Ticks per second of the sample times.
    pub timescale: u32,
    /// Presentation duration in ticks: the edit list's, else `mdhd`'s, else the samples' span.
    pub duration: u64,
    /// Media time where the edit list starts presentation, in ticks (0 without an edit list).
    /// Presentation time of a sample is `composition_time() - edit_start`.
    pub edit_start: u64,
    /// Samples in decode order.
    pub samples: Vec<Sample>,
}

impl Track {
    /// Duration in seconds.
    pub fn duration_secs(&self) -> f64 {
        self.duration as f64 / f64::from(self.timescale)
    }

    /// Converts seconds to this track's ticks (saturating; negative and NaN are 0).
    pub fn ticks(&self, secs: f64) -> u64 {
        let t = secs * f64::from(self.timescale);
        if t.is_nan() || t <= 0.0 {
            0
        } else {
            t as u64
        }
    }

    /// Index of the sync sample at or before decode time `ticks`: where a `PLAY` with
    /// `Range: npt=` starts so the decoder gets a keyframe first. Before the first sync sample
    /// this is the first sync sample; `None` only when the track has no sync sample at all.
    pub fn sync_sample_at_or_before(&self, ticks: u64) -> Option<usize> {
        // Samples are in decode order, so decode times are sorted: binary search, then walk back
        // to the keyframe (a GOP is at most a few hundred samples).
        let after = self.samples.partition_point(|s| s.decode_time <= ticks);
        let before = self.samples[..after].iter().rposition(Sample::is_sync);
        before.or_else(|| self.samples.iter().position(Sample::is_sync))
    }
}

/// A track that was not indexed, and why (so `DESCRIBE` logs can say why a track is missing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedTrack {
    /// The MP4 track id.
    pub id: u32,
    /// Why it was skipped.
    pub reason: String,
}

/// Why an indexed file has nothing to stream (over RTSP or as HLS).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NothingToStream {
    /// A fragmented MP4 (`mvex` in the `moov`) with no complete fragment yet: a recording
    /// that has only just started.
    #[error("fragmented MP4 with no complete fragment yet")]
    Fragmented,
    /// No track is of a codec sluice serves; why each track was skipped.
    #[error("no H.264, HEVC, AV1, VP9, AAC, Opus, AC-3 or E-AC-3 track ({0})")]
    NoTrack(String),
}

/// An indexed MP4 file.
#[derive(Debug, Clone)]
pub struct Mp4File {
    /// Playable tracks (H.264 and AAC), in file order.
    pub tracks: Vec<Track>,
    /// Tracks of other codecs, or that carry no samples.
    pub skipped: Vec<SkippedTrack>,
    /// Size of the file in bytes; every sample lies inside it.
    pub file_len: u64,
    /// Whether the `moov` declares movie fragments (`mvex`): the samples then live (also) in
    /// the `moof` boxes that follow it.
    pub fragmented: bool,
}

impl Mp4File {
    /// Indexes the file at `path`, reading only its box headers and its `moov` box. Tests only:
    /// this crate makes no system calls, the server opens files and calls [`Mp4File::read`].
    #[cfg(test)]
    pub(crate) fn open(path: impl AsRef<std::path::Path>) -> Result<Mp4File, Mp4Error> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Mp4File::read(std::io::BufReader::new(file), len)
    }

    /// Indexes an MP4 file held in memory (tests, fuzzing).
    pub fn from_bytes(data: &[u8]) -> Result<Mp4File, Mp4Error> {
        Mp4File::read(std::io::Cursor::new(data), data.len() as u64)
    }

    /// Indexes a file of `len` bytes read through `src`.
    pub fn read<R: Read + Seek>(mut src: R, len: u64) -> Result<Mp4File, Mp4Error> {
        let (mut moov, moov_end) = read_moov(&mut src, len)?;
        check_table_sizes(&moov, 0)?;
        hide_metadata(&mut moov, 0);
        let sample_entries = entries::first_sample_entries(&moov);
        let context = mp4parse::read_mp4(&mut moov.as_slice())?;
        let mut fragments = match context.mvex {
            Some(_) => fragments::Fragments::read(&mut src, &moov, moov_end, len, &context.tracks)?,
            None => fragments::Fragments::default(),
        };
        let mut file = Mp4File {
            tracks: Vec::new(),
            skipped: Vec::new(),
            file_len: len,
            fragmented: context.mvex.is_some(),
        };
        for track in context.tracks.iter() {
            let id = track.track_id.unwrap_or(0);
            if file.tracks.len() >= MAX_TRACKS {
                file.skipped.push(SkippedTrack { id, reason: format!("more than {MAX_TRACKS} tracks") });
                continue;
            }
            let entry = sample_entries.iter().find(|(i, _)| *i == id).map(|(_, e)| e.as_slice());
            let fragment = fragments.take(id);
            match index_track(track, entry, context.timescale.map(|t| t.0), len, fragment)? {
                Ok(t) => file.tracks.push(t),
                Err(reason) => file.skipped.push(SkippedTrack { id, reason }),
            }
        }
        entries::check_in_band_parameter_sets(&mut src, &mut file.tracks);
        Ok(file)
    }

    /// Whether the file has a track to stream: a track of a codec sluice reads, with samples. The one check
    /// every protocol makes before serving a file.
    pub fn streamable(&self) -> Result<(), NothingToStream> {
        if !self.tracks.is_empty() {
            return Ok(());
        }
        if self.fragmented && (self.skipped.is_empty() || self.skipped.iter().any(|s| s.reason == NO_SAMPLES))
        {
            return Err(NothingToStream::Fragmented);
        }
        let reasons: Vec<String> =
            self.skipped.iter().map(|s| format!("track {}: {}", s.id, s.reason)).collect();
        Err(NothingToStream::NoTrack(if reasons.is_empty() {
            "no tracks".to_string()
        } else {
            reasons.join("; ")
        }))
    }

    /// Duration of the longest track in seconds (the SDP `a=range`).
    pub fn duration_secs(&self) -> f64 {
        self.tracks.iter().map(Track::duration_secs).fold(0.0, f64::max)
    }
}

/// Walks the top-level boxes and returns the `moov` box (header included), which is what
/// `mp4parse::read_mp4` expects, and the offset just past it. `mdat` is skipped by seeking, never
/// read.
fn read_moov<R: Read + Seek>(src: &mut R, len: u64) -> Result<(Vec<u8>, u64), Mp4Error> {
    let mut offset = 0u64;
    for _ in 0..MAX_TOP_LEVEL_BOXES {
        if len.saturating_sub(offset) < 8 {
            return Err(Mp4Error::NoMoov);
        }
        src.seek(SeekFrom::Start(offset))?;
        let mut head = [0u8; 16];
        src.read_exact(&mut head[..8])?;
        let size32 = u32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let kind = [head[4], head[5], head[6], head[7]];
        let (size, header_len) = match size32 {
            0 => (len - offset, 8), // the box runs to the end of the file
            1 => {
                if len - offset < 16 {
                    return Err(Mp4Error::BadBox { offset, what: "64-bit size past the end" });
                }
                src.read_exact(&mut head[8..16])?;
                let large = u64::from_be_bytes(head[8..16].try_into().expect("8 bytes"));
                (large, 16)
            }
            n => (u64::from(n), 8),
        };
        if size < header_len {
            return Err(Mp4Error::BadBox { offset, what: "size smaller than its header" });
        }
        if size > len - offset {
            return Err(Mp4Error::BadBox { offset, what: "box runs past the end of the file" });
        }
        if &kind == b"moov" {
            if size > MAX_MOOV_BYTES {
                return Err(Mp4Error::MoovTooLarge { size, limit: MAX_MOOV_BYTES });
            }
            let mut moov = vec![0u8; size as usize];
            src.seek(SeekFrom::Start(offset))?;
            src.read_exact(&mut moov)?;
            return Ok((moov, offset + size));
        }
        offset += size;
    }
    Err(Mp4Error::NoMoov)
}

/// Checks that every sample table in `boxes` (a `moov` box or its descendants) declares no more
/// entries than its box holds.
///
/// `mp4parse` reserves memory for a table's declared entry count before reading the entries
/// (with fallible allocation, but still up to 32 GiB of address space for a 20-byte box); this
/// walk refuses such boxes first, so every allocation is bounded by the `moov` size.
fn check_table_sizes(boxes: &[u8], depth: u8) -> Result<(), Mp4Error> {
    let bad = |what| Mp4Error::BadBox { offset: 0, what };
    let mut rest = boxes;
    while rest.len() >= 8 {
        // A box that claims more than its parent holds is refused here: mp4parse reserves memory
        // for some boxes' declared size before reading them (`hdlr`: 3 GB for a 3 KB file, found
        // by the hls_package fuzz target).
        let (kind, header, size) = child_box(rest).map_err(bad)?;
        let body = &rest[header..size];
        rest = &rest[size..];
        // Full boxes: version and flags, then the counts.
        let u32_at = |i: usize| {
            body.get(i..i + 4).map(|b| u64::from(u32::from_be_bytes(b.try_into().expect("4 bytes"))))
        };
        let (count, entry, first) = match &kind {
            b"moov" | b"trak" | b"edts" | b"mdia" | b"minf" | b"stbl" if depth < 8 => {
                check_table_sizes(body, depth + 1)?;
                continue;
            }
            b"stts" | b"ctts" | b"co64" => (u32_at(4), 8, 8),
            b"stco" | b"stss" => (u32_at(4), 4, 8),
            b"stsc" => (u32_at(4), 12, 8),
            b"elst" => (u32_at(4), if body.first() == Some(&1) { 20 } else { 12 }, 8),
            b"stsd" => (u32_at(4), 8, 8), // each description is a box of at least 8 bytes
            b"stsz" if u32_at(4) == Some(0) => (u32_at(8), 4, 12),
            _ => continue,
        };
        let count = count.ok_or_else(|| bad("sample table box is truncated"))?;
        if count.saturating_mul(entry) > (body.len() as u64).saturating_sub(first) {
            return Err(bad("a table declares more entries than its box holds"));
        }
        if &kind == b"stsd" {
            check_sample_entries(body.get(8..).unwrap_or_default())?;
        }
    }
    Ok(())
}

/// The box at the start of `rest`, which holds the rest of its parent: its type, header length
/// and size, with a 64-bit size (1) and "to the end of the parent" (0) resolved; an error for a
/// size smaller than its header or one that runs past the parent.
fn child_box(rest: &[u8]) -> Result<([u8; 4], usize, usize), &'static str> {
    let size32 = u32::from_be_bytes(rest[..4].try_into().expect("4 bytes"));
    let kind: [u8; 4] = rest[4..8].try_into().expect("4 bytes");
    let (size, header) = match size32 {
        0 => (rest.len(), 8),
        1 => {
            let large = rest.get(8..16).ok_or("a 64-bit box size past the end of its parent")?;
            let large = u64::from_be_bytes(large.try_into().expect("8 bytes"));
            (usize::try_from(large).unwrap_or(usize::MAX), 16)
        }
        n => (n as usize, 8),
    };
    if size < header {
        return Err("a box smaller than its header");
    }
    if size > rest.len() {
        return Err("a box runs past the end of its parent");
    }
    Ok((kind, header, size))
}

/// Turns the `udta` and `meta` boxes of `boxes` (a `moov` box or its `trak`s) into `free` boxes:
/// sluice reads no metadata, and mp4parse reserves memory for a metadata item's declared size
/// before reading it (`ilst` data: 4 GB for a small file, found by the hls_package fuzz target).
fn hide_metadata(boxes: &mut [u8], depth: u8) {
    let mut at = 0;
    while boxes.len() - at >= 8 {
        let Ok((_, header, size)) = child_box(&boxes[at..]) else {
            return; // check_table_sizes has refused the file already
        };
        match &boxes[at + 4..at + 8] {
            b"moov" | b"trak" if depth < 2 => hide_metadata(&mut boxes[at + header..at + size], depth + 1),
            b"udta" | b"meta" => boxes[at + 4..at + 8].copy_from_slice(b"free"),
            _ => {}
        }
        at += size;
    }
}

/// Checks that no box inside a sample description (`avc1` > `avcC`, `mp4a` > `esds`, …)
/// claims more than its parent holds: mp4parse reserves a codec box's declared size before
/// reading it (`esds`: 4 GB for a small file, found by the hls_package fuzz target).
fn check_sample_entries(entries: &[u8]) -> Result<(), Mp4Error> {
    let bad = |what| Mp4Error::BadBox { offset: 0, what };
    let within = |boxes: &[u8]| -> Result<(), Mp4Error> {
        let mut rest = boxes;
        while rest.len() >= 8 {
            let (_, _, size) = child_box(rest).map_err(bad)?;
            rest = &rest[size..];
        }
        Ok(())
    };
    // Each entry is a box: the sample entry's fixed fields, then child boxes.
    within(entries)?;
    let mut rest = entries;
    while rest.len() >= 8 {
        let size = (u32::from_be_bytes(rest[..4].try_into().expect("4 bytes")) as usize).clamp(8, rest.len());
        let kind: [u8; 4] = rest[4..8].try_into().expect("4 bytes");
        let body = &rest[8..size];
        rest = &rest[size..];
        // ISO 14496-12 §12.1.3 and §12.2.3: a visual entry's fields take 78 bytes; an audio
        // entry's 28, plus 16 (QuickTime version 1) or 36 (version 2).
        let fields = match &kind {
            b"avc1" | b"avc3" | b"encv" | b"hvc1" | b"hev1" | b"mp4v" | b"av01" | b"vp08" | b"vp09" => 78,
            b"mp4a" | b"enca" | b".mp3" | b"ac-3" | b"ec-3" | b"Opus" | b"fLaC" | b"alac" => {
                match body.get(8..10).map(|v| u16::from_be_bytes([v[0], v[1]])) {
                    Some(1) => 44,
                    Some(2) => 64,
                    _ => 28,
                }
            }
            _ => continue,
        };
        within(body.get(fields..).unwrap_or_default())?;
    }
    Ok(())
}

/// Indexes one track: `Ok(Err(reason))` for a track that is fine but not playable by sluice,
/// `Err` for a malformed one (which fails the whole file: its index cannot be trusted).
fn index_track(
    track: &mp4parse::Track,
    raw_entry: Option<&[u8]>,
    movie_timescale: Option<u64>,
    file_len: u64,
    fragment: Option<fragments::FragmentTrack>,
) -> Result<Result<Track, String>, Mp4Error> {
    let id = track.track_id.unwrap_or(0);
    let bad = |what| Mp4Error::BadSampleTable { track: id, what };
    let entry = match track.stsd.as_ref().and_then(|d| d.descriptions.first()) {
        Some(e) => e,
        None => return Ok(Err("no sample description".into())),
    };
    if track.stsd.as_ref().is_some_and(|d| d.descriptions.len() > 1) {
        // Switching codec parameters mid-track would need a new SDP; no muxer we serve does it.
        return Ok(Err("more than one sample description".into()));
    }
    let parsed = match raw_entry.map(parse_sample_entry) {
        Some(Ok(parsed)) => parsed,
        Some(Err(e)) => return Ok(Err(format!("malformed codec configuration: {e}"))),
        None => None,
    };
    let kind = match (&track.track_type, parsed, entry) {
        (TrackType::Video, Some(CodecEntry::Video(v)), _) => TrackKind::Video(v),
        (TrackType::Audio, Some(CodecEntry::Audio(a)), _) => TrackKind::Audio(a),
        (TrackType::Video, None, SampleEntry::Video(v)) => match (&v.codec_type, &v.codec_specific) {
            (CodecType::H264, VideoCodecSpecific::AVCConfig(avcc)) => {
                TrackKind::H264(parse_avcc(id, avcc, v.width, v.height)?)
            }
            (c, _) => return Ok(Err(format!("video codec {c:?} is not served"))),
        },
        (TrackType::Audio, None, SampleEntry::Audio(a)) => match (&a.codec_type, &a.codec_specific) {
            (CodecType::AAC, AudioCodecSpecific::ES_Descriptor(es)) => {
                if es.decoder_specific_data.is_empty() {
                    return Err(Mp4Error::BadCodecConfig { track: id, what: "no AudioSpecificConfig" });
                }
                let sample_rate = es.audio_sample_rate.unwrap_or(a.samplerate as u32);
                let channels = es.audio_channel_count.unwrap_or(a.channelcount.min(255) as u16);
                if sample_rate == 0 || channels == 0 {
                    return Err(Mp4Error::BadCodecConfig { track: id, what: "no sample rate or channels" });
                }
                TrackKind::Aac(AacConfig {
                    audio_specific_config: es.decoder_specific_data.to_vec(),
                    sample_rate,
                    channels,
                })
            }
            (c, _) => return Ok(Err(format!("audio codec {c:?} is not served"))),
        },
        (TrackType::Video | TrackType::Audio, _, SampleEntry::Unknown) => {
            let fourcc = raw_entry.and_then(|e| e.get(4..8)).map(String::from_utf8_lossy).unwrap_or_default();
            return Ok(Err(format!("codec {fourcc:?} is not served")));
        }
        (t, _, _) => return Ok(Err(format!("{t:?} track is not served"))),
    };
    let timescale = match track.timescale {
        Some(ts) if ts.0 > 0 && ts.0 <= u64::from(u32::MAX) => ts.0 as u32,
        _ => return Err(bad("missing or invalid timescale")),
    };
    // A fragmented file's `moov` tables are empty (or hold the samples before the first `moof`).
    let count = match checked_sample_count(track, file_len) {
        Err(_) if fragment.is_some() && track.stts.as_ref().is_none_or(|s| s.samples.is_empty()) => 0,
        count => count.map_err(bad)?,
    };
    let fragment = fragment.filter(|f| !f.samples.is_empty());
    if count == 0 && fragment.is_none() {
        return Ok(Err(NO_SAMPLES.into()));
    }
    let table = if count == 0 {
        Default::default()
    } else {
        create_sample_table(track, CheckedInteger(0)).ok_or_else(|| bad("inconsistent sample tables"))?
    };
    if table.len() as u64 != count {
        return Err(bad("sample tables disagree on the sample count"));
    }
    let mut samples = Vec::with_capacity(table.len());
    for s in table.iter() {
        let (start, end) = (s.start_offset.0, s.end_offset.0);
        if end > file_len || end <= start {
            return Err(bad("a sample lies outside the file"));
        }
        let size = u32::try_from(end - start)
            .ok()
            .filter(|n| n & SYNC_BIT == 0)
            .ok_or_else(|| bad("sample of 2 GiB or more"))?;
        let decode_time = u64::try_from(s.start_decode.0).map_err(|_| bad("negative decode time"))?;
        let composition_offset = i32::try_from(s.start_composition.0 - s.start_decode.0)
            .map_err(|_| bad("composition offset out of range"))?;
        samples.push(Sample {
            offset: start,
            decode_time,
            size_sync: size | if s.sync { SYNC_BIT } else { 0 },
            composition_offset,
        });
    }
    let edit_start = track.media_time.map_or(0, |t| t.0);
    if let Some(fragment) = fragment {
        let end = fragment.append_to(&mut samples, kind.is_video()).map_err(bad)?;
        // The samples are the truth of a fragmented file (one still growing, too): `mdhd` and
        // the edit list were written before its fragments. Presented, not decoded: a track shown
        // after it is decoded (B-frames, a live track's lead) lasts to its last picture's end.
        let duration = fragments::presented_end(&samples, end).saturating_sub(edit_start);
        return Ok(Ok(Track { id, kind, timescale, duration, edit_start, samples }));
    }
    let span = samples.last().map_or(0, |s| s.decode_time);
    // The presentation duration is the edit list's when there is one (it cuts the AAC priming
    // frame and the B-frame delay, as players and ffprobe do), else the media header's.
    let edited = match (track.edited_duration, movie_timescale) {
        (Some(d), Some(movie)) if d.0 > 0 && movie > 0 => {
            u64::try_from(u128::from(d.0) * u128::from(timescale) / u128::from(movie)).ok()
        }
        _ => None,
    };
    let duration = edited.or(track.duration.map(|d| d.0).filter(|&d| d > 0)).unwrap_or(span);
    Ok(Ok(Track { id, kind, timescale, duration, edit_start, samples }))
}

/// The track's sample count, checked for consistency and against the allocation bounds before
/// `create_sample_table` expands anything.
fn checked_sample_count(track: &mp4parse::Track, file_len: u64) -> Result<u64, &'static str> {
    let (Some(stsc), Some(stco), Some(stsz), Some(stts)) =
        (&track.stsc, &track.stco, &track.stsz, &track.stts)
    else {
        return Err("missing stsc, stco, stsz or stts");
    };
    // stsc runs: chunks [first_chunk, next first_chunk) hold samples_per_chunk samples each.
    // `create_sample_table` assumes strictly increasing first_chunk from 1; so do we, and reject
    // anything else so our count and its allocation agree.
    let chunks = stco.offsets.len() as u64;
    let mut from_stsc = 0u64;
    let runs = stsc.samples.as_slice();
    for (i, run) in runs.iter().enumerate() {
        let first = u64::from(run.first_chunk);
        if (i == 0 && first != 1) || first > chunks {
            return Err("stsc chunk runs out of order or past stco");
        }
        let end = runs.get(i + 1).map_or(chunks + 1, |next| u64::from(next.first_chunk).min(chunks + 1));
        from_stsc = end
            .checked_sub(first)
            .filter(|&n| n > 0)
            .ok_or("stsc chunk runs out of order or past stco")?
            .checked_mul(u64::from(run.samples_per_chunk))
            .and_then(|n| from_stsc.checked_add(n))
            .filter(|&n| n <= MAX_SAMPLES_PER_TRACK)
            .ok_or("more samples than the limit")?;
    }
    let from_stts = stts
        .samples
        .iter()
        .try_fold(0u64, |acc, s| {
            acc.checked_add(u64::from(s.sample_count)).filter(|&n| n <= MAX_SAMPLES_PER_TRACK)
        })
        .ok_or("more samples than the limit")?;
    let from_stsz = if stsz.sample_size == 0 {
        stsz.sample_sizes.len() as u64
    } else {
        // Constant-size samples: the count is not stored in mp4parse's stsz, so bound it by the
        // bytes the samples would need.
        if from_stsc.saturating_mul(u64::from(stsz.sample_size)) > file_len {
            return Err("samples need more bytes than the file has");
        }
        from_stsc
    };
    if from_stsc != from_stsz || from_stts != from_stsz {
        return Err("stsc, stsz and stts disagree on the sample count");
    }
    Ok(from_stsz)
}

/// Parses an AVCDecoderConfigurationRecord (ISO 14496-15 §5.3.3.1) of track `track` (which
/// errors name), whose sample entry says `width` and `height` (0 when unknown).
pub fn parse_avcc(track: u32, avcc: &[u8], width: u16, height: u16) -> Result<H264Config, Mp4Error> {
    let bad = |what| Mp4Error::BadCodecConfig { track, what };
    let mut r = avcc;
    let mut take = |n: usize| -> Result<&[u8], Mp4Error> {
        if r.len() < n {
            return Err(bad("avcC is truncated"));
        }
        let (head, rest) = r.split_at(n);
        r = rest;
        Ok(head)
    };
    let head = take(6)?;
    if head[0] != 1 {
        return Err(bad("avcC version is not 1"));
    }
    let profile_level_id = [head[1], head[2], head[3]];
    let nal_length_size = (head[4] & 0x03) + 1;
    if nal_length_size == 3 {
        return Err(bad("NAL length size of 3 bytes"));
    }
    let sps_count = head[5] & 0x1f;
    let mut sps = Vec::with_capacity(usize::from(sps_count));
    for _ in 0..sps_count {
        let len = take(2)?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        sps.push(take(len)?.to_vec());
    }
    let pps_count = take(1)?[0];
    let mut pps = Vec::with_capacity(usize::from(pps_count));
    for _ in 0..pps_count {
        let len = take(2)?;
        let len = usize::from(u16::from_be_bytes([len[0], len[1]]));
        pps.push(take(len)?.to_vec());
    }
    if sps.iter().chain(&pps).any(Vec::is_empty) || sps.is_empty() || pps.is_empty() {
        return Err(bad("avcC lacks an SPS or a PPS"));
    }
    Ok(H264Config { sps, pps, nal_length_size, profile_level_id, width, height })
}

/// The built-in demo file, indexed: the fixture of this crate's unit tests.
#[cfg(test)]
pub(crate) fn demo_file() -> Mp4File {
    Mp4File::from_bytes(&tests::demo()).expect("the demo indexes")
}

#[cfg(test)]
mod tests;
