//! The routes of encrypted titles: which requests are an encrypted title's segments (computed
//! off the loop), its ClearKey licence and AES-128 key, and the refusal of its clear forms.
//! What `[[protect]]` says and the encryption itself live in [`crate::protect`]; this module
//! only answers requests with them.

use std::net::SocketAddr;

use sluice_proto::http::path::{normalize, LibraryPath};
use sluice_proto::http::{Method, Reply, Request, Response, Status};

use super::{check_access, forbidden, App};
use crate::protect::{licence, NoKey};

impl App {
    /// Whether `path` is a media segment of an encrypted title (its answer is computed off the
    /// loop).
    pub(super) fn encrypts(&self, path: &LibraryPath) -> bool {
        use sluice_media::hls::playlist::Resource;
        if self.protection.is_empty() {
            return false;
        }
        let Some((parent, name)) = path.relative().rsplit_once('/') else { return false };
        matches!(Resource::parse(name), Some(Resource::Segment(_) | Resource::TrackSegment(..)))
            && self.protection.guards(&format!("/{parent}"))
    }

    /// Whether `path` is a title's ClearKey licence or AES-128 key.
    pub(super) fn names_a_key(&self, path: &LibraryPath) -> bool {
        let Some((parent, name)) = path.relative().rsplit_once('/') else { return false };
        (name == licence::AES_KEY || name == licence::CLEARKEY)
            && self.protection.guards(&format!("/{parent}"))
    }

    /// `POST /<title>.mp4/clearkey` (or `/<title>.set/clearkey`): the title's ClearKey licence, to a request its
    /// `[[access]]` policy lets read the title (403 otherwise); `OPTIONS` on it is the CORS
    /// preflight of a player on another origin (which carries no credentials); other POSTs and
    /// OPTIONS are 405.
    pub(super) fn licence(&self, req: &Request<'_>, peer: SocketAddr) -> Reply {
        let not_allowed = || Response::error(Status::METHOD_NOT_ALLOWED).with_header("Allow", "GET, HEAD");
        let Some(path) = req.path().and_then(|raw| normalize(raw).ok()) else { return not_allowed().into() };
        let Some(title) = path.relative().strip_suffix(&format!("/{}", licence::CLEARKEY)) else {
            return not_allowed().into();
        };
        // A set's licence: its renditions share its key (see `crate::protect::keyed_path`).
        if !crate::library::names::is_title(title) {
            return not_allowed().into();
        }
        if req.method == Method::Options {
            return Response::error(Status::NO_CONTENT)
                .with_header("Access-Control-Allow-Origin", "*")
                .with_header("Access-Control-Allow-Methods", "POST")
                .with_header("Access-Control-Allow-Headers", "Content-Type")
                .with_header("Access-Control-Max-Age", "600")
                .into();
        }
        if let Some(access) = &self.access {
            if check_access(access, req, &path, peer).is_err() {
                return forbidden().into();
            }
        }
        match self.protection.title(&format!("/{title}")) {
            Some(Ok(title)) => Reply::Body(Box::new(licence::LicenceRequest::new(title))),
            Some(Err(NoKey)) => {
                Response::refusal(Status::SERVICE_UNAVAILABLE, "no key is configured for this title").into()
            }
            None => Response::error(Status::NOT_FOUND).into(),
        }
    }
}

/// The answer to a clear form (the file, a clip, MPEG-TS, I-frame fragments) of an encrypted title.
pub(super) fn served_encrypted() -> Response {
    Response::refusal(Status::FORBIDDEN, "this title is served encrypted, over HLS and DASH only")
}
