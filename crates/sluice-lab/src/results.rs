//! What a lab run found, as data: one [`Row`] per server × point with its figures (or the reason it
//! was skipped), the machine and versions, the claims' verdicts and the commands to run it again;
//! the median and range of a point's rounds. It measures nothing, renders nothing (`report`,
//! `csv`) and writes no files (`output`); it reads `results.json` back.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_load::rtsp::RtspReport;
use sluice_load::Report;

use crate::error::LabError;
use crate::experiment::{Experiment, Point};
use crate::machine::Machine;

pub use crate::figures::{Figures, OriginFigures, UploadFigures};
pub use crate::metrics::{higher_is_better, metric_heading, METRICS, RTSP_METRICS, UPLOAD_METRICS};
pub use crate::rtsp_figures::{RtspFigures, RtspMeasures, RtspServerCounters};

/// A claim's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// Measured here and it holds.
    Reproduced,
    /// Measured here and it does not hold (including ties).
    NotReproduced,
    /// Not measured here.
    NotMeasurable,
}

impl VerdictKind {
    /// As the report prints it.
    pub fn label(self) -> &'static str {
        match self {
            VerdictKind::Reproduced => "reproduced",
            VerdictKind::NotReproduced => "not reproduced",
            VerdictKind::NotMeasurable => "not measurable here",
        }
    }
}

/// One row of the claims table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// The claim (with the server it was checked for, when per server).
    pub claim: String,
    /// The published figure.
    pub published: String,
    /// This run's counterpart.
    pub measured: String,
    /// The verdict.
    pub verdict: VerdictKind,
    /// Why (the threshold, a tie, what is missing).
    pub why: String,
}

/// What a measured row holds: an HTTP run's figures and report, or an RTSP run's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Measurement {
    /// An HTTP load run.
    Http {
        /// The figures.
        figures: Box<Figures>,
        /// The load generator's whole report (percentiles, per-target results, per-second series).
        load: Box<Report>,
    },
    /// RTSP viewers.
    Rtsp {
        /// The figures.
        rtsp: Box<RtspFigures>,
        /// The viewers' whole report (one entry per viewer).
        load: Box<RtspReport>,
    },
    /// Object uploads.
    Upload {
        /// The figures.
        upload: Box<UploadFigures>,
    },
}

/// How a row ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RowOutcome {
    /// Measured.
    Measured {
        /// What was measured.
        #[serde(flatten)]
        measurement: Measurement,
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
    /// Which round of its point (1, 2, …) when the point runs more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// The CPU budget the server ran under, read back from its cgroup, and its throttling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::RowBudget>,
    /// The outcome.
    #[serde(flatten)]
    pub outcome: RowOutcome,
}

impl Row {
    /// The figures of a measured HTTP row.
    pub fn figures(&self) -> Option<&Figures> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Http { figures, .. } } => Some(figures),
            _ => None,
        }
    }

    /// The load report of a measured HTTP row.
    pub fn load(&self) -> Option<&Report> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Http { load, .. } } => Some(load),
            _ => None,
        }
    }

    /// The figures of a measured RTSP row.
    pub fn rtsp(&self) -> Option<&RtspFigures> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Rtsp { rtsp, .. } } => Some(rtsp),
            _ => None,
        }
    }

    /// The viewers' report of a measured RTSP row.
    pub fn rtsp_load(&self) -> Option<&RtspReport> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Rtsp { load, .. } } => Some(load),
            _ => None,
        }
    }

    /// A metric of a measured row, HTTP or RTSP (see [`METRICS`], [`RTSP_METRICS`]).
    pub fn metric(&self, name: &str) -> Option<f64> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Http { figures, .. } } => figures.metric(name),
            RowOutcome::Measured { measurement: Measurement::Rtsp { rtsp, .. } } => rtsp.metric(name),
            RowOutcome::Measured { measurement: Measurement::Upload { upload } } => upload.metric(name),
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
    /// The file an RTSP experiment streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ContentInfo>,
    /// The CPU budget of the capacity rows (`--server-cpu`), when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::CpuBudget>,
    /// The source report's claims with this run's counterparts and verdicts.
    #[serde(default)]
    pub claims: Vec<Verdict>,
    /// Set when the run was stopped before its last row: it holds the rows finished before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<Partial>,
}

/// A run stopped before its end (by a signal): what stopped it and how many rows it planned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Partial {
    /// `SIGINT`, `SIGTERM`.
    pub stopped_by: String,
    /// Rows the run would have had.
    pub rows_planned: usize,
}

impl Partial {
    /// `Partial run: stopped by SIGINT after 3 of 12 rows.`
    pub fn describe(&self, rows_finished: usize) -> String {
        format!(
            "Partial run: stopped by {} after {rows_finished} of {} rows; everything below comes from the rows it finished.",
            self.stopped_by, self.rows_planned
        )
    }
}

/// The rounds of one server at one point, on one metric: median and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median of the rounds (the mean of the middle two when even).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Rounds measured.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` when empty.
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
        Some(Spread { median, min: values[0], max: values[n - 1], n })
    }

    /// Whether the two ranges share a value (their difference is within the run's noise).
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// The file an RTSP run streamed, as the report states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentInfo {
    /// Its parameters in words.
    pub summary: String,
    /// Its name (the RTSP path).
    pub file_name: String,
    /// Its video samples, from ffprobe.
    pub video_samples: u64,
    /// The ffmpeg command that makes it.
    pub command: String,
}

impl ExperimentResults {
    /// The rounds of `server` at the point labelled `label` of `sweep`, on `metric`.
    pub fn spread(&self, server: &str, sweep: &str, label: &str, metric: &str) -> Option<Spread> {
        Spread::of(
            self.rows_of(sweep)
                .filter(|r| r.server == server && r.point.x_label() == label)
                .filter_map(|r| r.metric(metric))
                .collect(),
        )
    }

    /// The x labels of a sweep's points, in run order, each once.
    pub fn point_labels(&self, sweep: &str) -> Vec<String> {
        let mut labels: Vec<String> = Vec::new();
        for row in self.rows_of(sweep) {
            let l = row.point.x_label();
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        labels
    }

    /// A run of `experiment` with `rows` and nothing else (for tests of what reads rows).
    #[cfg(test)]
    pub(crate) fn for_tests(experiment: Experiment, rows: Vec<Row>) -> ExperimentResults {
        ExperimentResults {
            experiment,
            quick: false,
            started_at: String::new(),
            duration_s: 1.0,
            machine: crate::machine::Machine::detect("test"),
            command: String::new(),
            rows,
            findings: Vec::new(),
            content: None,
            budget: None,
            claims: Vec::new(),
            partial: None,
        }
    }

    /// Measured rows of one sweep.
    pub fn rows_of<'a>(&'a self, sweep: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.point.sweep == sweep)
    }

    /// Fills in figures that compare rows (scaling against the same server's median with one
    /// worker).
    pub fn derive_across_rows(&mut self) {
        let mut one: BTreeMap<(String, String, Option<usize>), Vec<f64>> = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.point.workers == 1) {
            if let Some(f) = r.figures() {
                one.entry((r.server.clone(), r.point.sweep.clone(), r.point.vus))
                    .or_default()
                    .push(f.req_per_s);
            }
        }
        let base: BTreeMap<_, f64> =
            one.into_iter().filter_map(|(k, v)| Some((k, Spread::of(v)?.median))).collect();
        for r in &mut self.rows {
            if r.point.x != crate::experiment::Param::Workers {
                continue;
            }
            let key = (r.server.clone(), r.point.sweep.clone(), r.point.vus);
            let workers = r.point.workers as f64;
            if let (Some(one), RowOutcome::Measured { measurement: Measurement::Http { figures, .. } }) =
                (base.get(&key), &mut r.outcome)
            {
                if *one > 0.0 {
                    figures.scaling_pct = Some(figures.req_per_s / (one * workers) * 100.0);
                }
            }
        }
    }

    /// Reads `results.json` back.
    pub fn read(path: &Path) -> Result<ExperimentResults, LabError> {
        let bytes = std::fs::read(path).map_err(|e| LabError::io(path, e))?;
        Ok(serde_json::from_slice(&bytes)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_take_the_median_and_call_overlaps() {
        let a = Spread::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of(vec![1.0, 4.0]).unwrap().median, 2.5);
        assert!(Spread::of(vec![]).is_none());
        let b = Spread::of(vec![2.5, 5.0]).unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&Spread::of(vec![3.5]).unwrap()));
    }

    #[test]
    fn rtsp_rows_round_trip_as_measured() {
        use sluice_load::rtsp::{RtspConfig, RtspReport};
        let config = RtspConfig::new("rtsp://127.0.0.1:1/x.mp4", 0);
        let report = RtspReport::build(
            &config,
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(2),
            vec![],
        );
        let figures = RtspFigures::derive(
            &report,
            &RtspMeasures {
                server_cpu_s: 1.0,
                generator_cpu_s: 0.5,
                generator_cpus: 1,
                server: None,
                udp_rcvbuf_drops: Some(0),
                other_cpu_s: 0.2,
                content_s: 30.0,
                ceiling: Some(0.5),
            },
        );
        assert!((figures.server_cpu_pct - 50.0).abs() < 1e-9);
        assert_eq!((figures.ceiling_delivered_pct, figures.ceiling_share_pct), (Some(50.0), Some(0.0)));
        assert!((figures.other_cpu_pct - 10.0).abs() < 1e-9);
        assert!(!figures.all_perfect(), "no clients is not perfect sending");
        let outcome = RowOutcome::Measured {
            measurement: Measurement::Rtsp { rtsp: Box::new(figures), load: Box::new(report) },
        };
        let text = serde_json::to_string(&outcome).unwrap();
        assert!(text.starts_with("{\"status\":\"measured\""), "{text}");
        assert_eq!(serde_json::from_str::<RowOutcome>(&text).unwrap(), outcome);
    }
}
