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
//! otherwise [`answer_later`] hands the whole answer to a CPU-pool job ([`Reply::Compute`]),
//! which may wait for the origin and comes back through the engine's job delivery (the same
//! path as gzip work). A job rather than fetching inline because a cold 4 MiB slice costs a
//! round trip plus its transfer, tens of milliseconds against the microseconds a hit costs. It
//! does not parse HTTP nor decide the validators' semantics (`sluice_proto::http::file` does).

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::File;
use std::sync::Arc;

use sluice_proto::conn::{FileSlice, Segment};
use sluice_proto::http::file::{content_type_for, file_response, FileMeta};
use sluice_proto::http::path::LibraryPath;
use sluice_proto::http::{Body, Method, Reply, Request, Response, Status, Version};
use sluice_store::{CacheConfig, CacheError, Key, ObjectVersion, SliceCache, Store};

use crate::library::Listed;

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
    cache: SliceCache,
    /// Stands in for the file while `file_response` decides ranges; replaced before sending.
    placeholder: Arc<File>,
    location: String,
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
            cache: SliceCache::new(store, config)?,
            placeholder,
            location: location.to_string(),
        })
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
            out.push(Listed { name: name.to_string(), is_dir, len: if is_dir { 0 } else { meta.len } });
        }
        out.sort_by(|a, b| (!a.is_dir, &a.name).cmp(&(!b.is_dir, &b.name)));
        Ok(out)
    }

    /// Every object as (URL path, size), at most `limit` (blocks for a listing).
    pub fn files(&self, limit: usize) -> Vec<(String, u64)> {
        match self.cache.list(true) {
            Ok(listing) => listing.iter().take(limit).map(|m| (format!("/{}", m.key), m.len)).collect(),
            Err(e) => {
                tracing::warn!("cannot list {}: {e}", self.location);
                Vec::new()
            }
        }
    }

    /// The response to `req` for one object version, its body in cached slices.
    pub fn file_response(
        &self,
        req: &Request<'_>,
        version: &ObjectVersion,
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
        if version.encoding.as_deref() == Some("gzip") && !crate::gzip_static::accepts_gzip(req) {
            // Stored gzipped by the upload policy, so at most one slice (candidates are ≤ 4 MiB):
            // inflated from that slice's file as for a local root's gzip form.
            if version.len > self.cache.config().slice_len {
                return Ok(Response::error(Status(406)).with_header("Vary", "Accept-Encoding"));
            }
            let gz = self.cache.slice(version, 0, may_block)?;
            return Ok(crate::gzip_static::respond_from(req, version.key.as_str(), gz, &meta, max_ranges));
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

    /// `body` with every placeholder file slice replaced by slices of the cached files.
    fn slices_for(&self, version: &ObjectVersion, body: Body, may_block: bool) -> Result<Body, CacheError> {
        let segments = match body {
            Body::File(slice) => vec![Segment::File(slice)],
            Body::Parts(parts) => parts,
            other => return Ok(other),
        };
        let wanted = |s: &Segment| match s {
            Segment::File(f) => Some(self.cache.slices_of(f.offset..f.offset + f.len)),
            _ => None,
        };
        if !may_block {
            // Only answer now if nothing is missing: a half-resolved body would be thrown away.
            let all = segments.iter().filter_map(wanted).flatten();
            if !all.into_iter().all(|i| self.cache.has(version, i)) {
                return Err(CacheError::WouldBlock);
            }
        }
        let mut files: HashMap<u64, Arc<File>> = HashMap::new();
        if may_block {
            let mut needed: Vec<u64> = segments.iter().filter_map(wanted).flatten().collect();
            needed.sort_unstable();
            needed.dedup();
            needed.retain(|&i| !self.cache.has(version, i));
            files = self.fetch_parallel(version, &needed)?;
        }
        let mut out = Vec::with_capacity(segments.len());
        for segment in segments {
            let Segment::File(f) = segment else {
                out.push(segment);
                continue;
            };
            let end = f.offset + f.len;
            for index in self.cache.slices_of(f.offset..end) {
                let range = self.cache.slice_range(version, index);
                let file = match files.get(&index) {
                    Some(file) => Arc::clone(file),
                    None => {
                        let file = Arc::new(self.cache.slice(version, index, may_block)?);
                        files.insert(index, Arc::clone(&file));
                        file
                    }
                };
                let from = f.offset.max(range.start);
                let to = end.min(range.end);
                out.push(Segment::File(FileSlice { file, offset: from - range.start, len: to - from }));
            }
        }
        Ok(match out.len() {
            1 => match out.pop() {
                Some(Segment::File(slice)) => Body::File(slice),
                Some(other) => Body::Parts(vec![other]),
                None => Body::Empty,
            },
            _ => Body::Parts(out),
        })
    }
}

impl RemoteLibrary {
    /// Fetches `indexes` of `version`, up to [`PARALLEL_FETCHES`] at once: a cold whole-object
    /// response waits for its slices' round trips side by side rather than one after another.
    fn fetch_parallel(
        &self,
        version: &ObjectVersion,
        indexes: &[u64],
    ) -> Result<HashMap<u64, Arc<File>>, CacheError> {
        if indexes.len() < 2 {
            return Ok(HashMap::new());
        }
        let next = std::sync::atomic::AtomicUsize::new(0);
        let fetched = std::sync::Mutex::new((HashMap::new(), None::<CacheError>));
        std::thread::scope(|s| {
            for _ in 0..PARALLEL_FETCHES.min(indexes.len()) {
                s.spawn(|| loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&index) = indexes.get(i) else { break };
                    let result = self.cache.slice(version, index, true);
                    let mut fetched = fetched.lock().unwrap_or_else(|e| e.into_inner());
                    match result {
                        Ok(file) => {
                            fetched.0.insert(index, Arc::new(file));
                        }
                        Err(e) => {
                            fetched.1.get_or_insert(e);
                            // The others stop at their next slice.
                            next.store(indexes.len(), std::sync::atomic::Ordering::Relaxed);
                            break;
                        }
                    }
                });
            }
        });
        let (files, error) = fetched.into_inner().unwrap_or_else(|e| e.into_inner());
        match error {
            Some(e) => Err(e),
            None => Ok(files),
        }
    }
}

/// Slices one response fetches at once. Each holds its 4 MiB in memory until written, so the
/// heap's bound is this times the CPU pool's threads (2 × 16 × 4 MiB = 128 MiB at the defaults).
const PARALLEL_FETCHES: usize = 2;

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

/// Answers now when `answer` can without the origin, else in a job where it may block. A job
/// whose object changed under it answers again once, against the new version.
pub fn answer_later<F>(req: &Request<'_>, answer: F) -> Reply
where
    F: Fn(&Request<'_>, bool) -> Result<Response, CacheError> + Send + 'static,
{
    match answer(req, false) {
        Ok(response) => return response.into(),
        Err(CacheError::WouldBlock) => {}
        Err(e) => return error_response(req.target, e).into(),
    }
    let owned = OwnedRequest::of(req);
    Reply::Compute(Box::new(move || {
        owned.with(|req| {
            let result = match answer(req, true) {
                Err(CacheError::Changed) => answer(req, true),
                other => other,
            };
            result.unwrap_or_else(|e| error_response(req.target, e)).into()
        })
    }))
}

/// The status an origin failure calls for, with a log line.
pub fn error_response(target: &str, e: CacheError) -> Response {
    let status = match &e {
        CacheError::NotFound => return Response::error(Status::NOT_FOUND),
        CacheError::Timeout(_) => Status::GATEWAY_TIMEOUT,
        CacheError::Origin(_) | CacheError::Changed | CacheError::WouldBlock => Status::BAD_GATEWAY,
        CacheError::Io(_) => Status::INTERNAL_SERVER_ERROR,
    };
    tracing::warn!(uri = target, status = status.0, "origin: {e}");
    Response {
        status,
        headers: vec![("Cache-Control", Cow::Borrowed("no-store"))],
        body: Body::Bytes(Cow::Owned(format!("{} {}\n", status.0, status.reason()).into_bytes())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::http::path::normalize;
    use sluice_store::{LocalStore, PutOptions};
    use std::os::unix::fs::FileExt;
    use std::time::Duration;

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

    #[test]
    fn a_range_is_sent_from_the_slices_it_spans() {
        let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data: Vec<u8> = (0..2500u32).map(|i| (i % 251) as u8).collect();
        put(root.path(), "v.mp4", &data);
        let lib = remote(root.path(), cache.path());
        let Ok(Found::File(version)) = lib.lookup(&normalize("/v.mp4").unwrap(), true) else { panic!() };
        let req = OwnedRequest {
            method: Method::Get,
            target: "/v.mp4".into(),
            version: Version::Http11,
            headers: vec![("Range".into(), b"bytes=900-2099".to_vec())],
        };
        let cold = req.with(|r| lib.file_response(r, &version, 4, 0, false));
        assert!(matches!(cold, Err(CacheError::WouldBlock)), "a cold slice is not fetched on the loop");
        let response = req.with(|r| lib.file_response(r, &version, 4, 0, true)).unwrap();
        assert_eq!(response.status, Status::PARTIAL_CONTENT);
        let Body::Parts(parts) = response.body else { panic!("one segment per slice") };
        let mut sent = Vec::new();
        for part in &parts {
            let Segment::File(f) = part else { panic!("file segments only") };
            let mut buf = vec![0u8; f.len as usize];
            f.file.read_exact_at(&mut buf, f.offset).unwrap();
            sent.extend(buf);
        }
        assert_eq!(parts.iter().map(Segment::len).collect::<Vec<_>>(), [100, 1000, 100]);
        assert_eq!(sent, data[900..2100]);
        // Warm now: answered without blocking.
        assert!(req.with(|r| lib.file_response(r, &version, 4, 0, false)).is_ok());
    }
}
