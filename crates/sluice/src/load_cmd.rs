//! `sluice load http` and `sluice load rtsp`: the command-line face of the `sluice-load` library.
//! The flags and what they make are defined once in `sluice_load::args` (the lab builds the same
//! types). HTTP: parses flags (or a TOML scenario file) into a `LoadConfig`, runs it with the live
//! progress line, prints the end-of-run summary, writes `--json`/`--csv`, and turns failed
//! thresholds into exit status 1 (a run that failed); with `--hls`/`--dash` it runs stream players
//! instead and prints their summary. RTSP: parses flags into an `RtspConfig`, runs
//! the viewers, prints the summary and writes `--json`. The generators live in the library.

use anyhow::Context;
use clap::{Args, Subcommand};
use sluice_load::args::{CommonFlags, HttpArgs, RtspArgs};
use sluice_load::board::{BoardInner, LoadBoard, ReportText, RunKind};
use sluice_load::player::run_player;
use sluice_load::threshold::apply;
use sluice_load::{
    write_file, CsvSeries, JsonReport, LiveProgress, Model, ReportWriter, TextSummary, Threshold,
};
use sluice_server::ops::dashboard::PageServer;

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

/// Runs `sluice load ...`.
pub fn run(args: LoadArgs) -> anyhow::Result<()> {
    match args.protocol {
        LoadProtocol::Http(http) => run_http(*http),
        LoadProtocol::Rtsp(rtsp) => run_rtsp(*rtsp),
    }
}

fn run_rtsp(args: RtspArgs) -> anyhow::Result<()> {
    let thresholds = args
        .thresholds
        .iter()
        .map(|t| sluice_load::threshold::RtspThreshold::parse(t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    let config = args.config().map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    crate::raise_nofile_limit();
    let mut progress = progress(&args.common);
    let title = format!("sluice load rtsp {}", config.url);
    let report =
        if let Some((mut board, _live_page)) = board(&args.common, &title, RunKind::Rtsp, &mut *progress)? {
            let report = sluice_load::rtsp::run_rtsp(&config, &mut board)?;
            if let Some(path) = &args.common.report {
                let mut summary = Vec::new();
                TextSummary.write_report(&report, &mut summary).context("writing the summary")?;
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
        TextSummary.write_report(&report, &mut stdout.lock()).context("writing the summary")?;
    }
    if let Some(path) = &args.json {
        write_file(&JsonReport, &report, path)?;
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
) -> anyhow::Result<Option<(LoadBoard<'a>, Option<PageServer>)>> {
    if common.dashboard.is_none() && common.report.is_none() {
        return Ok(None);
    }
    let board = LoadBoard::new(title, kind, inner)?;
    let page = match common.dashboard {
        Some(addr) => {
            let (page, hub) = board.live_page();
            let server = PageServer::start(addr, page, hub)
                .with_context(|| format!("--dashboard {addr}: cannot listen there"))?;
            eprintln!("live dashboard at http://{}/", server.local_addr());
            Some(server)
        }
        None => None,
    };
    Ok(Some((board, page)))
}

/// Says which thresholds failed and exits with [`THRESHOLDS_FAILED`].
fn thresholds_failed(failed: &[&str]) -> ! {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "sluice load: thresholds failed: {}", failed.join(", "));
    std::process::exit(THRESHOLDS_FAILED);
}

fn run_http(args: HttpArgs) -> anyhow::Result<()> {
    if args.plays_streams() {
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
    let config = args.load_config(None).map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    crate::raise_nofile_limit();
    let mut progress = progress(&args.common);
    let title = format!("sluice load http {}", args.urls.join(" "));
    let kind = RunKind::Http { closed: matches!(config.model, Model::Closed(_)) };
    let report = if let Some((mut board, _live_page)) =
        board(&args.common, title.trim_end(), kind, &mut *progress)?
    {
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

fn run_players(args: HttpArgs) -> anyhow::Result<()> {
    let config = args.player_config().map_err(|e| anyhow::Error::new(e).context(UsageError))?;
    crate::raise_nofile_limit();
    let report = if args.common.no_progress {
        run_player(&config, &mut sluice_load::NoObserver)?
    } else {
        run_player(&config, &mut LiveProgress::new())?
    };
    if !args.common.quiet {
        let stdout = std::io::stdout();
        TextSummary.write_report(&report, &mut stdout.lock()).context("writing the summary")?;
    }
    if let Some(path) = &args.json {
        write_file(&JsonReport, &report, path)?;
    }
    let s = &report.summary;
    if s.segments == 0 {
        let kinds: Vec<(&str, u64)> =
            sluice_load::stats::ErrorKind::ALL.iter().map(|&k| (k.name(), s.errors.get(k))).collect();
        return Err(nothing_succeeded("segment request", s.requests, &kinds));
    }
    Ok(())
}
