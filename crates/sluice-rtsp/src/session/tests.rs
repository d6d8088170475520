//! Tests of [`super`]: session.rs's behaviour, in a file of their own.

use super::*;
use crate::{RtspConfig, ViewerBudget};
use rtsp_types::headers::{RtpInfos, Transport, Transports};
use rtsp_types::Response;
use sluice_media::mp4::TrackKind;
use sluice_proto::rtp::{AacAccessUnits, H264Depacketizer, Packets, RtpPacket};

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const URL: &str = "rtsp://127.0.0.1:8554/sluice-demo.mp4";

struct Demo(Arc<Mp4File>);

impl Catalogue for Demo {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        if path == "/sluice-demo.mp4" {
            Ok(self.0.clone())
        } else {
            Err(NotFound)
        }
    }
}

fn demo() -> Demo {
    Demo(Arc::new(crate::demo_file()))
}

fn counter() -> impl FnMut() -> u64 + Send {
    let mut n = 0x1234_5678_9abc_def0u64;
    move || {
        n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        n
    }
}

/// The demo catalogue, a table with reproducible ids, and a start time.
fn fixture() -> (Demo, SessionTable, Instant) {
    (demo(), table(), Instant::now())
}

fn play(id: &str) -> String {
    format!("PLAY {URL} RTSP/1.0\r\nCSeq: 9\r\nSession: {id}\r\n\r\n")
}

/// A SETUP of `url`, in `session` if given, asking for `transport`.
fn setup(url: &str, session: Option<&str>, transport: &str) -> String {
    let session = session.map(|s| format!("Session: {s}\r\n")).unwrap_or_default();
    format!("SETUP {url} RTSP/1.0\r\nCSeq: 3\r\n{session}Transport: {transport}\r\n\r\n")
}

fn table() -> SessionTable {
    SessionTable::with_entropy(RtspConfig::default(), counter())
}

/// One client connection: sends requests, returns the parsed responses.
struct Client {
    conn: RtspConnection,
    out: Output,
    events: Vec<Event>,
}

impl Client {
    fn new(id: u64, ip: [u8; 4]) -> Client {
        Client {
            conn: RtspConnection::new(ConnectionId(id), SocketAddr::from((ip, 40000)), Instant::now()),
            out: Output::default(),
            events: Vec::new(),
        }
    }

    fn send_raw(
        &mut self,
        bytes: &[u8],
        now: Instant,
        table: &mut SessionTable,
        cat: &Demo,
    ) -> Vec<Response<Vec<u8>>> {
        let mut pending = bytes.to_vec();
        let mut responses = Vec::new();
        loop {
            self.out.clear();
            let used = self.conn.receive(&pending, now, table, cat, &mut self.out);
            pending.drain(..used);
            self.events.append(&mut self.out.events);
            responses.extend(parse_responses(&self.out.replies));
            if used == 0 || self.out.close {
                break;
            }
        }
        responses
    }

    fn send(&mut self, text: &str, now: Instant, table: &mut SessionTable, cat: &Demo) -> Response<Vec<u8>> {
        let mut r = self.send_raw(text.as_bytes(), now, table, cat);
        assert_eq!(r.len(), 1, "{text}");
        r.pop().unwrap()
    }
}

fn parse_responses(mut bytes: &[u8]) -> Vec<Response<Vec<u8>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        match rtsp_types::Message::<Vec<u8>>::parse(bytes).expect("our replies parse") {
            (rtsp_types::Message::Response(r), n) => {
                out.push(r);
                bytes = &bytes[n..];
            }
            other => panic!("{other:?}"),
        }
    }
    out
}

fn status(r: &Response<Vec<u8>>) -> u16 {
    u16::from(r.status())
}

fn header<'a>(r: &'a Response<Vec<u8>>, name: &headers::HeaderName) -> &'a str {
    r.header(name).map(|v| v.as_str()).unwrap_or_else(|| panic!("no {name} in {r:?}"))
}

fn session_of(r: &Response<Vec<u8>>) -> String {
    let v = header(r, &headers::SESSION);
    assert!(v.ends_with(";timeout=60"), "{v}");
    v.split(';').next().unwrap().to_string()
}

fn video_audio(file: &Mp4File) -> (usize, usize) {
    let v = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::H264(_))).unwrap();
    let a = file.tracks.iter().position(|t| matches!(t.kind, TrackKind::Aac(_))).unwrap();
    (v, a)
}

#[test]
fn scripted_exchange_delivers_every_access_unit_in_order() {
    let cat = demo();
    let file = cat.0.clone();
    let data = std::fs::read(DEMO).unwrap();
    let (video, audio) = video_audio(&file);
    let mut table = table();
    let mut c = Client::new(1, [127, 0, 0, 1]);
    let t0 = Instant::now();

    let r = c.send("OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n", t0, &mut table, &cat);
    assert_eq!(status(&r), 200);
    assert_eq!(header(&r, &headers::CSEQ), "1");
    assert!(header(&r, &headers::PUBLIC).contains("PLAY"));

    let r = c.send(
        &format!("DESCRIBE {URL} RTSP/1.0\r\nCSeq: 2\r\nAccept: application/sdp\r\n\r\n"),
        t0,
        &mut table,
        &cat,
    );
    assert_eq!(status(&r), 200);
    assert_eq!(header(&r, &headers::CONTENT_TYPE), "application/sdp");
    let base = header(&r, &headers::CONTENT_BASE).to_string();
    assert_eq!(base, format!("{URL}/"));
    let sdp = sdp_types::Session::parse(r.body()).unwrap();
    let controls: Vec<String> = sdp
        .medias
        .iter()
        .map(|m| m.get_first_attribute_value("control").unwrap().unwrap().to_string())
        .collect();
    assert_eq!(controls.len(), file.tracks.len());

    let udp = |port: u16| format!("RTP/AVP;unicast;client_port={port}-{}", port + 1);
    let track_url = |track: usize| format!("{base}{}", controls[track]);
    let r = c.send(&setup(&track_url(video), None, &udp(5000)), t0, &mut table, &cat);
    assert_eq!(status(&r), 200, "{r:?}");
    let id = session_of(&r);
    assert_eq!(id.len(), 16);
    let transport = r.typed_header::<Transports>().unwrap().unwrap();
    let Transport::Rtp(rtp) = &transport[0] else { panic!() };
    assert_eq!(rtp.params.server_port, Some((6970, Some(6971))));
    assert_eq!(rtp.params.client_port, Some((5000, Some(5001))));
    let r = c.send(&setup(&track_url(audio), Some(&id), &udp(5002)), t0, &mut table, &cat);
    assert_eq!(status(&r), 200, "{r:?}");
    assert_eq!(session_of(&r), id);
    assert_eq!(c.events, [Event::Created(SessionId::parse(&id).unwrap())]);

    let r = c.send(
        &format!("PLAY {URL} RTSP/1.0\r\nCSeq: 5\r\nSession: {id}\r\nRange: npt=0-\r\n\r\n"),
        t0,
        &mut table,
        &cat,
    );
    assert_eq!(status(&r), 200, "{r:?}");
    let sid = SessionId::parse(&id).unwrap();
    assert_eq!(c.events.last(), Some(&Event::Play(sid)));
    let Some(RtpInfos::V1(infos)) = r.typed_header::<RtpInfos>().unwrap() else { panic!() };
    assert_eq!(infos.len(), 2);
    assert_eq!(infos[0].uri.as_str(), format!("{base}{}", controls[video]));
    let (v_seq, v_rtptime) = (infos[0].seq.unwrap(), infos[0].rtptime.unwrap());
    let (a_seq, a_rtptime) = (infos[1].seq.unwrap(), infos[1].rtptime.unwrap());

    // The engine's loop: wake, read what is due, packetize, "send" (depacketize here).
    let session = table.get_mut(sid).unwrap();
    assert!(session.is_playing());
    assert!(matches!(session.tracks()[0].delivery, Delivery::Udp { rtp, .. } if rtp.port() == 5000));
    let streamer = session.streamer_mut().unwrap();
    let mut depack = H264Depacketizer::new(1 << 22);
    let (mut video_aus, mut audio_frames) = (0usize, 0usize);
    let (mut next_v_seq, mut next_a_seq) = (v_seq, a_seq);
    let mut packets = Packets::new();
    let mut due = Vec::new();
    let mut now = t0;
    let mut reports = 0;
    let vt = &file.tracks[video];
    let at = &file.tracks[audio];
    let rate = |t: &sluice_media::mp4::Track, i: usize, clock: u64| {
        let s = t.samples[i];
        ((i128::from(s.composition_time()) - i128::from(t.edit_start)) * i128::from(clock)
            / i128::from(t.timescale)) as u32
    };
    while let Some(wake) = streamer.next_wake() {
        now = now.max(wake);
        due.clear();
        streamer.due(now, &mut due);
        // RTCP every 5 s of a stream's life, one per track.
        let mut rtcp = Vec::new();
        streamer.sender_reports(now, Duration::from_secs(1_700_000_000), "sluice", &mut rtcp);
        reports += rtcp.len();
        for d in &due {
            assert!(d.time <= now - t0, "sent early");
            let bytes = &data[d.offset as usize..][..d.size as usize];
            packets.clear();
            streamer.packetize(d, bytes, &mut packets).unwrap();
            for p in packets.iter() {
                let p = RtpPacket::parse(p).unwrap();
                if d.track == 0 {
                    assert_eq!(p.sequence, next_v_seq);
                    next_v_seq = next_v_seq.wrapping_add(1);
                    if let Some(au) = depack.push(&p).unwrap() {
                        assert_eq!(d.sample, video_aus);
                        assert_eq!(au.data, bytes, "access unit {video_aus}");
                        assert_eq!(au.timestamp, v_rtptime.wrapping_add(rate(vt, video_aus, 90_000)));
                        video_aus += 1;
                    }
                } else {
                    assert_eq!(p.sequence, next_a_seq);
                    next_a_seq = next_a_seq.wrapping_add(1);
                    let frames: Vec<&[u8]> = AacAccessUnits::parse(&p).unwrap().collect();
                    assert_eq!(frames, [bytes]);
                    let clock = match &at.kind {
                        TrackKind::Aac(a) => u64::from(a.sample_rate),
                        _ => unreachable!("the demo is H.264 and AAC"),
                    };
                    assert_eq!(p.timestamp, a_rtptime.wrapping_add(rate(at, audio_frames, clock)));
                    audio_frames += 1;
                }
            }
        }
    }
    assert!(streamer.is_done());
    let secs = (now - t0).as_secs() as usize;
    assert_eq!(reports, 2 * (secs / 5 + 1), "after {secs} s");
    assert_eq!(video_aus, vt.samples.len());
    assert_eq!(audio_frames, at.samples.len());
    assert_eq!(depack.lost_packets(), 0);

    // Keep-alive, then TEARDOWN releases everything.
    let later = now + Duration::from_secs(30);
    let r = c.send(
        &format!("GET_PARAMETER {URL} RTSP/1.0\r\nCSeq: 6\r\nSession: {id}\r\n\r\n"),
        later,
        &mut table,
        &cat,
    );
    assert_eq!(status(&r), 200);
    assert_eq!(table.deadline(), Some(later + Duration::from_secs(60)));
    let r = c.send(
        &format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 7\r\nSession: {id}\r\n\r\n"),
        later,
        &mut table,
        &cat,
    );
    assert_eq!(status(&r), 200);
    assert_eq!(c.events.last(), Some(&Event::Released(sid, Release::Teardown)));
    assert!(table.is_empty());
}

fn setup_udp(c: &mut Client, table: &mut SessionTable, cat: &Demo, now: Instant) -> String {
    let udp = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP;unicast;client_port=5000-5001");
    let r = c.send(&udp, now, table, cat);
    assert_eq!(status(&r), 200, "{r:?}");
    session_of(&r)
}

#[test]
fn error_cases() {
    let (cat, mut table, now) = fixture();
    let mut c = Client::new(1, [10, 0, 0, 1]);

    // PLAY (and PAUSE) before SETUP.
    let r = c.send(&format!("PLAY {URL} RTSP/1.0\r\nCSeq: 2\r\n\r\n"), now, &mut table, &cat);
    assert_eq!((status(&r), header(&r, &headers::CSEQ)), (455, "2"));
    let track0 = format!("{URL}/trackID=0");
    let cases = [
        // Unknown session, and one that cannot be ours.
        (play("0123456789abcdef"), 454),
        (play("xyz"), 454),
        // Unsupported transports.
        (setup(&track0, None, "RTP/AVP;multicast"), 461),
        (setup(&track0, None, "RTP/SAVP;unicast;client_port=1-2"), 461),
        (setup(&track0, None, "RTP/AVP;unicast;client_port=5000;mode=record"), 461),
        // The aggregate URL of a two-track file, missing tracks and files.
        (setup(URL, None, "RTP/AVP/TCP;unicast"), 459),
        (setup(&format!("{URL}/trackID=7"), None, "RTP/AVP/TCP;unicast"), 404),
        ("DESCRIBE rtsp://127.0.0.1:8554/nope.mp4 RTSP/1.0\r\nCSeq: 5\r\n\r\n".to_string(), 404),
        // A method sluice does not do.
        (format!("RECORD {URL} RTSP/1.0\r\nCSeq: 6\r\n\r\n"), 501),
    ];
    for (request, want) in &cases {
        assert_eq!(status(&c.send(request, now, &mut table, &cat)), *want, "{request}");
    }
    // UDP when the server has no UDP ports.
    let mut no_udp =
        SessionTable::with_entropy(RtspConfig { udp_server_ports: None, ..RtspConfig::default() }, counter());
    let udp = setup(&track0, None, "RTP/AVP;unicast;client_port=5000-5001");
    assert_eq!(status(&c.send(&udp, now, &mut no_udp, &cat)), 461);
    // A request without CSeq.
    let r = c.send("OPTIONS * RTSP/1.0\r\n\r\n", now, &mut table, &cat);
    assert_eq!(status(&r), 400);
    assert!(r.header(&headers::CSEQ).is_none());
    // PAUSE before PLAY.
    let id = setup_udp(&mut c, &mut table, &cat, now);
    let r =
        c.send(&format!("PAUSE {URL} RTSP/1.0\r\nCSeq: 7\r\nSession: {id}\r\n\r\n"), now, &mut table, &cat);
    assert_eq!(status(&r), 455);
    // A bad Range is 457 and leaves the session ready.
    let r = c.send(
        &format!("PLAY {URL} RTSP/1.0\r\nCSeq: 8\r\nSession: {id}\r\nRange: npt=9999-\r\n\r\n"),
        now,
        &mut table,
        &cat,
    );
    assert_eq!(status(&r), 457);
    // Malformed: 400, and the connection closes without reading further.
    assert!(!c.conn.is_closed());
    let replies = c.send_raw(b"GARBAGE\r\n\r\nOPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n", now, &mut table, &cat);
    assert_eq!(replies.len(), 1);
    assert_eq!(status(&replies[0]), 400);
    assert!(c.out.close && c.conn.is_closed());
}

#[test]
fn refusals_name_their_byte_position_and_connection() {
    let (cat, mut table, now) = fixture();
    let mut c = Client::new(5, [10, 0, 0, 1]);
    let options = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n";
    c.send(options, now, &mut table, &cat);
    // A request refused for what it asks: it keeps the connection, and is placed.
    let mut out = Output::default();
    let foreign = play("0123456789abcdef");
    c.conn.receive(foreign.as_bytes(), now, &mut table, &cat, &mut out);
    assert_eq!(status(&parse_responses(&out.replies)[0]), 454);
    let refused = &out.refused[0];
    assert_eq!(refused.kind(), &RtspError::SessionNotFound);
    assert_eq!(refused.position(), Some(options.len() as u64));
    // Framing lost two messages later: the position counts every byte before it.
    let at = options.len() + foreign.len();
    out.clear();
    c.conn.receive(b"GARBAGE\r\n\r\n", now, &mut table, &cat, &mut out);
    assert_eq!(status(&parse_responses(&out.replies)[0]), 400);
    let refused = &out.refused[0];
    assert_eq!(refused.kind(), &RtspError::Malformed("request head"));
    assert_eq!(refused.position(), Some(at as u64));
    let conn = refused.connection().unwrap();
    assert_eq!((conn.id, conn.peer), (5, SocketAddr::from(([10, 0, 0, 1], 40000))));
    assert!(refused.to_string().contains(&format!("byte {at} of connection 0x5 from 10.0.0.1:40000")));
}

#[test]
fn sessions_are_bound_to_their_connection() {
    let (cat, mut table, now) = fixture();
    let mut a = Client::new(1, [10, 0, 0, 1]);
    // Interleaved: only its own connection, even from the same address.
    let tcp = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP/TCP;unicast;interleaved=0-1");
    let r = a.send(&tcp, now, &mut table, &cat);
    assert_eq!(status(&r), 200);
    let tcp_id = session_of(&r);
    let mut same_ip = Client::new(2, [10, 0, 0, 1]);
    assert_eq!(status(&same_ip.send(&play(&tcp_id), now, &mut table, &cat)), 454);
    let teardown = format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 9\r\nSession: {tcp_id}\r\n\r\n");
    assert_eq!(status(&same_ip.send(&teardown, now, &mut table, &cat)), 454);
    // UDP: another connection from the same address may use it, another address may not.
    let udp_id = setup_udp(&mut a, &mut table, &cat, now);
    let mut other_ip = Client::new(3, [10, 0, 0, 2]);
    assert_eq!(status(&other_ip.send(&play(&udp_id), now, &mut table, &cat)), 454);
    let tcp_track = setup(&format!("{URL}/trackID=1"), Some(&udp_id), "RTP/AVP/TCP;unicast");
    assert_eq!(
        status(&same_ip.send(&tcp_track, now, &mut table, &cat)),
        454,
        "interleaved on another connection"
    );
    assert_eq!(status(&same_ip.send(&play(&udp_id), now, &mut table, &cat)), 200);
    // The interleaved session goes with its connection; the UDP one stays until its timeout.
    let mut events = Vec::new();
    table.connection_closed(a.conn.id(), &mut events);
    assert_eq!(events, [Event::Released(SessionId::parse(&tcp_id).unwrap(), Release::ConnectionClosed)]);
    assert_eq!(table.len(), 1);
    events.clear();
    table.expire(now + Duration::from_secs(59), &mut events);
    assert!(events.is_empty());
    table.expire(now + Duration::from_secs(60), &mut events);
    assert_eq!(events, [Event::Released(SessionId::parse(&udp_id).unwrap(), Release::Timeout)]);
    assert_eq!(table.deadline(), None);
    assert_eq!(status(&same_ip.send(&play(&udp_id), now, &mut table, &cat)), 454);
}

#[test]
fn interleaved_channels_pause_resume_and_seek() {
    let (cat, mut table, now) = fixture();
    let file = cat.0.clone();
    let mut c = Client::new(1, [10, 0, 0, 1]);
    let tcp = "RTP/AVP/TCP;unicast;interleaved=0-1";
    let (track0, track1) = (format!("{URL}/trackID=0"), format!("{URL}/trackID=1"));
    let r = c.send(&setup(&track0, None, tcp), now, &mut table, &cat);
    let id = session_of(&r);
    // The second track asks for the same channels and gets the next free pair.
    let r = c.send(&setup(&track1, Some(&id), tcp), now, &mut table, &cat);
    assert_eq!(status(&r), 200);
    let transport = r.typed_header::<Transports>().unwrap().unwrap();
    let Transport::Rtp(rtp) = &transport[0] else { panic!() };
    assert_eq!(rtp.params.interleaved, Some((2, Some(3))));
    assert_eq!(rtp.params.server_port, None);
    let sid = SessionId::parse(&id).unwrap();
    let deliveries: Vec<Delivery> = table.get(sid).unwrap().tracks().iter().map(|t| t.delivery).collect();
    assert_eq!(
        deliveries,
        [Delivery::Interleaved { rtp: 0, rtcp: 1 }, Delivery::Interleaved { rtp: 2, rtcp: 3 }]
    );

    // PLAY from 2.5 s starts at the keyframe at or before it, and says so in Range.
    let r = c.send(
        &format!("PLAY {URL} RTSP/1.0\r\nCSeq: 2\r\nSession: {id}\r\nRange: npt=2.5-\r\n\r\n"),
        now,
        &mut table,
        &cat,
    );
    assert_eq!(status(&r), 200);
    let range = header(&r, &headers::RANGE).to_string();
    let (video, _) = video_audio(&file);
    let key = super::super::stream::start_sample(&file.tracks[video], Duration::from_millis(2500));
    assert!(file.tracks[video].samples[key].is_sync());
    assert!(range.starts_with("npt="), "{range}");
    let start: f64 = range["npt=".len()..range.len() - 1].parse().unwrap();
    assert!(start <= 2.5, "{range}");
    // The first packets carry the timestamps RTP-Info announced for the Range start: the
    // video keyframe, and audio a little later at its own clock (within a tick of rounding).
    let Some(RtpInfos::V1(infos)) = r.typed_header::<RtpInfos>().unwrap() else { panic!() };
    let streamer = table.get_mut(sid).unwrap().streamer_mut().unwrap();
    let mut due = Vec::new();
    streamer.due(now + Duration::from_secs(1), &mut due);
    let data = std::fs::read(DEMO).unwrap();
    for (i, info) in infos.iter().enumerate() {
        let d = due.iter().find(|d| d.track == i).unwrap();
        let mut packets = Packets::new();
        streamer.packetize(d, &data[d.offset as usize..][..d.size as usize], &mut packets).unwrap();
        let p = RtpPacket::parse(packets.get(0).unwrap()).unwrap();
        assert_eq!(p.sequence, info.seq.unwrap());
        let track = &file.tracks[d.track];
        let s = track.samples[d.sample];
        let rate = i64::from(sluice_media::sdp::clock_rate(track));
        // Presentation time after the start, in the track's RTP clock.
        let after = (s.composition_time() as i64 - track.edit_start as i64) * rate
            / i64::from(track.timescale)
            - (start * rate as f64).round() as i64;
        let expected = info.rtptime.unwrap().wrapping_add(after as u32);
        assert!(
            p.timestamp.wrapping_sub(expected).wrapping_add(1) <= 2,
            "track {i}: {} vs {expected}",
            p.timestamp
        );
    }
    // SETUP while playing is refused.
    let r = c.send(&setup(&track1, Some(&id), tcp), now, &mut table, &cat);
    assert_eq!(status(&r), 455);
    // PAUSE, then PLAY without Range resumes where it was.
    let t1 = now + Duration::from_secs(1);
    let r =
        c.send(&format!("PAUSE {URL} RTSP/1.0\r\nCSeq: 3\r\nSession: {id}\r\n\r\n"), t1, &mut table, &cat);
    assert_eq!(status(&r), 200);
    assert_eq!(c.events.last(), Some(&Event::Pause(sid)));
    assert!(!table.get(sid).unwrap().is_playing());
    let t2 = t1 + Duration::from_secs(10);
    let r = c.send(&format!("PLAY {URL} RTSP/1.0\r\nCSeq: 4\r\nSession: {id}\r\n\r\n"), t2, &mut table, &cat);
    assert_eq!(status(&r), 200);
    let resumed: f64 = header(&r, &headers::RANGE)["npt=".len()..].trim_end_matches('-').parse().unwrap();
    assert!((resumed - (start + 1.0)).abs() < 1e-6, "{resumed} after {start}");
    assert_eq!(c.events.last(), Some(&Event::Play(sid)));
    // Interleaved RTCP from the client refreshes the session.
    let t3 = t2 + Duration::from_secs(50);
    let mut frame = sluice_proto::rtsp::interleaved_header(1, 4).unwrap().to_vec();
    frame.extend_from_slice(&[0x80, 201, 0, 0]);
    assert!(c.send_raw(&frame, t3, &mut table, &cat).is_empty());
    assert_eq!(table.deadline(), Some(t3 + Duration::from_secs(60)));
    assert_eq!(c.conn.deadline(&table), t3 + Duration::from_secs(60));
    let mut events = Vec::new();
    table.connection_closed(c.conn.id(), &mut events);
    assert!(table.is_empty());
}

#[test]
fn bounds_on_pipelining_sessions_and_tracks() {
    let cat = demo();
    let config = RtspConfig {
        max_pipelined: 3,
        max_sessions_per_connection: 2,
        max_tracks_per_session: 1,
        ..RtspConfig::default()
    };
    let mut table = SessionTable::with_entropy(config, counter());
    let now = Instant::now();
    let mut c = Client::new(1, [10, 0, 0, 1]);
    let five = "OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n".repeat(5);
    let mut out = Output::default();
    let used = c.conn.receive(five.as_bytes(), now, &mut table, &cat, &mut out);
    assert_eq!(out.answered, 3);
    assert_eq!(used, five.len() / 5 * 3);
    out.clear();
    assert_eq!(c.conn.receive(&five.as_bytes()[used..], now, &mut table, &cat, &mut out), five.len() / 5 * 2);
    assert_eq!(out.answered, 2);

    let id = setup_udp(&mut c, &mut table, &cat, now);
    let second_track = setup(&format!("{URL}/trackID=1"), Some(&id), "RTP/AVP/TCP;unicast");
    assert_eq!(status(&c.send(&second_track, now, &mut table, &cat)), 503, "tracks per session");
    setup_udp(&mut c, &mut table, &cat, now);
    let third_session = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP/TCP;unicast");
    assert_eq!(status(&c.send(&third_session, now, &mut table, &cat)), 503, "sessions per connection");
}

#[test]
fn tables_sharing_a_budget_hold_max_viewers_between_them() {
    let cat = demo();
    let config = RtspConfig { max_viewers: 3, ..RtspConfig::default() };
    let budget = ViewerBudget::new(config.max_viewers);
    let mut a = SessionTable::with_entropy(config.clone(), counter()).sharing(budget.clone());
    let mut b = SessionTable::with_entropy(config, counter()).sharing(budget.clone());
    let now = Instant::now();
    let (mut ca, mut cb) = (Client::new(1, [10, 0, 0, 1]), Client::new(2, [10, 0, 0, 2]));
    let udp = setup(&format!("{URL}/trackID=0"), None, "RTP/AVP;unicast;client_port=5000-5001");
    setup_udp(&mut ca, &mut a, &cat, now);
    let gone = setup_udp(&mut ca, &mut a, &cat, now);
    setup_udp(&mut cb, &mut b, &cat, now);
    assert_eq!(budget.held(), 3);
    // The fourth is refused by whichever table it reaches.
    assert_eq!(status(&cb.send(&udp, now, &mut b, &cat)), 453);
    assert_eq!(status(&Client::new(3, [10, 0, 0, 3]).send(&udp, now, &mut a, &cat)), 453);
    // A TEARDOWN on one table makes room on the other; a timeout gives places back too.
    let teardown = format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 7\r\nSession: {gone}\r\n\r\n");
    assert_eq!(status(&ca.send(&teardown, now, &mut a, &cat)), 200);
    assert_eq!(budget.held(), 2);
    setup_udp(&mut cb, &mut b, &cat, now);
    assert_eq!(budget.held(), 3);
    let mut events = Vec::new();
    b.expire(now + Duration::from_secs(3600), &mut events);
    assert_eq!((events.len(), budget.held()), (2, 1));
    drop(a);
    assert_eq!(budget.held(), 0, "a table dropped gives its places back");
}

#[test]
fn session_ids_are_distinct_and_long() {
    let mut table = table();
    let a = table.new_id();
    let b = table.new_id();
    assert_ne!(a, b);
    assert_eq!(a.to_string().len(), 16);
    assert_eq!(SessionId::parse(&a.to_string()), Some(a));
}

/// A library with one fragmented MP4 (indexed, nothing to stream) and one damaged file.
struct Unstreamable;

impl Catalogue for Unstreamable {
    fn open(&self, _: &str) -> Result<Arc<Mp4File>, NotFound> {
        Err(NotFound)
    }

    fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        match path {
            "/frag.mp4" => checked(Arc::new(Mp4File {
                tracks: vec![],
                skipped: vec![sluice_media::mp4::SkippedTrack { id: 1, reason: "no samples".into() }],
                file_len: 1000,
                fragmented: true,
            })),
            "/broken.mp4" => Err(Refusal::Unplayable(Unplayable::unreadable(
                &Mp4File::from_bytes(b"\0\0\0\x08free").unwrap_err(),
            ))),
            _ => Err(Refusal::NotFound),
        }
    }
}

#[test]
fn unstreamable_files_are_refused_with_the_reason() {
    let mut table = table();
    let mut conn =
        RtspConnection::new(ConnectionId(1), SocketAddr::from(([10, 0, 0, 1], 40000)), Instant::now());
    let mut out = Output::default();
    let requests = [
        ("DESCRIBE", "frag.mp4", "", 501, "fragmented MP4"),
        ("SETUP", "frag.mp4/trackID=0", "Transport: RTP/AVP/TCP;unicast\r\n", 501, "fragmented MP4"),
        ("PLAY", "frag.mp4", "Session: 0123456789abcdef\r\n", 501, "fragmented MP4"),
        ("DESCRIBE", "broken.mp4", "", 500, "no moov box"),
        ("DESCRIBE", "missing.mp4", "", 404, ""),
        ("PLAY", "missing.mp4", "Session: 0123456789abcdef\r\n", 454, ""),
    ];
    for (cseq, (method, path, extra, status, reason)) in requests.into_iter().enumerate() {
        let text = format!("{method} rtsp://127.0.0.1:8554/{path} RTSP/1.0\r\nCSeq: {cseq}\r\n{extra}\r\n");
        out.clear();
        conn.receive(text.as_bytes(), Instant::now(), &mut table, &Unstreamable, &mut out);
        let replies = parse_responses(&out.replies);
        assert_eq!(replies.len(), 1, "{text}");
        let r = &replies[0];
        assert_eq!(u16::from(r.status()), status, "{text}");
        let header = headers::HeaderName::from_static_str(REASON_HEADER).unwrap();
        match r.header(&header) {
            Some(v) if !reason.is_empty() => {
                let v = v.as_str();
                assert!(v.contains(reason) && v.contains(path.split('/').next().unwrap()), "{v}");
                let body = String::from_utf8(r.body().clone()).unwrap();
                assert!(body.starts_with(&format!("{status} ")) && body.contains(reason), "{body}");
                assert_eq!(out.unplayable.len(), 1);
            }
            None if reason.is_empty() => assert!(out.unplayable.is_empty()),
            other => panic!("{text}: reason header {other:?}"),
        }
    }
    assert!(table.is_empty(), "no session for a file that cannot be streamed");
}
