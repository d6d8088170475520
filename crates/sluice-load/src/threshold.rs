//! Pass/fail criteria for a run (`p99<50ms`, `success>99.9%`, `errors.timeout==0`, ...): parsing
//! the expressions, and checking them against a finished [`Report`]. The binary turns a failed
//! threshold into a non-zero exit code; this module only judges.
//!
//! Grammar: `METRIC OP VALUE`, OP one of `<`, `<=`, `>`, `>=`, `==`.
//! - Durations (VALUE like `50ms`, `1s`, `200us`): `p50`, `p90`, `p95`, `p99`, `p99.9`, `max`,
//!   `min`, `mean`, `stdev` of latency, optionally prefixed `latency.`, `connect.`, `ttfb.` or
//!   `download.`.
//! - Rates (VALUE like `99.9%` or `0.999`): `success` (success rate), `error_rate`.
//! - Counts: `errors`, `errors.KIND` (refused, reset, premature_close, timeout, bad_status,
//!   short_body, malformed, other), `dropped`, `requests` (ok + failed).
//! - Throughput: `rps` (responses per second).

use crate::error::LoadError;
use crate::report::Report;
use crate::stats::{ErrorKind, LatencySummary};

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

/// A threshold's verdict on a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ThresholdResult {
    /// The expression as given.
    pub expression: String,
    /// The measured value, written in the expression's units.
    pub actual: String,
    /// Whether it held.
    pub passed: bool,
}

impl Threshold {
    /// Parses an expression such as `p99<50ms` or `success>99.9%`.
    pub fn parse(text: &str) -> Result<Threshold, LoadError> {
        let bad =
            |reason: &str| LoadError::InvalidThreshold { text: text.to_string(), reason: reason.to_string() };
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let at =
            compact.find(['<', '>', '=']).ok_or_else(|| bad("expected an operator: <, <=, >, >=, =="))?;
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
        let name = name.to_ascii_lowercase();
        let metric =
            parse_metric(&name).ok_or_else(|| bad("unknown metric (see `sluice load http --help`)"))?;
        let limit = match metric {
            Metric::Time(..) => {
                let d = crate::duration_text::parse(value).map_err(|e| bad(&e))?;
                d.as_secs_f64() * 1e6
            }
            Metric::SuccessRate | Metric::ErrorRate => {
                let (number, scale) = match value.strip_suffix('%') {
                    Some(n) => (n, 0.01),
                    None => (value, 1.0),
                };
                let v =
                    number.parse::<f64>().map_err(|_| bad("expected a rate like 99.9% or 0.999"))? * scale;
                if !(0.0..=1.0).contains(&v) {
                    return Err(bad("a rate must be between 0% and 100%"));
                }
                v
            }
            Metric::Errors(_) | Metric::Dropped | Metric::Requests | Metric::Rps => value
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| bad("expected a number"))?,
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

/// Formats microseconds for people: `850µs`, `12.3ms`, `1.20s`.
pub fn format_us(us: f64) -> String {
    if us < 1_000.0 {
        format!("{us:.0}µs")
    } else if us < 1_000_000.0 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{:.2}s", us / 1e6)
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
        let t = Threshold::parse("ttfb.p99.9<=1s").unwrap();
        assert_eq!(t.metric, Metric::Time(Distribution::Ttfb, Stat::Quantile(99.9)));
        assert_eq!(
            Threshold::parse("errors.timeout==0").unwrap().metric,
            Metric::Errors(Some(ErrorKind::Timeout))
        );
        assert_eq!(Threshold::parse("rps>=1000").unwrap().op, Op::Ge);
        for bad in ["p99", "p99<fast", "success>150%", "bogus<1", "errors.nope<1", "p200<1s", "errors<-1"] {
            assert!(Threshold::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats() {
        assert_eq!(format_us(850.0), "850µs");
        assert_eq!(format_us(12_345.0), "12.35ms");
        assert_eq!(format_us(1_200_000.0), "1.20s");
    }
}
