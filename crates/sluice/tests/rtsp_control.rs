//! RTSP control connections inside the engine: they take places under `--max-connections` as
//! HTTP connections do, and a shutdown (SIGTERM) says goodbye to every viewer, an RTCP BYE on
//! its RTCP port or interleaved channel, before the connections close; on every engine.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// common's engine matrix covers HTTP send strategies; RTSP uses `rtsp_matrix`.
#[allow(unused_macros)]
#[macro_use]
mod common;

use std::time::{Duration, Instant};

use common::rtsp::*;
use common::*;

rtsp_matrix!(control_connections_count_against_max_connections, sigterm_sends_a_bye_to_every_viewer);

const DEMO: &str = "sluice-demo.mp4";

/// An RTSP connection proven accepted by an answered OPTIONS.
#[track_caller]
fn answered(server: &Server) -> RtspConn {
    let mut c = RtspConn::open(server.rtsp_addr());
    let url = c.url(DEMO);
    c.request("OPTIONS", &url, &[]).expect(200, "OPTIONS");
    c
}

fn control_connections_count_against_max_connections(engine: &[&str]) {
    let server = Server::start(engine, &["--max-connections", "2"]);
    let held = [answered(&server), answered(&server)];
    // Two RTSP connections fill the two places: an HTTP connection is closed unanswered...
    let mut http = Conn::open(server.addr());
    let _ = http.try_send(get("/", &[]));
    let closed = http.wait_close(Duration::from_secs(5));
    assert!(closed.closed && closed.extra.is_empty(), "HTTP beyond --max-connections 2: {closed:?}");
    // ...and so is a third RTSP connection.
    let mut third = RtspConn::open(server.rtsp_addr());
    let url = third.url(DEMO);
    let _ = third.try_send_raw(format!("OPTIONS {url} RTSP/1.0\r\nCSeq: 1\r\n\r\n"));
    let (closed, extra) = third.wait_close(Duration::from_secs(5));
    assert!(
        closed && extra.is_empty(),
        "a third RTSP connection was answered: {:?}",
        String::from_utf8_lossy(&extra)
    );
    // Once an RTSP connection closes, its place serves HTTP again.
    drop(held);
    assert!(
        poll_until(Duration::from_secs(5), || {
            let mut c = Conn::open(server.addr());
            c.try_send(get("/", &[("Connection", "close")])).is_ok()
                && c.read_response(false).is_ok_and(|r| r.status == 200)
        }),
        "no room for HTTP within 5 s after the RTSP connections closed"
    );
}

/// Whether a compound RTCP packet holds a BYE.
fn has_bye(packet: &[u8]) -> bool {
    rtcp_packets(packet).is_ok_and(|p| p.iter().any(|(kind, _)| *kind == 203))
}

fn sigterm_sends_a_bye_to_every_viewer(engine: &[&str]) {
    let mut server = Server::start(engine, &[]);
    // A UDP viewer of both tracks, listening on its RTCP ports, and a TCP viewer of both.
    let mut udp = RtspConn::open(server.rtsp_addr());
    let url = udp.url(DEMO);
    let (udp_session, pairs) = setup_udp_tracks(&mut udp, &url, 2);
    let (rtp_sinks, rtcp_sinks): (Vec<UdpSink>, Vec<UdpSink>) =
        pairs.into_iter().map(|(rtp, rtcp)| (UdpSink::start(rtp), UdpSink::start(rtcp))).unzip();
    let mut tcp = RtspConn::open(server.rtsp_addr());
    let tcp_session = setup_tcp_tracks(&mut tcp, &url, 2);
    udp.request("PLAY", &url, &[("Session", &udp_session)]).expect(200, "PLAY (UDP)");
    tcp.request("PLAY", &url, &[("Session", &tcp_session)]).expect(200, "PLAY (TCP)");
    // Both are playing (the demo lasts 6 s: no BYE of its end comes before the signal).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut frames = Vec::new();
    while frames.len() < 10 {
        match tcp.next_frame(deadline) {
            Ok(Some(f)) => frames.push(f),
            other => panic!("the TCP viewer got no media: {other:?}"),
        }
    }
    assert!(poll_until(Duration::from_secs(10), || rtp_sinks.iter().all(|s| s.count() > 0)), "no UDP media");

    server.signal(libc::SIGTERM);

    // TCP: the rest of the stream ends with a BYE on each RTCP channel, then the close.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match tcp.next_frame(deadline) {
            Ok(Some(f)) => frames.push(f),
            Ok(None) => panic!("the TCP viewer's connection was not closed within 10 s"),
            Err(e) if e.contains("closed the connection") => break,
            Err(e) => panic!("reading the TCP viewer's frames: {e}"),
        }
    }
    for channel in [1, 3] {
        assert!(
            frames.iter().any(|f| f.channel == channel && has_bye(&f.payload)),
            "no RTCP BYE on interleaved channel {channel} ({} frames)",
            frames.len()
        );
    }
    // UDP: a BYE on each track's RTCP port.
    let said_bye = |s: &UdpSink| s.datagrams().iter().any(|d| has_bye(&d.data));
    assert!(
        poll_until(Duration::from_secs(5), || rtcp_sinks.iter().all(said_bye)),
        "a UDP viewer's RTCP port got no BYE: {:?}",
        rtcp_sinks.iter().map(said_bye).collect::<Vec<_>>()
    );
    assert!(server.wait_exit(Duration::from_secs(15)).is_some(), "the server did not exit after SIGTERM");
}
