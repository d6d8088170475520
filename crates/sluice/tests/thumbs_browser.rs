//! Scrubbing thumbnails in headless Chromium: dash.js finds the MPD's image set and gives the
//! thumbnail for a time (`provideThumbnail`: the tile, the cell), and the library page's
//! timeline shows that thumbnail above itself when the mouse hovers over it (a real mouse move
//! through the DevTools protocol; the shown picture, screenshotted, matches the tile's cell:
//! PSNR above 25 dB). One engine: the players do not depend on it; the tiles are proven on every
//! engine by `thumbs.rs`.
//!
//! Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use serde_json::json;

/// 30 s of film, a thumbnail every 4 s in the default 5×5 grid of 160×90 cells: one tile.
const SECS: u32 = 30;
/// Where the mouse points and dash.js is asked: in the third thumbnail (8 s to 12 s).
const AT: f64 = 9.0;
const CELL: (u64, u64, u64, u64) = (320, 0, 160, 90);
const PSNR_BOUND_DB: f64 = 25.0;

fn film() -> &'static [u8] {
    static FILM: OnceLock<Vec<u8>> = OnceLock::new();
    FILM.get_or_init(|| {
        test_film(
            SECS,
            "-c:v libx264 -preset ultrafast -g 50 -sc_threshold 0 -pix_fmt yuv420p -c:a aac -b:a 64k",
        )
    })
}

fn ready(browser: &mut common::browser::Browser, expression: &str, what: &str) {
    assert!(poll_until(Duration::from_secs(30), || browser.eval(expression) == json!(true)), "{what}");
}

#[test]
fn dash_js_and_the_page_show_thumbnails() {
    let _turn = common::browser::ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fx = Fixture::new();
    fx.write("films/film.mp4", film());
    let server = Server::serve(
        &["--engine", "epoll", "--workers", "2"],
        &fx,
        &["--thumbnail-interval", "4s", "--no-rtsp"],
    );
    let addr = server.addr();
    let tile = fetch_get(addr, "/films/film.mp4/thumbs/tile-1.jpg", &[]);
    assert_eq!(tile.status, 200, "{}", tile.head_text());

    let mut browser = common::browser::Browser::start();
    browser.open_page(&format!("http://{addr}/films/"));

    // dash.js: the image set is a thumbnail track it reads.
    browser.eval("document.getElementById('via').value = 'dash'; document.querySelector('button.play[data-dash]').click(); true");
    ready(
        &mut browser,
        "!!(window.sluicePlayer && window.sluicePlayer.dash && window.sluicePlayer.state.renditions.length)",
        "dash.js initialised the stream",
    );
    let thumbnail = browser.eval(&format!(
        "new Promise(res => {{ const t = setTimeout(() => res('no answer'), 10000);
           window.sluicePlayer.dash.provideThumbnail({AT}, th => {{ clearTimeout(t);
             res(th ? {{url: th.url, x: th.x, y: th.y, w: th.width, h: th.height}} : null); }}); }})"
    ));
    assert!(
        thumbnail["url"].as_str().is_some_and(|u| u.ends_with("/films/film.mp4/thumbs/tile-1.jpg")),
        "{thumbnail}"
    );
    let cell =
        [&thumbnail["x"], &thumbnail["y"], &thumbnail["w"], &thumbnail["h"]].map(|v| v.as_u64().unwrap());
    assert_eq!((cell[0], cell[1], cell[2], cell[3]), CELL, "{thumbnail}");

    // The page: hovering over its timeline at 9 s shows the third thumbnail above it.
    ready(
        &mut browser,
        "!document.getElementById('scrub').hidden",
        "the timeline appears with its thumbnails",
    );
    let bar = browser.eval(
        "(() => { const r = document.getElementById('scrub').getBoundingClientRect();
                  return {x: r.left, y: r.top, w: r.width, h: r.height}; })()",
    );
    let [x, y, w, h] = ["x", "y", "w", "h"].map(|k| bar[k].as_f64().unwrap());
    let duration = browser.eval("window.sluicePlayer.dash ? document.getElementById('player').duration : 0");
    let duration = duration.as_f64().filter(|d| d.is_finite() && *d > 0.0).unwrap_or(f64::from(SECS));
    let mouse = json!({ "type": "mouseMoved", "x": x + w * AT / duration, "y": y + h / 2.0 });
    browser.call("Input.dispatchMouseEvent", mouse);
    ready(
        &mut browser,
        "document.getElementById('thumb').style.display === 'block'",
        "the thumbnail shows on hover",
    );
    let shown = browser.eval(
        "(() => { const t = document.getElementById('thumb'), r = t.getBoundingClientRect();
                  return {image: t.style.backgroundImage, position: t.style.backgroundPosition, at: t.dataset.at,
                          x: r.left + t.clientLeft, y: r.top + t.clientTop, w: t.clientWidth, h: t.clientHeight,
                          above: r.bottom <= document.getElementById('scrub').getBoundingClientRect().top}; })()",
    );
    assert!(shown["image"].as_str().unwrap().contains("/films/film.mp4/thumbs/tile-1.jpg"), "{shown}");
    assert_eq!(shown["position"], json!("-320px 0px"), "{shown}");
    assert_eq!(shown["at"], json!("8"), "{shown}");
    assert_eq!(shown["above"], json!(true), "above the timeline: {shown}");
    assert_eq!((shown["w"].as_u64(), shown["h"].as_u64()), (Some(CELL.2), Some(CELL.3)), "{shown}");
    let loaded = browser.eval(
        "new Promise(res => { const i = new Image(); i.onload = () => res(i.naturalWidth); i.onerror = () => res(0);
           i.src = '/films/film.mp4/thumbs/tile-1.jpg'; })",
    );
    assert_eq!(loaded, json!(800), "the tile loads in the page");

    // What the page shows is the tile's cell: a screenshot of the thumbnail against the tile.
    let clip = json!({ "x": shown["x"], "y": shown["y"], "width": CELL.2, "height": CELL.3, "scale": 1 });
    let shot = browser.call("Page.captureScreenshot", json!({ "format": "png", "clip": clip }));
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (shot_path, tile_path) = (dir.path().join("hover.png"), dir.path().join("tile-1.jpg"));
    std::fs::write(&shot_path, &png).unwrap();
    std::fs::write(&tile_path, &tile.body).unwrap();
    let mut cmd = tool("ffmpeg");
    cmd.args(["-nostdin", "-hide_banner", "-v", "info", "-i"]).arg(&tile_path).arg("-i").arg(&shot_path);
    let graph = format!(
        "[0:v]crop={}:{}:{}:{},format=yuv444p[a];[1:v]scale={}:{},format=yuv444p[b];[a][b]psnr",
        CELL.2, CELL.3, CELL.0, CELL.1, CELL.2, CELL.3
    );
    cmd.args(["-lavfi", &graph, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success(), "{err}");
    let db: f64 = err
        .rsplit("average:")
        .next()
        .and_then(|t| t.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap_or(f64::INFINITY);
    assert!(db > PSNR_BOUND_DB, "the hovered thumbnail is the tile's cell: {db:.1} dB");
}
