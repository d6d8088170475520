//! An edge that survives its cache: the cache directory removed or emptied while the edge runs,
//! a second edge started on the same directory, an edge SIGKILLed and started again on its
//! directory (with slice files broken while it was down), and a disk that will not take a slice.
//! Against a real SeaweedFS; bodies are checked by SHA-256, origin traffic by SeaweedFS's own
//! request counts and the edge's `/metrics`.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::edge::*;
use common::*;

engine_matrix!(
    a_removed_or_emptied_cache_directory_is_recreated_and_refilled,
    a_sigkilled_edge_leaves_slices_the_next_one_reuses_and_broken_ones_it_refetches,
    a_slice_the_disk_will_not_take_is_served_from_memory_and_counted
);

const MIB: usize = 1 << 20;
const SLICE: usize = 4 * MIB;
/// Three slices, the last one short.
const OBJECT_LEN: usize = 2 * SLICE + 12_345;

/// The object of a test: written to `BUCKET/PREFIX` as `big.bin`, returned.
fn object(location: &str, seed: u64) -> Vec<u8> {
    let data = pseudo_random(OBJECT_LEN, seed);
    put_object(location, "big.bin", &data);
    data
}

/// GETs the whole object and checks it, and one range across the first slice boundary.
#[track_caller]
fn check_served(server: &Server, data: &[u8], what: &str) {
    let whole = fetch_get(server.addr(), "/big.bin", &[]);
    whole.expect_status(200, what);
    assert_eq!(sha256_hex(&whole.body), sha256_hex(data), "{what}: the whole object");
    let r = fetch_get(server.addr(), "/big.bin", &[("Range", "bytes=4194000-4194999")]);
    r.expect_status(206, what);
    assert_bytes_eq(&r.body, &data[4_194_000..4_195_000], what);
}

/// The slice files in `dir`, sorted.
fn slice_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slice"))
        .collect();
    files.sort();
    files
}

/// The file of slice `index` in `dir` (slice files end `-INDEX.slice`).
fn slice_file(dir: &Path, index: usize) -> PathBuf {
    let suffix = format!("-{index}.slice");
    let files = slice_files(dir);
    files
        .iter()
        .find(|p| p.to_str().unwrap().ends_with(&suffix))
        .unwrap_or_else(|| panic!("no slice {index} in {files:?}"))
        .clone()
}

/// Waits (bounded) for SeaweedFS's count of slice GETs in `bucket` to reach `expected`, and
/// checks it does not pass it.
#[track_caller]
fn expect_slice_gets(bucket: &str, expected: u64, what: &str) {
    poll_until(Duration::from_secs(10), || weed_slice_gets(bucket) >= expected);
    assert_eq!(weed_slice_gets(bucket), expected, "{what}");
}

/// Waits (bounded) for a log line of `server` containing `text`.
#[track_caller]
fn expect_log(server: &Server, text: &str) {
    let found = poll_until(Duration::from_secs(5), || server.logs().iter().any(|l| l.contains(text)));
    assert!(found, "no log line with {text:?} in:\n{}", server.log_text());
}

fn a_removed_or_emptied_cache_directory_is_recreated_and_refilled(engine: &[&str]) {
    let location = format!("removed-{}/p", engine_tag(engine));
    let data = object(&location, 31);
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let server = start_edge(engine, &location, &cache, &["--cache-size", "64M"]);
    check_served(&server, &data, "cold");
    assert_eq!(slice_files(&cache).len(), 3);
    assert_eq!(metric(&server.scrape(), "sluice_cache_misses_total"), 3);

    // An operator frees the disk: the directory goes, lock file and all.
    std::fs::remove_dir_all(&cache).unwrap();
    check_served(&server, &data, "after the cache directory was removed");
    expect_log(
        &server,
        &format!("the cache directory {} was removed while in use; recreated it", cache.display()),
    );
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_dir_recreations_total"), 1, "{text}");
    assert_eq!(metric(&text, "sluice_cache_vanished_slices_total"), 3, "{text}");
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 6, "each slice fetched once more: {text}");
    assert_eq!(slice_files(&cache).len(), 3, "refilled");
    assert!(cache.join("sluice-cache.lock").exists(), "locked again");

    // A tmp cleaner empties it: the directory stays, its files go.
    for entry in std::fs::read_dir(&cache).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    check_served(&server, &data, "after the cache directory was emptied");
    expect_log(&server, "slice file(s) were removed from the cache directory");
    let text = server.scrape();
    assert_eq!(metric(&text, "sluice_cache_vanished_slices_total"), 6, "{text}");
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 9, "{text}");
    assert_eq!(metric(&text, "sluice_cache_bytes{state=\"held\"}"), OBJECT_LEN as u64, "{text}");

    // Refilled: warm again.
    check_served(&server, &data, "warm");
    assert_eq!(metric(&server.scrape(), "sluice_cache_misses_total"), 9);
    assert!(
        !server.logs().iter().any(|l| l.contains("status=500") || l.contains("cache i/o")),
        "{}",
        server.log_text()
    );
}

fn a_sigkilled_edge_leaves_slices_the_next_one_reuses_and_broken_ones_it_refetches(engine: &[&str]) {
    let bucket = format!("crash-{}", engine_tag(engine));
    let location = format!("{bucket}/p");
    let data = object(&location, 32);
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let mut first = start_edge(engine, &location, &cache, &["--cache-size", "64M"]);
    check_served(&first, &data, "cold");
    first.signal(libc::SIGKILL);
    first.wait_exit(IO_TIMEOUT).expect("the SIGKILLed edge is gone");
    // The bucket is this test's: SeaweedFS has counted the three slice GETs (its count of a
    // new bucket can show up a moment late).
    expect_slice_gets(&bucket, 3, "the first edge fetched each slice once");

    // Whole slices are served again with no origin GET.
    let second = start_edge(engine, &location, &cache, &["--cache-size", "64M"]);
    expect_log(&second, "cache: reusing 3 slice(s)");
    check_served(&second, &data, "after a crash");
    let text = second.scrape();
    assert_eq!(metric(&text, "sluice_cache_reused_slices_total"), 3, "{text}");
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 0, "{text}");
    drop(second);

    // Broken while no edge ran: slice 1 cut short, slice 2 with bytes after its end, and a
    // temporary file a write left. They are removed; the broken slices are fetched again.
    let short = slice_file(&cache, 1);
    std::fs::OpenOptions::new().write(true).open(&short).unwrap().set_len(SLICE as u64 / 2).unwrap();
    let long = slice_file(&cache, 2);
    let mut bytes = std::fs::read(&long).unwrap();
    bytes.extend_from_slice(b"garbage");
    std::fs::write(&long, bytes).unwrap();
    let temp = PathBuf::from(format!("{}.0.tmp", slice_file(&cache, 0).display()));
    std::fs::write(&temp, b"half a slice").unwrap();
    let third = start_edge(engine, &location, &cache, &["--cache-size", "64M"]);
    expect_log(&third, "cache: reusing 1 slice(s)");
    expect_log(&third, "removed 3 file(s) that were not whole slices");
    assert!(!temp.exists(), "the temporary file is removed");
    check_served(&third, &data, "with broken slices left");
    let text = third.scrape();
    assert_eq!(metric(&text, "sluice_cache_reused_slices_total"), 1, "{text}");
    assert_eq!(metric(&text, "sluice_cache_misses_total"), 2, "{text}");
    // The second edge fetched nothing: the next two GETs are the broken slices'.
    expect_slice_gets(&bucket, 5, "the two broken slices are fetched again, and only they");
    for (index, len) in [SLICE, SLICE, OBJECT_LEN - 2 * SLICE].into_iter().enumerate() {
        assert_eq!(slice_file(&cache, index).metadata().unwrap().len(), len as u64, "slice {index} is whole");
    }
    let old_slices = slice_files(&cache);
    drop(third);

    // Replaced at the origin while no edge ran: the slices left are of another ETag, never served.
    let replaced = object(&location, 35);
    let fourth = start_edge(engine, &location, &cache, &["--cache-size", "64M"]);
    expect_log(&fourth, "cache: reusing 3 slice(s)");
    check_served(&fourth, &replaced, "replaced while no edge ran");
    let text = fourth.scrape();
    assert_eq!(
        metric(&text, "sluice_cache_misses_total"),
        3,
        "every slice of the new version is fetched: {text}"
    );
    assert_eq!(metric(&text, "sluice_cache_bytes{state=\"held\"}"), OBJECT_LEN as u64, "{text}");
    expect_slice_gets(&bucket, 8, "the new version's three slices, once each");
    assert!(old_slices.iter().all(|p| !p.exists()), "the old version's slices are removed");
    assert_eq!(slice_files(&cache).len(), 3);
}

/// A tmpfs of `size` mounted on a new directory, unmounted (lazily, by its path) on drop.
struct Tmpfs {
    _parent: tempfile::TempDir,
    path: PathBuf,
}

impl Tmpfs {
    /// `None` (with the reason) where this process may not mount.
    fn mount(size: &str) -> Result<Tmpfs, String> {
        // SAFETY: geteuid has no arguments and cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root".into());
        }
        let parent = tempfile::tempdir().unwrap();
        let path = parent.path().join("tiny");
        std::fs::create_dir(&path).unwrap();
        let mut mount = Command::new("mount");
        mount.args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"]).arg(&path);
        let (status, _, err) = run_bounded(&mut mount, Duration::from_secs(10));
        if !status.success() {
            return Err(format!("mount -t tmpfs failed: {}", String::from_utf8_lossy(&err).trim()));
        }
        Ok(Tmpfs { _parent: parent, path })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = run_bounded(Command::new("umount").arg("-l").arg(&self.path), Duration::from_secs(10));
    }
}

fn a_slice_the_disk_will_not_take_is_served_from_memory_and_counted(engine: &[&str]) {
    // A cache directory on a 4 KiB tmpfs: every slice write fails with ENOSPC, for real.
    let tiny = match Tmpfs::mount("4k") {
        Ok(tiny) => tiny,
        Err(why) => {
            eprintln!("SKIPPED: a full disk needs a tmpfs this test mounts, and {why}");
            return;
        }
    };
    let location = format!("full-{}/p", engine_tag(engine));
    let data = object(&location, 33);
    let server = start_edge(engine, &location, &tiny.path, &["--cache-size", "64M"]);
    check_served(&server, &data, "with a full disk");
    check_served(&server, &data, "with a full disk, again");
    let text = server.scrape();
    let failures = metric(&text, "sluice_cache_write_failures_total");
    // The whole object is 3 slices and the range 2: each fetched (and failed) at least once.
    assert!(failures >= 5, "every slice write failed and was counted: {text}");
    assert_eq!(metric(&text, "sluice_cache_misses_total"), failures, "{text}");
    assert_eq!(metric(&text, "sluice_cache_bytes{state=\"held\"}"), 0, "{text}");
    expect_log(&server, &format!("cache: cannot write a slice to {}", tiny.path.display()));
    let left: Vec<_> = std::fs::read_dir(&tiny.path).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, ["sluice-cache.lock"], "no partial slice is left");
    drop(server);
}

#[test]
fn a_second_edge_on_the_same_cache_directory_exits_2_naming_the_first() {
    let location = "second/p";
    let data = object(location, 34);
    let work = tempfile::tempdir().unwrap();
    let cache = work.path().join("cache");
    let engine = ["--engine", "epoll", "--workers", "2"];
    let first = start_edge(&engine, location, &cache, &["--cache-size", "64M"]);
    check_served(&first, &data, "the first edge");

    let mut second = Command::new(env!("CARGO_BIN_EXE_sluice"));
    second
        .args(["serve", "--listen", "127.0.0.1:0", "--no-rtsp", "--no-admin"])
        .args(engine)
        .args(edge_args(location, &cache))
        .env_remove("SLUICE_CONFIG")
        .env_remove("RUST_LOG");
    let (status, _, err) = run_bounded(&mut second, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&err);
    assert_eq!(status.code(), Some(2), "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {err}");
    let expected = format!("the cache directory {} is in use by sluice pid {}", cache.display(), first.pid());
    assert!(lines[0].contains(&expected), "{err}");

    // The first edge never noticed.
    check_served(&first, &data, "the first edge, after the second was refused");
    assert_eq!(slice_files(&cache).len(), 3);
}
