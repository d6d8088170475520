//! `GET /metrics`: the engine's counters, the server's request counts and the process's cost, in
//! Prometheus text format (version 0.0.4).
//!
//! Owns the metric names and the rendering. The numbers come from `sluice_engine::Counters` (what
//! the engine did), [`RequestCounts`] (what the application answered) and the kernel (CPU time,
//! context switches, resident memory of this process). It does not count anything itself.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice_engine::counters::{Event, Syscall};
use sluice_engine::{Counters, EngineConfig};

/// Responses by status class, and requests refused before reaching a route.
#[derive(Debug, Default)]
pub struct RequestCounts {
    by_class: [AtomicU64; 5],
    refused: AtomicU64,
    cut: AtomicU64,
}

impl RequestCounts {
    /// Counts one response with this status code.
    pub fn response(&self, status: u16) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.by_class[class].fetch_add(1, Ordering::Relaxed);
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
        "# HELP sluice_syscalls_total System calls the engine made, by kind (tokio's own reactor calls are not included).\n\
# TYPE sluice_syscalls_total counter"
    );
    for kind in Syscall::ALL {
        let _ = writeln!(m, "sluice_syscalls_total{{kind=\"{}\"}} {}", kind.name(), counters.syscalls(kind));
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
    let _ = writeln!(
        m,
        "# HELP sluice_connections_open Connections open now.\n# TYPE sluice_connections_open gauge\nsluice_connections_open {}",
        counters.open_connections()
    );
    let _ = writeln!(
        m,
        "# HELP sluice_http_requests_total HTTP requests answered.\n# TYPE sluice_http_requests_total counter\n\
sluice_http_requests_total {}",
        requests.total()
    );
    let _ = writeln!(m, "# HELP sluice_http_responses_total HTTP responses by status class.\n# TYPE sluice_http_responses_total counter");
    for (i, c) in requests.by_class.iter().enumerate() {
        let _ =
            writeln!(m, "sluice_http_responses_total{{class=\"{}xx\"}} {}", i + 1, c.load(Ordering::Relaxed));
    }
    let _ = writeln!(
        m,
        "# HELP sluice_http_requests_refused_total Requests refused before routing (malformed, too large, too slow).\n\
# TYPE sluice_http_requests_refused_total counter\nsluice_http_requests_refused_total {}",
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
        "# HELP sluice_log_lines_dropped_total Log lines dropped because the log output was full or failing.\n\
# TYPE sluice_log_lines_dropped_total counter\nsluice_log_lines_dropped_total {}",
        crate::logging::dropped_lines()
    );
    process(&mut m);
    m
}

/// The RTSP loops' headroom (each loop's, labelled `loop=`), their sessions, and the viewers of
/// each stream (added up over the loops), as the loops last reported them.
fn rtsp_gauges(m: &mut String, counters: &Counters) {
    let g = counters.rtsp_gauges().unwrap_or_default();
    let loops = counters.rtsp_loops();
    let _ = writeln!(
        m,
        "# HELP sluice_rtsp_loop_busy_ratio Share of the last 500 ms each RTSP loop spent working (CPU time over wall time).\n\
# TYPE sluice_rtsp_loop_busy_ratio gauge"
    );
    for (index, l, _) in &loops {
        let _ = writeln!(m, "sluice_rtsp_loop_busy_ratio{{loop=\"{index}\"}} {:.3}", l.busy);
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
        "# HELP sluice_rtsp_stream_viewers RTSP viewers streaming each presentation now.\n# TYPE sluice_rtsp_stream_viewers gauge"
    );
    for (path, n) in &g.streams {
        let path = path.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n");
        let _ = writeln!(m, "sluice_rtsp_stream_viewers{{path=\"{path}\"}} {n}");
    }
}

/// The slice cache of an s3:// library and its origin: what was served from where, and what the
/// origin cost.
pub fn render_cache(m: &mut String, stats: &sluice_store::CacheStats) {
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
        "# HELP sluice_cache_bytes_total Bytes of slices served from the cache, and fetched from the origin.\n\
# TYPE sluice_cache_bytes_total counter\nsluice_cache_bytes_total{{source=\"cache\"}} {}\nsluice_cache_bytes_total{{source=\"origin\"}} {}",
        get(&stats.bytes_from_cache),
        get(&stats.bytes_from_origin)
    );
    let _ = writeln!(
        m,
        "# HELP sluice_origin_request_seconds Time spent in requests to the object store.\n\
# TYPE sluice_origin_request_seconds summary\nsluice_origin_request_seconds_sum {:.6}\nsluice_origin_request_seconds_count {}",
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
}

/// The catalogue of parsed MP4 indexes RTSP, HLS and the page share: what it holds and how
/// often it was enough.
pub fn render_catalogue(m: &mut String, stats: &crate::catalogue::CatalogueStats) {
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
    clients: &crate::limits::ClientLimits,
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
    // SAFETY: getrusage fills a zeroed rusage we own.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } == 0 {
        let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
        let _ = writeln!(
            m,
            "# HELP sluice_process_cpu_seconds_total CPU time of this process by mode.\n\
# TYPE sluice_process_cpu_seconds_total counter\n\
sluice_process_cpu_seconds_total{{mode=\"user\"}} {:.6}\nsluice_process_cpu_seconds_total{{mode=\"system\"}} {:.6}",
            secs(usage.ru_utime),
            secs(usage.ru_stime)
        );
        let _ = writeln!(
            m,
            "# HELP sluice_process_context_switches_total Context switches of this process.\n\
# TYPE sluice_process_context_switches_total counter\n\
sluice_process_context_switches_total{{kind=\"voluntary\"}} {}\nsluice_process_context_switches_total{{kind=\"involuntary\"}} {}",
            usage.ru_nvcsw, usage.ru_nivcsw
        );
    }
    if let Some(rss) = resident_bytes() {
        let _ = writeln!(
            m,
            "# HELP sluice_process_resident_memory_bytes Resident memory of this process.\n\
# TYPE sluice_process_resident_memory_bytes gauge\nsluice_process_resident_memory_bytes {rss}"
        );
    }
}

fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf takes no pointers.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
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
}
