//! `sluice serve`: binding, the start-up line, and running the chosen engine until shutdown.
//!
//! Owns the assembly of a running server from a [`Config`]; what is checked before binding (and by
//! `serve --check`) is its child [`preflight`]. It does not parse the command line or set up
//! logging (the binary does) and holds no protocol or engine logic of its own.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_engine::rtsp::RtspSockets;
use sluice_engine::tls::{TlsCertificate, TlsService};
use sluice_engine::{Counters, EngineError, EngineKind, Listeners, Service, Shutdown};
use sluice_proto::http::HttpSession;
use sluice_proto::Clock;

use crate::config::Config;
use crate::http::app::{App, AppSettings, ConnectionHandler};
use crate::library::catalogue::{Catalogue, CATALOGUE_BYTES};
use crate::library::remote::RemoteLibrary;
use crate::library::{unpack_demo, Library};
use crate::ops::admin::{host_port, Admin, AdminService};
use crate::rtsp::media::RtspMedia;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The configuration is not usable.
    #[error(transparent)]
    Config(#[from] crate::config::ConfigError),
    /// An `[[access]]` policy's keys cannot be used.
    #[error(transparent)]
    Access(#[from] crate::access::AccessError),
    /// A `[[protect]]` entry's keys cannot be used.
    #[error(transparent)]
    Protect(#[from] crate::protect::ProtectError),
    /// The library directory cannot be opened.
    #[error("cannot open library {path}: {source}")]
    Library {
        /// The directory.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The object store or the cache in front of it cannot be set up.
    #[error("cannot serve the library in {location}: {}", one_line(reason))]
    RemoteLibrary {
        /// The store's location.
        location: String,
        /// The reason.
        reason: String,
    },
    /// Another process (most often a second edge started with the same `--cache-dir`) holds
    /// the cache directory.
    #[error("{0}; give each sluice its own --cache-dir")]
    CacheDirInUse(sluice_store::cache::CacheDirInUse),
    /// An address cannot be listened on (most often: another process holds the port).
    #[error("cannot listen on {addr} for {what}: {reason}; choose another address with {flag}")]
    Address {
        /// Which listener.
        what: &'static str,
        /// The flag (and `sluice.toml` key) that sets its address.
        flag: &'static str,
        /// The address asked for.
        addr: SocketAddr,
        /// The system's reason, in words.
        reason: String,
    },
    /// The certificate or key (`--tls-cert`, `--tls-key`) cannot be used.
    #[error(transparent)]
    Tls(#[from] sluice_engine::tls::TlsError),
    /// The engine failed to start or run.
    #[error(transparent)]
    Engine(#[from] sluice_engine::EngineError),
    /// The upload store or tokens cannot be set up.
    #[error(transparent)]
    Uploads(#[from] crate::http::upload::UploadSetupError),
    /// The store (`--store`) cannot be used: a location that does not parse, a directory that
    /// is not one, or an object store that does not answer (a missing bucket, refused
    /// credentials, nothing listening).
    #[error("cannot use the store {location}: {}", one_line(reason))]
    Store {
        /// The store's location.
        location: String,
        /// The reason.
        reason: String,
    },
    /// Two listeners of this server ask for the same address and port.
    #[error("{first} and {second} both ask for {addr}: each listener needs its own port")]
    SameAddress {
        /// The first listener's flag.
        first: &'static str,
        /// The second listener's flag.
        second: &'static str,
        /// The address both ask for.
        addr: SocketAddr,
    },
    /// The shutdown grace ran out with responses still in flight; they were cut off.
    #[error("the shutdown grace ({grace}) ran out: {responses} response(s) cut off")]
    GraceExpired {
        /// The grace, as configured.
        grace: String,
        /// Responses cut off when it ran out.
        responses: u64,
    },
}

impl ServeError {
    /// The process exit status this error calls for: 2 for what the user must change (usage,
    /// configuration, an address in use), 1 for failures at run time.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServeError::Config(_) | ServeError::Library { .. } | ServeError::Address { .. } => 2,
            ServeError::RemoteLibrary { .. } | ServeError::CacheDirInUse(_) => 2,
            ServeError::Uploads(_) | ServeError::Store { .. } | ServeError::SameAddress { .. } => 2,
            ServeError::Access(_) | ServeError::Protect(_) => 2,
            ServeError::Tls(_) => 2,
            ServeError::Engine(EngineError::Config(_)) => 2,
            ServeError::Engine(_) | ServeError::GraceExpired { .. } => 1,
        }
    }
}

mod preflight;

use preflight::tls_certificate;
pub use preflight::{
    certificate_expiry, certificate_note, check, ktls_note, log_certificate_expiry, preflight, probe_store,
    thumbnails_note, CERTIFICATE_WARNING_DAYS,
};

/// A store's error on one line (an S3 error document folded into its code and message).
pub use sluice_store::one_line;

/// The default cache directory of an s3:// library (`sluice-cache-PID` under the temporary
/// directory), private to this process and so removed when it stops; a `--cache-dir` the
/// operator chose is kept and reused.
#[derive(Debug)]
struct DefaultCacheDir(PathBuf);

impl Drop for DefaultCacheDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("cannot remove the cache directory {}: {e}", self.0.display());
            }
        }
    }
}

/// How often an edge started with `--store-wait` asks its store again.
const STORE_RETRY: Duration = Duration::from_secs(2);

/// Maps a bind failure to an error naming the listener and the flag that moves it.
fn address_error(what: &'static str, flag: &'static str) -> impl Fn(EngineError) -> ServeError {
    move |e| match e {
        EngineError::Listen { addr, source } => {
            let reason = match source.kind() {
                std::io::ErrorKind::AddrInUse => "the address is in use by another process".to_string(),
                std::io::ErrorKind::AddrNotAvailable => {
                    "no interface of this machine has that address".to_string()
                }
                std::io::ErrorKind::PermissionDenied => {
                    "permission denied (ports below 1024 need privileges)".to_string()
                }
                _ => source.to_string(),
            };
            ServeError::Address { what, flag, addr, reason }
        }
        other => ServeError::Engine(other),
    }
}

/// Asks the store again every [`STORE_RETRY`] until it answers (then the server is ready) or the
/// server shuts down.
fn wait_for_store(config: &Config, readiness: &crate::ops::admin::Readiness, shutdown: &Shutdown) {
    let mut since = Instant::now();
    while !shutdown.is_triggered() {
        if since.elapsed() >= STORE_RETRY {
            since = Instant::now();
            match probe_store(config) {
                Ok(()) => {
                    readiness.set_ready();
                    tracing::info!("the store answers: ready");
                    return;
                }
                Err(e) => readiness.set_unready(e.to_string()),
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The HTTP service: a session per connection over the shared app.
struct HttpService {
    app: Arc<App>,
    /// Header fields of every response: `Strict-Transport-Security` on the HTTPS listener.
    always: Arc<[(&'static str, sluice_proto::http::HeaderValue)]>,
}

impl Service for HttpService {
    type Session = HttpSession<ConnectionHandler>;

    fn session(&self, peer: SocketAddr, clock: &Clock) -> Self::Session {
        HttpSession::new(ConnectionHandler::new(Arc::clone(&self.app), peer, Arc::clone(&self.always)), clock)
    }
}

/// Warns once a day while the certificate has less than [`CERTIFICATE_WARNING_DAYS`] left (the
/// start-up line said it first), until the server stops.
fn warn_daily_of_expiry(certificate: &TlsCertificate, shutdown: &Shutdown, finished: &AtomicBool) {
    const DAY: Duration = Duration::from_secs(86_400);
    let mut last = Instant::now();
    while !shutdown.is_triggered() && !finished.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(250));
        if last.elapsed() >= DAY {
            last = Instant::now();
            if let (text, true) = certificate_expiry(certificate) {
                tracing::warn!("HTTPS: {text}: renew it (then SIGHUP reloads it)");
            }
        }
    }
}

/// The RTSP side, bound.
struct Rtsp {
    sockets: RtspSockets,
    /// Why this many loops, for the start-up line.
    loops_reason: String,
    config: sluice_rtsp::RtspConfig,
    media: Arc<RtspMedia>,
}

/// MP4s `first_stream_url` indexes at most to find one RTSP can stream.
const FIRST_STREAM_TRIES: usize = 16;

/// A server bound to its address, ready to run.
pub struct Server {
    app: Arc<App>,
    listeners: Listeners,
    rtsp: Option<Rtsp>,
    admin: Option<Listeners>,
    /// HTTPS: the certificate, and its own listener when HTTP keeps `listeners`.
    tls: Option<(Arc<TlsCertificate>, Option<Listeners>)>,
    counters: Arc<Counters>,
    demo: bool,
    /// Not ready until the store answers (`--store-wait`).
    readiness: crate::ops::admin::Readiness,
    /// The configuration, for asking the store again while not ready.
    config: Config,
    /// The camera sources, pulled while the server runs.
    sources: Option<Arc<crate::rtsp::camera::Sources>>,
    /// The recorder of live paths, when `[[record]]` rules are set.
    recorder: Option<Arc<crate::record::Recorder>>,
    /// RTMP publishers' listener (`--rtmp-listen`).
    rtmp: Option<(std::net::TcpListener, Arc<crate::rtmp::RtmpIngest>)>,
    /// Removed when the server is dropped.
    _default_cache_dir: Option<DefaultCacheDir>,
}

impl Server {
    /// Settles the engine (io_uring is probed here; `demanded` means a refusal is an error rather
    /// than a fall back to epoll), opens the library and binds the listening sockets.
    pub fn bind(mut config: Config, demanded: bool) -> Result<Server, ServeError> {
        preflight(&config)?;
        let (kind, fallback) = sluice_engine::resolve_engine(config.engine.kind, demanded)?;
        if let Some(reason) = fallback {
            tracing::warn!("{reason}");
            config.engine.kind = kind;
            // uring's default strategy (splice) is one epoll also has; an explicit one stays.
        }
        sluice_engine::check(&config.engine_config())?;
        let readiness = crate::ops::admin::Readiness::default();
        if let Err(e) = probe_store(&config) {
            if !config.store.wait {
                return Err(e);
            }
            tracing::warn!("not ready: {e}; asking again every {}s (--store-wait)", STORE_RETRY.as_secs());
            readiness.set_unready(e.to_string());
        }
        let default_cache_dir = (config.store.is_remote() && config.store.cache_dir_is_default())
            .then(|| DefaultCacheDir(config.store.cache_config().dir));
        let (root, demo) = match &config.library.root {
            Some(root) => (root.clone(), false),
            // An s3:// library is not the demo (its directory stays the uploads' local root).
            None => (
                unpack_demo().map_err(|source| ServeError::Library { path: std::env::temp_dir(), source })?,
                !config.store.is_remote(),
            ),
        };
        // One library for every route and protocol, with the one catalogue of MP4 indexes.
        let catalogue = Catalogue::new(CATALOGUE_BYTES, config.library.hls_segment);
        let library = match config.store.location.as_deref().filter(|_| config.store.is_remote()) {
            Some(location) => {
                let failed = |reason: String| ServeError::RemoteLibrary { location: location.into(), reason };
                let store = sluice_store::open(location, Some(config.store.s3_config()))
                    .map_err(|e| failed(e.to_string()))?;
                let remote = RemoteLibrary::open(Arc::from(store), config.store.cache_config(), location)
                    .map_err(|e| match e.dir_in_use() {
                        Some(busy) => ServeError::CacheDirInUse(busy.clone()),
                        None => failed(e.to_string()),
                    })?
                    .with_fetch_workers(config.store.fetch_workers);
                Library::remote(remote, catalogue)
            }
            None => Library::local(&root, catalogue)
                .map_err(|source| ServeError::Library { path: root.clone(), source })?,
        };
        let library = Arc::new(library.with_segment_cache(config.library.segment_cache));
        let access = crate::access::Access::load(&config.access)?;
        let access = (!access.is_open()).then(|| Arc::new(access));
        let protection = Arc::new(crate::protect::Protection::load(&config.protect)?);
        let rtsp = match config.rtsp.enabled {
            true => Some(Rtsp {
                sockets: RtspSockets::bind_in(config.rtsp.listen, config.rtsp_loops(), config.rtp_ports()?)
                    .map_err(address_error("RTSP", "--rtsp-listen (or --no-rtsp)"))?,
                loops_reason: config.rtsp_loops_reason(),
                config: config.rtsp_config(),
                media: Arc::new(
                    match &access {
                        Some(access) => RtspMedia::new(Arc::clone(&library)).with_access(Arc::clone(access)),
                        None => RtspMedia::new(Arc::clone(&library)),
                    }
                    .with_protection(Arc::clone(&protection))
                    .with_live(Arc::new(
                        sluice_rtsp::LiveRegistry::new(&config.rtsp.live_prefix)
                            .with_takeover(config.rtsp.publish_takeover),
                    )),
                ),
            }),
            false => None,
        };
        // Camera sources take their live paths now, so that no publisher takes one first.
        let sources = match rtsp.as_ref().and_then(|r| r.media.live_registry()) {
            Some(registry) if !config.source.is_empty() => Some(Arc::new(
                crate::rtsp::camera::Sources::new(
                    &config.source,
                    Arc::clone(registry),
                    config.rtsp.publish_stall,
                )
                .map_err(crate::config::ConfigError::Invalid)?,
            )),
            _ => None,
        };
        let rtmp = match (config.rtmp.listen, &rtsp) {
            (Some(addr), Some(rtsp)) => {
                let ingest = crate::rtmp::RtmpIngest::new(
                    Arc::clone(&rtsp.media),
                    config.rtsp.publish_stall,
                    config.rtsp.session_timeout,
                );
                let listener = std::net::TcpListener::bind(addr)
                    .map_err(|source| EngineError::Listen { addr, source })
                    .map_err(address_error("RTMP", "--rtmp-listen"))?;
                ingest.map(|ingest| (listener, Arc::new(ingest)))
            }
            _ => None,
        };
        let engine = config.engine_config();
        // The threads engine accepts on one socket, tokio on one per worker thread like the loops.
        let sockets = if engine.kind == EngineKind::Threads { 1 } else { engine.workers };
        let listeners =
            Listeners::bind(config.http.listen, sockets).map_err(address_error("HTTP", "--listen"))?;
        let tls = match tls_certificate(&config)? {
            Some(certificate) => {
                let own = match config.tls.listen {
                    Some(addr) => {
                        Some(Listeners::bind(addr, sockets).map_err(address_error("HTTPS", "--tls-listen"))?)
                    }
                    None => None,
                };
                Some((certificate, own))
            }
            None => None,
        };
        let admin = match config.admin.enabled {
            true => Some(
                Listeners::bind(config.admin.listen, 1)
                    .map_err(address_error("the admin endpoints", "--admin-listen (or --no-admin)"))?,
            ),
            false => None,
        };
        let counters = Counters::new();
        let settings = AppSettings {
            limits: config.protocol_limits(),
            max_ranges: config.library.max_ranges,
            access_log: config.http.access_log,
            bench: config.http.bench,
            rtsp: rtsp.as_ref().map(|r| r.sockets.local_addr()),
            engine,
        };
        let uploads = crate::http::upload::Uploads::open(&config.uploads, &config.store, &root)?;
        // Tiles are kept where uploads go: beside their titles, in the root or the bucket.
        let thumbnails = Arc::new(crate::thumbs::Thumbnails::new(
            &crate::thumbs::ThumbSettings::of(&config.library),
            Some(Arc::clone(uploads.store())),
        ));
        if let Err(why) = thumbnails.decoder() {
            tracing::warn!("thumbnails are off: {why}");
        }
        // An s3:// library's recordings grow in the spool and are uploaded where uploads go.
        let recorder = match rtsp.as_ref().and_then(|r| r.media.live_registry()) {
            Some(registry) if !config.record.is_empty() => Some(Arc::new(if config.store.is_remote() {
                crate::record::Recorder::new(
                    config.record.clone(),
                    &config.store.record_spool_dir(),
                    Arc::clone(registry),
                )
                .uploading_to(Arc::clone(uploads.store()), Arc::clone(&library))
            } else {
                crate::record::Recorder::new(config.record.clone(), &root, Arc::clone(registry))
            })),
            _ => None,
        };
        let clients = Arc::new(crate::http::limits::ClientLimits::new(config.clients.clone()));
        let app = Arc::new(
            App::new(library, settings, Arc::clone(&counters))
                .with_uploads(uploads)
                .with_access(access, clients)
                .with_protection(protection)
                .with_thumbnails(thumbnails)
                .with_live(rtsp.as_ref().and_then(|r| r.media.live_registry().cloned()), recorder.clone()),
        );
        Ok(Server {
            app,
            listeners,
            rtsp,
            admin,
            tls,
            counters,
            demo,
            readiness,
            config,
            sources,
            recorder,
            rtmp,
            _default_cache_dir: default_cache_dir,
        })
    }

    /// The admin listener's address, if it is on.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(Listeners::local_addr)
    }

    /// The `[[protect]]` entries in force (for reloading their keys).
    pub fn protection(&self) -> Arc<crate::protect::Protection> {
        Arc::clone(self.app.protection())
    }

    /// The certificate HTTPS presents, when it is on (for reloading it).
    pub fn tls_certificate(&self) -> Option<Arc<TlsCertificate>> {
        self.tls.as_ref().map(|(c, _)| Arc::clone(c))
    }

    /// The HTTPS address, when HTTPS is on (`--listen` itself when it serves HTTPS only).
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        let (_, own) = self.tls.as_ref()?;
        Some(own.as_ref().map_or_else(|| self.local_addr(), Listeners::local_addr))
    }

    /// The media engine's counters (open connections, RTSP sessions, ...).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// The first stream to try: the library's first MP4 RTSP can stream over RTSP when RTSP is
    /// on (of the first few, indexed here), else its first MP4 over HTTP; `None` for a library
    /// without one. An object store's MP4s are not indexed for it: start-up does not wait for
    /// the origin's `moov`s.
    pub fn first_stream_url(&self) -> Option<String> {
        let check = self.rtsp_addr().is_some() && self.app.library().as_remote().is_none();
        let files = self.app.library().files(1000);
        let mut mp4s =
            files.into_iter().filter(|(p, ..)| crate::library::names::is_mp4(p)).take(FIRST_STREAM_TRIES);
        // RTSP does not serve encrypted titles.
        let rtsp_ok = |p: &str| self.rtsp_addr().is_none() || !self.app.protection().guards(p);
        let (path, ..) = mp4s.find(|(p, ..)| {
            rtsp_ok(p) && (!check || self.app.offers(p.trim_start_matches('/'), None).rtsp)
        })?;
        let path: String = path
            .split('/')
            .map(|s| percent_encoding::utf8_percent_encode(s, crate::library::names::SEGMENT).to_string())
            .collect::<Vec<_>>()
            .join("/");
        Some(match self.rtsp_addr() {
            Some(rtsp) => format!("rtsp://{}{path}", host_port(rtsp)),
            None => {
                let scheme =
                    if self.tls.as_ref().is_some_and(|(_, own)| own.is_none()) { "https" } else { "http" };
                format!("{scheme}://{}{path}", host_port(self.local_addr()))
            }
        })
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
        let root = self.app.library().describe();
        let first_stream = self.first_stream_url();
        let sources = self.sources.clone();
        let recorder = self.recorder.clone();
        let admin = self.admin.map(|listeners| {
            let admin = Admin::new(
                Arc::clone(&self.app),
                addr,
                self.rtsp.as_ref().map(|r| r.sockets.local_addr()),
                shutdown.clone(),
            )
            .with_readiness(self.readiness.clone())
            .with_certificate(self.tls.as_ref().map(|(certificate, _)| Arc::clone(certificate)))
            .with_live(self.rtsp.as_ref().and_then(|r| r.media.live_registry().cloned()))
            .with_sources(self.sources.clone())
            .with_recorder(self.recorder.clone());
            (listeners, Arc::new(AdminService(Arc::new(admin))))
        });
        let service = Arc::new(HttpService { app: self.app, always: Arc::new([]) });
        let (config, readiness) = (&self.config, &self.readiness);
        let counters = &self.counters;
        // RTSP control connections and HTTP connections share --max-connections.
        counters.limit_connections(engine.max_connections);
        let grace = engine.shutdown_grace;
        let app = Arc::clone(&service.app);
        // When the shutdown was seen (within 20 ms of it) and how many responses had been cut by
        // then: responses cut after it, by a shutdown that took the whole grace, were cut by it.
        let seen = std::sync::Mutex::new(None::<(Instant, u64)>);
        let finished = AtomicBool::new(false);
        let certificate = self.tls.as_ref().map(|(certificate, _)| Arc::clone(certificate));
        let result = std::thread::scope(|scope| {
            let watcher = std::thread::Builder::new().name("sluice-grace".into()).spawn_scoped(scope, || {
                while !shutdown.is_triggered() {
                    if finished.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
                *seen = Some((Instant::now(), app.requests().cut_total()));
            });
            if let Err(source) = watcher {
                return Err(EngineError::Setup { what: "spawn grace watcher", source });
            }
            if let Some(certificate) = &certificate {
                log_certificate_expiry(certificate);
                let spawned = std::thread::Builder::new()
                    .name("sluice-cert-expiry".into())
                    .spawn_scoped(scope, || warn_daily_of_expiry(certificate, shutdown, &finished));
                if let Err(source) = spawned {
                    return Err(EngineError::Setup { what: "spawn certificate expiry watcher", source });
                }
            }
            if readiness.unready_reason().is_some() {
                let spawned = std::thread::Builder::new()
                    .name("sluice-store-wait".into())
                    .spawn_scoped(scope, || wait_for_store(config, readiness, shutdown));
                if let Err(source) = spawned {
                    return Err(EngineError::Setup { what: "spawn store wait", source });
                }
            }
            let admin = match admin {
                Some((listeners, service)) => {
                    tracing::info!(
                        "admin endpoints at http://{}/ (dashboard, /metrics, /healthz, /readyz, /streams)",
                        listeners.local_addr()
                    );
                    // Dashboards get a sample a second: a small send buffer is plenty, and it
                    // lets the send deadline find one that stopped reading within seconds.
                    listeners.cap_send_buffer(crate::ops::dashboard::SEND_BUFFER)?;
                    let sampler = Arc::clone(&service.0);
                    std::thread::Builder::new()
                        .name("sluice-dashboard".into())
                        .spawn_scoped(scope, move || sampler.run_sampler())
                        .map_err(|source| EngineError::Setup { what: "spawn dashboard sampler", source })?;
                    // Each dashboard's event stream waits for its next sample in a job: one job
                    // slot per stream (they wait, they do not compute), and a dashboard that
                    // stops reading is dropped once its socket stalls for `STALL`.
                    // `/healthz`, `/readyz` and `/metrics` must answer whatever other clients
                    // hold, and a place cannot be reserved for them: the path is unknown at
                    // accept. So at the cap the connection that has waited longest on its
                    // client (an idle keep-alive, a head never finished, a reader that stopped
                    // reading, a refused stream's lingering close) makes room for the newcomer;
                    // what the server is working on (a sample being awaited, a response being
                    // made) is never taken. Refused streams close (`Connection: close` on the
                    // 503) and idle connections go after `admin::KEEPALIVE`, so the cap is
                    // rarely reached; the reclaim is what makes it never lock anyone out.
                    let admin_engine = crate::ops::dashboard::page_engine(&engine);
                    let thread = std::thread::Builder::new()
                        .name("sluice-admin".into())
                        .spawn_scoped(scope, move || {
                            sluice_engine::run(&admin_engine, listeners, service, shutdown, &Counters::new())
                        })
                        .map_err(|source| EngineError::Setup { what: "spawn admin listener", source })?;
                    Some(thread)
                }
                None => None,
            };
            // One thread a camera source (see rtsp::camera for why not the tokio runtime), not
            // waited for at shutdown: one connecting to a camera that does not answer would hold
            // the exit for its connect timeout. Each ends its path when it sees the shutdown.
            for (index, sources) in sources.iter().flat_map(|s| (0..s.len()).map(move |i| (i, Arc::clone(s))))
            {
                let shutdown = shutdown.clone();
                std::thread::Builder::new()
                    .name(format!("sluice-source-{index}"))
                    .spawn(move || sources.run(index, &shutdown))
                    .map_err(|source| EngineError::Setup { what: "spawn camera source", source })?;
            }
            // The recorder is not waited for either: each of its turns leaves the files whole.
            if let Some(recorder) = recorder {
                let shutdown = shutdown.clone();
                std::thread::Builder::new()
                    .name("sluice-recorder".into())
                    .spawn(move || recorder.run(&shutdown))
                    .map_err(|source| EngineError::Setup { what: "spawn the recorder", source })?;
            }
            if let Some((listener, ingest)) = self.rtmp {
                // Announced before HTTP's line, which tells scripts the server is up.
                let addr = listener
                    .local_addr()
                    .map_err(|source| EngineError::Setup { what: "rtmp address", source })?;
                tracing::info!("listening on rtmp://{addr}/{} (publishers)", ingest.application());
                let shutdown = shutdown.clone();
                std::thread::Builder::new()
                    .name("sluice-rtmp-accept".into())
                    .spawn(move || ingest.run(listener, shutdown))
                    .map_err(|source| EngineError::Setup { what: "spawn rtmp listener", source })?;
            }
            let rtsp = match self.rtsp {
                Some(Rtsp { sockets, config, media, loops_reason }) => {
                    // Announced before HTTP's line, which tells scripts the server is up.
                    let ports: Vec<String> =
                        sockets.udp_ports().iter().map(|(rtp, rtcp)| format!("{rtp}-{rtcp}")).collect();
                    tracing::info!(
                        "listening on rtsp://{}/ loop={} loops={} ({loops_reason}) rtp_ports={} session_timeout={}",
                        sockets.local_addr(),
                        if engine.kind == EngineKind::Uring { "uring" } else { "epoll" },
                        sockets.loops(),
                        ports.join(","),
                        humantime::format_duration(config.session_timeout),
                    );
                    let kind = engine.kind;
                    let shutdown = shutdown.clone();
                    let thread = std::thread::Builder::new()
                        .name("sluice-rtsp".into())
                        .spawn_scoped(scope, move || {
                            let cores = crate::rtsp::cores::Cores::new(config, media);
                            sluice_engine::rtsp::run(kind, sockets, &cores, &shutdown, counters)
                        })
                        .map_err(|source| sluice_engine::EngineError::Setup {
                            what: "spawn rtsp loop",
                            source,
                        })?;
                    Some(thread)
                }
                None => None,
            };
            let (https_only, https) = match self.tls {
                Some((certificate, own)) => {
                    let kernel = self.config.tls.kernel;
                    tracing::info!("HTTPS: {}", ktls_note(kernel));
                    // RFC 6797 section 7.2: HSTS over HTTPS only, never on the plain HTTP listener.
                    let hsts =
                        config.tls.hsts.iter().map(|v| ("Strict-Transport-Security", v.clone().into()));
                    let https =
                        Arc::new(HttpService { app: Arc::clone(&service.app), always: hsts.collect() });
                    let tls = Arc::new(TlsService::new(https, certificate, Arc::clone(counters), kernel));
                    match own {
                        Some(listeners) => {
                            tracing::info!("listening on https://{}/", listeners.local_addr());
                            let engine = &engine;
                            let thread = std::thread::Builder::new()
                                .name("sluice-https".into())
                                .spawn_scoped(scope, move || {
                                    sluice_engine::run(engine, listeners, tls, shutdown, counters)
                                })
                                .map_err(|source| EngineError::Setup {
                                    what: "spawn https listener",
                                    source,
                                })?;
                            (None, Some(thread))
                        }
                        None => (Some(tls), None),
                    }
                }
                None => (None, None),
            };
            tracing::info!(
                "listening on {}://{addr} engine={} send={} {workers} library={}{}",
                if https_only.is_some() { "https" } else { "http" },
                engine.kind.name(),
                engine.send.name(),
                root,
                if self.demo { " (built-in demo)" } else { "" },
            );
            if let Some(url) = &first_stream {
                tracing::info!("try: {url}");
            }
            let http = match https_only {
                Some(tls) => sluice_engine::run(&engine, self.listeners, tls, shutdown, counters),
                None => sluice_engine::run(&engine, self.listeners, service, shutdown, counters),
            };
            // The RTSP loop and the admin listener stop on the same signal; an HTTP side that
            // failed takes them down.
            shutdown.trigger();
            finished.store(true, Ordering::Relaxed);
            let join =
                |t: Option<std::thread::ScopedJoinHandle<'_, Result<(), EngineError>>>, what: &str| match t {
                    Some(t) => {
                        t.join().unwrap_or_else(|_| Err(EngineError::Config(format!("the {what} panicked"))))
                    }
                    None => Ok(()),
                };
            let rtsp = join(rtsp, "rtsp loop");
            let admin = join(admin, "admin listener");
            let https = join(https, "https listener");
            http.and(rtsp).and(admin).and(https)
        });
        result?;
        let seen = *seen.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, cut_before)) = seen {
            let cut = app.requests().cut_total() - cut_before;
            if cut > 0 && at.elapsed() + Duration::from_millis(50) >= grace {
                let grace = humantime::format_duration(grace).to_string();
                tracing::warn!("stopped: the shutdown grace ({grace}) ran out; {cut} response(s) cut off");
                return Err(ServeError::GraceExpired { grace, responses: cut });
            }
        }
        tracing::info!("stopped");
        Ok(())
    }
}
