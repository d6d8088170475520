//! Reading RTSP requests from a connection's received bytes, sans-I/O.
//!
//! This module owns framing: where a request ends (head up to the blank line, then
//! `Content-Length` bytes of body), the limits on both, and recognising the interleaved binary
//! frames (`$`, channel, 16-bit length, data; RFC 2326 §10.12) that a client using RTP over TCP
//! sends on the same connection (its RTCP receiver reports). Parsing the head itself is
//! `rtsp-types`'. Like retina's `rtsp/parse.rs` it is a pure function of the bytes buffered so
//! far: the caller appends what it reads, calls [`read_message`], drops `consumed` bytes on a
//! result, and waits for more on [`Message::NeedMore`]. So the answer does not depend on how the
//! bytes were split across reads, which the `rtsp_request` fuzz target checks.

use rtsp_types::{ParseError, Request, Version};

use super::RtspError;

/// Size limits of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest head (request line and headers, with any leading blank lines). RTSP heads are a
    /// few hundred bytes; 8 KiB leaves room for long URLs and proxies' headers.
    pub max_head: usize,
    /// Longest body. Clients send bodies only with GET_PARAMETER/SET_PARAMETER, a few bytes.
    pub max_body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_head: 8 * 1024, max_body: 16 * 1024 }
    }
}

/// What the buffered bytes start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    /// A whole request, which took the first `consumed` bytes of the buffer.
    Complete(Request<Vec<u8>>, usize),
    /// A whole interleaved binary frame on `channel`, which took the first `consumed` bytes.
    Interleaved {
        /// The interleaved channel (from the `Transport` header's `interleaved=`).
        channel: u8,
        /// The frame's data (an RTP or RTCP packet).
        payload: &'a [u8],
        /// Bytes of the buffer the frame took, its 4-byte header included.
        consumed: usize,
    },
    /// The buffer holds the start of a message only: read more, then call again with all of it.
    NeedMore,
}

/// Reads the first message from `buf`.
///
/// Leading empty lines are skipped (RFC 2326 §15.1 lets clients send CRLF between requests as a
/// keep-alive) and count towards the head limit. An error means the request cannot be framed;
/// the caller answers with [`RtspError::status`] and closes the connection.
pub fn read_message<'a>(buf: &'a [u8], limits: &Limits) -> Result<Message<'a>, RtspError> {
    let mut start = 0;
    loop {
        match &buf[start..] {
            [b'\r', b'\n', ..] => start += 2,
            [b'\n', ..] => start += 1,
            [] | [b'\r'] => return need_more(buf, limits),
            _ => break,
        }
        if start > limits.max_head {
            return Err(RtspError::HeadTooLarge { limit: limits.max_head });
        }
    }
    if buf[start] == b'$' {
        return Ok(match super::read_interleaved(&buf[start..]) {
            Some((channel, payload, len)) => Message::Interleaved { channel, payload, consumed: start + len },
            None => Message::NeedMore,
        });
    }
    // The head ends at the first blank line, which must lie within the limit.
    let window = &buf[..buf.len().min(limits.max_head)];
    let Some(head_end) = window[start..].windows(4).position(|w| w == b"\r\n\r\n").map(|p| start + p + 4)
    else {
        return need_more(buf, limits);
    };
    if buf[start..].starts_with(b"RTSP/") {
        return Err(RtspError::NotARequest);
    }
    // Parse the head alone first: with a body, rtsp-types answers Incomplete with the body's
    // length, which is checked against the limit before waiting for (or buffering) that much.
    let end = match parse_request(&buf[start..head_end])? {
        Ok(request) => return Ok(Message::Complete(request, head_end)),
        Err(body_len) => {
            if body_len > limits.max_body {
                return Err(RtspError::BodyTooLarge { limit: limits.max_body });
            }
            head_end + body_len
        }
    };
    if buf.len() < end {
        return Ok(Message::NeedMore);
    }
    match parse_request(&buf[start..end])? {
        Ok(request) => Ok(Message::Complete(request, end)),
        Err(_) => Err(RtspError::Malformed("body length")),
    }
}

/// `NeedMore`, unless the buffer is already past the head limit without a whole head.
fn need_more<'a>(buf: &[u8], limits: &Limits) -> Result<Message<'a>, RtspError> {
    if buf.len() >= limits.max_head {
        Err(RtspError::HeadTooLarge { limit: limits.max_head })
    } else {
        Ok(Message::NeedMore)
    }
}

/// Parses exactly one message from `bytes`: the request, or `Err(n)` when `n` more body bytes
/// are needed.
fn parse_request(bytes: &[u8]) -> Result<Result<Request<Vec<u8>>, usize>, RtspError> {
    match rtsp_types::Message::<Vec<u8>>::parse(bytes) {
        Ok((rtsp_types::Message::Request(request), consumed)) if consumed == bytes.len() => {
            if request.version() != Version::V1_0 {
                return Err(RtspError::UnsupportedVersion);
            }
            Ok(Ok(request))
        }
        Ok((rtsp_types::Message::Request(_), _)) => Err(RtspError::Malformed("request length")),
        Ok(_) => Err(RtspError::NotARequest),
        Err(ParseError::Incomplete(Some(n))) => Ok(Err(n.get())),
        Err(ParseError::Incomplete(None)) | Err(ParseError::Error) => {
            Err(RtspError::Malformed("request head"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtsp_types::Method;

    fn read(buf: &[u8]) -> Result<Message<'_>, RtspError> {
        read_message(buf, &Limits { max_head: 256, max_body: 16 })
    }

    fn complete(buf: &[u8]) -> (Request<Vec<u8>>, usize) {
        match read(buf) {
            Ok(Message::Complete(r, n)) => (r, n),
            other => panic!("{other:?}"),
        }
    }

    const OPTIONS: &[u8] = b"OPTIONS rtsp://127.0.0.1:8554/a.mp4 RTSP/1.0\r\nCSeq: 1\r\n\r\n";

    #[test]
    fn a_request_and_what_follows() {
        let mut buf = OPTIONS.to_vec();
        buf.extend_from_slice(b"DESCRIBE");
        let (r, n) = complete(&buf);
        assert_eq!(n, OPTIONS.len());
        assert_eq!(r.method(), Method::Options);
        assert_eq!(r.request_uri().unwrap().path(), "/a.mp4");
        assert_eq!(r.header(&rtsp_types::headers::CSEQ).unwrap().as_str(), "1");
        // Every proper prefix needs more.
        for end in 0..OPTIONS.len() {
            assert_eq!(read(&OPTIONS[..end]), Ok(Message::NeedMore), "prefix of {end}");
        }
    }

    #[test]
    fn leading_blank_lines_are_skipped() {
        let mut buf = b"\r\n\r\n\n".to_vec();
        buf.extend_from_slice(OPTIONS);
        let (_, n) = complete(&buf);
        assert_eq!(n, buf.len());
        assert_eq!(read(b"\r\n\r"), Ok(Message::NeedMore));
    }

    #[test]
    fn bodies_by_content_length() {
        let req = b"SET_PARAMETER rtsp://h/a RTSP/1.0\r\nCSeq: 2\r\nContent-Length: 5\r\n\r\nhello";
        let (r, n) = complete(req);
        assert_eq!((n, r.body().as_slice()), (req.len(), &b"hello"[..]));
        assert_eq!(read(&req[..req.len() - 1]), Ok(Message::NeedMore));
        let big = b"SET_PARAMETER rtsp://h/a RTSP/1.0\r\nCSeq: 2\r\nContent-Length: 17\r\n\r\n";
        assert_eq!(read(big), Err(RtspError::BodyTooLarge { limit: 16 }));
    }

    #[test]
    fn interleaved_frames() {
        let frame = [b'$', 1, 0, 3, 0xaa, 0xbb, 0xcc, b'O'];
        assert_eq!(
            read(&frame),
            Ok(Message::Interleaved { channel: 1, payload: &[0xaa, 0xbb, 0xcc], consumed: 7 })
        );
        for end in 0..7 {
            assert_eq!(read(&frame[..end]), Ok(Message::NeedMore));
        }
        assert_eq!(
            read(b"$\x00\x00\x00"),
            Ok(Message::Interleaved { channel: 0, payload: &[], consumed: 4 })
        );
    }

    #[test]
    fn malformed_and_oversized() {
        assert_eq!(read(b"GET\r\n\r\n"), Err(RtspError::Malformed("request head")));
        assert_eq!(read(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), Err(RtspError::Malformed("request head")));
        assert_eq!(read(b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n\r\n"), Err(RtspError::NotARequest));
        assert_eq!(read(b"OPTIONS * RTSP/2.0\r\nCSeq: 1\r\n\r\n"), Err(RtspError::UnsupportedVersion));
        assert_eq!(
            read(b"OPTIONS * RTSP/1.0\r\nContent-Length: x\r\n\r\n"),
            Err(RtspError::Malformed("request head"))
        );
        let long = [b'A'; 256];
        assert_eq!(read(&long), Err(RtspError::HeadTooLarge { limit: 256 }));
        assert_eq!(read(&long[..255]), Ok(Message::NeedMore));
        let blank = [b'\n'; 300];
        assert_eq!(read(&blank), Err(RtspError::HeadTooLarge { limit: 256 }));
    }

    #[test]
    fn methods_a_player_sends() {
        for m in ["DESCRIBE", "SETUP", "PLAY", "PAUSE", "TEARDOWN", "GET_PARAMETER"] {
            let req = format!("{m} rtsp://127.0.0.1/a.mp4 RTSP/1.0\r\nCSeq: 3\r\nSession: abc\r\n\r\n");
            let (r, _) = complete(req.as_bytes());
            assert_eq!(<&str>::from(r.method()), m);
        }
    }
}
