//! Trick play over HTTP: a file's I-frame playlist (`/<file>.mp4/video-iframes.m3u8`) and its
//! keyframe fragments (`video-iframe-N.m4s`), made by `sluice_media::hls::iframes` from the
//! catalogue's sample tables, from any library (a local root or an object store). The master
//! playlist and the MPD list them (`crate::http::hls`).
//!
//! Owns the responses: a fragment goes out as its generated `moof` and `mdat` header followed by
//! a slice of the file (the keyframe's bytes), so the engine sends it with its zero-copy path;
//! fragments carry the file version's entity tag, the playlist a tag of its text, so ranges
//! (the playlist's `EXT-X-BYTERANGE`s) and conditional requests work as for segments. It does
//! not route requests (the app does) or write boxes.

use sluice_media::hls::iframes::{IFrameResource, KeyFrames};
use sluice_media::hls::HlsError;
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::{Request, Response, Status};

use crate::http::hls::{failure, manifest_tag, packaged};
use crate::library::{FileVersion, Library, LibraryError};

/// Whether `name` (under a file's URL) names a trick-play resource.
pub fn is_trick_name(name: &str) -> bool {
    IFrameResource::parse(name).is_some()
}

/// One request for a trick-play resource of a file of the library.
#[derive(Debug)]
pub struct TrickRequest<'a> {
    /// The file's path in the library (decoded, no leading slash).
    pub relative: &'a str,
    /// The version being served.
    pub version: &'a FileVersion,
    /// What is asked for.
    pub resource: IFrameResource,
    /// Most byte ranges honoured.
    pub max_ranges: usize,
    /// A multipart boundary, should it be needed.
    pub boundary: u64,
}

/// The answer to a trick-play request: 404 for a file without video or a keyframe past the
/// last, the packaging refusal for a file that does not package.
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    request: &TrickRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    let described = library.described(relative, version, may_block)?;
    let index = match &described.hls {
        Ok(packaging) => &packaging.index,
        Err(refusal) => return Ok(failure(refusal.status, &refusal.reason)),
    };
    let tables = match library.tables(relative, version, may_block)? {
        Ok(tables) => tables,
        Err(reason) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
    };
    let Some(keyframes) = KeyFrames::of(&tables, index) else {
        return Ok(Response::error(Status::NOT_FOUND));
    };
    let ranges = (request.max_ranges, request.boundary);
    let kind = (request.resource.content_type(), request.resource == IFrameResource::Playlist);
    let response = match request.resource {
        IFrameResource::Playlist => {
            let parts = vec![Segment::Bytes(keyframes.playlist().into_bytes())];
            let etag = Some(manifest_tag(&parts));
            packaged(req, parts, kind, version.modified(), etag, ranges)
        }
        IFrameResource::Fragment(n) => {
            let plan = match keyframes.fragment(n) {
                Ok(plan) => plan,
                Err(HlsError::NoSuchSegment(_)) => return Ok(Response::error(Status::NOT_FOUND)),
                Err(e) => {
                    tracing::warn!(
                        path = relative,
                        keyframe = n,
                        "trick play: cannot package the keyframe: {e}"
                    );
                    return Ok(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string()));
                }
            };
            let file = library.body_file(version);
            let mut parts = vec![Segment::Bytes(plan.header)];
            parts.extend(plan.ranges.into_iter().map(|r| {
                Segment::File(FileSlice {
                    file: std::sync::Arc::clone(&file),
                    offset: r.start,
                    len: r.end - r.start,
                })
            }));
            // A fragment depends on the file alone.
            let etag = version
                .entity_tag()
                .filter(|t| t.ends_with('"'))
                .map(|tag| format!("{}-iframe\"", &tag[..tag.len() - 1]));
            packaged(req, parts, kind, version.modified(), etag, ranges)
        }
    };
    library.sendable(req, version, response, may_block)
}
