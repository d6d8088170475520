//! The HTML report: one self-contained page (inline CSS and scripts, nothing fetched) per
//! run of one or more experiments. Each experiment gets its machine and commands, the caveat,
//! the generated findings, the source report's numbers, the declared tables (servers down, the
//! sweep's points across) and charts, per-second charts for open-model rows, per-endpoint
//! latency, errors by kind, and every figure of every row. It computes nothing new, and it does
//! not draw: its charts are `sluice-charts` boards (the same code as the live dashboards), each
//! holding its points as samples, so the page stays one file that opens offline.

use std::fmt::Write as _;

use sluice_charts::escape;

use crate::charts::{per_second_charts, sweep_chart};
use crate::method::{capacity_method, not_in_run, quick_note};
use crate::pivot::PivotTable;
use crate::results::{ExperimentResults, RowOutcome};
use crate::row_tables::{all_rows_table, per_endpoint_table, rtsp_rows_table};

pub use crate::markdown::markdown;

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
table.claims td{text-align:left;vertical-align:top;max-width:30em}.partial{background:#fde4e1;border-left:4px solid #c0392b;padding:.6em 1em;font-weight:bold}.method{background:#eef4fb;border-left:4px solid #4a7fc1;padding:.6em 1em}";

/// The whole page for `runs`.
pub fn render(runs: &[ExperimentResults]) -> String {
    let mut h = String::new();
    let title = if runs.len() == 1 {
        let partial = if runs[0].partial.is_some() { " (partial run)" } else { "" };
        format!("sluice lab: {} {}{partial}", runs[0].experiment.id, runs[0].experiment.name)
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
    if let Some(partial) = &r.partial {
        let _ = write!(h, "<p class=\"partial\">{}</p>", escape(&partial.describe(r.rows.len())));
    }
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

/// The seed's claims this run could measure with their counterparts and verdicts, and one line
/// for the others.
fn claims_table(h: &mut String, r: &ExperimentResults) {
    let (claims, left_out) = crate::claims::in_run(r);
    if !left_out.is_empty() {
        let _ = write!(h, "<p class=\"muted not-in-run\">{}</p>", escape(&not_in_run(&left_out)));
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::charts::tests::capacity_results;
    use crate::experiment::Experiment;

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
        // uring and nginx ran, epoll did not: the goal (best sluice against the peer) is a row,
        // the claims naming epoll are one line; without nginx the goal joins that line.
        let goal = "sluice's goal: the best sluice serves";
        assert!(html.contains(&format!("<td>{}", escape(goal))), "the goal is checked");
        assert!(html.contains("Claims not in this run"), "the line is there");
        assert!(!html.contains("<td>io_uring serves more requests per second than epoll"), "not a row");
        let mut uring_only = capacity_results();
        uring_only.rows.retain(|r| r.server == "sluice uring");
        let page = render(&[uring_only]);
        assert!(page.contains(&escape(goal)), "named in the line");
        assert!(!page.contains(&format!("<td>{}", escape(goal))), "not a row");
    }
}
