//! The one reader of Prometheus text (the format `GET /metrics` answers in, version 0.0.4) and
//! the names of the series sluice exports that something else reads back.
//!
//! Owns parsing sample lines (name, labels with their escapes, value) into a [`Scrape`] that the
//! admin dashboard and the lab look series up in, and the name constants ([`names`]) the server's
//! metrics writer, the dashboard and the lab share, so a renamed series breaks the build rather
//! than a chart. It does not render metrics (the server's `metrics` module does) and fetches
//! nothing.

use std::borrow::Cow;
use std::collections::HashMap;

/// Names of the series sluice exports that the dashboard and the lab read back. Histograms and
/// summaries are named without their `_bucket`/`_sum`/`_count` suffixes.
pub mod names {
    /// HTTP responses by status class (`class="2xx"`).
    pub const HTTP_RESPONSES_TOTAL: &str = "sluice_http_responses_total";
    /// HTTP response body bytes by status class.
    pub const HTTP_RESPONSE_BYTES_TOTAL: &str = "sluice_http_response_bytes_total";
    /// Histogram: time to a response's last byte, by `route` and `class`.
    pub const HTTP_RESPONSE_DURATION_SECONDS: &str = "sluice_http_response_duration_seconds";
    /// Requests refused before routing.
    pub const HTTP_REQUESTS_REFUSED_TOTAL: &str = "sluice_http_requests_refused_total";
    /// Connections open now.
    pub const CONNECTIONS_OPEN: &str = "sluice_connections_open";
    /// Connections refused at accept (an engine event).
    pub const CONNECTIONS_REJECTED_TOTAL: &str = "sluice_connections_rejected_total";
    /// Connections shed under overload (an engine event).
    pub const CONNECTIONS_SHED_TOTAL: &str = "sluice_connections_shed_total";
    /// System calls the engine made, by `kind`.
    pub const SYSCALLS_TOTAL: &str = "sluice_syscalls_total";
    /// RTSP viewers of each presentation now, by `path`.
    pub const RTSP_STREAM_VIEWERS: &str = "sluice_rtsp_stream_viewers";
    /// Live paths published now.
    pub const LIVE_PATHS: &str = "sluice_live_paths";
    /// What each live path's publisher sends now, in bits a second, by `path`.
    pub const LIVE_BIT_RATE: &str = "sluice_live_bit_rate_bps";
    /// Each RTSP loop's busy share, by `loop`.
    pub const RTSP_LOOP_BUSY_RATIO: &str = "sluice_rtsp_loop_busy_ratio";
    /// RTSP viewers refused (an engine event).
    pub const RTSP_VIEWERS_REFUSED_TOTAL: &str = "sluice_rtsp_viewers_refused_total";
    /// RTSP sessions created (an engine event).
    pub const RTSP_SESSIONS_CREATED_TOTAL: &str = "sluice_rtsp_sessions_created_total";
    /// RTP packets sent late (an engine event).
    pub const RTP_LATE_SENDS_TOTAL: &str = "sluice_rtp_late_sends_total";
    /// Whole frames dropped from viewers' queues (an engine event).
    pub const RTP_FRAMES_DROPPED_TOTAL: &str = "sluice_rtp_frames_dropped_total";
    /// RTP packets those drops took (an engine event).
    pub const RTP_PACKETS_DROPPED_TOTAL: &str = "sluice_rtp_packets_dropped_total";
    /// RTP packets sent (an engine event).
    pub const RTP_PACKETS_SENT_TOTAL: &str = "sluice_rtp_packets_sent_total";
    /// RTP bytes sent (an engine event).
    pub const RTP_BYTES_SENT_TOTAL: &str = "sluice_rtp_bytes_sent_total";
    /// Slices found in the cache.
    pub const CACHE_HITS_TOTAL: &str = "sluice_cache_hits_total";
    /// Slices fetched from the origin for a request.
    pub const CACHE_MISSES_TOTAL: &str = "sluice_cache_misses_total";
    /// Bytes served from the cache and fetched from the origin, by `source`.
    pub const CACHE_BYTES_TOTAL: &str = "sluice_cache_bytes_total";
    /// Requests made to the object store.
    pub const ORIGIN_REQUESTS_TOTAL: &str = "sluice_origin_requests_total";
    /// Summary: time spent in requests to the object store.
    pub const ORIGIN_REQUEST_SECONDS: &str = "sluice_origin_request_seconds";
    /// Log lines dropped.
    pub const LOG_LINES_DROPPED_TOTAL: &str = "sluice_log_lines_dropped_total";
    /// The standard process CPU counter every Prometheus client exports.
    pub const PROCESS_CPU_SECONDS_TOTAL: &str = "process_cpu_seconds_total";
    /// The standard resident memory gauge.
    pub const PROCESS_RESIDENT_MEMORY_BYTES: &str = "process_resident_memory_bytes";

    /// Every name above, for tests that check the writer still exports them.
    pub const ALL: [&str; 25] = [
        HTTP_RESPONSES_TOTAL,
        HTTP_RESPONSE_BYTES_TOTAL,
        HTTP_RESPONSE_DURATION_SECONDS,
        HTTP_REQUESTS_REFUSED_TOTAL,
        CONNECTIONS_OPEN,
        CONNECTIONS_REJECTED_TOTAL,
        CONNECTIONS_SHED_TOTAL,
        SYSCALLS_TOTAL,
        RTSP_STREAM_VIEWERS,
        RTSP_LOOP_BUSY_RATIO,
        RTSP_VIEWERS_REFUSED_TOTAL,
        RTSP_SESSIONS_CREATED_TOTAL,
        RTP_LATE_SENDS_TOTAL,
        RTP_FRAMES_DROPPED_TOTAL,
        RTP_PACKETS_DROPPED_TOTAL,
        RTP_PACKETS_SENT_TOTAL,
        RTP_BYTES_SENT_TOTAL,
        CACHE_HITS_TOTAL,
        CACHE_MISSES_TOTAL,
        CACHE_BYTES_TOTAL,
        ORIGIN_REQUESTS_TOTAL,
        ORIGIN_REQUEST_SECONDS,
        LOG_LINES_DROPPED_TOTAL,
        PROCESS_CPU_SECONDS_TOTAL,
        PROCESS_RESIDENT_MEMORY_BYTES,
    ];
}

/// One sample line: its series (name and labels as written), and its value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<'a> {
    /// The metric name.
    pub name: &'a str,
    /// What stands between the braces, escapes kept (empty without labels).
    pub labels: &'a str,
    /// Name and labels as written: `name{k="v"}`.
    pub series: &'a str,
    /// The value.
    pub value: f64,
}

impl<'a> Sample<'a> {
    /// The sample on `line`; `None` for comments, blank lines and lines that are not a sample.
    /// A timestamp after the value is allowed and ignored.
    pub fn parse(line: &'a str) -> Option<Sample<'a>> {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let name_end = line.find(|c: char| c == '{' || c.is_whitespace())?;
        let name = &line[..name_end];
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            return None;
        }
        let (labels, rest) = match line[name_end..].strip_prefix('{') {
            Some(after) => {
                let close = closing_brace(after)?;
                (&after[..close], &after[close + 1..])
            }
            None => ("", &line[name_end..]),
        };
        let series = line[..line.len() - rest.len()].trim_end();
        let mut fields = rest.split_whitespace();
        let value = parse_value(fields.next()?)?;
        if fields.next().is_some_and(|t| t.parse::<i64>().is_err()) || fields.next().is_some() {
            return None;
        }
        Labels(labels).all(|l| l.is_some()).then_some(Sample { name, labels, series, value })
    }

    /// The value of label `key`, unescaped; `None` when the series has no such label.
    pub fn label(&self, key: &str) -> Option<Cow<'a, str>> {
        Labels(self.labels).flatten().find(|(k, _)| *k == key).map(|(_, v)| v)
    }

    /// The labels, in the order written, values unescaped.
    pub fn label_pairs(&self) -> impl Iterator<Item = (&'a str, Cow<'a, str>)> {
        Labels(self.labels).flatten()
    }
}

/// Where the `}` closing a label set stands in `after` (the text after its `{`), skipping quoted
/// values and their escapes.
fn closing_brace(after: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in after.char_indices() {
        match (quoted, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (_, false, '"') => quoted = !quoted,
            (false, _, '}') => return Some(i),
            _ => {}
        }
    }
    None
}

/// A sample value: a float, or Prometheus's spellings of the infinities and NaN.
fn parse_value(text: &str) -> Option<f64> {
    match text {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => text.parse().ok(),
    }
}

/// The `k="v"` pairs of a label set; an item is `None` where the text is not a label.
struct Labels<'a>(&'a str);

impl<'a> Iterator for Labels<'a> {
    type Item = Option<(&'a str, Cow<'a, str>)>;

    fn next(&mut self) -> Option<Self::Item> {
        let text = self.0.trim_start_matches([',', ' ']);
        if text.is_empty() {
            return None;
        }
        let Some((key, after)) = text.split_once("=\"") else {
            self.0 = "";
            return Some(None);
        };
        let mut escaped = false;
        let end = after.char_indices().find_map(|(i, c)| {
            let close = c == '"' && !escaped;
            escaped = c == '\\' && !escaped;
            close.then_some(i)
        });
        let Some(end) = end else {
            self.0 = "";
            return Some(None);
        };
        self.0 = &after[end + 1..];
        let key = key.trim();
        let valid = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        Some(valid.then(|| (key, unescape(&after[..end]))))
    }
}

/// A label value with its `\\`, `\"` and `\n` escapes undone.
fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            (c, false) => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The samples of a whole text, in order; lines that are not samples are skipped.
pub fn samples(text: &str) -> impl Iterator<Item = Sample<'_>> {
    text.lines().filter_map(Sample::parse)
}

/// One scrape of `/metrics`: every sample by its series as written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Series → (value, length of its name, length of its labels).
    values: HashMap<String, (f64, usize, usize)>,
}

impl Scrape {
    /// The samples of `text`.
    pub fn parse(text: &str) -> Scrape {
        let entry = |s: Sample<'_>| (s.series.to_string(), (s.value, s.name.len(), s.labels.len()));
        Scrape { values: samples(text).map(entry).collect() }
    }

    /// The value of `series` written exactly so (`name` or `name{k="v"}`).
    pub fn get(&self, series: &str) -> Option<f64> {
        self.values.get(series).map(|(value, _, _)| *value)
    }

    /// The values of metric `name` summed over its labels; `None` when it has no sample.
    pub fn sum(&self, name: &str) -> Option<f64> {
        self.samples().filter(|s| s.name == name).map(|s| s.value).reduce(|a, b| a + b)
    }

    /// Each sample of metric `name` by its value of `label` (unescaped); samples without the
    /// label are left out.
    pub fn by_label(&self, name: &str, label: &str) -> Vec<(String, f64)> {
        self.samples()
            .filter(|s| s.name == name)
            .filter_map(|s| Some((s.label(label)?.into_owned(), s.value)))
            .collect()
    }

    fn samples(&self) -> impl Iterator<Item = Sample<'_>> {
        self.values.iter().map(|(series, &(value, name_len, labels_len))| {
            let labels = if labels_len > 0 { &series[name_len + 1..name_len + 1 + labels_len] } else { "" };
            Sample { name: &series[..name_len], labels, series, value }
        })
    }
}

/// `name{k="v",…}` with each value escaped as the text format requires, as a writer would write
/// it and as [`Scrape::get`] looks it up.
pub fn series(name: &str, labels: &[(&str, &str)]) -> String {
    if labels.is_empty() {
        return name.to_string();
    }
    let pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| {
            format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n"))
        })
        .collect();
    format!("{name}{{{}}}", pairs.join(","))
}

/// The fuzz property: arbitrary bytes never panic the reader, a sample's series written again
/// with its value reads back as the same sample, labels re-escaped give the same series, and
/// reading line by line gives what reading the whole text gives.
#[doc(hidden)]
pub fn fuzz_metrics_text(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let whole: Vec<Sample<'_>> = samples(&text).collect();
    let by_line: Vec<Sample<'_>> = text.lines().filter_map(Sample::parse).collect();
    assert_eq!(whole.len(), by_line.len());
    for sample in &whole {
        let again = format!("{} {}", sample.series, sample.value);
        let reread = Sample::parse(&again).unwrap_or_else(|| panic!("{again:?} does not read back"));
        assert_eq!((reread.name, reread.labels), (sample.name, sample.labels));
        assert!(reread.value == sample.value || (reread.value.is_nan() && sample.value.is_nan()));
        let pairs: Vec<(&str, Cow<'_, str>)> = sample.label_pairs().collect();
        let borrowed: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_ref())).collect();
        let rewritten = series(sample.name, &borrowed);
        let line = format!("{rewritten} 1");
        let reparsed = Sample::parse(&line).unwrap_or_else(|| panic!("{rewritten:?}"));
        assert!(reparsed.label_pairs().eq(sample.label_pairs()), "{rewritten:?} vs {:?}", sample.series);
    }
    let scrape = Scrape::parse(&text);
    for sample in &whole {
        assert!(scrape.get(sample.series).is_some());
        assert!(scrape.sum(sample.name).is_some());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "# HELP sluice_http_responses_total HTTP responses by status class.\n\
# TYPE sluice_http_responses_total counter\n\
sluice_http_responses_total{class=\"2xx\"} 7\n\
sluice_http_responses_total{class=\"4xx\"} 2\n\
sluice_rtsp_stream_viewers{path=\"/a \\\"b\\\" c.mp4\"} 3\n\
sluice_http_response_duration_seconds_bucket{route=\"file\",class=\"2xx\",le=\"+Inf\"} 4\n\
process_cpu_seconds_total 1.5\n\
\n\
weird_line_without_value\n\
timestamped 2 1700000000000\n";

    #[test]
    fn samples_keep_series_as_written_and_skip_what_is_not_a_sample() {
        let all: Vec<Sample<'_>> = samples(TEXT).collect();
        assert_eq!(all.len(), 6);
        assert_eq!(all[0].series, "sluice_http_responses_total{class=\"2xx\"}");
        assert_eq!(all[0].name, names::HTTP_RESPONSES_TOTAL);
        assert_eq!(all[4].series, "process_cpu_seconds_total");
        assert_eq!(all[5].value, 2.0);
    }

    #[test]
    fn labels_are_read_with_their_escapes_undone_even_with_spaces() {
        let s = samples(TEXT).nth(2).unwrap_or_else(|| panic!("no third sample"));
        assert_eq!(s.label("path").as_deref(), Some("/a \"b\" c.mp4"));
        assert_eq!(s.value, 3.0);
        let h = samples(TEXT).nth(3).unwrap_or_else(|| panic!("no fourth sample"));
        let keys: Vec<&str> = h.label_pairs().map(|(k, _)| k).collect();
        assert_eq!(keys, ["route", "class", "le"]);
        assert_eq!(h.label("le").as_deref(), Some("+Inf"));
    }

    #[test]
    fn a_scrape_looks_up_series_sums_names_and_groups_by_label() {
        let scrape = Scrape::parse(TEXT);
        assert_eq!(scrape.get(&series(names::HTTP_RESPONSES_TOTAL, &[("class", "4xx")])), Some(2.0));
        assert_eq!(scrape.get(names::PROCESS_CPU_SECONDS_TOTAL), Some(1.5));
        assert_eq!(scrape.get("absent"), None);
        assert_eq!(scrape.sum(names::HTTP_RESPONSES_TOTAL), Some(9.0));
        assert_eq!(scrape.sum("absent"), None);
        let mut classes = scrape.by_label(names::HTTP_RESPONSES_TOTAL, "class");
        classes.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(classes, [("2xx".to_string(), 7.0), ("4xx".to_string(), 2.0)]);
        assert_eq!(
            scrape.by_label(names::RTSP_STREAM_VIEWERS, "path"),
            [("/a \"b\" c.mp4".to_string(), 3.0)]
        );
    }

    #[test]
    fn malformed_lines_are_not_samples() {
        for line in ["x{a=\"b\" 1", "x{a=b} 1", "x 1 2 3", "x{} one", "{a=\"b\"} 1", "x y", "x{=\"v\"} 1"] {
            assert_eq!(Sample::parse(line), None, "{line}");
        }
        assert_eq!(Sample::parse("x{} 1").map(|s| s.value), Some(1.0));
        assert_eq!(Sample::parse("x +Inf").map(|s| s.value), Some(f64::INFINITY));
    }

    #[test]
    fn series_escapes_what_the_reader_unescapes() {
        let written = series("m", &[("path", "a\\b\"c\nd")]);
        assert_eq!(written, "m{path=\"a\\\\b\\\"c\\nd\"}");
        let line = format!("{written} 1");
        let s = Sample::parse(&line).unwrap_or_else(|| panic!("unreadable"));
        assert_eq!(s.label("path").as_deref(), Some("a\\b\"c\nd"));
        fuzz_metrics_text(TEXT.as_bytes());
    }
}
