//! RTSP on an edge (`--store s3://...`) whose origin is a round trip away, on every engine: a
//! cold object's `DESCRIBE`, `SETUP` and `PLAY` (its `moov` read through the slice cache) and its
//! cold slices are fetched off the RTSP loop, so a viewer already playing on the same loop keeps
//! getting its packets on time, and the cold object then plays whole. The origin is the shared
//! SeaweedFS behind a toxiproxy that adds the round trip.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// common's engine matrix covers HTTP send strategies; RTSP uses `rtsp_matrix`.
#[allow(unused_macros)]
#[macro_use]
mod common;

use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::edge::multi_slice_clip as big_mp4;
use common::edge::put_object;
use common::rtsp::*;
use common::*;
use sluice_harness::toxiproxy::{Stream, Toxiproxy};

rtsp_matrix!(
    a_cold_object_is_fetched_off_the_rtsp_loop_while_a_viewer_plays_on_it,
    a_silent_origin_is_answered_504_with_the_reason_while_a_viewer_plays_on
);

const LOCATION: &str = "rtspedge/lib";
const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
/// The latency toxiproxy adds each way: every request to the origin takes 0.8 s at least, and a
/// cold `DESCRIBE` of `cold.mp4` three of them (its version, the slice at its start, the slice
/// holding its `moov`), well within the 6 s the warm viewer plays.
const EACH_WAY: Duration = Duration::from_millis(400);
/// The longest a playing viewer may go without a packet: half the origin's round trip. A loop
/// that waited for the origin (one round trip at least, for a `HEAD` or a slice) breaks it.
const MAX_GAP: Duration = Duration::from_millis(400);
/// The same while the origin is silent, below the edge's 1 s `--s3-timeout` that a loop waiting
/// for it would go without a packet.
const SILENT_MAX_GAP: Duration = Duration::from_millis(900);

/// The objects, written once per test binary: `warm.mp4` (the demo, one slice) and `cold.mp4`.
fn library() -> &'static str {
    static PUT: OnceLock<()> = OnceLock::new();
    PUT.get_or_init(|| {
        put_object(LOCATION, "warm.mp4", &std::fs::read(DEMO).unwrap());
        put_object(LOCATION, "cold.mp4", big_mp4());
    });
    LOCATION
}

/// The longest time between two datagrams of `sink` that arrived within `from..to`, counting
/// from `from` to the first and from the last to `to`.
fn longest_gap(sink: &UdpSink, from: Instant, to: Instant) -> Duration {
    let mut at = from;
    let mut longest = Duration::ZERO;
    for d in sink.datagrams().iter().filter(|d| d.at > from && d.at <= to) {
        longest = longest.max(d.at - at);
        at = d.at;
    }
    longest.max(to.saturating_duration_since(at))
}

/// An edge on `engine` reaching the shared SeaweedFS through a new toxiproxy (its proxy named
/// `s3`), with `--s3-timeout` `timeout`.
fn proxied_edge(engine: &[&str], dir: &std::path::Path, timeout: &str) -> (Toxiproxy, Server) {
    let location = library();
    assert!(Toxiproxy::available(), "toxiproxy missing (scripts/test installs it)");
    let toxiproxy = Toxiproxy::start(&dir.join("toxiproxy.log")).unwrap();
    let weed = shared_seaweedfs("rtspedge");
    let upstream: SocketAddr = weed.s3_endpoint.trim_start_matches("http://").parse().unwrap();
    let proxy = toxiproxy.proxy("s3", upstream).unwrap();
    let (store, endpoint) = (format!("s3://{location}"), format!("http://{proxy}"));
    let cache = dir.join("cache");
    let args = ["--store", &store, "--s3-endpoint", &endpoint, "--cache-dir", cache.to_str().unwrap()];
    let extra = ["--s3-timeout", timeout, "--cache-revalidate", "60s", "--cache-size", "256M"];
    let server = Server::start(engine, &[&args[..], &extra[..]].concat());
    (toxiproxy, server)
}

fn a_cold_object_is_fetched_off_the_rtsp_loop_while_a_viewer_plays_on_it(engine: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (toxiproxy, server) = proxied_edge(engine, dir.path(), "20s");
    let rtsp = server.rtsp_addr();
    // Both viewers come from one address: one RTSP loop serves them.
    let from: IpAddr = [127, 0, 0, 1].into();

    // The warm viewer's object is fetched before the origin slows down.
    let mut warm = UdpViewer::setup(rtsp, from, "/warm.mp4").unwrap_or_else(|r| panic!("SETUP warm: {r:?}"));
    toxiproxy.set_latency("s3", Some(EACH_WAY)).unwrap();
    warm.play();
    assert!(poll_until(IO_TIMEOUT, || warm.rtp.count() >= 30), "the warm viewer's stream started");

    // The cold object, while the warm one plays: its index is a round trip or two away.
    let asked = Instant::now();
    let mut cold = RtspConn::open_from(rtsp, from);
    let url = cold.url("/cold.mp4");
    let described = cold.request("DESCRIBE", &url, &[("Accept", "application/sdp")]);
    described.expect(200, "DESCRIBE of the cold object");
    let (rtp, rtcp) = udp_port_pair_on(from);
    let transport = format!(
        "RTP/AVP;unicast;client_port={}-{}",
        rtp.local_addr().unwrap().port(),
        rtcp.local_addr().unwrap().port()
    );
    let setup = cold.request("SETUP", &format!("{url}/trackID=0"), &[("Transport", &transport)]);
    setup.expect(200, "SETUP of the cold object");
    let session = setup.session_id().unwrap();
    let cold_rtp = UdpSink::start(rtp);
    cold.request("PLAY", &url, &[("Session", &session)]).expect(200, "PLAY of the cold object");
    let answered = Instant::now();
    assert!(
        answered - asked >= 2 * EACH_WAY,
        "the cold object's requests took {:?}: its index came from the origin, a round trip away",
        answered - asked
    );
    // The cold object's first packets (its first samples may wait for their slice, off the loop).
    assert!(poll_until(IO_TIMEOUT * 2, || cold_rtp.count() > 0), "the cold object streams");
    let until = Instant::now();
    assert!(
        poll_until(Duration::from_secs(1), || warm.rtp.last_at().is_some_and(|last| last > until)),
        "the warm viewer was still playing when the cold one started"
    );
    let gap = longest_gap(&warm.rtp, asked, until);
    assert!(
        gap < MAX_GAP,
        "the playing viewer went {gap:?} without a packet while a cold object was fetched \
         (the origin's round trip is {:?})",
        2 * EACH_WAY
    );

    // The cold object then plays whole, every video frame (its later slices fetched ahead or
    // waited for off the loop).
    let (frames, stderr) = ffprobe_video_frames(&format!("rtsp://{rtsp}/cold.mp4"));
    assert_eq!(frames, "180", "the cold object's frames over the edge's RTSP ({stderr})");
    let markers = cold_rtp.datagrams().iter().filter(|d| parse_rtp(&d.data).is_ok_and(|p| p.marker)).count();
    assert!(markers > 0, "the UDP viewer of the cold object got whole frames");
    // The cache's bytes are the samples read, not a slice's length per sample: at most each
    // object once per viewer (warm once, cold twice) and its index.
    let most = (std::fs::metadata(DEMO).unwrap().len() + 2 * big_mp4().len() as u64) * 3 / 2;
    let text = server.scrape();
    let from_cache = metric(&text, "sluice_cache_bytes_total{source=\"cache\"}");
    assert!(from_cache > 0 && from_cache <= most, "{from_cache} bytes from the cache, at most {most}");
    drop(toxiproxy);
}

fn a_silent_origin_is_answered_504_with_the_reason_while_a_viewer_plays_on(engine: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let (toxiproxy, server) = proxied_edge(engine, dir.path(), "1s");
    let rtsp = server.rtsp_addr();
    let from: IpAddr = [127, 0, 0, 1].into();
    let mut warm = UdpViewer::setup(rtsp, from, "/warm.mp4").unwrap_or_else(|r| panic!("SETUP warm: {r:?}"));
    warm.play();
    assert!(poll_until(IO_TIMEOUT, || warm.rtp.count() >= 30), "the warm viewer's stream started");
    // The origin stops answering: the cold object's DESCRIBE waits (off the loop) for the
    // edge's --s3-timeout, then is refused with the reason.
    toxiproxy.add_toxic("s3", "silent", "timeout", Stream::Downstream, 1.0, r#"{"timeout":0}"#).unwrap();
    let asked = Instant::now();
    let mut cold = RtspConn::open_from(rtsp, from);
    let url = cold.url("/cold.mp4");
    let r = cold.request("DESCRIBE", &url, &[("Accept", "application/sdp")]);
    let until = Instant::now();
    r.expect(504, "DESCRIBE of a cold object while the origin is silent");
    let reason = r.header("sluice-reason").unwrap_or_else(|| panic!("a reason: {r:?}"));
    assert!(reason.contains("/cold.mp4") && reason.contains("origin"), "{reason}");
    assert!(
        until - asked >= Duration::from_secs(1),
        "answered after the origin's timeout: {:?}",
        until - asked
    );
    assert!(
        poll_until(Duration::from_secs(1), || warm.rtp.last_at().is_some_and(|last| last > until)),
        "the warm viewer was still playing when the refusal came"
    );
    // A loop that waited for the silent origin goes its whole 1 s timeout without a packet; a
    // loop that did not went 0.54 s at most on 2 cores busy with builds (load average 9).
    let gap = longest_gap(&warm.rtp, asked, until);
    assert!(
        gap < SILENT_MAX_GAP,
        "the playing viewer went {gap:?} without a packet while the origin was silent (a loop that \
         waited for it goes the 1 s timeout)"
    );
    // The origin answers again: the object is asked for again (not refused from memory), and
    // plays.
    toxiproxy.remove_toxic("s3", "silent").unwrap();
    let mut last = None;
    let answered = poll_until(IO_TIMEOUT * 2, || {
        let mut c = RtspConn::open_from(rtsp, from);
        let status = c.request("DESCRIBE", &url, &[("Accept", "application/sdp")]).status;
        last = Some(status);
        status == 200
    });
    assert!(answered, "DESCRIBE once the origin answers again: last {last:?}");
    let (frames, stderr) = ffprobe_video_frames(&format!("rtsp://{rtsp}/cold.mp4"));
    assert_eq!(frames, "180", "the cold object's frames once the origin answers ({stderr})");
}
