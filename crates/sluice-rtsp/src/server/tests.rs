//! Tests of [`super`]: server.rs's behaviour, in a file of their own.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use sluice_proto::rtp::{Body, BodyRef, RtpPacket};
use sluice_proto::rtsp::{read_message, Limits, LoopNote, Message, Release};

use super::*;
use crate::config::Overload;
use crate::{DatagramSink, NotFound, Port, WARM_RETRY, WARM_TIMEOUT};
use sluice_media::mp4::Mp4File;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const URL: &str = "rtsp://127.0.0.1:8554/sluice-demo.mp4";
const PEER: &str = "10.0.0.1:40000";

/// The demo file, indexed and in memory.
struct Demo {
    file: Arc<Mp4File>,
    bytes: Vec<u8>,
}

impl Catalogue for Demo {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        (path == "/sluice-demo.mp4").then(|| self.file.clone()).ok_or(NotFound)
    }
}

impl MediaLibrary for Demo {
    type Bytes = ();

    fn open_bytes(&self, path: &str) -> io::Result<()> {
        self.open(path).map(|_| ()).map_err(|_| io::ErrorKind::NotFound.into())
    }

    fn read_at(&self, _: &(), offset: u64, into: &mut [u8]) -> io::Result<()> {
        let from = usize::try_from(offset).map_err(|_| io::ErrorKind::InvalidInput)?;
        let bytes = self.bytes.get(from..from + into.len()).ok_or(io::ErrorKind::UnexpectedEof)?;
        into.copy_from_slice(bytes);
        Ok(())
    }
}

fn demo() -> Demo {
    let bytes = std::fs::read(DEMO).unwrap();
    Demo { file: Arc::new(Mp4File::from_bytes(&bytes).unwrap()), bytes }
}

/// What the core reported.
#[derive(Default)]
struct Tally {
    answered: Cell<usize>,
    packets_sent: Cell<usize>,
    reads: Cell<usize>,
    released: RefCell<Vec<Release>>,
    refused: Cell<usize>,
    admitted: Cell<usize>,
    late: Cell<usize>,
    frames_dropped: Cell<usize>,
    headroom: RefCell<Vec<Headroom>>,
    streams: RefCell<HashMap<String, usize>>,
    unplayable: RefCell<Vec<(String, u16)>>,
}

impl Observer for Tally {
    fn note(&self, note: Note<'_>) {
        match note {
            Note::Answered { requests, .. } => self.answered.set(self.answered.get() + requests),
            Note::Loop(LoopNote::PacketsSent { packets, .. }) => {
                self.packets_sent.set(self.packets_sent.get() + packets)
            }
            Note::Loop(LoopNote::SampleRead) => self.reads.set(self.reads.get() + 1),
            Note::SessionReleased(_, why) => self.released.borrow_mut().push(why),
            Note::Loop(LoopNote::ViewerRefused) => self.refused.set(self.refused.get() + 1),
            Note::Loop(LoopNote::ViewerAdmitted) => self.admitted.set(self.admitted.get() + 1),
            Note::Loop(LoopNote::LateSends(n)) => self.late.set(self.late.get() + n),
            Note::Loop(LoopNote::FrameDropped { .. }) => {
                self.frames_dropped.set(self.frames_dropped.get() + 1)
            }
            Note::Loop(LoopNote::Headroom(h)) => self.headroom.borrow_mut().push(h),
            Note::Loop(LoopNote::StreamViewers { path, viewers }) => {
                self.streams.borrow_mut().insert(path.to_string(), viewers);
            }
            Note::Unplayable { path, status, .. } => self.unplayable.borrow_mut().push((path.into(), status)),
            _ => {}
        }
    }
}

fn table() -> SessionTable {
    let mut n = 1u64;
    SessionTable::with_entropy(RtspConfig::default(), move || {
        n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        n
    })
}

type Server<'a> = RtspServer<'a, Demo, &'a Tally, ()>;

fn table_with(config: RtspConfig) -> SessionTable {
    let mut n = 1u64;
    SessionTable::with_entropy(config, move || {
        n = n.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        n
    })
}

/// Everything `key` has to write, as the loop would write it.
fn drain<M: MediaLibrary>(server: &mut RtspServer<'_, M, &Tally, ()>, key: usize, now: Instant) -> Vec<u8> {
    let mut written = Vec::new();
    loop {
        let Some(c) = server.control(key) else { return written };
        let Some(bytes) = c.out.pending() else { return written };
        let n = bytes.len();
        written.extend_from_slice(bytes);
        c.out.advance(n);
        server.wrote(key, now);
    }
}

/// The replies in `bytes` (interleaved frames skipped), as text.
fn replies(bytes: &[u8]) -> Vec<String> {
    frames(bytes).into_iter().filter_map(|f| f.err()).collect()
}

/// Interleaved frames (`Ok((channel, payload))`) and replies (`Err(text)`), in order.
fn frames(mut bytes: &[u8]) -> Vec<Result<(u8, Vec<u8>), String>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        if bytes[0] == b'$' {
            let Ok(Message::Interleaved { channel, payload, consumed }) =
                read_message(bytes, &Limits::default())
            else {
                panic!("a cut frame")
            };
            out.push(Ok((channel, payload.to_vec())));
            bytes = &bytes[consumed..];
        } else {
            let (_, n) = rtsp_types::Message::<Vec<u8>>::parse(bytes).expect("our replies parse");
            out.push(Err(String::from_utf8_lossy(&bytes[..n]).into_owned()));
            bytes = &bytes[n..];
        }
    }
    out
}

fn session_of(reply: &str) -> String {
    let line = reply.lines().find(|l| l.starts_with("Session: ")).expect("a Session header");
    line["Session: ".len()..].split(';').next().unwrap().to_string()
}

/// Sends `request` on `key` and returns the one reply.
fn ask(server: &mut Server<'_>, key: usize, request: &str, now: Instant) -> String {
    server.received(key, request.as_bytes(), now);
    let mut r = replies(&drain(server, key, now));
    assert_eq!(r.len(), 1, "{request}: {r:?}");
    r.pop().unwrap()
}

fn setup(track: usize, session: Option<&str>, transport: &str) -> String {
    let session = session.map(|s| format!("Session: {s}\r\n")).unwrap_or_default();
    format!("SETUP {URL}/trackID={track} RTSP/1.0\r\nCSeq: 2\r\n{session}Transport: {transport}\r\n\r\n")
}

/// A connection from [`PEER`] with a session whose first track goes over `transport`.
fn open_session(server: &mut Server<'_>, transport: &str, now: Instant) -> (usize, String) {
    let key = server.accept((), PEER.parse().unwrap(), now);
    let reply = ask(server, key, &setup(0, None, transport), now);
    (key, session_of(&reply))
}

fn play(session: &str) -> String {
    format!("PLAY {URL} RTSP/1.0\r\nCSeq: 3\r\nSession: {session}\r\n\r\n")
}

#[test]
fn sender_reports_keep_the_first_ticks_wall_clock_running_on_the_monotonic_one() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let epoch = Duration::from_secs(1_700_000_000);
    assert_eq!(server.report_clock(t0, epoch), epoch);
    // Read 40 ms late, or stepped back by the system clock: the reports' clock does not follow.
    let later = t0 + Duration::from_secs(5);
    assert_eq!(
        server.report_clock(later, epoch + Duration::from_millis(5040)),
        epoch + Duration::from_secs(5)
    );
    assert_eq!(server.report_clock(later, epoch), epoch + Duration::from_secs(5));
}

#[test]
fn a_file_that_cannot_be_streamed_is_refused_on_every_request_and_noted_once() {
    // The demo's index as a fragmented file would have it: tracks without samples.
    let mut media = demo();
    media.file = Arc::new(Mp4File {
        tracks: vec![],
        skipped: vec![sluice_media::mp4::SkippedTrack { id: 1, reason: "no samples".into() }],
        file_len: media.bytes.len() as u64,
        fragmented: true,
    });
    let tally = Tally::default();
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let now = Instant::now();
    for _ in 0..2 {
        let key = server.accept((), PEER.parse().unwrap(), now);
        for request in
            [format!("DESCRIBE {URL} RTSP/1.0\r\nCSeq: 1\r\n\r\n"), setup(0, None, "RTP/AVP/TCP;unicast")]
        {
            let reply = ask(&mut server, key, &request, now);
            assert!(reply.starts_with("RTSP/1.0 501 Not Implemented\r\n"), "{reply}");
            assert!(
                reply.contains("\r\nSluice-Reason: cannot stream /sluice-demo.mp4 over RTSP: fragmented MP4"),
                "{reply}"
            );
        }
    }
    assert_eq!(*tally.unplayable.borrow(), [("/sluice-demo.mp4".to_string(), 501)], "noted once");
    assert_eq!(server.table.len(), 0);
}

#[test]
fn a_half_closed_request_is_answered_then_the_connection_closes() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let now = Instant::now();
    let key = server.accept((), PEER.parse().unwrap(), now);
    // The request and the end of file arrive in one turn, as they do when a client writes and
    // shuts down at once.
    server.received(key, b"OPTIONS * RTSP/1.0\r\nCSeq: 1\r\n\r\n", now);
    server.input_ended(key, now);
    assert!(!server.wants_input(key));
    let c = server.control(key).unwrap();
    assert!(!c.should_close(), "the reply is still to be written");
    let bytes = c.out.pending().unwrap().to_vec();
    assert!(bytes.starts_with(b"RTSP/1.0 200 OK\r\n"), "{}", String::from_utf8_lossy(&bytes));
    c.out.advance(bytes.len());
    assert!(server.control(key).unwrap().should_close());
    assert_eq!(tally.answered.get(), 1);

    // An end of file after half a request: nothing to answer, close now.
    let key = server.accept((), PEER.parse().unwrap(), now);
    server.received(key, b"OPTIONS * RTSP/1.0\r\nCSe", now);
    server.input_ended(key, now);
    assert!(server.control(key).unwrap().should_close());
    assert_eq!(tally.answered.get(), 1);
}

#[test]
fn an_interleaved_viewer_gets_framed_packets_on_its_channels() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let (key, id) = open_session(&mut server, "RTP/AVP/TCP;unicast;interleaved=0-1", t0);
    let r = ask(&mut server, key, &setup(1, Some(&id), "RTP/AVP/TCP;unicast;interleaved=2-3"), t0);
    assert!(r.starts_with("RTSP/1.0 200"), "{r}");
    server.received(key, play(&id).as_bytes(), t0);
    // Past the end of the presentation, a wake-up at a time, as a loop would.
    let mut written = drain(&mut server, key, t0);
    let end = t0 + Duration::from_secs_f64(media.file.duration_secs() + 1.0);
    while let Some(at) = server.next_wake().filter(|at| *at <= end) {
        server.tick(at, Duration::from_secs(1_800_000_000));
        written.extend(drain(&mut server, key, at));
    }
    let all = frames(&written);
    assert!(all[0].as_ref().is_err_and(|r| r.starts_with("RTSP/1.0 200")), "the PLAY reply comes first");
    let mut per_channel = [0usize; 4];
    for (channel, payload) in all.iter().filter_map(|f| f.as_ref().ok()) {
        per_channel[usize::from(*channel)] += 1;
        if channel % 2 == 0 {
            RtpPacket::parse(payload).expect("an RTP packet");
        } else {
            assert_eq!(payload[1], 200, "a sender report first in each RTCP packet");
        }
    }
    assert!(per_channel.iter().all(|n| *n > 0), "{per_channel:?}");
    assert_eq!(per_channel.iter().sum::<usize>(), tally.packets_sent.get());
    let samples: usize = media.file.tracks.iter().map(|t| t.samples.len()).sum();
    assert_eq!(tally.reads.get(), samples, "every sample read once");
    // The connection goes, and its interleaved session with it.
    server.remove(key, end);
    assert_eq!(*tally.released.borrow(), [Release::ConnectionClosed]);
}

/// The demo behind an origin: its index is [`Refusal::Warming`] for the first `warming`
/// asks, and the first `blocked_reads` sample reads would block.
struct Cold {
    demo: Demo,
    warming: Cell<usize>,
    blocked_reads: Cell<usize>,
}

impl Catalogue for Cold {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        self.demo.open(path)
    }

    fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, crate::Refusal> {
        if self.warming.get() > 0 {
            self.warming.set(self.warming.get() - 1);
            return Err(crate::Refusal::Warming);
        }
        self.demo.open_playable(path)
    }
}

impl MediaLibrary for Cold {
    type Bytes = ();

    fn open_bytes(&self, path: &str) -> io::Result<()> {
        self.demo.open_bytes(path)
    }

    fn read_at(&self, b: &(), offset: u64, into: &mut [u8]) -> io::Result<()> {
        if self.blocked_reads.get() > 0 {
            self.blocked_reads.set(self.blocked_reads.get() - 1);
            return Err(io::ErrorKind::WouldBlock.into());
        }
        self.demo.read_at(b, offset, into)
    }
}

/// Plays the demo's first track interleaved on a new connection of `server` from `t0` to
/// its end, a wake-up at a time; returns what was written.
fn play_through<M: MediaLibrary>(server: &mut RtspServer<'_, M, &Tally, ()>, t0: Instant) -> Vec<u8> {
    let key = server.accept((), PEER.parse().unwrap(), t0);
    let request = setup(0, None, "RTP/AVP/TCP;unicast;interleaved=0-1");
    server.received(key, request.as_bytes(), t0);
    let mut written = Vec::new();
    let end = t0 + Duration::from_secs(60);
    let mut session = None;
    let mut at = t0;
    for _ in 0..100_000 {
        written.extend(drain(server, key, at));
        if session.is_none() {
            if let Some(reply) = replies(&written).first() {
                assert!(reply.starts_with("RTSP/1.0 200"), "{reply}");
                let id = session_of(reply);
                server.received(key, play(&id).as_bytes(), at);
                session = Some(id);
                continue;
            }
        }
        let Some(next) = server.next_wake().filter(|w| *w <= end) else { break };
        at = next;
        server.tick(at, Duration::from_secs(1_800_000_000));
    }
    written
}

/// The RTP sequence numbers on channel 0 of `written`.
fn sequence_numbers(written: &[u8]) -> Vec<u16> {
    frames(written)
        .into_iter()
        .filter_map(|f| f.ok())
        .filter(|(channel, _)| *channel == 0)
        .map(|(_, payload)| RtpPacket::parse(&payload).expect("an RTP packet").sequence)
        .collect()
}

#[test]
fn a_request_for_a_warming_presentation_is_held_and_those_behind_it_wait_their_turn() {
    let media = Cold { demo: demo(), warming: Cell::new(3), blocked_reads: Cell::new(0) };
    let tally = Tally::default();
    let mut server: RtspServer<'_, Cold, &Tally, ()> =
        RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let key = server.accept((), PEER.parse().unwrap(), t0);
    let describe = format!("DESCRIBE {URL} RTSP/1.0\r\nCSeq: 1\r\n\r\n");
    server.received(key, format!("{describe}OPTIONS * RTSP/1.0\r\nCSeq: 2\r\n\r\n").as_bytes(), t0);
    // The client half-closes: its requests are still answered, in order, once warm.
    server.input_ended(key, t0);
    assert!(server.control(key).unwrap().out.is_empty(), "held: nothing answered yet");
    assert!(!server.control(key).unwrap().should_close(), "a held request keeps it open");
    let mut written = Vec::new();
    let mut at = t0;
    for _ in 0..10 {
        let wake = server.next_wake().expect("a retry is due");
        assert!(wake <= at + WARM_RETRY + PACE_TICK, "asked again within a retry");
        at = wake;
        server.tick(at, Duration::from_secs(1_800_000_000));
        let c = server.control(key).unwrap();
        if let Some(bytes) = c.out.pending() {
            written.extend_from_slice(bytes);
            let n = bytes.len();
            c.out.advance(n);
            break;
        }
    }
    let r = replies(&written);
    assert_eq!(r.len(), 2, "{r:?}");
    assert!(r[0].starts_with("RTSP/1.0 200") && r[0].contains("CSeq: 1\r\n"), "{}", r[0]);
    assert!(r[0].contains("application/sdp"), "{}", r[0]);
    assert!(r[1].starts_with("RTSP/1.0 200") && r[1].contains("CSeq: 2\r\n"), "{}", r[1]);
    assert_eq!(media.warming.get(), 0, "asked until warm");
    assert!(at < t0 + 5 * (WARM_RETRY + PACE_TICK), "retried on ticks, not late");
    assert!(server.control(key).unwrap().should_close(), "half-closed and answered");
}

#[test]
fn a_presentation_that_never_warms_is_answered_504_with_the_reason() {
    let media = Cold { demo: demo(), warming: Cell::new(usize::MAX), blocked_reads: Cell::new(0) };
    let tally = Tally::default();
    let mut server: RtspServer<'_, Cold, &Tally, ()> =
        RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let key = server.accept((), PEER.parse().unwrap(), t0);
    server.received(key, format!("DESCRIBE {URL} RTSP/1.0\r\nCSeq: 1\r\n\r\n").as_bytes(), t0);
    server.tick(t0 + WARM_TIMEOUT / 2, Duration::from_secs(1_800_000_000));
    assert!(server.control(key).unwrap().out.is_empty(), "still held");
    let late = t0 + WARM_TIMEOUT + PACE_TICK;
    server.tick(late, Duration::from_secs(1_800_000_000));
    let r = replies(&drain(&mut server, key, late));
    assert_eq!(r.len(), 1, "{r:?}");
    assert!(r[0].starts_with("RTSP/1.0 504"), "{}", r[0]);
    assert!(
        r[0].contains("Sluice-Reason: cannot stream /sluice-demo.mp4 over RTSP: the origin did not answer"),
        "{}",
        r[0]
    );
}

#[test]
fn samples_whose_bytes_are_still_being_fetched_wait_and_then_all_go_in_order() {
    let warm = demo();
    let tally = Tally::default();
    let mut server: Server<'_> = RtspServer::new(table(), &warm, &tally, Instant::now());
    let expected = sequence_numbers(&play_through(&mut server, Instant::now()));
    assert!(expected.len() > 100, "{}", expected.len());

    let media = Cold { demo: demo(), warming: Cell::new(2), blocked_reads: Cell::new(40) };
    let tally = Tally::default();
    let mut server: RtspServer<'_, Cold, &Tally, ()> =
        RtspServer::new(table(), &media, &tally, Instant::now());
    let got = sequence_numbers(&play_through(&mut server, Instant::now()));
    assert_eq!(media.blocked_reads.get(), 0, "reads were held");
    assert_eq!(got.len(), expected.len(), "every packet, none lost to a held read");
    assert!(got.windows(2).all(|w| w[1] == w[0].wrapping_add(1)), "in order, without gaps");
}

/// Datagrams a batch took: (port, destination, length).
#[derive(Default)]
struct Batch {
    room: usize,
    datagrams: Vec<(Port, SocketAddr, usize)>,
}

impl DatagramSink for Batch {
    fn fits(&self, _: usize) -> bool {
        self.datagrams.len() < self.room
    }

    fn push(&mut self, port: Port, dest: SocketAddr, head: &[u8], body: Option<BodyRef<'_>>) {
        self.datagrams.push((port, dest, head.len() + body.map_or(0, |b| b.len())));
    }
}

#[test]
fn output_is_written_as_its_own_bytes_and_shared_slices_and_survives_partial_writes() {
    let sample = Arc::new((0u8..100).collect::<Vec<u8>>());
    let body = Body::new(Arc::clone(&sample), 10, 20).unwrap();
    let mut out = OutBuf::default();
    out.push(b"$\x00");
    out.push(b"ab");
    out.push_shared(body.view());
    out.push(b"cd");
    assert_eq!(out.len(), 26);
    let slices: Vec<Vec<u8>> = out.pending_slices(8).into_iter().map(<[u8]>::to_vec).collect();
    assert_eq!(slices, [b"$\x00ab".to_vec(), sample[10..30].to_vec(), b"cd".to_vec()], "runs join");
    out.advance(6); // a short write, into the shared slice
    out.push(b"later");
    let rest: Vec<u8> = out.pending_slices(8).concat();
    assert_eq!(rest, [&sample[12..30], b"cd"].concat(), "what was queued meanwhile waits its turn");
    out.advance(rest.len());
    assert_eq!(out.pending(), Some(&b"later"[..]));
    out.advance(5);
    assert!(out.is_empty() && out.pending().is_none());
}

#[test]
fn a_udp_viewer_gets_paced_datagrams_at_its_ports_and_rtcp_keeps_it() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let (key, id) = open_session(&mut server, "RTP/AVP;unicast;client_port=5000-5001", t0);
    ask(&mut server, key, &play(&id), t0);
    // Two seconds' worth is due at once; the pacer lets a burst through, then asks to wake.
    let t1 = t0 + Duration::from_secs(2);
    server.tick(t1, Duration::from_secs(1_800_000_000));
    let mut batch = Batch { room: 10_000, ..Batch::default() };
    assert!(!server.fill_datagrams(&mut batch, t1), "the batch had room");
    let rtp: SocketAddr = "10.0.0.1:5000".parse().unwrap();
    let rtcp: SocketAddr = "10.0.0.1:5001".parse().unwrap();
    assert!(!batch.datagrams.is_empty());
    assert!(batch
        .datagrams
        .iter()
        .all(|(p, d, _)| (*p, *d) == (Port::Rtp, rtp) || (*p, *d) == (Port::Rtcp, rtcp)));
    let burst: usize = batch.datagrams.iter().map(|d| d.2).sum();
    assert!(burst <= PACE_BURST as usize + 1500, "a burst of {burst} bytes");
    let wake = server.next_wake().unwrap();
    assert!(wake >= t1 + PACE_TICK, "paced: wakes again no sooner than a tick");
    // Held until its next burst is in the bucket: an earlier turn sends it nothing.
    let mut none = Batch { room: 10_000, ..Batch::default() };
    assert!(!server.fill_datagrams(&mut none, t1 + Duration::from_millis(10)));
    assert!(none.datagrams.is_empty(), "a held viewer trickled {} datagrams", none.datagrams.len());
    // A full batch stops the round, and says so.
    let mut small = Batch { room: 1, ..Batch::default() };
    assert!(server.fill_datagrams(&mut small, wake + Duration::from_secs(1)));
    assert_eq!(small.datagrams.len(), 1);

    // Receiver reports from the viewer's RTCP port keep the session past its timeout; one
    // from elsewhere does not.
    let timeout = server.config().session_timeout;
    server.rtcp_from("10.0.0.9:5001".parse().unwrap(), t0 + timeout / 2);
    server.rtcp_from(rtcp, t0 + timeout / 2);
    server.tick(t0 + timeout + Duration::from_secs(1), Duration::ZERO);
    assert!(tally.released.borrow().is_empty(), "{:?}", tally.released.borrow());
    server.tick(t0 + timeout * 3 / 2 + Duration::from_secs(1), Duration::ZERO);
    assert_eq!(*tally.released.borrow(), [Release::Timeout]);
}

/// Datagrams with their bytes, by destination.
#[derive(Default)]
struct Capture {
    datagrams: Vec<(SocketAddr, Vec<u8>)>,
}

impl DatagramSink for Capture {
    fn fits(&self, _: usize) -> bool {
        true
    }

    fn push(&mut self, _: Port, dest: SocketAddr, head: &[u8], body: Option<BodyRef<'_>>) {
        let mut bytes = head.to_vec();
        bytes.extend_from_slice(body.map_or(&[][..], |b| b.as_slice()));
        self.datagrams.push((dest, bytes));
    }
}

/// A UDP viewer from its own address (`10.0.0.<n>`) that has played since `at`.
fn udp_viewer(server: &mut Server<'_>, n: u8, at: Instant) -> Result<SocketAddr, String> {
    udp_viewer_at(server, [10, 0, 0, n], at)
}

/// A UDP viewer from `ip` that has played since `at`; the refusal's reply if it was refused.
fn udp_viewer_at(server: &mut Server<'_>, ip: [u8; 4], at: Instant) -> Result<SocketAddr, String> {
    let n = ip;
    let key = server.accept((), SocketAddr::from((n, 40000)), at);
    let reply = ask(server, key, &setup(0, None, "RTP/AVP;unicast;client_port=5000-5001"), at);
    if !reply.starts_with("RTSP/1.0 200") {
        return Err(reply);
    }
    let reply = ask(server, key, &play(&session_of(&reply)), at);
    if !reply.starts_with("RTSP/1.0 200") {
        return Err(reply);
    }
    Ok(SocketAddr::from((n, 5000)))
}

/// Runs the core from `from` to `to`, waking exactly when it asks, as an idle loop would;
/// returns every datagram sent.
fn run_on_time(server: &mut Server<'_>, from: Instant, to: Instant) -> Capture {
    let mut out = Capture::default();
    let mut now = from;
    while now <= to {
        server.tick(now, Duration::from_secs(1_800_000_000));
        server.fill_datagrams(&mut out, now);
        match server.next_wake() {
            Some(at) if at > now => now = at,
            Some(_) => now += Duration::from_micros(100),
            None => break,
        }
    }
    out
}

#[test]
fn shared_reads_give_every_viewer_byte_identical_payloads() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let viewers: Vec<SocketAddr> = (1..=5).map(|n| udp_viewer(&mut server, n, t0).unwrap()).collect();
    let end = t0 + Duration::from_secs_f64(media.file.duration_secs() + 1.0);
    let out = run_on_time(&mut server, t0, end);
    let samples = media.file.tracks[0].samples.len();
    assert!(tally.reads.get() <= samples, "{} reads for {samples} samples and 5 viewers", tally.reads.get());
    // Headers differ (each viewer has its own SSRC, sequence and timestamps); payloads not.
    let payloads = |to: SocketAddr| -> Vec<Vec<u8>> {
        out.datagrams
            .iter()
            .filter(|(d, _)| *d == to)
            .map(|(_, b)| RtpPacket::parse(b).expect("RTP").payload.to_vec())
            .collect()
    };
    let first = payloads(viewers[0]);
    assert!(first.len() >= samples, "{} packets", first.len());
    for v in &viewers[1..] {
        assert!(payloads(*v) == first, "viewer {v} got other bytes than {}", viewers[0]);
    }
}

/// A table under the refuse policy.
fn refusing() -> SessionTable {
    table_with(RtspConfig { overload: Overload::Refuse, ..RtspConfig::default() })
}

/// Twenty UDP viewers (`10.0.0.1` to `.20`) playing from now; returns now.
fn start_twenty(server: &mut Server<'_>) -> Instant {
    let t0 = Instant::now();
    for n in 1..=20 {
        udp_viewer(server, n, t0).unwrap();
    }
    t0
}

#[test]
fn a_simulated_overload_refuses_the_next_viewer_and_keeps_the_admitted_on_time() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(refusing(), &media, &tally, Instant::now());
    let t0 = start_twenty(&mut server);
    assert_eq!(tally.admitted.get(), 20);
    assert_eq!(tally.streams.borrow().get("/sluice-demo.mp4"), Some(&20));
    // The loop reports its CPU time: 70% of a window for 20 viewers, 3.5% each, so room for
    // 22 at the 80% the refuse policy fills.
    server.account(Duration::ZERO, t0);
    server.account(LOAD_WINDOW.mul_f64(0.7), t0 + LOAD_WINDOW);
    let h = *tally.headroom.borrow().last().expect("a window closed");
    assert_eq!((h.viewers, h.room, h.late_sends), (20, 22, 0), "{h:?}");
    let t1 = t0 + LOAD_WINDOW;
    for n in 21..=22 {
        udp_viewer(&mut server, n, t1).unwrap();
    }
    let refused = udp_viewer(&mut server, 23, t1).expect_err("the 23rd viewer is refused");
    assert!(refused.starts_with("RTSP/1.0 453 Not Enough Bandwidth"), "{refused}");
    assert_eq!(tally.refused.get(), 1);
    // The admitted ones get every packet on time, and the refused one nothing.
    let out = run_on_time(&mut server, t0, t1 + Duration::from_secs(3));
    assert_eq!((tally.late.get(), tally.frames_dropped.get()), (0, 0));
    let refused = SocketAddr::from(([10, 0, 0, 23], 5000));
    assert!(out.datagrams.iter().all(|(d, _)| *d != refused));
    for n in 1..=22 {
        let to = SocketAddr::from(([10, 0, 0, n], 5000));
        assert!(out.datagrams.iter().filter(|(d, _)| *d == to).count() > 10, "viewer {n}");
    }
    // A load that leaves room again admits again.
    server.account(LOAD_WINDOW.mul_f64(0.7 + 0.1), t1 + LOAD_WINDOW);
    assert!(tally.headroom.borrow().last().unwrap().room > 22);
    udp_viewer(&mut server, 23, t1 + LOAD_WINDOW).expect("room again");
}

#[test]
fn a_play_after_the_room_shrank_is_refused_and_the_started_streams_go_on() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(refusing(), &media, &tally, Instant::now());
    let t0 = start_twenty(&mut server);
    // Set up while the load was unknown...
    let key = server.accept((), SocketAddr::from(([10, 0, 0, 21], 40000)), t0);
    let reply = ask(&mut server, key, &setup(0, None, "RTP/AVP;unicast;client_port=5000-5001"), t0);
    assert!(reply.starts_with("RTSP/1.0 200"), "{reply}");
    // ...then the loop is 90% busy with 20 streams: room for 17 at 80%.
    server.account(Duration::ZERO, t0);
    server.account(LOAD_WINDOW.mul_f64(0.9), t0 + LOAD_WINDOW);
    assert_eq!(tally.headroom.borrow().last().unwrap().room, 17);
    let t1 = t0 + LOAD_WINDOW;
    let reply = ask(&mut server, key, &play(&session_of(&reply)), t1);
    assert!(reply.starts_with("RTSP/1.0 453"), "{reply}");
    assert_eq!((tally.admitted.get(), tally.refused.get()), (20, 1));
    // The twenty started streams are not cut.
    let out = run_on_time(&mut server, t0, t1 + Duration::from_secs(1));
    for n in 1..=20 {
        let to = SocketAddr::from(([10, 0, 0, n], 5000));
        assert!(out.datagrams.iter().any(|(d, _)| *d == to), "viewer {n}");
    }
    let refused = SocketAddr::from(([10, 0, 0, 21], 5000));
    assert!(out.datagrams.iter().all(|(d, _)| *d != refused));
}

#[test]
fn the_viewer_bound_refuses_and_degrade_drops_late_frames_up_to_a_keyframe() {
    let media = demo();
    let config = RtspConfig { max_viewers: 2, overload: Overload::Degrade, ..RtspConfig::default() };
    let tally = Tally::default();
    let mut server: Server<'_> = RtspServer::new(table_with(config), &media, &tally, Instant::now());
    let t0 = Instant::now();
    udp_viewer(&mut server, 1, t0).unwrap();
    udp_viewer(&mut server, 2, t0).unwrap();
    let refused = udp_viewer(&mut server, 3, t0).unwrap_err();
    assert!(refused.starts_with("RTSP/1.0 453"), "{refused}");
    // Degrade admits past any load estimate...
    server.account(Duration::ZERO, t0);
    server.account(LOAD_WINDOW.mul_f64(2.0), t0 + LOAD_WINDOW);
    assert_eq!(tally.headroom.borrow().last().unwrap().room, usize::MAX);
    // ...and a loop that wakes 600 ms late (past DEGRADE_BEHIND) drops the late frames, read
    // or not, up to the next keyframe rather than sending them late.
    let reads_on_time = {
        let quiet = Tally::default();
        let mut s: Server<'_> = RtspServer::new(table(), &media, &quiet, Instant::now());
        udp_viewer(&mut s, 1, t0).unwrap();
        run_on_time(&mut s, t0, t0 + Duration::from_secs(2));
        s.samples.held()
    };
    server.tick(t0, Duration::ZERO);
    server.tick(t0 + Duration::from_millis(600), Duration::ZERO);
    assert_eq!(tally.late.get(), 2, "both viewers were late");
    assert!(tally.frames_dropped.get() > 0);
    run_on_time(&mut server, t0 + Duration::from_millis(600), t0 + Duration::from_secs(2));
    assert!(server.samples.held() < reads_on_time, "the skipped frames were never read");
}

/// A loop whose CPU demand is `demand(streaming viewers)` of each second (one core at most:
/// a loop asked for more falls behind), run in 10 ms turns from `t0` for `span`, with
/// newcomers from `10.1.x.y` arriving at `arrivals` after `t0`; returns the addresses admitted.
fn simulate_ramp(
    server: &mut Server<'_>,
    t0: Instant,
    span: Duration,
    arrivals: &[Duration],
    demand: impl Fn(usize) -> f64,
) -> Vec<SocketAddr> {
    let turn = Duration::from_millis(10);
    let (mut cpu, mut now, mut next) = (Duration::ZERO, t0, 0);
    let mut admitted = Vec::new();
    server.account(cpu, now);
    while now < t0 + span {
        while next < arrivals.len() && t0 + arrivals[next] <= now {
            let ip = [10, 1, (next / 250) as u8, (next % 250) as u8 + 1];
            if let Ok(to) = udp_viewer_at(server, ip, now) {
                admitted.push(to);
            }
            next += 1;
        }
        now += turn;
        server.tick(now, Duration::from_secs(1_800_000_000));
        server.fill_datagrams(&mut Discard, now);
        cpu += turn.mul_f64(demand(admitted.len()).min(1.0));
        server.account(cpu, now);
    }
    admitted
}

/// `n` arrivals evenly spread over `over`, from `from`.
fn spread(n: usize, from: Duration, over: Duration) -> impl Iterator<Item = Duration> {
    (0..n).map(move |i| from + over.mul_f64(i as f64 / n as f64))
}

/// A batch with room for everything, keeping nothing.
struct Discard;

impl DatagramSink for Discard {
    fn fits(&self, _: usize) -> bool {
        true
    }

    fn push(&mut self, _: Port, _: SocketAddr, _: &[u8], _: Option<BodyRef<'_>>) {}
}

#[test]
fn a_fast_ramp_beyond_capacity_admits_no_more_than_the_loop_carries_and_they_stay_on_time() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(refusing(), &media, &tally, Instant::now());
    // 2% fixed and 0.7% a viewer: one core carries 140, the 80% target 111. A burst of 150
    // newcomers in a quarter of a second (admitted whole, they would take 107% of a core),
    // then 150 more over 2.5 s.
    let demand = |v: usize| 0.02 + 0.007 * v as f64;
    let t0 = Instant::now();
    let span = Duration::from_secs(3);
    let ms = Duration::from_millis;
    let arrivals: Vec<Duration> = spread(150, ms(0), ms(250)).chain(spread(150, ms(250), ms(2500))).collect();
    let admitted = simulate_ramp(&mut server, t0, span, &arrivals, demand);
    let n = admitted.len();
    assert!(
        demand(n) <= super::super::admission::ADMIT_BUSY + 0.01,
        "{n} admitted load the loop to {:.2}",
        demand(n)
    );
    assert!(n >= 100, "only {n} admitted: the loop had room for 111");
    assert_eq!(tally.refused.get(), 300 - n);
    // The admitted streamed on time (the simulated loop is never behind below one core), and
    // go on.
    let out = run_on_time(&mut server, t0 + span, t0 + span + Duration::from_secs(1));
    assert_eq!((tally.late.get(), tally.frames_dropped.get()), (0, 0));
    for to in &admitted {
        assert!(out.datagrams.iter().any(|(d, _)| d == to), "admitted viewer {to} got nothing");
    }
}

#[test]
fn a_cost_growing_with_the_viewers_stops_the_lab_ramp_below_a_core() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(refusing(), &media, &tally, Instant::now());
    // Superlinear, like the kernel's UDP path near a core's limit: one core carries 129.
    let demand = |v: usize| 0.02 + 0.005 * v as f64 + 0.00002 * (v * v) as f64;
    // The lab's ramp: 300 viewers over 4 s.
    let t0 = Instant::now();
    let ramp: Vec<Duration> = spread(300, Duration::ZERO, Duration::from_secs(4)).collect();
    let admitted = simulate_ramp(&mut server, t0, Duration::from_secs(5), &ramp, demand).len();
    assert!(demand(admitted) <= 0.9, "{admitted} admitted load the loop to {:.2}", demand(admitted));
    assert!(admitted >= 90, "only {admitted} admitted: {:.2} busy", demand(admitted));
}

#[test]
fn a_loop_at_40_percent_still_admits() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(refusing(), &media, &tally, Instant::now());
    // Forty viewers at 1% each, arriving over the first second, then steady for two.
    let t0 = Instant::now();
    let arrivals: Vec<Duration> = spread(40, Duration::ZERO, Duration::from_secs(1)).collect();
    let admitted = simulate_ramp(&mut server, t0, Duration::from_secs(3), &arrivals, |v| 0.01 * v as f64);
    assert_eq!(admitted.len(), 40);
    let h = *tally.headroom.borrow().last().expect("windows closed");
    assert!((h.busy - 0.4).abs() < 0.01 && h.room > 40, "{h:?}");
    udp_viewer_at(&mut server, [10, 2, 0, 1], t0 + Duration::from_secs(3)).expect("a newcomer at 40%");
}

#[test]
fn viewers_due_in_one_send_slot_send_a_frame_in_the_same_turn_and_never_more_than_a_slot_early() {
    let (media, tally) = (demo(), Tally::default());
    let t0 = Instant::now();
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, t0);
    let starts = [Duration::ZERO, Duration::from_millis(7), Duration::from_millis(19)];
    let end = t0 + Duration::from_secs(3);
    // The loop on time, as an idle loop would run it, each viewer playing from its start; every
    // datagram with the turn it left in.
    let (mut out, mut turns) = (Capture::default(), Vec::new());
    let mut viewers = Vec::new();
    let mut now = t0;
    while now <= end {
        while let Some(&start) = starts.get(viewers.len()).filter(|s| t0 + **s <= now) {
            viewers.push((udp_viewer(&mut server, viewers.len() as u8 + 1, t0 + start).unwrap(), start));
        }
        server.tick(now, Duration::from_secs(1_800_000_000));
        let before = out.datagrams.len();
        server.fill_datagrams(&mut out, now);
        turns.extend(std::iter::repeat_n(now, out.datagrams.len() - before));
        let next_play = starts.get(viewers.len()).map(|s| t0 + *s);
        let wake = match server.next_wake() {
            Some(at) if at > now => at,
            _ => now + Duration::from_micros(100),
        };
        now = next_play.map_or(wake, |p| p.min(wake));
    }
    // Per viewer: the turn of each frame's first packet (a frame is the packets of one RTP
    // timestamp), with the time its sample is due in decode order.
    let track = &media.file.tracks[0];
    let frames = |to: SocketAddr| -> Vec<(Duration, Instant)> {
        let mut seen = Vec::<(u32, Instant)>::new();
        for ((dest, bytes), turn) in out.datagrams.iter().zip(&turns) {
            let Some(p) = (*dest == to).then(|| RtpPacket::parse(bytes).ok()).flatten() else { continue };
            if seen.last().is_none_or(|(ts, _)| *ts != p.timestamp) {
                seen.push((p.timestamp, *turn));
            }
        }
        seen.iter().enumerate().map(|(n, (_, turn))| (crate::stream::sample_time(track, n), *turn)).collect()
    };
    let slot = |at: Instant| at.saturating_duration_since(t0).as_nanos() / SEND_SLOT.as_nanos();
    let per_viewer: Vec<_> = viewers.iter().map(|(to, start)| (frames(*to), *start)).collect();
    for (frames, start) in &per_viewer {
        assert!(frames.len() > 30, "{} frames", frames.len());
        for (media, turn) in frames {
            let due = t0 + *start + *media;
            assert!(
                *turn + SEND_SLOT > due,
                "a frame due at {due:?} left at {turn:?}: more than a slot early"
            );
            assert!(*turn <= due + PACE_TICK, "a frame due at {due:?} left late, at {turn:?}");
        }
    }
    // Frames two viewers have due in the same slot leave in the same turn (the kernel copies
    // the second from the cache), once both play (the later one's first frames leave at its
    // PLAY); most frames of viewers 7 and 19 ms apart are such.
    let (mut together, mut shared_slot) = (0, 0);
    for (a, start_a) in &per_viewer {
        for (b, start_b) in &per_viewer {
            for ((media, turn_a), (media_b, turn_b)) in a.iter().zip(b) {
                assert_eq!(media, media_b, "the viewers play the same frames");
                let due_b = t0 + *start_b + *media;
                if start_a < start_b
                    && slot(t0 + *start_a + *media) == slot(due_b)
                    && slot(due_b) > slot(t0 + *start_b)
                {
                    shared_slot += 1;
                    together += usize::from(turn_a == turn_b);
                }
            }
        }
    }
    assert_eq!(together, shared_slot, "frames due in one slot left in different turns");
    assert!(shared_slot > per_viewer[0].0.len(), "only {shared_slot} frame pairs shared a slot");
}

#[test]
fn the_busy_share_falls_to_nothing_after_the_last_viewer_leaves() {
    let (media, tally) = (demo(), Tally::default());
    let mut server: Server<'_> = RtspServer::new(table(), &media, &tally, Instant::now());
    let t0 = Instant::now();
    let key = server.accept((), SocketAddr::from(([10, 0, 0, 1], 40000)), t0);
    let reply = ask(&mut server, key, &setup(0, None, "RTP/AVP;unicast;client_port=5000-5001"), t0);
    let session = session_of(&reply);
    assert!(ask(&mut server, key, &play(&session), t0).starts_with("RTSP/1.0 200"));
    server.account(Duration::ZERO, t0);
    let mut cpu = LOAD_WINDOW.mul_f64(0.4);
    server.account(cpu, t0 + LOAD_WINDOW);
    assert_eq!(tally.headroom.borrow().last().unwrap().busy, 0.4);
    // The viewer leaves; nothing else is due for a long while (the control connection's idle
    // deadline), but the loop still wakes to close its windows until one shows it idle.
    let left = t0 + LOAD_WINDOW + Duration::from_millis(10);
    let teardown = format!("TEARDOWN {URL} RTSP/1.0\r\nCSeq: 4\r\nSession: {session}\r\n\r\n");
    assert!(ask(&mut server, key, &teardown, left).starts_with("RTSP/1.0 200"));
    let (mut windows, mut since) = (0, t0 + LOAD_WINDOW);
    while let Some(wake) = server.next_wake().filter(|at| *at < t0 + Duration::from_secs(10)) {
        windows += 1;
        assert!(windows <= 3, "the loop keeps waking: {:?}", tally.headroom.borrow());
        assert!(wake <= since + LOAD_WINDOW + PACE_TICK, "the window's end, not later");
        // An idle wake costs the loop next to nothing.
        cpu += Duration::from_micros(20);
        server.tick(wake, Duration::from_secs(1));
        server.account(cpu, wake);
        since = wake;
    }
    let last = *tally.headroom.borrow().last().unwrap();
    assert!(windows >= 1 && last.busy < 0.01 && last.viewers == 0, "{last:?} after {windows} wakes");
}
