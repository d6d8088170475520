//! A raw RTSP/1.0 client for the integration tests: requests written by hand, responses read with
//! their headers and body, and the interleaved `$` frames (RTP/RTCP over the control connection,
//! RFC 2326 §10.12) that arrive between them, each with its arrival time. Also the small pieces
//! of RTP, RTCP and H.264 payload parsing the tests assert on, and UDP sinks for RTP over UDP.
//!
//! Like the HTTP client in `mod.rs` it talks to loopback only and every wait is bounded.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{
    fmt_response, lossy_prefix, parse_status_head, poll_until, HeaderLines, MessageText, StatusHead,
    IO_TIMEOUT,
};

/// The address in a `listening on rtsp://ADDR/ ...` line, human or JSON.
pub fn parse_rtsp_listen_line(line: &str) -> Option<SocketAddr> {
    let rest = &line[line.find("listening on rtsp://")? + "listening on rtsp://".len()..];
    let end = rest.find(|c: char| c.is_whitespace() || c == '"' || c == '/').unwrap_or(rest.len());
    rest[..end].parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Responses
// ---------------------------------------------------------------------------------------------

/// A parsed RTSP response.
#[derive(Clone)]
pub struct RtspResponse {
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The head exactly as received (status line to blank line).
    pub raw_head: Vec<u8>,
}

impl HeaderLines for RtspResponse {
    fn header_lines(&self) -> &[(String, String)] {
        &self.headers
    }
}

impl MessageText for RtspResponse {
    fn raw_head_bytes(&self) -> &[u8] {
        &self.raw_head
    }

    fn body_bytes(&self) -> &[u8] {
        &self.body
    }
}

impl RtspResponse {
    /// The `CSeq` echoed, if any.
    pub fn cseq(&self) -> Option<u32> {
        self.header("cseq").and_then(|v| v.trim().parse().ok())
    }

    /// The session id of the `Session` header (without `;timeout=`).
    pub fn session_id(&self) -> Option<String> {
        self.header("session").map(|v| v.split(';').next().unwrap_or("").trim().to_string())
    }

    /// The `timeout=` of the `Session` header, seconds.
    pub fn session_timeout(&self) -> Option<u64> {
        param(self.header("session")?, "timeout").and_then(|v| v.parse().ok())
    }

    /// Panics with the whole response when the status is not `status`.
    #[track_caller]
    pub fn expect(&self, status: u16, what: &str) -> &Self {
        assert_eq!(self.status, status, "{what}: expected RTSP {status}, got:\n{self:?}");
        self
    }

    /// Parses a response from the start of `buf`; `Ok(None)` means more bytes are needed.
    pub fn parse(buf: &[u8]) -> Result<Option<(RtspResponse, usize)>, String> {
        let Some(head) = parse_status_head(buf, "RTSP/1.0")? else { return Ok(None) };
        let StatusHead { status, reason, headers, raw_head, .. } = head;
        let mut resp = RtspResponse { status, reason, headers, body: Vec::new(), raw_head };
        let start = resp.raw_head.len();
        let lens = resp.headers_named("content-length");
        if lens.len() > 1 {
            return Err(format!("several Content-Length fields:\n{}", resp.head_text()));
        }
        let len: usize = match lens.first() {
            Some(l) => l.trim().parse().map_err(|_| format!("bad Content-Length:\n{}", resp.head_text()))?,
            None => 0,
        };
        if buf.len() - start < len {
            return Ok(None);
        }
        resp.body = buf[start..start + len].to_vec();
        Ok(Some((resp, start + len)))
    }
}

impl std::fmt::Debug for RtspResponse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fmt_response(f, &self.raw_head, &self.body, 600)
    }
}

/// The value of `name=` among the `;`-separated parameters of a header value.
pub fn param(value: &str, name: &str) -> Option<String> {
    value.split(';').find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
    })
}

/// Whether the `;`-separated parameters of a header value include the bare flag `name`.
pub fn has_flag(value: &str, name: &str) -> bool {
    value.split(';').any(|p| p.trim().eq_ignore_ascii_case(name))
}

/// `a-b` → (a, b).
pub fn pair(v: &str) -> Option<(u16, u16)> {
    let (a, b) = v.split_once('-')?;
    Some((a.trim().parse().ok()?, b.trim().parse().ok()?))
}

/// The start (and end, if any) of a `Range: npt=START-[END]` value, seconds.
pub fn npt_range(v: &str) -> Result<(f64, Option<f64>), String> {
    let rest = v.trim().strip_prefix("npt=").ok_or_else(|| format!("Range {v:?} is not npt"))?;
    let (a, b) = rest.split_once('-').ok_or_else(|| format!("Range {v:?} has no '-'"))?;
    let start = a.trim().parse::<f64>().map_err(|_| format!("Range {v:?}: bad start"))?;
    let end = match b.trim() {
        "" => None,
        e => Some(e.parse::<f64>().map_err(|_| format!("Range {v:?}: bad end"))?),
    };
    Ok((start, end))
}

/// One entry of `RTP-Info`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtpInfo {
    pub url: String,
    pub seq: Option<u16>,
    pub rtptime: Option<u32>,
}

/// Parses `RTP-Info: url=...;seq=...;rtptime=...,url=...`.
pub fn rtp_info(v: &str) -> Result<Vec<RtpInfo>, String> {
    let mut out = Vec::new();
    // Entries are separated by commas; a new entry starts with `url=`.
    let mut entries: Vec<String> = Vec::new();
    for piece in v.split(',') {
        if piece.trim_start().starts_with("url=") || entries.is_empty() {
            entries.push(piece.to_string());
        } else {
            let last = entries.last_mut().unwrap();
            last.push(',');
            last.push_str(piece);
        }
    }
    for e in entries {
        let url = param(&e, "url").ok_or_else(|| format!("RTP-Info entry without url: {e:?}"))?;
        let seq = match param(&e, "seq") {
            Some(s) => Some(s.parse().map_err(|_| format!("RTP-Info: bad seq in {e:?}"))?),
            None => None,
        };
        let rtptime = match param(&e, "rtptime") {
            Some(s) => Some(s.parse().map_err(|_| format!("RTP-Info: bad rtptime in {e:?}"))?),
            None => None,
        };
        out.push(RtpInfo { url, seq, rtptime });
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------------------------------

/// An interleaved binary frame: channel, data, and when it was read.
#[derive(Debug, Clone)]
pub struct Frame {
    pub channel: u8,
    pub payload: Vec<u8>,
    pub at: Instant,
}

/// What the server sent next.
#[derive(Debug)]
pub enum Item {
    Response(RtspResponse),
    Frame(Frame),
}

/// A raw RTSP control connection with a timeout on every operation.
pub struct RtspConn {
    pub stream: TcpStream,
    addr: SocketAddr,
    buf: Vec<u8>,
    eof: bool,
    next_cseq: u32,
    /// Interleaved frames that arrived while a response was awaited, oldest first.
    pub pending: VecDeque<Frame>,
}

impl RtspConn {
    /// Connects (at most 10 s); panics on failure.
    #[track_caller]
    pub fn open(addr: SocketAddr) -> RtspConn {
        assert!(addr.ip().is_loopback(), "tests only talk to loopback, not {addr}");
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
            .unwrap_or_else(|e| panic!("connect to rtsp://{addr}: {e}"));
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let _ = stream.set_nodelay(true);
        RtspConn { stream, addr, buf: Vec::new(), eof: false, next_cseq: 1, pending: VecDeque::new() }
    }

    /// Connects from the loopback address `from` (127.0.0.2, 127.0.0.3, ...: a server with
    /// several RTSP loops spreads clients by address); panics on failure.
    #[track_caller]
    pub fn open_from(addr: SocketAddr, from: IpAddr) -> RtspConn {
        let stream = connect_from(from, addr);
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let _ = stream.set_nodelay(true);
        RtspConn { stream, addr, buf: Vec::new(), eof: false, next_cseq: 1, pending: VecDeque::new() }
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `rtsp://ADDR/PATH` (`path` without its leading slash, already percent-encoded).
    pub fn url(&self, path: &str) -> String {
        format!("rtsp://{}/{}", self.addr, path.trim_start_matches('/'))
    }

    /// Writes all of `bytes`; panics on failure.
    #[track_caller]
    pub fn send_raw(&mut self, bytes: impl AsRef<[u8]>) {
        let bytes = bytes.as_ref();
        self.stream.write_all(bytes).unwrap_or_else(|e| {
            panic!("writing {} bytes ({:?}...): {e}", bytes.len(), lossy_prefix(bytes, 80))
        });
    }

    pub fn try_send_raw(&mut self, bytes: impl AsRef<[u8]>) -> io::Result<()> {
        self.stream.write_all(bytes.as_ref())
    }

    /// Sends `METHOD URL RTSP/1.0` with the next CSeq and `headers`; returns the CSeq used.
    #[track_caller]
    pub fn send_request(&mut self, method: &str, url: &str, headers: &[(&str, &str)]) -> u32 {
        let cseq = self.next_cseq;
        self.next_cseq += 1;
        let mut r = format!("{method} {url} RTSP/1.0\r\nCSeq: {cseq}\r\nUser-Agent: sluice-tests\r\n");
        for (n, v) in headers {
            r.push_str(&format!("{n}: {v}\r\n"));
        }
        r.push_str("\r\n");
        self.send_raw(r.as_bytes());
        cseq
    }

    /// Sends a request and reads its response (interleaved frames meanwhile go to
    /// [`RtspConn::pending`]); checks the response echoes the CSeq.
    #[track_caller]
    pub fn request(&mut self, method: &str, url: &str, headers: &[(&str, &str)]) -> RtspResponse {
        let cseq = self.send_request(method, url, headers);
        let r = self.response().unwrap_or_else(|e| panic!("{method} {url}: no response: {e}"));
        assert_eq!(r.cseq(), Some(cseq), "{method} {url}: the response must echo CSeq {cseq}:\n{r:?}");
        r
    }

    /// Reads once into the buffer; Ok(0) at EOF.
    fn fill(&mut self, deadline: Instant) -> io::Result<usize> {
        let now = Instant::now();
        let wait = deadline.saturating_duration_since(now).clamp(Duration::from_millis(1), IO_TIMEOUT);
        self.stream.set_read_timeout(Some(wait))?;
        let mut tmp = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(n) => {
                    if n == 0 {
                        self.eof = true;
                    }
                    self.buf.extend_from_slice(&tmp[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// The next complete item in the buffer, if there is one.
    fn parse_item(&mut self) -> Result<Option<Item>, String> {
        if self.buf.first() == Some(&b'$') {
            if self.buf.len() < 4 {
                return Ok(None);
            }
            let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
            if self.buf.len() < 4 + len {
                return Ok(None);
            }
            let channel = self.buf[1];
            let payload = self.buf[4..4 + len].to_vec();
            self.buf.drain(..4 + len);
            return Ok(Some(Item::Frame(Frame { channel, payload, at: Instant::now() })));
        }
        if !self.buf.is_empty() && !b"RTSP/1.0".starts_with(&self.buf[..self.buf.len().min(8)]) {
            return Err(format!(
                "the server sent neither a response nor an interleaved frame: {:?}",
                lossy_prefix(&self.buf, 200)
            ));
        }
        match RtspResponse::parse(&self.buf)? {
            Some((r, used)) => {
                self.buf.drain(..used);
                Ok(Some(Item::Response(r)))
            }
            None => Ok(None),
        }
    }

    /// The next item, waiting until `deadline`; `Ok(None)` when the deadline passed first. EOF,
    /// a reset or garbage are errors.
    pub fn next_item(&mut self, deadline: Instant) -> Result<Option<Item>, String> {
        loop {
            if let Some(item) = self.parse_item()? {
                return Ok(Some(item));
            }
            if self.eof {
                return Err(format!(
                    "the server closed the connection ({} bytes of an incomplete message: {:?})",
                    self.buf.len(),
                    lossy_prefix(&self.buf, 200)
                ));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            match self.fill(deadline) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) => return Err(format!("{e} while reading from rtsp://{}", self.addr)),
            }
        }
    }

    /// Reads the next response (at most 10 s), queueing interleaved frames that come first.
    pub fn response(&mut self) -> Result<RtspResponse, String> {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            match self.next_item(deadline)? {
                Some(Item::Response(r)) => return Ok(r),
                Some(Item::Frame(f)) => self.pending.push_back(f),
                None => {
                    return Err(format!(
                        "no response within {IO_TIMEOUT:?}; have {} bytes: {:?}",
                        self.buf.len(),
                        lossy_prefix(&self.buf, 200)
                    ))
                }
            }
        }
    }

    /// The next interleaved frame (queued ones first), or `Ok(None)` at `deadline`. A response
    /// here is an error: nothing was asked.
    pub fn next_frame(&mut self, deadline: Instant) -> Result<Option<Frame>, String> {
        if let Some(f) = self.pending.pop_front() {
            return Ok(Some(f));
        }
        match self.next_item(deadline)? {
            Some(Item::Frame(f)) => Ok(Some(f)),
            Some(Item::Response(r)) => Err(format!("an unsolicited response while reading frames:\n{r:?}")),
            None => Ok(None),
        }
    }

    /// Reads (and discards) until the server closes the connection or `within` passes; returns
    /// whether it closed and every byte that arrived meanwhile.
    pub fn wait_close(&mut self, within: Duration) -> (bool, Vec<u8>) {
        let deadline = Instant::now() + within;
        let mut extra = std::mem::take(&mut self.buf);
        loop {
            if self.eof {
                return (true, extra);
            }
            if Instant::now() >= deadline {
                return (false, extra);
            }
            match self.fill(deadline) {
                Ok(_) => extra.append(&mut self.buf),
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return (true, extra),
                Err(e) => panic!("unexpected error while waiting for close: {e}"),
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// RTP, RTCP and H.264 payloads
// ---------------------------------------------------------------------------------------------

/// An RTP packet's header fields and payload.
#[derive(Debug, Clone)]
pub struct Rtp {
    pub marker: bool,
    pub payload_type: u8,
    pub seq: u16,
    pub timestamp: u32,
    pub ssrc: u32,
    pub payload: Vec<u8>,
}

/// Parses an RTP packet (RFC 3550 §5.1): version 2, CSRCs, extension and padding handled.
pub fn parse_rtp(p: &[u8]) -> Result<Rtp, String> {
    if p.len() < 12 {
        return Err(format!("RTP packet of {} bytes", p.len()));
    }
    if p[0] >> 6 != 2 {
        return Err(format!("RTP version {} (first byte {:#04x})", p[0] >> 6, p[0]));
    }
    let padding = p[0] & 0x20 != 0;
    let extension = p[0] & 0x10 != 0;
    let csrcs = usize::from(p[0] & 0x0f);
    let mut start = 12 + 4 * csrcs;
    if extension {
        let words = p
            .get(start + 2..start + 4)
            .map(|w| usize::from(u16::from_be_bytes([w[0], w[1]])))
            .ok_or("truncated RTP header extension")?;
        start += 4 + 4 * words;
    }
    let mut end = p.len();
    if padding {
        let pad = usize::from(*p.last().unwrap());
        end = end.checked_sub(pad).ok_or("RTP padding longer than the packet")?;
    }
    if start > end {
        return Err(format!("RTP header of {start} bytes in a packet of {}", p.len()));
    }
    Ok(Rtp {
        marker: p[1] & 0x80 != 0,
        payload_type: p[1] & 0x7f,
        seq: u16::from_be_bytes([p[2], p[3]]),
        timestamp: u32::from_be_bytes([p[4], p[5], p[6], p[7]]),
        ssrc: u32::from_be_bytes([p[8], p[9], p[10], p[11]]),
        payload: p[start..end].to_vec(),
    })
}

/// The packet types (200 SR, 201 RR, 202 SDES, 203 BYE, ...) of a compound RTCP packet, and the
/// SSRC of each.
pub fn rtcp_packets(p: &[u8]) -> Result<Vec<(u8, u32)>, String> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < p.len() {
        let h = p.get(pos..pos + 8).ok_or_else(|| format!("truncated RTCP packet at {pos}: {p:02x?}"))?;
        if h[0] >> 6 != 2 {
            return Err(format!("RTCP version {} at {pos}: {p:02x?}", h[0] >> 6));
        }
        let words = usize::from(u16::from_be_bytes([h[2], h[3]]));
        out.push((h[1], u32::from_be_bytes([h[4], h[5], h[6], h[7]])));
        pos += 4 * (words + 1);
    }
    if pos != p.len() {
        return Err(format!("RTCP lengths do not add up to the packet's {} bytes", p.len()));
    }
    Ok(out)
}

/// The H.264 NAL unit types that start in an RTP payload (RFC 6184): a single NAL unit's type,
/// the aggregated units of a STAP-A, the fragmented unit of a starting FU-A (none for a
/// continuing fragment).
pub fn h264_nal_types(payload: &[u8]) -> Result<Vec<u8>, String> {
    let first = *payload.first().ok_or("empty H.264 payload")?;
    match first & 0x1f {
        1..=23 => Ok(vec![first & 0x1f]),
        24 => {
            let mut types = Vec::new();
            let mut pos = 1;
            while pos < payload.len() {
                let size = payload
                    .get(pos..pos + 2)
                    .map(|s| usize::from(u16::from_be_bytes([s[0], s[1]])))
                    .ok_or("truncated STAP-A size")?;
                let nal = payload.get(pos + 2..pos + 2 + size).ok_or("truncated STAP-A unit")?;
                types.push(*nal.first().ok_or("empty STAP-A unit")? & 0x1f);
                pos += 2 + size;
            }
            Ok(types)
        }
        28 => {
            let fu = *payload.get(1).ok_or("truncated FU-A")?;
            Ok(if fu & 0x80 != 0 { vec![fu & 0x1f] } else { Vec::new() })
        }
        t => Err(format!("unexpected H.264 payload type {t} (sluice uses packetization mode 1)")),
    }
}

// ---------------------------------------------------------------------------------------------
// RTP over UDP
// ---------------------------------------------------------------------------------------------

/// Two UDP sockets on 127.0.0.1 with consecutive ports, the first even (RTP, then RTCP).
pub fn udp_port_pair() -> (UdpSocket, UdpSocket) {
    udp_port_pair_on(IpAddr::from([127, 0, 0, 1]))
}

/// Two UDP sockets on the loopback address `ip` with consecutive ports, the first even.
pub fn udp_port_pair_on(ip: IpAddr) -> (UdpSocket, UdpSocket) {
    assert!(ip.is_loopback(), "tests only use loopback, not {ip}");
    for _ in 0..200 {
        let rtp = UdpSocket::bind((ip, 0)).unwrap_or_else(|e| panic!("bind a UDP socket on {ip}: {e}"));
        let port = rtp.local_addr().unwrap().port();
        if !port.is_multiple_of(2) || port == u16::MAX {
            continue;
        }
        if let Ok(rtcp) = UdpSocket::bind((ip, port + 1)) {
            return (rtp, rtcp);
        }
    }
    panic!("no free pair of consecutive UDP ports on {ip} after 200 tries");
}

/// A TCP connection to `to` from the loopback address `from` (std cannot bind before
/// connecting); panics on failure.
#[track_caller]
pub fn connect_from(from: IpAddr, to: SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    assert!(from.is_loopback() && to.ip().is_loopback(), "tests only talk over loopback: {from} -> {to}");
    let (IpAddr::V4(from), SocketAddr::V4(to)) = (from, to) else { panic!("IPv4 only: {from} -> {to}") };
    let sockaddr = |ip: std::net::Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr { s_addr: u32::from(ip).to_be() },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: socket(2) takes no pointers; the descriptor is owned by the TcpStream below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
    // SAFETY: a fresh descriptor we own from here on.
    let stream = unsafe { TcpStream::from_raw_fd(fd) };
    let (local, remote) = (sockaddr(from, 0), sockaddr(*to.ip(), to.port()));
    // SAFETY: both addresses are live sockaddr_in of `len` bytes.
    let bound = unsafe { libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len) };
    assert_eq!(bound, 0, "bind to {from}: {}", io::Error::last_os_error());
    // SAFETY: as above.
    let connected = unsafe { libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len) };
    assert_eq!(connected, 0, "connect {from} -> {to}: {}", io::Error::last_os_error());
    stream
}

/// A viewer of one video track over UDP, written by hand so it can come from any loopback
/// address: its RTSP connection, its session, the server's RTP/RTCP ports its `SETUP` reply
/// named, what arrives on its RTP port, and its RTCP socket (for receiver reports).
pub struct UdpViewer {
    pub from: IpAddr,
    pub conn: RtspConn,
    pub session: String,
    pub server_ports: (u16, u16),
    pub rtp: UdpSink,
    pub rtcp: UdpSocket,
    path: String,
}

impl UdpViewer {
    /// Connects from `from` and sets up track 0 of `path` over UDP; the reply when it is not 200.
    pub fn setup(server: SocketAddr, from: IpAddr, path: &str) -> Result<UdpViewer, RtspResponse> {
        let mut conn = RtspConn::open_from(server, from);
        let (rtp, rtcp) = udp_port_pair_on(from);
        let ports = (rtp.local_addr().unwrap().port(), rtcp.local_addr().unwrap().port());
        let transport = format!("RTP/AVP;unicast;client_port={}-{}", ports.0, ports.1);
        let url = format!("{}/trackID=0", conn.url(path));
        let r = conn.request("SETUP", &url, &[("Transport", &transport)]);
        if r.status != 200 {
            return Err(r);
        }
        let session = r.session_id().expect("a Session header in a SETUP reply");
        let server_ports = r
            .header("transport")
            .and_then(|t| param(t, "server_port"))
            .and_then(|p| pair(&p))
            .unwrap_or_else(|| panic!("no server_port in the SETUP reply:\n{r:?}"));
        Ok(UdpViewer {
            from,
            conn,
            session,
            server_ports,
            rtp: UdpSink::start(rtp),
            rtcp,
            path: path.to_string(),
        })
    }

    /// PLAY; panics unless 200.
    #[track_caller]
    pub fn play(&mut self) {
        let url = self.conn.url(&self.path);
        self.conn.request("PLAY", &url, &[("Session", &self.session)]).expect(200, "PLAY");
    }

    /// TEARDOWN on a new connection from the same address (the first may have been closed as
    /// idle; a UDP session outlives it); the reply.
    pub fn teardown(&self) -> RtspResponse {
        let mut c = RtspConn::open_from(self.conn.addr(), self.from);
        let url = c.url(&self.path);
        c.request("TEARDOWN", &url, &[("Session", &self.session)])
    }

    /// Sends an empty RTCP receiver report to the server's RTCP port `port`.
    pub fn receiver_report(&self, port: u16) {
        let rr = [0x80, 201, 0, 1, 0x12, 0x34, 0x56, 0x78];
        let to = SocketAddr::new(self.conn.addr().ip(), port);
        self.rtcp.send_to(&rr, to).unwrap_or_else(|e| panic!("RTCP to {to}: {e}"));
    }
}

/// A datagram a [`UdpSink`] received.
#[derive(Debug, Clone)]
pub struct Datagram {
    pub from: SocketAddr,
    pub data: Vec<u8>,
    pub at: Instant,
}

/// Drains a UDP socket on a thread, keeping what arrived, until stopped (or dropped).
pub struct UdpSink {
    pub local: SocketAddr,
    received: Arc<Mutex<Vec<Datagram>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl UdpSink {
    pub fn start(socket: UdpSocket) -> UdpSink {
        let local = socket.local_addr().unwrap();
        socket.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (received, stop) = (Arc::clone(&received), Arc::clone(&stop));
            std::thread::Builder::new()
                .name(format!("udp-sink-{}", local.port()))
                .spawn(move || {
                    let mut buf = vec![0u8; 65_536];
                    while !stop.load(Ordering::Relaxed) {
                        match socket.recv_from(&mut buf) {
                            Ok((n, from)) => received.lock().unwrap().push(Datagram {
                                from,
                                data: buf[..n].to_vec(),
                                at: Instant::now(),
                            }),
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    io::ErrorKind::WouldBlock
                                        | io::ErrorKind::TimedOut
                                        | io::ErrorKind::Interrupted
                                        | io::ErrorKind::ConnectionRefused
                                ) => {}
                            Err(e) => panic!("UDP sink on {local}: {e}"),
                        }
                    }
                })
                .expect("spawn UDP sink")
        };
        UdpSink { local, received, stop, thread: Some(thread) }
    }

    pub fn port(&self) -> u16 {
        self.local.port()
    }

    /// Datagrams so far.
    pub fn count(&self) -> usize {
        self.received.lock().unwrap().len()
    }

    /// A copy of what arrived so far.
    pub fn datagrams(&self) -> Vec<Datagram> {
        self.received.lock().unwrap().clone()
    }

    /// When the last datagram arrived.
    pub fn last_at(&self) -> Option<Instant> {
        self.received.lock().unwrap().last().map(|d| d.at)
    }
}

impl Drop for UdpSink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Polls `/metrics` (10 s at most) until `cond` holds; panics with the last scrape otherwise.
#[track_caller]
pub fn wait_metrics(server: &super::Server, what: &str, mut cond: impl FnMut(&str) -> bool) -> String {
    let mut last = String::new();
    if poll_until(IO_TIMEOUT, || {
        last = server.scrape();
        cond(&last)
    }) {
        return last;
    }
    let rtsp: Vec<&str> =
        last.lines().filter(|l| l.starts_with("sluice_rtsp") || l.starts_with("sluice_rtp")).collect();
    panic!("{what}: not within {IO_TIMEOUT:?}; last /metrics (RTSP lines):\n{}", rtsp.join("\n"));
}

/// SETUP of `tracks` tracks (`trackID=0`, `1`, ...) of `url` in one session on `c`, each with the
/// `Transport` that `transport(track)` gives; panics unless 200. The session id.
#[track_caller]
pub fn setup_tracks(
    c: &mut RtspConn,
    url: &str,
    tracks: usize,
    transport: impl Fn(usize) -> String,
) -> String {
    let mut session: Option<String> = None;
    for track in 0..tracks {
        let transport = transport(track);
        let mut headers = vec![("Transport", transport.as_str())];
        if let Some(s) = &session {
            headers.push(("Session", s));
        }
        let r = c.request("SETUP", &format!("{url}/trackID={track}"), &headers);
        session = r.expect(200, &format!("SETUP of track {track} ({transport})")).session_id();
    }
    session.expect("a Session header in the SETUP replies")
}

/// A viewer of `tracks` tracks of `url` over UDP on `c`: the session, and each track's RTP and
/// RTCP sockets (bound on 127.0.0.1).
#[track_caller]
pub fn setup_udp_tracks(c: &mut RtspConn, url: &str, tracks: usize) -> (String, Vec<(UdpSocket, UdpSocket)>) {
    let pairs: Vec<(UdpSocket, UdpSocket)> = (0..tracks).map(|_| udp_port_pair()).collect();
    let port = |s: &UdpSocket| s.local_addr().unwrap().port();
    let session = setup_tracks(c, url, tracks, |t| {
        format!("RTP/AVP;unicast;client_port={}-{}", port(&pairs[t].0), port(&pairs[t].1))
    });
    (session, pairs)
}

/// A viewer of `tracks` tracks of `url` interleaved on `c` (channels 0-1, 2-3, ...): the session.
#[track_caller]
pub fn setup_tcp_tracks(c: &mut RtspConn, url: &str, tracks: usize) -> String {
    setup_tracks(c, url, tracks, |t| format!("RTP/AVP/TCP;unicast;interleaved={}-{}", 2 * t, 2 * t + 1))
}
