//! sluice's content store: where uploads go and, later, what a library is read from.
//!
//! One API ([`Store`], [`ObjectWriter`]) over two backends: a local directory ([`LocalStore`], the
//! library root, the default) and any S3-compatible object store ([`S3Store`], through the
//! `object_store` crate: AWS, SeaweedFS, MinIO, Ceph). Writes are streamed, verified and atomic:
//! an [`ObjectWriter`] that is dropped without [`ObjectWriter::commit`] leaves nothing behind (no
//! temporary file, no object, no open multipart upload), and a checksum mismatch stores nothing.
//! Reads are listing, metadata and ranged reads, which is what a cache of slices in front of a
//! remote store needs. This crate does not speak HTTP: status codes are the server's business.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod beneath;
pub mod cache;
mod checksum;
mod error;
pub mod gzip;
mod key;
mod local;
mod location;
mod s3;
#[allow(unsafe_code)]
mod sys;

use std::ops::Range;
use std::time::SystemTime;

pub use cache::{CacheConfig, CacheError, CacheStats, ObjectVersion, SliceCache};
pub use checksum::{Checksum, ChecksumError, Hasher};
pub use error::{one_line, StoreError};
pub use key::{derived_key, gzip_form_name, is_reserved, listed_name, Key, KeyError, RESERVED_PREFIX};
pub use local::{LocalStore, TEMP_PREFIX};
pub use location::{Location, LocationError, S3Location};
pub use s3::{S3Config, S3Store};
pub use sys::memory_file;

/// What the store knows about one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// The object's key.
    pub key: String,
    /// Its size in bytes.
    pub len: u64,
    /// Its entity tag, quoted as the `ETag` header carries it (the same value a GET of it serves).
    pub etag: String,
    /// When it was last written, when the backend says.
    pub modified: Option<SystemTime>,
    /// `Some("gzip")` when the stored bytes are the gzip form of the object.
    pub encoding: Option<String>,
}

/// When a write (or delete) may happen.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Condition {
    /// Always.
    #[default]
    Always,
    /// Only when no object has this key (`If-None-Match: *`).
    CreateOnly,
    /// Only when the object exists with one of these entity tags (`If-Match`); `*` is any.
    IfMatch(Vec<String>),
}

impl Condition {
    /// Whether an object in this state (`None`: absent) lets the operation proceed.
    pub fn allows(&self, current: Option<&ObjectMeta>) -> bool {
        match (self, current) {
            (Condition::Always, _) => true,
            (Condition::CreateOnly, current) => current.is_none(),
            (Condition::IfMatch(_), None) => false,
            (Condition::IfMatch(tags), Some(meta)) => {
                // Strong comparison (RFC 9110 §13.1.1): a weak tag never matches.
                tags.iter().any(|t| t == "*" || (!t.starts_with("W/") && *t == meta.etag))
            }
        }
    }
}

/// How to write one object.
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    /// When the write may happen.
    pub condition: Condition,
    /// A digest the payload must match, or nothing is stored.
    pub checksum: Option<Checksum>,
    /// The `Content-Type` to record where the backend keeps one.
    pub content_type: Option<String>,
    /// `Content-Encoding` to record (a gzip-stored object).
    pub content_encoding: Option<String>,
    /// Find out whether the write replaced an object ([`Committed::created`]); costs a HEAD
    /// request on S3 when no condition needs one anyway, so a batch writer leaves it off.
    pub report_created: bool,
}

/// What a committed write did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// Whether the key was new (201) rather than replaced (204); `true` when not asked for
    /// ([`PutOptions::report_created`]) and unknown.
    pub created: bool,
    /// The object as stored.
    pub meta: ObjectMeta,
    /// The length of the gzip form kept beside it, if one was ([`Store::keeps_gzip_beside`]).
    pub gzip_beside: Option<u64>,
}

/// A content store: objects under keys, written atomically, read whole or by range.
pub trait Store: Send + Sync + std::fmt::Debug {
    /// The object's metadata, or `None` when there is none.
    fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError>;

    /// Every object whose key starts with `prefix` (a directory's keys end in `/`).
    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError>;

    /// Bytes `range` of the object (a slice for a cache).
    fn read_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>, StoreError>;

    /// Bytes `range` of the object only while its entity tag is `etag` (`If-Match`), else
    /// [`StoreError::PreconditionFailed`]: a cache filling one version's slices must never get
    /// another's bytes. The default checks the tag, then reads (a local root, where a reader of a
    /// replaced file keeps the old one anyway); S3 sends one conditional GET.
    fn read_range_if(&self, key: &Key, range: Range<u64>, etag: &str) -> Result<Vec<u8>, StoreError> {
        match self.head(key)? {
            Some(meta) if meta.etag == etag => self.read_range(key, range),
            Some(_) => Err(StoreError::PreconditionFailed),
            None => Err(StoreError::NotFound),
        }
    }

    /// Starts writing an object. Nothing is visible under `key` until the writer commits, and a
    /// writer dropped before that leaves nothing behind.
    fn put(&self, key: &Key, options: PutOptions) -> Result<Box<dyn ObjectWriter>, StoreError>;

    /// Removes an object; [`StoreError::NotFound`] when there is none.
    fn delete(&self, key: &Key, condition: &Condition) -> Result<(), StoreError>;

    /// Whether a gzip form is kept beside the plain object (a local root: the file stays under
    /// its own name, for backups and for anything else reading the folder, with the gzip form in
    /// a hidden file next to it) rather than being the object itself (an object store: one
    /// object stored with `Content-Encoding: gzip`, which S3 clients decode).
    fn keeps_gzip_beside(&self) -> bool {
        false
    }
}

/// One object being written. Dropping it without [`ObjectWriter::commit`] aborts the write.
pub trait ObjectWriter: Send {
    /// The next bytes of the object.
    fn write(&mut self, data: &[u8]) -> Result<(), StoreError>;

    /// Makes the object visible, if the checksum and the condition allow.
    fn commit(self: Box<Self>) -> Result<Committed, StoreError>;
}

/// Wraps a backend's writer with the checksum check, so both backends verify the same way.
pub(crate) struct Verified<W> {
    inner: W,
    hasher: Option<(Checksum, Hasher)>,
}

impl<W: ObjectWriter> Verified<W> {
    pub(crate) fn new(inner: W, checksum: Option<Checksum>) -> Self {
        let hasher = checksum.map(|c| {
            let h = c.hasher();
            (c, h)
        });
        Verified { inner, hasher }
    }
}

impl<W: ObjectWriter> ObjectWriter for Verified<W> {
    fn write(&mut self, data: &[u8]) -> Result<(), StoreError> {
        if let Some((_, h)) = &mut self.hasher {
            h.update(data);
        }
        self.inner.write(data)
    }

    fn commit(self: Box<Self>) -> Result<Committed, StoreError> {
        let Verified { inner, hasher } = *self;
        if let Some((expected, h)) = hasher {
            if !expected.matches(&h.finish()) {
                // `inner` is dropped here: the write is aborted and nothing is stored.
                return Err(StoreError::ChecksumMismatch);
            }
        }
        Box::new(inner).commit()
    }
}

/// Writes `bytes` as the object `key` in one go (a writer, one write, the commit).
pub fn put_bytes(
    store: &dyn Store,
    key: &Key,
    bytes: &[u8],
    options: PutOptions,
) -> Result<Committed, StoreError> {
    let mut writer = store.put(key, options)?;
    writer.write(bytes)?;
    writer.commit()
}

/// Opens the store a location names: `s3://bucket/prefix` (with `s3` giving the endpoint and
/// credentials) or a local directory. The location is parsed by [`Location`], the one parser.
pub fn open(location: &str, s3: Option<S3Config>) -> Result<Box<dyn Store>, StoreError> {
    let location: Location =
        location.parse().map_err(|e: LocationError| StoreError::Config(e.to_string()))?;
    open_location(&location, s3)
}

/// [`open`] for a parsed location.
pub fn open_location(location: &Location, s3: Option<S3Config>) -> Result<Box<dyn Store>, StoreError> {
    match location {
        Location::S3(S3Location { bucket, prefix }) => {
            let config =
                S3Config { bucket: bucket.clone(), prefix: prefix.clone(), ..s3.unwrap_or_default() };
            Ok(Box::new(S3Store::new(config)?))
        }
        Location::Local(dir) => Ok(Box::new(LocalStore::open(dir)?)),
    }
}
