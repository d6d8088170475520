//! MPEG-TS HLS over HTTP, for players without fMP4: per file, `/<file>.mp4/ts/master.m3u8`,
//! `ts/media.m3u8` and the segments `ts/seg-N.ts` (the fMP4 segments' cuts), made by
//! `sluice_media::hls::ts`; per rendition set, `/<title>.set/ts/master.m3u8` pointing at its
//! files' TS playlists.
//!
//! Owns the responses. Unlike an fMP4 segment, a TS segment is not file ranges (its samples are
//! cut into packets and rewritten), so its samples are read into memory and muxed: in a job,
//! never on an event loop ([`needs_a_job`]), and only up to [`MAX_TS_SEGMENT_BYTES`]. Segments
//! carry the file version's entity tag and the segment length, playlists a tag of their text.
//! It does not route requests (the app does) or mux (`sluice_media` does).

use percent_encoding::utf8_percent_encode;
use sluice_media::hls::ts::{self, TsRendition, TsResource, TS_DIR};
use sluice_media::hls::HlsError;
use sluice_proto::conn::Segment;
use sluice_proto::http::{Request, Response, Status};

use crate::http::derived::{self, DerivedRequest};
use crate::http::hls::{failure, manifest_tag, packaged};
use crate::library::names::SEGMENT;
use crate::library::renditions::{find_set, SetError};
use crate::library::{Library, LibraryError};

/// Most sample bytes one TS segment is made from (it is held in memory while it is muxed and
/// sent): 64 MiB is 6 s of 80 Mb/s video. A file whose keyframes are further apart than that
/// is refused over TS (its fMP4 segments, which are sent from the file, still play).
pub const MAX_TS_SEGMENT_BYTES: u64 = 64 << 20;

/// What a library path (decoded) names under a file's or a set's `ts/` folder: the owner (the
/// file or the set folder, `dir/film.mp4` or `dir/film.set`) and the resource.
pub fn ts_path(relative: &str) -> Option<(&str, TsResource)> {
    let (parent, name) = relative.rsplit_once('/')?;
    let owner = parent.strip_suffix(TS_DIR)?.strip_suffix('/')?;
    let resource = TsResource::parse(name)?;
    (crate::library::names::is_mp4(owner) || owner.ends_with(crate::library::renditions::SET_SUFFIX))
        .then_some((owner, resource))
}

/// Whether answering `relative` muxes a segment, which is work for a job, not a loop.
pub fn needs_a_job(relative: &str) -> bool {
    matches!(ts_path(relative), Some((_, TsResource::Segment(_))))
}

/// One request for a TS resource of a file of the library.
pub type TsRequest<'a> = DerivedRequest<'a, TsResource>;

/// The answer to a file's TS resource; [`LibraryError::WouldBlock`] for a segment when
/// `may_block` is false (so that it is made in a job).
pub fn respond(
    req: &Request<'_>,
    library: &Library,
    request: &TsRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    if matches!(request.what, TsResource::Segment(_)) && !may_block {
        return Err(LibraryError::WouldBlock);
    }
    let source = match derived::source(library, request, may_block)? {
        Ok(source) => source,
        Err(refusal) => return Ok(refusal),
    };
    let (index, tables) = (source.index(), &*source.tables);
    if let Err(reason) = ts::carries(tables, index) {
        return Ok(failure(Status::UNSUPPORTED_MEDIA_TYPE, &reason));
    }
    let kind = (request.what.content_type(), request.what.is_manifest());
    let ranges = (request.max_ranges, request.boundary);
    let (parts, etag) = match request.what {
        TsResource::Master => {
            let rendition = TsRendition { prefix: "", index, file: tables };
            let parts = vec![Segment::Bytes(ts::master_playlist(&[rendition]).into_bytes())];
            let etag = manifest_tag(&parts);
            (parts, Some(etag))
        }
        TsResource::Media => {
            let parts = vec![Segment::Bytes(ts::media_playlist(index).into_bytes())];
            let etag = manifest_tag(&parts);
            (parts, Some(etag))
        }
        TsResource::Segment(n) => {
            let reads = match ts::segment_reads(tables, index, n) {
                Ok(reads) => reads,
                Err(HlsError::NoSuchSegment(_)) => return Ok(Response::error(Status::NOT_FOUND)),
                Err(e) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string())),
            };
            let total: u64 = reads.iter().map(|r| r.end - r.start).sum();
            if total > MAX_TS_SEGMENT_BYTES {
                let reason = format!(
                    "segment {n} of {relative} holds {total} bytes of samples, more than the {MAX_TS_SEGMENT_BYTES} a TS segment is made from; its fMP4 segments play"
                );
                return Ok(failure(Status::INTERNAL_SERVER_ERROR, &reason));
            }
            let mut bytes = Vec::with_capacity(reads.len());
            for r in reads {
                let mut buf = vec![0; (r.end - r.start) as usize];
                match library.read_at(version, r.start, &mut buf, may_block) {
                    Ok(()) => bytes.push((r.start, buf)),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        return Err(LibraryError::WouldBlock)
                    }
                    Err(e) => return Err(LibraryError::Io(e)),
                }
            }
            let segment = match ts::segment(tables, index, n, &bytes) {
                Ok(segment) => segment,
                Err(e) => {
                    tracing::warn!(path = relative, segment = n, "TS: cannot mux the segment: {e}");
                    return Ok(failure(
                        Status::INTERNAL_SERVER_ERROR,
                        &format!("cannot mux {relative} as TS: {e}"),
                    ));
                }
            };
            // A segment depends on the file and the segment length.
            let etag = version.entity_tag().filter(|t| t.ends_with('"')).map(|tag| {
                format!("{}-ts{}\"", &tag[..tag.len() - 1], library.catalogue().segment().as_millis())
            });
            (vec![Segment::Bytes(segment)], etag)
        }
    };
    Ok(packaged(req, parts, kind, version.modified(), etag, ranges))
}

/// The TS master playlist of the rendition set `<dir>/<title>.set`: a variant per file, each
/// its own `ts/media.m3u8`. 404 for anything else under the set's `ts/`.
pub fn respond_set(
    req: &Request<'_>,
    library: &Library,
    set: &str,
    resource: TsResource,
    may_block: bool,
) -> Result<Response, LibraryError> {
    let Some(title_path) = set.strip_suffix(crate::library::renditions::SET_SUFFIX) else {
        return Ok(Response::error(Status::NOT_FOUND));
    };
    let (dir, title) = title_path.rsplit_once('/').unwrap_or(("", title_path));
    if resource != TsResource::Master || title.is_empty() {
        return Ok(Response::error(Status::NOT_FOUND));
    }
    let found = match find_set(library, dir, title, may_block) {
        Ok(found) => found,
        Err(SetError::Library(e)) => return Err(e),
        Err(SetError::NotFound) => return Ok(Response::error(Status::NOT_FOUND)),
        Err(e @ SetError::Misaligned(_)) => return Ok(failure(Status::CONFLICT, &e.to_string())),
        Err(e) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string())),
    };
    let mut members = Vec::with_capacity(found.members.len());
    for m in &found.members {
        let Some(index) = m.index() else { continue };
        match library.tables(&m.relative, &m.version, may_block)? {
            // Only the renditions TS carries (an AV1 ladder beside an H.264 one keeps to fMP4).
            Ok(tables) if ts::carries(&tables, index).is_err() => {}
            Ok(tables) => {
                members.push((format!("../../{}/ts/", utf8_percent_encode(&m.name, SEGMENT)), index, tables))
            }
            Err(reason) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
        }
    }
    if members.is_empty() {
        let reason = "MPEG-TS carries H.264, HEVC, AAC, AC-3 and E-AC-3 here, and no rendition of this set is only those";
        return Ok(failure(Status::UNSUPPORTED_MEDIA_TYPE, reason));
    }
    let renditions: Vec<TsRendition<'_>> =
        members.iter().map(|(prefix, index, file)| TsRendition { prefix, index, file }).collect();
    let parts = vec![Segment::Bytes(ts::master_playlist(&renditions).into_bytes())];
    let etag = Some(manifest_tag(&parts));
    Ok(packaged(req, parts, (resource.content_type(), true), None, etag, (1, 0)))
}
