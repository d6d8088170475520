//! `sluice lab run NAME --quick` for every experiment, end to end: real sluice servers on every
//! engine, nginx, iperf3 and GStreamer's RTSP server as peers (installed by scripts/test), the load
//! generator pinned apart from the server, capacity rows under a CPU cgroup budget. Asserts the
//! shape and self-consistency of `results.json`, the CSVs and the report, and that the budget was
//! applied (the quota the kernel holds, the server in the group, throttling counted); never how
//! fast anything was.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use common::browser::{Browser, ONE_BROWSER_AT_A_TIME};
use serde_json::Value;

/// The lab pins processes to cores and measures their CPU time: one experiment at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The lab's program, which `cargo test --workspace` builds beside `sluice` (and which runs the
/// `sluice` beside it).
fn sluice_lab() -> PathBuf {
    let lab = Path::new(env!("CARGO_BIN_EXE_sluice")).with_file_name("sluice-lab");
    assert!(
        lab.is_file(),
        "{} is missing: build it with `cargo build -p sluice-lab` (`cargo test --workspace` does)",
        lab.display()
    );
    lab
}

/// The longest a quick experiment may run.
const LAB_RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(360);

fn lab(args: &[&str], out: &Path, env: &[(&str, &str)]) -> Value {
    let mut cmd = Command::new(sluice_lab());
    cmd.arg("run").args(args).arg("--quick").arg("--no-progress").arg("--out").arg(out);
    cmd.envs(env.iter().copied());
    // A quick experiment takes under two minutes here; one that never ends is asked to stop (the
    // lab stops what it started on SIGTERM) and fails with where it had got to, not with the suite's time.
    let (status, stdout, stderr) = common::run_bounded(&mut cmd, LAB_RUN_LIMIT);
    assert!(
        status.success(),
        "sluice lab {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    let name = sluice_name(args[0]);
    let text = std::fs::read_to_string(out.join(&name).join("results.json")).expect("results.json");
    serde_json::from_str(&text).expect("results.json parses")
}

/// `sluice lab report` over `results` into `dir/again.html` and `dir/again.md`; returns the HTML path.
fn lab_report(dir: &Path, results: &[std::path::PathBuf]) -> std::path::PathBuf {
    let html = dir.join("again.html");
    let status = Command::new(sluice_lab())
        .args(["report", "--out"])
        .arg(&html)
        .arg("--markdown")
        .arg(dir.join("again.md"))
        .args(results)
        .status()
        .unwrap();
    assert!(status.success(), "sluice lab report {results:?}");
    html
}

fn sluice_name(arg: &str) -> String {
    match arg {
        "E1" => "zero-copy",
        "E2" => "concurrency",
        "E3" => "io-models",
        "E4" => "execution-models",
        "E5" => "rtsp-fanout",
        "E6" => "upload-gzip",
        "E7" => "edge-cache",
        other => other,
    }
    .to_string()
}

fn rows(results: &Value) -> &Vec<Value> {
    results["rows"].as_array().expect("rows")
}

fn num(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} missing in {v}"))
}

/// Every declared server × point is there, measured (peers may be skipped only with a reason),
/// and each measured row's figures are non-zero and add up.
fn check_rows(results: &Value, expected_rows: usize) {
    let rows = rows(results);
    assert_eq!(rows.len(), expected_rows, "rows: {:#}", results["rows"]);
    let servers = results["experiment"]["server"].as_array().unwrap();
    for s in servers {
        let name = s["name"].as_str().unwrap();
        assert!(rows.iter().any(|r| r["server"] == name), "no row for {name}");
    }
    for r in rows {
        let status = r["status"].as_str().unwrap();
        let label = format!("{} {}", r["server"], r["point"]);
        match status {
            "measured" => {}
            "reference" => {
                assert!(num(r, "mb_per_s") > 0.0, "{label}");
                continue;
            }
            "skipped" => {
                let reason = r["reason"].as_str().unwrap();
                assert!(!reason.is_empty(), "{label}");
                let budget_missing = r["point"]["budget"] == true && !budget_applies();
                assert!(
                    r["peer"].as_bool().unwrap() || budget_missing,
                    "only a peer, or a capacity row where no CPU budget applies, may be skipped: {label}: {reason}"
                );
                if budget_missing {
                    assert!(reason.contains("no CPU budget could be applied"), "{label}: {reason}");
                }
                continue;
            }
            other => panic!("{label} {other}: {}", r["reason"]),
        }
        if r["point"]["budget"] == true {
            check_budget(r, &label);
        }
        // Upload rows (E6) have figures of their own, checked by their test.
        if !r["upload"].is_null() {
            continue;
        }
        let f = &r["figures"];
        let (requests, ok, failed, dropped) =
            (num(f, "requests"), num(f, "ok"), num(f, "failed"), num(f, "dropped"));
        assert!(requests > 0.0 && ok > 0.0, "{label}: {f}");
        assert_eq!(ok + failed + dropped, requests, "{label}: outcomes add up to requests started");
        assert!((num(f, "success_pct") - ok / requests * 100.0).abs() < 1e-6, "{label}");
        assert!(num(f, "req_per_s") > 0.0 && num(f, "mb_per_s") > 0.0, "{label}");
        assert!(num(f, "p50_ms") <= num(f, "p95_ms") && num(f, "p95_ms") <= num(f, "p99_ms"), "{label}");
        assert!(num(f, "p99_ms") <= num(f, "max_ms") && num(f, "max_ms") > 0.0, "{label}");
        assert!(num(f, "cpu_s") > 0.0 && num(f, "cpu_s_per_gb") > 0.0, "{label}: server CPU is measured");
        if let Some(chunk) = r["point"]["chunk"].as_f64() {
            let body = num(f, "body_bytes_expected");
            assert_eq!(body, ok * chunk, "{label}");
            let bytes = num(f, "bytes_received");
            // Every OK response carried its whole body, plus a head of a few hundred bytes.
            assert!(bytes >= body && bytes <= (ok + failed) * (chunk + 1024.0), "{label}: {bytes} vs {body}");
        }
        if r["peer"] == false {
            let calls = num(f, "syscalls_per_request");
            assert!(calls > 0.0, "{label}: sluice reports its system calls");
            let by_kind: f64 =
                f["syscalls_by_kind"].as_object().unwrap().values().map(|v| v.as_f64().unwrap()).sum();
            assert!((by_kind - calls).abs() < 1e-9, "{label}");
        }
        let load = &r["load"];
        assert_eq!(
            num(load, "requests_per_s"),
            num(f, "req_per_s"),
            "{label}: figures come from the load report"
        );
    }
}

/// Whether this machine lets the lab create a CPU cgroup with a quota (root with a writable
/// cgroup v1 `cpu` or v2 `cpu.max`): asked the way the lab asks.
fn budget_applies() -> bool {
    sluice_lab::budget::ServerCgroup::create(5000, 10_000).is_ok()
}

/// A capacity row ran under the default budget (`--server-cpu 0.25`, 10 ms period): the kernel
/// held the quota, the server was in the group, and it used no more CPU than the quota allows
/// (plus a tick of `/proc`'s accounting).
fn check_budget(r: &Value, label: &str) {
    let b = &r["budget"];
    assert!(b.is_object(), "{label}: a measured capacity row records its budget");
    let workers = num(&r["point"], "workers");
    assert_eq!(num(b, "period_us"), 10_000.0, "{label}: {b}");
    assert_eq!(num(b, "quota_us"), 2500.0 * workers, "{label}: the quota read back from the kernel: {b}");
    assert_eq!(num(b, "cpus"), 0.25 * workers, "{label}");
    assert_eq!(b["server_in_group"], true, "{label}: the server ran inside the group: {b}");
    let mechanism = b["mechanism"].as_str().unwrap();
    assert!(mechanism.contains("cpu.cfs_quota_us") || mechanism.contains("cpu.max"), "{label}: {mechanism}");
    let throttling = &b["throttling"];
    assert!(num(throttling, "nr_periods") > 0.0, "{label}: the group ran: {b}");
    assert!(num(throttling, "nr_throttled") <= num(throttling, "nr_periods"), "{label}: {b}");
    let cpu_pct = num(b, "server_cpu_pct");
    assert!(cpu_pct <= 25.0 * workers + 10.0, "{label}: the server stayed within its quota: {cpu_pct}%");
}

/// Every server has every round of every capacity point, rounds alternate, and the claims
/// table is in `results.json` and the report.
fn check_capacity(results: &Value, html: &str, rounds: u64) {
    let capacity: Vec<&Value> = rows(results).iter().filter(|r| r["point"]["sweep"] == "capacity").collect();
    assert!(!capacity.is_empty(), "capacity rows");
    let servers = results["experiment"]["server"].as_array().unwrap();
    for s in servers {
        let mine: Vec<u64> = capacity
            .iter()
            .filter(|r| r["server"] == s["name"])
            .map(|r| r["round"].as_u64().unwrap_or(1))
            .collect();
        for round in 1..=rounds {
            assert!(mine.contains(&round), "{} round {round}: {mine:?}", s["name"]);
        }
    }
    if rounds > 1 {
        // Alternating: each round runs every server before the next round starts.
        let first_two: Vec<&str> =
            capacity.iter().take(2 * servers.len()).map(|r| r["server"].as_str().unwrap()).collect();
        let (one, two) = first_two.split_at(servers.len());
        let mut reversed = one.to_vec();
        reversed.reverse();
        assert_eq!(two, reversed.as_slice(), "the second round runs the servers in reverse order");
    }
    let claims = results["claims"].as_array().expect("claims in results.json");
    let declared = results["experiment"]["claim"].as_array().unwrap();
    assert!(!declared.is_empty() && claims.len() >= declared.len(), "every declared claim has a verdict");
    for c in claims {
        let verdict = c["verdict"].as_str().unwrap();
        assert!(["reproduced", "not_reproduced", "not_measurable"].contains(&verdict), "{c}");
        assert!(!c["why"].as_str().unwrap().is_empty(), "a verdict says why: {c}");
        let claim = c["claim"].as_str().unwrap().replace('&', "&amp;").replace('\'', "&#39;");
        assert!(
            html.contains(&claim) || html.contains(c["claim"].as_str().unwrap()),
            "claim in the report: {claim}"
        );
    }
    assert!(html.contains("The source report's claims, measured here"));
    if budget_applies() {
        assert!(html.contains("each server ran in a CPU cgroup of its own"), "the method is printed");
        let throttled: f64 = capacity
            .iter()
            .filter(|r| r["status"] == "measured")
            .map(|r| num(&r["budget"]["throttling"], "nr_throttled"))
            .sum();
        assert!(throttled > 0.0, "unpaced, the servers reach their quota and the kernel throttles them");
    }
}

/// Each declared table and chart is in the report.
/// The page fetches nothing: no script, stylesheet, image or frame from the network, no redirect.
fn self_contained(html: &str) {
    for external in
        ["src=\"http", "href=\"http", "src='http", "href='http", "http-equiv", "@import", "url(http"]
    {
        assert!(!html.contains(external), "the report fetches nothing ({external})");
    }
    assert!(html.contains("uPlot") && html.contains("window.SluiceBoard"), "the chart library is inlined");
}

/// Each board of a report page: its spec (`{"charts": [...]}`) and its held samples.
fn boards(html: &str) -> Vec<(Value, Vec<Value>)> {
    html.split("new SluiceBoard(root, ")
        .skip(1)
        .map(|rest| {
            let (spec, rest) = rest.split_once(");\nboard.replace(").unwrap();
            let (samples, _) = rest.split_once("); })();</script>").unwrap();
            (serde_json::from_str(spec).unwrap(), serde_json::from_str(samples).unwrap())
        })
        .collect()
}

/// Every declared chart of a sweep with measured rows is a board's chart; each of its lines has
/// numbers in the board's samples, and each server with the chart's metric measured is a line.
fn check_chart_data(html: &str, results: &Value) {
    let boards = boards(html);
    let e = &results["experiment"];
    let default_sweep = e["sweep"][0]["name"].as_str().unwrap();
    for c in e["chart"].as_array().unwrap() {
        let title = c["title"].as_str().unwrap();
        let sweep = c["sweep"].as_str().unwrap_or(default_sweep);
        let metric = c["metric"].as_str().unwrap();
        let measured: Vec<&Value> = rows(results)
            .iter()
            .filter(|r| r["point"]["sweep"] == sweep && r["status"] == "measured")
            .collect();
        if measured.is_empty() {
            continue;
        }
        let (chart, samples) = boards
            .iter()
            .find_map(|(spec, samples)| {
                spec["charts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|ch| ch["title"] == title)
                    .map(|ch| (ch, samples))
            })
            .unwrap_or_else(|| panic!("chart {title} is in the page"));
        assert!(chart["x"]["label"].is_string(), "chart {title} has its x axis named");
        let series = chart["series"].as_array().unwrap();
        assert!(!series.is_empty(), "{title} has lines");
        for line in series {
            let (group, index) = line["key"].as_str().unwrap().split_once('.').unwrap();
            assert!(
                samples.iter().any(|s| s[group][index].is_number()),
                "{title}: {line}'s points are in the page"
            );
        }
        for row in measured.iter().filter(|r| r["figures"][metric].is_number()) {
            assert!(
                series.iter().any(|l| l["label"] == row["server"]),
                "{title}: {} is a line",
                row["server"]
            );
        }
    }
}

/// Headless Chromium opens the report and every chart of every board draws points.
fn check_charts_draw(path: &Path) {
    let html = std::fs::read_to_string(path).unwrap();
    let charts: usize = boards(&html).iter().map(|(spec, _)| spec["charts"].as_array().unwrap().len()).sum();
    assert!(charts > 0, "the report has charts");
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut browser = Browser::start();
    let drawn = format!(
        "!!window.sluiceBoards && window.sluiceBoards.flatMap(b => b.charts).length === {charts} \
         && window.sluiceBoards.every(b => b.charts.every(c => c.points > 0))"
    );
    browser.open_until(
        &format!("file://{}", path.display()),
        &drawn,
        "every chart of the report draws points",
    );
    let plots = browser.eval("document.querySelectorAll('.board .uplot canvas').length").as_u64().unwrap();
    assert_eq!(plots as usize, charts, "one plot per chart");
}

fn check_report(dir: &Path, results: &Value) -> String {
    let html = std::fs::read_to_string(dir.join("report.html")).expect("report.html");
    assert!(html.starts_with("<!DOCTYPE html>") && html.trim_end().ends_with("</html>"));
    self_contained(&html);
    speaks_of_the_product(&html);
    let e = &results["experiment"];
    for t in e["table"].as_array().unwrap() {
        let caption = t["caption"].as_str().unwrap();
        assert!(html.contains(&format!("<caption>{caption}</caption>")), "table {caption}");
    }
    check_chart_data(&html, results);
    for p in e["published"].as_array().unwrap() {
        assert!(html.contains(p["caption"].as_str().unwrap().split(" (").next().unwrap()));
    }
    assert!(html.contains(e["caveat"].as_str().unwrap()), "the caveat is printed");
    let findings = results["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "a run says what it shows");
    let md = std::fs::read_to_string(dir.join("results.md")).expect("results.md");
    for t in e["table"].as_array().unwrap() {
        assert!(md.contains(t["caption"].as_str().unwrap()), "results.md has every table");
    }
    let csv = std::fs::read_to_string(dir.join("rows.csv")).expect("rows.csv");
    assert_eq!(csv.lines().count(), rows(results).len() + 1, "one CSV line per row");
    html
}

#[test]
fn e1_zero_copy_every_engine_and_strategy_against_nginx_with_the_loopback_limit() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["E1"], out.path(), &[]);
    // 11 sluice configurations + 2 nginx, 2 chunk sizes with --quick (64 KB and 1 MB) paced and
    // once more at the budget (one round with --quick), + the iperf3 reference row.
    check_rows(&results, 13 * 2 * 2 + 1);
    let reference = rows(&results).iter().find(|r| r["status"] == "reference").expect("iperf3 ran");
    assert!(reference["server_command"].as_str().unwrap().contains("iperf3"));
    for r in rows(&results).iter().filter(|r| r["server"].as_str().unwrap().starts_with("nginx")) {
        assert_eq!(r["status"], "measured", "nginx is installed by scripts/test: {}", r["reason"]);
    }
    let html = check_report(&out.path().join("zero-copy"), &results);
    assert!(html.contains("Loopback reference measured by iperf3"));
    check_capacity(&results, &html, 1);
}

#[test]
fn e2_concurrency_sweeps_users() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["concurrency"], out.path(), &[]);
    // 4 servers at 2 user counts, paced, then at the budget in 2 rounds.
    check_rows(&results, 4 * 2 + 4 * 2 * 2);
    let users: Vec<f64> = rows(&results).iter().map(|r| num(&r["point"], "vus")).collect();
    assert!(users.contains(&100.0) && users.contains(&500.0));
    let html = check_report(&out.path().join("concurrency"), &results);
    check_capacity(&results, &html, 2);
    // Measured rows read back from results.json into a new report.
    let again = lab_report(out.path(), &[out.path().join("concurrency")]);
    assert!(std::fs::read_to_string(again)
        .unwrap()
        .contains("p95, p99 and requests per second by virtual users"));
}

#[test]
fn e3_io_models_sweeps_connections_and_threads_with_syscalls_per_request() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["E3"], out.path(), &[]);
    let cores = results["machine"]["cores"].as_u64().unwrap() as usize;
    // 5 servers: 2 connection counts and 1..=cores workers; then at the budget the 2 connection
    // counts in 2 rounds and 1..=cores workers in 1.
    check_rows(&results, 5 * (2 + cores) + 5 * 2 * 2 + 5 * cores);
    let threads: Vec<u64> = rows(&results)
        .iter()
        .filter(|r| r["point"]["sweep"] == "threads" && r["server"] == "sluice epoll")
        .map(|r| r["point"]["workers"].as_u64().unwrap())
        .collect();
    assert_eq!(threads, (1..=cores as u64).collect::<Vec<_>>(), "the thread sweep runs 1 up to the cores");
    let uring = rows(&results)
        .iter()
        .find(|r| r["server"] == "sluice uring" && r["status"] == "measured")
        .expect("a uring row");
    let kinds = uring["figures"]["syscalls_by_kind"].as_object().unwrap();
    assert!(kinds.contains_key("io_uring_enter"), "uring's calls are io_uring_enter: {kinds:?}");
    assert!(!kinds.contains_key("read") && !kinds.contains_key("write"), "{kinds:?}");
    if cores > 1 {
        let scaled =
            rows(&results).iter().filter(|r| r["point"]["sweep"] == "threads" && r["point"]["workers"] != 1);
        for r in scaled.filter(|r| r["status"] == "measured") {
            assert!(num(&r["figures"], "scaling_pct") > 0.0, "{r}");
        }
    }
    let html = check_report(&out.path().join("io-models"), &results);
    check_capacity(&results, &html, 2);
    check_charts_draw(&out.path().join("io-models/report.html"));
    // The claims table is generated from results.json: a report rebuilt from it has the same.
    let again = std::fs::read_to_string(lab_report(out.path(), &[out.path().join("io-models")])).unwrap();
    for c in results["claims"].as_array().unwrap() {
        let verdict = match c["verdict"].as_str().unwrap() {
            "reproduced" => "<b>reproduced</b>",
            "not_reproduced" => "<b>not reproduced</b>",
            _ => "<b>not measurable here</b>",
        };
        assert!(again.contains(verdict), "{c}");
    }
    let md = std::fs::read_to_string(out.path().join("again.md")).unwrap();
    assert!(md.contains("| claim | published | measured here | verdict | why |"), "claims in the Markdown");
}

#[test]
fn capacity_rows_without_a_cpu_cgroup_are_skipped_with_the_reason() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    // A cgroup file system with no CPU controller in it.
    let results = lab(
        &["io-models", "--sweeps", "capacity", "--servers", "sluice epoll"],
        out.path(),
        &[("SLUICE_LAB_CGROUP_ROOT", root.path().to_str().unwrap())],
    );
    let skipped = rows(&results);
    assert_eq!(skipped.len(), 2 * 2, "2 connection counts, 2 rounds");
    for r in skipped {
        assert_eq!(r["status"], "skipped", "{r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(
            reason.contains("no CPU budget could be applied") && reason.contains("no CPU controller"),
            "{r}"
        );
    }
    let html = std::fs::read_to_string(out.path().join("io-models/report.html")).unwrap();
    assert!(html.contains("were not measured: no CPU budget could be applied"), "the report says why");
    let claims = results["claims"].as_array().unwrap();
    assert!(claims.iter().all(|c| c["verdict"] == "not_measurable"), "{claims:?}");
    // Without a budget asked for, the same rows say so.
    let results = lab(
        &["io-models", "--sweeps", "capacity", "--servers", "sluice epoll", "--server-cpu", "0"],
        out.path(),
        &[],
    );
    for r in rows(&results) {
        assert!(r["reason"].as_str().unwrap().contains("--server-cpu 0"), "{r}");
    }
}

#[test]
fn e4_execution_models_run_the_three_profiles_cold_with_per_second_series() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["execution-models"], out.path(), &[]);
    check_rows(&results, 5 * 3);
    for r in rows(&results) {
        let load = &r["load"];
        assert_eq!(load["settings"]["model"], "open");
        let series = load["series"].as_array().unwrap();
        assert!(series.len() >= 3, "a per-second series: {}", series.len());
        let ok: f64 = series.iter().map(|s| num(s, "ok")).sum();
        assert_eq!(ok, num(&r["figures"], "ok"), "the series adds up to the totals");
        assert!(r["load_command"].as_str().unwrap().contains("--scenario"), "no warm-up: one open run");
    }
    let latency = rows(&results).iter().find(|r| r["point"]["profile"] == "latency").unwrap();
    let targets = latency["load"]["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4, "50, 100, 200 ms and mixed");
    let html = check_report(&out.path().join("execution-models"), &results);
    assert!(html.contains("Per second: OK and failed responses, active users"));
    let per_second = boards(&html).into_iter().filter(|(spec, _)| spec["charts"][0]["x"]["key"] == "second");
    assert_eq!(
        per_second.map(|(_, samples)| samples.len() >= 3).filter(|long| *long).count(),
        5 * 3,
        "one per row"
    );
    check_charts_draw(&out.path().join("execution-models/report.html"));
    // The seed's success rates, checked per execution model and profile.
    let claims = results["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 5 * 3, "{claims:?}");
    assert!(
        claims.iter().all(|c| c["verdict"] != "not_measurable"),
        "every model ran every profile: {claims:?}"
    );
    assert!(html.contains("The source report's claims, measured here (quick mode: smoke-check figures"));
    assert!(html.contains("Latency per endpoint"));
    let series_csv = std::fs::read_to_string(out.path().join("execution-models/series.csv")).unwrap();
    assert!(series_csv.lines().count() > 15);
}

#[test]
fn a_missing_peer_is_a_skipped_row_with_its_reason() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    // No nginx on this PATH; only the nginx rows are run.
    let results = lab(&["io-models", "--servers", "nginx"], out.path(), &[("PATH", "/nonexistent")]);
    let rows = rows(&results);
    assert!(!rows.is_empty());
    for r in rows {
        assert_eq!(r["status"], "skipped", "{r}");
        assert!(
            r["reason"].as_str().unwrap().contains("nginx not found: apt-get install nginx-light"),
            "{r}"
        );
    }
    let html = check_report(&out.path().join("io-models"), &results);
    assert!(html.contains("not measured, skipped (nginx not found: apt-get install nginx-light"));
    // A report can be rendered again from results.json, alone or with other runs.
    let again =
        lab_report(out.path(), &[out.path().join("io-models"), out.path().join("io-models/results.json")]);
    let html = std::fs::read_to_string(again).unwrap();
    assert_eq!(html.matches("<h2 id=\"E3\">").count(), 2, "both runs are in the report");
    let md = std::fs::read_to_string(out.path().join("again.md")).unwrap();
    assert_eq!(md.matches("### E3 `io-models`").count(), 2, "and in the Markdown");
}

#[test]
fn e5_rtsp_fanout_counts_every_clients_samples_over_udp_and_tcp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["E5"], out.path(), &[]);
    let e = &results["experiment"];
    let rows = rows(&results);
    let expected = num(&results["content"], "video_samples");
    assert!(expected >= 60.0, "the quick file has its seconds × fps samples: {}", results["content"]);
    let servers: Vec<&str> =
        e["server"].as_array().unwrap().iter().map(|s| s["name"].as_str().unwrap()).collect();
    let sweeps = e["sweep"].as_array().unwrap();
    let mut declared = 0;
    for sweep in sweeps {
        let name = sweep["name"].as_str().unwrap();
        for clients in sweep["quick_clients"].as_array().unwrap() {
            for server in &servers {
                declared += 1;
                let here: Vec<&Value> = rows
                    .iter()
                    .filter(|r| {
                        r["server"] == *server
                            && r["point"]["sweep"] == name
                            && r["point"]["clients"] == *clients
                    })
                    .collect();
                assert_eq!(here.len(), 1, "{server} at {name} {clients}: {here:?}");
                assert_eq!(here[0]["point"]["transport"], sweep["transport"]);
            }
        }
    }
    assert_eq!(rows.len(), declared, "--quick does not go past the declared points");
    for r in rows {
        let label = format!("{} {}", r["server"], r["point"]);
        match r["status"].as_str().unwrap() {
            "measured" => {}
            "skipped" => {
                assert!(r["peer"].as_bool().unwrap(), "only a peer may be skipped: {label}");
                assert!(!r["reason"].as_str().unwrap().is_empty(), "{label}");
                continue;
            }
            other => panic!("{label} {other}: {}", r["reason"]),
        }
        let f = &r["rtsp"];
        let clients = num(&r["point"], "clients");
        assert_eq!(num(f, "clients"), clients, "{label}");
        assert_eq!(f["transport"], r["point"]["transport"], "{label}");
        let (perfect, playing, failed) =
            (num(f, "perfect_clients"), num(f, "playing_clients"), num(f, "failed_clients"));
        assert!(perfect <= playing && playing <= clients && failed <= clients, "{label}: {f}");
        assert_eq!(num(f, "expected_samples"), expected, "{label}: perfect means every sample of the file");
        let (mean, stdev) = (num(f, "samples_mean"), num(f, "samples_stdev"));
        assert!(num(f, "samples_min") <= mean && mean <= num(f, "samples_max"), "{label}: {f}");
        assert!(num(f, "samples_max") <= expected && mean <= expected && stdev >= 0.0, "{label}: {f}");
        assert!((num(f, "perfect_pct") - perfect / clients * 100.0).abs() < 1e-9, "{label}");
        assert!(num(f, "stalled_clients") <= playing, "{label}: {f}");
        // A few light viewers on loopback: every server sends every sample to every client. Only
        // on a machine too busy to send on time does sluice drop frames (its `degrade` policy),
        // and then the samples its viewers missed are exactly the drops it reports.
        let dropped = f["server"]["frames_dropped"].as_f64().unwrap_or(0.0);
        if dropped == 0.0 {
            assert_eq!(perfect, clients, "{label}: {f}");
            assert_eq!(num(f, "stalled_clients"), 0.0, "{label}: {f}");
        } else {
            let missed = (clients * expected - mean * clients).round();
            assert_eq!(
                missed, dropped,
                "{label}: missed samples are the server's drops (a busy machine): {f}"
            );
            assert_eq!(
                num(f, "lost_packets"),
                0.0,
                "{label}: dropped frames are never sent, so never lost: {f}"
            );
        }
        assert!(num(f, "mbit_per_s") > 0.0 && num(f, "cpu_s") > 0.0, "{label}: {f}");
        assert!(num(f, "generator_cpu_pct") >= 0.0 && num(f, "generator_cpus") >= 1.0, "{label}");
        assert!(num(f, "connect_spread_s") < 5.0, "{label}: concurrent by the seed's definition");
        let load = &r["load"];
        assert_eq!(load["kind"], "rtsp");
        assert_eq!(load["viewers"].as_array().unwrap().len() as f64, clients, "{label}");
        assert_eq!(
            num(&load["summary"], "perfect_clients"),
            perfect,
            "{label}: figures come from the viewers' report"
        );
        let command = r["load_command"].as_str().unwrap();
        assert!(command.starts_with("sluice load rtsp rtsp://127.0.0.1:"), "{label}: {command}");
        assert!(command.contains(&format!("--expect-samples {expected}")), "{label}: {command}");
        assert!(!r["server_command"].as_str().unwrap().contains(":8554"), "{label}: a port of its own");
        if r["peer"] == false {
            assert!(r["server_command"].as_str().unwrap().contains("--rtsp-listen 127.0.0.1:"), "{label}");
            let counters = &f["server"];
            assert!(num(counters, "packets_sent") > 0.0, "{label}: sluice counts what it sent: {counters}");
            assert!(
                num(counters, "frames_dropped") >= 0.0,
                "{label}: the server's dropped frames: {counters}"
            );
        }
    }
    for r in rows.iter().filter(|r| r["server"].as_str().unwrap().starts_with("GStreamer")) {
        assert_eq!(r["status"], "measured", "scripts/test installs GStreamer: {}", r["reason"]);
    }
    let html = check_report(&out.path().join("rtsp-fanout"), &results);
    assert!(html.contains("video samples per client, counted by ffprobe"));
    let findings = results["findings"].as_array().unwrap();
    for sweep in sweeps {
        let line = format!("{}, highest client count with perfect sending:", sweep["name"].as_str().unwrap());
        assert!(findings.iter().any(|f| f.as_str().unwrap().starts_with(&line)), "{line} in {findings:?}");
    }
    // A second run reuses the generated file.
    let media = out.path().join("rtsp-fanout/media");
    let file = std::fs::read_dir(&media)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with(".mp4"))
        .unwrap();
    let made = file.metadata().unwrap().modified().unwrap();
    let again =
        lab(&["E5", "--servers", "GStreamer"], out.path(), &[("SLUICE_LAB_PYTHON", "/nonexistent/python3")]);
    assert_eq!(file.metadata().unwrap().modified().unwrap(), made, "the file is generated once");
    // Without GStreamer's Python bindings its rows are skipped, with the reason.
    let again_rows = again["rows"].as_array().unwrap();
    assert_eq!(again_rows.len(), declared / servers.len(), "one GStreamer row per declared point");
    for r in again_rows {
        assert_eq!(r["status"], "skipped", "{r}");
        assert!(r["reason"].as_str().unwrap().contains("GStreamer's Python bindings are missing"), "{r}");
    }
}

/// Pids of live processes whose command line mentions `needle` (here: a test's own temporary
/// directory, so nothing else can match).
fn processes_mentioning(needle: &str) -> Vec<i32> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = state.rsplit_once(") ").is_some_and(|(_, rest)| rest.starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).contains(needle) {
            pids.push(pid);
        }
    }
    pids
}

/// This lab's CPU groups still on the machine: directories named `sluice-lab-PID-N` under the
/// cgroup file system (v2 and every v1 hierarchy, nested where the lab's own group is).
fn cgroups_of(pid: u32) -> Vec<std::path::PathBuf> {
    let prefix = format!("sluice-lab-{pid}-");
    let mut found = Vec::new();
    let mut dirs = vec![(std::path::PathBuf::from("/sys/fs/cgroup"), 0)];
    while let Some((dir, depth)) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if entry.file_name().to_string_lossy().starts_with(&prefix) {
                found.push(entry.path());
            } else if depth < 6 {
                dirs.push((entry.path(), depth + 1));
            }
        }
    }
    found
}

/// Ctrl-C half-way through a run: the lab stops its servers, writes `results.json`, the tables
/// and `report.html` for the rows it finished, marked partial, removes its CPU groups and exits
/// with 128 + SIGINT. Progress (one line per row, stderr not being a terminal) says when the
/// first row is on record.
#[test]
fn an_interrupted_lab_writes_the_rows_it_finished_and_leaves_nothing_behind() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    // Capacity rows run in CPU groups; where none can be made, the connection sweep's rows.
    let budget = budget_applies();
    let sweep = if budget { "capacity" } else { "connections" };
    // Through `sluice lab`, which hands the process over to sluice-lab: the signal reaches the lab.
    sluice_lab();
    let mut lab = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["lab", "run", "io-models", "--quick", "--servers", "sluice epoll", "--sweeps", sweep, "--out"])
        .arg(out.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, progress) = std::sync::mpsc::channel::<String>();
    let stderr = lab.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        let mut all = String::new();
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines.send(line.clone());
            all.push_str(&line);
            all.push('\n');
        }
        all
    });
    // Generous bounds: a busy machine (CI's 2 cores) slows every row.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    // The first row is on record when its progress line comes.
    loop {
        let line = progress.recv_timeout(std::time::Duration::from_secs(120)).expect("a progress line");
        if line.starts_with("E3 io-models: row 1/") {
            break;
        }
    }
    // Then the second row's server is up (its command line names the media directory), in its
    // CPU group where there is one.
    let media = format!("{}/io-models/media", out.path().display());
    while processes_mentioning(&media).is_empty() || (budget && cgroups_of(lab.id()).is_empty()) {
        assert!(std::time::Instant::now() < deadline, "no second row started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: signalling the child this test started.
    unsafe { libc::kill(lab.id() as i32, libc::SIGINT) };
    // It stops at once, or within the minute its own fallback gives a row that does not end.
    let stopped = std::time::Instant::now() + std::time::Duration::from_secs(120);
    let status = loop {
        if let Some(status) = lab.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > stopped {
            let _ = lab.kill();
            let said: Vec<String> = progress.try_iter().collect();
            panic!("the lab did not stop within 2 minutes of SIGINT; it said:\n{}", said.join("\n"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let stderr = reader.join().unwrap();
    assert_eq!(status.code(), Some(128 + libc::SIGINT), "exits as stopped by SIGINT: {stderr}");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let left = processes_mentioning(out.path().to_str().unwrap());
    for pid in &left {
        // SAFETY: cleaning up what the lab should have stopped; each pid was just seen with this
        // test's own directory in its command line.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "servers outlived the lab: {left:?}");
    assert_eq!(cgroups_of(lab.id()), Vec::<std::path::PathBuf>::new(), "the lab's CPU groups are gone");
    let dir = out.path().join("io-models");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let partial = &results["partial"];
    assert_eq!(partial["stopped_by"], "SIGINT", "marked partial: {partial}");
    let finished = rows(&results).len();
    let planned = partial["rows_planned"].as_u64().unwrap() as usize;
    assert!(
        finished >= 1 && finished < planned,
        "the rows finished before the signal: {finished} of {planned}"
    );
    for r in rows(&results) {
        assert_eq!(r["server"], "sluice epoll", "{r}");
        assert!(["measured", "skipped"].contains(&r["status"].as_str().unwrap()), "no row cut short: {r}");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("(partial run)</title>"), "the page's title says partial");
    assert!(
        html.contains(&format!("Partial run: stopped by SIGINT after {finished} of {planned} rows")),
        "the report says so where it starts"
    );
    let csv = std::fs::read_to_string(dir.join("rows.csv")).unwrap();
    assert_eq!(csv.lines().count(), finished + 1, "the tables hold the finished rows");
    assert!(std::fs::read_to_string(dir.join("results.md")).unwrap().contains("Partial run"));
}

/// `sluice lab list` and the reports speak of sluice: no issue numbers, no paths outside the
/// repository (a rendered report is checked by `check_report`).
#[test]
fn lab_list_names_sources_in_the_repository() {
    sluice_lab();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["lab", "list"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("docs/seeds/"), "{text}");
    speaks_of_the_product(&text);
}

/// A reader that stops early (`sluice lab list | head -1`) ends the list quietly: its stdout here
/// is a pipe whose reading end is already closed, so the first line written fails.
#[test]
fn lab_list_to_a_closed_pipe_exits_quietly() {
    sluice_lab();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["lab", "list"])
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// No issue numbers and no paths outside the repository.
fn speaks_of_the_product(text: &str) {
    for outside in ["issue ", "Issue ", "../"] {
        assert!(
            !text.contains(outside),
            "{outside:?} in: {}",
            &text[text.find(outside).unwrap().saturating_sub(80)..]
        );
    }
}

#[test]
fn e6_upload_gzip_into_seaweedfs_behind_toxiproxy_plain_against_gzip_and_by_concurrency() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["E6"], out.path(), &[]);
    // 4 uploaders × (4 payloads in each of 2 sequential sweeps + concurrency 1 and 4 with --quick).
    check_rows(&results, 4 * (4 + 4 + 2));
    for r in rows(&results) {
        assert_eq!(r["status"], "measured", "SeaweedFS and toxiproxy are installed by scripts/test: {r}");
        let u = &r["upload"];
        let concurrency = r["point"]["vus"].as_u64();
        // --quick: 3 objects a row, at least 2 per worker on a concurrency point.
        let expected = concurrency.map_or(3, |c| (2 * c).max(3));
        assert_eq!(u["objects_ok"], expected, "every object landed: {r}");
        assert!(u["failures"].as_object().unwrap().is_empty(), "{r}");
        let sweep = r["point"]["sweep"].as_str().unwrap();
        if sweep.contains("55 ms") {
            // The latency toxic delays each way: no upload is acknowledged sooner than its round trip.
            assert!(num(&u["latency_ms"], "p50") >= 110.0, "the modelled round trip was in the path: {r}");
        }
        let server = r["server"].as_str().unwrap();
        let payload = r["point"]["payload"].as_str().unwrap();
        let (raw, stored) = (num(u, "bytes_raw"), num(u, "bytes_stored"));
        assert!(stored <= raw, "never stored bigger than plain: {r}");
        if server == "S3 plain" {
            assert_eq!(stored, raw, "{r}");
        } else if payload == "email:50KB" {
            assert!(stored <= raw / 10.0, "the email is stored gzipped at ≤ 10%: {r}");
        } else if payload == "sms:80" {
            assert_eq!(stored, raw, "the SMS is stored plain: {r}");
        }
        if server.starts_with("sluice") {
            let opened = num(u, "connections_opened");
            assert!(opened >= 1.0 && opened <= concurrency.unwrap_or(1) as f64, "connections reused: {r}");
            assert!(r["server_command"].as_str().unwrap().contains("--store s3://"), "{r}");
        }
        assert!(r["load_command"].as_str().unwrap().starts_with("sluice upload "), "{r}");
    }
    // The sequential multiple is there for every concurrency row, 1 at concurrency 1.
    for r in rows(&results).iter().filter(|r| r["point"]["vus"] == 1) {
        assert_eq!(num(&r["upload"], "sequential_multiple"), 1.0, "{r}");
    }
    // Every declared claim has its verdicts (the concurrency-64 goals are not measurable in quick mode).
    let claims = results["claims"].as_array().unwrap();
    assert_eq!(claims.len(), 2 + 1 + 3 + 3 + 2 + 1, "{claims:#?}");
    assert!(claims.iter().any(|c| c["verdict"] == "not_measurable"), "no concurrency 64 in quick mode");
    let dir = out.path().join("upload-gzip");
    let html = check_report(&dir, &results);
    assert!(html.contains("114.110"), "the seed's table beside ours");
    let csv = std::fs::read_to_string(dir.join("rows.csv")).unwrap();
    assert!(csv.starts_with("server,sweep,payload,concurrency,status,objects_ok"), "{csv}");
}

#[test]
fn e7_edge_cache_cold_then_warm_through_sluice_edges_haproxy_and_nginx_over_seaweedfs() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = tempfile::tempdir().unwrap();
    let results = lab(&["E7"], out.path(), &[]);
    let servers =
        ["sluice local root", "sluice S3 edge", "2 sluice S3 edges + HAProxy", "nginx proxy_cache + slice"];
    let sweeps = ["cold, every file once", "warm, whole files", "warm, 1 MiB ranges"];
    let rows = rows(&results);
    assert_eq!(rows.len(), servers.len() * sweeps.len(), "{:#}", results["rows"]);
    let row = |server: &str, sweep: &str| {
        rows.iter()
            .find(|r| r["server"] == server && r["point"]["sweep"] == sweep)
            .unwrap_or_else(|| panic!("no row {server} @ {sweep}"))
    };
    for server in servers {
        for sweep in sweeps {
            let r = row(server, sweep);
            let label = format!("{server} @ {sweep}");
            // scripts/test installs SeaweedFS, toxiproxy, HAProxy and nginx-light (Debian 12's
            // is built with the slice module); an nginx without it is the one row skipped.
            if server.starts_with("nginx") && r["status"] == "skipped" {
                assert!(r["reason"].as_str().unwrap().contains("slice module"), "{label}: {r}");
                continue;
            }
            assert_eq!(r["status"], "measured", "{label}: {r}");
            let f = &r["figures"];
            assert!(num(f, "ok") > 0.0 && num(f, "failed") == 0.0, "{label}: every response whole: {f}");
            assert!(
                num(f, "req_per_s") > 0.0 && num(f, "mb_per_s") > 0.0 && num(f, "p95_ms") > 0.0,
                "{label}"
            );
            let origin = &f["origin"];
            assert!(origin.is_object(), "{label}: SeaweedFS's counters were read: {f}");
            let origin_requests = num(origin, "requests");
            if server == "sluice local root" {
                assert_eq!(origin_requests, 0.0, "{label}: a local root never asks the store");
                continue;
            }
            if sweep.starts_with("cold") {
                // --quick: 4 files of 1 MiB, each read once: every one a miss at the origin.
                assert_eq!(num(f, "ok"), 4.0, "{label}");
                assert!(origin_requests >= 4.0, "{label}: a cold cache fetches every file: {origin}");
            }
            if server.starts_with("sluice") || server.starts_with("2 sluice") {
                let (hits, misses) = (num(origin, "hits"), num(origin, "misses"));
                assert!(hits + misses > 0.0, "{label}: sluice counts its slices: {origin}");
                if sweep.starts_with("cold") {
                    assert!(misses >= 4.0 && num(origin, "bytes") >= 4.0 * 1048576.0, "{label}: {origin}");
                }
            }
            if server == "sluice S3 edge" && sweep.starts_with("warm") {
                let per_1000 = origin_requests * 1000.0 / num(f, "ok");
                assert!(
                    per_1000 <= 1.0,
                    "{label}: a warm edge leaves the origin alone: {per_1000} per 1,000"
                );
                assert_eq!(num(origin, "misses"), 0.0, "{label}: {origin}");
            }
            let command = r["server_command"].as_str().unwrap();
            match server {
                "sluice S3 edge" => assert!(
                    command.contains("--store s3://") && command.contains("--cache-size"),
                    "{command}"
                ),
                "2 sluice S3 edges + HAProxy" => {
                    assert!(
                        command.contains("haproxy") && command.matches("--store s3://").count() == 2,
                        "{command}"
                    )
                }
                _ => assert!(command.contains("nginx"), "{command}"),
            }
        }
    }
    assert_eq!(results["claims"].as_array().unwrap().len(), 6, "{:#}", results["claims"]);
    let dir = out.path().join("edge-cache");
    check_report(&dir, &results);
    // Every process the lab started (SeaweedFS, toxiproxy, HAProxy, nginx, the edges) is gone.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let needle = out.path().to_str().unwrap().to_string();
    let left = processes_mentioning(&needle);
    for pid in &left {
        // SAFETY: cleaning up what the lab should have stopped; each pid was just seen with this
        // test's own directory in its command line.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    assert!(left.is_empty(), "processes outlived the lab: {left:?}");
}

/// A report rendered from saved results (a quick E4 run of two servers, committed beside this
/// test) fetches nothing, holds each chart's points, and draws every chart in headless Chromium:
/// the chart by profile (named x ticks) and each row's per-second responses and users.
#[test]
fn a_report_from_saved_results_draws_every_chart_in_a_browser() {
    let out = tempfile::tempdir().unwrap();
    let saved = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/lab-fixture/execution-models");
    let results: Value =
        serde_json::from_str(&std::fs::read_to_string(saved.join("results.json")).unwrap()).unwrap();
    let path = lab_report(out.path(), &[saved]);
    let html = std::fs::read_to_string(&path).unwrap();
    self_contained(&html);
    check_chart_data(&html, &results);
    let per_second =
        boards(&html).iter().filter(|(spec, _)| spec["charts"][0]["x"]["key"] == "second").count();
    assert_eq!(per_second, rows(&results).len(), "each open-model row has its per-second board");
    check_charts_draw(&path);
}
