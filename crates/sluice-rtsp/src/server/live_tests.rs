//! Tests of publishing and watching a live path through [`super::RtspServer`]: a publisher sends
//! the demo file's samples as RTP over interleaved TCP, viewers play the path, a second publisher
//! is refused, and a silent one is dropped.

use std::sync::Arc;

use sluice_proto::rtp::{AacPacketizer, H264Depacketizer, H264Packetizer, Packets, RtpPacket, StreamConfig};
use sluice_proto::rtsp::{read_message, Limits, Message};

use super::*;
use crate::live::LiveRegistry;
use crate::NotFound;
use sluice_media::mp4::{Mp4File, TrackKind};
use sluice_media::sdp::{session_description, to_bytes, SdpOptions};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const LIVE: &str = "rtsp://127.0.0.1:8554/live/x";

/// No files; live paths under `/live`.
struct Live(LiveRegistry);

impl Catalogue for Live {
    fn open(&self, _: &str) -> Result<Arc<Mp4File>, NotFound> {
        Err(NotFound)
    }

    fn live(&self) -> Option<&LiveRegistry> {
        Some(&self.0)
    }
}

impl MediaLibrary for Live {
    type Bytes = ();

    fn open_bytes(&self, _: &str) -> io::Result<()> {
        Err(io::ErrorKind::NotFound.into())
    }

    fn read_at(&self, _: &(), _: u64, _: &mut [u8]) -> io::Result<()> {
        Err(io::ErrorKind::NotFound.into())
    }
}

struct Quiet;

impl Observer for Quiet {
    fn note(&self, _: Note<'_>) {}
}

type Server<'a> = RtspServer<'a, Live, Quiet, ()>;

fn table() -> SessionTable {
    let mut n = 7u64;
    SessionTable::with_entropy(RtspConfig::default(), move || {
        n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        n
    })
}

/// Everything `key` has to write: replies as text and interleaved frames.
fn drain(server: &mut Server<'_>, key: usize, now: Instant) -> (Vec<String>, Vec<(u8, Vec<u8>)>) {
    let mut bytes = Vec::new();
    while let Some(c) = server.control(key) {
        let Some(pending) = c.out.pending() else { break };
        let n = pending.len();
        bytes.extend_from_slice(pending);
        c.out.advance(n);
        server.wrote(key, now);
    }
    let (mut replies, mut frames) = (Vec::new(), Vec::new());
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        if let Ok(Message::Interleaved { channel, payload, consumed }) =
            read_message(rest, &Limits::default())
        {
            frames.push((channel, payload.to_vec()));
            rest = &rest[consumed..];
        } else {
            let (_, n) = rtsp_types::Message::<Vec<u8>>::parse(rest).expect("our replies parse");
            replies.push(String::from_utf8_lossy(&rest[..n]).into_owned());
            rest = &rest[n..];
        }
    }
    (replies, frames)
}

fn ask(server: &mut Server<'_>, key: usize, request: &str, now: Instant) -> String {
    server.received(key, request.as_bytes(), now);
    let (mut replies, _) = drain(server, key, now);
    assert_eq!(replies.len(), 1, "{request}: {replies:?}");
    replies.pop().unwrap()
}

fn session_of(reply: &str) -> String {
    let line = reply.lines().find(|l| l.starts_with("Session: ")).expect("a Session header");
    line["Session: ".len()..].split(';').next().unwrap().to_string()
}

/// The demo, and its SDP as a publisher would announce it.
fn demo() -> (Arc<Mp4File>, Vec<u8>, String) {
    let bytes = std::fs::read(DEMO).unwrap();
    let file = Arc::new(Mp4File::from_bytes(&bytes).unwrap());
    let sdp = to_bytes(&session_description(&file, &SdpOptions::default()));
    (file, bytes, String::from_utf8(sdp).unwrap())
}

/// Announces, sets up both tracks and records on a new connection; returns it.
fn publish(server: &mut Server<'_>, sdp: &str, now: Instant) -> usize {
    let key = server.accept((), "10.0.0.9:5000".parse().unwrap(), now);
    let announce = format!(
        "ANNOUNCE {LIVE} RTSP/1.0\r\nCSeq: 1\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    );
    let r = ask(server, key, &announce, now);
    assert!(r.starts_with("RTSP/1.0 200"), "{r}");
    let setup = |track: usize, session: &str| {
        format!(
            "SETUP {LIVE}/trackID={track} RTSP/1.0\r\nCSeq: 2\r\n{session}Transport: RTP/AVP/TCP;unicast;interleaved={}-{};mode=record\r\n\r\n",
            track * 2,
            track * 2 + 1
        )
    };
    let r = ask(server, key, &setup(0, ""), now);
    assert!(r.contains("interleaved=0-1;mode=record"), "{r}");
    let id = session_of(&r);
    let r = ask(server, key, &setup(1, &format!("Session: {id}\r\n")), now);
    assert!(r.starts_with("RTSP/1.0 200"), "{r}");
    let r = ask(server, key, &format!("RECORD {LIVE} RTSP/1.0\r\nCSeq: 3\r\nSession: {id}\r\n\r\n"), now);
    assert!(r.starts_with("RTSP/1.0 200"), "{r}");
    key
}

/// The demo's samples as a publisher sends them: `(time, interleaved frame)` in time order.
fn publisher_frames(file: &Mp4File, bytes: &[u8]) -> Vec<(Duration, Vec<u8>)> {
    let mut out = Vec::new();
    for (i, track) in file.tracks.iter().enumerate() {
        let config =
            StreamConfig { ssrc: 1 + i as u32, payload_type: 96 + i as u8, initial_sequence: 65_000 };
        let rate = sluice_media::sdp::clock_rate(track);
        let mut h264 = match &track.kind {
            TrackKind::H264(h) => Some(H264Packetizer::new(config, 1400, h.nal_length_size).unwrap()),
            _ => None,
        };
        let mut aac = AacPacketizer::new(config, 1400).unwrap();
        for s in &track.samples {
            let data = &bytes[s.range().start as usize..s.range().end as usize];
            let ts =
                (u128::from(s.composition_time()) * u128::from(rate) / u128::from(track.timescale)) as u32;
            let mut packets = Packets::new();
            match &mut h264 {
                Some(p) => {
                    p.packetize(data, ts.wrapping_add(1 << 31), &mut packets).unwrap();
                }
                None => aac.packetize(data, ts, &mut packets).map(|_| ()).unwrap(),
            }
            let at = crate::stream::ticks_to_duration(s.decode_time(), track.timescale);
            for p in packets.iter() {
                let mut frame = vec![b'$', (i * 2) as u8];
                frame.extend_from_slice(&(p.len() as u16).to_be_bytes());
                frame.extend_from_slice(p);
                out.push((at, frame));
            }
        }
    }
    out.sort_by_key(|(at, _)| *at);
    out
}

#[test]
fn a_published_path_plays_live_from_a_keyframe_and_ends_with_its_publisher() {
    let (file, bytes, sdp) = demo();
    let media = Live(LiveRegistry::new("/live"));
    let t0 = Instant::now();
    let mut server: Server<'_> = RtspServer::new(table(), &media, Quiet, t0);
    let describe = format!("DESCRIBE {LIVE} RTSP/1.0\r\nCSeq: 1\r\n\r\n");
    let viewer = server.accept((), "10.0.0.1:4000".parse().unwrap(), t0);
    assert!(ask(&mut server, viewer, &describe, t0).starts_with("RTSP/1.0 404"), "not published yet");

    let publisher = publish(&mut server, &sdp, t0);
    // A second publisher of the path is refused.
    let second = server.accept((), "10.0.0.8:5000".parse().unwrap(), t0);
    let announce = format!(
        "ANNOUNCE {LIVE} RTSP/1.0\r\nCSeq: 1\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    );
    let r = ask(&mut server, second, &announce, t0);
    assert!(r.starts_with("RTSP/1.0 409"), "{r}");

    // Three seconds of media, as it arrives (the demo has keyframes at 0, 2 and 4 s).
    let joined = Duration::from_secs(3);
    let frames = publisher_frames(&file, &bytes);
    let (early, late): (Vec<_>, Vec<_>) = frames.into_iter().partition(|(at, _)| *at < joined);
    for (at, frame) in &early {
        server.received(publisher, frame, t0 + *at);
    }
    let now = t0 + joined;
    let r = ask(&mut server, viewer, &describe, now);
    assert!(
        r.starts_with("RTSP/1.0 200") && r.contains("H264/90000") && r.contains("sprop-parameter-sets"),
        "{r}"
    );
    assert!(r.contains("a=range:npt=now-\r\n"), "a live range: {r}");
    let setup = |track: usize, session: &str| {
        format!(
            "SETUP {LIVE}/trackID={track} RTSP/1.0\r\nCSeq: 2\r\n{session}Transport: RTP/AVP/TCP;unicast;interleaved={}-{}\r\n\r\n",
            track * 2,
            track * 2 + 1
        )
    };
    let id = session_of(&ask(&mut server, viewer, &setup(0, ""), now));
    ask(&mut server, viewer, &setup(1, &format!("Session: {id}\r\n")), now);
    let r =
        ask(&mut server, viewer, &format!("PLAY {LIVE} RTSP/1.0\r\nCSeq: 3\r\nSession: {id}\r\n\r\n"), now);
    assert!(r.starts_with("RTSP/1.0 200"), "{r}");

    // The rest of the media arrives while the viewer plays; then the publisher leaves.
    let mut video = H264Depacketizer::new(1 << 22);
    let mut pictures = Vec::new();
    let mut byes = 0;
    let mut take = |server: &mut Server<'_>, at: Instant| {
        let (_, frames) = drain(server, viewer, at);
        for (channel, payload) in frames {
            match channel {
                0 => {
                    let packet = RtpPacket::parse(&payload).unwrap();
                    if let Ok(Some(au)) = video.push(&packet) {
                        pictures.push(au.nal_units().any(|n| n[0] & 0x1f == 5));
                    }
                }
                1 | 3 => {
                    byes += usize::from(payload.windows(2).any(|w| w == [0x81, 203]));
                }
                _ => {}
            }
        }
    };
    let mut at = now;
    for (when, frame) in &late {
        let when = t0 + *when;
        while at < when {
            server.tick(at, Duration::from_secs(1_700_000_000));
            take(&mut server, at);
            at += Duration::from_millis(8);
        }
        server.received(publisher, frame, when);
    }
    server.disconnect(publisher, at);
    assert!(media.0.get("/live/x").is_none(), "the path is free once its publisher is gone");
    for _ in 0..2000 {
        server.tick(at, Duration::from_secs(1_700_000_000));
        take(&mut server, at);
        at += Duration::from_millis(8);
    }
    let video_samples = file.tracks.iter().find(|t| t.kind.is_video()).unwrap().samples.len();
    assert_eq!(pictures.first(), Some(&true), "the viewer starts at a keyframe");
    // From the last keyframe before the PLAY (at 2 s, the 61st picture) to the end, every one.
    assert_eq!(pictures.len(), video_samples - 60);
    assert!(byes >= 1, "an RTCP BYE ends the stream for the viewer");
}

#[test]
fn a_silent_publisher_is_dropped_at_the_stall_deadline_and_the_path_is_free_again() {
    let (file, bytes, sdp) = demo();
    let media = Live(LiveRegistry::new("/live"));
    let t0 = Instant::now();
    let mut server: Server<'_> = RtspServer::new(table(), &media, Quiet, t0);
    let publisher = publish(&mut server, &sdp, t0);
    let stall = server.config().publish_stall;
    // Before its first packet an encoder may take a while: the stall deadline is not running.
    server.tick(t0 + stall + PACE_TICK, Duration::ZERO);
    assert!(!server.control(publisher).unwrap().should_close(), "kept until its media starts");
    let t1 = t0 + stall * 2;
    let (_, first) = &publisher_frames(&file, &bytes)[0];
    server.received(publisher, first, t1);
    server.tick(t1 + stall - Duration::from_millis(10), Duration::ZERO);
    assert!(!server.control(publisher).unwrap().should_close());
    let t2 = t1 + stall + PACE_TICK;
    server.tick(t2, Duration::ZERO);
    assert!(server.control(publisher).unwrap().should_close(), "dropped at the deadline");
    server.remove(publisher, t2);
    assert!(media.0.get("/live/x").is_none());
    // A path outside the live prefix is not published.
    let key = server.accept((), "10.0.0.9:5001".parse().unwrap(), t0);
    let r = ask(
        &mut server,
        key,
        &format!(
            "ANNOUNCE rtsp://h/films/x RTSP/1.0\r\nCSeq: 1\r\nContent-Length: {}\r\n\r\n{sdp}",
            sdp.len()
        ),
        t0,
    );
    assert!(r.starts_with("RTSP/1.0 403"), "{r}");
    let again = publish(&mut server, &sdp, t2);
    assert!(server.control(again).is_some());
}

#[test]
fn a_publisher_over_udp_sends_to_the_rtp_port_and_datagrams_keep_it_alive() {
    let (file, bytes, sdp) = demo();
    let media = Live(LiveRegistry::new("/live"));
    let t0 = Instant::now();
    let mut server: Server<'_> = RtspServer::new(table(), &media, Quiet, t0);
    let key = server.accept((), "10.0.0.9:5000".parse().unwrap(), t0);
    let announce = format!(
        "ANNOUNCE {LIVE} RTSP/1.0\r\nCSeq: 1\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{sdp}",
        sdp.len()
    );
    assert!(ask(&mut server, key, &announce, t0).starts_with("RTSP/1.0 200"));
    let mut id = String::new();
    for track in 0..2 {
        let session = if id.is_empty() { String::new() } else { format!("Session: {id}\r\n") };
        let r = ask(
            &mut server,
            key,
            &format!(
                "SETUP {LIVE}/trackID={track} RTSP/1.0\r\nCSeq: 2\r\n{session}Transport: RTP/AVP;unicast;client_port={}-{};mode=record\r\n\r\n",
                7000 + track * 2,
                7001 + track * 2
            ),
            t0,
        );
        assert!(r.contains("server_port=6970-6971;mode=record"), "the loop's RTP port: {r}");
        id = session_of(&r);
    }
    let r = ask(&mut server, key, &format!("RECORD {LIVE} RTSP/1.0\r\nCSeq: 3\r\nSession: {id}\r\n\r\n"), t0);
    assert!(r.starts_with("RTSP/1.0 200"), "{r}");
    let stall = server.config().publish_stall;
    let mut last = t0;
    for (at, frame) in publisher_frames(&file, &bytes).iter().filter(|(at, _)| *at < Duration::from_secs(2)) {
        // The interleaved frame's channel says the track; over UDP, the port it comes from does.
        let from = std::net::SocketAddr::from(([10, 0, 0, 9], 7000 + u16::from(frame[1])));
        last = t0 + stall + *at;
        server.rtp_from(from, &frame[4..], last);
        // Not the publisher's: dropped.
        server.rtp_from("10.0.0.7:7000".parse().unwrap(), &frame[4..], last);
    }
    let snapshot = media.0.get("/live/x").unwrap().snapshot();
    let video = snapshot.file.tracks.iter().find(|t| t.kind.is_video()).unwrap();
    let sent = file.tracks.iter().find(|t| t.kind.is_video()).unwrap();
    let expected = sent.samples.iter().filter(|s| s.decode_time() < 2 * u64::from(sent.timescale)).count();
    assert_eq!(video.samples.len(), expected, "every picture of the first two seconds");
    // Past the stall deadline from RECORD, but not from its last datagram: kept.
    server.tick(last + stall - Duration::from_millis(10), Duration::ZERO);
    assert!(!server.control(key).unwrap().should_close());
    server.tick(last + stall + PACE_TICK, Duration::ZERO);
    assert!(server.control(key).unwrap().should_close(), "dropped once its datagrams stop");
}
