//! The admin listener's live dashboard: a sample a second of what `/metrics` says, the last
//! 15 minutes of them, the page at `/` that charts them and the server-sent events at `/events`
//! that feed it.
//!
//! Owns the sampler and the event streams. A sample is built from the `/metrics` text itself
//! (rates from two scrapes a second apart) plus, for response-time percentiles, the same HDR
//! histograms the text's buckets come from: the page and a Prometheus scraping `/metrics` see
//! one source. It does not count anything, and it does not draw (`sluice_charts` does).
//!
//! Streams are bounded: at most [`MAX_STREAMS`] at once (more get 503), and a stream holds at
//! most one sample beyond what its socket took, because its next sample is produced only once
//! the last was sent. A dashboard that stops reading fills its socket and the admin listener's
//! send deadline drops it; the sampler and the other streams never wait for it.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hdrhistogram::Histogram;
use serde_json::{json, Map, Value};
use sluice_charts::{Chart, Hub};
use sluice_engine::{
    Counters, EngineConfig, EngineError, EngineKind, Listeners, Service, Shutdown, ThreadsMode,
};
use sluice_proto::conn::Segment;
use sluice_proto::http::{
    Body, BodyTail, BodyTailError, Handler, HttpSession, Limits, Method, Reply, Request, Response, Status,
    StreamedBody,
};
use sluice_proto::metrics_text::{self, names::*, series};

use crate::ops::metrics::{RequestCounts, RouteKind};

/// Samples kept: 15 minutes at one a second.
pub const HISTORY: usize = 900;
/// Event streams served at once.
pub const MAX_STREAMS: usize = 64;
/// The admin listener's kernel send buffer per connection (the kernel doubles it): a sample is
/// under a kilobyte, and `/metrics` or the history take a few round trips more.
pub const SEND_BUFFER: i32 = 4096;
/// How long an admin connection may make no sending progress before it is dropped.
pub const STALL: Duration = Duration::from_secs(5);
/// How long an admin (or chart page) connection may sit idle between requests, or take to send
/// a head. Scrapes and probes come every 10 s or more, so a kept connection saves them little,
/// while an idle one holds a place of the capped listener (the media listener keeps its 75 s).
pub const KEEPALIVE: Duration = Duration::from_secs(5);
/// How long between samples.
const PERIOD: Duration = Duration::from_secs(1);
/// A stream's `Content-Length`: the browser reconnects (after `retry`) once it is used up.
const STREAM_BYTES: u64 = 1 << 30;

/// The samples so far and the streams following them.
#[derive(Debug)]
pub struct Board {
    hub: Arc<Hub>,
    streams: AtomicUsize,
}

impl Default for Board {
    fn default() -> Self {
        Board::following(Arc::new(Hub::new(HISTORY)))
    }
}

impl Board {
    /// A board whose streams follow `hub`, which its owner publishes to.
    pub fn following(hub: Arc<Hub>) -> Board {
        Board { hub, streams: AtomicUsize::new(0) }
    }

    /// Adds a sample and wakes the streams.
    pub fn publish(&self, sample: &Value) {
        self.hub.publish(sample);
    }

    /// Event streams open now.
    pub fn streams(&self) -> usize {
        self.streams.load(Ordering::Relaxed)
    }

    /// `/events`: the history, then a sample a second; 503 past [`MAX_STREAMS`].
    pub fn events(self: &Arc<Self>, shutdown: &Shutdown) -> Response {
        let taken = self.streams.fetch_add(1, Ordering::Relaxed);
        let (head, next) = self.hub.start();
        let tail =
            EventTail { board: Arc::clone(self), next, left: STREAM_BYTES, shutdown: shutdown.clone() };
        if taken >= MAX_STREAMS {
            drop(tail);
            // Closed, not kept alive: a refused dashboard must not keep a place of the admin
            // listener's that a health check needs.
            return Response::refusal(Status::SERVICE_UNAVAILABLE, "too many dashboards follow this server")
                .with_header("Retry-After", "10")
                .with_header("Connection", "close");
        }
        let mut tail = tail;
        tail.left -= head.len() as u64;
        Response {
            status: Status::OK,
            headers: vec![
                ("Content-Type", Cow::Borrowed("text/event-stream")),
                ("Cache-Control", Cow::Borrowed("no-cache")),
            ],
            body: Body::Streamed(StreamedBody {
                len: STREAM_BYTES,
                ready: vec![Segment::Bytes(head.into_bytes())],
                tail: Box::new(tail),
            }),
        }
    }
}

/// One stream's place in the samples.
struct EventTail {
    board: Arc<Board>,
    /// The sequence number of the next sample it sends.
    next: u64,
    /// Bytes left of its `Content-Length`.
    left: u64,
    shutdown: Shutdown,
}

impl Drop for EventTail {
    fn drop(&mut self) {
        self.board.streams.fetch_sub(1, Ordering::Relaxed);
    }
}

impl BodyTail for EventTail {
    fn next(&mut self) -> Result<Vec<Segment>, BodyTailError> {
        let stopping = || self.shutdown.is_triggered();
        let Some(text) = self.board.hub.next_event(&mut self.next, &stopping) else {
            return Err(BodyTailError("the server is stopping".into()));
        };
        let mut bytes = text.into_bytes();
        if bytes.len() as u64 > self.left {
            // The last bytes of the length: a comment line, after which the browser reconnects.
            let n = self.left as usize;
            bytes =
                if n >= 2 { format!(":{}\n", " ".repeat(n - 2)).into_bytes() } else { b"\n"[..n].to_vec() };
        }
        self.left -= bytes.len() as u64;
        Ok(vec![Segment::Bytes(bytes)])
    }
}

/// Takes a sample a second from `metrics` (the `/metrics` text) and `requests` until `shutdown`.
pub fn sample_every_second(
    board: &Board,
    requests: &RequestCounts,
    metrics: impl Fn() -> String,
    shutdown: &Shutdown,
) {
    let mut sampler = Sampler::default();
    let mut due = Instant::now();
    while !shutdown.is_triggered() {
        let now = Instant::now();
        if now < due {
            std::thread::sleep((due - now).min(Duration::from_millis(100)));
            continue;
        }
        due += PERIOD;
        if let Some(sample) = sampler.take(&metrics(), requests, now) {
            board.publish(&sample);
        }
    }
}

/// The previous scrape, that the next one's rates are measured from.
#[derive(Default)]
struct Sampler {
    previous: Option<Scrape>,
}

/// One scrape: when, the `/metrics` samples, and the response-duration histograms by route kind.
type Scrape = (Instant, metrics_text::Scrape, Vec<Histogram<u64>>);

impl Sampler {
    /// A sample from `text` and `requests` now; `None` the first time (no rates yet).
    fn take(&mut self, text: &str, requests: &RequestCounts, now: Instant) -> Option<Value> {
        let values = metrics_text::Scrape::parse(text);
        let histograms: Vec<Histogram<u64>> =
            RouteKind::ALL.iter().map(|k| requests.durations_of(*k)).collect();
        let previous = self.previous.replace((now, values, histograms));
        let (then, before, before_h) = previous?;
        let (_, values, histograms) = self.previous.as_ref()?;
        let dt = now.duration_since(then).as_secs_f64().max(1e-3);
        let value = |key: &str| values.get(key);
        let delta = |key: &str| (values.get(key).unwrap_or(0.0) - before.get(key).unwrap_or(0.0)).max(0.0);
        let rate = |key: &str| delta(key) / dt;
        let classes = ["1xx", "2xx", "3xx", "4xx", "5xx"];
        let by_class = |name: &str, scale: f64| -> Map<String, Value> {
            classes
                .iter()
                .map(|c| ((*c).to_string(), json!(round(rate(&series(name, &[("class", c)])) / scale))))
                .collect()
        };
        let mut latency = BTreeMap::new();
        for (q, name) in [(0.5, "p50"), (0.9, "p90"), (0.99, "p99")] {
            let mut per_route = Map::new();
            for ((kind, now_h), then_h) in RouteKind::ALL.iter().zip(histograms).zip(&before_h) {
                let mut interval = now_h.clone();
                if interval.subtract(then_h).is_ok() && !interval.is_empty() {
                    per_route
                        .insert(kind.name().into(), json!(round(interval.value_at_quantile(q) as f64 / 1e3)));
                }
            }
            latency.insert(name, per_route);
        }
        let labelled = |name: &str, label: &str| -> Map<String, Value> {
            values.by_label(name, label).into_iter().map(|(v, n)| (v, json!(round(n)))).collect()
        };
        // By bytes, not lookups: an RTSP viewer looks a slice up at every sample it reads, so
        // lookups would count one 4 MiB fetch against thousands of small hits.
        let from_cache = delta(&series(CACHE_BYTES_TOTAL, &[("source", "cache")]));
        let from_origin = delta(&series(CACHE_BYTES_TOTAL, &[("source", "origin")]));
        let origin = delta(&format!("{ORIGIN_REQUEST_SECONDS}_count"));
        let uploads: f64 = ["1xx", "2xx", "3xx", "4xx", "5xx"]
            .iter()
            .map(|c| {
                let count = format!("{HTTP_RESPONSE_DURATION_SECONDS}_count");
                rate(&series(&count, &[("route", "upload"), ("class", c)]))
            })
            .sum();
        let refused = [HTTP_REQUESTS_REFUSED_TOTAL, CONNECTIONS_REJECTED_TOTAL, CONNECTIONS_SHED_TOTAL]
            .iter()
            .map(|k| rate(k))
            .sum::<f64>();
        let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Some(json!({
            "t": t.round(),
            "rps": by_class(HTTP_RESPONSES_TOTAL, 1.0),
            "mbps": by_class(HTTP_RESPONSE_BYTES_TOTAL, 1e6),
            "connections": value(CONNECTIONS_OPEN),
            "latency": latency,
            "rtsp": {
                "viewers": labelled(RTSP_STREAM_VIEWERS, "path"),
                "busy": labelled(RTSP_LOOP_BUSY_RATIO, "loop"),
                "late": round(rate(RTP_LATE_SENDS_TOTAL)),
                "refused": round(rate(RTSP_VIEWERS_REFUSED_TOTAL)),
            },
            "live": {
                "paths": value(LIVE_PATHS),
                "kbps": values
                    .by_label(LIVE_BIT_RATE, "path")
                    .into_iter()
                    .map(|(path, bps)| (path, json!(round(bps / 1e3))))
                    .collect::<Map<String, Value>>(),
            },
            "refused": round(refused),
            "cache": {
                "hit_ratio": (from_cache + from_origin > 0.0).then(|| round(from_cache / (from_cache + from_origin))),
                "origin_rps": value(ORIGIN_REQUESTS_TOTAL).map(|_| round(rate(ORIGIN_REQUESTS_TOTAL))),
                "origin_ms": (origin > 0.0).then(|| round(delta(&format!("{ORIGIN_REQUEST_SECONDS}_sum")) / origin * 1e3)),
            },
            "uploads": round(uploads),
            "log_dropped": round(rate(LOG_LINES_DROPPED_TOTAL)),
            "cpu": round(rate(PROCESS_CPU_SECONDS_TOTAL)),
            "rss_mb": value(PROCESS_RESIDENT_MEMORY_BYTES).map(|b| round(b / 1e6)),
        }))
    }
}

/// Three decimals are plenty for a chart and keep samples small.
fn round(v: f64) -> f64 {
    (v * 1e3).round() / 1e3
}

/// The dashboard's charts.
pub fn charts() -> Vec<Chart> {
    let classes = [("rps.2xx", "2xx"), ("rps.3xx", "3xx"), ("rps.4xx", "4xx"), ("rps.5xx", "5xx")];
    let bytes = [("mbps.2xx", "2xx"), ("mbps.3xx", "3xx"), ("mbps.4xx", "4xx"), ("mbps.5xx", "5xx")];
    vec![
        Chart::new("Requests by status class", "req/s", &classes),
        Chart::new("Bytes by status class", "MB/s", &bytes),
        Chart::new("Open connections", "", &[("connections", "open")]),
        Chart::new("Response time p50 by route", "ms", &[("latency.p50.*", "")]),
        Chart::new("Response time p99 by route", "ms", &[("latency.p99.*", "")]),
        Chart::new("RTSP viewers by stream", "", &[("rtsp.viewers.*", "")]),
        Chart::new("RTSP loops busy", "share", &[("rtsp.busy.*", "loop")]),
        Chart::new(
            "Live paths and their ingest",
            "paths, kb/s",
            &[("live.paths", "live paths"), ("live.kbps.*", "")],
        ),
        Chart::new(
            "Late sends and refusals",
            "/s",
            &[("rtsp.late", "late RTP sends"), ("rtsp.refused", "RTSP refused"), ("refused", "HTTP refused")],
        ),
        Chart::new("Edge cache hit ratio (bytes)", "", &[("cache.hit_ratio", "from the cache")]),
        Chart::new(
            "Origin",
            "req/s, ms",
            &[("cache.origin_rps", "requests/s"), ("cache.origin_ms", "latency ms")],
        ),
        Chart::new(
            "Uploads and dropped log lines",
            "/s",
            &[("uploads", "uploads"), ("log_dropped", "log lines dropped")],
        ),
        Chart::new("CPU", "cores", &[("cpu", "cpu")]),
        Chart::new("Resident memory", "MB", &[("rss_mb", "rss")]),
    ]
}

/// The page at the admin listener's `/`.
pub fn page() -> String {
    sluice_charts::page(
        "sluice",
        "the last 15 minutes, a sample a second (the numbers /metrics exports)",
        &charts(),
        sluice_charts::Samples::Live("/events"),
    )
}

/// The engine settings of a listener that serves a chart page (the admin listener, a load
/// run's live page), from the server's `engine`. Each dashboard's event stream waits for its next
/// sample in a job: one job slot per stream (they wait, they do not compute), and a dashboard
/// that stops reading is dropped once its socket stalls for [`STALL`]. At the cap the connection
/// that has waited longest on its client makes room for the newcomer; what the server is working
/// on (a sample being awaited, a response being made) is never taken.
pub fn page_engine(engine: &EngineConfig) -> EngineConfig {
    EngineConfig {
        kind: EngineKind::Threads,
        send: sluice_engine::SendStrategy::Copy,
        workers: 1,
        threads_mode: ThreadsMode::PerConnection,
        max_connections: MAX_STREAMS + 64,
        reclaim_waiting: true,
        cpu_workers: MAX_STREAMS + 1,
        cpu_queue: 4,
        send_timeout: STALL,
        ..engine.clone()
    }
}

/// A chart page served on a listener of its own for a program that has no admin listener
/// (`sluice load --dashboard`): `GET /` the page, `GET /events` the board's samples, on the
/// engine and HTTP session the admin listener runs. Stops serving when dropped.
pub struct PageServer {
    addr: SocketAddr,
    shutdown: Shutdown,
    thread: Option<std::thread::JoinHandle<Result<(), EngineError>>>,
}

impl PageServer {
    /// Serves `page` and the samples published to `hub` at `addr`.
    pub fn start(addr: SocketAddr, page: String, hub: Arc<Hub>) -> Result<PageServer, EngineError> {
        let listeners = Listeners::bind(addr, 1)?;
        listeners.cap_send_buffer(SEND_BUFFER)?;
        let addr = listeners.local_addr();
        let shutdown = Shutdown::new()?;
        let handler =
            PageHandler { page, board: Arc::new(Board::following(hub)), shutdown: shutdown.clone() };
        let service = Arc::new(PageService(Arc::new(handler)));
        // A page's streams end at once on the shutdown; nothing else is worth waiting for.
        let engine = EngineConfig {
            shutdown_grace: Duration::from_millis(200),
            ..page_engine(&EngineConfig::default())
        };
        let stop = shutdown.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-live-page".into())
            .spawn(move || sluice_engine::run(&engine, listeners, service, &stop, &Counters::new()))
            .map_err(|source| EngineError::Setup { what: "spawn the live page's listener", source })?;
        Ok(PageServer { addr, shutdown, thread: Some(thread) })
    }

    /// Where the page is served.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for PageServer {
    fn drop(&mut self) {
        self.shutdown.trigger();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The page and its events as a handler.
struct PageHandler {
    page: String,
    board: Arc<Board>,
    shutdown: Shutdown,
}

impl Handler for PageHandler {
    fn limits(&self) -> &Limits {
        static LIMITS: std::sync::OnceLock<Limits> = std::sync::OnceLock::new();
        LIMITS.get_or_init(|| Limits {
            keepalive_timeout: KEEPALIVE,
            header_timeout: KEEPALIVE,
            ..Limits::default()
        })
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        let response = match (req.method, req.path()) {
            (Method::Get | Method::Head, Some("/")) => Response {
                status: Status::OK,
                headers: vec![("Content-Type", Cow::Borrowed("text/html; charset=utf-8"))],
                body: Body::Bytes(Cow::Owned(self.page.clone().into_bytes())),
            },
            (Method::Get | Method::Head, Some("/events")) => self.board.events(&self.shutdown),
            (Method::Get | Method::Head, _) => Response::error(Status::NOT_FOUND),
            _ => Response::error(Status::METHOD_NOT_ALLOWED).with_header("Allow", "GET, HEAD"),
        };
        response.into()
    }
}

/// The page's service: one [`HttpSession`] a connection, as the admin listener's.
struct PageService(Arc<PageHandler>);

impl Service for PageService {
    type Session = HttpSession<SharedPage>;

    fn session(&self, _peer: SocketAddr, clock: &sluice_proto::Clock) -> Self::Session {
        HttpSession::new(SharedPage(Arc::clone(&self.0)), clock)
    }
}

/// A connection's handle on the one [`PageHandler`].
struct SharedPage(Arc<PageHandler>);

impl Handler for SharedPage {
    fn limits(&self) -> &Limits {
        self.0.limits()
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        self.0.respond(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_are_rates_between_two_scrapes() {
        let requests = RequestCounts::default();
        let mut sampler = Sampler::default();
        let t0 = Instant::now();
        let text = |n: u64| {
            format!("sluice_http_responses_total{{class=\"2xx\"}} {n}\nsluice_rtsp_stream_viewers{{path=\"/a \\\"b\\\".mp4\"}} 2\nprocess_cpu_seconds_total 1.5\n")
        };
        assert!(sampler.take(&text(10), &requests, t0).is_none(), "no rate from one scrape");
        requests.ended(RouteKind::Range, 206, 1000, Duration::from_millis(20));
        let s = sampler.take(&text(30), &requests, t0 + Duration::from_secs(2)).unwrap();
        assert_eq!(s["rps"]["2xx"], json!(10.0), "{s}");
        assert_eq!(s["rtsp"]["viewers"]["/a \"b\".mp4"], json!(2.0), "{s}");
        let p50 = s["latency"]["p50"]["range"].as_f64().unwrap();
        assert!((19.0..21.0).contains(&p50), "{s}");
        assert!(s["latency"]["p50"].get("file").is_none(), "no file responses, no file percentile: {s}");
        assert_eq!(s["cache"]["hit_ratio"], Value::Null);
        // An edge: the share of the interval's bytes that the cache gave, not of its lookups.
        let edge = |cache: u64, origin: u64, hits: u64| {
            format!(
                "sluice_cache_bytes_total{{source=\"cache\"}} {cache}\nsluice_cache_bytes_total{{source=\"origin\"}} {origin}\nsluice_cache_hits_total {hits}\nsluice_cache_misses_total 1\n"
            )
        };
        let t1 = t0 + Duration::from_secs(3);
        sampler.take(&edge(0, 0, 0), &requests, t1);
        let s = sampler.take(&edge(3000, 1000, 5000), &requests, t1 + Duration::from_secs(1)).unwrap();
        assert_eq!(s["cache"]["hit_ratio"], json!(0.75), "{s}");
    }

    #[test]
    fn a_stream_sends_history_then_each_sample_and_frees_its_place() {
        let board = Arc::new(Board::default());
        board.publish(&json!({"t": 1}));
        let shutdown = Shutdown::new().unwrap();
        let Body::Streamed(body) = board.events(&shutdown).body else { panic!("a stream") };
        assert_eq!(board.streams(), 1);
        let head: Vec<u8> = body
            .ready
            .iter()
            .flat_map(|s| match s {
                Segment::Bytes(b) => b.clone(),
                _ => vec![],
            })
            .collect();
        assert!(String::from_utf8_lossy(&head).contains("event: history\ndata: [{\"t\":1}]"));
        let mut tail = body.tail;
        board.publish(&json!({"t": 2}));
        let next = tail.next().unwrap();
        let Segment::Bytes(b) = &next[0] else { panic!("bytes") };
        assert_eq!(b, b"data: {\"t\":2}\n\n");
        drop(tail);
        assert_eq!(board.streams(), 0);
    }
}
