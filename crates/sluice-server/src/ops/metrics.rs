//! `GET /metrics`: the engine's counters, the server's request counts and the process's cost, in
//! Prometheus text format (version 0.0.4).
//!
//! Owns the metric names and the rendering. The numbers come from `sluice_engine::Counters` (what
//! the engine did), [`RequestCounts`] (what the application answered) and the kernel (CPU time,
//! context switches, resident memory of this process). It does not count anything itself.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;

use sluice_engine::counters::{Event, Syscall};
use sluice_engine::{Counters, EngineConfig};
use sluice_proto::metrics_text::names::{
    CACHE_BYTES_TOTAL, CONNECTIONS_OPEN, HTTP_REQUESTS_REFUSED_TOTAL, HTTP_RESPONSES_TOTAL,
    HTTP_RESPONSE_BYTES_TOTAL, HTTP_RESPONSE_DURATION_SECONDS, LIVE_BIT_RATE, LIVE_PATHS,
    LOG_LINES_DROPPED_TOTAL, ORIGIN_REQUEST_SECONDS, PROCESS_CPU_SECONDS_TOTAL,
    PROCESS_RESIDENT_MEMORY_BYTES, RTSP_LOOP_BUSY_RATIO, RTSP_STREAM_VIEWERS, SYSCALLS_TOTAL,
};

/// What a response served, for its duration histogram: a whole file (or a page), part of one,
/// an HLS playlist, the DASH manifest, a CMAF segment both play, or an upload (`PUT`, `DELETE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteKind {
    /// A whole file, a directory page, anything not below.
    File,
    /// A `Range` request.
    Range,
    /// What only HLS players ask for (of an MP4 or a rendition set): playlists, the muxed
    /// rendition, WebVTT segments.
    Hls,
    /// What only DASH players ask for: the manifest.
    Dash,
    /// A per-track CMAF init or media segment, one set that HLS and DASH players both fetch
    /// (the request does not say which).
    Segment,
    /// A `PUT` or `DELETE`.
    Upload,
}

impl RouteKind {
    /// Every kind, in the order they are reported.
    pub const ALL: [RouteKind; 6] = [
        RouteKind::File,
        RouteKind::Range,
        RouteKind::Hls,
        RouteKind::Dash,
        RouteKind::Segment,
        RouteKind::Upload,
    ];

    /// The `route` label.
    pub fn name(self) -> &'static str {
        match self {
            RouteKind::File => "file",
            RouteKind::Range => "range",
            RouteKind::Hls => "hls",
            RouteKind::Dash => "dash",
            RouteKind::Segment => "segment",
            RouteKind::Upload => "upload",
        }
    }
}

/// Upper bounds (seconds) of the response-duration buckets Prometheus gets: 1 ms to 60 s, as
/// VOD responses range from a cached playlist to a whole film over a slow link.
pub const DURATION_BUCKETS: [f64; 16] =
    [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0];

/// Response durations of one route kind and status class, in microseconds: an HDR histogram
/// (2 significant digits, 1 µs to an hour), and the exact sum Prometheus's `_sum` wants.
#[derive(Debug)]
pub struct Durations {
    histogram: Histogram<u64>,
    sum_micros: u64,
}

impl Durations {
    fn new() -> Durations {
        // The bounds and digits are constants inside hdrhistogram's accepted ranges.
        let histogram = Histogram::new_with_bounds(1, 3_600_000_000, 2).expect("valid histogram bounds");
        Durations { histogram, sum_micros: 0 }
    }

    /// The histogram itself (microseconds).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.histogram
    }
}

/// Responses by status class, and requests refused before reaching a route.
#[derive(Debug)]
pub struct RequestCounts {
    by_class: [AtomicU64; 5],
    bytes_by_class: [AtomicU64; 5],
    refused: AtomicU64,
    cut: AtomicU64,
    /// By route kind, then status class.
    durations: [[Mutex<Durations>; 5]; RouteKind::ALL.len()],
    /// Body bytes sent of each MP4 (its library path), by route kind.
    by_stream: Mutex<std::collections::HashMap<Box<str>, StreamBytes>>,
}

/// Most MP4s whose bytes [`RequestCounts`] keeps apart (as `/streams` lists at most as many).
const MAX_STREAMS_COUNTED: usize = 10_000;

/// Body bytes sent of one MP4, by protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamBytes {
    /// As the file itself (whole or ranges), progressive download.
    pub http: u64,
    /// As what only HLS players ask for (playlists, the muxed rendition, WebVTT segments).
    pub hls: u64,
    /// As its DASH manifest.
    pub dash: u64,
    /// As its per-track CMAF segments, which HLS and DASH players both fetch.
    pub segments: u64,
}

impl Default for RequestCounts {
    fn default() -> Self {
        RequestCounts {
            by_class: Default::default(),
            bytes_by_class: Default::default(),
            refused: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            durations: std::array::from_fn(|_| std::array::from_fn(|_| Mutex::new(Durations::new()))),
            by_stream: Mutex::default(),
        }
    }
}

fn class_index(status: u16) -> usize {
    (status / 100).clamp(1, 5) as usize - 1
}

impl RequestCounts {
    /// Counts one response with this status code.
    pub fn response(&self, status: u16) {
        self.by_class[class_index(status)].fetch_add(1, Ordering::Relaxed);
    }

    /// Records a response that ended (sent whole or cut): its body bytes sent and how long it
    /// took from its request to its last byte.
    pub fn ended(&self, kind: RouteKind, status: u16, body_bytes: u64, took: Duration) {
        let class = class_index(status);
        self.bytes_by_class[class].fetch_add(body_bytes, Ordering::Relaxed);
        let micros = (took.as_micros() as u64).clamp(1, 3_600_000_000);
        let mut d = self.durations[kind as usize][class].lock().unwrap_or_else(|e| e.into_inner());
        d.histogram.saturating_record(micros);
        d.sum_micros += micros;
    }

    /// Counts `body_bytes` sent of the MP4 at `stream` (its library path) as `kind`.
    pub fn stream_sent(&self, stream: &str, kind: RouteKind, body_bytes: u64) {
        let mut all = self.by_stream.lock().unwrap_or_else(|e| e.into_inner());
        // Past the bound, new names go uncounted rather than growing the map.
        if all.len() >= MAX_STREAMS_COUNTED && !all.contains_key(stream) {
            return;
        }
        let entry = all.entry(stream.into()).or_default();
        match kind {
            RouteKind::Hls => entry.hls += body_bytes,
            RouteKind::Dash => entry.dash += body_bytes,
            RouteKind::Segment => entry.segments += body_bytes,
            RouteKind::File | RouteKind::Range | RouteKind::Upload => entry.http += body_bytes,
        }
    }

    /// Body bytes sent so far of the MP4 at `stream` (its library path).
    pub fn stream_bytes(&self, stream: &str) -> StreamBytes {
        self.by_stream.lock().unwrap_or_else(|e| e.into_inner()).get(stream).copied().unwrap_or_default()
    }

    /// The durations of `kind` over every status class, merged (microseconds).
    pub fn durations_of(&self, kind: RouteKind) -> Histogram<u64> {
        let mut all = Durations::new().histogram;
        for d in &self.durations[kind as usize] {
            let d = d.lock().unwrap_or_else(|e| e.into_inner());
            let _ = all.add(&d.histogram);
        }
        all
    }

    /// Counts one request refused by the protocol (malformed, too large, too slow).
    pub fn refused(&self) {
        self.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one response whose connection closed before all of it was sent.
    pub fn cut(&self) {
        self.cut.fetch_add(1, Ordering::Relaxed);
    }

    /// Responses cut short so far.
    pub fn cut_total(&self) -> u64 {
        self.cut.load(Ordering::Relaxed)
    }

    /// Every response counted so far.
    pub fn total(&self) -> u64 {
        self.by_class.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

/// Renders every metric.
pub fn render(engine: &EngineConfig, counters: &Counters, requests: &RequestCounts) -> String {
    let mut m = String::with_capacity(4096);
    let pools = counters.cpu_pools();
    if !pools.is_empty() {
        let pools: Vec<&sluice_engine::PoolStats> = pools.iter().map(|p| &**p).collect();
        render_pool(&mut m, "cpu_pool", "the event loops' CPU jobs", &pools);
    }
    let _ = writeln!(
        m,
        "# HELP sluice_engine_info The I/O path this server runs.\n# TYPE sluice_engine_info gauge"
    );
    let _ = writeln!(
        m,
        "sluice_engine_info{{engine=\"{}\",send=\"{}\",workers=\"{}\"}} 1",
        engine.kind.name(),
        engine.send.name(),
        engine.workers
    );
    let _ = writeln!(
        m,
        "# HELP sluice_build_info The sluice build serving, and its I/O path.\n# TYPE sluice_build_info gauge\n\
sluice_build_info{{version=\"{}\",commit=\"{}\",engine=\"{}\",send=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION"),
        env!("SLUICE_COMMIT"),
        engine.kind.name(),
        engine.send.name()
    );
    let _ = writeln!(
        m,
        "# HELP {SYSCALLS_TOTAL} System calls the engine made, by kind (tokio's own reactor calls are not included).\n\
# TYPE {SYSCALLS_TOTAL} counter"
    );
    for kind in Syscall::ALL {
        let _ = writeln!(m, "{SYSCALLS_TOTAL}{{kind=\"{}\"}} {}", kind.name(), counters.syscalls(kind));
    }
    let mut previous = "";
    for event in Event::ALL {
        let (name, help) = event.describe();
        // Labelled events of one metric are adjacent in `Event::ALL`: one HELP and TYPE for all.
        if name != previous {
            let _ = writeln!(m, "# HELP sluice_{name} {help}\n# TYPE sluice_{name} counter");
            previous = name;
        }
        let label = event.label().map(|(k, v)| format!("{{{k}=\"{v}\"}}")).unwrap_or_default();
        let _ = writeln!(m, "sluice_{name}{label} {}", counters.events(event));
    }
    let _ = writeln!(
        m,
        "# HELP sluice_rtsp_sessions RTSP sessions alive now.\n# TYPE sluice_rtsp_sessions gauge\nsluice_rtsp_sessions {}",
        counters.rtsp_sessions()
    );
    rtsp_gauges(&mut m, counters);
    let sessions = counters.rtsp_session_durations();
    let _ = writeln!(
        m,
        "# HELP sluice_rtsp_session_duration_seconds How long RTSP sessions lasted, from SETUP to their release.\n\
# TYPE sluice_rtsp_session_duration_seconds histogram"
    );
    for (le, n) in sluice_engine::counters::RTSP_SESSION_BUCKETS.iter().zip(&sessions.at_most) {
        let _ = writeln!(m, "sluice_rtsp_session_duration_seconds_bucket{{le=\"{le}\"}} {n}");
    }
    let _ = writeln!(
        m,
        "sluice_rtsp_session_duration_seconds_bucket{{le=\"+Inf\"}} {count}\nsluice_rtsp_session_duration_seconds_sum {:.3}\nsluice_rtsp_session_duration_seconds_count {count}",
        sessions.sum_secs,
        count = sessions.count
    );
    let _ = writeln!(
        m,
        "# HELP {CONNECTIONS_OPEN} Connections open now.\n# TYPE {CONNECTIONS_OPEN} gauge\n{CONNECTIONS_OPEN} {}",
        counters.open_connections()
    );
    let _ = writeln!(
        m,
        "# HELP sluice_http_requests_total HTTP requests answered.\n# TYPE sluice_http_requests_total counter\n\
sluice_http_requests_total {}",
        requests.total()
    );
    let _ = writeln!(m, "# HELP {HTTP_RESPONSES_TOTAL} HTTP responses by status class.\n# TYPE {HTTP_RESPONSES_TOTAL} counter");
    for (i, c) in requests.by_class.iter().enumerate() {
        let _ = writeln!(m, "{HTTP_RESPONSES_TOTAL}{{class=\"{}xx\"}} {}", i + 1, c.load(Ordering::Relaxed));
    }
    let _ = writeln!(
        m,
        "# HELP {HTTP_RESPONSE_BYTES_TOTAL} HTTP response body bytes sent, by status class.\n\
# TYPE {HTTP_RESPONSE_BYTES_TOTAL} counter"
    );
    for (i, c) in requests.bytes_by_class.iter().enumerate() {
        let _ =
            writeln!(m, "{HTTP_RESPONSE_BYTES_TOTAL}{{class=\"{}xx\"}} {}", i + 1, c.load(Ordering::Relaxed));
    }
    durations(&mut m, requests);
    let _ = writeln!(
        m,
        "# HELP {HTTP_REQUESTS_REFUSED_TOTAL} Requests refused before routing (malformed, too large, too slow).\n\
# TYPE {HTTP_REQUESTS_REFUSED_TOTAL} counter\n{HTTP_REQUESTS_REFUSED_TOTAL} {}",
        requests.refused.load(Ordering::Relaxed)
    );
    let _ = writeln!(
        m,
        "# HELP sluice_http_responses_cut_total HTTP responses whose connection closed before all of it was sent.\n\
# TYPE sluice_http_responses_cut_total counter\nsluice_http_responses_cut_total {}",
        requests.cut_total()
    );
    let _ = writeln!(
        m,
        "# HELP {LOG_LINES_DROPPED_TOTAL} Log lines dropped because the log output was full or failing.\n\
# TYPE {LOG_LINES_DROPPED_TOTAL} counter\n{LOG_LINES_DROPPED_TOTAL} {}",
        crate::ops::logging::dropped_lines()
    );
    process(&mut m);
    m
}

/// The response-duration histograms, by route kind and status class (those with responses).
fn durations(m: &mut String, requests: &RequestCounts) {
    let _ = writeln!(
        m,
        "# HELP {HTTP_RESPONSE_DURATION_SECONDS} Time from a request to the last byte of its response, by route kind and status class.\n\
# TYPE {HTTP_RESPONSE_DURATION_SECONDS} histogram"
    );
    for kind in RouteKind::ALL {
        for (class, d) in requests.durations[kind as usize].iter().enumerate() {
            let d = d.lock().unwrap_or_else(|e| e.into_inner());
            let count = d.histogram.len();
            if count == 0 {
                continue;
            }
            let labels = format!("route=\"{}\",class=\"{}xx\"", kind.name(), class + 1);
            for le in DURATION_BUCKETS {
                // Counts at most `le`: HDR's buckets are finer than these (2 digits), so a
                // bucket edge is exact to 1%.
                let upto = d.histogram.count_between(0, (le * 1e6) as u64);
                let _ = writeln!(m, "{HTTP_RESPONSE_DURATION_SECONDS}_bucket{{{labels},le=\"{le}\"}} {upto}");
            }
            let _ = writeln!(m, "{HTTP_RESPONSE_DURATION_SECONDS}_bucket{{{labels},le=\"+Inf\"}} {count}");
            let _ = writeln!(
                m,
                "{HTTP_RESPONSE_DURATION_SECONDS}_sum{{{labels}}} {:.6}",
                d.sum_micros as f64 / 1e6
            );
            let _ = writeln!(m, "{HTTP_RESPONSE_DURATION_SECONDS}_count{{{labels}}} {count}");
        }
    }
}

/// The RTSP loops' headroom (each loop's, labelled `loop=`), their sessions, and the viewers of
/// each stream (added up over the loops), as the loops last reported them.
fn rtsp_gauges(m: &mut String, counters: &Counters) {
    let g = counters.rtsp_gauges().unwrap_or_default();
    let loops = counters.rtsp_loops();
    let _ = writeln!(
        m,
        "# HELP {RTSP_LOOP_BUSY_RATIO} Share of the last 500 ms each RTSP loop spent working (CPU time over wall time).\n\
# TYPE {RTSP_LOOP_BUSY_RATIO} gauge"
    );
    for (index, l, _) in &loops {
        let _ = writeln!(m, "{RTSP_LOOP_BUSY_RATIO}{{loop=\"{index}\"}} {:.3}", l.busy);
    }
    let _ = writeln!(
        m,
        "# HELP sluice_rtsp_loop_sessions RTSP sessions each loop holds now (they add up to sluice_rtsp_sessions).\n\
# TYPE sluice_rtsp_loop_sessions gauge"
    );
    for (index, _, sessions) in &loops {
        let _ = writeln!(m, "sluice_rtsp_loop_sessions{{loop=\"{index}\"}} {sessions}");
    }
    let _ = writeln!(
        m,
        "# HELP sluice_rtsp_loop_viewers RTSP viewers streaming from each loop now.\n# TYPE sluice_rtsp_loop_viewers gauge"
    );
    for (index, l, _) in &loops {
        let _ =
            writeln!(m, "sluice_rtsp_loop_viewers{{loop=\"{index}\"}} {}", l.streams.values().sum::<u64>());
    }
    if let Some(room) = g.room {
        let _ = writeln!(
            m,
            "# HELP sluice_rtsp_viewer_room RTSP viewers admitted at most now, from the loops' headroom (added up).\n\
# TYPE sluice_rtsp_viewer_room gauge\nsluice_rtsp_viewer_room {room}"
        );
    }
    let _ = writeln!(
        m,
        "# HELP {RTSP_STREAM_VIEWERS} RTSP viewers streaming each presentation now.\n# TYPE {RTSP_STREAM_VIEWERS} gauge"
    );
    for (path, n) in &g.streams {
        let path = label_value(path);
        let _ = writeln!(m, "{RTSP_STREAM_VIEWERS}{{path=\"{path}\"}} {n}");
    }
}

/// The slice cache of an s3:// library and its origin: what was served from where, and what the
/// origin cost.
pub fn render_cache(
    m: &mut String,
    stats: &sluice_store::CacheStats,
    fetch_pool: Option<&sluice_engine::PoolStats>,
) {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let counters = [
        ("cache_hits_total", "Slices found in the cache.", &stats.hits),
        ("cache_misses_total", "Slices fetched from the origin for a request.", &stats.misses),
        (
            "cache_coalesced_waits_total",
            "Requests that waited for another's fetch of the same slice.",
            &stats.coalesced_waits,
        ),
        ("cache_evictions_total", "Slices evicted to keep the cache within its size.", &stats.evictions),
        (
            "origin_requests_total",
            "Requests made to the object store (slice GETs, HEADs, listings).",
            &stats.origin_requests,
        ),
        ("origin_errors_total", "Requests to the object store that failed.", &stats.origin_errors),
        (
            "cache_write_failures_total",
            "Fetched slices the cache directory would not take (disk full, I/O errors), served from memory.",
            &stats.write_failures,
        ),
        (
            "cache_vanished_slices_total",
            "Slices whose files something else removed from the cache directory, fetched again when asked for.",
            &stats.vanished_slices,
        ),
        (
            "cache_dir_recreations_total",
            "Times the cache directory was removed while in use and made again.",
            &stats.dir_recreations,
        ),
        (
            "cache_reused_slices_total",
            "Slices a previous process left whole in the cache directory, reused at start.",
            &stats.reused_slices,
        ),
    ];
    for (name, help, c) in counters {
        let _ = writeln!(
            m,
            "# HELP sluice_{name} {help}\n# TYPE sluice_{name} counter\nsluice_{name} {}",
            get(c)
        );
    }
    let _ = writeln!(
        m,
        "# HELP {CACHE_BYTES_TOTAL} Bytes sent or read from slices found in the cache, and bytes fetched from the origin.\n\
# TYPE {CACHE_BYTES_TOTAL} counter\n{CACHE_BYTES_TOTAL}{{source=\"cache\"}} {}\n{CACHE_BYTES_TOTAL}{{source=\"origin\"}} {}",
        get(&stats.bytes_from_cache),
        get(&stats.bytes_from_origin)
    );
    let _ = writeln!(
        m,
        "# HELP {ORIGIN_REQUEST_SECONDS} Time spent in requests to the object store.\n\
# TYPE {ORIGIN_REQUEST_SECONDS} summary\n{ORIGIN_REQUEST_SECONDS}_sum {:.6}\n{ORIGIN_REQUEST_SECONDS}_count {}",
        get(&stats.origin_micros) as f64 / 1e6,
        get(&stats.origin_requests)
    );
    let _ = writeln!(
        m,
        "# HELP sluice_cache_bytes Bytes of slices held on disk now, and being fetched now.\n\
# TYPE sluice_cache_bytes gauge\nsluice_cache_bytes{{state=\"held\"}} {}\nsluice_cache_bytes{{state=\"fetching\"}} {}",
        get(&stats.held_bytes),
        get(&stats.fetching_bytes)
    );
    if let Some(pool) = fetch_pool {
        render_pool(m, "fetch_pool", "background origin work: slices fetched ahead, indexes read", &[pool]);
    }
}

/// Worker pools' gauges and counters, summed, under `sluice_<name>_…`: the engine's CPU pools
/// (`cpu_pool`) and the remote library's background fetch workers (`fetch_pool`).
pub fn render_pool(m: &mut String, name: &str, what: &str, pools: &[&sluice_engine::PoolStats]) {
    let sum = |c: fn(&sluice_engine::PoolStats) -> &AtomicU64| {
        pools.iter().map(|p| c(p).load(Ordering::Relaxed)).sum::<u64>()
    };
    let series: [(&str, &str, &str, u64); 5] = [
        ("workers", "gauge", "Worker threads", sum(|p| &p.workers)),
        ("queued", "gauge", "Jobs waiting for a worker", sum(|p| &p.queued)),
        ("busy", "gauge", "Workers running a job now", sum(|p| &p.busy)),
        ("jobs_total", "counter", "Jobs run", sum(|p| &p.jobs)),
        ("refused_total", "counter", "Jobs refused because the queue was full", sum(|p| &p.refused)),
    ];
    for (series, kind, help, value) in series {
        let _ = writeln!(
            m,
            "# HELP sluice_{name}_{series} {help} ({what}).\n# TYPE sluice_{name}_{series} {kind}\nsluice_{name}_{series} {value}",
        );
    }
}

/// The scrubbing thumbnails' counters: ffmpeg runs (each a tile made), their failures, and tiles
/// found already made (in the store, in memory).
pub fn render_thumbnails(m: &mut String, counts: &crate::thumbs::ThumbCounts) {
    let series = [
        (
            "thumbnail_decoder_runs_total",
            "ffmpeg runs, each making one thumbnail tile.",
            &counts.decoder_runs,
        ),
        (
            "thumbnail_decoder_failures_total",
            "ffmpeg runs that failed or were stopped.",
            &counts.decoder_failures,
        ),
        ("thumbnail_store_hits_total", "Thumbnail tiles read back from the store.", &counts.store_hits),
        ("thumbnail_memory_hits_total", "Thumbnail tiles served from memory.", &counts.memory_hits),
    ];
    for (name, help, c) in series {
        let _ = writeln!(
            m,
            "# HELP sluice_{name} {help}\n# TYPE sluice_{name} counter\nsluice_{name} {}",
            c.load(Ordering::Relaxed)
        );
    }
}

/// `text` as a Prometheus label value: backslash, quote and line feed escaped.
fn label_value(text: &str) -> String {
    text.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// The live paths: how many, what each brings in, and how many are being recorded.
pub fn render_live(m: &mut String, live: &[sluice_rtsp::LiveSummary], recording: usize) {
    let _ = writeln!(
        m,
        "# HELP {LIVE_PATHS} Live paths published now.\n# TYPE {LIVE_PATHS} gauge\n{LIVE_PATHS} {}",
        live.len()
    );
    let _ = writeln!(
        m,
        "# HELP sluice_live_recordings Live paths being recorded now.\n# TYPE sluice_live_recordings gauge\n\
         sluice_live_recordings {recording}"
    );
    let _ = writeln!(
        m,
        "# HELP {LIVE_BIT_RATE} What each live path's publisher sends, in bits a second.\n# TYPE {LIVE_BIT_RATE} gauge"
    );
    for s in live {
        let path = label_value(&s.path);
        let _ = writeln!(m, "{LIVE_BIT_RATE}{{path=\"{path}\"}} {}", s.bit_rate);
    }
}

/// The encrypted segments kept in memory for their next viewers: how often one was enough, and
/// what is held.
pub fn render_segment_cache(m: &mut String, stats: &crate::library::segments::SegmentCacheStats) {
    let series = [
        ("segment_cache_hits_total", "counter", "Encrypted segments sent from memory.", stats.hits),
        ("segment_cache_misses_total", "counter", "Encrypted segments read and encrypted.", stats.misses),
        (
            "segment_cache_evictions_total",
            "counter",
            "Segments evicted to stay within the budget.",
            stats.evictions,
        ),
        ("segment_cache_too_large_total", "counter", "Segments made but too large to keep.", stats.too_large),
        ("segment_cache_entries", "gauge", "Segments held.", stats.entries),
        ("segment_cache_bytes", "gauge", "Bytes of segments held.", stats.bytes),
        ("segment_cache_budget_bytes", "gauge", "Most bytes of segments held (0: none kept).", stats.budget),
    ];
    for (name, kind, help, value) in series {
        let _ =
            writeln!(m, "# HELP sluice_{name} {help}\n# TYPE sluice_{name} {kind}\nsluice_{name} {value}");
    }
}

/// The catalogue of parsed MP4 indexes RTSP, HLS and the page share: what it holds and how
/// often it was enough.
pub fn render_catalogue(m: &mut String, stats: &crate::library::catalogue::CatalogueStats) {
    let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let series = [
        (
            "catalogue_entries",
            "gauge",
            "MP4 indexes held (sample tables and HLS packagings).",
            &stats.entries,
        ),
        ("catalogue_bytes", "gauge", "Estimated heap bytes of the indexes held.", &stats.bytes),
        ("catalogue_hits_total", "counter", "Index lookups answered from the catalogue.", &stats.hits),
        (
            "catalogue_misses_total",
            "counter",
            "Index lookups that read a file's moov or built a packaging.",
            &stats.misses,
        ),
        (
            "catalogue_evictions_total",
            "counter",
            "Indexes evicted to keep the catalogue within its bytes.",
            &stats.evictions,
        ),
    ];
    for (name, kind, help, c) in series {
        let _ =
            writeln!(m, "# HELP sluice_{name} {help}\n# TYPE sluice_{name} {kind}\nsluice_{name} {}", get(c));
    }
}

/// Reads refused by the `[[access]]` policies, by reason; requests and connections refused by
/// the limits per client, by limit; and how many client addresses the limits' table holds.
pub fn render_access(
    m: &mut String,
    access: Option<&crate::access::Access>,
    clients: &crate::http::limits::ClientLimits,
) {
    let _ = writeln!(
        m,
        "# HELP sluice_access_refused_total Reads refused by the access policies, by reason.\n# TYPE sluice_access_refused_total counter"
    );
    for reason in crate::access::Refusal::ALL {
        let n = access.and_then(|a| a.refusals().find(|(r, _)| *r == reason)).map_or(0, |(_, n)| n);
        let _ = writeln!(m, "sluice_access_refused_total{{reason=\"{}\"}} {n}", reason.name());
    }
    let _ = writeln!(
        m,
        "# HELP sluice_access_logins_total Users of `users` policies let in, by scheme.\n# TYPE sluice_access_logins_total counter"
    );
    for (scheme, n) in access.map_or([("basic", 0), ("digest", 0)], |a| a.logins()) {
        let _ = writeln!(m, "sluice_access_logins_total{{scheme=\"{scheme}\"}} {n}");
    }
    let _ = writeln!(
        m,
        "# HELP sluice_client_limit_refused_total Requests and connections refused by the limits per client address.\n# TYPE sluice_client_limit_refused_total counter"
    );
    for (limit, n) in clients.refusals() {
        let _ = writeln!(m, "sluice_client_limit_refused_total{{limit=\"{}\"}} {n}", limit.name());
    }
    let _ = writeln!(
        m,
        "# HELP sluice_client_table_entries Client addresses the limits per client remember (bounded by [clients] table_size).\n# TYPE sluice_client_table_entries gauge\nsluice_client_table_entries {}",
        clients.tracked()
    );
}

/// CPU time, context switches and resident memory of this process, from the kernel.
fn process(m: &mut String) {
    let usage = sluice_cputime::process();
    if let Some(usage) = usage {
        let _ = writeln!(
            m,
            "# HELP sluice_process_cpu_seconds_total CPU time of this process by mode.\n\
# TYPE sluice_process_cpu_seconds_total counter\n\
sluice_process_cpu_seconds_total{{mode=\"user\"}} {:.6}\nsluice_process_cpu_seconds_total{{mode=\"system\"}} {:.6}",
            usage.user_s, usage.system_s
        );
        let _ = writeln!(
            m,
            "# HELP sluice_process_context_switches_total Context switches of this process.\n\
# TYPE sluice_process_context_switches_total counter\n\
sluice_process_context_switches_total{{kind=\"voluntary\"}} {}\nsluice_process_context_switches_total{{kind=\"involuntary\"}} {}",
            usage.voluntary_switches, usage.involuntary_switches
        );
    }
    if let Some(rss) = resident_bytes() {
        let _ = writeln!(
            m,
            "# HELP sluice_process_resident_memory_bytes Resident memory of this process.\n\
# TYPE sluice_process_resident_memory_bytes gauge\nsluice_process_resident_memory_bytes {rss}"
        );
    }
    standard_process(m, &usage.unwrap_or_default());
}

/// The process metrics every Prometheus client library exports, under their standard names, so
/// that dashboards made for any process work on sluice.
fn standard_process(m: &mut String, usage: &sluice_cputime::Usage) {
    let _ = writeln!(
        m,
        "# HELP {PROCESS_CPU_SECONDS_TOTAL} Total user and system CPU time spent in seconds.\n\
# TYPE {PROCESS_CPU_SECONDS_TOTAL} counter\n{PROCESS_CPU_SECONDS_TOTAL} {:.6}",
        usage.cpu_s()
    );
    if let Some(rss) = resident_bytes() {
        let _ = writeln!(
            m,
            "# HELP {PROCESS_RESIDENT_MEMORY_BYTES} Resident memory size in bytes.\n\
# TYPE {PROCESS_RESIDENT_MEMORY_BYTES} gauge\n{PROCESS_RESIDENT_MEMORY_BYTES} {rss}"
        );
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        // The directory's own descriptor is among those listed.
        let open = fds.count().saturating_sub(1);
        let _ = writeln!(
            m,
            "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds {open}"
        );
    }
    if let Some(limit) = crate::sys::max_open_files() {
        let _ = writeln!(
            m,
            "# HELP process_max_fds Maximum number of open file descriptors.\n# TYPE process_max_fds gauge\nprocess_max_fds {}",
            limit
        );
    }
    if let Some(start) = start_time_seconds() {
        let _ = writeln!(
            m,
            "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n\
# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {start:.2}"
        );
    }
}

/// When this process started (Unix seconds): its start in clock ticks after boot
/// (`/proc/self/stat`), plus the boot time (`/proc/stat`).
fn start_time_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may hold spaces and parentheses: fields are counted after its last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // Field 22 overall is the 20th after the name (state is the 3rd field overall).
    let ticks: f64 = after.split_whitespace().nth(19)?.parse().ok()?;
    let boot: f64 = std::fs::read_to_string("/proc/stat")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(boot + ticks / sluice_cputime::clock_ticks())
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = crate::sys::page_size();
    Some(pages * page.max(4096) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let counters = Counters::new();
        counters.shard(0).syscall(Syscall::Accept);
        counters.shard(0).add(Event::ConnectionsAccepted, 1);
        let requests = RequestCounts::default();
        requests.response(200);
        requests.response(404);
        let text = render(&EngineConfig::default(), &counters, &requests);
        assert!(text.contains("sluice_syscalls_total{kind=\"accept\"} 1\n"), "{text}");
        assert!(text.contains("sluice_connections_open 1\n"));
        counters.shard(0).add(Event::RtspSessionsCreated, 2);
        counters.shard(1).add(Event::RtspReleasedTimeout, 1);
        let text = render(&EngineConfig::default(), &counters, &requests);
        assert!(text.contains("sluice_rtsp_sessions 1\n"), "{text}");
        assert!(text.contains("sluice_rtsp_sessions_released_total{reason=\"timeout\"} 1\n"));
        assert!(text.contains("sluice_rtsp_sessions_released_total{reason=\"teardown\"} 0\n"));
        assert_eq!(text.matches("# TYPE sluice_rtsp_sessions_released_total counter").count(), 1);
        // Each RTSP loop's sessions and busy share, labelled by its index.
        counters.rtsp_loop(1).add(Event::RtspSessionsCreated, 3);
        counters.rtsp_loop(1).rtsp_gauges(|g| g.busy = 0.25);
        counters.rtsp_loop(0);
        let text = render(&EngineConfig::default(), &counters, &requests);
        assert!(text.contains("sluice_rtsp_loop_sessions{loop=\"0\"} 0\n"), "{text}");
        assert!(text.contains("sluice_rtsp_loop_sessions{loop=\"1\"} 3\n"), "{text}");
        assert!(text.contains("sluice_rtsp_loop_busy_ratio{loop=\"1\"} 0.250\n"), "{text}");
        assert!(text.contains("sluice_rtsp_sessions 4\n"), "{text}");
        assert!(text.contains("sluice_http_responses_total{class=\"2xx\"} 1\n"));
        assert!(text.contains("sluice_http_responses_total{class=\"4xx\"} 1\n"));
        assert!(text.contains("sluice_process_cpu_seconds_total{mode=\"user\"}"));
        assert!(text.contains("sluice_process_resident_memory_bytes "));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(!name.is_empty() && value.parse::<f64>().is_ok(), "bad sample line {line:?}");
        }
    }

    #[test]
    fn every_name_the_dashboard_and_the_lab_read_is_exported() {
        let mut text = render(&EngineConfig::default(), &Counters::new(), &RequestCounts::default());
        render_cache(&mut text, &sluice_store::CacheStats::default(), None);
        for name in sluice_proto::metrics_text::names::ALL {
            assert!(text.lines().any(|l| l.starts_with(&format!("# TYPE {name} "))), "{name} missing");
        }
    }
}
