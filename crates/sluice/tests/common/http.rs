//! A raw HTTP/1.1 client: exact bytes out, responses parsed strictly, every wait bounded.

#![allow(dead_code)]

use super::*;

/// A parsed response.
#[derive(Clone)]
pub struct Response {
    pub version: String,
    pub status: u16,
    pub reason: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The head exactly as received (status line to blank line).
    pub raw_head: Vec<u8>,
}

impl HeaderLines for Response {
    fn header_lines(&self) -> &[(String, String)] {
        &self.headers
    }
}

impl MessageText for Response {
    fn raw_head_bytes(&self) -> &[u8] {
        &self.raw_head
    }

    fn body_bytes(&self) -> &[u8] {
        &self.body
    }
}

impl Response {
    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length").map(|v| v.trim().parse().expect("numeric Content-Length"))
    }

    /// Panics with the whole head when the status is not `status`.
    #[track_caller]
    pub fn expect_status(&self, status: u16, what: &str) -> &Self {
        assert_eq!(self.status, status, "{what}: expected {status}, got:\n{self:?}");
        self
    }

    /// Parses a response from the start of `buf`. `Ok(None)` means more bytes are needed; a body
    /// without Content-Length or chunked framing is delimited by EOF, which `eof` says has come.
    pub fn parse(buf: &[u8], no_body: bool, eof: bool) -> Result<Option<(Response, usize)>, String> {
        let Some(head) = parse_status_head(buf, "HTTP/1.")? else { return Ok(None) };
        let StatusHead { version, status, reason, headers, raw_head } = head;
        let mut resp = Response { version, status, reason, headers, body: Vec::new(), raw_head };
        let start = resp.raw_head.len();
        if no_body || (100..200).contains(&status) || status == 204 || status == 304 {
            return Ok(Some((resp, start)));
        }
        let chunked = resp
            .header("transfer-encoding")
            .is_some_and(|te| te.to_ascii_lowercase().trim_end().ends_with("chunked"));
        if chunked {
            return match decode_chunked(&buf[start..])? {
                Some((body, used)) => {
                    resp.body = body;
                    Ok(Some((resp, start + used)))
                }
                None => Ok(None),
            };
        }
        if let Some(lens) = Some(resp.headers_named("content-length")).filter(|l| !l.is_empty()) {
            if lens.len() > 1 {
                return Err(format!("several Content-Length fields:\n{}", resp.head_text()));
            }
            let len: usize =
                lens[0].parse().map_err(|_| format!("bad Content-Length:\n{}", resp.head_text()))?;
            if buf.len() - start < len {
                return Ok(None);
            }
            resp.body = buf[start..start + len].to_vec();
            return Ok(Some((resp, start + len)));
        }
        if eof {
            resp.body = buf[start..].to_vec();
            return Ok(Some((resp, buf.len())));
        }
        Ok(None)
    }
}

impl std::fmt::Debug for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        fmt_response(f, &self.raw_head, &self.body, 200)
    }
}

fn decode_chunked(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut body = Vec::new();
    let mut pos = 0;
    loop {
        let Some(eol) = find(&buf[pos..], b"\r\n") else { return Ok(None) };
        let line = std::str::from_utf8(&buf[pos..pos + eol]).map_err(|_| "bad chunk size line")?;
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| format!("bad chunk size {line:?}"))?;
        pos += eol + 2;
        if size == 0 {
            // Trailers until an empty line.
            loop {
                let Some(eol) = find(&buf[pos..], b"\r\n") else { return Ok(None) };
                pos += eol + 2;
                if eol == 0 {
                    return Ok(Some((body, pos)));
                }
            }
        }
        if buf.len() < pos + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&buf[pos..pos + size]);
        if &buf[pos + size..pos + size + 2] != b"\r\n" {
            return Err("chunk not followed by CRLF".into());
        }
        pos += size + 2;
    }
}

pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

pub fn contains(hay: &[u8], needle: &[u8]) -> bool {
    find(hay, needle).is_some()
}

pub fn lossy_prefix(b: &[u8], n: usize) -> String {
    String::from_utf8_lossy(&b[..b.len().min(n)]).into_owned()
}

/// How a connection ended, or did not, while we waited.
#[derive(Debug)]
pub struct Closed {
    /// True when the peer closed (EOF or reset) within the wait.
    pub closed: bool,
    /// True when it was a reset rather than an orderly EOF.
    pub reset: bool,
    /// From the start of the wait to the close (or to the end of the wait).
    pub after: Duration,
    /// Bytes that arrived meanwhile (including any already buffered).
    pub extra: Vec<u8>,
}

/// A client connection speaking raw bytes, with a timeout on every operation.
pub struct Conn {
    pub stream: TcpStream,
    buf: Vec<u8>,
    eof: bool,
    /// Everything read so far, for assertions about what a connection ever carried.
    pub transcript: Vec<u8>,
}

impl Conn {
    /// Connects (at most 10 s); panics on failure.
    #[track_caller]
    pub fn open(addr: SocketAddr) -> Conn {
        Conn::try_open(addr).unwrap_or_else(|e| panic!("connect to {addr}: {e}"))
    }

    pub fn try_open(addr: SocketAddr) -> io::Result<Conn> {
        assert!(addr.ip().is_loopback(), "tests only talk to loopback, not {addr}");
        let stream = TcpStream::connect_timeout(&addr, IO_TIMEOUT)?;
        Ok(Conn::from_stream(stream))
    }

    /// Wraps a connected stream, setting read and write timeouts of 10 s.
    pub fn from_stream(stream: TcpStream) -> Conn {
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        let _ = stream.set_nodelay(true);
        Conn { stream, buf: Vec::new(), eof: false, transcript: Vec::new() }
    }

    /// Writes all of `bytes`; panics on failure.
    #[track_caller]
    pub fn send(&mut self, bytes: impl AsRef<[u8]>) {
        let bytes = bytes.as_ref();
        self.stream.write_all(bytes).unwrap_or_else(|e| {
            panic!("writing {} bytes ({:?}...): {e}", bytes.len(), lossy_prefix(bytes, 80))
        });
    }

    pub fn try_send(&mut self, bytes: impl AsRef<[u8]>) -> io::Result<()> {
        self.stream.write_all(bytes.as_ref())
    }

    pub fn set_read_timeout(&self, t: Duration) {
        self.stream.set_read_timeout(Some(t.clamp(Duration::from_millis(1), IO_TIMEOUT))).unwrap();
    }

    /// Reads once into the buffer; Ok(0) at EOF.
    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 64 * 1024];
        loop {
            match self.stream.read(&mut tmp) {
                Ok(n) => {
                    if n == 0 {
                        self.eof = true;
                    }
                    self.buf.extend_from_slice(&tmp[..n]);
                    self.transcript.extend_from_slice(&tmp[..n]);
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Reads one response to a request that may have a body (GET and the like).
    #[track_caller]
    pub fn response(&mut self) -> Response {
        self.read_response(false).unwrap_or_else(|e| panic!("reading a response: {e}"))
    }

    /// Reads one response to a HEAD request (never a body).
    #[track_caller]
    pub fn head_response(&mut self) -> Response {
        self.read_response(true).unwrap_or_else(|e| panic!("reading a response to HEAD: {e}"))
    }

    /// Reads one response; an error says why there was none (timeout, EOF, reset, garbage).
    pub fn read_response(&mut self, no_body: bool) -> Result<Response, String> {
        let started = Instant::now();
        loop {
            match Response::parse(&self.buf, no_body, self.eof)? {
                Some((resp, used)) => {
                    self.buf.drain(..used);
                    return Ok(resp);
                }
                None if self.eof => {
                    return Err(format!(
                        "connection closed after {} bytes of an incomplete response: {:?}",
                        self.buf.len(),
                        lossy_prefix(&self.buf, 300)
                    ))
                }
                None => {}
            }
            if started.elapsed() > IO_TIMEOUT {
                return Err(format!("no complete response within {IO_TIMEOUT:?}"));
            }
            match self.fill() {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    return Err(format!(
                        "timed out ({IO_TIMEOUT:?}) waiting for a response; have {} bytes: {:?}",
                        self.buf.len(),
                        lossy_prefix(&self.buf, 300)
                    ))
                }
                Err(e) => {
                    return Err(format!(
                        "{e} while reading a response; have {} bytes: {:?}",
                        self.buf.len(),
                        lossy_prefix(&self.buf, 300)
                    ))
                }
            }
        }
    }

    /// Reads exactly `n` raw bytes (at most 10 s between reads).
    pub fn read_exact_raw(&mut self, n: usize) -> io::Result<Vec<u8>> {
        while self.buf.len() < n {
            if self.fill()? == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "EOF"));
            }
        }
        Ok(self.buf.drain(..n).collect())
    }

    /// Bytes received but not yet consumed by a parsed response.
    pub fn buffered(&self) -> &[u8] {
        &self.buf
    }

    /// Waits at most `within` for the server to close the connection.
    pub fn wait_close(&mut self, within: Duration) -> Closed {
        let start = Instant::now();
        let deadline = start + within;
        let mut extra = std::mem::take(&mut self.buf);
        let done = |closed, reset, extra| Closed { closed, reset, after: start.elapsed(), extra };
        if self.eof {
            return done(true, false, extra);
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return done(false, false, extra);
            }
            self.set_read_timeout(deadline - now);
            let mut tmp = [0u8; 16 * 1024];
            match self.stream.read(&mut tmp) {
                Ok(0) => {
                    self.eof = true;
                    return done(true, false, extra);
                }
                Ok(n) => {
                    extra.extend_from_slice(&tmp[..n]);
                    self.transcript.extend_from_slice(&tmp[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return done(true, true, extra),
                Err(e) => panic!("unexpected error while waiting for close: {e}"),
            }
        }
    }

    /// Sets SO_LINGER {on, 0} so that dropping the socket sends a reset.
    pub fn set_reset_on_close(&self) {
        set_linger_zero(&self.stream);
    }
}

/// Sets SO_LINGER {on, 0} on a socket: close then sends RST.
pub fn set_linger_zero(stream: &TcpStream) {
    let l = libc::linger { l_onoff: 1, l_linger: 0 };
    // SAFETY: passes a live linger struct and its size for our own socket.
    let r = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "setsockopt(SO_LINGER): {}", io::Error::last_os_error());
}

/// Connects with a small receive buffer (set before connect, so the window stays small): the
/// server cannot push a large body into our kernel buffers ahead of our reads.
pub fn connect_small_rcvbuf(addr: SocketAddr, rcvbuf: i32) -> TcpStream {
    assert!(addr.ip().is_loopback());
    // SAFETY: socket(2), setsockopt(2), connect(2) on a descriptor we own; pointers are to live
    // locals of the sizes passed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
        let stream = <TcpStream as std::os::fd::FromRawFd>::from_raw_fd(fd);
        let r = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&rcvbuf as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        );
        assert_eq!(r, 0, "setsockopt(SO_RCVBUF): {}", io::Error::last_os_error());
        let SocketAddr::V4(v4) = addr else { panic!("IPv4 only") };
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: v4.port().to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
            sin_zero: [0; 8],
        };
        // Blocking connect to loopback: answered at once (refused or accepted into the backlog).
        let r = libc::connect(
            fd,
            (&sin as *const libc::sockaddr_in).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(r, 0, "connect {addr}: {}", io::Error::last_os_error());
        stream.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(IO_TIMEOUT)).unwrap();
        stream
    }
}

/// A GET request for `target` with Host, plus extra header lines.
pub fn get(target: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    request("GET", target, extra)
}

/// A request with `Host: localhost` and extra header lines.
pub fn request(method: &str, target: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut r = format!("{method} {target} HTTP/1.1\r\nHost: localhost\r\n");
    for (n, v) in extra {
        r.push_str(&format!("{n}: {v}\r\n"));
    }
    r.push_str("\r\n");
    r.into_bytes()
}

/// One request on a fresh connection; returns the response (GET semantics).
#[track_caller]
pub fn fetch(addr: SocketAddr, req: impl AsRef<[u8]>) -> Response {
    let mut c = Conn::open(addr);
    c.send(req);
    c.response()
}

/// GET `target` with extra headers on a fresh connection.
#[track_caller]
pub fn fetch_get(addr: SocketAddr, target: &str, extra: &[(&str, &str)]) -> Response {
    fetch(addr, get(target, extra))
}

/// Asserts two byte strings are equal without printing megabytes on failure.
#[track_caller]
pub fn assert_bytes_eq(actual: &[u8], expected: &[u8], what: &str) {
    if actual != expected {
        let first_diff =
            actual.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(actual.len().min(expected.len()));
        panic!(
            "{what}: bodies differ: got {} bytes, expected {}; first difference at byte {first_diff}; got {:?}, expected {:?}",
            actual.len(),
            expected.len(),
            lossy_prefix(&actual[first_diff.min(actual.len())..], 40),
            lossy_prefix(&expected[first_diff.min(expected.len())..], 40),
        );
    }
}
