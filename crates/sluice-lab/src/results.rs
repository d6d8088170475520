//! What a lab run found, as data: one [`Row`] per server × point with its figures (or the reason it
//! was skipped), the machine and versions, and the commands to run it again. It computes derived
//! figures from raw measurements and writes `results.json` and the CSVs; it measures nothing and
//! renders no HTML (`report`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_load::stats::{ErrorCounts, ErrorKind};
use sluice_load::Report;

use crate::error::LabError;
use crate::experiment::{Experiment, Point};
use crate::machine::Machine;

/// Metrics a table or chart can show: name and heading.
pub const METRICS: [(&str, &str); 17] = [
    ("req_per_s", "req/s"),
    ("mb_per_s", "MB/s"),
    ("avg_ms", "avg ms"),
    ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"),
    ("p99_ms", "p99 ms"),
    ("max_ms", "max ms"),
    ("success_pct", "success %"),
    ("ok", "ok"),
    ("failed", "failed"),
    ("dropped", "dropped"),
    ("cpu_s", "server CPU s"),
    ("cpu_s_per_gb", "CPU s/GB"),
    ("cpu_us_per_request", "CPU µs/req"),
    ("syscalls_per_request", "syscalls/req"),
    ("scaling_pct", "% of linear"),
    ("bytes_received", "bytes"),
];

/// The heading of a metric.
pub fn metric_heading(name: &str) -> &str {
    METRICS.iter().find(|(n, _)| *n == name).map_or(name, |(_, h)| h)
}

/// Whether a bigger value of `metric` is better.
pub fn higher_is_better(metric: &str) -> bool {
    matches!(metric, "req_per_s" | "mb_per_s" | "success_pct" | "ok" | "scaling_pct")
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
        }
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
            _ => return None,
        })
    }
}

/// How a row ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RowOutcome {
    /// Measured.
    Measured {
        /// The figures.
        figures: Box<Figures>,
        /// The load generator's whole report (percentiles, per-target results, per-second series).
        load: Box<Report>,
    },
    /// A reference measurement (iperf3's loopback throughput, one TCP stream).
    Reference {
        /// Megabytes (10^6) per second.
        mb_per_s: f64,
    },
    /// Not run, and why (a peer that is not installed).
    Skipped {
        /// The reason.
        reason: String,
    },
    /// Run, but it failed (the server did not start, the load could not run).
    Failed {
        /// The reason.
        reason: String,
    },
}

/// One server × point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Server configuration name.
    pub server: String,
    /// Whether it is a peer (nginx, iperf3) rather than sluice.
    pub peer: bool,
    /// The point.
    pub point: Point,
    /// The server's command line.
    pub server_command: String,
    /// The equivalent load command.
    pub load_command: String,
    /// CPUs the server was pinned to (empty: not pinned).
    pub server_cpus: Vec<usize>,
    /// CPUs the load generator was pinned to (empty: not pinned).
    pub load_cpus: Vec<usize>,
    /// The outcome.
    #[serde(flatten)]
    pub outcome: RowOutcome,
}

impl Row {
    /// The figures of a measured row.
    pub fn figures(&self) -> Option<&Figures> {
        match &self.outcome {
            RowOutcome::Measured { figures, .. } => Some(figures),
            _ => None,
        }
    }

    /// The load report of a measured row.
    pub fn load(&self) -> Option<&Report> {
        match &self.outcome {
            RowOutcome::Measured { load, .. } => Some(load),
            _ => None,
        }
    }

    /// `measured`, `reference`, `skipped` or `failed`.
    pub fn status(&self) -> &'static str {
        match self.outcome {
            RowOutcome::Measured { .. } => "measured",
            RowOutcome::Reference { .. } => "reference",
            RowOutcome::Skipped { .. } => "skipped",
            RowOutcome::Failed { .. } => "failed",
        }
    }
}

/// One experiment's run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResults {
    /// The experiment as declared.
    pub experiment: Experiment,
    /// `--quick` or a full run.
    pub quick: bool,
    /// Start, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time of the run, seconds.
    pub duration_s: f64,
    /// The machine and tool versions.
    pub machine: Machine,
    /// The command that ran the experiment.
    pub command: String,
    /// Rows in run order.
    pub rows: Vec<Row>,
    /// Generated findings.
    pub findings: Vec<String>,
}

impl ExperimentResults {
    /// Measured rows of one sweep.
    pub fn rows_of<'a>(&'a self, sweep: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.point.sweep == sweep)
    }

    /// Fills in figures that compare rows (scaling against one worker).
    pub fn derive_across_rows(&mut self) {
        let base: BTreeMap<(String, String, Option<usize>), f64> = self
            .rows
            .iter()
            .filter(|r| r.point.workers == 1)
            .filter_map(|r| {
                let f = r.figures()?;
                Some(((r.server.clone(), r.point.sweep.clone(), r.point.vus), f.req_per_s))
            })
            .collect();
        for r in &mut self.rows {
            if r.point.x != crate::experiment::Param::Workers {
                continue;
            }
            let key = (r.server.clone(), r.point.sweep.clone(), r.point.vus);
            let workers = r.point.workers as f64;
            if let (Some(one), RowOutcome::Measured { figures, .. }) = (base.get(&key), &mut r.outcome) {
                if *one > 0.0 {
                    figures.scaling_pct = Some(figures.req_per_s / (one * workers) * 100.0);
                }
            }
        }
    }

    /// Writes `results.json`, `rows.csv`, `results.md` (the tables for BENCHMARKS.md) and
    /// (open-model rows) `series.csv` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), LabError> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| LabError::io(path, e))
        };
        write("results.json", &serde_json::to_vec_pretty(self)?)?;
        write("rows.csv", self.rows_csv().as_bytes())?;
        write("results.md", crate::report::markdown(self).as_bytes())?;
        if self.rows.iter().any(|r| r.load().is_some_and(|l| l.settings.model == "open")) {
            write("series.csv", self.series_csv().as_bytes())?;
        }
        Ok(())
    }

    /// Reads `results.json` back.
    pub fn read(path: &Path) -> Result<ExperimentResults, LabError> {
        let bytes = std::fs::read(path).map_err(|e| LabError::io(path, e))?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// One line per row with every figure.
    pub fn rows_csv(&self) -> String {
        let mut out = String::from("server,sweep,chunk,vus,workers,profile,status");
        for (name, _) in METRICS {
            let _ = write!(out, ",{name}");
        }
        for kind in ErrorKind::ALL {
            let _ = write!(out, ",errors_{}", kind.name());
        }
        out.push_str(",reference_mb_per_s,reason\n");
        for r in &self.rows {
            let p = &r.point;
            let _ = write!(
                out,
                "{},{},{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                opt(p.chunk),
                opt(p.vus),
                p.workers,
                p.profile.as_deref().unwrap_or(""),
                r.status()
            );
            for (name, _) in METRICS {
                let v = r.figures().and_then(|f| f.metric(name));
                let _ = write!(out, ",{}", v.map(|v| format!("{v:.4}")).unwrap_or_default());
            }
            let e = r.figures().map(|f| f.errors).unwrap_or_default();
            let (mb, reason) = match &r.outcome {
                RowOutcome::Reference { mb_per_s } => (format!("{mb_per_s:.1}"), String::new()),
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => {
                    (String::new(), csv_text(reason))
                }
                RowOutcome::Measured { .. } => (String::new(), String::new()),
            };
            for kind in ErrorKind::ALL {
                let _ = write!(out, ",{}", e.get(kind));
            }
            let _ = writeln!(out, ",{mb},{reason}");
        }
        out
    }

    /// The per-second series of every open-model row.
    pub fn series_csv(&self) -> String {
        let mut out =
            String::from("server,profile,second,arrivals,ok,failed,dropped,active_users,p50_ms,p99_ms\n");
        for r in &self.rows {
            let Some(load) = r.load() else { continue };
            for s in &load.series {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{:.3},{:.3}",
                    csv_text(&r.server),
                    r.point.profile.as_deref().unwrap_or(""),
                    s.second,
                    s.arrivals,
                    s.ok,
                    s.failed,
                    s.dropped,
                    s.active_users,
                    s.p50_us as f64 / 1000.0,
                    s.p99_us as f64 / 1000.0
                );
            }
        }
        out
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn csv_text(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        };
        for (name, _) in METRICS {
            let absent = matches!(name, "syscalls_per_request" | "scaling_pct");
            assert_eq!(f.metric(name).is_none(), absent, "{name}");
        }
        assert_eq!(csv_text("a,b"), "\"a,b\"");
    }
}
