//! `sluice load http` end to end against `sluice serve`: the closed and open models through the
//! command line, the JSON and CSV files, and the exit codes of thresholds and bad input. Only
//! 127.0.0.1 traffic; every run is bounded by a request count or a short schedule.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use sluice_load::Report;

/// A `sluice serve` child on a free loopback port, killed on drop.
struct Serve {
    child: Child,
    addr: SocketAddr,
}

impl Serve {
    fn start() -> Serve {
        let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--workers",
                "1",
                "--access-log",
                "false",
                "--no-rtsp",
                "--no-admin",
                "--bench",
            ])
            .args(["--log-level", "info"])
            .env_remove("SLUICE_CONFIG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start sluice serve");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // Keeps draining so the server never blocks on a full pipe.
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(i) = line.find("listening on http://") {
                    let rest = &line[i + "listening on http://".len()..];
                    let end =
                        rest.find(|c: char| c.is_whitespace() || c == '"' || c == '/').unwrap_or(rest.len());
                    if let Ok(addr) = rest[..end].parse::<SocketAddr>() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let addr = match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("sluice serve did not report its address within 10 s");
            }
        };
        Serve { child, addr }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("sluice-load-cli-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `sluice load http ARGS` with a 60 s bound.
fn load(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "http", "--no-progress", "--threads", "1"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start sluice load");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sluice load ran for more than 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collect output")
}

#[test]
fn closed_model_writes_json_and_csv_and_thresholds_set_the_exit_code() {
    let serve = Serve::start();
    let dir = TempDir::new("closed");
    let json = dir.0.join("r.json");
    let csv = dir.0.join("r.csv");
    let url = serve.url("/bench/hello");
    let out = load(&[
        "--vus",
        "4",
        "--requests",
        "400",
        "--json",
        json.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
        "--threshold",
        "success>99.9%",
        "--threshold",
        "p99<5s",
        &url,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("400 ok") && stdout.contains("p99.9="), "{stdout}");
    let report: Report = Report::from_json(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!((report.requests.scheduled, report.requests.ok), (400, 400));
    assert_eq!(report.connections_opened, 4);
    assert!(report.thresholds_passed());
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.starts_with("second,arrivals,started,ok,failed,"), "{csv}");

    let out = load(&["--vus", "1", "-n", "20", "--threshold", "p99<1us", "--quiet", &url]);
    assert_eq!(out.status.code(), Some(1), "a failed threshold is a failed run: exit 1");
    assert!(String::from_utf8_lossy(&out.stderr).contains("p99<1us"));
}

#[test]
fn failed_requests_are_counted_apart_and_the_summary_says_the_times_leave_them_out() {
    let serve = Serve::start();
    // Every request gets a 404: failed (bad_status), counted by kind, not timed.
    let out = load(&["--vus", "1", "-n", "10", &serve.url("/missing")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("(successes only: 10 failed request(s) left out, counted under errors)"),
        "{stdout}"
    );
    assert!(stdout.contains("bad_status=10"), "{stdout}");
    let out = load(&["--vus", "1", "-n", "10", &serve.url("/bench/hello")]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("left out"), "no failure, no note: {stdout}");
}

#[test]
fn open_model_from_flags_against_sluice_serve() {
    let serve = Serve::start();
    let dir = TempDir::new("open");
    let json = dir.0.join("open.json");
    let out = load(&[
        "--stage",
        "ramp-users:10:500ms",
        "--stage",
        "rate:100:1s",
        "--max-connections",
        "8",
        "--json",
        json.to_str().unwrap(),
        "--quiet",
        &serve.url("/bench/hello"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Report = Report::from_json(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report.settings.model, "open");
    assert_eq!(report.requests.scheduled, 110);
    assert_eq!(report.requests.ok, 110, "{:?}", report.errors);
    assert!(report.connections_opened <= 8);
}

#[test]
fn bad_input_is_refused_with_a_message_and_exit_2() {
    let cases: &[&[&str]] = &[
        &[],
        &["--vus", "2", "http://127.0.0.1:9/"],
        &["-n", "1", "http://192.0.2.1/"],
        &["-n", "1", "--threshold", "p99<soon", "http://127.0.0.1:9/"],
        &["--vus", "1", "--rate", "10", "-d", "1s", "http://127.0.0.1:9/"],
        &["--stage", "warp:1", "http://127.0.0.1:9/"],
        &["-n", "1", "ftp://127.0.0.1/"],
    ];
    for args in cases {
        let out = load(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.trim().is_empty() && !stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(
            stderr.trim().lines().filter(|l| l.starts_with("sluice")).count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}

/// A closed port: every request fails, so the run fails (exit 1) with one line saying why, with
/// or without thresholds.
#[test]
fn a_run_where_nothing_succeeded_exits_1() {
    let port = sluice_harness::free_port().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    for extra in [&[][..], &["--threshold", "p99<10s"][..]] {
        let mut args = vec!["-n", "20", "--vus", "2", "--quiet"];
        args.extend_from_slice(extra);
        args.push(&url);
        let out = load(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        let lines: Vec<&str> = stderr.trim().lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        assert!(lines[0].contains("no request succeeded") && lines[0].contains("refused"), "{stderr}");
    }
}

#[test]
fn help_says_what_the_code_does() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["load", "http", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    // The exit status of a failed threshold (the run above exits 1) and both --timeout defaults.
    assert!(help.contains("a failed threshold exits with 1") && !help.contains("exits with 99"), "{help}");
    assert!(help.contains("[default: 60s; 10s for the --hls/--dash players"), "{help}");
    assert!(help.contains("bounds each request (default 10s)"), "{help}");
    let guide =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/guide/load-and-lab.md"))
            .unwrap();
    assert!(guide.contains("a failed one exits 1"), "the user guide says so too");
}
