//! A viewer's RTSP exchange, in sluice's own code: DESCRIBE (the SDP's video and audio media,
//! their control URLs, encodings and clock rates), SETUP of each over UDP (to the viewer's own
//! client ports) or TCP interleaved (channels 0–1 video, 2–3 audio), PLAY (with the `RTP-Info`
//! sequence numbers and timestamps the counting starts from), keep-alives and TEARDOWN. One
//! request at a time, as players do; responses are read into one buffer that the TCP receive
//! loop then keeps reading, so the media that follows a PLAY response in the same read is kept.
//!
//! It owns the control connection. It does not own the RTP sockets (see the receiver) nor the
//! counting.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::wire::content_length;

/// Why an exchange failed; the viewer turns it into its failure kind.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Connecting failed.
    #[error("cannot connect: {0}")]
    Connect(std::io::Error),
    /// The connection failed or closed.
    #[error("connection lost: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered with an error status.
    #[error("{method} answered {status} {reason}")]
    Status {
        /// The request's method.
        method: &'static str,
        /// The status code.
        status: u16,
        /// The reason phrase.
        reason: String,
    },
    /// The server answered something that is not an RTSP response, or no usable SDP.
    #[error("malformed response: {0}")]
    Malformed(String),
}

/// A response's status, headers and body.
#[derive(Debug)]
pub(crate) struct Response {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One medium of the presentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Medium {
    /// `video` or `audio`.
    pub kind: String,
    /// Encoding name from `a=rtpmap` (e.g. `H264`, `mpeg4-generic`).
    pub encoding: String,
    /// The URL SETUP names.
    pub control: String,
}

/// `RTP-Info` for one stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct RtpInfo {
    pub seq: Option<u16>,
    pub rtptime: Option<u32>,
}

/// An RTSP control connection.
pub(crate) struct Control {
    stream: TcpStream,
    /// Bytes read and not yet consumed.
    pub buffer: Vec<u8>,
    cseq: u32,
    pub session: Option<String>,
    user_agent: String,
}

impl Control {
    pub(crate) async fn connect(addr: std::net::SocketAddr) -> Result<Control, ClientError> {
        let stream = TcpStream::connect(addr).await.map_err(ClientError::Connect)?;
        let _ = stream.set_nodelay(true);
        Ok(Control {
            stream,
            buffer: Vec::with_capacity(64 * 1024),
            cseq: 0,
            session: None,
            user_agent: concat!("sluice-load/", env!("CARGO_PKG_VERSION")).to_string(),
        })
    }

    /// Sends a request without waiting for its response (keep-alives during TCP playback,
    /// whose responses the receive loop skips).
    pub(crate) async fn send(
        &mut self,
        method: &str,
        url: &str,
        extra: &[(&str, &str)],
    ) -> std::io::Result<()> {
        self.cseq += 1;
        let mut text =
            format!("{method} {url} RTSP/1.0\r\nCSeq: {}\r\nUser-Agent: {}\r\n", self.cseq, self.user_agent);
        if let Some(s) = &self.session {
            text.push_str(&format!("Session: {s}\r\n"));
        }
        for (n, v) in extra {
            text.push_str(&format!("{n}: {v}\r\n"));
        }
        text.push_str("\r\n");
        self.stream.write_all(text.as_bytes()).await
    }

    /// Sends a request and reads its response; an error status is an error.
    pub(crate) async fn request(
        &mut self,
        method: &'static str,
        url: &str,
        extra: &[(&str, &str)],
    ) -> Result<Response, ClientError> {
        self.send(method, url, extra).await?;
        let response = self.read_response().await?;
        if !(200..300).contains(&response.status) {
            return Err(ClientError::Status { method, status: response.status, reason: response.reason });
        }
        Ok(response)
    }

    /// Reads more bytes into the buffer (a large read: the TCP receive loop uses it too).
    pub(crate) async fn fill(&mut self) -> std::io::Result<usize> {
        if self.buffer.capacity() - self.buffer.len() < 16 * 1024 {
            self.buffer.reserve(64 * 1024);
        }
        let n = self.stream.read_buf(&mut self.buffer).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(n)
    }

    async fn read_response(&mut self) -> Result<Response, ClientError> {
        loop {
            // Interleaved data before the response (a server that starts sending early) is skipped.
            while let Some(b'$') = self.buffer.first() {
                match super::wire::Interleaved::parse(&self.buffer) {
                    Ok(Some((_, n))) => drop(self.buffer.drain(..n)),
                    _ => break,
                }
            }
            if let Some(head_end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = &self.buffer[..head_end];
                let body_len = content_length(head)
                    .ok_or_else(|| ClientError::Malformed("bad Content-Length".into()))?;
                if self.buffer.len() >= head_end + 4 + body_len {
                    let response = parse_head(head)?;
                    let body = self.buffer[head_end + 4..head_end + 4 + body_len].to_vec();
                    self.buffer.drain(..head_end + 4 + body_len);
                    return Ok(Response { body, ..response });
                }
            } else if self.buffer.len() > 64 * 1024 {
                return Err(ClientError::Malformed("no response head within 64 KiB".into()));
            }
            self.fill().await?;
        }
    }
}

fn parse_head(head: &[u8]) -> Result<Response, ClientError> {
    let text = std::str::from_utf8(head).map_err(|_| ClientError::Malformed("not UTF-8".into()))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.splitn(3, ' ');
    let (Some(version), Some(code)) = (parts.next(), parts.next()) else {
        return Err(ClientError::Malformed(status_line.chars().take(80).collect()));
    };
    let status = code.parse().ok().filter(|_| version.starts_with("RTSP/"));
    let status = status.ok_or_else(|| ClientError::Malformed(status_line.chars().take(80).collect()))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    Ok(Response { status, reason: parts.next().unwrap_or_default().to_string(), headers, body: Vec::new() })
}

/// The media of an SDP, with control URLs resolved against `base` (Content-Base, else the
/// request URL) the way players do: appended after a `/`.
pub(crate) fn parse_sdp(sdp: &str, base: &str) -> Vec<Medium> {
    let resolve = |control: &str| {
        if control.starts_with("rtsp://") || control.starts_with("rtsps://") {
            control.to_string()
        } else if control == "*" || control.is_empty() {
            base.to_string()
        } else if base.ends_with('/') {
            format!("{base}{control}")
        } else {
            format!("{base}/{control}")
        }
    };
    let mut media: Vec<(Medium, Option<String>)> = Vec::new();
    for line in sdp.lines().map(str::trim) {
        if let Some(m) = line.strip_prefix("m=") {
            let kind = m.split_whitespace().next().unwrap_or_default().to_string();
            media.push((Medium { kind, encoding: String::new(), control: String::new() }, None));
        } else if let Some((medium, control)) = media.last_mut() {
            if let Some(c) = line.strip_prefix("a=control:") {
                *control = Some(c.trim().to_string());
            } else if let Some(map) = line.strip_prefix("a=rtpmap:") {
                let encoding = map.split_whitespace().nth(1).unwrap_or_default();
                medium.encoding = encoding.split('/').next().unwrap_or_default().to_string();
            }
        }
    }
    media
        .into_iter()
        .map(|(mut m, control)| {
            m.control = resolve(control.as_deref().unwrap_or("*"));
            m
        })
        .collect()
}

/// The `RTP-Info` entry of the stream set up as `control` (matched by URL, else by position).
pub(crate) fn rtp_info(header: Option<&str>, control: &str, position: usize) -> RtpInfo {
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

/// The session id of a `Session` header (without `;timeout=`) and its timeout.
pub(crate) fn session_id(header: &str) -> (String, Option<Duration>) {
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

    #[test]
    fn sdp_media_and_their_control_urls() {
        let sdp = "v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=x\r\na=control:*\r\nm=video 0 RTP/AVP 96\r\n\
                   a=rtpmap:96 H264/90000\r\na=control:trackID=0\r\nm=audio 0 RTP/AVP 97\r\n\
                   a=rtpmap:97 mpeg4-generic/48000/2\r\na=control:rtsp://h/x.mp4/trackID=1\r\n";
        let media = parse_sdp(sdp, "rtsp://h/x.mp4/");
        assert_eq!(media.len(), 2);
        assert_eq!((media[0].kind.as_str(), media[0].encoding.as_str()), ("video", "H264"));
        assert_eq!(media[0].control, "rtsp://h/x.mp4/trackID=0");
        assert_eq!(
            (media[1].encoding.as_str(), media[1].control.as_str()),
            ("mpeg4-generic", "rtsp://h/x.mp4/trackID=1")
        );
        assert_eq!(parse_sdp("m=video 0 RTP/AVP 96\n", "rtsp://h/x")[0].control, "rtsp://h/x");
        assert_eq!(
            parse_sdp("m=video 0 RTP/AVP 96\na=control:stream=0\n", "rtsp://h/x")[0].control,
            "rtsp://h/x/stream=0"
        );
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

    #[test]
    fn response_heads() {
        let r = parse_head(b"RTSP/1.0 454 Session Not Found\r\nCSeq: 3\r\nSession: x").unwrap();
        assert_eq!((r.status, r.reason.as_str(), r.header("session")), (454, "Session Not Found", Some("x")));
        assert!(parse_head(b"HTTP/1.1 200 OK").is_err());
        assert!(parse_head(b"garbage").is_err());
    }
}
