//! Running a load test: validates and resolves the configuration, starts one worker thread per
//! share (each a single-threaded tokio runtime running the closed or open model), collects the
//! per-second buckets on the calling thread while the run goes on (feeding an [`Observer`], e.g.
//! the live progress line), and merges the workers' totals into a [`Report`]. Memory stays
//! constant however long the run: totals are fixed-size histograms and a second's buckets are
//! discarded once merged into a row of the time series.

use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use crate::closed::{run_closed, ClosedShare};
use crate::config::{LoadConfig, Model};
use crate::error::LoadError;
use crate::open::{run_open, share_of, OpenShare};
use crate::report::Report;
use crate::stats::{SecondBucket, SecondSample, Totals};
use crate::target::Target;
use crate::worker::{tick_seconds, Recorder, WorkerCtx};

/// Where a run is, for live displays.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunProgress {
    /// Seconds completed.
    pub elapsed: Duration,
    /// Planned sending time, when known.
    pub planned: Option<Duration>,
    /// Requests sent so far.
    pub sent: u64,
    /// Successful responses so far.
    pub ok: u64,
    /// Failures so far.
    pub failed: u64,
    /// Dropped arrivals so far.
    pub dropped: u64,
}

/// Watches a run second by second (called on the thread that called [`run`]).
pub trait Observer {
    /// A second of the run is complete on every worker.
    fn on_second(&mut self, _sample: &SecondSample, _progress: &RunProgress) {}
    /// The run has finished sending and receiving.
    fn on_finish(&mut self) {}
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl Observer for NoObserver {}

/// Runs the load test described by `config` to the end and reports on it.
pub fn run(config: &LoadConfig, observer: &mut dyn Observer) -> Result<Report, LoadError> {
    config.validate()?;
    let targets = config
        .target_list()
        .into_iter()
        .map(|(_, spec)| Target::resolve(spec, config.method, &config.headers, config.allow_non_loopback))
        .collect::<Result<Vec<_>, _>>()?;
    // Never more workers than units of concurrency, so no worker gets an empty share.
    let units = match &config.model {
        Model::Closed(c) => c.vus,
        Model::Open(o) => o.max_connections,
    };
    let workers = config.threads.min(units).max(1);
    let (sink, buckets) = mpsc::channel::<SecondBucket>();
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<std::time::Instant>();
    let go_rx = std::sync::Arc::new(std::sync::Mutex::new(go_rx));
    let mut handles = Vec::with_capacity(workers);
    for index in 0..workers {
        let sink = sink.clone();
        let targets = targets.clone();
        let config = config.clone();
        let ready_tx = ready_tx.clone();
        let go_rx = go_rx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("sluice-load-{index}"))
            .spawn(move || -> Result<Totals, LoadError> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(LoadError::Runtime)?;
                let _ = ready_tx.send(());
                drop(ready_tx);
                // Every worker starts from the same instant so seconds line up across workers.
                let start = go_rx.lock().map_err(|_| LoadError::WorkerPanicked)?.recv();
                let Ok(start) = start else { return Ok(Totals::new(targets.len())) };
                let local = tokio::task::LocalSet::new();
                local.block_on(&runtime, async move {
                    let start = tokio::time::Instant::from_std(start);
                    let ctx = Rc::new(WorkerCtx {
                        index,
                        workers,
                        recorder: std::cell::RefCell::new(Recorder::new(targets.len(), start, sink)),
                        targets,
                        start,
                        timeout: config.timeout,
                        connections: config.connections,
                        expected: config.expected_status,
                        stop: config.stop.clone(),
                    });
                    let ticker = tokio::task::spawn_local(tick_seconds(ctx.clone()));
                    tokio::time::sleep_until(start).await;
                    run_share(&config, ctx.clone(), index, workers).await;
                    ticker.abort();
                    let _ = ticker.await;
                    let ctx = Rc::try_unwrap(ctx).map_err(|_| LoadError::WorkerPanicked)?;
                    Ok(ctx.recorder.into_inner().close())
                })
            })
            .map_err(LoadError::Runtime)?;
        handles.push(handle);
    }
    drop(sink);
    drop(ready_tx);
    // Wait until every runtime exists, then start all workers a moment from now.
    for _ in 0..workers {
        let _ = ready_rx.recv();
    }
    let start = std::time::Instant::now() + Duration::from_millis(20);
    for _ in 0..workers {
        let _ = go_tx.send(start);
    }
    let started_at = std::time::SystemTime::now() + Duration::from_millis(20);
    let series = collect_seconds(buckets, workers, config.planned_duration(), observer);
    let mut totals = Totals::new(targets.len());
    let mut failure = None;
    for h in handles {
        match h.join() {
            Ok(Ok(t)) => totals.merge(&t),
            Ok(Err(e)) => failure = Some(e),
            Err(_) => failure = Some(LoadError::WorkerPanicked),
        }
    }
    if let Some(e) = failure {
        return Err(e);
    }
    let elapsed = start.elapsed();
    observer.on_finish();
    Ok(Report::build(config, &targets, workers, started_at, elapsed, &totals, series))
}

async fn run_share(config: &LoadConfig, ctx: Rc<WorkerCtx>, index: usize, workers: usize) {
    match &config.model {
        Model::Closed(c) => {
            let share = ClosedShare {
                vus: share_of(c.vus, workers, index),
                end: c.duration.map(|d| ctx.start + d),
                quota: c.requests.map(|r| share_of(r as usize, workers, index) as u64),
                think: c.think,
            };
            run_closed(ctx, share).await;
        }
        Model::Open(o) => {
            let mut first_target = Vec::with_capacity(o.scenarios.len());
            let mut next = 0;
            for s in &o.scenarios {
                first_target.push(next);
                next += s.targets.len();
            }
            let share = OpenShare {
                scenarios: o.scenarios.clone(),
                first_target,
                max_connections: share_of(o.max_connections, workers, index),
                max_pending: share_of(o.max_pending, workers, index).max(1),
                requests: o.requests,
            };
            run_open(ctx, share).await;
        }
    }
}

/// Merges the workers' buckets second by second into the time series, telling `observer` about
/// each completed second. Returns when every worker has finished.
fn collect_seconds(
    buckets: mpsc::Receiver<SecondBucket>,
    workers: usize,
    planned: Option<Duration>,
    observer: &mut dyn Observer,
) -> Vec<SecondSample> {
    let mut pending: BTreeMap<u64, (usize, SecondBucket)> = BTreeMap::new();
    let mut series = Vec::new();
    let mut in_flight: u64 = 0;
    let mut progress = RunProgress { planned, ..RunProgress::default() };
    let mut finalize = |bucket: SecondBucket, series: &mut Vec<SecondSample>| {
        let active = in_flight + bucket.users_arrived;
        in_flight = active.saturating_sub(bucket.users_left);
        let failed = bucket.errors.total();
        let sample = SecondSample {
            second: bucket.second,
            arrivals: bucket.arrivals,
            started: bucket.sent,
            ok: bucket.ok,
            failed,
            errors: bucket.errors,
            dropped: bucket.dropped,
            active_users: active,
            p50_us: bucket.latency.quantile_us(0.50),
            p99_us: bucket.latency.quantile_us(0.99),
            bytes: bucket.bytes,
        };
        progress.elapsed = Duration::from_secs(bucket.second + 1);
        progress.sent += bucket.sent;
        progress.ok += bucket.ok;
        progress.failed += failed;
        progress.dropped += bucket.dropped;
        observer.on_second(&sample, &progress);
        series.push(sample);
    };
    let mut next_second = 0;
    for bucket in buckets {
        let entry = pending.entry(bucket.second).or_insert_with(|| (0, SecondBucket::new(bucket.second)));
        entry.0 += 1;
        entry.1.merge(&bucket);
        while pending.get(&next_second).is_some_and(|(seen, _)| *seen == workers) {
            if let Some((_, b)) = pending.remove(&next_second) {
                finalize(b, &mut series);
            }
            next_second += 1;
        }
    }
    // Workers end at different seconds; what is left is complete now that all have finished.
    for (_, (_, b)) in pending {
        finalize(b, &mut series);
    }
    series
}
