//! How a run measured, in the words a report prints: the note on quick runs, and the method of
//! the capacity rows (the CPU budget read back from the kernel, the placement, the rounds, the
//! throttling), or why they were not measured; the line naming the claims a run left out. Text only, shared by the HTML page and Markdown.

use crate::budget::RowBudget;
use crate::results::{ExperimentResults, Row, RowOutcome};

/// `" (quick mode: …)"` for a quick run's findings and claims, else nothing.
pub fn quick_note(r: &ExperimentResults) -> &'static str {
    if r.quick {
        " (quick mode: smoke-check figures from a second or so per row, not conclusions)"
    } else {
        ""
    }
}

/// How the capacity rows were measured (the budget, read back from the kernel, the placement,
/// the rounds), or why they were not; `None` when the run has no capacity rows.
pub fn capacity_method(r: &ExperimentResults) -> Option<String> {
    let rows: Vec<&Row> = r.rows.iter().filter(|row| row.point.budget).collect();
    if rows.is_empty() {
        return None;
    }
    let mut sweeps: Vec<&str> = Vec::new();
    for row in &rows {
        if !sweeps.contains(&row.point.sweep.as_str()) {
            sweeps.push(&row.point.sweep);
        }
    }
    let sweeps = sweeps.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ");
    let budgeted: Vec<&Row> = rows.iter().copied().filter(|row| row.budget.is_some()).collect();
    let Some(first) = budgeted.first().and_then(|row| row.budget.as_ref()) else {
        let why = rows
            .iter()
            .find_map(|row| match &row.outcome {
                RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => Some(reason.as_str()),
                _ => None,
            })
            .unwrap_or("no row ran");
        return Some(format!("Capacity rows ({sweeps}) were not measured: {why}."));
    };
    let rounds = rows.iter().filter_map(|row| row.round).max().unwrap_or(1);
    let (periods, throttled): (u64, u64) = budgeted
        .iter()
        .filter_map(|row| row.budget.as_ref())
        .fold((0, 0), |a, b| (a.0 + b.throttling.nr_periods, a.1 + b.throttling.nr_throttled));
    let one_worker: Vec<&RowBudget> =
        budgeted.iter().filter(|row| row.point.workers == 1).filter_map(|row| row.budget.as_ref()).collect();
    let peak = one_worker.iter().map(|b| b.server_cpu_pct).fold(0.0, f64::max);
    let cpus = |v: &[usize]| v.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(",");
    let row = budgeted[0];
    let described = r.budget.map(|b| b.describe()).unwrap_or_else(|| format!("{} core", first.cpus));
    let server_bound =
        budgeted.iter().filter(|row| row.budget.as_ref().is_some_and(RowBudget::server_bound)).count();
    Some(format!(
        "Capacity rows ({sweeps}): each server ran in a CPU cgroup of its own with a budget of {described}: {} held {} µs every {} µs. Server on CPU {}, load generator on CPU {} (a server with more workers than the cores beside the generator runs on every core, its budget growing with its workers). Users do not pause. {rounds} round(s) per point, servers alternating (every other round in reverse order); tables show the median with the min–max of the rounds, and a ratio whose ranges overlap is a tie. Over these rows the servers were throttled in {throttled} of {periods} scheduling periods; with one worker the busiest used {peak:.0}% of a core (its budget: {:.0}%). {server_bound} of {} measured rows used at least 90% of their budget (server-bound); in the others the load generator or the machine's other work, not the budget, set the pace.",
        first.mechanism,
        first.quota_us,
        first.period_us,
        cpus(&row.server_cpus),
        cpus(&row.load_cpus),
        first.cpus * 100.0 / row.point.workers.max(1) as f64,
        budgeted.len(),
    ))
}

/// `Claims not in this run (…): a; b.`: one line for the claims a run left out.
pub fn not_in_run(left_out: &[String]) -> String {
    format!(
        "Claims not in this run (their sweep or servers were not run: --sweeps, --servers or a stop): {}.",
        left_out.join("; ")
    )
}
