//! The metrics a lab row can have, by name: their headings in tables and charts, and which way
//! is better. Names only: the values are the figures' (`figures`, `rtsp_figures`).

/// Metrics a table or chart can show: name and heading.
pub const METRICS: [(&str, &str); 22] = [
    ("req_per_s", "req/s"),
    ("mb_per_s", "MB/s"),
    ("avg_ms", "avg ms"),
    ("p50_ms", "p50 ms"),
    ("p95_ms", "p95 ms"),
    ("p99_ms", "p99 ms"),
    ("max_ms", "max ms"),
    ("success_pct", "success %"),
    ("ok", "ok"),
    ("failed", "failed"),
    ("dropped", "dropped"),
    ("cpu_s", "server CPU s"),
    ("cpu_s_per_gb", "CPU s/GB"),
    ("cpu_us_per_request", "CPU µs/req"),
    ("syscalls_per_request", "syscalls/req"),
    ("scaling_pct", "% of linear"),
    ("bytes_received", "bytes"),
    ("origin_requests_per_1000", "origin req / 1000"),
    ("origin_mb_per_1000", "origin MB / 1000"),
    ("hit_ratio_pct", "cache hit %"),
    ("mb_per_cpu_s", "MB per CPU s"),
    ("origin_requests", "origin req"),
];

/// Metrics of an RTSP experiment's rows (see [`RtspFigures::metric`]): name and heading.
pub const RTSP_METRICS: [(&str, &str); 22] = [
    ("clients", "clients"),
    ("perfect_clients", "perfect clients"),
    ("perfect_pct", "perfect %"),
    ("playing_clients", "playing clients"),
    ("failed_clients", "failed clients"),
    ("stalled_clients", "stalled clients"),
    ("expected_samples", "expected samples"),
    ("samples_mean", "mean samples"),
    ("samples_stdev", "stdev samples"),
    ("samples_min", "min samples"),
    ("lost_packets", "lost packets"),
    ("video_lost_packets", "video packets lost"),
    ("mbit_per_s", "Mbit/s received"),
    ("cpu_s", "server CPU s"),
    ("server_cpu_pct", "server CPU %"),
    ("generator_cpu_pct", "generator CPU %"),
    ("other_cpu_pct", "rest of the machine CPU %"),
    ("frames_dropped", "server frames dropped"),
    ("udp_rcvbuf_drops", "UDP receive-buffer drops"),
    ("ceiling_delivered_pct", "matching ceiling delivered %"),
    ("ceiling_share_pct", "share of the matching ceiling %"),
    ("connect_spread_s", "connect spread s"),
];

/// Metrics of an upload experiment's rows (see [`UploadFigures::metric`]): name and heading.
pub const UPLOAD_METRICS: [(&str, &str); 11] = [
    ("objects_ok", "objects ok"),
    ("objects_failed", "objects failed"),
    ("retries", "retries"),
    ("avg_ms", "mean ms"),
    ("p95_ms", "p95 ms"),
    ("objects_per_s", "objects/s"),
    ("bytes_per_object", "bytes per object"),
    ("stored_bytes_per_object", "stored bytes per object"),
    ("stored_pct", "stored % of plain"),
    ("connections_opened", "connections opened"),
    ("sequential_multiple", "× the sequential rate"),
];

/// The heading of a metric.
pub fn metric_heading(name: &str) -> &str {
    METRICS
        .iter()
        .chain(RTSP_METRICS.iter())
        .chain(UPLOAD_METRICS.iter())
        .find(|(n, _)| *n == name)
        .map_or(name, |(_, h)| h)
}

/// Whether a bigger value of `metric` is better.
pub fn higher_is_better(metric: &str) -> bool {
    matches!(
        metric,
        "req_per_s"
            | "mb_per_s"
            | "success_pct"
            | "ok"
            | "scaling_pct"
            | "perfect_clients"
            | "perfect_pct"
            | "playing_clients"
            | "samples_mean"
            | "samples_min"
            | "mbit_per_s"
            | "objects_ok"
            | "objects_per_s"
            | "sequential_multiple"
    )
}
