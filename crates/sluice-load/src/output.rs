//! Output formats of a finished run, each an implementation of one trait, [`ReportWriter`]
//! (ripgrep's printer pattern): the human end-of-run summary, the full JSON report the lab reads,
//! and the per-second CSV series for charts. Every run's report takes the same shape: an HTTP
//! [`Report`], a [`PlayerReport`](crate::player::PlayerReport) and an
//! [`RtspReport`](crate::rtsp::RtspReport) are all written by these writers through
//! [`write_file`]. They render; they measure nothing.

use std::io::{self, Write};
use std::path::Path;

use crate::error::LoadError;
use crate::report::Report;
use crate::stats::format_us;
use crate::stats::{ErrorKind, LatencySummary};

/// Renders a report of kind `R` (an HTTP [`Report`] unless said) in one format.
pub trait ReportWriter<R: ?Sized = Report> {
    /// Writes `report` to `out`.
    fn write_report(&self, report: &R, out: &mut dyn Write) -> io::Result<()>;
}

/// Writes `report` with `writer` to a new file at `path` (`-`: standard output).
pub fn write_file<R: ?Sized>(writer: &dyn ReportWriter<R>, report: &R, path: &Path) -> Result<(), LoadError> {
    let err = |source| LoadError::Output { path: path.to_path_buf(), source };
    let out: Box<dyn Write> = if path == Path::new("-") {
        Box::new(io::stdout())
    } else {
        Box::new(std::fs::File::create(path).map_err(err)?)
    };
    let mut out = io::BufWriter::new(out);
    writer.write_report(report, &mut out).map_err(err)?;
    out.flush().map_err(err)
}

/// The readable end-of-run summary (in the spirit of k6's).
#[derive(Debug, Default, Clone, Copy)]
pub struct TextSummary;

/// The whole report as pretty-printed JSON.
#[derive(Debug, Default, Clone, Copy)]
pub struct JsonReport;

/// The per-second series as CSV, one row per second, a header naming every column.
#[derive(Debug, Default, Clone, Copy)]
pub struct CsvSeries;

impl<R: serde::Serialize + ?Sized> ReportWriter<R> for JsonReport {
    fn write_report(&self, report: &R, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, report).map_err(io::Error::other)?;
        writeln!(out)
    }
}

impl ReportWriter for CsvSeries {
    fn write_report(&self, report: &Report, out: &mut dyn Write) -> io::Result<()> {
        write!(out, "second,arrivals,started,ok,failed")?;
        for k in ErrorKind::ALL {
            write!(out, ",{}", k.name())?;
        }
        writeln!(out, ",dropped,active_users,p50_us,p99_us")?;
        for s in &report.series {
            write!(out, "{},{},{},{},{}", s.second, s.arrivals, s.started, s.ok, s.failed)?;
            for k in ErrorKind::ALL {
                write!(out, ",{}", s.errors.get(k))?;
            }
            writeln!(out, ",{},{},{},{}", s.dropped, s.active_users, s.p50_us, s.p99_us)?;
        }
        Ok(())
    }
}

fn distribution_line(out: &mut dyn Write, name: &str, s: &LatencySummary) -> io::Result<()> {
    if s.count == 0 {
        return writeln!(out, "  {name:<10} -");
    }
    let f = |us: u64| format_us(us as f64);
    writeln!(
        out,
        "  {name:<10} min={:<9} avg={:<9} stdev={:<9} p50={:<9} p90={:<9} p95={:<9} p99={:<9} p99.9={:<9} max={}",
        f(s.min_us),
        format_us(s.mean_us),
        format_us(s.stdev_us),
        f(s.p50_us),
        f(s.p90_us),
        f(s.p95_us),
        f(s.p99_us),
        f(s.p999_us),
        f(s.max_us)
    )
}

fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "kB", "MB", "GB", "TB"];
    let mut v = b;
    let mut unit = 0;
    while v >= 1000.0 && unit + 1 < UNITS.len() {
        v /= 1000.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

impl ReportWriter for TextSummary {
    fn write_report(&self, r: &Report, out: &mut dyn Write) -> io::Result<()> {
        let st = &r.settings;
        let shape = match st.model.as_str() {
            "closed" if st.think_ms > 0 => {
                format!("closed model, {} virtual users, {} ms think time", st.vus.unwrap_or(0), st.think_ms)
            }
            "closed" => format!("closed model, {} virtual users", st.vus.unwrap_or(0)),
            _ => format!(
                "open model, {} scenario(s), up to {} connections",
                st.scenarios.len(),
                st.max_connections.unwrap_or(0)
            ),
        };
        let conns = match st.connections {
            crate::client::ConnectionMode::KeepAlive => "keep-alive",
            crate::client::ConnectionMode::PerRequest => "new connection per request",
        };
        writeln!(
            out,
            "\n  sluice load http: {shape}, {conns}, {} thread(s), {:.1}s",
            st.threads, r.duration_s
        )?;
        for t in &r.targets {
            let scenario = t.scenario.as_deref().map(|s| format!("[{s}] ")).unwrap_or_default();
            writeln!(out, "    {scenario}{} (weight {})", t.url, t.weight)?;
        }
        writeln!(out)?;
        let q = &r.requests;
        writeln!(
            out,
            "  requests   {} started, {} sent, {} ok, {} failed, {} dropped",
            q.scheduled, q.sent, q.ok, q.failed, q.dropped
        )?;
        writeln!(out, "  success    {:.3}%", r.success_rate * 100.0)?;
        writeln!(
            out,
            "  throughput {:.1} req/s ({:.1} ok/s), {} received ({}/s), {} connections opened",
            r.requests_per_s,
            r.ok_per_s,
            human_bytes(r.bytes_received as f64),
            human_bytes(r.bytes_per_s),
            r.connections_opened
        )?;
        writeln!(out)?;
        distribution_line(out, "latency", &r.latency)?;
        let left_out = crate::stats::failed_left_out(q.failed);
        if !left_out.is_empty() {
            writeln!(out, "  {:<10}{left_out}", "")?;
        }
        distribution_line(out, "connect", &r.connect)?;
        distribution_line(out, "ttfb", &r.ttfb)?;
        distribution_line(out, "download", &r.download)?;
        if r.errors.total() > 0 {
            writeln!(out)?;
            write!(out, "  errors    ")?;
            for k in ErrorKind::ALL {
                let n = r.errors.get(k);
                if n > 0 {
                    write!(out, " {}={n}", k.name())?;
                }
            }
            writeln!(out)?;
        }
        if !r.statuses.is_empty() {
            write!(out, "  statuses  ")?;
            for (s, n) in &r.statuses {
                write!(out, " {s}={n}")?;
            }
            writeln!(out)?;
        }
        if r.targets.len() > 1 {
            writeln!(out, "\n  per target")?;
            for t in &r.targets {
                writeln!(
                    out,
                    "    {:<40} ok={:<8} failed={:<6} dropped={:<6} p50={:<9} p99={:<9} max={}",
                    t.url,
                    t.ok,
                    t.failed,
                    t.dropped,
                    format_us(t.latency.p50_us as f64),
                    format_us(t.latency.p99_us as f64),
                    format_us(t.latency.max_us as f64)
                )?;
            }
        }
        if !r.thresholds.is_empty() {
            writeln!(out, "\n  thresholds")?;
            for t in &r.thresholds {
                let mark = if t.passed { "pass" } else { "FAIL" };
                writeln!(out, "    {mark}  {:<24} actual {}", t.expression, t.actual)?;
            }
        }
        writeln!(out)
    }
}
