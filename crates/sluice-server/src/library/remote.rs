//! The library when it lives in an object store (`--store s3://...`): paths resolved against the
//! store's keys, bodies sent from the slice files of a [`SliceCache`].
//!
//! Owns the mapping of a request onto the cache: which object or "directory" (a key prefix) a
//! path names, and which slices a response's byte ranges cover, and the rewriting of the body
//! that `file_response` built into slices of those files, so that the engine sends cached
//! bytes with its own send strategy (sendfile, splice or copy) exactly as for a local file.
//!
//! Engines run handlers on their event-loop workers, where a round trip to the origin would stall
//! every other connection of the worker. So the first pass never blocks: when everything a
//! response needs (metadata, listing, slices) is in memory or on disk it is answered at once;
//! otherwise [`super::answer_later`] hands the whole answer to a CPU-pool job ([`Reply::Compute`]),
//! which may wait for the origin and comes back through the engine's job delivery (the same
//! path as gzip work; see [`super::answer_later`]). A job rather than fetching inline because a cold 4 MiB slice costs a
//! round trip plus its transfer, tens of milliseconds against the microseconds a hit costs.
//! The job waits for the response's first slice only: the head goes out with it, and the rest
//! of the body is a [`SliceStream`], a [`BodyTail`] the session runs as one more job each time
//! the engine has sent what was queued, while the next slices are fetched ahead by the
//! background workers ([`RemoteLibrary::in_background`], a [`CpuPool`] the library owns). It does not
//! parse HTTP nor decide the validators' semantics (`sluice_proto::http::file` does).

use std::collections::VecDeque;
use std::fs::File;
use std::sync::{mpsc, Arc, OnceLock};

use sluice_engine::{CpuPool, PoolStats};
use sluice_proto::conn::Segment;
use sluice_proto::http::file::{content_type_for, file_response, FileMeta};
use sluice_proto::http::path::LibraryPath;
use sluice_proto::http::{Body, Method, Request, Response, Status, StreamedBody};
use sluice_store::{CacheConfig, CacheError, Key, ObjectVersion, SliceCache, Store};

use super::Listed;
use stream::{fetch_in_background, Laid, Piece, SliceStream};

mod stream;

/// What a library path names in the store.
#[derive(Debug)]
pub enum Found {
    /// An object, in the version every slice of the response will be read against.
    File(Arc<ObjectVersion>),
    /// A prefix some keys start with (or the root).
    Directory,
    /// Nothing.
    NotFound,
}

/// See the module docs.
#[derive(Debug)]
pub struct RemoteLibrary {
    cache: Arc<SliceCache>,
    /// Stands in for the file while `file_response` decides ranges; replaced before sending.
    placeholder: Arc<File>,
    location: String,
    /// Its background origin work, shared with the bodies it is sending.
    background: Arc<Background>,
}

impl RemoteLibrary {
    /// The store at `location` (as the start-up line names it) through a cache set up by `config`.
    pub fn open(
        store: Arc<dyn Store>,
        config: CacheConfig,
        location: &str,
    ) -> Result<RemoteLibrary, CacheError> {
        let placeholder = Arc::new(File::open("/dev/null")?);
        Ok(RemoteLibrary {
            cache: Arc::new(SliceCache::new(store, config)?),
            placeholder,
            location: location.to_string(),
            background: Arc::new(Background::new(MAX_FETCHES_AHEAD)),
        })
    }

    /// The same with `workers` background fetch workers (`store.fetch_workers`, and as many
    /// fetches waiting) instead of [`MAX_FETCHES_AHEAD`]; before the library is used.
    pub fn with_fetch_workers(mut self, workers: usize) -> RemoteLibrary {
        self.background = Arc::new(Background::new(workers));
        self
    }

    /// Runs `work`, which waits for the origin (an MP4 index read for the RTSP loop), on one of
    /// this library's background workers; see [`Background::run`].
    pub(crate) fn in_background<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<mpsc::Receiver<T>> {
        self.background.run(work)
    }

    /// What the background fetch workers are doing, for `/metrics` (`None` when their threads
    /// could not be started).
    pub fn background_stats(&self) -> Option<&PoolStats> {
        self.background.pool().map(CpuPool::stats)
    }

    /// The cache (for `/metrics`).
    pub fn cache(&self) -> &SliceCache {
        &self.cache
    }

    /// Where the library is, e.g. `s3://media/films`.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// What `path` names.
    pub fn lookup(&self, path: &LibraryPath, may_block: bool) -> Result<Found, CacheError> {
        let rel = path.relative();
        if rel.is_empty() {
            return Ok(Found::Directory);
        }
        if !path.names_directory() {
            if let Ok(key) = Key::new(rel) {
                if let Some(version) = self.cache.version(&key, may_block)? {
                    return Ok(Found::File(version));
                }
            }
        }
        let prefix = format!("{}/", rel.trim_end_matches('/'));
        let listing = self.cache.list(may_block)?;
        Ok(match listing.iter().any(|m| m.key.starts_with(&prefix)) {
            true => Found::Directory,
            false => Found::NotFound,
        })
    }

    /// The files and "directories" directly under `dir`, sorted as a local listing is.
    pub fn list(&self, dir: &LibraryPath, may_block: bool) -> Result<Vec<Listed>, CacheError> {
        let prefix = match dir.relative().trim_end_matches('/') {
            "" => String::new(),
            rel => format!("{rel}/"),
        };
        let listing = self.cache.list(may_block)?;
        let mut out: Vec<Listed> = Vec::new();
        for meta in listing.iter() {
            let Some(rest) = meta.key.strip_prefix(&prefix) else { continue };
            let (name, is_dir) = match rest.split_once('/') {
                Some((name, _)) => (name, true),
                None => (rest, false),
            };
            if name.is_empty()
                || name.starts_with('.')
                || out.iter().any(|l| l.name == name && l.is_dir == is_dir)
            {
                continue;
            }
            let (len, tag) = if is_dir { (0, None) } else { (meta.len, Some(meta.etag.clone())) };
            out.push(Listed { name: name.to_string(), is_dir, len, tag });
        }
        out.sort_by(|a, b| (!a.is_dir, &a.name).cmp(&(!b.is_dir, &b.name)));
        Ok(out)
    }

    /// Every object as (URL path, size, entity tag), at most `limit` (blocks for a listing).
    pub fn files(&self, limit: usize) -> Vec<(String, u64, Option<String>)> {
        match self.cache.list(true) {
            Ok(listing) => listing
                .iter()
                .take(limit)
                .map(|m| (format!("/{}", m.key), m.len, Some(m.etag.clone())))
                .collect(),
            Err(e) => {
                tracing::warn!("cannot list {}: {e}", self.location);
                Vec::new()
            }
        }
    }

    /// Fills `into` with the bytes of `version` at `offset`, and starts fetching the slice after
    /// them in the background when it is neither cached nor being fetched: RTSP reads samples in
    /// order on its loop's thread, so the slice it reaches next is usually on disk by then.
    /// Without `may_block` (the RTSP loop) a slice that is not on disk is fetched in the
    /// background too and the read fails with [`CacheError::WouldBlock`], to be tried again.
    pub fn read_ahead(
        &self,
        version: &Arc<ObjectVersion>,
        offset: u64,
        into: &mut [u8],
        may_block: bool,
    ) -> Result<(), CacheError> {
        if may_block {
            self.cache.read_at(version, offset, into)?;
        } else {
            self.read_cached(version, offset, into)?;
        }
        let next = (offset + into.len() as u64).div_ceil(self.cache.config().slice_len);
        if next * self.cache.config().slice_len < version.len {
            self.warm_slice(version, next);
        }
        Ok(())
    }

    /// Starts fetching slice `index` of `version` in the background unless it is on disk or
    /// being fetched. The receiver is dropped: the fetch only warms the cache.
    fn warm_slice(&self, version: &Arc<ObjectVersion>, index: u64) {
        if !self.cache.has_or_fetching(version, index) {
            let _ = fetch_in_background(&self.background, &self.cache, version, index);
        }
    }

    /// [`SliceCache::read_at`] from the slices on disk only: a missing one is fetched in the
    /// background and the read fails with [`CacheError::WouldBlock`].
    fn read_cached(
        &self,
        version: &Arc<ObjectVersion>,
        offset: u64,
        into: &mut [u8],
    ) -> Result<(), CacheError> {
        let end = offset + into.len() as u64;
        if end > version.len {
            return Err(CacheError::Io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)));
        }
        let mut done = 0usize;
        for index in self.cache.slices_of(offset..end) {
            let range = self.cache.slice_range(version, index);
            let from = (offset + done as u64).max(range.start);
            let take = (range.end.min(end) - from) as usize;
            let file = match self.cache.slice(version, index, take as u64, false) {
                Ok(file) => file,
                Err(CacheError::WouldBlock) => {
                    self.warm_slice(version, index);
                    return Err(CacheError::WouldBlock);
                }
                Err(e) => return Err(e),
            };
            std::os::unix::fs::FileExt::read_exact_at(
                &file,
                &mut into[done..done + take],
                from - range.start,
            )?;
            done += take;
        }
        Ok(())
    }

    /// A stand-in for the object in `file_response`'s and `entity_response`'s file slices,
    /// which [`RemoteLibrary::cached_body`] replaces with slices of the cached files.
    pub fn placeholder(&self) -> &Arc<File> {
        &self.placeholder
    }

    /// `response` (built over [`RemoteLibrary::placeholder`]) with its body in slices of the
    /// cached files of `version`; a HEAD's body is never read and stays as it is.
    pub fn cached_body(
        &self,
        req: &Request<'_>,
        version: &Arc<ObjectVersion>,
        mut response: Response,
        may_block: bool,
    ) -> Result<Response, CacheError> {
        if req.method == Method::Head {
            return Ok(response);
        }
        let body = std::mem::replace(&mut response.body, Body::Empty);
        response.body = self.slices_for(version, body, may_block)?;
        Ok(response)
    }

    /// The response to `req` for one object version, its body in cached slices.
    pub fn file_response(
        &self,
        req: &Request<'_>,
        version: &Arc<ObjectVersion>,
        max_ranges: usize,
        boundary: u64,
        may_block: bool,
    ) -> Result<Response, CacheError> {
        let meta = FileMeta {
            len: version.len,
            modified: version.modified,
            content_type: content_type_for(version.key.as_str()),
            etag: Some(version.etag.clone()),
        };
        if version.encoding.as_deref() == Some("gzip") && !crate::http::gzip_static::accepts_gzip(req) {
            // Stored gzipped by the upload policy, so at most one slice (candidates are ≤ 4 MiB):
            // inflated from that slice's file as for a local root's gzip form.
            if version.len > self.cache.config().slice_len {
                return Ok(Response::error(Status(406)).with_header("Vary", "Accept-Encoding"));
            }
            let gz = self.cache.slice(version, 0, version.len, may_block)?;
            return Ok(crate::http::gzip_static::respond_from(
                req,
                version.key.as_str(),
                gz,
                &meta,
                max_ranges,
            ));
        }
        let gzip = version.encoding.as_deref() == Some("gzip");
        let mut response = file_response(req, Arc::clone(&self.placeholder), &meta, max_ranges, boundary);
        if gzip {
            response =
                response.with_header("Content-Encoding", "gzip").with_header("Vary", "Accept-Encoding");
        }
        if req.method == Method::Head {
            // Only the length goes out (the placeholder is never read): no slice is needed.
            return Ok(response);
        }
        let body = std::mem::replace(&mut response.body, Body::Empty);
        response.body = self.slices_for(version, body, may_block)?;
        Ok(response)
    }

    /// `body` with every placeholder file slice replaced by slices of the cached files. Without
    /// blocking, only when every slice is on disk; otherwise the first slice is waited for and
    /// the rest streams behind it (see [`SliceStream`]).
    fn slices_for(
        &self,
        version: &Arc<ObjectVersion>,
        body: Body,
        may_block: bool,
    ) -> Result<Body, CacheError> {
        self.laid_slices_for(&[Laid { version: Arc::clone(version), base: 0 }], body, may_block)
    }

    /// `response`, built over the placeholder as if `objects` were one file laid end to end
    /// (each `(object, where it starts)`), with its body in slices of the cached objects: a span
    /// of recordings sent as one MP4. Every object's version is checked with the origin before
    /// the head goes out (when `may_block`).
    pub fn joined_body(
        &self,
        req: &Request<'_>,
        objects: &[(Arc<ObjectVersion>, u64)],
        mut response: Response,
        may_block: bool,
    ) -> Result<Response, CacheError> {
        if req.method == Method::Head {
            return Ok(response);
        }
        let laid: Vec<Laid> = objects
            .iter()
            .map(|(version, base)| Laid { version: Arc::clone(version), base: *base })
            .collect();
        let body = std::mem::replace(&mut response.body, Body::Empty);
        response.body = self.laid_slices_for(&laid, body, may_block)?;
        Ok(response)
    }

    /// The body's placeholder slices as slices of the cached `laid` objects.
    fn laid_slices_for(&self, laid: &[Laid], body: Body, may_block: bool) -> Result<Body, CacheError> {
        let segments = match body {
            Body::File(slice) => vec![Segment::File(slice)],
            Body::Parts(parts) => parts,
            other => return Ok(other),
        };
        let len = segments.iter().map(Segment::len).sum();
        let mut stream = SliceStream {
            cache: Arc::clone(&self.cache),
            background: Arc::clone(&self.background),
            versions: laid.iter().map(|l| Arc::clone(&l.version)).collect(),
            pieces: stream::pieces(&self.cache, laid, segments),
            current: None,
            ahead: VecDeque::new(),
            may_block,
        };
        if !may_block {
            // Only answer now if nothing is missing: a half-resolved body would be thrown away.
            let all_cached = stream.pieces.iter().all(|p| match p {
                Piece::Own(_) => true,
                Piece::Slice { id, .. } => stream.has(*id),
            });
            if !all_cached {
                return Err(CacheError::WouldBlock);
            }
        }
        if may_block {
            stream.confirm_versions()?;
        }
        let ready = stream.step()?;
        if stream.pieces.is_empty() {
            return Ok(match <[Segment; 1]>::try_from(ready) {
                Ok([Segment::File(slice)]) => Body::File(slice),
                Ok([other]) => Body::Parts(vec![other]),
                Err(ready) => Body::Parts(ready),
            });
        }
        Ok(Body::Streamed(StreamedBody { len, ready, tail: Box::new(stream) }))
    }
}

/// Fetches ahead a remote library runs at once by default (`store.fetch_workers`). Each holds its
/// slice (4 MiB) in memory until it is written, so this bounds that memory (32 × 4 MiB = 128 MiB,
/// the bound the CPU pool's 16 threads with two fetches each had); past it a slice is fetched by
/// the step that needs it.
pub const MAX_FETCHES_AHEAD: usize = 32;

/// The workers of a remote library's background origin work: a pool of the engine's kind, apart
/// from the one the engine runs requests on, because a request's job may wait for a fetch started
/// ahead of it, which must then never be stuck in line behind that job. `workers` run at once and
/// as many more may wait (a waiting one holds no slice yet); past that the caller does the work
/// itself. (With no line at all, a job offered while a worker that just took one hands the queue
/// to the next would be refused though workers are idle.) The threads start on first use.
#[derive(Debug)]
struct Background {
    workers: usize,
    pool: OnceLock<Option<CpuPool>>,
}

impl Background {
    fn new(workers: usize) -> Background {
        Background { workers: workers.max(1), pool: OnceLock::new() }
    }

    /// The pool, started on first use; `None` when its threads could not be started (nothing
    /// runs ahead then).
    fn pool(&self) -> Option<&CpuPool> {
        self.pool
            .get_or_init(|| match CpuPool::start_named("sluice-fetch", self.workers, self.workers) {
                Ok(pool) => Some(pool),
                Err(e) => {
                    tracing::error!(
                        "cannot start the background fetch workers: {e}; nothing is fetched ahead"
                    );
                    None
                }
            })
            .as_ref()
    }

    /// Runs `work`, which waits for the origin (a slice fetched ahead, an MP4 index read for the
    /// RTSP loop), on a background worker, unless all are busy and as many wait (`None`: the
    /// caller asks again later, or does the work where it may block); the receiver gets the
    /// result.
    fn run<T: Send + 'static>(&self, work: impl FnOnce() -> T + Send + 'static) -> Option<mpsc::Receiver<T>> {
        let (tx, rx) = mpsc::channel();
        self.pool()?
            .spawn(move || {
                // Whoever asked may be gone by now; what was fetched is cached for the next reader.
                let _ = tx.send(work());
            })
            .ok()
            .map(|()| rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::OwnedRequest;
    use sluice_proto::http::path::normalize;
    use sluice_proto::http::Version;
    use sluice_store::{LocalStore, PutOptions};
    use std::os::unix::fs::FileExt;
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    use stream::AHEAD;

    fn remote(root: &std::path::Path, cache: &std::path::Path) -> RemoteLibrary {
        let store: Arc<dyn Store> = Arc::new(LocalStore::open(root).unwrap());
        let config = CacheConfig {
            dir: cache.to_path_buf(),
            max_bytes: 1 << 20,
            slice_len: 1000,
            revalidate: Duration::from_secs(60),
        };
        RemoteLibrary::open(store, config, "local").unwrap()
    }

    fn put(root: &std::path::Path, name: &str, bytes: &[u8]) {
        let store = LocalStore::open(root).unwrap();
        sluice_store::put_bytes(&store, &Key::new(name).unwrap(), bytes, PutOptions::default()).unwrap();
    }

    #[test]
    fn key_prefixes_are_directories() {
        let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        for name in ["a/b.mp4", "a/c/d.txt", "e.txt", ".hidden"] {
            put(root.path(), name, b"x");
        }
        let lib = remote(root.path(), cache.path());
        let names = |dir: &str| -> Vec<(String, bool)> {
            let listed = lib.list(&normalize(dir).unwrap(), true).unwrap();
            listed.into_iter().map(|l| (l.name, l.is_dir)).collect()
        };
        assert_eq!(names("/"), [("a".to_string(), true), ("e.txt".to_string(), false)]);
        assert_eq!(names("/a/"), [("c".to_string(), true), ("b.mp4".to_string(), false)]);
        assert!(matches!(lib.lookup(&normalize("/a").unwrap(), true), Ok(Found::Directory)));
        assert!(matches!(lib.lookup(&normalize("/e.txt").unwrap(), true), Ok(Found::File(_))));
        assert!(matches!(lib.lookup(&normalize("/zz").unwrap(), true), Ok(Found::NotFound)));
    }

    /// The bytes of `segments`, which hold files and boundaries.
    fn read_segments(segments: &[Segment]) -> Vec<u8> {
        let mut sent = Vec::new();
        for segment in segments {
            match segment {
                Segment::File(f) => {
                    let mut buf = vec![0u8; f.len as usize];
                    f.file.read_exact_at(&mut buf, f.offset).unwrap();
                    sent.extend(buf);
                }
                other => sent.extend_from_slice(other.in_memory().expect("in memory")),
            }
        }
        sent
    }

    fn get(range: Option<&str>) -> OwnedRequest {
        OwnedRequest {
            method: Method::Get,
            target: "/v.mp4".into(),
            version: Version::Http11,
            headers: range.map(|r| ("Range".to_string(), r.as_bytes().to_vec())).into_iter().collect(),
        }
    }

    /// A library (its store's root and cache kept alive) over one object, `v.mp4`, and its version.
    fn one_object(data: &[u8]) -> (tempfile::TempDir, tempfile::TempDir, RemoteLibrary, Arc<ObjectVersion>) {
        let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        put(root.path(), "v.mp4", data);
        let lib = remote(root.path(), cache.path());
        let Ok(Found::File(version)) = lib.lookup(&normalize("/v.mp4").unwrap(), true) else { panic!() };
        (root, cache, lib, version)
    }

    fn misses(lib: &RemoteLibrary) -> u64 {
        lib.cache().stats().misses.load(Ordering::Relaxed)
    }

    #[test]
    fn a_range_is_sent_from_the_slices_it_spans() {
        let data: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
        let (_root, _cache, lib, version) = one_object(&data);
        let req = get(Some("bytes=900-2099"));
        let cold = req.with(|r| lib.file_response(r, &version, 4, 0, false));
        assert!(matches!(cold, Err(CacheError::WouldBlock)), "a cold slice is not fetched on the loop");
        // Warm every slice, then: answered on the loop, one segment per slice.
        lib.cache().read_at(&version, 0, &mut vec![0u8; 2500]).unwrap();
        let response = req.with(|r| lib.file_response(r, &version, 4, 0, false)).unwrap();
        assert_eq!(response.status, Status::PARTIAL_CONTENT);
        let Body::Parts(parts) = response.body else { panic!("one segment per slice") };
        assert_eq!(parts.iter().map(Segment::len).collect::<Vec<_>>(), [100, 1000, 100]);
        assert_eq!(read_segments(&parts), data[900..2100]);
    }

    #[test]
    fn a_cold_body_starts_with_its_first_slice_and_fetches_the_rest_ahead() {
        let data: Vec<u8> = (0..9500u32).map(|i| (i * 13 % 251) as u8).collect();
        let (_root, _cache, lib, version) = one_object(&data);
        let response = get(None).with(|r| lib.file_response(r, &version, 4, 0, true)).unwrap();
        assert_eq!(response.status, Status::OK);
        let Body::Streamed(mut body) = response.body else { panic!("a cold whole object streams") };
        assert_eq!(body.len, 9500);
        // The first slice (and the next when its fetch ahead has already ended), then at most
        // two more being fetched ahead: not the object.
        let ready = read_segments(&body.ready);
        assert!((1000..=2000).contains(&ready.len()), "{} bytes ready at first", ready.len());
        assert!(ready == data[..ready.len()]);
        let fetched = misses(&lib);
        let bound = ready.len() as u64 / 1000 + AHEAD as u64;
        assert!(fetched <= bound, "{fetched} slices fetched before the first byte");
        let mut sent = read_segments(&body.ready);
        while (sent.len() as u64) < body.len {
            let step = body.tail.next().unwrap();
            assert!(!step.is_empty());
            let before = sent.len() as u64;
            sent.extend(read_segments(&step));
            // Never more than two slices beyond what has been queued.
            assert!(misses(&lib) <= (sent.len() as u64).div_ceil(1000) + AHEAD as u64);
            assert!(sent.len() as u64 > before);
        }
        assert!(sent == data, "the streamed body is the object");
        assert_eq!(misses(&lib), 10, "each slice fetched once");
    }

    #[test]
    fn reading_ahead_warms_the_next_slice_without_waiting_for_it() {
        let data: Vec<u8> = (0..2500u32).map(|i| (i % 253) as u8).collect();
        let (_root, _cache, lib, version) = one_object(&data);
        let mut buf = vec![0u8; 600];
        lib.read_ahead(&version, 100, &mut buf, true).unwrap();
        assert!(buf == data[100..700]);
        // Slice 1 arrives without anyone reading it; slice 2 is not asked for yet.
        let warmed = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            lib.cache().has(&version, 1)
        });
        assert!(warmed, "the next slice was not fetched ahead");
        assert_eq!(misses(&lib), 2);
        assert!(!lib.cache().has_or_fetching(&version, 2));
        // The last slice has nothing after it.
        lib.read_ahead(&version, 2400, &mut [0u8; 100], true).unwrap();
        assert_eq!(misses(&lib), 3);
    }

    #[test]
    fn a_multipart_body_streams_its_boundaries_with_its_slices() {
        let data: Vec<u8> = (0..9500u32).map(|i| (i * 7 % 251) as u8).collect();
        let (_root, _cache, lib, version) = one_object(&data);
        let req = get(Some("bytes=10-19,4000-7999,9400-"));
        let response = req.with(|r| lib.file_response(r, &version, 4, 0, true)).unwrap();
        let expected = {
            lib.cache().read_at(&version, 0, &mut vec![0u8; 9500]).unwrap();
            let warm = req.with(|r| lib.file_response(r, &version, 4, 0, false)).unwrap();
            let Body::Parts(parts) = warm.body else { panic!("multipart") };
            read_segments(&parts)
        };
        let mut sent = Vec::new();
        match response.body {
            Body::Streamed(mut body) => {
                sent.extend(read_segments(&body.ready));
                while (sent.len() as u64) < body.len {
                    sent.extend(read_segments(&body.tail.next().unwrap()));
                }
                assert_eq!(sent.len() as u64, body.len);
            }
            Body::Parts(parts) => sent.extend(read_segments(&parts)),
            other => panic!("{other:?}"),
        }
        assert!(sent == expected, "the same bytes as the warm multipart body");
    }

    #[test]
    fn an_object_replaced_mid_body_cuts_it_rather_than_mixing_versions() {
        let (root, _cache, lib, version) = one_object(&[1u8; 9500]);
        let response = get(None).with(|r| lib.file_response(r, &version, 4, 0, true)).unwrap();
        let Body::Streamed(mut body) = response.body else { panic!("a cold whole object streams") };
        std::thread::sleep(Duration::from_millis(1100));
        put(root.path(), "v.mp4", &[2u8; 9500]);
        let mut sent = read_segments(&body.ready);
        let failed = loop {
            match body.tail.next() {
                Ok(step) => sent.extend(read_segments(&step)),
                Err(e) => break e,
            }
            assert!((sent.len() as u64) < body.len, "a whole body of the old version after a change");
        };
        assert!(failed.to_string().contains("changed"), "{failed}");
        assert!(sent.iter().all(|&b| b == 1), "never a byte of the new version");
        // Replaced while only its first slices are cached: found before the head goes out, so
        // the response is made again from the new version rather than cut.
        let (root, _cache, lib, version) = one_object(&[3u8; 9500]);
        lib.cache().read_at(&version, 0, &mut [0u8; 1000]).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        put(root.path(), "v.mp4", &[4u8; 9500]);
        let again = get(None).with(|r| lib.file_response(r, &version, 4, 0, true));
        assert!(matches!(again, Err(CacheError::Changed)), "{again:?}");
    }

    /// The bytes of a body, stepping a streamed one to its end.
    fn body_bytes(body: Body) -> Vec<u8> {
        match body {
            Body::Streamed(mut body) => {
                let mut sent = read_segments(&body.ready);
                while (sent.len() as u64) < body.len {
                    sent.extend(read_segments(&body.tail.next().unwrap()));
                }
                sent
            }
            Body::Parts(parts) => read_segments(&parts),
            Body::File(slice) => read_segments(&[Segment::File(slice)]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn objects_laid_end_to_end_are_sent_as_one_body_ranges_across_their_join_too() {
        let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
        let b: Vec<u8> = (0..1700u32).map(|i| (i * 7 % 241) as u8).collect();
        put(root.path(), "a.mp4", &a);
        put(root.path(), "b.mp4", &b);
        let lib = remote(root.path(), cache.path());
        let version = |name: &str| match lib.lookup(&normalize(name).unwrap(), true) {
            Ok(Found::File(v)) => v,
            other => panic!("{other:?}"),
        };
        let laid = [(version("/a.mp4"), 0), (version("/b.mp4"), 2500)];
        let joined: Vec<u8> = a.iter().chain(&b).copied().collect();
        let meta = FileMeta { len: 4200, modified: None, content_type: "video/mp4", etag: None };
        let respond = |range: Option<&str>, may_block: bool| {
            get(range).with(|r| {
                let response = file_response(r, Arc::clone(&lib.placeholder), &meta, 4, 0);
                lib.joined_body(r, &laid, response, may_block)
            })
        };
        // Cold: nothing is fetched on the loop; off it, the whole body, both objects in turn.
        assert!(matches!(respond(None, false), Err(CacheError::WouldBlock)));
        let whole = respond(None, true).unwrap();
        assert_eq!(whole.status, Status::OK);
        assert!(body_bytes(whole.body) == joined, "the objects' bytes, one after the other");
        // Warm: a range across the join, on the loop, cut at the join and at the slices.
        let range = respond(Some("bytes=1900-3099"), false).unwrap();
        assert_eq!(range.status, Status::PARTIAL_CONTENT);
        let Body::Parts(parts) = range.body else { panic!("warm, so at once") };
        assert_eq!(parts.iter().map(Segment::len).collect::<Vec<_>>(), [100, 500, 600]);
        assert!(read_segments(&parts) == joined[1900..3100]);
    }
}
