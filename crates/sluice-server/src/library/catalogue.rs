//! The catalogue: every parsed MP4 index the server keeps, for RTSP, HLS and the library page.
//!
//! Owns one least-recently-used map (the shared [`Lru`]), bounded in bytes (an estimate of each entry's heap, see
//! [`tables_cost`] and [`Described::cost`]), of two kinds of entries per file version (a path and
//! the version's tag, so a replaced file is a new entry and never reads an old index):
//! - the full sample tables ([`Mp4File`]), which RTSP streams from and an HLS media segment's
//!   `moof` is written from (24 bytes a sample: several MB for an hour of video);
//! - what the file is as a video ([`Described`]): its HLS segment index and init segments (the
//!   muxed one and each track's, which HLS renditions and DASH share), or why
//!   it cannot be packaged, and whether RTSP can stream it (about 11 KB for an hour), which
//!   playlists, the page and `/streams` need, and what the page offers of it ([`Offers`]).
//!
//! Failures to parse are entries too, so a broken file is read and logged once per version.
//! Concurrent misses for one entry load it once: the first caller reads the `moov` (through the
//! slice cache for an object store) and the others wait for it. A caller that may not block
//! (an event-loop thread) gets [`WouldBlock`] instead of loading or waiting. It does not open
//! files or decide responses (the library and the routes do).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use sluice_media::hls::{init_segment, track_init_segment, HlsError, Packaged, SegmentIndex};
use sluice_media::mp4::{Mp4File, Sample, TrackKind};
use sluice_proto::http::Status;
use sluice_proto::lru::Lru;

/// Bytes of indexes the catalogue keeps. Below the 64 MiB a server may spend on indexes, with
/// room for the allocator's overhead (freed sample tables leave holes in the heap): it holds
/// the descriptions of thousands of one-hour files and, within half of it, the full tables of
/// the few played last.
pub const CATALOGUE_BYTES: usize = 40 << 20;

/// One version of one file: the entries' key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionKey {
    /// The file's path in the library (decoded, no leading slash).
    pub path: String,
    /// What changes when the file does: an object's entity tag, a local file's identity, size
    /// and modification time.
    pub version: String,
}

/// An answer the caller must get where blocking is allowed (a CPU-pool job).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the index is not in the catalogue and loading it would block")]
pub struct WouldBlock;

/// The sample tables of a version, or why it has none (not an MP4, broken, too large).
pub type Tables = Result<Arc<Mp4File>, Arc<str>>;

/// A file's HLS and DASH packaging: its segment index and init segments.
#[derive(Debug)]
pub struct Packaging {
    /// Where each segment starts.
    pub index: SegmentIndex,
    /// The muxed rendition's init segment (`ftyp` + `moov`).
    pub init: Box<[u8]>,
    /// Each track's own init segment (video, audio), `None` for a track the file lacks.
    pub track_inits: [Option<Box<[u8]>>; 2],
}

impl Packaging {
    /// The init segment of `which` track alone.
    pub fn track_init(&self, which: Packaged) -> Option<&[u8]> {
        self.track_inits[which as usize].as_deref()
    }
}

/// Why a file has no HLS packaging, as the response says it.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// 415 for codecs HLS does not carry, 501 for fragmented files with no complete fragment yet, 500 for broken ones.
    pub status: Status,
    /// The sentence the response body carries.
    pub reason: String,
}

/// What a file version is as a video: what every protocol may offer of it.
#[derive(Debug)]
pub struct Described {
    /// Its HLS packaging, or why there is none.
    pub hls: Result<Packaging, Refusal>,
    /// Whether RTSP can stream it: at least one track with samples and an RTP payload format.
    pub rtsp: bool,
    /// Whether its HLS packaging also goes as MPEG-TS (`sluice_media::hls::ts::carries`).
    pub ts: bool,
}

impl Described {
    /// Describes the version whose tables (or failure to parse) are `tables`, cutting HLS
    /// segments of about `segment`.
    pub fn of(path: &str, tables: &Tables, segment: Duration) -> Described {
        let file = match tables {
            Ok(file) => file,
            Err(reason) => {
                tracing::warn!(
                    path,
                    status = 500,
                    "HLS: cannot package {path}: not a playable MP4: {reason}"
                );
                let reason = format!("cannot package {path} as HLS: not a playable MP4: {reason}");
                return Described {
                    hls: Err(Refusal { status: Status::INTERNAL_SERVER_ERROR, reason }),
                    rtsp: false,
                    ts: false,
                };
            }
        };
        // The RTSP core's own test, so the page never offers a URL that DESCRIBE refuses.
        let rtsp = sluice_rtsp::playable(file).is_ok();
        let hls = SegmentIndex::build(file, segment).and_then(|index| {
            let init = init_segment(file, &index)?;
            let mut track_inits = [None, None];
            for which in [Packaged::Video, Packaged::Audio] {
                if index.has(which) {
                    track_inits[which as usize] =
                        Some(track_init_segment(file, &index, which)?.into_boxed_slice());
                }
            }
            Ok(Packaging { index, init: init.into_boxed_slice(), track_inits })
        });
        let hls = hls.map_err(|e| {
            let status = match e {
                HlsError::UnsupportedCodec(_) => Status::UNSUPPORTED_MEDIA_TYPE,
                HlsError::Fragmented => Status::NOT_IMPLEMENTED,
                _ => Status::INTERNAL_SERVER_ERROR,
            };
            tracing::warn!(path, status = status.0, "HLS: cannot package {path}: {e}");
            Refusal { status, reason: format!("cannot package {path} as HLS: {e}") }
        });
        let ts = hls.as_ref().is_ok_and(|p| sluice_media::hls::ts::carries(file, &p.index).is_ok());
        Described { hls, rtsp, ts }
    }

    /// What the library page shows of it; `None` when it cannot be packaged.
    pub fn video_info(&self) -> Option<VideoInfo> {
        let index = &self.hls.as_ref().ok()?.index;
        Some(VideoInfo {
            duration_secs: index.duration(),
            resolution: index.resolution(),
            codecs: index.codecs().to_string(),
            bitrate: index.average_bandwidth(),
            video_range: index.video_range().map(|r| r.as_str()),
            supplemental_codecs: index.supplemental_codecs().map(str::to_string),
        })
    }

    /// What the page and `/streams` may offer of it.
    pub fn offers(&self) -> Offers {
        Offers {
            video: self.video_info(),
            rtsp: self.rtsp,
            ts: self.ts,
            refusal: self.hls.as_ref().err().map(|r| r.reason.clone()),
            protection: None,
        }
    }

    /// Bytes it holds on the heap, with its own size.
    pub fn cost(&self) -> usize {
        std::mem::size_of::<Described>()
            + match &self.hls {
                Ok(p) => {
                    p.index.heap_bytes()
                        + p.init.len()
                        + p.track_inits.iter().flatten().map(|i| i.len()).sum::<usize>()
                }
                Err(r) => r.reason.capacity(),
            }
    }
}

/// Bytes the tables of a version (or their failure) hold on the heap, with their own size.
pub fn tables_cost(tables: &Tables) -> usize {
    let file = match tables {
        Ok(file) => file,
        Err(reason) => return reason.len() + 16,
    };
    let mut bytes = std::mem::size_of::<Mp4File>();
    for track in &file.tracks {
        bytes += std::mem::size_of_val(track) + track.samples.capacity() * std::mem::size_of::<Sample>();
        bytes += match &track.kind {
            TrackKind::H264(h) => {
                let sets = h.sps.iter().chain(&h.pps);
                sets.map(|s| s.capacity() + std::mem::size_of::<Vec<u8>>()).sum::<usize>()
            }
            TrackKind::Aac(a) => a.audio_specific_config.capacity(),
            // The records' parameter sets are copies of bytes the sample entry holds too.
            TrackKind::Video(v) => 2 * v.sample_entry.capacity(),
            TrackKind::Audio(a) => a.sample_entry.capacity(),
        };
    }
    for skipped in &file.skipped {
        bytes += std::mem::size_of_val(skipped) + skipped.reason.capacity();
    }
    bytes
}

/// A catalogue entry's value.
#[derive(Debug, Clone)]
enum Value {
    Tables(Tables),
    Described(Arc<Described>),
}

impl Value {
    fn cost(&self) -> usize {
        match self {
            Value::Tables(t) => tables_cost(t),
            Value::Described(d) => d.cost(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    Tables,
    Described,
}

/// What `/metrics` reports of the catalogue. `entries` and `bytes` are gauges.
#[derive(Debug, Default)]
pub struct CatalogueStats {
    /// Entries held.
    pub entries: AtomicU64,
    /// Their estimated bytes.
    pub bytes: AtomicU64,
    /// Lookups answered from the catalogue.
    pub hits: AtomicU64,
    /// Lookups that loaded the entry (read a `moov`, or built a segment index).
    pub misses: AtomicU64,
    /// Entries evicted to stay within the budget.
    pub evictions: AtomicU64,
}

/// What the page shows of a video it can package as HLS (the catalogue describes it).
#[derive(Debug, Clone, PartialEq)]
pub struct VideoInfo {
    /// Duration in seconds.
    pub duration_secs: f64,
    /// Width and height, for a file with video.
    pub resolution: Option<(u16, u16)>,
    /// RFC 6381 codecs (`avc1.4d401e,mp4a.40.2`).
    pub codecs: String,
    /// Average bit rate in bits per second.
    pub bitrate: u64,
    /// The video's dynamic range (`SDR`, `PQ`, `HLG`) when its sample entry says.
    pub video_range: Option<&'static str>,
    /// A backward-compatible Dolby Vision video's own codec string and brand (`dvh1.08.07/db1p`).
    pub supplemental_codecs: Option<String>,
}

/// What the page offers of an MP4: only what works for it. Unknown (not indexed yet) offers
/// nothing beyond the file itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Offers {
    /// Its details and HLS URL, when it packages as HLS.
    pub video: Option<VideoInfo>,
    /// Whether RTSP can stream it.
    pub rtsp: bool,
    /// Whether its HLS also goes as MPEG-TS (H.264 or HEVC with AAC, AC-3 or E-AC-3).
    pub ts: bool,
    /// Why a browser cannot play it, when that is known (it was indexed and cannot be packaged:
    /// not an MP4 sluice can read, a fragmented MP4, codecs HLS does not carry): the page says
    /// so instead of offering a Play that shows a black player.
    pub refusal: Option<String>,
    /// Its `[[protect]]` scheme (`cenc`, `cbcs`, `aes-128`) when it is encrypted.
    pub protection: Option<&'static str>,
}

/// The entries, and the keys being loaded.
#[derive(Debug)]
struct Shelf {
    lru: Lru<(VersionKey, Kind), Value>,
    loading: HashSet<(VersionKey, Kind)>,
}

/// See the module docs.
#[derive(Debug)]
pub struct Catalogue {
    segment: Duration,
    shelf: Mutex<Shelf>,
    loaded: Condvar,
    stats: CatalogueStats,
}

impl Catalogue {
    /// A catalogue of at most `budget` bytes, packaging HLS segments of about `segment`.
    pub fn new(budget: usize, segment: Duration) -> Catalogue {
        Catalogue {
            segment,
            shelf: Mutex::new(Shelf {
                lru: Lru::with_classes(budget as u64, &[budget as u64 / 2, budget as u64]),
                loading: HashSet::new(),
            }),
            loaded: Condvar::new(),
            stats: CatalogueStats::default(),
        }
    }

    /// What it has done, for `/metrics`.
    pub fn stats(&self) -> &CatalogueStats {
        &self.stats
    }

    /// The HLS segment target.
    pub fn segment(&self) -> Duration {
        self.segment
    }

    fn lock(&self) -> MutexGuard<'_, Shelf> {
        self.shelf.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The sample tables of `key`, loaded by `read` on a miss. An error of `read` is the
    /// caller's (an origin that timed out): nothing is kept, the next call reads again.
    pub fn tables<E>(
        &self,
        key: &VersionKey,
        may_block: bool,
        read: impl FnOnce() -> Result<Tables, E>,
    ) -> Result<Result<Tables, E>, WouldBlock> {
        let loaded =
            self.get_or_load((key.clone(), Kind::Tables), may_block, || read().map(Value::Tables))?;
        Ok(loaded.map(|v| match v {
            Value::Tables(t) => t,
            Value::Described(_) => Err(Arc::from("catalogue entry of the wrong kind")),
        }))
    }

    /// What `key` is as a video, from its tables (through [`Catalogue::tables`] with `read`).
    pub fn described<E>(
        &self,
        key: &VersionKey,
        may_block: bool,
        read: impl FnOnce() -> Result<Tables, E>,
    ) -> Result<Result<Arc<Described>, E>, WouldBlock> {
        let loaded = self.get_or_load((key.clone(), Kind::Described), may_block, || {
            let tables = match self.tables(key, may_block, read) {
                Ok(Ok(tables)) => tables,
                Ok(Err(e)) => return Err(LoadError::Caller(e)),
                Err(WouldBlock) => return Err(LoadError::WouldBlock),
            };
            Ok(Value::Described(Arc::new(Described::of(&key.path, &tables, self.segment))))
        });
        match loaded {
            Ok(Ok(Value::Described(d))) => Ok(Ok(d)),
            Ok(Ok(Value::Tables(_))) => unreachable_kind(),
            Ok(Err(LoadError::Caller(e))) => Ok(Err(e)),
            Ok(Err(LoadError::WouldBlock)) | Err(WouldBlock) => Err(WouldBlock),
        }
    }

    /// What is known of `key` as a video, without loading anything.
    pub fn peek_described(&self, key: &VersionKey) -> Option<Arc<Described>> {
        match self.lock().lru.get(&(key.clone(), Kind::Described)) {
            Some(Value::Described(d)) => {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                Some(Arc::clone(d))
            }
            _ => None,
        }
    }

    /// Forgets every version of `path` (it was replaced or deleted through this server).
    pub fn forget(&self, path: &str) {
        let mut shelf = self.lock();
        shelf.lru.remove_where(|(key, _), _| key.path == path);
        self.publish(&shelf.lru);
    }

    fn publish(&self, lru: &Lru<(VersionKey, Kind), Value>) {
        self.stats.entries.store(lru.len() as u64, Ordering::Relaxed);
        self.stats.bytes.store(lru.held(), Ordering::Relaxed);
    }

    /// The entry at `key`, or loaded by `load` once however many ask at the same time.
    fn get_or_load<E>(
        &self,
        key: (VersionKey, Kind),
        may_block: bool,
        load: impl FnOnce() -> Result<Value, E>,
    ) -> Result<Result<Value, E>, WouldBlock> {
        let mut shelf = self.lock();
        loop {
            if let Some(value) = shelf.lru.get(&key) {
                self.stats.hits.fetch_add(1, Ordering::Relaxed);
                return Ok(Ok(value.clone()));
            }
            if !may_block {
                return Err(WouldBlock);
            }
            if !shelf.loading.contains(&key) {
                break;
            }
            shelf = self.loaded.wait(shelf).unwrap_or_else(|e| e.into_inner());
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        shelf.loading.insert(key.clone());
        drop(shelf);
        // Taken off the loading set even if `load` panics, so waiters never wait for nothing.
        let guard = LoadingGuard { catalogue: self, key: Some(key) };
        let loaded = load();
        let key = guard.finish();
        let mut shelf = self.lock();
        shelf.loading.remove(&key);
        let mut freed = 0;
        if let Ok(value) = &loaded {
            let cost = (value.cost() + 2 * (key.0.path.len() + key.0.version.len()) + ENTRY_OVERHEAD) as u64;
            let class = match key.1 {
                Kind::Tables => TABLES,
                Kind::Described => DESCRIBED,
            };
            let held = shelf.lru.held();
            let evicted = shelf.lru.insert_in(class, key, value.clone(), cost);
            self.stats.evictions.fetch_add(evicted.len() as u64, Ordering::Relaxed);
            freed = (held + cost).saturating_sub(shelf.lru.held());
        }
        self.publish(&shelf.lru);
        drop(shelf);
        self.loaded.notify_all();
        if freed >= RETURN_FREED {
            return_freed_memory();
        }
        Ok(loaded)
    }
}

/// Evicted bytes past which the allocator is asked to give freed memory back.
const RETURN_FREED: u64 = 1 << 20;

/// Gives the pages of freed heap memory back to the kernel. Evicted sample tables are blocks of
/// megabytes in the middle of the heap, between the descriptions that outlive them: glibc keeps
/// such holes resident (it trims only the heap's top), and over a library of one-hour files they
/// would make the process hold about twice what the catalogue counts.
fn return_freed_memory() {
    crate::sys::trim_heap();
}

/// The LRU's classes: sample tables (a few MB for an hour of video) may take half the budget,
/// so the descriptions of thousands of files (about 11 KB an hour) stay while the tables of the
/// files played last come and go.
const TABLES: usize = 0;
const DESCRIBED: usize = 1;

/// Bytes an entry costs besides its value and key strings: its slots in the map and the LRU
/// order, and the strings' headers.
const ENTRY_OVERHEAD: usize = 160;

fn unreachable_kind<T>() -> T {
    // A key's kind decides its value's kind; `get_or_load` stores what `load` made.
    panic!("catalogue entry of the wrong kind")
}

enum LoadError<E> {
    Caller(E),
    WouldBlock,
}

struct LoadingGuard<'a> {
    catalogue: &'a Catalogue,
    key: Option<(VersionKey, Kind)>,
}

impl LoadingGuard<'_> {
    fn finish(mut self) -> (VersionKey, Kind) {
        self.key.take().unwrap_or_else(unreachable_kind)
    }
}

impl Drop for LoadingGuard<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key.take() {
            self.catalogue.lock().loading.remove(&key);
            self.catalogue.loaded.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    fn demo_tables() -> Tables {
        let file = std::fs::File::open(concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sluice-demo.mp4")).unwrap();
        let len = file.metadata().unwrap().len();
        Ok(Arc::new(Mp4File::read(BufReader::new(file), len).unwrap()))
    }

    fn key(path: &str, version: &str) -> VersionKey {
        VersionKey { path: path.into(), version: version.into() }
    }

    #[test]
    fn entries_are_per_version_loaded_once_and_counted() {
        let catalogue = Catalogue::new(1 << 20, Duration::from_secs(6));
        let reads = std::cell::Cell::new(0);
        let read = || {
            reads.set(reads.get() + 1);
            Ok::<_, ()>(demo_tables())
        };
        let v1 = key("a.mp4", "v1");
        assert_eq!(catalogue.described(&v1, false, read).err(), Some(WouldBlock), "no loading on a loop");
        let d = catalogue.described(&v1, true, read).unwrap().unwrap();
        assert!(d.rtsp);
        let info = d.video_info().unwrap();
        assert_eq!(info.resolution, Some((640, 360)));
        assert_eq!(reads.get(), 1);
        assert!(catalogue.described(&v1, false, read).is_ok(), "a hit needs no blocking");
        assert!(catalogue.tables(&v1, false, read).unwrap().unwrap().is_ok(), "the tables were kept too");
        assert_eq!(reads.get(), 1);
        // A new version is a new entry: read again.
        catalogue.described(&key("a.mp4", "v2"), true, read).unwrap().unwrap();
        assert_eq!(reads.get(), 2);
        let stats = catalogue.stats();
        assert_eq!(stats.entries.load(Ordering::Relaxed), 4);
        assert_eq!(stats.misses.load(Ordering::Relaxed), 4, "tables and description, twice");
        assert_eq!(stats.hits.load(Ordering::Relaxed), 2);
        catalogue.forget("a.mp4");
        assert_eq!(stats.entries.load(Ordering::Relaxed), 0);
        assert_eq!(stats.bytes.load(Ordering::Relaxed), 0);
        // A caller's error (the origin timed out) is not kept.
        let failed = catalogue.described(&v1, true, || Err::<Tables, _>("timeout")).unwrap();
        assert_eq!(failed.err(), Some("timeout"));
        assert_eq!(stats.entries.load(Ordering::Relaxed), 0);
        // A broken file is: described once as not packagable nor streamable.
        let broken = catalogue.described(&v1, true, || Ok::<_, ()>(Err(Arc::from("no moov")))).unwrap();
        let broken = broken.unwrap();
        assert!(!broken.rtsp && broken.video_info().is_none());
        assert!(catalogue.peek_described(&v1).is_some());
    }

    #[test]
    fn tables_are_evicted_before_the_budget_is_passed() {
        let tables = demo_tables();
        let one = tables_cost(&tables) + 2 * "a.mp4v1".len() + ENTRY_OVERHEAD;
        // Tables may take half the budget: two of them.
        let catalogue = Catalogue::new(5 * one, Duration::from_secs(6));
        for name in ["a.mp4", "b.mp4", "c.mp4"] {
            let t = catalogue.tables(&key(name, "v1"), true, || Ok::<_, ()>(tables.clone())).unwrap();
            assert!(t.unwrap().is_ok());
        }
        let stats = catalogue.stats();
        assert_eq!(stats.entries.load(Ordering::Relaxed), 2);
        assert_eq!(stats.evictions.load(Ordering::Relaxed), 1);
        assert!(stats.bytes.load(Ordering::Relaxed) as usize <= 2 * one + one / 2);
        let a_again = catalogue.tables(&key("a.mp4", "v1"), false, || Ok::<_, ()>(tables.clone()));
        assert!(a_again.is_err(), "the oldest went");
    }

    #[test]
    fn concurrent_misses_load_once() {
        let catalogue = Arc::new(Catalogue::new(1 << 20, Duration::from_secs(6)));
        let reads = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (catalogue, reads) = (Arc::clone(&catalogue), Arc::clone(&reads));
                std::thread::spawn(move || {
                    let read = || {
                        reads.fetch_add(1, Ordering::Relaxed);
                        std::thread::sleep(Duration::from_millis(50));
                        Ok::<_, ()>(demo_tables())
                    };
                    catalogue.described(&key("a.mp4", "v1"), true, read).unwrap().unwrap()
                })
            })
            .collect();
        for t in threads {
            assert!(t.join().unwrap().rtsp);
        }
        assert_eq!(reads.load(Ordering::Relaxed), 1);
    }
}
