//! The properties the fuzz targets check, shared with the tests that replay the committed corpus.
//!
//! Each function takes arbitrary bytes and panics only when a property fails, so `cargo fuzz`
//! (in `fuzz/`) and `cargo test` (replaying `fuzz/corpus/`) exercise exactly the same checks. The
//! central property is the sans-I/O one: however the bytes are split across reads, a parser
//! gives the same answer as when it sees them whole.

use std::borrow::Cow;
use std::io::IoSlice;
use std::time::Instant;

use crate::conn::{Clock, Outbox, Session};
use crate::http::body::{BodyDecoder, BodyError, BodyFraming};
use crate::http::range::{resolve_range, RangeOutcome};
use crate::http::request::{parse_head, Parsed, MAX_HEADERS};
use crate::http::{Body, Handler, HttpSession, Limits, Reply, Request, Response, Status};
use crate::rtp::{
    AacAccessUnits, AacPacketizer, H264Depacketizer, H264Packetizer, PacketizeError, Packets, RtpPacket,
    StreamConfig, RTP_HEADER_LEN,
};
use crate::rtsp::{read_message, Limits as RtspLimits, Message as RtspMessage, RtspError};

/// A handler that answers every request with its method and target, so that the output shows
/// which requests the session saw.
struct Echo(Limits);

impl Handler for Echo {
    fn limits(&self) -> &Limits {
        &self.0
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        let body = format!("{} {}", req.method.as_str(), req.target);
        Reply::Now(Response {
            status: Status::OK,
            headers: Vec::new(),
            body: Body::Bytes(Cow::Owned(body.into_bytes())),
        })
    }
}

fn drain(out: &mut Outbox, into: &mut Vec<u8>) {
    while !out.is_empty() {
        let mut slots = [IoSlice::new(&[]); 8];
        let n = out.leading_slices(&mut slots);
        let len: usize = slots[..n].iter().map(|s| s.len()).sum();
        for s in &slots[..n] {
            into.extend_from_slice(s);
        }
        out.advance(len as u64);
    }
}

/// Runs a session over `chunks` as successive reads; returns everything it wrote.
fn run_session(chunks: &[&[u8]]) -> (Vec<u8>, bool) {
    let clock = Clock::new(Instant::now(), 1_700_000_000);
    let mut session =
        HttpSession::new(Echo(Limits { max_head: 2048, max_request_line: 512, ..Limits::default() }), &clock);
    let mut out = Outbox::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut written = Vec::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        // Offer until the session stops consuming, draining between offers like an engine.
        loop {
            let used = session.receive(&pending, &mut out, &clock);
            pending.drain(..used);
            let had_output = !out.is_empty();
            drain(&mut out, &mut written);
            if had_output {
                session.on_drained(&clock);
            }
            if out.closing() || used == 0 || pending.is_empty() {
                break;
            }
        }
        if out.closing() {
            break;
        }
    }
    (written, out.closing())
}

/// Runs `check` on every file of a committed corpus directory (`fuzz/corpus/<target>/`), each
/// in `catch_unwind` so the failing input is named; at least five inputs must be there, so a
/// missing corpus cannot pass unnoticed. Shared by every crate's corpus replay test.
pub fn replay_corpus(dir: &std::path::Path, check: fn(&[u8])) {
    let mut count = 0;
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display())).path();
        let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let result = std::panic::catch_unwind(|| check(&data));
        assert!(result.is_ok(), "corpus input {} fails its property", path.display());
        count += 1;
    }
    assert!(count >= 5, "expected a corpus in {}, found {count} inputs", dir.display());
}

/// An HTTP session gives the same output for `data` whole and split at any point, and every
/// response it writes is a well-formed HTTP/1.1 status line.
pub fn http_session(data: &[u8]) {
    let (whole, closed) = run_session(&[data]);
    if !whole.is_empty() {
        assert!(whole.starts_with(b"HTTP/1.1 "), "output does not start with a status line");
    }
    // Splitting at every byte is quadratic; long inputs are split at a spread of points instead.
    let step = (data.len() / 64).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        let (split_out, split_closed) = run_session(&[a, b]);
        assert_eq!(split_out, whole, "split at {split} changed the output");
        assert_eq!(split_closed, closed, "split at {split} changed whether the connection closes");
    }
}

/// Decodes `chunks` as successive reads of one chunked body, giving unconsumed bytes again with
/// the next read as a connection does: the payload, the bytes consumed, and how it ended.
fn decode_chunked(lenient: bool, chunks: &[&[u8]]) -> (Vec<u8>, usize, Result<bool, BodyError>) {
    let mut decoder = if lenient {
        BodyDecoder::lenient(BodyFraming::Chunked)
    } else {
        match BodyDecoder::new(BodyFraming::Chunked, 1 << 16) {
            Ok(d) => d,
            Err(e) => return (Vec::new(), 0, Err(e)),
        }
    };
    let (mut payload, mut consumed, mut pending) = (Vec::new(), 0, Vec::new());
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        match decoder.decode_with(&pending, |p| payload.extend_from_slice(p)) {
            Ok(d) => {
                consumed += d.consumed;
                pending.drain(..d.consumed);
                if d.done {
                    return (payload, consumed, Ok(true));
                }
            }
            Err(e) => return (payload, consumed, Err(e)),
        }
    }
    (payload, consumed, Ok(false))
}

/// The chunked decoder (strict when the first byte is even, lenient when odd) gives the same
/// payload, end and error for the rest of `data` whole as split at any point, and never consumes
/// or makes more than it was given.
pub fn chunked_body(data: &[u8]) {
    let Some((&mode, body)) = data.split_first() else { return };
    let lenient = mode % 2 == 1;
    let (payload, consumed, end) = decode_chunked(lenient, &[body]);
    assert!(consumed <= body.len(), "consumed more than it was given");
    assert!(payload.len() <= body.len(), "more payload than bytes given");
    let step = (body.len() / 64).max(1);
    for split in (0..=body.len()).step_by(step) {
        let (a, b) = body.split_at(split);
        let (split_payload, split_consumed, split_end) = decode_chunked(lenient, &[a, b]);
        if end.is_ok() {
            assert_eq!(split_payload, payload, "split at {split} changed the payload");
            assert_eq!(split_consumed, consumed, "split at {split} changed where the body ends");
        }
        assert_eq!(split_end, end, "split at {split} changed how the body ends");
    }
}

/// A request head parses to the same result whole as when it arrives a byte at a time: every
/// proper prefix of a complete head is `Partial` (or the same error), never a different request.
pub fn request_head(data: &[u8]) {
    let limits = Limits { max_head: 2048, max_request_line: 512, ..Limits::default() };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let whole = match parse_head(data, &mut headers, &limits) {
        Ok(Parsed::Complete { request, head_len, framing }) => {
            assert!(head_len <= data.len());
            Some(Ok((format!("{:?} {} {:?}", request.method, request.target, framing), head_len)))
        }
        Ok(Parsed::Partial) => None,
        Err(e) => Some(Err(e)),
    };
    if let Some(Ok((_, head_len))) = &whole {
        for end in 0..*head_len {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            match parse_head(&data[..end], &mut headers, &limits) {
                Ok(Parsed::Partial) | Err(_) => {}
                Ok(Parsed::Complete { .. }) => panic!("a prefix of {end} bytes parsed as a whole head"),
            }
        }
    }
}

/// Range resolution never panics and every range it returns lies inside the representation,
/// with the total never more than the representation itself.
pub fn range_header(data: &[u8]) {
    let (len, header) = match data.split_first_chunk::<8>() {
        Some((n, rest)) => (u64::from_le_bytes(*n) % (1 << 40), rest),
        None => (1000, data),
    };
    let max_ranges = 16;
    match resolve_range(header, len, max_ranges) {
        RangeOutcome::Full | RangeOutcome::Unsatisfiable => {}
        RangeOutcome::Single(r) => {
            assert!(r.start <= r.end && r.end < len, "{r:?} outside 0..{len}");
        }
        RangeOutcome::Multiple(ranges) => {
            assert!(ranges.len() <= max_ranges);
            let mut total = 0u64;
            for r in &ranges {
                assert!(r.start <= r.end && r.end < len, "{r:?} outside 0..{len}");
                total += r.end - r.start + 1;
            }
            assert!(total <= len, "ranges add up to {total}, more than {len}");
        }
    }
}

/// The RTSP request reader gives the same sequence of messages for `data` whole as when it
/// arrives in two reads split at any byte, and never reports a message longer than the buffer.
pub fn rtsp_request(data: &[u8]) {
    let whole = read_rtsp(&[data]);
    // Splitting at every byte is quadratic; long inputs are split at a spread of points instead.
    let step = (data.len() / 256).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        assert_eq!(read_rtsp(&[a, b]), whole, "split at {split} changed the messages");
    }
}

/// Feeds `chunks` as successive reads to the RTSP reader the way a connection would; returns
/// what it saw (requests printed, frames as channel and bytes) and how it ended.
fn read_rtsp(chunks: &[&[u8]]) -> (Vec<String>, Option<RtspError>) {
    let limits = RtspLimits { max_head: 1024, max_body: 256 };
    let mut pending: Vec<u8> = Vec::new();
    let mut seen = Vec::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        loop {
            let consumed = match read_message(&pending, &limits) {
                Ok(RtspMessage::NeedMore) => break,
                Ok(RtspMessage::Complete(request, consumed)) => {
                    let mut text = Vec::new();
                    request.write(&mut text).expect("writing into a Vec");
                    seen.push(String::from_utf8_lossy(&text).into_owned());
                    consumed
                }
                Ok(RtspMessage::Interleaved { channel, payload, consumed }) => {
                    seen.push(format!("${channel} {payload:?}"));
                    consumed
                }
                Err(e) => return (seen, Some(e)),
            };
            assert!(consumed > 0 && consumed <= pending.len(), "consumed {consumed} of {}", pending.len());
            pending.drain(..consumed);
        }
    }
    (seen, None)
}

/// Arbitrary NAL units packetized as one H.264 access unit and depacketized again come back
/// identical, whatever the payload limit and length-prefix size; the same bytes as AAC frames
/// come back identical too.
pub fn rtp_roundtrip(data: &[u8]) {
    let Some((&[limit, shape, ts0, ts1], rest)) = data.split_first_chunk::<4>() else { return };
    let max_payload = 3 + usize::from(limit) * 4; // 3..=1023
    let length_size = [1u8, 2, 4][usize::from(shape % 3)];
    let timestamp = u32::from(ts0) << 24 | u32::from(ts1);
    let config =
        StreamConfig { ssrc: 0x5105, payload_type: 96, initial_sequence: u16::from(shape) << 8 | 0xf0 };
    // NAL units: split `rest` at bytes equal to the shape byte (a cheap, fuzzer-steerable split);
    // H.264 NAL types 1..=23 only, as an MP4 holds (the header byte's type is forced into range).
    let nals: Vec<Vec<u8>> = rest
        .split(|b| *b == shape)
        .filter(|n| !n.is_empty())
        .map(|n| {
            let mut n = n.to_vec();
            n[0] = n[0] & 0xe0 | (n[0] % 23 + 1);
            n.truncate(if length_size == 4 { usize::MAX } else { (1 << (8 * length_size)) - 1 });
            n
        })
        .collect();
    let mut au = Vec::new();
    for n in &nals {
        au.extend_from_slice(&(n.len() as u32).to_be_bytes()[4 - usize::from(length_size)..]);
        au.extend_from_slice(n);
    }
    let mut packetizer = H264Packetizer::new(config, max_payload, length_size).expect("valid settings");
    let mut out = Packets::new();
    match packetizer.packetize(&au, timestamp, &mut out) {
        Ok(n) => assert_eq!(n, out.len()),
        Err(PacketizeError::EmptyAccessUnit) => {
            assert!(nals.is_empty());
            return;
        }
        Err(e) => panic!("well-formed access unit refused: {e}"),
    }
    let mut depacketizer = H264Depacketizer::new(1 << 20);
    let mut got = None;
    for (i, packet) in out.iter().enumerate() {
        assert!(packet.len() <= RTP_HEADER_LEN + max_payload, "packet over the limit");
        let packet = RtpPacket::parse(packet).expect("our packet parses");
        assert_eq!(packet.sequence, config.initial_sequence.wrapping_add(i as u16));
        assert_eq!(packet.marker, i + 1 == out.len(), "marker only on the last packet");
        if let Some(unit) = depacketizer.push(&packet).expect("our packet depacketizes") {
            assert!(got.is_none(), "more than one access unit");
            assert_eq!(unit.timestamp, timestamp);
            got = Some(unit.nal_units().map(<[u8]>::to_vec).collect::<Vec<_>>());
        }
    }
    assert_eq!(got.as_ref(), Some(&nals), "NAL units changed in the round trip");

    // H.265: the same bytes as NAL units with two-byte headers of types 0..=40 (what an MP4
    // holds), through single NAL unit packets, aggregation packets and fragmentation units.
    let hevc: Vec<Vec<u8>> = nals
        .iter()
        .filter(|n| n.len() >= 2)
        .map(|n| {
            let mut n = n.clone();
            n[0] = n[0] & 0x81 | ((n[0] >> 1) % 41) << 1;
            n
        })
        .collect();
    let mut hevc_au = Vec::new();
    for n in &hevc {
        hevc_au.extend_from_slice(&(n.len() as u32).to_be_bytes()[4 - usize::from(length_size)..]);
        hevc_au.extend_from_slice(n);
    }
    let hevc_payload = max_payload.max(4);
    let mut h265 =
        crate::rtp::H265Packetizer::new(config, hevc_payload, length_size).expect("valid settings");
    out.clear();
    if h265.packetize(&hevc_au, timestamp, &mut out).is_ok() {
        let mut depacketizer = crate::rtp::H265Depacketizer::new(1 << 20);
        let mut got = None;
        for (i, packet) in out.iter().enumerate() {
            assert!(packet.len() <= RTP_HEADER_LEN + hevc_payload, "H.265 packet over the limit");
            let packet = RtpPacket::parse(packet).expect("our packet parses");
            assert_eq!(packet.marker, i + 1 == out.len(), "marker only on the last packet");
            if let Some(unit) = depacketizer.push(&packet).expect("our H.265 packet depacketizes") {
                got = Some(unit.to_vec());
            }
        }
        let mut expected = Vec::new();
        for n in &hevc {
            expected.extend_from_slice(&(n.len() as u32).to_be_bytes());
            expected.extend_from_slice(n);
        }
        assert_eq!(got, Some(expected), "H.265 NAL units changed in the round trip");
    } else {
        assert!(hevc.is_empty(), "a well-formed H.265 access unit refused");
    }
    if let Ok(packet) = RtpPacket::parse(rest) {
        let _ = crate::rtp::H265Depacketizer::new(1 << 16).push(&packet);
    }

    // AAC: each NAL unit's bytes as one frame.
    let mut aac = AacPacketizer::new(config, max_payload.max(5)).expect("valid settings");
    for frame in &nals {
        out.clear();
        match aac.packetize(frame, timestamp, &mut out) {
            Ok(()) => {
                let packet = RtpPacket::parse(out.get(0).expect("one packet")).expect("our packet parses");
                let frames: Vec<&[u8]> =
                    AacAccessUnits::parse(&packet).expect("our AU headers parse").collect();
                assert_eq!(frames, [frame.as_slice()]);
            }
            Err(PacketizeError::FrameTooLarge { size, max }) => assert!(size > max),
            Err(e) => panic!("AAC frame refused: {e}"),
        }
    }
    // Opus, AC-3 and E-AC-3: each NAL unit's bytes as one frame, whole or (AC-3, E-AC-3) in
    // fragments.
    for format in [crate::rtp::FrameFormat::Opus, crate::rtp::FrameFormat::Ac3, crate::rtp::FrameFormat::Eac3]
    {
        let mut packetizer =
            crate::rtp::FramePacketizer::new(config, max_payload, format).expect("valid settings");
        let mut depacketizer = crate::rtp::AudioFrames::new(format);
        for frame in &nals {
            out.clear();
            if packetizer.packetize(frame, timestamp, &mut out).is_err() {
                assert!(format == crate::rtp::FrameFormat::Opus || frame.len() > 255 * (max_payload - 2));
                continue;
            }
            let mut got = Vec::new();
            for packet in out.iter() {
                let packet = RtpPacket::parse(packet).expect("our packet parses");
                assert!(packet.payload.len() <= max_payload);
                got.extend(
                    depacketizer
                        .push(&packet)
                        .expect("our frame depacketizes")
                        .into_iter()
                        .map(<[u8]>::to_vec),
                );
            }
            if format == crate::rtp::FrameFormat::Eac3 {
                // Bytes that happen to be E-AC-3 sync frames come back one sync frame each.
                assert_eq!(got.concat(), *frame, "a frame changed in the round trip");
            } else {
                assert_eq!(got, vec![frame.clone()], "a frame changed in the round trip");
            }
        }
        if let Ok(packet) = RtpPacket::parse(rest) {
            let _ = depacketizer.push(&packet);
        }
    }
    // E-AC-3, the pieces between shape bytes unchanged (so they can be sync frames) as
    // consecutive frames: several to a packet where they fit; back in order, byte for byte.
    let frames: Vec<&[u8]> = rest.split(|b| *b == shape).filter(|n| !n.is_empty()).collect();
    let mut eac3 = crate::rtp::FramePacketizer::new(config, max_payload, crate::rtp::FrameFormat::Eac3)
        .expect("valid settings");
    out.clear();
    if eac3.packetize_frames(&frames, timestamp, 1536, &mut out).is_ok() {
        let mut depacketizer = crate::rtp::AudioFrames::new(crate::rtp::FrameFormat::Eac3);
        let mut got = Vec::new();
        for packet in out.iter() {
            let packet = RtpPacket::parse(packet).expect("our packet parses");
            assert!(packet.payload.len() <= max_payload);
            for frame in depacketizer.push(&packet).expect("our frames depacketize") {
                got.extend_from_slice(frame);
            }
        }
        assert_eq!(got, frames.concat(), "E-AC-3 frames changed in the round trip");
    } else {
        assert!(frames.iter().any(|n| n.len() > 255 * (max_payload - 2)));
    }
    // Arbitrary bytes as received RTP never panic either depacketizer.
    if let Ok(packet) = RtpPacket::parse(rest) {
        let _ = depacketizer.push(&packet);
        let _ = AacAccessUnits::parse(&packet).map(|aus| aus.count());
    }
}

/// The credentials parsers never panic, and split at every byte they keep their meaning: a
/// query `A&B` gives each parameter's first value (A's before B's), and `Basic` of `user:pass`
/// gives `pass` back whatever the bytes; `Digest` parameters holding any split of the bytes
/// read back as written.
pub fn access_credentials(data: &[u8]) {
    use crate::http::credentials::{basic, credential, digest, param, DigestCredentials};
    let text = String::from_utf8_lossy(data);
    let _ = credential(&text);
    let _ = basic(&text);
    let _ = digest(&text);
    for name in ["sig", "exp", "jwt", ""] {
        let _ = param(&text, name);
    }
    for i in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
        let (a, b) = text.split_at(i);
        for name in ["sig", "exp", "jwt"] {
            let joined = param(&format!("{a}&{b}"), name);
            assert_eq!(joined, param(a, name).or_else(|| param(b, name)), "{name} in {a:?} & {b:?}");
        }
        if !a.contains(':') && !b.is_empty() {
            use base64::Engine as _;
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{a}:{b}"));
            assert_eq!(credential(&format!("Basic {basic}")).as_deref(), Some(b), "Basic {a:?}:{b:?}");
        }
        let d = DigestCredentials {
            username: a.into(),
            realm: b.into(),
            nonce: b.into(),
            uri: a.into(),
            response: b.into(),
            cnonce: Some(a.into()),
            ..Default::default()
        };
        assert_eq!(digest(&d.header()), Some(d), "Digest of {a:?} | {b:?}");
    }
}

/// What a client reading `chunks` as successive reads of one connection makes of the HTTP
/// response in them, given unconsumed bytes again with the next read: how it ended (the bytes
/// the response took), its status, body bytes, the kept body and head.
fn read_http_response(
    head_request: bool,
    chunks: &[&[u8]],
) -> (Result<usize, crate::client::ResponseError>, u16, u64, Vec<u8>, Option<crate::client::ResponseHead>) {
    use crate::client::{Progress, ResponseReader};
    let mut reader = ResponseReader::keeping_head();
    reader.start_keeping_body(head_request, 1 << 12);
    let (mut consumed, mut pending) = (0, Vec::new());
    let mut end = None;
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        match reader.feed(&pending) {
            Ok(Progress::Complete { consumed: n }) => {
                end = Some(Ok(consumed + n));
                break;
            }
            Ok(Progress::NeedMore { consumed: n }) => {
                assert!(n <= pending.len(), "consumed more than it was given");
                consumed += n;
                pending.drain(..n);
            }
            Err(e) => {
                end = Some(Err(e));
                break;
            }
        }
    }
    let end = end.unwrap_or_else(|| reader.finish().map(|()| consumed + pending.len()));
    let head = reader.head().cloned();
    (end, reader.status(), reader.body_bytes(), reader.take_body(), head)
}

/// The HTTP response reader (the request a `HEAD` when the first byte is odd) reads the rest of
/// `data` as a connection's bytes to the same end, status, head and body whole as split at any
/// point, and never takes or makes more than it was given.
pub fn http_response(data: &[u8]) {
    let Some((&mode, bytes)) = data.split_first() else { return };
    let head_request = mode % 2 == 1;
    let whole = read_http_response(head_request, &[bytes]);
    if let Ok(n) = whole.0 {
        assert!(n <= bytes.len(), "a response longer than its bytes");
    }
    assert!(whole.2 as usize <= bytes.len() && whole.3.len() <= bytes.len(), "more body than bytes");
    let step = (bytes.len() / 64).max(1);
    for split in (0..=bytes.len()).step_by(step) {
        let (a, b) = bytes.split_at(split);
        let split_read = read_http_response(head_request, &[a, b]);
        assert_eq!(split_read.0, whole.0, "split at {split} changed how the response ends");
        assert_eq!(split_read.4, whole.4, "split at {split} changed the head");
        if whole.0.is_ok() {
            assert_eq!(split_read, whole, "split at {split} changed the response");
        }
    }
}

/// What a client reading `chunks` as successive reads of an RTSP connection makes of them:
/// each response (interleaved frames before one skipped whole), then how the stream ended.
fn read_rtsp_responses(chunks: &[&[u8]]) -> (Vec<String>, Option<crate::client::rtsp::RtspResponseError>) {
    use crate::client::rtsp::{read_response, Interleaved};
    let (mut pending, mut seen) = (Vec::new(), Vec::new());
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        loop {
            if pending.first() == Some(&b'$') {
                match Interleaved::parse(&pending) {
                    Ok(Some((item, n))) => {
                        seen.push(format!("{item:?}"));
                        pending.drain(..n);
                        continue;
                    }
                    _ => break,
                }
            }
            match read_response(&pending) {
                Ok(Some((response, n))) => {
                    assert!(n > 0 && n <= pending.len(), "a response outside its bytes");
                    seen.push(format!("{response:?}"));
                    pending.drain(..n);
                }
                Ok(None) => break,
                Err(e) => return (seen, Some(e)),
            }
        }
    }
    (seen, None)
}

/// RTSP responses and the interleaved frames between them read the same from `data` whole as
/// split at any point, and a response never takes more bytes than it was given.
pub fn rtsp_response(data: &[u8]) {
    let whole = read_rtsp_responses(&[data]);
    let step = (data.len() / 64).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        assert_eq!(read_rtsp_responses(&[a, b]), whole, "split at {split} changed what was read");
    }
}
