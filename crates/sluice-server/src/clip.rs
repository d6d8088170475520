//! Clips and MP4 pseudo-streaming over HTTP: `/<file>.mp4?start=S&end=E` (nginx's
//! `ngx_http_mp4_module` arguments, seconds with decimals, either may be left out) and
//! `/<file>.mp4/clip/S-E.mp4`, the same clip under a name of its own (for players and caches
//! that drop query strings).
//!
//! Owns the responses: the clip's `ftyp` + `moov` + `mdat` header written by
//! `sluice_media::mp4::clip` from the catalogue's sample tables, then slices of the file (the
//! local file, or the slice cache's files for an object), so the engine sends the samples with
//! sendfile, splice or copy. A clip is a virtual file: byte ranges, conditional requests,
//! `Last-Modified` (the file's) and an entity tag made of the file version's and the interval's,
//! so a range request over a clip never mixes two versions or two intervals. It does not route
//! requests (the app does) or write boxes.

use sluice_media::mp4::clip::{clip, ClipError, Interval};
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::file::{entity_response, FileMeta};
use sluice_proto::http::{Request, Response, Status};

use crate::hls::failure;
use crate::library::{FileVersion, Library, LibraryError};

/// The folder of a file's clips by name: `/<file>.mp4/clip/S-E.mp4`.
const CLIP_DIR: &str = "/clip/";

/// The file and interval `relative` (a decoded library path) names as `<file>.mp4/clip/S-E.mp4`;
/// `None` for any other path, `Some(Err)` for a clip name whose interval is malformed.
pub fn clip_path(relative: &str) -> Option<(&str, Result<Interval, ClipError>)> {
    let (file, name) = relative.rsplit_once(CLIP_DIR)?;
    if !crate::page::is_mp4(file) || name.contains('/') {
        return None;
    }
    let interval = name.strip_suffix(".mp4")?;
    Some((file, Interval::from_name(interval)))
}

/// One request for a clip of a file of the library.
#[derive(Debug)]
pub struct ClipRequest<'a> {
    /// The file's path in the library (decoded, no leading slash).
    pub relative: &'a str,
    /// The version being served.
    pub version: &'a FileVersion,
    /// The interval asked for.
    pub interval: Interval,
    /// Most byte ranges honoured.
    pub max_ranges: usize,
    /// A multipart boundary, should it be needed.
    pub boundary: u64,
}

/// The answer to a clip request: 400 with the reason for an interval the file does not have,
/// the packaging refusal (415, 501, 500) for a file that is not an H.264/AAC MP4.
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    request: &ClipRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    let described = library.described(relative, version, may_block)?;
    if let Err(refusal) = &described.hls {
        return Ok(failure(refusal.status, &refusal.reason));
    }
    let tables = match library.tables(relative, version, may_block)? {
        Ok(tables) => tables,
        Err(reason) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
    };
    let planned = match clip(&tables, request.interval) {
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
        .map(|tag| format!("{}-clip{}\"", &tag[..tag.len() - 1], request.interval.tag()));
    let response = entity_response(req, parts, &meta, etag, request.max_ranges, request.boundary)
        .with_header("Access-Control-Allow-Origin", "*");
    library.sendable(req, version, response, may_block)
}

/// 400 with what is wrong with the interval.
pub fn refusal(e: &ClipError) -> Response {
    failure(Status::BAD_REQUEST, &e.to_string())
}
