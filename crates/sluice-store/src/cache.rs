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
//! so eviction never corrupts a response, and the kernel frees the blocks when it ends).
//!
//! The directory is the cache's alone and the cache outlives what happens to it (its layout and
//! lock are the `dir` module's):
//! - One process at a time: it is locked for the cache's life, and a second cache on it fails
//!   to start with [`CacheDirInUse`], naming the holder.
//! - A restart reuses it: slice files an earlier process left whole (a crash included) are
//!   taken back at start, oldest first as least recently used, within the size; the rest
//!   (temporary files, short files) are removed. A reused slice is only ever found for the
//!   entity tag it was fetched with, like any other.
//! - Something else removing slice files or the whole directory (a tmp cleaner, an operator
//!   freeing disk) costs refetches, not errors: a slice whose file is gone is forgotten and
//!   fetched again, and the directory and its lock are made again (one log line).
//! - A slice the disk will not take (full, failing) is still served: from the bytes just
//!   fetched, in an anonymous in-memory file, and counted in [`CacheStats::write_failures`].
//!
//! The API is blocking, like [`Store`]: callers that must not block (an event-loop worker) ask
//! with `may_block = false` and get [`CacheError::WouldBlock`] when the origin is needed, then
//! repeat the call where blocking is fine (a job). This module does not speak HTTP.

mod dir;

pub use dir::CacheDirInUse;

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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
    /// Where slice files live (created if missing; locked while the cache lives; slices left in
    /// it whole are reused, the cache's other files in it removed).
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
    /// The cache directory failed (at start, [`CacheDirInUse`] when another process holds it:
    /// see [`CacheError::dir_in_use`]).
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

    /// The process holding the cache directory, when that is why [`SliceCache::new`] failed.
    /// (It travels as an I/O error, "resource busy", so that the mapping of run-time failures
    /// to responses needs no case for an error only the start can meet.)
    pub fn dir_in_use(&self) -> Option<&CacheDirInUse> {
        match self {
            CacheError::Io(e) => e.get_ref()?.downcast_ref::<CacheDirInUse>(),
            _ => None,
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
    /// Fetched slices the cache directory would not take (disk full, I/O errors): served from
    /// memory instead, and fetched again next time.
    pub write_failures: AtomicU64,
    /// Slices whose files something else removed, forgotten (and fetched again when asked for).
    pub vanished_slices: AtomicU64,
    /// Times the cache directory was gone and was made again.
    pub dir_recreations: AtomicU64,
    /// Slices an earlier process left whole, reused at start.
    pub reused_slices: AtomicU64,
}

/// A slice's file name in the cache directory, which says its version and index (see `dir`).
type SliceName = String;

#[derive(Debug)]
enum Slice {
    /// Someone is fetching it; `generation` tells waiters whether the fetch they waited for ended.
    Fetching { generation: u64 },
    /// On disk.
    Ready { len: u64, used: u64 },
}

/// A fetched slice, open.
enum Fetched {
    /// Written to the cache directory.
    Stored(File),
    /// The directory would not take it: its bytes in memory, for this caller only.
    InMemory(File),
}

#[derive(Debug, Default)]
struct State {
    /// Metadata by key: `None` for a missing object, with when it was checked.
    objects: HashMap<String, (Option<Arc<ObjectVersion>>, Instant)>,
    /// The last listing of the whole store and when it was made.
    listing: Option<(Arc<Vec<ObjectMeta>>, Instant)>,
    slices: HashMap<SliceName, Slice>,
    /// Ready slices by last use (a tick), oldest first.
    lru: BTreeMap<u64, SliceName>,
    /// Keys whose metadata someone is fetching.
    resolving: std::collections::HashSet<String>,
    /// Fetches that failed, by generation, so their waiters fail too instead of each retrying.
    failed: HashMap<u64, String>,
    /// Versions whose slices an earlier process left, as (name prefix, object length), by the
    /// key part of the prefix: dropped when their key next resolves, and forgotten if that
    /// finds another version (nothing else knows they are stale).
    leftovers: HashMap<String, Vec<(String, u64)>>,
    held: u64,
    tick: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct SliceCache {
    store: Arc<dyn Store>,
    config: CacheConfig,
    dir: dir::CacheDir,
    state: Mutex<State>,
    fetched: Condvar,
    stats: CacheStats,
    /// A caller that could not block found a slice file gone: the next one that can looks for
    /// what else is gone.
    needs_repair: AtomicBool,
    /// One repair at a time, and what the last one reported.
    repairing: Mutex<RepairLog>,
    /// When the last write failure was logged (one line a minute, the counter says the rest).
    write_failure_logged: Mutex<Option<Instant>>,
}

/// What repairs of the cache directory have logged, so that a lasting failure is one line.
#[derive(Debug, Default)]
struct RepairLog {
    /// [`CacheStats::vanished_slices`] when the last line was written.
    vanished: u64,
    /// The directory could not be restored, and that was logged.
    failing: bool,
}

/// Write failures are logged at most this often.
const WRITE_FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

impl SliceCache {
    /// A cache of `store` in `config.dir`, which it locks: the slices found there whole are
    /// reused, the cache's other files there are removed. Fails with [`CacheDirInUse`] (see
    /// [`CacheError::dir_in_use`]) when another process uses the directory.
    pub fn new(store: Arc<dyn Store>, config: CacheConfig) -> Result<SliceCache, CacheError> {
        let config = CacheConfig { slice_len: config.slice_len.max(1), ..config };
        let dir = dir::CacheDir::open(&config.dir)?;
        let scan = dir.scan(config.slice_len)?;
        let cache = SliceCache {
            store,
            dir,
            state: Mutex::new(State::default()),
            fetched: Condvar::new(),
            stats: CacheStats::default(),
            needs_repair: AtomicBool::new(false),
            repairing: Mutex::new(RepairLog::default()),
            write_failure_logged: Mutex::new(None),
            config,
        };
        cache.adopt(scan);
        Ok(cache)
    }

    /// Takes back the slices an earlier process left whole, the oldest as least recently used,
    /// and evicts what is beyond the size.
    fn adopt(&self, mut scan: dir::Scan) {
        let mut state = self.lock();
        scan.whole.sort_by_key(|l| l.modified);
        let (found, found_bytes) = (scan.whole.len(), scan.whole.iter().map(|l| l.len).sum::<u64>());
        for leftover in scan.whole {
            state.tick += 1;
            let tick = state.tick;
            state.lru.insert(tick, leftover.name.clone());
            state.slices.insert(leftover.name, Slice::Ready { len: leftover.len, used: tick });
            state.held += leftover.len;
            let versions = state.leftovers.entry(dir::key_part(&leftover.version).to_string()).or_default();
            let version = (leftover.version, leftover.object_len);
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        self.evict(&mut state, None);
        let kept = state.slices.len();
        self.stats.reused_slices.store(kept as u64, Ordering::Relaxed);
        self.stats.held_bytes.store(state.held, Ordering::Relaxed);
        if found > 0 || scan.removed > 0 {
            tracing::info!(
                "cache: reusing {kept} slice(s) ({} bytes) left in {}{}; removed {} file(s) that were not whole slices",
                state.held,
                self.config.dir.display(),
                if kept < found { format!(" ({found} found, {found_bytes} bytes: beyond the size)") } else { String::new() },
                scan.removed,
            );
        }
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
        self.drop_leftovers(&mut state, key, current.as_deref());
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

    /// The name prefix of the slices of `version`.
    fn prefix_of(version: &ObjectVersion) -> String {
        dir::version_prefix(version.key.as_str(), &version.etag)
    }

    /// The file name of slice `index` of `version`.
    fn name_of(&self, version: &ObjectVersion, index: u64) -> SliceName {
        dir::slice_name(&Self::prefix_of(version), self.config.slice_len, version.len, index)
    }

    fn forget_version(&self, state: &mut State, old: &ObjectVersion) {
        self.forget_slices(state, &Self::prefix_of(old), old.len);
    }

    fn forget_slices(&self, state: &mut State, prefix: &str, object_len: u64) {
        for index in 0..object_len.div_ceil(self.config.slice_len) {
            let name = dir::slice_name(prefix, self.config.slice_len, object_len, index);
            if let Some(Slice::Ready { .. }) = state.slices.get(&name) {
                self.remove_ready(state, &name);
            }
        }
    }

    /// The leftovers of `key` are known for what they are now that the key resolved to
    /// `current`: those of another version are forgotten (and removed).
    fn drop_leftovers(&self, state: &mut State, key: &Key, current: Option<&ObjectVersion>) {
        if state.leftovers.is_empty() {
            return;
        }
        let current = current.map(|c| (Self::prefix_of(c), c.len));
        let key_part = match &current {
            Some((prefix, _)) => dir::key_part(prefix).to_string(),
            None => dir::key_part(&dir::version_prefix(key.as_str(), "")).to_string(),
        };
        for (prefix, object_len) in state.leftovers.remove(&key_part).unwrap_or_default() {
            if current.as_ref().is_none_or(|(p, len)| *p != prefix || *len != object_len) {
                self.forget_slices(state, &prefix, object_len);
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
        self.drop_leftovers(&mut state, key, None);
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
        let name = self.name_of(version, index);
        matches!(self.lock().slices.get(&name), Some(Slice::Ready { .. }))
    }

    /// Whether slice `index` of `version` is on disk or being fetched now: asking for it would
    /// not start another fetch.
    pub fn has_or_fetching(&self, version: &ObjectVersion, index: u64) -> bool {
        let name = self.name_of(version, index);
        self.lock().slices.contains_key(&name)
    }

    /// Slice `index` of `version`, opened: from the cache, or fetched (once, however many ask at
    /// the same time) when `may_block`. The descriptor stays valid after an eviction.
    pub fn slice(&self, version: &ObjectVersion, index: u64, may_block: bool) -> Result<File, CacheError> {
        if may_block && self.needs_repair.swap(false, Ordering::Relaxed) {
            // Failing, it has logged why; a fetch then serves from memory.
            let _ = self.repair();
        }
        let name = self.name_of(version, index);
        let mut state = self.lock();
        let mut waited_for = None;
        loop {
            match state.slices.get(&name) {
                Some(Slice::Ready { len, used }) => {
                    let (len, old) = (*len, *used);
                    let file = match self.dir.open_slice(&name) {
                        Ok(file) => file,
                        Err(e) if e.kind() == io::ErrorKind::NotFound => {
                            // Removed behind the cache's back: fetched again, like a miss.
                            self.forget_vanished(&mut state, &name);
                            if may_block {
                                drop(state);
                                let _ = self.repair();
                                state = self.lock();
                            } else {
                                self.needs_repair.store(true, Ordering::Relaxed);
                            }
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    };
                    state.tick += 1;
                    let tick = state.tick;
                    state.lru.remove(&old);
                    state.lru.insert(tick, name.clone());
                    if let Some(Slice::Ready { used, .. }) = state.slices.get_mut(&name) {
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
        state.slices.insert(name.clone(), Slice::Fetching { generation });
        drop(state);
        let range = self.slice_range(version, index);
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        self.stats.fetching_bytes.fetch_add(range.end - range.start, Ordering::Relaxed);
        let fetched = self.fetch(version, index, range.clone(), &name);
        self.stats.fetching_bytes.fetch_sub(range.end - range.start, Ordering::Relaxed);
        let mut state = self.lock();
        let result = match fetched {
            Ok(Fetched::Stored(file)) => {
                let len = range.end - range.start;
                state.tick += 1;
                let tick = state.tick;
                state.slices.insert(name.clone(), Slice::Ready { len, used: tick });
                state.lru.insert(tick, name.clone());
                state.held += len;
                self.evict(&mut state, Some(&name));
                Ok(file)
            }
            Ok(Fetched::InMemory(file)) => {
                // Not cached: whoever waited for it fetches it again (and may find room).
                state.slices.remove(&name);
                Ok(file)
            }
            Err(e) => {
                state.slices.remove(&name);
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

    /// Fetches one slice into the cache directory as `name` (or, when the directory will not
    /// take it, into memory); returns it open.
    fn fetch(
        &self,
        version: &ObjectVersion,
        index: u64,
        range: Range<u64>,
        name: &str,
    ) -> Result<Fetched, CacheError> {
        let want = range.end - range.start;
        let bytes = self
            .origin(|| self.store.read_range_if(&version.key, range, &version.etag))
            .map_err(CacheError::from_store)?;
        if bytes.len() as u64 != want {
            self.stats.origin_errors.fetch_add(1, Ordering::Relaxed);
            return Err(CacheError::Origin(format!("slice {index}: {} bytes, not {want}", bytes.len())));
        }
        self.stats.bytes_from_origin.fetch_add(want, Ordering::Relaxed);
        self.store_slice(name, &bytes)
    }

    /// Writes fetched `bytes` as slice file `name`, putting the directory back first if
    /// something removed it; the bytes are served from memory if that fails.
    fn store_slice(&self, name: &str, bytes: &[u8]) -> Result<Fetched, CacheError> {
        // One stat a slice: a removed or emptied directory took the lock file with it. One this
        // cache cannot take back (another process holds it now) is not written to.
        let mut written = match self.dir.lock_is_intact() || self.repair() {
            true => self.dir.write(name, bytes),
            false => Err(io::Error::other("the cache directory could not be restored")),
        };
        if matches!(&written, Err(e) if e.kind() == io::ErrorKind::NotFound) && self.repair() {
            // Removed between the check and the write.
            written = self.dir.write(name, bytes);
        }
        match written {
            Ok(file) => Ok(Fetched::Stored(file)),
            Err(e) => {
                let failures = self.stats.write_failures.fetch_add(1, Ordering::Relaxed) + 1;
                let mut logged = self.write_failure_logged.lock().unwrap_or_else(|e| e.into_inner());
                if logged.is_none_or(|at| at.elapsed() >= WRITE_FAILURE_LOG_EVERY) {
                    *logged = Some(Instant::now());
                    tracing::warn!(
                        "cache: cannot write a slice to {}: {e}; serving it from memory ({failures} slice write(s) failed so far)",
                        self.config.dir.display()
                    );
                }
                drop(logged);
                Ok(Fetched::InMemory(dir::in_memory(bytes)?))
            }
        }
    }

    /// Puts the directory and its lock back if they are gone, and forgets the slices whose
    /// files are gone (a tmp cleaner, an operator freeing disk); logs one line when it found any.
    /// Returns whether the directory is this cache's (again).
    fn repair(&self) -> bool {
        let mut log = self.repairing.lock().unwrap_or_else(|e| e.into_inner());
        let dir = self.config.dir.display();
        let restored = match self.dir.restore() {
            Ok(restored) => restored,
            Err(e) => {
                // Slices are served from memory until the directory can be written again.
                if !log.failing {
                    log.failing = true;
                    tracing::error!(
                        "cache: cannot restore the cache directory {dir}: {e}; slices are served from memory until it can be"
                    );
                }
                return false;
            }
        };
        log.failing = false;
        let ready: Vec<SliceName> = {
            let state = self.lock();
            state
                .slices
                .iter()
                .filter(|(_, s)| matches!(s, Slice::Ready { .. }))
                .map(|(n, _)| n.clone())
                .collect()
        };
        if let Ok(present) = self.dir.names() {
            let gone: Vec<SliceName> =
                ready.into_iter().filter(|n| !present.contains(std::ffi::OsStr::new(n.as_str()))).collect();
            let mut state = self.lock();
            for name in gone {
                // Written again since the listing was read, or not: the file decides.
                if matches!(state.slices.get(&name), Some(Slice::Ready { .. })) && !self.dir.exists(&name) {
                    self.forget_vanished(&mut state, &name);
                }
            }
        }
        let vanished = self.stats.vanished_slices.load(Ordering::Relaxed);
        let new = vanished - log.vanished;
        log.vanished = vanished;
        if restored.recreated {
            self.stats.dir_recreations.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "cache: the cache directory {dir} was removed while in use; recreated it ({new} slice(s) forgotten, fetched again when asked for)"
            );
        } else if new > 0 || restored.relocked {
            tracing::warn!(
                "cache: {new} slice file(s) were removed from the cache directory {dir} by another process; forgotten, fetched again when asked for"
            );
        }
        true
    }

    /// Forgets a ready slice whose file is gone.
    fn forget_vanished(&self, state: &mut State, name: &str) {
        if let Some(Slice::Ready { len, used }) = state.slices.remove(name) {
            state.lru.remove(&used);
            state.held -= len;
            self.stats.vanished_slices.fetch_add(1, Ordering::Relaxed);
            self.stats.held_bytes.store(state.held, Ordering::Relaxed);
        }
    }

    /// Evicts least recently used slices (never `keep`, the one just added) until within size.
    fn evict(&self, state: &mut State, keep: Option<&str>) {
        while state.held > self.config.max_bytes {
            let victim = state.lru.values().find(|name| Some(name.as_str()) != keep).cloned();
            let Some(victim) = victim else { break };
            self.remove_ready(state, &victim);
            self.stats.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn remove_ready(&self, state: &mut State, name: &str) {
        if let Some(Slice::Ready { len, used }) = state.slices.remove(name) {
            state.lru.remove(&used);
            state.held -= len;
            if let Err(e) = self.dir.remove(name) {
                tracing::warn!("cache: cannot remove {name} from {}: {e}", self.config.dir.display());
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

    /// The slice files in `dir`, sorted.
    fn slice_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut files: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "slice"))
            .collect();
        files.sort();
        files
    }

    /// The whole of `key` read through `cache`, checked against `data`.
    fn read_whole(cache: &SliceCache, key: &str, data: &[u8]) {
        let v = cache.version(&Key::new(key).unwrap(), true).unwrap().unwrap();
        let mut all = vec![0u8; v.len as usize];
        cache.read_at(&v, 0, &mut all).unwrap();
        assert!(all == data, "{key} read back whole and correct");
    }

    fn count(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    fn pattern(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32).map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8).collect()
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
        assert_eq!(slice_files(dir.path()).len(), 3, "evicted slices leave no file");
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

    #[test]
    fn a_second_cache_on_the_directory_is_refused_naming_the_first() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let first = cache_of(root.path(), dir.path(), 1 << 20);
        let store: Arc<dyn Store> = Arc::new(LocalStore::open(root.path()).unwrap());
        let config = first.config().clone();
        let refused = SliceCache::new(Arc::clone(&store), config.clone()).unwrap_err();
        let busy = refused.dir_in_use().expect("refused because the directory is held");
        assert_eq!(busy.pid, Some(std::process::id()));
        assert!(refused.to_string().contains("is in use by sluice pid"), "{refused}");
        drop(first);
        SliceCache::new(store, config).expect("the directory is free once the first cache is gone");
    }

    #[test]
    fn whole_leftover_slices_are_reused_and_the_rest_removed() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data = pattern(4500, 1);
        put(root.path(), "a.bin", &data);
        let first = cache_of(root.path(), dir.path(), 1 << 20);
        read_whole(&first, "a.bin", &data);
        // Dropping a cache cleans nothing up: the directory is as a SIGKILL leaves it.
        drop(first);
        let files = slice_files(dir.path());
        assert_eq!(files.len(), 5);
        // One slice cut short, a temporary file, a slice of an older layout, a stranger's file.
        let short = &files[1];
        std::fs::OpenOptions::new().write(true).open(short).unwrap().set_len(999).unwrap();
        std::fs::write(format!("{}.3.tmp", files[2].display()), b"partial").unwrap();
        std::fs::write(dir.path().join("1234-5.slice"), b"old").unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"an operator's").unwrap();

        let second = cache_of(root.path(), dir.path(), 1 << 20);
        let s = second.stats();
        assert_eq!(count(&s.reused_slices), 4);
        assert_eq!(count(&s.held_bytes), 4500 - 1000);
        assert!(!short.exists(), "the short slice is removed");
        assert!(!dir.path().join("1234-5.slice").exists());
        assert!(dir.path().join("notes.txt").exists(), "files not the cache's are left alone");
        read_whole(&second, "a.bin", &data);
        assert_eq!(count(&s.misses), 1, "only the short slice is fetched again");
        assert_eq!(count(&s.hits), 4);
        assert_eq!(slice_files(dir.path()).len(), 5);
    }

    #[test]
    fn leftovers_of_a_replaced_object_are_never_served_and_are_removed() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let old = pattern(2500, 2);
        put(root.path(), "a.bin", &old);
        let first = cache_of(root.path(), dir.path(), 1 << 20);
        read_whole(&first, "a.bin", &old);
        drop(first);
        std::thread::sleep(Duration::from_millis(1100));
        let new = pattern(2500, 3);
        put(root.path(), "a.bin", &new);
        let second = cache_of(root.path(), dir.path(), 1 << 20);
        assert_eq!(count(&second.stats().reused_slices), 3);
        read_whole(&second, "a.bin", &new);
        assert_eq!(count(&second.stats().misses), 3, "every slice of the new version is fetched");
        assert_eq!(slice_files(dir.path()).len(), 3, "the old version's slices are removed");
        assert_eq!(count(&second.stats().held_bytes), 2500);
    }

    #[test]
    fn leftovers_beyond_the_size_are_evicted_oldest_first() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data = pattern(5000, 4);
        put(root.path(), "a.bin", &data);
        read_whole(&cache_of(root.path(), dir.path(), 1 << 20), "a.bin", &data);
        let second = cache_of(root.path(), dir.path(), 2000);
        assert_eq!(count(&second.stats().reused_slices), 2);
        assert_eq!(count(&second.stats().held_bytes), 2000);
        assert_eq!(slice_files(dir.path()).len(), 2);
    }

    #[test]
    fn a_removed_directory_is_recreated_and_refilled() {
        let (root, parent) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dir = parent.path().join("cache");
        let data = pattern(3000, 5);
        put(root.path(), "a.bin", &data);
        let cache = cache_of(root.path(), &dir, 1 << 20);
        read_whole(&cache, "a.bin", &data);
        std::fs::remove_dir_all(&dir).unwrap();
        read_whole(&cache, "a.bin", &data);
        let s = cache.stats();
        assert_eq!(count(&s.dir_recreations), 1);
        assert_eq!(count(&s.vanished_slices), 3);
        assert_eq!(count(&s.misses), 6);
        assert_eq!(count(&s.held_bytes), 3000);
        assert_eq!(slice_files(&dir).len(), 3, "refilled");
        let store: Arc<dyn Store> = Arc::new(LocalStore::open(root.path()).unwrap());
        let again = SliceCache::new(store, cache.config().clone()).unwrap_err();
        assert!(again.dir_in_use().is_some(), "the recreated directory is locked again");
        // And again, warm.
        read_whole(&cache, "a.bin", &data);
        assert_eq!(count(&s.misses), 6);
    }

    #[test]
    fn slices_removed_by_another_process_are_forgotten_and_fetched_again() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data = pattern(3000, 6);
        put(root.path(), "a.bin", &data);
        let cache = cache_of(root.path(), dir.path(), 1 << 20);
        read_whole(&cache, "a.bin", &data);
        let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
        // Every file removed, the lock file too (`rm -rf dir/*`).
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            std::fs::remove_file(entry.unwrap().path()).unwrap();
        }
        // On an event loop: not served as a missing file, not fetched there either.
        assert!(matches!(cache.slice(&v, 0, false), Err(CacheError::WouldBlock)));
        assert!(!cache.has(&v, 0));
        read_whole(&cache, "a.bin", &data);
        let s = cache.stats();
        assert_eq!(count(&s.vanished_slices), 3, "the other two found by the repair, not served missing");
        assert_eq!(count(&s.dir_recreations), 0);
        assert_eq!(count(&s.held_bytes), 3000);
        assert!(dir.path().join(dir::LOCK_FILE).exists(), "the lock is taken again");
        assert_eq!(slice_files(dir.path()).len(), 3);
    }

    #[test]
    fn a_slice_the_disk_will_not_take_is_served_from_memory_and_counted() {
        let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let data = pattern(2500, 7);
        put(root.path(), "a.bin", &data);
        let cache = cache_of(root.path(), dir.path(), 1 << 20);
        cache.dir.failing_writes.store(1, Ordering::Relaxed);
        let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
        let first = cache.slice(&v, 0, true).unwrap();
        let mut bytes = vec![0u8; 1000];
        first.read_exact_at(&mut bytes, 0).unwrap();
        assert!(bytes == data[..1000], "the failed slice's bytes are served");
        let s = cache.stats();
        assert_eq!(count(&s.write_failures), 1);
        assert!(!cache.has(&v, 0), "not cached");
        assert!(slice_files(dir.path()).is_empty(), "no partial file is left");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the lock file");
        // The disk takes the next ones.
        read_whole(&cache, "a.bin", &data);
        assert_eq!(count(&s.write_failures), 1);
        assert_eq!(count(&s.misses), 4);
        assert_eq!(count(&s.held_bytes), 2500);
    }

    #[test]
    fn a_directory_another_cache_took_while_it_was_gone_is_not_written_to() {
        let (root, parent) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dir = parent.path().join("cache");
        let data = pattern(2000, 8);
        put(root.path(), "a.bin", &data);
        let first = cache_of(root.path(), &dir, 1 << 20);
        read_whole(&first, "a.bin", &data);
        std::fs::remove_dir_all(&dir).unwrap();
        let second = cache_of(root.path(), &dir, 1 << 20);
        // The first still serves, from memory, and leaves the second's directory alone.
        read_whole(&first, "a.bin", &data);
        read_whole(&first, "a.bin", &data);
        assert_eq!(count(&first.stats().write_failures), 4);
        assert!(slice_files(&dir).is_empty(), "nothing written into the directory the second holds");
        read_whole(&second, "a.bin", &data);
        assert_eq!(slice_files(&dir).len(), 2);
    }
}
