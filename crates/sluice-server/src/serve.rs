//! `sluice serve`: binding, the start-up line, and running the chosen engine until shutdown.
//!
//! Owns the assembly of a running server from a [`Config`]. It does not parse the command line or
//! set up logging (the binary does) and holds no protocol or engine logic of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use sluice_engine::rtsp::RtspSockets;
use sluice_engine::{Counters, EngineKind, Listeners, Service, Shutdown};
use sluice_proto::http::HttpSession;
use sluice_proto::Clock;

use crate::app::{App, AppSettings, ConnectionHandler};
use crate::config::Config;
use crate::library::{unpack_demo, Library};
use crate::media::MediaCatalogue;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is not usable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// The library directory cannot be opened.
    #[error("cannot open library {path}: {source}")]
    Library {
        /// The directory.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The engine failed to start or run.
    #[error(transparent)]
    Engine(#[from] sluice_engine::EngineError),
    /// The upload store or tokens cannot be set up.
    #[error(transparent)]
    Uploads(#[from] crate::upload::UploadSetupError),
}

/// The HTTP service: a session per connection over the shared app.
struct HttpService {
    app: Arc<App>,
}

impl Service for HttpService {
    type Session = HttpSession<ConnectionHandler>;

    fn session(&self, peer: SocketAddr, clock: &Clock) -> Self::Session {
        HttpSession::new(ConnectionHandler::new(Arc::clone(&self.app), peer), clock)
    }
}

/// The RTSP side, bound.
struct Rtsp {
    sockets: RtspSockets,
    config: sluice_media::rtsp::RtspConfig,
    media: Arc<MediaCatalogue>,
}

/// A server bound to its address, ready to run.
pub struct Server {
    app: Arc<App>,
    listeners: Listeners,
    rtsp: Option<Rtsp>,
    counters: Arc<Counters>,
    demo: bool,
}

impl Server {
    /// Settles the engine (io_uring is probed here; `demanded` means a refusal is an error rather
    /// than a fall back to epoll), opens the library and binds the listening sockets.
    pub fn bind(mut config: Config, demanded: bool) -> Result<Server, ServeError> {
        config.validate()?;
        let (kind, fallback) = sluice_engine::resolve_engine(config.engine.kind, demanded)?;
        if let Some(reason) = fallback {
            tracing::warn!("{reason}");
            config.engine.kind = kind;
            // uring's default strategy (splice) is one epoll also has; an explicit one stays.
        }
        sluice_engine::check(&config.engine_config())?;
        let (root, demo) = match &config.library.root {
            Some(root) => (root.clone(), false),
            None => (
                unpack_demo().map_err(|source| ServeError::Library { path: std::env::temp_dir(), source })?,
                true,
            ),
        };
        let open =
            || Library::open(&root).map_err(|source| ServeError::Library { path: root.clone(), source });
        let library = open()?;
        let rtsp = match config.rtsp.enabled {
            true => Some(Rtsp {
                sockets: RtspSockets::bind(config.rtsp.listen)?,
                config: config.rtsp_config(),
                media: Arc::new(MediaCatalogue::new(open()?)),
            }),
            false => None,
        };
        let engine = config.engine_config();
        // The threads engine accepts on one socket, tokio on one per worker thread like the loops.
        let sockets = if engine.kind == EngineKind::Threads { 1 } else { engine.workers };
        let listeners = Listeners::bind(config.http.listen, sockets)?;
        let counters = Counters::new();
        let settings = AppSettings {
            limits: config.protocol_limits(),
            max_ranges: config.library.max_ranges,
            access_log: config.http.access_log,
            bench: config.http.bench,
            engine,
        };
        let uploads = crate::upload::Uploads::open(&config.uploads, &config.store, &root)?;
        let app = Arc::new(App::new(library, settings, Arc::clone(&counters)).with_uploads(uploads));
        Ok(Server { app, listeners, rtsp, counters, demo })
    }

    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.listeners.local_addr()
    }

    /// The RTSP control address actually bound, if RTSP is on.
    pub fn rtsp_addr(&self) -> Option<SocketAddr> {
        self.rtsp.as_ref().map(|r| r.sockets.local_addr())
    }

    /// Serves until `shutdown` is triggered and in-flight responses are done.
    pub fn run(self, shutdown: &Shutdown) -> Result<(), ServeError> {
        let engine = self.app.settings().engine.clone();
        let addr = self.local_addr();
        let workers = match engine.kind {
            EngineKind::Epoll | EngineKind::Uring | EngineKind::Tokio => {
                format!("workers={}", engine.workers)
            }
            EngineKind::Threads => {
                format!("threads_mode={} pool_size={}", engine.threads_mode.name(), engine.pool_size)
            }
        };
        let root = self.app.library().root().display().to_string();
        let service = Arc::new(HttpService { app: self.app });
        let counters = &self.counters;
        std::thread::scope(|scope| {
            let rtsp = match self.rtsp {
                Some(Rtsp { sockets, config, media }) => {
                    // Announced before HTTP's line, which tells scripts the server is up.
                    let (rtp, rtcp) = sockets.udp_ports();
                    tracing::info!(
                        "listening on rtsp://{}/ loop={} rtp_ports={rtp}-{rtcp} session_timeout={}",
                        sockets.local_addr(),
                        if engine.kind == EngineKind::Uring { "uring" } else { "epoll" },
                        humantime::format_duration(config.session_timeout),
                    );
                    let kind = engine.kind;
                    let shutdown = shutdown.clone();
                    let thread = std::thread::Builder::new()
                        .name("sluice-rtsp".into())
                        .spawn_scoped(scope, move || {
                            sluice_engine::rtsp::run(kind, config, sockets, media, &shutdown, counters)
                        })
                        .map_err(|source| sluice_engine::EngineError::Setup {
                            what: "spawn rtsp loop",
                            source,
                        })?;
                    Some(thread)
                }
                None => None,
            };
            tracing::info!(
                "listening on http://{addr} engine={} send={} {workers} library={}{}",
                engine.kind.name(),
                engine.send.name(),
                root,
                if self.demo { " (built-in demo)" } else { "" },
            );
            let http = sluice_engine::run(&engine, self.listeners, service, shutdown, counters);
            if http.is_err() {
                // The RTSP loop stops on the same signal; an HTTP side that failed takes it down.
                shutdown.trigger();
            }
            let rtsp = match rtsp {
                Some(t) => t.join().unwrap_or_else(|_| {
                    Err(sluice_engine::EngineError::Config("the rtsp loop panicked".into()))
                }),
                None => Ok(()),
            };
            http.and(rtsp)
        })?;
        tracing::info!("stopped");
        Ok(())
    }
}
