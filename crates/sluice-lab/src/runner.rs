//! Runs an experiment: prepares the media files, then for every point and every server (servers
//! alternate within a point, so a drift in the machine touches all of them alike) starts the
//! server as its own process, warms it only where the experiment allows, drives it with
//! `sluice-load` from this process, reads its CPU time and counters, stops it, and records a row.
//! A missing peer becomes a skipped row with the reason; a server that fails becomes a failed row.
//! An RTSP experiment first generates (or reuses) its file, then runs RTSP viewers against each
//! server and, past the declared points, goes on adding clients for each server that still sent
//! every sample to every client, until its first loss, the sweep's cap or the run's time budget.
//! It renders nothing (`report`).

mod edge_rows;
mod upload_rows;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use indicatif::ProgressBar;
use sluice_load::args::{HttpArgs, OnOff, RtspArgs};
use sluice_load::schedule::Stage;
use sluice_load::{LoadConfig, Report};

use crate::budget::{CpuBudget, RowBudget, ServerCgroup};
use crate::content::Content;
use crate::error::LabError;
use crate::experiment::{profile, Experiment, LoadModel, Point, ServerSpec};
use crate::machine::{
    all_cpus, machine_busy_seconds, pin, process_cpu_seconds, udp_rcvbuf_errors, Machine, Placement,
};
use crate::peer::{gstreamer_python, iperf3_loopback, RunningServer, ServerContext, StartError};
use crate::progress::{BarObserver, Progress, RtspBarObserver};
use crate::results::{
    ExperimentResults, Figures, Measurement, Partial, Row, RowOutcome, RtspFigures, RtspMeasures,
    RtspServerCounters,
};

/// How to run an experiment.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Seconds per row instead of the report's durations.
    pub quick: bool,
    /// Where results, media files and work directories go.
    pub out_dir: PathBuf,
    /// The `sluice` binary that serves the sluice rows.
    pub sluice_exe: PathBuf,
    /// Its version, for the report.
    pub sluice_version: String,
    /// Only servers whose name contains this (or one of its comma-separated parts).
    pub servers: Option<String>,
    /// The command line that started the run, for the report.
    pub command: String,
    /// Show progress bars.
    pub progress: bool,
    /// The CPU budget of capacity rows (`--server-cpu`); `None`: those rows are skipped.
    pub budget: Option<CpuBudget>,
    /// Only sweeps whose name contains this (or one of its comma-separated parts).
    pub sweeps: Option<String>,
}

/// Whether `name` passes a `--servers` / `--sweeps` filter: no filter, or a name containing one of
/// its comma-separated parts.
fn selected(filter: Option<&str>, name: &str) -> bool {
    filter.is_none_or(|f| f.split(',').any(|part| name.contains(part.trim())))
}

/// Runs `experiment` to the end and returns its rows; writes nothing but media and work files.
pub fn run_experiment(experiment: &Experiment, options: &RunOptions) -> Result<ExperimentResults, LabError> {
    let started = Instant::now();
    let started_at = humantime::format_rfc3339_seconds(SystemTime::now()).to_string();
    let mut machine = Machine::detect(&options.sluice_version);
    let media_root = options.out_dir.join("media");
    prepare_media(&media_root, &experiment.chunk_sizes())?;
    let content = experiment.load.content_for(options.quick).map(|spec| spec.ensure(&media_root));
    if let Some(spec) = experiment.load.content_for(options.quick) {
        let gst = match gstreamer_python() {
            Ok((_, version)) => version.clone(),
            Err(_) => "not installed".into(),
        };
        machine.versions.insert("gstreamer".into(), gst);
        machine.versions.insert("content".into(), spec.summary());
    }
    let ctx = ServerContext {
        sluice_exe: options.sluice_exe.clone(),
        rtsp_file: content.as_ref().and_then(|c| c.as_ref().ok()).map(|c| c.path.clone()),
        media_root,
        work_dir: options.out_dir.join("work"),
    };
    let points: Vec<Point> = experiment
        .points(options.quick, machine.cores)
        .into_iter()
        .filter(|p| selected(options.sweeps.as_deref(), &p.sweep))
        .collect();
    let servers: Vec<&ServerSpec> =
        experiment.server.iter().filter(|s| selected(options.servers.as_deref(), &s.name)).collect();
    let reference = experiment.loopback_reference && options.servers.is_none();
    let rounds = |p: &Point| experiment.sweep_of(p).rounds_for(options.quick);
    let steps = points.iter().map(rounds).sum::<usize>() * servers.len() + usize::from(reference);
    let progress =
        Progress::new(options.progress, steps as u64, &format!("{} {}", experiment.id, experiment.name));
    let bar = &progress.bar;
    let mut rows = Vec::with_capacity(steps);
    let run =
        Run { experiment, options, ctx: &ctx, content: content.as_ref(), bar, progress: &progress, started };
    if reference {
        bar.set_message("iperf3 loopback, one stream".to_string());
        run.record(&mut rows, loopback_row(experiment, options, &ctx, &machine));
    }
    if experiment.load.model == LoadModel::Upload {
        run.upload_sweeps(&points, &servers, &mut rows);
    } else if experiment.load.model == LoadModel::Edge {
        run.edge_sweeps(&points, &servers, &mut rows);
    } else if experiment.load.model == LoadModel::Rtsp {
        run.rtsp_sweeps(&points, &servers, &mut rows);
    } else {
        'points: for point in &points {
            // Rounds alternate the servers, every other round in reverse order, so a drift of
            // the machine over a point weighs on every server alike.
            let n = rounds(point);
            for round in 0..n {
                let mut order = servers.clone();
                if round % 2 == 1 {
                    order.reverse();
                }
                for server in order {
                    if crate::stop::stopped_by().is_some() {
                        break 'points;
                    }
                    let tag = (n > 1).then_some((round + 1, n));
                    let mut row = run.row(server, point, rows.len(), tag);
                    row.round = tag.map(|(r, _)| r);
                    run.record(&mut rows, row);
                }
            }
        }
    }
    let _ = pin(&all_cpus());
    let partial = crate::stop::stopped_by().map(|signal| Partial {
        stopped_by: crate::stop::signal_name(signal),
        rows_planned: bar.length().map_or(steps, |l| l as usize),
    });
    if partial.is_some() {
        bar.abandon_with_message("stopped");
    } else {
        bar.finish_with_message("done");
    }
    let mut results = ExperimentResults {
        experiment: experiment.clone(),
        quick: options.quick,
        started_at,
        duration_s: started.elapsed().as_secs_f64(),
        machine,
        command: options.command.clone(),
        rows,
        findings: Vec::new(),
        content: content.as_ref().and_then(|c| c.as_ref().ok()).map(|c| crate::results::ContentInfo {
            summary: c.spec.summary(),
            file_name: c.file_name.clone(),
            video_samples: c.video_samples,
            command: c.command.clone(),
        }),
        budget: options.budget.filter(|_| points.iter().any(|p| p.budget)),
        claims: Vec::new(),
        partial,
    };
    results.derive_across_rows();
    results.findings = crate::findings::generate(&results);
    results.claims = crate::claims::evaluate(&results);
    Ok(results)
}

/// What every row of one run shares.
struct Run<'a> {
    experiment: &'a Experiment,
    options: &'a RunOptions,
    ctx: &'a ServerContext,
    /// The RTSP experiment's file, or why there is none.
    content: Option<&'a Result<Content, String>>,
    bar: &'a ProgressBar,
    progress: &'a Progress,
    started: Instant,
}

impl Run<'_> {
    /// One row (round `r` of `n` when the point runs more than once), with the progress bar told.
    fn row(&self, server: &ServerSpec, point: &Point, index: usize, round: Option<(usize, usize)>) -> Row {
        self.bar.set_message(row_label(server, point, round));
        run_row(self, server, point, index, round)
    }

    /// Puts a finished row on record and tells the progress, unless the lab was stopped while
    /// the row ran: its servers were killed under it, so its figures are cut short and it is
    /// left out (the run keeps only the rows finished before the signal).
    fn record(&self, rows: &mut Vec<Row>, row: Row) {
        if crate::stop::stopped_by().is_some() {
            return;
        }
        let round = row.round.map(|r| format!(" (round {r})")).unwrap_or_default();
        let label = format!("{} @ {} {}{round}", row.server, row.point.sweep, row.point.x_label());
        let status = row.status();
        rows.push(row);
        self.bar.inc(1);
        let planned = self.bar.length().unwrap_or(rows.len() as u64);
        self.progress.row_done(rows.len(), planned, &label, status);
    }

    /// Every RTSP sweep: its declared points for every server (alternating within a point),
    /// then one more step of clients at a time for each server that sent every sample to every
    /// client at the last point, until its first loss, the sweep's cap or the time budget.
    fn rtsp_sweeps(&self, points: &[Point], servers: &[&ServerSpec], rows: &mut Vec<Row>) {
        for sweep in &self.experiment.sweep {
            let declared: Vec<&Point> = points.iter().filter(|p| p.sweep == sweep.name).collect();
            for point in &declared {
                for server in servers {
                    self.record(rows, self.row(server, point, rows.len(), None));
                }
            }
            let Some(&last) = declared.last() else { continue };
            let perfect_at = |rows: &[Row], server: &ServerSpec, clients: Option<usize>| {
                rows.iter().any(|r| {
                    r.server == server.name
                        && r.point.sweep == sweep.name
                        && r.point.clients == clients
                        && r.rtsp().is_some_and(|f| f.all_perfect())
                })
            };
            let mut going: Vec<&ServerSpec> =
                servers.iter().copied().filter(|s| perfect_at(rows, s, last.clients)).collect();
            let mut clients = last.clients.unwrap_or(0);
            while let Some(next) = sweep.next_clients(clients, self.options.quick) {
                if going.is_empty() {
                    break;
                }
                let point = Point { clients: Some(next), ..last.clone() };
                self.bar.inc_length(going.len() as u64);
                if let Some(budget) = self.experiment.load.budget.filter(|b| self.started.elapsed() >= *b) {
                    for server in going.drain(..) {
                        let mut row = empty_row(server, &point, &Placement { server: vec![], load: vec![] });
                        row.outcome = RowOutcome::Skipped {
                            reason: format!(
                                "the run's time budget ({}) was used up before this point past the declared ones",
                                sluice_load::duration_text::format(budget)
                            ),
                        };
                        self.record(rows, row);
                    }
                    break;
                }
                for server in std::mem::take(&mut going) {
                    self.record(rows, self.row(server, &point, rows.len(), None));
                    if perfect_at(rows, server, Some(next)) {
                        going.push(server);
                    }
                }
                clients = next;
            }
        }
    }
}

/// `sluice uring @ capacity 1000 (round 2/3)`: the row's full name in progress messages.
fn row_label(server: &ServerSpec, point: &Point, round: Option<(usize, usize)>) -> String {
    let round = round.map(|(r, n)| format!(" (round {r}/{n})")).unwrap_or_default();
    format!("{} @ {} {}{round}", server.name, point.sweep, point.x_label())
}

/// A row whose server did not start: skipped when its program is missing, else failed.
fn not_started(e: StartError) -> RowOutcome {
    match e {
        StartError::Missing(reason) => RowOutcome::Skipped { reason },
        StartError::Failed(reason) => RowOutcome::Failed { reason },
    }
}

fn empty_row(server: &ServerSpec, point: &Point, placement: &Placement) -> Row {
    Row {
        server: server.name.clone(),
        peer: server.is_peer(),
        point: point.clone(),
        server_command: String::new(),
        load_command: String::new(),
        server_cpus: placement.server.clone(),
        load_cpus: placement.load.clone(),
        round: None,
        budget: None,
        outcome: RowOutcome::Skipped { reason: String::new() },
    }
}

/// Files of exactly each chunk size (`chunk-65536.bin`), readable by every user so a peer that
/// drops privileges can serve them too.
fn prepare_media(root: &Path, sizes: &[u64]) -> Result<(), LabError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(root).map_err(|e| LabError::io(root, e))?;
    let _ = std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755));
    for &size in sizes {
        let path = root.join(format!("chunk-{size}.bin"));
        if std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
            continue;
        }
        std::fs::write(&path, incompressible(size, size)).map_err(|e| LabError::io(&path, e))?;
        let _ = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644));
    }
    Ok(())
}

/// `size` bytes that do not compress, different for each `seed`, so no layer can shortcut them
/// (the load generator's `random` payload).
fn incompressible(seed: u64, size: u64) -> Vec<u8> {
    sluice_load::payload::PayloadKind::Random.generate(size as usize, seed)
}

fn loopback_row(
    experiment: &Experiment,
    options: &RunOptions,
    ctx: &ServerContext,
    machine: &Machine,
) -> Row {
    let duration = measured_duration(experiment, options.quick);
    let placement = Placement::for_workers(machine.cores, 1);
    let point = Point {
        sweep: "loopback".into(),
        x: crate::experiment::Param::Workers,
        chunk: None,
        vus: None,
        workers: 1,
        profile: None,
        clients: None,
        transport: None,
        udp_gro: None,
        payload: None,
        budget: false,
    };
    let (outcome, command) =
        match iperf3_loopback(&ctx.work_dir.join("iperf3"), duration, &placement.server, &placement.load) {
            Ok((mb_per_s, command)) => (RowOutcome::Reference { mb_per_s }, command),
            Err(e) => (not_started(e), String::new()),
        };
    Row {
        server: "iperf3 loopback, one stream".into(),
        peer: true,
        point,
        server_command: command,
        load_command: String::new(),
        server_cpus: placement.server,
        load_cpus: placement.load,
        round: None,
        budget: None,
        outcome,
    }
}

fn measured_duration(experiment: &Experiment, quick: bool) -> Duration {
    point_duration(experiment, None, quick)
}

/// Measured time of a row at `point`: its sweep's own duration in a full run, else the load's.
fn point_duration(experiment: &Experiment, point: Option<&Point>, quick: bool) -> Duration {
    let full = point
        .and_then(|p| experiment.sweep_of(p).duration)
        .or(experiment.load.duration)
        .unwrap_or(Duration::from_secs(10));
    if quick {
        experiment.load.quick_duration.unwrap_or(Duration::from_secs(1))
    } else {
        full
    }
}

fn run_row(
    run: &Run,
    server: &ServerSpec,
    point: &Point,
    index: usize,
    round: Option<(usize, usize)>,
) -> Row {
    let (experiment, options, ctx, bar) = (run.experiment, run.options, run.ctx, run.bar);
    let placement = Placement::for_workers(crate::machine::cores(), point.workers);
    let _ = pin(if placement.load.is_empty() { &[] } else { &placement.load });
    let mut row = empty_row(server, point, &placement);
    if let Some(Err(reason)) = run.content {
        row.outcome = RowOutcome::Failed { reason: format!("no content to stream: {reason}") };
        return row;
    }
    let cgroup = if point.budget {
        let created = match options.budget {
            Some(b) => ServerCgroup::create(b.quota_us(point.workers), b.period_us),
            None => Err("capacity rows need a CPU budget and this run has none (--server-cpu 0)".to_string()),
        };
        match created {
            Ok(g) => Some(g),
            Err(reason) => {
                row.outcome = RowOutcome::Skipped { reason };
                return row;
            }
        }
    } else {
        None
    };
    let work = ctx.work_dir.join(format!("{index:03}"));
    let mut running =
        match RunningServer::start(server, point, ctx, &work, &placement.server, cgroup.as_ref()) {
            Ok(s) => s,
            Err(e) => {
                row.outcome = not_started(e);
                return row;
            }
        };
    row.server_command = running.command_line.clone();
    let threads = if placement.load.is_empty() { crate::machine::cores() } else { placement.load.len() };
    if let Some(Ok(content)) = run.content {
        let cpus = (placement.server.first().copied(), placement.load.first().copied());
        row.outcome =
            rtsp_row(experiment, options.quick, point, content, &running, (threads, cpus), bar, &mut row);
        running.stop();
        return row;
    }
    let plan = match LoadPlanned::build(experiment, options.quick, point, &running.base_url(), threads) {
        Ok(p) => p,
        Err(e) => {
            row.outcome = RowOutcome::Failed { reason: e.to_string() };
            return row;
        }
    };
    row.load_command = plan.command.clone();
    if let Some(warmup) = plan.warmup.as_ref() {
        let _ = sluice_load::run(warmup, &mut sluice_load::NoObserver);
    }
    let cpu_before = running.cpu_seconds();
    let calls_before = running.metrics();
    let throttling_before = cgroup.as_ref().map(ServerCgroup::stat);
    let wall = Instant::now();
    let mut observer = BarObserver { bar, label: row_label(server, point, round) };
    let report = sluice_load::run(&plan.config, &mut observer);
    let wall = wall.elapsed().as_secs_f64();
    let cpu = running.cpu_seconds() - cpu_before;
    let calls = match (calls_before, running.metrics()) {
        (Some(before), Some(after)) => Some(counter_delta(&before, &after)),
        _ => None,
    };
    if let (Some(g), Some(before)) = (&cgroup, throttling_before) {
        let (quota_us, period_us) = g.read_limit().unwrap_or((g.quota_us, g.period_us));
        row.budget = Some(RowBudget {
            cpus: quota_us as f64 / period_us.max(1) as f64,
            quota_us,
            period_us,
            mechanism: g.mechanism(),
            server_in_group: g.holds(running.pid()),
            throttling: g.stat().since(&before),
            server_cpu_pct: cpu / wall.max(1e-9) * 100.0,
        });
    }
    running.stop();
    drop(cgroup);
    row.outcome = match report {
        Ok(report) => measured(report, point.chunk, cpu, calls.as_ref()),
        Err(e) => RowOutcome::Failed { reason: format!("load: {e}") },
    };
    row
}

/// The viewers of one RTSP row against `running`: every one must receive all of the file's
/// video samples; the row records them with the server's and the generator's CPU time and
/// (sluice) the server's own counters.
#[allow(clippy::too_many_arguments)]
fn rtsp_row(
    experiment: &Experiment,
    quick: bool,
    point: &Point,
    content: &Content,
    running: &RunningServer,
    (threads, (server_cpu, load_cpu)): (usize, (Option<usize>, Option<usize>)),
    bar: &ProgressBar,
    row: &mut Row,
) -> RowOutcome {
    let Some(url) = running.rtsp_url(&content.file_name) else {
        return RowOutcome::Failed { reason: "the server has no RTSP port".into() };
    };
    let args = rtsp_args(experiment, quick, point, content, &url, threads);
    row.load_command = args.command_line();
    let config = match args.config() {
        Ok(config) => config,
        Err(e) => return RowOutcome::Failed { reason: format!("load: {e}") },
    };
    let cpu_before = running.cpu_seconds();
    let counters_before = running.rtsp_counters();
    let generator_before = process_cpu_seconds();
    let machine_before = machine_busy_seconds();
    let drops_before = udp_rcvbuf_errors();
    let mut observer =
        RtspBarObserver { bar, label: format!("{} @ {} {}", row.server, point.sweep, point.x_label()) };
    let report = sluice_load::rtsp::run_rtsp(&config, &mut observer);
    let generator_cpu_s = process_cpu_seconds() - generator_before;
    let udp_rcvbuf_drops = match (drops_before, udp_rcvbuf_errors()) {
        (Some(before), Some(after)) => Some(after.saturating_sub(before)),
        _ => None,
    };
    let server_cpu_s = running.cpu_seconds() - cpu_before;
    let other_cpu_s = machine_busy_seconds() - machine_before - server_cpu_s - generator_cpu_s;
    let server = match (counters_before, running.rtsp_counters()) {
        (Some(before), Some(after)) => Some(RtspServerCounters::delta(&before, &after)),
        _ => None,
    };
    // The matching ceiling: the same viewers and bitrate, receivers like the row's, from the
    // server's CPU to the generator's (5 s; 1 s with --quick).
    let ceiling = (config.transport == sluice_load::rtsp::RtspTransport::Udp && report.is_ok()).then(|| {
        let probe = crate::ceiling::CeilingProbe {
            viewers: config.clients,
            bitrate: u64::from(content.spec.bitrate_kbps) * 1000,
            datagram: 1380,
            duration: Duration::from_secs(if quick { 1 } else { 5 }),
            sender_cpu: server_cpu.unwrap_or(0),
            receiver_cpu: load_cpu.unwrap_or(crate::machine::cores().saturating_sub(1)),
            gro: config.udp_gro,
            payload: crate::ceiling::Payload::Shared,
        };
        crate::ceiling::run(&probe).ok().map(|r| r.received as f64 / r.offered.max(1) as f64)
    });
    match report {
        Ok(report) => {
            let measures = RtspMeasures {
                ceiling: ceiling.flatten(),
                server_cpu_s,
                generator_cpu_s,
                generator_cpus: threads,
                server,
                udp_rcvbuf_drops,
                other_cpu_s,
                content_s: f64::from(content.spec.seconds),
            };
            let rtsp = RtspFigures::derive(&report, &measures);
            RowOutcome::Measured {
                measurement: Measurement::Rtsp { rtsp: Box::new(rtsp), load: Box::new(report) },
            }
        }
        Err(e) => RowOutcome::Failed { reason: format!("load: {e}") },
    }
}

/// The viewers of a row: `clients` over the point's transport, started over the ramp, each
/// stopping at the file's sample count; the row ends at the latest by ramp + the file's length +
/// the setup timeout + 5 s, so an overloaded server can delay a viewer but not the run.
fn rtsp_args(
    experiment: &Experiment,
    quick: bool,
    point: &Point,
    content: &Content,
    url: &str,
    threads: usize,
) -> RtspArgs {
    let load = &experiment.load;
    let mut a = RtspArgs::new(url);
    a.clients = point.clients.unwrap_or(1);
    a.transport = point.transport.unwrap_or_default();
    a.udp_gro = if point.udp_gro.unwrap_or(true) { OnOff::On } else { OnOff::Off };
    a.ramp = load.ramp_for(quick);
    a.expect_samples = Some(content.video_samples);
    a.idle_end = load.idle_end.unwrap_or(a.idle_end);
    a.setup_timeout = load.setup_timeout.unwrap_or(a.setup_timeout);
    a.video_only = !content.spec.audio;
    a.threads = Some(threads.max(1));
    let length = Duration::from_secs(u64::from(content.spec.seconds));
    a.duration = Some(a.ramp + length + a.setup_timeout + Duration::from_secs(5));
    a
}

fn measured(
    report: Report,
    chunk: Option<u64>,
    cpu: f64,
    calls: Option<&BTreeMap<String, f64>>,
) -> RowOutcome {
    let figures = Figures::derive(&report, chunk, cpu, calls);
    RowOutcome::Measured {
        measurement: Measurement::Http { figures: Box::new(figures), load: Box::new(report) },
    }
}

fn counter_delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after.iter().map(|(k, v)| (k.clone(), (v - before.get(k).copied().unwrap_or(0.0)).max(0.0))).collect()
}

/// The load of one row, ready to run.
struct LoadPlanned {
    config: LoadConfig,
    warmup: Option<LoadConfig>,
    command: String,
}

impl LoadPlanned {
    fn build(
        experiment: &Experiment,
        quick: bool,
        point: &Point,
        base_url: &str,
        threads: usize,
    ) -> Result<LoadPlanned, LabError> {
        match experiment.load.model {
            LoadModel::Closed => {
                let path = experiment.load.path.as_deref().unwrap_or("/");
                let path = match point.chunk {
                    Some(c) => path.replace("{chunk}", &c.to_string()),
                    None => path.to_string(),
                };
                let url = format!("{base_url}{path}");
                let vus = point.vus.unwrap_or(1);
                let duration = point_duration(experiment, Some(point), quick);
                let think = experiment.sweep_of(point).think.or(experiment.load.think).unwrap_or_default();
                let args = |d: Duration| HttpArgs {
                    urls: vec![url.clone()],
                    vus: Some(vus),
                    duration: Some(d),
                    think: (!think.is_zero()).then_some(think),
                    timeout: Some(Duration::from_secs(30)),
                    expect_status: Some(200),
                    threads: Some(threads),
                    ..HttpArgs::default()
                };
                let closed = |d: Duration| -> Result<LoadConfig, LabError> {
                    let mut c = args(d).load_config(None)?;
                    c.stop = Some(crate::stop::flag());
                    Ok(c)
                };
                let warmup = if quick { experiment.load.quick_warmup } else { experiment.load.warmup };
                Ok(LoadPlanned {
                    config: closed(duration)?,
                    warmup: warmup.filter(|w| !w.is_zero()).map(closed).transpose()?,
                    command: args(duration).command_line(),
                })
            }
            LoadModel::Open => {
                let name = point.profile.as_deref().unwrap_or("hello");
                let (text, file) = profile(name).ok_or_else(|| LabError::BadExperiment {
                    name: experiment.name.clone(),
                    message: format!("unknown profile `{name}`"),
                })?;
                let mut parsed = sluice_load::scenario_file::parse(text, Path::new(&file), Some(base_url))?;
                let scale = if quick { experiment.load.quick_scale.unwrap_or(1.0) } else { 1.0 };
                parsed.scenarios = parsed.scenarios.into_iter().map(|s| scale_scenario(s, scale)).collect();
                // The lab's own defaults where the profile has none: a larger pool, only 200s.
                let s = &parsed.settings;
                let args = HttpArgs {
                    scenario: Some(file.into()),
                    base_url: Some(base_url.to_string()),
                    threads: Some(threads),
                    max_connections: Some(s.max_connections.unwrap_or(200)),
                    expect_status: s.expect_status.is_none().then_some(200),
                    ..HttpArgs::default()
                };
                let mut c = args.load_config(Some(parsed))?;
                c.stop = Some(crate::stop::flag());
                let scaled = if scale == 1.0 {
                    String::new()
                } else {
                    format!(" (every stage at {scale}× its length)")
                };
                let command = format!("{}{scaled}", args.command_line());
                Ok(LoadPlanned { config: c, warmup: None, command })
            }
            LoadModel::Rtsp | LoadModel::Upload | LoadModel::Edge => Err(LabError::BadExperiment {
                name: experiment.name.clone(),
                message: "RTSP and upload experiments run their own clients, not HTTP load".into(),
            }),
        }
    }
}

/// The same profile at `scale` × its length: every stage and start offset shortened, arrival
/// rates kept, user counts of ramps shrunk alike (so the rate of a ramp stays the same).
fn scale_scenario(mut s: sluice_load::Scenario, scale: f64) -> sluice_load::Scenario {
    if scale == 1.0 {
        return s;
    }
    let d = |d: Duration| d.mul_f64(scale);
    s.start_at = d(s.start_at);
    for st in &mut s.stages {
        *st = match *st {
            Stage::RampUsers { users, over } => {
                Stage::RampUsers { users: ((users as f64 * scale).round() as u64).max(1), over: d(over) }
            }
            Stage::ConstantRate { rate, duration } => Stage::ConstantRate { rate, duration: d(duration) },
            Stage::RampRate { from, to, over } => Stage::RampRate { from, to, over: d(over) },
            Stage::Pause { duration } => Stage::Pause { duration: d(duration) },
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_take_any_of_their_comma_separated_parts() {
        assert!(selected(None, "capacity"));
        assert!(selected(Some("capacity, at the budget"), "threads at the budget"));
        assert!(selected(Some("capacity,at the budget"), "capacity"));
        assert!(!selected(Some("capacity,at the budget"), "connections"));
    }

    #[test]
    fn quick_profiles_keep_rates_and_shrink_time() {
        let (text, file) = profile("hello").unwrap();
        let parsed =
            sluice_load::scenario_file::parse(text, Path::new(&file), Some("http://127.0.0.1:1")).unwrap();
        let full: Vec<_> = parsed.scenarios.clone();
        let quick: Vec<_> = parsed.scenarios.into_iter().map(|s| scale_scenario(s, 0.1)).collect();
        let end = |v: &[sluice_load::Scenario]| v.iter().map(|s| s.end()).max().unwrap();
        assert_eq!(end(&full), Duration::from_secs(90));
        assert_eq!(end(&quick), Duration::from_secs(9));
        let arrivals = |v: &[sluice_load::Scenario]| v.iter().map(|s| s.arrivals()).sum::<u64>() as f64;
        let ratio = arrivals(&quick) / arrivals(&full);
        assert!((0.08..0.12).contains(&ratio), "{ratio}");
    }

    #[test]
    fn media_files_have_exact_sizes() {
        let dir = tempfile::tempdir().unwrap();
        prepare_media(dir.path(), &[1000, 65536]).unwrap();
        assert_eq!(std::fs::metadata(dir.path().join("chunk-65536.bin")).unwrap().len(), 65536);
        assert_eq!(std::fs::metadata(dir.path().join("chunk-1000.bin")).unwrap().len(), 1000);
    }

    #[test]
    fn counters_subtract_per_kind() {
        let before = BTreeMap::from([("read".to_string(), 10.0)]);
        let after = BTreeMap::from([("read".to_string(), 25.0), ("write".to_string(), 3.0)]);
        let d = counter_delta(&before, &after);
        assert_eq!(d["read"], 15.0);
        assert_eq!(d["write"], 3.0);
    }
}
