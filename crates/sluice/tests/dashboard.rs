//! The admin listener's dashboard and the metrics behind it: headless Chromium charts an edge
//! under load from `/events` and every panel of deploy/grafana/sluice.json finds data in a real
//! Prometheus scraping the same edge; 50 dashboards get a sample a second while one that never
//! reads is dropped; and, on every engine, the response-duration histograms count the requests
//! made, `process_open_fds` follows held connections and promtool finds the text clean.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use common::browser::{Browser, ONE_BROWSER_AT_A_TIME};
use common::edge::put_object;
use common::rtsp::UdpViewer;
use common::*;
use serde_json::{json, Value};

rtsp_matrix!(
    histograms_count_the_requests_made_and_open_fds_follow_connections,
    streams_say_what_each_stream_is_and_who_watches_it
);

const LOCATION: &str = "dashboard/lib";
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const GRAFANA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/grafana/sluice.json");
const TOKEN: &str = "dashboard-token-0123456789";

/// Rounds of [`load`] at most: each is a handful of requests, so the loop is bounded in count
/// as well as by its stop flag.
const MAX_ROUNDS: usize = 2_000;

/// Traffic of every route kind until `stop`: the whole file, a range, the HLS master playlist,
/// a missing file and an upload, with a pause between rounds.
fn load(http: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<usize> {
    std::thread::spawn(move || {
        let mut rounds = 0;
        while !stop.load(Ordering::Relaxed) && rounds < MAX_ROUNDS {
            fetch_get(http, "/demo.mp4", &[]).expect_status(200, "file");
            fetch_get(http, "/demo.mp4", &[("Range", "bytes=100-2000")]).expect_status(206, "range");
            fetch_get(http, "/demo.mp4/master.m3u8", &[]).expect_status(200, "hls");
            fetch_get(http, "/missing.mp4", &[]).expect_status(404, "missing");
            let body = format!("round {rounds}\n");
            let put = format!(
                "PUT /notes/round.txt HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let status = fetch(http, put).status;
            assert!(matches!(status, 200 | 201 | 204), "upload answered {status}");
            rounds += 1;
            std::thread::sleep(Duration::from_millis(50));
        }
        rounds
    })
}

/// Prometheus (Debian's `prometheus`) scraping `target` every second, on free ports, a harness
/// process stopped (by its process group) on drop.
struct Prometheus {
    _process: sluice_harness::Process,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    fn start(target: SocketAddr) -> Prometheus {
        let binary = require_tool("prometheus", "prometheus");
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        // The shipped config with this test's target and a faster scrape.
        let shipped =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/prometheus.yml"))
                .unwrap()
                .replace("127.0.0.1:9090", &target.to_string())
                .replace("scrape_interval: 5s", "scrape_interval: 1s");
        std::fs::write(&config, shipped).unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let mut command = Command::new(binary);
        command
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .args(["--log.level=warn", "--storage.tsdb.retention.time=1h"]);
        let mut process =
            sluice_harness::Process::spawn("prometheus", command, &dir.path().join("prometheus.log"))
                .unwrap();
        process
            .wait_ready(IO_TIMEOUT, |_| {
                TcpStream::connect(addr).is_ok() && fetch_get(addr, "/-/ready", &[]).status == 200
            })
            .unwrap_or_else(|e| panic!("prometheus is ready: {e}"));
        Prometheus { _process: process, addr, _dir: dir }
    }

    /// An instant query's result vector.
    fn query(&self, promql: &str) -> Vec<Value> {
        let q: String = promql
            .bytes()
            .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
            .collect();
        let r = fetch_get(self.addr, &format!("/api/v1/query?query={q}"), &[]);
        r.expect_status(200, promql);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["status"], json!("success"), "{promql}: {v}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }
}

/// Every PromQL expression of the Grafana dashboard, with its variables as Grafana would fill
/// them for "all instances".
fn grafana_queries() -> Vec<(String, String)> {
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(GRAFANA).unwrap()).unwrap();
    assert_eq!(dashboard["__inputs"][0]["name"], json!("DS_PROMETHEUS"), "import-ready");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        assert_eq!(panel["datasource"]["uid"], json!("${DS_PROMETHEUS}"));
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "10s")
                .replace("$instance", ".*");
            queries.push((panel["title"].as_str().unwrap().to_string(), expr));
        }
    }
    assert!(queries.len() >= 15, "{queries:?}");
    queries
}

#[test]
fn an_edge_under_load_fills_the_dashboard_and_every_grafana_panel() {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    put_object(LOCATION, "demo.mp4", &std::fs::read(DEMO).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let extra = ["--upload-token-file", tokens.to_str().unwrap(), "--cache-revalidate", "1s"];
    let server = common::edge::start_edge(&[], LOCATION, &dir.path().join("cache"), &extra);
    let admin = server.admin_addr();
    let prometheus = Prometheus::start(admin);
    let stop = Arc::new(AtomicBool::new(false));
    let traffic = load(server.addr(), Arc::clone(&stop));
    let mut viewer = UdpViewer::setup(server.rtsp_addr(), "127.0.0.1".parse().unwrap(), "/demo.mp4")
        .unwrap_or_else(|r| panic!("SETUP: {r:?}"));
    viewer.play();
    // A session that ended, for the session-duration panel.
    let mut brief = UdpViewer::setup(server.rtsp_addr(), "127.0.0.1".parse().unwrap(), "/demo.mp4")
        .unwrap_or_else(|r| panic!("SETUP: {r:?}"));
    brief.play();
    brief.teardown().expect(200, "TEARDOWN");
    // A few samples in the history before the page opens.
    std::thread::sleep(Duration::from_secs(3));

    let mut browser = Browser::start();
    browser.open_until(&format!("http://{admin}/"), "!!window.sluiceBoard", "the dashboard's script runs");
    let opened = Instant::now();
    let state = "JSON.stringify(window.sluiceBoard.charts)";
    let drawn = poll_until(Duration::from_secs(5), || {
        let charts: Vec<Value> = serde_json::from_str(browser.eval(state).as_str().unwrap()).unwrap();
        charts.iter().all(|c| c["points"].as_u64().unwrap_or(0) > 0)
    });
    let charts = browser.eval(state);
    assert!(drawn, "every chart has points within 5 s of the page opening: {charts}");
    eprintln!("charts drawn {:?} after the page opened: {charts}", opened.elapsed());
    // Another second: the page follows the stream, not only the history.
    let count = "window.sluiceBoard.samples.length";
    let before = browser.eval(count).as_u64().unwrap();
    assert!(
        poll_until(Duration::from_secs(4), || browser.eval(count).as_u64().unwrap() > before),
        "a live sample arrives"
    );
    // The whole page in one picture (docs/dashboard.png is one of these).
    let size = json!({ "width": 1100, "height": 1800, "deviceScaleFactor": 1, "mobile": false });
    browser.call("Emulation.setDeviceMetricsOverride", size);
    let shot = browser.call("Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png"), png).unwrap();
    drop(browser);

    // Every Grafana panel's queries return data from Prometheus scraping the same edge.
    let queries = grafana_queries();
    let mut missing = Vec::new();
    let answered = poll_until(Duration::from_secs(20), || {
        missing = queries
            .iter()
            .filter(|(_, q)| {
                let result = prometheus.query(q);
                !result.iter().any(|r| {
                    r["value"][1].as_str().is_some_and(|v| v.parse::<f64>().is_ok_and(f64::is_finite))
                })
            })
            .cloned()
            .collect();
        missing.is_empty()
    });
    assert!(answered, "Grafana panels without data: {missing:#?}");
    stop.store(true, Ordering::Relaxed);
    let rounds = traffic.join().unwrap();
    assert!(rounds > 0);
}

/// Reads server-sent events from `admin` until `stop`: when each `data:` message arrived.
fn follow(admin: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<Instant>> {
    std::thread::spawn(move || {
        let mut s = TcpStream::connect(admin).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        s.write_all(&get("/events", &[])).unwrap();
        let mut r = BufReader::new(s);
        let (mut line, mut at) = (String::new(), Vec::new());
        while !stop.load(Ordering::Relaxed) {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) if line.starts_with("data: {") => at.push(Instant::now()),
                Ok(_) => {}
                Err(e)
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(e) => panic!("reading events: {e}"),
            }
        }
        at
    })
}

#[test]
fn fifty_dashboards_get_a_sample_a_second_and_one_that_never_reads_is_dropped() {
    let server = Server::start(&[], &[]);
    let admin = server.admin_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..50).map(|_| follow(admin, Arc::clone(&stop))).collect();
    // A dashboard that never reads, with the smallest receive window.
    let mut stuck = connect_small_rcvbuf(admin, 1);
    stuck.write_all(&get("/events", &[])).unwrap();
    let streams = || {
        let text = server.scrape();
        metric(&text, "sluice_dashboard_streams")
    };
    assert!(poll_until(IO_TIMEOUT, || streams() == 51), "51 streams open: {}", streams());
    let started = Instant::now();
    // Its socket fills at a sample a second; then the send deadline (5 s) drops it.
    assert!(poll_until(Duration::from_secs(60), || streams() == 50), "the stuck dashboard is dropped");
    let dropped_after = started.elapsed();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let window = started.elapsed();
    for (i, reader) in readers.into_iter().enumerate() {
        let at = reader.join().unwrap();
        let during: Vec<Instant> = at.into_iter().filter(|t| *t >= started).collect();
        // A sample a second: none skipped for long, none sent in bursts.
        let n = during.len() as u64;
        let secs = window.as_secs();
        assert!(n + 3 >= secs && n <= secs + 2, "dashboard {i} got {n} samples in {window:?}");
        let gap = during.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default();
        assert!(gap < Duration::from_millis(2500), "dashboard {i} waited {gap:?} for a sample");
    }
    // The server held at most its small socket buffer for the stuck one: it is gone now, and
    // its memory with it.
    eprintln!("the stuck dashboard was dropped after {dropped_after:?}");
    drop(stuck);
}

fn value(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map_or(0, |v| v.parse::<f64>().unwrap() as u64)
}

fn histograms_count_the_requests_made_and_open_fds_follow_connections(engine: &[&str]) {
    let server = Server::start(engine, &[]);
    let http = server.addr();
    let count = |text: &str, route: &str, class: &str| {
        value(
            text,
            &format!("sluice_http_response_duration_seconds_count{{route=\"{route}\",class=\"{class}\"}}"),
        )
    };
    let before = server.scrape();
    for _ in 0..7 {
        fetch_get(http, "/sluice-demo.mp4", &[]).expect_status(200, "file");
    }
    for _ in 0..5 {
        fetch_get(http, "/sluice-demo.mp4", &[("Range", "bytes=0-99")]).expect_status(206, "range");
    }
    for _ in 0..3 {
        fetch_get(http, "/sluice-demo.mp4/master.m3u8", &[]).expect_status(200, "hls");
    }
    for _ in 0..2 {
        fetch_get(http, "/nothing-here.mp4", &[]).expect_status(404, "missing");
    }
    // DASH's manifest is DASH's; the CMAF segments HLS and DASH both play are segments.
    for _ in 0..2 {
        fetch_get(http, "/sluice-demo.mp4/manifest.mpd", &[]).expect_status(200, "dash");
    }
    for name in ["video-init.mp4", "video-seg-0.m4s", "audio-init.mp4", "audio-seg-0.m4s"] {
        fetch_get(http, &format!("/sluice-demo.mp4/{name}"), &[]).expect_status(200, name);
    }
    let expected = [
        ("file", "2xx", 7),
        ("range", "2xx", 5),
        ("hls", "2xx", 3),
        ("dash", "2xx", 2),
        ("segment", "2xx", 4),
        ("file", "4xx", 2),
    ];
    let settled = poll_until(IO_TIMEOUT, || {
        let text = server.scrape();
        expected.iter().all(|(r, c, n)| count(&text, r, c) - count(&before, r, c) == *n)
    });
    let text = server.scrape();
    assert!(settled, "histogram counts {expected:?} in:\n{text}");
    // Buckets rise to the count; the file bytes of the 2xx class are all there.
    let prefix = "sluice_http_response_duration_seconds_bucket{route=\"file\",class=\"2xx\",le=\"";
    let buckets: Vec<u64> = text
        .lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(|l| l.rsplit_once(' ').unwrap().1.parse().unwrap())
        .collect();
    assert_eq!(buckets.len(), 17, "16 bounds and +Inf:\n{text}");
    assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
    assert_eq!(*buckets.last().unwrap(), count(&text, "file", "2xx"));
    let demo_len = std::fs::metadata(DEMO).unwrap().len();
    let bytes = value(&text, "sluice_http_response_bytes_total{class=\"2xx\"}")
        - value(&before, "sluice_http_response_bytes_total{class=\"2xx\"}");
    assert!(bytes >= 7 * demo_len + 5 * 100, "{bytes} body bytes of 2xx responses");
    let version = format!("sluice_build_info{{version=\"{}\",commit=\"", env!("CARGO_PKG_VERSION"));
    assert!(text.contains(&version), "{text}");
    // Prometheus's own linter reads the scrape.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("metrics.txt");
    std::fs::write(&path, &text).unwrap();
    let out = Command::new(require_tool("promtool", "prometheus"))
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&path).unwrap())
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "promtool check metrics: {said}");
    // Open descriptors follow connections held open.
    let fds = |text: &str| value(text, "process_open_fds");
    let idle = fds(&server.scrape());
    let held: Vec<Conn> = (0..20)
        .map(|_| {
            let mut c = Conn::open(http);
            c.send(get("/sluice-demo.mp4", &[("Range", "bytes=0-0")]));
            c.response().expect_status(206, "held");
            c
        })
        .collect();
    let open = fds(&server.scrape());
    assert!(open >= idle + 20, "process_open_fds {idle} idle, {open} with 20 connections held");
    drop(held);
    assert!(
        poll_until(IO_TIMEOUT, || fds(&server.scrape()) < open),
        "descriptors closed with the connections"
    );
}

/// The samples a report holds, from its `board.replace([...])`.
fn report_samples(html: &str) -> Vec<Value> {
    let start = html.find("board.replace(").expect("a report holds its samples") + "board.replace(".len();
    let end = start + html[start..].find("); })();</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
}

#[test]
fn sluice_load_serves_its_run_live_and_writes_a_report_of_it() {
    let server = Server::start(&[], &["--no-rtsp"]);
    let dir = tempfile::tempdir().unwrap();
    let (report, json_report) = (dir.path().join("report.html"), dir.path().join("run.json"));
    let dashboard: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let url = format!("http://{}/sluice-demo.mp4", server.addr());
    let mut load = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "http", &url, "--rate", "20", "--duration", "4s", "--no-progress", "--quiet"])
        .args(["--threshold", "success>99%", "--threshold", "p99<1us"])
        .arg("--dashboard")
        .arg(dashboard.to_string())
        .arg("--report")
        .arg(&report)
        .arg("--json")
        .arg(&json_report)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // During the run its page answers and its events come a second apart.
    assert!(poll_until(IO_TIMEOUT, || TcpStream::connect(dashboard).is_ok()), "the live page listens");
    let page = fetch_get(dashboard, "/", &[]);
    page.expect_status(200, "the live page");
    assert!(page.body_text().contains("SluiceBoard"), "the chart page");
    let mut s = TcpStream::connect(dashboard).unwrap();
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(&get("/events", &[])).unwrap();
    let mut r = BufReader::new(s);
    let (mut line, mut live) = (String::new(), Vec::new());
    while live.len() < 2 {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "the events stream ended early");
        if let Some(data) = line.strip_prefix("data: {") {
            live.push(serde_json::from_str::<Value>(&format!("{{{data}")).unwrap());
        }
    }
    assert!(live[0]["rps"]["ok"].as_u64().is_some() && live[1]["second"] != live[0]["second"], "{live:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = load.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the load run ends");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(1), "a failed threshold fails the run: {status}");
    // The report's charts hold the run's per-second series, as the JSON report has it; a last
    // second the run only partly ran is a rate (or, under half a second, left out), not a drop.
    let html = std::fs::read_to_string(&report).unwrap();
    let samples = report_samples(&html);
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&json_report).unwrap()).unwrap();
    let series = run["series"].as_array().unwrap();
    let duration = run["duration_s"].as_f64().unwrap();
    let ran = |row: &Value| (duration - row["second"].as_f64().unwrap()).min(1.0);
    let charted: Vec<&Value> = series.iter().filter(|row| ran(row) >= 0.5).collect();
    assert_eq!(samples.len(), charted.len(), "a sample per second of the run: {series:?}");
    for (sample, row) in samples.iter().zip(&charted) {
        let per_second = row["ok"].as_f64().unwrap() / ran(row);
        assert!((sample["rps"]["ok"].as_f64().unwrap() - per_second).abs() < 1e-6, "{sample} against {row}");
        assert_eq!(sample["active_users"], row["active_users"]);
    }
    // Its verdict and summary: one threshold held, one did not; the summary is the text one.
    assert!(html.contains("<p class=\"verdict fail\">1 of 2 thresholds failed: p99&lt;1us</p>"), "{html}");
    assert!(html.contains("<li class=\"pass\">pass success&gt;99%"), "the passed one too");
    assert!(
        html.contains("<pre class=\"summary\">") && html.contains("requests   80 started"),
        "the summary"
    );
    assert!(html.contains("Latency from the scheduled time"), "an open-model run's latency");
    // The report draws offline: every chart has points (docs/load-report.png is one of these).
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut browser = Browser::start();
    let drawn = "!!window.sluiceBoard && window.sluiceBoard.charts.every(c => c.points > 0)";
    browser.open_until(
        &format!("file://{}", report.display()),
        drawn,
        "every chart of the report has points",
    );
    let size = json!({ "width": 1100, "height": 980, "deviceScaleFactor": 1, "mobile": false });
    browser.call("Emulation.setDeviceMetricsOverride", size);
    // The time axis' tick labels all read alike and none runs into the next (uPlot's own first
    // label carried the date and overlapped the second).
    let overlaps = browser.eval(
        "(() => { const ctx = document.createElement('canvas').getContext('2d'); const out = []; \
          for (const { plot: u } of window.sluiceBoard.plots.values()) { const a = u.axes[0]; \
            ctx.font = a.font ? a.font[0] : '12px sans-serif'; \
            const xs = a._splits.map((v) => u.valToPos(v, 'x')); \
            a._values.forEach((label, i) => { \
              if (!/^\\d\\d:\\d\\d:\\d\\d$/.test(label)) out.push('label ' + label); \
              if (i > 0 && xs[i] - xs[i - 1] < ctx.measureText(label).width + 4) out.push('overlap at ' + label); \
              if (i > 0 && label === a._values[i - 1]) out.push('repeated ' + label); \
            }); } return out; })()",
    );
    assert_eq!(overlaps, json!([]), "time ticks");
    let shot = browser.call("Page.captureScreenshot", json!({ "format": "png" }));
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    std::fs::write(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("load-report.png"), png).unwrap();
    // A closed-model run's latency runs from each request's start, and its report says so.
    let closed = dir.path().join("closed.html");
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["load", "http", &url, "--vus", "2", "-n", "20", "--no-progress", "--quiet", "--report"])
        .arg(&closed)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&closed).unwrap();
    assert!(html.contains("Latency from each request's start") && !html.contains("scheduled time"), "{html}");
    assert!(!html.contains("class=\"verdict"), "no thresholds, no verdict");
}

/// The demo's entry in `/streams`.
fn demo_stream(server: &Server) -> Value {
    let r = fetch_get(server.admin_addr(), "/streams", &[]);
    r.expect_status(200, "/streams");
    let list: Value = serde_json::from_slice(&r.body).unwrap();
    list["items"].as_array().unwrap().iter().find(|i| i["path"] == json!("/sluice-demo.mp4")).unwrap().clone()
}

fn streams_say_what_each_stream_is_and_who_watches_it(engine: &[&str]) {
    let server = Server::start(engine, &[]);
    fetch_get(server.addr(), "/sluice-demo.mp4", &[("Range", "bytes=0-999")]).expect_status(206, "range");
    // A response is counted once the server saw its last byte leave, a moment after the client
    // has it.
    let mut demo = Value::Null;
    poll_until(IO_TIMEOUT, || {
        demo = demo_stream(&server);
        demo["bytes_sent"]["http"] == json!(1000)
    });
    assert_eq!(demo["ready"], json!(true), "{demo}");
    let duration = demo["duration_secs"].as_f64().unwrap();
    assert!((duration - 6.0).abs() < 0.2, "{demo}");
    let tracks = demo["tracks"].as_array().unwrap();
    let video = tracks.iter().find(|t| t["codec"] == json!("H264")).unwrap_or_else(|| panic!("{demo}"));
    assert!(video["width"].as_u64().unwrap() > 0 && video["frame_rate"].as_f64().unwrap() > 1.0, "{demo}");
    let audio = tracks.iter().find(|t| t["codec"] == json!("AAC")).unwrap_or_else(|| panic!("{demo}"));
    assert!(audio["sample_rate"].as_u64().unwrap() >= 8000, "{demo}");
    assert_eq!(demo["bytes_sent"]["http"], json!(1000), "{demo}");
    assert_eq!(demo["viewers"]["rtsp"], json!(0), "{demo}");
    // Each protocol's bytes are the bodies its requests got: HLS's playlists, DASH's manifest,
    // and the segments both play, apart.
    let http = server.addr();
    let body_len = |path: &str| {
        let r = fetch_get(http, path, &[]);
        r.expect_status(200, path);
        r.body.len() as u64
    };
    let hls = body_len("/sluice-demo.mp4/master.m3u8") + body_len("/sluice-demo.mp4/video.m3u8");
    let dash = body_len("/sluice-demo.mp4/manifest.mpd");
    let segments = body_len("/sluice-demo.mp4/video-init.mp4") + body_len("/sluice-demo.mp4/video-seg-0.m4s");
    let expected = json!({ "http": 1000, "hls": hls, "dash": dash, "segments": segments });
    poll_until(IO_TIMEOUT, || {
        demo = demo_stream(&server);
        demo["bytes_sent"] == expected
    });
    assert_eq!(demo["bytes_sent"], expected, "{demo}");
    // A viewer playing shows up while it plays.
    let mut viewer = UdpViewer::setup(server.rtsp_addr(), "127.0.0.1".parse().unwrap(), "/sluice-demo.mp4")
        .unwrap_or_else(|r| panic!("SETUP: {r:?}"));
    viewer.play();
    let mut last = Value::Null;
    let watched = poll_until(Duration::from_secs(5), || {
        last = demo_stream(&server);
        last["viewers"]["rtsp"] == json!(1)
    });
    assert!(watched, "/streams shows the RTSP viewer: {last}");
    viewer.teardown().expect(200, "TEARDOWN");
    // Its session's duration is counted once it ends.
    let sessions = || value(&server.scrape(), "sluice_rtsp_session_duration_seconds_count");
    assert!(poll_until(IO_TIMEOUT, || sessions() == 1), "one RTSP session ended: {}", sessions());
}

#[test]
fn rtsp_rtp_ports_pin_the_udp_ports_and_must_hold_a_pair_per_loop() {
    // A free even/odd pair, released for the server to take.
    let (rtp, rtcp) = common::rtsp::udp_port_pair();
    let first = rtp.local_addr().unwrap().port();
    drop((rtp, rtcp));
    let range = format!("{}-{}", first - 2, first + 1);
    let server = Server::start(&[], &["--rtsp-loops", "1", "--rtsp-rtp-ports", &range]);
    let line = server.logs().into_iter().find(|l| l.contains("rtp_ports=")).unwrap();
    // The range's first pair when it is free, else the one the test freed.
    let (a, b) =
        (format!("rtp_ports={}-{}", first - 2, first - 1), format!("rtp_ports={}-{}", first, first + 1));
    assert!(line.contains(&a) || line.contains(&b), "{line}");
    let mut viewer = UdpViewer::setup(server.rtsp_addr(), "127.0.0.1".parse().unwrap(), "/sluice-demo.mp4")
        .unwrap_or_else(|r| panic!("SETUP: {r:?}"));
    assert!(
        viewer.server_ports.0 >= first - 2 && viewer.server_ports.1 <= first + 1,
        "{:?}",
        viewer.server_ports
    );
    viewer.play();
    viewer.teardown().expect(200, "TEARDOWN");
    // Too few pairs for the loops is a configuration error naming the flag.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--rtsp-listen",
            "127.0.0.1:0",
        ])
        .args(["--rtsp-loops", "2", "--rtsp-rtp-ports", "30000-30002"])
        .env_remove("SLUICE_CONFIG")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("--rtsp-rtp-ports") && said.contains("1 even/odd"), "{said}");
}
