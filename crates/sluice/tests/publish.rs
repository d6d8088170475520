//! Live publishing over RTSP, on every engine: ffmpeg publishes a test source (`ANNOUNCE`,
//! `SETUP` with `mode=record`, `RECORD`) to `rtsp://…/live/x` in H.264 and AAC over TCP, and to
//! `…/live/h` in H.265 and Opus over UDP, and ffprobe, started while they are published, reads
//! them live over RTSP and counts frames consistent with the published ones;
//! `/streams` lists the path with its publisher. Publishing is refused without the `[[access]]`
//! `publish` right (403), without the credentials the policy asks for (401), and on a path that
//! has a publisher (409). A publisher stopped with SIGSTOP is dropped at the stall deadline and
//! its path is free again.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[allow(unused_macros)]
#[macro_use]
mod common;

use std::time::Instant;

use common::publisher::*;
use common::rtsp::*;
use common::*;

rtsp_matrix!(a_published_stream_plays_live_and_the_rules_hold);

/// The SDP a second publisher announces (any valid H.264 one does: it is refused before use).
const SDP: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=x\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n\
    a=rtpmap:96 H264/90000\r\na=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z2QADKzZQUH7ARAAAAMAEAAAAwMg8UKZYA==,aOvjyyLA\r\n\
    a=control:streamid=0\r\n";

fn announce(c: &mut RtspConn, path: &str, auth: Option<&str>) -> RtspResponse {
    let url = c.url(path);
    let mut headers = vec![("Content-Type", "application/sdp")];
    if let Some(auth) = auth {
        headers.push(("Authorization", auth));
    }
    let length = SDP.len().to_string();
    headers.push(("Content-Length", &length));
    let cseq = c.send_request("ANNOUNCE", &url, &headers);
    c.send_raw(SDP);
    let r = c.response().unwrap();
    assert_eq!(r.cseq(), Some(cseq));
    r
}

fn a_published_stream_plays_live_and_the_rules_hold(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("users", b"alice:secret\n");
    let users = fx.path("users");
    let config = format!(
        "[rtsp]\npublish_stall = \"1s\"\n\n\
         [[access]]\nprefix = \"/live/\"\nmode = \"open\"\npublish = true\n\n\
         [[access]]\nprefix = \"/live/locked/\"\nmode = \"users\"\nusers_file = \"{}\"\npublish = true\n\n\
         [[access]]\nprefix = \"/live/watch-only/\"\nmode = \"open\"\n",
        users.display()
    );
    fx.write("sluice.toml", config.as_bytes());
    let config = fx.path("sluice.toml");
    let server = Server::serve(engine, &fx, &["--config", config.to_str().unwrap()]);
    let rtsp = server.rtsp_addr();
    let url = |path: &str| format!("rtsp://{rtsp}{path}");

    // The published streams, and one that will be stopped, side by side.
    let mut publisher = publish(&url("/live/x"), &H264_AAC, "tcp", 4);
    let mut hevc = publish(&url("/live/h"), &H265_OPUS, "udp", 4);
    let stalled = publish(&url("/live/stalled"), &H264_AAC, "tcp", 30);
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/x").is_some()),
        "/live/x is listed once published:\n{}\n{}",
        server.streams(),
        server.log_text()
    );
    let started = Instant::now();
    let entry = live_entry(&server, "/live/x").unwrap();
    assert!(entry["publisher"].as_str().unwrap().starts_with("127.0.0.1:"), "{entry}");
    assert_eq!(entry["rtsp"], url("/live/x"), "{entry}");

    // Read live while they are published: ffprobe ends when the publisher does (RTCP BYE).
    let h264_url = url("/live/x");
    let h264 = std::thread::spawn(move || ffprobe_video_frames(&h264_url));
    let h265_url = url("/live/h");
    let h265 = std::thread::spawn(move || {
        assert!(
            poll_until(IO_TIMEOUT, || RtspConn::open(rtsp).request("DESCRIBE", &h265_url, &[]).status == 200)
        );
        ffprobe_video_frames(&h265_url)
    });
    // Meanwhile /streams counts the viewer.
    let viewers = |e: &serde_json::Value| e["viewers"]["rtsp"].as_u64().unwrap_or(0);
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/x").is_some_and(|e| viewers(&e) == 1)),
        "/live/x lists its viewer:\n{}",
        server.streams()
    );
    assert_live_viewer_frames("/live/x", h264.join().unwrap(), started);
    assert_live_viewer_frames("/live/h", h265.join().unwrap(), started);
    assert!(publisher.finished(), "the H.264 publisher finished cleanly");
    assert!(hevc.finished(), "the H.265 publisher (over UDP) finished cleanly");

    // A second publisher of a path that has one is refused, while the first one sends.
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/stalled").is_some_and(|e| e["ready"] == true)),
        "/live/stalled is listed and its media flows:\n{}",
        server.streams()
    );
    let mut second = RtspConn::open(rtsp);
    announce(&mut second, "/live/stalled", None).expect(409, "a second publisher of a path");
    // Stopped now, the publisher of /live/stalled sends nothing more; the rules meanwhile.
    stalled.signal(libc::SIGSTOP);
    let mut c = RtspConn::open(rtsp);
    // Allowed to read the path (it is not published: 404), the connection may still not publish.
    c.request("DESCRIBE", &url("/live/watch-only/y"), &[]).expect(404, "DESCRIBE of an open path");
    announce(&mut c, "/live/watch-only/y", None).expect(403, "ANNOUNCE without the publish right");
    announce(&mut c, "/films/y", None).expect(403, "ANNOUNCE outside the live prefix");
    announce(&mut c, "/live/locked/y", None).expect(401, "ANNOUNCE without the policy's credentials");
    let basic = "Basic YWxpY2U6c2VjcmV0"; // alice:secret
    announce(&mut c, "/live/locked/y", Some(basic)).expect(200, "ANNOUNCE with them");
    // The stopped publisher goes at the stall deadline (1 s here), and its path is free again.
    assert!(
        poll_until(IO_TIMEOUT, || live_entry(&server, "/live/stalled").is_none()),
        "the stalled publisher is dropped:\n{}",
        server.streams()
    );
    announce(&mut second, "/live/stalled", None).expect(200, "the path is free again");
    drop(stalled);
}
