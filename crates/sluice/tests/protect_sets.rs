//! Encrypted rendition sets end to end on every engine: two renditions made by ffmpeg at test
//! time (`movie.180p.mp4`, `movie.90p.mp4`, 2 s, a keyframe a second) under `[[protect]]`
//! prefixes, the set keyed by its own keys-file line (`cenc`) or by the master key over its path
//! (`cbcs`).
//!
//! ffmpeg decrypts both renditions over DASH and HLS (each rendition's init segment and segments,
//! as the set's MPD and multivariant playlist list them, joined) with the set's key and counts
//! every video frame of each MP4; the wrong key fails to decode. The MPD signals the one KID on
//! each `AdaptationSet`, the multivariant playlist in `EXT-X-SESSION-KEY`; the set's licence
//! answers its KID (and no other) to a viewer with the set's signed URL, 403 to anyone else; a
//! sidecar set whose files are not named as renditions is refused (409), their key could differ;
//! the page offers the set with its scheme; an `aes-128` set's session key is the set's key, its
//! renditions'. Chromium plays the `cbcs` set to the end through
//! dash.js and hls.js with ClearKey.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine as _;
use common::protect::{b64url, body, decrypted_frames, licence, protection_folder, unhex};
use common::*;

const KID: &str = "0123456789abcdef0123456789abcdef";
const KEY: &str = "73657420636f6e74656e74206b657921";
/// The key of `/films/`'s other titles (a prefix line the set's own line beats).
const PREFIX_KID: &str = "00112233445566778899aabbccddeeff";
const PREFIX_KEY: &str = "6b65792d6f662d7468652d64656d6f21";
const WRONG_KEY: &str = "ffeeddccbbaa99887766554433221100";
const MASTER: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
const SIGNING_KEY: &str = "a-signing-key-for-the-set-tests";

/// The renditions, highest first: name, size, and the clip ffmpeg made (once per test binary).
fn renditions() -> &'static [(&'static str, Vec<u8>); 2] {
    static CLIPS: OnceLock<[(&str, Vec<u8>); 2]> = OnceLock::new();
    CLIPS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let make = |size: &str| {
            let out = dir.path().join(format!("{size}.mp4"));
            let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
            cmd.args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i"])
                .arg(format!("testsrc2=size={size}:rate=25"))
                .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2"])
                .args(["-c:v", "libx264", "-preset", "ultrafast", "-g", "25", "-keyint_min", "25"])
                .args(["-level:v", "3.0", "-sc_threshold", "0", "-pix_fmt", "yuv420p"])
                .args(["-c:a", "aac", "-b:a", "48k", "-movflags", "+faststart"])
                .arg(&out);
            let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
            assert!(status.success(), "ffmpeg made no {size} clip: {}", String::from_utf8_lossy(&err));
            std::fs::read(&out).unwrap()
        };
        [("movie.180p.mp4", make("320x180")), ("movie.90p.mp4", make("160x90"))]
    })
}

/// The video frames of an MP4, from its sample table.
fn frames_of(mp4: &[u8]) -> String {
    let file = sluice_media::Mp4File::from_bytes(mp4).unwrap();
    let video = file.tracks.iter().find(|t| matches!(t.kind, sluice_media::TrackKind::H264(_))).unwrap();
    video.samples.len().to_string()
}

/// The set under `/films/` (`cenc`, its keys-file line), `/derived/` (`cbcs`, the master key),
/// `/aes/` (`aes-128`) and `/locked/` (`cenc` behind signed URLs), a sidecar set of other names
/// under `/films/`; the key files and the configuration in the returned directory.
fn set_server(engine: &[&str]) -> (Server, Fixture, PathBuf) {
    let fx = Fixture::new();
    for dir in ["films", "derived", "locked", "aes"] {
        for (name, bytes) in renditions() {
            fx.write(&format!("{dir}/{name}"), bytes);
        }
    }
    fx.write("films/odd-a.mp4", &renditions()[0].1);
    fx.write("films/odd-b.mp4", &renditions()[1].1);
    fx.write("films/odd.set.toml", b"files = [\"odd-a.mp4\", \"odd-b.mp4\"]\n");
    let keys =
        format!("/films/ {PREFIX_KID} {PREFIX_KEY}\n/films/movie.set {KID} {KEY}\n/locked/ {KID} {KEY}\n");
    let dir = protection_folder(&keys, MASTER, SIGNING_KEY);
    let config = dir.join("sluice.toml").display().to_string();
    let server = Server::serve(engine, &fx, &["--config", &config, "--hls-segment", "1s"]);
    (server, fx, dir)
}

fn text(addr: std::net::SocketAddr, target: &str) -> String {
    String::from_utf8(body(addr, target)).unwrap()
}

/// Each video Representation's init segment then its segments, joined, as the set's MPD lists
/// them (URLs relative to the MPD, in `/films/movie.set/`).
fn dash_videos(addr: std::net::SocketAddr, folder: &str, mpd: &str) -> Vec<Vec<u8>> {
    let mut streams = Vec::new();
    for representation in mpd.split("<Representation id=\"video").skip(1) {
        let representation = &representation[..representation.find("</Representation>").unwrap()];
        let attribute = |name: &str| {
            let start = representation.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
            representation[start..start + representation[start..].find('"').unwrap()].to_string()
        };
        let (init, media) = (attribute("initialization"), attribute("media"));
        let timeline = &representation[representation.find("<SegmentTimeline>").unwrap()..];
        let segments: usize = timeline
            .split("<S ")
            .skip(1)
            .map(|s| {
                s.split(" r=\"").nth(1).map_or(0, |r| r[..r.find('"').unwrap()].parse::<usize>().unwrap()) + 1
            })
            .sum();
        let url = |rel: &str| format!("{folder}/movie.set/{rel}");
        let mut stream = body(addr, &url(&init));
        for n in 0..segments {
            stream.extend(body(addr, &url(&media.replace("$Number$", &n.to_string()))));
        }
        streams.push(stream);
    }
    streams
}

/// Each variant's init segment then its segments, joined, as the set's multivariant playlist and
/// the renditions' video playlists list them; and the video playlists.
fn hls_videos(addr: std::net::SocketAddr, folder: &str, master: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = master.lines();
    while let Some(line) = lines.next() {
        if !line.starts_with("#EXT-X-STREAM-INF") {
            continue;
        }
        let playlist_url = format!("{folder}/movie.set/{}", lines.next().unwrap());
        let (base, _) = playlist_url.rsplit_once('/').unwrap();
        let playlist = text(addr, &playlist_url);
        let map = playlist.lines().find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\"")).unwrap();
        let mut stream = body(addr, &format!("{base}/{}", map.trim_end_matches('"')));
        for segment in playlist.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
            stream.extend(body(addr, &format!("{base}/{segment}")));
        }
        out.push((playlist, stream));
    }
    out
}

/// The UUID form of a 32-digit hex KID.
fn uuid(hex: &str) -> String {
    format!("{}-{}-{}-{}-{}", &hex[..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..])
}

fn cenc_set_decrypts_over_dash_and_hls(engine: &[&str]) {
    let (server, _fx, dir) = set_server(engine);
    let addr = server.addr();
    let mpd = text(addr, "/films/movie.set/manifest.mpd");
    // One KID for the set, on each media AdaptationSet (video, audio), its licence the set's.
    let media_sets = mpd.matches("<AdaptationSet ").count() - mpd.matches("contentType=\"text\"").count();
    assert_eq!(media_sets, 2, "{mpd}");
    assert_eq!(mpd.matches(&format!("cenc:default_KID=\"{}\"", uuid(KID))).count(), media_sets, "{mpd}");
    assert!(
        mpd.contains("value=\"cenc\"") && mpd.contains("/films/movie.set/clearkey</dashif:Laurl>"),
        "{mpd}"
    );
    assert!(!mpd.contains("trickmode"), "I-frame fragments are clear: none listed");
    let master = text(addr, "/films/movie.set/master.m3u8");
    let kid_b64 = base64::engine::general_purpose::STANDARD.encode(unhex(KID));
    let session_key =
        format!("#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES-CTR,URI=\"data:text/plain;base64,{kid_b64}\"");
    assert!(master.contains(&session_key), "{master}");
    assert!(!master.contains("I-FRAME") && !master.contains("IMAGE"), "{master}");

    let dash = dash_videos(addr, "/films", &mpd);
    let hls = hls_videos(addr, "/films", &master);
    assert_eq!((dash.len(), hls.len()), (2, 2), "two renditions over both");
    for (i, ((name, mp4), (dash, (playlist, hls)))) in
        renditions().iter().zip(dash.iter().zip(&hls)).enumerate()
    {
        assert!(
            playlist.contains(&format!(
                "#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,URI=\"data:text/plain;base64,{kid_b64}\""
            )),
            "{playlist}"
        );
        assert_eq!(hls, dash, "{name}: the same segments serve DASH and HLS");
        // Each rendition decoded once (over HLS for one, DASH for the other: the bytes are equal).
        let stream = if i == 0 { dash } else { hls };
        assert_eq!(decrypted_frames(stream, KEY, &dir).unwrap(), frames_of(mp4), "{name}: every frame");
    }
    let wrong = decrypted_frames(&hls[1].1, WRONG_KEY, &dir);
    assert!(wrong.is_err(), "the wrong key decodes nothing: {wrong:?}");

    // The set's licence: its KID in one POST with another, one key back.
    let answer = licence(addr, "/films/movie.set/clearkey", &[&unhex(PREFIX_KID), &unhex(KID)]);
    assert_eq!(answer.status, 200, "{}", answer.head_text());
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(json["keys"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(
        (json["keys"][0]["kid"].as_str(), json["keys"][0]["k"].as_str()),
        (Some(&*b64url(&unhex(KID))), Some(&*b64url(&unhex(KEY))))
    );
    // A rendition's own licence is the set's key too (its segments are under it).
    let alone = licence(addr, "/films/movie.90p.mp4/clearkey", &[&unhex(KID)]);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&alone.body).unwrap()["keys"][0]["k"],
        b64url(&unhex(KEY))
    );
    // Files a sidecar names otherwise have keys of their own: refused, saying why.
    let odd = fetch_get(addr, "/films/odd.set/manifest.mpd", &[]);
    assert_eq!(odd.status, 409, "{}", odd.head_text());
    assert!(odd.body_text().contains("odd-a.mp4 is not named odd.<height>p.mp4"), "{}", odd.body_text());
    // The page offers the set with its scheme and licence.
    let page = text(addr, "/films/");
    assert!(
        page.contains("encrypted (cenc)") && page.contains("data-licence=\"./movie.set/clearkey\""),
        "{page}"
    );
}

fn the_sets_keys_go_to_viewers_with_its_signed_url(engine: &[&str]) {
    let (server, _fx, dir) = set_server(engine);
    let addr = server.addr();
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["sign", "/locked/movie.set/master.m3u8", "--expires", "1h", "--key-file"])
        .arg(dir.join("sign.key"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let signed = String::from_utf8(out.stdout).unwrap();
    let query = signed.trim().split_once('?').unwrap().1.to_string();
    let master = text(addr, &format!("/locked/movie.set/master.m3u8?{query}"));
    assert!(master.contains("#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES-CTR"), "{master}");
    let mpd = text(addr, &format!("/locked/movie.set/manifest.mpd?{query}"));
    assert!(mpd.contains(&uuid(KID)), "{mpd}");
    let kid = unhex(KID);
    let allowed = licence(addr, &format!("/locked/movie.set/clearkey?{query}"), &[&kid]);
    assert_eq!(allowed.status, 200, "{}", allowed.head_text());
    assert!(allowed.body_text().contains(&b64url(&unhex(KEY))));
    for target in ["/locked/movie.set/clearkey", "/locked/movie.180p.mp4/clearkey"] {
        let refused = licence(addr, target, &[&kid]);
        assert_eq!(refused.status, 403, "{target}");
        assert!(!refused.body_text().contains(&b64url(&unhex(KEY))));
    }
    assert_eq!(fetch_get(addr, "/locked/movie.set/master.m3u8", &[]).status, 401);
    assert!(server.log_text().lines().all(|l| !l.contains(KEY) && !l.contains(&b64url(&unhex(KEY)))));
    // An AES-128 set: the session key's URI is the set's key, its renditions' key; no DASH.
    let master = text(addr, "/aes/movie.set/master.m3u8");
    assert!(master.contains("#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"key\""), "{master}");
    let key = body(addr, "/aes/movie.set/key");
    assert_eq!(key.len(), 16);
    assert_eq!(body(addr, "/aes/movie.90p.mp4/key"), key, "the renditions' key is the set's");
    assert_eq!(fetch_get(addr, "/aes/movie.set/manifest.mpd", &[]).status, 404, "AES-128 is HLS only");
}

engine_matrix!(cenc_set_decrypts_over_dash_and_hls, the_sets_keys_go_to_viewers_with_its_signed_url);

/// Presses Play on the page's set with the player `via` and waits for the end (a stall of `ms`
/// fails: on a busy machine, CI's 2 shared cores, start-up alone may take seconds); what the
/// video element says then, or the error.
const PLAY_SET: &str = r#"(async (via, ms) => {
  const v = document.getElementById('player');
  document.getElementById('via').value = via;
  const ended = new Promise((res, rej) => {
    const start = performance.now();
    let seen = -1, moved = start;
    const t = setInterval(() => {
      const now = performance.now();
      if (v.currentTime !== seen) { seen = v.currentTime; moved = now; }
      if (now - moved > ms || now - start > 4 * ms) { clearInterval(t); rej(new Error('no end at ' + v.currentTime)); }
    }, 250);
    v.addEventListener('ended', () => { clearInterval(t); res(); }, { once: true });
    v.addEventListener('error', () => { clearInterval(t); rej(new Error('media error ' + (v.error && v.error.code))); }, { once: true });
  });
  const b = document.querySelector('li.set button.play');
  b.click();
  try { await ended; } catch (e) { return { failed: String(e), at: v.currentTime, keys: !!v.mediaKeys }; }
  const q = v.getVideoPlaybackQuality();
  return { via: window.sluicePlayer.state.via, protect: b.dataset.protect || null, src: window.sluicePlayer.src,
           duration: v.duration, at: v.currentTime, frames: q.totalVideoFrames, keys: !!v.mediaKeys };
})"#;

/// Chromium plays the `cbcs` set to the end through dash.js and hls.js, the key from the set's
/// ClearKey licence (EME). One engine: the players do not depend on it, and every engine's bytes
/// are proven by ffmpeg above.
#[test]
fn chromium_plays_an_encrypted_set_with_clearkey() {
    let _turn = common::browser::ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (server, _fx, _dir) = set_server(common::browser::BROWSER_ENGINE);
    let mut browser = common::browser::Browser::start();
    let page = format!("http://{}/derived/", server.addr());
    browser.open_page(&page);
    let mut results = Vec::new();
    for via in ["dash", "hls"] {
        browser.call("Page.navigate", serde_json::json!({ "url": page }));
        assert!(poll_until(IO_TIMEOUT, || browser
            .eval("document.readyState === 'complete' && !!window.Hls")
            == serde_json::json!(true)));
        let r = browser.eval(&format!("{PLAY_SET}('{via}', 30000)"));
        results.push(format!("{via}: {r}"));
        assert!(r["failed"].is_null(), "cbcs set over {via}: {r}");
        assert_eq!((r["via"].as_str(), r["protect"].as_str()), (Some(via), Some("cbcs")), "{r}");
        assert!(r["src"].as_str().unwrap().contains("movie.set/"), "the set, not a rendition: {r}");
        assert!(r["at"].as_f64().unwrap() >= r["duration"].as_f64().unwrap() - 0.1, "to the end: {r}");
        assert!(
            r["frames"].as_u64().unwrap() > 0 && r["keys"] == serde_json::json!(true),
            "through EME: {r}"
        );
    }
    assert!(server
        .log_text()
        .lines()
        .any(|l| l.contains("uri=/derived/movie.set/clearkey") && l.contains("status=200")));
    eprintln!("{}", results.join("\n"));
}
