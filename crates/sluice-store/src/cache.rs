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
//!
//! This file owns versions, slice lookups, fetches and eviction (through the shared
//! [`sluice_proto::lru::Lru`]); living with what happens to the directory is `repair`'s job,
//! its layout and lock `dir`'s, and reading an object through the slices `reader`'s.

mod dir;
mod reader;
mod repair;

pub use dir::CacheDirInUse;
pub use reader::VersionReader;

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use sluice_proto::lru::Lru;

use repair::RepairLog;

use crate::{Key, ObjectMeta, Store, StoreError};

/// The default slice length: large enough that a slice's round trip is amortised, small enough
/// that the first byte of a range never waits for much more than it needs.
pub const SLICE_LEN: u64 = 4 << 20;

/// A missing object is remembered this long (at most the revalidation period), so that an
/// object uploaded through another edge shows up here within about a second.
const NEGATIVE_TTL: Duration = Duration::from_secs(1);

/// Object metadata entries kept (a few hundred bytes each), the least recently used forgotten
/// past it: requests for made-up names must not grow memory without end, and forgetting an
/// entry costs only a HEAD.
const MAX_KNOWN_OBJECTS: u64 = 100_000;

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
    /// Bytes callers took from slices found in the cache (hits): what a response sends or a
    /// read copies out of them, not the slices' lengths (an RTSP viewer reads a 4 MiB slice a
    /// sample at a time, and counting the slice at every read made 11.6 MB sent read as 1.6 GB).
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

/// A fetched slice, open.
enum Fetched {
    /// Written to the cache directory.
    Stored(File),
    /// The directory would not take it: its bytes in memory, for this caller only.
    InMemory(File),
}

#[derive(Debug)]
struct State {
    /// Metadata by key: `None` for a missing object, with when it was checked.
    objects: Lru<String, (Option<Arc<ObjectVersion>>, Instant)>,
    /// The last listing of the whole store and when it was made.
    listing: Option<(Arc<Vec<ObjectMeta>>, Instant)>,
    /// Slices on disk, costing their length, within [`CacheConfig::max_bytes`].
    ready: Lru<SliceName, ()>,
    /// Slices someone is fetching, with the generation that tells waiters whether the fetch
    /// they waited for ended.
    fetching: HashMap<SliceName, u64>,
    /// Keys whose metadata someone is fetching.
    resolving: HashSet<String>,
    /// Fetches that failed, by generation, so their waiters fail too instead of each retrying.
    failed: HashMap<u64, String>,
    /// Versions whose slices an earlier process left, as (name prefix, object length), by the
    /// key part of the prefix: dropped when their key next resolves, and forgotten if that
    /// finds another version (nothing else knows they are stale).
    leftovers: HashMap<String, Vec<(String, u64)>>,
    /// The last fetch generation handed out.
    generation: u64,
}

impl State {
    fn new(max_bytes: u64) -> State {
        State {
            objects: Lru::new(MAX_KNOWN_OBJECTS),
            listing: None,
            ready: Lru::new(max_bytes),
            fetching: HashMap::new(),
            resolving: HashSet::new(),
            failed: HashMap::new(),
            leftovers: HashMap::new(),
            generation: 0,
        }
    }
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
            state: Mutex::new(State::new(config.max_bytes)),
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
                    state.objects.insert(
                        key.as_str().to_string(),
                        (Some(Arc::clone(stale)), Instant::now()),
                        1,
                    );
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
        state.objects.insert(key.as_str().to_string(), (current.clone(), Instant::now()), 1);
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
            if state.ready.contains_key(&name) {
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
        self.lock().ready.contains_key(&name)
    }

    /// Whether slice `index` of `version` is on disk or being fetched now: asking for it would
    /// not start another fetch.
    pub fn has_or_fetching(&self, version: &ObjectVersion, index: u64) -> bool {
        let name = self.name_of(version, index);
        let state = self.lock();
        state.ready.contains_key(&name) || state.fetching.contains_key(&name)
    }

    /// Slice `index` of `version`, opened: from the cache, or fetched (once, however many ask at
    /// the same time) when `may_block`. The descriptor stays valid after an eviction. `take` is
    /// how many of its bytes the caller will send or read from it (0 to only warm the cache):
    /// on a hit they are counted as bytes from the cache.
    pub fn slice(
        &self,
        version: &ObjectVersion,
        index: u64,
        take: u64,
        may_block: bool,
    ) -> Result<File, CacheError> {
        if may_block && self.needs_repair.swap(false, Ordering::Relaxed) {
            // Failing, it has logged why; a fetch then serves from memory.
            let _ = self.repair();
        }
        let name = self.name_of(version, index);
        let mut state = self.lock();
        let mut waited_for = None;
        loop {
            if let Some(len) = state.ready.peek(&name).map(|(_, len)| len) {
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
                // Now the most recently used.
                state.ready.get(&name);
                if waited_for.is_none() {
                    self.stats.hits.fetch_add(1, Ordering::Relaxed);
                    self.stats.bytes_from_cache.fetch_add(take.min(len), Ordering::Relaxed);
                }
                return Ok(file);
            }
            match state.fetching.get(&name) {
                Some(generation) => {
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
        state.generation += 1;
        let generation = state.generation;
        state.fetching.insert(name.clone(), generation);
        drop(state);
        let range = self.slice_range(version, index);
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        self.stats.fetching_bytes.fetch_add(range.end - range.start, Ordering::Relaxed);
        let fetched = self.fetch(version, index, range.clone(), &name);
        self.stats.fetching_bytes.fetch_sub(range.end - range.start, Ordering::Relaxed);
        let mut state = self.lock();
        state.fetching.remove(&name);
        let result = match fetched {
            Ok(Fetched::Stored(file)) => {
                // A slice larger than the whole cache comes back at once: served from the open
                // file, not kept.
                let evicted = state.ready.insert(name, (), range.end - range.start);
                self.remove_evicted(&state, evicted);
                Ok(file)
            }
            // Not cached: whoever waited for it fetches it again (and may find room).
            Ok(Fetched::InMemory(file)) => Ok(file),
            Err(e) => {
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
        self.stats.held_bytes.store(state.ready.held(), Ordering::Relaxed);
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

    /// Unlinks the files of slices the LRU let go (a response still sending one keeps its
    /// descriptor) and publishes its evictions (a slice it would not take at all is not one).
    fn remove_evicted(&self, state: &State, evicted: Vec<(SliceName, ())>) {
        for (name, ()) in evicted {
            self.remove_file(&name);
        }
        self.stats.evictions.store(state.ready.counts().evictions, Ordering::Relaxed);
    }

    fn remove_file(&self, name: &str) {
        if let Err(e) = self.dir.remove(name) {
            tracing::warn!("cache: cannot remove {name} from {}: {e}", self.config.dir.display());
        }
    }

    fn remove_ready(&self, state: &mut State, name: &str) {
        if state.ready.remove(name).is_some() {
            self.remove_file(name);
        }
        self.stats.held_bytes.store(state.ready.held(), Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests;
