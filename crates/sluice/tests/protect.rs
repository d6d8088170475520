//! Encrypted titles end to end on every engine: `[[protect]]` entries in a `sluice.toml` (a keys
//! file for `cenc`, a master key for `cbcs`, `aes-128`), read by players and parsers sluice did
//! not write.
//!
//! ffmpeg decrypts the CENC tracks a DASH manifest and an HLS playlist list (init segment and
//! segments fetched and joined, fed to it as a stream, which is how its HLS and DASH demuxers
//! feed the MP4 one) with `-decryption_key` and counts every video frame of the MP4; the wrong key
//! makes it fail to decode (the bytes are encrypted); the `cbcs` key comes from the ClearKey
//! licence service; ffmpeg plays the AES-128 renditions over HTTP with the key sluice serves.
//! `mp4parse` reads `sinf`/`tenc`/`pssh` of an init segment and `mp4-atom` the `senc`, `saiz`
//! and `saio` of a segment, whose offset points at the IVs. Keys go only to requests the title's
//! `[[access]]` policy lets in (403 otherwise), the MP4 file and RTSP are refused, `/streams`
//! names the scheme and KID and never the key, and SIGHUP brings a new key with new entity tags.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use base64::Engine as _;
use common::protect::{b64url, body, decrypted_frames, licence, protection_folder, unhex};
use common::*;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const KID: &str = "00112233445566778899aabbccddeeff";
const KEY: &str = "6b65792d6f662d7468652d64656d6f21";
const NEW_KEY: &str = "00000000000000000000000000000042";
const WRONG_KEY: &str = "ffeeddccbbaa99887766554433221100";
const MASTER: &str = "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf";
/// The signing key of `/locked/`.
const SIGNING_KEY: &str = "a-signing-key-for-the-protect-tests";

/// The demo as `/films/demo.mp4` (cenc, keys file), `/derived/demo.mp4` (cbcs, master key),
/// `/aes/demo.mp4` (aes-128), `/locked/demo.mp4` (cenc behind signed URLs) and `/open.mp4`
/// (clear); the key files and the configuration in the returned directory.
fn protected_server(engine: &[&str]) -> (Server, Fixture, PathBuf) {
    let fx = Fixture::new();
    let demo = std::fs::read(DEMO).unwrap();
    for title in ["films/demo.mp4", "derived/demo.mp4", "aes/demo.mp4", "locked/demo.mp4", "open.mp4"] {
        fx.write(title, &demo);
    }
    let keys = format!("# the test titles\n/films/ {KID} {KEY}\n/locked/ {KID} {KEY}\n");
    let dir = protection_folder(&keys, &format!("{MASTER}\n"), SIGNING_KEY);
    let config = dir.join("sluice.toml").display().to_string();
    let server = Server::serve(engine, &fx, &["--config", &config, "--hls-segment", "2s"]);
    (server, fx, dir)
}

/// The demo's video frames as ffprobe counts them from the clear file, once per test binary.
fn frames_in_the_mp4(addr: std::net::SocketAddr) -> String {
    static FRAMES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FRAMES.get_or_init(|| ffprobe_video_frames(&format!("http://{addr}/open.mp4")).0).clone()
}

/// A DASH representation's init segment then its segments, joined, as the MPD's template and
/// timeline list them (the first `SegmentTemplate`, the video's).
fn dash_video(addr: std::net::SocketAddr, title: &str) -> (String, Vec<u8>) {
    let mpd = String::from_utf8(body(addr, &format!("{title}/manifest.mpd"))).unwrap();
    let attribute = |name: &str| {
        let start = mpd.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
        mpd[start..start + mpd[start..].find('"').unwrap()].to_string()
    };
    let (init, media) = (attribute("initialization"), attribute("media"));
    let timeline = &mpd[mpd.find("<SegmentTimeline>").unwrap()..mpd.find("</SegmentTimeline>").unwrap()];
    let segments: usize = timeline
        .split("<S ")
        .skip(1)
        .map(|s| {
            s.split("r=\"").nth(1).map_or(0, |r| r[..r.find('"').unwrap()].parse::<usize>().unwrap()) + 1
        })
        .sum();
    assert!(segments >= 2, "the demo is cut in several segments: {mpd}");
    let mut stream = body(addr, &format!("{title}/{init}"));
    for n in 0..segments {
        stream.extend(body(addr, &format!("{title}/{}", media.replace("$Number$", &n.to_string()))));
    }
    (mpd, stream)
}

/// The video playlist's init segment then its segments, joined.
fn hls_video(addr: std::net::SocketAddr, title: &str) -> (String, Vec<u8>) {
    let playlist = String::from_utf8(body(addr, &format!("{title}/video.m3u8"))).unwrap();
    let map = playlist.lines().find_map(|l| l.strip_prefix("#EXT-X-MAP:URI=\"")).unwrap();
    let mut stream = body(addr, &format!("{title}/{}", map.trim_end_matches('"')));
    for segment in playlist.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        stream.extend(body(addr, &format!("{title}/{segment}")));
    }
    (playlist, stream)
}

fn cenc_decrypts_over_dash_and_hls(engine: &[&str]) {
    let (server, _fx, dir) = protected_server(engine);
    let addr = server.addr();
    let expected = frames_in_the_mp4(addr);
    let (mpd, dash) = dash_video(addr, "/films/demo.mp4");
    assert!(mpd.contains("cenc:default_KID=\"00112233-4455-6677-8899-aabbccddeeff\""), "{mpd}");
    assert!(mpd.contains("value=\"cenc\"") && mpd.contains("e2719d58-a985-b3c9-781a-b030af78d30e"), "{mpd}");
    assert_eq!(decrypted_frames(&dash, KEY, &dir).unwrap(), expected, "every frame over DASH");
    let (playlist, hls) = hls_video(addr, "/films/demo.mp4");
    assert!(playlist.contains("#EXT-X-KEY:METHOD=SAMPLE-AES-CTR,"), "{playlist}");
    assert_eq!(hls, dash, "the same segments serve DASH and HLS");
    assert_eq!(decrypted_frames(&hls, KEY, &dir).unwrap(), expected, "every frame over HLS");
    let wrong = decrypted_frames(&hls, WRONG_KEY, &dir);
    assert!(wrong.is_err(), "the wrong key decodes nothing: {wrong:?}");
    // The same segments again: the same bytes (deterministic IVs), so caches and ranges hold.
    // This time they come from the encrypted segments kept in memory.
    let made = metric(&server.scrape(), "sluice_segment_cache_misses_total");
    assert_eq!(hls_video(addr, "/films/demo.mp4").1, hls);
    let metrics = server.scrape();
    assert!(metric(&metrics, "sluice_segment_cache_hits_total") > 0, "{metrics}");
    assert_eq!(metric(&metrics, "sluice_segment_cache_misses_total"), made, "nothing encrypted twice");
    assert!(metric(&metrics, "sluice_segment_cache_bytes") > 0, "{metrics}");
    let whole = fetch_get(addr, "/films/demo.mp4/video-seg-1.m4s", &[]);
    let tag = whole.header("etag").unwrap().to_string();
    let part = fetch_get(addr, "/films/demo.mp4/video-seg-1.m4s", &[("Range", "bytes=100-1099")]);
    assert_eq!(part.status, 206);
    assert_eq!(part.body, whole.body[100..1100]);
    let again = fetch_get(addr, "/films/demo.mp4/video-seg-1.m4s", &[("If-None-Match", &tag)]);
    assert_eq!(again.status, 304);
}

fn cbcs_decrypts_with_the_licence_services_key(engine: &[&str]) {
    let (server, _fx, dir) = protected_server(engine);
    let addr = server.addr();
    let (mpd, dash) = dash_video(addr, "/derived/demo.mp4");
    assert!(mpd.contains("value=\"cbcs\""), "{mpd}");
    let uuid = mpd.split("cenc:default_KID=\"").nth(1).unwrap().split('"').next().unwrap().replace('-', "");
    let answer = licence(addr, "/derived/demo.mp4/clearkey", &[&unhex(&uuid)]);
    assert_eq!(answer.status, 200, "{}", answer.head_text());
    let json: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(json["keys"][0]["kid"], b64url(&unhex(&uuid)));
    let key = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(json["keys"][0]["k"].as_str().unwrap())
        .unwrap();
    let key: String = key.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(decrypted_frames(&dash, &key, &dir).unwrap(), frames_in_the_mp4(addr));
    assert!(decrypted_frames(&dash, WRONG_KEY, &dir).is_err());
    // Another title under the same master key has its own KID.
    assert!(!String::from_utf8(body(addr, "/films/demo.mp4/manifest.mpd")).unwrap().contains(&uuid));
}

fn aes_128_renditions_play_with_the_served_key(engine: &[&str]) {
    let (server, _fx, _dir) = protected_server(engine);
    let addr = server.addr();
    let expected = frames_in_the_mp4(addr);
    for url in ["/aes/demo.mp4/master.m3u8", "/aes/demo.mp4/media.m3u8", "/films/demo.mp4/media.m3u8"] {
        let (frames, _) = ffprobe_video_frames(&format!("http://{addr}{url}"));
        let counts: Vec<&str> = frames.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
        assert!(!counts.is_empty() && counts.iter().all(|c| *c == expected), "{url}: {frames}");
        let playlist = String::from_utf8(body(addr, url)).unwrap();
        assert!(playlist.contains("METHOD=AES-128,URI=\"key\""), "{playlist}");
    }
    // Encrypted: the segment is not the clear one, and is a whole number of AES blocks.
    let clear = body(addr, "/open.mp4/seg-0.m4s");
    let encrypted = body(addr, "/aes/demo.mp4/seg-0.m4s");
    assert_eq!(encrypted.len(), clear.len() / 16 * 16 + 16);
    assert_ne!(encrypted[..16], clear[..16]);
    assert_eq!(body(addr, "/aes/demo.mp4/key").len(), 16);
    assert_eq!(fetch_get(addr, "/aes/demo.mp4/manifest.mpd", &[]).status, 404, "AES-128 is HLS only");
}

fn boxes_read_back_by_parsers_sluice_did_not_write(engine: &[&str]) {
    use mp4_atom::{Decode, TrunSamples};
    let (server, _fx, _dir) = protected_server(engine);
    let addr = server.addr();
    let init = body(addr, "/films/demo.mp4/video-init.mp4");
    let context = mp4parse::read_mp4(&mut std::io::Cursor::new(&init)).unwrap();
    let common_system = unhex("1077efecc0b24d02ace33c1e52e2fb4b");
    let pssh =
        context.psshs.iter().find(|p| p.system_id[..] == common_system[..]).expect("a W3C common pssh");
    assert_eq!(&pssh.kid[0][..], &unhex(KID)[..]);
    let mp4parse::SampleEntry::Video(entry) = &context.tracks[0].stsd.as_ref().unwrap().descriptions[0]
    else {
        panic!("a video sample entry")
    };
    let sinf = &entry.protection_info[0];
    assert_eq!(&sinf.original_format.value, b"avc1");
    assert_eq!(&sinf.scheme_type.as_ref().unwrap().scheme_type.value, b"cenc");
    let tenc = sinf.tenc.as_ref().unwrap();
    assert_eq!((tenc.is_encrypted, tenc.iv_size), (1, 8));
    assert_eq!(&tenc.kid[..], &unhex(KID)[..]);

    let segment = body(addr, "/films/demo.mp4/video-seg-1.m4s");
    let moof = mp4_atom::Moof::decode(&mut segment.as_slice()).unwrap();
    let traf = &moof.traf[0];
    let senc = traf.senc.as_ref().expect("senc in every moof");
    let samples: usize =
        traf.trun.iter().map(|t| if let TrunSamples::Explicit(e) = &t.samples { e.len() } else { 0 }).sum();
    assert_eq!(u32::from_be_bytes(senc.data[..4].try_into().unwrap()) as usize, samples);
    assert_eq!(traf.saiz[0].sample_count as usize, samples);
    let at = traf.saio[0].offsets[0] as usize;
    assert_eq!(&segment[at..at + 8], &senc.data[4..12], "saio points at the first IV");
}

fn keys_go_to_viewers_the_access_policy_lets_in(engine: &[&str]) {
    let (server, _fx, dir) = protected_server(engine);
    let addr = server.addr();
    let sign_key = dir.join("sign.key").display().to_string();
    let signed = |path: &str, key: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["sign", path, "--expires", "1h", "--key-file", key, "--prefix"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let title = signed("/locked/demo.mp4/master.m3u8", &sign_key);
    let query = title.split_once('?').unwrap().1;
    let other = dir.join("other.key");
    std::fs::write(&other, "not-the-configured-key").unwrap();
    let forged = signed("/locked/demo.mp4/master.m3u8", &other.display().to_string());
    let forged = forged.split_once('?').unwrap().1;
    let kid = unhex(KID);
    let kid = &[&kid[..]];

    let allowed = licence(addr, &format!("/locked/demo.mp4/clearkey?{query}"), kid);
    assert_eq!(allowed.status, 200, "{}", allowed.head_text());
    let json: serde_json::Value = serde_json::from_slice(&allowed.body).unwrap();
    assert_eq!(json["keys"][0]["k"], b64url(&unhex(KEY)));
    assert_eq!(json["type"], "temporary");
    assert_eq!(fetch_get(addr, &format!("/locked/demo.mp4/key?{query}"), &[]).body, unhex(KEY));
    for target in ["/locked/demo.mp4/clearkey".to_string(), format!("/locked/demo.mp4/clearkey?{forged}")] {
        let refused = licence(addr, &target, kid);
        assert_eq!(refused.status, 403, "{target}");
        assert!(!refused.body_text().contains(&b64url(&unhex(KEY))));
    }
    for target in ["/locked/demo.mp4/key".to_string(), format!("/locked/demo.mp4/key?{forged}")] {
        let refused = fetch_get(addr, &target, &[]);
        assert_eq!(refused.status, 403, "{target}");
        assert!(refused.body.len() != 16);
    }
    // A player on another origin may ask: the preflight says so, with no key.
    let preflight = fetch(
        addr,
        request(
            "OPTIONS",
            "/locked/demo.mp4/clearkey",
            &[("Origin", "http://elsewhere"), ("Access-Control-Request-Method", "POST")],
        ),
    );
    assert_eq!(preflight.status, 204, "{}", preflight.head_text());
    assert_eq!(preflight.header("access-control-allow-methods"), Some("POST"));
    assert!(preflight.body.is_empty());
    // The clear copies are not served: the file, and RTSP.
    assert_eq!(fetch_get(addr, "/films/demo.mp4", &[]).status, 403);
    let mut rtsp = common::rtsp::RtspConn::open(server.rtsp_addr());
    let url = format!("rtsp://{}/films/demo.mp4", server.rtsp_addr());
    assert_eq!(rtsp.request("DESCRIBE", &url, &[]).status, 403);
    // /streams names the scheme and the KID, never the key.
    let streams = fetch_get(server.admin_addr(), "/streams", &[]).body_text();
    let json: serde_json::Value = serde_json::from_str(&streams).unwrap();
    let item = json["items"].as_array().unwrap().iter().find(|i| i["path"] == "/films/demo.mp4").unwrap();
    assert_eq!(item["protection"]["scheme"], "cenc");
    assert_eq!(item["protection"]["kid"], "00112233-4455-6677-8899-aabbccddeeff");
    assert!(!streams.contains(KEY) && !streams.contains(&b64url(&unhex(KEY))));
    assert!(server.log_text().lines().all(|l| !l.contains(KEY) && !l.contains(&b64url(&unhex(KEY)))));
}

fn sighup_brings_the_new_key_and_new_entity_tags(engine: &[&str]) {
    let (server, _fx, dir) = protected_server(engine);
    let addr = server.addr();
    let tag = || fetch_get(addr, "/films/demo.mp4/video-seg-0.m4s", &[]).header("etag").unwrap().to_string();
    let (before, segment) = (tag(), body(addr, "/films/demo.mp4/video-seg-0.m4s"));
    std::fs::write(dir.join("keys"), format!("/films/ {KID} {NEW_KEY}\n/locked/ {KID} {KEY}\n")).unwrap();
    server.signal(libc::SIGHUP);
    assert!(poll_until(Duration::from_secs(10), || tag() != before), "a new key is a new entity tag");
    assert_ne!(body(addr, "/films/demo.mp4/video-seg-0.m4s"), segment);
    let (_, hls) = hls_video(addr, "/films/demo.mp4");
    assert_eq!(decrypted_frames(&hls, NEW_KEY, &dir).unwrap(), frames_in_the_mp4(addr));
}

engine_matrix!(
    cenc_decrypts_over_dash_and_hls,
    cbcs_decrypts_with_the_licence_services_key,
    aes_128_renditions_play_with_the_served_key,
    boxes_read_back_by_parsers_sluice_did_not_write,
    keys_go_to_viewers_the_access_policy_lets_in,
    sighup_brings_the_new_key_and_new_entity_tags,
);

/// Sets the page's player (`via`), presses Play on the first video (with another licence URL
/// when `licence` is given) and waits for its end (while it moves, up to `ms` without progress); what the video element says
/// then, or the error.
const PLAY_PROTECTED: &str = r#"(async (via, ms, licence) => {
  const v = document.getElementById('player');
  document.getElementById('via').value = via;
  const ended = new Promise((res, rej) => {
    // A stall, not slowness, fails: on a busy machine (CI shares 2 cores) the renderer may
    // play slower than real time, so the wait ends after `ms` without progress, or at 4 × `ms`.
    const start = performance.now();
    let seen = -1, moved = start;
    const t = setInterval(() => {
      const now = performance.now();
      if (v.currentTime !== seen) { seen = v.currentTime; moved = now; }
      if (now - moved > ms || now - start > 4 * ms) {
        clearInterval(t);
        rej(new Error('no end: no progress for ' + Math.round(now - moved) + ' ms, ' + Math.round(now - start) + ' ms in all, at ' + v.currentTime));
      }
    }, 250);
    v.addEventListener('ended', () => { clearInterval(t); res(); }, { once: true });
    v.addEventListener('error', () => { clearInterval(t); rej(new Error('media error ' + (v.error && v.error.code))); }, { once: true });
  });
  const b = document.querySelector('button.play[data-hls]');
  if (licence) b.dataset.licence = licence;
  b.click();
  const errors = [];
  let eme = null;
  try { await navigator.requestMediaKeySystemAccess('org.w3.clearkey', [{ initDataTypes: ['cenc'],
    videoCapabilities: [{ contentType: 'video/mp4; codecs="avc1.4d401e"' }] }]); eme = 'ok'; } catch (e) { eme = String(e); }
  const hook = setInterval(() => { const p = window.sluicePlayer; if (p && p.dash) { clearInterval(hook);
    p.dash.on('error', (e) => errors.push(JSON.stringify(e.error || e))); } }, 5);
  try { await ended; } catch (e) {
    const p = window.sluicePlayer;
    return { failed: String(e), at: v.currentTime, errors, eme, keys: !!v.mediaKeys,
             fetched: performance.getEntriesByType('resource').map((r) => r.name.split('/').slice(-2).join('/')) };
  }
  const q = v.getVideoPlaybackQuality();
  return { via: window.sluicePlayer.state.via, protect: b.dataset.protect || null, duration: v.duration,
           at: v.currentTime, frames: q.totalVideoFrames, keys: !!v.mediaKeys, error: v.error && v.error.code };
})"#;

/// Chromium plays the `cenc` and `cbcs` titles to the end through dash.js and hls.js with
/// ClearKey (EME: the keys come from the licence service) and the AES-128 title through hls.js;
/// the page says which scheme each uses; without a key (the licence refused) nothing plays. One engine: the players do not depend on it, and the
/// bytes are proven on every engine by ffmpeg above.
#[test]
fn chromium_plays_protected_titles_with_clearkey() {
    let _turn = common::browser::ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (server, _fx, _dir) = protected_server(&["--engine", "epoll", "--workers", "2"]);
    let mut browser = common::browser::Browser::start();
    browser.open_page(&format!("http://{}/films/", server.addr()));
    let mut results = Vec::new();
    for (dir, scheme, players) in [
        ("films", "cenc", &["dash", "hls"][..]),
        ("derived", "cbcs", &["dash", "hls"]),
        ("aes", "aes-128", &["hls"]),
    ] {
        for via in players {
            let page = format!("http://{}/{dir}/", server.addr());
            browser.call("Page.navigate", serde_json::json!({ "url": page }));
            assert!(poll_until(IO_TIMEOUT, || browser
                .eval("document.readyState === 'complete' && !!window.Hls")
                == serde_json::json!(true)));
            let shown = browser.eval("document.querySelector('li .meta').textContent");
            assert!(shown.as_str().unwrap().contains(&format!("encrypted ({scheme})")), "{shown}");
            let r = browser.eval(&format!("{PLAY_PROTECTED}('{via}', 30000, null)"));
            results.push(format!("{scheme} {via}: {r}"));
            assert!(r["failed"].is_null(), "{scheme} over {via}: {r}");
            assert_eq!(r["via"], serde_json::json!(via), "{r}");
            assert_eq!(r["protect"], serde_json::json!(scheme), "{r}");
            assert!(r["error"].is_null(), "{r}");
            let duration = r["duration"].as_f64().unwrap();
            assert!(r["at"].as_f64().unwrap() >= duration - 0.1, "played to the end: {r}");
            assert!(r["frames"].as_u64().unwrap() > 0, "{r}");
            if scheme != "aes-128" {
                assert_eq!(r["keys"], serde_json::json!(true), "decrypted through EME: {r}");
            }
        }
    }
    // A viewer whose credentials do not cover the licence (here: `/locked/`'s, asked without a
    // signature) gets no key, 403, and plays nothing.
    browser.call("Page.navigate", serde_json::json!({ "url": format!("http://{}/films/", server.addr()) }));
    assert!(poll_until(IO_TIMEOUT, || browser.eval("document.readyState === 'complete' && !!window.Hls")
        == serde_json::json!(true)));
    let r = browser.eval(&format!("{PLAY_PROTECTED}('hls', 6000, '/locked/demo.mp4/clearkey')"));
    assert!(r["failed"].is_string() && r["at"].as_f64().unwrap() < 0.1, "no key, no playback: {r}");
    assert!(
        server.log_text().lines().any(|l| l.contains("/locked/demo.mp4/clearkey") && l.contains("403")),
        "the licence was refused"
    );
    eprintln!("{}", results.join("\n"));
}

/// Where the demo's slice headers end, as sluice reads them to keep them clear, is where ffmpeg's
/// `trace_headers` says, for every slice (the byte holding a header's last bit).
#[test]
fn slice_headers_end_where_ffmpeg_reads_them() {
    use sluice_media::protect::slice::SliceHeaders;
    let data = std::fs::read(DEMO).unwrap();
    let file = sluice_media::Mp4File::from_bytes(&data).unwrap();
    let track = file.tracks.iter().find(|t| matches!(t.kind, sluice_media::TrackKind::H264(_))).unwrap();
    let sluice_media::TrackKind::H264(h264) = &track.kind else { unreachable!() };
    let slices = SliceHeaders::new(&h264.sps, &h264.pps);
    let mut ours = Vec::new();
    for sample in &track.samples {
        let bytes = &data[sample.range().start as usize..sample.range().end as usize];
        let mut at = 0;
        while at + 4 <= bytes.len() {
            let len = u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let nal = &bytes[at + 4..at + 4 + len];
            if (1..=5).contains(&(nal[0] & 0x1f)) {
                ours.push(slices.header_len(nal).expect("the demo's slice headers read"));
            }
            at += 4 + len;
        }
    }
    let mut ffmpeg = Command::new("ffmpeg");
    ffmpeg.args(["-v", "trace", "-threads", "1", "-i", DEMO, "-map", "0:v", "-c", "copy"]);
    ffmpeg.args(["-bsf:v", "trace_headers", "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut ffmpeg, Duration::from_secs(60));
    assert!(status.success());
    let text = String::from_utf8_lossy(&err);
    let mut theirs = Vec::new();
    let mut end: Option<usize> = None;
    for line in text.lines() {
        let Some(trace) = line.split("] ").nth(1) else { continue };
        if trace.starts_with("Slice Header") {
            theirs.extend(end.take());
            end = Some(0);
            continue;
        }
        let fields: Vec<&str> = trace.split_whitespace().collect();
        match (end.as_mut(), fields.as_slice()) {
            (Some(end), [pos, _name, bits, "=", _value]) if pos.parse::<usize>().is_ok() => {
                *end = pos.parse::<usize>().unwrap() + bits.len();
            }
            (Some(_), _) if !trace.starts_with(char::is_numeric) => theirs.extend(end.take()),
            _ => {}
        }
    }
    theirs.extend(end.take());
    let theirs: Vec<usize> = theirs.iter().map(|bits| bits.div_ceil(8)).collect();
    assert_eq!(ours.len(), 180, "one slice a frame in the demo");
    assert_eq!(ours, theirs);
}
