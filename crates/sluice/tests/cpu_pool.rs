//! The engines' one job runner, seen from `/metrics`: on every engine, work that leaves the
//! event loop (or the connection's thread) runs on a pool of `--cpu-workers` threads, and the
//! admin listener shows the same `sluice_cpu_pool_*` series for it.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use common::*;

engine_matrix!(cpu_jobs_show_in_the_same_pool_series_on_every_engine);

/// The series every engine's job runner exports, gauges and counters.
const SERIES: [&str; 5] = [
    "sluice_cpu_pool_workers",
    "sluice_cpu_pool_queued",
    "sluice_cpu_pool_busy",
    "sluice_cpu_pool_jobs_total",
    "sluice_cpu_pool_refused_total",
];

fn cpu_jobs_show_in_the_same_pool_series_on_every_engine(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &["--cpu-workers", "3", "--cpu-queue", "8"]);
    // The admin listener can answer before the engine's threads have started their pool (on a
    // busy machine, a moment after the server says it listens): the series appear then.
    let mut before = String::new();
    let started = poll_until(IO_TIMEOUT, || {
        before = server.scrape();
        SERIES.iter().all(|name| before.contains(&format!("\n{name} ")))
    });
    for name in SERIES {
        assert!(started && before.contains(&format!("\n{name} ")), "{name} missing\n{before}");
    }
    assert_eq!(metric(&before, "sluice_cpu_pool_workers"), 3, "{before}");
    // Fibonacci(25) is a CPU job on every engine; four of them, one connection each.
    const JOBS: u64 = 4;
    for _ in 0..JOBS {
        let r = fetch_get(server.addr(), "/bench/cpu?n=25", &[("Connection", "close")]);
        r.expect_status(200, "cpu job");
        assert_eq!(r.body_text(), "Fibonacci(25) = 75025");
    }
    // A worker counts a job once it has handed the output back, so the last count may trail
    // the last response by a moment.
    let mut after = String::new();
    let settled = poll_until(IO_TIMEOUT, || {
        after = server.scrape();
        metric(&after, "sluice_cpu_pool_jobs_total") - metric(&before, "sluice_cpu_pool_jobs_total") == JOBS
            && metric(&after, "sluice_cpu_pool_busy") == 0
    });
    assert!(settled, "{JOBS} jobs run and no worker busy\n{after}");
    assert_eq!(
        metric(&after, "sluice_cpu_pool_refused_total"),
        metric(&before, "sluice_cpu_pool_refused_total")
    );
    // Each response came after its job: nothing is left queued.
    assert_eq!(metric(&after, "sluice_cpu_pool_queued"), 0, "{after}");
    assert_eq!(metric(&after, "sluice_cpu_pool_workers"), 3, "{after}");
}
