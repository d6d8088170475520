//! What happens to the cache directory, and how the cache lives with it: slices an earlier
//! process left are taken back at start, a directory or slice files something else removed are
//! restored or forgotten (and fetched again), and a slice the disk will not take is served from
//! memory. It does not fetch, and does not decide what is evicted (the LRU in [`super`] does).

use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{dir, CacheError, Fetched, SliceCache, SliceName, State};

/// What repairs of the cache directory have logged, so that a lasting failure is one line.
#[derive(Debug, Default)]
pub(super) struct RepairLog {
    /// [`super::CacheStats::vanished_slices`] when the last line was written.
    vanished: u64,
    /// The directory could not be restored, and that was logged.
    failing: bool,
}

/// Write failures are logged at most this often.
const WRITE_FAILURE_LOG_EVERY: Duration = Duration::from_secs(60);

impl SliceCache {
    /// Takes back the slices an earlier process left whole, the oldest as least recently used,
    /// and evicts what is beyond the size.
    pub(super) fn adopt(&self, mut scan: dir::Scan) {
        let mut state = self.lock();
        scan.whole.sort_by_key(|l| l.modified);
        let (found, found_bytes) = (scan.whole.len(), scan.whole.iter().map(|l| l.len).sum::<u64>());
        for leftover in scan.whole {
            // Oldest first, so what goes beyond the size is the oldest.
            let evicted = state.ready.insert(leftover.name, (), leftover.len);
            self.remove_evicted(&state, evicted);
            let versions = state.leftovers.entry(dir::key_part(&leftover.version).to_string()).or_default();
            let version = (leftover.version, leftover.object_len);
            if !versions.contains(&version) {
                versions.push(version);
            }
        }
        let kept = state.ready.len();
        self.stats.reused_slices.store(kept as u64, Ordering::Relaxed);
        self.stats.held_bytes.store(state.ready.held(), Ordering::Relaxed);
        if found > 0 || scan.removed > 0 {
            tracing::info!(
                "cache: reusing {kept} slice(s) ({} bytes) left in {}{}; removed {} file(s) that were not whole slices",
                state.ready.held(),
                self.config.dir.display(),
                if kept < found { format!(" ({found} found, {found_bytes} bytes: beyond the size)") } else { String::new() },
                scan.removed,
            );
        }
    }

    /// Writes fetched `bytes` as slice file `name`, putting the directory back first if
    /// something removed it; the bytes are served from memory if that fails.
    pub(super) fn store_slice(&self, name: &str, bytes: &[u8]) -> Result<Fetched, CacheError> {
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
    pub(super) fn repair(&self) -> bool {
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
            state.ready.keys().cloned().collect()
        };
        if let Ok(present) = self.dir.names() {
            let gone: Vec<SliceName> =
                ready.into_iter().filter(|n| !present.contains(std::ffi::OsStr::new(n.as_str()))).collect();
            let mut state = self.lock();
            for name in gone {
                // Written again since the listing was read, or not: the file decides.
                if state.ready.contains_key(&name) && !self.dir.exists(&name) {
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
    pub(super) fn forget_vanished(&self, state: &mut State, name: &str) {
        if state.ready.remove(name).is_some() {
            self.stats.vanished_slices.fetch_add(1, Ordering::Relaxed);
            self.stats.held_bytes.store(state.ready.held(), Ordering::Relaxed);
        }
    }
}
