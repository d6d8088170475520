//! The HTML report: one self-contained page (inline CSS and SVG, no scripts, nothing fetched) per
//! run of one or more experiments. Each experiment gets its machine and commands, the caveat,
//! the generated findings, the source report's numbers, the declared tables (servers down, the
//! sweep's points across) and charts, per-second charts for open-model rows, per-endpoint
//! latency, errors by kind, and every figure of every row. It computes nothing new.

use std::fmt::Write as _;

use crate::experiment::{size_label, ChartSpec, Param, TableSpec};
use crate::results::{metric_heading, ExperimentResults, Row, RowOutcome};
use crate::svg::{escape, LineChart, Series};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:2.2em;border-bottom:2px solid #ddd}h3{margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.peer td:first-child{font-style:italic}
.caveat{background:#fff6e0;border-left:4px solid #e0a800;padding:.6em 1em}.muted{color:#666;font-size:13px}
.charts{display:flex;flex-wrap:wrap;gap:12px}svg.chart{border:1px solid #eee;background:#fff}
code{background:#f5f5f5;padding:1px 4px}details{margin:.8em 0}";

/// The whole page for `runs`.
pub fn render(runs: &[ExperimentResults]) -> String {
    let mut h = String::new();
    let title = if runs.len() == 1 {
        format!("sluice lab: {} {}", runs[0].experiment.id, runs[0].experiment.name)
    } else {
        "sluice lab".to_string()
    };
    let _ = write!(
        h,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>",
        t = escape(&title)
    );
    if let Some(first) = runs.first() {
        let _ = write!(
            h,
            "<p>Machine: {}. Versions: {}.</p>",
            escape(&first.machine.summary()),
            escape(
                &first
                    .machine
                    .versions
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        );
    }
    if runs.len() > 1 {
        h.push_str("<ul>");
        for r in runs {
            let _ = write!(
                h,
                "<li><a href=\"#{id}\">{id} {n}</a>: {t}</li>",
                id = r.experiment.id,
                n = r.experiment.name,
                t = escape(&r.experiment.title)
            );
        }
        h.push_str("</ul>");
    }
    for r in runs {
        experiment_section(&mut h, r);
    }
    h.push_str("</body></html>\n");
    h
}

fn experiment_section(h: &mut String, r: &ExperimentResults) {
    let e = &r.experiment;
    let _ = write!(
        h,
        "<h2 id=\"{id}\">{id} <code>{n}</code>: {t}</h2><p class=\"muted\">Source: {seed}. Run {started}, {mode}, {dur:.0} s, on {m}. Command: <code>{cmd}</code></p>",
        id = e.id,
        n = escape(&e.name),
        t = escape(&e.title),
        seed = escape(&e.seed),
        started = escape(&r.started_at),
        mode = if r.quick { "quick mode (a few seconds per row: for checking the lab, not for conclusions)" } else { "full mode" },
        dur = r.duration_s,
        m = escape(&r.machine.summary()),
        cmd = escape(&r.command),
    );
    let _ = write!(h, "<p class=\"caveat\">{}</p>", escape(&e.caveat));
    h.push_str("<h3>What this shows</h3><ul class=\"findings\">");
    for f in &r.findings {
        let _ = write!(h, "<li>{}</li>", escape(f));
    }
    h.push_str("</ul>");
    for row in &r.rows {
        if let RowOutcome::Reference { mb_per_s } = row.outcome {
            let _ = write!(
                h,
                "<p>Loopback reference measured by iperf3 in the same run, one TCP stream: <b>{mb_per_s:.0} MB/s</b> (<code>{}</code>). Many connections together can move more than one stream.</p>",
                escape(&row.server_command)
            );
        }
    }
    for t in &e.table {
        h.push_str(&PivotTable::build(r, t).html());
    }
    h.push_str("<div class=\"charts\">");
    for c in &e.chart {
        h.push_str(&chart(r, c).render());
    }
    h.push_str("</div>");
    if !e.published.is_empty() {
        h.push_str("<h3>Published numbers (for reference; another machine and other software)</h3>");
        for p in &e.published {
            let _ = write!(h, "<table class=\"published\"><caption>{}</caption><tr>", escape(&p.caption));
            for c in &p.columns {
                let _ = write!(h, "<th>{}</th>", escape(c));
            }
            h.push_str("</tr>");
            for row in &p.rows {
                h.push_str("<tr>");
                for c in row {
                    let _ = write!(h, "<td>{}</td>", escape(c));
                }
                h.push_str("</tr>");
            }
            h.push_str("</table>");
        }
    }
    per_second_charts(h, r);
    per_endpoint_table(h, r);
    all_rows_table(h, r);
}

/// Rows of one sweep grouped by server (declaration order), each with its points in run order.
fn by_server<'a>(r: &'a ExperimentResults, sweep: &'a str) -> Vec<(&'a str, bool, Vec<&'a Row>)> {
    let mut out: Vec<(&str, bool, Vec<&Row>)> = Vec::new();
    for row in r.rows_of(sweep) {
        match out.iter_mut().find(|(s, _, _)| *s == row.server) {
            Some((_, _, v)) => v.push(row),
            None => out.push((&row.server, row.peer, vec![row])),
        }
    }
    out
}

fn point_labels(r: &ExperimentResults, sweep: &str) -> Vec<String> {
    let mut labels: Vec<String> = Vec::new();
    for row in r.rows_of(sweep) {
        let l = row.point.x_label();
        if !labels.contains(&l) {
            labels.push(l);
        }
    }
    labels
}

fn cell(v: Option<f64>) -> String {
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
        let labels = point_labels(r, &sweep.name);
        let change = t.change && labels.len() > 1;
        let mut groups = labels.clone();
        if change {
            groups.push(format!("change {} → {}", labels[0], labels[labels.len() - 1]));
        }
        let mut rows = Vec::new();
        for (server, peer, srows) in by_server(r, &sweep.name) {
            let at = |label: &str, m: &str| {
                srows
                    .iter()
                    .find(|row| row.point.x_label() == label)
                    .and_then(|row| row.figures())
                    .and_then(|f| f.metric(m))
            };
            let mut cells = Vec::new();
            for l in &labels {
                for m in &t.metrics {
                    cells.push(
                        match srows.iter().find(|row| row.point.x_label() == *l).map(|row| &row.outcome) {
                            Some(RowOutcome::Skipped { .. }) => "skipped".to_string(),
                            Some(RowOutcome::Failed { .. }) => "failed".to_string(),
                            _ => cell(at(l, m)),
                        },
                    );
                }
            }
            if change {
                let last = &labels[labels.len() - 1];
                for m in &t.metrics {
                    cells.push(match (at(&labels[0], m), at(last, m)) {
                        (Some(a), Some(b)) if a != 0.0 => format!("{:+.1}%", (b - a) / a * 100.0),
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
            "<table class=\"lab-table\"><caption>{}</caption><tr><th rowspan=\"2\">server</th>",
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
        h.push_str("</table>");
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

/// The run as Markdown for `docs/BENCHMARKS.md`: the command, machine, findings and every
/// declared table, all generated from the rows.
pub fn markdown(r: &ExperimentResults) -> String {
    let e = &r.experiment;
    let mut m = format!(
        "### {} `{}`: {}\n\nRun {} ({} s, {}) on {}; {}.\n\n```sh\n{}\n```\n\n{}\n\n",
        e.id,
        e.name,
        e.title,
        r.started_at,
        r.duration_s.round(),
        if r.quick { "quick mode" } else { "full mode" },
        r.machine.summary(),
        r.machine.versions.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join(", "),
        r.command,
        e.caveat
    );
    for row in &r.rows {
        if let RowOutcome::Reference { mb_per_s } = row.outcome {
            let _ = writeln!(m, "Loopback reference (iperf3, one TCP stream, same run): {mb_per_s:.0} MB/s; many connections together can move more.\n");
        }
    }
    for t in &e.table {
        m.push_str(&PivotTable::build(r, t).markdown());
        m.push('\n');
    }
    m.push_str("What this shows (generated from the rows):\n\n");
    for f in &r.findings {
        let _ = writeln!(m, "- {f}");
    }
    m
}

fn chart(r: &ExperimentResults, c: &ChartSpec) -> LineChart {
    let sweep = r.experiment.sweep_named(c.sweep.as_deref());
    let labels = point_labels(r, &sweep.name);
    let categorical = sweep.x == Param::Profile;
    let mut series: Vec<Series> = by_server(r, &sweep.name)
        .into_iter()
        .map(|(server, peer, rows)| Series {
            name: server.to_string(),
            dashed: peer,
            points: rows
                .iter()
                .filter_map(|row| {
                    let y = row.figures()?.metric(&c.metric)?;
                    let x = if categorical {
                        labels.iter().position(|l| *l == row.point.x_label())? as f64
                    } else {
                        row.point.x_value()?
                    };
                    Some((x, y))
                })
                .collect(),
        })
        .filter(|s| !s.points.is_empty())
        .collect();
    let xs: Vec<f64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.0)).collect();
    if c.metric == "mb_per_s" {
        if let Some(limit) = r.rows.iter().find_map(|row| match row.outcome {
            RowOutcome::Reference { mb_per_s } => Some(mb_per_s),
            _ => None,
        }) {
            let (lo, hi) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(*x), b.max(*x)));
            if lo <= hi {
                series.push(Series {
                    name: "iperf3 loopback, one stream".into(),
                    points: vec![(lo, limit), (hi, limit)],
                    dashed: true,
                });
            }
        }
    }
    let x_ticks = if sweep.x == Param::Chunk {
        sweep.chunk.iter().map(|&c| (c as f64, size_label(c))).collect()
    } else {
        Vec::new()
    };
    LineChart {
        title: c.title.clone(),
        x_label: sweep.x.label().to_string(),
        y_label: metric_heading(&c.metric).to_string(),
        log_x: c.log_x || sweep.x == Param::Chunk,
        categories: if categorical { labels } else { Vec::new() },
        x_ticks,
        series,
    }
}

fn per_second_charts(h: &mut String, r: &ExperimentResults) {
    let open: Vec<&Row> =
        r.rows.iter().filter(|row| row.load().is_some_and(|l| l.settings.model == "open")).collect();
    if open.is_empty() {
        return;
    }
    h.push_str("<h3>Per second: OK and failed responses, active users</h3><div class=\"charts\">");
    for row in open {
        let Some(load) = row.load() else { continue };
        let line = |name: &str, f: &dyn Fn(&sluice_load::SecondSample) -> u64, dashed| Series {
            name: name.into(),
            points: load.series.iter().map(|s| (s.second as f64, f(s) as f64)).collect(),
            dashed,
        };
        let chart = LineChart {
            title: format!("{} – {} profile", row.server, row.point.x_label()),
            x_label: "second".into(),
            y_label: "per second / users".into(),
            series: vec![
                line("OK", &|s| s.ok, false),
                line("failed + dropped", &|s| s.failed + s.dropped, false),
                line("active users", &|s| s.active_users, true),
            ],
            ..LineChart::default()
        };
        h.push_str(&chart.render());
    }
    h.push_str("</div>");
}

fn per_endpoint_table(h: &mut String, r: &ExperimentResults) {
    let rows: Vec<&Row> =
        r.rows.iter().filter(|row| row.load().is_some_and(|l| l.targets.len() > 1)).collect();
    if rows.is_empty() {
        return;
    }
    h.push_str("<table class=\"lab-table\"><caption>Latency per endpoint (ms; open model: from each request's scheduled time)</caption><tr><th>server</th><th>profile</th><th>endpoint</th><th>ok</th><th>failed</th><th>dropped</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>");
    for row in rows {
        let Some(load) = row.load() else { continue };
        for t in &load.targets {
            let path = t
                .url
                .split_once("//")
                .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
                .unwrap_or(&t.url);
            let ms = |us: u64| format!("{:.1}", us as f64 / 1000.0);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&row.server),
                escape(&row.point.x_label()),
                escape(path),
                t.ok,
                t.failed,
                t.dropped,
                ms(t.latency.p50_us),
                ms(t.latency.p95_us),
                ms(t.latency.p99_us),
                ms(t.latency.max_us)
            );
        }
    }
    h.push_str("</table>");
}

fn all_rows_table(h: &mut String, r: &ExperimentResults) {
    h.push_str("<details><summary>Every row: all figures, errors by kind, commands</summary><table class=\"lab-table\"><caption>Every row</caption><tr><th>server</th><th>sweep</th><th>point</th><th>status</th><th>requests</th><th>ok</th><th>success %</th><th>req/s</th><th>MB/s</th><th>avg</th><th>p50</th><th>p95</th><th>p99</th><th>max ms</th><th>CPU s</th><th>CPU s/GB</th><th>syscalls/req (by kind)</th><th>errors</th><th>commands</th></tr>");
    for row in &r.rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&row.server),
            escape(&row.point.sweep),
            escape(&row.point.x_label()),
            row.status()
        );
        match &row.outcome {
            RowOutcome::Measured { figures: f, .. } => {
                let kinds: Vec<String> =
                    f.syscalls_by_kind.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
                let errors: Vec<String> = sluice_load::ErrorKind::ALL
                    .iter()
                    .map(|&k| (k.name(), f.errors.get(k)))
                    .chain([("dropped", f.dropped)])
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let _ = write!(
                    h,
                    "<td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td>{} {}</td><td>{}</td>",
                    f.requests,
                    f.ok,
                    f.success_pct,
                    cell(Some(f.req_per_s)),
                    cell(Some(f.mb_per_s)),
                    f.avg_ms,
                    f.p50_ms,
                    f.p95_ms,
                    f.p99_ms,
                    f.max_ms,
                    f.cpu_s,
                    cell(Some(f.cpu_s_per_gb)),
                    cell(f.syscalls_per_request),
                    escape(&kinds.join(", ")),
                    if errors.is_empty() { "none".to_string() } else { errors.join(", ") },
                );
            }
            RowOutcome::Reference { mb_per_s } => {
                let _ =
                    write!(h, "<td colspan=\"14\">iperf3 loopback, one TCP stream: {mb_per_s:.0} MB/s</td>");
            }
            RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => {
                let _ = write!(h, "<td colspan=\"14\">{}</td>", escape(reason));
            }
        }
        let _ = write!(
            h,
            "<td><code>{}</code><br><code>{}</code></td></tr>",
            escape(&row.server_command),
            escape(&row.load_command)
        );
    }
    h.push_str("</table></details>");
}
