//! `sluice-lab` (also run as `sluice lab`): lists the experiments and runs them, writing each
//! run's `results.json`, CSVs and `report.html`. Glue only: the experiments, runner and reports
//! live in this crate's library. It is an executable of its own so the `sluice` server binary
//! links none of the lab nor its development harness; it runs the `sluice` found beside it.

#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use sluice_lab::{report, run_experiment, Experiment, ExperimentResults, RunOptions};
use sluice_load::args::shell_word;

/// Run the published I/O experiments against sluice and real peers, with reports.
#[derive(Parser, Debug)]
#[command(name = "sluice lab", bin_name = "sluice lab", version)]
struct LabArgs {
    #[command(subcommand)]
    command: LabCommand,
}

#[derive(Subcommand, Debug)]
enum LabCommand {
    /// Show the experiments.
    List,
    /// Run one experiment (name or id, e.g. zero-copy or E1), or `all`.
    Run(RunArgs),
    /// Render one report from the results.json files of earlier runs.
    Report(ReportArgs),
    /// The loopback ceiling of a UDP fan-out: how many constant-bitrate viewers one core can send
    /// and another receive with nothing but the system calls (GSO `sendmmsg`, `recvmmsg`).
    Ceiling(CeilingArgs),
}

#[derive(Args, Debug)]
struct CeilingArgs {
    /// Viewer counts to try, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [100, 200, 300, 400, 500])]
    viewers: Vec<usize>,
    /// Each viewer's bitrate in bits per second (E5's file: 23.7 Mbit/s with audio).
    #[arg(long, default_value_t = 23_700_000)]
    bitrate: u64,
    /// Bytes per datagram (sluice's RTP packets of E5's file average about 1,380); a size, e.g.
    /// 1380 or 1K.
    #[arg(long, default_value_t = 1_380, value_parser = sluice_proto::size_text::parse_usize, value_name = "SIZE")]
    datagram: usize,
    /// Time per viewer count, e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = sluice_load::duration_text::parse)]
    duration: std::time::Duration,
    /// The sender's CPU (the server's in E5).
    #[arg(long, default_value_t = 0)]
    sender_cpu: usize,
    /// The receiver's CPU (the viewers' in E5).
    #[arg(long, default_value_t = 1)]
    receiver_cpu: usize,
    /// What the datagrams carry, comma-separated: `shared` (one buffer the sender's cache holds,
    /// the whole of every message: viewers of a live stream in step; E5's matching ceiling) and
    /// `staggered` (a header of its own beside a slice of the content per datagram, the viewers
    /// spread over --spread of it, as a server of files sends to viewers who started apart).
    #[arg(long, value_delimiter = ',', default_values_t = [PayloadKind::Shared, PayloadKind::Staggered])]
    payload: Vec<PayloadKind>,
    /// How far apart in the content the first and last viewer are under `--payload staggered`
    /// (E5's viewers start over 4 s).
    #[arg(long, default_value = "4s", value_parser = sluice_load::duration_text::parse)]
    spread: std::time::Duration,
}

/// The `--payload` of `sluice lab ceiling`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq)]
enum PayloadKind {
    Shared,
    Staggered,
}

impl std::fmt::Display for PayloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad`, not `write_str`: the table's columns give widths.
        f.pad(match self {
            PayloadKind::Shared => "shared",
            PayloadKind::Staggered => "staggered",
        })
    }
}

#[derive(Args, Debug)]
struct ReportArgs {
    /// results.json files (or the directories holding them), in report order.
    #[arg(required = true)]
    results: Vec<PathBuf>,
    /// The HTML file to write.
    #[arg(long, default_value = "report.html")]
    out: PathBuf,
    /// Also write the runs' tables and findings as Markdown (for notes such as BENCHMARKS.md).
    #[arg(long, value_name = "FILE")]
    markdown: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct RunArgs {
    /// Experiment name or id, or `all`.
    experiment: String,
    /// A few seconds per row (for checking the lab, not for conclusions).
    #[arg(long)]
    quick: bool,
    /// Output directory (each experiment gets a subdirectory).
    #[arg(long, default_value = "lab-results")]
    out: PathBuf,
    /// Only server configurations whose name contains this text (or one of several, comma-separated).
    #[arg(long, value_name = "TEXT")]
    servers: Option<String>,
    /// Only sweeps whose name contains this text (or one of several, comma-separated; e.g.
    /// `capacity,at the budget`).
    #[arg(long, value_name = "TEXT")]
    sweeps: Option<String>,
    /// CPU budget of the capacity rows, in cores per server worker thread (a CPU cgroup quota:
    /// cgroup v2 cpu.max or v1 cpu.cfs_quota_us); 0 skips those rows.
    // A quarter core: at half a core `sluice load` on one core could not saturate a server on
    // `/bench/hello` (81 of 90 E3 rows used under 90% of their budget, 2026-11-24, BENCHMARKS.md),
    // at a quarter 43 of 54 did.
    #[arg(long, value_name = "CORES", default_value_t = 0.25)]
    server_cpu: f64,
    /// The budget's cgroup scheduling period (short, so throttling does not dominate latency).
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = sluice_load::duration_text::parse)]
    cpu_period: std::time::Duration,
    /// No progress bars.
    #[arg(long)]
    no_progress: bool,
    /// The `sluice` binary to run the rows' servers with (default: the one beside this program).
    #[arg(long, value_name = "PATH")]
    sluice: Option<PathBuf>,
}

fn main() -> ExitCode {
    match run(LabArgs::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `sluice lab ...`.
fn run(args: LabArgs) -> anyhow::Result<()> {
    match args.command {
        LabCommand::List => {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            for e in sluice_lab::builtin() {
                let points = e.points(false, sluice_lab::machine::cores());
                let runs: usize = points.iter().map(|p| e.sweep_of(p).rounds_for(false)).sum();
                let rows = runs * e.server.len();
                let line = writeln!(
                    out,
                    "{:<4} {:<18} {} ({} rows; source: {})",
                    e.id, e.name, e.title, rows, e.seed
                );
                // A reader that stopped early (`sluice lab list | head`) is not an error.
                match line {
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                    other => other.context("writing the list")?,
                }
            }
            Ok(())
        }
        LabCommand::Run(r) => run_experiments(r),
        LabCommand::Ceiling(c) => ceiling(c),
        LabCommand::Report(r) => {
            let runs = r
                .results
                .iter()
                .map(|p| {
                    let file = if p.is_dir() { p.join("results.json") } else { p.clone() };
                    ExperimentResults::read(&file).with_context(|| format!("reading {}", file.display()))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            write_report(&r.out, &runs)?;
            println!("{} experiment(s) → {}", runs.len(), r.out.display());
            if let Some(path) = &r.markdown {
                let text: Vec<String> = runs.iter().map(report::markdown).collect();
                std::fs::write(path, text.join("\n"))
                    .with_context(|| format!("writing {}", path.display()))?;
                println!("markdown → {}", path.display());
            }
            Ok(())
        }
    }
}

/// Prints one line per payload, viewer count and kind of receiver (GRO, then plain): datagrams
/// asked for, sent and read, the sender's CPU per datagram, and each side's share of its core
/// (its thread plus the softirq time of its CPU).
fn ceiling(args: CeilingArgs) -> anyhow::Result<()> {
    println!(
        "payload    receivers  viewers  asked/s    sent/s     read/s     kept pace  delivered  sender core  (ksoftirqd)  us/datagram  receiver core  (ksoftirqd)"
    );
    let runs = args
        .payload
        .iter()
        .flat_map(|&k| args.viewers.iter().flat_map(move |&v| [(k, v, true), (k, v, false)]));
    for (kind, viewers, gro) in runs {
        let payload = match kind {
            PayloadKind::Shared => sluice_lab::ceiling::Payload::Shared,
            PayloadKind::Staggered => sluice_lab::ceiling::Payload::Staggered { spread: args.spread },
        };
        let probe = sluice_lab::ceiling::CeilingProbe {
            viewers,
            bitrate: args.bitrate,
            datagram: args.datagram,
            duration: args.duration,
            sender_cpu: args.sender_cpu,
            receiver_cpu: args.receiver_cpu,
            gro,
            payload,
        };
        let r = sluice_lab::ceiling::run(&probe).context("running the probe")?;
        println!(
            "{kind:<9}  {:<9}  {viewers:>7}  {:>9.0}  {:>9.0}  {:>9.0}  {:>8.1}%  {:>9}  {:>10.0}%  {:>10.0}%  {:>11.3}  {:>12.0}%  {:>10.0}%",
            if gro { "gro" } else { "plain" },
            r.offered as f64 / args.duration.as_secs_f64(),
            r.sent as f64 / args.duration.as_secs_f64(),
            r.received as f64 / args.duration.as_secs_f64(),
            100.0 * r.kept_pace(),
            if r.delivered_all() {
                "all".to_string()
            } else {
                format!("{:.1}%", 100.0 * r.received as f64 / r.offered.max(1) as f64)
            },
            100.0 * r.sender_load(),
            100.0 * r.sender_softirq / r.seconds,
            1e6 * (r.sender_cpu + r.sender_softirq) / r.sent.max(1) as f64,
            100.0 * r.receiver_load(),
            100.0 * r.receiver_softirq / r.seconds,
        );
    }
    Ok(())
}

/// On SIGINT/SIGTERM the lab takes its servers down with it (they run in process groups of
/// their own, where the terminal's Ctrl-C does not reach) and ends the row's load, then writes the rows it finished as a
/// partial run (`run_experiments`); a second signal, or a row that does not end within a
/// minute, exits at once.
fn stop_servers_on_signal() -> anyhow::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals =
        signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("installing signal handlers")?;
    std::thread::Builder::new().name("sluice-lab-signals".into()).spawn(move || {
        let mut signals = signals.forever();
        let Some(sig) = signals.next() else { return };
        sluice_lab::stop::stop(sig);
        eprintln!(
            "sluice lab: stopped by {}; its servers and their load are stopped; writing the rows finished so far",
            sluice_lab::stop::signal_name(sig)
        );
        let exit_now = move || {
            sluice_lab::stop::remove_cgroups();
            std::process::exit(128 + sig);
        };
        let _ = std::thread::Builder::new().name("sluice-lab-stop".into()).spawn(move || {
            std::thread::sleep(std::time::Duration::from_secs(60));
            exit_now();
        });
        if signals.next().is_some() {
            exit_now();
        }
    })?;
    Ok(())
}

fn run_experiments(args: RunArgs) -> anyhow::Result<()> {
    stop_servers_on_signal()?;
    // E5's hundreds of RTSP viewers each hold a connection and, over UDP, four sockets.
    if let Err(e) = sluice_load::limits::raise_nofile_limit() {
        eprintln!("sluice lab: cannot raise the open-files limit: {e}");
    }
    let sluice_exe = match &args.sluice {
        Some(path) => path.clone(),
        None => sluice_beside_me()?,
    };
    let experiments = if args.experiment == "all" {
        sluice_lab::builtin()
    } else {
        vec![Experiment::find(&args.experiment)?]
    };
    let options = RunOptions {
        quick: args.quick,
        out_dir: args.out.clone(),
        sluice_exe,
        sluice_version: env!("CARGO_PKG_VERSION").to_string(),
        servers: args.servers.clone(),
        command: std::env::args().map(|a| shell_word(&a)).collect::<Vec<_>>().join(" "),
        progress: !args.no_progress,
        budget: (args.server_cpu > 0.0)
            .then(|| sluice_lab::budget::CpuBudget::new(args.server_cpu, args.cpu_period)),
        sweeps: args.sweeps.clone(),
    };
    let mut runs: Vec<ExperimentResults> = Vec::new();
    for e in &experiments {
        let dir = args.out.join(&e.name);
        let results = run_experiment(e, &RunOptions { out_dir: dir.clone(), ..options.clone() })?;
        results.write(&dir)?;
        write_report(&dir.join("report.html"), std::slice::from_ref(&results))?;
        println!(
            "{} {}: {} rows in {:.0} s → {}",
            e.id,
            e.name,
            results.rows.len(),
            results.duration_s,
            dir.join("report.html").display()
        );
        for f in &results.findings {
            println!("  - {f}");
        }
        let stopped = sluice_lab::stop::stopped_by();
        if let (Some(partial), Some(_)) = (&results.partial, stopped) {
            println!("  {}", partial.describe(results.rows.len()));
        }
        runs.push(results);
        if stopped.is_some() {
            break;
        }
    }
    if runs.len() > 1 {
        let path = args.out.join("report.html");
        write_report(&path, &runs)?;
        println!("all experiments → {}", path.display());
    }
    if let Some(sig) = sluice_lab::stop::stopped_by() {
        std::process::exit(128 + sig);
    }
    Ok(())
}

/// The `sluice` binary in this program's directory (where `cargo build -p sluice -p sluice-lab`
/// puts both).
fn sluice_beside_me() -> anyhow::Result<PathBuf> {
    let me = std::env::current_exe().context("finding this program's path")?;
    let sluice = me.with_file_name("sluice");
    anyhow::ensure!(
        sluice.is_file(),
        "no sluice binary beside {} (build it with `cargo build --release -p sluice`, or name one with --sluice PATH)",
        me.display()
    );
    Ok(sluice)
}

fn write_report(path: &std::path::Path, runs: &[ExperimentResults]) -> anyhow::Result<()> {
    std::fs::write(path, report::render(runs)).with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::shell_word;

    #[test]
    fn a_reports_command_pastes_back_as_it_ran() {
        assert_eq!(shell_word("--servers"), "--servers");
        assert_eq!(shell_word("sluice uring,nginx"), "'sluice uring,nginx'");
        assert_eq!(shell_word("it's"), "'it'\\''s'");
        assert_eq!(shell_word(""), "''");
    }
}
