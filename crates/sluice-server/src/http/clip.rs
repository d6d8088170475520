//! Clips and MP4 pseudo-streaming over HTTP: `/<file>.mp4?start=S&end=E` (nginx's
//! `ngx_http_mp4_module` arguments, seconds with decimals, either may be left out) and
//! `/<file>.mp4/clip/S-E.mp4`, the same clip under a name of its own (for players and caches
//! that drop query strings); and the clip packaged like a file, `/<file>.mp4/clip/S-E/` +
//! `master.m3u8`, `manifest.mpd` and the rest of a file's HLS, DASH and trick-play names.
//!
//! Owns the responses: the clip's `ftyp` + `moov` + `mdat` header written by
//! `sluice_media::mp4::clip` from the catalogue's sample tables, then slices of the file (the
//! local file, or the slice cache's files for an object), so the engine sends the samples with
//! sendfile, splice or copy. A clip is a virtual file: byte ranges, conditional requests,
//! `Last-Modified` (the file's) and an entity tag made of the file version's and the interval's,
//! so a range request over a clip never mixes two versions or two intervals. It does not route
//! requests (the app does) or write boxes.

use sluice_media::hls::iframes::{self, IFrameResource, KeyFrames};
use sluice_media::hls::mpd::{self, MpdRendition};
use sluice_media::hls::playlist::{master_playlist, media_playlist, track_playlist, Rendition, Resource};
use sluice_media::hls::{
    init_segment, media_segment, track_init_segment, track_media_segment, SegmentIndex, SegmentPlan,
};
use sluice_media::mp4::clip::{clip, clipped_tables, ClipError, Interval};
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::file::{entity_response, FileMeta};
use sluice_proto::http::{Request, Response, Status};

use crate::http::derived::{self, DerivedRequest};
use crate::http::hls::{failure, manifest_tag, packaged};
use crate::library::{Library, LibraryError};

/// The folder of a file's clips by name: `/<file>.mp4/clip/S-E.mp4`.
const CLIP_DIR: &str = "/clip/";

/// The file and interval `relative` (a decoded library path) names as `<file>.mp4/clip/S-E.mp4`;
/// `None` for any other path, `Some(Err)` for a clip name whose interval is malformed.
pub fn clip_path(relative: &str) -> Option<(&str, Result<Interval, ClipError>)> {
    let (file, name) = relative.rsplit_once(CLIP_DIR)?;
    if !crate::library::names::is_mp4(file) || name.contains('/') {
        return None;
    }
    let interval = name.strip_suffix(".mp4")?;
    Some((file, Interval::from_name(interval)))
}

/// One request for a clip of a file (`what`: its interval) of the library.
pub type ClipRequest<'a> = DerivedRequest<'a, Interval>;

/// The answer to a clip request: 400 with the reason for an interval the file does not have,
/// the packaging refusal (415, 501, 500) for a file that is not an H.264/AAC MP4.
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    request: &ClipRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    let tables = match derived::source(library, request, may_block)? {
        Ok(source) => source.tables,
        Err(refusal) => return Ok(refusal),
    };
    let planned = match clip(&tables, request.what) {
        Ok(planned) => planned,
        Err(
            e
            @ (ClipError::BadTime { .. } | ClipError::EmptyInterval { .. } | ClipError::StartPastEnd { .. }),
        ) => return Ok(refusal(&e)),
        Err(e) => {
            tracing::warn!(path = relative, "clip: cannot clip {relative}: {e}");
            return Ok(failure(Status::INTERNAL_SERVER_ERROR, &format!("cannot clip {relative}: {e}")));
        }
    };
    let file = library.body_file(version);
    let mut parts = Vec::with_capacity(planned.plan.ranges.len() + 1);
    parts.push(Segment::Bytes(planned.plan.header));
    parts.extend(planned.plan.ranges.into_iter().map(|r| {
        Segment::File(FileSlice { file: std::sync::Arc::clone(&file), offset: r.start, len: r.end - r.start })
    }));
    let len = parts.iter().map(Segment::len).sum();
    let meta = FileMeta { len, modified: version.modified(), content_type: "video/mp4", etag: None };
    let etag = version
        .entity_tag()
        .filter(|t| t.ends_with('"'))
        .map(|tag| format!("{}-clip{}\"", &tag[..tag.len() - 1], request.what.tag()));
    let response = entity_response(req, parts, &meta, etag, request.max_ranges, request.boundary)
        .with_header("Access-Control-Allow-Origin", "*");
    library.sendable(req, version, response, may_block)
}

/// 400 with what is wrong with the interval.
pub fn refusal(e: &ClipError) -> Response {
    failure(Status::BAD_REQUEST, &e.to_string())
}

/// What a clip's HLS, DASH or trick-play name asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClipResource {
    /// A playlist, manifest or segment of the clip's packaging (no subtitles).
    Packaged(Resource),
    /// The clip's I-frame playlist or a keyframe fragment.
    IFrames(IFrameResource),
}

/// The file, interval and resource `relative` (a decoded library path) names as
/// `<file>.mp4/clip/S-E/<name>`: the clip packaged as HLS and DASH like a file of its own.
pub fn packaged_clip_path(relative: &str) -> Option<(&str, Result<Interval, ClipError>, ClipResource)> {
    let (parent, name) = relative.rsplit_once('/')?;
    let (file, interval) = parent.rsplit_once(CLIP_DIR)?;
    if !crate::library::names::is_mp4(file) || interval.contains('/') {
        return None;
    }
    let resource = match IFrameResource::parse(name) {
        Some(iframes) => ClipResource::IFrames(iframes),
        None => ClipResource::Packaged(Resource::parse(name)?),
    };
    Some((file, Interval::from_name(interval), resource))
}

/// The answer to a resource of a clip's packaging: made from the clip's sample tables
/// (`sluice_media::mp4::clip::clipped_tables`, cut on each request: a copy of the interval's
/// entries) with the server's segment length, segments sent from the original file.
pub fn respond_packaged(
    req: &Request<'_>,
    library: &Library,
    request: &ClipRequest<'_>,
    resource: &ClipResource,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    let tables = match derived::source(library, request, may_block)? {
        Ok(source) => source.tables,
        Err(refusal) => return Ok(refusal),
    };
    let cannot = |e: &dyn std::fmt::Display| {
        tracing::warn!(path = relative, "clip: cannot package a clip of {relative}: {e}");
        Ok(failure(Status::INTERNAL_SERVER_ERROR, &format!("cannot package a clip of {relative}: {e}")))
    };
    let clipped = match clipped_tables(&tables, request.what) {
        Ok(clipped) => clipped,
        Err(
            e
            @ (ClipError::BadTime { .. } | ClipError::EmptyInterval { .. } | ClipError::StartPastEnd { .. }),
        ) => return Ok(refusal(&e)),
        Err(e) => return cannot(&e),
    };
    let index = match SegmentIndex::build(&clipped, library.catalogue().segment()) {
        Ok(index) => index,
        Err(e) => return cannot(&e),
    };
    let bytes = |text: String| Some(vec![Segment::Bytes(text.into_bytes())]);
    let from_file = |plan: SegmentPlan| {
        let file = library.body_file(version);
        let mut parts = vec![Segment::Bytes(plan.header)];
        parts.extend(plan.ranges.into_iter().map(|r| {
            Segment::File(FileSlice {
                file: std::sync::Arc::clone(&file),
                offset: r.start,
                len: r.end - r.start,
            })
        }));
        Some(parts)
    };
    let (parts, kind) = match resource {
        ClipResource::Packaged(r) => {
            let parts = match r {
                Resource::Master => {
                    let mut master = master_playlist(&[Rendition { prefix: "", index: &index }], &[]);
                    master.push_str(&iframes::stream_inf(&clipped, &index, ""));
                    bytes(master)
                }
                Resource::Media => bytes(media_playlist(&index)),
                Resource::TrackPlaylist(which) if index.has(*which) => {
                    bytes(track_playlist(&index, &clipped, *which))
                }
                Resource::Mpd => {
                    bytes(mpd::manifest(&[MpdRendition { prefix: "", index: &index, file: &clipped }], &[]))
                }
                Resource::Init => init_segment(&clipped, &index).ok().map(|b| vec![Segment::Bytes(b)]),
                Resource::TrackInit(which) if index.has(*which) => {
                    track_init_segment(&clipped, &index, *which).ok().map(|b| vec![Segment::Bytes(b)])
                }
                Resource::Segment(n) => media_segment(&clipped, &index, *n).ok().and_then(from_file),
                Resource::TrackSegment(which, n) if index.has(*which) => {
                    track_media_segment(&clipped, &index, *which, *n).ok().and_then(from_file)
                }
                _ => None,
            };
            (parts, (r.content_type(), r.is_manifest()))
        }
        ClipResource::IFrames(r) => {
            let keyframes = KeyFrames::of(&clipped, &index);
            let parts = match (r, keyframes) {
                (IFrameResource::Playlist, Some(k)) => bytes(k.playlist()),
                (IFrameResource::Fragment(n), Some(k)) => k.fragment(*n).ok().and_then(from_file),
                _ => None,
            };
            (parts, (r.content_type(), *r == IFrameResource::Playlist))
        }
    };
    let Some(parts) = parts else { return Ok(Response::error(Status::NOT_FOUND)) };
    let etag = if kind.1 {
        Some(manifest_tag(&parts))
    } else {
        version.entity_tag().filter(|t| t.ends_with('"')).map(|tag| {
            let segment = library.catalogue().segment().as_millis();
            format!("{}-clip{}-hls{segment}\"", &tag[..tag.len() - 1], request.what.tag())
        })
    };
    let ranges = (request.max_ranges, request.boundary);
    let response = packaged(req, parts, kind, version.modified(), etag, ranges);
    library.sendable(req, version, response, may_block)
}
