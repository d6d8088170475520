//! The generator against a tiny in-test server: exact counts in the closed model, schedule
//! accuracy and coordinated-omission correction in the open model, every error kind provoked and
//! counted, weights, thresholds and the output formats. Every run is short, single-threaded and
//! on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::{Behaviour, TestServer};
use sluice_load::threshold::apply;
use sluice_load::{
    run, ConnectionMode, CsvSeries, ErrorKind, JsonReport, LoadConfig, LoadError, Model, NoObserver, Report,
    ReportWriter, Scenario, Stage, TargetSpec, TextSummary, Threshold,
};

fn target(url: &str) -> Vec<TargetSpec> {
    vec![TargetSpec::parse(url).unwrap()]
}

fn closed(url: &str, vus: usize, requests: u64) -> LoadConfig {
    let mut c = LoadConfig::closed(target(url), vus, None, Some(requests));
    c.threads = 1;
    c.timeout = Duration::from_secs(5);
    c
}

fn open(url: &str, stages: Vec<Stage>, max_connections: usize) -> LoadConfig {
    let s = Scenario { name: "s".into(), targets: target(url), start_at: Duration::ZERO, stages };
    let mut c = LoadConfig::open(vec![s], max_connections);
    c.threads = 1;
    c.timeout = Duration::from_secs(5);
    c
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn closed_model_sends_exactly_the_requested_count_on_kept_alive_connections() {
    let server = TestServer::start(Behaviour::Ok);
    let mut config = closed(&server.url("/hello"), 4, 203);
    config.threads = 2;
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(server.requests(), 203);
    assert_eq!((r.requests.scheduled, r.requests.sent, r.requests.ok, r.requests.failed), (203, 203, 203, 0));
    assert_eq!(r.success_rate, 1.0);
    assert_eq!(r.connections_opened, 4, "one kept-alive connection per virtual user");
    assert_eq!(server.connections(), 4);
    assert_eq!(r.latency.count, 203);
    assert_eq!(r.ttfb.count, 203);
    assert_eq!(r.statuses[&200], 203);
    assert!(
        r.latency.p50_us > 0 && r.latency.p50_us <= r.latency.p99_us && r.latency.p99_us <= r.latency.max_us
    );
}

#[test]
fn closed_model_can_open_a_connection_per_request() {
    let server = TestServer::start(Behaviour::Ok);
    let mut config = closed(&server.url("/"), 2, 40);
    config.connections = ConnectionMode::PerRequest;
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(server.requests(), 40);
    assert_eq!(server.connections(), 40);
    assert_eq!((r.requests.ok, r.connections_opened, r.connect.count), (40, 40, 40));
}

#[test]
fn closed_model_with_a_duration_counts_what_the_server_saw() {
    let server = TestServer::start(Behaviour::Ok);
    let mut config = LoadConfig::closed(target(&server.url("/")), 2, Some(ms(500)), None);
    config.threads = 1;
    let r = run(&config, &mut NoObserver).unwrap();
    assert!(r.requests.ok > 10, "{:?}", r.requests);
    assert_eq!(r.requests.sent, server.requests());
    assert_eq!(r.requests.ok, r.requests.sent);
    assert!(r.duration_s >= 0.5 && r.duration_s < 2.0, "{}", r.duration_s);
    let rows: u64 = r.series.iter().map(|s| s.ok).sum();
    assert_eq!(rows, r.requests.ok, "the series adds up to the totals");
    assert!(r.series.iter().any(|s| s.active_users == 2), "{:?}", r.series);
}

#[test]
fn closed_model_users_pause_for_their_think_time() {
    let server = TestServer::start(Behaviour::Ok);
    let mut config = LoadConfig::closed(target(&server.url("/")), 2, Some(ms(600)), None);
    config.threads = 1;
    if let sluice_load::Model::Closed(c) = &mut config.model {
        c.think = ms(100);
    }
    let r = run(&config, &mut NoObserver).unwrap();
    // Each user begins at 0, 100+, 200+, … ms: at most 6 requests in 600 ms, where a user
    // without a pause sends hundreds.
    assert!(r.requests.ok >= 2 && r.requests.ok <= 12, "{:?}", r.requests);
    assert_eq!(r.requests.ok, server.requests());
    assert_eq!(r.settings.think_ms, 100);
    assert!(r.latency.max_us < 100_000, "the pause is not latency: {:?}", r.latency);
}

#[test]
fn open_model_keeps_the_schedule_200_per_second_for_5_seconds() {
    let server = TestServer::start(Behaviour::Ok);
    let config = open(&server.url("/"), vec![Stage::ConstantRate { rate: 200.0, duration: ms(5000) }], 20);
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(r.requests.scheduled, 1000);
    assert!((990..=1010).contains(&r.requests.sent), "{:?}", r.requests);
    assert!((990..=1010).contains(&server.requests()));
    assert_eq!(r.requests.ok, r.requests.sent);
    // The schedule cannot be finished early; late it may be, on a machine busy with other work.
    assert!(r.duration_s >= 4.9, "{}", r.duration_s);
    // Never ahead of the schedule: by the end of each second at most 200 per second have started
    // (a generator that sent as fast as its users finished would start thousands in the first).
    // Behind it only when the machine is too busy to run the generator on time: each second then
    // still starts some, and the whole schedule is sent by the end.
    let mut started = 0u64;
    for s in r.series.iter().filter(|s| s.second < 5) {
        started += s.started;
        assert!(started <= 200 * (s.second + 1) + 2, "ahead of the schedule by second {}: {s:?}", s.second);
        assert!(
            s.started > 0,
            "no arrival in second {} (needs the generator to get some CPU each second): {s:?}",
            s.second
        );
    }
}

#[test]
fn open_model_shows_a_server_stall_as_latency() {
    // 100 arrivals/s for 3 s; the server answers nothing for 1 s starting 1 s in. Arrivals during
    // the stall wait between 1 s and 0 s, so the slowest 1% of 300 (3 requests) are ≥ 0.97 s.
    // A generator that timed from the actual send would report a p99 of a few milliseconds.
    let server = TestServer::start(Behaviour::Stall { after: ms(1000), stall: ms(1000) });
    let config = open(&server.url("/"), vec![Stage::ConstantRate { rate: 100.0, duration: ms(3000) }], 4);
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(r.requests.scheduled, 300);
    assert_eq!(r.requests.ok, 300, "{:?} {:?}", r.requests, r.errors);
    // The arrival that meets the stall's first instant waits the whole second, less at most one
    // arrival interval (10 ms) of phase between the schedule and the server's clock.
    assert!(r.latency.max_us >= 980_000, "max {}", r.latency.max_us);
    assert!(r.latency.p99_us >= 950_000, "p99 {}", r.latency.p99_us);
    assert!(r.latency.p90_us >= 100_000, "p90 {}", r.latency.p90_us);
    // The stall is visible in the series as a second whose p99 is near a second.
    assert!(r.series.iter().any(|s| s.p99_us >= 900_000), "{:?}", r.series);
}

#[test]
fn open_model_drops_arrivals_that_cannot_start_in_time() {
    let server = TestServer::start(Behaviour::NoAnswer { hold: ms(2000) });
    let mut config = open(&server.url("/"), vec![Stage::ConstantRate { rate: 50.0, duration: ms(1000) }], 1);
    config.timeout = ms(300);
    // One connection, each request holding it to its deadline: arrivals pile up behind it, and
    // those that find the waiting line (5) full are dropped rather than silently skipped.
    if let Model::Open(o) = &mut config.model {
        o.max_pending = 5;
    }
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(r.requests.scheduled, 50);
    assert_eq!(r.requests.ok, 0);
    assert_eq!(r.requests.failed + r.requests.dropped, 50, "{:?}", r.requests);
    assert!(r.requests.dropped >= 25, "{:?}", r.requests);
    assert_eq!(r.requests.sent, r.requests.failed);
    assert_eq!(r.errors.timeout, r.requests.failed);
    assert_eq!(r.success_rate, 0.0);
}

#[test]
fn open_model_can_open_a_connection_per_arrival() {
    let server = TestServer::start(Behaviour::Ok);
    let mut config = open(&server.url("/"), vec![Stage::RampUsers { users: 30, over: ms(600) }], 10);
    config.connections = ConnectionMode::PerRequest;
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!((r.requests.ok, r.connections_opened), (30, 30));
    assert_eq!(server.connections(), 30);
}

#[test]
fn overlapping_scenarios_hit_their_own_urls() {
    let server = TestServer::start(Behaviour::Ok);
    let a = Scenario {
        name: "a".into(),
        targets: target(&server.url("/a")),
        start_at: Duration::ZERO,
        stages: vec![Stage::ConstantRate { rate: 20.0, duration: ms(1000) }],
    };
    let b = Scenario {
        name: "b".into(),
        targets: target(&server.url("/b")),
        start_at: ms(500),
        stages: vec![
            Stage::Pause { duration: ms(100) },
            Stage::RampRate { from: 10.0, to: 30.0, over: ms(500) },
        ],
    };
    let mut config = LoadConfig::open(vec![a, b], 4);
    config.threads = 2;
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(r.requests.scheduled, 30);
    assert_eq!(r.targets.len(), 2);
    assert_eq!((r.targets[0].ok, r.targets[1].ok), (20, 10));
    assert_eq!(r.targets[1].scenario.as_deref(), Some("b"));
}

#[test]
fn weights_split_requests_exactly() {
    let server = TestServer::start(Behaviour::Ok);
    let targets = vec![
        TargetSpec::parse(&format!("3={}", server.url("/a"))).unwrap(),
        TargetSpec::parse(&server.url("/b")).unwrap(),
    ];
    let mut config = LoadConfig::closed(targets, 1, None, Some(40));
    config.threads = 1;
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!((r.targets[0].ok, r.targets[1].ok), (30, 10));
}

fn errors_of(behaviour: Behaviour, timeout: Duration, requests: u64) -> Report {
    let server = TestServer::start(behaviour);
    let mut config = closed(&server.url("/"), 1, requests);
    config.timeout = timeout;
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(r.requests.scheduled, requests);
    assert_eq!(r.requests.ok, 0);
    assert_eq!(r.requests.failed, requests, "{:?}", r.errors);
    r
}

#[test]
fn refused_connections_are_counted() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let config = closed(&format!("http://127.0.0.1:{port}/"), 1, 3);
    let r = run(&config, &mut NoObserver).unwrap();
    assert_eq!(r.errors.refused, 3, "{:?}", r.errors);
    assert_eq!(r.success_rate, 0.0);
}

#[test]
fn resets_are_counted() {
    assert_eq!(errors_of(Behaviour::Reset, ms(2000), 3).errors.reset, 3);
}

#[test]
fn premature_closes_are_counted() {
    assert_eq!(errors_of(Behaviour::PrematureClose, ms(2000), 3).errors.premature_close, 3);
}

#[test]
fn timeouts_are_counted() {
    let r = errors_of(Behaviour::NoAnswer { hold: ms(1000) }, ms(200), 2);
    assert_eq!(r.errors.timeout, 2);
}

#[test]
fn bad_statuses_are_counted() {
    let r = errors_of(Behaviour::Status500, ms(2000), 3);
    assert_eq!(r.errors.bad_status, 3);
    assert_eq!(r.statuses[&500], 3);
    assert_eq!(r.connections_opened, 1, "a complete error response keeps the connection");
}

#[test]
fn short_bodies_are_counted() {
    assert_eq!(errors_of(Behaviour::ShortBody, ms(2000), 3).errors.short_body, 3);
}

#[test]
fn thresholds_judge_the_report() {
    let server = TestServer::start(Behaviour::Ok);
    let mut r = run(&closed(&server.url("/"), 1, 20), &mut NoObserver).unwrap();
    let passing = ["success>99.9%", "errors==0", "errors.timeout==0", "p99<5s", "requests>=20", "dropped==0"];
    let ts: Vec<Threshold> = passing.iter().map(|t| Threshold::parse(t).unwrap()).collect();
    apply(&ts, &mut r);
    assert!(r.thresholds_passed(), "{:?}", r.thresholds);
    let failing = [Threshold::parse("p99<1us").unwrap(), Threshold::parse("success>99%").unwrap()];
    apply(&failing, &mut r);
    assert!(!r.thresholds_passed());
    assert!(!r.thresholds[0].passed && r.thresholds[1].passed, "{:?}", r.thresholds);
}

#[test]
fn outputs_render_the_same_report() {
    let server = TestServer::start(Behaviour::Ok);
    let mut r = run(&closed(&server.url("/"), 2, 30), &mut NoObserver).unwrap();
    apply(&[Threshold::parse("p99<10s").unwrap()], &mut r);
    let mut json = Vec::new();
    JsonReport.write_report(&r, &mut json).unwrap();
    let back: Report = serde_json::from_slice(&json).unwrap();
    assert_eq!(back, r, "the lab reads back exactly what was written");
    let mut csv = Vec::new();
    CsvSeries.write_report(&r, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let mut lines = csv.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("second,arrivals,started,ok,failed,refused,reset,premature_close,timeout"));
    assert_eq!(lines.count(), r.series.len());
    let mut text = Vec::new();
    TextSummary.write_report(&r, &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    for needle in ["30 ok", "success    100.000%", "latency", "p99.9=", "ttfb", "thresholds", "pass"] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

#[test]
fn targets_outside_loopback_need_permission() {
    let config = closed("http://192.0.2.1:80/", 1, 1);
    assert!(matches!(run(&config, &mut NoObserver), Err(LoadError::NonLoopbackTarget { .. })));
    assert!(matches!(config.model, Model::Closed(_)));
    let _ = ErrorKind::ALL;
}

/// A run told to stop (the lab's signal handler, whose servers are gone by then) ends within
/// about a second, in both models, and reports what it did until then; the requests it made
/// are the server's count, none lost.
#[test]
fn a_raised_stop_flag_ends_a_run_early_in_both_models() {
    let server = TestServer::start(Behaviour::Ok);
    let mut closed = LoadConfig::closed(target(&server.url("/")), 2, Some(Duration::from_secs(60)), None);
    closed.threads = 1;
    let open = open(&server.url("/"), vec![Stage::ConstantRate { rate: 50.0, duration: ms(60_000) }], 4);
    for mut config in [closed, open] {
        let stop = sluice_load::StopFlag::new();
        config.stop = Some(stop.clone());
        let raiser = std::thread::spawn(move || {
            std::thread::sleep(ms(500));
            stop.raise();
        });
        let before = server.requests();
        let r = run(&config, &mut NoObserver).unwrap();
        raiser.join().unwrap();
        assert!(r.duration_s < 5.0, "the run went on for {} s after its stop", r.duration_s);
        assert!(r.requests.ok > 0 && r.requests.failed == 0, "{:?}", r.requests);
        assert_eq!(
            server.requests() - before,
            r.requests.sent,
            "every request sent was answered and counted"
        );
    }
}
