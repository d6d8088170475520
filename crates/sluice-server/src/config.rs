//! `sluice.toml`: every setting of `sluice serve`, with the defaults that make it work with no
//! file at all.
//!
//! Owns the file's schema, its defaults and its validation. It does not own the command line (the
//! binary maps each flag onto a field here, so a flag always overrides the file).

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sluice_engine::{EngineConfig, EngineKind, SendStrategy, ThreadsMode};
use sluice_proto::http::Limits;

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[http]`: where and how HTTP is served.
    pub http: HttpSection,
    /// `[rtsp]`: where and how RTSP/RTP is served.
    pub rtsp: RtspSection,
    /// `[admin]`: the operational endpoints' own listener.
    pub admin: AdminSection,
    /// `[library]`: what is served.
    pub library: LibrarySection,
    /// `[engine]`: the I/O path.
    pub engine: EngineSection,
    /// `[limits]`: deadlines and sizes.
    pub limits: LimitsSection,
    /// `[log]`: logging.
    pub log: LogSection,
    /// `[store]`: where uploads go (the library root unless set); an `s3://` store is also the
    /// library, read through a local cache.
    pub store: crate::upload::StoreSection,
    /// `[uploads]`: who may upload, and how much.
    pub uploads: crate::upload::UploadsSection,
    /// `[[access]]`: who may read what, per path prefix (everything is open without one).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub access: Vec<crate::access::AccessPolicy>,
    /// `[clients]`: limits per client address.
    pub clients: crate::limits::ClientsSection,
    /// `[tls]`: HTTPS.
    pub tls: TlsSection,
}

/// `[tls]`: HTTPS with a certificate and key in PEM files (read again on SIGHUP).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct TlsSection {
    /// The certificate chain (PEM), server certificate first.
    pub cert: Option<PathBuf>,
    /// The private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: Option<PathBuf>,
    /// Where HTTPS listens, HTTP staying on `http.listen`; unset with a certificate: `http.listen`
    /// serves HTTPS only.
    #[serde(deserialize_with = "optional_listen_address")]
    pub listen: Option<SocketAddr>,
}

impl TlsSection {
    /// Whether HTTPS is on.
    pub fn enabled(&self) -> bool {
        self.cert.is_some()
    }
}

fn optional_listen_address<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    listen_address(d).map(Some)
}

/// `[http]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSection {
    /// Address and port to listen on.
    #[serde(deserialize_with = "listen_address")]
    pub listen: SocketAddr,
    /// Whether to log a line per request.
    pub access_log: bool,
    /// Whether to serve the benchmark endpoints under `/bench/` (off unless asked for: they
    /// would shadow a library folder named `bench`).
    pub bench: bool,
}

impl Default for HttpSection {
    fn default() -> Self {
        HttpSection { listen: SocketAddr::from(([127, 0, 0, 1], 8080)), access_log: true, bench: false }
    }
}

/// `[admin]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminSection {
    /// Whether to serve `/metrics`, `/healthz`, `/readyz` and `/streams` at all.
    pub enabled: bool,
    /// Address and port of the admin listener (loopback by default: metrics are not public).
    #[serde(deserialize_with = "listen_address")]
    pub listen: SocketAddr,
}

impl Default for AdminSection {
    fn default() -> Self {
        AdminSection { enabled: true, listen: SocketAddr::from(([127, 0, 0, 1], 9090)) }
    }
}

/// `[rtsp]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct RtspSection {
    /// Whether to serve RTSP at all.
    pub enabled: bool,
    /// Address and port of the RTSP control listener; the RTP/RTCP UDP ports are a free even/odd
    /// pair on the same address.
    #[serde(deserialize_with = "listen_address")]
    pub listen: SocketAddr,
    /// A session with no request or RTCP report for this long is released.
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub session_timeout: Duration,
    /// Largest RTP payload in bytes (a path MTU of 1500 leaves 1472 after IP and UDP, 1460 after
    /// the RTP header; 1400 leaves room for tunnels).
    #[serde(deserialize_with = "sluice_proto::size_text::deserialize")]
    pub max_payload: usize,
    /// Viewers (sessions) served at once at most; one more is answered 453 Not Enough Bandwidth.
    pub max_viewers: usize,
    /// When one more viewer would take more than the RTSP loop has left: `refuse` answers it 453
    /// and keeps the others perfect, `degrade` admits it and every late viewer drops frames up to
    /// its next keyframe.
    pub overload: RtspOverload,
    /// RTSP loops (threads), each with its own RTP/RTCP ports; clients are spread over them by
    /// address. Unset: one on a machine with 2 cores or fewer, else one per engine worker.
    pub loops: Option<usize>,
    /// The UDP ports RTP and RTCP may use (`30000-30100`), for firewalls: each loop takes an
    /// even port and the odd one after it from the range. Unset: any free pair.
    pub rtp_ports: Option<String>,
}

/// `rtsp.overload`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum RtspOverload {
    /// Refuse newcomers with 453.
    Refuse,
    /// Admit them; the late viewers drop frames.
    #[default]
    Degrade,
}

impl RtspOverload {
    /// Every policy, by name.
    pub const ALL: [RtspOverload; 2] = [RtspOverload::Refuse, RtspOverload::Degrade];

    /// The name in the settings and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            RtspOverload::Refuse => "refuse",
            RtspOverload::Degrade => "degrade",
        }
    }
}

impl std::str::FromStr for RtspOverload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        RtspOverload::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| format!("not refuse or degrade: {s}"))
    }
}

impl Default for RtspSection {
    fn default() -> Self {
        RtspSection {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 8554)),
            session_timeout: Duration::from_secs(60),
            max_payload: 1400,
            max_viewers: 10_000,
            overload: RtspOverload::Degrade,
            loops: None,
            rtp_ports: None,
        }
    }
}

/// `[library]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LibrarySection {
    /// The directory to serve; unset serves the built-in demo library.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub root: Option<PathBuf>,
    /// Most ranges honoured in one request; more gets the whole file (200). 0 disables ranges.
    pub max_ranges: usize,
    /// Target duration of an HLS segment: each MP4's segments are cut at the first keyframe at
    /// least this long after the segment's start.
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub hls_segment: Duration,
}

impl Default for LibrarySection {
    fn default() -> Self {
        LibrarySection { root: None, max_ranges: 64, hls_segment: Duration::from_secs(6) }
    }
}

/// `[engine]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSection {
    /// `uring`, `epoll`, `threads` or `tokio`.
    #[serde(deserialize_with = "from_str", serialize_with = "named")]
    pub kind: EngineKind,
    /// `sendfile`, `splice` or `copy`; unset means the engine's zero-copy default (`splice` on
    /// uring, which has no `sendfile`; `sendfile` elsewhere).
    #[serde(
        deserialize_with = "some_from_str",
        serialize_with = "some_named",
        skip_serializing_if = "Option::is_none"
    )]
    pub send: Option<SendStrategy>,
    /// Event loops; unset means one per core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workers: Option<usize>,
    /// `pool` or `per-connection` (threads engine).
    #[serde(deserialize_with = "from_str", serialize_with = "named")]
    pub threads_mode: ThreadsMode,
    /// Threads in the pool (threads engine).
    pub pool_size: usize,
    /// Most open connections.
    pub max_connections: usize,
    /// Threads for CPU-bound work on the event-loop engines; unset means one per core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_workers: Option<usize>,
    /// Most CPU jobs queued or running at once; beyond it requests get 503.
    pub cpu_queue: usize,
}

impl Default for EngineSection {
    fn default() -> Self {
        let e = EngineConfig::default();
        EngineSection {
            kind: e.kind,
            send: None,
            workers: None,
            threads_mode: e.threads_mode,
            pool_size: e.pool_size,
            max_connections: e.max_connections,
            cpu_workers: None,
            cpu_queue: e.cpu_queue,
        }
    }
}

/// `[limits]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Time allowed for a request head, from its first byte (or from connect).
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub header_timeout: Duration,
    /// Idle time allowed between requests on a kept-alive connection.
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub keepalive_timeout: Duration,
    /// Longest pause between reads of a request body.
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub body_timeout: Duration,
    /// Longest time without send progress before a client is dropped.
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub send_timeout: Duration,
    /// Time shutdown allows in-flight responses to finish.
    #[serde(deserialize_with = "duration", serialize_with = "sluice_proto::duration_text::serialize")]
    pub shutdown_grace: Duration,
    /// Longest request line (414 beyond).
    #[serde(deserialize_with = "sluice_proto::size_text::deserialize")]
    pub max_request_line: usize,
    /// Longest request head (431 beyond).
    #[serde(deserialize_with = "sluice_proto::size_text::deserialize")]
    pub max_head: usize,
    /// Largest unwanted request body read and discarded (413 beyond).
    #[serde(deserialize_with = "sluice_proto::size_text::deserialize")]
    pub max_discarded_body: u64,
    /// Most pipelined responses queued per connection.
    pub max_pipelined: usize,
    /// Most requests per connection.
    pub max_requests_per_connection: u64,
}

impl Default for LimitsSection {
    fn default() -> Self {
        let l = Limits::default();
        let e = EngineConfig::default();
        LimitsSection {
            header_timeout: l.header_timeout,
            keepalive_timeout: l.keepalive_timeout,
            body_timeout: l.body_timeout,
            send_timeout: e.send_timeout,
            shutdown_grace: e.shutdown_grace,
            max_request_line: l.max_request_line,
            max_head: l.max_head,
            max_discarded_body: l.max_discarded_body,
            max_pipelined: l.max_pipelined,
            max_requests_per_connection: l.max_requests_per_connection,
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// For people.
    #[default]
    Human,
    /// One JSON object per line, for log pipelines.
    Json,
}

impl LogFormat {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [LogFormat; 2] = [LogFormat::Human, LogFormat::Json];

    /// The name used on the command line and in `sluice.toml`.
    pub fn name(self) -> &'static str {
        match self {
            LogFormat::Human => "human",
            LogFormat::Json => "json",
        }
    }
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "human" => Ok(LogFormat::Human),
            "json" => Ok(LogFormat::Json),
            _ => Err(format!("unknown log format `{s}` (expected human or json)")),
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    /// `human` or `json`.
    pub format: LogFormat,
    /// A `tracing` filter: `info`, `debug`, `sluice=debug,info`, …
    pub level: String,
    /// Append logs to this file instead of stderr; reopened on SIGUSR1 (for logrotate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection { format: LogFormat::Human, level: "info".into(), file: None }
    }
}

/// Why a configuration could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The file is not valid.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// Where (1-based), when the parser knows.
        line: usize,
        /// Column (1-based).
        column: usize,
        /// What is wrong and, for a value of the wrong type, the expected form.
        message: String,
    },
    /// A value is out of range.
    #[error("invalid setting: {0}")]
    Invalid(String),
}

impl Config {
    /// Reads and validates a `sluice.toml`.
    pub fn from_file(path: &std::path::Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
        Config::from_text(&text).map_err(|(line, column, message)| ConfigError::Parse {
            path: path.to_owned(),
            line,
            column,
            message,
        })
    }

    /// Parses `sluice.toml` text; an error is its line, column and one-line message.
    pub fn from_text(text: &str) -> Result<Config, (usize, usize, String)> {
        toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start).min(text.len());
            let before = &text[..at];
            let line = before.matches('\n').count() + 1;
            let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
            (line, column, e.message().trim().replace('\n', " "))
        })
    }

    /// The settings as `sluice.toml` text, with the engine's defaults filled in (`--check`).
    pub fn effective_toml(&self) -> String {
        let mut c = self.clone();
        let e = self.engine_config();
        c.engine.send = Some(e.send);
        c.engine.workers = Some(e.workers);
        c.engine.cpu_workers = Some(e.cpu_workers);
        toml::to_string(&c).unwrap_or_else(|e| format!("# cannot render the settings: {e}\n"))
    }

    /// Checks values that parse but cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.engine.workers == Some(0) {
            return bad("engine.workers must be at least 1");
        }
        if self.engine.cpu_workers == Some(0) || self.engine.cpu_queue == 0 {
            return bad("engine.cpu_workers and engine.cpu_queue must be at least 1");
        }
        if self.engine.pool_size == 0 {
            return bad("engine.pool_size must be at least 1");
        }
        if self.limits.max_pipelined == 0 {
            return bad("limits.max_pipelined must be at least 1");
        }
        if self.limits.max_request_line < 64 || self.limits.max_head < self.limits.max_request_line {
            return bad(
                "limits.max_head must be at least limits.max_request_line, which must be at least 64",
            );
        }
        if self.limits.header_timeout.is_zero() || self.limits.send_timeout.is_zero() {
            return bad("timeouts must be longer than zero");
        }
        if self.rtsp.session_timeout.is_zero() {
            return bad("rtsp.session_timeout must be longer than zero");
        }
        if !(200..=65_000).contains(&self.rtsp.max_payload) {
            return bad("rtsp.max_payload must be between 200 and 65000 bytes");
        }
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            return bad("tls.cert and tls.key (--tls-cert, --tls-key) go together");
        }
        if self.tls.listen.is_some() && !self.tls.enabled() {
            return bad("tls.listen (--tls-listen) needs tls.cert and tls.key (--tls-cert, --tls-key)");
        }
        if self.rtsp.max_viewers == 0 {
            return bad("rtsp.max_viewers must be at least 1");
        }
        let max_loops = sluice_engine::rtsp::MAX_RTSP_LOOPS;
        if self.rtsp.loops.is_some_and(|n| !(1..=max_loops).contains(&n)) {
            return Err(ConfigError::Invalid(format!("rtsp.loops must be between 1 and {max_loops}")));
        }
        self.rtp_ports()?;
        Ok(())
    }

    /// `rtsp.rtp_ports` (`--rtsp-rtp-ports`) as a range, checked to hold an even/odd pair for
    /// each RTSP loop; `None` when unset.
    pub fn rtp_ports(&self) -> Result<Option<std::ops::RangeInclusive<u16>>, ConfigError> {
        let Some(text) = &self.rtsp.rtp_ports else { return Ok(None) };
        let bad =
            |why: String| ConfigError::Invalid(format!("rtsp.rtp_ports (--rtsp-rtp-ports) `{text}`: {why}"));
        let (first, last) =
            text.split_once('-').ok_or_else(|| bad("expected FIRST-LAST, e.g. 30000-30100".into()))?;
        let port = |p: &str| p.trim().parse::<u16>().ok().filter(|p| *p > 0);
        let (Some(first), Some(last)) = (port(first), port(last)) else {
            return Err(bad("ports are 1 to 65535".into()));
        };
        if first > last {
            return Err(bad("the first port is after the last".into()));
        }
        let pairs = sluice_engine::rtsp::pairs_in(first..=last);
        let loops = if self.rtsp.enabled { self.rtsp_loops() } else { 1 };
        if pairs < loops {
            return Err(bad(format!(
                "it holds {pairs} even/odd RTP/RTCP pair(s) and the {loops} RTSP loop(s) need one each"
            )));
        }
        Ok(Some(first..=last))
    }

    /// RTSP loops to run: `rtsp.loops`, else one on a machine with 2 cores or fewer (the loop
    /// and the HTTP side share them; a second loop would only compete) and one per engine worker
    /// on a larger one.
    pub fn rtsp_loops(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let per_worker = self.engine_config().workers.clamp(1, sluice_engine::rtsp::MAX_RTSP_LOOPS);
        self.rtsp.loops.unwrap_or(if cores <= 2 { 1 } else { per_worker })
    }

    /// Why [`Config::rtsp_loops`] is what it is, for the start-up line.
    pub fn rtsp_loops_reason(&self) -> String {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match self.rtsp.loops {
            Some(_) => "set".into(),
            None if cores <= 2 => format!("default on {cores} cores"),
            None => format!("default: one per worker on {cores} cores"),
        }
    }

    /// The RTSP side's settings (the UDP ports are filled in once bound).
    pub fn rtsp_config(&self) -> sluice_media::rtsp::RtspConfig {
        sluice_media::rtsp::RtspConfig {
            session_timeout: self.rtsp.session_timeout,
            max_payload: self.rtsp.max_payload,
            access_log: self.http.access_log,
            max_viewers: self.rtsp.max_viewers,
            max_sessions_per_ip: self.clients.rtsp_sessions_per_ip,
            overload: match self.rtsp.overload {
                RtspOverload::Refuse => sluice_media::rtsp::Overload::Refuse,
                RtspOverload::Degrade => sluice_media::rtsp::Overload::Degrade,
            },
            ..sluice_media::rtsp::RtspConfig::default()
        }
    }

    /// The protocol limits these settings describe.
    pub fn protocol_limits(&self) -> Limits {
        let l = &self.limits;
        Limits {
            max_request_line: l.max_request_line,
            max_head: l.max_head,
            max_discarded_body: l.max_discarded_body,
            header_timeout: l.header_timeout,
            keepalive_timeout: l.keepalive_timeout,
            body_timeout: l.body_timeout,
            max_requests_per_connection: l.max_requests_per_connection,
            max_pipelined: l.max_pipelined,
        }
    }

    /// The engine settings these settings describe.
    pub fn engine_config(&self) -> EngineConfig {
        let e = &self.engine;
        EngineConfig {
            kind: e.kind,
            send: e.send.unwrap_or(e.kind.default_send()),
            workers: e.workers.unwrap_or_else(|| EngineConfig::default().workers),
            threads_mode: e.threads_mode,
            pool_size: e.pool_size,
            send_timeout: self.limits.send_timeout,
            shutdown_grace: self.limits.shutdown_grace,
            max_connections: e.max_connections,
            cpu_workers: e.cpu_workers.unwrap_or_else(|| EngineConfig::default().cpu_workers),
            cpu_queue: e.cpu_queue,
        }
    }
}

/// The one duration parser of `sluice serve` and `sluice load`: `10s`, `250ms`, `1m30s`, `1.5s`.
pub use sluice_proto::duration_text::format as format_duration;
pub use sluice_proto::duration_text::parse as parse_duration;
/// The one size parser of every flag and key that is a size: `512`, `64MiB`, `1M`, `50KB`, `1.5GB`.
pub use sluice_proto::size_text::parse as parse_size;

/// Parses a listening address: `127.0.0.1:8080`, `[::]:8080`, `localhost:8080`, or a port alone
/// (`8080`), which keeps the default host 127.0.0.1 (serving beyond this machine is asked for by
/// naming an address, e.g. `0.0.0.0:8080`).
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    let text = text.trim();
    if let Ok(port) = text.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let form = "an address such as 127.0.0.1:8080, localhost:8080, [::]:8080 or a port such as 8080";
    if !text.contains(':') {
        return Err(format!("`{text}` is not {form}"));
    }
    let addrs: Vec<SocketAddr> =
        text.to_socket_addrs().map_err(|e| format!("`{text}`: {e} (expected {form})"))?.collect();
    // IPv4 first: `localhost` means 127.0.0.1 to most clients a user will try.
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or(addrs.first())
        .copied()
        .ok_or_else(|| format!("`{text}` resolves to no address"))
}

/// Reads a value from a string with `parse`; any other type is an error that names the form.
struct TextVisitor<T> {
    form: &'static str,
    parse: fn(&str) -> Result<T, String>,
}

impl<T> serde::de::Visitor<'_> for TextVisitor<T> {
    type Value = T;
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.form)
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<T, E> {
        (self.parse)(v).map_err(E::custom)
    }
}

pub(crate) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    d.deserialize_str(TextVisitor {
        form: "a duration in quotes, such as \"10s\" or \"1.5s\"",
        parse: parse_duration,
    })
}

fn listen_address<'de, D: Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    d.deserialize_str(TextVisitor {
        form: "an address in quotes, such as \"127.0.0.1:8080\" or \"localhost:8080\"",
        parse: parse_listen,
    })
}

fn some_from_str<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(d: D) -> Result<Option<T>, D::Error> {
    from_str(d).map(Some)
}

fn from_str<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(d: D) -> Result<T, D::Error> {
    d.deserialize_str(TextVisitor { form: "a name in quotes (see sluice.toml)", parse: |s| s.parse() })
}

/// A value with a `name()`, as the string `sluice.toml` uses.
trait Named {
    fn name(&self) -> &'static str;
}

impl Named for EngineKind {
    fn name(&self) -> &'static str {
        EngineKind::name(*self)
    }
}
impl Named for SendStrategy {
    fn name(&self) -> &'static str {
        SendStrategy::name(*self)
    }
}
impl Named for ThreadsMode {
    fn name(&self) -> &'static str {
        ThreadsMode::name(*self)
    }
}

fn named<S: Serializer, T: Named>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v.name())
}

fn some_named<S: Serializer, T: Named>(v: &Option<T>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(v.name()),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_parses_and_matches_defaults() {
        let text = include_str!("../../../sluice.toml");
        let config: Config = toml::from_str(text).expect("sluice.toml parses");
        config.validate().unwrap();
        assert_eq!(config.http.listen, Config::default().http.listen);
        assert_eq!(config.limits.header_timeout, Duration::from_secs(10));
        assert_eq!(config.engine.kind, EngineKind::Epoll);
        let d = RtspSection::default();
        assert_eq!((config.rtsp.enabled, config.rtsp.listen), (d.enabled, d.listen));
        let a = AdminSection::default();
        assert_eq!((config.admin.enabled, config.admin.listen), (a.enabled, a.listen));
        assert_eq!(config.http.bench, HttpSection::default().bench);
        assert_eq!(
            (config.rtsp.session_timeout, config.rtsp.max_payload),
            (d.session_timeout, d.max_payload)
        );
    }

    #[test]
    fn listen_addresses_take_a_port_a_name_or_an_address() {
        assert_eq!(parse_listen("8080"), Ok(SocketAddr::from(([127, 0, 0, 1], 8080))));
        assert_eq!(parse_listen("localhost:8081"), Ok(SocketAddr::from(([127, 0, 0, 1], 8081))));
        assert_eq!(parse_listen("0.0.0.0:80"), Ok(SocketAddr::from(([0, 0, 0, 0], 80))));
        assert!(parse_listen("[::1]:80").unwrap().is_ipv6());
        for bad in ["", "nowhere", "localhost", "70000", "1.2.3.4:x"] {
            assert!(parse_listen(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_value_of_the_wrong_type_names_the_expected_form() {
        let (line, column, message) = Config::from_text("[limits]\nheader_timeout = 10\n").unwrap_err();
        assert_eq!((line, column), (2, 18));
        assert!(message.contains("\"10s\"") && !message.contains('\n'), "{message}");
        let (_, _, message) = Config::from_text("[http]\nlisten = 8080\n").unwrap_err();
        assert!(message.contains("\"127.0.0.1:8080\""), "{message}");
        let c = Config::from_text("[http]\nlisten = \"9000\"\n[limits]\nsend_timeout = \"1.5s\"\n").unwrap();
        assert_eq!(c.http.listen.port(), 9000);
        assert_eq!(c.limits.send_timeout, Duration::from_millis(1500));
    }

    #[test]
    fn sizes_are_an_integer_or_a_size_string() {
        let c = Config::from_text(
            "[store]\ncache_size = \"64MiB\"\n[uploads]\nmax_size = 1000\n[limits]\nmax_head = \"16K\"\n",
        )
        .unwrap();
        assert_eq!((c.store.cache_size, c.uploads.max_size, c.limits.max_head), (64 << 20, 1000, 16 << 10));
        let (line, _, message) = Config::from_text("[uploads]\nmax_size = \"1.5XB\"\n").unwrap_err();
        assert_eq!(line, 2);
        assert!(message.contains("1.5XB") && message.contains("KiB"), "{message}");
        assert!(Config::from_text("[uploads]\nmax_size = -1\n").is_err());
        assert!(Config::from_text("[rtsp]\nmax_payload = \"1T\"\n").is_ok_and(|c| c.validate().is_err()));
    }

    #[test]
    fn effective_settings_read_back_as_the_same_configuration() {
        let c = Config::default();
        let back = Config::from_text(&c.effective_toml()).unwrap();
        assert_eq!(back.engine.send, Some(c.engine_config().send));
        assert_eq!(back.limits.header_timeout, c.limits.header_timeout);
        assert_eq!(back.admin.listen, c.admin.listen);
    }

    #[test]
    fn rtsp_loops_are_set_or_follow_the_cores() {
        let c: Config = toml::from_str("[rtsp]\nloops = 3").unwrap();
        c.validate().unwrap();
        assert_eq!(c.rtsp_loops(), 3);
        let c = Config::default();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let expected = if cores <= 2 { 1 } else { c.engine_config().workers.min(32) };
        assert_eq!(c.rtsp_loops(), expected);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(toml::from_str::<Config>("[http]\nlisten_on = \"x\"").is_err());
        assert!(toml::from_str::<Config>("[engine]\nkind = \"kqueue\"").is_err());
        assert!(toml::from_str::<Config>("[limits]\nheader_timeout = \"soon\"").is_err());
        let c: Config = toml::from_str("[engine]\nworkers = 0").unwrap();
        assert!(c.validate().is_err());
        for bad in [
            "session_timeout = \"0s\"",
            "max_payload = 100",
            "max_payload = 70000",
            "loops = 0",
            "loops = 33",
        ] {
            let c: Config = toml::from_str(&format!("[rtsp]\n{bad}")).unwrap();
            assert!(c.validate().is_err(), "{bad}");
        }
    }
}
