//! `sluice load http`'s flags ([`HttpArgs`]): the HTTP models' and the players' options, what
//! they make ([`LoadConfig`], [`PlayerConfig`]) and the command line that asks for them again.
//! It runs nothing (`crate::run`, `crate::player`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use super::{defaults, each, option, parse_duration, value_name, ArgsError, CommonFlags};
use crate::config::OpenModel;
use crate::player::{Pacing, PlayerConfig, Protocol, RenditionChoice};
use crate::scenario_file::ScenarioFile;
use crate::{ConnectionMode, ExpectedStatus, LoadConfig, Method, Model, Scenario, Stage, TargetSpec};

/// A usage error with this message.
macro_rules! bail {
    ($($t:tt)*) => { return Err(ArgsError::Flags(format!($($t)*))) };
}

/// `sluice load http` flags.
#[derive(Args, Debug, Clone, PartialEq)]
#[command(after_help = "\
MODELS
  closed  sluice load http --vus 100 --duration 30s http://127.0.0.1:8080/bench/hello
  open    sluice load http --rate 200 --duration 30s http://127.0.0.1:8080/bench/hello
          sluice load http --stage ramp-users:10:5s --stage rate:100:30s --stage ramp-rate:100:200:10s \\
                           --stage pause:5s http://127.0.0.1:8080/bench/hello
          sluice load http --scenario crates/sluice-load/scenarios/e4-hello.toml
  player  sluice load http --hls http://127.0.0.1:8080/film.mp4/master.m3u8 --vus 50 --ramp 10s
          sluice load http --dash http://127.0.0.1:8080/film.mp4/manifest.mpd --vus 20 --rendition 1080p

TARGETS  [WEIGHT=]URL, e.g. 3=http://127.0.0.1:8080/a 1=http://127.0.0.1:8080/b

THRESHOLDS  METRIC OP VALUE with OP one of < <= > >= ==
  p50 p90 p95 p99 p99.9 max min mean stdev (latency; prefix connect. ttfb. download. for those),
  success, error_rate (e.g. 99.9%), errors, errors.KIND, dropped, requests, rps
  e.g. --threshold 'p99<50ms' --threshold 'success>99.9%'; a failed threshold exits with 1.

Latency runs from the scheduled send time (open) or the start of the request (closed) to the last
byte, over the successful responses (failed requests are counted by kind, not timed); success rate = OK responses / requests started (dropped arrivals count as started).

PLAYERS  --hls URL (master or media playlist) or --dash URL (static MPD): --vus viewers each fetch
  the manifest, the media playlists and init segments they play, then the segments in order over
  one keep-alive connection. --pace realtime (default): the first --buffer of media as fast as
  possible, then each segment when the playhead comes within --buffer of it; a segment arriving
  after its playback time is a stall (playback waits for it). --pace fast: back to back, no stalls.
  --rendition auto (default) starts at the first rendition listed and switches by measured throughput
  (two EWMAs as hls.js: up when a rendition fits 70% of the estimate, down below 95%); or lowest,
  highest, an index from 0 in manifest order, a height (1080p), a bandwidth ceiling (3000k, 5M).
  A viewer is perfect when it played to the end with no stall and no failed request. --duration
  caps the run (default 1h); --timeout bounds each request (default 10s).")]
pub struct HttpArgs {
    /// Target URLs, optionally weighted: [WEIGHT=]http://host:port/path.
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,
    /// Closed model: virtual users, each sending, waiting for the whole response, sending again.
    #[arg(long, value_name = "N")]
    pub vus: Option<usize>,
    /// Closed model: how long users send; open model with --rate: length of the constant stage.
    #[arg(long, short, value_parser = parse_duration, value_name = "DURATION")]
    pub duration: Option<Duration>,
    /// Stop after this many requests (closed) or arrivals (open) in total.
    #[arg(long, short = 'n', value_name = "N")]
    pub requests: Option<u64>,
    /// Closed model: each user pauses this long after a response before its next request
    /// (k6's `sleep`), e.g. 100ms.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub think: Option<Duration>,
    /// Open model: arrivals per second for --duration.
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// Open model stage, repeatable, run in order: ramp-users:USERS:OVER, rate:RATE:FOR,
    /// ramp-rate:FROM:TO:OVER, pause:FOR.
    #[arg(long = "stage", value_name = "STAGE")]
    pub stages: Vec<String>,
    /// Open model: delay before the command-line scenario's first stage.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub start_at: Option<Duration>,
    /// Open model: TOML scenario file with several overlapping scenarios (see
    /// crates/sluice-load/scenarios/e4-hello.toml).
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Base URL for scenario-file paths that start with `/` (overrides the file's base_url).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// keep-alive or per-request.
    #[arg(long, value_enum, value_name = "MODE")]
    pub connections: Option<ConnectionMode>,
    /// Open model: most connections at once (the shared keep-alive pool's size) [default: 100].
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,
    /// Open model: most arrivals waiting for a connection; more are dropped [default: 100000].
    #[arg(long, value_name = "N")]
    pub max_pending: Option<usize>,
    /// Deadline of each request, from its start (closed) or scheduled time (open) [default: 60s;
    /// 10s for the --hls/--dash players, as a player gives up on a segment].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub timeout: Option<Duration>,
    /// Worker threads, each with its own event loop [default: the usable cores].
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Request method.
    #[arg(long, value_enum, default_value = "get")]
    pub method: Method,
    /// Extra request header, repeatable: 'Name: value'.
    #[arg(long = "header", short = 'H', value_name = "HEADER")]
    pub headers: Vec<String>,
    /// The status that counts as success [default: any 2xx].
    #[arg(long, value_name = "CODE")]
    pub expect_status: Option<u16>,
    /// Pass/fail criterion, repeatable, e.g. 'p99<50ms', 'success>99.9%'.
    #[arg(long = "threshold", value_name = "EXPR")]
    pub thresholds: Vec<String>,
    /// Write the full report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write the per-second series as CSV to this file.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Play an HLS stream as --vus viewers would: its master (or media) playlist's URL.
    #[arg(long, value_name = "URL", conflicts_with = "dash")]
    pub hls: Option<String>,
    /// Play a DASH stream as --vus viewers would: its static MPD's URL.
    #[arg(long, value_name = "URL")]
    pub dash: Option<String>,
    /// Players: start the viewers evenly spread over this span, e.g. 10s.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub ramp: Option<Duration>,
    /// Players: realtime (as a player, counting stalls) or fast (segments back to back).
    #[arg(long, value_enum, value_name = "PACE")]
    pub pace: Option<Pacing>,
    /// Players: media buffered before playback starts and kept ahead of the playhead [default: 10s].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    pub buffer: Option<Duration>,
    /// Players: auto, lowest, highest, INDEX (from 0), HEIGHTp (1080p) or a bandwidth ceiling
    /// (3000k, 5M) [default: auto].
    #[arg(long, value_parser = RenditionChoice::parse, value_name = "RENDITION")]
    pub rendition: Option<RenditionChoice>,
    // A doc comment here would become help text of its own.
    #[allow(missing_docs)]
    #[command(flatten)]
    pub common: CommonFlags,
}

impl Default for HttpArgs {
    /// Every flag at its default, as a command line without flags gives them.
    fn default() -> Self {
        defaults(&[])
    }
}

impl HttpArgs {
    /// Whether the flags ask for stream players (`--hls`/`--dash`) rather than requests.
    pub fn plays_streams(&self) -> bool {
        self.hls.is_some() || self.dash.is_some()
    }

    /// The player settings from the flags, refusing the flags of the other models.
    pub fn player_config(&self) -> Result<PlayerConfig, ArgsError> {
        let args = self;
        let (protocol, url) = match (&args.hls, &args.dash) {
            (Some(u), _) => (Protocol::Hls, u.clone()),
            (None, Some(u)) => (Protocol::Dash, u.clone()),
            (None, None) => bail!("give --hls URL or --dash URL"),
        };
        let others = [
            (!args.urls.is_empty(), "target URLs"),
            (
                args.rate.is_some() || !args.stages.is_empty() || args.start_at.is_some(),
                "--rate/--stage/--start-at",
            ),
            (args.scenario.is_some() || args.base_url.is_some(), "--scenario/--base-url"),
            (args.requests.is_some() || args.think.is_some(), "--requests/--think"),
            (
                args.connections.is_some() || args.max_connections.is_some() || args.max_pending.is_some(),
                "--connections/--max-connections/--max-pending",
            ),
            (matches!(args.method, Method::Head) || args.expect_status.is_some(), "--method/--expect-status"),
            (!args.thresholds.is_empty() || args.csv.is_some(), "--threshold/--csv"),
        ];
        if let Some((_, flags)) = others.iter().find(|(given, _)| *given) {
            bail!("{flags} do not apply to --hls/--dash players (see `sluice load http --help`, PLAYERS)");
        }
        let mut config = PlayerConfig::new(protocol, url, args.vus.unwrap_or(1));
        config.ramp = args.ramp.unwrap_or_default();
        config.duration = args.duration;
        config.pacing = args.pace.unwrap_or_default();
        config.buffer = args.buffer.unwrap_or(config.buffer);
        config.rendition = args.rendition.unwrap_or_default();
        config.timeout = args.timeout.unwrap_or(config.timeout);
        config.threads = args.threads.unwrap_or(config.threads);
        config.headers =
            args.headers.iter().map(|h| crate::target::parse_header(h)).collect::<Result<Vec<_>, _>>()?;
        config.allow_non_loopback = args.common.allow_non_loopback;
        config.validate()?;
        Ok(config)
    }

    /// The HTTP run the flags ask for (closed or open model). `scenario` stands for the file
    /// `--scenario` names when the caller has read it already (the lab's built-in profiles).
    pub fn load_config(&self, scenario: Option<ScenarioFile>) -> Result<LoadConfig, ArgsError> {
        let args = self;
        let targets = args.urls.iter().map(|u| TargetSpec::parse(u)).collect::<Result<Vec<_>, _>>()?;
        let open_flags = args.rate.is_some() || !args.stages.is_empty() || args.start_at.is_some();
        let mut config = if let Some(path) = &args.scenario {
            if open_flags || !targets.is_empty() || args.vus.is_some() {
                bail!("--scenario carries its own URLs and stages: drop the URLs, --rate, --stage, --start-at and --vus");
            }
            let file = match scenario {
                Some(file) => file,
                None => crate::scenario_file::load(path, args.base_url.as_deref())?,
            };
            let s = &file.settings;
            let mut config = LoadConfig::open(file.scenarios, s.max_connections.unwrap_or(100));
            if let Model::Open(o) = &mut config.model {
                o.max_pending = s.max_pending.unwrap_or(o.max_pending);
            }
            config.connections = s.connections.unwrap_or(config.connections);
            config.timeout = s.timeout.unwrap_or(config.timeout);
            config.expected_status = s.expect_status.unwrap_or(config.expected_status);
            config
        } else if open_flags {
            if args.vus.is_some() {
                bail!("--vus is the closed model; --rate/--stage/--start-at are the open model: pick one");
            }
            if targets.is_empty() {
                bail!("give at least one target URL");
            }
            let mut stages = Vec::new();
            if let Some(rate) = args.rate {
                let Some(duration) = args.duration else { bail!("--rate needs --duration") };
                stages.push(Stage::ConstantRate { rate, duration });
            } else if args.duration.is_some() {
                bail!("in the open model --duration goes with --rate; give stage lengths in --stage");
            }
            for s in &args.stages {
                stages.push(Stage::parse(s)?);
            }
            if stages.is_empty() {
                bail!("the open model needs --rate with --duration, or --stage");
            }
            let scenario = Scenario {
                name: "default".into(),
                targets,
                start_at: args.start_at.unwrap_or_default(),
                stages,
            };
            LoadConfig::open(vec![scenario], 100)
        } else {
            if targets.is_empty() {
                bail!("give at least one target URL (see `sluice load http --help`)");
            }
            LoadConfig::closed(targets, args.vus.unwrap_or(1), args.duration, args.requests)
        };
        if args.base_url.is_some() && args.scenario.is_none() {
            bail!("--base-url only applies to --scenario files");
        }
        match &mut config.model {
            Model::Open(OpenModel { max_connections, max_pending, requests, .. }) => {
                if args.think.is_some() {
                    bail!("--think is for the closed model (open-model arrivals follow their schedule)");
                }
                *max_connections = args.max_connections.unwrap_or(*max_connections);
                *max_pending = args.max_pending.unwrap_or(*max_pending);
                *requests = args.requests.or(*requests);
            }
            Model::Closed(c) => {
                if args.max_connections.is_some() || args.max_pending.is_some() {
                    bail!("--max-connections and --max-pending are for the open model (the closed model has one connection per user)");
                }
                c.think = args.think.unwrap_or_default();
            }
        }
        if let Some(c) = args.connections {
            config.connections = c;
        }
        config.timeout = args.timeout.unwrap_or(config.timeout);
        config.threads = args.threads.unwrap_or(config.threads);
        config.method = args.method;
        config.headers =
            args.headers.iter().map(|h| crate::target::parse_header(h)).collect::<Result<Vec<_>, _>>()?;
        if let Some(code) = args.expect_status {
            config.expected_status = ExpectedStatus::Exactly(code);
        }
        config.allow_non_loopback = args.common.allow_non_loopback;
        config.validate()?;
        Ok(config)
    }

    /// `sluice load http` with [`HttpArgs::to_args`], quoted for a shell.
    pub fn command_line(&self) -> String {
        format!("sluice load http {}", super::shell_line(&self.to_args())).trim_end().to_string()
    }

    /// The flags that ask for these options again, after `sluice load http`: what a report
    /// prints so a run can be repeated; flags at their defaults are left out.
    pub fn to_args(&self) -> Vec<String> {
        let d = |d: Option<Duration>| d.map(crate::duration_text::format);
        let mut out = Vec::new();
        option(&mut out, "--vus", self.vus);
        option(&mut out, "-d", d(self.duration));
        option(&mut out, "--requests", self.requests);
        option(&mut out, "--think", d(self.think));
        option(&mut out, "--rate", self.rate);
        each(&mut out, "--stage", &self.stages);
        option(&mut out, "--start-at", d(self.start_at));
        option(&mut out, "--scenario", self.scenario.as_ref().map(|p| p.display()));
        option(&mut out, "--base-url", self.base_url.as_ref());
        option(&mut out, "--connections", self.connections.map(value_name));
        option(&mut out, "--max-connections", self.max_connections);
        option(&mut out, "--max-pending", self.max_pending);
        option(&mut out, "--timeout", d(self.timeout));
        option(&mut out, "--expect-status", self.expect_status);
        option(&mut out, "--threads", self.threads);
        if self.method != Method::Get {
            option(&mut out, "--method", Some(value_name(self.method)));
        }
        each(&mut out, "--header", &self.headers);
        each(&mut out, "--threshold", &self.thresholds);
        option(&mut out, "--json", self.json.as_ref().map(|p| p.display()));
        option(&mut out, "--csv", self.csv.as_ref().map(|p| p.display()));
        option(&mut out, "--hls", self.hls.as_ref());
        option(&mut out, "--dash", self.dash.as_ref());
        option(&mut out, "--ramp", d(self.ramp));
        option(&mut out, "--pace", self.pace.map(value_name));
        option(&mut out, "--buffer", d(self.buffer));
        option(&mut out, "--rendition", self.rendition.map(rendition_text));
        self.common.to_args(&mut out);
        out.extend(self.urls.iter().cloned());
        out
    }
}

/// A rendition choice as `--rendition` reads it.
fn rendition_text(choice: RenditionChoice) -> String {
    match choice {
        RenditionChoice::Auto => "auto".into(),
        RenditionChoice::Lowest => "lowest".into(),
        RenditionChoice::Highest => "highest".into(),
        RenditionChoice::Index(i) => i.to_string(),
        RenditionChoice::Height(h) => format!("{h}p"),
        RenditionChoice::MaxBandwidth(b) if b % 1_000_000 == 0 => format!("{}M", b / 1_000_000),
        RenditionChoice::MaxBandwidth(b) => format!("{}k", b / 1000),
    }
}
