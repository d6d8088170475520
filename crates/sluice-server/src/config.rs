//! `sluice.toml`: every setting of `sluice serve`, with the defaults that make it work with no
//! file at all.
//!
//! Owns the file's schema, its defaults and its validation. It does not own the command line (the
//! binary maps each flag onto a field here, so a flag always overrides the file).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Deserializer};
use sluice_engine::{EngineConfig, EngineKind, SendStrategy, ThreadsMode};
use sluice_proto::http::Limits;

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[http]`: where and how HTTP is served.
    pub http: HttpSection,
    /// `[rtsp]`: where and how RTSP/RTP is served.
    pub rtsp: RtspSection,
    /// `[library]`: what is served.
    pub library: LibrarySection,
    /// `[engine]`: the I/O path.
    pub engine: EngineSection,
    /// `[limits]`: deadlines and sizes.
    pub limits: LimitsSection,
    /// `[log]`: logging.
    pub log: LogSection,
    /// `[store]`: where uploads go (the library root unless set).
    pub store: crate::upload::StoreSection,
    /// `[uploads]`: who may upload, and how much.
    pub uploads: crate::upload::UploadsSection,
}

/// `[http]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpSection {
    /// Address and port to listen on.
    pub listen: SocketAddr,
    /// Whether to log a line per request.
    pub access_log: bool,
    /// Whether to serve the benchmark endpoints under `/bench/`.
    pub bench: bool,
}

impl Default for HttpSection {
    fn default() -> Self {
        HttpSection { listen: SocketAddr::from(([127, 0, 0, 1], 8080)), access_log: true, bench: true }
    }
}

/// `[rtsp]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RtspSection {
    /// Whether to serve RTSP at all.
    pub enabled: bool,
    /// Address and port of the RTSP control listener; the RTP/RTCP UDP ports are a free even/odd
    /// pair on the same address.
    pub listen: SocketAddr,
    /// A session with no request or RTCP report for this long is released.
    #[serde(deserialize_with = "duration")]
    pub session_timeout: Duration,
    /// Largest RTP payload in bytes (a path MTU of 1500 leaves 1472 after IP and UDP, 1460 after
    /// the RTP header; 1400 leaves room for tunnels).
    pub max_payload: usize,
}

impl Default for RtspSection {
    fn default() -> Self {
        RtspSection {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 8554)),
            session_timeout: Duration::from_secs(60),
            max_payload: 1400,
        }
    }
}

/// `[library]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LibrarySection {
    /// The directory to serve; unset serves the built-in demo library.
    pub root: Option<PathBuf>,
    /// Most ranges honoured in one request; more gets the whole file (200). 0 disables ranges.
    pub max_ranges: usize,
}

impl Default for LibrarySection {
    fn default() -> Self {
        LibrarySection { root: None, max_ranges: 64 }
    }
}

/// `[engine]`
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EngineSection {
    /// `epoll` or `threads`.
    #[serde(deserialize_with = "from_str")]
    pub kind: EngineKind,
    /// `sendfile`, `splice` or `copy`; unset means the engine's zero-copy default (`splice` on
    /// uring, which has no `sendfile`; `sendfile` elsewhere).
    #[serde(deserialize_with = "some_from_str")]
    pub send: Option<SendStrategy>,
    /// Event loops; unset means one per core.
    pub workers: Option<usize>,
    /// `pool` or `per-connection` (threads engine).
    #[serde(deserialize_with = "from_str")]
    pub threads_mode: ThreadsMode,
    /// Threads in the pool (threads engine).
    pub pool_size: usize,
    /// Most open connections.
    pub max_connections: usize,
    /// Threads for CPU-bound work on the event-loop engines; unset means one per core.
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
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsSection {
    /// Time allowed for a request head, from its first byte (or from connect).
    #[serde(deserialize_with = "duration")]
    pub header_timeout: Duration,
    /// Idle time allowed between requests on a kept-alive connection.
    #[serde(deserialize_with = "duration")]
    pub keepalive_timeout: Duration,
    /// Longest pause between reads of a request body.
    #[serde(deserialize_with = "duration")]
    pub body_timeout: Duration,
    /// Longest time without send progress before a client is dropped.
    #[serde(deserialize_with = "duration")]
    pub send_timeout: Duration,
    /// Time shutdown allows in-flight responses to finish.
    #[serde(deserialize_with = "duration")]
    pub shutdown_grace: Duration,
    /// Longest request line (414 beyond).
    pub max_request_line: usize,
    /// Longest request head (431 beyond).
    pub max_head: usize,
    /// Largest unwanted request body read and discarded (413 beyond).
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// For people.
    #[default]
    Human,
    /// One JSON object per line, for log pipelines.
    Json,
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
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSection {
    /// `human` or `json`.
    pub format: LogFormat,
    /// A `tracing` filter: `info`, `debug`, `sluice=debug,info`, …
    pub level: String,
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection { format: LogFormat::Human, level: "info".into() }
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
    #[error("{path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        source: toml::de::Error,
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
        let config: Config =
            toml::from_str(&text).map_err(|source| ConfigError::Parse { path: path.to_owned(), source })?;
        Ok(config)
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
        Ok(())
    }

    /// The RTSP side's settings (the UDP ports are filled in once bound).
    pub fn rtsp_config(&self) -> sluice_media::rtsp::RtspConfig {
        sluice_media::rtsp::RtspConfig {
            session_timeout: self.rtsp.session_timeout,
            max_payload: self.rtsp.max_payload,
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

/// Parses a duration as `humantime` writes them: `10s`, `250ms`, `1m 30s`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("`{s}`: {e}"))
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

fn some_from_str<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(d: D) -> Result<Option<T>, D::Error> {
    from_str(d).map(Some)
}

fn from_str<'de, D: Deserializer<'de>, T: FromStr<Err = String>>(d: D) -> Result<T, D::Error> {
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
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
        assert_eq!(
            (config.rtsp.session_timeout, config.rtsp.max_payload),
            (d.session_timeout, d.max_payload)
        );
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(toml::from_str::<Config>("[http]\nlisten_on = \"x\"").is_err());
        assert!(toml::from_str::<Config>("[engine]\nkind = \"kqueue\"").is_err());
        assert!(toml::from_str::<Config>("[limits]\nheader_timeout = \"soon\"").is_err());
        let c: Config = toml::from_str("[engine]\nworkers = 0").unwrap();
        assert!(c.validate().is_err());
        for bad in ["session_timeout = \"0s\"", "max_payload = 100", "max_payload = 70000"] {
            let c: Config = toml::from_str(&format!("[rtsp]\n{bad}")).unwrap();
            assert!(c.validate().is_err(), "{bad}");
        }
    }
}
