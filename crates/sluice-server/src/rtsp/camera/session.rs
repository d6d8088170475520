//! One pull from a camera, the RTSP client's exchange: `OPTIONS`, `DESCRIBE` (answering a 401
//! with Digest or Basic from the URL's user and password), `SETUP` of each track over TCP
//! interleaved, `PLAY`, then the interleaved RTP into the live stream with a keep-alive
//! (`GET_PARAMETER` when the camera lists it, else `OPTIONS`) within the session timeout, and a
//! `TEARDOWN` at the end. Blocking I/O with timeouts on one connection.
//!
//! It owns the exchange (CSeq, session, credentials, channels). The bytes are read by
//! sluice-proto's client side (`read_response`, `Interleaved`, the SDP's media and their control
//! URLs), the challenge by its credentials parser, the SDP's tracks by sluice-rtsp's
//! `tracks_from_sdp` (what a publisher's `ANNOUNCE` is read with): no second parser. It does not
//! own retries or the path (see [`super`]).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use sluice_proto::client::rtsp::{read_response, session_id, Interleaved, RtspResponse};
use sluice_proto::http::credentials::{challenge, DigestCredentials};
use sluice_rtsp::live::{tracks_from_sdp, AnnouncedTrack};
use sluice_rtsp::LiveStream;

use super::CameraUrl;
use crate::access::users::md5_hex;

/// Why a pull ended.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The server is shutting down.
    #[error("stopped")]
    Stopped,
    /// The camera could not be reached.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, std::io::Error),
    /// The connection failed.
    #[error("connection lost: {0}")]
    Io(#[from] std::io::Error),
    /// The camera closed the connection.
    #[error("the camera closed the connection")]
    Closed,
    /// No answer to a request in time.
    #[error("no answer to {0} within {1:?}")]
    NoAnswer(&'static str, Duration),
    /// The camera answered a request with an error status.
    #[error("{method} answered {status} {reason}")]
    Status {
        /// The request's method.
        method: &'static str,
        /// The status code.
        status: u16,
        /// The reason phrase.
        reason: String,
    },
    /// The camera asks for credentials and the URL has none.
    #[error("the camera asks for credentials (401) and the URL has no user and password")]
    NoCredentials,
    /// What the camera sent cannot be used.
    #[error("{0}")]
    Malformed(String),
    /// The camera's media stopped.
    #[error("no media from the camera for {0:?}")]
    Stalled(Duration),
}

/// How requests are authorised, once the camera has asked.
enum Auth {
    /// `Authorization: Basic …`, the same on every request.
    Basic(String),
    /// RFC 2617 Digest (MD5), computed per request.
    Digest { realm: String, nonce: String, opaque: Option<String>, qop: bool, count: u32 },
}

/// A camera's RTSP connection and session.
pub struct CameraSession {
    control: TcpStream,
    peer: SocketAddr,
    /// Bytes read and not yet consumed.
    buffer: Vec<u8>,
    cseq: u32,
    session: Option<String>,
    credentials: Option<(String, String)>,
    auth: Option<Auth>,
    /// The aggregate URL `PLAY` and `TEARDOWN` name.
    base: String,
    /// Interleaved RTP channel of each track.
    channels: Vec<(u8, usize)>,
    /// Keep-alive request and how often.
    keepalive: (&'static str, Duration),
    io_timeout: Duration,
}

/// How often a blocking read returns to look at the clock and the shutdown.
const READ_TICK: Duration = Duration::from_millis(200);

impl CameraSession {
    /// Connects to the camera and sets up every track of its `DESCRIBE`; returns the session and
    /// the tracks, in the order their RTP is fed. `stop` says when to give up (shutdown).
    pub fn open(
        url: &CameraUrl,
        io_timeout: Duration,
        stop: &dyn Fn() -> bool,
    ) -> Result<(CameraSession, Vec<AnnouncedTrack>), PullError> {
        let connect = |e| PullError::Connect(url.authority.clone(), e);
        let addrs: Vec<SocketAddr> = url.authority.to_socket_addrs().map_err(connect)?.collect();
        let mut last = std::io::Error::from(std::io::ErrorKind::AddrNotAvailable);
        let mut control = None;
        for addr in addrs {
            match TcpStream::connect_timeout(&addr, io_timeout) {
                Ok(c) => {
                    control = Some(c);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let control = control.ok_or_else(|| connect(last))?;
        let _ = control.set_nodelay(true);
        control.set_read_timeout(Some(READ_TICK))?;
        control.set_write_timeout(Some(io_timeout))?;
        let peer = control.peer_addr()?;
        let mut s = CameraSession {
            control,
            peer,
            buffer: Vec::with_capacity(64 * 1024),
            cseq: 0,
            session: None,
            credentials: url.credentials.clone(),
            auth: None,
            base: url.request.clone(),
            channels: Vec::new(),
            keepalive: ("OPTIONS", Duration::from_secs(30)),
            io_timeout,
        };
        // OPTIONS says whether the camera takes GET_PARAMETER; one that refuses it gets OPTIONS.
        match s.request("OPTIONS", &url.request, &[], stop) {
            Ok(options) => {
                let public = options.header("public").unwrap_or_default();
                if public.split(',').any(|m| m.trim() == "GET_PARAMETER") {
                    s.keepalive.0 = "GET_PARAMETER";
                }
            }
            Err(PullError::Status { .. }) => {}
            Err(e) => return Err(e),
        }
        let describe = s.request("DESCRIBE", &url.request, &[("Accept", "application/sdp")], stop)?;
        let base = describe
            .header("content-base")
            .or_else(|| describe.header("content-location"))
            .unwrap_or(url.request.as_str())
            .to_string();
        let tracks = tracks_from_sdp(&describe.body)
            .map_err(|e| PullError::Malformed(format!("the camera's SDP cannot be taken in: {e}")))?;
        let media = sluice_proto::client::sdp::media(&describe.body, &base);
        if media.len() != tracks.len() {
            return Err(PullError::Malformed("the camera's SDP has media sluice cannot set up".into()));
        }
        s.base = base.trim_end_matches('/').to_string();
        for (track, medium) in media.iter().enumerate() {
            let rtp = (2 * track) as u8;
            let transport = format!("RTP/AVP/TCP;unicast;interleaved={rtp}-{}", rtp + 1);
            let reply = s.request("SETUP", &medium.control, &[("Transport", transport.as_str())], stop)?;
            let given = reply.header("transport").and_then(interleaved_rtp).unwrap_or(rtp);
            s.channels.push((given, track));
            if s.session.is_none() {
                let (id, timeout) = session_id(reply.header("session").unwrap_or_default());
                if id.is_empty() {
                    return Err(PullError::Malformed("SETUP answered without a Session".into()));
                }
                // Half the session's timeout (60 s when not said), as players do.
                let every = timeout.unwrap_or(Duration::from_secs(60)) / 2;
                s.keepalive.1 = every.max(Duration::from_secs(1));
                s.session = Some(id);
            }
        }
        Ok((s, tracks))
    }

    /// The camera's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Starts the media (`PLAY` of the aggregate URL).
    pub fn play(&mut self) -> Result<(), PullError> {
        let base = self.base.clone();
        self.request("PLAY", &base, &[("Range", "npt=0.000-")], &|| false).map(drop)
    }

    /// Feeds the interleaved RTP into `stream` until the connection fails, the media stops for
    /// `stall`, or `stop`; `on_media` is called at each packet fed. Returns why it ended.
    pub fn receive(
        &mut self,
        stream: &LiveStream,
        stall: Duration,
        stop: &dyn Fn() -> bool,
        on_media: &mut dyn FnMut(),
    ) -> PullError {
        let mut last_media = Instant::now();
        let mut last_keepalive = Instant::now();
        loop {
            let mut at = 0;
            loop {
                match Interleaved::parse(&self.buffer[at..]) {
                    Ok(Some((item, n))) => {
                        if let Interleaved::Frame { channel, data } = item {
                            if let Some(&(_, track)) = self.channels.iter().find(|(c, _)| *c == channel) {
                                last_media = Instant::now();
                                stream.push_rtp(track, data, last_media);
                                on_media();
                            }
                        }
                        at += n;
                    }
                    Ok(None) => break,
                    Err(()) => return PullError::Malformed("the camera sent neither RTP nor RTSP".into()),
                }
            }
            self.buffer.drain(..at);
            if stop() {
                return PullError::Stopped;
            }
            if last_media.elapsed() >= stall {
                return PullError::Stalled(stall);
            }
            if last_keepalive.elapsed() >= self.keepalive.1 {
                // Its answer comes among the frames and is skipped there.
                let (method, base) = (self.keepalive.0, self.base.clone());
                if let Err(e) = self.send(method, &base, &[]) {
                    return e;
                }
                last_keepalive = Instant::now();
            }
            if let Err(e) = self.fill() {
                return e;
            }
        }
    }

    /// Ends the session (`TEARDOWN`), without waiting for the answer.
    pub fn teardown(&mut self) {
        if self.session.is_some() {
            let base = self.base.clone();
            let _ = self.send("TEARDOWN", &base, &[]);
        }
    }

    /// Writes a request (with the session and the credentials when there are).
    fn send(&mut self, method: &'static str, url: &str, extra: &[(&str, &str)]) -> Result<(), PullError> {
        self.cseq += 1;
        let mut text = format!(
            "{method} {url} RTSP/1.0\r\nCSeq: {}\r\nUser-Agent: sluice/{}\r\n",
            self.cseq,
            env!("CARGO_PKG_VERSION")
        );
        if let Some(s) = &self.session {
            text.push_str(&format!("Session: {s}\r\n"));
        }
        if let Some(authorization) = self.authorization(method, url) {
            text.push_str(&format!("Authorization: {authorization}\r\n"));
        }
        for (n, v) in extra {
            text.push_str(&format!("{n}: {v}\r\n"));
        }
        text.push_str("\r\n");
        self.control.write_all(text.as_bytes())?;
        Ok(())
    }

    /// Sends a request and reads its answer; a 401 is answered once with the URL's
    /// credentials, another error status is an error.
    fn request(
        &mut self,
        method: &'static str,
        url: &str,
        extra: &[(&str, &str)],
        stop: &dyn Fn() -> bool,
    ) -> Result<RtspResponse, PullError> {
        let mut challenged = false;
        loop {
            self.send(method, url, extra)?;
            let response = self.response(method, stop)?;
            if response.status == 401 && !challenged {
                self.answer_challenge(&response)?;
                challenged = true;
                continue;
            }
            if !(200..300).contains(&response.status) {
                return Err(PullError::Status { method, status: response.status, reason: response.reason });
            }
            return Ok(response);
        }
    }

    /// Takes the credentials the camera's 401 asks for: Digest when offered, else Basic.
    fn answer_challenge(&mut self, response: &RtspResponse) -> Result<(), PullError> {
        let (user, password) = self.credentials.clone().ok_or(PullError::NoCredentials)?;
        let challenges: Vec<(String, Vec<(String, String)>)> = response
            .headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case("www-authenticate"))
            .filter_map(|(_, v)| challenge(v))
            .collect();
        let param = |params: &[(String, String)], name: &str| {
            params.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone())
        };
        if let Some((_, p)) = challenges.iter().find(|(scheme, _)| scheme == "digest") {
            let (Some(realm), Some(nonce)) = (param(p, "realm"), param(p, "nonce")) else {
                return Err(PullError::Malformed("a Digest challenge without realm and nonce".into()));
            };
            let qop = param(p, "qop").is_some_and(|q| q.split(',').any(|q| q.trim() == "auth"));
            self.auth = Some(Auth::Digest { realm, nonce, opaque: param(p, "opaque"), qop, count: 0 });
        } else if challenges.iter().any(|(scheme, _)| scheme == "basic") {
            use base64::Engine as _;
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
            self.auth = Some(Auth::Basic(format!("Basic {token}")));
        } else {
            return Err(PullError::Malformed("a 401 without a Basic or Digest challenge".into()));
        }
        Ok(())
    }

    /// The `Authorization` value of a request, once the camera asked for one.
    fn authorization(&mut self, method: &str, uri: &str) -> Option<String> {
        let (user, password) = self.credentials.as_ref()?;
        match self.auth.as_mut()? {
            Auth::Basic(value) => Some(value.clone()),
            Auth::Digest { realm, nonce, opaque, qop, count } => {
                let ha1 = md5_hex(&format!("{user}:{realm}:{password}"));
                let ha2 = md5_hex(&format!("{method}:{uri}"));
                let mut credentials = DigestCredentials {
                    username: user.clone(),
                    realm: realm.clone(),
                    nonce: nonce.clone(),
                    uri: uri.to_string(),
                    ..DigestCredentials::default()
                };
                if *qop {
                    *count += 1;
                    let (nc, cnonce) =
                        (format!("{count:08x}"), format!("{:016x}", getrandom::u64().unwrap_or(0)));
                    credentials.response = md5_hex(&format!("{ha1}:{nonce}:{nc}:{cnonce}:auth:{ha2}"));
                    (credentials.qop, credentials.nc, credentials.cnonce) =
                        (Some("auth".into()), Some(nc), Some(cnonce));
                } else {
                    credentials.response = md5_hex(&format!("{ha1}:{nonce}:{ha2}"));
                }
                let mut value = credentials.header();
                if let Some(opaque) = opaque {
                    value.push_str(&format!(", opaque=\"{}\"", opaque.replace('"', "")));
                }
                Some(value)
            }
        }
    }

    /// Reads the answer to `method` (interleaved frames before it are skipped).
    fn response(&mut self, method: &'static str, stop: &dyn Fn() -> bool) -> Result<RtspResponse, PullError> {
        let deadline = Instant::now() + self.io_timeout;
        loop {
            while let Some(b'$') = self.buffer.first() {
                match Interleaved::parse(&self.buffer) {
                    Ok(Some((_, n))) => drop(self.buffer.drain(..n)),
                    _ => break,
                }
            }
            let read =
                read_response(&self.buffer).map_err(|e| PullError::Malformed(format!("{method}: {e}")))?;
            if let Some((response, n)) = read {
                self.buffer.drain(..n);
                return Ok(response);
            }
            if stop() {
                return Err(PullError::Stopped);
            }
            if Instant::now() >= deadline {
                return Err(PullError::NoAnswer(method, self.io_timeout));
            }
            self.fill()?;
        }
    }

    /// Reads what has come (waiting at most [`READ_TICK`]).
    fn fill(&mut self) -> Result<(), PullError> {
        let mut chunk = [0u8; 16 * 1024];
        match self.control.read(&mut chunk) {
            Ok(0) => Err(PullError::Closed),
            Ok(n) => {
                self.buffer.extend_from_slice(&chunk[..n]);
                Ok(())
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            Err(e) => Err(PullError::Io(e)),
        }
    }
}

/// The RTP channel of a `Transport` header's `interleaved=a-b`.
fn interleaved_rtp(transport: &str) -> Option<u8> {
    transport
        .split(';')
        .find_map(|p| p.trim().strip_prefix("interleaved="))
        .and_then(|v| v.split('-').next())
        .and_then(|c| c.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interleaved_channel_is_read_from_the_transport() {
        assert_eq!(interleaved_rtp("RTP/AVP/TCP;unicast;interleaved=4-5;ssrc=1"), Some(4));
        assert_eq!(interleaved_rtp("RTP/AVP;unicast;client_port=1-2"), None);
    }
}
