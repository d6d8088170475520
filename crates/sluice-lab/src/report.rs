//! The HTML report: one self-contained page (inline CSS and scripts, nothing fetched) per
//! run of one or more experiments. Each experiment gets its machine and commands, the caveat,
//! the generated findings, the source report's numbers, the declared tables (servers down, the
//! sweep's points across) and charts, per-second charts for open-model rows, per-endpoint
//! latency, errors by kind, and every figure of every row. It computes nothing new, and it does
//! not draw: its charts are `sluice-charts` boards (the same code as the live dashboards), each
//! holding its points as samples, so the page stays one file that opens offline.

use std::fmt::Write as _;

use crate::experiment::{size_label, ChartSpec, Param, TableSpec};
use crate::results::{metric_heading, ExperimentResults, Row, RowOutcome};
use serde_json::{json, Value};
use sluice_charts::{escape, Chart, Samples, Series, XAxis};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{margin-top:2.2em;border-bottom:2px solid #ddd}h3{margin-top:1.6em}
table{border-collapse:collapse;margin:.6em 0 1.2em;font-size:13px}th,td{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}.peer td:first-child{font-style:italic}
.caveat{background:#fff6e0;border-left:4px solid #e0a800;padding:.6em 1em}.muted{color:#666;font-size:13px}
.charts{display:flex;flex-wrap:wrap;gap:12px}.charts .board{display:block;width:580px;padding:0}.charts .board .chart{margin-bottom:8px}
code{background:#f5f5f5;padding:1px 4px}details{margin:.8em 0}.scroll{overflow-x:auto;max-width:100%}
table.rows td{vertical-align:top}table.rows td.cmd{text-align:left;min-width:28em;max-width:40em}
table.rows td.cmd code{white-space:pre-wrap;overflow-wrap:anywhere;display:block;margin-bottom:3px}
table.rows td.kinds{text-align:left;white-space:nowrap;font-size:12px}
.verdict-reproduced{background:#e3f6e3}.verdict-not_reproduced{background:#fde4e1}.verdict-not_measurable{background:#eee}
table.claims td{text-align:left;vertical-align:top;max-width:30em}.method{background:#eef4fb;border-left:4px solid #4a7fc1;padding:.6em 1em}";

/// Each server's colour, by its place among the experiment's servers, so a server keeps its
/// colour in every chart of an experiment.
const SERVER_COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
    "#bcbd22",
];

/// Reference lines (the loopback limit, every client perfect).
const REFERENCE_COLOUR: &str = "#444444";

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
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title><style>{STYLE}</style>{library}</head><body><h1>{t}</h1>",
        t = escape(&title),
        library = sluice_charts::library(),
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
    if let Some(method) = capacity_method(r) {
        let _ = write!(h, "<p class=\"method\">{}</p>", escape(&method));
    }
    if let Some(c) = &r.content {
        let _ = write!(
            h,
            "<p>Content: {} ({} video samples per client, counted by ffprobe), served as <code>{}</code>, generated by <code>{}</code></p>",
            escape(&c.summary),
            c.video_samples,
            escape(&c.file_name),
            escape(&c.command)
        );
    }
    if !r.findings.is_empty() {
        let _ = write!(h, "<h3>What this shows{}</h3><ul class=\"findings\">", escape(quick_note(r)));
        for f in &r.findings {
            let _ = write!(h, "<li>{}</li>", escape(f));
        }
        h.push_str("</ul>");
    }
    claims_table(h, r);
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
        let table = PivotTable::build(r, t);
        if !table.rows.is_empty() {
            h.push_str(&table.html());
        }
    }
    h.push_str("<div class=\"charts\">");
    for c in &e.chart {
        // A sweep this run left out (`--sweeps`) has nothing to draw, not even "no measured rows".
        if r.rows_of(&e.sweep_named(c.sweep.as_deref()).name).next().is_some() {
            h.push_str(&sweep_chart(r, c));
        }
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
    if e.load.model == crate::experiment::LoadModel::Rtsp {
        rtsp_rows_table(h, r);
    } else {
        all_rows_table(h, r);
    }
}

/// `" (quick mode: …)"` for a quick run's findings and claims, else nothing.
fn quick_note(r: &ExperimentResults) -> &'static str {
    if r.quick {
        " (quick mode: smoke-check figures from a second or so per row, not conclusions)"
    } else {
        ""
    }
}

/// How the capacity rows were measured (the budget, read back from the kernel, the placement,
/// the rounds), or why they were not; `None` when the run has no capacity rows.
pub fn capacity_method(r: &ExperimentResults) -> Option<String> {
    let rows: Vec<&Row> = r.rows.iter().filter(|row| row.point.budget).collect();
    if rows.is_empty() {
        return None;
    }
    let mut sweeps: Vec<&str> = Vec::new();
    for row in &rows {
        if !sweeps.contains(&row.point.sweep.as_str()) {
            sweeps.push(&row.point.sweep);
        }
    }
    let sweeps = sweeps.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
    let budgeted: Vec<&Row> = rows.iter().copied().filter(|row| row.budget.is_some()).collect();
    let Some(first) = budgeted.first().and_then(|row| row.budget.as_ref()) else {
        let why = rows
            .iter()
            .find_map(|row| match &row.outcome {
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => Some(reason.as_str()),
                _ => None,
            })
            .unwrap_or("no row ran");
        return Some(format!("Capacity rows ({sweeps}) were not measured: {why}."));
    };
    let rounds = rows.iter().filter_map(|row| row.round).max().unwrap_or(1);
    let (periods, throttled): (u64, u64) = budgeted
        .iter()
        .filter_map(|row| row.budget.as_ref())
        .fold((0, 0), |a, b| (a.0 + b.throttling.nr_periods, a.1 + b.throttling.nr_throttled));
    let one_worker: Vec<&crate::budget::RowBudget> =
        budgeted.iter().filter(|row| row.point.workers == 1).filter_map(|row| row.budget.as_ref()).collect();
    let peak = one_worker.iter().map(|b| b.server_cpu_pct).fold(0.0, f64::max);
    let cpus = |v: &[usize]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let row = budgeted[0];
    let described = r.budget.map(|b| b.describe()).unwrap_or_else(|| format!("{} core", first.cpus));
    let server_bound = budgeted
        .iter()
        .filter(|row| row.budget.as_ref().is_some_and(crate::budget::RowBudget::server_bound))
        .count();
    Some(format!(
        "Capacity rows ({sweeps}): each server ran in a CPU cgroup of its own with a budget of {described}: {} held {} µs every {} µs. Server on CPU {}, load generator on CPU {} (a server with more workers than the cores beside the generator runs on every core, its budget growing with its workers). Users do not pause. {rounds} round(s) per point, servers alternating (every other round in reverse order); tables show the median with the min–max of the rounds, and a ratio whose ranges overlap is a tie. Over these rows the servers were throttled in {throttled} of {periods} scheduling periods; with one worker the busiest used {peak:.0}% of a core (its budget: {:.0}%). {server_bound} of {} measured rows used at least 90% of their budget (server-bound); in the others the load generator or the machine's other work, not the budget, set the pace.",
        first.mechanism,
        first.quota_us,
        first.period_us,
        cpus(&row.server_cpus),
        cpus(&row.load_cpus),
        first.cpus * 100.0 / row.point.workers.max(1) as f64,
        budgeted.len(),
    ))
}

/// The seed's claims with this run's counterparts and verdicts.
fn claims_table(h: &mut String, r: &ExperimentResults) {
    let claims = crate::claims::evaluate(r);
    if claims.is_empty() {
        return;
    }
    let _ = write!(
        h,
        "<div class=\"scroll\"><table class=\"lab-table claims\"><caption>The source report's claims, measured here{}</caption><tr><th>claim</th><th>published</th><th>measured here</th><th>verdict</th><th>why</th></tr>",
        escape(quick_note(r))
    );
    for c in &claims {
        let kind = serde_json::to_value(c.verdict)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"verdict-{kind}\"><b>{}</b></td><td>{}</td></tr>",
            escape(&c.claim),
            escape(&c.published),
            escape(&c.measured),
            c.verdict.label(),
            escape(&c.why)
        );
    }
    h.push_str("</table></div>");
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
    if let Some(c) = &r.content {
        let _ = writeln!(
            m,
            "Content: {} ({} video samples per client), generated by `{}`.\n",
            c.summary, c.video_samples, c.command
        );
    }
    for row in &r.rows {
        if let RowOutcome::Reference { mb_per_s } = row.outcome {
            let _ = writeln!(m, "Loopback reference (iperf3, one TCP stream, same run): {mb_per_s:.0} MB/s; many connections together can move more.\n");
        }
    }
    if let Some(method) = capacity_method(r) {
        let _ = writeln!(m, "{method}\n");
    }
    // A run of some sweeps only (`--sweeps`) leaves the others' tables out.
    for table in e.table.iter().map(|t| PivotTable::build(r, t)).filter(|t| !t.rows.is_empty()) {
        m.push_str(&table.markdown());
        m.push('\n');
    }
    let claims = crate::claims::evaluate(r);
    if !claims.is_empty() {
        let _ = writeln!(
            m,
            "The source report's claims, measured here{}:\n\n| claim | published | measured here | verdict | why |\n|---|---|---|---|---|",
            quick_note(r)
        );
        for c in &claims {
            let _ = writeln!(
                m,
                "| {} | {} | {} | **{}** | {} |",
                c.claim,
                c.published,
                c.measured,
                c.verdict.label(),
                c.why
            );
        }
        m.push('\n');
    }
    if !r.findings.is_empty() {
        let _ = writeln!(m, "What this shows (generated from the rows){}:\n", quick_note(r));
    }
    for f in &r.findings {
        let _ = writeln!(m, "- {f}");
    }
    m
}

/// The colour of `server` among `r`'s servers.
fn server_colour(r: &ExperimentResults, server: &str) -> &'static str {
    let mut servers: Vec<&str> = Vec::new();
    for row in &r.rows {
        if !servers.contains(&row.server.as_str()) {
            servers.push(&row.server);
        }
    }
    let i = servers.iter().position(|s| *s == server).unwrap_or(0);
    SERVER_COLOURS[i % SERVER_COLOURS.len()]
}

/// A declared chart of one sweep: one line per server (the median of its rounds at each x),
/// as a board whose samples are the sweep's points (`{"x": 10, "y": {"0": 1234.5, …}}`).
fn sweep_chart(r: &ExperimentResults, c: &ChartSpec) -> String {
    let (chart, samples) = sweep_chart_data(r, c);
    if chart.series.is_empty() {
        return format!("<p class=\"muted\">{}: no measured rows</p>", escape(&c.title));
    }
    sluice_charts::board(&[chart], &Samples::Held(&samples))
}

/// The chart and its samples (see [`sweep_chart`]).
fn sweep_chart_data(r: &ExperimentResults, c: &ChartSpec) -> (Chart, Vec<Value>) {
    let sweep = r.experiment.sweep_named(c.sweep.as_deref());
    let labels = r.point_labels(&sweep.name);
    let categorical = sweep.x == Param::Profile;
    // The x of each point: its index for named points (profiles), else its value.
    let xs: Vec<Option<f64>> = labels
        .iter()
        .enumerate()
        .map(|(i, label)| {
            if categorical {
                return Some(i as f64);
            }
            r.rows_of(&sweep.name).find(|row| row.point.x_label() == *label)?.point.x_value()
        })
        .collect();
    let mut series: Vec<Series> = Vec::new();
    let mut ys: Vec<Vec<Option<f64>>> = Vec::new();
    for (server, peer, rows) in by_server(r, &sweep.name) {
        let column: Vec<Option<f64>> = labels
            .iter()
            .map(|label| {
                rows.iter().find(|row| row.point.x_label() == *label)?;
                Some(r.spread(server, &sweep.name, label, &c.metric)?.median)
            })
            .collect();
        if column.iter().any(Option::is_some) {
            series.push(
                Series::new(&format!("y.{}", series.len()), server)
                    .color(server_colour(r, server))
                    .dashed(peer),
            );
            ys.push(column);
        }
    }
    let measured = !ys.is_empty();
    let mut reference = |name: &str, at: &dyn Fn(f64) -> f64| {
        series.push(Series::new(&format!("y.{}", series.len()), name).color(REFERENCE_COLOUR).dashed(true));
        ys.push(xs.iter().map(|x| x.map(at)).collect());
    };
    if measured && c.metric == "mb_per_s" {
        if let Some(limit) = r.rows.iter().find_map(|row| match row.outcome {
            RowOutcome::Reference { mb_per_s } => Some(mb_per_s),
            _ => None,
        }) {
            reference("iperf3 loopback, one stream", &|_| limit);
        }
    }
    if measured && c.metric == "perfect_clients" {
        // Where every client is perfect: y = x.
        reference("every client perfect", &|x| x);
    }
    let samples = xs
        .iter()
        .enumerate()
        .filter_map(|(i, x)| {
            let y: serde_json::Map<String, Value> =
                ys.iter().enumerate().filter_map(|(j, col)| Some((j.to_string(), json!(col[i]?)))).collect();
            Some(json!({ "x": (*x)?, "y": y }))
        })
        .collect();
    let ticks = if categorical {
        labels.iter().enumerate().map(|(i, l)| (i as f64, l.clone())).collect()
    } else if sweep.x == Param::Chunk {
        sweep.chunk.iter().map(|&c| (c as f64, size_label(c))).collect()
    } else {
        Vec::new()
    };
    let x = XAxis::new("x", sweep.x.label()).log(c.log_x || sweep.x == Param::Chunk).ticks(ticks);
    (Chart::xy(&c.title, x, metric_heading(&c.metric), series), samples)
}

/// Per second of each open-model row: responses (OK, failed + dropped) and active users, two
/// charts of one board over the row's seconds.
fn per_second_charts(h: &mut String, r: &ExperimentResults) {
    let open: Vec<&Row> =
        r.rows.iter().filter(|row| row.load().is_some_and(|l| l.settings.model == "open")).collect();
    if open.is_empty() {
        return;
    }
    h.push_str("<h3>Per second: OK and failed responses, active users</h3><div class=\"charts\">");
    for row in open {
        let Some(load) = row.load() else { continue };
        let samples: Vec<Value> = load
            .series
            .iter()
            .map(|s| json!({ "second": s.second, "ok": s.ok, "failed": s.failed + s.dropped, "users": s.active_users }))
            .collect();
        let title = format!("{} – {} profile", row.server, row.point.x_label());
        let second = || XAxis::new("second", "second");
        // Responses and users have different scales: each its own chart, one above the other.
        let charts = [
            Chart::xy(
                &format!("{title}: responses per second"),
                second(),
                "responses per second",
                vec![Series::new("ok", "OK"), Series::new("failed", "failed + dropped")],
            ),
            Chart::xy(
                &format!("{title}: active users"),
                second(),
                "active users",
                vec![Series::new("users", "active users")],
            ),
        ];
        h.push_str(&sluice_charts::board(&charts, &Samples::Held(&samples)));
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

fn rtsp_rows_table(h: &mut String, r: &ExperimentResults) {
    h.push_str("<details><summary>Every row: all figures, failures by kind, the server's counters, commands</summary><div class=\"scroll\"><table class=\"lab-table\"><caption>Every row</caption><tr><th>server</th><th>transport</th><th>clients</th><th>status</th><th>perfect</th><th>playing</th><th>expected samples</th><th>mean</th><th>stdev</th><th>min</th><th>max</th><th>lost packets (video)</th><th>clients with loss</th><th>stalled clients</th><th>UDP receive-buffer drops</th><th>Mbit/s</th><th>connect spread s</th><th>server CPU s (%)</th><th>generator CPU %</th><th>server counters</th><th>failures</th><th>commands</th></tr>");
    for row in &r.rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&row.server),
            row.point.transport.map(|t| t.name()).unwrap_or(""),
            row.point.x_label(),
            row.status()
        );
        match (&row.outcome, row.rtsp()) {
            (_, Some(f)) => {
                let failures: Vec<String> = sluice_load::rtsp::FailureKind::ALL
                    .iter()
                    .map(|&k| (k.name(), f.failures.get(k)))
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let counters = match f.server {
                    Some(c) => {
                        let n = |v: Option<u64>| v.map_or_else(|| "–".to_string(), |v| v.to_string());
                        format!(
                            "frames dropped {}, packets dropped {}, packets sent {}, bytes sent {}",
                            n(c.frames_dropped),
                            n(c.packets_dropped),
                            n(c.packets_sent),
                            n(c.bytes_sent)
                        )
                    }
                    None => "–".into(),
                };
                let _ = write!(
                    h,
                    "<td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1} ({:.0}%)</td><td>{:.0}% of {} core(s)</td><td>{}</td><td>{}</td>",
                    f.perfect_clients,
                    f.playing_clients,
                    f.expected_samples,
                    f.samples_mean,
                    f.samples_stdev,
                    f.samples_min,
                    f.samples_max,
                    f.lost_packets,
                    f.video_lost_packets,
                    f.clients_with_loss,
                    f.stalled_clients,
                    f.udp_rcvbuf_drops.map_or_else(|| "–".to_string(), |d| d.to_string()),
                    f.mbit_per_s,
                    f.connect_spread_s,
                    f.cpu_s,
                    f.server_cpu_pct,
                    f.generator_cpu_pct,
                    f.generator_cpus,
                    escape(&counters),
                    if failures.is_empty() { "none".to_string() } else { failures.join(", ") },
                );
            }
            (RowOutcome::Skipped { reason } | RowOutcome::Failed { reason }, None) => {
                let _ = write!(h, "<td colspan=\"17\">{}</td>", escape(reason));
            }
            _ => h.push_str("<td colspan=\"17\"></td>"),
        }
        let _ = write!(
            h,
            "<td><code>{}</code><br><code>{}</code></td></tr>",
            escape(&row.server_command),
            escape(&row.load_command)
        );
    }
    h.push_str("</table></div></details>");
}

fn all_rows_table(h: &mut String, r: &ExperimentResults) {
    h.push_str("<details><summary>Every row: all figures, errors by kind, commands</summary><div class=\"scroll\"><table class=\"lab-table rows\"><caption>Every row</caption><tr><th>server</th><th>sweep</th><th>point</th><th>round</th><th>CPU budget (throttled periods, server CPU %)</th><th>status</th><th>requests</th><th>ok</th><th>success %</th><th>req/s</th><th>MB/s</th><th>avg</th><th>p50</th><th>p95</th><th>p99</th><th>max ms</th><th>CPU s</th><th>CPU s/GB</th><th>syscalls/req (by kind)</th><th>errors</th><th>commands</th></tr>");
    for row in &r.rows {
        let budget = row.budget.as_ref().map_or_else(
            || "–".to_string(),
            |b| {
                format!(
                    "{:.2} core ({} of {}, {:.0}%)",
                    b.cpus, b.throttling.nr_throttled, b.throttling.nr_periods, b.server_cpu_pct
                )
            },
        );
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&row.server),
            escape(&row.point.sweep),
            escape(&row.point.x_label()),
            row.round.map_or_else(|| "–".to_string(), |r| r.to_string()),
            budget,
            row.status()
        );
        match &row.outcome {
            RowOutcome::Measured { measurement: crate::results::Measurement::Http { figures: f, .. } } => {
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
                    "<td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td class=\"kinds\"><b>{}</b><br>{}</td><td>{}</td>",
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
                    kinds.iter().map(|k| escape(k)).collect::<Vec<_>>().join("<br>"),
                    if errors.is_empty() { "none".to_string() } else { errors.join(", ") },
                );
            }
            RowOutcome::Reference { mb_per_s } => {
                let _ =
                    write!(h, "<td colspan=\"14\">iperf3 loopback, one TCP stream: {mb_per_s:.0} MB/s</td>");
            }
            RowOutcome::Measured { .. } => h.push_str("<td colspan=\"14\"></td>"),
            RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => {
                let _ = write!(h, "<td colspan=\"14\">{}</td>", escape(reason));
            }
        }
        let _ = write!(
            h,
            "<td class=\"cmd\"><code>{}</code><code>{}</code></td></tr>",
            escape(&row.server_command),
            escape(&row.load_command)
        );
    }
    h.push_str("</table></div></details>");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::tests::{row, some_report};
    use crate::experiment::Experiment;

    /// E3's capacity sweep, two servers at two points in two rounds.
    fn capacity_results() -> ExperimentResults {
        let report = some_report();
        let mut rows = Vec::new();
        for (vus, uring, nginx) in
            [(10, [100.0, 300.0]), (1000, [1000.0, 1200.0])].map(|(v, u)| (v, u, [50.0, 70.0]))
        {
            for round in 0..2 {
                rows.push(row(&report, "sluice uring", vus, uring[round]));
                rows.push(row(&report, "nginx return 200", vus, nginx[round] * vus as f64));
            }
        }
        ExperimentResults::for_tests(Experiment::find("E3").expect("E3"), rows)
    }

    #[test]
    fn a_sweep_chart_holds_each_servers_medians_on_a_log_x_axis() {
        let r = capacity_results();
        let spec = r.experiment.chart.iter().find(|c| c.sweep.as_deref() == Some("capacity")).expect("chart");
        let (chart, samples) = sweep_chart_data(&r, spec);
        let x = chart.x.as_ref().expect("an x-y chart");
        assert!(x.log && x.label == Param::Vus.label(), "{x:?}");
        assert_eq!(chart.unit, metric_heading("req_per_s"));
        let labels: Vec<&str> = chart.series.iter().map(|s| s.label.as_str()).collect();
        assert_eq!(labels, ["sluice uring", "nginx return 200"]);
        assert!(chart.series[1].dashed && !chart.series[0].dashed, "the peer is dashed");
        assert_eq!(chart.series[0].color.as_deref(), Some(SERVER_COLOURS[0]));
        // The median of each server's rounds at each x.
        assert_eq!(
            samples,
            vec![
                json!({"x": 10.0, "y": {"0": 200.0, "1": 600.0}}),
                json!({"x": 1000.0, "y": {"0": 1100.0, "1": 60000.0}})
            ]
        );
    }

    #[test]
    fn the_report_draws_its_charts_with_the_chart_library_and_fetches_nothing() {
        let html = render(&[capacity_results()]);
        assert_eq!(html.matches("uPlot").count().min(1), 1, "uPlot is inlined");
        assert_eq!(html.matches("window.SluiceBoard =").count(), 1, "the library once");
        assert!(!html.contains("<svg"), "no chart is drawn by the report itself");
        for chart in Experiment::find("E3")
            .expect("E3")
            .chart
            .iter()
            .filter(|c| c.sweep.as_deref() == Some("capacity"))
        {
            assert!(html.contains(&json!(chart.title).to_string()), "{} is a board's chart", chart.title);
        }
        assert!(
            html.contains(r#"{"x":1000.0,"y":{"0":1100.0,"1":60000.0}}"#),
            "the chart's data is in the page"
        );
        for external in
            ["src=\"http", "href=\"http", "src='http", "href='http", "http-equiv", "@import", "url(http"]
        {
            assert!(!html.contains(external), "nothing fetched: {external}");
        }
        // A sweep with no measured rows says so rather than drawing an empty chart.
        let mut empty = capacity_results();
        for row in &mut empty.rows {
            row.outcome = RowOutcome::Skipped { reason: "not here".into() };
        }
        assert!(render(&[empty]).contains("no measured rows"));
    }
}
