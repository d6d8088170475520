//! The routes' tests: what the page and `/streams` offer of what plays.

use super::*;
use crate::library::catalogue::Catalogue;
use crate::library::OwnedRequest;
use std::time::Duration;

fn app(dir: &std::path::Path) -> Arc<App> {
    let library = Library::local(dir, Catalogue::new(1 << 20, Duration::from_secs(6))).unwrap();
    let settings = AppSettings {
        limits: Limits::default(),
        max_ranges: 4,
        access_log: false,
        bench: false,
        rtsp: Some(SocketAddr::from(([127, 0, 0, 1], 8554))),
        engine: EngineConfig::default(),
    };
    Arc::new(App::new(Arc::new(library), settings, Counters::new()))
}

#[test]
fn the_page_and_offers_name_only_what_plays() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sluice-demo.mp4"), dir.path().join("demo.mp4"))
        .unwrap();
    std::fs::write(dir.path().join("broken.mp4"), b"not a film").unwrap();
    let app = app(dir.path());
    let demo = app.offers("demo.mp4", None);
    assert!(demo.rtsp && demo.video.is_some(), "{demo:?}");
    let broken = app.offers("broken.mp4", None);
    assert!(broken.video.is_none() && !broken.rtsp, "{broken:?}");
    assert!(broken.refusal.as_deref().is_some_and(|r| r.contains("not a playable MP4")), "{broken:?}");
    assert_eq!(app.offers("missing.mp4", None), Offers::default());
    let get = OwnedRequest::of(&Request {
        method: Method::Get,
        target: "/",
        version: sluice_proto::http::Version::Http11,
        headers: &[],
    });
    let page = get.with(|req| app.answer(req, &normalize("/").unwrap(), true)).unwrap();
    let Body::Bytes(html) = page.body else { panic!("a page") };
    let html = String::from_utf8_lossy(&html);
    assert!(html.contains("data-hls=\"./demo.mp4/master.m3u8\""), "{html}");
    assert!(html.contains("rtsp://127.0.0.1:8554/demo.mp4"), "{html}");
    assert!(!html.contains("broken.mp4/master.m3u8") && !html.contains("8554/broken.mp4"), "{html}");
    // The file that cannot play says why, with no Play button to a black player.
    assert!(!html.contains("data-src=\"./broken.mp4\""), "{html}");
    assert!(html.contains("<div class=\"why\">Cannot be played in the browser: cannot package broken.mp4 as HLS: not a playable MP4"), "{html}");
    // Indexed once for the page and the offers: the tables and the description.
    let stats = app.library().catalogue().stats();
    assert_eq!(stats.misses.load(Ordering::Relaxed), 4, "two files, two entries each");
}
