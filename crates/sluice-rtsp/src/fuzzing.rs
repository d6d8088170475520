//! The property the `rtsp_session` fuzz target checks, shared with the test that replays the
//! committed corpus (`fuzz/corpus/rtsp_session/`), so `cargo fuzz` and `cargo test` run the same
//! check: one RTSP connection and its session table driven like an engine, over the small H.264 +
//! AAC file `sluice_media::fuzzing::TINY_MP4`. The media crate's own targets are in
//! `sluice_media::fuzzing`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
