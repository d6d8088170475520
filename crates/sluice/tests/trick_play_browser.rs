//! Trick play in a real browser: headless Chromium (driven over the DevTools protocol, no
//! network beyond 127.0.0.1) loads the library page of a film ffmpeg makes (20 s of H.264, a
//! keyframe every 2 s) and the page's vendored players read its trick-play tracks.
//!
//! - hls.js (1.7.4, which parses `EXT-X-I-FRAME-STREAM-INF` into `hls.iframeVariants` and has an
//!   I-frame player, `hls.createIFramePlayer()`): the variants it reports are the master's I-frame
//!   streams (URL, resolution, bandwidth), and its I-frame player, on a second `<video>`, loads
//!   the `EXT-X-I-FRAMES-ONLY` playlist through hls.js's own loader (one entry per keyframe of
//!   the MP4, at the keyframes' times) and buffers the keyframe fragment at the time it is asked
//!   for, by byte range.
//! - dash.js (5.2.1, which has no trick-mode API): as ISO/IEC 23009-1 §5.8.4.8 asks of a client
//!   that does not know an `EssentialProperty`, it drops the trick-mode `AdaptationSet` (its
//!   `CapabilitiesFilter` says so, naming the set) and plays the main one; told through its own
//!   setting (`streaming.capabilities.supportedEssentialProperties`) that the scheme
//!   `http://dashif.org/guidelines/trickmode` is supported, `getTracksFor('video')` lists the
//!   trick-mode set beside the main one, its `EssentialProperty` naming the main set's id.
//!
//! On one engine (`common::browser::BROWSER_ENGINE` says why), serialised with the other browser
//! tests.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
mod common;

use std::sync::OnceLock;

use common::browser::{Browser, ONE_BROWSER_AT_A_TIME};
use common::*;
use serde_json::{json, Value};

/// The test's film: 20 s of 25 fps H.264 with a keyframe every 2 s and AAC, made once per test
/// binary.
fn film() -> &'static [u8] {
    static FILM: OnceLock<Vec<u8>> = OnceLock::new();
    FILM.get_or_init(|| {
        test_film(20, "-c:v libx264 -preset ultrafast -bf 2 -g 50 -keyint_min 50 -sc_threshold 0 -pix_fmt yuv420p -c:a aac -b:a 64k")
    })
}

/// The trick-mode scheme of DASH-IF IOP §3.2.9.
const TRICK_MODE: &str = "http://dashif.org/guidelines/trickmode";

/// Plays `title` with hls.js, waits for its manifest, then runs its I-frame player at `at`
/// seconds on a second video element: what hls.js reports of both.
fn hls_js_trick_play(browser: &mut Browser, title: &str, at: f64) -> Value {
    browser.eval(&format!(
        r#"(async (title, at) => {{
  const within = (ms, what, p) => Promise.race([p, new Promise((_, rej) => setTimeout(() => rej(new Error('no ' + what + ' by ' + ms + ' ms')), ms))]);
  document.getElementById('via').value = 'hls';
  const b = [...document.querySelectorAll('button.play')].find(b => b.dataset.title === title);
  if (!b) return {{ missing: true }};
  b.click();
  const hls = window.sluicePlayer && window.sluicePlayer.hls;
  if (!hls) return {{ noHlsJs: true }};
  // The I-frame player takes the main player's timestamps, known once it has buffered video.
  await within(20000, 'main video buffered', new Promise(res => {{
    hls.on(Hls.Events.FRAG_BUFFERED, (e, d) => {{ if (d.frag.type === 'main') res(); }});
  }}));
  const variants = hls.iframeVariants.map(l => ({{ url: l.url, width: l.width, height: l.height, bitrate: l.bitrate, codec: l.videoCodec }}));
  const v2 = document.createElement('video');
  v2.muted = true;
  document.body.appendChild(v2);
  const player = hls.createIFramePlayer();
  if (!player) return {{ variants, noIFramePlayer: true }};
  const errors = [], frags = [];
  player.on(Hls.Events.ERROR, (e, d) => errors.push(d.details + (d.fatal ? ' (fatal)' : '')));
  const seen = [];
  for (const ev of ['MEDIA_ATTACHED', 'LEVEL_LOADED', 'FRAG_LOADING', 'FRAG_LOADED', 'FRAG_PARSED', 'BUFFER_APPENDED', 'FRAG_BUFFERED']) player.on(Hls.Events[ev], () => seen.push(ev));
  const level = within(20000, 'I-frame playlist', new Promise(res => player.on(Hls.Events.LEVEL_LOADED, (e, d) => res({{
    url: d.details.url, iframesOnly: !!d.details.iframesOnly,
    starts: d.details.fragments.map(f => f.start),
    ranges: d.details.fragments.map(f => f.byteRange),
  }}))));
  const buffered = within(20000, 'I-frame fragment buffered', new Promise(res => player.on(Hls.Events.FRAG_BUFFERED, (e, d) => {{
    frags.push({{ url: d.frag.url, start: d.frag.start, duration: d.frag.duration, range: d.frag.byteRange }});
    res();
  }})));
  const attached = within(20000, 'I-frame player attached', new Promise(res => player.on(Hls.Events.MEDIA_ATTACHED, () => res())));
  let got;
  try {{
    player.attachMedia(v2);
    await attached;
    player.startLoad(at);
    got = {{ level: await level }};
    player.loadMediaAt(at);
    await buffered;
  }} catch (e) {{ return {{ variants, failed: e.message, errors, frags, seen }}; }}
  const ranges = [];
  for (let i = 0; i < v2.buffered.length; i++) ranges.push([v2.buffered.start(i), v2.buffered.end(i)]);
  player.destroy();
  v2.remove();
  document.getElementById('player').pause();
  return {{ variants, level: got.level, frags, errors, buffered: ranges }};
}})({title:?}, {at})"#
    ))
}

/// Plays `title` with dash.js until it has played half a second (with `add_trick_mode`, told
/// through `window.sluiceDashSettings` that the trick-mode scheme is supported, until it lists
/// its tracks): its video tracks and what its `CapabilitiesFilter` said.
fn dash_js_tracks(browser: &mut Browser, title: &str, add_trick_mode: bool) -> Value {
    browser.eval(&format!(
        r#"(async (title, addTrickMode, scheme) => {{
  const v = document.getElementById('player');
  const warnings = [];
  if (!window.sluiceWarned) {{
    window.sluiceWarned = warnings;
    const warn = console.warn;
    console.warn = function (...a) {{ window.sluiceWarned.push(a.map(String).join(' ')); return warn.apply(console, a); }};
  }}
  window.sluiceWarned.length = 0;
  if (addTrickMode) {{
    // dash.js's own list of what it supports, and the trick-mode scheme.
    const known = dashjs.MediaPlayer().create().getSettings().streaming.capabilities.supportedEssentialProperties;
    window.sluiceDashSettings = {{ streaming: {{ capabilities: {{ supportedEssentialProperties: known.concat([{{ schemeIdUri: scheme }}]) }} }} }};
  }} else {{
    delete window.sluiceDashSettings;
  }}
  document.getElementById('via').value = 'dash';
  const b = [...document.querySelectorAll('button.play')].find(b => b.dataset.title === title);
  if (!b) return {{ missing: true }};
  b.click();
  const deadline = Date.now() + 20000;
  let tracks = [];
  while (Date.now() < deadline) {{
    const dash = window.sluicePlayer && window.sluicePlayer.dash;
    if (dash) {{
      try {{ tracks = dash.getTracksFor('video'); }} catch (e) {{ tracks = []; }}
      if (tracks.length && (addTrickMode || v.currentTime >= 0.5)) break;
    }}
    await new Promise(res => setTimeout(res, 100));
  }}
  v.pause();
  return {{
    via: window.sluicePlayer && window.sluicePlayer.state.via,
    at: v.currentTime,
    error: v.error && v.error.code,
    tracks: tracks.map(t => ({{ id: t.id, codec: t.codec, essential: (t.essentialProperties || []).map(p => ({{ scheme: p.schemeIdUri, value: String(p.value) }})) }})),
    warnings: window.sluiceWarned.filter(w => w.includes('CapabilitiesFilter')),
  }};
}})({title:?}, {add_trick_mode}, {TRICK_MODE:?})"#
    ))
}

fn chromium_reads_trick_play_tracks(engine: &[&str]) {
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fx = Fixture::new();
    fx.write("film.mp4", film());
    let server = Server::serve(engine, &fx, &["--hls-segment", "6s"]);
    let addr = server.addr();

    // What the server says, for the players to match: the master's I-frame streams, the
    // I-frame playlist's entries, the MP4's keyframe times, the MPD's trick-mode set.
    let master = fetch_get(addr, "/film.mp4/master.m3u8", &[]);
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
        panic!("not a master playlist: {}", master.body_text())
    };
    let iframe_streams: Vec<&m3u8_rs::VariantStream> = m.variants.iter().filter(|v| v.is_i_frame).collect();
    assert_eq!(iframe_streams.len(), 1, "{}", master.body_text());
    let file = sluice_media::Mp4File::from_bytes(film()).unwrap();
    let video = file.tracks.iter().find(|t| t.kind.is_video()).unwrap();
    let keyframes: Vec<f64> = video
        .samples
        .iter()
        .filter(|s| s.is_sync())
        .map(|s| (s.composition_time() as f64 - video.edit_start as f64) / f64::from(video.timescale))
        .collect();
    assert_eq!(keyframes.len(), 10, "a keyframe every 2 s: {keyframes:?}");
    let mpd = fetch_get(addr, "/film.mp4/manifest.mpd", &[]).body_text();
    assert!(mpd.contains(TRICK_MODE), "{mpd}");

    let mut browser = Browser::start();
    browser.open_page(&format!("http://{addr}/"));

    // hls.js: the I-frame variants, and its I-frame player fetching a keyframe by byte range.
    let at = 9.0;
    let r = hls_js_trick_play(&mut browser, "film.mp4", at);
    eprintln!("hls.js: {r}");
    let variants = r["variants"].as_array().unwrap_or_else(|| panic!("{r}"));
    assert_eq!(variants.len(), 1, "hls.js's iframeVariants: {r}");
    let stream = iframe_streams[0];
    let variant = &variants[0];
    assert!(variant["url"].as_str().unwrap().ends_with(&format!("/film.mp4/{}", stream.uri)), "{r}");
    let resolution = stream.resolution.unwrap();
    assert_eq!(
        (variant["width"].as_u64(), variant["height"].as_u64()),
        (Some(resolution.width), Some(resolution.height)),
        "{r}"
    );
    assert_eq!(variant["bitrate"].as_u64(), Some(stream.bandwidth), "{r}");
    assert!(r["failed"].is_null() && r["errors"] == json!([]), "the I-frame player: {r}");
    let level = &r["level"];
    assert_eq!(level["iframesOnly"], json!(true), "{r}");
    let starts: Vec<f64> = level["starts"].as_array().unwrap().iter().map(|s| s.as_f64().unwrap()).collect();
    assert_eq!(starts.len(), keyframes.len(), "one I-frame entry per keyframe: {r}");
    for (s, k) in starts.iter().zip(&keyframes) {
        assert!((s - (k - keyframes[0])).abs() < 0.05, "entry at {s} for the keyframe at {k}: {r}");
    }
    assert!(
        level["ranges"].as_array().unwrap().iter().all(|r| r.as_array().is_some_and(|b| b.len() == 2)),
        "byte ranges: {r}"
    );
    let frags = r["frags"].as_array().unwrap();
    let first = &frags[0];
    let start = first["start"].as_f64().unwrap();
    assert!(
        start <= at && at < start + first["duration"].as_f64().unwrap() + 0.05,
        "the keyframe at {at} s: {r}"
    );
    assert!(first["range"].as_array().is_some_and(|b| b.len() == 2), "fetched by byte range: {r}");
    let buffered = r["buffered"].as_array().unwrap();
    assert!(
        buffered.iter().any(|b| b[0].as_f64().unwrap() <= start + 0.05 && b[1].as_f64().unwrap() > start),
        "the I-frame player's video buffered the keyframe at {start}: {r}"
    );
    let log = server.log_text();
    assert!(log.contains(&format!("uri=/film.mp4/{}", stream.uri)), "the I-frame playlist fetched:\n{log}");

    // dash.js, as it comes: the trick-mode set dropped by name, the main one played.
    let r = dash_js_tracks(&mut browser, "film.mp4", false);
    eprintln!("dash.js: {r}");
    assert_eq!(r["via"], json!("dash"), "{r}");
    assert!(r["error"].is_null() && r["at"].as_f64().unwrap() >= 0.5, "dash.js plays the main set: {r}");
    let tracks = r["tracks"].as_array().unwrap();
    assert_eq!(tracks.len(), 1, "{r}");
    assert!(tracks[0]["essential"].as_array().unwrap().is_empty(), "{r}");
    let main_id = tracks[0]["id"].as_str().map(str::to_string).unwrap_or_else(|| tracks[0]["id"].to_string());
    let dropped = r["warnings"].clone();

    // dash.js told the scheme is supported: the trick-mode set beside the main one.
    let r = dash_js_tracks(&mut browser, "film.mp4", true);
    eprintln!("dash.js knowing the trick-mode scheme: {r}");
    let tracks = r["tracks"].as_array().unwrap();
    assert_eq!(tracks.len(), 2, "{r}");
    let trick: Vec<&Value> = tracks
        .iter()
        .filter(|t| t["essential"].as_array().unwrap().iter().any(|p| p["scheme"] == json!(TRICK_MODE)))
        .collect();
    assert_eq!(trick.len(), 1, "{r}");
    let names =
        &trick[0]["essential"].as_array().unwrap().iter().find(|p| p["scheme"] == json!(TRICK_MODE)).unwrap()
            ["value"];
    assert_eq!(names, &json!(main_id), "the trick-mode set names the main set: {r}");
    let trick_id = trick[0]["id"].as_str().unwrap();
    let said = format!("removed AdaptationSet (id: {trick_id}) with unsupported EssentialProperty");
    assert!(
        dropped.as_array().unwrap().iter().any(|w| w.as_str().unwrap().contains(&said)),
        "dash.js as it comes said it dropped the trick-mode set: {dropped}"
    );
}

#[test]
fn on_epoll() {
    chromium_reads_trick_play_tracks(common::browser::BROWSER_ENGINE);
}
