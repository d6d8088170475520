//! Shared harness for sluice's integration tests: a running `sluice serve` process, a temporary
//! media library, a raw HTTP/1.1 client, and the engine matrix macro.
//!
//! Everything here talks to 127.0.0.1 only, and every wait is bounded: a hung server fails the
//! test that hit it instead of hanging the suite.

#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest any single socket operation or process wait may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Generates one module per engine configuration, each holding one `#[test]` per listed test
/// function. Every test function takes the engine arguments (`&[&str]`), so a failure is named
/// `epoll_copy::ranges_single` and says which configuration broke.
macro_rules! engine_matrix {
    ($($test:ident),+ $(,)?) => {
        engine_matrix!(@module uring_splice,
            ["--engine", "uring", "--workers", "2", "--send", "splice"]; $($test),+);
        engine_matrix!(@module uring_copy,
            ["--engine", "uring", "--workers", "2", "--send", "copy"]; $($test),+);
        engine_matrix!(@module epoll_sendfile,
            ["--engine", "epoll", "--workers", "2", "--send", "sendfile"]; $($test),+);
        engine_matrix!(@module epoll_splice,
            ["--engine", "epoll", "--workers", "2", "--send", "splice"]; $($test),+);
        engine_matrix!(@module epoll_copy,
            ["--engine", "epoll", "--workers", "2", "--send", "copy"]; $($test),+);
        engine_matrix!(@module tokio_sendfile,
            ["--engine", "tokio", "--workers", "2", "--send", "sendfile"]; $($test),+);
        engine_matrix!(@module tokio_splice,
            ["--engine", "tokio", "--workers", "2", "--send", "splice"]; $($test),+);
        engine_matrix!(@module tokio_copy,
            ["--engine", "tokio", "--workers", "2", "--send", "copy"]; $($test),+);
        engine_matrix!(@module threads_pool_sendfile,
            ["--engine", "threads", "--threads-mode", "pool", "--pool-size", "16", "--send", "sendfile"];
            $($test),+);
        engine_matrix!(@module threads_pool_splice,
            ["--engine", "threads", "--threads-mode", "pool", "--pool-size", "16", "--send", "splice"];
            $($test),+);
        engine_matrix!(@module threads_pool_copy,
            ["--engine", "threads", "--threads-mode", "pool", "--pool-size", "16", "--send", "copy"];
            $($test),+);
        engine_matrix!(@module threads_per_connection_sendfile,
            ["--engine", "threads", "--threads-mode", "per-connection", "--send", "sendfile"];
            $($test),+);
        engine_matrix!(@module threads_per_connection_copy,
            ["--engine", "threads", "--threads-mode", "per-connection", "--send", "copy"];
            $($test),+);
    };
    (@module $name:ident, [$($arg:expr),* $(,)?]; $($test:ident),+) => {
        mod $name {
            const ENGINE: &[&str] = &[$($arg),*];
            $(
                #[test]
                fn $test() {
                    super::$test(ENGINE)
                }
            )+
        }
    };
}

// ---------------------------------------------------------------------------------------------
// The server process
// ---------------------------------------------------------------------------------------------

/// A running `sluice serve`, killed (by its pid) and reaped on drop.
pub struct Server {
    child: Child,
    pid: i32,
    addr: SocketAddr,
    logs: Arc<Mutex<Vec<String>>>,
    reader: Option<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl Server {
    /// Starts `sluice serve --listen 127.0.0.1:0 --log-level info` plus `engine` and `extra`
    /// arguments, and waits (at most 10 s) for its start-up line.
    pub fn start(engine: &[&str], extra: &[&str]) -> Server {
        Server::start_with(engine, extra, |_| {})
    }

    /// [`Server::start`], letting `configure` adjust the command first (resource limits, say).
    pub fn start_with(engine: &[&str], extra: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        let mut args: Vec<&str> = vec!["serve", "--listen", "127.0.0.1:0"];
        // Tests run side by side: RTSP gets a free port too, unless the test decides.
        let rtsp_flags = ["--rtsp-listen", "--no-rtsp"];
        if !engine.iter().chain(extra).any(|a| rtsp_flags.contains(a)) {
            args.extend(["--rtsp-listen", "127.0.0.1:0"]);
        }
        if !engine.contains(&"--log-level") && !extra.contains(&"--log-level") {
            args.extend(["--log-level", "info"]);
        }
        // The admin listener gets a free port too; /bench/ is on unless the test says otherwise.
        let admin_flags = ["--admin-listen", "--no-admin"];
        if !engine.iter().chain(extra).any(|a| admin_flags.contains(a)) {
            args.extend(["--admin-listen", "127.0.0.1:0"]);
        }
        if !engine.iter().chain(extra).any(|a| *a == "--no-bench" || *a == "--bench") {
            args.push("--bench");
        }
        args.extend_from_slice(engine);
        args.extend_from_slice(extra);
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command
            .args(&args)
            .env_remove("SLUICE_CONFIG")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        configure(&mut command);
        let mut child =
            command.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", env!("CARGO_BIN_EXE_sluice")));
        let pid = child.id() as i32;
        let logs = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let reader = {
            let logs = Arc::clone(&logs);
            std::thread::Builder::new()
                .name(format!("sluice-{pid}-stderr"))
                .spawn(move || {
                    // Keeps draining so the server never blocks on a full pipe.
                    let mut r = BufReader::new(stderr);
                    let mut line = Vec::new();
                    loop {
                        line.clear();
                        match r.read_until(b'\n', &mut line) {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {
                                let text = String::from_utf8_lossy(&line);
                                logs.lock().unwrap().push(text.trim_end().to_string());
                            }
                        }
                    }
                })
                .expect("spawn stderr reader")
        };
        let mut server = Server {
            child,
            pid,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            logs,
            reader: Some(reader),
            status: None,
        };
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            if let Some(addr) = server.logs().iter().find_map(|l| parse_listen_line(l)) {
                server.addr = addr;
                return server;
            }
            if let Ok(Some(status)) = server.child.try_wait() {
                server.status = Some(status);
                server.join_reader();
                panic!(
                    "sluice {args:?} exited with {status} before listening; its log:\n{}",
                    server.logs().join("\n")
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "sluice {args:?} did not print its `listening on` line within {IO_TIMEOUT:?}; its log so far:\n{}",
                    server.logs().join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts a server on `engine` serving `fixture`, plus `extra` arguments.
    pub fn serve(engine: &[&str], fixture: &Fixture, extra: &[&str]) -> Server {
        let root = fixture.root_arg();
        let mut all: Vec<&str> = vec!["--root", &root];
        all.extend_from_slice(extra);
        Server::start(engine, &all)
    }

    /// The admin listener's address (panics when the server runs without one).
    pub fn admin_addr(&self) -> SocketAddr {
        self.logs()
            .iter()
            .find_map(|l| parse_marker_line(l, "admin endpoints at http://"))
            .unwrap_or_else(|| panic!("no admin listener line in:\n{}", self.log_text()))
    }

    /// Scrapes `/metrics` from the admin listener, checking it is Prometheus text.
    pub fn scrape(&self) -> String {
        metrics(&mut Conn::open(self.admin_addr()))
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The RTSP control address (its start-up line); panics when RTSP is off.
    pub fn rtsp_addr(&self) -> SocketAddr {
        self.logs()
            .iter()
            .find_map(|l| parse_scheme_line(l, "rtsp"))
            .unwrap_or_else(|| panic!("sluice announced no rtsp listener; its log:\n{}", self.log_text()))
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Open file descriptors of the server process.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .unwrap_or_else(|e| panic!("cannot list /proc/{}/fd: {e}", self.pid))
            .count()
    }

    /// Every stderr line so far.
    pub fn logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// The log as one string, for failure messages.
    pub fn log_text(&self) -> String {
        self.logs().join("\n")
    }

    /// Sends a signal to the server (by its pid).
    pub fn signal(&self, sig: libc::c_int) {
        if self.status.is_none() {
            // SAFETY: kill(2) with our own child's pid; no memory is passed.
            unsafe { libc::kill(self.pid, sig) };
        }
    }

    /// Waits at most `timeout` for the server to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if let Some(s) = self.status {
            return Some(s);
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    self.status = Some(s);
                    self.join_reader();
                    return Some(s);
                }
                Ok(None) => {}
                Err(e) => panic!("waiting for sluice: {e}"),
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.wait_exit(Duration::ZERO).is_none()
    }

    /// SIGTERM, then waits at most 10 s for the exit; panics (after SIGKILL) if it does not come.
    /// Once this returns, every line the server wrote is in [`Server::logs`].
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        match self.wait_exit(IO_TIMEOUT) {
            Some(s) => s,
            None => {
                self.kill();
                panic!("sluice did not exit within {IO_TIMEOUT:?} of SIGTERM; its log:\n{}", self.log_text());
            }
        }
    }

    fn kill(&mut self) {
        if self.status.is_none() {
            // Child::kill sends SIGKILL to this child's pid only.
            let _ = self.child.kill();
            if let Ok(s) = self.child.wait() {
                self.status = Some(s);
            }
            self.join_reader();
        }
    }

    fn join_reader(&mut self) {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.signal(libc::SIGTERM);
            if self.wait_exit(Duration::from_secs(3)).is_none() {
                self.kill();
            }
        }
        if std::thread::panicking() {
            let logs = self.logs();
            let skip = logs.len().saturating_sub(60);
            eprintln!("---- sluice (pid {}) log, last {} lines ----", self.pid, logs.len() - skip);
            for l in &logs[skip..] {
                eprintln!("{l}");
            }
            eprintln!("---- end of sluice log ----");
        }
    }
}

/// The address in a `listening on http://ADDR ...` line, human or JSON.
pub fn parse_listen_line(line: &str) -> Option<SocketAddr> {
    parse_scheme_line(line, "http")
}

/// The address in a `listening on SCHEME://ADDR` line.
pub fn parse_scheme_line(line: &str, scheme: &str) -> Option<SocketAddr> {
    parse_marker_line(line, &format!("listening on {scheme}://"))
}

/// The address right after `marker` in a log line.
pub fn parse_marker_line(line: &str, marker: &str) -> Option<SocketAddr> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let end = rest.find(|c: char| c.is_whitespace() || c == '"' || c == '/').unwrap_or(rest.len());
    rest[..end].parse().ok()
}

// ---------------------------------------------------------------------------------------------
// The temporary media library
// ---------------------------------------------------------------------------------------------

/// Content of the canary outside the root; no response may ever contain it.
pub const CANARY_MARK: &[u8] = b"SLUICE-CANARY";

/// A fixed mtime (2021-01-01T00:00:00Z) so that Last-Modified is a strong validator.
pub const FIXTURE_MTIME: u64 = 1_609_459_200;

/// A temporary directory holding a media root and, beside it, files the root must not reach:
///
/// ```text
/// base/canary.txt              outside the root
/// base/root/t1.html            nginx's 1000-byte pattern
/// base/root/64k.bin, 1m.bin    deterministic pseudo-random bytes
/// base/root/sub/inner.txt
/// base/root/index-less/clip.txt   a directory without index.html
/// base/root/with-index/index.html
/// base/root/link-to-canary.txt -> base/canary.txt
/// base/root/outside-dir        -> base
/// ```
pub struct Fixture {
    pub base: PathBuf,
    pub root: PathBuf,
    pub canary: Vec<u8>,
}

static FIXTURE_SEQ: AtomicUsize = AtomicUsize::new(0);

impl Fixture {
    pub fn new() -> Fixture {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let base = std::env::temp_dir().join(format!(
            "sluice-it-{}-{}-{nanos}",
            std::process::id(),
            FIXTURE_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let root = base.join("root");
        std::fs::create_dir_all(&root).expect("create fixture root");
        let canary = format!("SLUICE-CANARY-{}-must-never-be-served\n", base.display()).into_bytes();
        let fx = Fixture { base: base.clone(), root: root.clone(), canary };
        std::fs::write(base.join("canary.txt"), &fx.canary).unwrap();
        fx.write("t1.html", &t1_html());
        fx.write("64k.bin", &pseudo_random(64 * 1024, 64));
        fx.write("1m.bin", &pseudo_random(1024 * 1024, 1024));
        fx.write("sub/inner.txt", b"inner file\n");
        fx.write("index-less/clip.txt", b"a clip\n");
        fx.write("with-index/index.html", b"<html><body>the index page</body></html>\n");
        std::os::unix::fs::symlink(base.join("canary.txt"), root.join("link-to-canary.txt")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("outside-dir")).unwrap();
        fx
    }

    /// Writes a file under the root (creating directories) with the fixed mtime.
    pub fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, bytes).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(FIXTURE_MTIME)).unwrap();
    }

    /// Creates a sparse file of `len` zero bytes under the root (no disk space used).
    pub fn sparse(&self, rel: &str, len: u64) {
        let path = self.root.join(rel);
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(len).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(FIXTURE_MTIME)).unwrap();
    }

    /// The bytes of a file under the root.
    pub fn file(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root.join(rel)).unwrap_or_else(|e| panic!("read fixture {rel}: {e}"))
    }

    /// The root as a command-line argument.
    pub fn root_arg(&self) -> String {
        self.root.to_str().expect("temp dir path is UTF-8").to_string()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // remove_dir_all does not follow the symlinks inside.
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// nginx's t1.html: `join('', map { sprintf "X%03dXXXXXX", $_ } (0 .. 99))`.
pub fn t1_html() -> Vec<u8> {
    (0..100).map(|i| format!("X{i:03}XXXXXX")).collect::<String>().into_bytes()
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1 client
// ---------------------------------------------------------------------------------------------

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

impl Response {
    /// First value of a header, name compared case-insensitively.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Every value of a header.
    pub fn headers_named(&self, name: &str) -> Vec<&str> {
        self.headers.iter().filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str()).collect()
    }

    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length").map(|v| v.trim().parse().expect("numeric Content-Length"))
    }

    /// Whether the response says the connection closes.
    pub fn says_close(&self) -> bool {
        self.headers_named("connection")
            .iter()
            .any(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
    }

    pub fn head_text(&self) -> String {
        String::from_utf8_lossy(&self.raw_head).into_owned()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
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
        let Some(head_end) = find(buf, b"\r\n\r\n") else {
            if buf.len() > 64 * 1024 {
                return Err(format!("response head over 64 KB: {:?}", lossy_prefix(buf, 300)));
            }
            return Ok(None);
        };
        let head = &buf[..head_end + 4];
        let text = std::str::from_utf8(&head[..head_end])
            .map_err(|_| format!("response head is not UTF-8: {:?}", lossy_prefix(head, 300)))?;
        let mut lines = text.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let mut parts = status_line.splitn(3, ' ');
        let version = parts.next().unwrap_or("").to_string();
        if !version.starts_with("HTTP/1.") {
            return Err(format!("not an HTTP/1.x status line: {:?}", lossy_prefix(buf, 300)));
        }
        let status: u16 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad status line {status_line:?}"))?;
        let reason = parts.next().unwrap_or("").to_string();
        let mut headers = Vec::new();
        for line in lines {
            let (name, value) = line.split_once(':').ok_or_else(|| format!("bad header line {line:?}"))?;
            if name.is_empty() || name.ends_with(' ') {
                return Err(format!("bad header name in {line:?}"));
            }
            headers.push((name.to_string(), value.trim().to_string()));
        }
        let mut resp =
            Response { version, status, reason, headers, body: Vec::new(), raw_head: head.to_vec() };
        let start = head.len();
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
        write!(
            f,
            "{}[body: {} bytes: {:?}]",
            self.head_text(),
            self.body.len(),
            lossy_prefix(&self.body, 200)
        )
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

// ---------------------------------------------------------------------------------------------
// Ranges
// ---------------------------------------------------------------------------------------------

/// `bytes FIRST-LAST/LEN` → (first, last, len).
pub fn parse_content_range(v: &str) -> Result<(u64, u64, u64), String> {
    let rest = v.trim().strip_prefix("bytes ").ok_or_else(|| format!("Content-Range {v:?} is not bytes"))?;
    let (span, len) = rest.split_once('/').ok_or_else(|| format!("Content-Range {v:?} has no /"))?;
    let (a, b) = span.split_once('-').ok_or_else(|| format!("Content-Range {v:?} has no -"))?;
    let p = |s: &str| s.trim().parse::<u64>().map_err(|_| format!("Content-Range {v:?}: bad number {s:?}"));
    let (a, b, len) = (p(a)?, p(b)?, p(len)?);
    if a > b || b >= len {
        return Err(format!("Content-Range {v:?} is not a valid span"));
    }
    Ok((a, b, len))
}

/// One part of a `multipart/byteranges` body.
#[derive(Debug)]
pub struct Part {
    pub content_type: Option<String>,
    pub range: (u64, u64, u64),
    pub data: Vec<u8>,
}

/// The boundary parameter of a `multipart/byteranges` Content-Type.
pub fn boundary_of(resp: &Response) -> Result<String, String> {
    let ct = resp.header("content-type").ok_or("no Content-Type")?;
    let (kind, params) =
        ct.split_once(';').ok_or_else(|| format!("Content-Type {ct:?} has no parameters"))?;
    if !kind.trim().eq_ignore_ascii_case("multipart/byteranges") {
        return Err(format!("Content-Type {ct:?} is not multipart/byteranges"));
    }
    for p in params.split(';') {
        if let Some((k, v)) = p.split_once('=') {
            if k.trim().eq_ignore_ascii_case("boundary") {
                let b = v.trim().trim_matches('"').to_string();
                if b.is_empty() {
                    return Err("empty boundary".into());
                }
                return Ok(b);
            }
        }
    }
    Err(format!("Content-Type {ct:?} has no boundary"))
}

/// Parses a `multipart/byteranges` response body. Each part's length is taken from its
/// Content-Range, so binary data that happens to contain the boundary does not confuse it.
pub fn parse_multipart(resp: &Response) -> Result<Vec<Part>, String> {
    let boundary = boundary_of(resp)?;
    let body = &resp.body;
    let delim = format!("--{boundary}").into_bytes();
    let first = find(body, &delim).ok_or("no boundary delimiter in the body")?;
    if !body[..first].iter().all(|b| b.is_ascii_whitespace()) {
        return Err(format!("unexpected preamble {:?}", lossy_prefix(&body[..first], 100)));
    }
    let mut pos = first;
    let mut parts = Vec::new();
    loop {
        if !body[pos..].starts_with(&delim) {
            return Err(format!(
                "expected a boundary at byte {pos}, found {:?}",
                lossy_prefix(&body[pos..], 60)
            ));
        }
        pos += delim.len();
        if body[pos..].starts_with(b"--") {
            pos += 2;
            if !body[pos..].iter().all(|b| b.is_ascii_whitespace()) {
                return Err(format!(
                    "bytes after the closing boundary: {:?}",
                    lossy_prefix(&body[pos..], 60)
                ));
            }
            return Ok(parts);
        }
        if !body[pos..].starts_with(b"\r\n") {
            return Err(format!("boundary not followed by CRLF at byte {pos}"));
        }
        pos += 2;
        let head_end = find(&body[pos..], b"\r\n\r\n").ok_or("part without a blank line")?;
        let head = std::str::from_utf8(&body[pos..pos + head_end]).map_err(|_| "part head is not UTF-8")?;
        pos += head_end + 4;
        let mut content_type = None;
        let mut range = None;
        for line in head.split("\r\n").filter(|l| !l.is_empty()) {
            let (n, v) = line.split_once(':').ok_or_else(|| format!("bad part header {line:?}"))?;
            if n.trim().eq_ignore_ascii_case("content-type") {
                content_type = Some(v.trim().to_string());
            } else if n.trim().eq_ignore_ascii_case("content-range") {
                range = Some(parse_content_range(v)?);
            }
        }
        let range = range.ok_or_else(|| format!("part without Content-Range: {head:?}"))?;
        let n = (range.1 - range.0 + 1) as usize;
        if body.len() < pos + n {
            return Err(format!("part {range:?} runs past the end of the body"));
        }
        let data = body[pos..pos + n].to_vec();
        pos += n;
        if !body[pos..].starts_with(b"\r\n") {
            return Err(format!("part {range:?} not followed by CRLF: {:?}", lossy_prefix(&body[pos..], 60)));
        }
        pos += 2;
        parts.push(Part { content_type, range, data });
    }
}

// ---------------------------------------------------------------------------------------------
// External tools
// ---------------------------------------------------------------------------------------------

/// The path of a tool the tests need; panics, saying how to get it, when it is missing.
pub fn require_tool(name: &str, package: &str) -> PathBuf {
    let preferred = Path::new("/usr/bin").join(name);
    if preferred.is_file() {
        return preferred;
    }
    if let Some(paths) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&paths) {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "`{name}` is not installed (Debian package `{package}`). This test needs it and does not \
         skip: run the project's test script (scripts/test), which installs it, or \
         `apt-get install {package}`."
    );
}

/// Video frames ffprobe decodes from `url` (HTTP, or RTSP over TCP), and what it printed on
/// stderr; panics when it fails.
pub fn ffprobe_video_frames(url: &str) -> (String, String) {
    let mut cmd = Command::new(require_tool("ffprobe", "ffmpeg"));
    for v in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    if url.starts_with("rtsp://") {
        cmd.args(["-rtsp_transport", "tcp"]);
    } else {
        cmd.args(["-rw_timeout", "10000000"]);
    }
    cmd.args(["-v", "error", "-count_frames", "-select_streams", "v:0"]);
    cmd.args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"]).arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&err).into_owned();
    assert!(status.success(), "ffprobe {url} failed ({status}): {stderr}");
    (String::from_utf8_lossy(&out).trim().trim_end_matches(',').to_string(), stderr)
}

/// Runs a command with a time limit (killing it by pid if it overruns); returns
/// (status, stdout, stderr).
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> (ExitStatus, Vec<u8>, Vec<u8>) {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, out_t.join().unwrap(), err_t.join().unwrap())
}

/// Polls `cond` every 50 ms until it is true or `limit` passes; returns whether it became true.
pub fn poll_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads one metric's value (the whole sample name, labels included) from `/metrics` text.
pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("{name}: {e}")) as u64
}

/// Scrapes `/metrics` over `c`, checking it is Prometheus text.
pub fn metrics(c: &mut Conn) -> String {
    c.send(get("/metrics", &[]));
    let r = c.response();
    r.expect_status(200, "/metrics");
    assert!(r.header("content-type").unwrap_or("").starts_with("text/plain; version=0.0.4"), "{r:?}");
    r.body_text()
}

/// Waits until the server's descriptor count is at most `baseline` (10 s at most).
pub fn wait_fds(server: &Server, baseline: usize, limit: Duration) -> Result<(), usize> {
    let mut last = 0;
    if poll_until(limit, || {
        last = server.fd_count();
        last <= baseline
    }) {
        Ok(())
    } else {
        Err(last)
    }
}

/// The descriptor count once the server is idle: after a warm-up request, when it stops changing.
pub fn idle_fd_baseline(server: &Server) -> usize {
    let mut c = Conn::open(server.addr());
    c.send(get("/t1.html", &[("Connection", "close")]));
    c.response().expect_status(200, "warm-up");
    assert!(c.wait_close(Duration::from_secs(5)).closed, "warm-up connection not closed");
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    // Stable over three samples 100 ms apart (bounded: 5 s).
    let mut samples = vec![server.fd_count()];
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        samples.push(server.fd_count());
        let n = samples.len();
        if n >= 3 && samples[n - 1] == samples[n - 2] && samples[n - 2] == samples[n - 3] {
            break;
        }
    }
    *samples.last().unwrap()
}
pub mod rtsp;

/// Prints a measured figure of a robustness test as one tab-separated line that
/// `scripts/robustness_table.py` collects into docs/ROBUSTNESS.md (visible with `--nocapture`).
pub fn record_figure(test: &str, engine: &[&str], figure: impl std::fmt::Display) {
    let engine: Vec<&str> = engine.iter().copied().filter(|a| !a.starts_with("--")).collect();
    println!("ROBUSTNESS\t{test}\t{}\t{figure}", engine.join(" "));
}
