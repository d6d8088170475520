//! Recording live paths into an s3:// library (SeaweedFS), on every engine: a `[[record]]` rule
//! records what ffmpeg publishes to `/live/r` (12 s, files of 4 s) into a local spool, and each
//! file, once closed, is uploaded whole into the bucket under `recordings/live/r/` and removed
//! from the spool; the admin listener lists the objects and each plays over HLS through sluice,
//! together every published frame, and their span as one MP4 (its bytes from the three objects,
//! ranges too). Then sluice is killed with SIGKILL while it records `/live/k`;
//! started again on the same spool and bucket, it uploads the file it was writing, byte for byte
//! what the spool held, which plays its whole segments.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::path::Path;

use common::edge::{engine_tag, sha256_hex};
use common::publisher::*;
use common::*;
use sluice_store::{Key, S3Store, Store};

rtsp_matrix!(recordings_are_uploaded_into_the_bucket_and_play);

const BUCKET: &str = "recs3";

const CONFIG: &[u8] = b"[[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
    [[record]]\nprefix = \"/live/\"\nfile_duration = \"4s\"\n";

/// The store of `BUCKET/prefix` on the shared SeaweedFS.
fn store(prefix: &str) -> S3Store {
    let mut config = shared_seaweedfs(BUCKET).s3_config(prefix);
    config.bucket = BUCKET.to_string();
    S3Store::new(config).unwrap()
}

/// The recording objects of live path `name`, as library paths, oldest first.
fn objects(store: &S3Store, name: &str) -> Vec<String> {
    let listed = store.list(&format!("recordings/live/{name}/")).unwrap();
    listed.into_iter().filter(|m| m.key.ends_with(".mp4")).map(|m| format!("/{}", m.key)).collect()
}

/// The recording files of live path `name` in the spool, as library paths, oldest first.
fn spooled(spool: &Path, name: &str) -> Vec<String> {
    let mut files: Vec<String> = std::fs::read_dir(spool.join(format!("recordings/live/{name}")))
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    files.retain(|f| f.ends_with(".mp4") && !f.starts_with('.'));
    files.sort();
    files.into_iter().map(|f| format!("/recordings/live/{name}/{f}")).collect()
}

fn recordings_are_uploaded_into_the_bucket_and_play(engine: &[&str]) {
    let weed = shared_seaweedfs(BUCKET);
    let prefix = format!("rec-{}", engine_tag(engine));
    let bucket = store(&prefix);
    let fx = Fixture::new();
    fx.write("sluice.toml", CONFIG);
    let (config, spool) = (fx.path("sluice.toml"), fx.path("spool"));
    let location = format!("s3://{BUCKET}/{prefix}");
    let args = |cache: &str| {
        let cache = fx.path(cache);
        [
            "--config",
            config.to_str().unwrap(),
            "--store",
            &location,
            "--s3-endpoint",
            &weed.s3_endpoint,
            "--cache-dir",
            cache.to_str().unwrap(),
            "--record-spool",
            spool.to_str().unwrap(),
        ]
        .map(str::to_string)
    };
    let first = args("cache1");
    let first: Vec<&str> = first.iter().map(String::as_str).collect();
    let mut server = Server::serve(engine, &fx, &first);
    let (http, rtsp) = (server.addr(), server.rtsp_addr());

    let mut publisher = publish(&format!("rtsp://{rtsp}/live/r"), &H264_AAC, "tcp", 12);
    assert!(
        poll_until(IO_TIMEOUT, || server.streams().contains("\"recording\":\"/recordings/live/r/")),
        "/streams names the file being written:\n{}\n{}",
        server.streams(),
        server.log_text()
    );
    assert!(publisher.finished(), "the publisher finished cleanly");
    // 12 s in files of 4 s: three objects once the last file is closed and uploaded.
    assert!(
        poll_until(IO_TIMEOUT, || objects(&bucket, "r").len() == 3 && spooled(&spool, "r").is_empty()),
        "three objects in the bucket, none left in the spool: {:?} {:?}\n{}",
        objects(&bucket, "r"),
        spooled(&spool, "r"),
        server.log_text()
    );
    let files = objects(&bucket, "r");
    let frames: Vec<u64> =
        files.iter().map(|f| video_frame_count(&format!("http://{http}{f}/master.m3u8"))).collect();
    assert_eq!(
        frames.iter().sum::<u64>(),
        300,
        "every published frame, over HLS from the bucket: {frames:?}"
    );
    assert!(frames.iter().all(|f| *f > 0), "each object plays: {frames:?}");
    let timeline = fetch_get(server.admin_addr(), "/recordings?path=/live/r", &[]);
    let timeline: serde_json::Value = serde_json::from_slice(&timeline.body).unwrap();
    let listed: Vec<&str> =
        timeline["recordings"].as_array().unwrap().iter().map(|f| f["file"].as_str().unwrap()).collect();
    assert_eq!(listed, files.iter().map(String::as_str).collect::<Vec<_>>(), "{timeline}");
    let all = timeline["hls"].as_str().map(|p| format!("http://{http}{p}")).unwrap();
    assert_eq!(video_frame_count(&all), 300, "the timeline's span of every recording");
    // The span as one MP4, its sample data read from the three objects through the cache.
    let mp4 = timeline["mp4"].as_str().unwrap();
    assert_eq!(
        video_frame_count(&format!("http://{http}{mp4}")),
        300,
        "the timeline's MP4 of every recording"
    );
    decodes_cleanly(&format!("http://{http}{mp4}"));
    // A range across where one object's bytes end and the next's begin is those bytes of the
    // whole (the header comes first, so the objects' joins lie past the first third).
    let whole = fetch_get(http, mp4, &[]).body;
    let (from, to) = (whole.len() / 3, whole.len() * 2 / 3);
    let range = fetch_get(http, mp4, &[("Range", &format!("bytes={from}-{to}"))]);
    assert_eq!(range.status, 206, "{}", range.body_text());
    assert!(range.body == whole[from..=to], "the range is those bytes of the whole MP4");

    // Killed mid-recording: the file in the spool is uploaded at the next start.
    let killed = publish(&format!("rtsp://{rtsp}/live/k"), &H264_AAC, "tcp", 30);
    assert!(
        poll_until(IO_TIMEOUT * 2, || !spooled(&spool, "k").is_empty()),
        "/live/k is being recorded into the spool:\n{}",
        server.log_text()
    );
    server.signal(libc::SIGKILL);
    let _ = server.wait_exit(IO_TIMEOUT);
    drop(killed);
    let left = spooled(&spool, "k");
    assert_eq!(left.len(), 1, "one file was growing: {left:?}");
    let bytes = std::fs::read(spool.join(&left[0][1..])).unwrap();
    let second = args("cache2");
    let second: Vec<&str> = second.iter().map(String::as_str).collect();
    let server = Server::serve(engine, &fx, &second);
    assert!(
        poll_until(IO_TIMEOUT, || objects(&bucket, "k").contains(&left[0])
            && spooled(&spool, "k").is_empty()),
        "the file left in the spool is uploaded at start: {:?} {:?}\n{}",
        objects(&bucket, "k"),
        spooled(&spool, "k"),
        server.log_text()
    );
    let key = Key::new(&left[0][1..]).unwrap();
    let len = bucket.head(&key).unwrap().unwrap().len;
    let uploaded = bucket.read_range(&key, 0..len).unwrap();
    assert_eq!(sha256_hex(&uploaded), sha256_hex(&bytes), "the object is the spool's file, whole");
    let frames = video_frame_count(&format!("http://{}{}/master.m3u8", server.addr(), left[0]));
    assert!(
        frames >= 50 && frames.is_multiple_of(50),
        "the recording killed mid-way plays its whole 2 s segments ({frames} frames of {} bytes)",
        bytes.len()
    );
}
