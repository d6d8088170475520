//! A load run as pictures: the per-second samples of a run (HTTP or RTSP) charted live on a
//! page of its own (`sluice load --dashboard ADDR`) and, at the end, in a self-contained HTML
//! report (`--report FILE.html`), both drawn by `sluice_charts`, the same page the server's
//! admin dashboard is.
//!
//! Owns what a load sample holds, which charts show it, and what a report says besides them
//! (the run's summary and its thresholds' verdict). It wraps the run's other observer (the
//! progress line), so it adds the pictures without changing what the run does; it does not
//! measure anything itself, and it serves nothing: the binary serves [`LoadBoard::live_page`] on
//! the same HTTP server the admin dashboard runs on.

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sluice_charts::{Chart, Hub, Samples};

use crate::error::LoadError;
use crate::progress::ViewerObserver;
use crate::rtsp::RtspProgress;
use crate::run::{Observer, RunProgress};
use crate::stats::{ErrorKind, SecondSample};

/// Samples a run keeps for its report: a day at one a second (a few MB); a longer run's report
/// shows its last day.
const MAX_SAMPLES: usize = 86_400;
/// Samples a page opened during the run gets at once.
const LIVE_HISTORY: usize = 900;

/// What a board charts: an HTTP run (closed model or open) or an RTSP one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunKind {
    /// `sluice load http`; `closed` for the closed model, whose latency runs from each
    /// request's start (the open model's from its scheduled time).
    Http {
        /// The closed model.
        closed: bool,
    },
    /// `sluice load rtsp`.
    Rtsp,
}

/// What a report says besides its charts.
#[derive(Debug, Clone, Default)]
pub struct ReportText<'a> {
    /// The line under the title (`400 requests, 400 ok, 2.0 s`).
    pub subtitle: &'a str,
    /// The run's text summary, as printed at its end.
    pub summary: &'a str,
    /// Each threshold: its expression, whether it passed, the actual value.
    pub thresholds: Vec<(String, bool, String)>,
    /// The run's length in seconds, which says how much of its last second it ran: a
    /// last second it only partly ran is charted as a rate (or, shorter than half a second,
    /// left out) rather than as a drop to nearly nothing.
    pub duration_s: Option<f64>,
}

/// Watches a run for its live page and report, passing every second on to `inner`.
pub struct LoadBoard<'a> {
    inner: &'a mut dyn BoardInner,
    kind: RunKind,
    title: String,
    started_unix: f64,
    samples: Vec<Value>,
    hub: Arc<Hub>,
    /// The RTSP totals at the last second, for per-second rates.
    last_rtsp: Option<RtspProgress>,
}

/// What a [`LoadBoard`] passes the run's seconds on to: an HTTP and an RTSP observer both.
pub trait BoardInner: Observer + ViewerObserver<RtspProgress> {}
impl<T: Observer + ViewerObserver<RtspProgress>> BoardInner for T {}

impl<'a> LoadBoard<'a> {
    /// A board for a run titled `title`.
    pub fn new(
        title: &str,
        kind: RunKind,
        inner: &'a mut dyn BoardInner,
    ) -> Result<LoadBoard<'a>, LoadError> {
        let hub = Arc::new(Hub::new(LIVE_HISTORY));
        let started_unix = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64());
        Ok(LoadBoard {
            inner,
            kind,
            title: title.into(),
            started_unix,
            samples: Vec::new(),
            hub,
            last_rtsp: None,
        })
    }

    /// The live page (it follows `/events`) and the hub whose samples `/events` streams.
    pub fn live_page(&self) -> (String, Arc<Hub>) {
        let page = sluice_charts::page(
            &self.title,
            "live, a sample a second",
            &charts(self.kind),
            Samples::Live("/events"),
        );
        (page, Arc::clone(&self.hub))
    }

    fn add(&mut self, sample: Value) {
        self.hub.publish(&sample);
        if self.samples.len() >= MAX_SAMPLES {
            self.samples.remove(0);
        }
        self.samples.push(sample);
    }

    /// The samples so far (one a second of the run).
    pub fn samples(&self) -> &[Value] {
        &self.samples
    }

    /// Writes the report: the thresholds' verdict, the run's charts holding every sample and
    /// its summary, one HTML file.
    pub fn write_report(&self, path: &Path, text: &ReportText<'_>) -> Result<(), LoadError> {
        let mut samples = self.samples.clone();
        if let (RunKind::Http { .. }, Some(duration_s)) = (self.kind, text.duration_s) {
            settle_last_second(&mut samples, duration_s);
        }
        let mut head = String::new();
        if !text.thresholds.is_empty() {
            let failed: Vec<&str> = text.thresholds.iter().filter(|t| !t.1).map(|t| t.0.as_str()).collect();
            let (class, verdict) = match failed.len() {
                0 => ("pass", format!("thresholds passed ({})", text.thresholds.len())),
                n => (
                    "fail",
                    format!("{n} of {} thresholds failed: {}", text.thresholds.len(), failed.join(", ")),
                ),
            };
            head.push_str(&format!(
                "<p class=\"verdict {class}\">{}</p>\n<ul class=\"thresholds\">",
                sluice_charts::escape(&verdict)
            ));
            for (expression, passed, actual) in &text.thresholds {
                head.push_str(&format!(
                    "<li class=\"{}\">{} {} (actual {})</li>",
                    if *passed { "pass" } else { "fail" },
                    if *passed { "pass" } else { "FAIL" },
                    sluice_charts::escape(expression),
                    sluice_charts::escape(actual)
                ));
            }
            head.push_str("</ul>\n");
        }
        let summary = format!(
            "<pre class=\"summary\">{}</pre>\n",
            sluice_charts::escape(text.summary.trim_matches('\n'))
        );
        let html = sluice_charts::report_page(
            &self.title,
            text.subtitle,
            &head,
            &charts(self.kind),
            Samples::Held(&samples),
            &summary,
        );
        std::fs::write(path, html).map_err(|source| LoadError::Output { path: path.to_path_buf(), source })
    }
}

impl Observer for LoadBoard<'_> {
    fn on_second(&mut self, s: &SecondSample, progress: &RunProgress) {
        let sample = http_sample(self.started_unix, s);
        self.add(sample);
        Observer::on_second(self.inner, s, progress);
    }

    fn on_finish(&mut self) {
        Observer::on_finish(self.inner);
    }
}

impl ViewerObserver<RtspProgress> for LoadBoard<'_> {
    fn on_second(&mut self, p: &RtspProgress) {
        let last = self.last_rtsp.replace(*p).unwrap_or_default();
        let secs = p.elapsed.saturating_sub(last.elapsed).as_secs_f64().max(1e-3);
        let sample = json!({
            "t": (self.started_unix + p.elapsed.as_secs_f64()).round(),
            "second": p.elapsed.as_secs(),
            "viewers": { "playing": p.playing.saturating_sub(p.ended), "started": p.started, "failed": p.failed },
            "samples_per_s": (p.samples.saturating_sub(last.samples) as f64 / secs).round(),
            "lost_per_s": (p.lost_packets.saturating_sub(last.lost_packets) as f64 / secs).round(),
        });
        self.add(sample);
        ViewerObserver::on_second(self.inner, p);
    }
}

/// The sample charted for second `s` of an HTTP run that started at `started_unix` (Unix
/// seconds): the live page's, the report's and the lab's.
pub fn http_sample(started_unix: f64, s: &SecondSample) -> Value {
    let errors: serde_json::Map<String, Value> =
        ErrorKind::ALL.iter().map(|k| (k.name().to_string(), json!(s.errors.get(*k)))).collect();
    let ms = |us: u64| (s.ok > 0).then(|| us as f64 / 1e3);
    json!({
        "t": (started_unix + s.second as f64 + 1.0).round(),
        "second": s.second,
        "rps": { "ok": s.ok, "failed": s.failed, "dropped": s.dropped, "sent": s.started },
        "latency_ms": { "p50": ms(s.p50_us), "p99": ms(s.p99_us) },
        "errors": errors,
        "active_users": s.active_users,
        "mbps": s.bytes as f64 / 1e6,
    })
}

/// The last sample of an HTTP run that lasted `duration_s`, when the run ended part way through
/// its second: its counts scaled to a second's (they are per-second rates), or, under half a
/// second, the sample dropped (a rate from a sliver of a second says little).
fn settle_last_second(samples: &mut Vec<Value>, duration_s: f64) {
    let Some(second) = samples.last().and_then(|s| s["second"].as_f64()) else { return };
    let ran = duration_s - second;
    if ran >= 1.0 || ran <= 0.0 {
        return;
    }
    if ran < 0.5 {
        samples.pop();
        return;
    }
    let Some(last) = samples.last_mut() else { return };
    let scale = |v: &mut Value| {
        if let Some(n) = v.as_f64() {
            *v = json!(n / ran);
        }
    };
    for key in ["ok", "failed", "dropped", "sent"] {
        scale(&mut last["rps"][key]);
    }
    if let Some(errors) = last["errors"].as_object_mut() {
        errors.values_mut().for_each(scale);
    }
    scale(&mut last["mbps"]);
}

/// The charts of a run of `kind`.
pub fn charts(kind: RunKind) -> Vec<Chart> {
    let closed = match kind {
        RunKind::Http { closed } => closed,
        RunKind::Rtsp => {
            return vec![
                Chart::new(
                    "RTSP viewers",
                    "",
                    &[
                        ("viewers.playing", "playing"),
                        ("viewers.started", "started"),
                        ("viewers.failed", "failed"),
                    ],
                ),
                Chart::new("Video samples received", "/s", &[("samples_per_s", "samples")]),
                Chart::new("RTP packets lost", "/s", &[("lost_per_s", "lost")]),
            ]
        }
    };
    let latency =
        if closed { "Latency from each request's start" } else { "Latency from the scheduled time" };
    vec![
        Chart::new(
            "Requests",
            "/s",
            &[("rps.ok", "ok"), ("rps.failed", "failed"), ("rps.dropped", "dropped"), ("rps.sent", "sent")],
        ),
        Chart::new(latency, "ms", &[("latency_ms.p50", "p50"), ("latency_ms.p99", "p99")]),
        Chart::new("Errors by kind", "/s", &[("errors.*", "")]),
        Chart::new("Active users", "", &[("active_users", "active")]),
        Chart::new("Bytes received", "MB/s", &[("mbps", "received")]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rtsp_seconds_become_rates_and_http_seconds_keep_their_counts() {
        let mut inner = crate::NoObserver;
        let mut board = LoadBoard::new("run", RunKind::Rtsp, &mut inner).unwrap();
        let at = |secs, samples, lost| RtspProgress {
            elapsed: Duration::from_secs(secs),
            started: 2,
            playing: 2,
            samples,
            lost_packets: lost,
            ..RtspProgress::default()
        };
        ViewerObserver::on_second(&mut board, &at(1, 60, 0));
        ViewerObserver::on_second(&mut board, &at(2, 120, 3));
        let s = board.samples();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1]["samples_per_s"], json!(60.0));
        assert_eq!(s[1]["lost_per_s"], json!(3.0));
        assert_eq!(s[1]["viewers"]["playing"], json!(2));
        let second =
            SecondSample { second: 3, ok: 5, p50_us: 1500, bytes: 2_000_000, ..SecondSample::default() };
        let h = http_sample(1000.0, &second);
        // The closed model's latency runs from each request's start, the open model's from
        // its scheduled time.
        let title = |kind| charts(kind)[1].title.clone();
        assert_eq!(title(RunKind::Http { closed: true }), "Latency from each request's start");
        assert_eq!(title(RunKind::Http { closed: false }), "Latency from the scheduled time");
        assert_eq!(h["t"], json!(1004.0));
        assert_eq!(h["rps"]["ok"], json!(5));
        assert_eq!(h["latency_ms"]["p50"], json!(1.5));
        assert_eq!(h["mbps"], json!(2.0));
    }

    #[test]
    fn a_last_second_the_run_only_partly_ran_is_a_rate_or_left_out() {
        let second = |n: u64, ok: u64| {
            http_sample(
                0.0,
                &SecondSample { second: n, ok, started: ok, bytes: ok * 1000, ..SecondSample::default() },
            )
        };
        // 3.75 s: the last second ran three quarters, its 30 responses are 40 a second.
        let mut samples = vec![second(0, 40), second(1, 40), second(2, 40), second(3, 30)];
        settle_last_second(&mut samples, 3.75);
        assert_eq!(samples.len(), 4);
        assert_eq!(samples[3]["rps"]["ok"], json!(40.0));
        assert_eq!(samples[3]["mbps"], json!(0.04));
        // 3.2 s: a fifth of a second is left out; whole seconds are left alone.
        let mut samples = vec![second(0, 40), second(1, 40), second(2, 40), second(3, 8)];
        settle_last_second(&mut samples, 3.2);
        assert_eq!(samples.len(), 3);
        settle_last_second(&mut samples, 3.0);
        assert_eq!((samples.len(), samples[2]["rps"]["ok"].clone()), (3, json!(40)));
    }
}
