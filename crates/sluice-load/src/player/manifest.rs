//! Manifests to segment lists: what a player makes of an HLS master and media playlists (parsed
//! with `m3u8-rs`: variants, `EXT-X-MEDIA` audio groups, `EXT-X-MAP` init segments,
//! `EXT-X-BYTERANGE`) or of a static DASH MPD (parsed with `dash-mpd-core`: `SegmentTemplate`
//! with `SegmentTimeline`, `$Number$`/`$Time$`/`$RepresentationID$`/`$Bandwidth$` and `startNumber`,
//! or with a fixed `duration`; `SegmentList`; `SegmentBase` as one whole-file segment; `BaseURL`
//! at every level). The result is a [`Presentation`]: video (or muxed) renditions and separate
//! audio tracks, each an init segment and segments with their media times, every URL absolute.
//!
//! It owns the expansion only; it fetches nothing (the player module fetches the documents and
//! hands their bytes here) and does not choose renditions.

use dash_mpd_core as mpd;
use sluice_proto::nesting::{check_nesting, NestingLimit, Syntax, MAX_DEPTH};
use url::Url;

/// Which kind of manifest a presentation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// An HLS master (or media) playlist.
    Hls,
    /// A static MPEG-DASH MPD.
    Dash,
}

impl Protocol {
    /// `hls` or `dash`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Hls => "hls",
            Protocol::Dash => "dash",
        }
    }
}

/// A URL, or a byte range of one (inclusive, as in a `Range` header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    /// Absolute URL.
    pub url: String,
    /// `first..=last` byte, when only part of the URL is the resource.
    pub range: Option<(u64, u64)>,
}

impl Resource {
    fn whole(url: &Url) -> Resource {
        Resource { url: url.to_string(), range: None }
    }
}

/// One media segment.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    /// Where it is.
    pub resource: Resource,
    /// Media time of its start, seconds from the presentation's start.
    pub start: f64,
    /// Its duration, seconds.
    pub duration: f64,
}

/// A rendition or an audio track: an optional init segment and the segments in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Track {
    /// A name for reports: `1920x1080 5000 kb/s`, a DASH representation id, `audio`.
    pub name: String,
    /// Declared peak bits per second (0 when the manifest gives none).
    pub bandwidth: u64,
    /// Picture height, when declared.
    pub height: Option<u64>,
    /// The HLS media playlist a player fetches before playing this track.
    pub playlist: Option<String>,
    /// The init segment, when the segments need one.
    pub init: Option<Resource>,
    /// Segments in playback order.
    pub segments: Vec<Segment>,
    /// Index into [`Presentation::audio`] of the audio played with this rendition.
    pub audio: Option<usize>,
}

impl Track {
    /// Media seconds of all its segments.
    pub fn duration(&self) -> f64 {
        self.segments.last().map_or(0.0, |s| s.start + s.duration)
    }
}

/// Everything a viewer plays, from one manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct Presentation {
    /// HLS or DASH.
    pub protocol: Protocol,
    /// The manifest a viewer fetches first.
    pub manifest: String,
    /// Video renditions (or muxed audio+video), in manifest order.
    pub renditions: Vec<Track>,
    /// Audio tracks delivered apart from the video.
    pub audio: Vec<Track>,
}

/// Why a manifest could not be turned into segments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ManifestError(pub String);

fn bad<T>(message: impl Into<String>) -> Result<T, ManifestError> {
    Err(ManifestError(message.into()))
}

fn join(base: &Url, reference: &str) -> Result<Url, ManifestError> {
    base.join(reference.trim()).map_err(|e| ManifestError(format!("URL `{reference}` against {base}: {e}")))
}

/// What an HLS playlist turned out to be.
#[derive(Debug, Clone, PartialEq)]
pub enum HlsPlaylist {
    /// A master playlist: renditions whose media playlists are still to be fetched (their
    /// `segments` are empty and `playlist` is set), and the audio tracks likewise.
    Master(Presentation),
    /// A media playlist: one rendition.
    Media(Track),
}

/// Parses an HLS playlist fetched from `url`.
pub fn parse_hls(url: &Url, bytes: &[u8]) -> Result<HlsPlaylist, ManifestError> {
    match m3u8_rs::parse_playlist_res(bytes) {
        Ok(m3u8_rs::Playlist::MasterPlaylist(master)) => hls_master(url, &master).map(HlsPlaylist::Master),
        Ok(m3u8_rs::Playlist::MediaPlaylist(media)) => {
            let mut track = hls_media(url, &media)?;
            track.name = "media playlist".into();
            Ok(HlsPlaylist::Media(track))
        }
        Err(e) => bad(format!("not an HLS playlist: {}", short(&e.to_string()))),
    }
}

/// The first line of a parser's message, bounded (the `nom` errors quote the whole input).
fn short(text: &str) -> String {
    text.lines().next().unwrap_or_default().chars().take(160).collect()
}

fn hls_master(url: &Url, master: &m3u8_rs::MasterPlaylist) -> Result<Presentation, ManifestError> {
    let mut audio: Vec<Track> = Vec::new();
    let mut audio_by_group: Vec<(String, usize)> = Vec::new();
    for alt in &master.alternatives {
        if alt.media_type != m3u8_rs::AlternativeMediaType::Audio {
            continue;
        }
        // One track a group: the DEFAULT=YES one, else the first with a URI. A rendition
        // without URI is carried in the variant's own segments.
        let Some(uri) = &alt.uri else { continue };
        let known = audio_by_group.iter().position(|(g, _)| *g == alt.group_id);
        if known.is_some() && !alt.default {
            continue;
        }
        let track = Track {
            name: format!("audio {} {}", alt.group_id, alt.name),
            bandwidth: 0,
            height: None,
            playlist: Some(join(url, uri)?.to_string()),
            init: None,
            segments: Vec::new(),
            audio: None,
        };
        match known {
            Some(i) => audio[audio_by_group[i].1] = track,
            None => {
                audio_by_group.push((alt.group_id.clone(), audio.len()));
                audio.push(track);
            }
        }
    }
    let mut renditions = Vec::new();
    for v in master.variants.iter().filter(|v| !v.is_i_frame) {
        let height = v.resolution.map(|r| r.height);
        let name = match v.resolution {
            Some(r) => format!("{}x{} {} kb/s", r.width, r.height, v.bandwidth / 1000),
            None => format!("{} kb/s", v.bandwidth / 1000),
        };
        let audio = v
            .audio
            .as_ref()
            .and_then(|group| audio_by_group.iter().find(|(g, _)| g == group))
            .map(|(_, i)| *i);
        renditions.push(Track {
            name,
            bandwidth: v.bandwidth,
            height,
            playlist: Some(join(url, &v.uri)?.to_string()),
            init: None,
            segments: Vec::new(),
            audio,
        });
    }
    if renditions.is_empty() {
        return bad("the master playlist lists no variant stream");
    }
    Ok(Presentation { protocol: Protocol::Hls, manifest: url.to_string(), renditions, audio })
}

fn hls_media(url: &Url, media: &m3u8_rs::MediaPlaylist) -> Result<Track, ManifestError> {
    if !media.end_list {
        return bad("a live playlist (no EXT-X-ENDLIST): only VOD is played");
    }
    let mut init = None;
    let mut segments = Vec::with_capacity(media.segments.len());
    let mut start = 0.0;
    // EXT-X-BYTERANGE without an offset continues where the previous range of the same URI ended.
    let mut next_offset: Option<(String, u64)> = None;
    for s in &media.segments {
        if let Some(map) = &s.map {
            let map_url = join(url, &map.uri)?;
            let range = map.byte_range.as_ref().map(|r| {
                let first = r.offset.unwrap_or(0);
                (first, first + r.length.saturating_sub(1))
            });
            init = Some(Resource { url: map_url.to_string(), range });
        }
        let seg_url = join(url, &s.uri)?.to_string();
        let range = match &s.byte_range {
            None => None,
            Some(r) => {
                let first = match (r.offset, &next_offset) {
                    (Some(o), _) => o,
                    (None, Some((u, o))) if *u == seg_url => *o,
                    (None, _) => {
                        return bad(format!("EXT-X-BYTERANGE of {} has no offset to continue", s.uri))
                    }
                };
                next_offset = Some((seg_url.clone(), first + r.length));
                Some((first, first + r.length.saturating_sub(1)))
            }
        };
        let duration = f64::from(s.duration);
        segments.push(Segment { resource: Resource { url: seg_url, range }, start, duration });
        start += duration;
    }
    if segments.is_empty() {
        return bad("the media playlist has no segment");
    }
    let track = Track {
        name: String::new(),
        bandwidth: 0,
        height: None,
        playlist: Some(url.to_string()),
        init,
        segments,
        audio: None,
    };
    check_times(&track)?;
    Ok(track)
}

/// Longest presentation accepted, seconds (a hundred days): media times stay far inside what the
/// players' clocks can add to an instant.
pub const MAX_MEDIA_SECONDS: f64 = 1e7;

/// Checks that a track's media times are finite, non-negative and bounded.
pub fn check_times(track: &Track) -> Result<(), ManifestError> {
    if track.segments.len() as u64 > MAX_SEGMENTS {
        return bad(format!("more than {MAX_SEGMENTS} segments"));
    }
    for s in &track.segments {
        let ok = |t: f64| t.is_finite() && t >= 0.0;
        if !ok(s.start) || !ok(s.duration) || s.start + s.duration > MAX_MEDIA_SECONDS {
            return bad(format!(
                "segment {} has an invalid time ({} s + {} s)",
                s.resource.url, s.start, s.duration
            ));
        }
    }
    Ok(())
}

/// Fills a master's track from its media playlist's bytes.
pub fn fill_hls_track(track: &mut Track, bytes: &[u8]) -> Result<(), ManifestError> {
    let Some(playlist) = &track.playlist else { return Ok(()) };
    let url = Url::parse(playlist).map_err(|e| ManifestError(e.to_string()))?;
    match m3u8_rs::parse_playlist_res(bytes) {
        Ok(m3u8_rs::Playlist::MediaPlaylist(media)) => {
            let parsed = hls_media(&url, &media)?;
            track.init = parsed.init;
            track.segments = parsed.segments;
            Ok(())
        }
        Ok(m3u8_rs::Playlist::MasterPlaylist(_)) => {
            bad(format!("{playlist} is a master playlist, not media"))
        }
        Err(e) => bad(format!("{playlist}: not an HLS playlist: {}", short(&e.to_string()))),
    }
}

/// Parses a static MPD fetched from `url`.
pub fn parse_dash(url: &Url, text: &str) -> Result<Presentation, ManifestError> {
    // The MPD comes from the server under test, and the XML deserializer recurses once per
    // element level: elements nested 100,000 deep would overflow the player's stack. HLS
    // playlists are lines, with nothing to nest.
    let limit = NestingLimit { max_depth: MAX_DEPTH, max_len: super::MAX_MANIFEST_BYTES };
    check_nesting(text.as_bytes(), Syntax::Xml, limit)
        .map_err(|e| ManifestError(format!("not read as a DASH MPD: {e}")))?;
    let doc =
        mpd::parse(text).map_err(|e| ManifestError(format!("not a DASH MPD: {}", short(&e.to_string()))))?;
    if doc.mpdtype.as_deref().is_some_and(|t| t != "static") {
        return bad("a dynamic (live) MPD: only static MPDs are played");
    }
    let mpd_base = match doc.base_url.first() {
        Some(b) => join(url, &b.base)?,
        None => url.clone(),
    };
    let total = doc.mediaPresentationDuration.map(|d| d.as_secs_f64());
    let mut video: Vec<Track> = Vec::new();
    let mut audio: Vec<Track> = Vec::new();
    let mut period_start = 0.0;
    for (p, period) in doc.periods.iter().enumerate() {
        let start = period.start.map_or(period_start, |s| s.as_secs_f64());
        let next_start = doc.periods.get(p + 1).and_then(|n| n.start).map(|s| s.as_secs_f64());
        let length = period
            .duration
            .map(|d| d.as_secs_f64())
            .or(next_start.map(|n| n - start))
            .or(total.map(|t| t - start));
        let base = match period.BaseURL.first() {
            Some(b) => join(&mpd_base, &b.base)?,
            None => mpd_base.clone(),
        };
        let mut period_video = Vec::new();
        let mut period_audio = Vec::new();
        for set in &period.adaptations {
            let kind = adaptation_kind(set);
            // A set with an EssentialProperty (a trick-mode set of keyframes, DASH-IF IOP
            // §3.2.9) is one a client that does not know the scheme ignores (ISO/IEC 23009-1
            // §5.8.4.8), as a viewer playing at normal speed does.
            if kind == Kind::Other || !set.essential_property.is_empty() {
                continue;
            }
            let set_base = match set.BaseURL.first() {
                Some(b) => join(&base, &b.base)?,
                None => base.clone(),
            };
            for (r, rep) in set.representations.iter().enumerate() {
                let rep_base = match rep.BaseURL.first() {
                    Some(b) => join(&set_base, &b.base)?,
                    None => set_base.clone(),
                };
                let context = RepContext {
                    id: rep.id.clone().unwrap_or_else(|| r.to_string()),
                    bandwidth: rep.bandwidth.unwrap_or(0),
                    base: rep_base,
                    period_start: start,
                    period_length: length,
                };
                let (init, segments) = representation_segments(
                    &context,
                    [&period.SegmentTemplate, &set.SegmentTemplate, &rep.SegmentTemplate],
                    [&period.SegmentList, &set.SegmentList, &rep.SegmentList],
                    [&period.SegmentBase, &set.SegmentBase, &rep.SegmentBase],
                )?;
                let height = rep.height.or(set.height);
                let name = match (rep.width.or(set.width), height) {
                    (Some(w), Some(h)) => format!("{} {w}x{h} {} kb/s", context.id, context.bandwidth / 1000),
                    _ => format!("{} {} kb/s", context.id, context.bandwidth / 1000),
                };
                let track = Track {
                    name,
                    bandwidth: context.bandwidth,
                    height,
                    playlist: None,
                    init,
                    segments,
                    audio: None,
                };
                if kind == Kind::Video {
                    period_video.push(track);
                } else {
                    period_audio.push(track);
                }
            }
        }
        append_period(&mut video, period_video, p)?;
        append_period(&mut audio, period_audio, p)?;
        period_start = start + length.unwrap_or(0.0);
    }
    // Audio apart from the video: the first audio representation, as players pick by default.
    audio.truncate(1);
    let (renditions, audio) = if video.is_empty() { (audio, Vec::new()) } else { (video, audio) };
    if renditions.is_empty() {
        return bad("the MPD has no video or audio representation");
    }
    let audio_index = (!audio.is_empty()).then_some(0);
    let renditions: Vec<Track> = renditions.into_iter().map(|t| Track { audio: audio_index, ..t }).collect();
    for track in renditions.iter().chain(&audio) {
        check_times(track)?;
    }
    Ok(Presentation { protocol: Protocol::Dash, manifest: url.to_string(), renditions, audio })
}

/// Adds one period's tracks after the earlier periods' (matched by position).
fn append_period(all: &mut Vec<Track>, period: Vec<Track>, index: usize) -> Result<(), ManifestError> {
    if index == 0 {
        *all = period;
        return Ok(());
    }
    if period.len() != all.len() {
        return bad("periods with different numbers of representations are not supported");
    }
    for (track, more) in all.iter_mut().zip(period) {
        track.segments.extend(more.segments);
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Video,
    Audio,
    Other,
}

fn adaptation_kind(set: &mpd::AdaptationSet) -> Kind {
    let mime = set
        .contentType
        .clone()
        .or(set.mimeType.clone())
        .or_else(|| set.representations.first().and_then(|r| r.mimeType.clone().or(r.contentType.clone())))
        .unwrap_or_default();
    if mime.starts_with("video") {
        return Kind::Video;
    }
    if mime.starts_with("audio") {
        return Kind::Audio;
    }
    let codecs = set
        .codecs
        .clone()
        .or_else(|| set.representations.first().and_then(|r| r.codecs.clone()))
        .unwrap_or_default();
    if ["avc", "hvc", "hev", "av01", "vp0"].iter().any(|c| codecs.starts_with(c)) {
        Kind::Video
    } else if ["mp4a", "opus", "ac-3", "ec-3", "flac"].iter().any(|c| codecs.starts_with(c)) {
        Kind::Audio
    } else {
        Kind::Other
    }
}

/// What a representation's segment URLs are built from.
struct RepContext {
    id: String,
    bandwidth: u64,
    base: Url,
    period_start: f64,
    period_length: Option<f64>,
}

/// The innermost value of a field over Period, AdaptationSet and Representation.
fn inherit<E, T: Clone>(levels: &[&Option<E>; 3], field: impl Fn(&E) -> Option<T>) -> Option<T> {
    levels.iter().rev().filter_map(|l| l.as_ref()).find_map(field)
}

fn representation_segments(
    rep: &RepContext,
    templates: [&Option<mpd::SegmentTemplate>; 3],
    lists: [&Option<mpd::SegmentList>; 3],
    bases: [&Option<mpd::SegmentBase>; 3],
) -> Result<(Option<Resource>, Vec<Segment>), ManifestError> {
    if templates.iter().any(|t| t.is_some()) {
        let t = &templates;
        let media = inherit(t, |s| s.media.clone())
            .ok_or_else(|| ManifestError("SegmentTemplate without media".into()))?;
        let template = Template {
            media,
            initialization: inherit(t, |s| {
                s.initialization.clone().or(s.Initialization.as_ref().and_then(|i| i.sourceURL.clone()))
            }),
            timescale: inherit(t, |s| s.timescale).unwrap_or(1),
            start_number: inherit(t, |s| s.startNumber).unwrap_or(1),
            duration: inherit(t, |s| s.duration),
            presentation_time_offset: inherit(t, |s| s.presentationTimeOffset).unwrap_or(0),
            timeline: inherit(t, |s| s.SegmentTimeline.as_ref().map(|tl| tl.segments.clone())),
        };
        return template_segments(rep, &template);
    }
    if lists.iter().any(|l| l.is_some()) {
        let l = &lists;
        let urls =
            inherit(l, |s| if s.segment_urls.is_empty() { None } else { Some(s.segment_urls.clone()) })
                .unwrap_or_default();
        let timescale = inherit(l, |s| s.timescale).unwrap_or(1);
        let times: Vec<(u64, u64)> =
            match inherit(l, |s| s.SegmentTimeline.as_ref().map(|t| t.segments.clone())) {
                Some(timeline) => timeline_times(&timeline, None)?,
                None => {
                    let d = inherit(l, |s| s.duration).unwrap_or(0);
                    (0..urls.len() as u64).map(|i| (i * d, d)).collect()
                }
            };
        let init = match inherit(l, |s| s.Initialization.clone()) {
            Some(i) => Some(initialization_resource(&rep.base, &i)?),
            None => None,
        };
        let mut segments = Vec::with_capacity(urls.len());
        for (i, u) in urls.iter().enumerate() {
            let url = match &u.media {
                Some(m) => join(&rep.base, m)?,
                None => rep.base.clone(),
            };
            let range = u.mediaRange.as_deref().map(parse_range).transpose()?;
            let (t, d) = times.get(i).copied().unwrap_or((0, 0));
            segments.push(Segment {
                resource: Resource { url: url.to_string(), range },
                start: rep.period_start + t as f64 / timescale as f64,
                duration: d as f64 / timescale as f64,
            });
        }
        if segments.is_empty() {
            return bad(format!("representation {}: SegmentList without SegmentURL", rep.id));
        }
        return Ok((init, segments));
    }
    // SegmentBase (or nothing): the BaseURL is one segment, the whole of the representation. A
    // player would read the `sidx` and ask for ranges; the bytes moved are the same.
    let init = match inherit(&bases, |s| s.Initialization.clone()) {
        Some(i) => Some(initialization_resource(&rep.base, &i)?),
        None => None,
    };
    Ok((
        init,
        vec![Segment {
            resource: Resource::whole(&rep.base),
            start: rep.period_start,
            duration: rep.period_length.unwrap_or(0.0),
        }],
    ))
}

fn initialization_resource(base: &Url, init: &mpd::Initialization) -> Result<Resource, ManifestError> {
    let url = match &init.sourceURL {
        Some(s) => join(base, s)?,
        None => base.clone(),
    };
    Ok(Resource { url: url.to_string(), range: init.range.as_deref().map(parse_range).transpose()? })
}

/// Parses `first-last` (a DASH byte range).
fn parse_range(text: &str) -> Result<(u64, u64), ManifestError> {
    let parsed =
        text.split_once('-').and_then(|(a, b)| Some((a.trim().parse().ok()?, b.trim().parse().ok()?)));
    match parsed {
        Some((a, b)) if a <= b => Ok((a, b)),
        _ => bad(format!("invalid byte range `{text}`")),
    }
}

/// A `SegmentTemplate` with inheritance resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    /// The media URL template.
    pub media: String,
    /// The init segment's URL template.
    pub initialization: Option<String>,
    /// Ticks per second.
    pub timescale: u64,
    /// `$Number$` of the first segment.
    pub start_number: u64,
    /// Fixed segment duration in ticks, when there is no timeline.
    pub duration: Option<f64>,
    /// Media time, in ticks, at the period's start.
    pub presentation_time_offset: u64,
    /// The `SegmentTimeline`'s `S` elements.
    pub timeline: Option<Vec<mpd::S>>,
}

fn template_segments(
    rep: &RepContext,
    t: &Template,
) -> Result<(Option<Resource>, Vec<Segment>), ManifestError> {
    if t.timescale == 0 {
        return bad("SegmentTemplate timescale 0");
    }
    let scale = t.timescale as f64;
    let period_ticks = rep.period_length.map(|l| (l * scale).round() as u64);
    let times: Vec<(u64, u64)> = match &t.timeline {
        Some(timeline) => timeline_times(timeline, period_ticks.map(|p| p + t.presentation_time_offset))?,
        None => {
            let Some(d) = t.duration.filter(|d| *d > 0.0) else {
                return bad(format!(
                    "representation {}: SegmentTemplate with neither SegmentTimeline nor duration",
                    rep.id
                ));
            };
            let Some(length) = rep.period_length else {
                return bad("SegmentTemplate@duration in a period of unknown length");
            };
            let count = ((length * scale) / d).ceil() as u64;
            if count > MAX_SEGMENTS {
                return bad(format!("more than {MAX_SEGMENTS} segments"));
            }
            (0..count)
                .map(|i| {
                    let start = (i as f64 * d).round() as u64;
                    (t.presentation_time_offset + start, (((i + 1) as f64 * d).round() as u64) - start)
                })
                .collect()
        }
    };
    let init = match &t.initialization {
        Some(i) => {
            Some(Resource::whole(&join(&rep.base, &expand_template(i, &rep.id, rep.bandwidth, 0, 0)?)?))
        }
        None => None,
    };
    let mut segments = Vec::with_capacity(times.len());
    for (i, (time, d)) in times.into_iter().enumerate() {
        let number = t.start_number + i as u64;
        let url = join(&rep.base, &expand_template(&t.media, &rep.id, rep.bandwidth, number, time)?)?;
        segments.push(Segment {
            resource: Resource::whole(&url),
            start: rep.period_start + time.saturating_sub(t.presentation_time_offset) as f64 / scale,
            duration: d as f64 / scale,
        });
    }
    if segments.is_empty() {
        return bad(format!("representation {} has no segment", rep.id));
    }
    Ok((init, segments))
}

/// Most segments one representation may expand to (a day of 1 s segments, twice over): bounds
/// what a hostile or broken `r` or `duration` can make the generator allocate.
pub const MAX_SEGMENTS: u64 = 200_000;

/// Expands a `SegmentTimeline` into `(time, duration)` pairs in ticks: `t` sets the time (else
/// it continues from the previous segment's end), `r` repeats a segment `r` more times, and a
/// negative `r` repeats it up to the next `S`'s `t` or, for the last, up to `end` (the period's
/// end in ticks).
pub fn timeline_times(timeline: &[mpd::S], end: Option<u64>) -> Result<Vec<(u64, u64)>, ManifestError> {
    let mut out = Vec::new();
    let mut time = 0u64;
    for (i, s) in timeline.iter().enumerate() {
        if let Some(t) = s.t {
            time = t;
        }
        if s.d == 0 {
            return bad("SegmentTimeline S with d=0");
        }
        let repeats = match s.r {
            None => 0,
            Some(r) if r >= 0 => r as u64,
            Some(_) => {
                let until = match timeline.get(i + 1).and_then(|n| n.t) {
                    Some(t) => t,
                    None => end.ok_or_else(|| {
                        ManifestError("SegmentTimeline r=-1 in a period of unknown length".into())
                    })?,
                };
                until.saturating_sub(time).div_ceil(s.d).saturating_sub(1)
            }
        };
        if out.len() as u64 + repeats + 1 > MAX_SEGMENTS {
            return bad(format!("more than {MAX_SEGMENTS} segments"));
        }
        for _ in 0..=repeats {
            out.push((time, s.d));
            time += s.d;
        }
    }
    Ok(out)
}

/// Substitutes `$RepresentationID$`, `$Bandwidth$`, `$Number$` and `$Time$` (each optionally
/// with a `%0Nd` width) and `$$` in a DASH URL template.
pub fn expand_template(
    template: &str,
    id: &str,
    bandwidth: u64,
    number: u64,
    time: u64,
) -> Result<String, ManifestError> {
    let mut out = String::with_capacity(template.len() + 16);
    let mut rest = template;
    while let Some(open) = rest.find('$') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('$').ok_or_else(|| ManifestError(format!("unclosed `$` in `{template}`")))?;
        let token = &after[..close];
        rest = &after[close + 1..];
        if token.is_empty() {
            out.push('$');
            continue;
        }
        let (name, format) = match token.split_once('%') {
            Some((n, f)) => (n, Some(f)),
            None => (token, None),
        };
        let value = match name {
            "RepresentationID" if format.is_none() => {
                out.push_str(id);
                continue;
            }
            "Number" => number,
            "Time" => time,
            "Bandwidth" => bandwidth,
            _ => return bad(format!("unknown identifier `${token}$` in `{template}`")),
        };
        match format {
            None => out.push_str(&value.to_string()),
            Some(f) => {
                let width = f
                    .strip_prefix('0')
                    .and_then(|w| w.strip_suffix('d'))
                    .and_then(|w| w.parse::<usize>().ok())
                    .filter(|w| *w <= 32)
                    .ok_or_else(|| ManifestError(format!("unsupported format `%{f}` in `{template}`")))?;
                out.push_str(&format!("{value:0width$}"));
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// The fuzz property: arbitrary bytes read as an HLS playlist (master, then each of its tracks
/// filled from the same bytes) or as an MPD never panic, and whatever comes out has bounded,
/// finite media times and absolute `http` URLs.
pub fn fuzz_manifest(data: &[u8]) {
    let Ok(url) = Url::parse("http://127.0.0.1:8080/a/b.mp4/master.m3u8") else { return };
    let check = |p: &Presentation| {
        for t in p.renditions.iter().chain(&p.audio) {
            assert!(check_times(t).is_ok(), "{t:?}");
            for r in t.segments.iter().map(|s| &s.resource).chain(t.init.as_ref()) {
                assert!(Url::parse(&r.url).is_ok(), "{r:?}");
                assert!(r.range.is_none_or(|(a, b)| a <= b), "{r:?}");
            }
        }
    };
    match parse_hls(&url, data) {
        Ok(HlsPlaylist::Master(mut p)) => {
            for t in p.renditions.iter_mut().chain(p.audio.iter_mut()) {
                let _ = fill_hls_track(t, data);
            }
            check(&p);
        }
        Ok(HlsPlaylist::Media(t)) => check(&Presentation {
            protocol: Protocol::Hls,
            manifest: url.to_string(),
            renditions: vec![t],
            audio: vec![],
        }),
        Err(_) => {}
    }
    if let Ok(p) = parse_dash(&url, &String::from_utf8_lossy(data)) {
        check(&p);
    }
}

#[cfg(test)]
mod tests;
