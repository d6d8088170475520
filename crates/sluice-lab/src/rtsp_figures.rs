//! What one RTSP row measured: the viewers' report turned into figures (perfect, stalled and
//! failed clients, samples, loss, CPU) with what the runner measured around it
//! ([`RtspMeasures`]) and the server's own counters ([`RtspServerCounters`]), each readable by
//! metric name. It measures nothing and knows nothing of rows or runs (`results`).

use serde::{Deserialize, Serialize};
use sluice_load::rtsp::{EndReason, FailureCounts, RtspReport, RtspTransport};
use sluice_proto::metrics_text::{names, Scrape};

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
        let scrape = Scrape::parse(metrics);
        let get = |name: &str| scrape.sum(name).map(|v| v.max(0.0) as u64);
        RtspServerCounters {
            frames_dropped: get(names::RTP_FRAMES_DROPPED_TOTAL),
            packets_dropped: get(names::RTP_PACKETS_DROPPED_TOTAL),
            packets_sent: get(names::RTP_PACKETS_SENT_TOTAL),
            bytes_sent: get(names::RTP_BYTES_SENT_TOTAL),
            sessions_created: get(names::RTSP_SESSIONS_CREATED_TOTAL),
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
