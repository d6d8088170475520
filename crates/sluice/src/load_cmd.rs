//! `sluice load http` and `sluice load rtsp`: the command-line face of the `sluice-load` library.
//! HTTP: parses flags (or a TOML scenario file) into a [`LoadConfig`], runs it with the live
//! progress line, prints the end-of-run summary, writes `--json`/`--csv`, and turns failed
//! thresholds into exit status 1 (a run that failed); with `--hls`/`--dash` it runs stream players
//! instead and prints their summary. RTSP: parses flags into an [`RtspConfig`], runs
//! the viewers, prints the summary and writes `--json`. The generators live in the library.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, Subcommand, ValueEnum};
use sluice_load::board::{BoardInner, LoadBoard, ReportText, RunKind};
use sluice_load::config::OpenModel;
use sluice_load::player::{run_player, Pacing, PlayerConfig, Protocol, RenditionChoice};
use sluice_load::rtsp::{RtspConfig, RtspTransport};
use sluice_load::threshold::apply;
use sluice_load::{
    write_file, ConnectionMode, CsvSeries, ExpectedStatus, JsonReport, LiveProgress, LoadConfig, Method,
    Model, ReportWriter, Scenario, Stage, TargetSpec, TextSummary, Threshold,
};

/// Exit status when the run completed but a `--threshold` failed: a run that failed, as every
/// sluice command says it (0 success, 1 failure, 2 usage), rather than k6's 99, so that a script
/// needs one rule for every command.
pub const THRESHOLDS_FAILED: i32 = 1;

/// Marks an error in the command line (exit status 2), as opposed to a run that failed (1).
#[derive(Debug)]
pub struct UsageError;

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("invalid arguments")
    }
}

impl std::error::Error for UsageError {}

/// Why a run in which nothing succeeded failed, on one line: the commonest error kinds.
fn nothing_succeeded(what: &str, attempts: u64, kinds: &[(&str, u64)]) -> anyhow::Error {
    let mut kinds: Vec<&(&str, u64)> = kinds.iter().filter(|(_, n)| *n > 0).collect();
    kinds.sort_by_key(|k| std::cmp::Reverse(k.1));
    let why: Vec<String> = kinds.iter().take(3).map(|(k, n)| format!("{n} {k}")).collect();
    let why = if why.is_empty() { String::new() } else { format!(" ({})", why.join(", ")) };
    anyhow::anyhow!("no {what} succeeded out of {attempts}{why}")
}

/// Load generators.
#[derive(Args, Debug)]
pub struct LoadArgs {
    #[command(subcommand)]
    protocol: LoadProtocol,
}

#[derive(Subcommand, Debug)]
enum LoadProtocol {
    /// HTTP/1.1 load: closed model (--vus) or open model (--rate, --stage, --scenario).
    Http(Box<HttpArgs>),
    /// RTSP viewers: N clients each counting the video samples (access units) it receives.
    Rtsp(Box<RtspArgs>),
}

/// Flags every protocol takes.
#[derive(Args, Debug)]
struct CommonFlags {
    /// No live progress line.
    #[arg(long)]
    no_progress: bool,
    /// No end-of-run summary on stdout.
    #[arg(long, short)]
    quiet: bool,
    /// Allow targets outside loopback (never point this at a machine you do not own).
    #[arg(long)]
    allow_non_loopback: bool,
    /// Serve a live dashboard of the run at this address (open http://ADDR/ in a browser).
    #[arg(long, value_name = "ADDR")]
    dashboard: Option<std::net::SocketAddr>,
    /// Write the run's charts to this HTML file at the end (one file, works offline).
    #[arg(long, value_name = "FILE.html")]
    report: Option<PathBuf>,
}

/// RTP transport, as spelled on the command line.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum TransportFlag {
    /// RTP/AVP/TCP interleaved on the RTSP connection.
    Tcp,
    /// RTP/AVP over UDP unicast.
    Udp,
}

/// Whether the viewers' UDP sockets take GRO messages whole.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum GroFlag {
    /// `UDP_GRO` on: a burst the server sends as one GSO message arrives as one message.
    On,
    /// Every read is one datagram, as for players without GRO.
    Off,
}

/// `sluice load rtsp` flags.
#[derive(Args, Debug)]
#[command(after_help = "\
EXAMPLE
  sluice load rtsp --clients 50 --transport udp --ramp 5s rtsp://127.0.0.1:8554/sluice-demo.mp4

Each viewer does DESCRIBE, SETUP (video, plus audio when offered), PLAY, then counts complete video
samples until the stream ends (no media for --idle-end), --expect-samples arrive, or --duration
(from the run's start, ramp included; 1 h when not given) passes. A viewer is perfect when it
received --expect-samples samples, or without that flag every sample sent to it while it played
(judged from its RTP timestamps and RTP-Info), and lost no packet.

Over UDP each viewer's RTP arrives on its own sockets, read by --threads receiver threads with
epoll and recvmmsg; with --udp-gro on (the default) a burst the server sent as one GSO message is
read whole, with off every message is one datagram (the kernel splits the server's bursts on the
server's side, as for players without GRO). The summary and --json give the generator's own CPU
per datagram and per viewer-second.")]
pub struct RtspArgs {
    /// rtsp://host:port/path of the stream.
    #[arg(value_name = "URL")]
    url: String,
    /// Number of viewers.
    #[arg(long, short = 'c', default_value_t = 1, value_name = "N")]
    clients: usize,
    /// RTP transport.
    #[arg(long, value_enum, default_value = "tcp")]
    transport: TransportFlag,
    /// Start the viewers evenly spread over this span, e.g. 5s.
    #[arg(long, value_parser = parse_duration, default_value = "0s", value_name = "DURATION")]
    ramp: Duration,
    /// Stop every viewer this long after the run's start (ramp included).
    #[arg(long, short, value_parser = parse_duration, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Video samples a viewer must receive to count as perfect (it stops when it has them).
    #[arg(long, value_name = "N")]
    expect_samples: Option<u64>,
    /// A playing viewer that receives no media for this long has reached the stream's end.
    #[arg(long, value_parser = parse_duration, default_value = "3s", value_name = "DURATION")]
    idle_end: Duration,
    /// Deadline for connect, DESCRIBE, SETUP, PLAY and the first video sample.
    #[arg(long, value_parser = parse_duration, default_value = "10s", value_name = "DURATION")]
    setup_timeout: Duration,
    /// Set up only the video stream, not the audio stream.
    #[arg(long)]
    video_only: bool,
    /// Receive buffer of each viewer's UDP sockets (0: the kernel's default), e.g. 4M; SIZE:
    /// bytes, or K/M/G/T, KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of 1000).
    #[arg(
        long,
        default_value_t = sluice_load::rtsp::DEFAULT_UDP_RECEIVE_BUFFER,
        value_parser = parse_size_usize,
        value_name = "SIZE"
    )]
    udp_rcvbuf: usize,
    /// UDP GRO on the viewers' RTP sockets: on, or off to model players without it.
    #[arg(long, value_enum, default_value = "on", value_name = "on|off")]
    udp_gro: GroFlag,
    /// Receiver threads (UDP) and runtime threads [default: the cores this process may use].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Pass/fail criterion, repeatable; a failed one exits 1: `perfect>99%`, `playing>=100%`,
    /// `samples_mean>=899`, `samples_min>0`, `perfect_clients>=50`, `failures==0`, `lost_packets==0`.
    #[arg(long = "threshold", value_name = "EXPR")]
    thresholds: Vec<String>,
    /// Write the full report (summary and every viewer) as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    #[command(flatten)]
    common: CommonFlags,
}

/// Connection handling, as spelled on the command line.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum ConnectionsFlag {
    /// Reuse connections (closed: one per virtual user; open: a shared pool of --max-connections).
    KeepAlive,
    /// A new connection for every request.
    PerRequest,
}

/// Request method.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum MethodFlag {
    Get,
    Head,
}

/// `sluice load http` flags.
#[derive(Args, Debug)]
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
    urls: Vec<String>,
    /// Closed model: virtual users, each sending, waiting for the whole response, sending again.
    #[arg(long, value_name = "N")]
    vus: Option<usize>,
    /// Closed model: how long users send; open model with --rate: length of the constant stage.
    #[arg(long, short, value_parser = parse_duration, value_name = "DURATION")]
    duration: Option<Duration>,
    /// Stop after this many requests (closed) or arrivals (open) in total.
    #[arg(long, short = 'n', value_name = "N")]
    requests: Option<u64>,
    /// Closed model: each user pauses this long after a response before its next request
    /// (k6's `sleep`), e.g. 100ms.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    think: Option<Duration>,
    /// Open model: arrivals per second for --duration.
    #[arg(long, value_name = "PER_SECOND")]
    rate: Option<f64>,
    /// Open model stage, repeatable, run in order: ramp-users:USERS:OVER, rate:RATE:FOR,
    /// ramp-rate:FROM:TO:OVER, pause:FOR.
    #[arg(long = "stage", value_name = "STAGE")]
    stages: Vec<String>,
    /// Open model: delay before the command-line scenario's first stage.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    start_at: Option<Duration>,
    /// Open model: TOML scenario file with several overlapping scenarios (see
    /// crates/sluice-load/scenarios/e4-hello.toml).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
    /// Base URL for scenario-file paths that start with `/` (overrides the file's base_url).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
    /// keep-alive or per-request.
    #[arg(long, value_enum, value_name = "MODE")]
    connections: Option<ConnectionsFlag>,
    /// Open model: most connections at once (the shared keep-alive pool's size) [default: 100].
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Open model: most arrivals waiting for a connection; more are dropped [default: 100000].
    #[arg(long, value_name = "N")]
    max_pending: Option<usize>,
    /// Deadline of each request, from its start (closed) or scheduled time (open) [default: 60s;
    /// 10s for the --hls/--dash players, as a player gives up on a segment].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    timeout: Option<Duration>,
    /// Worker threads, each with its own event loop [default: the usable cores].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Request method.
    #[arg(long, value_enum, default_value = "get")]
    method: MethodFlag,
    /// Extra request header, repeatable: 'Name: value'.
    #[arg(long = "header", short = 'H', value_name = "HEADER")]
    headers: Vec<String>,
    /// The status that counts as success [default: any 2xx].
    #[arg(long, value_name = "CODE")]
    expect_status: Option<u16>,
    /// Pass/fail criterion, repeatable, e.g. 'p99<50ms', 'success>99.9%'.
    #[arg(long = "threshold", value_name = "EXPR")]
    thresholds: Vec<String>,
    /// Write the full report as JSON to this file.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write the per-second series as CSV to this file.
    #[arg(long, value_name = "FILE")]
    csv: Option<PathBuf>,
    /// Play an HLS stream as --vus viewers would: its master (or media) playlist's URL.
    #[arg(long, value_name = "URL", conflicts_with = "dash")]
    hls: Option<String>,
    /// Play a DASH stream as --vus viewers would: its static MPD's URL.
    #[arg(long, value_name = "URL")]
    dash: Option<String>,
    /// Players: start the viewers evenly spread over this span, e.g. 10s.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    ramp: Option<Duration>,
    /// Players: realtime (as a player, counting stalls) or fast (segments back to back).
    #[arg(long, value_enum, value_name = "PACE")]
    pace: Option<PaceFlag>,
    /// Players: media buffered before playback starts and kept ahead of the playhead [default: 10s].
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    buffer: Option<Duration>,
    /// Players: auto, lowest, highest, INDEX (from 0), HEIGHTp (1080p) or a bandwidth ceiling
    /// (3000k, 5M) [default: auto].
    #[arg(long, value_parser = RenditionChoice::parse, value_name = "RENDITION")]
    rendition: Option<RenditionChoice>,
    #[command(flatten)]
    common: CommonFlags,
}

/// Segment pacing of the players, as spelled on the command line.
#[derive(ValueEnum, Clone, Copy, Debug)]
enum PaceFlag {
    /// As a player: a start-up buffer, then each segment as the playhead nears it.
    Realtime,
    /// Every segment as soon as the previous one arrived.
    Fast,
}

/// Runs `sluice load ...`.
pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    match args.protocol {
        LoadProtocol::Http(http) => run_http(*http),
        LoadProtocol::Rtsp(rtsp) => run_rtsp(*rtsp),
    }
}

/// The one size parser, for flags that are buffer lengths.
pub(crate) fn parse_size_usize(s: &str) -> Result<usize, String> {
    sluice_server::config::parse_size(s)
        .and_then(|n| usize::try_from(n).map_err(|_| format!("`{s}` is too large")))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    sluice_load::duration_text::parse(s)
}

fn run_rtsp(args: RtspArgs) -> anyhow::Result<()> {
    let thresholds = args
        .thresholds
        .iter()
        .map(|t| sluice_load::threshold::RtspThreshold::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    let mut config = RtspConfig::new(args.url, args.clients);
    config.transport = match args.transport {
        TransportFlag::Tcp => RtspTransport::Tcp,
        TransportFlag::Udp => RtspTransport::Udp,
    };
    config.ramp = args.ramp;
    config.duration = args.duration;
    config.expect_samples = args.expect_samples;
    config.idle_end = args.idle_end;
    config.setup_timeout = args.setup_timeout;
    config.udp_receive_buffer = args.udp_rcvbuf;
    config.udp_gro = matches!(args.udp_gro, GroFlag::On);
    config.audio = !args.video_only;
    config.threads = args.threads.unwrap_or(config.threads);
    config.allow_non_loopback = args.common.allow_non_loopback;
    config.validate().map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    crate::raise_nofile_limit();
    let mut progress = progress(&args.common);
    let title = format!("sluice load rtsp {}", config.url);
    let report = if let Some(mut board) = board(&args.common, &title, RunKind::Rtsp, &mut *progress)? {
        let report = sluice_load::rtsp::run_rtsp(&config, &mut board)?;
        if let Some(path) = &args.common.report {
            let mut summary = Vec::new();
            report.write_summary(&mut summary).context("writing the summary")?;
            let s = &report.summary;
            let verdicts = thresholds.iter().map(|t| t.check(s));
            let text = ReportText {
                subtitle: &format!("{} viewers, {} video samples", s.clients, s.samples_total),
                summary: &String::from_utf8_lossy(&summary),
                thresholds: verdicts.map(|v| (v.expression, v.passed, v.actual)).collect(),
                duration_s: None,
            };
            board.write_report(path, &text)?;
        }
        report
    } else {
        sluice_load::rtsp::run_rtsp(&config, &mut *progress)?
    };
    if !args.common.quiet {
        let stdout = std::io::stdout();
        report.write_summary(&mut stdout.lock()).context("writing the summary")?;
    }
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    let summary = &report.summary;
    if summary.samples_total == 0 {
        let f = &summary.failures;
        return Err(nothing_succeeded(
            "viewer",
            summary.clients as u64,
            &[
                ("could not connect", f.connect),
                ("failed DESCRIBE", f.describe),
                ("found no video", f.no_video),
                ("failed SETUP", f.setup),
                ("failed PLAY", f.play),
                ("timed out", f.timeout),
                ("received no media", f.no_media),
                ("lost the stream", f.stream),
            ],
        ));
    }
    let verdicts: Vec<_> = thresholds.iter().map(|t| t.check(summary)).collect();
    if !args.common.quiet && !verdicts.is_empty() {
        for v in &verdicts {
            println!(
                "  threshold  {} {} (actual {})",
                if v.passed { "ok  " } else { "FAIL" },
                v.expression,
                v.actual
            );
        }
    }
    let failed: Vec<&str> = verdicts.iter().filter(|v| !v.passed).map(|v| v.expression.as_str()).collect();
    if !failed.is_empty() {
        thresholds_failed(&failed);
    }
    Ok(())
}

/// The live progress line, or nothing with `--no-progress`.
fn progress(common: &CommonFlags) -> Box<dyn BoardInner> {
    if common.no_progress {
        Box::new(sluice_load::NoObserver)
    } else {
        Box::new(LiveProgress::new())
    }
}

/// The run's pictures when `--dashboard` or `--report` asks for them: the live page served
/// (its address on stderr) and the samples kept for the report.
fn board<'a>(
    common: &CommonFlags,
    title: &str,
    kind: RunKind,
    inner: &'a mut dyn BoardInner,
) -> anyhow::Result<Option<LoadBoard<'a>>> {
    if common.dashboard.is_none() && common.report.is_none() {
        return Ok(None);
    }
    let listener = match common.dashboard {
        Some(addr) => Some(
            std::net::TcpListener::bind(addr)
                .with_context(|| format!("--dashboard {addr}: cannot listen there"))?,
        ),
        None => None,
    };
    let board = LoadBoard::new(title, listener, kind, inner)?;
    if let Some(addr) = board.live_addr() {
        eprintln!("live dashboard at http://{addr}/");
    }
    Ok(Some(board))
}

/// Says which thresholds failed and exits with [`THRESHOLDS_FAILED`].
fn thresholds_failed(failed: &[&str]) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "sluice load: thresholds failed: {}", failed.join(", "));
    std::process::exit(THRESHOLDS_FAILED);
}

fn run_http(args: HttpArgs) -> anyhow::Result<()> {
    if args.hls.is_some() || args.dash.is_some() {
        return run_players(args);
    }
    if args.ramp.is_some() || args.pace.is_some() || args.buffer.is_some() || args.rendition.is_some() {
        return Err(anyhow::anyhow!("--ramp, --pace, --buffer and --rendition go with --hls or --dash")
            .context(UsageError));
    }
    let thresholds = args
        .thresholds
        .iter()
        .map(|t| Threshold::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    let config = build_config(&args).map_err(|e| e.context(UsageError))?;
    crate::raise_nofile_limit();
    let mut progress = progress(&args.common);
    let title = format!("sluice load http {}", args.urls.join(" "));
    let kind = RunKind::Http { closed: matches!(config.model, Model::Closed(_)) };
    let report = if let Some(mut board) = board(&args.common, title.trim_end(), kind, &mut *progress)? {
        let mut report = sluice_load::run(&config, &mut board)?;
        apply(&thresholds, &mut report);
        if let Some(path) = &args.common.report {
            let r = &report;
            let mut summary = Vec::new();
            TextSummary.write_report(r, &mut summary).context("writing the summary")?;
            let verdicts = r.thresholds.iter().map(|t| (t.expression.clone(), t.passed, t.actual.clone()));
            let text = ReportText {
                subtitle: &format!(
                    "{} requests, {} ok, {:.1} s",
                    r.requests.sent, r.requests.ok, r.duration_s
                ),
                summary: &String::from_utf8_lossy(&summary),
                thresholds: verdicts.collect(),
                duration_s: Some(r.duration_s),
            };
            board.write_report(path, &text)?;
        }
        report
    } else {
        let mut report = sluice_load::run(&config, &mut *progress)?;
        apply(&thresholds, &mut report);
        report
    };
    if !args.common.quiet {
        let stdout = std::io::stdout();
        TextSummary.write_report(&report, &mut stdout.lock()).context("writing the summary")?;
    }
    if let Some(path) = &args.json {
        write_file(&JsonReport, &report, path)?;
    }
    if let Some(path) = &args.csv {
        write_file(&CsvSeries, &report, path)?;
    }
    if report.requests.ok == 0 {
        let e = &report.errors;
        let kinds: Vec<(&str, u64)> =
            sluice_load::stats::ErrorKind::ALL.iter().map(|&k| (k.name(), e.get(k))).collect();
        return Err(nothing_succeeded("request", report.requests.sent, &kinds));
    }
    if !report.thresholds_passed() {
        let failed: Vec<&str> =
            report.thresholds.iter().filter(|t| !t.passed).map(|t| t.expression.as_str()).collect();
        thresholds_failed(&failed);
    }
    Ok(())
}

/// The player settings from the flags, refusing the flags of the other models.
fn player_config(args: &HttpArgs) -> anyhow::Result<PlayerConfig> {
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
        (matches!(args.method, MethodFlag::Head) || args.expect_status.is_some(), "--method/--expect-status"),
        (!args.thresholds.is_empty() || args.csv.is_some(), "--threshold/--csv"),
    ];
    if let Some((_, flags)) = others.iter().find(|(given, _)| *given) {
        bail!("{flags} do not apply to --hls/--dash players (see `sluice load http --help`, PLAYERS)");
    }
    let mut config = PlayerConfig::new(protocol, url, args.vus.unwrap_or(1));
    config.ramp = args.ramp.unwrap_or_default();
    config.duration = args.duration;
    config.pacing = match args.pace {
        Some(PaceFlag::Fast) => Pacing::Fast,
        Some(PaceFlag::Realtime) | None => Pacing::RealTime,
    };
    config.buffer = args.buffer.unwrap_or(config.buffer);
    config.rendition = args.rendition.unwrap_or_default();
    config.timeout = args.timeout.unwrap_or(config.timeout);
    config.threads = args.threads.unwrap_or(config.threads);
    config.headers =
        args.headers.iter().map(|h| sluice_load::target::parse_header(h)).collect::<Result<Vec<_>, _>>()?;
    config.allow_non_loopback = args.common.allow_non_loopback;
    config.validate()?;
    Ok(config)
}

fn run_players(args: HttpArgs) -> anyhow::Result<()> {
    let config = player_config(&args).map_err(|e| e.context(UsageError))?;
    crate::raise_nofile_limit();
    let report = if args.common.no_progress {
        run_player(&config, &mut sluice_load::NoObserver)?
    } else {
        run_player(&config, &mut LiveProgress::new())?
    };
    if !args.common.quiet {
        let stdout = std::io::stdout();
        report.write_summary(&mut stdout.lock()).context("writing the summary")?;
    }
    if let Some(path) = &args.json {
        report.write_json(path)?;
    }
    let s = &report.summary;
    if s.segments == 0 {
        let kinds: Vec<(&str, u64)> =
            sluice_load::stats::ErrorKind::ALL.iter().map(|&k| (k.name(), s.errors.get(k))).collect();
        return Err(nothing_succeeded("segment request", s.requests, &kinds));
    }
    Ok(())
}

fn build_config(args: &HttpArgs) -> anyhow::Result<LoadConfig> {
    let targets = args.urls.iter().map(|u| TargetSpec::parse(u)).collect::<Result<Vec<_>, _>>()?;
    let open_flags = args.rate.is_some() || !args.stages.is_empty() || args.start_at.is_some();
    let mut config = if let Some(path) = &args.scenario {
        if open_flags || !targets.is_empty() || args.vus.is_some() {
            bail!("--scenario carries its own URLs and stages: drop the URLs, --rate, --stage, --start-at and --vus");
        }
        let file = sluice_load::scenario_file::load(path, args.base_url.as_deref())?;
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
        let scenario =
            Scenario { name: "default".into(), targets, start_at: args.start_at.unwrap_or_default(), stages };
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
        config.connections = match c {
            ConnectionsFlag::KeepAlive => ConnectionMode::KeepAlive,
            ConnectionsFlag::PerRequest => ConnectionMode::PerRequest,
        };
    }
    config.timeout = args.timeout.unwrap_or(config.timeout);
    config.threads = args.threads.unwrap_or(config.threads);
    config.method = match args.method {
        MethodFlag::Get => Method::Get,
        MethodFlag::Head => Method::Head,
    };
    config.headers =
        args.headers.iter().map(|h| sluice_load::target::parse_header(h)).collect::<Result<Vec<_>, _>>()?;
    if let Some(code) = args.expect_status {
        config.expected_status = ExpectedStatus::Exactly(code);
    }
    config.allow_non_loopback = args.common.allow_non_loopback;
    config.validate()?;
    Ok(config)
}
