//! HLS over HTTP: `/<file>.mp4/master.m3u8`, `media.m3u8`, `init.mp4` and `seg-N.m4s`,
//! packaged on the fly from the MP4 by `sluice_media::hls`, from any library (a local root or
//! an object store).
//!
//! Owns the responses. A file's segment index and init segment, and the full sample tables a
//! media segment's `moof` is written from, come from the library's shared catalogue (built once
//! per file version; a file that fails to package is remembered with its reason). A segment goes
//! out as a generated header followed by slices of the file (the local file, or the slice
//! cache's files for an object), so the engine sends the samples with sendfile, splice or copy.
//! Playlists and segments carry the file version's entity tag, so ranges and conditional
//! requests work as for files. It does not route requests (the app does), read indexes (the
//! library does) or write boxes (`sluice_media::hls` does).

use std::borrow::Cow;

use sluice_media::hls::playlist::{master_playlist, media_playlist, Resource};
use sluice_media::hls::{media_segment, HlsError};
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::file::{entity_response, FileMeta};
use sluice_proto::http::{Body, Request, Response, Status};

use crate::library::{FileVersion, Library, LibraryError};
use crate::page::{HLS_JS, HLS_JS_VERSION};

/// Files a library page may index while it renders (each reads a `moov` box: a few ms for an
/// hour of video); the page shows the others' details once they are indexed.
pub const INDEXED_PER_PAGE: usize = 64;

/// One request for an HLS resource of a file of the library.
#[derive(Debug)]
pub struct HlsRequest<'a> {
    /// The file's path in the library (decoded, no leading slash).
    pub relative: &'a str,
    /// The version being served.
    pub version: &'a FileVersion,
    /// What is asked for.
    pub resource: Resource,
    /// Most byte ranges honoured.
    pub max_ranges: usize,
    /// A multipart boundary, should it be needed.
    pub boundary: u64,
}

/// The answer to `hls`; [`LibraryError::WouldBlock`] when `may_block` is false and the index
/// or the bytes are not at hand.
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    hls: &HlsRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (hls.relative, hls.version);
    let described = library.described(relative, version, may_block)?;
    let packaging = match &described.hls {
        Ok(packaging) => packaging,
        Err(refusal) => return Ok(failure(refusal.status, &refusal.reason)),
    };
    let index = &packaging.index;
    let parts = match hls.resource {
        Resource::Master => vec![Segment::Bytes(master_playlist(index).into_bytes())],
        Resource::Media => vec![Segment::Bytes(media_playlist(index).into_bytes())],
        Resource::Init => vec![Segment::Bytes(packaging.init.to_vec())],
        Resource::Segment(n) => {
            if n >= index.segments() {
                return Ok(Response::error(Status::NOT_FOUND));
            }
            let tables = match library.tables(relative, version, may_block)? {
                Ok(tables) => tables,
                // The description was made from tables that parsed: only a change of the
                // file between the two reads gets here.
                Err(reason) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
            };
            let plan = match media_segment(&tables, index, n) {
                Ok(plan) => plan,
                Err(HlsError::NoSuchSegment(_)) => return Ok(Response::error(Status::NOT_FOUND)),
                Err(e) => {
                    tracing::warn!(path = relative, segment = n, "HLS: cannot package the segment: {e}");
                    return Ok(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string()));
                }
            };
            let file = library.body_file(version);
            let mut parts = Vec::with_capacity(plan.ranges.len() + 1);
            parts.push(Segment::Bytes(plan.header));
            parts.extend(plan.ranges.into_iter().map(|r| {
                Segment::File(FileSlice {
                    file: std::sync::Arc::clone(&file),
                    offset: r.start,
                    len: r.end - r.start,
                })
            }));
            parts
        }
    };
    let len = parts.iter().map(Segment::len).sum();
    let meta =
        FileMeta { len, modified: version.modified(), content_type: hls.resource.content_type(), etag: None };
    // The packaging depends on the file and on the segment target: both go into the tag.
    let etag = version.entity_tag().filter(|t| t.ends_with('"')).map(|file_tag| {
        format!("{}-hls{}\"", &file_tag[..file_tag.len() - 1], library.catalogue().segment().as_millis())
    });
    // Playlists are revalidated (cheap with the ETag) so a replaced file is seen at once;
    // segments keep their URL for the file's life and can be cached.
    let cache_control = match hls.resource {
        Resource::Master | Resource::Media => "no-cache",
        Resource::Init | Resource::Segment(_) => "public, max-age=3600",
    };
    let response = entity_response(req, parts, &meta, etag, hls.max_ranges, hls.boundary)
        .with_header("Cache-Control", cache_control)
        .with_header("Access-Control-Allow-Origin", "*");
    library.sendable(req, version, response, may_block)
}

/// The vendored hls.js the library page loads: immutable for a build, so cached for a year and
/// validated by its version.
pub fn player_script(req: &Request<'_>) -> Response {
    let meta = FileMeta {
        len: HLS_JS.len() as u64,
        modified: None,
        content_type: "text/javascript; charset=utf-8",
        etag: None,
    };
    let etag = Some(format!("\"hls.js-{HLS_JS_VERSION}-{:x}\"", HLS_JS.len()));
    entity_response(req, vec![Segment::Static(HLS_JS)], &meta, etag, 1, 0)
        .with_header("Cache-Control", "public, max-age=31536000")
}

/// An error response saying why, in plain text (the reason names the file and the problem).
fn failure(status: Status, reason: &str) -> Response {
    Response {
        status,
        headers: vec![
            ("Content-Type", Cow::Borrowed("text/plain; charset=utf-8")),
            ("Cache-Control", Cow::Borrowed("no-store")),
        ],
        body: Body::Bytes(Cow::Owned(
            format!("{status} {}: {reason}\n", status.reason(), status = status.0).into_bytes(),
        )),
    }
}
