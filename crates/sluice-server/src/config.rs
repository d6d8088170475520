//! `sluice serve`'s configuration: every setting, from one table, with the defaults that make it
//! work with no file at all.
//!
//! Owns the [`Config`] the server runs with, reading it from `sluice.toml`, the rules between
//! settings ([`Config::validate`]) and the values derived from them (RTSP loops, the engine's and
//! the protocol's settings). Each setting itself (field, default, key, flag, `--help`, range) is
//! one entry of [`table`]; [`render`] writes `sluice.toml` and `serve --check` from it. It does
//! not own the command line: the binary builds its flags from [`SETTINGS`], so a flag always
//! overrides the file.

use std::path::PathBuf;

use serde::Deserialize;
use sluice_engine::EngineConfig;
use sluice_proto::http::Limits;

pub mod format;
pub mod render;
pub mod setting;
pub mod table;

pub use format::parse_listen;
pub use setting::Setting;
pub use table::{
    AdminSection, ClientsSection, EngineSection, HttpSection, LibrarySection, LimitsSection, LogSection,
    RtmpSection, RtspSection, StoreSection, TlsSection, UploadsSection, SECTIONS, SETTINGS,
};

/// The whole configuration.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `[http]`: where and how HTTP is served.
    pub http: HttpSection,
    /// `[rtsp]`: where and how RTSP/RTP is served.
    pub rtsp: RtspSection,
    /// `[rtmp]`: publishers over RTMP.
    pub rtmp: RtmpSection,
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
    pub store: StoreSection,
    /// `[uploads]`: who may upload, and how much.
    pub uploads: UploadsSection,
    /// `[[access]]`: who may read what, per path prefix (everything is open without one).
    pub access: Vec<crate::access::AccessPolicy>,
    /// `[[protect]]`: which titles are encrypted, how and with which keys, per path prefix.
    pub protect: Vec<crate::protect::ProtectPolicy>,
    /// `[clients]`: limits per client address.
    pub clients: ClientsSection,
    /// `[tls]`: HTTPS.
    pub tls: TlsSection,
    /// `[[source]]`: live paths pulled from RTSP cameras.
    pub source: Vec<crate::rtsp::camera::SourceConfig>,
    /// `[[record]]`: live paths recorded into the library.
    pub record: Vec<crate::record::RecordConfig>,
}

impl TlsSection {
    /// Whether HTTPS is on.
    pub fn enabled(&self) -> bool {
        self.cert.is_some()
    }
}

/// `tls.hsts` is a Strict-Transport-Security value (RFC 6797 section 6.1): `max-age` with a
/// number of seconds, `includeSubDomains` and `preload` at most once each, nothing else (a
/// browser would ignore a misspelt directive without a word).
pub(crate) fn strict_transport_security(value: &str) -> Result<(), String> {
    let mut seen: Vec<String> = Vec::new();
    for directive in value.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let (name, argument) = match directive.split_once('=') {
            Some((name, argument)) => (name.trim(), Some(argument.trim().trim_matches('"'))),
            None => (directive, None),
        };
        let name = name.to_ascii_lowercase();
        match (name.as_str(), argument) {
            ("max-age", Some(seconds))
                if !seconds.is_empty() && seconds.bytes().all(|b| b.is_ascii_digit()) => {}
            ("max-age", _) => return Err(format!("`{directive}`: max-age takes a number of seconds")),
            ("includesubdomains" | "preload", None) => {}
            ("includesubdomains" | "preload", Some(_)) => {
                return Err(format!("`{directive}` takes no value"))
            }
            _ => {
                return Err(format!(
                    "unknown directive `{directive}` (max-age=SECONDS, includeSubDomains, preload)"
                ))
            }
        }
        if seen.contains(&name) {
            return Err(format!("`{name}` is given twice (RFC 6797: each directive at most once)"));
        }
        seen.push(name);
    }
    if !seen.iter().any(|n| n == "max-age") {
        return Err("max-age=SECONDS is required, e.g. max-age=31536000".into());
    }
    Ok(())
}

/// `rtsp.overload`
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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
        render::effective(&c)
    }

    /// Checks values that parse but cannot work: each setting's own range (from the table),
    /// then the rules between settings.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for setting in SETTINGS {
            (setting.check)(self)
                .map_err(|why| ConfigError::Invalid(format!("{} {why}", setting.named())))?;
        }
        let bad = |m: &str| Err(ConfigError::Invalid(m.to_string()));
        if self.limits.max_head < self.limits.max_request_line {
            return bad("limits.max_head must be at least limits.max_request_line");
        }
        if self.tls.cert.is_some() != self.tls.key.is_some() {
            return bad("tls.cert and tls.key (--tls-cert, --tls-key) go together");
        }
        if self.tls.listen.is_some() && !self.tls.enabled() {
            return bad("tls.listen (--tls-listen) needs tls.cert and tls.key (--tls-cert, --tls-key)");
        }
        if self.rtmp.listen.is_some() && !self.rtsp.enabled {
            return bad("rtmp.listen (--rtmp-listen) needs RTSP on: RTMP publishes its live paths");
        }
        self.rtp_ports()?;
        crate::rtsp::camera::check_sources(&self.source, self.rtsp.enabled).map_err(ConfigError::Invalid)?;
        crate::record::check_rules(&self.record, self.rtsp.enabled).map_err(ConfigError::Invalid)?;
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

    /// What an unset `rtsp.loops` means; [`Config::rtsp_loops`] applies it.
    pub const RTSP_LOOPS_RULE: &'static str = "one on 2 cores or fewer, else one per engine worker";

    /// RTSP loops to run: `rtsp.loops`, else [`Config::RTSP_LOOPS_RULE`].
    pub fn rtsp_loops(&self) -> usize {
        self.rtsp_loops_and_reason().0
    }

    /// Why [`Config::rtsp_loops`] is what it is, for the start-up line.
    pub fn rtsp_loops_reason(&self) -> String {
        self.rtsp_loops_and_reason().1
    }

    /// RTSP loops to run and why. On 2 cores or fewer the loop and the HTTP side share them, and
    /// a second loop would only compete.
    fn rtsp_loops_and_reason(&self) -> (usize, String) {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        match self.rtsp.loops {
            Some(n) => (n, "set".into()),
            None if cores <= 2 => (1, format!("default on {cores} cores")),
            None => (
                self.engine_config().workers.clamp(1, sluice_engine::rtsp::MAX_RTSP_LOOPS),
                format!("default: one per worker on {cores} cores"),
            ),
        }
    }

    /// The RTSP side's settings (the UDP ports are filled in once bound).
    pub fn rtsp_config(&self) -> sluice_rtsp::RtspConfig {
        sluice_rtsp::RtspConfig {
            session_timeout: self.rtsp.session_timeout,
            max_payload: self.rtsp.max_payload,
            access_log: self.http.access_log,
            max_viewers: self.rtsp.max_viewers,
            max_sessions_per_ip: self.clients.rtsp_sessions_per_ip,
            overload: match self.rtsp.overload {
                RtspOverload::Refuse => sluice_rtsp::Overload::Refuse,
                RtspOverload::Degrade => sluice_rtsp::Overload::Degrade,
            },
            publish_stall: self.rtsp.publish_stall,
            ..sluice_rtsp::RtspConfig::default()
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
            // The media listener refuses at its limit; only the admin listener reclaims.
            reclaim_waiting: false,
            send_timeout: self.limits.send_timeout,
            shutdown_grace: self.limits.shutdown_grace,
            max_connections: e.max_connections,
            cpu_workers: e.cpu_workers.unwrap_or_else(|| {
                if self.store.is_remote() {
                    REMOTE_CPU_WORKERS
                } else {
                    EngineConfig::default().cpu_workers
                }
            }),
            cpu_queue: e.cpu_queue,
        }
    }
}

/// CPU-pool threads when the library is in an object store and `engine.cpu_workers` is unset:
/// jobs of an s3:// library wait for the origin (a round trip and a slice each), not for a core,
/// so two pool threads would let two cold slices hold up every other miss.
pub const REMOTE_CPU_WORKERS: usize = 16;

/// The one duration parser of `sluice serve` and `sluice load`: `10s`, `250ms`, `1m30s`, `1.5s`.
pub use sluice_proto::duration_text::format as format_duration;
pub use sluice_proto::duration_text::parse as parse_duration;
/// The one size parser of every flag and key that is a size: `512`, `64MiB`, `1M`, `50KB`, `1.5GB`.
pub use sluice_proto::size_text::parse as parse_size;

#[cfg(test)]
mod tests;
