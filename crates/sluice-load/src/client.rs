//! The minimal HTTP/1.1 client each virtual user or pooled connection runs: connect, write the
//! pre-rendered request, read with the sans-I/O [`ResponseReader`] into one reused buffer, classify
//! the ending into an [`Outcome`], all under one deadline. It owns the socket and the buffer; it
//! does not choose when to send (the closed and open models do) or aggregate anything (the
//! recorder does).

use std::io;
use std::pin::Pin;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::time::{Instant, Sleep};

use crate::stats::{ErrorKind, Outcome, RequestRecord};
use crate::target::{Method, Target};
use sluice_proto::client::http::{Progress, ResponseError, ResponseReader, MAX_HEAD_BYTES};

/// Bytes read per `read` call; also the largest response head accepted. Kept small because a run
/// may hold thousands of connections, each with its own buffer.
const READ_BUFFER_BYTES: usize = MAX_HEAD_BYTES;

/// Whether connections are kept for further requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionMode {
    /// Reuse each connection while the server allows it.
    #[default]
    KeepAlive,
    /// Open a new connection for every request (`Connection: close`).
    PerRequest,
}

/// Which statuses count as success.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExpectedStatus {
    /// Any 2xx status.
    #[default]
    Success,
    /// Exactly this status.
    Exactly(u16),
}

impl ExpectedStatus {
    fn accepts(self, status: u16) -> bool {
        match self {
            ExpectedStatus::Success => (200..300).contains(&status),
            ExpectedStatus::Exactly(s) => s == status,
        }
    }
}

/// One client connection (open or not yet opened) with its reused buffer and reader.
pub struct Connection {
    stream: Option<TcpStream>,
    buf: Box<[u8]>,
    reader: ResponseReader,
    mode: ConnectionMode,
    expected: ExpectedStatus,
    /// Reused deadline timer: resetting it costs less than creating one per request.
    deadline: Pin<Box<Sleep>>,
}

/// Timestamps of one exchange, filled in as it progresses.
struct Marks {
    connect: Option<Duration>,
    written: Option<Instant>,
    first_byte: Option<Instant>,
    bytes: u64,
    status: Option<u16>,
}

impl Connection {
    /// A connection that opens on first use.
    pub fn new(mode: ConnectionMode, expected: ExpectedStatus) -> Self {
        Connection {
            stream: None,
            buf: vec![0; READ_BUFFER_BYTES].into_boxed_slice(),
            reader: ResponseReader::new(),
            mode,
            expected,
            deadline: Box::pin(tokio::time::sleep_until(Instant::now())),
        }
    }

    /// Sends one request to `target` and reads its response. `origin` is when the latency clock
    /// started (scheduled time in the open model, start of the attempt in the closed model);
    /// `deadline` bounds connect, send and receive together.
    pub async fn request(&mut self, target: &Target, origin: Instant, deadline: Instant) -> RequestRecord {
        self.exchange_until(target, origin, deadline, None).await
    }

    /// Like [`Connection::request`], and returns the response body too (playlists and other small
    /// documents; a body over `limit` bytes fails as malformed).
    pub async fn request_keeping_body(
        &mut self,
        target: &Target,
        origin: Instant,
        deadline: Instant,
        limit: usize,
    ) -> (RequestRecord, Vec<u8>) {
        let record = self.exchange_until(target, origin, deadline, Some(limit)).await;
        (record, self.reader.take_body())
    }

    /// Body bytes of the last response (after chunked decoding; headers not counted).
    pub fn body_bytes(&self) -> u64 {
        self.reader.body_bytes()
    }

    async fn exchange_until(
        &mut self,
        target: &Target,
        origin: Instant,
        deadline: Instant,
        keep_body: Option<usize>,
    ) -> RequestRecord {
        let mut marks = Marks { connect: None, written: None, first_byte: None, bytes: 0, status: None };
        self.deadline.as_mut().reset(deadline);
        let result = {
            let exchange = exchange(
                &mut self.stream,
                &mut self.buf,
                &mut self.reader,
                self.mode,
                target,
                keep_body,
                &mut marks,
            );
            tokio::select! {
                biased;
                r = exchange => r,
                () = self.deadline.as_mut() => Err(ErrorKind::Timeout),
            }
        };
        let end = Instant::now();
        let outcome = match result {
            Ok(()) if self.expected.accepts(self.reader.status()) => Outcome::Ok,
            Ok(()) => Outcome::Failed(ErrorKind::BadStatus),
            Err(kind) => Outcome::Failed(kind),
        };
        let complete = result.is_ok();
        if !complete || !self.reader.keep_alive() || self.mode == ConnectionMode::PerRequest {
            // After an error or a timeout the connection's state is unknown: never reuse it.
            self.stream = None;
        }
        RequestRecord {
            target: 0,
            outcome,
            latency: end.saturating_duration_since(origin),
            connect: marks.connect,
            ttfb: match (marks.written, marks.first_byte) {
                (Some(w), Some(f)) => Some(f.saturating_duration_since(w)),
                _ => None,
            },
            download: match marks.first_byte {
                Some(f) if complete => Some(end.saturating_duration_since(f)),
                _ => None,
            },
            status: marks.status,
            bytes: marks.bytes,
        }
    }

    /// Closes the connection (if open).
    pub fn close(&mut self) {
        self.stream = None;
    }
}

/// Connect if needed, write, read to the end of the response.
async fn exchange(
    stream: &mut Option<TcpStream>,
    buf: &mut [u8],
    reader: &mut ResponseReader,
    mode: ConnectionMode,
    target: &Target,
    keep_body: Option<usize>,
    marks: &mut Marks,
) -> Result<(), ErrorKind> {
    if stream.is_none() {
        let started = Instant::now();
        let s = TcpStream::connect(target.addr).await.map_err(|e| classify(&e))?;
        // Requests are small and single-segment; Nagle would only add delay.
        let _ = s.set_nodelay(true);
        marks.connect = Some(started.elapsed());
        *stream = Some(s);
    }
    let Some(s) = stream.as_mut() else { return Err(ErrorKind::Other) };
    let request = match mode {
        ConnectionMode::KeepAlive => &target.request_keep_alive,
        ConnectionMode::PerRequest => &target.request_close,
    };
    s.write_all(request).await.map_err(|e| classify(&e))?;
    marks.written = Some(Instant::now());
    match keep_body {
        Some(limit) => reader.start_keeping_body(target.method == Method::Head, limit),
        None => reader.start(target.method == Method::Head),
    }
    let mut filled = 0;
    loop {
        let n = match s.read(&mut buf[filled..]).await {
            Ok(n) => n,
            Err(e) => return Err(classify(&e)),
        };
        if n == 0 {
            return reader.finish().map_err(response_error);
        }
        if marks.first_byte.is_none() {
            marks.first_byte = Some(Instant::now());
        }
        marks.bytes += n as u64;
        filled += n;
        let progress = reader.feed(&buf[..filled]).map_err(response_error);
        if reader.head_done() && marks.status.is_none() {
            marks.status = Some(reader.status());
        }
        match progress? {
            Progress::Complete { consumed } => {
                if consumed < filled {
                    // Bytes beyond the response on a connection without pipelining: the framing
                    // is not what it claimed, so the connection must not be reused.
                    *stream = None;
                } else {
                    // The response is complete and nothing else is expected before the next
                    // request. Forget the cached read readiness now, so the next response is
                    // awaited through epoll instead of first costing a read that returns
                    // EAGAIN (one system call per request; wrk does not pay it either). A
                    // close or reset arriving later raises a fresh edge, and every wait has
                    // the request deadline behind it.
                    let _ = s.try_io(Interest::READABLE, || Err::<(), _>(io::ErrorKind::WouldBlock.into()));
                }
                return Ok(());
            }
            Progress::NeedMore { consumed } => {
                buf.copy_within(consumed..filled, 0);
                filled -= consumed;
                if filled == buf.len() {
                    return Err(ErrorKind::Malformed);
                }
            }
        }
    }
}

fn response_error(e: ResponseError) -> ErrorKind {
    match e {
        ResponseError::PrematureClose => ErrorKind::PrematureClose,
        ResponseError::ShortBody => ErrorKind::ShortBody,
        ResponseError::Malformed(_) => ErrorKind::Malformed,
    }
}

/// Maps a socket error to the kind reports count.
pub fn classify(e: &io::Error) -> ErrorKind {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => ErrorKind::Refused,
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => ErrorKind::Reset,
        // Writing to a connection the server already closed.
        io::ErrorKind::BrokenPipe | io::ErrorKind::UnexpectedEof => ErrorKind::PrematureClose,
        io::ErrorKind::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_errors_are_classified() {
        let k = |kind| classify(&io::Error::from(kind));
        assert_eq!(k(io::ErrorKind::ConnectionRefused), ErrorKind::Refused);
        assert_eq!(k(io::ErrorKind::ConnectionReset), ErrorKind::Reset);
        assert_eq!(k(io::ErrorKind::BrokenPipe), ErrorKind::PrematureClose);
        assert_eq!(k(io::ErrorKind::PermissionDenied), ErrorKind::Other);
    }

    #[test]
    fn expected_status() {
        assert!(ExpectedStatus::Success.accepts(204));
        assert!(!ExpectedStatus::Success.accepts(304));
        assert!(ExpectedStatus::Exactly(404).accepts(404));
        assert!(!ExpectedStatus::Exactly(200).accepts(201));
    }
}
