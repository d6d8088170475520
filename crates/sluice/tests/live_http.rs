//! Live HLS and DASH of published streams, on every engine: ffmpeg publishes H.264 and AAC over
//! RTSP/TCP to `/live/x` and H.265 and Opus over RTSP/UDP to `/live/h`; while they are live, the
//! playlists are live ones (program dates, no playlist type nor `EXT-X-ENDLIST`), the MPD is
//! dynamic, and ffprobe reads the HLS stream live and counts the frames published; once the
//! publishers finish, the playlists end and the MPD turns static, and ffprobe reads every
//! published frame of both streams over DASH and HLS; the admin dashboard charts the two live
//! paths and what each brings in. With `publish_takeover`, a second
//! publisher of a path takes it over and the first is cut off.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use common::publisher::*;
use common::*;

rtsp_matrix!(live_paths_play_over_hls_and_dash);

/// Published: 4 s at 25 fps (`PUBLISHED_FRAMES`), a keyframe every 25 frames.
const PUBLISHED_SECS: u32 = 4;

/// The first sample the admin listener's dashboard stream (`/events`) holds, in its history or
/// within 5 s, that `wanted` accepts; else what the samples said of live paths.
fn dashboard_sample(
    server: &Server,
    wanted: impl Fn(&serde_json::Value) -> bool,
) -> Result<serde_json::Value, Vec<String>> {
    use std::io::{BufRead, Write};
    let mut s = std::net::TcpStream::connect(server.admin_addr()).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_millis(500))).unwrap();
    s.write_all(&get("/events", &[])).unwrap();
    let mut events = std::io::BufReader::new(s);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let (mut line, mut seen) = (String::new(), Vec::new());
    while std::time::Instant::now() < deadline {
        line.clear();
        match events.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {
                let Some(data) = line.strip_prefix("data: ") else { continue };
                let Ok(data) = serde_json::from_str::<serde_json::Value>(data) else { continue };
                // The history first (an array of the samples so far), then a sample a second.
                let samples = match data {
                    serde_json::Value::Array(history) => history,
                    sample => vec![sample],
                };
                for sample in samples {
                    if wanted(&sample) {
                        return Ok(sample);
                    }
                    seen.push(sample["live"].to_string());
                }
            }
            Err(_) => {}
        }
    }
    Err(seen)
}

fn text(server: &Server, target: &str) -> (u16, String) {
    let r = fetch_get(server.addr(), target, &[]);
    (r.status, String::from_utf8_lossy(&r.body).into_owned())
}

fn live_paths_play_over_hls_and_dash(engine: &[&str]) {
    let fx = Fixture::new();
    let config = b"[rtsp]\npublish_takeover = true\n\n[[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n";
    fx.write("sluice.toml", config);
    let config = fx.path("sluice.toml");
    let server = Server::serve(engine, &fx, &["--config", config.to_str().unwrap()]);
    let rtsp = server.rtsp_addr();
    let http = server.addr();
    let mut h264 = publish(&format!("rtsp://{rtsp}/live/x"), &H264_AAC, "tcp", PUBLISHED_SECS);
    let mut hevc = publish(&format!("rtsp://{rtsp}/live/h"), &H265_OPUS, "udp", PUBLISHED_SECS);

    // The first segment is complete at the second keyframe (2 s in); until then, 503.
    assert!(
        poll_until(IO_TIMEOUT, || text(&server, "/live/x/video.m3u8").0 == 200),
        "/live/x's playlist comes once a segment is complete: {:?}\n{}",
        text(&server, "/live/x/video.m3u8"),
        server.log_text()
    );
    let master_url = format!("http://{http}/live/x/master.m3u8");
    let live_read = std::thread::spawn(move || video_frame_count(&master_url));
    let (_, master) = text(&server, "/live/x/master.m3u8");
    assert!(master.contains("RESOLUTION=320x180") && master.contains("avc1."), "{master}");
    let (_, playlist) = text(&server, "/live/x/video.m3u8");
    // (Its media sequence is 0 yet, which the tag's absence says: RFC 8216 §4.3.3.2.)
    for tag in ["#EXT-X-PROGRAM-DATE-TIME:", "#EXT-X-MAP:URI=\"video-init.mp4\"", "video-seg-0.m4s"] {
        assert!(playlist.contains(tag), "a live playlist has {tag}:\n{playlist}");
    }
    assert!(!playlist.contains("#EXT-X-ENDLIST") && !playlist.contains("PLAYLIST-TYPE"), "{playlist}");
    let (_, mpd) = text(&server, "/live/x/manifest.mpd");
    assert!(mpd.contains("type=\"dynamic\"") && mpd.contains("availabilityStartTime="), "{mpd}");
    assert!(mpd.contains("urn:mpeg:dash:utc:direct:2014"), "the MPD carries the server's clock:\n{mpd}");
    assert_eq!(text(&server, "/live/nobody/master.m3u8").0, 404, "a path nobody publishes");
    // /streams says what the path brings in and where to watch it.
    let streams: serde_json::Value = serde_json::from_str(&server.streams()).unwrap();
    let entry = streams["live"].as_array().unwrap().iter().find(|e| e["path"] == "/live/x").unwrap();
    let rate = entry["bit_rate"].as_u64().unwrap();
    assert!((50_000..5_000_000).contains(&rate), "a 320x180 test source's bit rate: {entry}");
    assert_eq!(
        (entry["hls"].as_str(), entry["dash"].as_str()),
        (Some("/live/x/master.m3u8"), Some("/live/x/manifest.mpd"))
    );
    // The dashboard charts the live paths and what each brings in.
    let sample = dashboard_sample(&server, |s| {
        s["live"]["paths"].as_f64() == Some(2.0)
            && s["live"]["kbps"]["/live/x"].as_f64().is_some_and(|k| k > 0.0)
    });
    if let Err(seen) = sample {
        panic!("no dashboard sample counts two live paths and /live/x's kb/s: {seen:?}");
    }

    assert!(h264.finished() && hevc.finished(), "the publishers finished cleanly");
    // ffprobe joined at the first segment and read to the end of the stream: every frame.
    let read = live_read.join().unwrap();
    assert!(
        read <= PUBLISHED_FRAMES && read + 25 >= PUBLISHED_FRAMES,
        "ffprobe read {read} of {PUBLISHED_FRAMES} frames live over HLS"
    );

    // Ended: the playlists end, the MPD is static, and every frame is there over both.
    assert!(
        poll_until(IO_TIMEOUT, || text(&server, "/live/x/video.m3u8").1.contains("#EXT-X-ENDLIST")),
        "the playlist ends with the stream:\n{}",
        text(&server, "/live/x/video.m3u8").1
    );
    let (_, mpd) = text(&server, "/live/x/manifest.mpd");
    assert!(mpd.contains("type=\"static\"") && mpd.contains("presentationTimeOffset="), "{mpd}");
    assert_eq!(
        video_frame_count(&format!("http://{http}/live/x/manifest.mpd")),
        PUBLISHED_FRAMES,
        "H.264 over DASH"
    );
    assert_eq!(
        video_frame_count(&format!("http://{http}/live/x/master.m3u8")),
        PUBLISHED_FRAMES,
        "H.264 over HLS"
    );
    // Over UDP a datagram may be lost even on loopback: a picture at most.
    let h265 = video_frame_count(&format!("http://{http}/live/h/manifest.mpd"));
    assert!((PUBLISHED_FRAMES - 1..=PUBLISHED_FRAMES).contains(&h265), "H.265 over DASH: {h265}");
    assert!(text(&server, "/live/h/master.m3u8").1.contains("hvc1."), "HEVC is named hvc1");

    // With `publish_takeover`, a second publisher takes the path over and the first is cut off.
    let publisher_of =
        |path: &str| live_entry(&server, path).map(|e| e["publisher"].as_str().unwrap().to_string());
    let mut first = publish(&format!("rtsp://{rtsp}/live/t"), &H264_AAC, "tcp", 30);
    assert!(poll_until(IO_TIMEOUT, || publisher_of("/live/t").is_some()), "{}", server.streams());
    let was = publisher_of("/live/t").unwrap();
    let mut second = publish(&format!("rtsp://{rtsp}/live/t"), &H264_AAC, "tcp", 2);
    assert!(
        poll_until(IO_TIMEOUT, || publisher_of("/live/t").is_some_and(|p| p != was)),
        "the second publisher has the path: {}",
        server.streams()
    );
    assert!(!first.finished(), "the first publisher was cut off before its 30 s");
    assert!(second.finished(), "the second published to its end");
}
