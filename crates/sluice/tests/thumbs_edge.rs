//! Scrubbing thumbnails from an S3-backed edge, on every engine, against a real SeaweedFS: the
//! MP4 in the bucket spans several 4 MiB slices with its `moov` at the end, so the keyframes
//! ffmpeg decodes are read through the slice cache in a job. The listings agree, the tile is a
//! JPEG of the stated size whose thumbnails match the frames ffmpeg extracts at their times
//! (PSNR above 25 dB), a second request runs no ffmpeg, and the tile is kept in the bucket
//! beside the film: a second edge with an empty cache reads it back instead of making it.
//!
//! Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::edge::{engine_tag, multi_slice_clip as big_mp4, put_object, start_edge};
use common::*;

engine_matrix!(an_edge_makes_keeps_and_finds_thumbnails);

/// 6 s of film, a thumbnail every 2 s in the default 5×5 grid of 160-pixel cells.
const THUMBNAILS: usize = 3;
const TILE_W: u32 = 800;
const TILE_H: u32 = 450;
const PSNR_BOUND_DB: f64 = 25.0;

fn ok(addr: SocketAddr, target: &str) -> Response {
    let r = fetch_get(addr, target, &[]);
    assert_eq!(r.status, 200, "{target}: {}", r.head_text());
    r
}

/// The PSNR of the 160×90 cell at `x` of the tile at `tile` against the film's frame at `secs`.
fn psnr(film: &std::path::Path, secs: u32, tile: &std::path::Path, x: u32) -> f64 {
    let mut cmd = tool("ffmpeg");
    cmd.args(["-nostdin", "-v", "info", "-hide_banner", "-i"]).arg(tile);
    cmd.args(["-ss", &secs.to_string(), "-i"]).arg(film);
    let graph = format!(
        "[0:v]crop=160:90:{x}:0,format=yuv420p[a];[1:v]trim=end_frame=1,scale=160:90,setsar=1,format=yuv420p[b];[a][b]psnr"
    );
    cmd.args(["-lavfi", &graph, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success(), "ffmpeg psnr: {err}");
    let average = err.rsplit("average:").next().and_then(|t| t.split_whitespace().next()).unwrap();
    average.parse().unwrap_or(f64::INFINITY)
}

fn an_edge_makes_keeps_and_finds_thumbnails(engine: &[&str]) {
    // A prefix of its own per run and engine: tiles kept by an earlier run would be found.
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let location = format!("thumbsedge/{}-{}-{nanos}", engine_tag(engine), std::process::id());
    put_object(&location, "films/clip.mp4", big_mp4());
    let cache = tempfile::tempdir().unwrap();
    let edge = start_edge(engine, &location, cache.path(), &["--thumbnail-interval", "2s", "--no-rtsp"]);
    let addr = edge.addr();

    let playlist = ok(addr, "/films/clip.mp4/thumbs/images.m3u8").body_text();
    assert!(playlist.contains("#EXT-X-IMAGES-ONLY"), "{playlist}");
    assert_eq!(playlist.matches("#EXT-X-TILES:RESOLUTION=160x90,LAYOUT=5x5,DURATION=2.000").count(), 1);
    let vtt = ok(addr, "/films/clip.mp4/thumbs/thumbnails.vtt").body_text();
    assert_eq!(vtt.matches("tile-1.jpg#xywh=").count(), THUMBNAILS, "{vtt}");
    let mpd = ok(addr, "/films/clip.mp4/manifest.mpd").body_text();
    assert!(mpd.contains("http://dashif.org/thumbnail_tile\" value=\"5x5\""), "{mpd}");
    assert!(ok(addr, "/films/clip.mp4/master.m3u8").body_text().contains("#EXT-X-IMAGE-STREAM-INF:"));

    let tile = ok(addr, "/films/clip.mp4/thumbs/tile-1.jpg");
    assert_eq!(tile.header("content-type"), Some("image/jpeg"));
    let dir = tempfile::tempdir().unwrap();
    let (tile_path, film_path) = (dir.path().join("tile-1.jpg"), dir.path().join("clip.mp4"));
    std::fs::write(&tile_path, &tile.body).unwrap();
    std::fs::write(&film_path, big_mp4()).unwrap();
    let mut probe = tool("ffprobe");
    probe
        .args(["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0"])
        .arg(&tile_path);
    let (status, out, _) = run_bounded(&mut probe, Duration::from_secs(30));
    assert!(status.success());
    assert_eq!(String::from_utf8_lossy(&out).trim(), format!("mjpeg,{TILE_W},{TILE_H}"));
    for i in 0..THUMBNAILS as u32 {
        let db = psnr(&film_path, 2 * i, &tile_path, 160 * i);
        assert!(db > PSNR_BOUND_DB, "thumbnail {i}: {db:.1} dB against its frame");
    }
    assert_eq!(ok(addr, "/films/clip.mp4/thumbs/tile-1.jpg").body, tile.body);
    assert_eq!(metric(&edge.scrape(), "sluice_thumbnail_decoder_runs_total"), 1);
    drop(edge);

    // Another edge, an empty cache: the tile is in the bucket.
    let cache = tempfile::tempdir().unwrap();
    let edge = start_edge(engine, &location, cache.path(), &["--thumbnail-interval", "2s", "--no-rtsp"]);
    assert_eq!(ok(edge.addr(), "/films/clip.mp4/thumbs/tile-1.jpg").body, tile.body);
    let scraped = edge.scrape();
    assert_eq!(metric(&scraped, "sluice_thumbnail_decoder_runs_total"), 0);
    assert_eq!(metric(&scraped, "sluice_thumbnail_store_hits_total"), 1);
    // Under a reserved name: not listed, not served.
    assert!(!ok(edge.addr(), "/films/").body_text().contains(".sluice-derived"));
    assert_eq!(fetch_get(edge.addr(), "/films/.sluice-derived.clip.mp4.x", &[]).status, 404);
}
