//! Publishing over RTMP, on every engine: ffmpeg publishes a test source in H.264 and AAC to
//! `rtmp://…/live/x`, and ffprobe, started while it is published, reads `rtsp://…/live/x` and
//! counts frames consistent with the published ones; `/streams` lists the path with its
//! publisher. A token on the stream key (`NAME?token=…`) opens a `jwt` policy's path; publishing
//! is refused without it, without the `publish` right, to another application, and on a path
//! that has a publisher (`NetStream.Publish.BadName`). A publisher stopped with SIGSTOP is
//! dropped at the stall deadline and its path is free again.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::publisher::{assert_live_viewer_frames, live_entry, publish_rtmp, rtmp_command};
use common::*;

rtsp_matrix!(an_rtmp_publisher_plays_live_over_rtsp_and_the_rules_hold);

/// The HS256 secret of `/live/members/`, in the JWKS as an `oct` key.
const JWT_SECRET: &[u8] = b"a-jwt-secret-of-at-least-32-bytes!!";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An HS256 JWT opening `paths`, for ten minutes.
fn jwt(paths: &str) -> String {
    use hmac::Mac;
    let exp = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 600;
    let header = r#"{"alg":"HS256","typ":"JWT","kid":"m1"}"#;
    let claims = format!(r#"{{"exp":{exp},"paths":["{paths}"]}}"#);
    let signing_input = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(JWT_SECRET).unwrap();
    mac.update(signing_input.as_bytes());
    format!("{signing_input}.{}", b64(&mac.finalize().into_bytes()))
}

/// Publishes to `url`, which must be refused: what ffmpeg printed.
fn refused(url: &str) -> String {
    let (status, _, err) = run_bounded(&mut rtmp_command(url, 2), Duration::from_secs(20));
    let err = String::from_utf8_lossy(&err).into_owned();
    assert!(!status.success(), "publishing to {url} is refused: {err}");
    err
}

fn an_rtmp_publisher_plays_live_over_rtsp_and_the_rules_hold(engine: &[&str]) {
    let fx = Fixture::new();
    let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"m1","alg":"HS256","k":"{}"}}]}}"#, b64(JWT_SECRET));
    fx.write("jwks.json", jwks.as_bytes());
    let config = format!(
        "[rtsp]\npublish_stall = \"1s\"\n\n\
         [[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
         [[access]]\nprefix = \"/live/members/\"\nmode = \"jwt\"\njwks = \"{}\"\npublish = true\n\n\
         [[access]]\nprefix = \"/live/watch-only/\"\nmode = \"open\"\n",
        fx.path("jwks.json").display()
    );
    fx.write("sluice.toml", config.as_bytes());
    let config = fx.path("sluice.toml");
    let server =
        Server::serve(engine, &fx, &["--config", config.to_str().unwrap(), "--rtmp-listen", "127.0.0.1:0"]);
    let rtmp: SocketAddr = server
        .logs()
        .iter()
        .find_map(|l| parse_scheme_line(l, "rtmp"))
        .unwrap_or_else(|| panic!("no rtmp listener line:\n{}", server.log_text()));
    let rtsp = server.rtsp_addr();

    // The published stream, one with a token, and one that will be stopped, side by side.
    let mut publisher = publish_rtmp(&format!("rtmp://{rtmp}/live/x"), 4);
    let token = jwt("/live/members/");
    let mut member = publish_rtmp(&format!("rtmp://{rtmp}/live/members/t?token={token}"), 2);
    let stalled = publish_rtmp(&format!("rtmp://{rtmp}/live/stalled"), 30);
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/x").is_some()),
        "/live/x is listed once published:\n{}\n{}",
        server.streams(),
        server.log_text()
    );
    let started = Instant::now();
    let entry = live_entry(&server, "/live/x").unwrap();
    assert!(entry["publisher"].as_str().unwrap().starts_with("127.0.0.1:"), "{entry}");
    assert_eq!(entry["rtsp"], format!("rtsp://{rtsp}/live/x"), "{entry}");

    // Read over RTSP while it is published: ffprobe ends when the publisher does.
    let url = format!("rtsp://{rtsp}/live/x");
    let viewer = std::thread::spawn(move || ffprobe_video_frames(&url));
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/members/t").is_some()),
        "the token on the stream key opens /live/members/:\n{}",
        server.log_text()
    );
    assert_live_viewer_frames("/live/x", viewer.join().unwrap(), started);
    assert!(publisher.finished(), "the publisher finished cleanly");
    assert!(member.finished(), "the publisher with a token finished cleanly");

    // Refusals, while /live/stalled publishes.
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/stalled").is_some_and(|e| e["ready"] == true)),
        "/live/stalled is listed and its media flows:\n{}",
        server.streams()
    );
    let second = refused(&format!("rtmp://{rtmp}/live/stalled"));
    assert!(second.contains("has a publisher already"), "a second publisher of a path: {second}");
    let no_token = refused(&format!("rtmp://{rtmp}/live/members/u"));
    assert!(no_token.contains("needs credentials"), "without the token: {no_token}");
    let watch_only = refused(&format!("rtmp://{rtmp}/live/watch-only/y"));
    assert!(watch_only.contains("is not allowed"), "without the publish right: {watch_only}");
    let elsewhere = refused(&format!("rtmp://{rtmp}/films/y"));
    assert!(elsewhere.contains("is not served"), "another application: {elsewhere}");
    let log = server.log_text();
    assert_eq!(log.matches("NetStream.Publish.BadName").count(), 1, "{log}");
    assert_eq!(log.matches("NetStream.Publish.Denied").count(), 2, "{log}");

    // Stopped, the publisher of /live/stalled sends nothing more: it goes at the stall deadline
    // (1 s here), and its path is free again.
    stalled.signal(libc::SIGSTOP);
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/stalled").is_none()),
        "the stalled publisher is dropped:\n{}",
        server.streams()
    );
    // The path is freed as the connection ends, a moment before the reason is logged.
    assert!(
        poll_until(IO_TIMEOUT, || server.log_text().contains("dropped: it sent nothing for 1s")),
        "{}",
        server.log_text()
    );
    drop(stalled);
}
