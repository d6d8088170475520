//! The RTP a viewer receives for a fixed file is byte for byte what sluice has always sent: a golden
//! capture of the built-in demo MP4's packets (every packet of each track, at most the first
//! 1,000), over UDP and over TCP interleaved, on every engine.
//!
//! The capture in `data/rtsp_golden.txt` was written from the server before its RTP left as
//! iovecs over the shared sample bytes; each line is one packet: track, index from the `RTP-Info`
//! sequence number, payload length, marker bit, timestamp from the `RTP-Info` time, and an
//! FNV-1a hash of the payload. Sequence numbers and SSRCs are random per session, so they are
//! compared relative to `RTP-Info`, not as bytes. Run with `SLUICE_BLESS_RTSP_GOLDEN=1` (epoll
//! engine) to write the file again, which only a deliberate change of the packets may do.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// common's engine matrix covers HTTP send strategies; RTSP uses `rtsp_matrix`.
#[allow(unused_macros)]
#[macro_use]
mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::rtsp::*;
use common::*;

rtsp_matrix!(rtp_payloads_match_the_golden_capture);

const DEMO: &str = "sluice-demo.mp4";
/// Packets per track the capture holds at most.
const MAX_PACKETS: u16 = 1000;
const BLESS_ENV: &str = "SLUICE_BLESS_RTSP_GOLDEN";

fn golden_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/rtsp_golden.txt")
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

/// (track, index) to the packet's line.
type Capture = BTreeMap<(usize, u16), String>;

/// Files `p` (of `track`, whose `RTP-Info` gave `info`) into `capture`.
fn file(capture: &mut Capture, track: usize, info: &RtpInfo, p: &Rtp) {
    let index = p.seq.wrapping_sub(info.seq.expect("RTP-Info seq"));
    if index >= MAX_PACKETS {
        return;
    }
    let ts = p.timestamp.wrapping_sub(info.rtptime.expect("RTP-Info rtptime"));
    let line =
        format!("{track} {index} {} {} {ts} {:016x}", p.payload.len(), u8::from(p.marker), fnv1a(&p.payload));
    let old = capture.insert((track, index), line);
    assert!(old.is_none(), "track {track}: packet {index} arrived twice");
}

fn rtp_infos(reply: &RtspResponse) -> Vec<RtpInfo> {
    let infos = rtp_info(reply.header("rtp-info").expect("PLAY without RTP-Info")).expect("RTP-Info parses");
    assert_eq!(infos.len(), 2, "one RTP-Info entry per track: {infos:?}");
    infos
}

/// The entry of `infos` for `track`.
fn info_of(infos: &[RtpInfo], track: usize) -> &RtpInfo {
    let suffix = format!("trackID={track}");
    infos
        .iter()
        .find(|i| i.url.ends_with(&suffix))
        .unwrap_or_else(|| panic!("no RTP-Info for {suffix}: {infos:?}"))
}

fn rtp_payloads_match_the_golden_capture(engine: &[&str]) {
    // `refuse`: a late frame is sent late rather than dropped, so a busy machine changes no
    // packet; one viewer is far within any loop's room.
    let server = Server::start(engine, &["--rtsp-overload", "refuse"]);
    let addr = server.rtsp_addr();

    // Over UDP: both tracks, a sink on each RTP port; over TCP: both interleaved.
    let mut udp = RtspConn::open(addr);
    let url = udp.url(DEMO);
    let (udp_session, pairs) = setup_udp_tracks(&mut udp, &url, 2);
    let (sinks, rtcp_sockets): (Vec<UdpSink>, Vec<_>) =
        pairs.into_iter().map(|(rtp, rtcp)| (UdpSink::start(rtp), rtcp)).unzip();
    let mut tcp = RtspConn::open(addr);
    let tcp_session = setup_tcp_tracks(&mut tcp, &url, 2);

    let udp_info =
        rtp_infos(udp.request("PLAY", &url, &[("Session", &udp_session)]).expect(200, "PLAY (UDP)"));
    let tcp_info =
        rtp_infos(tcp.request("PLAY", &url, &[("Session", &tcp_session)]).expect(200, "PLAY (TCP)"));

    // TCP: every packet, in order, until both tracks said goodbye (RTCP BYE).
    let mut over_tcp = Capture::new();
    let mut byes = [false; 2];
    let deadline = Instant::now() + Duration::from_secs(40);
    for f in tcp.pending.drain(..).collect::<Vec<_>>() {
        take_frame(&mut over_tcp, &mut byes, &tcp_info, f);
    }
    while !byes.iter().all(|b| *b) {
        match tcp.next_frame(deadline) {
            Ok(Some(f)) => take_frame(&mut over_tcp, &mut byes, &tcp_info, f),
            Ok(None) => panic!("the TCP stream ended before both BYEs ({byes:?})"),
            Err(e) => panic!("reading interleaved frames: {e}"),
        }
    }
    // UDP: the same file, paced alike; quiet for half a second means it has all arrived.
    assert!(
        poll_until(Duration::from_secs(15), || sinks
            .iter()
            .all(|s| s.last_at().is_some_and(|t| t.elapsed() > Duration::from_millis(500)))),
        "the UDP stream did not end"
    );
    let mut over_udp = Capture::new();
    for (track, sink) in sinks.iter().enumerate() {
        for d in sink.datagrams() {
            let p = parse_rtp(&d.data).unwrap_or_else(|e| panic!("UDP track {track}: {e}"));
            file(&mut over_udp, track, info_of(&udp_info, track), &p);
        }
    }

    let text = |c: &Capture| c.values().map(|l| format!("{l}\n")).collect::<String>();
    if std::env::var_os(BLESS_ENV).is_some() && engine.contains(&"epoll") {
        std::fs::create_dir_all(golden_path().parent().unwrap()).unwrap();
        std::fs::write(golden_path(), text(&over_tcp)).unwrap();
        eprintln!("wrote {} ({} packets)", golden_path().display(), over_tcp.len());
    }
    let golden_text = std::fs::read_to_string(golden_path()).expect("read the golden capture");
    let golden: Capture = golden_text
        .lines()
        .map(|l| {
            let mut f = l.split(' ');
            let key = (f.next().unwrap().parse().unwrap(), f.next().unwrap().parse().unwrap());
            (key, l.to_string())
        })
        .collect();
    assert!(golden.len() > 400, "the capture holds both tracks of the demo: {}", golden.len());

    // Over TCP nothing may be lost: the capture exactly.
    let first_difference = |c: &Capture| {
        golden
            .iter()
            .find(|(k, l)| c.get(k) != Some(l))
            .map(|(k, l)| format!("{k:?}: golden {l:?}, got {:?}", c.get(k)))
    };
    assert_eq!(
        over_tcp.len(),
        golden.len(),
        "packets over TCP; first difference: {:?}",
        first_difference(&over_tcp)
    );
    assert_eq!(first_difference(&over_tcp), None, "over TCP");
    // Over UDP a datagram may be lost on a busy machine, but every one that arrived is the
    // capture's, and nearly all arrive.
    for (k, line) in &over_udp {
        assert_eq!(golden.get(k), Some(line), "over UDP, packet {k:?}");
    }
    assert!(
        over_udp.len() * 10 >= golden.len() * 9,
        "over UDP only {} of {} packets arrived",
        over_udp.len(),
        golden.len()
    );
    drop(rtcp_sockets);
}

/// Files an interleaved frame: RTP on even channels, a BYE on an odd one ends that track.
fn take_frame(capture: &mut Capture, byes: &mut [bool; 2], infos: &[RtpInfo], f: Frame) {
    let track = usize::from(f.channel / 2);
    if track >= 2 {
        return;
    }
    if f.channel.is_multiple_of(2) {
        let p = parse_rtp(&f.payload).unwrap_or_else(|e| panic!("channel {}: {e}", f.channel));
        file(capture, track, info_of(infos, track), &p);
    } else if rtcp_packets(&f.payload).is_ok_and(|v| v.iter().any(|(t, _)| *t == 203)) {
        byes[track] = true;
    }
}
