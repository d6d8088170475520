//! MPEG-TS HLS for players without fMP4 (set-top boxes, older TVs and phones): the same file,
//! cut at the same times as its fMP4 segments, as transport-stream segments.
//!
//! This module owns what lives under `/film.mp4/ts/`: the master playlist (`master.m3u8`, a
//! variant of muxed video and audio per rendition), the media playlist (`media.m3u8`,
//! protocol version 3: no `EXT-X-MAP`, one `EXTINF` per segment, the fMP4 segments' times)
//! and each segment (`seg-N.ts`). A segment cannot be file ranges: its samples are cut into
//! 188-byte packets, H.264 and HEVC converted to Annex B and AAC given ADTS headers (AC-3 and
//! E-AC-3 go as they are) ([`mux`]), so it is
//! built in memory from the sample bytes the caller reads. Sans-I/O: [`segment_reads`] says
//! which bytes of the file a segment needs, [`segment`] makes it from them. It does not cut
//! segments ([`super::index`]), read files or answer requests.
//!
//! Timestamps are the file's presentation times (edit list applied) plus 1.4 s, and the PCR
//! runs 0.7 s behind the video's decode times, as ffmpeg's muxer does, so nothing is negative
//! and a decoder buffers what it needs; the same offset in every segment keeps them continuous.

pub mod mux;

use std::ops::Range;

use m3u8_rs::{MasterPlaylist, MediaPlaylist, MediaPlaylistType, MediaSegment, Resolution, VariantStream};

use self::mux::{annex_b, Adts, MuxError, Muxer, TsAudio, TsVideo, VideoConfig};
use super::index::{Packaged, SegmentIndex};
use super::HlsError;
use crate::codec::{AudioCodec, VideoCodec};
use crate::mp4::{Mp4File, Track, TrackKind};

/// The folder of a file's TS resources: `/film.mp4/ts/master.m3u8`.
pub const TS_DIR: &str = "ts";

/// Added to every timestamp (90 kHz): 1.4 s, ffmpeg's default.
const OFFSET: i64 = 126_000;
/// How far the PCR runs behind the video's decode time (90 kHz): 0.7 s, ffmpeg's default.
const PCR_LAG: i64 = 63_000;
/// Most audio frames in one PES packet: about 90 ms of AAC at 44.1 kHz (130 ms of AC-3), fewer
/// headers than a PES a frame.
const AUDIO_FRAMES_PER_PES: usize = 4;

/// What a name under `/film.mp4/ts/` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsResource {
    /// The master playlist.
    Master,
    /// The media playlist.
    Media,
    /// Segment `n` (from 0), the same times as the fMP4 segment `n`.
    Segment(usize),
}

impl TsResource {
    /// The resource `name` names; `None` for any other.
    pub fn parse(name: &str) -> Option<TsResource> {
        match name {
            "master.m3u8" => return Some(TsResource::Master),
            "media.m3u8" => return Some(TsResource::Media),
            _ => {}
        }
        super::playlist::numbered(name, "seg-", ".ts").map(TsResource::Segment)
    }

    /// Its `Content-Type`.
    pub fn content_type(&self) -> &'static str {
        match self {
            TsResource::Master | TsResource::Media => "application/vnd.apple.mpegurl",
            TsResource::Segment(_) => "video/mp2t",
        }
    }

    /// Whether it is a playlist (revalidated on every use) rather than a segment.
    pub fn is_manifest(&self) -> bool {
        !matches!(self, TsResource::Segment(_))
    }
}

/// Segment `n`'s name.
pub fn segment_name(n: usize) -> String {
    format!("seg-{n}.ts")
}

/// Why a TS segment cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum TsError {
    /// The segment does not exist, or the file does not package.
    #[error(transparent)]
    Hls(#[from] HlsError),
    /// The muxer refused the samples.
    #[error(transparent)]
    Mux(#[from] MuxError),
    /// A track is in a codec the muxer does not carry.
    #[error("{0}")]
    NotCarried(String),
    /// The bytes passed in do not hold a sample of the segment.
    #[error("the bytes read do not hold the sample at {0:?}")]
    MissingBytes(Range<u64>),
}

/// One packaged file of a TS master playlist: the fMP4 [`Rendition`] with its sample tables
/// (the `BANDWIDTH` bound counts their frames).
#[derive(Debug, Clone, Copy)]
pub struct TsRendition<'a> {
    /// Where its `media.m3u8` is relative to the master (`""`, or `"../../film.720p.mp4/ts/"`).
    pub prefix: &'a str,
    /// Its segments.
    pub index: &'a SegmentIndex,
    /// Its sample tables.
    pub file: &'a Mp4File,
}

/// The stream the muxer writes of a video track; `None` for a codec it does not carry.
fn ts_video(kind: &TrackKind) -> Option<(TsVideo, VideoConfig<'_>)> {
    match kind {
        TrackKind::H264(c) => Some((TsVideo::H264, VideoConfig::H264(c))),
        TrackKind::Video(v) => match &v.codec {
            VideoCodec::Hevc(rec) => Some((TsVideo::Hevc, VideoConfig::Hevc(rec))),
            VideoCodec::Av1(_) | VideoCodec::Vp9(_) => None,
        },
        TrackKind::Aac(_) | TrackKind::Audio(_) => None,
    }
}

/// The stream the muxer writes of an audio track; `None` for a codec it does not carry.
fn ts_audio(kind: &TrackKind) -> Option<TsAudio> {
    match kind {
        TrackKind::Aac(_) => Some(TsAudio::Aac),
        TrackKind::Audio(a) => match a.codec {
            AudioCodec::Ac3(_) => Some(TsAudio::Ac3),
            AudioCodec::Eac3(_) => Some(TsAudio::Eac3),
            AudioCodec::Opus(_) => None,
        },
        TrackKind::H264(_) | TrackKind::Video(_) => None,
    }
}

/// Whether the TS muxer carries `file`'s packaged tracks: H.264 or HEVC, and AAC, AC-3 or
/// E-AC-3 (what players without fMP4 decode, and what Apple's HLS specification puts in TS);
/// else why not, for a 415 that names the codec.
pub fn carries(file: &Mp4File, index: &SegmentIndex) -> Result<(), String> {
    for (track, which) in index.tracks(file) {
        let carried = match which {
            Packaged::Video => ts_video(&track.kind).is_some(),
            Packaged::Audio => ts_audio(&track.kind).is_some(),
        };
        if !carried {
            return Err(format!(
                "MPEG-TS carries H.264, HEVC, AAC, AC-3 and E-AC-3 here, not {}: its fMP4 HLS and DASH play",
                track.kind.codec_string()
            ));
        }
    }
    Ok(())
}

/// The master playlist's `CODECS` for the TS segments: the fMP4 one's, but HEVC as `hvc1`
/// whatever the file's sample entry (TS has no sample entry; the parameter sets are in the
/// stream before every keyframe, and Apple's players take HEVC only as `hvc1`).
pub fn codecs(file: &Mp4File, index: &SegmentIndex) -> String {
    let each: Vec<String> = index
        .tracks(file)
        .map(|(track, _)| match &track.kind {
            TrackKind::Video(v) => match &v.codec {
                VideoCodec::Hevc(rec) => rec.codec_string("hvc1"),
                _ => v.codec_string(),
            },
            kind => kind.codec_string(),
        })
        .collect();
    each.join(",")
}

/// Bits per second a rendition's TS segments may take at most: the samples' peak rate over
/// the segments, plus the packet headers (4 bytes in 188) and, a second's worth, what each
/// PES adds (its header, an adaptation field, stuffing up to a packet, the access unit
/// delimiter and parameter sets, ADTS headers). An upper bound, as `BANDWIDTH` must be.
pub fn bandwidth(r: &TsRendition<'_>) -> u64 {
    let peak = r.index.peak_bandwidth() as f64 * 188.0 / 184.0;
    let mut per_second = 0.0;
    for (track, _) in r.index.tracks(r.file) {
        let secs = track.duration_secs().max(0.001);
        let units_per_second = track.samples.len() as f64 / secs;
        let extra = match ts_video(&track.kind).map(|(_, config)| config) {
            Some(VideoConfig::H264(h)) => 6 + h.sps.iter().chain(&h.pps).map(|u| u.len() + 4).sum::<usize>(),
            Some(VideoConfig::Hevc(h)) => {
                7 + h.vps.iter().chain(&h.sps).chain(&h.pps).map(|u| u.len() + 4).sum::<usize>()
            }
            // The ADTS header; AC-3 and E-AC-3 go as they are.
            None if matches!(track.kind, TrackKind::Aac(_)) => 7,
            None => 0,
        };
        per_second += units_per_second * (19 + 8 + 183 + extra) as f64;
    }
    // The PAT and PMT of every segment, at its shortest.
    let shortest = (0..r.index.segments()).map(|n| r.index.segment_duration(n)).fold(f64::MAX, f64::min);
    let tables = 2.0 * 188.0 / shortest.max(0.1);
    (peak + (per_second + tables) * 8.0).ceil() as u64
}

/// The TS master playlist: a variant per rendition with video (video and audio muxed in its
/// segments); an audio-only one when none has video.
pub fn master_playlist(renditions: &[TsRendition<'_>]) -> String {
    let with_video: Vec<&TsRendition<'_>> =
        renditions.iter().filter(|r| r.index.has(Packaged::Video)).collect();
    let listed: Vec<&TsRendition<'_>> =
        if with_video.is_empty() { renditions.iter().take(1).collect() } else { with_video };
    let variants = listed
        .into_iter()
        .map(|r| VariantStream {
            uri: format!("{}media.m3u8", r.prefix),
            bandwidth: bandwidth(r),
            codecs: Some(codecs(r.file, r.index)),
            resolution: r
                .index
                .resolution()
                .map(|(w, h)| Resolution { width: u64::from(w), height: u64::from(h) }),
            frame_rate: r.index.frame_rate().map(|f| (f * 1000.0).round() / 1000.0),
            ..Default::default()
        })
        .collect();
    let playlist = MasterPlaylist { version: Some(3), variants, ..Default::default() };
    write(|out| playlist.write_to(out))
}

/// The media playlist: a `seg-N.ts` per segment of `index`, as long as the fMP4 segment.
pub fn media_playlist(index: &SegmentIndex) -> String {
    let segments: Vec<MediaSegment> = (0..index.segments())
        .map(|n| MediaSegment {
            uri: segment_name(n),
            duration: index.segment_duration(n) as f32,
            ..Default::default()
        })
        .collect();
    let longest = segments.iter().map(|s| s.duration).fold(0.0f32, f32::max);
    let playlist = MediaPlaylist {
        version: Some(3),
        target_duration: (longest.round() as u64).max(1),
        media_sequence: 0,
        playlist_type: Some(MediaPlaylistType::Vod),
        end_list: true,
        segments,
        ..Default::default()
    };
    write(|out| playlist.write_to(out))
}

fn write(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    f(&mut out).expect("writing to memory");
    String::from_utf8(out).expect("m3u8-rs writes UTF-8")
}

/// The byte ranges of the file segment `n` needs (its samples, neighbours merged), in file
/// order: what the caller reads for [`segment`].
pub fn segment_reads(file: &Mp4File, index: &SegmentIndex, n: usize) -> Result<Vec<Range<u64>>, HlsError> {
    if n >= index.segments() {
        return Err(HlsError::NoSuchSegment(n));
    }
    let mut ranges: Vec<Range<u64>> = index
        .tracks(file)
        .flat_map(|(track, which)| track.samples[index.samples(n, which)].iter().map(|s| s.range()))
        .collect();
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    Ok(merged)
}

/// The bytes of `range` among `reads` (each a file offset and the bytes read there).
fn bytes_of(reads: &[(u64, Vec<u8>)], range: Range<u64>) -> Result<&[u8], TsError> {
    let i = reads.partition_point(|(at, _)| *at <= range.start);
    let missing = || TsError::MissingBytes(range.clone());
    let (at, bytes) = reads.get(i.checked_sub(1).ok_or_else(missing)?).ok_or_else(missing)?;
    let from = usize::try_from(range.start - at).map_err(|_| missing())?;
    let to = from + usize::try_from(range.end - range.start).map_err(|_| missing())?;
    bytes.get(from..to).ok_or_else(missing)
}

/// A time of `track` in 90 kHz ticks of the TS timeline: `ticks` less the edit's start, plus
/// the offset.
fn ts_time(track: &Track, ticks: u64) -> i64 {
    let shifted = i128::from(ticks) - i128::from(track.edit_start);
    ((shifted * 90_000 / i128::from(track.timescale.max(1))) as i64).saturating_add(OFFSET)
}

/// The PCR (27 MHz) for a video decode time `time` (90 kHz): [`PCR_LAG`] behind it, its base
/// wrapped to 33 bits as the field holds it (a time past 26.5 hours wraps, as it does in TS).
fn pcr(time: i64) -> u64 {
    (time.saturating_sub(PCR_LAG).max(0) as u64 & ((1 << 33) - 1)) * 300
}

/// Segment `n` of `file` as a transport stream, from `reads`: the bytes of
/// [`segment_reads`]'s ranges, each with the file offset it was read at, in file order.
pub fn segment(
    file: &Mp4File,
    index: &SegmentIndex,
    n: usize,
    reads: &[(u64, Vec<u8>)],
) -> Result<Vec<u8>, TsError> {
    if n >= index.segments() {
        return Err(HlsError::NoSuchSegment(n).into());
    }
    carries(file, index).map_err(TsError::NotCarried)?;
    let video = index
        .tracks(file)
        .find(|(_, w)| *w == Packaged::Video)
        .and_then(|(t, _)| ts_video(&t.kind).map(|(stream, config)| (t, stream, config)));
    let audio = index
        .tracks(file)
        .find(|(_, w)| *w == Packaged::Audio)
        .and_then(|(t, _)| ts_audio(&t.kind).map(|stream| (t, stream)));
    // AAC needs an ADTS header a frame; AC-3 and E-AC-3 samples are sync frames already.
    let adts = match audio.map(|(a, _)| &a.kind) {
        Some(TrackKind::Aac(config)) => Some(Adts::of(config)?),
        _ => None,
    };
    // Every access unit of the segment in decode order across the tracks (video first at the
    // same time): (decode time in 90 kHz, is it audio, sample index).
    let mut units: Vec<(i64, bool, usize)> = Vec::new();
    if let Some((v, _, _)) = video {
        units.extend(
            index.samples(n, Packaged::Video).map(|i| (ts_time(v, v.samples[i].decode_time()), false, i)),
        );
    }
    if let Some((a, _)) = audio {
        units.extend(
            index.samples(n, Packaged::Audio).map(|i| (ts_time(a, a.samples[i].decode_time()), true, i)),
        );
    }
    units.sort_by_key(|&(time, is_audio, i)| (time, is_audio, i));
    let bytes: usize = reads.iter().map(|(_, b)| b.len()).sum();
    let mut muxer = Muxer::new(video.map(|(_, s, _)| s), audio.map(|(_, s)| s), bytes + bytes / 16 + 4096)?;
    let mut buffer = Vec::new();
    let mut at = 0;
    while at < units.len() {
        let (time, is_audio, i) = units[at];
        buffer.clear();
        if let (false, Some((v, _, config))) = (is_audio, video) {
            let s = &v.samples[i];
            annex_b(bytes_of(reads, s.range())?, config, s.is_sync(), &mut buffer);
            let pts = ts_time(v, s.composition_time()).max(0) as u64;
            muxer.video(&buffer, pts, time.max(0) as u64, s.is_sync(), pcr(time))?;
            at += 1;
        } else if let Some((a, _)) = audio {
            // The audio frames up to the next video unit, a few to a PES.
            let mut frames = 0;
            while at < units.len() && units[at].1 && frames < AUDIO_FRAMES_PER_PES {
                let frame = bytes_of(reads, a.samples[units[at].2].range())?;
                match adts {
                    Some(adts) => adts.frame(frame, &mut buffer)?,
                    None => buffer.extend_from_slice(frame),
                }
                frames += 1;
                at += 1;
            }
            muxer.audio(&buffer, time.max(0) as u64, video.is_none().then(|| pcr(time)))?;
        } else {
            at += 1;
        }
    }
    Ok(muxer.finish())
}

#[cfg(test)]
mod tests;
