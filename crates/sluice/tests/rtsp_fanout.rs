//! RTSP fan-out bounds (issue 18), on every engine: `--rtsp-max-viewers` answers the viewer
//! beyond it `453 Not Enough Bandwidth` while the admitted ones keep streaming, a released viewer
//! makes room again, and `/metrics` counts viewers admitted and refused and the viewers of each
//! stream. The load-driven refusal and the degrade policy are tested in the sans-I/O core
//! (`sluice_media::rtsp::server`), where the load can be simulated.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// common's engine matrix covers HTTP send strategies; RTSP uses `rtsp_matrix`.
#[allow(unused_macros)]
#[macro_use]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::rtsp::*;
use common::*;

rtsp_matrix!(viewers_beyond_the_bound_get_453_and_the_admitted_keep_streaming);

const DEMO: &str = "sluice-demo.mp4";
const ADMITTED: &str = "sluice_rtsp_viewers_admitted_total";
const REFUSED: &str = "sluice_rtsp_viewers_refused_total";
const STREAM_VIEWERS: &str = "sluice_rtsp_stream_viewers{path=\"/sluice-demo.mp4\"}";

/// A stream's viewers, or 0 when the gauge has no line for it (no one watches).
fn stream_viewers(text: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(STREAM_VIEWERS)?.trim().parse().ok()).unwrap_or(0)
}

/// SETUP of the video track over TCP interleaved; the reply.
fn setup(c: &mut RtspConn) -> RtspResponse {
    let url = format!("{}/trackID=0", c.url(DEMO));
    c.request("SETUP", &url, &[("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")])
}

/// A viewer that set up and played; returns its connection and session.
#[track_caller]
fn viewer(server: &Server) -> (RtspConn, String) {
    let mut c = RtspConn::open(server.rtsp_addr());
    let r = setup(&mut c);
    r.expect(200, "SETUP within the bound");
    let session = r.session_id().expect("a Session header");
    let url = c.url(DEMO);
    c.request("PLAY", &url, &[("Session", &session)]).expect(200, "PLAY within the bound");
    (c, session)
}

/// RTP packets on channel 0 that `c` receives within `within`.
fn video_packets(c: &mut RtspConn, within: Duration) -> usize {
    let deadline = Instant::now() + within;
    let mut n = 0;
    while let Ok(Some(frame)) = c.next_frame(deadline) {
        n += usize::from(frame.channel == 0);
    }
    n
}

fn viewers_beyond_the_bound_get_453_and_the_admitted_keep_streaming(engine: &[&str]) {
    let fx = Fixture::new();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-server/demo/sluice-demo.mp4");
    fx.write(DEMO, &std::fs::read(demo).expect("read the demo MP4"));
    let server = Server::serve(engine, &fx, &["--rtsp-max-viewers", "2"]);
    let text = server.scrape();
    assert_eq!((metric(&text, ADMITTED), metric(&text, REFUSED)), (0, 0), "a fresh server");

    let (mut first, first_session) = viewer(&server);
    let (mut second, _) = viewer(&server);
    // The third is refused at SETUP: no session, the connection stays usable.
    let mut third = RtspConn::open(server.rtsp_addr());
    let r = setup(&mut third);
    r.expect(453, "SETUP beyond --rtsp-max-viewers");
    assert!(r.session_id().is_none(), "no session for a refused viewer:\n{r:?}");
    third.request("OPTIONS", "*", &[]).expect(200, "OPTIONS after a 453");
    let text = wait_metrics(&server, "two admitted, one refused", |t| {
        metric(t, ADMITTED) == 2 && metric(t, REFUSED) == 1 && stream_viewers(t) == 2
    });
    assert_eq!(metric(&text, "sluice_rtsp_sessions"), 2, "the refused viewer holds no session");
    // The admitted viewers stream on.
    for (name, c) in [("first", &mut first), ("second", &mut second)] {
        assert!(video_packets(c, Duration::from_millis(500)) > 0, "the {name} viewer's video");
    }

    // A viewer leaving makes room for the one refused.
    let url = first.url(DEMO);
    first.request("TEARDOWN", &url, &[("Session", &first_session)]).expect(200, "TEARDOWN");
    wait_metrics(&server, "one viewer left", |t| stream_viewers(t) == 1);
    let r = setup(&mut third);
    r.expect(200, "SETUP after a viewer left");
    let session = r.session_id().expect("a Session header");
    let url = third.url(DEMO);
    third.request("PLAY", &url, &[("Session", &session)]).expect(200, "PLAY after a viewer left");
    assert!(video_packets(&mut third, Duration::from_millis(500)) > 0, "the third viewer's video");
    wait_metrics(&server, "the third admitted", |t| {
        metric(t, ADMITTED) == 3 && metric(t, REFUSED) == 1 && stream_viewers(t) == 2
    });
}
