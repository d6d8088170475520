//! The source reports' claims, each with this run's counterpart and a verdict: reproduced, not
//! reproduced, or not measurable here (and why). An experiment declares its claims (`[[claim]]`)
//! and how each is checked:
//!
//! - `ratio`: server `a` against server `b` on a metric at one point (`at`, an x label) or over
//!   every point of the sweep (the ratio of the averages), from the medians of the rounds; the
//!   claim holds when the ratio is at least `at_least` (or at most `at_most`) and the two servers'
//!   ranges over the rounds do not overlap (overlapping ranges are a tie). `a` and `b` may be
//!   `best sluice` or `best peer`: the best median at that point;
//! - `flat`: a metric from the point `from` to the point `to` (default: the sweep's first and
//!   last) for each of `servers`; it holds when the last is at most `at_most` (default 1.25) times
//!   the first, or their ranges overlap;
//! - `below`: a metric at `at` for each of `servers` is at most `at_most` (and, when given, at
//!   least `at_least`);
//! - `not_measurable`: the claim needs what this machine lacks (`reason`; `{cores}` is replaced
//!   by the machine's cores).
//!
//! It reads rows only (so a report rebuilt from `results.json` gets the same table); it
//! measures nothing and renders nothing.

use crate::experiment::{ClaimKind, ClaimSpec};
use crate::metrics::{higher_is_better, metric_heading};
use crate::results::{ExperimentResults, RowOutcome, Spread, Verdict, VerdictKind};

/// Every declared claim this run could measure, checked against its rows (see [`in_run`]).
pub fn evaluate(results: &ExperimentResults) -> Vec<Verdict> {
    in_run(results).0
}

/// The claims this run could measure, checked, and the ones it could not because `--sweeps`,
/// `--servers` or a stop left out their sweep or servers (their text, with the server for a
/// per-server claim). A server left out has no row at all in the sweep; one that was skipped or
/// failed has rows, and its claim stays in the table as not measurable, with the reason.
pub fn in_run(results: &ExperimentResults) -> (Vec<Verdict>, Vec<String>) {
    let mut out = Vec::new();
    let mut left_out = Vec::new();
    for spec in &results.experiment.claim {
        let sweep = sweep_name(results, spec);
        let ran = |name: &str| {
            results.rows_of(sweep).any(|r| match name {
                "best sluice" => !r.peer,
                "best peer" => r.peer,
                _ => r.server == name,
            })
        };
        // A claim of the machine (not measurable anywhere here) names no sweep: it stays while
        // the run has any row.
        let machine_claim = spec.kind == ClaimKind::NotMeasurable && spec.sweep.is_none();
        let sweep_ran = results.rows_of(sweep).next().is_some();
        let kept = sweep_ran || (machine_claim && !results.rows.is_empty());
        if !kept {
            left_out.push(spec.claim.clone());
            continue;
        }
        let spec = &match spec.kind {
            ClaimKind::Ratio => {
                if !spec.a.iter().chain(&spec.b).all(|s| ran(s)) {
                    left_out.push(spec.claim.clone());
                    continue;
                }
                spec.clone()
            }
            ClaimKind::Flat | ClaimKind::Below => {
                let (servers, absent): (Vec<String>, Vec<String>) =
                    spec.servers.iter().cloned().partition(|s| ran(s));
                left_out.extend(absent.iter().map(|s| format!("{} ({s})", spec.claim)));
                if servers.is_empty() {
                    continue;
                }
                ClaimSpec { servers, ..spec.clone() }
            }
            ClaimKind::NotMeasurable => spec.clone(),
        };
        match spec.kind {
            ClaimKind::Ratio => out.push(ratio(results, spec)),
            ClaimKind::Flat => flat(results, spec, &mut out),
            ClaimKind::Below => below(results, spec, &mut out),
            ClaimKind::NotMeasurable => out.push(Verdict {
                claim: spec.claim.clone(),
                published: spec.published.clone(),
                measured: "–".into(),
                verdict: VerdictKind::NotMeasurable,
                why: spec
                    .reason
                    .clone()
                    .unwrap_or_default()
                    .replace("{cores}", &results.machine.cores.to_string()),
            }),
        }
    }
    (out, left_out)
}

fn sweep_name<'a>(results: &'a ExperimentResults, spec: &ClaimSpec) -> &'a str {
    &results.experiment.sweep_named(spec.sweep.as_deref()).name
}

/// `server`, or the best server of its kind at the point for `best sluice` / `best peer`.
fn resolve(
    results: &ExperimentResults,
    name: &str,
    sweep: &str,
    label: &str,
    metric: &str,
) -> Option<String> {
    let peer = match name {
        "best sluice" => false,
        "best peer" => true,
        _ => return Some(name.to_string()),
    };
    let mut servers: Vec<&str> = Vec::new();
    for r in results.rows_of(sweep).filter(|r| r.peer == peer && r.point.x_label() == label) {
        if !servers.contains(&r.server.as_str()) {
            servers.push(&r.server);
        }
    }
    let better = higher_is_better(metric);
    servers
        .into_iter()
        .filter_map(|s| Some((s, results.spread(s, sweep, label, metric)?.median)))
        .reduce(|a, b| if (b.1 > a.1) == better && b.1 != a.1 { b } else { a })
        .map(|(s, _)| s.to_string())
}

/// Why `server` has no figure at `label`: its rows' reason, or that it did not run there.
fn missing(results: &ExperimentResults, server: &str, sweep: &str, label: &str) -> String {
    if results.rows_of(sweep).next().is_none() {
        return format!("the sweep `{sweep}` was not run in this run (`--sweeps`)");
    }
    let reason = results
        .rows_of(sweep)
        .filter(|r| r.server == server && r.point.x_label() == label)
        .find_map(|r| match &r.outcome {
            RowOutcome::Skipped { reason } | RowOutcome::Failed { reason } => {
                Some(format!("{} {}", r.status(), reason))
            }
            _ => None,
        });
    match reason {
        Some(r) => format!("{server} at {label}: {r}"),
        None => format!("{server} has no row at {label} of `{sweep}` in this run"),
    }
}

fn num(v: f64) -> String {
    if v.abs() >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn range(s: &Spread) -> String {
    if s.n > 1 {
        format!("{} ({}–{}, {} rounds)", num(s.median), num(s.min), num(s.max), s.n)
    } else {
        num(s.median)
    }
}

fn not_measurable(spec: &ClaimSpec, why: String) -> Verdict {
    Verdict {
        claim: spec.claim.clone(),
        published: spec.published.clone(),
        measured: "–".into(),
        verdict: VerdictKind::NotMeasurable,
        why,
    }
}

fn ratio(results: &ExperimentResults, spec: &ClaimSpec) -> Verdict {
    let sweep = sweep_name(results, spec);
    let metric = spec.metric.as_deref().unwrap_or("req_per_s");
    let (Some(a), Some(b)) = (spec.a.as_deref(), spec.b.as_deref()) else {
        return not_measurable(spec, "the claim names no servers".into());
    };
    let points: Vec<String> = match &spec.at {
        Some(at) => vec![at.clone()],
        None => results.point_labels(sweep),
    };
    // Sums of medians, minima and maxima over the points (one point: that point's).
    let (mut sa, mut sb) = ((0.0, 0.0, 0.0, 0usize), (0.0, 0.0, 0.0, 0usize));
    let mut names = (String::new(), String::new());
    let mut budgeted = (0usize, 0usize);
    for label in &points {
        let name_a = resolve(results, a, sweep, label, metric);
        let name_b = resolve(results, b, sweep, label, metric);
        let (Some(name_a), Some(name_b)) = (name_a, name_b) else {
            return not_measurable(spec, format!("no measured {a} or {b} at {label}"));
        };
        let Some(x) = results.spread(&name_a, sweep, label, metric) else {
            return not_measurable(spec, missing(results, &name_a, sweep, label));
        };
        let Some(y) = results.spread(&name_b, sweep, label, metric) else {
            return not_measurable(spec, missing(results, &name_b, sweep, label));
        };
        for r in results.rows_of(sweep).filter(|r| r.point.x_label() == *label) {
            if let Some(b) = r.budget.as_ref().filter(|_| r.server == name_a || r.server == name_b) {
                budgeted = (budgeted.0 + 1, budgeted.1 + usize::from(!b.server_bound()));
            }
        }
        sa = (sa.0 + x.median, sa.1 + x.min, sa.2 + x.max, x.n);
        sb = (sb.0 + y.median, sb.1 + y.min, sb.2 + y.max, y.n);
        names = (name_a, name_b);
    }
    if points.is_empty() || sb.0 <= 0.0 || sb.1 <= 0.0 {
        return not_measurable(spec, format!("no rows of `{sweep}` in this run"));
    }
    let x = Spread { median: sa.0, min: sa.1, max: sa.2, n: sa.3 };
    let y = Spread { median: sb.0, min: sb.1, max: sb.2, n: sb.3 };
    let r = x.median / y.median;
    let (lo, hi) = (x.min / y.max, x.max / y.min);
    let n = points.len() as f64;
    let avg = |s: &Spread| Spread { median: s.median / n, min: s.min / n, max: s.max / n, n: s.n };
    let where_ =
        spec.at.as_ref().map_or_else(|| "averaged over every point".to_string(), |at| format!("at {at}"));
    let measured = format!(
        "{r:.2}× ({lo:.2}–{hi:.2}×): {} {} against {} {} {}, {where_}",
        names.0,
        range(&avg(&x)),
        names.1,
        range(&avg(&y)),
        metric_heading(metric),
    );
    let tie = x.overlaps(&y);
    let (holds, threshold) = match (spec.at_least, spec.at_most) {
        (Some(t), _) => (r >= t, format!("reproduced when ≥ {t}×")),
        (None, Some(t)) => (r <= t, format!("reproduced when ≤ {t}×")),
        (None, None) => (r > 1.0, "reproduced when > 1×".to_string()),
    };
    let (verdict, why) = match (holds, tie) {
        (true, false) => (VerdictKind::Reproduced, format!("{threshold} with the rounds' ranges apart")),
        (_, true) => (VerdictKind::NotReproduced, format!("a tie: the rounds' ranges overlap ({threshold})")),
        (false, false) => (VerdictKind::NotReproduced, threshold),
    };
    let why = if budgeted.1 > 0 && metric != "syscalls_per_request" {
        format!(
            "{why}; caution: in {} of these {} rows the server used under 90% of its CPU budget, so the load generator or the machine, not the server, set their pace",
            budgeted.1, budgeted.0
        )
    } else {
        why
    };
    Verdict { claim: spec.claim.clone(), published: spec.published.clone(), measured, verdict, why }
}

fn flat(results: &ExperimentResults, spec: &ClaimSpec, out: &mut Vec<Verdict>) {
    let sweep = sweep_name(results, spec);
    let metric = spec.metric.as_deref().unwrap_or("p95_ms");
    let all = results.point_labels(sweep);
    let from = spec.from.clone().or_else(|| all.first().cloned()).unwrap_or_default();
    let to = spec.to.clone().or_else(|| all.last().cloned()).unwrap_or_default();
    let limit = spec.at_most.unwrap_or(1.25);
    for server in &spec.servers {
        let claim = format!("{} ({server}, {sweep})", spec.claim);
        let (Some(a), Some(b)) =
            (results.spread(server, sweep, &from, metric), results.spread(server, sweep, &to, metric))
        else {
            let which = if results.spread(server, sweep, &from, metric).is_none() { &from } else { &to };
            out.push(Verdict { claim, ..not_measurable(spec, missing(results, server, sweep, which)) });
            continue;
        };
        let change = if a.median > 0.0 { b.median / a.median } else { f64::INFINITY };
        let measured = format!(
            "{} {} at {from} → {} at {to} ({:+.0}%)",
            metric_heading(metric),
            range(&a),
            range(&b),
            (change - 1.0) * 100.0
        );
        let (verdict, why) = if change <= limit {
            (VerdictKind::Reproduced, format!("flat: at most {limit}× the first point"))
        } else if a.overlaps(&b) {
            (VerdictKind::Reproduced, "flat within the rounds' ranges".to_string())
        } else {
            (VerdictKind::NotReproduced, format!("grew more than {limit}×"))
        };
        out.push(Verdict { claim, published: spec.published.clone(), measured, verdict, why });
    }
}

fn below(results: &ExperimentResults, spec: &ClaimSpec, out: &mut Vec<Verdict>) {
    let sweep = sweep_name(results, spec);
    let metric = spec.metric.as_deref().unwrap_or("p95_ms");
    let at = spec.at.clone().unwrap_or_default();
    let bound = spec.at_most.unwrap_or(f64::INFINITY);
    // A `below` claim may also have a floor (`at_least`): E6's "at least 30× the sequential rate".
    let floor = spec.at_least.unwrap_or(f64::NEG_INFINITY);
    for name in &spec.servers {
        let server = resolve(results, name, sweep, &at, metric).unwrap_or_else(|| name.clone());
        let claim = format!("{} ({server}, {sweep})", spec.claim);
        let Some(s) = results.spread(&server, sweep, &at, metric) else {
            out.push(Verdict { claim, ..not_measurable(spec, missing(results, &server, sweep, &at)) });
            continue;
        };
        let measured = format!("{} {} at {at}", metric_heading(metric), range(&s));
        let (verdict, why) = if s.median > bound {
            (VerdictKind::NotReproduced, format!("above {}", num(bound)))
        } else if s.median < floor {
            (VerdictKind::NotReproduced, format!("below {}", num(floor)))
        } else if floor.is_finite() && bound.is_finite() {
            (VerdictKind::Reproduced, format!("between {} and {}", num(floor), num(bound)))
        } else if floor.is_finite() {
            (VerdictKind::Reproduced, format!("at least {}", num(floor)))
        } else {
            (VerdictKind::Reproduced, format!("at most {}", num(bound)))
        };
        out.push(Verdict { claim, published: spec.published.clone(), measured, verdict, why });
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::experiment::Experiment;
    use crate::results::{Figures, Measurement, Row};

    /// A load report to hang figures on: one request to a port nothing listens on.
    pub(crate) fn some_report() -> sluice_load::Report {
        let target = sluice_load::TargetSpec::parse("http://127.0.0.1:1/").unwrap();
        let config = sluice_load::LoadConfig::closed(vec![target], 1, None, Some(1));
        sluice_load::run(&config, &mut sluice_load::NoObserver).unwrap()
    }

    pub(crate) fn row(report: &sluice_load::Report, server: &str, vus: usize, req_per_s: f64) -> Row {
        let e = Experiment::find("E3").unwrap();
        let point = e.points(false, 2).into_iter().find(|p| p.budget && p.vus == Some(vus)).unwrap();
        let mut figures = Figures::derive(report, None, 1.0, None);
        figures.req_per_s = req_per_s;
        figures.syscalls_per_request = Some(if server.contains("uring") { 0.5 } else { 2.0 });
        Row {
            server: server.into(),
            peer: server.starts_with("nginx"),
            point,
            server_command: String::new(),
            load_command: String::new(),
            server_cpus: vec![1],
            load_cpus: vec![0],
            round: Some(1),
            budget: None,
            outcome: RowOutcome::Measured {
                measurement: Measurement::Http { figures: Box::new(figures), load: Box::new(report.clone()) },
            },
        }
    }

    fn results(rows: Vec<Row>, claims: Vec<ClaimSpec>) -> ExperimentResults {
        let mut experiment = Experiment::find("E3").unwrap();
        experiment.claim = claims;
        ExperimentResults::for_tests(experiment, rows)
    }

    fn spec(text: &str) -> ClaimSpec {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn ratios_use_medians_and_call_overlapping_rounds_a_tie() {
        let report = some_report();
        let mut rows = Vec::new();
        for (u, e, n) in [(50.0, 40.0, 39.0), (54.0, 44.0, 41.0), (57.0, 50.0, 42.0)] {
            rows.push(row(&report, "sluice uring", 1000, u * 1000.0));
            rows.push(row(&report, "sluice epoll", 1000, e * 1000.0));
            rows.push(row(&report, "nginx return 200", 1000, n * 1000.0));
        }
        let claims = vec![
            spec("claim = \"uring beats epoll\"\npublished = \"1.70×\"\nkind = \"ratio\"\nsweep = \"capacity\"\na = \"sluice uring\"\nb = \"sluice epoll\"\nat = \"1000\"\nat_least = 1.2"),
            spec("claim = \"sluice beats nginx\"\npublished = \"-\"\nkind = \"ratio\"\nsweep = \"capacity\"\na = \"best sluice\"\nb = \"best peer\"\nat = \"1000\"\nat_least = 1.2"),
            spec("claim = \"fewer calls\"\npublished = \"-\"\nkind = \"ratio\"\nsweep = \"capacity\"\nmetric = \"syscalls_per_request\"\na = \"sluice uring\"\nb = \"sluice epoll\"\nat_most = 0.5"),
            spec("claim = \"16 threads\"\npublished = \"2M\"\nkind = \"not_measurable\"\nreason = \"{cores} cores here\""),
            spec("claim = \"at 4000\"\npublished = \"-\"\nkind = \"ratio\"\nsweep = \"capacity\"\na = \"sluice uring\"\nb = \"sluice epoll\"\nat = \"4000\""),
        ];
        let v = evaluate(&results(rows, claims));
        assert_eq!(v.len(), 5);
        // Medians 54k against 44k: 1.23×, but the ranges 50–57k and 40–50k touch: a tie.
        assert_eq!(v[0].verdict, VerdictKind::NotReproduced, "{v:?}");
        assert!(v[0].measured.starts_with("1.23× (1.00–1.43×)") && v[0].why.contains("tie"), "{:?}", v[0]);
        // The best sluice (uring, 54k) against the only peer (41k), ranges apart: 1.32×.
        assert_eq!(v[1].verdict, VerdictKind::Reproduced, "{:?}", v[1]);
        assert!(v[1].measured.contains("sluice uring") && v[1].measured.contains("nginx return 200"));
        assert_eq!(v[2].verdict, VerdictKind::Reproduced, "0.25× the calls: {:?}", v[2]);
        assert_eq!(v[3].verdict, VerdictKind::NotMeasurable);
        assert!(v[3].why.ends_with("cores here") && !v[3].why.contains('{'));
        assert_eq!(v[4].verdict, VerdictKind::NotMeasurable, "no rows at 4000");
        assert!(v[4].why.contains("no row at 4000"), "{:?}", v[4]);
        let flat = spec("claim = \"f\"\npublished = \"-\"\nkind = \"flat\"\nsweep = \"threads\"\nservers = [\"sluice uring\"]");
        let (v, left_out) = in_run(&results(vec![row(&report, "sluice uring", 10, 1.0)], vec![flat]));
        assert!(v.is_empty(), "a sweep not run has no verdict: {v:?}");
        assert_eq!(left_out, ["f"], "but one line says it was not in this run");
    }

    #[test]
    fn flat_and_below_are_checked_per_server() {
        let report = some_report();
        let mut rows = vec![];
        for (vus, rps) in [(10, 100.0), (1000, 120.0)] {
            rows.push(row(&report, "sluice uring", vus, rps));
            rows.push(row(&report, "sluice epoll", vus, rps * (vus as f64 / 10.0)));
            // Skipped rows: tokio ran in this run, without figures.
            let mut skipped = row(&report, "sluice tokio", vus, 0.0);
            skipped.outcome = RowOutcome::Skipped { reason: "not installed".into() };
            rows.push(skipped);
        }
        let claims = vec![
            spec("claim = \"flat\"\npublished = \"-\"\nkind = \"flat\"\nsweep = \"capacity\"\nmetric = \"req_per_s\"\nservers = [\"sluice uring\", \"sluice epoll\", \"sluice tokio\"]"),
            spec("claim = \"below\"\npublished = \"-\"\nkind = \"below\"\nsweep = \"capacity\"\nmetric = \"req_per_s\"\nat = \"10\"\nat_most = 150\nservers = [\"best sluice\"]"),
        ];
        let v = evaluate(&results(rows, claims));
        assert_eq!(
            v.iter().map(|v| v.verdict).collect::<Vec<_>>(),
            [
                VerdictKind::Reproduced,
                VerdictKind::NotReproduced,
                VerdictKind::NotMeasurable,
                VerdictKind::Reproduced
            ],
            "{v:?}"
        );
        assert!(v[0].measured.contains("+20%"), "{:?}", v[0]);
        assert!(v[3].claim.contains("sluice uring"), "the best at 10 is named: {:?}", v[3]);
        assert!(v[2].why.contains("not installed"), "a skipped server says why: {:?}", v[2]);
    }

    #[test]
    fn claims_of_servers_a_run_left_out_are_one_line_not_rows() {
        let report = some_report();
        // `--servers uring`: epoll and nginx have no row at all.
        let rows = vec![row(&report, "sluice uring", 1000, 50_000.0)];
        let claims = vec![
            spec("claim = \"uring beats epoll\"\npublished = \"-\"\nkind = \"ratio\"\nsweep = \"capacity\"\na = \"sluice uring\"\nb = \"sluice epoll\"\nat = \"1000\""),
            spec("claim = \"sluice beats nginx\"\npublished = \"-\"\nkind = \"ratio\"\nsweep = \"capacity\"\na = \"best sluice\"\nb = \"best peer\"\nat = \"1000\""),
            spec("claim = \"below\"\npublished = \"-\"\nkind = \"below\"\nsweep = \"capacity\"\nat = \"1000\"\nat_most = 1e9\nmetric = \"req_per_s\"\nservers = [\"sluice uring\", \"sluice epoll\"]"),
            spec("claim = \"16 cores\"\npublished = \"-\"\nkind = \"not_measurable\"\nreason = \"{cores} here\""),
        ];
        let (v, left_out) = in_run(&results(rows, claims));
        let checked: Vec<&str> = v.iter().map(|v| v.claim.as_str()).collect();
        assert_eq!(checked, ["below (sluice uring, capacity)", "16 cores"], "{v:?}");
        assert_eq!(left_out, ["uring beats epoll", "sluice beats nginx", "below (sluice epoll)"]);
    }
}
