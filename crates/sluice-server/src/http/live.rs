//! Live HLS and DASH over HTTP, of the streams publishers and cameras send to the live paths:
//! `/<live path>/master.m3u8` (a video variant and its audio group), `manifest.mpd` (dynamic),
//! the per-track playlists, init segments and segments (`video.m3u8`, `video-init.mp4`,
//! `video-seg-N.m4s`, the same for `audio`) and the muxed rendition (`media.m3u8`, `init.mp4`,
//! `seg-N.m4s`): the same names a file's packaging has, so the same players play both.
//!
//! Owns the responses. Where the stream is cut and each segment's bytes are the stream's
//! ([`sluice_rtsp::LiveCmaf`]: built once, shared by every viewer, sent from memory without a
//! copy); the playlists and the manifest are written by `sluice_media::hls` from an index cut
//! where the live segments are. A playlist lists the last [`LIVE_WINDOW`] segments. Answered on
//! the event loop: nothing here waits. It does not route (the app does) or authorise (the
//! access policies apply to live paths as to files, before this is asked).

use std::time::SystemTime;

use sluice_media::hls::mpd::{live_manifest, LiveTimeline, MpdRendition};
use sluice_media::hls::playlist::{
    live_playlist, master_playlist, LiveWindow as PlaylistWindow, Rendition, Resource,
};
use sluice_proto::conn::{Segment, SharedBytes};
use sluice_proto::http::{Request, Response, Status};
use sluice_rtsp::{LiveRegistry, LiveStream, LIVE_SEGMENT_TARGET};

use crate::http::hls::{failure, manifest_tag, packaged};

/// Segments a live playlist or manifest lists: Apple's authoring rules ask for at least six
/// segments' worth (and three target durations) in a live playlist's window.
pub const LIVE_WINDOW: usize = 6;

/// The answer to a request for `relative` (a decoded library path, no leading slash) when it
/// names a resource of a live path; `None` when it does not.
pub fn respond(live: &LiveRegistry, req: &Request<'_>, relative: &str) -> Option<Response> {
    let (dir, name) = relative.rsplit_once('/')?;
    let path = format!("/{dir}");
    if !live.is_live_path(&path) {
        return None;
    }
    let resource = Resource::parse(name)?;
    let Some(stream) = live.watch(&path, std::time::Instant::now()) else {
        return Some(failure(Status::NOT_FOUND, &format!("nothing is published at {path}")));
    };
    Some(answer(req, &stream, &resource))
}

fn answer(req: &Request<'_>, stream: &LiveStream, resource: &Resource) -> Response {
    let cmaf = stream.cmaf();
    let not_yet = || {
        failure(Status::SERVICE_UNAVAILABLE, "the live stream has no complete segment yet")
            .with_header("Retry-After", "1")
    };
    let manifest = |text: String| {
        let parts = vec![Segment::Bytes(text.into_bytes())];
        let tag = manifest_tag(&parts);
        respond_with(req, parts, resource, Some(tag))
    };
    let segment = |bytes: std::sync::Arc<Vec<u8>>, n: u64| {
        // The stream's start in the tag: a path published anew numbers its segments from 0 again.
        let epoch = stream
            .origin_wallclock()
            .map_or(0, |t| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_millis()));
        let tag = format!("\"l-{epoch:x}-{n}-{}\"", bytes.len());
        respond_with(req, vec![Segment::Shared(SharedBytes::new(bytes))], resource, Some(tag))
    };
    let gone = || failure(Status::NOT_FOUND, "that live segment is not (or no longer) kept");
    match resource {
        Resource::Master | Resource::Media | Resource::TrackPlaylist(_) | Resource::Mpd => {
            // Once the stream ended, its playlists and manifest list every segment still kept.
            let listed = if stream.has_ended() { sluice_rtsp::KEPT_SEGMENTS } else { LIVE_WINDOW };
            let Some(window) = cmaf.window(listed) else { return not_yet() };
            let first_sequence = window.segments.first().map_or(0, |s| s.sequence);
            let (index, file) = (&window.index, &window.file);
            match resource {
                Resource::Master => manifest(master_playlist(&[Rendition { prefix: "", index }], &[])),
                Resource::Mpd => {
                    let timeline = LiveTimeline {
                        availability_start: window.origin,
                        publish: SystemTime::now(),
                        first_sequence,
                        window: window.segments.iter().map(|s| s.duration).sum(),
                        update: LIVE_SEGMENT_TARGET.as_secs_f64(),
                        ended: stream.has_ended(),
                    };
                    manifest(live_manifest(&MpdRendition { prefix: "", index, file }, &timeline))
                }
                Resource::TrackPlaylist(which) if !index.has(*which) => gone(),
                _ => {
                    let wallclocks: Vec<SystemTime> = window.segments.iter().map(|s| s.wallclock).collect();
                    let listed =
                        PlaylistWindow { first_sequence, wallclocks: &wallclocks, ended: stream.has_ended() };
                    let which = match resource {
                        Resource::TrackPlaylist(which) => Some(*which),
                        _ => None,
                    };
                    manifest(live_playlist(index, file, which, &listed))
                }
            }
        }
        Resource::Init | Resource::TrackInit(_) => {
            let which = match resource {
                Resource::TrackInit(which) => Some(*which),
                _ => None,
            };
            match cmaf.init_segment(which) {
                Ok(bytes) => segment(bytes, u64::MAX),
                Err(_) => not_yet(),
            }
        }
        Resource::Segment(n) | Resource::TrackSegment(_, n) => {
            let which = match resource {
                Resource::TrackSegment(which, _) => Some(*which),
                _ => None,
            };
            match cmaf.segment(*n as u64, which) {
                Ok(Some(bytes)) => segment(bytes, *n as u64),
                Ok(None) => gone(),
                Err(e) => failure(Status::INTERNAL_SERVER_ERROR, &e.to_string()),
            }
        }
        // Subtitles and text tracks: a live stream carries none.
        _ => gone(),
    }
}

fn respond_with(
    req: &Request<'_>,
    parts: Vec<Segment>,
    resource: &Resource,
    tag: Option<String>,
) -> Response {
    let kind = (resource.content_type(), resource.is_manifest());
    // One range at most: a player asks for none, and a live response is never multipart.
    packaged(req, parts, kind, None, tag, (1, 0))
}
