//! What the responders of resources derived from one MP4 share (clips, I-frame fragments and
//! playlists, MPEG-TS, thumbnails): the request (which file, which version, what of it, the range limits) and
//! the file's packaging index with its sample tables, or the response that refuses it.
//!
//! It does not route (the app does) or package anything: each responder makes its own resource
//! from what [`source`] hands it.

use std::sync::Arc;

use sluice_media::hls::index::SegmentIndex;
use sluice_media::Mp4File;
use sluice_proto::http::{Response, Status};

use crate::http::hls::failure;
use crate::library::catalogue::{Described, Packaging};
use crate::library::{FileVersion, Library, LibraryError};

/// One request for something derived from a file of the library: `what` says which thing (an
/// I-frame resource, a TS resource, a clip's interval).
#[derive(Debug)]
pub struct DerivedRequest<'a, W> {
    /// The file's path in the library (decoded, no leading slash).
    pub relative: &'a str,
    /// The version being served.
    pub version: &'a FileVersion,
    /// What is asked for.
    pub what: W,
    /// Most byte ranges honoured.
    pub max_ranges: usize,
    /// A multipart boundary, should it be needed.
    pub boundary: u64,
}

/// A file that packages: what the catalogue says of it and its sample tables.
pub struct Source {
    described: Arc<Described>,
    /// The file's sample tables.
    pub tables: Arc<Mp4File>,
}

impl Source {
    /// Where each of the file's segments starts.
    pub fn index(&self) -> &SegmentIndex {
        &self.packaging().index
    }

    /// The file's packaging: its index and init segments.
    pub fn packaging(&self) -> &Packaging {
        match &self.described.hls {
            Ok(packaging) => packaging,
            // `source` hands out only files whose packaging succeeded.
            Err(_) => unreachable!("a Source packages"),
        }
    }
}

/// The file `request` names as a [`Source`], or the response refusing it: the packaging refusal
/// (415, 501, …) for a file that does not package, 500 for tables that could not be read.
/// [`LibraryError::WouldBlock`] when `may_block` is false and they are not at hand.
pub fn source<W>(
    library: &Library,
    request: &DerivedRequest<'_, W>,
    may_block: bool,
) -> Result<Result<Source, Response>, LibraryError> {
    let (relative, version) = (request.relative, request.version);
    let described = library.described(relative, version, may_block)?;
    if let Err(refusal) = &described.hls {
        return Ok(Err(failure(refusal.status, &refusal.reason)));
    }
    Ok(match library.tables(relative, version, may_block)? {
        Ok(tables) => Ok(Source { described, tables }),
        Err(reason) => Err(failure(Status::INTERNAL_SERVER_ERROR, &reason)),
    })
}
