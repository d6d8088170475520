//! Time-series charts as one self-contained HTML page: the admin dashboard of `sluice serve`,
//! the live page of `sluice load --dashboard` and the HTML report `sluice load --report` writes
//! all come from [`page`], so they draw alike.
//!
//! Owns the page, the samples a live page follows ([`Hub`]), a small server for a page with no
//! server of its own ([`serve`]), the board script (`assets/charts.js`) and the vendored uPlot (npm `uplot`,
//! MIT, `assets/uplot/LICENSE`), all inlined so the page works offline and a report is one file.
//! A page follows server-sent events (one JSON sample a second) or holds its samples. It does
//! not produce samples: each producer decides what a sample holds and names the series to draw.

use serde::Serialize;

mod hub;
mod live;

pub use hub::Hub;
pub use live::{serve, LivePage};

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
}

impl Chart {
    /// A chart titled `title` in `unit`, with `series` as (key, label) pairs.
    pub fn new(title: &str, unit: &str, series: &[(&str, &str)]) -> Chart {
        Chart {
            title: title.into(),
            unit: unit.into(),
            series: series.iter().map(|(k, l)| Series { key: (*k).into(), label: (*l).into() }).collect(),
        }
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
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{title}</title>\n\
<style>{STYLE}</style>\n</head><body>\n<header><h1>{title}</h1><p>{subtitle} <span id=\"status\"></span></p></header>\n\
{board}</body></html>\n",
        title = escape(title),
        subtitle = escape(subtitle),
        board = boards(&[(charts, samples)]),
    )
}

/// Boards to put in a page of one's own (the lab's report): the chart library once, then each
/// board's `charts` drawn from its samples, in a `<div class="board">` each.
pub fn boards(boards: &[(&[Chart], Samples<'_>)]) -> String {
    let mut html = format!("<style>{UPLOT_CSS}\n{BOARD_STYLE}</style>\n<script>{UPLOT_JS}</script>\n<script>{BOARD_JS}</script>\n");
    for (charts, samples) in boards {
        let spec = script_json(&serde_json::json!({ "charts": charts }).to_string());
        let start = match samples {
            Samples::Live(url) => {
                format!("board.follow({});", script_json(&serde_json::json!(url).to_string()))
            }
            Samples::Held(samples) => {
                format!(
                    "board.replace({});",
                    script_json(&serde_json::to_string(samples).unwrap_or_default())
                )
            }
        };
        html.push_str(&format!(
            "<div class=\"board\"></div>\n<script>(() => {{ const root = document.currentScript.previousElementSibling; \
const board = new SluiceBoard(root, {spec});\n{start} }})();</script>\n"
        ));
    }
    html
}

/// The page around a board.
const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:0;background:#f8fafc;color:#0f172a}\
header{padding:8px 16px;background:#0f172a;color:#f8fafc}header h1{font-size:18px;margin:0}header p{margin:2px 0 0;font-size:13px;color:#cbd5e1}";

/// A board's grid of charts.
const BOARD_STYLE: &str =
    ".board{display:grid;grid-template-columns:repeat(auto-fill,minmax(520px,1fr));gap:8px;padding:8px}\
.board .chart{background:#fff;border:1px solid #e2e8f0;border-radius:4px;padding:4px;min-height:220px}";

/// JSON made safe inside a `<script>` element (no `</script>` can end it early).
fn script_json(json: &str) -> String {
    json.replace('<', "\\u003c")
}

/// Text made safe inside HTML.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

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
}
