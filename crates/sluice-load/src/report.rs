//! The result of a run as data: counts, success rate, throughput, latency summaries, errors by
//! kind, per-target breakdowns, the per-second series and threshold verdicts. It is what the
//! output formats render and what the lab reads back from JSON (it deserializes as well as it
//! serializes). It does not measure or print anything.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::client::{ConnectionMode, ExpectedStatus};
use crate::config::{LoadConfig, Model};
use crate::stats::{ErrorCounts, LatencySummary, SecondSample, Totals};
use crate::target::Target;

/// The settings a run used, as recorded in its report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSettings {
    /// `closed` or `open`.
    pub model: String,
    /// Keep-alive or per-request connections.
    pub connections: ConnectionMode,
    /// Virtual users (closed model).
    pub vus: Option<usize>,
    /// Connection cap (open model).
    pub max_connections: Option<usize>,
    /// Request limit, when given.
    pub requests_limit: Option<u64>,
    /// Planned sending time in seconds, when known.
    pub planned_duration_s: Option<f64>,
    /// Per-request deadline in milliseconds.
    pub timeout_ms: u64,
    /// Worker threads used.
    pub threads: usize,
    /// Statuses counted as success.
    pub expected_status: ExpectedStatus,
    /// Scenario names (open model).
    pub scenarios: Vec<String>,
    /// Users' pause between a response and the next request, ms (closed model).
    #[serde(default)]
    pub think_ms: u64,
}

/// Request counts of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RequestCounts {
    /// Arrivals (open) or requests begun (closed): the "requests started" of the success rate.
    pub scheduled: u64,
    /// Requests actually sent (connect or write attempted).
    pub sent: u64,
    /// Responses with the expected status and full body.
    pub ok: u64,
    /// Sent requests that failed (see `errors`).
    pub failed: u64,
    /// Arrivals never sent because they could not be started by their deadline.
    pub dropped: u64,
}

/// One target's share of the results.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TargetReport {
    /// Scenario the target belongs to (open model).
    pub scenario: Option<String>,
    /// The URL.
    pub url: String,
    /// Its weight.
    pub weight: u32,
    /// Successful responses.
    pub ok: u64,
    /// Failed requests.
    pub failed: u64,
    /// Dropped arrivals.
    pub dropped: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Latency of its successful responses.
    pub latency: LatencySummary,
}

/// Everything a run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// `sluice-load`.
    pub tool: String,
    /// Version of the tool.
    pub version: String,
    /// Wall-clock start, milliseconds since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// The run's settings.
    pub settings: RunSettings,
    /// Seconds from the start until the last request finished.
    pub duration_s: f64,
    /// Request counts.
    pub requests: RequestCounts,
    /// ok / scheduled (EXPERIMENTS.md: responses with the expected status and full body divided
    /// by requests started; dropped arrivals count as started). 1.0 when nothing was scheduled.
    pub success_rate: f64,
    /// Responses (ok + failed) per second of `duration_s`.
    pub requests_per_s: f64,
    /// Successful responses per second of `duration_s`.
    pub ok_per_s: f64,
    /// Response bytes received (heads and bodies).
    pub bytes_received: u64,
    /// `bytes_received` per second.
    pub bytes_per_s: f64,
    /// Connections opened.
    pub connections_opened: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Responses by status code.
    #[serde(with = "status_keys")]
    pub statuses: BTreeMap<u16, u64>,
    /// Latency of successful responses: scheduled (open) or start (closed) to last byte.
    pub latency: LatencySummary,
    /// Connection set-up times.
    pub connect: LatencySummary,
    /// Request written to first response byte.
    pub ttfb: LatencySummary,
    /// First to last response byte.
    pub download: LatencySummary,
    /// Per target.
    pub targets: Vec<TargetReport>,
    /// Per second.
    pub series: Vec<SecondSample>,
    /// Threshold verdicts (empty when none were given).
    pub thresholds: Vec<ThresholdResult>,
}

impl Report {
    pub(crate) fn build(
        config: &LoadConfig,
        targets: &[Target],
        threads: usize,
        started_at: SystemTime,
        elapsed: Duration,
        totals: &Totals,
        series: Vec<SecondSample>,
    ) -> Report {
        let failed = totals.errors.total();
        let secs = elapsed.as_secs_f64().max(1e-9);
        let names = config.target_list();
        let settings = match &config.model {
            Model::Closed(c) => RunSettings {
                model: "closed".into(),
                connections: config.connections,
                vus: Some(c.vus),
                max_connections: None,
                requests_limit: c.requests,
                planned_duration_s: c.duration.map(|d| d.as_secs_f64()),
                timeout_ms: config.timeout.as_millis() as u64,
                threads,
                expected_status: config.expected_status,
                scenarios: Vec::new(),
                think_ms: c.think.as_millis() as u64,
            },
            Model::Open(o) => RunSettings {
                model: "open".into(),
                connections: config.connections,
                vus: None,
                max_connections: Some(o.max_connections),
                requests_limit: o.requests,
                planned_duration_s: config.planned_duration().map(|d| d.as_secs_f64()),
                timeout_ms: config.timeout.as_millis() as u64,
                threads,
                expected_status: config.expected_status,
                scenarios: o.scenarios.iter().map(|s| s.name.clone()).collect(),
                think_ms: 0,
            },
        };
        let target_reports = targets
            .iter()
            .zip(&totals.per_target)
            .zip(names)
            .map(|((t, tt), (scenario, _))| TargetReport {
                scenario: scenario.map(str::to_string),
                url: t.url.clone(),
                weight: t.weight,
                ok: tt.ok,
                failed: tt.errors.total(),
                dropped: tt.dropped,
                errors: tt.errors,
                latency: tt.latency.summary(),
            })
            .collect();
        Report {
            tool: "sluice-load".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            started_at_unix_ms: started_at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
            settings,
            duration_s: elapsed.as_secs_f64(),
            requests: RequestCounts {
                scheduled: totals.scheduled,
                sent: totals.sent,
                ok: totals.ok,
                failed,
                dropped: totals.dropped,
            },
            success_rate: if totals.scheduled == 0 {
                1.0
            } else {
                totals.ok as f64 / totals.scheduled as f64
            },
            requests_per_s: (totals.ok + failed) as f64 / secs,
            ok_per_s: totals.ok as f64 / secs,
            bytes_received: totals.bytes,
            bytes_per_s: totals.bytes as f64 / secs,
            connections_opened: totals.connections_opened,
            errors: totals.errors,
            statuses: totals.statuses.clone(),
            latency: totals.latency.summary(),
            connect: totals.connect.summary(),
            ttfb: totals.ttfb.summary(),
            download: totals.download.summary(),
            targets: target_reports,
            series,
            thresholds: Vec::new(),
        }
    }

    /// Reads a report back from the JSON that [`crate::JsonReport`] wrote (what the lab does).
    pub fn from_json(bytes: &[u8]) -> Result<Report, crate::LoadError> {
        serde_json::from_slice(bytes).map_err(|e| crate::LoadError::InvalidReport(e.to_string()))
    }

    /// Whether every threshold passed (true when there are none).
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|t| t.passed)
    }
}

/// Status codes as JSON object keys. serde_json turns string keys back into numbers only when it
/// deserializes a map directly; inside a buffered value (the lab's rows flatten a tagged enum
/// around a report) it does not, so the keys are read as text and parsed here.
mod status_keys {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(map: &BTreeMap<u16, u64>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(map.iter().map(|(k, v)| (k.to_string(), v)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<BTreeMap<u16, u64>, D::Error> {
        let text = BTreeMap::<String, u64>::deserialize(d)?;
        text.into_iter()
            .map(|(k, v)| {
                k.parse().map(|k| (k, v)).map_err(|_| serde::de::Error::custom(format!("status `{k}`")))
            })
            .collect()
    }
}

/// A threshold's verdict on a run, as the report holds it (the thresholds themselves, and
/// checking them, are [`crate::threshold`]'s).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ThresholdResult {
    /// The expression as given.
    pub expression: String,
    /// The measured value, written in the expression's units.
    pub actual: String,
    /// Whether it held.
    pub passed: bool,
}
