//! HLS over HTTP: `/<file>.mp4/master.m3u8`, `media.m3u8`, `init.mp4` and `seg-N.m4s`,
//! packaged on the fly from the MP4 by `sluice_media::hls`.
//!
//! Owns the two caches and the responses. The segment index of a file (16 bytes a segment, plus
//! its init segment, about 1 KB) is built once per file version (length and modification time)
//! and kept for many files within [`INDEX_BUDGET`]; files that fail to package are remembered
//! too, so a broken file is parsed and logged once, not on every request. The full sample tables,
//! which a media segment's `moof` needs, are kept for the [`MAX_TABLES`] files asked for last
//! (a client plays one file at a time). A segment goes out as a generated header followed by
//! slices of the open file, so the engine sends the samples with sendfile, splice or copy. It does
//! not route requests (the app does) or write boxes (`sluice_media::hls` does).

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::BufReader;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use sluice_media::hls::playlist::{master_playlist, media_playlist, Resource};
use sluice_media::hls::{init_segment, media_segment, HlsError, SegmentIndex};
use sluice_media::mp4::Mp4File;
use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::conditional::entity_tag;
use sluice_proto::http::file::{entity_response, FileMeta};
use sluice_proto::http::{Body, Request, Response, Status};

use crate::page::{VideoInfo, HLS_JS, HLS_JS_VERSION};

/// Bytes of segment indexes and init segments kept; past it the cache starts over. 1,000
/// one-hour files at 6 s segments take about 11 MB (10 KB of index and 1 KB of init each).
pub const INDEX_BUDGET: usize = 32 << 20;

/// Files whose full sample tables are kept (24 bytes a sample: an hour of 30 fps video with
/// 48 kHz audio is 6.6 MB).
pub const MAX_TABLES: usize = 4;

/// Files a library page may index while it renders (each reads a `moov` box: a few ms for an
/// hour of video); the page shows the others' details once they are indexed.
pub const INDEXED_PER_PAGE: usize = 64;

/// What a cache entry is valid for: the file's length and modification time.
type Version = (u64, Option<SystemTime>);

/// A file's packaging, or why it has none.
#[derive(Clone)]
enum Packaging {
    Ready { index: Arc<SegmentIndex>, init: Arc<[u8]> },
    Failed { status: Status, reason: Arc<str> },
}

struct Cached {
    version: Version,
    packaging: Packaging,
    cost: usize,
}

#[derive(Default)]
struct Caches {
    packaging: HashMap<String, Cached>,
    cost: usize,
    /// Most recently used last.
    tables: VecDeque<(String, Version, Arc<Mp4File>)>,
}

/// See the module docs.
pub struct HlsPackager {
    segment: Duration,
    caches: Mutex<Caches>,
}

impl std::fmt::Debug for HlsPackager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HlsPackager").field("segment", &self.segment).finish_non_exhaustive()
    }
}

/// One request for an HLS resource of an opened MP4.
pub struct HlsRequest<'a> {
    /// The file's path in the library (the cache key and what logs name).
    pub key: &'a str,
    /// The opened file.
    pub file: File,
    /// Its metadata.
    pub meta: std::fs::Metadata,
    /// What is asked for.
    pub resource: Resource,
    /// Most byte ranges honoured.
    pub max_ranges: usize,
    /// A multipart boundary, should it be needed.
    pub boundary: u64,
}

impl HlsPackager {
    /// A packager cutting segments of about `segment`.
    pub fn new(segment: Duration) -> HlsPackager {
        HlsPackager { segment, caches: Mutex::new(Caches::default()) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Caches> {
        self.caches.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The answer to `hls`.
    pub fn respond(&self, req: &Request<'_>, hls: HlsRequest<'_>) -> Response {
        let version = (hls.meta.len(), hls.meta.modified().ok());
        let (index, init) = match self.packaging(&hls, version) {
            Packaging::Ready { index, init } => (index, init),
            Packaging::Failed { status, reason } => return failure(status, &reason),
        };
        let file = Arc::new(hls.file);
        let parts = match hls.resource {
            Resource::Master => vec![Segment::Bytes(master_playlist(&index).into_bytes())],
            Resource::Media => vec![Segment::Bytes(media_playlist(&index).into_bytes())],
            Resource::Init => vec![Segment::Bytes(init.to_vec())],
            Resource::Segment(n) => {
                if n >= index.segments() {
                    return Response::error(Status::NOT_FOUND);
                }
                let tables = match self.tables(hls.key, version, &file) {
                    Ok(t) => t,
                    Err(e) => return self.failed(hls.key, version, &e),
                };
                let plan = match media_segment(&tables, &index, n) {
                    Ok(plan) => plan,
                    Err(HlsError::NoSuchSegment(_)) => return Response::error(Status::NOT_FOUND),
                    Err(e) => {
                        tracing::warn!(path = hls.key, segment = n, "HLS: cannot package the segment: {e}");
                        return failure(Status::INTERNAL_SERVER_ERROR, &e.to_string());
                    }
                };
                let mut parts = Vec::with_capacity(plan.ranges.len() + 1);
                parts.push(Segment::Bytes(plan.header));
                parts.extend(plan.ranges.into_iter().map(|r| {
                    Segment::File(FileSlice {
                        file: Arc::clone(&file),
                        offset: r.start,
                        len: r.end - r.start,
                    })
                }));
                parts
            }
        };
        let len = parts.iter().map(Segment::len).sum();
        let meta =
            FileMeta { len, modified: version.1, content_type: hls.resource.content_type(), etag: None };
        // The packaging depends on the file and on the segment target: both go into the tag.
        let etag = version.1.map(|modified| {
            let file_tag = entity_tag(modified, version.0);
            format!("{}-hls{}\"", &file_tag[..file_tag.len() - 1], self.segment.as_millis())
        });
        // Playlists are revalidated (cheap with the ETag) so a replaced file is seen at once;
        // segments keep their URL for the file's life and can be cached.
        let cache_control = match hls.resource {
            Resource::Master | Resource::Media => "no-cache",
            Resource::Init | Resource::Segment(_) => "public, max-age=3600",
        };
        entity_response(req, parts, &meta, etag, hls.max_ranges, hls.boundary)
            .with_header("Cache-Control", cache_control)
            .with_header("Access-Control-Allow-Origin", "*")
    }

    /// What the library page shows of the MP4 at `key`; `None` when it cannot be packaged, or
    /// when it is not indexed yet and `may_index` (files the caller lets it index, counted down)
    /// is spent: a page of a thousand new files must not read a thousand `moov` boxes before it
    /// answers.
    pub fn describe(
        &self,
        key: &str,
        file: File,
        meta: &std::fs::Metadata,
        may_index: &std::cell::Cell<usize>,
    ) -> Option<VideoInfo> {
        let version = (meta.len(), meta.modified().ok());
        let cached = self.lock().packaging.get(key).is_some_and(|c| c.version == version);
        if !cached {
            if may_index.get() == 0 {
                return None;
            }
            may_index.set(may_index.get() - 1);
        }
        let hls = HlsRequest {
            key,
            file,
            meta: meta.clone(),
            resource: Resource::Master,
            max_ranges: 0,
            boundary: 0,
        };
        match self.packaging(&hls, version) {
            Packaging::Ready { index, .. } => Some(VideoInfo {
                duration_secs: index.duration(),
                resolution: index.resolution(),
                codecs: index.codecs().to_string(),
                bitrate: index.average_bandwidth(),
            }),
            Packaging::Failed { .. } => None,
        }
    }

    /// The file's index and init segment, from the cache or built now.
    fn packaging(&self, hls: &HlsRequest<'_>, version: Version) -> Packaging {
        if let Some(c) = self.lock().packaging.get(hls.key).filter(|c| c.version == version) {
            return c.packaging.clone();
        }
        let built =
            Mp4File::read(BufReader::new(&hls.file), version.0).map_err(HlsError::from).and_then(|tables| {
                let index = SegmentIndex::build(&tables, self.segment)?;
                let init = init_segment(&tables, &index)?;
                Ok((Arc::new(tables), index, init))
            });
        match built {
            Ok((tables, index, init)) => {
                let cost = index.heap_bytes() + init.len() + hls.key.len() + 128;
                let packaging = Packaging::Ready { index: Arc::new(index), init: init.into() };
                let mut caches = self.lock();
                caches.insert(hls.key, version, packaging.clone(), cost);
                caches.keep_tables(hls.key, version, tables);
                packaging
            }
            Err(e) => self.remember_failure(hls.key, version, &e),
        }
    }

    /// The full sample tables of the file, from the few kept or read again.
    fn tables(&self, key: &str, version: Version, file: &File) -> Result<Arc<Mp4File>, HlsError> {
        {
            let mut caches = self.lock();
            if let Some(i) = caches.tables.iter().position(|(k, v, _)| k == key && *v == version) {
                let entry = caches.tables.remove(i).expect("present");
                let tables = Arc::clone(&entry.2);
                caches.tables.push_back(entry);
                return Ok(tables);
            }
        }
        let tables = Arc::new(Mp4File::read(BufReader::new(file), version.0)?);
        self.lock().keep_tables(key, version, Arc::clone(&tables));
        Ok(tables)
    }

    fn remember_failure(&self, key: &str, version: Version, e: &HlsError) -> Packaging {
        let status = match e {
            HlsError::UnsupportedCodec(_) => Status::UNSUPPORTED_MEDIA_TYPE,
            HlsError::Fragmented => Status::NOT_IMPLEMENTED,
            _ => Status::INTERNAL_SERVER_ERROR,
        };
        tracing::warn!(path = key, status = status.0, "HLS: cannot package {key}: {e}");
        let packaging =
            Packaging::Failed { status, reason: format!("cannot package {key} as HLS: {e}").into() };
        self.lock().insert(key, version, packaging.clone(), key.len() + 256);
        packaging
    }

    fn failed(&self, key: &str, version: Version, e: &HlsError) -> Response {
        match self.remember_failure(key, version, e) {
            Packaging::Failed { status, reason } => failure(status, &reason),
            Packaging::Ready { .. } => Response::error(Status::INTERNAL_SERVER_ERROR),
        }
    }
}

impl Caches {
    fn insert(&mut self, key: &str, version: Version, packaging: Packaging, cost: usize) {
        if self.cost + cost > INDEX_BUDGET {
            self.packaging.clear();
            self.cost = 0;
        }
        if let Some(old) = self.packaging.insert(key.to_string(), Cached { version, packaging, cost }) {
            self.cost -= old.cost;
        }
        self.cost += cost;
    }

    fn keep_tables(&mut self, key: &str, version: Version, tables: Arc<Mp4File>) {
        self.tables.retain(|(k, _, _)| k != key);
        if self.tables.len() >= MAX_TABLES {
            self.tables.pop_front();
        }
        self.tables.push_back((key.to_string(), version, tables));
    }
}

/// The vendored hls.js the library page loads: immutable for a build, so cached for a year and
/// validated by its version.
pub fn player_script(req: &Request<'_>) -> Response {
    let meta = FileMeta {
        len: HLS_JS.len() as u64,
        modified: None,
        content_type: "text/javascript; charset=utf-8",
        etag: None,
    };
    let etag = Some(format!("\"hls.js-{HLS_JS_VERSION}-{:x}\"", HLS_JS.len()));
    entity_response(req, vec![Segment::Static(HLS_JS)], &meta, etag, 1, 0)
        .with_header("Cache-Control", "public, max-age=31536000")
}

/// An error response saying why, in plain text (the reason names the file and the problem).
fn failure(status: Status, reason: &str) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn pages_index_within_their_budget_and_failures_are_remembered() {
        let dir = tempfile::tempdir().unwrap();
        let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sluice-demo.mp4");
        for name in ["a.mp4", "b.mp4"] {
            std::fs::copy(demo, dir.path().join(name)).unwrap();
        }
        std::fs::write(dir.path().join("c.mp4"), b"not a film").unwrap();
        let open = |name: &str| {
            let file = File::open(dir.path().join(name)).unwrap();
            let meta = file.metadata().unwrap();
            (file, meta)
        };
        let packager = HlsPackager::new(Duration::from_secs(6));
        let budget = Cell::new(1);
        let (file, meta) = open("a.mp4");
        let a = packager.describe("a.mp4", file, &meta, &budget).unwrap();
        assert_eq!(a.resolution, Some((640, 360)));
        assert!((a.duration_secs - 6.0).abs() < 0.05);
        let (file, meta) = open("b.mp4");
        assert_eq!(packager.describe("b.mp4", file, &meta, &budget), None, "budget spent");
        let (file, meta) = open("a.mp4");
        assert_eq!(packager.describe("a.mp4", file, &meta, &budget), Some(a), "cached needs no budget");
        let budget = Cell::new(5);
        let (file, meta) = open("c.mp4");
        assert_eq!(packager.describe("c.mp4", file, &meta, &budget), None);
        assert_eq!(budget.get(), 4);
        assert!(matches!(
            packager.lock().packaging.get("c.mp4").map(|c| c.packaging.clone()),
            Some(Packaging::Failed { status: Status::INTERNAL_SERVER_ERROR, .. })
        ));
    }
}
