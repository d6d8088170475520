//! `sluice upload` through toxiproxy resetting 5% of connections (`reset_peer`, toxicity 0.05) in
//! front of `sluice serve`: 1,000 of 1,000 uploads land intact, each verified by SHA-256 read back
//! from the server, and the resets did happen (retries counted). One engine: the server path is
//! covered on every engine by tests/uploads.rs; this is the client's retry logic.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use sha2::Digest as _;
use sluice_harness::toxiproxy::{Stream, Toxiproxy};

const TOKEN: &str = "reset-token-7";
const OBJECTS: u64 = 1000;

#[test]
fn a_thousand_uploads_land_intact_with_five_percent_of_connections_reset() {
    assert!(
        Toxiproxy::available(),
        "toxiproxy missing: go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0 (scripts/test does)"
    );
    let fx = Fixture::new();
    let tokens = fx.base.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    // One request per connection, so that every upload rides a connection of its own and the 5%
    // share of reset connections is about 50 uploads, not a few of the 8 kept-alive ones.
    let config = fx.base.join("sluice.toml");
    std::fs::write(&config, "[limits]\nmax_requests_per_connection = 1\n").unwrap();
    let server = Server::serve(
        &["--engine", "epoll", "--workers", "2"],
        &fx,
        &[
            "--config",
            config.to_str().unwrap(),
            "--upload-token-file",
            tokens.to_str().unwrap(),
            "--access-log",
            "false",
        ],
    );
    let toxiproxy = Toxiproxy::start(&fx.base.join("toxiproxy.log")).unwrap();
    let front = toxiproxy.proxy("sluice", server.addr()).unwrap();
    toxiproxy
        .add_toxic("sluice", "resets", "reset_peer", Stream::Upstream, 0.05, r#"{"timeout":0}"#)
        .unwrap();

    let src = fx.base.join("src");
    let mut files = Vec::new();
    for i in 0..OBJECTS {
        let (name, bytes) = if i % 2 == 0 {
            (
                format!("mail-{i}.html"),
                sluice_load::payload::email_html(1_000 + (i as usize * 97) % 50_000, i),
            )
        } else {
            (format!("sms-{i}.txt"), sluice_load::payload::sms(80, i))
        };
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join(&name), &bytes).unwrap();
        files.push((name, bytes));
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["upload", &format!("http://{front}/resets"), src.to_str().unwrap()])
        .args(["--concurrency", "8", "--retries", "6", "--timeout", "10s", "--token-file"])
        .arg(&tokens)
        .args(["--quiet", "--json", "-"]);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(120));
    let report: serde_json::Value = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("sluice upload: {e}; stderr: {}", String::from_utf8_lossy(&err)));
    assert!(status.success(), "every upload must land: {report}");
    assert_eq!(report["objects_ok"], OBJECTS, "{report}");
    let retries = report["retries"].as_u64().unwrap();
    // About 5% of ~1,000 connections; fewer than 10 would mean the toxic was not there.
    assert!(retries >= 10, "toxiproxy reset connections, so uploads were retried: {report}");
    assert!(
        report["connections_opened"].as_u64().unwrap() >= OBJECTS,
        "one request per connection: {report}"
    );
    drop(toxiproxy);

    for (name, bytes) in &files {
        let mut c = Conn::open(server.addr());
        c.send(format!("GET /resets/{name} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
        let r = c.response();
        r.expect_status(200, name);
        assert_eq!(sha2::Sha256::digest(&r.body), sha2::Sha256::digest(bytes), "{name} differs");
    }
}
