//! Encrypted segments kept in memory, so the next viewer of a protected title gets a segment
//! without reading and encrypting it again.
//!
//! An encrypted segment is bytes in memory the server made (read, AES, slice headers), sent from
//! memory either way; kept, it is sent from where it lies ([`SharedBytes`]: every response holds
//! a reference, none copies), and a hit is answered on the event loop, with no trip to the CPU
//! pool. Measured in docs/BENCHMARKS.md "Encrypted segments": at a quarter core, kept encrypted
//! segments went 4 times the segments per CPU-second of the same encrypted per request. Clear
//! segments are not kept: `sendfile` sends them without the copy a write from memory costs
//! (measured: HLS viewers held fell by two thirds when they were).
//!
//! Owns one bounded [`Lru`] (the shared type) of segments by key (the caller's: a title's path,
//! its version's entity tag, the key's fingerprint and the resource, so a replaced file or a
//! rotated key is another entry and an old one is never served); the budget is `[library]
//! segment_cache` (0: nothing kept). A segment larger than a quarter of the budget is not kept,
//! so one title cannot empty it. An evicted segment's buffer goes back to the pool of large
//! buffers once no response holds it. It does not read, encrypt or decide what is kept
//! ([`crate::http::hls`] does).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sluice_proto::conn::{Segment, SharedBytes};
use sluice_proto::lru::Lru;

/// What the cache holds and has done, for `/metrics`.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SegmentCacheStats {
    /// Segments sent from memory.
    pub hits: u64,
    /// Segments made in memory (a request that found none kept, or a cache without budget).
    pub misses: u64,
    /// Segments evicted to stay within the budget.
    pub evictions: u64,
    /// Segments made but too large to keep (over a quarter of the budget).
    pub too_large: u64,
    /// Segments held.
    pub entries: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The budget.
    pub budget: u64,
}

/// See the module docs.
#[derive(Debug)]
pub struct EncryptedSegments {
    budget: u64,
    lru: Mutex<Lru<String, Vec<SharedBytes>>>,
    // Counted here rather than by the LRU's lookups: a request on an event loop that misses
    // looks again on the CPU pool, and would count two misses for one segment.
    hits: AtomicU64,
    misses: AtomicU64,
    too_large: AtomicU64,
}

impl Default for EncryptedSegments {
    fn default() -> Self {
        EncryptedSegments::new(0)
    }
}

impl EncryptedSegments {
    /// A cache of at most `budget` bytes (0: keeps nothing).
    pub fn new(budget: u64) -> EncryptedSegments {
        EncryptedSegments {
            budget,
            lru: Mutex::new(Lru::new(budget)),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            too_large: AtomicU64::new(0),
        }
    }

    /// Whether it keeps anything.
    pub fn is_enabled(&self) -> bool {
        self.budget > 0
    }

    /// The parts of the segment kept under `key`, sharing its bytes.
    pub fn get(&self, key: &str) -> Option<Vec<Segment>> {
        if !self.is_enabled() {
            return None;
        }
        let mut lru = self.lru.lock().unwrap_or_else(|e| e.into_inner());
        let parts: Vec<Segment> = lru.get(key)?.iter().cloned().map(Segment::Shared).collect();
        self.hits.fetch_add(1, Ordering::Relaxed);
        Some(parts)
    }

    /// Keeps the in-memory `parts` of a segment just made under `key` and returns them to send
    /// (as shared bytes when kept, as they were otherwise).
    pub fn keep(&self, key: String, parts: Vec<Segment>) -> Vec<Segment> {
        self.misses.fetch_add(1, Ordering::Relaxed);
        let bytes: u64 = parts.iter().map(Segment::len).sum();
        let all_in_memory = parts.iter().all(|p| p.in_memory().is_some());
        if !self.is_enabled() || !all_in_memory {
            return parts;
        }
        if bytes > self.budget / 4 {
            self.too_large.fetch_add(1, Ordering::Relaxed);
            return parts;
        }
        let shared: Vec<SharedBytes> = parts
            .into_iter()
            .map(|part| match part {
                Segment::Bytes(b) => SharedBytes::new(Arc::new(b)),
                Segment::Shared(b) => b,
                other => SharedBytes::new(Arc::new(other.in_memory().expect("in memory").to_vec())),
            })
            .collect();
        let out = shared.iter().cloned().map(Segment::Shared).collect();
        let evicted = self.lru.lock().unwrap_or_else(|e| e.into_inner()).insert(key, shared, bytes);
        for (_, parts) in evicted {
            for part in parts {
                // Still being sent to someone: freed when the last response is done with it.
                if let Some(buffer) = part.into_unique() {
                    sluice_proto::buffers::give(buffer);
                }
            }
        }
        out
    }

    /// What it holds and has done.
    pub fn stats(&self) -> SegmentCacheStats {
        let lru = self.lru.lock().unwrap_or_else(|e| e.into_inner());
        SegmentCacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: lru.counts().evictions,
            too_large: self.too_large.load(Ordering::Relaxed),
            entries: lru.len() as u64,
            bytes: lru.held(),
            budget: self.budget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(parts: &[Segment]) -> Vec<u8> {
        parts.iter().flat_map(|p| p.in_memory().unwrap().to_vec()).collect()
    }

    #[test]
    fn a_kept_segment_is_shared_and_bounded() {
        let cache = EncryptedSegments::new(1000);
        assert!(cache.get("a").is_none());
        let sent = cache.keep("a".into(), vec![Segment::Bytes(vec![1; 10]), Segment::Bytes(vec![2; 100])]);
        assert!(sent.iter().all(|p| matches!(p, Segment::Shared(_))));
        let hit = cache.get("a").expect("kept");
        assert_eq!(bytes(&hit), bytes(&sent));
        assert_eq!(bytes(&hit).len(), 110);
        let stats = cache.stats();
        assert_eq!((stats.entries, stats.bytes, stats.hits, stats.misses), (1, 110, 1, 1));
        // Over a quarter of the budget: sent, not kept.
        let sent = cache.keep("big".into(), vec![Segment::Bytes(vec![3; 251])]);
        assert!(matches!(sent[0], Segment::Bytes(_)));
        assert!(cache.get("big").is_none());
        assert_eq!(cache.stats().too_large, 1);
        // The budget holds: the least recently used goes.
        for i in 0..10 {
            cache.keep(format!("s{i}"), vec![Segment::Bytes(vec![i; 200])]);
        }
        let stats = cache.stats();
        assert!(stats.bytes <= 1000 && stats.evictions > 0, "{stats:?}");
        assert!(cache.get("a").is_none() && cache.get("s9").is_some());
    }

    #[test]
    fn a_cache_without_budget_keeps_nothing() {
        let cache = EncryptedSegments::new(0);
        let sent = cache.keep("a".into(), vec![Segment::Bytes(vec![1; 10])]);
        assert!(matches!(sent[0], Segment::Bytes(_)));
        assert!(cache.get("a").is_none());
        assert_eq!((cache.stats().hits, cache.stats().misses), (0, 1));
    }
}
