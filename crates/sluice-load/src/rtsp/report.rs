//! The result of an RTSP viewer run as data: the settings, one [`ViewerResult`] per viewer and
//! the E5 summary built from them (perfect-sending clients, each judged against its own count
//! of the samples sent to it, or against `--expect-samples` when the whole file is expected,
//! mean and standard deviation of samples received, lost packets, failures and end reasons by
//! kind). It serializes to JSON and reads back (the lab keeps runs), and renders the readable
//! end-of-run summary. It measures nothing.

use std::io::{self, Write};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::outcome::{EndReason, FailureKind, ViewerError};
use super::{RtspConfig, RtspTransport};
use crate::error::LoadError;
use crate::output::{ReportWriter, TextSummary};
use crate::viewer_report;

/// What one viewer received.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ViewerResult {
    /// Viewer number, from 0.
    pub index: usize,
    /// Planned start, ms after the run's start.
    pub start_ms: u64,
    /// From its start to the PLAY response, ms (when it got that far).
    pub setup_ms: Option<u64>,
    /// From its start to the first video sample, ms.
    pub first_sample_ms: Option<u64>,
    /// How long it played, ms.
    pub playing_ms: Option<u64>,
    /// Complete video access units received.
    pub samples: u64,
    /// Video samples the server sent it for the time it played, from the RTP timestamps it
    /// received (see the module docs): what it must have received to be perfect, unless the
    /// run expects a count of every viewer (`--expect-samples`).
    #[serde(default)]
    pub expected_samples: u64,
    /// Audio frames received.
    pub audio_frames: u64,
    /// RTP packets lost (sequence-number gaps, all streams).
    pub lost_packets: u64,
    /// RTP packets lost on the counted video stream.
    #[serde(default)]
    pub video_lost_packets: u64,
    /// Media payload bytes received (video and audio).
    pub bytes: u64,
    /// RTP and RTCP datagrams (UDP) or interleaved frames (TCP) received.
    #[serde(default)]
    pub datagrams: u64,
    /// Reads that returned them: messages over UDP (a GRO message holds many datagrams), reads
    /// of the connection over TCP.
    #[serde(default)]
    pub reads: u64,
    /// Why it stopped.
    pub end: EndReason,
    /// The failure, when it failed.
    pub failure: Option<FailureKind>,
    /// The failure's message.
    pub error: Option<String>,
}

impl ViewerResult {
    pub(crate) fn new(index: usize, start_ms: u64) -> ViewerResult {
        ViewerResult {
            index,
            start_ms,
            setup_ms: None,
            first_sample_ms: None,
            playing_ms: None,
            samples: 0,
            expected_samples: 0,
            audio_frames: 0,
            lost_packets: 0,
            video_lost_packets: 0,
            bytes: 0,
            datagrams: 0,
            reads: 0,
            end: EndReason::Failed,
            failure: None,
            error: None,
        }
    }

    pub(crate) fn failed(mut self, error: ViewerError) -> ViewerResult {
        self.end = EndReason::Failed;
        self.failure = Some(error.kind());
        self.error = Some(error.short_message());
        self
    }

    pub(crate) fn panicked(index: usize) -> ViewerResult {
        let mut r = ViewerResult::new(index, 0);
        r.failure = Some(FailureKind::Panicked);
        r.error = Some("the viewer task panicked".into());
        r
    }
}

/// Viewers that failed, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)] // one field per `FailureKind`, documented there
pub struct FailureCounts {
    pub connect: u64,
    pub describe: u64,
    pub no_video: u64,
    pub setup: u64,
    pub play: u64,
    pub timeout: u64,
    pub no_media: u64,
    pub stream: u64,
    pub panicked: u64,
}

impl FailureCounts {
    /// The count of `kind`.
    pub fn get(&self, kind: FailureKind) -> u64 {
        let mut copy = *self;
        *copy.slot(kind)
    }

    fn add(&mut self, kind: FailureKind) {
        *self.slot(kind) += 1;
    }

    fn slot(&mut self, kind: FailureKind) -> &mut u64 {
        match kind {
            FailureKind::Connect => &mut self.connect,
            FailureKind::Describe => &mut self.describe,
            FailureKind::NoVideo => &mut self.no_video,
            FailureKind::Setup => &mut self.setup,
            FailureKind::Play => &mut self.play,
            FailureKind::Timeout => &mut self.timeout,
            FailureKind::NoMedia => &mut self.no_media,
            FailureKind::Stream => &mut self.stream,
            FailureKind::Panicked => &mut self.panicked,
        }
    }

    /// All failures.
    pub fn total(&self) -> u64 {
        FailureKind::ALL.iter().map(|&k| self.get(k)).sum()
    }
}

/// Viewers by how they stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[allow(missing_docs)] // one field per `EndReason`, documented there
pub struct EndCounts {
    pub stream_end: u64,
    pub closed: u64,
    pub expected: u64,
    pub deadline: u64,
    pub failed: u64,
}

/// Where the sample count a perfect viewer must reach came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReferenceSource {
    /// Given with `--expect-samples`: every viewer must receive the whole file.
    Expected,
    /// The most samples any viewer received (reports of earlier versions; a viewer that started
    /// later and was stopped by the deadline fell short of it without losing anything).
    MaxReceived,
    /// Each viewer's own: the samples sent to it for the time it played, from its RTP
    /// timestamps ([`ViewerResult::expected_samples`]); the reference count is the largest.
    SentToEach,
}

/// The run's figures (E5's).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RtspSummary {
    /// Viewers started.
    pub clients: usize,
    /// Viewers that got a PLAY response.
    pub playing_clients: usize,
    /// Viewers that lost no video packet and received every sample they were owed: all
    /// `--expect-samples`, else every sample sent to them for the time they played ("perfect
    /// sending").
    pub perfect_clients: usize,
    /// The sample count a perfect viewer reaches: `--expect-samples`, else the largest of the
    /// viewers' own counts.
    pub reference_samples: u64,
    /// Where `reference_samples` came from.
    pub reference: ReferenceSource,
    /// Mean of samples received over all viewers (failed ones count with what they got).
    pub samples_mean: f64,
    /// Population standard deviation of samples received over all viewers.
    pub samples_stdev: f64,
    /// Fewest samples a viewer received.
    pub samples_min: u64,
    /// Most samples a viewer received.
    pub samples_max: u64,
    /// Samples received by all viewers together.
    pub samples_total: u64,
    /// Lost RTP packets, all viewers, all streams.
    pub lost_packets: u64,
    /// Lost RTP packets of the video stream, all viewers.
    #[serde(default)]
    pub video_lost_packets: u64,
    /// Viewers that lost at least one packet.
    pub clients_with_loss: usize,
    /// Audio frames received, all viewers.
    pub audio_frames: u64,
    /// Media bytes received, all viewers.
    pub bytes: u64,
    /// Media bytes per second over the run.
    pub bytes_per_s: f64,
    /// Failed viewers by kind.
    pub failures: FailureCounts,
    /// Viewers by how they stopped.
    pub ends: EndCounts,
    /// What the generator itself spent receiving.
    #[serde(default)]
    pub generator: GeneratorCost,
}

/// The generator's own CPU: the process's user and system seconds over the run (RTSP exchanges
/// and receiver threads together), per datagram and per second of viewing, so a run shows
/// whether the generator rather than the server was the limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GeneratorCost {
    /// CPU seconds of the whole process over the run.
    pub cpu_s: f64,
    /// Datagrams (UDP) or interleaved frames (TCP) received, all viewers.
    pub datagrams: u64,
    /// Reads that returned them (GRO messages, or reads of a TCP connection).
    pub reads: u64,
    /// Seconds of playing, summed over the viewers.
    pub viewer_s: f64,
    /// CPU microseconds per datagram.
    pub us_per_datagram: f64,
    /// CPU milliseconds per viewer-second.
    pub ms_per_viewer_s: f64,
}

impl GeneratorCost {
    /// The cost of receiving what `viewers` received with `cpu_s` CPU seconds.
    pub fn from_viewers(viewers: &[ViewerResult], cpu_s: f64) -> GeneratorCost {
        let datagrams: u64 = viewers.iter().map(|v| v.datagrams).sum();
        let viewer_s: f64 = viewers.iter().filter_map(|v| v.playing_ms).map(|ms| ms as f64 / 1000.0).sum();
        GeneratorCost {
            cpu_s,
            datagrams,
            reads: viewers.iter().map(|v| v.reads).sum(),
            viewer_s,
            us_per_datagram: if datagrams > 0 { cpu_s * 1e6 / datagrams as f64 } else { 0.0 },
            ms_per_viewer_s: if viewer_s > 0.0 { cpu_s * 1e3 / viewer_s } else { 0.0 },
        }
    }
}

impl RtspSummary {
    /// Summarizes `viewers`; `expect` is the required sample count, if known.
    pub fn from_viewers(viewers: &[ViewerResult], expect: Option<u64>, elapsed: Duration) -> RtspSummary {
        let n = viewers.len();
        let samples_max = viewers.iter().map(|v| v.samples).max().unwrap_or(0);
        let samples_min = viewers.iter().map(|v| v.samples).min().unwrap_or(0);
        let (reference_samples, reference) = match expect {
            Some(e) => (e, ReferenceSource::Expected),
            None => {
                (viewers.iter().map(|v| v.expected_samples).max().unwrap_or(0), ReferenceSource::SentToEach)
            }
        };
        let owed = |v: &ViewerResult| expect.unwrap_or(v.expected_samples);
        let perfect = |v: &ViewerResult| {
            v.failure.is_none() && v.video_lost_packets == 0 && owed(v) > 0 && v.samples >= owed(v)
        };
        let samples_total: u64 = viewers.iter().map(|v| v.samples).sum();
        let samples_mean = if n == 0 { 0.0 } else { samples_total as f64 / n as f64 };
        let samples_stdev = if n == 0 {
            0.0
        } else {
            let var =
                viewers.iter().map(|v| (v.samples as f64 - samples_mean).powi(2)).sum::<f64>() / n as f64;
            var.sqrt()
        };
        let mut failures = FailureCounts::default();
        let mut ends = EndCounts::default();
        for v in viewers {
            if let Some(k) = v.failure {
                failures.add(k);
            }
            match v.end {
                EndReason::StreamEnd => ends.stream_end += 1,
                EndReason::Closed => ends.closed += 1,
                EndReason::Expected => ends.expected += 1,
                EndReason::Deadline => ends.deadline += 1,
                EndReason::Failed => ends.failed += 1,
            }
        }
        let bytes: u64 = viewers.iter().map(|v| v.bytes).sum();
        let secs = elapsed.as_secs_f64();
        RtspSummary {
            clients: n,
            playing_clients: viewers.iter().filter(|v| v.setup_ms.is_some()).count(),
            perfect_clients: viewers.iter().filter(|v| perfect(v)).count(),
            reference_samples,
            reference,
            samples_mean,
            samples_stdev,
            samples_min,
            samples_max,
            samples_total,
            lost_packets: viewers.iter().map(|v| v.lost_packets).sum(),
            video_lost_packets: viewers.iter().map(|v| v.video_lost_packets).sum(),
            clients_with_loss: viewers.iter().filter(|v| v.lost_packets > 0).count(),
            audio_frames: viewers.iter().map(|v| v.audio_frames).sum(),
            bytes,
            bytes_per_s: if secs > 0.0 { bytes as f64 / secs } else { 0.0 },
            failures,
            ends,
            generator: GeneratorCost::from_viewers(viewers, 0.0),
        }
    }
}

/// The settings a run used, as recorded in its report.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RtspSettings {
    /// The URL.
    pub url: String,
    /// Viewers.
    pub clients: usize,
    /// RTP transport.
    pub transport: RtspTransport,
    /// Ramp over which viewers started, ms.
    pub ramp_ms: u64,
    /// The run's deadline, ms (the given `--duration` or the default cap).
    pub deadline_ms: u64,
    /// Whether the deadline was given (`--duration`) rather than the default cap.
    pub duration_given: bool,
    /// `--expect-samples`, when given.
    pub expect_samples: Option<u64>,
    /// Silence that marks the stream's end, ms.
    pub idle_end_ms: u64,
    /// Setup and first-sample deadline, ms.
    pub setup_timeout_ms: u64,
    /// Whether audio was set up too.
    pub audio: bool,
    /// Receive buffer asked for on the viewers' UDP sockets, bytes (0: the kernel's default).
    #[serde(default)]
    pub udp_receive_buffer: usize,
    /// Whether the viewers' UDP sockets took GRO messages whole (`--udp-gro`).
    #[serde(default)]
    pub udp_gro: bool,
    /// Receiver and runtime worker threads.
    pub threads: usize,
}

/// Everything an RTSP viewer run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RtspReport {
    /// Always `rtsp` (tells this report from the HTTP one).
    pub kind: String,
    /// Settings of the run.
    pub settings: RtspSettings,
    /// Wall-clock start, ms since the Unix epoch.
    pub started_at_unix_ms: u64,
    /// Length of the run, seconds.
    pub duration_s: f64,
    /// The figures.
    pub summary: RtspSummary,
    /// One entry per viewer, by index.
    pub viewers: Vec<ViewerResult>,
}

impl RtspReport {
    /// Builds the report of a finished run.
    pub fn build(
        config: &RtspConfig,
        started_at: SystemTime,
        elapsed: Duration,
        viewers: Vec<ViewerResult>,
    ) -> RtspReport {
        let ms = |d: Duration| d.as_millis() as u64;
        RtspReport {
            kind: "rtsp".into(),
            settings: RtspSettings {
                url: config.url.clone(),
                clients: config.clients,
                transport: config.transport,
                ramp_ms: ms(config.ramp),
                deadline_ms: ms(config.deadline()),
                duration_given: config.duration.is_some(),
                expect_samples: config.expect_samples,
                idle_end_ms: ms(config.idle_end),
                setup_timeout_ms: ms(config.setup_timeout),
                audio: config.audio,
                udp_receive_buffer: config.udp_receive_buffer,
                udp_gro: config.udp_gro,
                threads: config.threads,
            },
            started_at_unix_ms: started_at.duration_since(UNIX_EPOCH).map_or(0, ms),
            duration_s: elapsed.as_secs_f64(),
            summary: RtspSummary::from_viewers(&viewers, config.expect_samples, elapsed),
            viewers,
        }
    }

    /// Reads a report written by [`JsonReport`](crate::JsonReport).
    pub fn from_json(text: &str) -> Result<RtspReport, LoadError> {
        viewer_report::read_json(text)
    }

    /// The readable end-of-run summary ([`TextSummary`] writes it).
    fn write_summary(&self, out: &mut dyn Write) -> io::Result<()> {
        let st = &self.settings;
        let s = &self.summary;
        let gro = match (st.transport, st.udp_gro) {
            (RtspTransport::Udp, true) => " with GRO",
            (RtspTransport::Udp, false) => " without GRO",
            _ => "",
        };
        let how = format!(" over {}{gro}", st.transport.name());
        viewer_report::write_head(
            out,
            "rtsp",
            st.clients,
            &how,
            st.ramp_ms,
            st.threads,
            self.duration_s,
            &st.url,
        )?;
        writeln!(out)?;
        match s.reference {
            ReferenceSource::Expected => writeln!(
                out,
                "  perfect    {} of {} viewers received all {} samples (expected)",
                s.perfect_clients, s.clients, s.reference_samples
            )?,
            ReferenceSource::MaxReceived => writeln!(
                out,
                "  perfect    {} of {} viewers received all {} samples (most received)",
                s.perfect_clients, s.clients, s.reference_samples
            )?,
            ReferenceSource::SentToEach => writeln!(
                out,
                "  perfect    {} of {} viewers received all samples sent to them while they played \
                 (up to {}), losing none",
                s.perfect_clients, s.clients, s.reference_samples
            )?,
        }
        writeln!(
            out,
            "  samples    mean={:.1} stdev={:.1} min={} max={} total={}",
            s.samples_mean, s.samples_stdev, s.samples_min, s.samples_max, s.samples_total
        )?;
        writeln!(
            out,
            "  lost       {} RTP packets, {} of them video ({} viewers with loss)",
            s.lost_packets, s.video_lost_packets, s.clients_with_loss
        )?;
        let mbit_per_s = s.bytes_per_s * 8.0 / 1e6;
        writeln!(
            out,
            "  received   {:.1} MB media, {:.2} Mbit/s in all ({:.2} per viewer that played), {} audio frames",
            s.bytes as f64 / 1e6,
            mbit_per_s,
            mbit_per_s / s.playing_clients.max(1) as f64,
            s.audio_frames
        )?;
        let g = &s.generator;
        if g.datagrams > 0 {
            writeln!(
                out,
                "  generator  {:.2} s CPU: {:.3} µs per datagram, {:.3} ms per viewer-second ({} datagrams in {} reads)",
                g.cpu_s, g.us_per_datagram, g.ms_per_viewer_s, g.datagrams, g.reads
            )?;
        }
        let e = &s.ends;
        writeln!(
            out,
            "  ended      {} viewers ({} of them played): stream_end={} closed={} expected={} deadline={} failed={}",
            s.clients, s.playing_clients, e.stream_end, e.closed, e.expected, e.deadline, e.failed
        )?;
        if s.failures.total() > 0 {
            viewer_report::write_counts(
                out,
                "  failures  ",
                FailureKind::ALL.map(|k| (k.name(), s.failures.get(k))),
            )?;
            let errors = self.viewers.iter().map(|v| (v.index, v.error.as_deref()));
            viewer_report::write_first_error(out, "  first     ", errors)?;
        }
        writeln!(out)
    }
}

impl ReportWriter<RtspReport> for TextSummary {
    fn write_report(&self, report: &RtspReport, out: &mut dyn Write) -> io::Result<()> {
        report.write_summary(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn viewer(index: usize, samples: u64, lost: u64, end: EndReason) -> ViewerResult {
        let mut v = ViewerResult::new(index, 0);
        v.samples = samples;
        v.expected_samples = 180;
        v.lost_packets = lost;
        v.video_lost_packets = lost;
        v.end = end;
        v.setup_ms = Some(5);
        v
    }

    /// A viewer stopped by the deadline after receiving `samples` of the `sent` it was sent.
    fn cut_off(index: usize, samples: u64, sent: u64) -> ViewerResult {
        let mut v = viewer(index, samples, 0, EndReason::Deadline);
        v.expected_samples = sent;
        v
    }

    #[test]
    fn viewers_that_started_later_are_judged_by_what_they_were_sent() {
        // A ramp: each viewer played less of the file before the deadline, lost nothing and got
        // all it was sent; one more lost no packet but was sent only 80 of its 90 frames' span.
        let viewers =
            vec![cut_off(0, 150, 150), cut_off(1, 120, 120), cut_off(2, 90, 90), cut_off(3, 80, 90)];
        let s = RtspSummary::from_viewers(&viewers, None, Duration::from_secs(8));
        assert_eq!((s.perfect_clients, s.reference_samples), (3, 150), "{s:#?}");
        assert_eq!(s.reference, ReferenceSource::SentToEach);
        // A video packet lost is never perfect, whatever the count; an audio one is not judged.
        let mut lossy = cut_off(4, 90, 90);
        lossy.video_lost_packets = 1;
        lossy.lost_packets = 1;
        let mut audio_gap = cut_off(5, 90, 90);
        audio_gap.lost_packets = 1;
        let s = RtspSummary::from_viewers(&[lossy, audio_gap], None, Duration::from_secs(8));
        assert_eq!(s.perfect_clients, 1);
        // With --expect-samples the whole file is expected of every viewer.
        let s = RtspSummary::from_viewers(&viewers, Some(150), Duration::from_secs(8));
        assert_eq!((s.perfect_clients, s.reference), (1, ReferenceSource::Expected));
        let mut out = Vec::new();
        let config = RtspConfig::new("rtsp://127.0.0.1:8554/x.mp4", 4);
        // 1 MB each in 8 s: 4 Mbit/s in all, 1 a viewer.
        let viewers: Vec<ViewerResult> =
            viewers.into_iter().map(|v| ViewerResult { bytes: 1_000_000, ..v }).collect();
        RtspReport::build(&config, SystemTime::now(), Duration::from_secs(8), viewers)
            .write_summary(&mut out)
            .unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("3 of 4 viewers received all samples sent to them"), "{out}");
        assert!(out.contains("4.00 Mbit/s in all (1.00 per viewer that played)"), "{out}");
        // Each viewer is counted once, by how it ended.
        assert!(
            out.contains("ended      4 viewers (4 of them played): stream_end=0 closed=0 expected=0 deadline=4 failed=0"),
            "{out}"
        );
    }

    #[test]
    fn summary_against_what_each_was_sent() {
        let viewers = vec![
            viewer(0, 180, 0, EndReason::StreamEnd),
            viewer(1, 180, 0, EndReason::StreamEnd),
            viewer(2, 170, 3, EndReason::StreamEnd),
            ViewerResult::new(3, 0).failed(ViewerError::NoVideo),
        ];
        let s = RtspSummary::from_viewers(&viewers, None, Duration::from_secs(2));
        assert_eq!((s.clients, s.playing_clients, s.perfect_clients), (4, 3, 2));
        assert_eq!((s.reference_samples, s.reference), (180, ReferenceSource::SentToEach));
        assert_eq!((s.samples_min, s.samples_max, s.samples_total), (0, 180, 530));
        assert!((s.samples_mean - 132.5).abs() < 1e-9);
        // Population stdev of 180, 180, 170, 0.
        let expect = ((47.5f64.powi(2) * 2.0 + 37.5f64.powi(2) + 132.5f64.powi(2)) / 4.0).sqrt();
        assert!((s.samples_stdev - expect).abs() < 1e-9);
        assert_eq!((s.lost_packets, s.clients_with_loss), (3, 1));
        assert_eq!(s.failures.no_video, 1);
        assert_eq!(s.failures.total(), 1);
        assert_eq!((s.ends.stream_end, s.ends.failed), (3, 1));
    }

    #[test]
    fn summary_against_an_expected_count() {
        let viewers = vec![viewer(0, 180, 0, EndReason::Expected), viewer(1, 179, 1, EndReason::StreamEnd)];
        let s = RtspSummary::from_viewers(&viewers, Some(181), Duration::from_secs(1));
        assert_eq!((s.perfect_clients, s.reference), (0, ReferenceSource::Expected));
        let s = RtspSummary::from_viewers(&viewers, Some(180), Duration::from_secs(1));
        assert_eq!(s.perfect_clients, 1);
        assert!((s.samples_stdev - 0.5).abs() < 1e-9);
        let empty = RtspSummary::from_viewers(&[], None, Duration::ZERO);
        assert_eq!((empty.perfect_clients, empty.samples_mean, empty.bytes_per_s), (0, 0.0, 0.0));
    }

    #[test]
    fn json_round_trips_and_summary_renders() {
        let mut config = RtspConfig::new("rtsp://127.0.0.1:8554/x.mp4", 2);
        config.transport = RtspTransport::Udp;
        config.expect_samples = Some(180);
        let viewers = vec![
            viewer(0, 180, 0, EndReason::Expected),
            ViewerResult::new(1, 2500).failed(ViewerError::Timeout(Duration::from_secs(10))),
        ];
        let report = RtspReport::build(&config, SystemTime::now(), Duration::from_secs(7), viewers);
        let dir = std::env::temp_dir().join(format!("sluice-rtsp-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        crate::write_file(&crate::JsonReport, &report, &path).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(text.contains("\"transport\": \"udp\""), "{text}");
        assert!(text.contains("\"failure\": \"timeout\""), "{text}");
        assert_eq!(RtspReport::from_json(&text).unwrap(), report);
        assert!(matches!(RtspReport::from_json("{}"), Err(LoadError::InvalidReport(_))));
        let mut out = Vec::new();
        report.write_summary(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        assert!(out.contains("1 of 2 viewers received all 180 samples (expected)"), "{out}");
        assert!(out.contains("failures   timeout=1"), "{out}");
    }
}
