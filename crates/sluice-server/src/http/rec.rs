//! Spans of recordings over HTTP: `/rec/<live path>/index.m3u8?start=RFC3339&duration=D` (HLS),
//! `…/manifest.mpd` (DASH) and `…/clip.mp4` (one MP4) of whatever the recordings of that live
//! path hold from `start` for `D` (`90s`, `5m`; to the end of the recordings when left out),
//! across as many recording files as the span covers, seekable.
//!
//! - The playlist lists each file's own segments with its own init segment, a discontinuity only
//!   where the timestamps do not follow on (a new publish).
//! - The MPD has a Period per file (ISO/IEC 23009-1 multi-period), each its file's segments.
//! - The MP4 is a progressive file of the span from its keyframe at or before `start`: the files'
//!   sample tables joined (`sluice_media::mp4::join`) and clipped as one file's are, its sample
//!   data sent from the recording files themselves (sendfile, splice or copy), or in an object
//!   store's library from the cached slices of the recording objects.
//!
//! A span is guarded by the access policies of the recordings it is made of ([`guarded_path`]),
//! and a URL's credentials are carried on to the segments its playlist or MPD lists.
//!
//! Owns the request's reading and the span's assembly. Which file holds which span is the
//! recordings' timeline (`crate::record::timeline`); the segments are the files' own HLS and DASH
//! resources (`/recordings/…/F.mp4/seg-N.m4s`), served as any file's are. It does not route.

use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use sluice_media::hls::mpd::{span_manifest, MpdPeriod, MpdRendition};
use sluice_media::hls::playlist::{span_playlist, SpanPart};
use sluice_media::hls::SegmentIndex;
use sluice_media::mp4::clip::{clip, ClipError, Interval};
use sluice_media::mp4::join::join;
use sluice_media::mp4::Mp4File;
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::credentials::param;
use sluice_proto::http::file::{entity_response, FileMeta};
use sluice_proto::http::{Request, Response, Status};

use crate::http::clip::refusal;
use crate::http::hls::{failure, manifest_tag, packaged};
use crate::library::catalogue::Described;
use crate::library::{FileVersion, Library, LibraryError};
use crate::record::timeline::{recordings, RecordedFile};

/// The URL prefix of spans.
pub const REC_PREFIX: &str = "/rec/";

/// What a path segment's characters are escaped from in the URIs listed.
const PATH_SEGMENT: &AsciiSet =
    &CONTROLS.add(b' ').add(b'"').add(b'#').add(b'%').add(b'?').add(b'<').add(b'>');

/// What a span is asked as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SpanAs {
    Hls,
    Dash,
    Mp4,
}

/// How a span's MP4 is sent: the connection's limits on ranges.
#[derive(Debug, Clone, Copy)]
pub struct SpanSending {
    /// The most ranges one request may ask for.
    pub max_ranges: usize,
    /// A multipart boundary, should it be needed.
    pub boundary: u64,
}

/// The live path (still escaped) and the form a span is asked as, when `raw_path` names a span.
fn span_path(raw_path: &str) -> Option<(&str, SpanAs)> {
    let rest = raw_path.strip_prefix(REC_PREFIX)?;
    [("/index.m3u8", SpanAs::Hls), ("/manifest.mpd", SpanAs::Dash), ("/clip.mp4", SpanAs::Mp4)]
        .into_iter()
        .find_map(|(name, form)| rest.strip_suffix(name).map(|live| (live, form)))
}

/// Whether `raw_path` (the request's path, not decoded) names a span.
pub fn names_span(raw_path: &str) -> bool {
    span_path(raw_path).is_some()
}

/// The path whose access policy a span's request is checked against, when `raw_path` names a
/// span: the same name in the live path's recordings folder (`/rec/live/cam1/clip.mp4` →
/// `/recordings/live/cam1/clip.mp4`, still escaped). A span is made of those files, so whoever
/// may not read them may not read it either, whatever the policies say of `/rec/`.
pub fn guarded_path(raw_path: &str) -> Option<String> {
    let (live, _) = span_path(raw_path)?;
    let name = &raw_path[REC_PREFIX.len() + live.len()..];
    Some(format!("/{}/{live}{name}", crate::record::RECORDINGS))
}

/// The answer to `raw_path` (the request's path, not decoded) when it names a span; `None`
/// when it does not. [`LibraryError::WouldBlock`] when an object store's listing, an index or a
/// slice is not at hand and `may_block` is false.
pub fn respond(
    library: &Library,
    req: &Request<'_>,
    raw_path: &str,
    sending: SpanSending,
    may_block: bool,
) -> Option<Result<Response, LibraryError>> {
    let (live, form) = span_path(raw_path)?;
    let live = percent_encoding::percent_decode_str(live).decode_utf8().ok()?;
    if live.is_empty() || live.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        return Some(Ok(failure(Status::NOT_FOUND, "not a live path")));
    }
    let query = req.query().unwrap_or_default();
    let start = match param(query, "start").map(|s| chrono::DateTime::parse_from_rfc3339(&s)) {
        Some(Ok(t)) => SystemTime::from(t),
        Some(Err(e)) => {
            return Some(Ok(failure(Status::BAD_REQUEST, &format!("start is not RFC 3339: {e}"))))
        }
        None => SystemTime::UNIX_EPOCH,
    };
    let end = match param(query, "duration").map(|d| sluice_proto::duration_text::parse(&d)) {
        Some(Ok(d)) => start + d,
        Some(Err(e)) => return Some(Ok(failure(Status::BAD_REQUEST, &format!("duration: {e}")))),
        None => SystemTime::now() + Duration::from_secs(86_400),
    };
    let span = match spanned(library, &live, (start, end), may_block) {
        Ok(span) if span.is_empty() => {
            return Some(Ok(failure(Status::NOT_FOUND, &format!("no recording of /{live} in that span"))))
        }
        Ok(span) => span,
        Err(e) => return Some(Err(e)),
    };
    Some(match form {
        SpanAs::Hls => Ok(playlist(req, &span)),
        SpanAs::Dash => Ok(manifest(req, &span)),
        SpanAs::Mp4 => mp4(library, req, &span, (start, end), (sending, may_block)),
    })
}

/// One recording file's part of a span.
struct SpannedFile {
    recorded: RecordedFile,
    version: FileVersion,
    tables: Arc<Mp4File>,
    /// What it is as a video (its packaging's index, which `spanned` checked is there).
    described: Arc<Described>,
    /// Its resources' URL path (`/recordings/live/cam1/F.mp4`), escaped.
    base: String,
    /// The segments the span takes.
    segments: Range<usize>,
}

impl SpannedFile {
    /// Where its segments are.
    fn index(&self) -> &SegmentIndex {
        match &self.described.hls {
            Ok(packaging) => &packaging.index,
            Err(_) => unreachable!("a spanned file packages"),
        }
    }

    /// Where its first segment starts on the stream's timeline, in seconds.
    fn origin(&self) -> f64 {
        self.times(0).0
    }

    /// Segment `n`'s start and end on the stream's timeline, in seconds.
    fn times(&self, n: usize) -> (f64, f64) {
        let index = self.index();
        let scale = f64::from(index.timescale().max(1));
        (index.start_ticks(n) as f64 / scale, index.start_ticks(n + 1) as f64 / scale)
    }

    /// When segment `n` starts on the wall clock (`n == segments()`: when the last ends).
    fn wallclock(&self, n: usize) -> SystemTime {
        self.recorded.start + Duration::from_secs_f64((self.times(n).0 - self.origin()).max(0.0))
    }
}

/// The recording files of live path `live` holding some of `start..end`, each with the segments
/// it holds of it; files that do not package (yet) are left out.
fn spanned(
    library: &Library,
    live: &str,
    (start, end): (SystemTime, SystemTime),
    may_block: bool,
) -> Result<Vec<SpannedFile>, LibraryError> {
    let mut out = Vec::new();
    for recorded in recordings(library, live, (start, end), may_block)? {
        let Some(version) = library.file(&recorded.relative, may_block)? else { continue };
        let described = library.described(&recorded.relative, &version, may_block)?;
        if described.hls.is_err() {
            continue;
        }
        let Ok(tables) = library.tables(&recorded.relative, &version, may_block)? else { continue };
        let base = format!(
            "/{}",
            recorded
                .relative
                .split('/')
                .map(|s| utf8_percent_encode(s, PATH_SEGMENT).to_string())
                .collect::<Vec<_>>()
                .join("/")
        );
        let mut file = SpannedFile { recorded, version, tables, described, base, segments: 0..0 };
        let taken: Vec<usize> = (0..file.index().segments())
            .filter(|&n| file.wallclock(n + 1) > start && file.wallclock(n) < end)
            .collect();
        let (Some(&first), Some(&last)) = (taken.first(), taken.last()) else { continue };
        file.segments = first..last + 1;
        out.push(file);
    }
    Ok(out)
}

/// The span's HLS playlist.
fn playlist(req: &Request<'_>, span: &[SpannedFile]) -> Response {
    let mut parts: Vec<SpanPart> = Vec::new();
    // Where the part before ended on the stream's timeline, to tell a discontinuity.
    let mut previous_end: Option<f64> = None;
    for file in span {
        let segments = file
            .segments
            .clone()
            .map(|n| {
                let (from, to) = file.times(n);
                (format!("{}/seg-{n}.m4s", file.base), to - from)
            })
            .collect();
        let from = file.times(file.segments.start).0;
        let discontinuity = previous_end.is_none_or(|e| (e - from).abs() > 0.5);
        previous_end = Some(file.times(file.index().segments() - 1).1);
        let wallclock = file.wallclock(file.segments.start);
        parts.push(SpanPart { init: format!("{}/init.mp4", file.base), segments, wallclock, discontinuity });
    }
    let parts = vec![Segment::Bytes(span_playlist(&parts).into_bytes())];
    let tag = manifest_tag(&parts);
    packaged(req, parts, ("application/vnd.apple.mpegurl", true), None, Some(tag), (1, 0))
}

/// The span's MPD: a Period per file.
fn manifest(req: &Request<'_>, span: &[SpannedFile]) -> Response {
    let prefixes: Vec<String> = span.iter().map(|f| format!("{}/", f.base)).collect();
    let mut periods: Vec<MpdPeriod<'_>> = Vec::with_capacity(span.len());
    let mut at = 0.0;
    for (file, prefix) in span.iter().zip(&prefixes) {
        let rendition = MpdRendition { prefix, index: file.index(), file: &file.tables };
        let period = MpdPeriod { rendition, segments: file.segments.clone(), start: at };
        at += period.duration();
        periods.push(period);
    }
    let parts = vec![Segment::Bytes(span_manifest(&periods).into_bytes())];
    let tag = manifest_tag(&parts);
    packaged(req, parts, ("application/dash+xml", true), None, Some(tag), (1, 0))
}

/// The span as one progressive MP4 (`start..end` on the wall clock).
fn mp4(
    library: &Library,
    req: &Request<'_>,
    span: &[SpannedFile],
    (start, end): (SystemTime, SystemTime),
    (sending, may_block): (SpanSending, bool),
) -> Result<Response, LibraryError> {
    let tables: Vec<&Mp4File> = span.iter().map(|f| &*f.tables).collect();
    let joined = match join(&tables) {
        Ok(joined) => joined,
        Err(e) => {
            return Ok(failure(Status::CONFLICT, &format!("the span's recordings cannot be one MP4: {e}")))
        }
    };
    // The interval on the joined timeline: from `start` into the first file, for as long as the
    // files hold of the span (the gaps between publishes are closed up by the join).
    let first = &span[0];
    let into_first = start.duration_since(first.recorded.start).unwrap_or_default().as_secs_f64();
    let held: f64 = span
        .iter()
        .map(|f| {
            let (from, to) = (start.max(f.recorded.start), end.min(f.recorded.end()));
            to.duration_since(from).unwrap_or_default().as_secs_f64()
        })
        .sum();
    // The clip's interval is in presentation time: the file's start on the wall clock is when
    // its first picture is shown (a live track is presented a little after it is decoded).
    let start_ms = ((first.index().presented_start(&first.tables, 0) + into_first) * 1000.0).round() as u64;
    // A span past the recordings' end runs to the end of the last file, whole.
    let to_the_end = span.last().is_some_and(|f| end >= f.recorded.end());
    let end_ms = (!to_the_end).then(|| start_ms + (held * 1000.0).round().max(1.0) as u64);
    let interval = Interval { start_ms, end_ms };
    let planned = match clip(&joined.file, interval) {
        Ok(planned) => planned,
        Err(
            e
            @ (ClipError::BadTime { .. } | ClipError::EmptyInterval { .. } | ClipError::StartPastEnd { .. }),
        ) => return Ok(refusal(&e)),
        Err(e) => {
            return Ok(failure(Status::INTERNAL_SERVER_ERROR, &format!("cannot make the span's MP4: {e}")))
        }
    };
    // In a local library the sample data is slices of the recording files; in a remote one,
    // slices of the library's stand-in at the joined file's offsets, which `joined_sendable`
    // turns into slices of the cached objects.
    let bodies: Vec<Arc<std::fs::File>> = span.iter().map(|f| library.body_file(&f.version)).collect();
    let local = span.iter().all(|f| matches!(f.version, FileVersion::Local { .. }));
    let mut parts = vec![Segment::Bytes(planned.plan.header)];
    for range in planned.plan.ranges {
        if local {
            slices(&range, &joined.bases, &bodies, &mut parts);
        } else {
            parts.push(Segment::File(FileSlice {
                file: Arc::clone(&bodies[0]),
                offset: range.start,
                len: range.end - range.start,
            }));
        }
    }
    let len = parts.iter().map(Segment::len).sum();
    let modified = span.iter().filter_map(|f| f.version.modified()).max();
    let meta = FileMeta { len, modified, content_type: "video/mp4", etag: None };
    // The files' versions and the interval: a range request never mixes two spans.
    let tags: Vec<String> = span.iter().filter_map(|f| f.version.entity_tag()).collect();
    let etag =
        format!("\"span-{:016x}-{}\"", crate::thumbs::fnv1a(tags.join(",").as_bytes()), interval.tag());
    let response = entity_response(req, parts, &meta, Some(etag), sending.max_ranges, sending.boundary)
        .with_header("Access-Control-Allow-Origin", "*");
    let laid: Vec<(&FileVersion, u64)> =
        span.iter().map(|f| &f.version).zip(joined.bases.iter().copied()).collect();
    library.joined_sendable(req, &laid, response, may_block)
}

/// `range` of the joined file's bytes as slices of the files (`bases`: where each starts in it).
fn slices(range: &Range<u64>, bases: &[u64], bodies: &[Arc<std::fs::File>], out: &mut Vec<Segment>) {
    let mut at = range.start;
    while at < range.end {
        let i = bases.partition_point(|&b| b <= at).saturating_sub(1);
        let file_end = bases.get(i + 1).copied().unwrap_or(u64::MAX);
        let end = range.end.min(file_end);
        out.push(Segment::File(FileSlice {
            file: Arc::clone(&bodies[i]),
            offset: at - bases[i],
            len: end - at,
        }));
        at = end;
    }
}
