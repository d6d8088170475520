//! What sluice answers over HTTP: the routes, static files, directory pages and the access log.
//!
//! Owns the mapping from a request to a [`Response`]: `/` and directories get a page listing the
//! library with a player for its videos, files get [`file_response`] (ranges, validators),
//! `/FILE.mp4/master.m3u8` and the rest of a file's HLS packaging go to [`crate::hls`], and
//! everything else gets its precise error. It does not parse HTTP or touch sockets.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use percent_encoding::utf8_percent_encode;
use sluice_engine::{Counters, EngineConfig};
use sluice_proto::http::file::{content_type_for, file_response, FileMeta};
use sluice_proto::http::path::{normalize, LibraryPath, PathError};
use sluice_proto::http::{
    Body, Handler, Limits, Method, Queued, Reply, Request, RequestError, Response, Status,
};

use crate::bench;
use crate::hls::{HlsPackager, HlsRequest};
use crate::library::{Entry, Library, OpenError};
use crate::metrics::RequestCounts;
use crate::remote::{answer_later, Found, RemoteLibrary};
use crate::upload::Uploads;

/// Where the library's files come from.
#[derive(Debug)]
pub enum Source {
    /// A local directory.
    Local(Library),
    /// An object store, through a local cache of slices.
    Remote(Arc<RemoteLibrary>),
}

impl Source {
    /// Every file as (URL path, size), at most `limit`.
    pub fn files(&self, limit: usize) -> Vec<(String, u64)> {
        match self {
            Source::Local(library) => library.files(limit),
            Source::Remote(remote) => remote.files(limit),
        }
    }

    /// The root directory or the store's location, for the start-up line.
    pub fn describe(&self) -> String {
        match self {
            Source::Local(library) => library.root().display().to_string(),
            Source::Remote(remote) => remote.location().to_string(),
        }
    }
}

/// How the application is set up, besides its library.
#[derive(Debug, Clone)]
pub struct AppSettings {
    /// Protocol limits for every connection.
    pub limits: Limits,
    /// Most byte ranges honoured per request.
    pub max_ranges: usize,
    /// Target duration of an HLS segment.
    pub hls_segment: std::time::Duration,
    /// Whether to log a line per request.
    pub access_log: bool,
    /// Whether `/bench/` endpoints are served.
    pub bench: bool,
    /// Where RTSP is served, for the library page's `rtsp://` links; `None` without RTSP.
    pub rtsp: Option<SocketAddr>,
    /// The engine, as `/metrics` reports it.
    pub engine: EngineConfig,
}

/// The application shared by every connection.
#[derive(Debug)]
pub struct App {
    library: Source,
    settings: AppSettings,
    counters: Arc<Counters>,
    requests: RequestCounts,
    boundary: AtomicU64,
    uploads: Option<Uploads>,
    hls: HlsPackager,
}

impl App {
    /// An app serving `library`, reporting the engine's `counters` at `/metrics`.
    pub fn new(library: Source, settings: AppSettings, counters: Arc<Counters>) -> Self {
        // Multipart boundaries only need to be absent from the parts; a time-seeded counter makes
        // them differ between responses without a random source.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        App {
            library,
            hls: HlsPackager::new(settings.hls_segment),
            settings,
            counters,
            requests: RequestCounts::default(),
            boundary: AtomicU64::new(seed),
            uploads: None,
        }
    }

    /// Accepts uploads (`PUT`, `DELETE`) into this store; without it they are 403.
    pub fn with_uploads(mut self, uploads: Uploads) -> Self {
        self.uploads = Some(uploads);
        self
    }

    /// How the application was set up.
    pub fn settings(&self) -> &AppSettings {
        &self.settings
    }

    /// Responses counted so far.
    pub fn requests(&self) -> &RequestCounts {
        &self.requests
    }

    /// The library being served.
    pub fn library(&self) -> &Source {
        &self.library
    }

    /// The engine's counters (the admin listener reports them).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// `rtsp://HOST:PORT` as a client of this request reaches the RTSP listener: the bound
    /// address, or the host the client used when RTSP listens on every address.
    fn rtsp_base(&self, req: &Request<'_>) -> Option<String> {
        let addr = self.settings.rtsp?;
        if !addr.ip().is_unspecified() {
            return Some(format!("rtsp://{addr}"));
        }
        let host = req.header("host").map(String::from_utf8_lossy)?;
        let name = match host.rfind(':') {
            Some(i) if !host.ends_with(']') => &host[..i],
            _ => &host[..],
        };
        Some(format!("rtsp://{name}:{}", addr.port()))
    }

    fn route(&self, req: &Request<'_>) -> Reply {
        if matches!(req.method, Method::Put | Method::Delete) {
            let Some(raw_path) = req.path() else { return Response::error(Status::BAD_REQUEST).into() };
            return match &self.uploads {
                Some(uploads) => uploads.route(req, raw_path),
                None => Response::error(Status::FORBIDDEN).into(),
            };
        }
        if !matches!(req.method, Method::Get | Method::Head) {
            return Response::error(Status::METHOD_NOT_ALLOWED).with_header("Allow", "GET, HEAD").into();
        }
        let Some(raw_path) = req.path() else { return Response::error(Status::BAD_REQUEST).into() };
        if raw_path == crate::page::HLS_JS_PATH {
            return crate::hls::player_script(req).into();
        }
        if self.settings.bench {
            if let Some(reply) = bench::route(raw_path, req.query()) {
                return reply;
            }
        }
        let path = match normalize(raw_path) {
            Ok(p) => p,
            Err(PathError::Escapes) => return Response::error(Status::NOT_FOUND).into(),
            Err(PathError::Malformed) => return Response::error(Status::BAD_REQUEST).into(),
        };
        // sluice's own files (stored gzip forms, temporary uploads) are no client's to request.
        if sluice_store::is_reserved(path.relative()) {
            return Response::error(Status::NOT_FOUND).into();
        }
        match &self.library {
            Source::Local(library) => self.file(req, library, raw_path, path).into(),
            Source::Remote(remote) => self.remote_file(req, remote, path),
        }
    }

    /// A path of a library in an object store: answered now from the cache, or by a job.
    fn remote_file(&self, req: &Request<'_>, remote: &Arc<RemoteLibrary>, path: LibraryPath) -> Reply {
        let remote = Arc::clone(remote);
        let max_ranges = self.settings.max_ranges;
        let boundary = self.boundary.fetch_add(1, Ordering::Relaxed);
        let rtsp = self.rtsp_base(req);
        answer_later(req, move |req, may_block| match remote.lookup(&path, may_block)? {
            Found::File(_) if path.names_directory() => Ok(Response::error(Status::NOT_FOUND)),
            Found::File(version) => remote.file_response(req, &version, max_ranges, boundary, may_block),
            Found::Directory if !path.names_directory() => Ok(directory_redirect(req, &path)),
            Found::Directory => {
                let entries = remote.list(&path, may_block)?;
                // An s3:// library's page lists its files without HLS details: packaging reads
                // the MP4's sample tables from a local file (the cache's slices are not one).
                Ok(listing_response(&path, &entries, rtsp.as_deref(), |_| None))
            }
            Found::NotFound => Ok(Response::error(Status::NOT_FOUND)),
        })
    }

    fn file(&self, req: &Request<'_>, library: &Library, raw_path: &str, path: LibraryPath) -> Response {
        match library.open_entry(&path) {
            Ok(Entry::File(file, meta)) => {
                if path.names_directory() {
                    // "/file.mp4/" names a directory that is not there.
                    return Response::error(Status::NOT_FOUND);
                }
                let file_meta = FileMeta {
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    content_type: content_type_for(path.relative()),
                    etag: None,
                };
                let boundary = self.boundary.fetch_add(1, Ordering::Relaxed);
                file_response(req, Arc::new(file), &file_meta, self.settings.max_ranges, boundary)
            }
            Ok(Entry::Directory) if !path.names_directory() => directory_redirect(req, &path),
            Ok(Entry::Directory) => self.directory(req, library, &path),
            Err(OpenError::NotFound) => {
                self.hls(req, library, &path).unwrap_or_else(|| self.gzip_form(req, library, &path))
            }
            Err(OpenError::Forbidden) => Response::error(Status::FORBIDDEN),
            Err(OpenError::Io(e)) => {
                tracing::warn!(path = raw_path, "open failed: {e}");
                Response::error(Status::INTERNAL_SERVER_ERROR)
            }
        }
    }

    /// `/<file>.mp4/<resource>` of an MP4 in the library: its HLS packaging; `None` when the
    /// path is not of that form or names no file.
    fn hls(&self, req: &Request<'_>, library: &Library, path: &LibraryPath) -> Option<Response> {
        let (parent, name) = path.relative().rsplit_once('/')?;
        let resource = sluice_media::hls::playlist::Resource::parse(name)?;
        if !crate::page::is_mp4(parent) {
            return None;
        }
        let Ok(Entry::File(file, meta)) = library.open_entry(&decoded_path(parent)?) else {
            return None;
        };
        let hls = HlsRequest {
            key: parent,
            file,
            meta,
            resource,
            max_ranges: self.settings.max_ranges,
            boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
        };
        Some(self.hls.respond(req, hls))
    }

    /// A file the store keeps only gzipped (under its hidden gzip form name), else 404.
    fn gzip_form(&self, req: &Request<'_>, library: &Library, path: &LibraryPath) -> Response {
        if path.names_directory() || path.relative().is_empty() {
            return Response::error(Status::NOT_FOUND);
        }
        let gz = sluice_store::gzip_form_name(path.relative());
        match decoded_path(&gz).map(|gz| library.open_entry(&gz)) {
            Some(Ok(Entry::File(file, meta))) => {
                crate::gzip_static::respond(req, path.relative(), file, &meta, self.settings.max_ranges)
            }
            _ => Response::error(Status::NOT_FOUND),
        }
    }

    /// A directory's `index.html` when it has one, else a page listing it.
    fn directory(&self, req: &Request<'_>, library: &Library, dir: &LibraryPath) -> Response {
        let index = if dir.relative().is_empty() {
            "/index.html".to_string()
        } else {
            format!("/{}/index.html", dir.relative())
        };
        if let Ok(index_path) = normalize(&index) {
            if let Ok(Entry::File(file, meta)) = library.open_entry(&index_path) {
                let file_meta = FileMeta {
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    content_type: "text/html; charset=utf-8",
                    etag: None,
                };
                return file_response(req, Arc::new(file), &file_meta, 0, 0);
            }
        }
        match library.list(dir) {
            Ok(entries) => {
                // Files not indexed yet are indexed for the page up to a bound per page view;
                // the rest show their details once played or on a later view.
                let may_index = std::cell::Cell::new(crate::hls::INDEXED_PER_PAGE);
                let describe = |name: &str| {
                    let rel = if dir.relative().is_empty() {
                        name.to_string()
                    } else {
                        format!("{}/{name}", dir.relative())
                    };
                    let Ok(Entry::File(file, meta)) = library.open_entry(&decoded_path(&rel)?) else {
                        return None;
                    };
                    self.hls.describe(&rel, file, &meta, &may_index)
                };
                listing_response(dir, &entries, self.rtsp_base(req).as_deref(), describe)
            }
            Err(e) => {
                tracing::warn!(dir = dir.relative(), "listing failed: {e}");
                Response::error(Status::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

/// The library path of `relative`, a path that is already decoded (a [`LibraryPath`]'s, or one
/// built from it): `%` is encoded again so that normalising does not decode it twice.
fn decoded_path(relative: &str) -> Option<LibraryPath> {
    normalize(&format!("/{}", relative.replace('%', "%25"))).ok()
}

/// A directory addressed without its trailing slash: redirected to it, as nginx does, so that
/// relative links on its page resolve inside it. The location is rebuilt from the normalised
/// path, never echoed: `//evil.com/../dir` must not become `//evil.com/../dir/`, which a browser
/// reads as another host.
fn directory_redirect(req: &Request<'_>, path: &LibraryPath) -> Response {
    let mut location = String::from("/");
    for segment in path.segments() {
        location.extend(utf8_percent_encode(segment, crate::page::SEGMENT));
        location.push('/');
    }
    if let Some(q) = req.query() {
        location.push('?');
        location.push_str(q);
    }
    Response::error(Status::MOVED_PERMANENTLY).with_header("Location", location)
}

/// The page listing a directory's entries, with what `describe` knows of each video.
fn listing_response(
    dir: &LibraryPath,
    entries: &[crate::library::Listed],
    rtsp: Option<&str>,
    describe: impl Fn(&str) -> Option<crate::page::VideoInfo>,
) -> Response {
    let page = crate::page::library_page(dir, entries, rtsp, describe);
    Response {
        status: Status::OK,
        headers: vec![
            ("Content-Type", Cow::Borrowed("text/html; charset=utf-8")),
            ("Cache-Control", Cow::Borrowed("no-cache")),
        ],
        body: Body::Bytes(Cow::Owned(page.into_bytes())),
    }
}

/// The handler one connection uses: the shared app, who is on the other end, and the responses
/// queued and not yet known to be sent whole.
#[derive(Debug)]
pub struct ConnectionHandler {
    app: Arc<App>,
    peer: SocketAddr,
    log: RefCell<ConnectionLog>,
}

/// A connection's responses between being answered and being sent (or cut).
#[derive(Debug, Default)]
struct ConnectionLog {
    /// The request answered last, until its response is queued.
    answered: Option<Answered>,
    /// Responses queued and not yet sent whole, oldest first.
    queued: VecDeque<(Answered, Queued)>,
}

/// A request the app answered, kept until its response ends.
#[derive(Debug)]
struct Answered {
    /// What the access log says of it; `None` when the access log is off.
    line: Option<AccessLine>,
}

#[derive(Debug)]
struct AccessLine {
    started: Instant,
    method: &'static str,
    target: String,
    range: Option<String>,
    user_agent: Option<String>,
}

impl ConnectionHandler {
    /// A handler for a connection from `peer`.
    pub fn new(app: Arc<App>, peer: SocketAddr) -> Self {
        ConnectionHandler { app, peer, log: RefCell::new(ConnectionLog::default()) }
    }

    /// Counts and logs responses that ended: whole up to `sent_total` bytes, and, when
    /// `closed`, the rest cut short.
    fn ended(&self, sent_total: Option<u64>) {
        let mut log = self.log.borrow_mut();
        while let Some((answered, queued)) = log.queued.pop_front() {
            let whole = sent_total.is_none_or(|sent| sent >= queued.end);
            let sent = sent_total.unwrap_or(queued.end);
            if !whole {
                self.app.requests.cut();
            }
            let Some(line) = answered.line else { continue };
            let body = queued.end - queued.body_start;
            let body_sent = sent.clamp(queued.body_start, queued.end) - queued.body_start;
            let ms = (line.started.elapsed().as_secs_f64() * 1e6).round() / 1e3;
            let ua = line.user_agent.as_deref().unwrap_or("-");
            let range = line.range.as_deref().unwrap_or("-");
            let (peer, method, status, target) = (self.peer, line.method, queued.status.0, &line.target);
            if whole {
                tracing::info!(target: "sluice::access", %peer, method, uri = %target, status, bytes = body_sent,
                    duration_ms = ms, user_agent = ua, range, complete = true, "response");
            } else {
                tracing::info!(target: "sluice::access", %peer, method, uri = %target, status, bytes = body_sent,
                    expected = body, duration_ms = ms, user_agent = ua, range, complete = false,
                    "response cut short: {body_sent} of {body} body bytes sent");
            }
        }
    }
}

impl Handler for ConnectionHandler {
    fn limits(&self) -> &Limits {
        &self.app.settings.limits
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        let header = |name| req.header(name).map(|v| String::from_utf8_lossy(v).into_owned());
        let line = self.app.settings.access_log.then(|| AccessLine {
            started: Instant::now(),
            method: req.method.as_str(),
            target: req.target.to_string(),
            range: header("range"),
            user_agent: header("user-agent"),
        });
        self.log.borrow_mut().answered = Some(Answered { line });
        self.app.route(req)
    }

    fn refused(&self, status: Status, error: &RequestError) {
        self.app.requests.refused();
        if self.app.settings.access_log {
            tracing::info!(target: "sluice::access", peer = %self.peer, status = status.0, "refused: {error}");
        }
    }

    fn queued(&self, response: &Queued) {
        let mut log = self.log.borrow_mut();
        // Refused requests were counted and logged as refused; only answered ones go on.
        if let Some(answered) = log.answered.take() {
            self.app.requests.response(response.status.0);
            log.queued.push_back((answered, *response));
        }
    }

    fn drained(&self) {
        if !self.log.borrow().queued.is_empty() {
            self.ended(None);
        }
    }

    fn closed(&self, sent_total: u64) {
        self.ended(Some(sent_total));
    }
}
