//! Pass/fail criteria for a run (`p99<50ms`, `success>99.9%`, `errors.timeout==0`, ...): parsing
//! the expressions, and checking them against a finished [`Report`]. The binary turns a failed
//! threshold into a non-zero exit code; this module only judges.
//!
//! Grammar: `METRIC OP VALUE`, OP one of `<`, `<=`, `>`, `>=`, `==`.
//! - Durations (VALUE like `50ms`, `1s`, `200us`): `p50`, `p90`, `p95`, `p99`, `p99.9`, `max`,
//!   `min`, `mean`, `stdev` of latency, optionally prefixed `latency.`, `connect.`, `ttfb.` or
//!   `download.`.
//! - Rates (VALUE like `99.9%`, `0.999`, or `99.9`: above 1 is a percentage): `success` (success
//!   rate), `error_rate`.
//! - Counts: `errors`, `errors.KIND` (refused, reset, premature_close, timeout, bad_status,
//!   short_body, malformed, other), `dropped`, `requests` (ok + failed).
//! - Throughput: `rps` (responses per second).

use crate::error::LoadError;
use crate::report::{Report, ThresholdResult};
use crate::stats::{format_us, ErrorKind, LatencySummary};

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

impl Op {
    fn holds(self, actual: f64, limit: f64) -> bool {
        match self {
            Op::Lt => actual < limit,
            Op::Le => actual <= limit,
            Op::Gt => actual > limit,
            Op::Ge => actual >= limit,
            Op::Eq => actual == limit,
        }
    }
}

/// Which figure of a distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Stat {
    Quantile(f64),
    Min,
    Max,
    Mean,
    Stdev,
}

/// Which distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Distribution {
    Latency,
    Connect,
    Ttfb,
    Download,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Metric {
    /// Microseconds.
    Time(Distribution, Stat),
    /// Fraction 0..=1.
    SuccessRate,
    ErrorRate,
    Errors(Option<ErrorKind>),
    Dropped,
    Requests,
    Rps,
}

/// A parsed threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    text: String,
    metric: Metric,
    op: Op,
    /// In the metric's unit: microseconds, fraction, count or per second.
    limit: f64,
}

impl Threshold {
    /// Parses an expression such as `p99<50ms` or `success>99.9%`.
    pub fn parse(text: &str) -> Result<Threshold, LoadError> {
        let bad =
            |reason: &str| LoadError::InvalidThreshold { text: text.to_string(), reason: reason.to_string() };
        let (name, op, value) = split(text)?;
        let value = value.as_str();
        let name = name.to_ascii_lowercase();
        let metric =
            parse_metric(&name).ok_or_else(|| bad("unknown metric (see `sluice load http --help`)"))?;
        let limit = match metric {
            Metric::Time(..) => {
                let d = crate::duration_text::parse(value).map_err(|e| bad(&e))?;
                d.as_secs_f64() * 1e6
            }
            Metric::SuccessRate | Metric::ErrorRate => parse_rate(value).map_err(&bad)?,
            Metric::Errors(_) | Metric::Dropped | Metric::Requests | Metric::Rps => {
                parse_number(value).map_err(&bad)?
            }
        };
        Ok(Threshold { text: text.trim().to_string(), metric, op, limit })
    }

    /// Judges `report`.
    pub fn check(&self, report: &Report) -> ThresholdResult {
        let (actual, shown) = match self.metric {
            Metric::Time(dist, stat) => {
                let s = match dist {
                    Distribution::Latency => &report.latency,
                    Distribution::Connect => &report.connect,
                    Distribution::Ttfb => &report.ttfb,
                    Distribution::Download => &report.download,
                };
                let us = stat_of(s, stat);
                (us, format_us(us))
            }
            Metric::SuccessRate => (report.success_rate, format!("{:.3}%", report.success_rate * 100.0)),
            Metric::ErrorRate => {
                let rate = 1.0 - report.success_rate;
                (rate, format!("{:.3}%", rate * 100.0))
            }
            Metric::Errors(kind) => {
                let n = kind.map_or(report.errors.total(), |k| report.errors.get(k));
                (n as f64, n.to_string())
            }
            Metric::Dropped => (report.requests.dropped as f64, report.requests.dropped.to_string()),
            Metric::Requests => {
                let n = report.requests.ok + report.requests.failed;
                (n as f64, n.to_string())
            }
            Metric::Rps => (report.requests_per_s, format!("{:.1}", report.requests_per_s)),
        };
        ThresholdResult {
            expression: self.text.clone(),
            actual: shown,
            passed: self.op.holds(actual, self.limit),
        }
    }
}

/// Splits `METRIC OP VALUE` (spaces allowed anywhere) into the lower-cased metric name, the
/// operator and the value text.
fn split(text: &str) -> Result<(String, Op, String), LoadError> {
    let bad =
        |reason: &str| LoadError::InvalidThreshold { text: text.to_string(), reason: reason.to_string() };
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    let at = compact.find(['<', '>', '=']).ok_or_else(|| bad("expected an operator: <, <=, >, >=, =="))?;
    let (name, rest) = compact.split_at(at);
    let (op, value) = if let Some(v) = rest.strip_prefix("<=") {
        (Op::Le, v)
    } else if let Some(v) = rest.strip_prefix(">=") {
        (Op::Ge, v)
    } else if let Some(v) = rest.strip_prefix("==") {
        (Op::Eq, v)
    } else if let Some(v) = rest.strip_prefix('<') {
        (Op::Lt, v)
    } else if let Some(v) = rest.strip_prefix('>') {
        (Op::Gt, v)
    } else {
        return Err(bad("expected an operator: <, <=, >, >=, =="));
    };
    Ok((name.to_ascii_lowercase(), op, value.to_string()))
}

/// A rate as a fraction: `99.9%`, `0.999`, or `99.9` (above 1 can only be a percentage).
fn parse_rate(value: &str) -> Result<f64, &'static str> {
    let (number, percent) = match value.strip_suffix('%') {
        Some(n) => (n, true),
        None => (value, false),
    };
    let v = number.parse::<f64>().map_err(|_| "expected a rate like 99.9% or 0.999")?;
    let v = if percent || v > 1.0 { v * 0.01 } else { v };
    if !(0.0..=1.0).contains(&v) {
        return Err("a rate must be between 0% and 100%");
    }
    Ok(v)
}

/// A count or a throughput: finite, not negative.
fn parse_number(value: &str) -> Result<f64, &'static str> {
    value.parse::<f64>().ok().filter(|v| v.is_finite() && *v >= 0.0).ok_or("expected a number")
}

/// What an RTSP threshold measures, over all viewers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RtspMetric {
    /// Fraction of viewers that received every sample.
    Perfect,
    /// Fraction of viewers that got a PLAY response.
    Playing,
    /// Viewers that received every sample.
    PerfectClients,
    /// Failed viewers.
    Failures,
    SamplesMean,
    SamplesMin,
    LostPackets,
}

/// A pass/fail criterion for `sluice load rtsp`: `perfect>99%`, `samples_mean>=899`,
/// `lost_packets==0`. Metrics: `perfect`, `playing` (rates); `perfect_clients`, `failures`,
/// `samples_mean`, `samples_min`, `lost_packets` (numbers).
#[derive(Debug, Clone, PartialEq)]
pub struct RtspThreshold {
    text: String,
    metric: RtspMetric,
    op: Op,
    limit: f64,
}

impl RtspThreshold {
    /// Parses an expression such as `perfect>99%`.
    pub fn parse(text: &str) -> Result<RtspThreshold, LoadError> {
        let bad =
            |reason: &str| LoadError::InvalidThreshold { text: text.to_string(), reason: reason.to_string() };
        let (name, op, value) = split(text)?;
        let metric = match name.as_str() {
            "perfect" => RtspMetric::Perfect,
            "playing" => RtspMetric::Playing,
            "perfect_clients" => RtspMetric::PerfectClients,
            "failures" => RtspMetric::Failures,
            "samples_mean" => RtspMetric::SamplesMean,
            "samples_min" => RtspMetric::SamplesMin,
            "lost_packets" => RtspMetric::LostPackets,
            _ => return Err(bad("unknown metric (perfect, playing, perfect_clients, failures, samples_mean, samples_min, lost_packets)")),
        };
        let limit = match metric {
            RtspMetric::Perfect | RtspMetric::Playing => parse_rate(&value).map_err(&bad)?,
            _ => parse_number(&value).map_err(&bad)?,
        };
        Ok(RtspThreshold { text: text.trim().to_string(), metric, op, limit })
    }

    /// Judges a run's summary.
    pub fn check(&self, s: &crate::rtsp::RtspSummary) -> ThresholdResult {
        let rate = |n: usize| if s.clients == 0 { 0.0 } else { n as f64 / s.clients as f64 };
        let (actual, shown) = match self.metric {
            RtspMetric::Perfect => {
                (rate(s.perfect_clients), format!("{:.1}%", rate(s.perfect_clients) * 100.0))
            }
            RtspMetric::Playing => {
                (rate(s.playing_clients), format!("{:.1}%", rate(s.playing_clients) * 100.0))
            }
            RtspMetric::PerfectClients => (s.perfect_clients as f64, s.perfect_clients.to_string()),
            RtspMetric::Failures => (s.failures.total() as f64, s.failures.total().to_string()),
            RtspMetric::SamplesMean => (s.samples_mean, format!("{:.1}", s.samples_mean)),
            RtspMetric::SamplesMin => (s.samples_min as f64, s.samples_min.to_string()),
            RtspMetric::LostPackets => (s.lost_packets as f64, s.lost_packets.to_string()),
        };
        ThresholdResult {
            expression: self.text.clone(),
            actual: shown,
            passed: self.op.holds(actual, self.limit),
        }
    }
}

/// Checks every threshold against `report` and stores the verdicts in it.
pub fn apply(thresholds: &[Threshold], report: &mut Report) {
    report.thresholds = thresholds.iter().map(|t| t.check(report)).collect();
}

fn parse_metric(name: &str) -> Option<Metric> {
    match name {
        "success" | "success_rate" => return Some(Metric::SuccessRate),
        "error_rate" => return Some(Metric::ErrorRate),
        "errors" => return Some(Metric::Errors(None)),
        "dropped" => return Some(Metric::Dropped),
        "requests" => return Some(Metric::Requests),
        "rps" => return Some(Metric::Rps),
        _ => {}
    }
    if let Some(kind) = name.strip_prefix("errors.") {
        return ErrorKind::ALL.into_iter().find(|k| k.name() == kind).map(|k| Metric::Errors(Some(k)));
    }
    let (dist, stat) = match name.split_once('.') {
        Some(("latency", s)) => (Distribution::Latency, s),
        Some(("connect", s)) => (Distribution::Connect, s),
        Some(("ttfb", s)) => (Distribution::Ttfb, s),
        Some(("download", s)) => (Distribution::Download, s),
        _ => (Distribution::Latency, name),
    };
    let stat = match stat {
        "min" => Stat::Min,
        "max" => Stat::Max,
        "mean" | "avg" => Stat::Mean,
        "stdev" => Stat::Stdev,
        p => {
            let q = p.strip_prefix('p')?.parse::<f64>().ok()?;
            if !(0.0..=100.0).contains(&q) {
                return None;
            }
            Stat::Quantile(q)
        }
    };
    Some(Metric::Time(dist, stat))
}

fn stat_of(s: &LatencySummary, stat: Stat) -> f64 {
    match stat {
        Stat::Min => s.min_us as f64,
        Stat::Max => s.max_us as f64,
        Stat::Mean => s.mean_us,
        Stat::Stdev => s.stdev_us,
        // The report keeps the standard percentiles; others fall back to the nearest kept one
        // at or above, so a threshold is never judged more leniently than asked.
        Stat::Quantile(q) => {
            (if q <= 50.0 {
                s.p50_us
            } else if q <= 90.0 {
                s.p90_us
            } else if q <= 95.0 {
                s.p95_us
            } else if q <= 99.0 {
                s.p99_us
            } else if q <= 99.9 {
                s.p999_us
            } else {
                s.max_us
            }) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_parse() {
        let t = Threshold::parse("p99<50ms").unwrap();
        assert_eq!(
            (t.metric, t.op, t.limit),
            (Metric::Time(Distribution::Latency, Stat::Quantile(99.0)), Op::Lt, 50_000.0)
        );
        let t = Threshold::parse("success > 99.9%").unwrap();
        assert_eq!(t.metric, Metric::SuccessRate);
        assert!((t.limit - 0.999).abs() < 1e-12);
        for same in ["success>99.9", "success>0.999"] {
            assert!((Threshold::parse(same).unwrap().limit - 0.999).abs() < 1e-12, "{same}");
        }
        let t = Threshold::parse("ttfb.p99.9<=1s").unwrap();
        assert_eq!(t.metric, Metric::Time(Distribution::Ttfb, Stat::Quantile(99.9)));
        assert_eq!(
            Threshold::parse("errors.timeout==0").unwrap().metric,
            Metric::Errors(Some(ErrorKind::Timeout))
        );
        assert_eq!(Threshold::parse("rps>=1000").unwrap().op, Op::Ge);
        for bad in [
            "p99",
            "p99<fast",
            "success>150%",
            "success>150",
            "bogus<1",
            "errors.nope<1",
            "p200<1s",
            "errors<-1",
        ] {
            assert!(Threshold::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rtsp_thresholds_parse_and_judge() {
        let t = RtspThreshold::parse("perfect>99%").unwrap();
        assert_eq!((t.metric, t.op), (RtspMetric::Perfect, Op::Gt));
        assert!((t.limit - 0.99).abs() < 1e-12);
        assert_eq!(RtspThreshold::parse("samples_mean>=899").unwrap().limit, 899.0);
        for bad in ["perfect>101%", "frames>1", "samples_mean>=lots"] {
            assert!(RtspThreshold::parse(bad).is_err(), "{bad}");
        }
        let viewers = vec![crate::rtsp::ViewerResult::new(0, 0)];
        let s = crate::rtsp::RtspSummary::from_viewers(&viewers, Some(10), std::time::Duration::from_secs(1));
        assert!(!RtspThreshold::parse("perfect>99%").unwrap().check(&s).passed);
        assert!(RtspThreshold::parse("samples_min==0").unwrap().check(&s).passed);
    }

    #[test]
    fn formats() {
        assert_eq!(format_us(850.0), "850µs");
        assert_eq!(format_us(12_345.0), "12.35ms");
        assert_eq!(format_us(1_200_000.0), "1.20s");
    }
}
