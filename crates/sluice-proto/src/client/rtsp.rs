//! Reading what an RTSP server sends a client, sans-I/O: responses (status line, header fields,
//! a body by `Content-Length`; [`read_response`]) and, on a connection carrying RTP over TCP, the
//! interleaved `$` frames mixed with them ([`Interleaved`]). The `$` frame layout is read by
//! [`crate::rtsp::read_interleaved`], the same function the server reads a client's frames with.
//! Each function is a pure function of the bytes buffered so far: the answer does not depend on
//! how they were split across reads (the `rtsp_response` fuzz target checks it).
//!
//! It owns the framing, the head's fields and the headers a player reads (`Session`, `RTP-Info`). It does not own the exchange (CSeq, sessions,
//! keep-alives): the load generator's viewer does, nor what a header's value means.

use std::time::Duration;

use crate::rtsp::read_interleaved;

/// Longest response head looked for; more bytes without one is not an RTSP server.
pub const MAX_RESPONSE_HEAD: usize = 64 * 1024;

/// Longest message skipped between interleaved frames before the stream counts as malformed.
const MAX_SKIPPED_HEAD: usize = 16 * 1024;

/// Largest `Content-Length` accepted.
const MAX_BODY: usize = 1 << 20;

/// An RTSP response: status, header fields and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtspResponse {
    /// The status code.
    pub status: u16,
    /// The reason phrase.
    pub reason: String,
    /// Header fields in order, names as written, values trimmed.
    pub headers: Vec<(String, String)>,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl RtspResponse {
    /// The first value of header `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Why the bytes are not an RTSP response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtspResponseError {
    /// The `Content-Length` cannot be read, or is larger than 1 MiB.
    #[error("bad Content-Length")]
    BadContentLength,
    /// No blank line ends the head within [`MAX_RESPONSE_HEAD`] bytes.
    #[error("no response head within 64 KiB")]
    HeadTooLarge,
    /// The head is not UTF-8.
    #[error("not UTF-8")]
    NotUtf8,
    /// The status line is not `RTSP/<version> <code> ...`; the line's first 80 characters.
    #[error("{0}")]
    StatusLine(String),
}

/// Reads the response at the start of `buffer`: `Ok(Some((response, length)))`, or `Ok(None)`
/// when more bytes are needed. Interleaved frames before it are the caller's to skip.
pub fn read_response(buffer: &[u8]) -> Result<Option<(RtspResponse, usize)>, RtspResponseError> {
    let Some(head_end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buffer.len() > MAX_RESPONSE_HEAD {
            Err(RtspResponseError::HeadTooLarge)
        } else {
            Ok(None)
        };
    };
    let head = &buffer[..head_end];
    let body_len = content_length(head).ok_or(RtspResponseError::BadContentLength)?;
    let end = head_end + 4 + body_len;
    if buffer.len() < end {
        return Ok(None);
    }
    let response = parse_head(head)?;
    Ok(Some((RtspResponse { body: buffer[head_end + 4..end].to_vec(), ..response }, end)))
}

/// The status line and header fields of a response head (without its blank line).
pub fn parse_head(head: &[u8]) -> Result<RtspResponse, RtspResponseError> {
    let text = std::str::from_utf8(head).map_err(|_| RtspResponseError::NotUtf8)?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let bad_line = || RtspResponseError::StatusLine(status_line.chars().take(80).collect());
    let mut parts = status_line.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else { return Err(bad_line()) };
    let status = code.parse().ok().filter(|_| version.starts_with("RTSP/")).ok_or_else(bad_line)?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(RtspResponse {
        status,
        reason: parts.next().unwrap_or_default().to_string(),
        headers,
        body: Vec::new(),
    })
}

/// The `Content-Length` of an RTSP message head (0 when absent; `None` when unreadable or
/// larger than 1 MiB).
pub fn content_length(head: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(head).ok()?;
    for line in text.split("\r\n") {
        if let Some((name, value)) = line.split_once(':') {
            if name.trim().eq_ignore_ascii_case("content-length") {
                return value.trim().parse().ok().filter(|&n: &usize| n <= MAX_BODY);
            }
        }
    }
    Some(0)
}

/// One item read from an RTSP connection that carries interleaved RTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interleaved<'a> {
    /// A `$` frame: its channel and payload (an RTP or RTCP packet).
    Frame {
        /// The interleaved channel (SETUP's `interleaved=`).
        channel: u8,
        /// The packet.
        data: &'a [u8],
    },
    /// An RTSP message (a response to a keep-alive, a request from the server), skipped whole.
    Message,
}

impl<'a> Interleaved<'a> {
    /// Reads the item at the start of `buffer`: `Ok(Some((item, length)))`, `Ok(None)` when more
    /// bytes are needed, `Err(())` when the bytes are neither a frame nor an RTSP message.
    #[allow(clippy::result_unit_err)]
    pub fn parse(buffer: &'a [u8]) -> Result<Option<(Interleaved<'a>, usize)>, ()> {
        match buffer {
            [] => Ok(None),
            [b'$', ..] => {
                Ok(read_interleaved(buffer)
                    .map(|(channel, data, n)| (Interleaved::Frame { channel, data }, n)))
            }
            [b'R' | b'G' | b'S' | b'O' | b'A' | b'T' | b'P', ..] => {
                let Some(head_end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") else {
                    return if buffer.len() > MAX_SKIPPED_HEAD { Err(()) } else { Ok(None) };
                };
                let body = content_length(&buffer[..head_end]).ok_or(())?;
                let total = head_end + 4 + body;
                Ok((buffer.len() >= total).then_some((Interleaved::Message, total)))
            }
            _ => Err(()),
        }
    }
}

/// `RTP-Info` for one stream (RFC 2326 §12.33): where its packets resume after a PLAY.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RtpInfo {
    /// Sequence number of the first packet.
    pub seq: Option<u16>,
    /// RTP timestamp of the first packet.
    pub rtptime: Option<u32>,
}

/// The `RTP-Info` entry of the stream set up as `control` (matched by URL, else by position).
pub fn rtp_info(header: Option<&str>, control: &str, position: usize) -> RtpInfo {
    let Some(header) = header else { return RtpInfo::default() };
    let mut entries: Vec<RtpInfo> = Vec::new();
    let mut urls = Vec::new();
    for entry in header.split(',') {
        let mut info = RtpInfo::default();
        let mut url = "";
        for field in entry.split(';').map(str::trim) {
            match field.split_once('=') {
                Some(("url", v)) => url = v,
                Some(("seq", v)) => info.seq = v.trim().parse().ok(),
                Some(("rtptime", v)) => info.rtptime = v.trim().parse().ok(),
                _ => {}
            }
        }
        urls.push(url.to_string());
        entries.push(info);
    }
    let by_url = urls.iter().position(|u| !u.is_empty() && (u == control || control.ends_with(u.as_str())));
    by_url.or((position < entries.len()).then_some(position)).map_or_else(RtpInfo::default, |i| entries[i])
}

/// The session id of a response's `Session` header (without `;timeout=`) and its timeout.
pub fn session_id(header: &str) -> (String, Option<Duration>) {
    let mut parts = header.split(';');
    let id = parts.next().unwrap_or_default().trim().to_string();
    let timeout = parts
        .filter_map(|p| p.trim().strip_prefix("timeout="))
        .find_map(|t| t.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    (id, timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAY: &[u8] = b"RTSP/1.0 200 OK\r\nCSeq: 4\r\nSession: abc;timeout=60\r\n\
        RTP-Info: url=rtsp://h/a/trackID=0;seq=1;rtptime=2\r\nContent-Length: 3\r\n\r\nsdpRTSP";

    #[test]
    fn a_response_in_any_split() {
        let whole = PLAY.len() - 4;
        for cut in 0..whole {
            assert_eq!(read_response(&PLAY[..cut]), Ok(None), "prefix of {cut}");
        }
        let (r, n) = read_response(PLAY).unwrap().unwrap();
        assert_eq!(n, whole);
        assert_eq!((r.status, r.reason.as_str(), r.body.as_slice()), (200, "OK", &b"sdp"[..]));
        assert_eq!(r.header("session"), Some("abc;timeout=60"));
        assert_eq!(r.header("cseq"), Some("4"));
    }

    #[test]
    fn response_heads() {
        let r = parse_head(b"RTSP/1.0 454 Session Not Found\r\nCSeq: 3\r\nSession: x").unwrap();
        assert_eq!((r.status, r.reason.as_str(), r.header("session")), (454, "Session Not Found", Some("x")));
        assert!(parse_head(b"HTTP/1.1 200 OK").is_err());
        assert!(parse_head(b"garbage").is_err());
        assert_eq!(parse_head(&[0xff, 0xfe]), Err(RtspResponseError::NotUtf8));
    }

    #[test]
    fn limits_and_bad_lengths() {
        let bad = b"RTSP/1.0 200 OK\r\nContent-Length: x\r\n\r\n";
        assert_eq!(read_response(bad), Err(RtspResponseError::BadContentLength));
        let huge = b"RTSP/1.0 200 OK\r\nContent-Length: 2000000\r\n\r\n";
        assert_eq!(read_response(huge), Err(RtspResponseError::BadContentLength));
        let endless = vec![b'a'; MAX_RESPONSE_HEAD + 1];
        assert_eq!(read_response(&endless), Err(RtspResponseError::HeadTooLarge));
        assert_eq!(read_response(&endless[..MAX_RESPONSE_HEAD]), Ok(None));
    }

    #[test]
    fn interleaved_frames_and_messages_are_told_apart() {
        let mut stream = vec![b'$', 2, 0, 3, 7, 8, 9];
        stream.extend_from_slice(b"RTSP/1.0 200 OK\r\nCSeq: 9\r\nContent-Length: 2\r\n\r\nok");
        stream.extend_from_slice(&[b'$', 0, 0, 1, 5]);
        let (item, n) = Interleaved::parse(&stream).unwrap().unwrap();
        assert_eq!((item, n), (Interleaved::Frame { channel: 2, data: &[7, 8, 9] }, 7));
        let (item, m) = Interleaved::parse(&stream[n..]).unwrap().unwrap();
        assert_eq!(item, Interleaved::Message);
        assert_eq!(Interleaved::parse(&stream[n + m..]).unwrap().unwrap().1, 5);
        for cut in 0..n {
            assert_eq!(Interleaved::parse(&stream[..cut]), Ok(None), "{cut}");
        }
        for cut in n..n + m {
            assert_eq!(Interleaved::parse(&stream[n..cut]), Ok(None), "{cut}");
        }
        assert_eq!(Interleaved::parse(b"\x00garbage"), Err(()));
        assert_eq!(Interleaved::parse(&[b'R'; MAX_SKIPPED_HEAD + 1]), Err(()));
    }

    #[test]
    fn rtp_info_by_url_or_position() {
        let h =
            "url=rtsp://h/x.mp4/trackID=0;seq=100;rtptime=9000,url=rtsp://h/x.mp4/trackID=1;seq=7;rtptime=1";
        assert_eq!(
            rtp_info(Some(h), "rtsp://h/x.mp4/trackID=1", 0),
            RtpInfo { seq: Some(7), rtptime: Some(1) }
        );
        assert_eq!(rtp_info(Some(h), "other", 0), RtpInfo { seq: Some(100), rtptime: Some(9000) });
        assert_eq!(rtp_info(Some("url=a;seq=5"), "x", 3), RtpInfo::default());
        assert_eq!(rtp_info(None, "x", 0), RtpInfo::default());
    }

    #[test]
    fn session_ids_and_timeouts() {
        assert_eq!(session_id("abc;timeout=60"), ("abc".to_string(), Some(Duration::from_secs(60))));
        assert_eq!(session_id(" 12 "), ("12".to_string(), None));
    }
}
