//! Thumbnail tiles for scrubbing: decoded from keyframes by ffmpeg, each tile once per title
//! version, kept beside the title in the library as a derived object.
//!
//! Owns making a tile and keeping it: a tile asked for is found in memory (a small LRU), else
//! in the store (under a reserved hidden name beside the title, [`sluice_store::derived_key`],
//! that no client can upload, list or request, on a local root and in an s3:// bucket alike),
//! else made. Making one runs ffmpeg as a child ([`crate::child`]) on the tile's keyframes
//! (`sluice_media::hls::thumbs` writes them as fMP4 after the video's init segment, so ffmpeg
//! decodes only those and no second demuxer reads the file), at most `thumbnail_jobs` at once,
//! each within `thumbnail_timeout`; concurrent requests for one tile wait for the one job
//! (single flight). It also gives the manifests their thumbnail lines ([`stream_inf`],
//! [`with_image_set`]) from the plan `sluice_media::hls::thumbs` makes. It does not answer
//! requests ([`crate::http::thumbs`] does).
//!
//! Why ffmpeg as a child rather than a decoder crate: the pure-Rust decoders cover a codec or
//! two (H.264 baseline at best; nothing for HEVC or AV1 that is maintained), while the complete
//! ones are bindings to libavcodec or dav1d, which would link LGPL/GPL C (libx264-linked builds
//! are GPL) into sluice's MIT/Apache binary and let a decoder crash take the server with it.
//! A child decodes every codec the installed ffmpeg knows, its licence stays the operator's
//! business (a separate program sluice only runs), and a crash, hang or runaway costs one tile
//! (killed past its time, its stderr the refusal's reason).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use sluice_media::hls::iframes::KeyFrames;
use sluice_media::hls::thumbs::{ThumbLayout, ThumbPlan};
use sluice_media::hls::SegmentIndex;
use sluice_media::Mp4File;
use sluice_proto::http::Status;
use sluice_proto::lru::Lru;
use sluice_store::{Key, PutOptions, Store};

use crate::config::LibrarySection;

/// Bytes of tiles kept in memory (a 5×5 tile of 160-pixel thumbnails is some 60 KB).
const MEMORY_BYTES: u64 = 32 << 20;

/// Largest tile ffmpeg may write: far above any JPEG of the largest grid allowed.
const MAX_TILE_BYTES: usize = 32 << 20;

/// How thumbnails are made, from the settings.
#[derive(Debug, Clone)]
pub struct ThumbSettings {
    /// The interval, size and grid.
    pub layout: ThumbLayout,
    /// The ffmpeg to run (a name on `PATH` or a path).
    pub ffmpeg: String,
    /// Tiles made at once at most.
    pub jobs: usize,
    /// Longest one tile's ffmpeg may run.
    pub timeout: Duration,
}

impl ThumbSettings {
    /// The `[library]` settings' thumbnail part.
    pub fn of(library: &LibrarySection) -> ThumbSettings {
        ThumbSettings {
            layout: ThumbLayout {
                interval: library.thumbnail_interval.as_secs_f64(),
                width: library.thumbnail_width as u32,
                columns: library.thumbnail_columns as u32,
                rows: library.thumbnail_rows as u32,
            },
            ffmpeg: library.ffmpeg.clone(),
            jobs: library.thumbnail_jobs,
            timeout: library.thumbnail_timeout,
        }
    }
}

/// Why a tile is not there, as the response says it.
#[derive(Debug, Clone)]
pub struct TileRefusal {
    /// 503 without a decoder or past the time, 500 when the decoder failed, the library's own
    /// for a read that failed.
    pub status: Status,
    /// The sentence the response carries.
    pub reason: String,
}

impl TileRefusal {
    fn new(status: Status, reason: impl Into<String>) -> TileRefusal {
        TileRefusal { status, reason: reason.into() }
    }
}

/// A tile made or being made, which the requests that came while it was wait for.
#[derive(Debug, Default)]
struct Flight {
    done: Mutex<Option<Result<Arc<[u8]>, TileRefusal>>>,
    landed: Condvar,
}

/// What [`Thumbnails`] counts, for `/metrics`.
#[derive(Debug, Default)]
pub struct ThumbCounts {
    /// ffmpeg runs (each a tile made).
    pub decoder_runs: AtomicU64,
    /// Runs that failed or were stopped.
    pub decoder_failures: AtomicU64,
    /// Tiles read back from the store (made before, by this server or another).
    pub store_hits: AtomicU64,
    /// Tiles served from memory.
    pub memory_hits: AtomicU64,
}

/// See the module docs.
#[derive(Debug)]
pub struct Thumbnails {
    layout: ThumbLayout,
    /// The ffmpeg found, or why thumbnails are refused.
    decoder: Result<PathBuf, String>,
    timeout: Duration,
    /// Where tiles are kept; `None` keeps them in memory only.
    store: Option<Arc<dyn Store>>,
    flights: Mutex<HashMap<String, Arc<Flight>>>,
    /// Tiles being made, against `jobs`.
    running: Mutex<usize>,
    freed: Condvar,
    jobs: usize,
    memory: Mutex<Lru<String, Arc<[u8]>>>,
    counts: ThumbCounts,
}

impl Thumbnails {
    /// Thumbnails made as `settings` say, kept in `store`; refused with the reason when the
    /// ffmpeg they name is not found.
    pub fn new(settings: &ThumbSettings, store: Option<Arc<dyn Store>>) -> Thumbnails {
        let decoder = crate::child::find_program(&settings.ffmpeg).ok_or_else(|| {
            format!(
                "thumbnails need ffmpeg to decode keyframes, and `{}` is not an executable on this \
                 server's PATH (set --ffmpeg to its path)",
                settings.ffmpeg
            )
        });
        Thumbnails {
            layout: settings.layout,
            decoder,
            timeout: settings.timeout,
            store,
            flights: Mutex::new(HashMap::new()),
            running: Mutex::new(0),
            freed: Condvar::new(),
            jobs: settings.jobs.max(1),
            memory: Mutex::new(Lru::new(MEMORY_BYTES)),
            counts: ThumbCounts::default(),
        }
    }

    /// Thumbnails refused for `reason` (an app built without them).
    pub fn off(reason: &str) -> Thumbnails {
        let settings = ThumbSettings {
            layout: ThumbLayout { interval: 10.0, width: 160, columns: 5, rows: 5 },
            ffmpeg: String::new(),
            jobs: 1,
            timeout: Duration::from_secs(1),
        };
        let mut off = Thumbnails::new(&settings, None);
        off.decoder = Err(reason.to_string());
        off
    }

    /// How thumbnails are laid out.
    pub fn layout(&self) -> ThumbLayout {
        self.layout
    }

    /// The ffmpeg that makes tiles, or why there is none.
    pub fn decoder(&self) -> Result<&std::path::Path, &str> {
        self.decoder.as_deref().map_err(String::as_str)
    }

    /// What has been counted.
    pub fn counts(&self) -> &ThumbCounts {
        &self.counts
    }

    /// The name tiles of one title version are kept under: the version and the layout, as a
    /// fingerprint, then the tile's name (`…/.sluice-derived.film.mp4.3f…9a.tile-2.jpg`).
    pub fn object_name(&self, version: &str, tile: &str) -> String {
        let ThumbLayout { interval, width, columns, rows } = self.layout;
        let print = fnv1a(format!("{version}\n{interval}\n{width}\n{columns}x{rows}").as_bytes());
        format!("{print:016x}.{tile}")
    }

    /// The tile kept in memory under `key`, without waiting.
    pub fn in_memory(&self, key: &Key) -> Option<Arc<[u8]>> {
        let found = self.memory.lock().ok()?.get(key.as_str()).cloned();
        if found.is_some() {
            self.counts.memory_hits.fetch_add(1, Ordering::Relaxed);
        }
        found
    }

    /// The tile kept under `key`: from memory, the store, or made now from the decoder input
    /// `input` gives (the init segment and the tile's keyframe fragments), its thumbnails
    /// `height` pixels high. Blocks (a CPU-pool job); a request for a tile being made waits for
    /// that job.
    pub fn tile(
        &self,
        key: &Key,
        height: u32,
        input: impl FnOnce() -> Result<Vec<u8>, TileRefusal>,
    ) -> Result<Arc<[u8]>, TileRefusal> {
        if let Some(tile) = self.in_memory(key) {
            return Ok(tile);
        }
        let decoder =
            self.decoder.as_ref().map_err(|why| TileRefusal::new(Status::SERVICE_UNAVAILABLE, why))?;
        let (flight, leader) = {
            let mut flights = self.flights.lock().map_err(|_| poisoned())?;
            match flights.get(key.as_str()) {
                Some(flight) => (Arc::clone(flight), false),
                None => {
                    let flight = Arc::new(Flight::default());
                    flights.insert(key.as_str().to_string(), Arc::clone(&flight));
                    (flight, true)
                }
            }
        };
        if !leader {
            let mut done = flight.done.lock().map_err(|_| poisoned())?;
            // The leader always lands its flight; the bound is the decoder's time and a margin.
            let until = std::time::Instant::now() + self.timeout * 4 + Duration::from_secs(30);
            while done.is_none() {
                let left = until.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    return Err(TileRefusal::new(
                        Status::SERVICE_UNAVAILABLE,
                        "the tile is still being made",
                    ));
                }
                done = flight.landed.wait_timeout(done, left).map_err(|_| poisoned())?.0;
            }
            return done.clone().unwrap_or_else(|| Err(poisoned()));
        }
        // Lands the flight however the job ends, a panic included, so no waiter waits in vain.
        let landing = Landing { thumbnails: self, key, flight: &flight };
        let result = self.stored(key).map_or_else(|| self.make(decoder, key, height, input), Ok);
        if let (Ok(tile), Ok(mut memory)) = (&result, self.memory.lock()) {
            memory.insert(key.as_str().to_string(), Arc::clone(tile), tile.len() as u64);
        }
        landing.land(result.clone());
        result
    }

    /// The tile as the store keeps it, if it does.
    fn stored(&self, key: &Key) -> Option<Arc<[u8]>> {
        let store = self.store.as_ref()?;
        let read = store.head(key).and_then(|meta| match meta {
            Some(meta) if meta.len > 0 && meta.len <= MAX_TILE_BYTES as u64 => {
                store.read_range(key, 0..meta.len).map(Some)
            }
            _ => Ok(None),
        });
        match read {
            Ok(Some(bytes)) => {
                self.counts.store_hits.fetch_add(1, Ordering::Relaxed);
                Some(Arc::from(bytes))
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(key = key.as_str(), "thumbnails: cannot read a kept tile: {e}");
                None
            }
        }
    }

    /// Makes the tile with ffmpeg (waiting for a free job), keeps it, and returns it.
    fn make(
        &self,
        decoder: &std::path::Path,
        key: &Key,
        height: u32,
        input: impl FnOnce() -> Result<Vec<u8>, TileRefusal>,
    ) -> Result<Arc<[u8]>, TileRefusal> {
        let input = input()?;
        let _slot = self.slot()?;
        self.counts.decoder_runs.fetch_add(1, Ordering::Relaxed);
        let ThumbLayout { columns, rows, .. } = self.layout;
        let args = ffmpeg_args(self.layout.width, height, columns, rows);
        let made = crate::child::run(decoder, &args, input, self.timeout, MAX_TILE_BYTES);
        let jpeg = match made {
            Ok(jpeg) if jpeg.starts_with(&[0xFF, 0xD8]) => jpeg,
            Ok(_) => return Err(self.failed(Status::INTERNAL_SERVER_ERROR, "ffmpeg wrote no JPEG".into())),
            Err(e @ crate::child::ChildError::TimedOut { .. }) => {
                return Err(self.failed(Status::SERVICE_UNAVAILABLE, e.to_string()))
            }
            Err(e) => return Err(self.failed(Status::INTERNAL_SERVER_ERROR, e.to_string())),
        };
        if let Some(store) = &self.store {
            let options = PutOptions { content_type: Some("image/jpeg".into()), ..PutOptions::default() };
            if let Err(e) = sluice_store::put_bytes(&**store, key, &jpeg, options) {
                // Served anyway; made again after a restart.
                tracing::warn!(key = key.as_str(), "thumbnails: cannot keep the tile: {e}");
            }
        }
        Ok(Arc::from(jpeg))
    }

    fn failed(&self, status: Status, reason: String) -> TileRefusal {
        self.counts.decoder_failures.fetch_add(1, Ordering::Relaxed);
        tracing::warn!("thumbnails: {reason}");
        TileRefusal::new(status, reason)
    }

    /// A job's place among the `jobs` running at once, waited for.
    fn slot(&self) -> Result<Slot<'_>, TileRefusal> {
        let mut running = self.running.lock().map_err(|_| poisoned())?;
        while *running >= self.jobs {
            running = self.freed.wait(running).map_err(|_| poisoned())?;
        }
        *running += 1;
        Ok(Slot(self))
    }
}

/// A leader's flight, landed with its result, or with a refusal if the job never got there.
struct Landing<'a> {
    thumbnails: &'a Thumbnails,
    key: &'a Key,
    flight: &'a Flight,
}

impl Landing<'_> {
    fn land(self, result: Result<Arc<[u8]>, TileRefusal>) {
        if let Ok(mut done) = self.flight.done.lock() {
            *done = Some(result);
        }
        // Drop removes the flight and wakes its waiters.
    }
}

impl Drop for Landing<'_> {
    fn drop(&mut self) {
        if let Ok(mut done) = self.flight.done.lock() {
            done.get_or_insert_with(|| Err(poisoned()));
        }
        self.flight.landed.notify_all();
        if let Ok(mut flights) = self.thumbnails.flights.lock() {
            flights.remove(self.key.as_str());
        }
    }
}

/// A running job's place; given back when dropped.
struct Slot<'a>(&'a Thumbnails);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Ok(mut running) = self.0.running.lock() {
            *running = running.saturating_sub(1);
        }
        self.0.freed.notify_one();
    }
}

fn poisoned() -> TileRefusal {
    TileRefusal::new(Status::INTERNAL_SERVER_ERROR, "a thumbnail job panicked")
}

/// The thumbnails of the video `index` packages in `file`, as `thumbnails` lays them out;
/// `None` without video, a picture size or a decoder.
pub fn plan(thumbnails: &Thumbnails, file: &Mp4File, index: &SegmentIndex) -> Option<ThumbPlan> {
    thumbnails.decoder().ok()?;
    let keyframes = KeyFrames::of(file, index)?;
    ThumbPlan::new(&keyframes, index.duration(), index.resolution()?, thumbnails.layout())
}

/// The master playlist's `EXT-X-IMAGE-STREAM-INF` line for the tiles of the rendition at
/// `prefix`, or nothing.
pub fn stream_inf(
    thumbnails: Option<&Thumbnails>,
    file: &Mp4File,
    index: &SegmentIndex,
    prefix: &str,
) -> String {
    thumbnails.and_then(|t| plan(t, file, index)).map(|p| p.stream_inf(prefix)).unwrap_or_default()
}

/// `mpd` with the image set of the tiles of the rendition at `prefix`, when there are any.
pub fn with_image_set(
    thumbnails: Option<&Thumbnails>,
    mpd: String,
    file: &Mp4File,
    index: &SegmentIndex,
    prefix: &str,
) -> String {
    match thumbnails.and_then(|t| plan(t, file, index)) {
        Some(plan) => sluice_media::hls::thumbs::with_image_set(&mpd, &plan, prefix),
        None => mpd,
    }
}

/// ffmpeg's arguments for one tile: fMP4 on stdin, video only, every decoded frame kept
/// (`passthrough`: the strip's timestamps are not a frame rate to fill), scaled to the cell,
/// tiled `columns × rows` (a last tile not filled is padded black), one JPEG on stdout.
pub fn ffmpeg_args(width: u32, height: u32, columns: u32, rows: u32) -> Vec<String> {
    let filter = format!("scale={width}:{height},setsar=1,tile={columns}x{rows}");
    [
        "-nostdin",
        "-hide_banner",
        "-loglevel",
        "error",
        "-f",
        "mp4",
        "-i",
        "pipe:0",
        "-an",
        "-sn",
        "-dn",
        "-fps_mode",
        "passthrough",
        "-vf",
        &filter,
        "-frames:v",
        "1",
        "-c:v",
        "mjpeg",
        "-q:v",
        "3",
        "-f",
        "image2pipe",
        "pipe:1",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// FNV-1a, 64 bits: a stable fingerprint for names that outlive the process (std's hasher
/// may change between toolchains, and tiles kept under its names would be made again; a
/// span's entity tag, which a client keeps).
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}
