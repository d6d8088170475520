//! Which route a request takes, as the response-duration histograms tell routes apart
//! (`/metrics`): worked out from the request line alone, before it is answered. It does not
//! answer (the app does).

use sluice_proto::http::{Method, Request};

use crate::ops::metrics::RouteKind;

/// What `req` asks for, as the response-duration histograms tell routes apart, and the MP4 it
/// is about (its decoded library path, `/a b.mp4`), if any.
pub(super) fn route_kind(req: &Request<'_>) -> (RouteKind, Option<Box<str>>) {
    if matches!(req.method, Method::Put | Method::Delete) {
        return (RouteKind::Upload, None);
    }
    let path = req.path().unwrap_or_default();
    let decoded = |p: &str| Some(percent_encoding::percent_decode_str(p).decode_utf8_lossy().into());
    if let Some((file, _, _)) = crate::http::clip::packaged_clip_path(path.trim_start_matches('/')) {
        return (RouteKind::Hls, decoded(&format!("/{file}")));
    }
    if let Some((file, _)) = crate::http::thumbs::thumbs_path(path.trim_start_matches('/')) {
        return (RouteKind::Hls, decoded(&format!("/{file}")));
    }
    if let Some((owner, _)) = crate::http::ts::ts_path(path.trim_start_matches('/')) {
        let stream = crate::library::names::is_mp4(owner).then(|| decoded(&format!("/{owner}"))).flatten();
        return (RouteKind::Hls, stream);
    }
    // An MP4's or a rendition set's playlists, manifests and segments (HLS and DASH).
    let packaged = path
        .rsplit_once('/')
        .filter(|(parent, _)| {
            crate::library::names::is_mp4(parent) || parent.ends_with(crate::library::renditions::SET_SUFFIX)
        })
        .and_then(|(parent, name)| Some((parent, sluice_media::hls::playlist::Resource::parse(name)?)));
    if let Some((parent, resource)) = packaged {
        use sluice_media::hls::playlist::PlayedBy;
        let kind = match resource.played_by() {
            PlayedBy::Hls => RouteKind::Hls,
            PlayedBy::Dash => RouteKind::Dash,
            PlayedBy::Both => RouteKind::Segment,
        };
        return (kind, crate::library::names::is_mp4(parent).then(|| decoded(parent)).flatten());
    }
    // An MP4's or a rendition set's I-frame playlist and fragments (HLS only).
    if let Some((parent, name)) = path.rsplit_once('/') {
        if (crate::library::names::is_mp4(parent) || parent.ends_with(crate::library::renditions::SET_SUFFIX))
            && crate::http::trick::is_trick_name(name)
        {
            return (
                RouteKind::Hls,
                crate::library::names::is_mp4(parent).then(|| decoded(parent)).flatten(),
            );
        }
    }
    let stream = if crate::library::names::is_mp4(path) { decoded(path) } else { None };
    let kind = if req.header("range").is_some() { RouteKind::Range } else { RouteKind::File };
    (kind, stream)
}
