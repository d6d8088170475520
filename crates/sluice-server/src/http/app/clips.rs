//! The route of MP4 clips: `FILE.mp4?start=S&end=E`, `FILE.mp4/clip/S-E.mp4` and a clip's
//! packaging, refused for encrypted titles. Cutting the `moov` and answering the clip live in
//! [`crate::http::clip`]; this module only finds which clip a request names.

use std::sync::atomic::Ordering;

use sluice_proto::http::path::LibraryPath;
use sluice_proto::http::{Request, Response};

use super::{served_encrypted, App};
use crate::library::LibraryError;

impl App {
    /// A clip of an MP4 (see [`crate::http::clip`]): `FILE.mp4?start=S&end=E`,
    /// `FILE.mp4/clip/S-E.mp4`, or the clip's packaging `FILE.mp4/clip/S-E/master.m3u8` (and
    /// the rest); `None` when the path is none of these or names no file.
    pub(super) fn clip(
        &self,
        req: &Request<'_>,
        path: &LibraryPath,
        may_block: bool,
    ) -> Result<Option<Response>, LibraryError> {
        let relative = path.relative();
        // The clip's packaging (`FILE.mp4/clip/S-E/master.m3u8` and the rest), or the clip itself.
        let (file, interval, packaged) = match crate::http::clip::packaged_clip_path(relative) {
            Some((file, interval, resource)) => (file, interval, Some(resource)),
            None => match crate::http::clip::clip_path(relative) {
                Some((file, interval)) => (file, interval, None),
                None if crate::library::names::is_mp4(relative) && !path.names_directory() => {
                    match req.query().map(sluice_media::mp4::clip::Interval::from_query) {
                        Some(Ok(Some(interval))) => (relative, Ok(interval), None),
                        Some(Err(e)) => (relative, Err(e), None),
                        Some(Ok(None)) | None => return Ok(None),
                    }
                }
                None => return Ok(None),
            },
        };
        if self.protection.guards(&format!("/{file}")) {
            return Ok(Some(served_encrypted()));
        }
        let Some(version) = self.library.file(file, may_block)? else { return Ok(None) };
        let interval = match interval {
            Ok(interval) => interval,
            Err(e) => return Ok(Some(crate::http::clip::refusal(&e))),
        };
        let request = crate::http::clip::ClipRequest {
            relative: file,
            version: &version,
            what: interval,
            max_ranges: self.settings.max_ranges,
            boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
        };
        match packaged {
            Some(resource) => {
                crate::http::clip::respond_packaged(req, &self.library, &request, &resource, may_block)
                    .map(Some)
            }
            None => crate::http::clip::respond(req, &self.library, &request, may_block).map(Some),
        }
    }
}
