//! RTMP ingest (`[rtmp] listen`, `--rtmp-listen`): encoders that publish over RTMP (OBS,
//! ffmpeg, hardware encoders) push H.264 and AAC to `rtmp://HOST:PORT/live/NAME`, which is the
//! live path `/live/NAME` (under `rtsp.live_prefix`), played by RTSP viewers as a path
//! published over RTSP is. A token for the access policies comes as `?token=` on the stream key
//! (`NAME?token=…`, presented as an RTSP publisher's Bearer token is), and the same `publish`
//! right decides.
//!
//! Owns the listener, a thread per connection (publishers are few, as camera sources are; see
//! [`crate::rtsp::camera`] for why not the tokio runtime) with its read timeouts, and dropping a
//! publisher whose media flowed and then stopped for `rtsp.publish_stall` (as an RTSP publisher
//! is). The exchange is [`session`]'s (sans-I/O), the reading of audio and video messages
//! `sluice_media::flv`'s; the live path and its viewers are sluice-rtsp's `LiveRegistry`. Nothing of RTMP
//! playback.

pub mod session;

use std::io::{self, Read, Write};
use std::net::{Shutdown as Both, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_engine::Shutdown;
use sluice_rtsp::{Catalogue, LiveRegistry};

use crate::rtsp::media::RtspMedia;
use session::{Gate, Progress, RtmpError, Session};

/// RTMP connections at once at most; one more is closed when accepted. Publishers are few, and
/// each connection is a thread.
const MAX_CONNECTIONS: usize = 64;

/// How often a connection's thread and the accepting one look at the shutdown signal.
const TICK: Duration = Duration::from_millis(100);

/// Longest a write to a publisher (acknowledgements, statuses) may block.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest a refused client is given to read why before the connection is closed.
const LINGER: Duration = Duration::from_secs(1);

/// Bytes read at once.
const READ_BUFFER: usize = 64 << 10;

impl Gate for RtspMedia {
    /// The RTSP `ANNOUNCE` check, with the token presented as an `Authorization: Bearer`.
    fn authorize(
        &self,
        path: &str,
        query: Option<&str>,
        token: Option<&str>,
        peer: SocketAddr,
    ) -> Result<(), u16> {
        let bearer = token.map(|t| format!("Bearer {t}"));
        Catalogue::authorize(self, "ANNOUNCE", path, path, query, bearer.as_deref(), peer.ip())
    }
}

/// Why a connection ended, for the log.
#[derive(Debug, thiserror::Error)]
enum Ended {
    #[error("{0}")]
    Rtmp(#[from] RtmpError),
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("it sent nothing for {0}")]
    Stalled(String),
    #[error("the server is stopping")]
    Stopping,
}

/// The RTMP listener's side of the server. See the module docs.
#[derive(Debug)]
pub struct RtmpIngest {
    media: Arc<RtspMedia>,
    registry: Arc<LiveRegistry>,
    /// Silence that drops a publisher whose media flows.
    stall: Duration,
    /// Silence that drops a connection before its media flows.
    idle: Duration,
    connections: AtomicUsize,
}

impl RtmpIngest {
    /// Publishers into `media`'s live paths (none without them), authorised by its access
    /// policies; one whose media flows is dropped after `stall` without a byte, a connection
    /// whose media does not flow yet after `idle` (an RTSP session's timeout).
    pub fn new(media: Arc<RtspMedia>, stall: Duration, idle: Duration) -> Option<RtmpIngest> {
        let registry = Arc::clone(media.live_registry()?);
        Some(RtmpIngest { media, registry, stall, idle, connections: AtomicUsize::new(0) })
    }

    /// The application publishers connect to (`live`).
    pub fn application(&self) -> String {
        self.registry.path_of("").trim_matches('/').to_string()
    }

    /// Accepts publishers on `listener` until `shutdown`, each on a thread of its own.
    pub fn run(self: Arc<Self>, listener: TcpListener, shutdown: Shutdown) {
        if let Err(e) = listener.set_nonblocking(true) {
            tracing::error!("RTMP: the listener cannot poll ({e}); RTMP is off");
            return;
        }
        while !shutdown.is_triggered() {
            let (stream, peer) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(TICK);
                    continue;
                }
                Err(e) => {
                    // Out of descriptors, say: the next accept may work once some close.
                    tracing::warn!("RTMP: accept failed: {e}");
                    std::thread::sleep(TICK);
                    continue;
                }
            };
            if self.connections.fetch_add(1, Ordering::AcqRel) >= MAX_CONNECTIONS {
                self.connections.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!("RTMP: {peer} closed: {MAX_CONNECTIONS} connections are open");
                continue;
            }
            let (ingest, shutdown) = (Arc::clone(&self), shutdown.clone());
            let spawned = std::thread::Builder::new().name("sluice-rtmp".into()).spawn(move || {
                ingest.connection(stream, peer, &shutdown);
                ingest.connections.fetch_sub(1, Ordering::AcqRel);
            });
            if let Err(e) = spawned {
                self.connections.fetch_sub(1, Ordering::AcqRel);
                tracing::warn!("RTMP: {peer} closed: no thread for it ({e})");
            }
        }
    }

    /// One connection, logged when it ends.
    fn connection(&self, stream: TcpStream, peer: SocketAddr, shutdown: &Shutdown) {
        let mut session = Session::new(peer, Arc::clone(&self.registry));
        let ended = self.exchange(&stream, &mut session, shutdown);
        let path = session.path().map(|p| format!(" of {p}")).unwrap_or_default();
        match ended {
            Ok(()) => tracing::debug!("RTMP publisher {peer}{path} finished"),
            Err(Ended::Rtmp(RtmpError::Refused(why))) => {
                tracing::info!("RTMP client {peer} refused: {why}");
                // Time to read why before the close, which unread input would turn into a reset.
                let _ = stream.shutdown(Both::Write);
                let _ = stream.set_read_timeout(Some(LINGER));
                let mut sink = [0u8; 4096];
                let until = Instant::now() + LINGER;
                while Instant::now() < until && matches!((&stream).read(&mut sink), Ok(n) if n > 0) {}
            }
            Err(e @ Ended::Stalled(_)) => tracing::warn!("RTMP publisher {peer}{path} dropped: {e}"),
            Err(e) => tracing::info!("RTMP publisher {peer}{path} ended: {e}"),
        }
        // Dropping the session ends its path.
        drop(session);
    }

    /// Reads and answers until the publisher finishes, fails, stalls or the server stops.
    fn exchange(
        &self,
        mut stream: &TcpStream,
        session: &mut Session,
        shutdown: &Shutdown,
    ) -> Result<(), Ended> {
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(TICK.min(self.stall)))?;
        stream.set_write_timeout(Some(WRITE_TIMEOUT))?;
        let mut buffer = vec![0u8; READ_BUFFER];
        let mut out = Vec::new();
        let mut last_input = Instant::now();
        loop {
            if shutdown.is_triggered() {
                return Err(Ended::Stopping);
            }
            let n = match stream.read(&mut buffer) {
                Ok(0) => return Ok(()),
                Ok(n) => n,
                Err(e) if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                    let limit = if session.is_flowing() { self.stall } else { self.idle };
                    if last_input.elapsed() >= limit {
                        return Err(Ended::Stalled(sluice_proto::duration_text::format(limit)));
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            let now = Instant::now();
            last_input = now;
            out.clear();
            let progress = session.receive(&buffer[..n], &*self.media, now, &mut out);
            if !out.is_empty() {
                stream.write_all(&out)?;
            }
            if progress? == Progress::Finished {
                return Ok(());
            }
        }
    }
}
