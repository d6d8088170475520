//! Camera sources (`[[source]]`): live paths that sluice pulls from an RTSP camera, rather than
//! waiting for a publisher to push them. `path = "cam1"` is the live path `/live/cam1` (under
//! `rtsp.live_prefix`), fed from `url`; viewers get it through the same fan-out as a published
//! path.
//!
//! Owns the `[[source]]` entries (reading, checking, showing them without the password), one
//! puller a source with its reconnect back-off, and each source's state as `/streams` shows it
//! (connecting, live, retrying with the last error). The RTSP exchange with the camera is
//! [`session`]'s. It does not own the live stream nor its viewers (sluice-rtsp's
//! `LiveRegistry` and fan-out): a puller takes its path there like a publisher, feeds the RTP
//! into it, and ends it when the camera drops, which ends the path for its viewers as a
//! publisher's end does.
//!
//! One thread a source with blocking I/O and timeouts, not the tokio runtime: the server has a
//! runtime only on the tokio engine, and a camera is one connection of a few Mbit/s that a
//! blocking thread reads with nothing for an event loop to share.

pub mod session;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sluice_engine::Shutdown;
use sluice_rtsp::LiveRegistry;

use session::{CameraSession, PullError};

/// How a source's RTP comes from the camera.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum SourceTransport {
    /// Interleaved on the RTSP connection (RFC 2326 §10.12): one TCP connection, through NAT.
    #[default]
    #[serde(rename = "tcp")]
    Tcp,
    /// RTP over UDP: not pulled yet (refused by the check).
    #[serde(rename = "udp")]
    Udp,
}

impl SourceTransport {
    /// The name in `sluice.toml`.
    pub fn name(self) -> &'static str {
        match self {
            SourceTransport::Tcp => "tcp",
            SourceTransport::Udp => "udp",
        }
    }
}

fn default_reconnect_min() -> Duration {
    Duration::from_secs(1)
}

fn default_reconnect_max() -> Duration {
    Duration::from_secs(30)
}

/// One `[[source]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceConfig {
    /// The live path's name under the live prefix (`cam1` is `/live/cam1`).
    pub path: String,
    /// The camera's URL, `rtsp://user:password@host:port/stream` (credentials optional).
    pub url: String,
    /// `tcp` (interleaved; the default) or `udp`.
    #[serde(default)]
    pub transport: SourceTransport,
    /// The first wait before pulling again after a failure; it doubles at each failure in a row.
    #[serde(
        default = "default_reconnect_min",
        deserialize_with = "sluice_proto::duration_text::deserialize"
    )]
    pub reconnect_min: Duration,
    /// The longest wait between attempts.
    #[serde(
        default = "default_reconnect_max",
        deserialize_with = "sluice_proto::duration_text::deserialize"
    )]
    pub reconnect_max: Duration,
}

/// A camera's URL, read and checked: where to connect, what to request, the credentials, and
/// how to show it (without the password).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CameraUrl {
    /// The URL requests name: the camera's, without credentials.
    pub request: String,
    /// The URL for logs and `/streams`: the user kept, the password removed.
    pub shown: String,
    /// `host:port` to connect to (554 when the URL has no port).
    pub authority: String,
    /// User and password (percent-decoded), when the URL has a user.
    pub credentials: Option<(String, String)>,
}

impl CameraUrl {
    /// Reads `text`: an `rtsp://` URL with a host; the reason when it is not one.
    pub fn parse(text: &str) -> Result<CameraUrl, String> {
        let url =
            url::Url::parse(text.trim()).map_err(|e| format!("`{}` is not a URL: {e}", hidden(text)))?;
        if url.scheme() != "rtsp" {
            return Err(format!("`{}` is not an rtsp:// URL (rtsps is not pulled)", hidden(text)));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("`{}` has no host", hidden(text)))?;
        let authority = format!("{host}:{}", url.port().unwrap_or(554));
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
        let credentials = (!url.username().is_empty())
            .then(|| (decode(url.username()), decode(url.password().unwrap_or_default())));
        let mut shown = url.clone();
        let _ = shown.set_password(None);
        let mut request = shown.clone();
        let _ = request.set_username("");
        Ok(CameraUrl { request: request.to_string(), shown: shown.to_string(), authority, credentials })
    }
}

/// `text` with what looks like a password (between `:` and `@` after `//`) replaced, for an
/// error about a URL that did not parse.
fn hidden(text: &str) -> String {
    let Some((scheme, rest)) = text.split_once("//") else { return text.to_string() };
    match rest.split_once('@') {
        Some((userinfo, after)) if userinfo.contains(':') => {
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{scheme}//{user}:***@{after}")
        }
        _ => text.to_string(),
    }
}

/// Checks the `[[source]]` entries (`serve --check` and start-up): each path a name under the
/// live prefix, once; each URL an `rtsp://` URL; the back-off in order; RTSP on.
pub fn check_sources(sources: &[SourceConfig], rtsp_enabled: bool) -> Result<(), String> {
    for (i, s) in sources.iter().enumerate() {
        let name = format!("[[source]] path = \"{}\"", s.path);
        let path = s.path.trim_matches('/');
        if path.is_empty()
            || path.split('/').any(|n| n.is_empty() || n == "." || n == "..")
            || path.contains(['?', '#', ' ', '%', '\\'])
        {
            return Err(format!(
                "{name}: the path must be a name such as \"cam1\" (it is served under the live prefix)"
            ));
        }
        if sources[..i].iter().any(|o| o.path.trim_matches('/') == path) {
            return Err(format!("{name}: two sources have this path"));
        }
        CameraUrl::parse(&s.url).map_err(|why| format!("{name}: url {why}"))?;
        if s.transport == SourceTransport::Udp {
            return Err(format!("{name}: transport = \"udp\" is not pulled yet; use \"tcp\""));
        }
        if s.reconnect_min.is_zero() || s.reconnect_min > s.reconnect_max {
            return Err(format!("{name}: reconnect_min must be longer than zero and at most reconnect_max"));
        }
        if !rtsp_enabled {
            return Err(format!("{name}: a camera source needs RTSP on (rtsp.enabled)"));
        }
    }
    Ok(())
}

/// The `[[source]]` entries as `serve --check` prints them: every key, the password left out.
pub fn render_sources(sources: &[SourceConfig]) -> String {
    let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut out = String::new();
    for s in sources {
        let url = CameraUrl::parse(&s.url).map_or_else(|_| hidden(&s.url), |u| u.shown);
        out.push_str(&format!(
            "\n[[source]]\npath = {}\nurl = {}\ntransport = \"{}\"\nreconnect_min = \"{}\"\nreconnect_max = \"{}\"\n",
            quote(&s.path),
            quote(&url),
            s.transport.name(),
            sluice_proto::duration_text::format(s.reconnect_min),
            sluice_proto::duration_text::format(s.reconnect_max),
        ));
    }
    out
}

/// Where a source is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    /// Pulling: connecting, or the exchange before media.
    Connecting,
    /// Media flows into the live path, from the camera at this address.
    Live { since: Instant, camera: SocketAddr },
    /// Waiting until `at` to pull again.
    Retrying { at: Instant },
}

/// A source's state and its last error.
#[derive(Debug)]
struct Status {
    state: State,
    last_error: Option<String>,
}

/// One source.
#[derive(Debug)]
struct Source {
    config: SourceConfig,
    url: CameraUrl,
    /// The live path, `/live/cam1`.
    path: String,
    status: Mutex<Status>,
}

impl Source {
    fn status(&self) -> MutexGuard<'_, Status> {
        self.status.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A source as `/streams` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceSummary {
    /// The live path.
    pub path: String,
    /// The camera's URL without the password.
    pub url: String,
    /// `connecting`, `live` or `retrying`.
    pub state: &'static str,
    /// While retrying: how long until the next attempt.
    pub retry_in: Option<Duration>,
    /// While live: for how long.
    pub live_for: Option<Duration>,
    /// The last failure, if any (kept while live again, until the next one).
    pub last_error: Option<String>,
}

/// The server's camera sources. See the module docs.
#[derive(Debug)]
pub struct Sources {
    registry: Arc<LiveRegistry>,
    /// Media silent for this long ends the path (`rtsp.publish_stall`, as for a publisher).
    stall: Duration,
    sources: Vec<Source>,
}

/// Longest a connection, or a request's answer, is waited for.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

impl Sources {
    /// The sources of `configs` (checked by [`check_sources`]), their paths taken in `registry`
    /// so that no publisher takes them; media silent for `stall` ends a path.
    pub fn new(
        configs: &[SourceConfig],
        registry: Arc<LiveRegistry>,
        stall: Duration,
    ) -> Result<Sources, String> {
        let mut sources = Vec::with_capacity(configs.len());
        for config in configs {
            let url = CameraUrl::parse(&config.url)?;
            let path = registry.path_of(config.path.trim_matches('/'));
            registry.reserve(&path);
            let status = Mutex::new(Status { state: State::Connecting, last_error: None });
            sources.push(Source { config: config.clone(), url, path, status });
        }
        Ok(Sources { registry, stall, sources })
    }

    /// How many sources there are; [`Sources::run`] takes each one's index.
    pub fn len(&self) -> usize {
        self.sources.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.sources.is_empty()
    }

    /// Every source's state at `now`, in the configuration's order.
    pub fn summaries(&self, now: Instant) -> Vec<SourceSummary> {
        self.sources
            .iter()
            .map(|s| {
                let status = s.status();
                let (state, retry_in, live_for) = match status.state {
                    State::Connecting => ("connecting", None, None),
                    State::Live { since, .. } => ("live", None, Some(now.saturating_duration_since(since))),
                    State::Retrying { at } => ("retrying", Some(at.saturating_duration_since(now)), None),
                };
                SourceSummary {
                    path: s.path.clone(),
                    url: s.url.shown.clone(),
                    state,
                    retry_in,
                    live_for,
                    last_error: status.last_error.clone(),
                }
            })
            .collect()
    }

    /// Pulls source `index` until `shutdown`: connects, takes the path, feeds it while media
    /// flows, and after a failure or a drop waits the back-off (doubling from `reconnect_min`
    /// to `reconnect_max`, with jitter) and pulls again.
    pub fn run(&self, index: usize, shutdown: &Shutdown) {
        let Some(source) = self.sources.get(index) else { return };
        let (path, shown) = (&source.path, &source.url.shown);
        tracing::info!("camera source {path}: pulling {shown}");
        let mut failures: u32 = 0;
        let mut logged_error: Option<String> = None;
        while !shutdown.is_triggered() {
            source.status().state = State::Connecting;
            let mut went_live = false;
            let error = self.pull_once(source, shutdown, &mut went_live);
            if matches!(error, PullError::Stopped) {
                break;
            }
            let error = error.to_string();
            if went_live {
                failures = 0;
            }
            let wait = backoff(source.config.reconnect_min, source.config.reconnect_max, failures);
            failures = failures.saturating_add(1);
            {
                let mut status = source.status();
                status.state = State::Retrying { at: Instant::now() + wait };
                status.last_error = Some(error.clone());
            }
            let wait_text =
                sluice_proto::duration_text::format(Duration::from_millis(wait.as_millis() as u64));
            if went_live {
                tracing::warn!(
                    "camera source {path}: lost ({error}); its viewers' stream ends; retrying in {wait_text}"
                );
            } else if logged_error.as_deref() != Some(error.as_str()) {
                tracing::warn!("camera source {path}: {error}; retrying in {wait_text}, then with back-off");
            } else {
                tracing::debug!("camera source {path}: {error}; retrying in {wait_text}");
            }
            logged_error = Some(error);
            let until = Instant::now() + wait;
            while !shutdown.is_triggered() && Instant::now() < until {
                std::thread::sleep(
                    Duration::from_millis(50).min(until.saturating_duration_since(Instant::now())),
                );
            }
        }
    }

    /// One pull: the exchange, then media into the path until it fails; the path is ended
    /// (its viewers' stream ends) before returning why.
    fn pull_once(&self, source: &Source, shutdown: &Shutdown, went_live: &mut bool) -> PullError {
        let stop = || shutdown.is_triggered();
        let (mut session, tracks) = match CameraSession::open(&source.url, IO_TIMEOUT, &stop) {
            Ok(opened) => opened,
            Err(e) => return e,
        };
        let camera = session.peer();
        let count = tracks.len();
        let stream = match self.registry.publish_source(&source.path, camera, tracks, Instant::now()) {
            Ok(stream) => stream,
            Err(_) => return PullError::Malformed("the path is live already".into()),
        };
        let error = match session.play() {
            Ok(()) => {
                let path = &source.path;
                let mut on_media = || {
                    if !*went_live {
                        *went_live = true;
                        source.status().state = State::Live { since: Instant::now(), camera };
                        tracing::info!("camera source {path}: live from {camera} ({count} track(s))");
                    }
                };
                session.receive(&stream, self.stall, &stop, &mut on_media)
            }
            Err(e) => e,
        };
        self.registry.end(&stream);
        session.teardown();
        error
    }
}

/// The wait before attempt `failures + 1` after as many failures in a row: `min` doubled at
/// each, at most `max`, less up to a quarter at random so that sources that failed together
/// (a switch rebooted) do not all come back at once.
fn backoff(min: Duration, max: Duration, failures: u32) -> Duration {
    let base = min.saturating_mul(1u32 << failures.min(20)).min(max);
    let jitter = getrandom::u64().unwrap_or(0) % 1024;
    base.saturating_sub(base.mul_f64(jitter as f64 / 4096.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_and_shown_without_the_password() {
        let u = CameraUrl::parse("rtsp://ad%40min:p%3Ass@cam.local:8554/stream/1").unwrap();
        assert_eq!(u.authority, "cam.local:8554");
        assert_eq!(u.credentials, Some(("ad@min".into(), "p:ss".into())));
        assert_eq!(u.request, "rtsp://cam.local:8554/stream/1");
        assert_eq!(u.shown, "rtsp://ad%40min@cam.local:8554/stream/1");
        let plain = CameraUrl::parse("rtsp://10.0.0.2/live").unwrap();
        assert_eq!((plain.authority.as_str(), plain.credentials), ("10.0.0.2:554", None));
        for bad in ["http://h/x", "rtsp:///x", "not a url", "rtsps://h/x"] {
            assert!(CameraUrl::parse(bad).is_err(), "{bad}");
        }
        let why = CameraUrl::parse("rtsp://u:secret@[bad/x").unwrap_err();
        assert!(!why.contains("secret"), "{why}");
    }

    fn source(path: &str, url: &str) -> SourceConfig {
        SourceConfig {
            path: path.into(),
            url: url.into(),
            transport: SourceTransport::Tcp,
            reconnect_min: default_reconnect_min(),
            reconnect_max: default_reconnect_max(),
        }
    }

    #[test]
    fn sources_are_checked() {
        let good = source("cam1", "rtsp://u:p@127.0.0.1:8554/s");
        assert_eq!(check_sources(std::slice::from_ref(&good), true), Ok(()));
        assert!(check_sources(std::slice::from_ref(&good), false).unwrap_err().contains("RTSP"));
        assert!(check_sources(&[good.clone(), good.clone()], true).unwrap_err().contains("two sources"));
        for path in ["", "/", "a//b", "../x", "a b"] {
            assert!(check_sources(&[source(path, "rtsp://h/s")], true).is_err(), "{path}");
        }
        assert!(check_sources(&[source("c", "http://h/s")], true).unwrap_err().contains("rtsp://"));
        let udp = SourceConfig { transport: SourceTransport::Udp, ..good.clone() };
        assert!(check_sources(&[udp], true).unwrap_err().contains("udp"));
        let upside_down = SourceConfig { reconnect_min: Duration::from_secs(60), ..good.clone() };
        assert!(check_sources(&[upside_down], true).is_err());
        let text = render_sources(&[good]);
        assert!(text.contains("url = \"rtsp://u@127.0.0.1:8554/s\"") && !text.contains(":p@"), "{text}");
        assert!(text.contains("reconnect_min = \"1s\"\nreconnect_max = \"30s\""), "{text}");
    }

    #[test]
    fn the_back_off_doubles_up_to_its_ceiling_with_jitter() {
        let (min, max) = (Duration::from_secs(1), Duration::from_secs(30));
        for (failures, full) in [(0, 1), (1, 2), (2, 4), (4, 16), (5, 30), (40, 30)] {
            let wait = backoff(min, max, failures);
            let full = Duration::from_secs(full);
            assert!(wait <= full && wait >= full * 3 / 4, "{failures}: {wait:?}");
        }
    }
}
