//! The admin listener: the live dashboard (`/`, `/events`), `/metrics`, `/healthz`, `/readyz` and
//! `/streams`, on an address of their own.
//!
//! Owns what the operational endpoints answer. They live apart from the media port so that they
//! neither shadow library files (a file named `metrics` is served like any other) nor are public
//! where the media is. The admin listener runs on the threads engine with its own counters, so
//! scrapes never show up in the media engine's system-call counts. It does not serve media.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use sluice_engine::{Service, Shutdown};
use sluice_proto::http::{Body, Handler, HttpSession, Limits, Method, Reply, Request, Response, Status};
use sluice_proto::Clock;

use crate::http::app::App;

/// Most files `/streams` lists.
const MAX_LISTED: usize = 10_000;
pub use crate::ops::dashboard::KEEPALIVE;

/// What the admin endpoints report on.
#[derive(Debug)]
pub struct Admin {
    app: Arc<App>,
    http: SocketAddr,
    rtsp: Option<SocketAddr>,
    shutdown: Shutdown,
    ready: Readiness,
    board: Arc<crate::ops::dashboard::Board>,
    /// The server's limits with the admin listener's shorter waits.
    limits: Limits,
    /// The HTTPS certificate, whose expiry `/metrics` reports.
    certificate: Option<Arc<sluice_engine::tls::TlsCertificate>>,
    /// The live paths publishers send to, when RTSP takes publishers.
    live: Option<Arc<sluice_rtsp::LiveRegistry>>,
    /// The camera sources pulled into live paths.
    sources: Option<Arc<crate::rtsp::camera::Sources>>,
    recorder: Option<Arc<crate::record::Recorder>>,
}

/// Whether the server can serve its library, and if not why: an edge started with `--store-wait`
/// before its store answered is up (`/healthz` 200) but not ready (`/readyz` 503 with the reason)
/// until the store answers.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<std::sync::Mutex<Option<String>>>);

impl Readiness {
    /// Marks the server not ready, for `reason` (one line).
    pub fn set_unready(&self, reason: String) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(reason);
    }

    /// Marks the server ready.
    pub fn set_ready(&self) {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// Why the server is not ready, if it is not.
    pub fn unready_reason(&self) -> Option<String> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

impl Admin {
    /// Endpoints reporting on `app`, served at `http` (and `rtsp`); `/readyz` fails once
    /// `shutdown` is triggered.
    pub fn new(app: Arc<App>, http: SocketAddr, rtsp: Option<SocketAddr>, shutdown: Shutdown) -> Admin {
        let server = &app.settings().limits;
        let limits = Limits {
            keepalive_timeout: server.keepalive_timeout.min(KEEPALIVE),
            header_timeout: server.header_timeout.min(KEEPALIVE),
            ..server.clone()
        };
        let (ready, board) = (Readiness::default(), Arc::default());
        Admin {
            app,
            http,
            rtsp,
            shutdown,
            ready,
            board,
            limits,
            certificate: None,
            live: None,
            sources: None,
            recorder: None,
        }
    }

    /// `/streams` names the file each recorded live path is written into.
    pub fn with_recorder(mut self, recorder: Option<Arc<crate::record::Recorder>>) -> Admin {
        self.recorder = recorder;
        self
    }

    /// `/streams` lists the camera sources of `sources` with their states.
    pub fn with_sources(mut self, sources: Option<Arc<crate::rtsp::camera::Sources>>) -> Admin {
        self.sources = sources;
        self
    }

    /// `/streams` lists the live paths of `live` too.
    pub fn with_live(mut self, live: Option<Arc<sluice_rtsp::LiveRegistry>>) -> Admin {
        self.live = live;
        self
    }

    /// `/readyz` answers 503 with the reason while `ready` says the server is not ready.
    pub fn with_readiness(mut self, ready: Readiness) -> Admin {
        self.ready = ready;
        self
    }

    /// `/metrics` reports how long `certificate` (the one in use, after a reload too) has left.
    pub fn with_certificate(mut self, certificate: Option<Arc<sluice_engine::tls::TlsCertificate>>) -> Admin {
        self.certificate = certificate;
        self
    }

    /// `/recordings?path=/live/cam1&from=RFC3339&to=RFC3339`: the recording files of a live
    /// path overlapping the span (both ends optional), each with its wall-clock start and end,
    /// and the `/rec/` HLS playlist of them all, as JSON; why not, for a query it cannot read.
    pub fn recordings_json(&self, query: &str) -> Result<String, String> {
        use sluice_proto::http::credentials::param;
        let path = param(query, "path").ok_or("path= names the live path (path=/live/cam1)")?;
        let time = |name: &str, default: SystemTime| match param(query, name) {
            Some(text) => chrono::DateTime::parse_from_rfc3339(&text)
                .map(SystemTime::from)
                .map_err(|e| format!("{name}= is not RFC 3339 ({e})")),
            None => Ok(default),
        };
        let from = time("from", SystemTime::UNIX_EPOCH)?;
        let to = time("to", SystemTime::now() + std::time::Duration::from_secs(86_400))?;
        let files = crate::record::timeline::recordings(self.app.library(), &path, (from, to), true)
            .map_err(|e| format!("cannot list the recordings: {e}"))?;
        let stamp = |t: SystemTime| {
            chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        let listed: Vec<serde_json::Value> = files
            .iter()
            .map(|f| {
                serde_json::json!({
                    "file": format!("/{}", f.relative),
                    "start": stamp(f.start),
                    "end": stamp(f.end()),
                    "duration_secs": f.duration.as_secs_f64(),
                    "bytes": f.bytes,
                    "recording": self.recorder.as_ref().and_then(|r| r.recording(&path)).is_some_and(|r| r[1..] == f.relative),
                })
            })
            .collect();
        let span = |name: &str| {
            files.first().map(|f| format!("/rec{}/{name}?start={}", url_path(&path), stamp(f.start)))
        };
        Ok(serde_json::json!({
            "path": path,
            "recordings": listed,
            "hls": span("index.m3u8"),
            "dash": span("manifest.mpd"),
            "mp4": span("clip.mp4"),
        })
        .to_string())
    }

    /// The library as JSON: every file with its HTTP URL and, for MP4s, its HLS master playlist
    /// and DASH manifest when it packages, how `[[protect]]` encrypts it (scheme and KID, never the
    /// key), the rendition sets (see `crate::library::renditions`; one that cannot be served with the
    /// reason) and, when RTSP is on, its RTSP URL when RTSP can stream it (MediaMTX's
    /// `/v3/paths/list` is the model). MP4s not indexed yet are indexed here (the admin
    /// listener's own thread may wait), so the catalogue is warm for the players that follow.
    pub fn streams_json(&self) -> String {
        let viewers = self.app.counters().rtsp_gauges().unwrap_or_default().streams;
        let files = self.app.library().files(MAX_LISTED);
        let items: Vec<serde_json::Value> = files
            .iter()
            .map(|(path, bytes, tag)| {
                let url_path = url_path(path);
                let offers = self.app.offers(path.trim_start_matches('/'), tag.as_deref());
                let rtsp =
                    self.rtsp.filter(|_| offers.rtsp).map(|a| format!("rtsp://{}{url_path}", host_port(a)));
                let hls = offers
                    .video
                    .is_some()
                    .then(|| format!("http://{}{url_path}/master.m3u8", host_port(self.http)));
                let dash =
                    hls.as_ref().map(|_| format!("http://{}{url_path}/manifest.mpd", host_port(self.http)));
                // The same segments as MPEG-TS (when its codecs go in TS), the I-frame playlist,
                // and clips by nginx's `?start=&end=` (a template: any interval in seconds).
                let base = format!("http://{}{url_path}", host_port(self.http));
                let packaged = |suffix: &str| hls.as_ref().map(|_| format!("{base}{suffix}"));
                let mut item = serde_json::json!({
                    "path": path,
                    "bytes": bytes,
                    "http": format!("http://{}{url_path}", host_port(self.http)),
                    "rtsp": rtsp,
                    "hls": hls,
                    "dash": dash,
                    "hls_ts": packaged("/ts/master.m3u8").filter(|_| offers.ts),
                    "iframes": packaged("/video-iframes.m3u8").filter(|_| offers.video.as_ref().is_some_and(|v| v.resolution.is_some())),
                    "clip_template": packaged("?start={start}&end={end}"),
                });
                // Scrubbing thumbnails, where ffmpeg can make them: the WebVTT track and the HLS
                // image playlist (the MPD lists them too).
                let pictured = offers.video.as_ref().is_some_and(|v| v.resolution.is_some())
                    && self.app.thumbnails().decoder().is_ok();
                let thumbs = |name: &str| packaged(&format!("/thumbs/{name}")).filter(|_| pictured);
                item["thumbnails_vtt"] = thumbs("thumbnails.vtt").into();
                item["thumbnails_hls"] = thumbs("images.m3u8").into();
                if crate::library::names::is_mp4(path) {
                    self.describe_stream(path, &viewers, &mut item);
                    item["protection"] = protection_json(self.app.protection(), path);
                    // An encrypted title is not served over RTSP (clear RTP), nor over DASH under
                    // AES-128.
                    if let Some(Ok(title)) = self.app.protection().title(path) {
                        item["rtsp"] = serde_json::Value::Null;
                        if title.scheme.cenc().is_none() {
                            item["dash"] = serde_json::Value::Null;
                        }
                    }
                }
                item
            })
            .collect();
        let sets: Vec<serde_json::Value> =
            crate::library::renditions::sets_of_files(self.app.library(), &files)
                .into_iter()
                .map(|set| {
                    let path = if set.dir.is_empty() {
                        format!("/{}.set", set.title)
                    } else {
                        format!("/{}/{}.set", set.dir, set.title)
                    };
                    let url_path = url_path(&path);
                    match set.offer {
                        Ok(offer) => serde_json::json!({
                            "path": path,
                            "renditions": offer.renditions.iter().map(|(n, _)| n).collect::<Vec<_>>(),
                            "subtitles": offer.subtitles,
                            "hls": format!("http://{}{url_path}/master.m3u8", host_port(self.http)),
                            "dash": format!("http://{}{url_path}/manifest.mpd", host_port(self.http)),
                            "hls_ts": format!("http://{}{url_path}/ts/master.m3u8", host_port(self.http)),
                            "ready": true,
                        }),
                        // Listed with the reason, as a file that cannot play is: the operator
                        // sees why the set is not offered instead of wondering where it went.
                        Err(reason) => {
                            serde_json::json!({ "path": path, "ready": false, "not_ready_reason": reason })
                        }
                    }
                })
                .collect();
        // Live paths: who publishes them, since when, and their RTSP viewers.
        let live: Vec<serde_json::Value> = self
            .live
            .iter()
            .flat_map(|live| live.list(std::time::Instant::now()))
            .map(|s| {
                serde_json::json!({
                    "path": s.path,
                    "publisher": s.publisher.to_string(),
                    "published_secs": s.age.as_secs(),
                    "ready": s.ready,
                    "bit_rate": s.bit_rate,
                    "rtsp": self.rtsp.map(|a| format!("rtsp://{}{}", host_port(a), url_path(&s.path))),
                    "viewers": { "rtsp": viewers.get(&s.path).copied().unwrap_or(0) },
                    "hls": format!("{}/master.m3u8", url_path(&s.path)),
                    "dash": format!("{}/manifest.mpd", url_path(&s.path)),
                    "recording": self.recorder.as_ref().and_then(|r| r.recording(&s.path)),
                })
            })
            .collect();
        // Camera sources, live or not: the camera (no password), the state and the last error.
        let now = std::time::Instant::now();
        let sources: Vec<serde_json::Value> = self
            .sources
            .iter()
            .flat_map(|sources| sources.summaries(now))
            .map(|s| {
                serde_json::json!({
                    "path": s.path,
                    "url": s.url,
                    "state": s.state,
                    "retry_in_secs": s.retry_in.map(|d| d.as_secs_f64().ceil() as u64),
                    "live_secs": s.live_for.map(|d| d.as_secs()),
                    "last_error": s.last_error,
                    "rtsp": self.rtsp.map(|a| format!("rtsp://{}{}", host_port(a), url_path(&s.path))),
                })
            })
            .collect();
        let mut text =
            serde_json::json!({ "items": items, "sets": sets, "live": live, "sources": sources }).to_string();
        text.push('\n');
        text
    }

    /// What MediaMTX's API says of a path, for the MP4 at `path` (`/a b.mp4`): its tracks
    /// (codec, resolution and frame rate, or sample rate and channels), its duration, whether
    /// it is ready to stream and if not why, its viewers by protocol (RTSP sessions playing it;
    /// HLS is stateless and has none to count) and the body bytes sent of it by protocol (the
    /// CMAF segments HLS and DASH share apart: a request for one does not say which).
    fn describe_stream(
        &self,
        path: &str,
        rtsp_viewers: &BTreeMap<String, u64>,
        item: &mut serde_json::Value,
    ) {
        let library = self.app.library();
        let relative = path.trim_start_matches('/');
        let sent = self.app.requests().stream_bytes(path);
        item["viewers"] = serde_json::json!({ "rtsp": rtsp_viewers.get(path).copied().unwrap_or(0) });
        item["bytes_sent"] = serde_json::json!({
            "http": sent.http,
            "hls": sent.hls,
            "dash": sent.dash,
            "segments": sent.segments,
        });
        let version = match library.file(relative, true) {
            Ok(Some(version)) => version,
            Ok(None) => return,
            Err(e) => {
                item["ready"] = false.into();
                item["not_ready_reason"] = format!("cannot read it: {e}").into();
                return;
            }
        };
        let file = match library.tables(relative, &version, true) {
            Ok(Ok(file)) => file,
            Ok(Err(why)) => {
                item["ready"] = false.into();
                item["not_ready_reason"] = format!("not a playable MP4: {why}").into();
                return;
            }
            Err(e) => {
                item["ready"] = false.into();
                item["not_ready_reason"] = format!("cannot index it: {e}").into();
                return;
            }
        };
        let tracks: Vec<serde_json::Value> = file
            .tracks
            .iter()
            .map(|t| {
                let mut track = match &t.kind {
                    sluice_media::TrackKind::H264(c) => {
                        serde_json::json!({ "id": t.id, "codec": "H264", "width": c.width, "height": c.height })
                    }
                    sluice_media::TrackKind::Video(v) => serde_json::json!({
                        "id": t.id, "codec": v.name(), "width": v.width, "height": v.height,
                        "video_range": v.video_range().map(|r| r.as_str()),
                        // Dolby Vision: its codec string (and brand, when backward compatible).
                        "dolby_vision": v.supplemental_codecs().or_else(|| {
                            v.dolby_vision.filter(|d| d.dolby_vision_only()).map(|_| v.codec_string())
                        }),
                        "hdr_metadata": v.mastering.is_some() || v.light_level.is_some(),
                    }),
                    sluice_media::TrackKind::Aac(c) => serde_json::json!({
                        "id": t.id, "codec": "AAC", "sample_rate": c.sample_rate, "channels": c.channels
                    }),
                    sluice_media::TrackKind::Audio(a) => serde_json::json!({
                        "id": t.id, "codec": a.name(), "sample_rate": a.sample_rate, "channels": a.channels
                    }),
                };
                // The RFC 6381 string HLS and DASH announce the track with.
                track["codecs"] = t.kind.codec_string().into();
                if t.kind.is_video() {
                    let secs = t.duration_secs();
                    let fps = (secs > 0.0).then(|| (t.samples.len() as f64 / secs * 100.0).round() / 100.0);
                    track["frame_rate"] = fps.into();
                }
                track
            })
            .chain(file.skipped.iter().map(|t| serde_json::json!({ "id": t.id, "skipped": t.reason })))
            .collect();
        let duration = file.tracks.iter().map(|t| t.duration_secs()).fold(0.0, f64::max);
        item["tracks"] = tracks.into();
        item["duration_secs"] = ((duration * 1000.0).round() / 1000.0).into();
        let unplayable = sluice_rtsp::playable(&file).err().map(|e| e.to_string());
        let hls_refusal = match library.described(relative, &version, true) {
            Ok(d) => d.hls.as_ref().err().map(|r| r.reason.clone()),
            Err(e) => Some(e.to_string()),
        };
        match (unplayable, hls_refusal) {
            (Some(rtsp), Some(hls)) => {
                item["ready"] = false.into();
                item["not_ready_reason"] = format!("{rtsp}; {hls}").into();
            }
            _ => item["ready"] = true.into(),
        }
    }

    /// `/metrics`: every metric in Prometheus text format.
    pub fn metrics_text(&self) -> String {
        let app = &self.app;
        let mut body = crate::ops::metrics::render(&app.settings().engine, app.counters(), app.requests());
        if let Some(remote) = app.library().as_remote() {
            crate::ops::metrics::render_cache(&mut body, remote.cache().stats(), remote.background_stats());
        }
        crate::ops::metrics::render_catalogue(&mut body, app.library().catalogue().stats());
        crate::ops::metrics::render_thumbnails(&mut body, app.thumbnails().counts());
        crate::ops::metrics::render_segment_cache(&mut body, &app.library().segments().stats());
        if let Some(live) = &self.live {
            let recording = self.recorder.as_ref().map_or(0, |r| r.active());
            crate::ops::metrics::render_live(&mut body, &live.list(std::time::Instant::now()), recording);
        }
        crate::ops::metrics::render_access(&mut body, app.access().map(|a| &**a), app.clients());
        use std::fmt::Write as _;
        let _ = writeln!(
            body,
            "# HELP sluice_dashboard_streams Dashboards following the admin listener's /events now.\n\
# TYPE sluice_dashboard_streams gauge\nsluice_dashboard_streams {}",
            self.board.streams()
        );
        if let Some(certificate) = &self.certificate {
            let _ = writeln!(
                body,
                "# HELP sluice_tls_certificate_expiry_seconds Seconds until the HTTPS certificate's notAfter (negative once expired).\n\
# TYPE sluice_tls_certificate_expiry_seconds gauge\nsluice_tls_certificate_expiry_seconds {}",
                certificate.expires_in()
            );
        }
        body
    }

    /// Takes the dashboard's sample a second until the server stops (run on a thread of its own).
    pub fn run_sampler(&self) {
        let metrics = || self.metrics_text();
        crate::ops::dashboard::sample_every_second(&self.board, self.app.requests(), metrics, &self.shutdown);
    }

    fn route(&self, req: &Request<'_>) -> Response {
        if !matches!(req.method, Method::Get | Method::Head) {
            return Response::error(Status::METHOD_NOT_ALLOWED).with_header("Allow", "GET, HEAD");
        }
        let text = |status, content_type: &'static str, body: String| Response {
            status,
            headers: vec![
                ("Content-Type", Cow::Borrowed(content_type)),
                ("Cache-Control", Cow::Borrowed("no-cache")),
            ],
            body: Body::Bytes(Cow::Owned(body.into_bytes())),
        };
        const PLAIN: &str = "text/plain; charset=utf-8";
        match req.path() {
            Some("/metrics") => {
                text(Status::OK, "text/plain; version=0.0.4; charset=utf-8", self.metrics_text())
            }
            Some("/events") => self.board.events(&self.shutdown),
            // A load balancer checks /healthz: failing it while draining takes the server out
            // of rotation before the grace ends, so no new request reaches a stopping edge.
            Some("/healthz" | "/readyz") if self.shutdown.is_triggered() => {
                text(Status::SERVICE_UNAVAILABLE, PLAIN, "shutting down\n".into())
            }
            Some("/healthz") => text(Status::OK, PLAIN, "ok\n".into()),
            Some("/readyz") => match self.ready.unready_reason() {
                Some(reason) => text(Status::SERVICE_UNAVAILABLE, PLAIN, format!("not ready: {reason}\n")),
                None => text(Status::OK, PLAIN, "ready\n".into()),
            },
            Some("/streams") => text(Status::OK, "application/json", self.streams_json()),
            Some("/recordings") => match self.recordings_json(req.query().unwrap_or_default()) {
                Ok(json) => text(Status::OK, "application/json", json),
                Err(why) => text(Status::BAD_REQUEST, PLAIN, format!("{why}\n")),
            },
            Some("/") => text(Status::OK, "text/html; charset=utf-8", crate::ops::dashboard::page()),
            _ => Response::error(Status::NOT_FOUND),
        }
    }
}

/// The admin endpoints as a handler; every connection shares the one [`Admin`].
#[derive(Debug, Clone)]
pub struct AdminHandler(Arc<Admin>);

impl Handler for AdminHandler {
    fn limits(&self) -> &Limits {
        &self.0.limits
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        self.0.route(req).into()
    }
}

/// The admin listener's service.
#[derive(Debug)]
pub struct AdminService(pub Arc<Admin>);

impl Service for AdminService {
    type Session = HttpSession<AdminHandler>;

    fn session(&self, _peer: SocketAddr, clock: &Clock) -> Self::Session {
        HttpSession::new(AdminHandler(Arc::clone(&self.0)), clock)
    }
}

/// `path` (`/a b/c.mp4`) with each segment percent-encoded.
fn url_path(path: &str) -> String {
    path.split('/')
        .map(|s| percent_encoding::utf8_percent_encode(s, crate::library::names::SEGMENT).to_string())
        .collect::<Vec<_>>()
        .join("/")
}

/// `addr` as a URL's authority; an unspecified address is reached at loopback from here.
pub fn host_port(addr: SocketAddr) -> String {
    match addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv4() => format!("127.0.0.1:{}", addr.port()),
        ip if ip.is_unspecified() => format!("[::1]:{}", addr.port()),
        _ => addr.to_string(),
    }
}

/// How `[[protect]]` encrypts the title at `path` (`/a.mp4`): its scheme and KID (never its
/// key), or `null`.
fn protection_json(protection: &crate::protect::Protection, path: &str) -> serde_json::Value {
    match protection.title(path) {
        None => serde_json::Value::Null,
        Some(Ok(title)) => serde_json::json!({
            "scheme": title.scheme.name(),
            "kid": sluice_media::protect::uuid(&title.key.kid),
        }),
        Some(Err(_)) => serde_json::json!({ "scheme": null, "error": "no key is configured for this title" }),
    }
}
