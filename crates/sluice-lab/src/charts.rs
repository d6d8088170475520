//! A report's charts: each declared chart of a sweep (one line per server, the median of its
//! rounds at each point, reference lines) and the per-second charts of open-model rows, as
//! `sluice-charts` boards holding their points, so the page draws them offline. It draws nothing
//! itself.

use serde_json::{json, Value};
use sluice_charts::{escape, Chart, Samples, Series, XAxis};

use crate::experiment::{size_label, ChartSpec, Param};
use crate::metrics::metric_heading;
use crate::pivot::by_server;
use crate::results::{ExperimentResults, Row, RowOutcome};

/// Each server's colour, by its place among the experiment's servers, so a server keeps its
/// colour in every chart of an experiment.
const SERVER_COLOURS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f",
    "#bcbd22",
];

/// Reference lines (the loopback limit, every client perfect).
const REFERENCE_COLOUR: &str = "#444444";

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
pub fn sweep_chart(r: &ExperimentResults, c: &ChartSpec) -> String {
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
pub fn per_second_charts(h: &mut String, r: &ExperimentResults) {
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::claims::tests::{row, some_report};
    use crate::experiment::Experiment;

    /// E3's capacity sweep, two servers at two points in two rounds.
    pub(crate) fn capacity_results() -> ExperimentResults {
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
}
