//! Logging: one access-log line per request (and none when it is off), on every engine, and
//! JSON logs when asked.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use common::*;

engine_matrix!(access_log_has_one_line_per_request, access_log_off_prints_none, json_logs_are_json);

fn access_lines(server: &Server) -> Vec<String> {
    server.logs().into_iter().filter(|l| l.contains("sluice::access")).collect()
}

/// Five requests: three on one kept-alive connection, two on their own.
fn five_requests(server: &Server) {
    let mut c = Conn::open(server.addr());
    c.send(get("/t1.html", &[]));
    c.response().expect_status(200, "request 1");
    c.send(get("/t1.html", &[("Range", "bytes=0-8")]));
    c.response().expect_status(206, "request 2");
    c.send(get("/missing.txt", &[("Connection", "close")]));
    c.response().expect_status(404, "request 3");
    assert!(c.wait_close(std::time::Duration::from_secs(5)).closed);
    fetch_get(server.addr(), "/64k.bin", &[("Connection", "close")]).expect_status(200, "request 4");
    let mut c = Conn::open(server.addr());
    c.send(request("HEAD", "/1m.bin", &[("Connection", "close")]));
    c.head_response().expect_status(200, "request 5");
}

fn access_log_has_one_line_per_request(engine: &[&str]) {
    let fx = Fixture::new();
    let mut server = Server::serve(engine, &fx, &["--access-log", "true"]);
    five_requests(&server);
    // After the exit every line the server wrote has been read.
    let status = server.terminate();
    assert!(status.success(), "sluice exited with {status}");
    let lines = access_lines(&server);
    assert_eq!(lines.len(), 5, "access log lines for 5 requests:\n{}", server.log_text());
    // Lines are written when responses end: two connections' lines may come in either order.
    let mut unmatched = lines.clone();
    for (target, status) in [
        ("/t1.html", "200"),
        ("/t1.html", "206"),
        ("/missing.txt", "404"),
        ("/64k.bin", "200"),
        ("/1m.bin", "200"),
    ] {
        let at = unmatched
            .iter()
            .position(|l| l.contains(&format!("uri={target} ")) && l.contains(&format!("status={status} ")))
            .unwrap_or_else(|| panic!("no access line for {target} {status} in:\n{}", lines.join("\n")));
        unmatched.remove(at);
    }
    let complete = |target: &str, bytes: &str| {
        lines.iter().any(|l| {
            l.contains(target) && l.contains(&format!("bytes={bytes} ")) && l.contains("complete=true")
        })
    };
    assert!(complete("/64k.bin", "65536") && complete("/1m.bin", "0"), "bytes sent:\n{}", lines.join("\n"));
}

fn access_log_off_prints_none(engine: &[&str]) {
    let fx = Fixture::new();
    let mut server = Server::serve(engine, &fx, &["--access-log", "false"]);
    five_requests(&server);
    let status = server.terminate();
    assert!(status.success(), "sluice exited with {status}");
    let lines = access_lines(&server);
    assert!(lines.is_empty(), "--access-log false still logged:\n{}", lines.join("\n"));
    // The server did log its start and stop: the empty result is not a broken pipe.
    assert!(server.logs().iter().any(|l| l.contains("listening on")), "{}", server.log_text());
}

fn json_logs_are_json(engine: &[&str]) {
    let fx = Fixture::new();
    let mut server = Server::serve(engine, &fx, &["--log-format", "json"]);
    fetch_get(server.addr(), "/t1.html", &[("Connection", "close")]).expect_status(200, "GET");
    let status = server.terminate();
    assert!(status.success(), "sluice exited with {status}");
    let logs = server.logs();
    assert!(logs.len() >= 2, "{}", logs.join("\n"));
    for line in &logs {
        let t = line.trim();
        assert!(t.starts_with('{') && t.ends_with('}'), "not a JSON object: {line}");
    }
    let access: Vec<serde_json::Value> = logs
        .iter()
        .filter(|l| l.contains("sluice::access"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(access.len(), 1, "one access line in JSON:\n{}", logs.join("\n"));
    // The fields are JSON fields, not text inside `message`.
    let line = &access[0];
    assert_eq!(line["uri"], "/t1.html", "{line}");
    assert_eq!(line["status"], 200, "{line}");
    assert_eq!(line["bytes"], 1000, "{line}");
    assert_eq!(line["complete"], true, "{line}");
    assert!(line["duration_ms"].is_number() && line["peer"].is_string(), "{line}");
}
