//! A declared table as data: servers down, the sweep's points across, each cell the median (and
//! range) of the point's rounds; rendered as HTML for the report and as Markdown for
//! BENCHMARKS.md. It also owns how a figure reads in a cell.

use std::fmt::Write as _;

use sluice_charts::escape;

use crate::experiment::TableSpec;
use crate::metrics::metric_heading;
use crate::results::{ExperimentResults, Row, RowOutcome};

/// Rows of one sweep grouped by server (declaration order), each with its points in run order.
pub fn by_server<'a>(r: &'a ExperimentResults, sweep: &'a str) -> Vec<(&'a str, bool, Vec<&'a Row>)> {
    let mut out: Vec<(&str, bool, Vec<&Row>)> = Vec::new();
    for row in r.rows_of(sweep) {
        match out.iter_mut().find(|(s, _, _)| *s == row.server) {
            Some((_, _, v)) => v.push(row),
            None => out.push((&row.server, row.peer, vec![row])),
        }
    }
    out
}

/// A figure as a table cell: counts whole, others with the digits their size needs; `–` for none.
pub fn cell(v: Option<f64>) -> String {
    match v {
        // Counts (requests, failures) read as counts.
        Some(v) if v == v.trunc() && v.abs() < 1e15 => format!("{v:.0}"),
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 10.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.2}"),
        None => "–".into(),
    }
}

/// A declared table as data: the sweep's points across (each with the table's metrics), one
/// row per server; rendered as HTML for the report and as Markdown for BENCHMARKS.md.
pub struct PivotTable {
    /// Caption.
    pub caption: String,
    /// Column groups: the points (and the change column), each spanning every metric.
    pub groups: Vec<String>,
    /// Metric headings, repeated under each group.
    pub metrics: Vec<String>,
    /// (server, is a peer, cells).
    pub rows: Vec<(String, bool, Vec<String>)>,
}

impl PivotTable {
    /// Builds the table `t` declares from a run's rows.
    pub fn build(r: &ExperimentResults, t: &TableSpec) -> PivotTable {
        let sweep = r.experiment.sweep_named(t.sweep.as_deref());
        let labels = r.point_labels(&sweep.name);
        let change = t.change && labels.len() > 1;
        let mut groups = labels.clone();
        if change {
            groups.push(format!("change {} → {}", labels[0], labels[labels.len() - 1]));
        }
        let mut rows = Vec::new();
        for (server, peer, srows) in by_server(r, &sweep.name) {
            // Several rounds of a point: the median, with the range of the rounds.
            let at = |label: &str, m: &str| r.spread(server, &sweep.name, label, m);
            let mut cells = Vec::new();
            for l in &labels {
                let here: Vec<&&Row> = srows.iter().filter(|row| row.point.x_label() == *l).collect();
                let none_measured =
                    here.iter().all(|row| !matches!(row.outcome, RowOutcome::Measured { .. }));
                for m in &t.metrics {
                    cells.push(match (none_measured, here.first().map(|row| &row.outcome)) {
                        (true, Some(RowOutcome::Skipped { .. })) => "skipped".to_string(),
                        (true, Some(RowOutcome::Failed { .. })) => "failed".to_string(),
                        _ => match at(l, m) {
                            Some(s) if s.n > 1 => {
                                format!(
                                    "{} ({}–{})",
                                    cell(Some(s.median)),
                                    cell(Some(s.min)),
                                    cell(Some(s.max))
                                )
                            }
                            s => cell(s.map(|s| s.median)),
                        },
                    });
                }
            }
            if change {
                let last = &labels[labels.len() - 1];
                for m in &t.metrics {
                    cells.push(match (at(&labels[0], m), at(last, m)) {
                        (Some(a), Some(b)) if a.median != 0.0 => {
                            format!("{:+.1}%", (b.median - a.median) / a.median * 100.0)
                        }
                        _ => "–".into(),
                    });
                }
            }
            rows.push((server.to_string(), peer, cells));
        }
        PivotTable {
            caption: t.caption.clone(),
            groups,
            metrics: t.metrics.iter().map(|m| metric_heading(m).to_string()).collect(),
            rows,
        }
    }

    /// As an HTML table.
    pub fn html(&self) -> String {
        let mut h = String::new();
        let _ = write!(
            h,
            "<div class=\"scroll\"><table class=\"lab-table\"><caption>{}</caption><tr><th rowspan=\"2\">server</th>",
            escape(&self.caption)
        );
        for g in &self.groups {
            let _ = write!(h, "<th colspan=\"{}\">{}</th>", self.metrics.len(), escape(g));
        }
        h.push_str("</tr><tr>");
        for _ in &self.groups {
            for m in &self.metrics {
                let _ = write!(h, "<th>{}</th>", escape(m));
            }
        }
        h.push_str("</tr>");
        for (server, peer, cells) in &self.rows {
            let _ =
                write!(h, "<tr{}><td>{}</td>", if *peer { " class=\"peer\"" } else { "" }, escape(server));
            for c in cells {
                let _ = write!(h, "<td>{c}</td>");
            }
            h.push_str("</tr>");
        }
        h.push_str("</table></div>");
        h
    }

    /// As a Markdown table (groups and metrics joined into one heading row).
    pub fn markdown(&self) -> String {
        let mut m = format!("{}\n\n| server |", self.caption);
        let single = self.metrics.len() == 1;
        for g in &self.groups {
            for metric in &self.metrics {
                let _ = if single { write!(m, " {g} |") } else { write!(m, " {g} {metric} |") };
            }
        }
        m.push_str("\n|---|");
        for _ in 0..self.groups.len() * self.metrics.len() {
            m.push_str("---|");
        }
        m.push('\n');
        for (server, peer, cells) in &self.rows {
            let _ = write!(m, "| {}{server}{} |", if *peer { "*" } else { "" }, if *peer { "*" } else { "" });
            for c in cells {
                let _ = write!(m, " {c} |");
            }
            m.push('\n');
        }
        m
    }
}
