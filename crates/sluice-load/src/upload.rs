//! `sluice upload`, the seed's batch writer done right: objects (files, a directory tree, or
//! generated payloads) uploaded to a sluice server over HTTP or straight into an S3 bucket, by
//! `concurrency` workers that each keep one connection alive for all their objects.
//!
//! Each object carries its SHA-256 (`Repr-Digest`), so the receiver stores nothing that arrived
//! damaged. A failure that may be transient (a 5xx, a reset, a timeout) is retried a bounded
//! number of times with exponential backoff on a fresh connection; an object whose upload was
//! acknowledged (any final response) is never sent again, and 4xx answers are final: a refusal
//! answered while the body was still going out (413 before the body, a closed connection after
//! it) is read and reported as the refusal, not retried as a reset. A 401 or 403 stops the run
//! (every other object would get the same answer). Bodies from 1 MiB ask `Expect: 100-continue`,
//! so a refused large body is not sent at all. The report has per-object latency percentiles
//! (HDR), objects/s, bytes raw against stored, connections opened, failures by kind and each
//! failed object with its status and the server's one-line reason. It owns the client side only;
//! the server and the store are `sluice-server` and `sluice-store`. This file owns what is
//! uploaded, the workers, retries and the report; speaking HTTP to a server is `http`'s.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use sluice_store::gzip::{put_with_policy, GzipPolicy};
use sluice_store::{Key, LocationError, PutOptions, S3Config, S3Location, S3Store, Store};

mod http;

use crate::payload::PayloadKind;
use http::HttpConnection;

/// Where objects go.
#[derive(Debug, Clone)]
pub enum Destination {
    /// A sluice server: `PUT http://addr/prefix/key` with a bearer token.
    Http {
        /// The server's address.
        addr: SocketAddr,
        /// The `Host` header value.
        host: String,
        /// Path prefix under which keys go (no trailing `/`; empty for the root).
        prefix: String,
        /// Bearer token.
        token: Option<String>,
    },
    /// A bucket, written through `sluice-store`'s S3 backend (with the gzip policy applied here).
    S3 {
        /// Bucket, prefix, endpoint and credentials.
        config: S3Config,
        /// Which objects to store gzipped.
        gzip: GzipPolicy,
    },
}

impl Destination {
    /// Parses `http://host:port/prefix` or `s3://bucket/prefix`.
    pub fn parse(
        target: &str,
        token: Option<String>,
        s3: S3Config,
        gzip: GzipPolicy,
    ) -> Result<Destination, String> {
        if target.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("s3://")) {
            let location: S3Location = target.parse().map_err(|e: LocationError| e.to_string())?;
            let config = S3Config { bucket: location.bucket, prefix: location.prefix, ..s3 };
            return Ok(Destination::S3 { config, gzip });
        }
        let forms = "http://HOST:PORT/PREFIX (a sluice server) or s3://BUCKET/PREFIX";
        if !target.contains("://") {
            return Err(format!("`{target}` has no scheme: a destination is {forms}"));
        }
        let url = url::Url::parse(target).map_err(|e| format!("`{target}`: {e}"))?;
        if url.scheme() != "http" {
            return Err(format!("`{target}`: a destination is {forms}"));
        }
        let host = url.host_str().ok_or_else(|| format!("{target}: no host"))?.to_string();
        let port = url.port_or_known_default().unwrap_or(80);
        let addr = (host.as_str(), port)
            .to_socket_addrs()
            .map_err(|e| format!("{target}: {e}"))?
            .next()
            .ok_or_else(|| format!("{target}: no address"))?;
        let prefix = url.path().trim_end_matches('/').to_string();
        Ok(Destination::Http { addr, host: format!("{host}:{port}"), prefix, token })
    }
}

/// What to upload.
#[derive(Debug, Clone)]
pub enum Source {
    /// Files (and every file under directories), keyed by their path relative to the argument's
    /// parent (a file) or to the directory itself.
    Paths(Vec<PathBuf>),
    /// `count` generated payloads of `size` bytes.
    Generate {
        /// Which payload.
        kind: PayloadKind,
        /// Bytes each.
        size: usize,
        /// How many.
        count: usize,
    },
}

/// How to upload.
#[derive(Debug, Clone)]
pub struct UploadConfig {
    /// Where.
    pub destination: Destination,
    /// What.
    pub source: Source,
    /// Workers, each with its own kept-alive connection.
    pub concurrency: usize,
    /// Retries per object after the first attempt.
    pub retries: u32,
    /// Longest wait for any one read or write.
    pub timeout: Duration,
    /// Ends the batch early when raised (objects under way finish); `None`: it runs its course.
    pub stop: Option<crate::StopFlag>,
}

/// One object to upload.
#[derive(Debug, Clone)]
struct Item {
    key: String,
    origin: Origin,
    /// Whether the file's name is UTF-8 (a key is; a name that is not would be stored mangled).
    utf8_name: bool,
}

#[derive(Debug, Clone)]
enum Origin {
    File(PathBuf),
    Generated(PayloadKind, usize, u64),
}

impl Item {
    fn bytes(&self) -> std::io::Result<Vec<u8>> {
        match &self.origin {
            Origin::File(p) => std::fs::read(p),
            Origin::Generated(kind, size, seed) => Ok(kind.generate(*size, *seed)),
        }
    }

    fn content_type(&self) -> &'static str {
        match &self.origin {
            Origin::File(p) => content_type_of(p),
            Origin::Generated(kind, ..) => kind.content_type(),
        }
    }
}

fn content_type_of(p: &Path) -> &'static str {
    match p.extension().and_then(|e| e.to_str()).unwrap_or("") {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" => "text/plain; charset=utf-8",
        "json" => "application/json",
        "css" => "text/css",
        "js" => "application/javascript",
        "svg" => "image/svg+xml",
        "xml" => "application/xml",
        "m3u8" => "application/vnd.apple.mpegurl",
        "vtt" => "text/vtt",
        "mp4" => "video/mp4",
        _ => "application/octet-stream",
    }
}

/// The objects of `source`; a directory that cannot be read is an error naming it. A path that
/// does not exist is kept as an object, to fail with its name like any unreadable file.
fn items(source: &Source) -> Result<Vec<Item>, String> {
    let mut out = Vec::new();
    match source {
        Source::Generate { kind, size, count } => {
            for i in 0..*count {
                let key = format!("{}-{i:06}.{}", kind_name(*kind), kind.extension());
                out.push(Item {
                    key,
                    origin: Origin::Generated(*kind, *size, i as u64 + 1),
                    utf8_name: true,
                });
            }
        }
        Source::Paths(paths) => {
            for path in paths {
                if path.is_dir() {
                    let mut dirs = vec![path.clone()];
                    while let Some(dir) = dirs.pop() {
                        let unreadable = |e: std::io::Error| format!("cannot read {}: {e}", dir.display());
                        for entry in std::fs::read_dir(&dir).map_err(unreadable)? {
                            let p = entry.map_err(unreadable)?.path();
                            if p.is_dir() {
                                dirs.push(p);
                            } else if p.is_file() {
                                let rel = p.strip_prefix(path).unwrap_or(&p);
                                let utf8_name = rel.to_str().is_some();
                                let key = rel.to_string_lossy().into_owned();
                                out.push(Item { key, origin: Origin::File(p), utf8_name });
                            }
                        }
                    }
                } else {
                    let name = path.file_name().unwrap_or_default();
                    let utf8_name = name.to_str().is_some();
                    let key = name.to_string_lossy().into_owned();
                    out.push(Item { key, origin: Origin::File(path.clone()), utf8_name });
                }
            }
            out.sort_by(|a, b| a.key.cmp(&b.key));
        }
    }
    Ok(out)
}

fn kind_name(kind: PayloadKind) -> &'static str {
    match kind {
        PayloadKind::Email => "email",
        PayloadKind::Sms => "sms",
        PayloadKind::Random => "random",
    }
}

/// The outcome of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadReport {
    /// Objects uploaded.
    pub objects_ok: u64,
    /// Objects that failed after their retries, by kind of the last failure.
    pub failures: BTreeMap<String, u64>,
    /// The failed objects one by one (the first 1,000), each with its status and reason.
    #[serde(default)]
    pub failed_objects: Vec<FailedObject>,
    /// Why the run stopped before trying every object (the server refused the credentials: every
    /// other object would be refused the same way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<FailedObject>,
    /// Objects not tried because the run stopped.
    #[serde(default)]
    pub skipped: u64,
    /// Retries made (attempts beyond each object's first).
    pub retries: u64,
    /// Payload bytes of the uploaded objects.
    pub bytes_raw: u64,
    /// Bytes the receiver stored for them (smaller when it kept the gzip form).
    pub bytes_stored: u64,
    /// TCP connections opened (HTTP destinations; `None` for S3, whose client pools its own).
    pub connections_opened: Option<u64>,
    /// Wall-clock time of the run.
    pub elapsed_s: f64,
    /// Objects uploaded per second.
    pub objects_per_s: f64,
    /// Per-object upload time (from the first byte sent to the acknowledgement, retries included).
    pub latency_ms: LatencySummary,
}

/// Latency statistics in milliseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

impl UploadReport {
    /// Whether any object failed or was skipped.
    pub fn failed(&self) -> bool {
        self.failures.values().sum::<u64>() > 0 || self.skipped > 0
    }

    /// The summary for people.
    pub fn render(&self) -> String {
        let l = &self.latency_ms;
        let mut s = format!(
            "objects: {} ok, {} failed ({} retries) in {:.2} s: {:.1} objects/s\n\
             per object: mean {:.2} ms, p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms\n\
             bytes: {} raw, {} stored ({:.1}%)\n",
            self.objects_ok,
            self.failures.values().sum::<u64>(),
            self.retries,
            self.elapsed_s,
            self.objects_per_s,
            l.mean,
            l.p50,
            l.p95,
            l.p99,
            l.max,
            self.bytes_raw,
            self.bytes_stored,
            100.0 * self.bytes_stored as f64 / self.bytes_raw.max(1) as f64,
        );
        if let Some(c) = self.connections_opened {
            s.push_str(&format!("connections opened: {c}\n"));
        }
        for (kind, n) in &self.failures {
            s.push_str(&format!("failed: {n} × {kind}\n"));
        }
        if let Some(stop) = &self.stopped {
            s.push_str(&format!(
                "stopped after {}: {} object(s) not tried\n",
                stop.status.map_or_else(|| stop.reason.clone(), |c| format!("HTTP {c}")),
                self.skipped
            ));
        }
        s
    }
}

/// Counters the progress display reads while the run goes on.
#[derive(Debug, Default)]
pub struct UploadProgress {
    /// Objects done (either way).
    pub objects: AtomicU64,
    /// Payload bytes done.
    pub bytes: AtomicU64,
    /// Objects in all.
    pub total: AtomicU64,
}

/// Why one attempt failed, and whether it is worth another.
#[derive(Debug)]
pub(super) struct Failure {
    /// What the failures are grouped by in the report (`HTTP 413`, `reset`, `s3: NoSuchBucket`).
    kind: String,
    retry: bool,
    /// The HTTP status, when a server answered.
    status: Option<u16>,
    /// One line saying why, for the failed object's line in the report.
    reason: String,
}

impl Failure {
    fn io(e: &std::io::Error) -> Failure {
        let kind = match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => "timeout".to_string(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe => "reset".to_string(),
            std::io::ErrorKind::ConnectionRefused => "refused".to_string(),
            std::io::ErrorKind::UnexpectedEof => "closed".to_string(),
            k => format!("io: {k}"),
        };
        Failure { reason: format!("{kind}: {e}"), kind, retry: true, status: None }
    }

    fn transient(kind: &str) -> Failure {
        Failure { kind: kind.to_string(), retry: true, status: None, reason: kind.to_string() }
    }

    /// A server's final answer other than 2xx: 5xx may pass, anything else will not change.
    fn http(answer: &Answer) -> Failure {
        Failure {
            kind: format!("HTTP {}", answer.status),
            retry: (500..=599).contains(&answer.status),
            status: Some(answer.status),
            reason: format!("HTTP {} {}", answer.status, answer.reason),
        }
    }
}

/// A response as the uploader needs it.
#[derive(Debug)]
pub(super) struct Answer {
    status: u16,
    /// The server's one-line reason: the body's first line, else the status line's phrase.
    reason: String,
    /// `Sluice-Stored-Length`, when given.
    stored: Option<u64>,
}

/// One object that could not be uploaded, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailedObject {
    /// The object's key (its path under the destination).
    pub key: String,
    /// The file it came from, for files.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<PathBuf>,
    /// The HTTP status of the last answer, when a server answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// Why, on one line.
    pub reason: String,
}

/// Failed objects the report lists one by one (the counts by kind cover the rest).
const MAX_FAILED_LISTED: usize = 1000;

/// The HTTP status an object store answered and its S3 error code, from a store error's one-line
/// text (`... status code: 403 Forbidden: InvalidAccessKeyId: The access key ...`); `None` when
/// no answer came (a reset, a timeout, a refused connection).
fn s3_answer(text: &str) -> Option<(u16, Option<String>)> {
    let at = text.find("status code: ")? + "status code: ".len();
    let rest = &text[at..];
    let status: u16 = rest.get(..3)?.parse().ok()?;
    let code = rest
        .split(": ")
        .nth(1)
        .map(str::trim)
        .filter(|c| !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric()))
        .map(str::to_string);
    Some((status, code))
}

/// A mutex's value; a worker that panicked holding it left nothing half-written worth refusing.
fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Uploads everything; `progress` is updated as objects finish.
pub fn run_upload(config: &UploadConfig, progress: &UploadProgress) -> Result<UploadReport, String> {
    let items = items(&config.source)?;
    progress.total.store(items.len() as u64, Ordering::Relaxed);
    let s3: Option<Arc<dyn Store>> = match &config.destination {
        Destination::S3 { config, .. } => {
            Some(Arc::new(S3Store::new(config.clone()).map_err(|e| e.to_string())?))
        }
        Destination::Http { .. } => None,
    };
    let next = AtomicUsize::new(0);
    let histogram = Mutex::new(Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid bounds"));
    let failures = Mutex::new(BTreeMap::<String, u64>::new());
    let failed_objects = Mutex::new(Vec::<FailedObject>::new());
    let stopped = Mutex::new(None::<FailedObject>);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let fail = |item: &Item, f: Failure| {
        *locked(&failures).entry(f.kind).or_default() += 1;
        let mut listed = locked(&failed_objects);
        if listed.len() < MAX_FAILED_LISTED {
            let path = match &item.origin {
                Origin::File(p) => Some(p.clone()),
                Origin::Generated(..) => None,
            };
            listed.push(FailedObject { key: item.key.clone(), path, status: f.status, reason: f.reason });
        }
    };
    let (ok, retries, raw, stored, opened) =
        (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    let start = Instant::now();
    std::thread::scope(|scope| {
        for _ in 0..config.concurrency.max(1) {
            scope.spawn(|| {
                let mut conn = HttpConnection { stream: None, opened: 0, buf: Vec::new() };
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    if stop.load(Ordering::Relaxed)
                        || config.stop.as_ref().is_some_and(crate::StopFlag::raised)
                    {
                        break;
                    }
                    if !item.utf8_name {
                        let reason = "the file's name is not UTF-8 (object names are)".to_string();
                        fail(
                            item,
                            Failure { kind: "name not UTF-8".into(), retry: false, status: None, reason },
                        );
                        progress.objects.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let body = match item.bytes() {
                        Ok(b) => b,
                        Err(e) => {
                            let reason = match &item.origin {
                                Origin::File(p) => format!("cannot read {}: {e}", p.display()),
                                Origin::Generated(..) => e.to_string(),
                            };
                            let kind = "unreadable file".to_string();
                            fail(item, Failure { kind, retry: false, status: None, reason });
                            progress.objects.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    };
                    let began = Instant::now();
                    let mut attempt = 0;
                    let outcome = loop {
                        let result = match &config.destination {
                            Destination::Http { addr, host, prefix, token } => {
                                conn.put((addr, host, prefix, token.as_deref()), item, &body, config.timeout)
                            }
                            Destination::S3 { gzip, .. } => {
                                put_s3(s3.as_ref().expect("s3 store"), item, &body, *gzip)
                            }
                        };
                        match result {
                            Err(f) if f.retry && attempt < config.retries => {
                                attempt += 1;
                                retries.fetch_add(1, Ordering::Relaxed);
                                std::thread::sleep(Duration::from_millis(20 << attempt.min(6)));
                            }
                            other => break other,
                        }
                    };
                    match outcome {
                        Ok(n) => {
                            ok.fetch_add(1, Ordering::Relaxed);
                            raw.fetch_add(body.len() as u64, Ordering::Relaxed);
                            stored.fetch_add(n, Ordering::Relaxed);
                            let us = began.elapsed().as_micros().max(1) as u64;
                            histogram
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .saturating_record(us);
                        }
                        Err(f) => {
                            if matches!(f.status, Some(401 | 403)) && !stop.swap(true, Ordering::Relaxed) {
                                *locked(&stopped) = Some(FailedObject {
                                    key: item.key.clone(),
                                    path: None,
                                    status: f.status,
                                    reason: f.reason.clone(),
                                });
                            }
                            fail(item, f);
                        }
                    }
                    progress.objects.fetch_add(1, Ordering::Relaxed);
                    progress.bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
                }
                opened.fetch_add(conn.opened, Ordering::Relaxed);
            });
        }
    });
    let elapsed = start.elapsed().as_secs_f64();
    let failures = failures.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut failed_objects = failed_objects.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    failed_objects.sort_by(|a, b| a.key.cmp(&b.key));
    let stopped = stopped.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let attempted = ok.load(Ordering::Relaxed) + failures.values().sum::<u64>();
    let h = histogram.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let ms = |us: u64| us as f64 / 1000.0;
    let objects_ok = ok.load(Ordering::Relaxed);
    Ok(UploadReport {
        objects_ok,
        failures,
        failed_objects,
        skipped: if stopped.is_some() { (items.len() as u64).saturating_sub(attempted) } else { 0 },
        stopped,
        retries: retries.load(Ordering::Relaxed),
        bytes_raw: raw.load(Ordering::Relaxed),
        bytes_stored: stored.load(Ordering::Relaxed),
        connections_opened: matches!(config.destination, Destination::Http { .. })
            .then(|| opened.load(Ordering::Relaxed)),
        elapsed_s: elapsed,
        objects_per_s: objects_ok as f64 / elapsed.max(1e-9),
        latency_ms: LatencySummary {
            mean: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.5)),
            p95: ms(h.value_at_quantile(0.95)),
            p99: ms(h.value_at_quantile(0.99)),
            max: ms(h.max()),
        },
    })
}

fn put_s3(store: &Arc<dyn Store>, item: &Item, body: &[u8], gzip: GzipPolicy) -> Result<u64, Failure> {
    let key = Key::new(&item.key).map_err(|e| Failure {
        kind: "key".into(),
        retry: false,
        status: None,
        reason: format!("not a valid key: {e}"),
    })?;
    let mut hasher = sluice_store::Checksum::Sha256([0; 32]).hasher();
    hasher.update(body);
    let options = PutOptions {
        checksum: Some(hasher.finish()),
        content_type: Some(item.content_type().to_string()),
        ..Default::default()
    };
    let remote = |e: sluice_store::StoreError| {
        let network = matches!(e, sluice_store::StoreError::Remote(_));
        let text = e.to_string();
        let answer = s3_answer(&text);
        // Grouped by the S3 error code when there is one (the message names keys and requests).
        let kind = match &answer {
            Some((_, Some(code))) => code.clone(),
            Some((status, None)) => format!("HTTP {status}"),
            None => text.chars().take(80).collect(),
        };
        // Resets, timeouts and 5xx are worth another try; a 4xx will not change.
        let retry = network && answer.as_ref().is_none_or(|(status, _)| *status >= 500);
        let reason = text.chars().take(500).collect();
        Failure { kind: format!("s3: {kind}"), retry, status: answer.map(|(status, _)| status), reason }
    };
    let mut writer = put_with_policy(Arc::clone(store), &key, options, gzip).map_err(remote)?;
    writer.write(body).map_err(remote)?;
    writer.commit().map(|c| c.meta.len).map_err(remote)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_s3_answer_gives_its_status_and_code() {
        let text = "object store: Error performing PUT http://h/b/k in 5ms - Server returned non-2xx status code: 403 Forbidden: InvalidAccessKeyId: The access key ID you provided does not exist";
        assert_eq!(s3_answer(text), Some((403, Some("InvalidAccessKeyId".into()))));
        let text = "object store: ... status code: 503 Service Unavailable: ";
        assert_eq!(s3_answer(text), Some((503, None)));
        assert_eq!(s3_answer("object store: connection refused"), None);
    }

    #[test]
    fn destinations_parse() {
        let d = Destination::parse(
            "http://127.0.0.1:8080/up/",
            Some("t".into()),
            S3Config::default(),
            GzipPolicy::default(),
        )
        .unwrap();
        match d {
            Destination::Http { addr, prefix, .. } => {
                assert_eq!(addr.port(), 8080);
                assert_eq!(prefix, "/up");
            }
            _ => panic!("http"),
        }
        let d =
            Destination::parse("s3://bucket/a/b", None, S3Config::default(), GzipPolicy::default()).unwrap();
        match d {
            Destination::S3 { config, .. } => {
                assert_eq!(config.bucket, "bucket");
                assert_eq!(config.prefix, "a/b");
            }
            _ => panic!("s3"),
        }
        assert!(Destination::parse("ftp://x/", None, S3Config::default(), GzipPolicy::default()).is_err());
    }
}
