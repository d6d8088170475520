//! The result of a player run as data: the settings, the renditions the manifest offered, one
//! [`ViewerResult`] per viewer and the summary built from them (viewers that played to the end
//! without a stall or a failed request, stalls, segments and bytes, segment latency and start-up
//! percentiles, rendition switches, failed requests by kind, the generator's CPU). It serializes
//! to JSON and reads back, and renders the readable end-of-run summary. It measures nothing.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::manifest::{Presentation, Protocol};
use super::{Pacing, PlayerConfig, RenditionChoice, SharedStats};
use crate::error::LoadError;
use crate::output::{ReportWriter, TextSummary};
use crate::stats::{ErrorCounts, ErrorKind, LatencySummary};
use crate::viewer_report;

/// How a viewer stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// It reached the end of the stream.
    Complete,
    /// The run's deadline stopped it.
    Deadline,
    /// The manifest failed, or nothing could be played.
    Failed,
}

/// What one viewer did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ViewerResult {
    /// Viewer number, from 0.
    pub index: usize,
    /// Planned start, ms after the run's start.
    pub start_ms: u64,
    /// From its start to the start of playback (start-up buffer filled), ms.
    pub startup_ms: Option<u64>,
    /// Requests sent (manifests, playlists, init segments, segments).
    pub requests: u64,
    /// Requests that failed (any kind; a 404 counts).
    pub failed_requests: u64,
    /// Media segments received whole, all tracks.
    pub segments: u64,
    /// Body bytes of those segments.
    pub segment_bytes: u64,
    /// Body bytes of init segments.
    pub init_bytes: u64,
    /// Body bytes of manifests and playlists.
    pub document_bytes: u64,
    /// Segments that arrived after their playback deadline (real-time pacing only).
    pub stalls: u64,
    /// Time playback waited for them, ms.
    pub stall_ms: u64,
    /// Switches to a higher-bandwidth rendition.
    pub switches_up: u64,
    /// Switches to a lower-bandwidth rendition.
    pub switches_down: u64,
    /// Video segments received per rendition, in manifest order.
    pub segments_by_rendition: Vec<u64>,
    /// How it stopped.
    pub end: EndReason,
    /// The first failed request.
    pub error: Option<String>,
}

impl ViewerResult {
    pub(crate) fn new(index: usize, start_ms: u64, renditions: usize) -> ViewerResult {
        ViewerResult {
            index,
            start_ms,
            startup_ms: None,
            requests: 0,
            failed_requests: 0,
            segments: 0,
            segment_bytes: 0,
            init_bytes: 0,
            document_bytes: 0,
            stalls: 0,
            stall_ms: 0,
            switches_up: 0,
            switches_down: 0,
            segments_by_rendition: vec![0; renditions],
            end: EndReason::Failed,
            error: None,
        }
    }

    pub(crate) fn panicked(index: usize) -> ViewerResult {
        let mut r = ViewerResult::new(index, 0, 0);
        r.error = Some("the viewer task panicked".into());
        r
    }

    /// Played to the end without a stall or a failed request.
    pub fn perfect(&self) -> bool {
        self.end == EndReason::Complete && self.stalls == 0 && self.failed_requests == 0
    }
}

/// One rendition the manifest offered, and how much of it was played.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RenditionSummary {
    /// Its name (resolution and bandwidth, or representation id).
    pub name: String,
    /// Declared bits per second.
    pub bandwidth: u64,
    /// Picture height, when declared.
    pub height: Option<u64>,
    /// Its segments.
    pub segments: usize,
    /// Media seconds.
    pub duration_s: f64,
    /// Video segments of it that viewers received.
    pub segments_played: u64,
}

/// The run's figures.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlayerSummary {
    /// Viewers started.
    pub viewers: usize,
    /// Viewers whose playback began.
    pub playing: usize,
    /// Viewers that reached the end of the stream.
    pub complete: usize,
    /// Viewers that reached the end without a stall or a failed request.
    pub perfect: usize,
    /// Viewers with at least one stall.
    pub viewers_with_stalls: usize,
    /// Stalls, all viewers.
    pub stalls: u64,
    /// Time playback waited, all viewers, seconds.
    pub stall_s: f64,
    /// Segments received, all viewers and tracks.
    pub segments: u64,
    /// Requests sent, all viewers.
    pub requests: u64,
    /// Requests failed, all viewers.
    pub failed_requests: u64,
    /// Failed requests by kind.
    pub errors: ErrorCounts,
    /// Body bytes received (segments, init segments, manifests).
    pub bytes: u64,
    /// Body bytes of segments.
    pub segment_bytes: u64,
    /// Body bits per second over the run.
    pub bits_per_s: f64,
    /// Segment latency: request sent to last byte.
    pub segment_latency: LatencySummary,
    /// Manifest, playlist and init segment latency.
    pub document_latency: LatencySummary,
    /// Start-up time: viewer start to playback start.
    pub startup: LatencySummary,
    /// Switches up, all viewers.
    pub switches_up: u64,
    /// Switches down, all viewers.
    pub switches_down: u64,
    /// Viewers that switched at least once.
    pub viewers_switched: usize,
    /// Viewers by how they stopped.
    pub ended_complete: usize,
    /// Viewers stopped by the run's deadline.
    pub ended_deadline: usize,
    /// Viewers that failed.
    pub ended_failed: usize,
    /// The generator's user CPU over the run, seconds.
    pub generator_cpu_user_s: f64,
    /// The generator's system CPU over the run, seconds.
    pub generator_cpu_system_s: f64,
    /// The generator's CPU as a share of one core over the run, percent.
    pub generator_cpu_percent: f64,
}

/// The settings a run used.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlayerSettings {
    /// The manifest's URL.
    pub url: String,
    /// Viewers.
    pub viewers: usize,
    /// Ramp, ms.
    pub ramp_ms: u64,
    /// Deadline of the run, ms.
    pub deadline_ms: u64,
    /// Real time or fast.
    pub pacing: Pacing,
    /// Buffer, ms.
    pub buffer_ms: u64,
    /// The rendition choice as given.
    pub rendition: RenditionChoice,
    /// The fixed rendition it resolved to (`None`: switching by throughput).
    pub fixed_rendition: Option<usize>,
    /// Request timeout, ms.
    pub timeout_ms: u64,
    /// Runtime worker threads.
    pub threads: usize,
}

/// Everything a player run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlayerReport {
    /// `hls` or `dash` (tells this report from the HTTP and RTSP ones).
    pub kind: Protocol,
    /// Settings.
    pub settings: PlayerSettings,
    /// The renditions offered, in manifest order.
    pub renditions: Vec<RenditionSummary>,
    /// Separate audio tracks offered.
    pub audio_tracks: usize,
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// Length of the run, seconds.
    pub duration_s: f64,
    /// The figures.
    pub summary: PlayerSummary,
    /// One entry per viewer.
    pub viewers: Vec<ViewerResult>,
}

impl PlayerReport {
    /// Builds the report of a finished run; `cpu` is the generator's (user, system) seconds.
    #[allow(clippy::too_many_arguments)] // one call site, every argument a different part
    pub(crate) fn build(
        config: &PlayerConfig,
        presentation: &Presentation,
        fixed: Option<usize>,
        started_at: SystemTime,
        elapsed: Duration,
        cpu: (f64, f64),
        stats: &SharedStats,
        viewers: Vec<ViewerResult>,
    ) -> PlayerReport {
        let ms = |d: Duration| d.as_millis() as u64;
        let renditions = presentation
            .renditions
            .iter()
            .enumerate()
            .map(|(i, r)| RenditionSummary {
                name: r.name.clone(),
                bandwidth: r.bandwidth,
                height: r.height,
                segments: r.segments.len(),
                duration_s: r.duration(),
                segments_played: viewers.iter().filter_map(|v| v.segments_by_rendition.get(i)).sum(),
            })
            .collect();
        let count = |f: &dyn Fn(&ViewerResult) -> bool| viewers.iter().filter(|v| f(v)).count();
        let sum = |f: &dyn Fn(&ViewerResult) -> u64| viewers.iter().map(f).sum::<u64>();
        let bytes = sum(&|v| v.segment_bytes + v.init_bytes + v.document_bytes);
        let secs = elapsed.as_secs_f64();
        let summary = PlayerSummary {
            viewers: viewers.len(),
            playing: count(&|v| v.startup_ms.is_some()),
            complete: count(&|v| v.end == EndReason::Complete),
            perfect: count(&|v| v.perfect()),
            viewers_with_stalls: count(&|v| v.stalls > 0),
            stalls: sum(&|v| v.stalls),
            stall_s: sum(&|v| v.stall_ms) as f64 / 1000.0,
            segments: sum(&|v| v.segments),
            requests: sum(&|v| v.requests),
            failed_requests: sum(&|v| v.failed_requests),
            errors: stats.errors,
            bytes,
            segment_bytes: sum(&|v| v.segment_bytes),
            bits_per_s: if secs > 0.0 { bytes as f64 * 8.0 / secs } else { 0.0 },
            segment_latency: stats.segment_latency.summary(),
            document_latency: stats.document_latency.summary(),
            startup: stats.startup.summary(),
            switches_up: sum(&|v| v.switches_up),
            switches_down: sum(&|v| v.switches_down),
            viewers_switched: count(&|v| v.switches_up + v.switches_down > 0),
            ended_complete: count(&|v| v.end == EndReason::Complete),
            ended_deadline: count(&|v| v.end == EndReason::Deadline),
            ended_failed: count(&|v| v.end == EndReason::Failed),
            generator_cpu_user_s: cpu.0,
            generator_cpu_system_s: cpu.1,
            generator_cpu_percent: if secs > 0.0 { (cpu.0 + cpu.1) / secs * 100.0 } else { 0.0 },
        };
        PlayerReport {
            kind: presentation.protocol,
            settings: PlayerSettings {
                url: config.url.clone(),
                viewers: config.viewers,
                ramp_ms: ms(config.ramp),
                deadline_ms: ms(config.deadline()),
                pacing: config.pacing,
                buffer_ms: ms(config.buffer),
                rendition: config.rendition,
                fixed_rendition: fixed,
                timeout_ms: ms(config.timeout),
                threads: config.threads,
            },
            renditions,
            audio_tracks: presentation.audio.len(),
            started_at_unix_ms: started_at.duration_since(UNIX_EPOCH).map_or(0, ms),
            duration_s: secs,
            summary,
            viewers,
        }
    }

    /// Reads a report written by [`JsonReport`](crate::JsonReport).
    pub fn from_json(text: &str) -> Result<PlayerReport, LoadError> {
        viewer_report::read_json(text)
    }

    /// The readable end-of-run summary ([`TextSummary`] writes it).
    fn write_summary(&self, out: &mut dyn Write) -> io::Result<()> {
        let st = &self.settings;
        let s = &self.summary;
        let pacing = match st.pacing {
            Pacing::RealTime => format!("real time, {:.1}s buffer", st.buffer_ms as f64 / 1000.0),
            Pacing::Fast => "as fast as possible".to_string(),
        };
        let command = format!("http --{}", self.kind.name());
        let how = format!(", {pacing}");
        viewer_report::write_head(
            out,
            &command,
            st.viewers,
            &how,
            st.ramp_ms,
            st.threads,
            self.duration_s,
            &st.url,
        )?;
        for (i, r) in self.renditions.iter().enumerate() {
            let mark = if st.fixed_rendition == Some(i) { "*" } else { " " };
            writeln!(
                out,
                "   {mark}rendition {i}: {} ({} segments, {:.1}s), {} segments played",
                r.name, r.segments, r.duration_s, r.segments_played
            )?;
        }
        if self.audio_tracks > 0 {
            writeln!(out, "    audio apart: {} track(s)", self.audio_tracks)?;
        }
        writeln!(out)?;
        writeln!(
            out,
            "  perfect    {} of {} viewers played to the end with no stall and no failed request",
            s.perfect, s.viewers
        )?;
        writeln!(
            out,
            "  stalls     {} ({:.1}s waiting) in {} viewers",
            s.stalls, s.stall_s, s.viewers_with_stalls
        )?;
        writeln!(
            out,
            "  segments   {} received, {:.1} MB ({:.1} MB all bodies, {:.1} Mbit/s in all, {:.2} per viewer that played)",
            s.segments,
            s.segment_bytes as f64 / 1e6,
            s.bytes as f64 / 1e6,
            s.bits_per_s / 1e6,
            s.bits_per_s / 1e6 / s.playing.max(1) as f64
        )?;
        let l = &s.segment_latency;
        let t = |us: u64| format!("{:.1}ms", us as f64 / 1000.0);
        writeln!(
            out,
            "  latency    segments p50={} p90={} p99={} max={}{}",
            t(l.p50_us),
            t(l.p90_us),
            t(l.p99_us),
            t(l.max_us),
            crate::stats::failed_left_out(s.failed_requests)
        )?;
        let u = &s.startup;
        writeln!(out, "  start-up   p50={} p99={} max={}", t(u.p50_us), t(u.p99_us), t(u.max_us))?;
        writeln!(
            out,
            "  switches   {} up, {} down ({} viewers switched)",
            s.switches_up, s.switches_down, s.viewers_switched
        )?;
        writeln!(
            out,
            "  ended      {} viewers ({} of them started playing): complete={} deadline={} failed={}",
            s.viewers, s.playing, s.ended_complete, s.ended_deadline, s.ended_failed
        )?;
        if s.failed_requests > 0 {
            let lead = format!("  failed     {} of {} requests:", s.failed_requests, s.requests);
            viewer_report::write_counts(out, &lead, ErrorKind::ALL.map(|k| (k.name(), s.errors.get(k))))?;
            let errors = self.viewers.iter().map(|v| (v.index, v.error.as_deref()));
            viewer_report::write_first_error(out, "  first      ", errors)?;
        }
        writeln!(
            out,
            "  generator  CPU {:.2}s user + {:.2}s system = {:.0}% of a core",
            s.generator_cpu_user_s, s.generator_cpu_system_s, s.generator_cpu_percent
        )?;
        writeln!(out)
    }
}

impl ReportWriter<PlayerReport> for TextSummary {
    fn write_report(&self, report: &PlayerReport, out: &mut dyn Write) -> io::Result<()> {
        report.write_summary(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::player::manifest::Track;

    #[test]
    fn summary_counts_perfect_viewers_and_round_trips() {
        let mut config = PlayerConfig::new(Protocol::Hls, "http://127.0.0.1:1/f.mp4/master.m3u8", 3);
        config.rendition = RenditionChoice::Height(360);
        let presentation = Presentation {
            protocol: Protocol::Hls,
            manifest: config.url.clone(),
            renditions: vec![Track {
                name: "640x360 800 kb/s".into(),
                bandwidth: 800_000,
                height: Some(360),
                playlist: None,
                init: None,
                segments: Vec::new(),
                audio: None,
            }],
            audio: Vec::new(),
        };
        let viewer = |i, stalls, failed, end| {
            let mut v = ViewerResult::new(i, 0, 1);
            v.stalls = stalls;
            v.failed_requests = failed;
            v.end = end;
            v.segments = 3;
            v.segments_by_rendition[0] = 3;
            v.segment_bytes = 1_000_000;
            v.startup_ms = Some(10);
            v
        };
        let viewers = vec![
            viewer(0, 0, 0, EndReason::Complete),
            viewer(1, 2, 0, EndReason::Complete),
            viewer(2, 0, 1, EndReason::Complete),
        ];
        let report = PlayerReport::build(
            &config,
            &presentation,
            Some(0),
            SystemTime::now(),
            Duration::from_secs(2),
            (0.5, 0.25),
            &SharedStats::default(),
            viewers,
        );
        let s = &report.summary;
        assert_eq!((s.viewers, s.perfect, s.viewers_with_stalls, s.stalls), (3, 1, 1, 2));
        assert_eq!((s.segments, s.segment_bytes, s.failed_requests), (9, 3_000_000, 1));
        assert_eq!(report.renditions[0].segments_played, 9);
        assert!((s.generator_cpu_percent - 37.5).abs() < 1e-9);
        let text = serde_json::to_string(&report).unwrap();
        assert!(text.contains("\"kind\":\"hls\""), "{text}");
        assert_eq!(PlayerReport::from_json(&text).unwrap(), report);
        let mut out = Vec::new();
        report.write_summary(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("perfect    1 of 3 viewers"), "{out}");
        // 3 MB of bodies in 2 s: 12 Mbit/s in all, 4 a viewer; each viewer ended once.
        assert!(out.contains("12.0 Mbit/s in all, 4.00 per viewer that played"), "{out}");
        assert!(
            out.contains("ended      3 viewers (3 of them started playing): complete=3 deadline=0 failed=0"),
            "{out}"
        );
        assert!(
            out.contains("(successes only: 1 failed request(s) left out, counted under errors)"),
            "{out}"
        );
        assert!(out.contains("*rendition 0: 640x360"), "{out}");
    }
}
