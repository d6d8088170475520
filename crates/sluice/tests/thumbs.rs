//! Scrubbing thumbnails end to end, on every engine: the HLS image playlist, the WebVTT
//! thumbnails track and the MPD's image set agree (tiles = ⌈duration ÷ interval ÷ thumbnails
//! per tile⌉, the same grid and sizes); each tile is a JPEG of the stated size; each thumbnail
//! matches the frame ffmpeg extracts at its time (the tile's cell against that frame scaled the
//! same way, PSNR above 25 dB, while the frame of the next thumbnail stays below it: the bound
//! tells neighbours apart); concurrent and repeated requests run ffmpeg once per tile (the
//! `/metrics` counter), a restarted server reads the kept tiles back from the library instead,
//! and the kept tiles are reserved names no client can request; without ffmpeg, thumbnails are
//! refused (503 with the reason), manifests leave them out and `serve --check` says so.
//!
//! The film is made by ffmpeg for the test: 30 s of `testsrc2` with a keyframe every 2 s, so
//! the 4 s thumbnails fall on keyframes and the frame extracted at a thumbnail's time is the
//! one the server decoded. Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;

/// Seconds of film, seconds between thumbnails, the grid and a thumbnail's size.
const SECS: u32 = 30;
const INTERVAL: u32 = 4;
const COLUMNS: u32 = 3;
const ROWS: u32 = 2;
const CELL_W: u32 = 160;
const CELL_H: u32 = 90;

/// The bound a thumbnail's PSNR against its own frame must pass, and its neighbour's fail:
/// JPEG at the quality the server asks for keeps a 160×90 `testsrc2` cell above 30 dB, while
/// two frames 4 s apart differ by far more than that allows.
const PSNR_BOUND_DB: f64 = 25.0;

/// The server arguments that lay thumbnails out as the constants say.
const LAYOUT: &[&str] = &["--thumbnail-interval", "4s", "--thumbnail-width", "160", "--no-rtsp"];

fn film() -> &'static [u8] {
    static FILM: OnceLock<Vec<u8>> = OnceLock::new();
    FILM.get_or_init(|| {
        test_film(SECS, "-c:v libx264 -preset ultrafast -bf 2 -g 50 -keyint_min 50 -sc_threshold 0 -pix_fmt yuv420p -c:a aac -b:a 64k")
    })
}

fn ok(addr: SocketAddr, target: &str) -> Response {
    let r = fetch_get(addr, target, &[]);
    assert_eq!(r.status, 200, "{target}: {}", r.head_text());
    r
}

/// A server of `fx` with the layout, the grid from a config file (rows and columns have no
/// flag) kept outside the library.
fn serve(engine: &[&str], fx: &Fixture, extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sluice.toml");
    std::fs::write(&config, format!("[library]\nthumbnail_columns = {COLUMNS}\nthumbnail_rows = {ROWS}\n"))
        .unwrap();
    let config = config.display().to_string();
    let mut args = vec!["--config", &config];
    args.extend_from_slice(LAYOUT);
    args.extend_from_slice(extra);
    Server::serve(engine, fx, &args)
}

/// `(width, height)` of the picture ffprobe finds in `path`, and its codec.
fn picture(path: &Path) -> (u32, u32, String) {
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-show_entries", "stream=codec_name,width,height", "-of", "csv=p=0"]).arg(path);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    assert!(status.success(), "ffprobe: {}", String::from_utf8_lossy(&err));
    let text = String::from_utf8_lossy(&out);
    let f: Vec<&str> = text.trim().split(',').collect();
    (f[1].parse().unwrap(), f[2].parse().unwrap(), f[0].to_string())
}

/// The PSNR in dB of the `CELL_W × CELL_H` cell at `(x, y)` of the tile at `tile` against the
/// film's frame at `secs`, scaled to the cell as the server scales it.
fn psnr(film: &Path, secs: u32, tile: &Path, (x, y): (u32, u32)) -> f64 {
    let mut cmd = tool("ffmpeg");
    cmd.args(["-nostdin", "-v", "info", "-hide_banner", "-i"]).arg(tile);
    cmd.args(["-ss", &secs.to_string(), "-i"]).arg(film);
    let graph = format!(
        "[0:v]crop={CELL_W}:{CELL_H}:{x}:{y},format=yuv420p[a];\
         [1:v]trim=end_frame=1,scale={CELL_W}:{CELL_H},setsar=1,format=yuv420p[b];[a][b]psnr"
    );
    cmd.args(["-lavfi", &graph, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success(), "ffmpeg psnr: {err}");
    let average = err.rsplit("average:").next().and_then(|t| t.split_whitespace().next()).unwrap();
    if average == "inf" {
        return f64::INFINITY;
    }
    average.parse().unwrap_or_else(|_| panic!("no PSNR in: {err}"))
}

/// `/streams`' item for the film.
fn stream_item(server: &Server) -> serde_json::Value {
    let mut c = Conn::open(server.admin_addr());
    c.send(request("GET", "/streams", &[]));
    let streams: serde_json::Value = serde_json::from_slice(&c.response().body).unwrap();
    streams["items"].as_array().unwrap().iter().find(|i| i["path"] == "/films/film.mp4").unwrap().clone()
}

fn thumbnails_agree_and_match_their_frames(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("films/film.mp4", film());
    let film_path = fx.path("films/film.mp4");
    let server = serve(engine, &fx, &[]);
    let addr = server.addr();
    let thumbnails = SECS.div_ceil(INTERVAL) as usize;
    let per_tile = (COLUMNS * ROWS) as usize;
    let tiles = thumbnails.div_ceil(per_tile);
    let (tile_w, tile_h) = (CELL_W * COLUMNS, CELL_H * ROWS);

    // The master's image stream, and its image playlist.
    let master = ok(addr, "/films/film.mp4/master.m3u8").body_text();
    let line = master.lines().find(|l| l.starts_with("#EXT-X-IMAGE-STREAM-INF:")).expect(&master);
    assert!(line.contains(&format!("RESOLUTION={tile_w}x{tile_h}")), "{line}");
    assert!(line.contains("CODECS=\"jpeg\"") && line.contains("URI=\"thumbs/images.m3u8\""), "{line}");
    let r = ok(addr, "/films/film.mp4/thumbs/images.m3u8");
    assert_eq!(r.header("content-type"), Some("application/vnd.apple.mpegurl"));
    let text = r.body_text();
    assert!(text.contains("\n#EXT-X-IMAGES-ONLY\n"), "{text}");
    let Ok(m3u8_rs::Playlist::MediaPlaylist(p)) = m3u8_rs::parse_playlist_res(&r.body) else {
        panic!("not a media playlist: {text}")
    };
    assert_eq!(p.segments.len(), tiles, "{text}");
    let tiles_tag =
        format!("#EXT-X-TILES:RESOLUTION={CELL_W}x{CELL_H},LAYOUT={COLUMNS}x{ROWS},DURATION={INTERVAL}.000");
    assert_eq!(text.matches(&tiles_tag).count(), tiles, "{text}");
    let listed: f32 = p.segments.iter().map(|s| s.duration).sum();
    assert!((listed - SECS as f32).abs() < 0.1, "{text}");

    // The WebVTT track: a cue per thumbnail, each naming its tile and cell.
    let r = ok(addr, "/films/film.mp4/thumbs/thumbnails.vtt");
    assert!(r.header("content-type").unwrap().starts_with("text/vtt"));
    let vtt = r.body_text();
    assert!(vtt.starts_with("WEBVTT\n"), "{vtt}");
    let cues: Vec<(u32, String, (u32, u32))> = vtt
        .split("\n\n")
        .skip(1)
        .map(|cue| {
            let mut lines = cue.lines();
            let time = lines.next().unwrap();
            let start = time.split(" --> ").next().unwrap();
            let secs: u32 = start[6..8].parse::<u32>().unwrap() + 60 * start[3..5].parse::<u32>().unwrap();
            let (tile, xywh) = lines.next().unwrap().split_once("#xywh=").unwrap();
            let v: Vec<u32> = xywh.split(',').map(|n| n.parse().unwrap()).collect();
            assert_eq!((v[2], v[3]), (CELL_W, CELL_H), "{cue}");
            (secs, tile.to_string(), (v[0], v[1]))
        })
        .collect();
    assert_eq!(cues.len(), thumbnails, "{vtt}");
    let vtt_tiles: std::collections::BTreeSet<&str> = cues.iter().map(|c| c.1.as_str()).collect();
    assert_eq!(vtt_tiles.len(), tiles);
    assert!(p.segments.iter().all(|s| vtt_tiles.contains(s.uri.as_str())));

    // The MPD's image set: the same grid, a tile per tile's duration.
    let mpd = ok(addr, "/films/film.mp4/manifest.mpd").body_text();
    let set = &mpd[mpd.find("contentType=\"image\"").expect(&mpd)..];
    let set = &set[..set.find("</AdaptationSet>").unwrap()];
    assert!(set.contains("mimeType=\"image/jpeg\""), "{set}");
    assert!(
        set.contains(&format!("schemeIdUri=\"http://dashif.org/thumbnail_tile\" value=\"{COLUMNS}x{ROWS}\""))
    );
    assert!(set.contains(&format!("width=\"{tile_w}\" height=\"{tile_h}\"")), "{set}");
    let tile_ms = INTERVAL as usize * per_tile * 1000;
    assert!(set.contains(&format!("duration=\"{tile_ms}\"")) && set.contains("startNumber=\"1\""), "{set}");
    assert!(set.contains("media=\"thumbs/tile-$Number$.jpg\""), "{set}");
    assert_eq!((SECS as usize * 1000).div_ceil(tile_ms), tiles, "the MPD's template spans the tiles");

    // Every tile at once from three clients each: one ffmpeg run a tile.
    let bodies: Vec<Vec<(String, Vec<u8>)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    p.segments
                        .iter()
                        .map(|seg| {
                            (seg.uri.clone(), ok(addr, &format!("/films/film.mp4/thumbs/{}", seg.uri)).body)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(bodies.iter().all(|b| *b == bodies[0]), "every client got the same tiles");
    assert_eq!(metric(&server.scrape(), "sluice_thumbnail_decoder_runs_total"), tiles as u64);
    let dir = tempfile::tempdir().unwrap();
    for (uri, jpeg) in &bodies[0] {
        let path = dir.path().join(uri);
        std::fs::write(&path, jpeg).unwrap();
        assert_eq!(picture(&path), (tile_w, tile_h, "mjpeg".to_string()), "{uri}");
    }
    // Each thumbnail is its frame; the next thumbnail's frame is not.
    for (i, (secs, uri, cell)) in cues.iter().enumerate() {
        let tile = dir.path().join(uri);
        let own = psnr(&film_path, *secs, &tile, *cell);
        assert!(own > PSNR_BOUND_DB, "thumbnail {i} at {secs} s: {own:.1} dB against its frame");
        if let Some((next, ..)) = cues.get(i + 1) {
            let other = psnr(&film_path, *next, &tile, *cell);
            assert!(
                other < PSNR_BOUND_DB,
                "thumbnail {i} at {secs} s is as close to {next} s: {other:.1} dB"
            );
        }
    }
    // `/streams` offers the track and the image playlist; the page's Play button names the track.
    for (key, url) in [("thumbnails_vtt", "thumbs/thumbnails.vtt"), ("thumbnails_hls", "thumbs/images.m3u8")]
    {
        let offered = stream_item(&server)[key].as_str().map(str::to_string);
        assert_eq!(offered, Some(format!("http://{addr}/films/film.mp4/{url}")), "{key}");
    }
    assert!(ok(addr, "/films/").body_text().contains("data-thumbs=\"./film.mp4/thumbs/thumbnails.vtt\""));
    // Asked again: from memory, no ffmpeg; a tile past the last is not there.
    let again = ok(addr, "/films/film.mp4/thumbs/tile-1.jpg");
    assert_eq!(again.body, bodies[0][0].1);
    let etag = again.header("etag").unwrap().to_string();
    assert_eq!(fetch_get(addr, "/films/film.mp4/thumbs/tile-1.jpg", &[("If-None-Match", &etag)]).status, 304);
    assert_eq!(fetch_get(addr, &format!("/films/film.mp4/thumbs/tile-{}.jpg", tiles + 1), &[]).status, 404);
    assert_eq!(metric(&server.scrape(), "sluice_thumbnail_decoder_runs_total"), tiles as u64);

    // Kept beside the film under reserved names: never served, never listed.
    let kept: Vec<String> = std::fs::read_dir(fx.path("films"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".sluice-derived.film.mp4."))
        .collect();
    assert_eq!(kept.len(), tiles, "{kept:?}");
    assert_eq!(fetch_get(addr, &format!("/films/{}", kept[0]), &[]).status, 404);
    assert!(!ok(addr, "/films/").body_text().contains(".sluice-derived"));
    drop(server);

    // A new server finds them made: no ffmpeg run.
    let server = serve(engine, &fx, &[]);
    let tile = ok(server.addr(), "/films/film.mp4/thumbs/tile-2.jpg");
    assert!(tile.body == bodies[0][1].1);
    let scraped = server.scrape();
    assert_eq!(metric(&scraped, "sluice_thumbnail_decoder_runs_total"), 0);
    assert_eq!(metric(&scraped, "sluice_thumbnail_store_hits_total"), 1);
}

fn without_ffmpeg_thumbnails_are_refused(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("films/film.mp4", film());
    let server = serve(engine, &fx, &["--ffmpeg", "/nonexistent/ffmpeg"]);
    let addr = server.addr();
    for name in ["tile-1.jpg", "images.m3u8", "thumbnails.vtt"] {
        let r = fetch_get(addr, &format!("/films/film.mp4/thumbs/{name}"), &[]);
        assert_eq!(r.status, 503, "{name}: {}", r.head_text());
        assert!(r.body_text().contains("ffmpeg"), "{name}: the reason: {}", r.body_text());
    }
    assert!(!ok(addr, "/films/film.mp4/master.m3u8").body_text().contains("EXT-X-IMAGE-STREAM-INF"));
    assert!(!ok(addr, "/films/film.mp4/manifest.mpd").body_text().contains("thumbnail_tile"));
    assert!(stream_item(&server)["thumbnails_vtt"].is_null(), "not offered without ffmpeg");
    // The rest plays.
    ok(addr, "/films/film.mp4/video-iframes.m3u8");
    assert_eq!(metric(&server.scrape(), "sluice_thumbnail_decoder_runs_total"), 0);
}

/// A rendition set's master and MPD name its first rendition's thumbnails, which answer.
fn a_set_offers_its_first_renditions_thumbnails(engine: &[&str]) {
    let fx = Fixture::new();
    // The same film twice: renditions whose keyframes line up.
    fx.write("films/movie.360p.mp4", film());
    fx.write("films/movie.180p.mp4", film());
    let server = serve(engine, &fx, &[]);
    let addr = server.addr();
    let master = ok(addr, "/films/movie.set/master.m3u8").body_text();
    let lines: Vec<&str> = master.lines().filter(|l| l.starts_with("#EXT-X-IMAGE-STREAM-INF:")).collect();
    assert_eq!(lines.len(), 1, "one image stream: {master}");
    let uri = lines[0].split("URI=\"").nth(1).unwrap().trim_end_matches('"');
    assert!(uri.starts_with("../movie.") && uri.ends_with(".mp4/thumbs/images.m3u8"), "{uri}");
    let playlist = ok(addr, &format!("/films/movie.set/{uri}")).body_text();
    assert!(playlist.contains("#EXT-X-IMAGES-ONLY"), "{playlist}");
    let mpd = ok(addr, "/films/movie.set/manifest.mpd").body_text();
    let media = mpd.split("contentType=\"image\"").nth(1).expect(&mpd).split("media=\"").nth(1).unwrap();
    let media = &media[..media.find('"').unwrap()];
    assert_eq!(
        media.replace("$Number$", "1").replace("images.m3u8", ""),
        uri.replace("images.m3u8", "tile-1.jpg")
    );
    let tile = fetch_get(addr, &format!("/films/movie.set/{}", media.replace("$Number$", "1")), &[]);
    assert_eq!((tile.status, tile.header("content-type")), (200, Some("image/jpeg")), "{}", tile.head_text());
}

engine_matrix!(
    thumbnails_agree_and_match_their_frames,
    without_ffmpeg_thumbnails_are_refused,
    a_set_offers_its_first_renditions_thumbnails
);

#[test]
fn serve_check_says_whether_thumbnails_are_made() {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--check", "--ffmpeg", "/nonexistent/ffmpeg"]);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success(), "{err}");
    assert!(err.contains("thumbnails are off (503)") && err.contains("/nonexistent/ffmpeg"), "{err}");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["serve", "--check", "--ffmpeg", require_tool("ffmpeg", "ffmpeg").to_str().unwrap()]);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.contains("thumbnails: made by"), "{err}");
}
