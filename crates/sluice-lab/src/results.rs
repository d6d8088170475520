//! What a lab run found, as data: one [`Row`] per server × point with its figures (or the reason it
//! was skipped), the machine and versions, and the commands to run it again. It computes derived
//! figures from raw measurements and writes `results.json` and the CSVs; it measures nothing and
//! renders no HTML (`report`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sluice_load::rtsp::{EndReason, FailureCounts, FailureKind, RtspReport, RtspTransport};
use sluice_load::stats::{ErrorCounts, ErrorKind};
use sluice_load::Report;

use crate::error::LabError;
use crate::experiment::{Experiment, Point};
use crate::machine::Machine;

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

/// What one upload row measured: `sluice upload`'s report, and what the lab derives across rows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UploadFigures {
    /// The uploader's report (connections opened only through `sluice serve`: the S3 client
    /// pools its own and does not say).
    #[serde(flatten)]
    pub report: sluice_load::upload::UploadReport,
    /// objects/s over the same server's objects/s at concurrency 1 (concurrency sweeps).
    #[serde(default)]
    pub sequential_multiple: Option<f64>,
}

impl UploadFigures {
    /// A metric by name (see [`UPLOAD_METRICS`]).
    pub fn metric(&self, name: &str) -> Option<f64> {
        let r = &self.report;
        let per_object = |b: u64| (r.objects_ok > 0).then(|| b as f64 / r.objects_ok as f64);
        Some(match name {
            "objects_ok" => r.objects_ok as f64,
            "objects_failed" => r.failures.values().sum::<u64>() as f64,
            "retries" => r.retries as f64,
            "avg_ms" => r.latency_ms.mean,
            "p95_ms" => r.latency_ms.p95,
            "objects_per_s" => r.objects_per_s,
            "bytes_per_object" => return per_object(r.bytes_raw),
            "stored_bytes_per_object" => return per_object(r.bytes_stored),
            "stored_pct" => {
                return (r.bytes_raw > 0).then(|| r.bytes_stored as f64 * 100.0 / r.bytes_raw as f64)
            }
            "connections_opened" => return r.connections_opened.map(|c| c as f64),
            "sequential_multiple" => return self.sequential_multiple,
            _ => return None,
        })
    }
}

/// Everything measured for one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    /// Requests started (arrivals or requests begun).
    pub requests: u64,
    /// Responses with the expected status and full body.
    pub ok: u64,
    /// Failed requests.
    pub failed: u64,
    /// Arrivals never sent.
    pub dropped: u64,
    /// ok / requests, in %.
    pub success_pct: f64,
    /// Responses per second.
    pub req_per_s: f64,
    /// Response megabytes (10^6) per second.
    pub mb_per_s: f64,
    /// Response bytes received.
    pub bytes_received: u64,
    /// Body bytes the OK responses had to carry (ok × chunk), when the body size is fixed.
    pub body_bytes_expected: Option<u64>,
    /// Mean latency, ms.
    pub avg_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// 95th percentile, ms.
    pub p95_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// Failures by kind.
    pub errors: ErrorCounts,
    /// Server CPU seconds (user + system, every process of the server) during the measured run.
    pub cpu_s: f64,
    /// Server CPU seconds per GB (10^9 bytes) of responses.
    pub cpu_s_per_gb: f64,
    /// Server CPU microseconds per response.
    pub cpu_us_per_request: f64,
    /// System calls per response, from the server's own counters (sluice only).
    pub syscalls_per_request: Option<f64>,
    /// The same by kind.
    pub syscalls_by_kind: BTreeMap<String, f64>,
    /// req/s divided by (workers × the same server's req/s with one worker), in % (worker
    /// sweeps only).
    pub scaling_pct: Option<f64>,
    /// What the row's caches asked of the origin and found in themselves (edge experiments).
    #[serde(default)]
    pub origin: Option<OriginFigures>,
}

/// The origin's side of an edge row: requests the object store answered (SeaweedFS's own
/// counter, the same source for every server) and bytes and slices the caches fetched and found
/// (sluice's `/metrics`; `None` for nginx).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct OriginFigures {
    /// S3 requests SeaweedFS counted for the library's bucket over the row.
    pub requests: f64,
    /// Bytes the caches fetched from the origin.
    pub bytes: Option<f64>,
    /// Slices found in the cache.
    pub hits: Option<f64>,
    /// Slices fetched for a request.
    pub misses: Option<f64>,
}

impl Figures {
    /// Derives the figures of a row from the load report and the server's measurements.
    pub fn derive(
        load: &Report,
        chunk: Option<u64>,
        cpu_s: f64,
        syscalls: Option<&BTreeMap<String, f64>>,
    ) -> Figures {
        let ms = |us: u64| us as f64 / 1000.0;
        let responses = (load.requests.ok + load.requests.failed).max(1) as f64;
        let gb = load.bytes_received as f64 / 1e9;
        let (per_request, by_kind) = match syscalls {
            Some(s) => {
                let by_kind: BTreeMap<String, f64> =
                    s.iter().filter(|(_, v)| **v > 0.0).map(|(k, v)| (k.clone(), v / responses)).collect();
                (Some(by_kind.values().sum()), by_kind)
            }
            None => (None, BTreeMap::new()),
        };
        Figures {
            requests: load.requests.scheduled,
            ok: load.requests.ok,
            failed: load.requests.failed,
            dropped: load.requests.dropped,
            success_pct: load.success_rate * 100.0,
            req_per_s: load.requests_per_s,
            mb_per_s: load.bytes_per_s / 1e6,
            bytes_received: load.bytes_received,
            body_bytes_expected: chunk.map(|c| c * load.requests.ok),
            avg_ms: load.latency.mean_us / 1000.0,
            p50_ms: ms(load.latency.p50_us),
            p95_ms: ms(load.latency.p95_us),
            p99_ms: ms(load.latency.p99_us),
            max_ms: ms(load.latency.max_us),
            errors: load.errors,
            cpu_s,
            cpu_s_per_gb: if gb > 0.0 { cpu_s / gb } else { 0.0 },
            cpu_us_per_request: cpu_s * 1e6 / responses,
            syscalls_per_request: per_request,
            syscalls_by_kind: by_kind,
            scaling_pct: None,
            origin: None,
        }
    }

    /// Responses the origin figures are counted against (ok and failed).
    fn responses(&self) -> f64 {
        (self.ok + self.failed) as f64
    }

    /// A metric by name (see [`METRICS`]); `None` when the row has no such figure.
    pub fn metric(&self, name: &str) -> Option<f64> {
        Some(match name {
            "req_per_s" => self.req_per_s,
            "mb_per_s" => self.mb_per_s,
            "avg_ms" => self.avg_ms,
            "p50_ms" => self.p50_ms,
            "p95_ms" => self.p95_ms,
            "p99_ms" => self.p99_ms,
            "max_ms" => self.max_ms,
            "success_pct" => self.success_pct,
            "ok" => self.ok as f64,
            "failed" => self.failed as f64,
            "dropped" => self.dropped as f64,
            "cpu_s" => self.cpu_s,
            "cpu_s_per_gb" => self.cpu_s_per_gb,
            "cpu_us_per_request" => self.cpu_us_per_request,
            "syscalls_per_request" => return self.syscalls_per_request,
            "scaling_pct" => return self.scaling_pct,
            "bytes_received" => self.bytes_received as f64,
            "mb_per_cpu_s" => {
                return (self.cpu_s > 0.0).then(|| self.bytes_received as f64 / 1e6 / self.cpu_s)
            }
            "origin_requests" => return self.origin.map(|o| o.requests),
            "origin_requests_per_1000" => {
                return self
                    .origin
                    .filter(|_| self.responses() > 0.0)
                    .map(|o| o.requests * 1000.0 / self.responses())
            }
            "origin_mb_per_1000" => {
                let o = self.origin?;
                return o
                    .bytes
                    .filter(|_| self.responses() > 0.0)
                    .map(|b| b / 1e6 * 1000.0 / self.responses());
            }
            "hit_ratio_pct" => {
                let o = self.origin?;
                let (h, m) = (o.hits?, o.misses?);
                return (h + m > 0.0).then(|| h * 100.0 / (h + m));
            }
            _ => return None,
        })
    }
}

/// What an RTSP server said about itself over a row (sluice's `/metrics`, as differences from
/// the row's start to its end).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct RtspServerCounters {
    /// Whole frames dropped from viewers' queues (`sluice_rtp_frames_dropped_total`).
    pub frames_dropped: Option<u64>,
    /// RTP packets those drops took (`sluice_rtp_packets_dropped_total`).
    pub packets_dropped: Option<u64>,
    /// RTP packets sent (`sluice_rtp_packets_sent_total`).
    pub packets_sent: Option<u64>,
    /// RTP bytes sent (`sluice_rtp_bytes_sent_total`).
    pub bytes_sent: Option<u64>,
    /// Sessions created (`sluice_rtsp_sessions_created_total`).
    pub sessions_created: Option<u64>,
}

impl RtspServerCounters {
    /// The counters named above from the text of `/metrics` (summed over their labels); `None`
    /// for a counter the server does not have.
    pub fn parse(metrics: &str) -> RtspServerCounters {
        let get = |name: &str| -> Option<u64> {
            let mut found = None;
            for line in metrics.lines().filter(|l| !l.starts_with('#')) {
                let Some((key, value)) = line.rsplit_once(' ') else { continue };
                let metric = key.split('{').next().unwrap_or(key).trim();
                if metric == name {
                    let Ok(v) = value.trim().parse::<f64>() else { continue };
                    *found.get_or_insert(0) += v.max(0.0) as u64;
                }
            }
            found
        };
        RtspServerCounters {
            frames_dropped: get("sluice_rtp_frames_dropped_total"),
            packets_dropped: get("sluice_rtp_packets_dropped_total"),
            packets_sent: get("sluice_rtp_packets_sent_total"),
            bytes_sent: get("sluice_rtp_bytes_sent_total"),
            sessions_created: get("sluice_rtsp_sessions_created_total"),
        }
    }

    /// `after − before`, counter by counter (absent when either is).
    pub fn delta(before: &RtspServerCounters, after: &RtspServerCounters) -> RtspServerCounters {
        let d = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        RtspServerCounters {
            frames_dropped: d(before.frames_dropped, after.frames_dropped),
            packets_dropped: d(before.packets_dropped, after.packets_dropped),
            packets_sent: d(before.packets_sent, after.packets_sent),
            bytes_sent: d(before.bytes_sent, after.bytes_sent),
            sessions_created: d(before.sessions_created, after.sessions_created),
        }
    }
}

/// What the runner measured around an RTSP row besides the viewers' report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RtspMeasures {
    /// Server CPU seconds over the row.
    pub server_cpu_s: f64,
    /// The load generator's (this process's) CPU seconds over the row.
    pub generator_cpu_s: f64,
    /// CPUs the generator had.
    pub generator_cpus: usize,
    /// The server's counters over the row (sluice only).
    pub server: Option<RtspServerCounters>,
    /// UDP datagrams the machine dropped at full receive buffers over the row.
    pub udp_rcvbuf_drops: Option<u64>,
    /// CPU seconds the rest of the machine used over the row: its busy time less the lab's and
    /// the server's.
    pub other_cpu_s: f64,
    /// The streamed file's length, seconds.
    pub content_s: f64,
    /// RTP over UDP: the share (0–1) of the datagrams asked for that `sluice lab ceiling`'s
    /// probe delivered at this row's viewers and bitrate, to receivers like the row's (GRO or
    /// plain), between the server's CPU and the generator's.
    pub ceiling: Option<f64>,
}

/// Everything measured for one RTSP row (E5's figures).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RtspFigures {
    /// RTP transport.
    pub transport: RtspTransport,
    /// Viewers started.
    pub clients: usize,
    /// Viewers that got a PLAY response.
    pub playing_clients: usize,
    /// Viewers that received every video sample of the file ("perfect sending").
    pub perfect_clients: usize,
    /// perfect / clients, in %.
    pub perfect_pct: f64,
    /// Viewers that failed (by kind in `failures`).
    pub failed_clients: u64,
    /// Failed viewers by kind.
    pub failures: FailureCounts,
    /// Playing viewers, short of samples, that the stream stopped reaching: their last media
    /// came more than 5 s before the file's end, then silence until they gave up (starved rather
    /// than lossy).
    #[serde(default)]
    pub stalled_clients: usize,
    /// The file's video samples: what a perfect viewer receives.
    pub expected_samples: u64,
    /// Mean of video samples received per viewer.
    pub samples_mean: f64,
    /// Population standard deviation of video samples received per viewer.
    pub samples_stdev: f64,
    /// Fewest samples a viewer received.
    pub samples_min: u64,
    /// Most samples a viewer received.
    pub samples_max: u64,
    /// RTP packets lost, all viewers, all streams (sequence gaps).
    pub lost_packets: u64,
    /// RTP packets lost on video, all viewers.
    pub video_lost_packets: u64,
    /// Viewers that lost at least one packet.
    pub clients_with_loss: usize,
    /// Media received by all viewers together, Mbit/s over the row.
    pub mbit_per_s: f64,
    /// The row's length (first viewer's start to the last one's end), seconds.
    pub duration_s: f64,
    /// From the first viewer's PLAY response to the last one's, seconds (the source report
    /// counts clients as concurrent when this is under 5 s).
    pub connect_spread_s: f64,
    /// Server CPU seconds (user + system, its whole process group) during the row.
    pub cpu_s: f64,
    /// The same as % of one core over the row.
    pub server_cpu_pct: f64,
    /// The load generator's CPU seconds during the row.
    pub generator_cpu_s: f64,
    /// The same as % of one core over the row.
    pub generator_cpu_pct: f64,
    /// CPUs the generator had (100 × this is its ceiling in %).
    pub generator_cpus: usize,
    /// What the rest of the machine used over the row (other processes, deferred softirq work,
    /// the hypervisor's steal), % of one core: a row that competed with something else says so.
    #[serde(default)]
    pub other_cpu_pct: f64,
    /// The server's own counters (sluice only).
    pub server: Option<RtspServerCounters>,
    /// UDP datagrams dropped because a socket's receive buffer was full, over the row, on the
    /// whole machine (`RcvbufErrors`): on loopback, where UDP loss happens (mostly the viewers'
    /// RTP sockets; the server receives only RTCP).
    #[serde(default)]
    pub udp_rcvbuf_drops: Option<u64>,
    /// RTP over UDP: what the matching ceiling probe delivered, % of what it was asked for.
    #[serde(default)]
    pub ceiling_delivered_pct: Option<f64>,
    /// RTP over UDP: the video samples the viewers received, % of all they were owed, as a
    /// share of what the matching ceiling delivered (100: the server did as well as the bare
    /// system calls could here).
    #[serde(default)]
    pub ceiling_share_pct: Option<f64>,
}

impl RtspFigures {
    /// The figures of an RTSP row.
    pub fn derive(report: &RtspReport, m: &RtspMeasures) -> RtspFigures {
        let s = &report.summary;
        let secs = report.duration_s.max(1e-9);
        let connected: Vec<u64> =
            report.viewers.iter().filter_map(|v| v.setup_ms.map(|ms| v.start_ms + ms)).collect();
        let spread = match (connected.iter().min(), connected.iter().max()) {
            (Some(a), Some(b)) => (b - a) as f64 / 1000.0,
            _ => 0.0,
        };
        let idle_ms = report.settings.idle_end_ms as f64;
        let stalled = report
            .viewers
            .iter()
            .filter(|v| v.end == EndReason::StreamEnd && v.samples < s.reference_samples)
            .filter(|v| v.playing_ms.is_some_and(|p| p as f64 - idle_ms < m.content_s * 1000.0 - 5000.0))
            .count();
        RtspFigures {
            stalled_clients: stalled,
            transport: report.settings.transport,
            clients: s.clients,
            playing_clients: s.playing_clients,
            perfect_clients: s.perfect_clients,
            perfect_pct: if s.clients == 0 {
                0.0
            } else {
                s.perfect_clients as f64 / s.clients as f64 * 100.0
            },
            failed_clients: s.failures.total(),
            failures: s.failures,
            expected_samples: s.reference_samples,
            samples_mean: s.samples_mean,
            samples_stdev: s.samples_stdev,
            samples_min: s.samples_min,
            samples_max: s.samples_max,
            lost_packets: s.lost_packets,
            video_lost_packets: s.video_lost_packets,
            clients_with_loss: s.clients_with_loss,
            mbit_per_s: s.bytes as f64 * 8.0 / 1e6 / secs,
            duration_s: report.duration_s,
            connect_spread_s: spread,
            cpu_s: m.server_cpu_s,
            server_cpu_pct: m.server_cpu_s / secs * 100.0,
            generator_cpu_s: m.generator_cpu_s,
            generator_cpu_pct: m.generator_cpu_s / secs * 100.0,
            generator_cpus: m.generator_cpus,
            other_cpu_pct: m.other_cpu_s.max(0.0) / secs * 100.0,
            server: m.server,
            udp_rcvbuf_drops: m.udp_rcvbuf_drops,
            ceiling_delivered_pct: m.ceiling.map(|c| c * 100.0),
            ceiling_share_pct: m.ceiling.filter(|&c| c > 0.0).map(|c| {
                let owed = (s.clients as u64 * s.reference_samples).max(1) as f64;
                s.samples_total as f64 / owed / c * 100.0
            }),
        }
    }

    /// Whether every client received every sample.
    pub fn all_perfect(&self) -> bool {
        self.clients > 0 && self.perfect_clients == self.clients
    }

    /// A metric by name (see [`RTSP_METRICS`]); `None` when the row has no such figure.
    pub fn metric(&self, name: &str) -> Option<f64> {
        Some(match name {
            "clients" => self.clients as f64,
            "perfect_clients" => self.perfect_clients as f64,
            "perfect_pct" => self.perfect_pct,
            "playing_clients" => self.playing_clients as f64,
            "failed_clients" => self.failed_clients as f64,
            "stalled_clients" => self.stalled_clients as f64,
            "expected_samples" => self.expected_samples as f64,
            "samples_mean" => self.samples_mean,
            "samples_stdev" => self.samples_stdev,
            "samples_min" => self.samples_min as f64,
            "lost_packets" => self.lost_packets as f64,
            "video_lost_packets" => self.video_lost_packets as f64,
            "mbit_per_s" => self.mbit_per_s,
            "cpu_s" => self.cpu_s,
            "server_cpu_pct" => self.server_cpu_pct,
            "generator_cpu_pct" => self.generator_cpu_pct,
            "other_cpu_pct" => self.other_cpu_pct,
            "frames_dropped" => return self.server.and_then(|c| c.frames_dropped).map(|v| v as f64),
            "udp_rcvbuf_drops" => return self.udp_rcvbuf_drops.map(|v| v as f64),
            "ceiling_delivered_pct" => return self.ceiling_delivered_pct,
            "ceiling_share_pct" => return self.ceiling_share_pct,
            "connect_spread_s" => self.connect_spread_s,
            _ => return None,
        })
    }
}

/// What a measured row holds: an HTTP run's figures and report, or an RTSP run's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Measurement {
    /// An HTTP load run.
    Http {
        /// The figures.
        figures: Box<Figures>,
        /// The load generator's whole report (percentiles, per-target results, per-second series).
        load: Box<Report>,
    },
    /// RTSP viewers.
    Rtsp {
        /// The figures.
        rtsp: Box<RtspFigures>,
        /// The viewers' whole report (one entry per viewer).
        load: Box<RtspReport>,
    },
    /// Object uploads.
    Upload {
        /// The figures.
        upload: Box<UploadFigures>,
    },
}

/// How a row ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum RowOutcome {
    /// Measured.
    Measured {
        /// What was measured.
        #[serde(flatten)]
        measurement: Measurement,
    },
    /// A reference measurement (iperf3's loopback throughput, one TCP stream).
    Reference {
        /// Megabytes (10^6) per second.
        mb_per_s: f64,
    },
    /// Not run, and why (a peer that is not installed).
    Skipped {
        /// The reason.
        reason: String,
    },
    /// Run, but it failed (the server did not start, the load could not run).
    Failed {
        /// The reason.
        reason: String,
    },
}

/// One server × point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Server configuration name.
    pub server: String,
    /// Whether it is a peer (nginx, iperf3) rather than sluice.
    pub peer: bool,
    /// The point.
    pub point: Point,
    /// The server's command line.
    pub server_command: String,
    /// The equivalent load command.
    pub load_command: String,
    /// CPUs the server was pinned to (empty: not pinned).
    pub server_cpus: Vec<usize>,
    /// CPUs the load generator was pinned to (empty: not pinned).
    pub load_cpus: Vec<usize>,
    /// Which round of its point (1, 2, …) when the point runs more than once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub round: Option<usize>,
    /// The CPU budget the server ran under, read back from its cgroup, and its throttling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::RowBudget>,
    /// The outcome.
    #[serde(flatten)]
    pub outcome: RowOutcome,
}

impl Row {
    /// The figures of a measured HTTP row.
    pub fn figures(&self) -> Option<&Figures> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Http { figures, .. } } => Some(figures),
            _ => None,
        }
    }

    /// The load report of a measured HTTP row.
    pub fn load(&self) -> Option<&Report> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Http { load, .. } } => Some(load),
            _ => None,
        }
    }

    /// The figures of a measured RTSP row.
    pub fn rtsp(&self) -> Option<&RtspFigures> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Rtsp { rtsp, .. } } => Some(rtsp),
            _ => None,
        }
    }

    /// The viewers' report of a measured RTSP row.
    pub fn rtsp_load(&self) -> Option<&RtspReport> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Rtsp { load, .. } } => Some(load),
            _ => None,
        }
    }

    /// A metric of a measured row, HTTP or RTSP (see [`METRICS`], [`RTSP_METRICS`]).
    pub fn metric(&self, name: &str) -> Option<f64> {
        match &self.outcome {
            RowOutcome::Measured { measurement: Measurement::Http { figures, .. } } => figures.metric(name),
            RowOutcome::Measured { measurement: Measurement::Rtsp { rtsp, .. } } => rtsp.metric(name),
            RowOutcome::Measured { measurement: Measurement::Upload { upload } } => upload.metric(name),
            _ => None,
        }
    }

    /// `measured`, `reference`, `skipped` or `failed`.
    pub fn status(&self) -> &'static str {
        match self.outcome {
            RowOutcome::Measured { .. } => "measured",
            RowOutcome::Reference { .. } => "reference",
            RowOutcome::Skipped { .. } => "skipped",
            RowOutcome::Failed { .. } => "failed",
        }
    }
}

/// One experiment's run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExperimentResults {
    /// The experiment as declared.
    pub experiment: Experiment,
    /// `--quick` or a full run.
    pub quick: bool,
    /// Start, RFC 3339 UTC.
    pub started_at: String,
    /// Wall time of the run, seconds.
    pub duration_s: f64,
    /// The machine and tool versions.
    pub machine: Machine,
    /// The command that ran the experiment.
    pub command: String,
    /// Rows in run order.
    pub rows: Vec<Row>,
    /// Generated findings.
    pub findings: Vec<String>,
    /// The file an RTSP experiment streamed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<ContentInfo>,
    /// The CPU budget of the capacity rows (`--server-cpu`), when the run had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::budget::CpuBudget>,
    /// The source report's claims with this run's counterparts and verdicts.
    #[serde(default)]
    pub claims: Vec<crate::claims::Verdict>,
}

/// The rounds of one server at one point, on one metric: median and range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Median of the rounds (the mean of the middle two when even).
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
    /// Rounds measured.
    pub n: usize,
}

impl Spread {
    /// The spread of `values`; `None` when empty.
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 };
        Some(Spread { median, min: values[0], max: values[n - 1], n })
    }

    /// Whether the two ranges share a value (their difference is within the run's noise).
    pub fn overlaps(&self, other: &Spread) -> bool {
        self.min <= other.max && other.min <= self.max
    }
}

/// The file an RTSP run streamed, as the report states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentInfo {
    /// Its parameters in words.
    pub summary: String,
    /// Its name (the RTSP path).
    pub file_name: String,
    /// Its video samples, from ffprobe.
    pub video_samples: u64,
    /// The ffmpeg command that makes it.
    pub command: String,
}

impl ExperimentResults {
    /// The rounds of `server` at the point labelled `label` of `sweep`, on `metric`.
    pub fn spread(&self, server: &str, sweep: &str, label: &str, metric: &str) -> Option<Spread> {
        Spread::of(
            self.rows_of(sweep)
                .filter(|r| r.server == server && r.point.x_label() == label)
                .filter_map(|r| r.metric(metric))
                .collect(),
        )
    }

    /// The x labels of a sweep's points, in run order, each once.
    pub fn point_labels(&self, sweep: &str) -> Vec<String> {
        let mut labels: Vec<String> = Vec::new();
        for row in self.rows_of(sweep) {
            let l = row.point.x_label();
            if !labels.contains(&l) {
                labels.push(l);
            }
        }
        labels
    }

    /// A run of `experiment` with `rows` and nothing else (for tests of what reads rows).
    #[cfg(test)]
    pub(crate) fn for_tests(experiment: Experiment, rows: Vec<Row>) -> ExperimentResults {
        ExperimentResults {
            experiment,
            quick: false,
            started_at: String::new(),
            duration_s: 1.0,
            machine: crate::machine::Machine::detect("test"),
            command: String::new(),
            rows,
            findings: Vec::new(),
            content: None,
            budget: None,
            claims: Vec::new(),
        }
    }

    /// Measured rows of one sweep.
    pub fn rows_of<'a>(&'a self, sweep: &'a str) -> impl Iterator<Item = &'a Row> + 'a {
        self.rows.iter().filter(move |r| r.point.sweep == sweep)
    }

    /// Fills in figures that compare rows (scaling against the same server's median with one
    /// worker).
    pub fn derive_across_rows(&mut self) {
        let mut one: BTreeMap<(String, String, Option<usize>), Vec<f64>> = BTreeMap::new();
        for r in self.rows.iter().filter(|r| r.point.workers == 1) {
            if let Some(f) = r.figures() {
                one.entry((r.server.clone(), r.point.sweep.clone(), r.point.vus))
                    .or_default()
                    .push(f.req_per_s);
            }
        }
        let base: BTreeMap<_, f64> =
            one.into_iter().filter_map(|(k, v)| Some((k, Spread::of(v)?.median))).collect();
        for r in &mut self.rows {
            if r.point.x != crate::experiment::Param::Workers {
                continue;
            }
            let key = (r.server.clone(), r.point.sweep.clone(), r.point.vus);
            let workers = r.point.workers as f64;
            if let (Some(one), RowOutcome::Measured { measurement: Measurement::Http { figures, .. } }) =
                (base.get(&key), &mut r.outcome)
            {
                if *one > 0.0 {
                    figures.scaling_pct = Some(figures.req_per_s / (one * workers) * 100.0);
                }
            }
        }
    }

    /// Writes `results.json`, `rows.csv`, `results.md` (the tables for BENCHMARKS.md) and
    /// (open-model rows) `series.csv` into `dir`.
    pub fn write(&self, dir: &Path) -> Result<(), LabError> {
        std::fs::create_dir_all(dir).map_err(|e| LabError::io(dir, e))?;
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).map_err(|e| LabError::io(path, e))
        };
        write("results.json", &serde_json::to_vec_pretty(self)?)?;
        write("rows.csv", self.rows_csv().as_bytes())?;
        write("results.md", crate::report::markdown(self).as_bytes())?;
        if self.rows.iter().any(|r| r.load().is_some_and(|l| l.settings.model == "open")) {
            write("series.csv", self.series_csv().as_bytes())?;
        }
        Ok(())
    }

    /// Reads `results.json` back.
    pub fn read(path: &Path) -> Result<ExperimentResults, LabError> {
        let bytes = std::fs::read(path).map_err(|e| LabError::io(path, e))?;
        Ok(serde_json::from_slice(&bytes)?)
    }

    /// One line per row with every figure.
    pub fn rows_csv(&self) -> String {
        if self.experiment.load.model == crate::experiment::LoadModel::Rtsp {
            return self.rtsp_rows_csv();
        }
        if self.experiment.load.model == crate::experiment::LoadModel::Upload {
            return self.upload_rows_csv();
        }
        let mut out =
            String::from("server,sweep,chunk,vus,workers,profile,round,budget_cpus,throttled_periods,status");
        for (name, _) in METRICS {
            let _ = write!(out, ",{name}");
        }
        for kind in ErrorKind::ALL {
            let _ = write!(out, ",errors_{}", kind.name());
        }
        out.push_str(",reference_mb_per_s,reason\n");
        for r in &self.rows {
            let p = &r.point;
            let _ = write!(
                out,
                "{},{},{},{},{},{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                opt(p.chunk),
                opt(p.vus),
                p.workers,
                p.profile.as_deref().unwrap_or(""),
                opt(r.round),
                opt(r.budget.as_ref().map(|b| b.cpus)),
                opt(r.budget.as_ref().map(|b| b.throttling.nr_throttled)),
                r.status()
            );
            for (name, _) in METRICS {
                let v = r.figures().and_then(|f| f.metric(name));
                let _ = write!(out, ",{}", v.map(|v| format!("{v:.4}")).unwrap_or_default());
            }
            let e = r.figures().map(|f| f.errors).unwrap_or_default();
            let (mb, reason) = match &r.outcome {
                RowOutcome::Reference { mb_per_s } => (format!("{mb_per_s:.1}"), String::new()),
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => {
                    (String::new(), csv_text(reason))
                }
                RowOutcome::Measured { .. } => (String::new(), String::new()),
            };
            for kind in ErrorKind::ALL {
                let _ = write!(out, ",{}", e.get(kind));
            }
            let _ = writeln!(out, ",{mb},{reason}");
        }
        out
    }

    /// One line per upload row with every figure.
    pub fn upload_rows_csv(&self) -> String {
        let mut out = String::from("server,sweep,payload,concurrency,status");
        for (name, _) in UPLOAD_METRICS {
            let _ = write!(out, ",{name}");
        }
        out.push_str(",bytes_raw,bytes_stored,reason\n");
        for r in &self.rows {
            let p = &r.point;
            let _ = write!(
                out,
                "{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                csv_text(p.payload.as_deref().unwrap_or("")),
                opt(p.vus),
                r.status()
            );
            for (name, _) in UPLOAD_METRICS {
                let _ = write!(out, ",{}", r.metric(name).map(|v| format!("{v:.4}")).unwrap_or_default());
            }
            let f = match &r.outcome {
                RowOutcome::Measured { measurement: Measurement::Upload { upload } } => Some(upload),
                _ => None,
            };
            let reason = match &r.outcome {
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => csv_text(reason),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                ",{},{},{reason}",
                opt(f.map(|f| f.report.bytes_raw)),
                opt(f.map(|f| f.report.bytes_stored))
            );
        }
        out
    }

    /// One line per RTSP row with every figure.
    pub fn rtsp_rows_csv(&self) -> String {
        let mut out = String::from("server,sweep,transport,clients,workers,status");
        // `clients` is the point's own column.
        let metrics = || RTSP_METRICS.iter().map(|(n, _)| *n).filter(|n| *n != "clients");
        for name in metrics() {
            let _ = write!(out, ",{name}");
        }
        out.push_str(",samples_max,clients_with_loss,generator_cpus");
        for kind in FailureKind::ALL {
            let _ = write!(out, ",failed_{}", kind.name());
        }
        out.push_str(",server_packets_dropped,server_packets_sent,server_bytes_sent,reason\n");
        for r in &self.rows {
            let p = &r.point;
            let _ = write!(
                out,
                "{},{},{},{},{},{}",
                csv_text(&r.server),
                csv_text(&p.sweep),
                p.transport.map(|t| t.name()).unwrap_or(""),
                opt(p.clients),
                p.workers,
                r.status()
            );
            for name in metrics() {
                let _ = write!(out, ",{}", r.metric(name).map(|v| format!("{v:.4}")).unwrap_or_default());
            }
            let f = r.rtsp();
            let _ = write!(
                out,
                ",{},{},{}",
                opt(f.map(|f| f.samples_max)),
                opt(f.map(|f| f.clients_with_loss)),
                opt(f.map(|f| f.generator_cpus))
            );
            for kind in FailureKind::ALL {
                let _ = write!(out, ",{}", opt(f.map(|f| f.failures.get(kind))));
            }
            let counters = f.and_then(|f| f.server).unwrap_or_default();
            let reason = match &r.outcome {
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => csv_text(reason),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                ",{},{},{},{reason}",
                opt(counters.packets_dropped),
                opt(counters.packets_sent),
                opt(counters.bytes_sent)
            );
        }
        out
    }

    /// The per-second series of every open-model row.
    pub fn series_csv(&self) -> String {
        let mut out =
            String::from("server,profile,second,arrivals,ok,failed,dropped,active_users,p50_ms,p99_ms\n");
        for r in &self.rows {
            let Some(load) = r.load() else { continue };
            for s in &load.series {
                let _ = writeln!(
                    out,
                    "{},{},{},{},{},{},{},{},{:.3},{:.3}",
                    csv_text(&r.server),
                    r.point.profile.as_deref().unwrap_or(""),
                    s.second,
                    s.arrivals,
                    s.ok,
                    s.failed,
                    s.dropped,
                    s.active_users,
                    s.p50_us as f64 / 1000.0,
                    s.p99_us as f64 / 1000.0
                );
            }
        }
        out
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

fn csv_text(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_a_value_or_a_reason_not_to() {
        let f = Figures {
            requests: 10,
            ok: 9,
            failed: 1,
            dropped: 0,
            success_pct: 90.0,
            req_per_s: 10.0,
            mb_per_s: 1.0,
            bytes_received: 1000,
            body_bytes_expected: None,
            avg_ms: 1.0,
            p50_ms: 1.0,
            p95_ms: 2.0,
            p99_ms: 3.0,
            max_ms: 4.0,
            errors: ErrorCounts::default(),
            cpu_s: 0.5,
            cpu_s_per_gb: 1.0,
            cpu_us_per_request: 5.0,
            syscalls_per_request: None,
            syscalls_by_kind: BTreeMap::new(),
            scaling_pct: None,
            origin: Some(OriginFigures {
                requests: 2.0,
                bytes: Some(1e6),
                hits: Some(3.0),
                misses: Some(1.0),
            }),
        };
        assert_eq!(f.metric("origin_requests_per_1000"), Some(200.0));
        assert_eq!(f.metric("hit_ratio_pct"), Some(75.0));
        for (name, _) in METRICS {
            let absent = matches!(name, "syscalls_per_request" | "scaling_pct");
            assert_eq!(f.metric(name).is_none(), absent, "{name}");
        }
        assert_eq!(csv_text("a,b"), "\"a,b\"");
    }

    #[test]
    fn spreads_take_the_median_and_call_overlaps() {
        let a = Spread::of(vec![3.0, 1.0, 2.0]).unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(Spread::of(vec![1.0, 4.0]).unwrap().median, 2.5);
        assert!(Spread::of(vec![]).is_none());
        let b = Spread::of(vec![2.5, 5.0]).unwrap();
        assert!(a.overlaps(&b) && b.overlaps(&a));
        assert!(!a.overlaps(&Spread::of(vec![3.5]).unwrap()));
    }

    #[test]
    fn rtsp_counters_sum_their_labels_and_subtract() {
        let text = "# HELP sluice_rtp_frames_dropped_total x\nsluice_rtp_frames_dropped_total 7\nsluice_rtsp_sessions_released_total{reason=\"teardown\"} 3\nsluice_rtp_packets_sent_total{transport=\"udp\"} 100\nsluice_rtp_packets_sent_total{transport=\"tcp\"} 50\n";
        let c = RtspServerCounters::parse(text);
        assert_eq!(c.frames_dropped, Some(7));
        assert_eq!(c.packets_sent, Some(150));
        assert_eq!(c.bytes_sent, None, "a counter the server lacks");
        let before = RtspServerCounters { frames_dropped: Some(2), packets_sent: Some(50), ..c };
        let d = RtspServerCounters::delta(&before, &c);
        assert_eq!((d.frames_dropped, d.packets_sent, d.bytes_sent), (Some(5), Some(100), None));
    }

    #[test]
    fn stalled_clients_went_silent_well_before_the_end() {
        use sluice_load::rtsp::{RtspConfig, RtspReport, ViewerResult};
        let viewer = |index: usize, samples: u64, playing_ms: u64, end: &str| -> ViewerResult {
            serde_json::from_value(serde_json::json!({
                "index": index, "start_ms": 0, "setup_ms": 5, "first_sample_ms": 10,
                "playing_ms": playing_ms, "samples": samples, "audio_frames": 0, "lost_packets": 0,
                "video_lost_packets": 0, "bytes": 0, "end": end, "failure": null, "error": null
            }))
            .unwrap()
        };
        let mut config = RtspConfig::new("rtsp://127.0.0.1:1/x.mp4", 4);
        config.expect_samples = Some(900);
        config.idle_end = std::time::Duration::from_secs(5);
        let viewers = vec![
            viewer(0, 900, 30_000, "expected"),
            // Silent from 4 s on, given up at 9 s: stalled.
            viewer(1, 120, 9_000, "stream_end"),
            // Its last frames came at 29 s: lossy, not stalled.
            viewer(2, 880, 34_000, "stream_end"),
            viewer(3, 700, 45_000, "deadline"),
        ];
        let report = RtspReport::build(
            &config,
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(40),
            viewers,
        );
        let m = RtspMeasures { content_s: 30.0, generator_cpus: 1, ..RtspMeasures::default() };
        let f = RtspFigures::derive(&report, &m);
        assert_eq!((f.perfect_clients, f.stalled_clients), (1, 1));
        assert_eq!(f.metric("stalled_clients"), Some(1.0));
        // 2,600 of the 3,600 samples owed, where the matching ceiling delivered 80%.
        let m = RtspMeasures { ceiling: Some(0.8), ..m };
        let share = RtspFigures::derive(&report, &m).metric("ceiling_share_pct").unwrap();
        assert!((share - 2600.0 / 3600.0 / 0.8 * 100.0).abs() < 1e-9, "{share}");
        assert_eq!(f.metric("ceiling_share_pct"), None, "no ceiling over TCP or without a probe");
    }

    #[test]
    fn rtsp_rows_round_trip_as_measured() {
        use sluice_load::rtsp::{RtspConfig, RtspReport};
        let config = RtspConfig::new("rtsp://127.0.0.1:1/x.mp4", 0);
        let report = RtspReport::build(
            &config,
            std::time::SystemTime::now(),
            std::time::Duration::from_secs(2),
            vec![],
        );
        let figures = RtspFigures::derive(
            &report,
            &RtspMeasures {
                server_cpu_s: 1.0,
                generator_cpu_s: 0.5,
                generator_cpus: 1,
                server: None,
                udp_rcvbuf_drops: Some(0),
                other_cpu_s: 0.2,
                content_s: 30.0,
                ceiling: Some(0.5),
            },
        );
        assert!((figures.server_cpu_pct - 50.0).abs() < 1e-9);
        assert_eq!((figures.ceiling_delivered_pct, figures.ceiling_share_pct), (Some(50.0), Some(0.0)));
        assert!((figures.other_cpu_pct - 10.0).abs() < 1e-9);
        assert!(!figures.all_perfect(), "no clients is not perfect sending");
        let outcome = RowOutcome::Measured {
            measurement: Measurement::Rtsp { rtsp: Box::new(figures), load: Box::new(report) },
        };
        let text = serde_json::to_string(&outcome).unwrap();
        assert!(text.starts_with("{\"status\":\"measured\""), "{text}");
        assert_eq!(serde_json::from_str::<RowOutcome>(&text).unwrap(), outcome);
    }
}
