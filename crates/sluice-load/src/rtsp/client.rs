//! A viewer's RTSP exchange, over sluice-proto's client side: DESCRIBE (the SDP's video and audio media,
//! their control URLs, encodings and clock rates), SETUP of each over UDP (to the viewer's own
//! client ports) or TCP interleaved (channels 0–1 video, 2–3 audio), PLAY (with the `RTP-Info`
//! sequence numbers and timestamps the counting starts from), keep-alives and TEARDOWN. One
//! request at a time, as players do; responses are read into one buffer that the TCP receive
//! loop then keeps reading, so the media that follows a PLAY response in the same read is kept.
//!
//! It owns the control connection. It does not own the RTP sockets (see the receiver) nor the
//! counting.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use sluice_proto::client::rtsp::{read_response, Interleaved};
pub(crate) use sluice_proto::client::rtsp::{rtp_info, session_id, RtpInfo, RtspResponse as Response};
pub(crate) use sluice_proto::client::sdp::Medium;

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
                match Interleaved::parse(&self.buffer) {
                    Ok(Some((_, n))) => drop(self.buffer.drain(..n)),
                    _ => break,
                }
            }
            let read = read_response(&self.buffer).map_err(|e| ClientError::Malformed(e.to_string()))?;
            if let Some((response, n)) = read {
                self.buffer.drain(..n);
                return Ok(response);
            }
            self.fill().await?;
        }
    }
}
