//! Stream players (`sluice load http --hls URL` / `--dash URL`): N virtual viewers that each play
//! a VOD stream the way a player does. The manifest is fetched and expanded once into segment
//! lists ([`manifest`]); then every viewer fetches the manifest (and, for HLS, the media playlists
//! it plays) itself, the init segments, and the segments in order over one keep-alive connection
//! of the generator's HTTP client, either at real time (after a start-up buffer, each segment is
//! asked for when the playhead comes within the buffer of it; one that arrives after its playback
//! deadline is a stall, and playback waits for it) or as fast as the server allows. A viewer plays
//! one rendition, or switches by measured throughput ([`Abr`], hls.js's two EWMAs). Viewers start
//! spread over a ramp and stop at the end of the stream or the run's deadline. The result is a
//! [`PlayerReport`]: per-viewer counts, segment latency and start-up HDR histograms, stalls,
//! switches, failed requests by kind, the generator's own CPU.
//!
//! It owns the players and their accounting. It does not own the command line, HTTP framing (the
//! crate's client), nor any server.
//!
//! ```no_run
//! use sluice_load::player::{run_player, PlayerConfig, Protocol, RenditionChoice};
//! let mut config = PlayerConfig::new(Protocol::Hls, "http://127.0.0.1:8080/film.mp4/master.m3u8", 20);
//! config.rendition = RenditionChoice::Height(1080);
//! let report = run_player(&config, &mut sluice_load::NoObserver).unwrap();
//! println!("{} of {} viewers never stalled", report.summary.perfect, report.summary.viewers);
//! ```

pub mod manifest;
mod report;
mod viewer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

pub use manifest::{ManifestError, Presentation, Protocol, Track};
pub use report::{EndReason, PlayerReport, PlayerSettings, PlayerSummary, RenditionSummary, ViewerResult};

use crate::client::{Connection, ConnectionMode, ExpectedStatus};
use crate::error::LoadError;
use crate::progress::ViewerObserver;
use crate::stats::{DurationHistogram, ErrorCounts};
use crate::target::{Method, Target, TargetSpec};

/// The longest a run may last when no duration is given.
pub const DEFAULT_MAX_DURATION: Duration = Duration::from_secs(3600);

/// Largest manifest or playlist accepted, bytes.
pub const MAX_MANIFEST_BYTES: usize = 16 << 20;

/// How a viewer paces its segment requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Pacing {
    /// As a player: the start-up buffer as fast as possible, then each segment when the
    /// playhead comes within the buffer of it; late segments are stalls.
    #[default]
    RealTime,
    /// Every segment as soon as the previous one arrived (stalls are not counted).
    Fast,
}

/// Which rendition a viewer plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RenditionChoice {
    /// Start at the first rendition listed and switch by measured throughput.
    #[default]
    Auto,
    /// The lowest declared bandwidth.
    Lowest,
    /// The highest declared bandwidth.
    Highest,
    /// The one at this position in the manifest (from 0).
    Index(usize),
    /// The (first) one of this picture height.
    Height(u64),
    /// The highest whose declared bandwidth is at most this many bits per second.
    MaxBandwidth(u64),
}

impl RenditionChoice {
    /// Parses `auto`, `lowest`, `highest`, an index (`0`), a height (`1080p`) or a bandwidth
    /// ceiling (`3000k`, `5M`, bits per second).
    pub fn parse(text: &str) -> Result<RenditionChoice, String> {
        let t = text.trim();
        let number = |s: &str| s.parse::<u64>().map_err(|_| format!("`{text}`: not a number"));
        Ok(match t {
            "auto" => RenditionChoice::Auto,
            "lowest" => RenditionChoice::Lowest,
            "highest" => RenditionChoice::Highest,
            _ if t.ends_with('p') => RenditionChoice::Height(number(&t[..t.len() - 1])?),
            _ if t.ends_with(['k', 'K']) => RenditionChoice::MaxBandwidth(number(&t[..t.len() - 1])? * 1000),
            _ if t.ends_with('M') => RenditionChoice::MaxBandwidth(number(&t[..t.len() - 1])? * 1_000_000),
            _ => RenditionChoice::Index(
                t.parse().map_err(|_| {
                    format!("`{text}`: expected auto, lowest, highest, an index, HEIGHTp or a bandwidth such as 3000k")
                })?,
            ),
        })
    }

    /// The fixed rendition index in `p`, or `None` for [`RenditionChoice::Auto`].
    pub fn resolve(self, p: &Presentation) -> Result<Option<usize>, String> {
        let by_bandwidth = || {
            let mut order: Vec<usize> = (0..p.renditions.len()).collect();
            order.sort_by_key(|&i| p.renditions[i].bandwidth);
            order
        };
        let found = match self {
            RenditionChoice::Auto if p.renditions.len() > 1 => return Ok(None),
            RenditionChoice::Auto => Some(0),
            RenditionChoice::Lowest => by_bandwidth().first().copied(),
            RenditionChoice::Highest => by_bandwidth().last().copied(),
            RenditionChoice::Index(i) => (i < p.renditions.len()).then_some(i),
            RenditionChoice::Height(h) => p.renditions.iter().position(|r| r.height == Some(h)),
            RenditionChoice::MaxBandwidth(b) => {
                by_bandwidth().into_iter().rev().find(|&i| p.renditions[i].bandwidth <= b)
            }
        };
        found.map(Some).ok_or_else(|| {
            let list: Vec<String> =
                p.renditions.iter().enumerate().map(|(i, r)| format!("{i}: {}", r.name)).collect();
            format!("no rendition matches {self:?}; the stream has {}", list.join(", "))
        })
    }
}

/// What a player run does.
#[derive(Debug, Clone, PartialEq)]
pub struct PlayerConfig {
    /// HLS or DASH.
    pub protocol: Protocol,
    /// The master playlist (or media playlist) or MPD.
    pub url: String,
    /// Viewers.
    pub viewers: usize,
    /// Viewers start evenly spread over this span.
    pub ramp: Duration,
    /// Deadline of the whole run from its start; `None` means [`DEFAULT_MAX_DURATION`].
    pub duration: Option<Duration>,
    /// Real time or as fast as possible.
    pub pacing: Pacing,
    /// Media a viewer buffers before playing, and keeps ahead of the playhead while playing.
    pub buffer: Duration,
    /// Which rendition.
    pub rendition: RenditionChoice,
    /// Deadline of each request.
    pub timeout: Duration,
    /// Runtime worker threads.
    pub threads: usize,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Allow targets outside loopback.
    pub allow_non_loopback: bool,
}

impl PlayerConfig {
    /// `viewers` viewers of `url` at real time with a 10 s buffer, switching by throughput.
    pub fn new(protocol: Protocol, url: impl Into<String>, viewers: usize) -> PlayerConfig {
        PlayerConfig {
            protocol,
            url: url.into(),
            viewers,
            ramp: Duration::ZERO,
            duration: None,
            pacing: Pacing::RealTime,
            buffer: Duration::from_secs(10),
            rendition: RenditionChoice::Auto,
            timeout: Duration::from_secs(10),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            headers: Vec::new(),
            allow_non_loopback: false,
        }
    }

    /// The run's hard deadline from its start.
    pub fn deadline(&self) -> Duration {
        self.duration.unwrap_or(DEFAULT_MAX_DURATION)
    }

    /// Checks that the run is bounded and consistent.
    pub fn validate(&self) -> Result<(), LoadError> {
        let invalid = |m: &str| Err(LoadError::InvalidConfig(m.to_string()));
        if self.viewers == 0 || self.viewers > 1_000_000 {
            return invalid("viewers (--vus) must be 1 to 1,000,000");
        }
        if self.threads == 0 || self.threads > 1024 {
            return invalid("threads must be 1 to 1024");
        }
        if self.duration.is_some_and(|d| d.is_zero() || d > crate::config::MAX_RUN) {
            return invalid("the duration must be above zero and at most a week");
        }
        if self.timeout.is_zero() {
            return invalid("the request timeout must be above zero");
        }
        if self.ramp >= self.deadline() {
            return invalid("--ramp must be shorter than --duration");
        }
        Ok(())
    }
}

/// Where a player run is, for live displays.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlayerProgress {
    /// Time since the run's start.
    pub elapsed: Duration,
    /// Viewers started.
    pub started: u64,
    /// Viewers whose playback has begun.
    pub playing: u64,
    /// Viewers that stopped.
    pub ended: u64,
    /// Segments received.
    pub segments: u64,
    /// Stalls so far.
    pub stalls: u64,
    /// Failed requests so far.
    pub failed: u64,
    /// Body bytes received.
    pub bytes: u64,
}

impl std::fmt::Display for PlayerProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}s  viewers {} started, {} playing, {} ended  segments {}  stalls {}  failed {}  {:.1} MB",
            self.elapsed.as_secs(),
            self.started,
            self.playing,
            self.ended,
            self.segments,
            self.stalls,
            self.failed,
            self.bytes as f64 / 1e6
        )
    }
}

/// Counters the viewers bump as they go (relaxed: a display, not a measurement).
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub viewers: crate::viewer_report::ViewerCounts,
    pub segments: AtomicU64,
    pub stalls: AtomicU64,
    pub bytes: AtomicU64,
}

impl Live {
    fn snapshot(&self, elapsed: Duration) -> PlayerProgress {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (started, playing, ended, failed) = self.viewers.now();
        PlayerProgress {
            elapsed,
            started,
            playing,
            ended,
            segments: get(&self.segments),
            stalls: get(&self.stalls),
            failed,
            bytes: get(&self.bytes),
        }
    }
}

/// The distributions every viewer adds to (a lock per request: a segment every few seconds per
/// viewer contends little, and one set of histograms costs what one viewer's would).
#[derive(Debug, Default)]
pub(crate) struct SharedStats {
    pub segment_latency: DurationHistogram,
    pub document_latency: DurationHistogram,
    pub startup: DurationHistogram,
    pub errors: ErrorCounts,
}

/// A track with its requests rendered once for every viewer.
#[derive(Debug)]
pub(crate) struct PlanTrack {
    pub playlist: Option<Target>,
    pub init: Option<Target>,
    pub segments: Vec<PlanSegment>,
    pub audio: Option<usize>,
    pub bandwidth: u64,
}

#[derive(Debug)]
pub(crate) struct PlanSegment {
    pub target: Target,
    pub start: f64,
    pub duration: f64,
}

/// Everything the viewers share.
pub(crate) struct Plan {
    pub manifest: Target,
    pub renditions: Vec<PlanTrack>,
    pub audio: Vec<PlanTrack>,
    /// The fixed rendition, or `None` to switch by throughput.
    pub fixed: Option<usize>,
    pub pacing: Pacing,
    pub buffer: f64,
    pub timeout: Duration,
    pub run_start: tokio::time::Instant,
    pub deadline: tokio::time::Instant,
    pub live: Live,
    pub stats: Mutex<SharedStats>,
}

fn target_of(
    resource: &manifest::Resource,
    headers: &[(String, String)],
    allow_non_loopback: bool,
) -> Result<Target, LoadError> {
    let mut headers = headers.to_vec();
    if let Some((first, last)) = resource.range {
        headers.push(("Range".into(), format!("bytes={first}-{last}")));
    }
    let spec = TargetSpec { url: resource.url.clone(), weight: 1 };
    Target::resolve(&spec, Method::Get, &headers, allow_non_loopback)
}

fn plan_track(track: &Track, config: &PlayerConfig) -> Result<PlanTrack, LoadError> {
    let t = |r: &manifest::Resource| target_of(r, &config.headers, config.allow_non_loopback);
    Ok(PlanTrack {
        playlist: match &track.playlist {
            // A master's media playlists are fetched by each viewer; a lone media playlist is the
            // manifest itself.
            Some(url) if *url != config.url => {
                Some(t(&manifest::Resource { url: url.clone(), range: None })?)
            }
            _ => None,
        },
        init: track.init.as_ref().map(t).transpose()?,
        segments: track
            .segments
            .iter()
            .map(|s| Ok(PlanSegment { target: t(&s.resource)?, start: s.start, duration: s.duration }))
            .collect::<Result<_, LoadError>>()?,
        audio: track.audio,
        bandwidth: track.bandwidth,
    })
}

/// Fetches one document (manifest or playlist) with the generator's client.
async fn fetch_document(
    conn: &mut Connection,
    target: &Target,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let now = tokio::time::Instant::now();
    let (record, body) = conn.request_keeping_body(target, now, now + timeout, MAX_MANIFEST_BYTES).await;
    match record.outcome {
        crate::stats::Outcome::Ok => Ok(body),
        crate::stats::Outcome::Failed(kind) => Err(match record.status {
            Some(status) => format!("{} (status {status})", kind.name()),
            None => kind.name().to_string(),
        }),
        crate::stats::Outcome::Dropped => Err("dropped".into()),
    }
}

/// Fetches the manifest and every media playlist it names, and expands them into segments.
pub async fn load_presentation(config: &PlayerConfig) -> Result<Presentation, LoadError> {
    let err = |url: &str, reason: String| LoadError::Manifest { url: url.to_string(), reason };
    let url = url::Url::parse(&config.url).map_err(|e| err(&config.url, e.to_string()))?;
    let manifest = target_of(
        &manifest::Resource { url: config.url.clone(), range: None },
        &config.headers,
        config.allow_non_loopback,
    )?;
    let mut conn = Connection::new(ConnectionMode::KeepAlive, ExpectedStatus::Success);
    let body = fetch_document(&mut conn, &manifest, config.timeout).await.map_err(|e| err(&config.url, e))?;
    let mut presentation = match config.protocol {
        Protocol::Dash => {
            let text = String::from_utf8_lossy(&body);
            manifest::parse_dash(&url, &text).map_err(|e| err(&config.url, e.0))?
        }
        Protocol::Hls => match manifest::parse_hls(&url, &body).map_err(|e| err(&config.url, e.0))? {
            manifest::HlsPlaylist::Media(track) => Presentation {
                protocol: Protocol::Hls,
                manifest: config.url.clone(),
                renditions: vec![track],
                audio: Vec::new(),
            },
            manifest::HlsPlaylist::Master(mut p) => {
                for track in p.renditions.iter_mut().chain(p.audio.iter_mut()) {
                    let Some(playlist) = track.playlist.clone() else { continue };
                    let target = target_of(
                        &manifest::Resource { url: playlist.clone(), range: None },
                        &config.headers,
                        config.allow_non_loopback,
                    )?;
                    let body = fetch_document(&mut conn, &target, config.timeout)
                        .await
                        .map_err(|e| err(&playlist, e))?;
                    manifest::fill_hls_track(track, &body).map_err(|e| err(&playlist, e.0))?;
                }
                p
            }
        },
    };
    presentation.manifest = config.url.clone();
    Ok(presentation)
}

/// When viewer `index` of `viewers` starts, from the run's start.
fn start_offset(index: usize, viewers: usize, ramp: Duration) -> Duration {
    crate::rtsp::start_offset(index, viewers, ramp)
}

/// CPU seconds (user, system) this process has used.
fn process_cpu() -> (f64, f64) {
    let usage = sluice_cputime::process().unwrap_or_default();
    (usage.user_s, usage.system_s)
}

/// Loads the manifest, runs `config.viewers` viewers to the end and reports on them.
pub fn run_player(
    config: &PlayerConfig,
    observer: &mut dyn ViewerObserver<PlayerProgress>,
) -> Result<PlayerReport, LoadError> {
    config.validate()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.threads)
        .thread_name("sluice-load-player")
        .enable_all()
        .build()
        .map_err(LoadError::Runtime)?;
    let presentation = runtime.block_on(load_presentation(config))?;
    let fixed = config.rendition.resolve(&presentation).map_err(LoadError::InvalidConfig)?;
    let manifest_target = target_of(
        &manifest::Resource { url: config.url.clone(), range: None },
        &config.headers,
        config.allow_non_loopback,
    )?;
    let renditions =
        presentation.renditions.iter().map(|t| plan_track(t, config)).collect::<Result<Vec<_>, _>>()?;
    let audio = presentation.audio.iter().map(|t| plan_track(t, config)).collect::<Result<Vec<_>, _>>()?;
    let cpu_before = process_cpu();
    let started_at = SystemTime::now();
    let start = Instant::now();
    let (results, stats) = runtime.block_on(async {
        let run_start = tokio::time::Instant::from_std(start);
        let plan = Arc::new(Plan {
            manifest: manifest_target,
            renditions,
            audio,
            fixed,
            pacing: config.pacing,
            buffer: config.buffer.as_secs_f64(),
            timeout: config.timeout,
            run_start,
            deadline: run_start + config.deadline(),
            live: Live::default(),
            stats: Mutex::new(SharedStats::default()),
        });
        let tasks: Vec<_> = (0..config.viewers)
            .map(|index| {
                let plan = plan.clone();
                let at = run_start + start_offset(index, config.viewers, config.ramp);
                tokio::spawn(async move {
                    let result = viewer::run_viewer(index, at, &plan).await;
                    plan.live.viewers.ended.fetch_add(1, Ordering::Relaxed);
                    result
                })
            })
            .collect();
        let results = crate::progress::join_ticking(tasks, run_start, ViewerResult::panicked, |elapsed| {
            observer.on_second(&plan.live.snapshot(elapsed))
        })
        .await;
        observer.on_finish();
        let stats = std::mem::take(&mut *plan.stats.lock().unwrap_or_else(|p| p.into_inner()));
        (results, stats)
    });
    let elapsed = start.elapsed();
    let cpu_after = process_cpu();
    runtime.shutdown_timeout(Duration::from_millis(100));
    let cpu = (cpu_after.0 - cpu_before.0, cpu_after.1 - cpu_before.1);
    Ok(PlayerReport::build(config, &presentation, fixed, started_at, elapsed, cpu, &stats, results))
}

/// hls.js's throughput estimate: two exponentially weighted moving averages of the measured
/// bits per second (half-lives 3 s and 9 s of download time), the lower of the two counting.
#[derive(Debug, Clone, Copy)]
pub struct Abr {
    fast: Ewma,
    slow: Ewma,
}

#[derive(Debug, Clone, Copy)]
struct Ewma {
    half_life: f64,
    estimate: f64,
    total_weight: f64,
}

impl Ewma {
    fn sample(&mut self, weight: f64, value: f64) {
        let alpha = 0.5f64.powf(weight / self.half_life);
        self.estimate = value * (1.0 - alpha) + alpha * self.estimate;
        self.total_weight += weight;
    }

    fn get(&self) -> f64 {
        // Corrects the bias toward the zero it started from while few samples are in.
        let zero_factor = 1.0 - 0.5f64.powf(self.total_weight / self.half_life);
        if zero_factor > 0.0 {
            self.estimate / zero_factor
        } else {
            0.0
        }
    }
}

impl Default for Abr {
    fn default() -> Self {
        Abr::new()
    }
}

impl Abr {
    /// hls.js's half-lives for VOD.
    pub fn new() -> Abr {
        let e = |half_life| Ewma { half_life, estimate: 0.0, total_weight: 0.0 };
        Abr { fast: e(3.0), slow: e(9.0) }
    }

    /// A download of `bytes` that took `took`.
    pub fn sample(&mut self, took: Duration, bytes: u64) {
        // Very short downloads say little about the link (hls.js ignores under ~16 KB too).
        let secs = took.as_secs_f64().max(0.001);
        let bps = bytes as f64 * 8.0 / secs;
        self.fast.sample(secs, bps);
        self.slow.sample(secs, bps);
    }

    /// The estimate, bits per second (`None` before any sample).
    pub fn estimate(&self) -> Option<f64> {
        (self.fast.total_weight > 0.0).then(|| self.fast.get().min(self.slow.get()))
    }

    /// The rendition to play next, among `bandwidths` (declared, bits per second), from
    /// `current`: the highest that fits 95% of the estimate to stay or go down, 70% to go up.
    pub fn choose(&self, bandwidths: &[u64], current: usize) -> usize {
        let Some(estimate) = self.estimate() else { return current };
        let current_bw = bandwidths.get(current).copied().unwrap_or(0);
        let mut best: Option<usize> = None;
        for (i, &bw) in bandwidths.iter().enumerate() {
            let factor = if bw > current_bw { 0.7 } else { 0.95 };
            if bw as f64 <= estimate * factor && best.is_none_or(|b| bw > bandwidths[b]) {
                best = Some(i);
            }
        }
        best.unwrap_or_else(|| (0..bandwidths.len()).min_by_key(|&i| bandwidths[i]).unwrap_or(current))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendition_choices_parse_and_resolve() {
        assert_eq!(RenditionChoice::parse("auto"), Ok(RenditionChoice::Auto));
        assert_eq!(RenditionChoice::parse("1080p"), Ok(RenditionChoice::Height(1080)));
        assert_eq!(RenditionChoice::parse("3000k"), Ok(RenditionChoice::MaxBandwidth(3_000_000)));
        assert_eq!(RenditionChoice::parse("5M"), Ok(RenditionChoice::MaxBandwidth(5_000_000)));
        assert_eq!(RenditionChoice::parse("2"), Ok(RenditionChoice::Index(2)));
        assert!(RenditionChoice::parse("big").is_err());
        let track = |bandwidth, height| Track {
            name: format!("{height}p"),
            bandwidth,
            height: Some(height),
            playlist: None,
            init: None,
            segments: Vec::new(),
            audio: None,
        };
        let p = Presentation {
            protocol: Protocol::Hls,
            manifest: String::new(),
            renditions: vec![track(3_000_000, 720), track(800_000, 360), track(6_000_000, 1080)],
            audio: Vec::new(),
        };
        let r = |c: RenditionChoice| c.resolve(&p);
        assert_eq!(r(RenditionChoice::Auto), Ok(None));
        assert_eq!(r(RenditionChoice::Lowest), Ok(Some(1)));
        assert_eq!(r(RenditionChoice::Highest), Ok(Some(2)));
        assert_eq!(r(RenditionChoice::Height(720)), Ok(Some(0)));
        assert_eq!(r(RenditionChoice::MaxBandwidth(5_000_000)), Ok(Some(0)));
        assert!(r(RenditionChoice::Height(480)).unwrap_err().contains("1: 360p"));
        assert!(r(RenditionChoice::Index(3)).is_err());
    }

    #[test]
    fn abr_goes_up_with_headroom_and_down_when_throughput_falls() {
        let bandwidths = [800_000, 3_000_000, 6_000_000];
        let mut abr = Abr::new();
        assert_eq!(abr.choose(&bandwidths, 0), 0, "no estimate yet: stay");
        // 2 MB in 0.1 s: 160 Mbit/s, room for the top.
        abr.sample(Duration::from_millis(100), 2_000_000);
        assert_eq!(abr.choose(&bandwidths, 0), 2);
        // Then 4 Mbit/s for a while: 3 Mbit/s fits 95% of it, 6 does not.
        for _ in 0..6 {
            abr.sample(Duration::from_secs(2), 1_000_000);
        }
        let e = abr.estimate().unwrap();
        assert!((3_000_000.0..6_000_000.0).contains(&e), "{e}");
        assert_eq!(abr.choose(&bandwidths, 2), 1);
        // Going back up needs 3 Mbit/s / 0.7 = 4.3 Mbit/s, not 3.2.
        let mut low = Abr::new();
        low.sample(Duration::from_secs(1), 400_000);
        assert_eq!(low.choose(&bandwidths, 0), 0);
        // Below every rendition: the lowest.
        let mut starved = Abr::new();
        starved.sample(Duration::from_secs(1), 10_000);
        assert_eq!(starved.choose(&bandwidths, 2), 0);
    }

    #[test]
    fn settings_are_checked() {
        let ok = PlayerConfig::new(Protocol::Hls, "http://127.0.0.1:1/m.m3u8", 2);
        assert!(ok.validate().is_ok());
        let mut c = ok.clone();
        c.viewers = 0;
        assert!(c.validate().is_err());
        let mut c = ok.clone();
        c.duration = Some(Duration::from_secs(1));
        c.ramp = Duration::from_secs(2);
        assert!(c.validate().is_err());
    }
}
