//! The HLS playlists of one packaged file or of a rendition set, written with `m3u8-rs`.
//!
//! This module owns the text of the master playlist (a variant per rendition's video:
//! `BANDWIDTH`, `AVERAGE-BANDWIDTH`, `CODECS`, `RESOLUTION`, `FRAME-RATE`, `VIDEO-RANGE`; the audio as an
//! `EXT-X-MEDIA TYPE=AUDIO` group; WebVTT sidecars as a `SUBTITLES` group), the VOD media
//! playlists (`EXT-X-MAP` to the init segment, one `EXTINF` per segment, `EXT-X-ENDLIST`) of the
//! per-track renditions and of the muxed one, and the names of the resources they point at,
//! relative to the file's URL (`/film.mp4/` + name). It does not decide where segments start
//! ([`super::index`]) or answer requests.

use m3u8_rs::{
    AlternativeMedia, AlternativeMediaType, MasterPlaylist, MediaPlaylist, MediaPlaylistType, MediaSegment,
    Resolution, VariantStream,
};

use super::index::{Packaged, SegmentIndex};
use crate::mp4::Mp4File;

/// The master playlist's name.
pub const MASTER: &str = "master.m3u8";
/// The muxed rendition's media playlist (video and audio in the same segments).
pub const MEDIA: &str = "media.m3u8";
/// The muxed rendition's init segment.
pub const INIT: &str = "init.mp4";
/// The DASH manifest's name.
pub const MPD: &str = "manifest.mpd";

/// What a name under `/film.mp4/` (or a set's `/film.set/`) asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    /// The master playlist.
    Master,
    /// The muxed rendition's media playlist.
    Media,
    /// The muxed rendition's init segment.
    Init,
    /// The muxed rendition's media segment `n` (from 0).
    Segment(usize),
    /// One track's media playlist (`video.m3u8`, `audio.m3u8`).
    TrackPlaylist(Packaged),
    /// One track's init segment (`video-init.mp4`).
    TrackInit(Packaged),
    /// One track's media segment `n` (`video-seg-3.m4s`), the same times as `Segment(n)`.
    TrackSegment(Packaged, usize),
    /// The DASH manifest.
    Mpd,
    /// The subtitles playlist of a language (`subtitles-en.m3u8`).
    Subtitles(String),
    /// Subtitles segment `n` of a language (`subtitles-en-3.vtt`): the cues showing during
    /// media segment `n`.
    SubtitlesSegment(String, usize),
    /// The init segment of a language's subtitles as a text track for DASH
    /// (`subtitles-en-init.mp4`, see [`super::wvtt`]).
    TextInit(String),
    /// Media segment `n` of a language's text track (`subtitles-en-seg-3.m4s`): the cues showing
    /// during media segment `n`, as `wvtt` samples.
    TextSegment(String, usize),
}

impl Resource {
    /// The resource a name under the file's URL names; `None` for anything else.
    pub fn parse(name: &str) -> Option<Resource> {
        match name {
            MASTER => return Some(Resource::Master),
            MEDIA => return Some(Resource::Media),
            INIT => return Some(Resource::Init),
            MPD => return Some(Resource::Mpd),
            _ => {}
        }
        if let Some(language) = name.strip_prefix("subtitles-").and_then(|n| n.strip_suffix(".m3u8")) {
            return is_language(language).then(|| Resource::Subtitles(language.to_string()));
        }
        if let Some(language) = name.strip_prefix("subtitles-").and_then(|n| n.strip_suffix("-init.mp4")) {
            return is_language(language).then(|| Resource::TextInit(language.to_string()));
        }
        if let Some(rest) = name.strip_prefix("subtitles-").and_then(|n| n.strip_suffix(".m4s")) {
            let (language, number) = rest.rsplit_once("-seg-")?;
            let n = segment_number(&format!("seg-{number}.m4s"))?;
            return is_language(language).then(|| Resource::TextSegment(language.to_string(), n));
        }
        if let Some(rest) = name.strip_prefix("subtitles-").and_then(|n| n.strip_suffix(".vtt")) {
            let (language, number) = rest.rsplit_once('-')?;
            let n = segment_number(&format!("seg-{number}.m4s"))?;
            return is_language(language).then(|| Resource::SubtitlesSegment(language.to_string(), n));
        }
        for which in [Packaged::Video, Packaged::Audio] {
            let Some(rest) = name.strip_prefix(which.name()) else { continue };
            return match rest {
                ".m3u8" => Some(Resource::TrackPlaylist(which)),
                "-init.mp4" => Some(Resource::TrackInit(which)),
                _ => segment_number(rest.strip_prefix('-')?).map(|n| Resource::TrackSegment(which, n)),
            };
        }
        segment_number(name).map(Resource::Segment)
    }

    /// The `Content-Type` of the resource.
    pub fn content_type(&self) -> &'static str {
        match self {
            Resource::Master | Resource::Media | Resource::TrackPlaylist(_) | Resource::Subtitles(_) => {
                "application/vnd.apple.mpegurl"
            }
            Resource::Init | Resource::TrackInit(Packaged::Video) => "video/mp4",
            Resource::TrackInit(Packaged::Audio) => "audio/mp4",
            Resource::Segment(_) | Resource::TrackSegment(..) => "video/iso.segment",
            Resource::Mpd => "application/dash+xml",
            Resource::SubtitlesSegment(..) => "text/vtt; charset=utf-8",
            Resource::TextInit(_) | Resource::TextSegment(..) => "application/mp4",
        }
    }

    /// Whether it is made from a subtitles sidecar (so it changes with the sidecar, not with
    /// the MP4).
    pub fn is_from_subtitles(&self) -> bool {
        matches!(self, Resource::SubtitlesSegment(..) | Resource::TextInit(_) | Resource::TextSegment(..))
    }

    /// Whether it is a manifest (revalidated on every use) rather than a segment (cacheable).
    pub fn is_manifest(&self) -> bool {
        matches!(
            self,
            Resource::Master
                | Resource::Media
                | Resource::TrackPlaylist(_)
                | Resource::Subtitles(_)
                | Resource::Mpd
        )
    }

    /// Which players ask for it. The per-track CMAF init and media segments are one set that
    /// HLS and DASH players both fetch (that is what packaging them once buys), so a request
    /// for one cannot say which protocol it serves.
    pub fn played_by(&self) -> PlayedBy {
        match self {
            // The wvtt text track is listed only in the MPD (HLS lists the WebVTT segments).
            Resource::Mpd | Resource::TextInit(_) | Resource::TextSegment(..) => PlayedBy::Dash,
            Resource::TrackInit(_) | Resource::TrackSegment(..) => PlayedBy::Both,
            // The muxed rendition and the WebVTT segments are only in the HLS playlists.
            Resource::Master
            | Resource::Media
            | Resource::Init
            | Resource::Segment(_)
            | Resource::TrackPlaylist(_)
            | Resource::Subtitles(_)
            | Resource::SubtitlesSegment(..) => PlayedBy::Hls,
        }
    }
}

/// The players a [`Resource`] is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlayedBy {
    /// HLS players only (playlists, the muxed rendition, WebVTT segments).
    Hls,
    /// DASH players only (the manifest, the wvtt text track).
    Dash,
    /// Both (the per-track CMAF segments).
    Both,
}

/// `n` of `seg-n.m4s`, canonical numbers only, so one segment has one URL (and one cache entry).
fn segment_number(name: &str) -> Option<usize> {
    numbered(name, "seg-", ".m4s")
}

/// `n` of `{prefix}n{suffix}` (a segment's or fragment's name), canonical numbers only (no
/// leading zeros, at most 9 digits), so one resource has one URL (and one cache entry).
pub(crate) fn numbered(name: &str, prefix: &str, suffix: &str) -> Option<usize> {
    let digits = name.strip_prefix(prefix)?.strip_suffix(suffix)?;
    if digits.is_empty() || digits.len() > 9 || (digits.len() > 1 && digits.starts_with('0')) {
        return None;
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Whether `tag` looks like a BCP 47 language tag (`en`, `fr`, `pt-BR`, `zh-Hans`): what a
/// subtitles sidecar's name carries.
pub fn is_language(tag: &str) -> bool {
    let mut parts = tag.split('-');
    let primary = parts.next().unwrap_or("");
    (2..=3).contains(&primary.len())
        && primary.bytes().all(|b| b.is_ascii_lowercase())
        && parts.all(|p| (2..=8).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Media segment `n`'s name in the muxed rendition.
pub fn segment_name(n: usize) -> String {
    format!("seg-{n}.m4s")
}

/// Media segment `n`'s name in the `which` track's rendition.
pub fn track_segment_name(which: Packaged, n: usize) -> String {
    format!("{}-seg-{n}.m4s", which.name())
}

/// The `which` track's init segment name.
pub fn track_init_name(which: Packaged) -> String {
    format!("{}-init.mp4", which.name())
}

/// The `which` track's media playlist name.
pub fn track_playlist_name(which: Packaged) -> String {
    format!("{}.m3u8", which.name())
}

/// The subtitles playlist name of `language`.
pub fn subtitles_name(language: &str) -> String {
    format!("subtitles-{language}.m3u8")
}

/// Subtitles segment `n`'s name of `language`.
pub fn subtitles_segment_name(language: &str, n: usize) -> String {
    format!("subtitles-{language}-{n}.vtt")
}

/// The init segment name of `language`'s text track (DASH).
pub fn text_init_name(language: &str) -> String {
    format!("subtitles-{language}-init.mp4")
}

/// The name of media segment `number` of `language`'s text track (DASH); `"$Number$"` gives
/// the template.
pub fn text_segment_name(language: &str, number: impl std::fmt::Display) -> String {
    format!("subtitles-{language}-seg-{number}.m4s")
}

/// One packaged file of a master playlist or an MPD.
#[derive(Debug, Clone, Copy)]
pub struct Rendition<'a> {
    /// Where its resources are relative to the manifest: `""` for the file's own manifest,
    /// `"../film.720p.mp4/"` for a set's.
    pub prefix: &'a str,
    /// Its segments.
    pub index: &'a SegmentIndex,
}

/// One WebVTT sidecar: its resources (`subtitles-en.m3u8`, `subtitles-en-init.mp4`) are
/// beside the manifest.
#[derive(Debug, Clone, Copy)]
pub struct Subtitle<'a> {
    /// Its language (from the file name).
    pub language: &'a str,
}

/// The group id of the audio rendition and of the subtitles.
const AUDIO_GROUP: &str = "audio";
const SUBTITLES_GROUP: &str = "subs";

/// The master playlist: a variant per rendition with video (its own per-track playlist), the
/// audio of the first rendition that has it as an audio group, the subtitles as a subtitles
/// group, the first shown by default (as DASH players show the first text track: Apple's
/// authoring rules, one `DEFAULT=YES` a group, `AUTOSELECT=YES` on each). The muxed
/// `media.m3u8` is not listed (see the module docs of [`super`]).
pub fn master_playlist(renditions: &[Rendition<'_>], subtitles: &[Subtitle<'_>]) -> String {
    let audio = renditions.iter().find(|r| r.index.has(Packaged::Audio));
    let mut alternatives = Vec::new();
    let has_video = renditions.iter().any(|r| r.index.has(Packaged::Video));
    if let (Some(audio), true) = (audio, has_video) {
        alternatives.push(AlternativeMedia {
            media_type: AlternativeMediaType::Audio,
            uri: Some(format!("{}{}", audio.prefix, track_playlist_name(Packaged::Audio))),
            group_id: AUDIO_GROUP.to_string(),
            name: "audio".to_string(),
            default: true,
            autoselect: true,
            channels: None,
            ..Default::default()
        });
    }
    for (i, sub) in subtitles.iter().enumerate() {
        alternatives.push(AlternativeMedia {
            media_type: AlternativeMediaType::Subtitles,
            uri: Some(subtitles_name(sub.language)),
            group_id: SUBTITLES_GROUP.to_string(),
            language: Some(sub.language.to_string()),
            name: sub.language.to_string(),
            default: i == 0,
            autoselect: true,
            ..Default::default()
        });
    }
    let subtitles_group = (!subtitles.is_empty()).then(|| SUBTITLES_GROUP.to_string());
    let mut variants = Vec::new();
    for r in renditions.iter().filter(|r| r.index.has(Packaged::Video)) {
        let index = r.index;
        let audio_codecs = audio.and_then(|a| a.index.track_codecs(Packaged::Audio));
        let codecs: Vec<&str> = index.track_codecs(Packaged::Video).into_iter().chain(audio_codecs).collect();
        let audio_peak = audio.map_or(0, |a| a.index.track_peak_bandwidth(Packaged::Audio));
        let average = index.average_bandwidth();
        variants.push(VariantStream {
            uri: format!("{}{}", r.prefix, track_playlist_name(Packaged::Video)),
            bandwidth: (index.track_peak_bandwidth(Packaged::Video) + audio_peak).max(average),
            average_bandwidth: Some(average),
            codecs: Some(codecs.join(",")),
            resolution: index
                .resolution()
                .map(|(w, h)| Resolution { width: u64::from(w), height: u64::from(h) }),
            frame_rate: index.frame_rate().map(|f| (f * 1000.0).round() / 1000.0),
            audio: audio.is_some().then(|| AUDIO_GROUP.to_string()),
            subtitles: subtitles_group.clone(),
            other_attributes: video_attributes(index),
            ..Default::default()
        });
    }
    if let (Some(audio), false) = (audio, has_video) {
        variants.push(VariantStream {
            uri: format!("{}{}", audio.prefix, track_playlist_name(Packaged::Audio)),
            bandwidth: audio.index.peak_bandwidth(),
            average_bandwidth: Some(audio.index.average_bandwidth()),
            codecs: Some(audio.index.codecs().to_string()),
            subtitles: subtitles_group.clone(),
            ..Default::default()
        });
    }
    let playlist = MasterPlaylist {
        version: Some(7),
        independent_segments: true,
        alternatives,
        variants,
        ..Default::default()
    };
    write(|out| playlist.write_to(out))
}

/// The muxed rendition's VOD media playlist: the segments' durations are the main track's.
pub fn media_playlist(index: &SegmentIndex) -> String {
    vod_playlist(&main_durations(index), Some(INIT), segment_name)
}

/// The `which` track's VOD media playlist: the same segments as the muxed one, each as long as
/// that track's samples in it last (`file` is the file `index` was built from), which is what
/// the MPD's timeline of the track says. (Audio is cut where the video is, so its segments
/// are a few ms longer or shorter than the video's.)
pub fn track_playlist(index: &SegmentIndex, file: &Mp4File, which: Packaged) -> String {
    let durations = index.track_durations(file, which);
    vod_playlist(&durations, Some(&track_init_name(which)), |n| track_segment_name(which, n))
}

/// The subtitles playlist of a language: segmented WebVTT (see [`super::webvtt`]), one segment
/// for each media segment of `index`, the same durations.
pub fn subtitles_playlist(index: &SegmentIndex, language: &str) -> String {
    vod_playlist(&main_durations(index), None, |n| subtitles_segment_name(language, n))
}

fn main_durations(index: &SegmentIndex) -> Vec<f64> {
    (0..index.segments()).map(|n| index.segment_duration(n)).collect()
}

/// A VOD playlist of segments lasting `durations` seconds, named by `name`, with `init` as the
/// `EXT-X-MAP` of the first.
fn vod_playlist(durations: &[f64], init: Option<&str>, name: impl Fn(usize) -> String) -> String {
    media_playlist_of(durations, init, name, None)
}

/// The window of a live stream's segments a live playlist lists.
#[derive(Debug, Clone, Copy)]
pub struct LiveWindow<'a> {
    /// The number of the first segment listed (`EXT-X-MEDIA-SEQUENCE`, and in its name).
    pub first_sequence: u64,
    /// When each listed segment starts, by the wall clock (`EXT-X-PROGRAM-DATE-TIME`).
    pub wallclocks: &'a [std::time::SystemTime],
    /// Whether the stream ended (`EXT-X-ENDLIST`).
    pub ended: bool,
}

/// A live media playlist (RFC 8216 §6.2.2: no playlist type, the window's first segment's
/// number as the media sequence, the wall-clock time of each segment, `EXT-X-ENDLIST` once the
/// stream ended) of the segments of `index`, which is cut where the live segments are: the
/// muxed rendition (`which` `None`) or one track's. Segments are named by their live number.
pub fn live_playlist(
    index: &SegmentIndex,
    file: &Mp4File,
    which: Option<Packaged>,
    window: &LiveWindow<'_>,
) -> String {
    let first = window.first_sequence;
    match which {
        None => media_playlist_of(
            &main_durations(index),
            Some(INIT),
            |n| segment_name(first as usize + n),
            Some(window),
        ),
        Some(w) => {
            let durations = index.track_durations(file, w);
            media_playlist_of(
                &durations,
                Some(&track_init_name(w)),
                |n| track_segment_name(w, first as usize + n),
                Some(window),
            )
        }
    }
}

/// `playlist` (a VOD media playlist this module wrote) as an `EVENT` one (RFC 8216 §4.3.3.5):
/// a file still being recorded, whose segments so far stay and to which more are added.
pub fn as_event(playlist: &str) -> String {
    playlist.replace("#EXT-X-PLAYLIST-TYPE:VOD", "#EXT-X-PLAYLIST-TYPE:EVENT").replace("#EXT-X-ENDLIST\n", "")
}

/// One file's part of a playlist across files ([`span_playlist`]).
#[derive(Debug, Clone)]
pub struct SpanPart {
    /// Its init segment's URI.
    pub init: String,
    /// Its segments' URIs and durations in seconds.
    pub segments: Vec<(String, f64)>,
    /// The wall-clock time its first listed segment starts.
    pub wallclock: std::time::SystemTime,
    /// Whether its timestamps do not follow on from the part before (`EXT-X-DISCONTINUITY`).
    pub discontinuity: bool,
}

/// A VOD playlist of segments of several files, in order (a span of recordings): each part
/// with its own `EXT-X-MAP` and the wall-clock time of its start.
pub fn span_playlist(parts: &[SpanPart]) -> String {
    let mut segments = Vec::new();
    for part in parts {
        for (n, (uri, duration)) in part.segments.iter().enumerate() {
            let first = n == 0;
            segments.push(MediaSegment {
                uri: uri.clone(),
                duration: *duration as f32,
                discontinuity: first && part.discontinuity && !segments.is_empty(),
                map: first.then(|| m3u8_rs::Map { uri: part.init.clone(), ..Default::default() }),
                program_date_time: first
                    .then(|| chrono::DateTime::<chrono::Utc>::from(part.wallclock).fixed_offset()),
                ..Default::default()
            });
        }
    }
    let playlist = MediaPlaylist {
        version: Some(7),
        target_duration: target_duration(&segments),
        playlist_type: Some(MediaPlaylistType::Vod),
        independent_segments: true,
        end_list: true,
        segments,
        ..Default::default()
    };
    write(|out| playlist.write_to(out))
}

/// A media playlist of segments lasting `durations` seconds, named by `name`, with `init` as
/// the `EXT-X-MAP` of the first: VOD, or the window of a live stream.
fn media_playlist_of(
    durations: &[f64],
    init: Option<&str>,
    name: impl Fn(usize) -> String,
    live: Option<&LiveWindow<'_>>,
) -> String {
    let segments: Vec<MediaSegment> = durations
        .iter()
        .enumerate()
        .map(|(n, &duration)| MediaSegment {
            uri: name(n),
            duration: duration as f32,
            map: init
                .filter(|_| n == 0)
                .map(|init| m3u8_rs::Map { uri: init.to_string(), ..Default::default() }),
            program_date_time: live
                .and_then(|w| w.wallclocks.get(n))
                .map(|&t| chrono::DateTime::<chrono::Utc>::from(t).fixed_offset()),
            ..Default::default()
        })
        .collect();
    let playlist = MediaPlaylist {
        version: Some(7),
        target_duration: target_duration(&segments),
        media_sequence: live.map_or(0, |w| w.first_sequence),
        playlist_type: live.is_none().then_some(MediaPlaylistType::Vod),
        independent_segments: true,
        end_list: live.is_none_or(|w| w.ended),
        segments,
        ..Default::default()
    };
    write(|out| playlist.write_to(out))
}

/// `EXT-X-TARGETDURATION`: each `EXTINF` rounded to the nearest integer may not exceed it
/// (RFC 8216 §4.3.3.1), so the longest one, as written (`f32`), rounded; at least 1.
fn target_duration(segments: &[MediaSegment]) -> u64 {
    let longest = segments.iter().map(|s| s.duration).fold(0.0f32, f32::max);
    (longest.round() as u64).max(1)
}

fn write(f: impl FnOnce(&mut Vec<u8>) -> std::io::Result<()>) -> String {
    let mut out = Vec::new();
    // Writing into a Vec cannot fail, and m3u8-rs writes only UTF-8.
    let _ = f(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// A video variant's attributes `m3u8-rs` has no field for: `VIDEO-RANGE` (RFC 8216bis
/// §4.4.6.2: PQ and HLG must be declared; SDR where the entry says so) and, for Dolby Vision
/// with a base layer other players decode, `SUPPLEMENTAL-CODECS` (RFC 8216bis §4.4.6.2, Apple's
/// HLS authoring specification: the Dolby Vision string and brand beside the base `CODECS`).
fn video_attributes(
    index: &SegmentIndex,
) -> Option<std::collections::HashMap<String, m3u8_rs::QuotedOrUnquoted>> {
    use m3u8_rs::QuotedOrUnquoted::{Quoted, Unquoted};
    let range = index.video_range().map(|r| r.as_str());
    let supplemental = index.supplemental_codecs();
    // One entry: `m3u8-rs` keeps these in a HashMap, whose order (random per map) would make
    // the master playlist's bytes differ from one request to the next.
    let (key, value) = match (supplemental, range) {
        (Some(s), Some(r)) => ("SUPPLEMENTAL-CODECS", Unquoted(format!("\"{s}\",VIDEO-RANGE={r}"))),
        (Some(s), None) => ("SUPPLEMENTAL-CODECS", Quoted(s.to_string())),
        (None, Some(r)) => ("VIDEO-RANGE", Unquoted(r.to_string())),
        (None, None) => return None,
    };
    Some([(key.to_string(), value)].into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mp4::Mp4File;
    use std::time::Duration;

    #[test]
    fn names_parse_canonically() {
        assert_eq!(Resource::parse("master.m3u8"), Some(Resource::Master));
        assert_eq!(Resource::parse("media.m3u8"), Some(Resource::Media));
        assert_eq!(Resource::parse("init.mp4"), Some(Resource::Init));
        assert_eq!(Resource::parse("seg-0.m4s"), Some(Resource::Segment(0)));
        assert_eq!(Resource::parse("seg-12.m4s"), Some(Resource::Segment(12)));
        for bad in ["seg-.m4s", "seg-01.m4s", "seg--1.m4s", "seg-1x.m4s", "seg-9999999999.m4s", "x.m3u8", ""]
        {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
        assert_eq!(Resource::parse(&segment_name(7)), Some(Resource::Segment(7)));
        assert_eq!(Resource::parse("manifest.mpd"), Some(Resource::Mpd));
        assert_eq!(Resource::parse("video.m3u8"), Some(Resource::TrackPlaylist(Packaged::Video)));
        assert_eq!(Resource::parse("audio-init.mp4"), Some(Resource::TrackInit(Packaged::Audio)));
        assert_eq!(Resource::parse("video-seg-3.m4s"), Some(Resource::TrackSegment(Packaged::Video, 3)));
        assert_eq!(
            Resource::parse(&track_segment_name(Packaged::Audio, 9)),
            Some(Resource::TrackSegment(Packaged::Audio, 9))
        );
        assert_eq!(Resource::parse("subtitles-pt-BR.m3u8"), Some(Resource::Subtitles("pt-BR".into())));
        assert_eq!(
            Resource::parse("subtitles-pt-BR-12.vtt"),
            Some(Resource::SubtitlesSegment("pt-BR".into(), 12))
        );
        assert_eq!(Resource::parse("subtitles-en-0.vtt"), Some(Resource::SubtitlesSegment("en".into(), 0)));
        assert_eq!(Resource::parse("subtitles-pt-BR-init.mp4"), Some(Resource::TextInit("pt-BR".into())));
        assert_eq!(
            Resource::parse(&text_segment_name("pt-BR", 12)),
            Some(Resource::TextSegment("pt-BR".into(), 12))
        );
        assert_eq!(Resource::parse(&text_init_name("en")), Some(Resource::TextInit("en".into())));
        for bad in [
            "subtitles-en-seg-01.m4s",
            "subtitles-en-seg-.m4s",
            "subtitles-en-seg-1.mp4",
            "subtitles-EN-init.mp4",
            "subtitles--init.mp4",
            "subtitles-en-1.m4s",
        ] {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
        for bad in ["subtitles-en-01.vtt", "subtitles-en.vtt", "subtitles-en--1.vtt", "subtitles-E-1.vtt"] {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
        for bad in
            ["video-seg-01.m4s", "videoseg-1.m4s", "subtitles-E.m3u8", "subtitles-../x.m3u8", "audio.mpd"]
        {
            assert_eq!(Resource::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn playlists_of_the_demo() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
        let file = Mp4File::from_bytes(&std::fs::read(path).unwrap()).unwrap();
        let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
        let master = master_playlist(&[Rendition { prefix: "", index: &index }], &[]);
        assert!(master.starts_with("#EXTM3U\n"), "{master}");
        assert!(master.contains("CODECS=\"avc1.4d401e,mp4a.40.2\""), "{master}");
        assert!(master.contains("RESOLUTION=640x360"), "{master}");
        assert!(master.contains("FRAME-RATE=30"), "{master}");
        assert!(master.contains("BANDWIDTH="), "{master}");
        assert!(master.contains("TYPE=AUDIO,URI=\"audio.m3u8\",GROUP-ID=\"audio\""), "{master}");
        assert!(master.contains("\nvideo.m3u8\n"), "{master}");
        let video = track_playlist(&index, &file, Packaged::Video);
        assert!(video.contains("#EXT-X-MAP:URI=\"video-init.mp4\""), "{video}");
        assert!(video.contains("video-seg-2.m4s"), "{video}");
        let media = media_playlist(&index);
        for line in [
            "#EXT-X-PLAYLIST-TYPE:VOD",
            "#EXT-X-TARGETDURATION:2",
            "#EXT-X-MAP:URI=\"init.mp4\"",
            "seg-0.m4s",
            "seg-2.m4s",
            "#EXT-X-ENDLIST",
        ] {
            assert!(media.contains(line), "{line} in {media}");
        }
        assert!(!media.contains("seg-3.m4s"));
    }

    /// The first subtitles are shown by default, as DASH players do: one `DEFAULT=YES` in the
    /// group, `AUTOSELECT=YES` on every one.
    #[test]
    fn the_first_subtitles_are_the_default() {
        let file = crate::mp4::demo_file();
        let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
        let subtitles =
            [Subtitle { language: "en" }, Subtitle { language: "fr" }, Subtitle { language: "de" }];
        let master = master_playlist(&[Rendition { prefix: "", index: &index }], &subtitles);
        let m3u8_rs::Playlist::MasterPlaylist(parsed) =
            m3u8_rs::parse_playlist_res(master.as_bytes()).unwrap()
        else {
            panic!("a master playlist: {master}")
        };
        let subs: Vec<(&str, bool, bool)> = parsed
            .alternatives
            .iter()
            .filter(|a| a.media_type == AlternativeMediaType::Subtitles)
            .map(|a| (a.language.as_deref().unwrap(), a.default, a.autoselect))
            .collect();
        assert_eq!(subs, [("en", true, true), ("fr", false, true), ("de", false, true)], "{master}");
        assert_eq!(
            master.matches("DEFAULT=YES").count(),
            2,
            "the audio's and the first subtitles': {master}"
        );
    }

    /// Each track's playlist says how long its own samples in each segment last, as its MPD
    /// timeline does: the audio's are not the video's. `EXT-X-TARGETDURATION` is the longest
    /// `EXTINF` rounded (RFC 8216 §4.3.3.1).
    #[test]
    fn track_playlists_say_each_tracks_own_durations() {
        let file = crate::mp4::demo_file();
        let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
        for which in [Packaged::Video, Packaged::Audio] {
            let text = track_playlist(&index, &file, which);
            let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(text.as_bytes()).unwrap()
            else {
                panic!("a media playlist: {text}")
            };
            let (timescale, times) = index.track_times(&file, which).unwrap();
            let expected: Vec<f64> =
                times.windows(2).map(|w| (w[1] - w[0]) as f64 / f64::from(timescale)).collect();
            let listed: Vec<f64> = p.segments.iter().map(|s| f64::from(s.duration)).collect();
            assert_eq!(listed.len(), expected.len());
            for (l, e) in listed.iter().zip(&expected) {
                assert!((l - e).abs() < 1e-5, "{which:?}: {listed:?} against {expected:?}");
            }
            let longest = listed.iter().copied().fold(0.0, f64::max);
            assert_eq!(p.target_duration, longest.round() as u64, "{text}");
            if which == Packaged::Audio {
                // The demo's audio frames (1,024 samples at 48 kHz) do not end on the video's
                // 2 s cuts.
                assert!(listed.iter().any(|d| (d - 2.0).abs() > 0.001), "{listed:?}");
            }
        }
        // Rounding: 6.4 s fits a target of 6, 6.5 s does not.
        let segment = |duration: f32| MediaSegment { duration, ..Default::default() };
        assert_eq!(target_duration(&[segment(6.0), segment(6.4)]), 6);
        assert_eq!(target_duration(&[segment(6.0), segment(6.5)]), 7);
        assert_eq!(target_duration(&[segment(0.2)]), 1);
    }
}
