//! A request's credentials: whether the access policies let it read a path (and which of its
//! credentials to carry on), and the carrying of them into the URLs a playlist, manifest or page
//! lists, which is answered whole for it. It does not hold the policies (`crate::access` does)
//! nor route (the app does).

use std::borrow::Cow;
use std::net::SocketAddr;

use sluice_proto::http::path::LibraryPath;
use sluice_proto::http::{Body, Request, Response, Status};

use crate::access::{Access, Decision, Presented};

/// Whether the access policies let `req` read `path`: `Ok` with the credentials to carry on to
/// the URLs a playlist lists, or the refusal to send (401 or 403, the same whether or not the
/// path exists).
pub(super) fn check_access(
    access: &Access,
    req: &Request<'_>,
    path: &LibraryPath,
    peer: SocketAddr,
) -> Result<Option<String>, Response> {
    let full = crate::access::request_path(path);
    let authorization = req.header("authorization").map(String::from_utf8_lossy);
    let bearer = authorization.as_deref().and_then(crate::access::credential);
    let method = req.method.as_str();
    let presented = Presented {
        path: &full,
        query: req.query(),
        bearer: bearer.as_deref(),
        peer: peer.ip(),
        authorization: authorization.as_deref(),
        method,
        target: crate::access::Target::Http(req.target),
    };
    let now = std::time::SystemTime::now();
    match access.check(&presented, now) {
        Decision::Allowed { carry } => Ok(carry),
        Decision::Refused(reason) => {
            let response = Response::error(Status(reason.status())).with_header("Cache-Control", "no-store");
            Err(match (reason.status(), access.challenges(&full, now)) {
                // A `users` path: Digest and Basic, as browsers, curl and players answer them.
                (401, Some([digest, basic])) => {
                    response.with_header("WWW-Authenticate", digest).with_header("WWW-Authenticate", basic)
                }
                (401, None) => response.with_header("WWW-Authenticate", "Bearer realm=\"sluice\""),
                _ => response,
            })
        }
    }
}

/// A refusal that says nothing more (and is not kept by caches).
pub(super) fn forbidden() -> Response {
    Response::error(Status::FORBIDDEN).with_header("Cache-Control", "no-store")
}

/// Whether a path names an HLS playlist, a DASH manifest or a thumbnails track (whose text lists
/// other URLs).
pub(super) fn is_manifest(relative: &str) -> bool {
    relative.ends_with(".m3u8") || relative.ends_with(".mpd") || relative.ends_with("/thumbs/thumbnails.vtt")
}

/// `answer` of `req` without its range and validators: a manifest whose URLs get a request's
/// credentials is answered whole, since its text changes with them (players ask for
/// `Range: bytes=0-`, and a partial answer would go out without them).
pub(super) fn whole<T>(req: &Request<'_>, answer: impl FnOnce(&Request<'_>) -> T) -> T {
    let conditional = ["range", "if-range", "if-none-match", "if-modified-since", "if-match"];
    let headers: Vec<httparse::Header<'_>> = req
        .headers
        .iter()
        .filter(|h| !conditional.iter().any(|c| h.name.eq_ignore_ascii_case(c)))
        .copied()
        .collect();
    answer(&Request { method: req.method, target: req.target, version: req.version, headers: &headers })
}

/// `response` with `carry` (a signed URL's or a token's parameters) appended to the URLs it
/// lists, when it is a whole HLS playlist, DASH manifest or library page; anything else as it is.
pub(super) fn carry_on(mut response: Response, carry: Option<&str>) -> Response {
    let Some(carry) = carry else { return response };
    let content_type = response.header("content-type").unwrap_or("");
    let rewrite: fn(&str, &str) -> String = if content_type.contains("mpegurl") {
        crate::access::carry_into_m3u8
    } else if content_type.contains("dash+xml") {
        crate::access::carry_into_mpd
    } else if content_type.starts_with("text/html") {
        crate::access::carry_into_page
    } else if content_type.starts_with("text/vtt") {
        // Only a thumbnails track gets here (`is_manifest`): subtitles list no URLs.
        crate::access::carry_into_thumbnail_vtt
    } else {
        return response;
    };
    if response.status != Status::OK {
        return response;
    }
    let text = match &response.body {
        Body::Bytes(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        Body::Parts(parts) => {
            let mut text = Vec::new();
            for part in parts {
                let Some(bytes) = part.in_memory() else { return response };
                text.extend_from_slice(bytes);
            }
            String::from_utf8_lossy(&text).into_owned()
        }
        _ => return response,
    };
    response.body = Body::Bytes(Cow::Owned(rewrite(&text, carry).into_bytes()));
    // The tag named the text without the credentials: a revalidation must not keep another
    // token's URLs.
    response.headers.retain(|(name, _)| !name.eq_ignore_ascii_case("etag"));
    response
}
