//! The media library every route serves from: a local directory or an object store, behind one
//! type.
//!
//! Owns what a library path is (a file version, a directory, nothing), listings, opening a
//! version (its length, time and entity tag), reading it at an offset, turning a response built
//! over a version's file slices into one the engine can send (the local file itself, or the
//! slice cache's files for an object store), and the [`Catalogue`] of parsed MP4 indexes that
//! RTSP, HLS, the page and `/streams` share ([`catalogue`]), and the rendition sets found by file
//! name ([`renditions`]). A local root confines every open beneath it ([`local`]); an object
//! store is read through its slice cache ([`remote`]). Calls take
//! `may_block`: false on an event loop, where anything that would wait for the origin (or for
//! another thread's `moov` read) fails with [`LibraryError::WouldBlock`], and [`answer_later`]
//! makes the same answer again in a CPU-pool job where it may wait. It does not decide
//! responses (the routes do).

pub mod catalogue;
pub mod local;
pub mod names;
pub mod remote;
pub mod renditions;
pub mod segments;

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, BufReader};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use sluice_media::mp4::{Mp4Error, Mp4File};
use sluice_proto::http::conditional::entity_tag;
use sluice_proto::http::file::{file_response, FileMeta};
use sluice_proto::http::path::{normalize, LibraryPath};
use sluice_proto::http::{Body, Method, Reply, Request, Response, Status, Version};
use sluice_store::{CacheError, Key, ObjectVersion};

pub use self::local::{unpack_demo, Entry, LocalRoot, OpenError};
use self::remote::RemoteLibrary;
use crate::library::catalogue::{Catalogue, Described, Tables, VersionKey, WouldBlock};

/// One entry of a directory listing.
#[derive(Debug, Clone)]
pub struct Listed {
    /// The file name.
    pub name: String,
    /// Whether it is a directory.
    pub is_dir: bool,
    /// Size in bytes (files).
    pub len: u64,
    /// The version's tag when the listing knows it (an object's entity tag), so the page can
    /// find its index without asking the origin for the object.
    pub tag: Option<String>,
}

/// Where the files are.
#[derive(Debug)]
enum Source {
    Local(LocalRoot),
    Remote(Arc<RemoteLibrary>),
}

/// One version of a file: what a response, an index or a stream is made from.
#[derive(Debug, Clone)]
pub enum FileVersion {
    /// A local file, open.
    Local {
        /// The open file.
        file: Arc<File>,
        /// Its metadata when opened.
        meta: std::fs::Metadata,
    },
    /// A version of an object.
    Remote(Arc<ObjectVersion>),
}

impl FileVersion {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            FileVersion::Local { meta, .. } => meta.len(),
            FileVersion::Remote(v) => v.len,
        }
    }

    /// Whether it is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// When it was written.
    pub fn modified(&self) -> Option<SystemTime> {
        match self {
            FileVersion::Local { meta, .. } => meta.modified().ok(),
            FileVersion::Remote(v) => v.modified,
        }
    }

    /// Its entity tag as responses carry it: an object's own, a local file's from its time and
    /// length (nginx's form).
    pub fn entity_tag(&self) -> Option<String> {
        match self {
            FileVersion::Local { meta, .. } => meta.modified().ok().map(|m| entity_tag(m, meta.len())),
            FileVersion::Remote(v) => Some(v.etag.clone()),
        }
    }

    /// What distinguishes this version from every other of the same path.
    fn tag(&self) -> String {
        match self {
            FileVersion::Local { meta, .. } => {
                format!(
                    "{:x}-{:x}-{:x}-{}.{}",
                    meta.dev(),
                    meta.ino(),
                    meta.len(),
                    meta.mtime(),
                    meta.mtime_nsec()
                )
            }
            FileVersion::Remote(v) => v.etag.clone(),
        }
    }
}

/// What a library path names.
#[derive(Debug)]
pub enum Found {
    /// A file, in one version.
    File(FileVersion),
    /// A directory (for an object store, a prefix some keys start with).
    Directory,
    /// Nothing.
    NotFound,
}

/// Why the library could not answer.
#[derive(Debug, thiserror::Error)]
pub enum LibraryError {
    /// The answer needs a thread that may block (the origin, or another's `moov` read).
    #[error("would block")]
    WouldBlock,
    /// There, but the server may not read it.
    #[error("permission denied")]
    Forbidden,
    /// The object store or the slice cache failed.
    #[error(transparent)]
    Cache(CacheError),
    /// The file system failed.
    #[error("{0}")]
    Io(io::Error),
}

impl From<CacheError> for LibraryError {
    fn from(e: CacheError) -> LibraryError {
        match e {
            CacheError::WouldBlock => LibraryError::WouldBlock,
            e => LibraryError::Cache(e),
        }
    }
}

impl From<WouldBlock> for LibraryError {
    fn from(_: WouldBlock) -> LibraryError {
        LibraryError::WouldBlock
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Library {
    source: Source,
    catalogue: Catalogue,
    segments: segments::EncryptedSegments,
    /// What the file slices of a response over an object name until they become cached slices.
    placeholder: Arc<File>,
}

impl Library {
    /// The directory `root`, with `catalogue`.
    pub fn local(root: &Path, catalogue: Catalogue) -> io::Result<Library> {
        let placeholder = Arc::new(File::open("/dev/null")?);
        let source = Source::Local(LocalRoot::open(root)?);
        Ok(Library { source, catalogue, segments: Default::default(), placeholder })
    }

    /// An object store through its slice cache, with `catalogue`.
    pub fn remote(remote: RemoteLibrary, catalogue: Catalogue) -> Library {
        let placeholder = Arc::clone(remote.placeholder());
        Library {
            source: Source::Remote(Arc::new(remote)),
            catalogue,
            segments: Default::default(),
            placeholder,
        }
    }

    /// Keeps up to `budget` bytes of encrypted segments for their next viewers.
    pub fn with_segment_cache(mut self, budget: u64) -> Library {
        self.segments = segments::EncryptedSegments::new(budget);
        self
    }

    /// The encrypted segments kept in memory.
    pub fn segments(&self) -> &segments::EncryptedSegments {
        &self.segments
    }

    /// The object store behind it, if it is one (its cache's metrics, its jobs).
    pub fn as_remote(&self) -> Option<&Arc<RemoteLibrary>> {
        match &self.source {
            Source::Remote(remote) => Some(remote),
            Source::Local(_) => None,
        }
    }

    /// The catalogue of MP4 indexes.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// The root directory or the store's location, for the start-up line.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Local(root) => root.root().display().to_string(),
            Source::Remote(remote) => remote.location().to_string(),
        }
    }

    /// What `path` names.
    pub fn lookup(&self, path: &LibraryPath, may_block: bool) -> Result<Found, LibraryError> {
        match &self.source {
            Source::Local(root) => match root.open_entry(path) {
                Ok(Entry::File(file, meta)) => {
                    Ok(Found::File(FileVersion::Local { file: Arc::new(file), meta }))
                }
                Ok(Entry::Directory) => Ok(Found::Directory),
                Err(OpenError::NotFound) => Ok(Found::NotFound),
                Err(OpenError::Forbidden) => Err(LibraryError::Forbidden),
                Err(OpenError::Io(e)) => Err(LibraryError::Io(e)),
            },
            Source::Remote(remote) => Ok(match remote.lookup(path, may_block)? {
                remote::Found::File(v) => Found::File(FileVersion::Remote(v)),
                remote::Found::Directory => Found::Directory,
                remote::Found::NotFound => Found::NotFound,
            }),
        }
    }

    /// The file at library-relative `relative` (already decoded), if it is one.
    pub fn file(&self, relative: &str, may_block: bool) -> Result<Option<FileVersion>, LibraryError> {
        let Some(path) = decoded_path(relative) else { return Ok(None) };
        match self.lookup(&path, may_block)? {
            Found::File(v) if !path.names_directory() => Ok(Some(v)),
            _ => Ok(None),
        }
    }

    /// The files and directories directly in `dir`, sorted, hidden names left out.
    pub fn list(&self, dir: &LibraryPath, may_block: bool) -> Result<Vec<Listed>, LibraryError> {
        match &self.source {
            Source::Local(root) => root.list(dir).map_err(LibraryError::Io),
            Source::Remote(remote) => Ok(remote.list(dir, may_block)?),
        }
    }

    /// Every file as (URL path, size, the version's tag when the listing knows it), at most
    /// `limit` (blocks for an object store's listing).
    pub fn files(&self, limit: usize) -> Vec<(String, u64, Option<String>)> {
        match &self.source {
            Source::Local(root) => root.files(limit),
            Source::Remote(remote) => remote.files(limit),
        }
    }

    /// Fills `into` with the bytes of `version` at `offset`. For an object store this starts
    /// fetching the slice after them (RTSP reads samples in order) and, on a slice not on disk,
    /// blocks when `may_block`, else fetches it in the background and fails with
    /// [`io::ErrorKind::WouldBlock`]. A local file is read at once either way (the page cache).
    pub fn read_at(
        &self,
        version: &FileVersion,
        offset: u64,
        into: &mut [u8],
        may_block: bool,
    ) -> io::Result<()> {
        match (version, &self.source) {
            (FileVersion::Local { file, .. }, _) => file.read_exact_at(into, offset),
            (FileVersion::Remote(v), Source::Remote(remote)) => {
                match remote.read_ahead(v, offset, into, may_block) {
                    Ok(()) => Ok(()),
                    Err(CacheError::WouldBlock) => Err(io::ErrorKind::WouldBlock.into()),
                    Err(e) => Err(io::Error::other(e)),
                }
            }
            (FileVersion::Remote(_), Source::Local(_)) => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    /// The bytes of `ranges` of `version`, one after the other, in one buffer (from the pool of
    /// large buffers): a packaged segment's samples, to be sent from memory.
    pub fn read_ranges(
        &self,
        version: &FileVersion,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<u8>, LibraryError> {
        let mut bytes = sluice_proto::buffers::take(ranges.iter().map(|r| (r.end - r.start) as usize).sum());
        let mut at = 0usize;
        for range in ranges {
            let len = (range.end - range.start) as usize;
            self.read_at(version, range.start, &mut bytes[at..at + len], true).map_err(|e| {
                if e.kind() == io::ErrorKind::WouldBlock {
                    LibraryError::WouldBlock
                } else {
                    LibraryError::Io(e)
                }
            })?;
            at += len;
        }
        Ok(bytes)
    }

    /// The file the slices of a response over `version` name: the local file itself, or a
    /// stand-in that [`Library::sendable`] replaces with cached slices.
    pub fn body_file(&self, version: &FileVersion) -> Arc<File> {
        match version {
            FileVersion::Local { file, .. } => Arc::clone(file),
            FileVersion::Remote(_) => Arc::clone(&self.placeholder),
        }
    }

    /// `response`, built over [`Library::body_file`], as the engine sends it: as it is for a
    /// local file, in slices of the cached files for an object (fetched when `may_block`, the
    /// rest of a cold body streaming behind its first slice).
    pub fn sendable(
        &self,
        req: &Request<'_>,
        version: &FileVersion,
        response: Response,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        match (version, &self.source) {
            (FileVersion::Remote(v), Source::Remote(remote)) => {
                Ok(remote.cached_body(req, v, response, may_block)?)
            }
            _ => Ok(response),
        }
    }

    /// `response`, built over [`Library::body_file`] as if `versions` were one file laid end to
    /// end (each with where it starts), as the engine sends it: as it is in a local library (its
    /// slices are of the files already), in slices of the cached objects in a remote one.
    pub fn joined_sendable(
        &self,
        req: &Request<'_>,
        versions: &[(&FileVersion, u64)],
        response: Response,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        let Source::Remote(remote) = &self.source else { return Ok(response) };
        let objects: Vec<(Arc<ObjectVersion>, u64)> = versions
            .iter()
            .filter_map(|(version, base)| match version {
                FileVersion::Remote(v) => Some((Arc::clone(v), *base)),
                FileVersion::Local { .. } => None,
            })
            .collect();
        Ok(remote.joined_body(req, &objects, response, may_block)?)
    }

    /// The response to `req` for the bytes of `version` (ranges, validators), sendable.
    pub fn file_response(
        &self,
        req: &Request<'_>,
        version: &FileVersion,
        content_type: &'static str,
        max_ranges: usize,
        boundary: u64,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        match (version, &self.source) {
            // An object's own entity tag and stored encoding.
            (FileVersion::Remote(v), Source::Remote(remote)) => {
                Ok(remote.file_response(req, v, max_ranges, boundary, may_block)?)
            }
            _ => {
                let meta =
                    FileMeta { len: version.len(), modified: version.modified(), content_type, etag: None };
                Ok(file_response(req, self.body_file(version), &meta, max_ranges, boundary))
            }
        }
    }

    /// The catalogue's key of `version` of the file at `relative`.
    pub fn version_key(relative: &str, version: &FileVersion) -> VersionKey {
        VersionKey { path: relative.to_string(), version: version.tag() }
    }

    /// The sample tables of `version` of the file at `relative`, from the catalogue or read
    /// (its `moov` and any `moof` headers, through the slice cache for an object).
    pub fn tables(
        &self,
        relative: &str,
        version: &FileVersion,
        may_block: bool,
    ) -> Result<Tables, LibraryError> {
        let key = Library::version_key(relative, version);
        self.catalogue.tables(&key, may_block, || self.read_tables(version))?
    }

    /// What `version` of the file at `relative` is as a video, from the catalogue or indexed.
    pub fn described(
        &self,
        relative: &str,
        version: &FileVersion,
        may_block: bool,
    ) -> Result<Arc<Described>, LibraryError> {
        let key = Library::version_key(relative, version);
        self.catalogue.described(&key, may_block, || self.read_tables(version))?
    }

    /// What the catalogue knows of the file at `relative` in the version `tag` names (a
    /// listing's entity tag), without reading anything.
    pub fn known(&self, relative: &str, tag: &str) -> Option<Arc<Described>> {
        self.catalogue.peek_described(&VersionKey { path: relative.to_string(), version: tag.to_string() })
    }

    fn read_tables(&self, version: &FileVersion) -> Result<Tables, LibraryError> {
        let read = match (version, &self.source) {
            (FileVersion::Local { file, meta }, _) => Mp4File::read(BufReader::new(&**file), meta.len()),
            (FileVersion::Remote(v), Source::Remote(remote)) => {
                // Large buffered reads: each read is a slice lookup (or a fetch).
                Mp4File::read(BufReader::with_capacity(256 << 10, remote.cache().reader(v)), v.len)
            }
            (FileVersion::Remote(_), Source::Local(_)) => {
                return Err(LibraryError::Io(io::ErrorKind::NotFound.into()))
            }
        };
        match read {
            Ok(file) => Ok(Ok(Arc::new(file))),
            // A truncated file is the file's problem; any other read error is the server's or
            // the origin's, and is not remembered against the file.
            Err(Mp4Error::Io(e)) if e.kind() != io::ErrorKind::UnexpectedEof => {
                let e = match e.into_inner().map(|inner| inner.downcast::<CacheError>()) {
                    Some(Ok(cache)) => return Err(LibraryError::from(*cache)),
                    Some(Err(other)) => io::Error::other(other),
                    None => io::Error::other("read failed"),
                };
                Err(LibraryError::Io(e))
            }
            Err(e) => {
                tracing::debug!("{e}");
                Ok(Err(Arc::from(e.to_string())))
            }
        }
    }

    /// `key` was written or deleted through this server: the cache and catalogue forget it.
    pub fn changed(&self, key: &Key) {
        if let Source::Remote(remote) = &self.source {
            remote.cache().forget(key);
        }
        self.catalogue.forget(key.as_str());
    }
}

/// A request copied out of the connection's buffer, so that a job can answer it later.
#[derive(Debug)]
pub struct OwnedRequest {
    method: Method,
    target: String,
    version: Version,
    headers: Vec<(String, Vec<u8>)>,
}

impl OwnedRequest {
    /// A copy of `req`.
    pub fn of(req: &Request<'_>) -> OwnedRequest {
        OwnedRequest {
            method: req.method,
            target: req.target.to_string(),
            version: req.version,
            headers: req.headers.iter().map(|h| (h.name.to_string(), h.value.to_vec())).collect(),
        }
    }

    /// Calls `f` with the request as the handler first saw it.
    pub fn with<R>(&self, f: impl FnOnce(&Request<'_>) -> R) -> R {
        let headers: Vec<httparse::Header<'_>> =
            self.headers.iter().map(|(name, value)| httparse::Header { name, value }).collect();
        f(&Request { method: self.method, target: &self.target, version: self.version, headers: &headers })
    }
}

/// Answers now when `answer` can without blocking, else in a job where it may block. A job
/// whose object changed under it answers again once, against the new version.
pub fn answer_later<F>(req: &Request<'_>, answer: F) -> Reply
where
    F: Fn(&Request<'_>, bool) -> Result<Response, LibraryError> + Send + 'static,
{
    match answer(req, false) {
        Ok(response) => return response.into(),
        Err(LibraryError::WouldBlock) => {}
        Err(e) => return error_response(req.target, e).into(),
    }
    let owned = OwnedRequest::of(req);
    Reply::Compute(Box::new(move || {
        owned.with(|req| {
            let result = match answer(req, true) {
                Err(LibraryError::Cache(CacheError::Changed)) => answer(req, true),
                other => other,
            };
            result.unwrap_or_else(|e| error_response(req.target, e)).into()
        })
    }))
}

/// The status a library failure calls for, with a log line.
pub fn error_response(target: &str, e: LibraryError) -> Response {
    let status = match &e {
        LibraryError::Cache(CacheError::NotFound) => return Response::error(Status::NOT_FOUND),
        LibraryError::Forbidden => return Response::error(Status::FORBIDDEN),
        LibraryError::Cache(CacheError::Timeout(_)) => Status::GATEWAY_TIMEOUT,
        LibraryError::Cache(CacheError::Origin(_) | CacheError::Changed | CacheError::WouldBlock)
        | LibraryError::WouldBlock => Status::BAD_GATEWAY,
        LibraryError::Cache(CacheError::Io(_)) | LibraryError::Io(_) => Status::INTERNAL_SERVER_ERROR,
    };
    let origin = matches!(e, LibraryError::Cache(_));
    tracing::warn!(uri = target, status = status.0, "{}{e}", if origin { "origin: " } else { "" });
    Response {
        status,
        headers: vec![("Cache-Control", Cow::Borrowed("no-store"))],
        body: Body::Bytes(Cow::Owned(format!("{} {}\n", status.0, status.reason()).into_bytes())),
    }
}

/// The library path of `relative`, a path that is already decoded (a [`LibraryPath`]'s, or one
/// built from it): `%` is encoded again so that normalising does not decode it twice.
pub fn decoded_path(relative: &str) -> Option<LibraryPath> {
    normalize(&format!("/{}", relative.replace('%', "%25"))).ok()
}

#[cfg(test)]
mod tests;
