//! Charts as one self-contained HTML page: the admin dashboard of `sluice serve`, the live page
//! of `sluice load --dashboard` and the HTML report `sluice load --report` writes all come from
//! [`page`], and the lab's reports put [`library`] and [`board`]s in a page of their own, so they
//! all draw alike. A chart's x axis is the samples' time (`t`) or, for [`Chart::xy`], a number
//! of each sample ([`XAxis`]: users, connections, a chunk size, linear or logarithmic).
//!
//! Owns the page, the samples a live page follows ([`Hub`]), the board script
//! (`assets/charts.js`) and the vendored uPlot (npm `uplot`, MIT, `assets/uplot/LICENSE`), all
//! inlined so the page works offline and a report is one file. A page follows server-sent events
//! (one JSON sample a second) or holds its samples. It does not produce samples (each producer
//! decides what a sample holds and names the series to draw) and it serves nothing (the admin
//! listener and `sluice load --dashboard` serve pages on sluice's own HTTP server).

#![deny(unsafe_code)]

use serde::Serialize;

mod hub;

pub use hub::Hub;

/// uPlot's minified script (npm `uplot` 1.6.32, `dist/uPlot.iife.min.js`).
pub const UPLOT_JS: &str = include_str!("../assets/uplot/uPlot.iife.min.js");
/// uPlot's stylesheet.
pub const UPLOT_CSS: &str = include_str!("../assets/uplot/uPlot.min.css");
/// The board: draws each [`Chart`] from the samples.
pub const BOARD_JS: &str = include_str!("../assets/charts.js");

/// One line on a chart: the number at `key` in each sample (`rps.2xx`), or, for a key ending
/// `.*` (`viewers.*`), one line per key of that object any sample has.
#[derive(Debug, Clone, Serialize)]
pub struct Series {
    /// Where the number is in a sample.
    pub key: String,
    /// The line's name in the legend (a wildcard's keys follow it).
    pub label: String,
    /// Its colour (`#1f77b4`), so one thing keeps its colour across charts; the board's
    /// palette by position when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub color: Option<String>,
    /// Drawn dashed (a reference line, a peer beside sluice).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dashed: bool,
}

impl Series {
    /// The number at `key`, named `label` in the legend.
    pub fn new(key: &str, label: &str) -> Series {
        Series { key: key.into(), label: label.into(), color: None, dashed: false }
    }

    /// The same line in `color`.
    pub fn color(mut self, color: &str) -> Series {
        self.color = Some(color.into());
        self
    }

    /// The same line, dashed when `dashed`.
    pub fn dashed(mut self, dashed: bool) -> Series {
        self.dashed = dashed;
        self
    }
}

/// A chart's x axis when it is not time: the number at `key` in each sample.
#[derive(Debug, Clone, Serialize)]
pub struct XAxis {
    /// Where the x value is in a sample (`x`, `second`).
    pub key: String,
    /// The axis's name (`virtual users`, `chunk size`).
    pub label: String,
    /// Logarithmic (positive x only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub log: bool,
    /// Named ticks at these x values (`64 KB` at 65536, a profile's name at its index); when
    /// empty, a chart with few distinct x values gets a tick at each, others round ticks.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ticks: Vec<(f64, String)>,
}

impl XAxis {
    /// A linear axis named `label` over the number at `key`.
    pub fn new(key: &str, label: &str) -> XAxis {
        XAxis { key: key.into(), label: label.into(), log: false, ticks: Vec::new() }
    }

    /// The same axis, logarithmic when `log`.
    pub fn log(mut self, log: bool) -> XAxis {
        self.log = log;
        self
    }

    /// The same axis with named ticks.
    pub fn ticks(mut self, ticks: Vec<(f64, String)>) -> XAxis {
        self.ticks = ticks;
        self
    }
}

/// One chart of a page.
#[derive(Debug, Clone, Serialize)]
pub struct Chart {
    /// Its title.
    pub title: String,
    /// The unit of its values (`req/s`, `ms`).
    pub unit: String,
    /// Its lines.
    pub series: Vec<Series>,
    /// Its x axis; the samples' time (`t`, Unix seconds) when absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub x: Option<XAxis>,
}

impl Chart {
    /// A time-series chart titled `title` in `unit`, with `series` as (key, label) pairs.
    pub fn new(title: &str, unit: &str, series: &[(&str, &str)]) -> Chart {
        Chart {
            title: title.into(),
            unit: unit.into(),
            series: series.iter().map(|(k, l)| Series::new(k, l)).collect(),
            x: None,
        }
    }

    /// A chart of `series` against `x` (one sample per x value), its y axis named `y_label`.
    pub fn xy(title: &str, x: XAxis, y_label: &str, series: Vec<Series>) -> Chart {
        Chart { title: title.into(), unit: y_label.into(), series, x: Some(x) }
    }
}

/// Where a page's samples come from.
#[derive(Debug, Clone)]
pub enum Samples<'a> {
    /// Server-sent events at this URL (relative to the page): a `history` event with the
    /// samples so far, then one message per sample.
    Live(&'a str),
    /// These samples (JSON objects, each with `t`, Unix seconds), held in the page.
    Held(&'a [serde_json::Value]),
}

/// The page: `title`, a line of `subtitle` text, `charts` drawn from `samples`.
pub fn page(title: &str, subtitle: &str, charts: &[Chart], samples: Samples<'_>) -> String {
    report_page(title, subtitle, "", charts, samples, "")
}

/// [`page`] with HTML of the caller's before the charts (`head`: a verdict) and after them
/// (`tail`: a summary), both already escaped by the caller.
pub fn report_page(
    title: &str,
    subtitle: &str,
    head: &str,
    charts: &[Chart],
    samples: Samples<'_>,
    tail: &str,
) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n\
<style>{STYLE}</style>\n</head><body>\n<header><h1>{title}</h1><p>{subtitle} <span id=\"status\"></span></p></header>\n\
{head}{board}{tail}</body></html>\n",
        title = escape(title),
        subtitle = escape(subtitle),
        board = boards(&[(charts, samples)]),
    )
}

/// Boards to put in a page of one's own: the chart [`library`] once, then each [`board`].
pub fn boards(boards: &[(&[Chart], Samples<'_>)]) -> String {
    let mut html = library();
    for (charts, samples) in boards {
        html.push_str(&board(charts, samples));
    }
    html
}

/// The chart library (uPlot, the board script, their styles): once in a page, before its first
/// [`board`] (in `<head>` or `<body>`).
pub fn library() -> String {
    format!("<style>{UPLOT_CSS}\n{BOARD_STYLE}</style>\n<script>{UPLOT_JS}</script>\n<script>{BOARD_JS}</script>\n")
}

/// One board: `charts` drawn from `samples`, in a `<div class="board">`, anywhere in a page after
/// the [`library`]. Every board of a page is in `window.sluiceBoards`.
pub fn board(charts: &[Chart], samples: &Samples<'_>) -> String {
    let spec = script_json(&serde_json::json!({ "charts": charts }).to_string());
    let start = match samples {
        Samples::Live(url) => format!("board.follow({});", script_json(&serde_json::json!(url).to_string())),
        Samples::Held(samples) => {
            format!("board.replace({});", script_json(&serde_json::to_string(samples).unwrap_or_default()))
        }
    };
    format!(
        "<div class=\"board\"></div>\n<script>(() => {{ const root = document.currentScript.previousElementSibling; \
const board = new SluiceBoard(root, {spec});\n{start} }})();</script>\n"
    )
}

/// The page around a board.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f8fafc;color:#0f172a}\
header{padding:8px 16px;background:#0f172a;color:#f8fafc}header h1{font-size:18px;margin:0}header p{margin:2px 0 0;font-size:13px;color:#cbd5e1}\
.verdict{margin:8px;padding:6px 10px;border-radius:4px;font-weight:600}.verdict.pass{background:#dcfce7;color:#14532d}\
.verdict.fail{background:#fee2e2;color:#7f1d1d}.thresholds{margin:0 8px;padding-left:24px;font-size:13px}\
.thresholds .fail{color:#b91c1c}pre.summary{margin:8px;padding:8px;background:#fff;border:1px solid #e2e8f0;border-radius:4px;\
font-size:12px;overflow-x:auto}";

/// A board's grid of charts.
const BOARD_STYLE: &str =
    ".board{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:8px;padding:8px}\
.board .chart{background:#fff;border:1px solid #e2e8f0;border-radius:4px;padding:4px;min-height:220px}";

/// JSON made safe inside a `<script>` element (no `</script>` can end it early).
fn script_json(json: &str) -> String {
    json.replace('<', "\\u003c")
}

/// Text made safe inside HTML (element text and `"`-quoted attribute values, which is all these
/// pages write): the one escaper's text form, re-exported for the pages built on these charts.
pub use sluice_proto::markup::escape_text as escape;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_holds_its_charts_script_and_samples() {
        let charts = [Chart::new("Requests", "req/s", &[("rps.2xx", "2xx")])];
        let samples = [serde_json::json!({"t": 1, "rps": {"2xx": 3}, "note": "</script>"})];
        let html = page("sluice <load>", "a run", &charts, Samples::Held(&samples));
        assert!(html.contains("uPlot") && html.contains("SluiceBoard"));
        assert!(html.contains("<title>sluice &lt;load&gt;</title>"));
        assert!(html.contains("<div class=\"board\">"));
        assert!(html.contains("\\u003c/script>"), "a sample cannot close the script early");
        assert_eq!(html.matches("</script>").count(), 3);
        let live = page("t", "s", &charts, Samples::Live("/events"));
        assert!(live.contains("board.follow(\"/events\")"));
    }

    #[test]
    fn an_xy_chart_names_its_x_axis_and_keeps_colours_and_dashes() {
        let x = XAxis::new("x", "chunk size").log(true).ticks(vec![(65536.0, "64 KB".into())]);
        let chart = Chart::xy(
            "MB/s by chunk",
            x,
            "MB/s",
            vec![Series::new("y.0", "sluice").color("#1f77b4"), Series::new("y.1", "nginx").dashed(true)],
        );
        let spec = serde_json::to_value(&chart).unwrap_or_default();
        assert_eq!(
            spec["x"],
            serde_json::json!({"key": "x", "label": "chunk size", "log": true, "ticks": [[65536.0, "64 KB"]]})
        );
        assert_eq!(
            spec["series"][0],
            serde_json::json!({"key": "y.0", "label": "sluice", "color": "#1f77b4"})
        );
        assert_eq!(spec["series"][1], serde_json::json!({"key": "y.1", "label": "nginx", "dashed": true}));
        let time =
            serde_json::to_value(Chart::new("Requests", "req/s", &[("rps", "all")])).unwrap_or_default();
        assert!(time.get("x").is_none(), "a time series has no x axis of its own");
        let samples = [serde_json::json!({"x": 65536, "y": {"0": 1.5}})];
        let html = format!("{}{}", library(), board(&[chart], &Samples::Held(&samples)));
        assert_eq!(html.matches("window.SluiceBoard =").count(), 1);
        assert!(html.contains(r#"board.replace([{"x":65536,"y":{"0":1.5}}]);"#));
    }
}
