//! A run's rows as CSV: `rows.csv` (one line per row with every figure, HTTP, RTSP or upload)
//! and `series.csv` (the per-second series of open-model rows). Text only: writing the files is
//! `output`'s.

use std::fmt::Write as _;

use sluice_load::rtsp::FailureKind;
use sluice_load::stats::ErrorKind;

use crate::metrics::{METRICS, RTSP_METRICS, UPLOAD_METRICS};
use crate::results::{ExperimentResults, Measurement, RowOutcome};

impl ExperimentResults {
    /// One line per row with every figure.
    pub fn rows_csv(&self) -> String {
        if self.experiment.load.model == crate::experiment::LoadModel::Rtsp {
            return self.rtsp_rows_csv();
        }
        if self.experiment.load.model == crate::experiment::LoadModel::Upload {
            return self.upload_rows_csv();
        }
        let mut out =
            String::from("server,sweep,chunk,vus,workers,profile,round,budget_cpus,throttled_periods,status");
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
                "{},{},{},{},{},{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                opt(p.chunk),
                opt(p.vus),
                p.workers,
                p.profile.as_deref().unwrap_or(""),
                opt(r.round),
                opt(r.budget.as_ref().map(|b| b.cpus)),
                opt(r.budget.as_ref().map(|b| b.throttling.nr_throttled)),
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

    /// One line per upload row with every figure.
    pub fn upload_rows_csv(&self) -> String {
        let mut out = String::from("server,sweep,payload,concurrency,status");
        for (name, _) in UPLOAD_METRICS {
            let _ = write!(out, ",{name}");
        }
        out.push_str(",bytes_raw,bytes_stored,reason\n");
        for r in &self.rows {
            let p = &r.point;
            let _ = write!(
                out,
                "{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                csv_text(p.payload.as_deref().unwrap_or("")),
                opt(p.vus),
                r.status()
            );
            for (name, _) in UPLOAD_METRICS {
                let _ = write!(out, ",{}", r.metric(name).map(|v| format!("{v:.4}")).unwrap_or_default());
            }
            let f = match &r.outcome {
                RowOutcome::Measured { measurement: Measurement::Upload { upload } } => Some(upload),
                _ => None,
            };
            let reason = match &r.outcome {
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => csv_text(reason),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                ",{},{},{reason}",
                opt(f.map(|f| f.report.bytes_raw)),
                opt(f.map(|f| f.report.bytes_stored))
            );
        }
        out
    }

    /// One line per RTSP row with every figure.
    pub fn rtsp_rows_csv(&self) -> String {
        let mut out = String::from("server,sweep,transport,clients,workers,status");
        // `clients` is the point's own column.
        let metrics = || RTSP_METRICS.iter().map(|(n, _)| *n).filter(|n| *n != "clients");
        for name in metrics() {
            let _ = write!(out, ",{name}");
        }
        out.push_str(",samples_max,clients_with_loss,generator_cpus");
        for kind in FailureKind::ALL {
            let _ = write!(out, ",failed_{}", kind.name());
        }
        out.push_str(",server_packets_dropped,server_packets_sent,server_bytes_sent,reason\n");
        for r in &self.rows {
            let p = &r.point;
            let _ = write!(
                out,
                "{},{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                p.transport.map(|t| t.name()).unwrap_or(""),
                opt(p.clients),
                p.workers,
                r.status()
            );
            for name in metrics() {
                let _ = write!(out, ",{}", r.metric(name).map(|v| format!("{v:.4}")).unwrap_or_default());
            }
            let f = r.rtsp();
            let _ = write!(
                out,
                ",{},{},{}",
                opt(f.map(|f| f.samples_max)),
                opt(f.map(|f| f.clients_with_loss)),
                opt(f.map(|f| f.generator_cpus))
            );
            for kind in FailureKind::ALL {
                let _ = write!(out, ",{}", opt(f.map(|f| f.failures.get(kind))));
            }
            let counters = f.and_then(|f| f.server).unwrap_or_default();
            let reason = match &r.outcome {
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => csv_text(reason),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                ",{},{},{},{reason}",
                opt(counters.packets_dropped),
                opt(counters.packets_sent),
                opt(counters.bytes_sent)
            );
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
    #[test]
    fn text_with_commas_is_quoted() {
        assert_eq!(super::csv_text("a,b"), "\"a,b\"");
        assert_eq!(super::csv_text("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
