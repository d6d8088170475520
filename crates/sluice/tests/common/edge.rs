//! Edges (`sluice serve --store s3://...`) in front of the shared SeaweedFS: writing objects
//! straight into the store, starting an edge on a cache directory, and counting the slice GETs
//! SeaweedFS saw. It does not start SeaweedFS (see `store`) nor check responses.

#![allow(dead_code)]

use super::*;

use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use sha2::{Digest, Sha256};
use sluice_store::{Key, PutOptions, S3Store};

/// Writes an object straight into `BUCKET/PREFIX` of the shared SeaweedFS (a bucket is made on
/// its first write).
pub fn put_object(location: &str, name: &str, bytes: &[u8]) {
    let (bucket, prefix) = location.split_once('/').expect("BUCKET/PREFIX");
    let mut config = shared_seaweedfs(bucket).s3_config(prefix);
    config.bucket = bucket.to_string();
    let store = S3Store::new(config).unwrap();
    sluice_store::put_bytes(&store, &Key::new(name).unwrap(), bytes, PutOptions::default()).unwrap();
}

/// The arguments that make `sluice serve` an edge of `s3://LOCATION` with its cache in `cache`.
pub fn edge_args(location: &str, cache: &Path) -> Vec<String> {
    let endpoint = shared_seaweedfs("edges").s3_endpoint.clone();
    let cache = cache.to_str().expect("a UTF-8 path").to_string();
    let location = format!("s3://{location}");
    ["--store", &location, "--s3-endpoint", &endpoint, "--cache-dir", &cache].map(str::to_string).to_vec()
}

/// An edge on `engine` serving `s3://LOCATION` with its cache in `cache`, plus `extra` arguments.
pub fn start_edge(engine: &[&str], location: &str, cache: &Path, extra: &[&str]) -> Server {
    let args = edge_args(location, cache);
    let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
    all.extend_from_slice(extra);
    Server::start(engine, &all)
}

/// Ranged GETs (answered 206) SeaweedFS counted in `bucket`: the slice fetches. (SeaweedFS
/// counts a HEAD as a GET answered 200.)
pub fn weed_slice_gets(bucket: &str) -> u64 {
    let text = shared_seaweedfs(bucket).metrics_text().unwrap();
    let bucket = format!("bucket=\"{bucket}\"");
    text.lines()
        .filter(|l| l.starts_with("SeaweedFS_s3_request_total{") && l.contains(&bucket))
        .filter(|l| l.contains("type=\"GET\"") && l.contains("code=\"206\""))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// SHA-256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A name for the engine configuration `engine` (`epoll-sendfile`), usable in a bucket name:
/// tests of several engines running at once keep their counts apart.
pub fn engine_tag(engine: &[&str]) -> String {
    let value = |flag: &str| engine.iter().position(|a| *a == flag).and_then(|i| engine.get(i + 1)).copied();
    ["--engine", "--threads-mode", "--send"].iter().filter_map(|f| value(f)).collect::<Vec<_>>().join("-")
}

/// 6 s of noisy 640×360 video (30 fps, a keyframe every 2 s) and AAC, large enough to span more
/// than three 4 MiB slices, its `moov` at the end (ffmpeg's default): an object whose index and
/// samples need slices nobody fetched yet. Made once per test binary.
pub fn multi_slice_clip() -> &'static [u8] {
    static MP4: OnceLock<Vec<u8>> = OnceLock::new();
    MP4.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("clip.mp4");
        let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
        cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i"])
            .arg("testsrc2=size=640x360:rate=30,noise=alls=30:allf=t")
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "6"])
            .args(["-c:v", "libx264", "-preset", "ultrafast", "-g", "60", "-keyint_min", "60"])
            .args(["-sc_threshold", "0", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "64k"])
            .arg(&out);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
        assert!(status.success(), "ffmpeg made no clip: {}", String::from_utf8_lossy(&err));
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.len() > 3 * (4 << 20), "the clip spans several slices ({} bytes)", bytes.len());
        bytes
    })
}
