//! What a run records: request outcomes (OK, failed by kind, dropped), HDR histograms of latency,
//! connect time, time to first byte and download time, per-target breakdowns, and per-second
//! buckets. Each worker thread owns its own recorder (no sharing on the hot path); buckets leave a
//! worker once a second and the totals once at the end, and are merged by `run`. This module does
//! not time anything itself; callers hand it durations.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Why a request failed. Every failure is exactly one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The connection attempt was refused (nothing listening, or the backlog overflowed).
    Refused,
    /// The server reset the connection.
    Reset,
    /// The connection closed before the response head was complete.
    PrematureClose,
    /// No complete response by the request's deadline.
    Timeout,
    /// A complete response with a status other than the expected one.
    BadStatus,
    /// The connection closed after the head but before the whole body.
    ShortBody,
    /// The bytes were not a valid HTTP/1.x response.
    Malformed,
    /// Any other socket error (unreachable, out of descriptors, ...).
    Other,
}

impl ErrorKind {
    /// Every kind, in report order.
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Refused,
        ErrorKind::Reset,
        ErrorKind::PrematureClose,
        ErrorKind::Timeout,
        ErrorKind::BadStatus,
        ErrorKind::ShortBody,
        ErrorKind::Malformed,
        ErrorKind::Other,
    ];

    /// The name used in reports, CSV columns and thresholds.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Refused => "refused",
            ErrorKind::Reset => "reset",
            ErrorKind::PrematureClose => "premature_close",
            ErrorKind::Timeout => "timeout",
            ErrorKind::BadStatus => "bad_status",
            ErrorKind::ShortBody => "short_body",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Other => "other",
        }
    }
}

/// Failed requests counted by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ErrorCounts {
    /// Connection refused.
    pub refused: u64,
    /// Connection reset.
    pub reset: u64,
    /// Closed before the response head was complete.
    pub premature_close: u64,
    /// No complete response by the deadline.
    pub timeout: u64,
    /// Unexpected status.
    pub bad_status: u64,
    /// Closed before the body was complete.
    pub short_body: u64,
    /// Not a valid response.
    pub malformed: u64,
    /// Anything else.
    pub other: u64,
}

impl ErrorCounts {
    fn slot(&mut self, kind: ErrorKind) -> &mut u64 {
        match kind {
            ErrorKind::Refused => &mut self.refused,
            ErrorKind::Reset => &mut self.reset,
            ErrorKind::PrematureClose => &mut self.premature_close,
            ErrorKind::Timeout => &mut self.timeout,
            ErrorKind::BadStatus => &mut self.bad_status,
            ErrorKind::ShortBody => &mut self.short_body,
            ErrorKind::Malformed => &mut self.malformed,
            ErrorKind::Other => &mut self.other,
        }
    }

    /// The count for `kind`.
    pub fn get(&self, kind: ErrorKind) -> u64 {
        let mut copy = *self;
        *copy.slot(kind)
    }

    /// Counts one failure.
    pub fn add(&mut self, kind: ErrorKind) {
        *self.slot(kind) += 1;
    }

    /// All failures.
    pub fn total(&self) -> u64 {
        ErrorKind::ALL.iter().map(|&k| self.get(k)).sum()
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &ErrorCounts) {
        for k in ErrorKind::ALL {
            *self.slot(k) += other.get(k);
        }
    }
}

/// Lowest and highest values the histograms track, in microseconds: 1 µs to one hour. Longer
/// values are clamped to the top (requests have deadlines far below that).
const HISTOGRAM_LOW_US: u64 = 1;
const HISTOGRAM_HIGH_US: u64 = 3_600_000_000;
/// Significant digits of every histogram (EXPERIMENTS.md, "Metric definitions").
const HISTOGRAM_DIGITS: u8 = 3;

/// An HDR histogram of durations in microseconds, 3 significant digits, fixed memory.
#[derive(Debug, Clone)]
pub struct DurationHistogram(Histogram<u64>);

impl Default for DurationHistogram {
    fn default() -> Self {
        DurationHistogram::new()
    }
}

impl DurationHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        // The bounds and digits are constants inside hdrhistogram's accepted ranges.
        let h = Histogram::new_with_bounds(HISTOGRAM_LOW_US, HISTOGRAM_HIGH_US, HISTOGRAM_DIGITS)
            .expect("constant histogram bounds are valid");
        DurationHistogram(h)
    }

    /// Records one duration (clamped into the tracked range).
    pub fn record(&mut self, d: Duration) {
        let us = (d.as_micros() as u64).clamp(HISTOGRAM_LOW_US, HISTOGRAM_HIGH_US);
        self.0.saturating_record(us);
    }

    /// Adds `other`'s values (same bounds, so this cannot fail).
    pub fn merge(&mut self, other: &DurationHistogram) {
        self.0.add(&other.0).expect("histograms with equal bounds always merge");
    }

    /// Number of recorded values.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value at `quantile` (0..=1) in microseconds; 0 when empty.
    pub fn quantile_us(&self, quantile: f64) -> u64 {
        if self.0.is_empty() {
            0
        } else {
            self.0.value_at_quantile(quantile)
        }
    }

    /// Count, extremes, mean, standard deviation and the reported percentiles.
    pub fn summary(&self) -> LatencySummary {
        if self.0.is_empty() {
            return LatencySummary::default();
        }
        let h = &self.0;
        LatencySummary {
            count: h.len(),
            min_us: h.min(),
            mean_us: h.mean(),
            stdev_us: h.stdev(),
            p50_us: h.value_at_quantile(0.50),
            p90_us: h.value_at_quantile(0.90),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
        }
    }
}

/// A distribution summarised for reports, all in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LatencySummary {
    /// Values recorded.
    pub count: u64,
    /// Smallest.
    pub min_us: u64,
    /// Arithmetic mean.
    pub mean_us: f64,
    /// Standard deviation.
    pub stdev_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 95th percentile.
    pub p95_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
}

/// What a summary's latency line says when requests failed: that their times are not in it.
/// Failed requests are kept out of the percentiles (k6's `http_req_duration` keeps them in)
/// because a failure's time is not an answer's: a refused connection fails in microseconds and
/// would make an overloaded server look fast, a timed-out one ends at the deadline whatever the
/// server did. They are counted apart, by kind.
pub(crate) fn failed_left_out(failed: u64) -> String {
    match failed {
        0 => String::new(),
        n => format!("  (successes only: {n} failed request(s) left out, counted under errors)"),
    }
}

/// How one request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Expected status and full body.
    Ok,
    /// Sent (or attempted) and failed.
    Failed(ErrorKind),
    /// Never sent: it could not be started by its deadline (open model only).
    Dropped,
}

/// Everything measured about one request.
#[derive(Debug, Clone, Copy)]
pub struct RequestRecord {
    /// Index of the target in the run's target list.
    pub target: usize,
    /// How it ended.
    pub outcome: Outcome,
    /// Scheduled (open) or start (closed) time to last byte.
    pub latency: Duration,
    /// Time to open the connection, when this request opened one.
    pub connect: Option<Duration>,
    /// Request written to first response byte, when a byte arrived.
    pub ttfb: Option<Duration>,
    /// First to last response byte, when the response completed.
    pub download: Option<Duration>,
    /// Status code, when a head arrived.
    pub status: Option<u16>,
    /// Response bytes received (head and body).
    pub bytes: u64,
}

/// Counts and latency for one target.
#[derive(Debug, Clone, Default)]
pub struct TargetTotals {
    /// Successful responses.
    pub ok: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Arrivals dropped before sending.
    pub dropped: u64,
    /// Latency of successful responses.
    pub latency: DurationHistogram,
}

/// Whole-run totals of one worker (or, merged, of the run).
#[derive(Debug, Clone, Default)]
pub struct Totals {
    /// Arrivals (open model) or requests begun (closed model).
    pub scheduled: u64,
    /// Requests for which the generator began sending (connect or write).
    pub sent: u64,
    /// Successful responses.
    pub ok: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Arrivals that were never sent.
    pub dropped: u64,
    /// Response bytes received.
    pub bytes: u64,
    /// Connections opened successfully.
    pub connections_opened: u64,
    /// Responses by status code.
    pub statuses: BTreeMap<u16, u64>,
    /// Latency of successful responses.
    pub latency: DurationHistogram,
    /// Connect times of successful connection attempts.
    pub connect: DurationHistogram,
    /// Time to first byte, for responses whose first byte arrived.
    pub ttfb: DurationHistogram,
    /// Download time, for successful responses.
    pub download: DurationHistogram,
    /// Per target, in the run's target order.
    pub per_target: Vec<TargetTotals>,
}

impl Totals {
    /// Empty totals for `targets` targets.
    pub fn new(targets: usize) -> Self {
        Totals { per_target: vec![TargetTotals::default(); targets], ..Totals::default() }
    }

    /// Records one finished (or dropped) request.
    pub fn record(&mut self, r: &RequestRecord) {
        self.bytes += r.bytes;
        if let Some(c) = r.connect {
            self.connect.record(c);
            self.connections_opened += 1;
        }
        if let Some(t) = r.ttfb {
            self.ttfb.record(t);
        }
        if let Some(s) = r.status {
            *self.statuses.entry(s).or_insert(0) += 1;
        }
        let target = self.per_target.get_mut(r.target);
        match r.outcome {
            Outcome::Ok => {
                self.ok += 1;
                self.latency.record(r.latency);
                if let Some(d) = r.download {
                    self.download.record(d);
                }
                if let Some(t) = target {
                    t.ok += 1;
                    t.latency.record(r.latency);
                }
            }
            Outcome::Failed(kind) => {
                self.errors.add(kind);
                if let Some(t) = target {
                    t.errors.add(kind);
                }
            }
            Outcome::Dropped => {
                self.dropped += 1;
                if let Some(t) = target {
                    t.dropped += 1;
                }
            }
        }
    }

    /// Adds another worker's totals.
    pub fn merge(&mut self, o: &Totals) {
        self.scheduled += o.scheduled;
        self.sent += o.sent;
        self.ok += o.ok;
        self.errors.merge(&o.errors);
        self.dropped += o.dropped;
        self.bytes += o.bytes;
        self.connections_opened += o.connections_opened;
        for (s, n) in &o.statuses {
            *self.statuses.entry(*s).or_insert(0) += n;
        }
        self.latency.merge(&o.latency);
        self.connect.merge(&o.connect);
        self.ttfb.merge(&o.ttfb);
        self.download.merge(&o.download);
        if self.per_target.len() < o.per_target.len() {
            self.per_target.resize(o.per_target.len(), TargetTotals::default());
        }
        for (mine, theirs) in self.per_target.iter_mut().zip(&o.per_target) {
            mine.ok += theirs.ok;
            mine.errors.merge(&theirs.errors);
            mine.dropped += theirs.dropped;
            mine.latency.merge(&theirs.latency);
        }
    }
}

/// What one worker saw during one wall-clock second of the run. Events are placed in the second
/// in which the generator observed them (arrival dispatched, request sent, response completed).
#[derive(Debug, Clone)]
pub struct SecondBucket {
    /// Seconds since the start of the run.
    pub second: u64,
    /// Users that arrived (open) or requests begun (closed).
    pub arrivals: u64,
    /// Requests sent.
    pub sent: u64,
    /// Successful responses.
    pub ok: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Arrivals dropped.
    pub dropped: u64,
    /// Users that arrived: open-model arrivals, or closed-model virtual users starting.
    pub users_arrived: u64,
    /// Users that left: open-model requests finished or dropped, or virtual users stopping.
    pub users_left: u64,
    /// Latency of the successful responses completed in this second.
    pub latency: DurationHistogram,
    /// Response bytes received (heads and bodies) by the requests that ended in this second.
    pub bytes: u64,
}

impl SecondBucket {
    /// An empty bucket for `second`.
    pub fn new(second: u64) -> Self {
        SecondBucket {
            second,
            arrivals: 0,
            sent: 0,
            ok: 0,
            errors: ErrorCounts::default(),
            dropped: 0,
            users_arrived: 0,
            users_left: 0,
            latency: DurationHistogram::new(),
            bytes: 0,
        }
    }

    /// Adds another worker's bucket for the same second.
    pub fn merge(&mut self, o: &SecondBucket) {
        self.arrivals += o.arrivals;
        self.sent += o.sent;
        self.ok += o.ok;
        self.errors.merge(&o.errors);
        self.dropped += o.dropped;
        self.users_arrived += o.users_arrived;
        self.users_left += o.users_left;
        self.latency.merge(&o.latency);
        self.bytes += o.bytes;
    }

    /// Records one finished request.
    pub fn record(&mut self, r: &RequestRecord) {
        self.bytes += r.bytes;
        match r.outcome {
            Outcome::Ok => {
                self.ok += 1;
                self.latency.record(r.latency);
            }
            Outcome::Failed(kind) => self.errors.add(kind),
            Outcome::Dropped => self.dropped += 1,
        }
    }
}

/// One row of the per-second time series, merged over all workers.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SecondSample {
    /// Seconds since the start of the run (the row covers `[second, second + 1)`).
    pub second: u64,
    /// Users that arrived (open) or requests begun (closed).
    pub arrivals: u64,
    /// Requests sent.
    pub started: u64,
    /// Successful responses.
    pub ok: u64,
    /// All failures.
    pub failed: u64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Arrivals dropped.
    pub dropped: u64,
    /// Users active in the second: in flight at its start plus arrived during it (Gatling's
    /// definition).
    pub active_users: u64,
    /// Median latency of the second's successful responses (µs; 0 when none).
    pub p50_us: u64,
    /// 99th percentile of the same (µs; 0 when none).
    pub p99_us: u64,
    /// Response bytes received in the second (reports from before it was counted say 0).
    #[serde(default)]
    pub bytes: u64,
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

    fn rec(outcome: Outcome, ms: u64) -> RequestRecord {
        RequestRecord {
            target: 0,
            outcome,
            latency: Duration::from_millis(ms),
            connect: None,
            ttfb: Some(Duration::from_millis(1)),
            download: Some(Duration::ZERO),
            status: Some(200),
            bytes: 10,
        }
    }

    #[test]
    fn histogram_percentiles_have_three_digits() {
        let mut h = DurationHistogram::new();
        for ms in 1..=1000 {
            h.record(Duration::from_millis(ms));
        }
        let s = h.summary();
        assert_eq!(s.count, 1000);
        assert!((499_000..=501_000).contains(&s.p50_us), "{}", s.p50_us);
        assert!((989_000..=991_000).contains(&s.p99_us), "{}", s.p99_us);
        assert!((999_000..=1_001_000).contains(&s.max_us));
        // An absurd value is clamped, never an error.
        h.record(Duration::from_secs(100_000));
        assert_eq!(h.len(), 1001);
    }

    #[test]
    fn totals_count_by_outcome_and_merge() {
        let mut a = Totals::new(1);
        a.record(&rec(Outcome::Ok, 5));
        a.record(&rec(Outcome::Failed(ErrorKind::Reset), 5));
        let mut b = Totals::new(1);
        b.record(&rec(Outcome::Dropped, 0));
        b.record(&rec(Outcome::Failed(ErrorKind::Reset), 5));
        a.merge(&b);
        assert_eq!((a.ok, a.errors.reset, a.errors.total(), a.dropped), (1, 2, 2, 1));
        assert_eq!(a.latency.len(), 1);
        assert_eq!(a.per_target[0].errors.reset, 2);
        assert_eq!(a.statuses[&200], 4);
    }
}
