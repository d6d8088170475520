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

use crate::http::derived::{self, DerivedRequest};
use crate::http::hls::{failure, manifest_tag, packaged};
use crate::library::{Library, LibraryError};

/// Whether `name` (under a file's URL) names a trick-play resource.
pub fn is_trick_name(name: &str) -> bool {
    IFrameResource::parse(name).is_some()
}

/// One request for a trick-play resource of a file of the library.
pub type TrickRequest<'a> = DerivedRequest<'a, IFrameResource>;

/// The answer to a trick-play request: 404 for a file without video or a keyframe past the
/// last, the packaging refusal for a file that does not package.
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    request: &TrickRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    let source = match derived::source(library, request, may_block)? {
        Ok(source) => source,
        Err(refusal) => return Ok(refusal),
    };
    let (index, tables) = (source.index(), &*source.tables);
    let Some(keyframes) = KeyFrames::of(tables, index) else {
        return Ok(Response::error(Status::NOT_FOUND));
    };
    let ranges = (request.max_ranges, request.boundary);
    let kind = (request.what.content_type(), request.what == IFrameResource::Playlist);
    let response = match request.what {
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
