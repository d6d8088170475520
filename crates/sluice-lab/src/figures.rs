//! What one HTTP or upload row measured, as figures derived from the load generator's report and
//! the server's CPU time and counters ([`Figures`], [`UploadFigures`], an edge row's
//! [`OriginFigures`]), each readable by metric name. It measures nothing (the runner does) and
//! knows nothing of rows or runs (`results`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice_load::stats::ErrorCounts;
use sluice_load::Report;

/// What one upload row measured: `sluice upload`'s report, and what the lab derives across rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadFigures {
    /// The uploader's report (connections opened only through `sluice serve`: the S3 client
    /// pools its own and does not say).
    #[serde(flatten)]
    pub report: sluice_load::upload::UploadReport,
    /// objects/s over the same server's objects/s at concurrency 1 (concurrency sweeps).
    #[serde(default)]
    pub sequential_multiple: Option<f64>,
}

impl UploadFigures {
    /// A metric by name (see [`UPLOAD_METRICS`]).
    pub fn metric(&self, name: &str) -> Option<f64> {
        let r = &self.report;
        let per_object = |b: u64| (r.objects_ok > 0).then(|| b as f64 / r.objects_ok as f64);
        Some(match name {
            "objects_ok" => r.objects_ok as f64,
            "objects_failed" => r.failures.values().sum::<u64>() as f64,
            "retries" => r.retries as f64,
            "avg_ms" => r.latency_ms.mean,
            "p95_ms" => r.latency_ms.p95,
            "objects_per_s" => r.objects_per_s,
            "bytes_per_object" => return per_object(r.bytes_raw),
            "stored_bytes_per_object" => return per_object(r.bytes_stored),
            "stored_pct" => {
                return (r.bytes_raw > 0).then(|| r.bytes_stored as f64 * 100.0 / r.bytes_raw as f64)
            }
            "connections_opened" => return r.connections_opened.map(|c| c as f64),
            "sequential_multiple" => return self.sequential_multiple,
            _ => return None,
        })
    }
}

/// Everything measured for one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Requests started (arrivals or requests begun).
    pub requests: u64,
    /// Responses with the expected status and full body.
    pub ok: u64,
    /// Failed requests.
    pub failed: u64,
    /// Arrivals never sent.
    pub dropped: u64,
    /// ok / requests, in %.
    pub success_pct: f64,
    /// Responses per second.
    pub req_per_s: f64,
    /// Response megabytes (10^6) per second.
    pub mb_per_s: f64,
    /// Response bytes received.
    pub bytes_received: u64,
    /// Body bytes the OK responses had to carry (ok × chunk), when the body size is fixed.
    pub body_bytes_expected: Option<u64>,
    /// Mean latency, ms.
    pub avg_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Server CPU seconds (user + system, every process of the server) during the measured run.
    pub cpu_s: f64,
    /// Server CPU seconds per GB (10^9 bytes) of responses.
    pub cpu_s_per_gb: f64,
    /// Server CPU microseconds per response.
    pub cpu_us_per_request: f64,
    /// System calls per response, from the server's own counters (sluice only).
    pub syscalls_per_request: Option<f64>,
    /// The same by kind.
    pub syscalls_by_kind: BTreeMap<String, f64>,
    /// req/s divided by (workers × the same server's req/s with one worker), in % (worker
    /// sweeps only).
    pub scaling_pct: Option<f64>,
    /// What the row's caches asked of the origin and found in themselves (edge experiments).
    #[serde(default)]
    pub origin: Option<OriginFigures>,
}

/// The origin's side of an edge row: requests the object store answered (SeaweedFS's own
/// counter, the same source for every server) and bytes and slices the caches fetched and found
/// (sluice's `/metrics`; `None` for nginx).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OriginFigures {
    /// S3 requests SeaweedFS counted for the library's bucket over the row.
    pub requests: f64,
    /// Bytes the caches fetched from the origin.
    pub bytes: Option<f64>,
    /// Slices found in the cache.
    pub hits: Option<f64>,
    /// Slices fetched for a request.
    pub misses: Option<f64>,
}

impl Figures {
    /// Derives the figures of a row from the load report and the server's measurements.
    pub fn derive(
        load: &Report,
        chunk: Option<u64>,
        cpu_s: f64,
        syscalls: Option<&BTreeMap<String, f64>>,
    ) -> Figures {
        let ms = |us: u64| us as f64 / 1000.0;
        let responses = (load.requests.ok + load.requests.failed).max(1) as f64;
        let gb = load.bytes_received as f64 / 1e9;
        let (per_request, by_kind) = match syscalls {
            Some(s) => {
                let by_kind: BTreeMap<String, f64> =
                    s.iter().filter(|(_, v)| **v > 0.0).map(|(k, v)| (k.clone(), v / responses)).collect();
                (Some(by_kind.values().sum()), by_kind)
            }
            None => (None, BTreeMap::new()),
        };
        Figures {
            requests: load.requests.scheduled,
            ok: load.requests.ok,
            failed: load.requests.failed,
            dropped: load.requests.dropped,
            success_pct: load.success_rate * 100.0,
            req_per_s: load.requests_per_s,
            mb_per_s: load.bytes_per_s / 1e6,
            bytes_received: load.bytes_received,
            body_bytes_expected: chunk.map(|c| c * load.requests.ok),
            avg_ms: load.latency.mean_us / 1000.0,
            p50_ms: ms(load.latency.p50_us),
            p95_ms: ms(load.latency.p95_us),
            p99_ms: ms(load.latency.p99_us),
            max_ms: ms(load.latency.max_us),
            errors: load.errors,
            cpu_s,
            cpu_s_per_gb: if gb > 0.0 { cpu_s / gb } else { 0.0 },
            cpu_us_per_request: cpu_s * 1e6 / responses,
            syscalls_per_request: per_request,
            syscalls_by_kind: by_kind,
            scaling_pct: None,
            origin: None,
        }
    }

    /// Responses the origin figures are counted against (ok and failed).
    fn responses(&self) -> f64 {
        (self.ok + self.failed) as f64
    }

    /// A metric by name (see [`METRICS`]); `None` when the row has no such figure.
    pub fn metric(&self, name: &str) -> Option<f64> {
        Some(match name {
            "req_per_s" => self.req_per_s,
            "mb_per_s" => self.mb_per_s,
            "avg_ms" => self.avg_ms,
            "p50_ms" => self.p50_ms,
            "p95_ms" => self.p95_ms,
            "p99_ms" => self.p99_ms,
            "max_ms" => self.max_ms,
            "success_pct" => self.success_pct,
            "ok" => self.ok as f64,
            "failed" => self.failed as f64,
            "dropped" => self.dropped as f64,
            "cpu_s" => self.cpu_s,
            "cpu_s_per_gb" => self.cpu_s_per_gb,
            "cpu_us_per_request" => self.cpu_us_per_request,
            "syscalls_per_request" => return self.syscalls_per_request,
            "scaling_pct" => return self.scaling_pct,
            "bytes_received" => self.bytes_received as f64,
            "mb_per_cpu_s" => {
                return (self.cpu_s > 0.0).then(|| self.bytes_received as f64 / 1e6 / self.cpu_s)
            }
            "origin_requests" => return self.origin.map(|o| o.requests),
            "origin_requests_per_1000" => {
                return self
                    .origin
                    .filter(|_| self.responses() > 0.0)
                    .map(|o| o.requests * 1000.0 / self.responses())
            }
            "origin_mb_per_1000" => {
                let o = self.origin?;
                return o
                    .bytes
                    .filter(|_| self.responses() > 0.0)
                    .map(|b| b / 1e6 * 1000.0 / self.responses());
            }
            "hit_ratio_pct" => {
                let o = self.origin?;
                let (h, m) = (o.hits?, o.misses?);
                return (h + m > 0.0).then(|| h * 100.0 / (h + m));
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::METRICS;

    #[test]
    fn every_metric_has_a_value_or_a_reason_not_to() {
        let f = Figures {
            requests: 10,
            ok: 9,
            failed: 1,
            dropped: 0,
            success_pct: 90.0,
            req_per_s: 10.0,
            mb_per_s: 1.0,
            bytes_received: 1000,
            body_bytes_expected: None,
            avg_ms: 1.0,
            p50_ms: 1.0,
            p95_ms: 2.0,
            p99_ms: 3.0,
            max_ms: 4.0,
            errors: ErrorCounts::default(),
            cpu_s: 0.5,
            cpu_s_per_gb: 1.0,
            cpu_us_per_request: 5.0,
            syscalls_per_request: None,
            syscalls_by_kind: BTreeMap::new(),
            scaling_pct: None,
            origin: Some(OriginFigures {
                requests: 2.0,
                bytes: Some(1e6),
                hits: Some(3.0),
                misses: Some(1.0),
            }),
        };
        assert_eq!(f.metric("origin_requests_per_1000"), Some(200.0));
        assert_eq!(f.metric("hit_ratio_pct"), Some(75.0));
        for (name, _) in METRICS {
            let absent = matches!(name, "syscalls_per_request" | "scaling_pct");
            assert_eq!(f.metric(name).is_none(), absent, "{name}");
        }
    }
}
