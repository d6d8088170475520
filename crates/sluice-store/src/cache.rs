//! A bounded disk cache of object slices in front of a [`Store`]: what lets a stateless edge
//! serve an S3 bucket as if it were a local library.
//!
//! Objects are cut into fixed slices (4 MiB by default, like nginx's slice module). A slice is
//! fetched from the origin only when a response needs it, with one conditional ranged GET
//! (`If-Match` the version's entity tag), and written to a file of its own under the cache
//! directory; the server then sends it from that file's descriptor with the engine's send
//! strategy, so zero-copy stays zero-copy. Slices are keyed by (key, entity tag, index): a
//! replaced object gets new slices and a response, which resolves one [`ObjectVersion`] first,
//! is never stitched from two versions (a slice GET that finds another version fails instead).
//!
//! Concurrent misses on one slice make one origin request: the first caller fetches, the others
//! wait on a condition variable for its outcome (request coalescing, like `proxy_cache_lock`).
//! Object metadata is remembered and revalidated (a HEAD, compared by entity tag) once it is
//! older than [`CacheConfig::revalidate`]; when that HEAD fails, the version last seen is kept
//! for another period (stale on error: cached slices keep serving while the origin is down). The bytes held are bounded by
//! [`CacheConfig::max_bytes`] plus the slices being fetched: inserting a slice evicts the least
//! recently used ones (unlinking their files; a response still sending one keeps its descriptor,
//! so eviction never corrupts a response, and the kernel frees the blocks when it ends). The
//! cache starts empty: files left by an earlier process are removed at start.
//!
//! The API is blocking, like [`Store`]: callers that must not block (an event-loop worker) ask
//! with `may_block = false` and get [`CacheError::WouldBlock`] when the origin is needed, then
//! repeat the call where blocking is fine (a job). This module does not speak HTTP.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use crate::{Key, ObjectMeta, Store, StoreError};

/// The default slice length: large enough that a slice's round trip is amortised, small enough
/// that the first byte of a range never waits for much more than it needs.
pub const SLICE_LEN: u64 = 4 << 20;

/// A missing object is remembered this long (at most the revalidation period), so that an
/// object uploaded through another edge shows up here within about a second.
const NEGATIVE_TTL: Duration = Duration::from_secs(1);

/// Object metadata entries kept (a few hundred bytes each).
const MAX_KNOWN_OBJECTS: usize = 100_000;

/// How the cache is set up.
#[derive(Debug, Clone)]
pub struct CacheConfig {
    /// Where slice files live (created if missing; the cache's own files in it are removed).
    pub dir: PathBuf,
    /// Most bytes of slices kept, beyond the slices being fetched.
    pub max_bytes: u64,
    /// Slice length in bytes.
    pub slice_len: u64,
    /// Metadata older than this is checked with the origin (HEAD, compared by entity tag).
    pub revalidate: Duration,
}

/// Why the cache could not give what was asked.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// The origin has no such object.
    #[error("no such object")]
    NotFound,
    /// The answer needs the origin and the caller may not block.
    #[error("the origin is needed")]
    WouldBlock,
    /// The object changed between resolving its version and reading a slice of it.
    #[error("the object changed while it was read")]
    Changed,
    /// The origin did not answer in time.
    #[error("origin timed out: {0}")]
    Timeout(String),
    /// The origin failed.
    #[error("origin: {0}")]
    Origin(String),
    /// The cache directory failed.
    #[error("cache i/o: {0}")]
    Io(#[from] io::Error),
}

impl CacheError {
    fn from_store(e: StoreError) -> CacheError {
        match e {
            StoreError::NotFound => CacheError::NotFound,
            StoreError::PreconditionFailed => CacheError::Changed,
            StoreError::Io(e) => CacheError::Io(e),
            e => {
                let text = e.to_string();
                // object_store reports its client timeout in words only (and every error after
                // retries names `retry_timeout`, which says nothing about what happened).
                if text.contains("timed out") {
                    CacheError::Timeout(text)
                } else {
                    CacheError::Origin(text)
                }
            }
        }
    }
}

/// One version of an object: what every slice of a response is read against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectVersion {
    /// The key.
    pub key: Key,
    /// Length in bytes.
    pub len: u64,
    /// The origin's entity tag, quoted.
    pub etag: String,
    /// When the origin says it was written.
    pub modified: Option<SystemTime>,
    /// `Some("gzip")` when the stored bytes are the object's gzip form.
    pub encoding: Option<String>,
}

/// What the cache has done, for `/metrics`. Counters only grow; `held_bytes` and
/// `fetching_bytes` are gauges.
#[derive(Debug, Default)]
pub struct CacheStats {
    /// Slices found in the cache.
    pub hits: AtomicU64,
    /// Slices not found, fetched by this caller.
    pub misses: AtomicU64,
    /// Callers that waited for another's fetch of the same slice instead of fetching.
    pub coalesced_waits: AtomicU64,
    /// Bytes read from cached slices (hits).
    pub bytes_from_cache: AtomicU64,
    /// Bytes fetched from the origin.
    pub bytes_from_origin: AtomicU64,
    /// Slices evicted to stay within the size.
    pub evictions: AtomicU64,
    /// Requests made to the origin (slice GETs, HEADs, listings).
    pub origin_requests: AtomicU64,
    /// Origin requests that failed (a missing object is not a failure).
    pub origin_errors: AtomicU64,
    /// Sum of origin request durations, in microseconds.
    pub origin_micros: AtomicU64,
    /// Bytes of slices held now.
    pub held_bytes: AtomicU64,
    /// Bytes of slices being fetched now.
    pub fetching_bytes: AtomicU64,
}

/// (key, entity tag, slice index).
type SliceId = (String, String, u64);

#[derive(Debug)]
enum Slice {
    /// Someone is fetching it; `generation` tells waiters whether the fetch they waited for ended.
    Fetching { generation: u64 },
    /// On disk.
    Ready { path: PathBuf, len: u64, used: u64 },
}

#[derive(Debug, Default)]
struct State {
    /// Metadata by key: `None` for a missing object, with when it was checked.
    objects: HashMap<String, (Option<Arc<ObjectVersion>>, Instant)>,
    /// The last listing of the whole store and when it was made.
    listing: Option<(Arc<Vec<ObjectMeta>>, Instant)>,
    slices: HashMap<SliceId, Slice>,
    /// Ready slices by last use (a tick), oldest first.
    lru: BTreeMap<u64, SliceId>,
    /// Keys whose metadata someone is fetching.
    resolving: std::collections::HashSet<String>,
    /// Fetches that failed, by generation, so their waiters fail too instead of each retrying.
    failed: HashMap<u64, String>,
    held: u64,
    tick: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct SliceCache {
    store: Arc<dyn Store>,
    config: CacheConfig,
    state: Mutex<State>,
    fetched: Condvar,
    stats: CacheStats,
}

impl SliceCache {
    /// A cache of `store` in `config.dir`, emptied.
    pub fn new(store: Arc<dyn Store>, config: CacheConfig) -> Result<SliceCache, CacheError> {
        std::fs::create_dir_all(&config.dir)?;
        for entry in std::fs::read_dir(&config.dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "slice") {
                std::fs::remove_file(&path)?;
            }
        }
        let config = CacheConfig { slice_len: config.slice_len.max(1), ..config };
        Ok(SliceCache {
            store,
            config,
            state: Mutex::new(State::default()),
            fetched: Condvar::new(),
            stats: CacheStats::default(),
        })
    }

    /// What the cache has done so far.
    pub fn stats(&self) -> &CacheStats {
        &self.stats
    }

    /// How the cache is set up.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Times one origin request and counts it (and its failure).
    fn origin<T>(&self, op: impl FnOnce() -> Result<T, StoreError>) -> Result<T, StoreError> {
        let started = Instant::now();
        let result = op();
        self.stats.origin_requests.fetch_add(1, Ordering::Relaxed);
        self.stats.origin_micros.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
        if let Err(e) = &result {
            if !matches!(e, StoreError::NotFound | StoreError::PreconditionFailed) {
                self.stats.origin_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        result
    }

    /// The current version of `key`, `None` when there is none; from memory while fresh. Like
    /// slices, concurrent lookups of one stale key make one HEAD.
    pub fn version(&self, key: &Key, may_block: bool) -> Result<Option<Arc<ObjectVersion>>, CacheError> {
        let mut state = self.lock();
        let mut waited = false;
        let stale_version = loop {
            let known = state.objects.get(key.as_str()).cloned();
            if let Some((v, checked)) = &known {
                let ttl = match v {
                    Some(_) => self.config.revalidate,
                    None => NEGATIVE_TTL.min(self.config.revalidate),
                };
                if checked.elapsed() < ttl {
                    return Ok(v.clone());
                }
            }
            if !may_block {
                return Err(CacheError::WouldBlock);
            }
            if !state.resolving.contains(key.as_str()) {
                break known.and_then(|(v, _)| v);
            }
            if !waited {
                self.stats.coalesced_waits.fetch_add(1, Ordering::Relaxed);
                waited = true;
            }
            state = self.fetched.wait(state).unwrap_or_else(|e| e.into_inner());
        };
        state.resolving.insert(key.as_str().to_string());
        drop(state);
        let head = self.origin(|| self.store.head(key));
        let mut state = self.lock();
        state.resolving.remove(key.as_str());
        let current = match head {
            Ok(head) => head.map(|m| {
                Arc::new(ObjectVersion {
                    key: key.clone(),
                    len: m.len,
                    etag: m.etag,
                    modified: m.modified,
                    encoding: m.encoding,
                })
            }),
            Err(e) => {
                let stale = stale_version.filter(|_| !matches!(e, StoreError::NotFound));
                if let Some(stale) = &stale {
                    // Stale on error: the version this edge last saw, until the next check, rather
                    // than failing objects whose slices are on disk.
                    tracing::warn!(key = %key, "origin: revalidation failed, serving the cached version: {e}");
                    state.objects.insert(key.as_str().to_string(), (Some(Arc::clone(stale)), Instant::now()));
                }
                drop(state);
                self.fetched.notify_all();
                return stale.map(Some).ok_or_else(|| CacheError::from_store(e));
            }
        };
        if let Some(old) = stale_version.filter(|old| current.as_ref().is_none_or(|c| c.etag != old.etag)) {
            // Replaced or gone: its slices will never be read again.
            self.forget_version(&mut state, &old);
        }
        if state.objects.len() >= MAX_KNOWN_OBJECTS {
            // Requests for made-up names must not grow memory without end. Forgetting metadata
            // costs a HEAD; a slice of an unchanged object stays valid.
            state.objects.clear();
        }
        state.objects.insert(key.as_str().to_string(), (current.clone(), Instant::now()));
        drop(state);
        self.fetched.notify_all();
        Ok(current)
    }

    fn forget_version(&self, state: &mut State, old: &ObjectVersion) {
        let slices = old.len.div_ceil(self.config.slice_len);
        for index in 0..slices {
            let id = (old.key.as_str().to_string(), old.etag.clone(), index);
            if let Some(Slice::Ready { .. }) = state.slices.get(&id) {
                self.remove_ready(state, &id);
            }
        }
    }

    /// Forgets what is known of `key` (its version, its slices) and the listing: it was just
    /// written or deleted through this server.
    pub fn forget(&self, key: &Key) {
        let mut state = self.lock();
        if let Some((Some(old), _)) = state.objects.remove(key.as_str()) {
            self.forget_version(&mut state, &old);
        }
        state.listing = None;
    }

    /// Every object of the store, from a listing at most [`CacheConfig::revalidate`] old.
    pub fn list(&self, may_block: bool) -> Result<Arc<Vec<ObjectMeta>>, CacheError> {
        if let Some((listing, at)) = &self.lock().listing {
            if at.elapsed() < self.config.revalidate {
                return Ok(Arc::clone(listing));
            }
        }
        if !may_block {
            return Err(CacheError::WouldBlock);
        }
        let listing = Arc::new(self.origin(|| self.store.list("")).map_err(CacheError::from_store)?);
        self.lock().listing = Some((Arc::clone(&listing), Instant::now()));
        Ok(listing)
    }

    /// The slice indexes that bytes `range` of `version` span.
    pub fn slices_of(&self, range: Range<u64>) -> Range<u64> {
        if range.is_empty() {
            return 0..0;
        }
        range.start / self.config.slice_len..(range.end - 1) / self.config.slice_len + 1
    }

    /// Bytes of the object slice `index` holds.
    pub fn slice_range(&self, version: &ObjectVersion, index: u64) -> Range<u64> {
        let start = index * self.config.slice_len;
        start..(start + self.config.slice_len).min(version.len)
    }

    /// Whether slice `index` of `version` is on disk now.
    pub fn has(&self, version: &ObjectVersion, index: u64) -> bool {
        let id: SliceId = (version.key.as_str().to_string(), version.etag.clone(), index);
        matches!(self.lock().slices.get(&id), Some(Slice::Ready { .. }))
    }

    /// Whether slice `index` of `version` is on disk or being fetched now: asking for it would
    /// not start another fetch.
    pub fn has_or_fetching(&self, version: &ObjectVersion, index: u64) -> bool {
        let id: SliceId = (version.key.as_str().to_string(), version.etag.clone(), index);
        self.lock().slices.contains_key(&id)
    }

    /// Slice `index` of `version`, opened: from the cache, or fetched (once, however many ask at
    /// the same time) when `may_block`. The descriptor stays valid after an eviction.
    pub fn slice(&self, version: &ObjectVersion, index: u64, may_block: bool) -> Result<File, CacheError> {
        let id: SliceId = (version.key.as_str().to_string(), version.etag.clone(), index);
        let mut state = self.lock();
        let mut waited_for = None;
        loop {
            match state.slices.get(&id) {
                Some(Slice::Ready { path, len, used }) => {
                    let file = File::open(path)?;
                    let (len, old) = (*len, *used);
                    state.tick += 1;
                    let tick = state.tick;
                    state.lru.remove(&old);
                    state.lru.insert(tick, id.clone());
                    if let Some(Slice::Ready { used, .. }) = state.slices.get_mut(&id) {
                        *used = tick;
                    }
                    if waited_for.is_none() {
                        self.stats.hits.fetch_add(1, Ordering::Relaxed);
                        self.stats.bytes_from_cache.fetch_add(len, Ordering::Relaxed);
                    }
                    return Ok(file);
                }
                Some(Slice::Fetching { generation }) => {
                    if !may_block {
                        return Err(CacheError::WouldBlock);
                    }
                    if waited_for.is_none() {
                        self.stats.coalesced_waits.fetch_add(1, Ordering::Relaxed);
                    }
                    waited_for = Some(*generation);
                    state = self.fetched.wait(state).unwrap_or_else(|e| e.into_inner());
                }
                None => {
                    if let Some(generation) = waited_for {
                        // The fetch waited for ended without a slice: its failure is ours.
                        if let Some(reason) = state.failed.get(&generation) {
                            return Err(CacheError::Origin(reason.clone()));
                        }
                    }
                    if !may_block {
                        return Err(CacheError::WouldBlock);
                    }
                    break;
                }
            }
        }
        state.tick += 1;
        let generation = state.tick;
        state.slices.insert(id.clone(), Slice::Fetching { generation });
        drop(state);
        let range = self.slice_range(version, index);
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        self.stats.fetching_bytes.fetch_add(range.end - range.start, Ordering::Relaxed);
        let fetched = self.fetch(version, index, range.clone());
        self.stats.fetching_bytes.fetch_sub(range.end - range.start, Ordering::Relaxed);
        let mut state = self.lock();
        let result = match fetched {
            Ok((path, file)) => {
                let len = range.end - range.start;
                state.tick += 1;
                let tick = state.tick;
                state.slices.insert(id.clone(), Slice::Ready { path, len, used: tick });
                state.lru.insert(tick, id.clone());
                state.held += len;
                self.evict(&mut state, &id);
                Ok(file)
            }
            Err(e) => {
                state.slices.remove(&id);
                if matches!(e, CacheError::Changed | CacheError::NotFound) {
                    // Resolve the version again on the next request.
                    state.objects.remove(version.key.as_str());
                }
                // Remembered briefly: waiters of this generation read it when they wake.
                if state.failed.len() > 1024 {
                    state.failed.clear();
                }
                state.failed.insert(generation, e.to_string());
                Err(e)
            }
        };
        self.stats.held_bytes.store(state.held, Ordering::Relaxed);
        drop(state);
        self.fetched.notify_all();
        result
    }

    /// Fetches one slice into a new file of the cache; returns its path and an open descriptor.
    fn fetch(
        &self,
        version: &ObjectVersion,
        index: u64,
        range: Range<u64>,
    ) -> Result<(PathBuf, File), CacheError> {
        let want = range.end - range.start;
        let bytes = self
            .origin(|| self.store.read_range_if(&version.key, range, &version.etag))
            .map_err(CacheError::from_store)?;
        if bytes.len() as u64 != want {
            self.stats.origin_errors.fetch_add(1, Ordering::Relaxed);
            return Err(CacheError::Origin(format!("slice {index}: {} bytes, not {want}", bytes.len())));
        }
        self.stats.bytes_from_origin.fetch_add(want, Ordering::Relaxed);
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let path = self.config.dir.join(format!(
            "{}-{}.slice",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path)?;
            file.write_all(&bytes)?;
            file.seek(SeekFrom::Start(0))?;
            Ok::<File, io::Error>(file)
        })();
        match written {
            Ok(file) => Ok((path, file)),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(CacheError::Io(e))
            }
        }
    }

    /// Evicts least recently used slices (never `keep`, the one just added) until within size.
    fn evict(&self, state: &mut State, keep: &SliceId) {
        while state.held > self.config.max_bytes {
            let victim = state.lru.values().find(|id| *id != keep).cloned();
            let Some(victim) = victim else { break };
            self.remove_ready(state, &victim);
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn remove_ready(&self, state: &mut State, id: &SliceId) {
        if let Some(Slice::Ready { path, len, used }) = state.slices.remove(id) {
            state.lru.remove(&used);
            state.held -= len;
            if let Err(e) = std::fs::remove_file(&path) {
                tracing::warn!("cache: cannot remove {}: {e}", path.display());
            }
        }
        self.stats.held_bytes.store(state.held, Ordering::Relaxed);
    }

    /// Fills `into` with the bytes of `version` at `offset`, through the slices (blocking on a
    /// miss): the RTSP side's sample reads and the MP4 index reads.
    pub fn read_at(&self, version: &ObjectVersion, offset: u64, into: &mut [u8]) -> Result<(), CacheError> {
        let end = offset + into.len() as u64;
        if end > version.len {
            return Err(CacheError::Io(io::Error::from(io::ErrorKind::UnexpectedEof)));
        }
        let mut done = 0usize;
        for index in self.slices_of(offset..end) {
            let range = self.slice_range(version, index);
            let file = self.slice(version, index, true)?;
            let from = (offset + done as u64).max(range.start);
            let take = (range.end.min(end) - from) as usize;
            file.read_exact_at(&mut into[done..done + take], from - range.start)?;
            done += take;
        }
        Ok(())
    }

    /// A reader of `version` (for indexing an MP4), reading through the slices.
    pub fn reader<'a>(&'a self, version: &'a ObjectVersion) -> VersionReader<'a> {
        VersionReader { cache: self, version, pos: 0 }
    }
}

/// Reads one version of an object through the cache; see [`SliceCache::reader`].
#[derive(Debug)]
pub struct VersionReader<'a> {
    cache: &'a SliceCache,
    version: &'a ObjectVersion,
    pos: u64,
}

impl Read for VersionReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.version.len.saturating_sub(self.pos);
        // Never across a slice boundary, so one read is one slice.
        let to_boundary = self.cache.config.slice_len - self.pos % self.cache.config.slice_len;
        let n = (buf.len() as u64).min(left).min(to_boundary) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.cache.read_at(self.version, self.pos, &mut buf[..n]).map_err(io::Error::other)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for VersionReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.version.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LocalStore, PutOptions};

    fn cache_of(root: &std::path::Path, dir: &std::path::Path, max: u64) -> SliceCache {
        let store: Arc<dyn Store> = Arc::new(LocalStore::open(root).unwrap());
        let config = CacheConfig {
            dir: dir.to_path_buf(),
            max_bytes: max,
            slice_len: 1000,
            revalidate: Duration::ZERO,
        };
        SliceCache::new(store, config).unwrap()
    }

    fn put(root: &std::path::Path, name: &str, bytes: &[u8]) {
        let store = LocalStore::open(root).unwrap();
        crate::put_bytes(&store, &Key::new(name).unwrap(), bytes, PutOptions::default()).unwrap();
    }

    #[test]
    fn slices_are_fetched_once_and_the_size_holds() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        put(root.path(), "a.bin", &data);
        let cache = cache_of(root.path(), dir.path(), 3000);
        let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
        assert!(matches!(cache.slice(&v, 0, false), Err(CacheError::WouldBlock)));
        let mut all = vec![0u8; data.len()];
        cache.read_at(&v, 0, &mut all).unwrap();
        assert_eq!(all, data);
        let s = cache.stats();
        assert_eq!(s.misses.load(Ordering::Relaxed), 10);
        assert_eq!(s.evictions.load(Ordering::Relaxed), 7);
        assert!(s.held_bytes.load(Ordering::Relaxed) <= 3000);
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 3, "evicted slices leave no file");
        // The last three slices are warm; reading them again costs no origin request.
        let before = s.origin_requests.load(Ordering::Relaxed);
        let mut tail = vec![0u8; 2500];
        cache.read_at(&v, 7500, &mut tail).unwrap();
        assert_eq!(tail, data[7500..]);
        assert_eq!(s.origin_requests.load(Ordering::Relaxed), before);
    }

    #[test]
    fn concurrent_misses_make_one_fetch() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        put(root.path(), "a.bin", &[7u8; 1000]);
        let cache = cache_of(root.path(), dir.path(), 1 << 20);
        let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
        std::thread::scope(|s| {
            for _ in 0..16 {
                s.spawn(|| {
                    let mut b = [0u8; 1000];
                    cache.slice(&v, 0, true).unwrap().read_exact_at(&mut b, 0).unwrap();
                    assert_eq!(b, [7u8; 1000]);
                });
            }
        });
        let s = cache.stats();
        assert_eq!(s.misses.load(Ordering::Relaxed), 1);
        assert_eq!(s.hits.load(Ordering::Relaxed) + s.coalesced_waits.load(Ordering::Relaxed), 15);
    }

    #[test]
    fn a_replaced_object_is_never_read_against_its_old_version() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        put(root.path(), "a.bin", &[1u8; 2000]);
        let cache = cache_of(root.path(), dir.path(), 1 << 20);
        let key = Key::new("a.bin").unwrap();
        let old = cache.version(&key, true).unwrap().unwrap();
        cache.slice(&old, 0, true).unwrap();
        std::thread::sleep(Duration::from_millis(1100));
        put(root.path(), "a.bin", &[2u8; 2500]);
        assert!(matches!(cache.slice(&old, 1, true), Err(CacheError::Changed)));
        let new = cache.version(&key, true).unwrap().unwrap();
        assert_ne!(new.etag, old.etag);
        let mut all = vec![0u8; 2500];
        cache.read_at(&new, 0, &mut all).unwrap();
        assert_eq!(all, [2u8; 2500]);
    }
}
