//! Scrubbing thumbnails over HTTP: a file's `thumbs/images.m3u8` (HLS image media playlist),
//! `thumbs/thumbnails.vtt` (WebVTT thumbnails track) and `thumbs/tile-N.jpg` (its tiles), planned
//! by `sluice_media::hls::thumbs` from the catalogue's sample tables and made by
//! [`crate::thumbs`], from any library (a local root or an object store). (The master playlist's
//! and the MPD's lines for them come from [`crate::thumbs`] too, for files and rendition sets.)
//!
//! Owns the responses: the listings carry a tag of their text, a tile the file version's tag
//! and the layout's, so ranges and conditional requests work as for segments. Without ffmpeg
//! every thumbnail resource is 503 with the reason, and manifests do not list them. It does not
//! route requests (the app does), decode or keep tiles.

use sluice_media::hls::iframes::KeyFrames;
use sluice_media::hls::thumbs::{tile_name, ThumbResource, THUMBS_DIR};
use sluice_media::hls::Packaged;
use sluice_proto::conn::Segment;
use sluice_proto::http::{Request, Response, Status};

use crate::http::derived::{self, DerivedRequest};
use crate::http::hls::{failure, manifest_tag, packaged};
use crate::library::{Library, LibraryError};
use crate::thumbs::{Thumbnails, TileRefusal};

/// What a library path (decoded) names under a file's `thumbs/` folder: the file and the
/// resource.
pub fn thumbs_path(relative: &str) -> Option<(&str, ThumbResource)> {
    let (parent, name) = relative.rsplit_once('/')?;
    let owner = parent.strip_suffix(THUMBS_DIR)?.strip_suffix('/')?;
    let resource = ThumbResource::parse(name)?;
    crate::library::names::is_mp4(owner).then_some((owner, resource))
}

/// Whether answering `relative` may decode a tile, which is work for a job, not a loop.
pub fn needs_a_job(relative: &str) -> bool {
    matches!(thumbs_path(relative), Some((_, ThumbResource::Tile(_))))
}

/// One request for a thumbnail resource of a file of the library.
pub type ThumbRequest<'a> = DerivedRequest<'a, ThumbResource>;

/// The answer to a thumbnail request: 503 with the reason without a decoder, 404 for a file
/// without video or a tile past the last, the packaging refusal for a file that does not
/// package; [`LibraryError::WouldBlock`] for a tile not in memory when `may_block` is false.
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    thumbnails: &Thumbnails,
    request: &ThumbRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    if let Err(why) = thumbnails.decoder() {
        return Ok(failure(Status::SERVICE_UNAVAILABLE, why));
    }
    let (relative, version) = (request.relative, request.version);
    let source = match derived::source(library, request, may_block)? {
        Ok(source) => source,
        Err(refusal) => return Ok(refusal),
    };
    let (index, tables) = (source.index(), &*source.tables);
    let (Some(keyframes), Some(plan)) =
        (KeyFrames::of(tables, index), crate::thumbs::plan(thumbnails, tables, index))
    else {
        return Ok(Response::error(Status::NOT_FOUND));
    };
    let ranges = (request.max_ranges, request.boundary);
    let kind = (request.what.content_type(), request.what.is_manifest());
    let (parts, etag) = match request.what {
        ThumbResource::ImagePlaylist | ThumbResource::Vtt => {
            let text = match request.what {
                ThumbResource::ImagePlaylist => plan.image_playlist(),
                _ => plan.vtt(""),
            };
            let parts = vec![Segment::Bytes(text.into_bytes())];
            let etag = Some(manifest_tag(&parts));
            (parts, etag)
        }
        ThumbResource::Tile(n) if n > plan.tiles() => return Ok(Response::error(Status::NOT_FOUND)),
        ThumbResource::Tile(n) => {
            let tag = Library::version_key(relative, version).version;
            let object = thumbnails.object_name(&tag, &tile_name(n));
            let Some(key) = sluice_store::derived_key(relative, &object) else {
                return Ok(failure(
                    Status::INTERNAL_SERVER_ERROR,
                    "the file's name is too long to keep tiles beside",
                ));
            };
            let tile = match thumbnails.in_memory(&key) {
                Some(tile) => tile,
                None if !may_block => return Err(LibraryError::WouldBlock),
                None => {
                    let input = || {
                        let init = source.packaging().track_init(Packaged::Video).ok_or_else(|| {
                            TileRefusal { status: Status::NOT_FOUND, reason: "no video track".into() }
                        })?;
                        let strip = plan.decoder_input(&keyframes, n).map_err(|e| TileRefusal {
                            status: Status::INTERNAL_SERVER_ERROR,
                            reason: e.to_string(),
                        })?;
                        let mut bytes = init.to_vec();
                        for fragment in strip {
                            bytes.extend_from_slice(&fragment.header);
                            for range in fragment.ranges {
                                let from = bytes.len();
                                bytes.resize(from + (range.end - range.start) as usize, 0);
                                library.read_at(version, range.start, &mut bytes[from..], true).map_err(
                                    |e| TileRefusal {
                                        status: Status::BAD_GATEWAY,
                                        reason: format!("reading a keyframe: {e}"),
                                    },
                                )?;
                            }
                        }
                        Ok(bytes)
                    };
                    match thumbnails.tile(&key, plan.cell().1, input) {
                        Ok(tile) => tile,
                        Err(refusal) => return Ok(failure(refusal.status, &refusal.reason)),
                    }
                }
            };
            // A tile depends on the file and the layout, both in its object's name.
            let etag = version
                .entity_tag()
                .filter(|t| t.ends_with('"'))
                .map(|t| format!("{}-thumb{}\"", &t[..t.len() - 1], &object[..16]));
            (vec![Segment::Bytes(tile.to_vec())], etag)
        }
    };
    Ok(packaged(req, parts, kind, version.modified(), etag, ranges))
}
