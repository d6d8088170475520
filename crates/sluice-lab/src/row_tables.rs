//! A report's tables of every row: each figure, failures or errors by kind, the server's
//! counters and both commands (HTTP and RTSP rows), and the latency per endpoint of multi-target
//! runs. HTML only; the declared tables are `pivot`'s.

use std::fmt::Write as _;

use sluice_charts::escape;

use crate::pivot::cell;
use crate::results::{ExperimentResults, Row, RowOutcome};

/// Latency per endpoint of each row that loaded more than one target (E4's latency profile).
pub fn per_endpoint_table(h: &mut String, r: &ExperimentResults) {
    let rows: Vec<&Row> =
        r.rows.iter().filter(|row| row.load().is_some_and(|l| l.targets.len() > 1)).collect();
    if rows.is_empty() {
        return;
    }
    h.push_str("<table class=\"lab-table\"><caption>Latency per endpoint (ms; open model: from each request's scheduled time)</caption><tr><th>server</th><th>profile</th><th>endpoint</th><th>ok</th><th>failed</th><th>dropped</th><th>p50</th><th>p95</th><th>p99</th><th>max</th></tr>");
    for row in rows {
        let Some(load) = row.load() else { continue };
        for t in &load.targets {
            let path = t
                .url
                .split_once("//")
                .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
                .unwrap_or(&t.url);
            let ms = |us: u64| format!("{:.1}", us as f64 / 1000.0);
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&row.server),
                escape(&row.point.x_label()),
                escape(path),
                t.ok,
                t.failed,
                t.dropped,
                ms(t.latency.p50_us),
                ms(t.latency.p95_us),
                ms(t.latency.p99_us),
                ms(t.latency.max_us)
            );
        }
    }
    h.push_str("</table>");
}

/// Every RTSP row: all figures, failures by kind, the server's counters, commands.
pub fn rtsp_rows_table(h: &mut String, r: &ExperimentResults) {
    h.push_str("<details><summary>Every row: all figures, failures by kind, the server's counters, commands</summary><div class=\"scroll\"><table class=\"lab-table\"><caption>Every row</caption><tr><th>server</th><th>transport</th><th>clients</th><th>status</th><th>perfect</th><th>playing</th><th>expected samples</th><th>mean</th><th>stdev</th><th>min</th><th>max</th><th>lost packets (video)</th><th>clients with loss</th><th>stalled clients</th><th>UDP receive-buffer drops</th><th>Mbit/s</th><th>connect spread s</th><th>server CPU s (%)</th><th>generator CPU %</th><th>server counters</th><th>failures</th><th>commands</th></tr>");
    for row in &r.rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&row.server),
            row.point.transport.map(|t| t.name()).unwrap_or(""),
            row.point.x_label(),
            row.status()
        );
        match (&row.outcome, row.rtsp()) {
            (_, Some(f)) => {
                let failures: Vec<String> = sluice_load::rtsp::FailureKind::ALL
                    .iter()
                    .map(|&k| (k.name(), f.failures.get(k)))
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let counters = match f.server {
                    Some(c) => {
                        let n = |v: Option<u64>| v.map_or_else(|| "–".to_string(), |v| v.to_string());
                        format!(
                            "frames dropped {}, packets dropped {}, packets sent {}, bytes sent {}",
                            n(c.frames_dropped),
                            n(c.packets_dropped),
                            n(c.packets_sent),
                            n(c.bytes_sent)
                        )
                    }
                    None => "–".into(),
                };
                let _ = write!(
                    h,
                    "<td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{} ({})</td><td>{}</td><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1} ({:.0}%)</td><td>{:.0}% of {} core(s)</td><td>{}</td><td>{}</td>",
                    f.perfect_clients,
                    f.playing_clients,
                    f.expected_samples,
                    f.samples_mean,
                    f.samples_stdev,
                    f.samples_min,
                    f.samples_max,
                    f.lost_packets,
                    f.video_lost_packets,
                    f.clients_with_loss,
                    f.stalled_clients,
                    f.udp_rcvbuf_drops.map_or_else(|| "–".to_string(), |d| d.to_string()),
                    f.mbit_per_s,
                    f.connect_spread_s,
                    f.cpu_s,
                    f.server_cpu_pct,
                    f.generator_cpu_pct,
                    f.generator_cpus,
                    escape(&counters),
                    if failures.is_empty() { "none".to_string() } else { failures.join(", ") },
                );
            }
            (RowOutcome::Skipped { reason } | RowOutcome::Failed { reason }, None) => {
                let _ = write!(h, "<td colspan=\"17\">{}</td>", escape(reason));
            }
            _ => h.push_str("<td colspan=\"17\"></td>"),
        }
        let _ = write!(
            h,
            "<td><code>{}</code><br><code>{}</code></td></tr>",
            escape(&row.server_command),
            escape(&row.load_command)
        );
    }
    h.push_str("</table></div></details>");
}

/// Every HTTP row: all figures, the CPU budget, errors by kind, commands.
pub fn all_rows_table(h: &mut String, r: &ExperimentResults) {
    h.push_str("<details><summary>Every row: all figures, errors by kind, commands</summary><div class=\"scroll\"><table class=\"lab-table rows\"><caption>Every row</caption><tr><th>server</th><th>sweep</th><th>point</th><th>round</th><th>CPU budget (throttled periods, server CPU %)</th><th>status</th><th>requests</th><th>ok</th><th>success %</th><th>req/s</th><th>MB/s</th><th>avg</th><th>p50</th><th>p95</th><th>p99</th><th>max ms</th><th>CPU s</th><th>CPU s/GB</th><th>syscalls/req (by kind)</th><th>errors</th><th>commands</th></tr>");
    for row in &r.rows {
        let budget = row.budget.as_ref().map_or_else(
            || "–".to_string(),
            |b| {
                format!(
                    "{:.2} core ({} of {}, {:.0}%)",
                    b.cpus, b.throttling.nr_throttled, b.throttling.nr_periods, b.server_cpu_pct
                )
            },
        );
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            escape(&row.server),
            escape(&row.point.sweep),
            escape(&row.point.x_label()),
            row.round.map_or_else(|| "–".to_string(), |r| r.to_string()),
            budget,
            row.status()
        );
        match &row.outcome {
            RowOutcome::Measured { measurement: crate::results::Measurement::Http { figures: f, .. } } => {
                let kinds: Vec<String> =
                    f.syscalls_by_kind.iter().map(|(k, v)| format!("{k} {v:.2}")).collect();
                let errors: Vec<String> = sluice_load::ErrorKind::ALL
                    .iter()
                    .map(|&k| (k.name(), f.errors.get(k)))
                    .chain([("dropped", f.dropped)])
                    .filter(|(_, n)| *n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect();
                let _ = write!(
                    h,
                    "<td>{}</td><td>{}</td><td>{:.2}</td><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.1}</td><td>{:.2}</td><td>{}</td><td class=\"kinds\"><b>{}</b><br>{}</td><td>{}</td>",
                    f.requests,
                    f.ok,
                    f.success_pct,
                    cell(Some(f.req_per_s)),
                    cell(Some(f.mb_per_s)),
                    f.avg_ms,
                    f.p50_ms,
                    f.p95_ms,
                    f.p99_ms,
                    f.max_ms,
                    f.cpu_s,
                    cell(Some(f.cpu_s_per_gb)),
                    cell(f.syscalls_per_request),
                    kinds.iter().map(|k| escape(k)).collect::<Vec<_>>().join("<br>"),
                    if errors.is_empty() { "none".to_string() } else { errors.join(", ") },
                );
            }
            RowOutcome::Reference { mb_per_s } => {
                let _ =
                    write!(h, "<td colspan=\"14\">iperf3 loopback, one TCP stream: {mb_per_s:.0} MB/s</td>");
            }
            RowOutcome::Measured { .. } => h.push_str("<td colspan=\"14\"></td>"),
            RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => {
                let _ = write!(h, "<td colspan=\"14\">{}</td>", escape(reason));
            }
        }
        let _ = write!(
            h,
            "<td class=\"cmd\"><code>{}</code><code>{}</code></td></tr>",
            escape(&row.server_command),
            escape(&row.load_command)
        );
    }
    h.push_str("</table></div></details>");
}
