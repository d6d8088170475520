//! The properties the `rtsp_session` and `rtsp_publish` fuzz targets check, shared with the test
//! that replays the committed corpora (`fuzz/corpus/rtsp_session/`, `fuzz/corpus/rtsp_publish/`),
//! so `cargo fuzz` and `cargo test` run the same checks: one RTSP connection and its session table
//! driven like an engine, over the small H.264 + AAC file `sluice_media::fuzzing::TINY_MP4`; and
//! one publisher's connection after ffmpeg's handshake, whose RTP goes through the depacketizers
//! into a live table. The media crate's own targets are in `sluice_media::fuzzing`.

use sluice_media::fuzzing::TINY_MP4;
use sluice_media::mp4::Mp4File;

struct Tiny(std::sync::Arc<Mp4File>);

impl crate::Catalogue for Tiny {
    fn open(&self, path: &str) -> Result<std::sync::Arc<Mp4File>, crate::NotFound> {
        if path == "/tiny.mp4" {
            Ok(self.0.clone())
        } else {
            Err(crate::NotFound)
        }
    }
}

/// What an RTSP connection wrote and did for `chunks` arriving as successive reads.
#[derive(Debug, PartialEq, Eq)]
struct Transcript {
    replies: Vec<u8>,
    answered: usize,
    events: Vec<crate::Event>,
    closed: bool,
}

/// Runs one connection over `chunks` like an engine: offers what is pending until nothing more
/// is consumed, and after every read drives each playing session's streamer for a second of
/// media with the file's real bytes. Session ids come from a counter, so inputs can name the
/// session they set up (`Session: 0000000000000001` is the first).
fn run_rtsp(chunks: &[&[u8]], file: &std::sync::Arc<Mp4File>) -> Transcript {
    use crate::{ConnectionId, Output, RtspConfig, RtspConnection, SessionTable};
    use std::time::{Duration, Instant};
    let mut ids = 0u64;
    let config = RtspConfig {
        limits: sluice_proto::rtsp::Limits { max_head: 1024, max_body: 256 },
        max_pipelined: 4,
        ..RtspConfig::default()
    };
    let mut table = SessionTable::with_entropy(config, move || {
        ids += 1;
        ids
    });
    let catalogue = Tiny(file.clone());
    let mut now = Instant::now();
    let mut conn =
        RtspConnection::new(ConnectionId(1), std::net::SocketAddr::from(([127, 0, 0, 1], 40000)), now);
    let mut out = Output::default();
    let mut t = Transcript { replies: Vec::new(), answered: 0, events: Vec::new(), closed: false };
    let mut pending = Vec::new();
    let mut packets = sluice_proto::rtp::Packets::new();
    let mut due = Vec::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        loop {
            out.clear();
            let used = conn.receive(&pending, now, &mut table, &catalogue, &mut out);
            assert!(used <= pending.len());
            pending.drain(..used);
            t.replies.extend_from_slice(&out.replies);
            t.answered += out.answered;
            t.events.append(&mut out.events);
            if out.close {
                t.closed = true;
            }
            if used == 0 || t.closed {
                break;
            }
        }
        if t.closed {
            break;
        }
    }
    // Play what is playing for a while: due samples packetize without error.
    now += Duration::from_secs(1);
    for session in table.iter_mut() {
        let Some(streamer) = session.streamer_mut() else { continue };
        due.clear();
        streamer.due(now, &mut due);
        for d in &due {
            let bytes = &TINY_MP4[d.offset as usize..][..d.size as usize];
            packets.clear();
            let _ = streamer.packetize(d, bytes, &mut packets);
        }
    }
    table.expire(now + Duration::from_secs(3600), &mut t.events);
    assert!(table.is_empty(), "every session times out");
    t
}

/// An RTSP connection never panics on arbitrary request sequences, answers every complete
/// request exactly once (a framing error ends the connection after its answer), and does the
/// same whether the bytes arrive whole, a byte per read, or in two reads split anywhere.
pub fn rtsp_session(data: &[u8]) {
    let file = std::sync::Arc::new(Mp4File::from_bytes(TINY_MP4).expect("the seed file indexes"));
    let whole = run_rtsp(&[data], &file);
    // Count the complete requests independently with the framing function alone.
    let limits = sluice_proto::rtsp::Limits { max_head: 1024, max_body: 256 };
    let mut expected = 0;
    let mut rest = data;
    loop {
        match sluice_proto::rtsp::read_message(rest, &limits) {
            Ok(sluice_proto::rtsp::Message::Complete(_, n)) => {
                expected += 1;
                rest = &rest[n..];
            }
            Ok(sluice_proto::rtsp::Message::Interleaved { consumed, .. }) => rest = &rest[consumed..],
            Ok(sluice_proto::rtsp::Message::NeedMore) => break,
            Err(_) => {
                expected += 1;
                break;
            }
        }
    }
    assert_eq!(whole.answered, expected, "every complete request answered exactly once");
    // The replies are that many well-formed responses.
    let mut replies = whole.replies.as_slice();
    let mut parsed = 0;
    while !replies.is_empty() {
        match rtsp_types::Message::<Vec<u8>>::parse(replies) {
            Ok((rtsp_types::Message::Response(_), n)) => {
                parsed += 1;
                replies = &replies[n..];
            }
            other => panic!("reply does not parse: {other:?}"),
        }
    }
    assert_eq!(parsed, expected);
    // A byte per read: every request is split at every one of its bytes.
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(run_rtsp(&bytes, &file), whole, "a byte per read changed the exchange");
    // Two reads split at each point is quadratic; long inputs are split at a spread of points.
    let step = (data.len() / 128).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        assert_eq!(run_rtsp(&[a, b], &file), whole, "split at {split} changed the exchange");
    }
}

/// What `ffmpeg -f rtsp -rtsp_transport tcp` sends up to its first RTP packet (H.264 with B-frames
/// and AAC at 8 kHz): the `rtsp_publish` target's inputs are what follows it.
const PUBLISH_HANDSHAKE: &str = "OPTIONS rtsp://127.0.0.1:18600/live/fuzz RTSP/1.0\r\n\
CSeq: 1\r\n\
User-Agent: Lavf59.27.100\r\n\
\r\n\
ANNOUNCE rtsp://127.0.0.1:18600/live/fuzz RTSP/1.0\r\n\
Content-Type: application/sdp\r\n\
CSeq: 2\r\n\
User-Agent: Lavf59.27.100\r\n\
Content-Length: 494\r\n\
\r\n\
v=0\r\n\
o=- 0 0 IN IP4 127.0.0.1\r\n\
s=No Name\r\n\
c=IN IP4 127.0.0.1\r\n\
t=0 0\r\n\
a=tool:libavformat LIBAVFORMAT_VERSION\r\n\
m=video 0 RTP/AVP 96\r\n\
a=rtpmap:96 H264/90000\r\n\
a=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z2QACqzZRHsBEAAAAwAQAAADAUDxIllg,aOvjyyLA; profile-level-id=64000A\r\n\
a=control:streamid=0\r\n\
m=audio 0 RTP/AVP 97\r\n\
b=AS:48\r\n\
a=rtpmap:97 MPEG4-GENERIC/8000/1\r\n\
a=fmtp:97 profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;indexdeltalength=3; config=158856E500\r\n\
a=control:streamid=1\r\n\
SETUP rtsp://127.0.0.1:18600/live/fuzz/streamid=0 RTSP/1.0\r\n\
Transport: RTP/AVP/TCP;unicast;interleaved=0-1;mode=record\r\n\
CSeq: 3\r\n\
User-Agent: Lavf59.27.100\r\n\
\r\n\
SETUP rtsp://127.0.0.1:18600/live/fuzz/streamid=1 RTSP/1.0\r\n\
Transport: RTP/AVP/TCP;unicast;interleaved=2-3;mode=record\r\n\
CSeq: 4\r\n\
User-Agent: Lavf59.27.100\r\n\
Session: 0000000000000001\r\n\
\r\n\
RECORD rtsp://127.0.0.1:18600/live/fuzz RTSP/1.0\r\n\
Range: npt=0.000-\r\n\
CSeq: 5\r\n\
User-Agent: Lavf59.27.100\r\n\
Session: 0000000000000001\r\n\
\r\n\
";

/// What a publishing connection made of its input: the replies, and each live track's samples
/// (decode time, composition offset, keyframe, bytes) once the input ended.
type PublishTranscript = (Vec<u8>, Vec<Vec<(u64, i32, bool, Vec<u8>)>>);

/// Runs a publisher's connection over [`PUBLISH_HANDSHAKE`] then `chunks`, all at one instant.
fn run_publish(chunks: &[&[u8]]) -> PublishTranscript {
    use crate::live::LiveRegistry;
    use crate::{ConnectionId, Output, RtspConfig, RtspConnection, SessionTable};
    struct Live(LiveRegistry);
    impl crate::Catalogue for Live {
        fn open(&self, _: &str) -> Result<std::sync::Arc<Mp4File>, crate::NotFound> {
            Err(crate::NotFound)
        }
        fn live(&self) -> Option<&LiveRegistry> {
            Some(&self.0)
        }
    }
    let mut ids = 0u64;
    let mut table = SessionTable::with_entropy(RtspConfig::default(), move || {
        ids += 1;
        ids
    });
    let catalogue = Live(LiveRegistry::new("/live"));
    let now = std::time::Instant::now();
    let mut conn =
        RtspConnection::new(ConnectionId(1), std::net::SocketAddr::from(([127, 0, 0, 1], 40000)), now);
    let mut out = Output::default();
    let mut replies = Vec::new();
    let mut pending = Vec::new();
    for chunk in std::iter::once(PUBLISH_HANDSHAKE.as_bytes()).chain(chunks.iter().copied()) {
        pending.extend_from_slice(chunk);
        loop {
            out.clear();
            let used = conn.receive(&pending, now, &mut table, &catalogue, &mut out);
            pending.drain(..used);
            replies.extend_from_slice(&out.replies);
            if used == 0 || out.close {
                break;
            }
        }
    }
    let Some(stream) = catalogue.0.get("/live/fuzz") else { return (replies, Vec::new()) };
    let snapshot = stream.snapshot();
    let tracks = snapshot
        .file
        .tracks
        .iter()
        .map(|track| {
            let times: Vec<u64> = track.samples.iter().map(|s| s.decode_time()).collect();
            assert!(times.windows(2).all(|w| w[0] < w[1]), "decode times increase");
            track
                .samples
                .iter()
                .map(|s| {
                    let bytes = stream.sample(s.offset()).expect("a sample in the table is kept");
                    assert_eq!(bytes.len(), s.size() as usize);
                    (s.decode_time(), s.composition_offset(), s.is_sync(), bytes.to_vec())
                })
                .collect()
        })
        .collect();
    conn.end_publishing(&catalogue);
    assert!(catalogue.0.get("/live/fuzz").is_none(), "the path is free once its publisher is gone");
    (replies, tracks)
}

/// A publisher's connection never panics on arbitrary interleaved frames and requests after its
/// `RECORD`; the live table it builds has increasing decode times and keeps every sample it
/// lists; and it is the same whether the bytes arrive whole, a byte per read, or in two reads
/// split anywhere.
pub fn rtsp_publish(data: &[u8]) {
    let whole = run_publish(&[data]);
    assert!(
        String::from_utf8_lossy(&whole.0).matches("RTSP/1.0 200 OK\r\n").count() >= 5,
        "the handshake is answered"
    );
    let bytes: Vec<&[u8]> = data.chunks(1).collect();
    assert_eq!(run_publish(&bytes), whole, "a byte per read changed the stream");
    let step = (data.len() / 64).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        assert_eq!(run_publish(&[a, b]), whole, "split at {split} changed the stream");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ffmpeg's second of H.264 (10 fps, B-frames, a keyframe every 5) and AAC becomes a live
    /// table of every picture from the first keyframe, shown in the order it was encoded for.
    #[test]
    fn ffmpegs_publish_seed_becomes_a_live_table() {
        let path = format!("{}/../../fuzz/corpus/rtsp_publish/ffmpeg-h264-aac", env!("CARGO_MANIFEST_DIR"));
        let (replies, tracks) = run_publish(&[&std::fs::read(path).unwrap()]);
        assert_eq!(String::from_utf8_lossy(&replies).matches("RTSP/1.0 200 OK\r\n").count(), 5);
        let (video, audio) = (&tracks[0], &tracks[1]);
        assert_eq!(video.len(), 10, "a second at 10 fps");
        assert!(video[0].2 && video[5].2 && video.iter().filter(|s| s.2).count() == 2, "keyframes every 5");
        let mut shown: Vec<u64> = video.iter().map(|s| s.0.saturating_add_signed(i64::from(s.1))).collect();
        assert!(shown.windows(2).any(|w| w[0] > w[1]), "B-frames are shown out of decode order");
        shown.sort_unstable();
        assert!(shown.windows(2).all(|w| w[1] - w[0] == 9000), "one picture every 100 ms: {shown:?}");
        // 8 kHz AAC, 1024 samples a frame: about 8 frames a second, one frame apart each.
        assert!(audio.len() >= 7 && audio.windows(2).all(|w| w[1].0 - w[0].0 == 1024), "{}", audio.len());
    }

    /// The seeds that script a whole exchange name the session the counter issues: every reply
    /// is 200, so the fuzzer starts from inputs that reach PLAY, PAUSE and TEARDOWN.
    #[test]
    fn full_exchange_seeds_reach_every_state() {
        let file = std::sync::Arc::new(Mp4File::from_bytes(TINY_MP4).unwrap());
        for (seed, n) in [("full-udp", 8), ("full-tcp", 4)] {
            let path = format!("{}/../../fuzz/corpus/rtsp_session/{seed}", env!("CARGO_MANIFEST_DIR"));
            let t = run_rtsp(&[&std::fs::read(path).unwrap()], &file);
            assert_eq!(t.answered, n, "{seed}");
            let text = String::from_utf8(t.replies).unwrap();
            assert_eq!(text.matches("RTSP/1.0 200 OK\r\n").count(), n, "{seed}: {text}");
        }
    }
}
