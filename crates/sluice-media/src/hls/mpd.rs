//! The DASH manifest (MPD) of one packaged file or of a rendition set: the same per-track CMAF
//! segments the HLS playlists point at, described for DASH players (dash.js, Shaka, ExoPlayer).
//!
//! This module owns the MPD's text: a static presentation (`type="static"`, ISO BMFF live
//! profile, which is the profile of `SegmentTemplate` addressing), a video `AdaptationSet` per
//! codec family and colour (an AV1 ladder beside an H.264 one: a player picks the set it can
//! decode, and switches only within it) with a `Representation` per rendition and the colour as
//! `urn:mpeg:mpegB:cicp` properties (and a backward-compatible Dolby Vision stream's own codec
//! string as `scte214:supplementalCodecs`), one audio `AdaptationSet` (the first rendition that has
//! audio; Dolby audio with its `urn:dolby` channel configuration), a text `AdaptationSet` per
//! WebVTT sidecar (its cues as a `wvtt` CMAF track, see [`super::wvtt`], cut at the first
//! rendition's segment times). Every `Representation` has a
//! `SegmentTemplate` with `$Number$` from 0 (the numbers of `video-seg-N.m4s`) and a
//! `SegmentTimeline` whose times are the sample tables' own decode times, so a player's idea of
//! where a segment starts is exact. It is written by a small writer here (the structure is
//! fixed and small; values are escaped); the tests parse it back. It does not cut segments
//! ([`super::index`]) or answer requests.

use std::fmt::Write;
use std::time::SystemTime;

use sluice_proto::markup::escape;

use super::iframes::{fragment_name, KeyFrames};
use super::index::{Packaged, SegmentIndex};
use super::playlist::{text_init_name, text_segment_name, track_init_name, Subtitle};
use super::wvtt;
use crate::codec::Colour;
use crate::mp4::{Mp4File, TrackKind};

/// One packaged file of an MPD: what [`super::playlist::Rendition`] is, with its sample tables
/// (the audio timeline is read from them).
#[derive(Debug, Clone, Copy)]
pub struct MpdRendition<'a> {
    /// Where its segments are relative to the manifest (`""`, or `"../film.720p.mp4/"`).
    pub prefix: &'a str,
    /// Its segments.
    pub index: &'a SegmentIndex,
    /// Its sample tables.
    pub file: &'a Mp4File,
}

/// The namespace of SCTE 214-1's MPD extensions (`supplementalCodecs`, `supplementalProfiles`).
const SCTE214_NAMESPACE: &str = "urn:scte:dash:scte214-extensions";

/// The `bandwidth` of a text track: a nominal rate, as a film's subtitles take some 100 bits a
/// second and players do not choose a text track by its rate.
const TEXT_BANDWIDTH: u32 = 256;

/// What makes a live stream's MPD dynamic (ISO/IEC 23009-1 §5.3.1, DASH-IF IOP §4): its
/// segments' times count from `availability_start`, the window's first segment is number
/// `first_sequence`, and the player fetches it again every `update` seconds.
#[derive(Debug, Clone, Copy)]
pub struct LiveTimeline {
    /// The wall-clock time of media time 0 (`availabilityStartTime`).
    pub availability_start: SystemTime,
    /// When this manifest was made (`publishTime`, and the clock the player syncs to).
    pub publish: SystemTime,
    /// The number of the window's first segment (`startNumber`).
    pub first_sequence: u64,
    /// How far back the window reaches, in seconds (`timeShiftBufferDepth`).
    pub window: f64,
    /// How often to fetch the manifest again, in seconds (`minimumUpdatePeriod`).
    pub update: f64,
    /// Whether the stream ended: the manifest is then static, its window the whole of it
    /// (ISO/IEC 23009-1 §5.4: a dynamic presentation may become static).
    pub ended: bool,
}

/// The MPD of `renditions` (video from each, audio from the first that has it) and `subtitles`.
pub fn manifest(renditions: &[MpdRendition<'_>], subtitles: &[Subtitle<'_>]) -> String {
    write_manifest(renditions, subtitles, None)
}

/// The dynamic MPD of a live stream: `rendition`'s index is cut where the live segments are,
/// and lists the window `live` describes.
pub fn live_manifest(rendition: &MpdRendition<'_>, live: &LiveTimeline) -> String {
    write_manifest(std::slice::from_ref(rendition), &[], Some(live))
}

/// One Period of a span's MPD: segments `segments` of one recording file, played from `start`
/// seconds into the presentation.
#[derive(Debug, Clone)]
pub struct MpdPeriod<'a> {
    /// The file, its resources' prefix absolute (`/recordings/live/cam1/F.mp4/`).
    pub rendition: MpdRendition<'a>,
    /// Which of its segments the span takes.
    pub segments: std::ops::Range<usize>,
    /// Where in the presentation the period starts, in seconds.
    pub start: f64,
}

impl MpdPeriod<'_> {
    /// How long the period lasts, in seconds: its segments' span of the main track.
    pub fn duration(&self) -> f64 {
        let index = self.rendition.index;
        let ticks =
            index.start_ticks(self.segments.end).saturating_sub(index.start_ticks(self.segments.start));
        ticks as f64 / f64::from(index.timescale().max(1))
    }
}

/// The static MPD of a span of recordings: a Period per file (ISO/IEC 23009-1 §5.3.2,
/// multi-period), each listing the segments of that file the span takes, with its own init
/// segments; a player crosses from one to the next as from one ad break to the programme.
pub fn span_manifest(periods: &[MpdPeriod<'_>]) -> String {
    let duration = periods.last().map_or(0.0, |p| p.start + p.duration());
    let longest = periods
        .iter()
        .flat_map(|p| p.segments.clone().map(|n| p.rendition.index.segment_duration(n)))
        .fold(1.0, f64::max);
    let mut out = String::with_capacity(2048 * periods.len().max(1));
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" profiles=\"urn:mpeg:dash:profile:isoff-live:2011\" \
         type=\"static\" mediaPresentationDuration=\"{}\" minBufferTime=\"{}\">",
        iso_duration(duration),
        iso_duration(longest.ceil())
    );
    for (i, period) in periods.iter().enumerate() {
        let _ = writeln!(
            out,
            " <Period id=\"{i}\" start=\"{}\" duration=\"{}\">",
            iso_duration_nearest(period.start),
            iso_duration_nearest(period.duration())
        );
        let cut = Cut::Span(period.segments.clone());
        write_sets(&mut out, std::slice::from_ref(&period.rendition), &[], &cut);
        out.push_str(" </Period>\n");
    }
    out.push_str("</MPD>\n");
    out
}

/// Which segments of a rendition's index an MPD lists.
#[derive(Debug, Clone)]
enum Cut<'a> {
    /// All, from number 0 at time 0: a file's presentation.
    Whole,
    /// A live stream's window.
    Live(&'a LiveTimeline),
    /// These, in a Period of their own: a span of a recording.
    Span(std::ops::Range<usize>),
}

/// `manifest` (a static MPD [`manifest`] wrote) as a dynamic one whose media time 0 is at
/// `availability_start`: a file still being recorded, fetched again every `update` seconds
/// for the segments added since (ISO/IEC 23009-1 §5.4; it turns static when the file is done).
pub fn as_dynamic(manifest: &str, availability_start: SystemTime, update: f64) -> String {
    let Some(at) = manifest.find("type=\"static\" mediaPresentationDuration=\"") else {
        return manifest.to_string();
    };
    let Some(end) = manifest[at..].find("\" minBufferTime").map(|e| at + e + 1) else {
        return manifest.to_string();
    };
    let dynamic = format!(
        "type=\"dynamic\" availabilityStartTime=\"{}\" publishTime=\"{}\" minimumUpdatePeriod=\"{}\"",
        iso_date_time(availability_start),
        iso_date_time(SystemTime::now()),
        iso_duration(update)
    );
    format!("{}{dynamic}{}", &manifest[..at], &manifest[end..])
}

/// An `xs:dateTime` in UTC, to the millisecond.
fn iso_date_time(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn write_manifest(
    renditions: &[MpdRendition<'_>],
    subtitles: &[Subtitle<'_>],
    live: Option<&LiveTimeline>,
) -> String {
    let duration = renditions.iter().map(|r| r.index.presented_duration(r.file)).fold(0.0, f64::max);
    let longest = renditions
        .iter()
        .flat_map(|r| (0..r.index.segments()).map(|n| r.index.segment_duration(n)))
        .fold(1.0, f64::max);
    let mut out = String::with_capacity(4096);
    out.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    // The SCTE 214 namespace, for Dolby Vision's supplemental codecs, where a rendition has them.
    let scte214 = if renditions.iter().any(|r| r.index.supplemental_codecs().is_some()) {
        format!(" xmlns:scte214=\"{SCTE214_NAMESPACE}\"")
    } else {
        String::new()
    };
    let presentation = match live {
        Some(l) if l.ended => format!(
            "type=\"static\" availabilityStartTime=\"{}\" mediaPresentationDuration=\"{}\"",
            iso_date_time(l.availability_start),
            iso_duration(duration)
        ),
        None => format!("type=\"static\" mediaPresentationDuration=\"{}\"", iso_duration(duration)),
        Some(l) => format!(
            "type=\"dynamic\" availabilityStartTime=\"{}\" publishTime=\"{}\" minimumUpdatePeriod=\"{}\" \
             timeShiftBufferDepth=\"{}\" suggestedPresentationDelay=\"{}\"",
            iso_date_time(l.availability_start),
            iso_date_time(l.publish),
            iso_duration(l.update),
            iso_duration(l.window),
            // Three segments behind the live edge, as HLS players start (RFC 8216 §6.3.3).
            iso_duration(3.0 * longest.ceil())
        ),
    };
    let _ = writeln!(
        out,
        "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\"{scte214} profiles=\"urn:mpeg:dash:profile:isoff-live:2011\" \
         {presentation} minBufferTime=\"{}\">",
        iso_duration(longest.ceil())
    );
    let _ = writeln!(out, " <Period id=\"0\" start=\"PT0S\">");
    let cut = live.map_or(Cut::Whole, Cut::Live);
    write_sets(&mut out, renditions, subtitles, &cut);
    out.push_str(" </Period>\n");
    if let Some(l) = live.filter(|l| !l.ended) {
        // The server's clock in the manifest itself, so a player needs no time server to find
        // the live edge (DASH-IF IOP §4.7).
        let _ = writeln!(
            out,
            " <UTCTiming schemeIdUri=\"urn:mpeg:dash:utc:direct:2014\" value=\"{}\"/>",
            iso_date_time(l.publish)
        );
    }
    out.push_str("</MPD>\n");
    out
}

/// A Period's adaptation sets: the video sets, the audio, the subtitles and (a file's whole
/// H.264 presentation) the trick-mode set, each track's segments as `cut` says.
fn write_sets(out: &mut String, renditions: &[MpdRendition<'_>], subtitles: &[Subtitle<'_>], cut: &Cut<'_>) {
    let videos: Vec<&MpdRendition<'_>> = renditions.iter().filter(|r| r.index.has(Packaged::Video)).collect();
    let mut set_id = 0;
    let sets = video_sets(&videos);
    for (key, members) in &sets {
        let in_set = || members.iter().map(|&i| videos[i]);
        let max_width = in_set().filter_map(|r| r.index.resolution()).map(|(w, _)| w).max().unwrap_or(0);
        let max_height = in_set().filter_map(|r| r.index.resolution()).map(|(_, h)| h).max().unwrap_or(0);
        let _ = writeln!(
            out,
            "  <AdaptationSet id=\"{set_id}\" contentType=\"video\" mimeType=\"video/mp4\" \
             segmentAlignment=\"true\" startWithSAP=\"1\" maxWidth=\"{max_width}\" maxHeight=\"{max_height}\">"
        );
        set_id += 1;
        colour_properties(out, key.1);
        for &i in members {
            let r = videos[i];
            let index = r.index;
            let _ = write!(
                out,
                "   <Representation id=\"video{i}\" bandwidth=\"{}\" codecs=\"{}\"",
                index.track_peak_bandwidth(Packaged::Video),
                escape(index.track_codecs(Packaged::Video).unwrap_or_default())
            );
            // DASH-IF IOP 6 (ETSI TS 103 285 §11.4): a backward-compatible Dolby Vision stream is
            // its base codec in `codecs`, and its own string and brand as SCTE 214's supplements.
            if let Some((codec, brand)) = index.supplemental_codecs().and_then(|s| s.split_once('/')) {
                let _ = write!(
                    out,
                    " scte214:supplementalCodecs=\"{}\" scte214:supplementalProfiles=\"{}\"",
                    escape(codec),
                    escape(brand)
                );
            }
            if let Some((w, h)) = index.resolution() {
                let _ = write!(out, " width=\"{w}\" height=\"{h}\" sar=\"1:1\"");
            }
            if let Some(rate) = index.frame_rate() {
                let _ = write!(out, " frameRate=\"{}\"", frame_rate(rate));
            }
            out.push_str(">\n");
            template(out, r, Packaged::Video, cut);
            out.push_str("   </Representation>\n");
        }
        out.push_str("  </AdaptationSet>\n");
    }
    if let Some(r) = renditions.iter().find(|r| r.index.has(Packaged::Audio)) {
        let (rate, channels, dolby) = r
            .index
            .tracks(r.file)
            .find_map(|(t, w)| match (&t.kind, w) {
                (TrackKind::Aac(a), Packaged::Audio) => Some((a.sample_rate, a.channels, None)),
                (TrackKind::Audio(a), Packaged::Audio) => {
                    Some((a.sample_rate, a.channels, a.dolby_channel_configuration()))
                }
                _ => None,
            })
            .unwrap_or((48_000, 2, None));
        let _ = writeln!(
            out,
            "  <AdaptationSet id=\"{set_id}\" contentType=\"audio\" mimeType=\"audio/mp4\" lang=\"und\" \
             segmentAlignment=\"true\" startWithSAP=\"1\">"
        );
        set_id += 1;
        let _ = writeln!(
            out,
            "   <Representation id=\"audio0\" bandwidth=\"{}\" codecs=\"{}\" audioSamplingRate=\"{rate}\">",
            r.index.track_peak_bandwidth(Packaged::Audio),
            escape(r.index.track_codecs(Packaged::Audio).unwrap_or_default())
        );
        match dolby {
            // ETSI TS 102 366 Annex I and DASH-IF IOP §9.2.1.2: Dolby audio names its channels
            // with its own scheme, a 16-bit channel mask.
            Some(mask) => {
                let _ = writeln!(
                    out,
                    "    <AudioChannelConfiguration schemeIdUri=\"urn:dolby:dash:audio_channel_configuration:2011\" value=\"{mask}\"/>"
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "    <AudioChannelConfiguration schemeIdUri=\"urn:mpeg:dash:23003:3:audio_channel_configuration:2011\" value=\"{channels}\"/>"
                );
            }
        }
        template(out, r, Packaged::Audio, cut);
        out.push_str("   </Representation>\n  </AdaptationSet>\n");
    }
    // The subtitles follow the first rendition's segments (a set's renditions all line up), as
    // a text track of their own served beside the manifest.
    let text_times: Vec<u64> = renditions
        .first()
        .map(|r| (0..=r.index.segments()).map(|n| r.index.start_ms(n)).collect())
        .unwrap_or_default();
    for sub in subtitles {
        let language = escape(sub.language);
        let _ = writeln!(
            out,
            "  <AdaptationSet id=\"{set_id}\" contentType=\"text\" mimeType=\"application/mp4\" codecs=\"wvtt\" \
             lang=\"{language}\" segmentAlignment=\"true\" startWithSAP=\"1\">\n   \
             <Role schemeIdUri=\"urn:mpeg:dash:role:2011\" value=\"subtitle\"/>\n   \
             <Representation id=\"subtitles-{language}\" bandwidth=\"{TEXT_BANDWIDTH}\">"
        );
        let init = escape(&text_init_name(sub.language));
        let media = escape(&text_segment_name(sub.language, "$Number$"));
        write_template(out, wvtt::TIMESCALE, &init, &media, &text_times, (0, None));
        out.push_str("   </Representation>\n  </AdaptationSet>\n");
        set_id += 1;
    }
    // The keyframes of the video set (id 0) as its trick-mode set, for H.264 ladders: with an
    // HEVC title ffmpeg's DASH reader (no EssentialProperty support) took the trick-mode set's
    // stream for the video (27 of 50 frames read), so other codecs keep to the HLS I-frame
    // playlists until a reader here plays them right.
    let h264_only =
        videos.iter().all(|r| r.index.track_codecs(Packaged::Video).is_some_and(|c| c.starts_with("avc1")));
    if !videos.is_empty() && h264_only && matches!(cut, Cut::Whole) {
        let trick: Vec<_> = renditions.iter().map(|r| (escape(r.prefix), r.index, r.file)).collect();
        trick_mode_set(out, &trick, 0, set_id);
    }
}

/// What a video adaptation set's renditions share: the codec family and the colour.
type SetKey = (String, Option<Colour>);

/// The video renditions grouped into adaptation sets, in order of first appearance: by codec
/// family (the codec string's sample entry type, `avc1`, `hvc1`, `av01`) and colour, as DASH-IF
/// IOP §3.2.13 asks (Representations of one set are seamlessly switchable).
fn video_sets(videos: &[&MpdRendition<'_>]) -> Vec<(SetKey, Vec<usize>)> {
    let mut sets: Vec<(SetKey, Vec<usize>)> = Vec::new();
    for (i, r) in videos.iter().enumerate() {
        let codecs = r.index.track_codecs(Packaged::Video).unwrap_or_default();
        let family = codecs.split('.').next().unwrap_or_default().to_string();
        let colour = r.index.tracks(r.file).find_map(|(t, _)| match &t.kind {
            TrackKind::Video(v) => v.colour.filter(Colour::is_specified),
            _ => None,
        });
        let key = (family, colour);
        match sets.iter_mut().find(|(k, _)| *k == key) {
            Some((_, members)) => members.push(i),
            None => sets.push((key, vec![i])),
        }
    }
    sets
}

/// The colour of a video adaptation set as coding-independent code points (ISO/IEC 23001-8,
/// DASH-IF IOP §6.2.5): essential, so a player that cannot present them skips the set, but for
/// an HLG transfer, which an SDR display shows acceptably (supplemental).
fn colour_properties(out: &mut String, colour: Option<Colour>) {
    let Some(c) = colour else { return };
    for (name, value) in [
        ("ColourPrimaries", c.primaries),
        ("TransferCharacteristics", c.transfer),
        ("MatrixCoefficients", c.matrix),
    ] {
        let element = if name == "TransferCharacteristics" && value == 18 {
            "SupplementalProperty"
        } else {
            "EssentialProperty"
        };
        let _ = writeln!(out, "   <{element} schemeIdUri=\"urn:mpeg:mpegB:cicp:{name}\" value=\"{value}\"/>");
    }
}

/// The `SegmentTemplate` and `SegmentTimeline` of one track of a rendition.
fn template(out: &mut String, r: &MpdRendition<'_>, which: Packaged, cut: &Cut<'_>) {
    let Some((timescale, times)) = r.index.track_times(r.file, which) else { return };
    let prefix = escape(r.prefix);
    let init = format!("{prefix}{}", track_init_name(which));
    let media = format!("{prefix}{}-seg-$Number$.m4s", which.name());
    match cut {
        Cut::Whole => write_template(out, timescale, &init, &media, &times, (0, None)),
        Cut::Live(l) => {
            // An ended live stream's static manifest presents its window from 0.
            let offset = l.ended.then(|| times.first().copied()).flatten();
            write_template(out, timescale, &init, &media, &times, (l.first_sequence, offset))
        }
        // A span's period starts where its first segment does on the main track's timeline,
        // the same instant in every track's own ticks (so audio keeps its place beside video).
        Cut::Span(segments) => {
            let Some(times) = times.get(segments.start..=segments.end) else { return };
            let origin = r.index.presented_start(r.file, segments.start);
            let offset = Some((origin * f64::from(timescale)).round() as u64);
            write_template(out, timescale, &init, &media, times, (segments.start as u64, offset))
        }
    }
}

/// A `SegmentTemplate` (`$Number$` from `start_number`, media time `presentation_offset` at the
/// period's start when given) with its `SegmentTimeline`: `t` of the first
/// segment, then each segment's duration (`r` repeats equal ones); `times` are where each
/// segment starts, then where the last ends, in `timescale` ticks. `init` and `media` are
/// escaped already.
pub(super) fn write_template(
    out: &mut String,
    timescale: u32,
    init: &str,
    media: &str,
    times: &[u64],
    (start_number, presentation_offset): (u64, Option<u64>),
) {
    let segments = times.len().saturating_sub(1);
    let offset = presentation_offset.map_or(String::new(), |t| format!("presentationTimeOffset=\"{t}\" "));
    let _ = writeln!(
        out,
        "    <SegmentTemplate {offset}timescale=\"{timescale}\" startNumber=\"{start_number}\" initialization=\"{init}\" media=\"{media}\">\n     <SegmentTimeline>",
    );
    let mut n = 0;
    while n < segments {
        let d = times[n + 1].saturating_sub(times[n]);
        let mut repeat = 0;
        while n + repeat + 1 < segments && times[n + repeat + 2].saturating_sub(times[n + repeat + 1]) == d {
            repeat += 1;
        }
        let _ = write!(out, "      <S");
        if n == 0 {
            let _ = write!(out, " t=\"{}\"", times[0]);
        }
        let _ = write!(out, " d=\"{d}\"");
        if repeat > 0 {
            let _ = write!(out, " r=\"{repeat}\"");
        }
        out.push_str("/>\n");
        n += repeat + 1;
    }
    out.push_str("     </SegmentTimeline>\n    </SegmentTemplate>\n");
}

/// One rendition of an MPD's trick-mode set: where its resources are (escaped for XML already,
/// as the MPD writes it), its segments and its sample tables.
type TrickRendition<'a> = (String, &'a SegmentIndex, &'a Mp4File);

/// DASH's trick-mode `AdaptationSet` (id `set_id`) for the main video set `main_set`: a
/// `Representation` of keyframe fragments per rendition with video, each decoding with its
/// rendition's video init segment. Nothing without video.
fn trick_mode_set(out: &mut String, renditions: &[TrickRendition<'_>], main_set: u32, set_id: u32) {
    let with_keyframes: Vec<(&TrickRendition<'_>, KeyFrames<'_>)> =
        renditions.iter().filter_map(|r| KeyFrames::of(r.2, r.1).map(|k| (r, k))).collect();
    if with_keyframes.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "  <AdaptationSet id=\"{set_id}\" contentType=\"video\" mimeType=\"video/mp4\" segmentAlignment=\"true\" startWithSAP=\"1\">\n   \
         <EssentialProperty schemeIdUri=\"http://dashif.org/guidelines/trickmode\" value=\"{main_set}\"/>"
    );
    for (i, ((prefix, index, _), keyframes)) in with_keyframes.iter().enumerate() {
        let (peak, _) = keyframes.bandwidth();
        // maxPlayoutRate: how much faster than real time the keyframes alone play at the
        // video's frame rate, the frames in a keyframe's span on average.
        let frames = index.frame_rate().unwrap_or(1.0) * index.duration();
        let rate = (frames / keyframes.len() as f64).round().max(1.0);
        let _ = write!(
            out,
            "   <Representation id=\"video{i}-trick\" bandwidth=\"{peak}\" codecs=\"{}\" maxPlayoutRate=\"{rate}\" codingDependency=\"false\"",
            index.track_codecs(Packaged::Video).unwrap_or_default()
        );
        if let Some((w, h)) = index.resolution() {
            let _ = write!(out, " width=\"{w}\" height=\"{h}\" sar=\"1:1\"");
        }
        out.push_str(">\n");
        let init = format!("{prefix}{}", track_init_name(Packaged::Video));
        let media = format!("{prefix}{}", fragment_name("$Number$"));
        write_template(out, keyframes.timescale(), &init, &media, keyframes.boundaries(), (0, None));
        out.push_str("   </Representation>\n");
    }
    out.push_str("  </AdaptationSet>\n");
}

/// An `xs:duration` in seconds, to the nearest millisecond: where a Period starts and how long
/// it lasts, which must add up between periods.
fn iso_duration_nearest(secs: f64) -> String {
    let millis = (secs * 1000.0).round().max(0.0) as u64;
    format!("PT{}.{:03}S", millis / 1000, millis % 1000)
}

/// An `xs:duration` in seconds, rounded up to the millisecond: a presentation's duration must
/// reach its media's end. Rounded to the nearest, a clip whose audio ends at 2.005333 s said
/// 2.005 s, and dash.js, finding the playhead past the MPD's end before the element's own
/// `ended`, sought back and paused there (seen in Chromium about one play in ten).
fn iso_duration(secs: f64) -> String {
    // Less a nanosecond first, so that a whole number of milliseconds in binary (6.000000000001)
    // stays itself.
    let millis = (secs * 1000.0 - 1e-6).ceil().max(0.0) as u64;
    format!("PT{}.{:03}S", millis / 1000, millis % 1000)
}

/// A frame rate as DASH writes it: an integer, or a ratio (`30000/1001`).
fn frame_rate(rate: f64) -> String {
    if (rate - rate.round()).abs() < 0.001 {
        format!("{}", rate.round() as u64)
    } else {
        format!("{}/1000", (rate * 1000.0).round() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn demo() -> Mp4File {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
        Mp4File::from_bytes(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn demo_manifest_has_exact_timelines() {
        let file = demo();
        let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
        let mpd = manifest(
            &[MpdRendition { prefix: "", index: &index, file: &file }],
            &[Subtitle { language: "en" }, Subtitle { language: "pt-BR" }],
        );
        for part in [
            "type=\"static\"",
            // To the audio's end (its 6 s after the 1024 priming samples, 288768 at 48 kHz),
            // past the video's 6 s.
            "mediaPresentationDuration=\"PT6.016S\"",
            "minBufferTime=\"PT2.000S\"",
            "codecs=\"avc1.4d401e\"",
            "codecs=\"mp4a.40.2\"",
            "width=\"640\" height=\"360\"",
            "frameRate=\"30\"",
            "media=\"video-seg-$Number$.m4s\"",
            "initialization=\"audio-init.mp4\"",
            "startNumber=\"0\"",
            // Three video segments of 2 s at 15360 ticks a second.
            "<S t=\"0\" d=\"30720\" r=\"2\"/>",
            // The subtitles: a wvtt track per language, on the video's cuts in milliseconds.
            "contentType=\"text\" mimeType=\"application/mp4\" codecs=\"wvtt\" lang=\"en\"",
            "<Role schemeIdUri=\"urn:mpeg:dash:role:2011\" value=\"subtitle\"/>",
            "initialization=\"subtitles-en-init.mp4\" media=\"subtitles-en-seg-$Number$.m4s\"",
            "timescale=\"1000\" startNumber=\"0\" initialization=\"subtitles-pt-BR-init.mp4\"",
            "<S t=\"0\" d=\"2000\" r=\"2\"/>",
        ] {
            assert!(mpd.contains(part), "{part} in {mpd}");
        }
        assert!(!mpd.contains("BaseURL") && !mpd.contains("text/vtt"), "{mpd}");
    }

    #[test]
    fn values_are_escaped_and_rates_written_as_dash_does() {
        assert_eq!(escape("a&b<\"c\">"), "a&amp;b&lt;&quot;c&quot;&gt;");
        assert_eq!(frame_rate(30.0), "30");
        assert_eq!(frame_rate(29.97003), "29970/1000");
        // Up to the millisecond, so the presentation reaches its media's end; whole ones stay.
        assert_eq!(iso_duration(6.0061), "PT6.007S");
        assert_eq!(iso_duration(2.005333), "PT2.006S");
        assert_eq!(
            (iso_duration(6.0), iso_duration(0.1 + 0.2), iso_duration(-1.0)),
            ("PT6.000S".into(), "PT0.300S".into(), "PT0.000S".into())
        );
    }
}
