//! RTSP fan-out bounds (issue 18), on every engine: `--rtsp-max-viewers` answers the viewer
//! beyond it `453 Not Enough Bandwidth` while the admitted ones keep streaming, a released viewer
//! makes room again, and `/metrics` counts viewers admitted and refused and the viewers of each
//! stream. With `--rtsp-loops 2`, viewers from different loopback addresses land on both loops
//! (each `SETUP` names its loop's UDP ports), each gets the whole stream, RTCP reaches the loop
//! holding the session, and the viewer bound holds for the server, not per loop. The load-driven refusal and the degrade policy are tested in the sans-I/O core
//! (`sluice_rtsp::server`), where the load can be simulated.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// common's engine matrix covers HTTP send strategies; RTSP uses `rtsp_matrix`.
#[allow(unused_macros)]
#[macro_use]
mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use common::rtsp::*;
use common::*;

rtsp_matrix!(
    viewers_beyond_the_bound_get_453_and_the_admitted_keep_streaming,
    two_loops_share_the_viewers_and_each_gets_the_whole_stream,
    rtcp_reaches_the_loop_holding_the_session,
    the_viewer_bound_holds_across_two_loops,
);

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

// ---------------------------------------------------------------------------------------------
// Two RTSP loops
// ---------------------------------------------------------------------------------------------

/// A loopback client address other than 127.0.0.1: 127.0.0.`n`.
fn client(n: u8) -> IpAddr {
    IpAddr::from([127, 0, 0, n])
}

/// The demo library and a server with two RTSP loops and `extra` settings.
fn two_loops(engine: &[&str], extra: &[&str]) -> (Fixture, Server) {
    let fx = Fixture::new();
    let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-server/demo/sluice-demo.mp4");
    fx.write(DEMO, &std::fs::read(demo).expect("read the demo MP4"));
    let args: Vec<&str> = ["--rtsp-loops", "2"].iter().chain(extra).copied().collect();
    let server = Server::serve(engine, &fx, &args);
    assert!(
        server.logs().iter().any(|l| l.contains("loops=2")),
        "the start-up line names the loops:\n{}",
        server.logs().join("\n")
    );
    (fx, server)
}

/// Video samples of the demo file.
fn demo_video_samples() -> usize {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-server/demo/sluice-demo.mp4");
    let bytes = std::fs::read(path).expect("read the demo MP4");
    let file = sluice_media::mp4::Mp4File::from_bytes(&bytes).expect("index the demo MP4");
    file.tracks[0].samples.len()
}

/// Sessions each loop holds, from `/metrics`.
fn loop_sessions(text: &str) -> Vec<u64> {
    (0..2).map(|i| metric(text, &format!("sluice_rtsp_loop_sessions{{loop=\"{i}\"}}"))).collect()
}

/// Which loop (its server port pair) clients from each address reach: a SETUP then a TEARDOWN
/// from each, so nothing is held after.
fn loop_of_each(server: &Server, addresses: impl IntoIterator<Item = u8>) -> BTreeMap<u8, (u16, u16)> {
    addresses
        .into_iter()
        .map(|n| {
            let v = UdpViewer::setup(server.rtsp_addr(), client(n), DEMO).expect("SETUP of a probe");
            v.teardown().expect(200, "TEARDOWN of a probe");
            (n, v.server_ports)
        })
        .collect()
}

/// Video frames (distinct RTP timestamps) a viewer received, and whether its sequence numbers
/// ran without a gap.
fn frames_received(v: &UdpViewer) -> (usize, bool) {
    let packets: Vec<Rtp> =
        v.rtp.datagrams().iter().map(|d| parse_rtp(&d.data).expect("an RTP packet")).collect();
    let timestamps: BTreeSet<u32> = packets.iter().map(|p| p.timestamp).collect();
    let contiguous = packets.windows(2).all(|w| w[1].seq == w[0].seq.wrapping_add(1));
    (timestamps.len(), contiguous)
}

fn two_loops_share_the_viewers_and_each_gets_the_whole_stream(engine: &[&str]) {
    let (_fx, server) = two_loops(engine, &[]);
    let samples = demo_video_samples();
    let mut viewers: Vec<UdpViewer> = (2..=7)
        .map(|n| UdpViewer::setup(server.rtsp_addr(), client(n), DEMO).expect("SETUP from a second address"))
        .collect();
    // Each SETUP names its loop's ports: two loops, two pairs, and the sessions split between
    // them as /metrics counts them.
    let mut by_ports: BTreeMap<(u16, u16), usize> = BTreeMap::new();
    for v in &viewers {
        *by_ports.entry(v.server_ports).or_default() += 1;
    }
    assert_eq!(by_ports.len(), 2, "six addresses reach both loops: {by_ports:?}");
    let text =
        wait_metrics(&server, "six sessions over two loops", |t| metric(t, "sluice_rtsp_sessions") == 6);
    let mut per_loop = loop_sessions(&text);
    let mut expected: Vec<u64> = by_ports.values().map(|&n| n as u64).collect();
    per_loop.sort_unstable();
    expected.sort_unstable();
    assert_eq!(per_loop, expected, "sessions per loop (metrics) vs per server_port pair (SETUP replies)");
    for v in &mut viewers {
        v.play();
    }
    // Every viewer gets every video frame, without a gap (the demo lasts 6 s), or, on a busy
    // machine where a loop falls behind (the default `degrade` policy drops whole frames then),
    // misses exactly the frames the server reports it dropped, and no other.
    let ended = |v: &UdpViewer| v.rtp.last_at().is_some_and(|t| t.elapsed() > Duration::from_secs(1));
    poll_until(Duration::from_secs(20), || {
        viewers.iter().all(|v| frames_received(v).0 >= samples || ended(v))
    });
    let got: Vec<(IpAddr, (usize, bool))> = viewers.iter().map(|v| (v.from, frames_received(v))).collect();
    let text = server.scrape();
    let dropped = metric(&text, "sluice_rtp_frames_dropped_total");
    let missing: u64 = got.iter().map(|(_, (n, _))| samples.saturating_sub(*n) as u64).sum();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    assert_eq!(
        missing, dropped,
        "frames the viewers missed vs frames the server dropped (load {load}): {got:?}"
    );
    if dropped == 0 {
        assert!(got.iter().all(|(_, (n, gapless))| *n == samples && *gapless), "{got:?}");
    } else {
        eprintln!("two loops: the server dropped {dropped} frames; load average {load}");
    }
    let text = wait_metrics(&server, "both loops report their load", |t| {
        t.contains("sluice_rtsp_loop_busy_ratio{loop=\"0\"}")
            && t.contains("sluice_rtsp_loop_busy_ratio{loop=\"1\"}")
    });
    assert_eq!(metric(&text, ADMITTED), 6);
    for v in &viewers {
        v.teardown().expect(200, "TEARDOWN");
    }
    wait_metrics(&server, "every session torn down", |t| loop_sessions(t) == [0, 0]);
}

fn rtcp_reaches_the_loop_holding_the_session(engine: &[&str]) {
    let (_fx, server) = two_loops(engine, &["--rtsp-session-timeout", "2s"]);
    // Two addresses on different loops.
    let loops = loop_of_each(&server, 2..=9);
    let pairs: BTreeSet<(u16, u16)> = loops.values().copied().collect();
    assert_eq!(pairs.len(), 2, "{loops:?}");
    let on = |pair: (u16, u16)| *loops.iter().find(|(_, p)| **p == pair).expect("an address on that loop").0;
    let (a, b) = (on(*pairs.first().unwrap()), on(*pairs.last().unwrap()));
    let setup = |n: u8| {
        let mut v = UdpViewer::setup(server.rtsp_addr(), client(n), DEMO).expect("SETUP");
        v.play();
        v
    };
    // `kept_a` and `kept_b` report to their own loops' RTCP ports, `misdirected` (on a's loop) to
    // the other loop's, `silent` not at all: only the first two outlive the 2 s timeout.
    let (kept_a, kept_b, misdirected, silent) = (setup(a), setup(b), setup(a), setup(b));
    let other_loop = kept_b.server_ports.1;
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        kept_a.receiver_report(kept_a.server_ports.1);
        kept_b.receiver_report(kept_b.server_ports.1);
        misdirected.receiver_report(other_loop);
        std::thread::sleep(Duration::from_millis(250));
    }
    let timeouts = "sluice_rtsp_sessions_released_total{reason=\"timeout\"}";
    let text =
        wait_metrics(&server, "the two without RTCP to their loop time out", |t| metric(t, timeouts) >= 2);
    assert_eq!(metric(&text, timeouts), 2, "only the misdirected and the silent session expire");
    assert_eq!(loop_sessions(&text).iter().sum::<u64>(), 2);
    assert_eq!(loop_sessions(&text), [1, 1], "one kept session on each loop");
    for v in [&misdirected, &silent] {
        v.teardown().expect(454, "TEARDOWN of an expired session");
    }
    for v in [&kept_a, &kept_b] {
        v.teardown().expect(200, "TEARDOWN of a session RTCP kept");
    }
    wait_metrics(&server, "both torn down", |t| loop_sessions(t) == [0, 0]);
}

fn the_viewer_bound_holds_across_two_loops(engine: &[&str]) {
    let (_fx, server) = two_loops(engine, &["--rtsp-max-viewers", "3"]);
    let loops = loop_of_each(&server, 2..=12);
    let pairs: BTreeSet<(u16, u16)> = loops.values().copied().collect();
    assert_eq!(pairs.len(), 2, "{loops:?}");
    // Three admitted, on both loops; then a newcomer from an address on each loop is refused.
    let on = |pair: (u16, u16), skip: usize| {
        *loops.iter().filter(|(_, p)| **p == pair).nth(skip).expect("enough addresses on that loop").0
    };
    let (first, second) = (*pairs.first().unwrap(), *pairs.last().unwrap());
    let admitted: Vec<UdpViewer> = [on(first, 0), on(first, 1), on(second, 0)]
        .into_iter()
        .map(|n| {
            let mut v =
                UdpViewer::setup(server.rtsp_addr(), client(n), DEMO).expect("SETUP within the bound");
            v.play();
            v
        })
        .collect();
    for n in [on(second, 1), on(first, 2)] {
        match UdpViewer::setup(server.rtsp_addr(), client(n), DEMO) {
            Err(r) => {
                r.expect(453, "the fourth viewer, on either loop");
            }
            Ok(v) => {
                panic!("127.0.0.{n} admitted past --rtsp-max-viewers 3 (server ports {:?})", v.server_ports)
            }
        }
    }
    let text = wait_metrics(&server, "three admitted, two refused", |t| {
        metric(t, ADMITTED) == 3 && metric(t, REFUSED) == 2
    });
    assert_eq!(loop_sessions(&text).iter().sum::<u64>(), 3);
    // A viewer leaving one loop makes room on the other.
    admitted[0].teardown().expect(200, "TEARDOWN");
    let v = UdpViewer::setup(server.rtsp_addr(), client(on(second, 1)), DEMO).expect("room again");
    assert_eq!(v.server_ports, second);
}
