//! "What this shows": short sentences generated from a run's rows, of the kinds an experiment
//! declares (`[[finding]]`):
//!
//! - `best`: per point, the best sluice configuration on a metric against the best peer, as a ratio;
//! - `flat`: how a metric changes from the first point of the sweep to the last, for the best sluice
//!   configuration and for each peer (e.g. p95 at 1 MB against 64 KB);
//! - `ratio`: one server against another on a metric, per point;
//! - `success`: which rows fell short of 100% success;
//! - `latency_overhead`: for `latency?ms=X` targets, p99 minus X, the server's own delay;
//! - `perfect` (RTSP): per transport, the highest client count each server sent every sample to
//!   every client, and its first loss with what the server and the generator were doing then;
//! - `concurrent` (RTSP): whether every row's clients connected within the source report's 5 s.
//!
//! It only reads rows; the numbers come from `results`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::experiment::FindingSpec;
use crate::metrics::{higher_is_better, metric_heading};
use crate::results::{ExperimentResults, Row, RowOutcome};

/// A first loss during which the rest of the machine used more than this share of a core (%) is
/// said to have competed: E5 re-run on 2026-11-24 while other sessions ran test suites lost at 100
/// and 150 UDP viewers that a quieter run sent perfectly to 300.
const OTHER_CPU_NOTE_PCT: f64 = 10.0;

/// Every finding of a run, in declaration order, then the rows that did not run.
pub fn generate(results: &ExperimentResults) -> Vec<String> {
    let mut out = Vec::new();
    for spec in &results.experiment.finding {
        let metric = spec.metric.as_deref().unwrap_or("req_per_s");
        match spec.kind.as_str() {
            "best" => best(results, metric, &mut out),
            "flat" => flat(results, metric, &mut out),
            "ratio" => ratio(results, spec, metric, &mut out),
            "success" => success(results, &mut out),
            "latency_overhead" => latency_overhead(results, &mut out),
            "perfect" => perfect(results, &mut out),
            "concurrent" => concurrent(results, &mut out),
            "uploads" => uploads(results, &mut out),
            other => out.push(format!("(unknown finding kind `{other}`)")),
        }
    }
    let mut not_run: BTreeMap<String, String> = BTreeMap::new();
    for r in &results.rows {
        if let RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } = &r.outcome {
            not_run.entry(r.server.clone()).or_insert_with(|| format!("{} ({reason})", r.status()));
        }
    }
    for (server, why) in not_run {
        out.push(format!("{server}: not measured, {why}."));
    }
    out
}

fn value(r: &Row, metric: &str) -> Option<f64> {
    r.metric(metric)
}

fn fmt(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The best row of `rows` on `metric`.
fn pick<'a>(rows: impl Iterator<Item = &'a Row>, metric: &str) -> Option<(&'a Row, f64)> {
    let better = higher_is_better(metric);
    rows.filter_map(|r| Some((r, value(r, metric)?))).reduce(|a, b| {
        let b_wins = if better { b.1 > a.1 } else { b.1 < a.1 };
        if b_wins {
            b
        } else {
            a
        }
    })
}

/// The points of the first sweep in order, as (label, rows at it).
fn points<'a>(results: &'a ExperimentResults, sweep: &'a str) -> Vec<(String, Vec<&'a Row>)> {
    let mut out: Vec<(String, Vec<&Row>)> = Vec::new();
    for r in results.rows_of(sweep) {
        let label = r.point.x_label();
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, v)) => v.push(r),
            None => out.push((label, vec![r])),
        }
    }
    out
}

fn first_sweep(results: &ExperimentResults) -> &str {
    &results.experiment.sweep[0].name
}

/// Upload rows (E6), one line per point of every sweep: each server's mean time, objects/s and
/// bytes stored as % of plain, and on a concurrency point its multiple of the sequential rate.
fn uploads(results: &ExperimentResults, out: &mut Vec<String>) {
    for sweep in &results.experiment.sweep {
        for (label, rows) in points(results, &sweep.name) {
            let parts: Vec<String> = rows
                .iter()
                .filter_map(|r| {
                    let mut part = format!(
                        "{} {} ms, {} objects/s, stored {}%",
                        r.server,
                        fmt(value(r, "avg_ms")?),
                        fmt(value(r, "objects_per_s")?),
                        fmt(value(r, "stored_pct")?)
                    );
                    if let Some(m) = value(r, "sequential_multiple") {
                        part.push_str(&format!(", {}× its sequential rate", fmt(m)));
                    }
                    Some(part)
                })
                .collect();
            if !parts.is_empty() {
                out.push(format!("{} at {label}: {}.", sweep.name, parts.join("; ")));
            }
        }
    }
}

fn best(results: &ExperimentResults, metric: &str, out: &mut Vec<String>) {
    let heading = metric_heading(metric);
    for (label, rows) in points(results, first_sweep(results)) {
        let Some((s, sv)) = pick(rows.iter().copied().filter(|r| !r.peer), metric) else { continue };
        let mut line =
            format!("At {label}, the best sluice configuration on {heading} is {} ({})", s.server, fmt(sv));
        if let Some((p, pv)) = pick(rows.iter().copied().filter(|r| r.peer), metric) {
            if pv > 0.0 {
                let word = if higher_is_better(metric) { "higher" } else { "lower is better" };
                line.push_str(&format!(
                    "; the best peer is {} ({}): sluice / peer = {:.2}× ({word})",
                    p.server,
                    fmt(pv),
                    sv / pv
                ));
            }
        }
        line.push('.');
        out.push(line);
    }
}

fn flat(results: &ExperimentResults, metric: &str, out: &mut Vec<String>) {
    let pts = points(results, first_sweep(results));
    let (Some((first_label, first)), Some((last_label, last))) = (pts.first(), pts.last()) else { return };
    if pts.len() < 2 {
        return;
    }
    // The best sluice configuration by throughput over the whole sweep.
    let mut totals: BTreeMap<&str, f64> = BTreeMap::new();
    for (_, rows) in &pts {
        for r in rows.iter().filter(|r| !r.peer) {
            *totals.entry(&r.server).or_default() += value(r, "req_per_s").unwrap_or(0.0);
        }
    }
    let best = totals.iter().max_by(|a, b| a.1.total_cmp(b.1)).map(|(s, _)| *s);
    let peers: Vec<&str> = first.iter().filter(|r| r.peer).map(|r| r.server.as_str()).collect();
    for server in best.into_iter().chain(peers) {
        let at = |rows: &[&Row]| rows.iter().find(|r| r.server == server).and_then(|r| value(r, metric));
        if let (Some(a), Some(b)) = (at(first), at(last)) {
            let change = if a > 0.0 { (b - a) / a * 100.0 } else { 0.0 };
            let verdict = if b <= a { "no worse" } else { "worse" };
            out.push(format!(
                "{server}: {} at {last_label} is {} against {} at {first_label} ({change:+.0}%, {verdict}).",
                metric_heading(metric),
                fmt(b),
                fmt(a)
            ));
        }
    }
}

fn ratio(results: &ExperimentResults, spec: &FindingSpec, metric: &str, out: &mut Vec<String>) {
    let (Some(a), Some(b)) = (spec.a.as_deref(), spec.b.as_deref()) else { return };
    let mut parts = Vec::new();
    for (label, rows) in points(results, first_sweep(results)) {
        if spec.min_vus.is_some_and(|m| rows.first().and_then(|r| r.point.vus).unwrap_or(0) < m) {
            continue;
        }
        let get = |name: &str| rows.iter().find(|r| r.server == name).and_then(|r| value(r, metric));
        if let (Some(x), Some(y)) = (get(a), get(b)) {
            if y > 0.0 {
                parts.push(format!("{label}: {:.2}×", x / y));
            }
        }
    }
    if !parts.is_empty() {
        out.push(format!("{a} / {b}, {}: {}.", metric_heading(metric), parts.join(", ")));
    }
}

fn success(results: &ExperimentResults, out: &mut Vec<String>) {
    let mut short: Vec<String> = Vec::new();
    let mut measured = 0;
    for r in &results.rows {
        let Some(f) = r.figures() else { continue };
        measured += 1;
        if f.ok < f.requests {
            short.push(format!("{} at {} ({:.2}%)", r.server, r.point.x_label(), f.success_pct));
        }
    }
    if measured == 0 {
        return;
    }
    if short.is_empty() {
        out.push(format!("Every measured row ({measured}) answered 100% of its requests with the expected status and full body."));
    } else {
        out.push(format!("Rows below 100% success: {}.", short.join("; ")));
    }
}

fn latency_overhead(results: &ExperimentResults, out: &mut Vec<String>) {
    // Worst p99 − X per server over every `latency?ms=X` target it served.
    let mut worst: BTreeMap<&str, (f64, String)> = BTreeMap::new();
    for r in &results.rows {
        let Some(load) = r.load() else { continue };
        for t in &load.targets {
            let Some(ms) = requested_wait_ms(&t.url) else { continue };
            if t.latency.count == 0 {
                continue;
            }
            let over = t.latency.p99_us as f64 / 1000.0 - ms;
            let e = worst.entry(&r.server).or_insert((f64::MIN, String::new()));
            if over > e.0 {
                *e = (over, format!("latency?ms={ms}"));
            }
        }
    }
    if worst.is_empty() {
        return;
    }
    let parts: Vec<String> = worst.iter().map(|(s, (v, what))| format!("{s} {v:+.1} ms ({what})")).collect();
    out.push(format!(
        "p99 minus the requested wait (the server's own delay), worst target per server: {}.",
        parts.join("; ")
    ));
}

/// Per RTSP sweep: one line with every server's highest client count with perfect sending, then
/// one line per server about its first loss (or that it had none).
fn perfect(results: &ExperimentResults, out: &mut Vec<String>) {
    for sweep in &results.experiment.sweep {
        let mut servers: Vec<&str> = Vec::new();
        for r in results.rows_of(&sweep.name) {
            if !servers.contains(&r.server.as_str()) {
                servers.push(&r.server);
            }
        }
        let mut summary = Vec::new();
        let mut details = Vec::new();
        for server in servers {
            let mut measured: Vec<(usize, &crate::results::RtspFigures)> = results
                .rows_of(&sweep.name)
                .filter(|r| r.server == server)
                .filter_map(|r| Some((r.point.clients?, r.rtsp()?)))
                .collect();
            if measured.is_empty() {
                continue;
            }
            measured.sort_by_key(|(c, _)| *c);
            let highest = measured.iter().filter(|(_, f)| f.all_perfect()).map(|(c, _)| *c).max();
            let top = measured.last().map_or(0, |(c, _)| *c);
            let first_loss = measured.iter().find(|(_, f)| !f.all_perfect());
            summary
                .push(format!("{server} {}", highest.map_or_else(|| "none".to_string(), |h| h.to_string())));
            match first_loss {
                None => details.push(format!(
                    "{}: {server} sent every sample to every client at every point run, up to {top} clients ({}no loss seen).",
                    sweep.name,
                    if sweep.max_clients.is_some_and(|m| top >= m) { "the sweep's upper bound; " } else { "" }
                )),
                Some((n, f)) => {
                    let dropped = f
                        .server
                        .and_then(|c| c.frames_dropped)
                        .map(|d| format!(", {d} frames dropped by the server"))
                        .unwrap_or_default();
                    let udp = match (f.transport, f.udp_rcvbuf_drops) {
                        (sluice_load::rtsp::RtspTransport::Udp, Some(d)) => {
                            format!(", {d} UDP datagrams dropped at full receive buffers")
                        }
                        _ => String::new(),
                    };
                    let ceiling = 100.0 * f.generator_cpus.max(1) as f64;
                    let mut notes = String::new();
                    if f.generator_cpu_pct >= 0.9 * ceiling {
                        notes.push_str(
                            " The generator's core was saturated there: the loss may be the generator's, not the server's.",
                        );
                    }
                    let server_dropped = f.server.and_then(|c| c.frames_dropped);
                    if f.transport == sluice_load::rtsp::RtspTransport::Udp
                        && f.stalled_clients == 0
                        && f.failed_clients == 0
                        && server_dropped.unwrap_or(0) == 0
                        && f.udp_rcvbuf_drops.is_some_and(|d| d >= f.video_lost_packets)
                    {
                        let server_side = if server_dropped.is_some() {
                            "and the server dropped no frames"
                        } else {
                            "(the server's own drops are not known)"
                        };
                        let _ = write!(
                            notes,
                            " No more video packets were lost than datagrams were dropped at full receive buffers (mostly the viewers' sockets) {server_side}: a receiving-side limit."
                        );
                    }
                    if let Some(h) = highest.filter(|h| *h > *n) {
                        let _ = write!(
                            notes,
                            " It sent perfectly at higher counts, up to {h}: this loss did not recur (noise on a shared machine, or a transient)."
                        );
                    }
                    if f.other_cpu_pct > OTHER_CPU_NOTE_PCT {
                        let _ = write!(
                            notes,
                            " The rest of the machine used {:.0}% of a core during the row: the loss may be the competition's.",
                            f.other_cpu_pct
                        );
                    }
                    let saturated = notes;
                    details.push(format!(
                        "{}: {server}'s first loss at {n} clients: {} of {n} perfect, mean {:.1} of {} samples (stdev {:.1}), {} video packets lost{udp}, {} clients failed, {} stalled (no media from more than 5 s before the end){dropped}; server CPU {:.0}%, generator CPU {:.0}%.{saturated}",
                        sweep.name,
                        f.perfect_clients,
                        f.samples_mean,
                        f.expected_samples,
                        f.samples_stdev,
                        f.video_lost_packets,
                        f.failed_clients,
                        f.stalled_clients,
                        f.server_cpu_pct,
                        f.generator_cpu_pct,
                    ));
                }
            }
        }
        if !summary.is_empty() {
            out.push(format!(
                "{}, highest client count with perfect sending: {}.",
                sweep.name,
                summary.join(", ")
            ));
            out.append(&mut details);
        }
    }
}

/// Whether the clients of every RTSP row connected within the source report's 5 s.
fn concurrent(results: &ExperimentResults, out: &mut Vec<String>) {
    let measured: Vec<&Row> = results.rows.iter().filter(|r| r.rtsp().is_some()).collect();
    let late: Vec<String> = measured
        .iter()
        .filter_map(|r| {
            let f = r.rtsp()?;
            (f.connect_spread_s >= 5.0).then(|| {
                format!(
                    "{} at {} {} ({:.1} s)",
                    r.server,
                    r.point.sweep,
                    r.point.x_label(),
                    f.connect_spread_s
                )
            })
        })
        .collect();
    let widest = measured.iter().filter_map(|r| r.rtsp()).map(|f| f.connect_spread_s).fold(0.0, f64::max);
    if measured.is_empty() {
        return;
    }
    if late.is_empty() {
        out.push(format!(
            "In every measured row the first and the last client to start playing did so within {widest:.1} s: concurrent by the source report's definition (under 5 s)."
        ));
    } else {
        out.push(format!(
            "Rows whose clients took 5 s or more from the first to the last PLAY (not concurrent by the source report's definition): {}.",
            late.join("; ")
        ));
    }
}

/// `X` of a `…latency?ms=X` URL.
fn requested_wait_ms(url: &str) -> Option<f64> {
    let (_, query) = url.split_once("latency?")?;
    query.split('&').find_map(|kv| kv.strip_prefix("ms=")).and_then(|v| v.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::Experiment;
    use crate::results::{Measurement, RtspFigures, RtspServerCounters};
    use sluice_load::rtsp::{RtspConfig, RtspReport, RtspTransport};

    fn rtsp_row(server: &str, transport: RtspTransport, clients: usize, perfect: usize) -> Row {
        let e = Experiment::find("rtsp-fanout").unwrap();
        let sweep = e.sweep.iter().find(|s| s.transport == Some(transport)).unwrap();
        let point = e.points(false, 2).into_iter().find(|p| p.sweep == sweep.name).unwrap();
        let figures = RtspFigures {
            transport,
            clients,
            playing_clients: clients,
            perfect_clients: perfect,
            perfect_pct: perfect as f64 / clients as f64 * 100.0,
            failed_clients: 0,
            failures: Default::default(),
            stalled_clients: 0,
            expected_samples: 900,
            samples_mean: if perfect == clients { 900.0 } else { 890.0 },
            samples_stdev: 0.0,
            samples_min: 880,
            samples_max: 900,
            lost_packets: 10,
            video_lost_packets: 10,
            clients_with_loss: clients - perfect,
            mbit_per_s: 1000.0,
            duration_s: 34.0,
            connect_spread_s: 4.0,
            cpu_s: 10.0,
            server_cpu_pct: 30.0,
            generator_cpu_s: 10.0,
            generator_cpu_pct: 30.0,
            generator_cpus: 1,
            other_cpu_pct: 2.0,
            server: Some(RtspServerCounters { frames_dropped: Some(0), ..Default::default() }),
            udp_rcvbuf_drops: Some(20),
            ceiling_delivered_pct: None,
            ceiling_share_pct: None,
        };
        let report = RtspReport::build(
            &RtspConfig::new("rtsp://127.0.0.1:1/x.mp4", clients),
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(34),
            vec![],
        );
        Row {
            server: server.into(),
            peer: server.starts_with("GStreamer"),
            point: crate::experiment::Point { clients: Some(clients), ..point },
            server_command: String::new(),
            load_command: String::new(),
            server_cpus: vec![1],
            load_cpus: vec![0],
            round: None,
            budget: None,
            outcome: RowOutcome::Measured {
                measurement: Measurement::Rtsp { rtsp: Box::new(figures), load: Box::new(report) },
            },
        }
    }

    /// `row` with the rest of the machine at `pct`% of a core.
    fn competing(mut row: Row, pct: f64) -> Row {
        if let RowOutcome::Measured { measurement: Measurement::Rtsp { rtsp, .. } } = &mut row.outcome {
            rtsp.other_cpu_pct = pct;
        }
        row
    }

    #[test]
    fn a_first_loss_while_the_machine_was_busy_says_so() {
        use RtspTransport::Udp;
        let quiet = ExperimentResults::for_tests(
            Experiment::find("E5").unwrap(),
            vec![rtsp_row("sluice epoll", Udp, 50, 50), rtsp_row("sluice epoll", Udp, 100, 90)],
        );
        let busy = ExperimentResults::for_tests(
            Experiment::find("E5").unwrap(),
            vec![
                rtsp_row("sluice epoll", Udp, 50, 50),
                competing(rtsp_row("sluice epoll", Udp, 100, 90), 40.0),
            ],
        );
        let says = |r: &ExperimentResults| {
            generate(r).iter().any(|l| l.contains("The rest of the machine used 40% of a core"))
        };
        assert!(!says(&quiet));
        assert!(says(&busy), "{:?}", generate(&busy));
    }

    #[test]
    fn perfect_sending_per_transport_with_the_first_loss() {
        use RtspTransport::{Tcp, Udp};
        let rows = vec![
            rtsp_row("sluice uring", Udp, 50, 40),
            rtsp_row("GStreamer rtsp-server", Udp, 50, 0),
            rtsp_row("sluice uring", Tcp, 50, 50),
            rtsp_row("sluice uring", Tcp, 100, 99),
            rtsp_row("sluice uring", Tcp, 150, 150),
            rtsp_row("GStreamer rtsp-server", Tcp, 50, 50),
        ];
        let results = ExperimentResults::for_tests(Experiment::find("E5").unwrap(), rows);
        let f = generate(&results);
        assert_eq!(f[0], "RTP over UDP, highest client count with perfect sending: sluice uring none, GStreamer rtsp-server none.");
        assert!(
            f[1].starts_with("RTP over UDP: sluice uring's first loss at 50 clients: 40 of 50 perfect"),
            "{}",
            f[1]
        );
        assert!(
            f[1].contains("a receiving-side limit") && f[1].contains("and the server dropped no frames"),
            "{}",
            f[1]
        );
        assert_eq!(f[3], "RTP over TCP, highest client count with perfect sending: sluice uring 150, GStreamer rtsp-server 50.");
        assert!(
            f[4].contains("first loss at 100 clients") && f[4].contains("up to 150: this loss did not recur"),
            "{}",
            f[4]
        );
        assert!(f[5].contains("GStreamer rtsp-server sent every sample to every client at every point run, up to 50 clients (no loss seen)"), "{}", f[5]);
        assert!(f[6].contains("within 4.0 s"), "{}", f[6]);
    }

    #[test]
    fn requested_waits_come_from_the_url() {
        assert_eq!(requested_wait_ms("http://h/bench/latency?ms=200"), Some(200.0));
        assert_eq!(requested_wait_ms("http://h/bench/mixed"), None);
        assert_eq!(fmt(1234.5), "1234");
        assert_eq!(fmt(1.234), "1.23");
    }
}
