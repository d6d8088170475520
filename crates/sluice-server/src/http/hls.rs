//! HLS and DASH over HTTP, packaged on the fly from the MP4 by `sluice_media::hls`, from any
//! library (a local root or an object store): per file, `/<file>.mp4/master.m3u8` (video
//! variant, audio group, subtitles group), `manifest.mpd`, the per-track renditions
//! (`video.m3u8`, `video-init.mp4`, `video-seg-N.m4s`, the same for `audio`), the muxed
//! rendition kept for clients that use its URLs (`media.m3u8`, `init.mp4`, `seg-N.m4s`),
//! `subtitles-LANG.m3u8` with its segments `subtitles-LANG-N.vtt` (cut from the sidecar) for HLS
//! and the same cues as a text track for DASH (`subtitles-LANG-init.mp4`,
//! `subtitles-LANG-seg-N.m4s`); per rendition set (see `crate::library::renditions`),
//! `/<title>.set/master.m3u8`, `manifest.mpd` and the subtitles, pointing at the files' own
//! segments.
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

use percent_encoding::utf8_percent_encode;
use sluice_media::hls::mpd::{self, MpdRendition};
use sluice_media::hls::playlist::{
    master_playlist, media_playlist, subtitles_playlist, track_playlist, Rendition, Resource, Subtitle,
};
use sluice_media::hls::{iframes, media_segment, track_media_segment, wvtt, HlsError, Packaged};
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::file::{entity_response, FileMeta};
use sluice_proto::http::{Body, Request, Response, Status};

use crate::library::names::SEGMENT;
use crate::library::renditions::{find_set, read_text, subtitles_of_file, SetError, Sidecar};
use crate::library::{FileVersion, Library, LibraryError};
use crate::page::assets::{DASH_JS, DASH_JS_VERSION, DASH_PROTECTION_JS, HLS_JS, HLS_JS_VERSION};
use crate::protect::packaged as protected;
use sluice_media::hls::webvtt::WebVtt;

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
    /// How the title is encrypted (`[[protect]]`), when it is.
    pub protection: Option<crate::protect::TitleProtection>,
    /// The scrubbing thumbnails the manifests list, when they are made.
    pub thumbnails: Option<&'a crate::thumbs::Thumbnails>,
    /// When the file is a recording still being written: the wall-clock time it starts. Its
    /// playlists are then `EVENT` ones and its MPD dynamic.
    pub growing_since: Option<std::time::SystemTime>,
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
    let (dir, name) = relative.rsplit_once('/').unwrap_or(("", relative));
    let manifest = |text: String| Ok(vec![Segment::Bytes(text.into_bytes())]);
    let protection = hls.protection.as_ref();
    let keyed = |text: String, key: fn(&str, &crate::protect::TitleProtection) -> String| match protection {
        Some(title) => key(&text, title),
        None => text,
    };
    let parts: Result<Vec<Segment>, Response> = match &hls.resource {
        Resource::Master => {
            let subtitles = subtitles_of_file(library, dir, name, may_block)?;
            let mut master = master_playlist(&[Rendition { prefix: "", index }], &subtitle_refs(&subtitles));
            // I-frame fragments and thumbnails are clear, so an encrypted title lists none.
            if protection.is_none() {
                if let Ok(tables) = library.tables(relative, version, may_block)? {
                    master.push_str(&iframes::stream_inf(&tables, index, ""));
                    master.push_str(&crate::thumbs::stream_inf(hls.thumbnails, &tables, index, ""));
                }
            }
            manifest(keyed(master, protected::master))
        }
        Resource::Media => manifest(growing(
            keyed(media_playlist(index), |text, _| protected::media(text)),
            hls.growing_since,
        )),
        Resource::Init => Ok(vec![Segment::Bytes(packaging.init.to_vec())]),
        Resource::Segment(n) => segment_parts(library, hls, index, *n, None, may_block)?,
        Resource::TrackPlaylist(which) if index.has(*which) => {
            match library.tables(relative, version, may_block)? {
                Ok(tables) => {
                    let text = keyed(track_playlist(index, &tables, *which), protected::track_playlist);
                    manifest(growing(text, hls.growing_since))
                }
                Err(reason) => Err(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
            }
        }
        Resource::TrackInit(which) => match (packaging.track_init(*which), protection) {
            (Some(init), Some(title)) => match protected::track_init(init, title) {
                Ok(init) => Ok(vec![Segment::Bytes(init)]),
                Err(e) => Err(failure(Status::INTERNAL_SERVER_ERROR, &e)),
            },
            (Some(init), None) => Ok(vec![Segment::Bytes(init.to_vec())]),
            (None, _) => Err(Response::error(Status::NOT_FOUND)),
        },
        Resource::TrackSegment(which, n) if index.has(*which) => {
            segment_parts(library, hls, index, *n, Some(*which), may_block)?
        }
        Resource::TrackPlaylist(_) | Resource::TrackSegment(..) => Err(Response::error(Status::NOT_FOUND)),
        Resource::Mpd => match library.tables(relative, version, may_block)? {
            Ok(tables) => {
                let subtitles = subtitles_of_file(library, dir, name, may_block)?;
                let rendition = MpdRendition { prefix: "", index, file: &tables };
                let text = mpd::manifest(&[rendition], &subtitle_refs(&subtitles));
                // I-frame fragments are clear, so an encrypted title has no trick-mode set.
                let text = match protection {
                    Some(_) => without_trick_mode(text),
                    None => crate::thumbs::with_image_set(hls.thumbnails, text, &tables, index, ""),
                };
                let text = match hls.growing_since {
                    // Media time 0 is where the recording's first segment starts, less its time.
                    Some(start) => {
                        let origin = index.start_ticks(0) as f64 / f64::from(index.timescale().max(1));
                        let zero =
                            start.checked_sub(std::time::Duration::from_secs_f64(origin)).unwrap_or(start);
                        mpd::as_dynamic(&text, zero, index.segment_duration(0).max(1.0))
                    }
                    None => text,
                };
                match protection.map(|title| protected::mpd(&text, relative, title)) {
                    None => manifest(text),
                    Some(Some(text)) => manifest(text),
                    Some(None) => {
                        Err(failure(Status::NOT_FOUND, "this title is encrypted with AES-128 for HLS only"))
                    }
                }
            }
            Err(reason) => Err(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
        },
        Resource::Subtitles(language) => {
            let subtitles = subtitles_of_file(library, dir, name, may_block)?;
            match subtitles.iter().find(|s| &s.language == language) {
                Some(_) => manifest(subtitles_playlist(index, language)),
                None => Err(Response::error(Status::NOT_FOUND)),
            }
        }
        Resource::SubtitlesSegment(..) | Resource::TextInit(_) | Resource::TextSegment(..) => {
            let subtitles = subtitles_of_file(library, dir, name, may_block)?;
            subtitles_resource(library, dir, &subtitles, index, &hls.resource, may_block)?
                .map(|bytes| vec![Segment::Bytes(bytes)])
        }
    };
    let parts = match parts {
        Ok(parts) => parts,
        Err(response) => return Ok(response),
    };
    // Segments depend on the file and on the segment target: both go into the tag. Manifests
    // also depend on the folder (its subtitles), and subtitles segments on their sidecar: their
    // tag is their bytes'.
    let etag = if hls.resource.is_manifest() || hls.resource.is_from_subtitles() {
        Some(manifest_tag(&parts))
    } else {
        version.entity_tag().filter(|t| t.ends_with('"')).map(|file_tag| {
            // An encrypted segment changes with its key.
            let key = protection.map(|p| format!("-k{}", p.fingerprint())).unwrap_or_default();
            let (tag, target) = (&file_tag[..file_tag.len() - 1], library.catalogue().segment().as_millis());
            format!("{tag}-hls{target}{key}\"")
        })
    };
    let ranges = (hls.max_ranges, hls.boundary);
    let response = packaged_response(req, parts, &hls.resource, version.modified(), etag, ranges);
    library.sendable(req, version, response, may_block)
}

/// A media playlist as an `EVENT` one while its file is recorded (`since` set).
fn growing(text: String, since: Option<std::time::SystemTime>) -> String {
    match since {
        Some(_) => sluice_media::hls::playlist::as_event(&text),
        None => text,
    }
}

/// The response for a packaged resource's parts: ranges, validators, caching and CORS headers.
fn packaged_response(
    req: &Request<'_>,
    parts: Vec<Segment>,
    resource: &Resource,
    modified: Option<std::time::SystemTime>,
    etag: Option<String>,
    (max_ranges, boundary): (usize, u64),
) -> Response {
    let kind = (resource.content_type(), resource.is_manifest());
    packaged(req, parts, kind, modified, etag, (max_ranges, boundary))
}

/// The response for the parts of a packaged resource of `content_type` that is a manifest or
/// not (`kind`): ranges, validators, caching and CORS headers.
pub(crate) fn packaged(
    req: &Request<'_>,
    parts: Vec<Segment>,
    (content_type, is_manifest): (&'static str, bool),
    modified: Option<std::time::SystemTime>,
    etag: Option<String>,
    (max_ranges, boundary): (usize, u64),
) -> Response {
    let len = parts.iter().map(Segment::len).sum();
    let meta = FileMeta { len, modified, content_type, etag: None };
    // Manifests are revalidated (cheap with the ETag) so a replaced file is seen at once;
    // segments keep their URL for the file's life and can be cached.
    let cache_control = if is_manifest { "no-cache" } else { "public, max-age=3600" };
    entity_response(req, parts, &meta, etag, max_ranges, boundary)
        .with_header("Cache-Control", cache_control)
        .with_header("Access-Control-Allow-Origin", "*")
}

/// A media segment as parts: the generated header, then slices of the file (sent with the
/// engine's send strategy). `Err` is the response to give instead (no such segment).
fn segment_parts(
    library: &Library,
    hls: &HlsRequest<'_>,
    index: &sluice_media::hls::SegmentIndex,
    n: usize,
    only: Option<Packaged>,
    may_block: bool,
) -> Result<Result<Vec<Segment>, Response>, LibraryError> {
    let (relative, version) = (hls.relative, hls.version);
    if n >= index.segments() {
        return Ok(Err(Response::error(Status::NOT_FOUND)));
    }
    // A kept encrypted segment is the same bytes for every viewer of this version and key.
    // Clear segments are not kept: sent from memory they cost a copy that `sendfile` does not,
    // and HLS viewers at a quarter core fell from 967 held to 336 when their per-track segments
    // were (docs/BENCHMARKS.md, "HLS and DASH viewers").
    let kept = library.segments();
    let kept_as = (hls.protection.as_ref())
        .zip(version.entity_tag().filter(|_| kept.is_enabled()))
        .map(|(title, tag)| format!("{relative}\n{tag}\n{}\n{n}\n{only:?}", title.fingerprint()));
    if let Some(parts) = kept_as.as_deref().and_then(|key| kept.get(key)) {
        return Ok(Ok(parts));
    }
    // Encrypting reads and transforms every byte: never on an event loop.
    if hls.protection.is_some() && !may_block {
        return Err(LibraryError::WouldBlock);
    }
    let tables = match library.tables(relative, version, may_block)? {
        Ok(tables) => tables,
        // The description was made from tables that parsed: only a change of the file between
        // the two reads gets here.
        Err(reason) => return Ok(Err(failure(Status::INTERNAL_SERVER_ERROR, &reason))),
    };
    let plan = match only {
        None => media_segment(&tables, index, n),
        Some(which) => track_media_segment(&tables, index, which, n),
    };
    let plan = match plan {
        Ok(plan) => plan,
        Err(HlsError::NoSuchSegment(_)) => return Ok(Err(Response::error(Status::NOT_FOUND))),
        Err(e) => {
            tracing::warn!(path = relative, segment = n, "HLS: cannot package the segment: {e}");
            return Ok(Err(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string())));
        }
    };
    if let Some(title) = &hls.protection {
        return Ok(match protected::segment(library, version, &tables, index, &plan, n, only, title)? {
            Ok(parts) => Ok(match kept_as {
                Some(key) => kept.keep(key, parts),
                None => parts,
            }),
            Err(e) => {
                tracing::warn!(path = relative, segment = n, "cannot encrypt the segment: {e}");
                Err(failure(Status::INTERNAL_SERVER_ERROR, &e))
            }
        });
    }
    let file = library.body_file(version);
    let mut parts = Vec::with_capacity(plan.ranges.len() + 1);
    parts.push(Segment::Bytes(plan.header));
    parts.extend(plan.ranges.into_iter().map(|r| {
        Segment::File(FileSlice { file: std::sync::Arc::clone(&file), offset: r.start, len: r.end - r.start })
    }));
    Ok(Ok(parts))
}

/// Largest WebVTT sidecar segmented (a feature film's subtitles are some 100 KB).
const MAX_SUBTITLES: u64 = 4 << 20;

/// A resource made from the sidecar of a language among the title's `subtitles`, cut at the
/// segments of `index`: a WebVTT segment (HLS), or the text track's init or media segment
/// (DASH). `Err` is the response to give instead.
fn subtitles_resource(
    library: &Library,
    dir: &str,
    subtitles: &[Sidecar],
    index: &sluice_media::hls::SegmentIndex,
    resource: &Resource,
    may_block: bool,
) -> Result<Result<Vec<u8>, Response>, LibraryError> {
    let (language, segment) = match resource {
        Resource::SubtitlesSegment(language, n) | Resource::TextSegment(language, n) => (language, Some(*n)),
        Resource::TextInit(language) => (language, None),
        _ => return Ok(Err(Response::error(Status::NOT_FOUND))),
    };
    let Some(sub) = subtitles.iter().find(|s| &s.language == language) else {
        return Ok(Err(Response::error(Status::NOT_FOUND)));
    };
    if segment.is_some_and(|n| n >= index.segments()) {
        return Ok(Err(Response::error(Status::NOT_FOUND)));
    }
    let relative = if dir.is_empty() { sub.name.clone() } else { format!("{dir}/{}", sub.name) };
    let text = match read_text(library, &relative, MAX_SUBTITLES, may_block) {
        Ok(text) => text,
        Err(SetError::Library(e)) => return Err(e),
        Err(SetError::NotFound) => return Ok(Err(Response::error(Status::NOT_FOUND))),
        Err(e) => return Ok(Err(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string()))),
    };
    let cannot = |e: &dyn std::fmt::Display| {
        tracing::warn!(path = relative, "subtitles: cannot segment {relative}: {e}");
        Ok(Err(failure(Status::INTERNAL_SERVER_ERROR, &format!("cannot segment {relative}: {e}"))))
    };
    let vtt = match WebVtt::parse(&text) {
        Ok(vtt) => vtt,
        Err(e) => return cannot(&e),
    };
    let bytes = match (resource, segment) {
        (Resource::SubtitlesSegment(..), Some(n)) => {
            let (start, end) = index.segment_times(n);
            Ok(vtt.segment(start, end).into_bytes())
        }
        (Resource::TextSegment(..), Some(n)) => {
            wvtt::media_segment(&vtt, n, index.start_ms(n), index.start_ms(n + 1))
        }
        _ => wvtt::init_segment(&vtt),
    };
    match bytes {
        Ok(bytes) => Ok(Ok(bytes)),
        Err(e) => cannot(&e),
    }
}

/// The entity tag of a generated manifest: a hash of its text.
pub(crate) fn manifest_tag(parts: &[Segment]) -> String {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for part in parts {
        if let Segment::Bytes(bytes) = part {
            bytes.hash(&mut hasher);
        }
    }
    format!("\"m-{:016x}\"", hasher.finish())
}

fn subtitle_refs(subtitles: &[Sidecar]) -> Vec<Subtitle<'_>> {
    subtitles.iter().map(|s| Subtitle { language: &s.language }).collect()
}

/// One request for a resource of a rendition set: `/<dir>/<title>.set/<resource>`.
#[derive(Debug)]
pub struct SetRequest<'a> {
    /// The set's folder in the library (decoded, no leading or trailing slash).
    pub dir: &'a str,
    /// The title.
    pub title: &'a str,
    /// What is asked for: the master playlist, the MPD or a subtitles playlist.
    pub resource: Resource,
    /// The scrubbing thumbnails the manifests list (the first rendition's), when they are made.
    pub thumbnails: Option<&'a crate::thumbs::Thumbnails>,
    /// How the set is encrypted (`[[protect]]`, the set's key, which its renditions share), when
    /// it is.
    pub protection: Option<crate::protect::TitleProtection>,
}

/// The answer to a set's resource: 404 for a set that is not there (or a resource sets do not
/// have), 409 with the times when its renditions' keyframes do not line up, 500 with the reason
/// for a sidecar that does not parse or names files that are not there.
pub fn respond_set(
    req: &Request<'_>,
    library: &Library,
    set: &SetRequest<'_>,
    may_block: bool,
) -> Result<Response, LibraryError> {
    if !matches!(
        set.resource,
        Resource::Master
            | Resource::Mpd
            | Resource::Subtitles(_)
            | Resource::SubtitlesSegment(..)
            | Resource::TextInit(_)
            | Resource::TextSegment(..)
    ) {
        return Ok(Response::error(Status::NOT_FOUND));
    }
    let found = match find_set(library, set.dir, set.title, may_block) {
        Ok(found) => found,
        Err(SetError::Library(e)) => return Err(e),
        Err(SetError::NotFound) => return Ok(Response::error(Status::NOT_FOUND)),
        Err(e @ SetError::Misaligned(_)) => return Ok(failure(Status::CONFLICT, &e.to_string())),
        // A sidecar that does not parse is the library's problem, as a broken MP4 is: 500 with
        // the reason, and a log line.
        Err(e @ SetError::Sidecar(_)) => {
            tracing::warn!(set = set.title, "rendition set: {e}");
            return Ok(failure(Status::INTERNAL_SERVER_ERROR, &e.to_string()));
        }
    };
    let protection = set.protection.as_ref();
    // The renditions' segments are encrypted with the key their names lead to (the set's for a
    // `TITLE.<height>p.mp4`, see `crate::protect::keyed_path`): a sidecar naming another file
    // would list segments under another key than the one the manifests signal.
    if let Some(other) = found.members.iter().find(|m| {
        protection.is_some() && crate::library::renditions::rendition_height(&m.name, set.title).is_none()
    }) {
        let why = format!(
            "{} is not named {}.<height>p.mp4: the renditions of an encrypted set share its key, \
             which a rendition's name leads to",
            other.name, set.title
        );
        return Ok(failure(Status::CONFLICT, &why));
    }
    let prefixes: Vec<String> =
        found.members.iter().map(|m| format!("../{}/", utf8_percent_encode(&m.name, SEGMENT))).collect();
    let subtitles = subtitle_refs(&found.subtitles);
    let indexes: Vec<&sluice_media::hls::SegmentIndex> =
        found.members.iter().filter_map(|m| m.index()).collect();
    let body = match &set.resource {
        Resource::Master => {
            let renditions: Vec<Rendition<'_>> =
                indexes.iter().zip(&prefixes).map(|(index, prefix)| Rendition { prefix, index }).collect();
            let mut master = master_playlist(&renditions, &subtitles);
            // Each rendition's keyframes as an I-frame stream; I-frame fragments and thumbnails
            // are clear, so an encrypted set lists none.
            for (m, prefix) in found.members.iter().zip(&prefixes).filter(|_| protection.is_none()) {
                let Some(index) = m.index() else { continue };
                if let Ok(tables) = library.tables(&m.relative, &m.version, may_block)? {
                    master.push_str(&iframes::stream_inf(&tables, index, prefix));
                    // One image stream is enough to scrub with: the first rendition's.
                    if m.relative == found.members[0].relative {
                        let thumbs = crate::thumbs::stream_inf(set.thumbnails, &tables, index, prefix);
                        master.push_str(&thumbs);
                    }
                }
            }
            match protection {
                Some(title) => protected::master(&master, title).into_bytes(),
                None => master.into_bytes(),
            }
        }
        Resource::Mpd => {
            let mut tables = Vec::with_capacity(found.members.len());
            for m in &found.members {
                match library.tables(&m.relative, &m.version, may_block)? {
                    Ok(t) => tables.push(t),
                    Err(reason) => return Ok(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
                }
            }
            let renditions: Vec<MpdRendition<'_>> = indexes
                .iter()
                .zip(&prefixes)
                .zip(&tables)
                .map(|((index, prefix), file)| MpdRendition { prefix, index, file })
                .collect();
            let text = mpd::manifest(&renditions, &subtitles);
            match (protection, renditions.first(), prefixes.first()) {
                (Some(title), ..) => {
                    let name = format!("{}{}", set.title, crate::library::renditions::SET_SUFFIX);
                    let relative = if set.dir.is_empty() { name } else { format!("{}/{name}", set.dir) };
                    match protected::mpd(&without_trick_mode(text), &relative, title) {
                        Some(text) => text.into_bytes(),
                        None => {
                            let why = "this set is encrypted with AES-128 for HLS only";
                            return Ok(failure(Status::NOT_FOUND, why));
                        }
                    }
                }
                (None, Some(first), Some(prefix)) => {
                    crate::thumbs::with_image_set(set.thumbnails, text, first.file, first.index, prefix)
                        .into_bytes()
                }
                _ => text.into_bytes(),
            }
        }
        // Subtitles follow the first rendition's segments (they all line up).
        Resource::Subtitles(language) => {
            match (subtitles.iter().find(|s| s.language == language), indexes.first()) {
                (Some(_), Some(index)) => subtitles_playlist(index, language).into_bytes(),
                _ => return Ok(Response::error(Status::NOT_FOUND)),
            }
        }
        resource @ (Resource::SubtitlesSegment(..) | Resource::TextInit(_) | Resource::TextSegment(..)) => {
            let Some(index) = indexes.first() else { return Ok(Response::error(Status::NOT_FOUND)) };
            match subtitles_resource(library, set.dir, &found.subtitles, index, resource, may_block)? {
                Ok(bytes) => bytes,
                Err(response) => return Ok(response),
            }
        }
        _ => return Ok(Response::error(Status::NOT_FOUND)),
    };
    let parts = vec![Segment::Bytes(body)];
    let etag = Some(manifest_tag(&parts));
    // A manifest is small: one range at most, no multipart.
    Ok(packaged_response(req, parts, &set.resource, None, etag, (1, 0)))
}

/// The vendored hls.js the library page loads: immutable for a build, so cached for a year and
/// validated by its version.
pub fn player_script(req: &Request<'_>) -> Response {
    vendored_script(req, HLS_JS, "hls.js", HLS_JS_VERSION)
}

/// The vendored dash.js the library page loads when DASH is chosen, served like hls.js.
pub fn dash_player_script(req: &Request<'_>) -> Response {
    vendored_script(req, DASH_JS, "dash.js", DASH_JS_VERSION)
}

/// dash.js's EME module, served like dash.js, which the page loads for encrypted titles.
pub fn dash_protection_script(req: &Request<'_>) -> Response {
    vendored_script(req, DASH_PROTECTION_JS, "dash.protection.js", DASH_JS_VERSION)
}

fn vendored_script(req: &Request<'_>, script: &'static [u8], name: &str, version: &str) -> Response {
    let meta = FileMeta {
        len: script.len() as u64,
        modified: None,
        content_type: "text/javascript; charset=utf-8",
        etag: None,
    };
    let etag = Some(format!("\"{name}-{version}-{:x}\"", script.len()));
    entity_response(req, vec![Segment::Static(script)], &meta, etag, 1, 0)
        .with_header("Cache-Control", "public, max-age=31536000")
}

/// An error response saying why, in plain text (the reason names the file and the problem).
pub(crate) fn failure(status: Status, reason: &str) -> Response {
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

/// `text` (an MPD this module wrote) without its trick-mode `AdaptationSet`.
fn without_trick_mode(text: String) -> String {
    let Some(mark) = text.find("http://dashif.org/guidelines/trickmode") else { return text };
    let Some(start) = text[..mark].rfind("  <AdaptationSet") else { return text };
    let Some(end) = text[mark..].find("</AdaptationSet>\n").map(|e| mark + e + "</AdaptationSet>\n".len())
    else {
        return text;
    };
    format!("{}{}", &text[..start], &text[end..])
}
