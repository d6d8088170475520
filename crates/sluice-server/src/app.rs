//! What sluice answers over HTTP: the routes, static files, directory pages and the access log.
//!
//! Owns the mapping from a request to a [`Response`]: `/` and directories get a page listing the
//! library with a player for each video, files get [`file_response`] (ranges, validators), and
//! everything else gets its precise error. It does not parse HTTP or touch sockets.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use percent_encoding::utf8_percent_encode;
use sluice_engine::{Counters, EngineConfig};
use sluice_proto::http::file::{content_type_for, file_response, FileMeta};
use sluice_proto::http::path::{normalize, LibraryPath, PathError};
use sluice_proto::http::{
    Body, BodySink, Handler, Limits, Method, Reply, Request, RequestError, Response, Status,
};

use crate::bench;
use crate::library::{Entry, Library, OpenError};
use crate::metrics::{self, RequestCounts};
use crate::upload::Uploads;

/// How the application is set up, besides its library.
#[derive(Debug, Clone)]
pub struct AppSettings {
    /// Protocol limits for every connection.
    pub limits: Limits,
    /// Most byte ranges honoured per request.
    pub max_ranges: usize,
    /// Whether to log a line per request.
    pub access_log: bool,
    /// Whether `/bench/` endpoints are served.
    pub bench: bool,
    /// The engine, as `/metrics` reports it.
    pub engine: EngineConfig,
}

/// The application shared by every connection.
#[derive(Debug)]
pub struct App {
    library: Library,
    settings: AppSettings,
    counters: Arc<Counters>,
    requests: RequestCounts,
    boundary: AtomicU64,
    uploads: Option<Uploads>,
}

impl App {
    /// An app serving `library`, reporting the engine's `counters` at `/metrics`.
    pub fn new(library: Library, settings: AppSettings, counters: Arc<Counters>) -> Self {
        // Multipart boundaries only need to be absent from the parts; a time-seeded counter makes
        // them differ between responses without a random source.
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        App {
            library,
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
    pub fn library(&self) -> &Library {
        &self.library
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
        if raw_path == "/metrics" {
            let text = metrics::render(&self.settings.engine, &self.counters, &self.requests);
            return Response {
                status: Status::OK,
                headers: vec![("Content-Type", Cow::Borrowed("text/plain; version=0.0.4; charset=utf-8"))],
                body: Body::Bytes(Cow::Owned(text.into_bytes())),
            }
            .into();
        }
        if self.settings.bench {
            if let Some(reply) = bench::route(raw_path, req.query()) {
                return reply;
            }
        }
        self.file(req, raw_path).into()
    }

    fn file(&self, req: &Request<'_>, raw_path: &str) -> Response {
        let path = match normalize(raw_path) {
            Ok(p) => p,
            Err(PathError::Escapes) => return Response::error(Status::NOT_FOUND),
            Err(PathError::Malformed) => return Response::error(Status::BAD_REQUEST),
        };
        match self.library.open_entry(&path) {
            Ok(Entry::File(file, meta)) => {
                if path.names_directory() {
                    // "/file.mp4/" names a directory that is not there.
                    return Response::error(Status::NOT_FOUND);
                }
                let file_meta = FileMeta {
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    content_type: content_type_for(path.relative()),
                };
                let boundary = self.boundary.fetch_add(1, Ordering::Relaxed);
                file_response(req, Arc::new(file), &file_meta, self.settings.max_ranges, boundary)
            }
            Ok(Entry::Directory) if !path.names_directory() => {
                // As nginx does: a directory is addressed with its trailing slash, so that relative
                // links on its page resolve inside it. The location is rebuilt from the normalised
                // path, never echoed: `//evil.com/../dir` must not become `//evil.com/../dir/`,
                // which a browser reads as another host.
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
            Ok(Entry::Directory) => self.directory(req, &path),
            Err(OpenError::NotFound) => self.gzip_form(req, &path),
            Err(OpenError::Forbidden) => Response::error(Status::FORBIDDEN),
            Err(OpenError::Io(e)) => {
                tracing::warn!(path = raw_path, "open failed: {e}");
                Response::error(Status::INTERNAL_SERVER_ERROR)
            }
        }
    }

    /// A file the store keeps only gzipped (`name.gz`), else 404.
    fn gzip_form(&self, req: &Request<'_>, path: &LibraryPath) -> Response {
        if path.names_directory() || path.relative().is_empty() {
            return Response::error(Status::NOT_FOUND);
        }
        // `relative` is decoded; encode `%` again so that normalising does not decode it twice.
        let gz = normalize(&format!("/{}.gz", path.relative().replace('%', "%25")));
        match gz.map(|gz| self.library.open_entry(&gz)) {
            Ok(Ok(Entry::File(file, meta))) => {
                crate::gzip_static::respond(req, path.relative(), file, &meta, self.settings.max_ranges)
            }
            _ => Response::error(Status::NOT_FOUND),
        }
    }

    /// A directory's `index.html` when it has one, else a page listing it.
    fn directory(&self, req: &Request<'_>, dir: &LibraryPath) -> Response {
        let index = if dir.relative().is_empty() {
            "/index.html".to_string()
        } else {
            format!("/{}/index.html", dir.relative())
        };
        if let Ok(index_path) = normalize(&index) {
            if let Ok(Entry::File(file, meta)) = self.library.open_entry(&index_path) {
                let file_meta = FileMeta {
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    content_type: "text/html; charset=utf-8",
                };
                return file_response(req, Arc::new(file), &file_meta, 0, 0);
            }
        }
        match self.library.list(dir) {
            Ok(entries) => {
                let page = crate::page::library_page(dir, &entries);
                Response {
                    status: Status::OK,
                    headers: vec![
                        ("Content-Type", Cow::Borrowed("text/html; charset=utf-8")),
                        ("Cache-Control", Cow::Borrowed("no-cache")),
                    ],
                    body: Body::Bytes(Cow::Owned(page.into_bytes())),
                }
            }
            Err(e) => {
                tracing::warn!(dir = dir.relative(), "listing failed: {e}");
                Response::error(Status::INTERNAL_SERVER_ERROR)
            }
        }
    }
}

/// The handler one connection uses: the shared app plus who is on the other end.
#[derive(Debug, Clone)]
pub struct ConnectionHandler {
    app: Arc<App>,
    peer: SocketAddr,
}

impl ConnectionHandler {
    /// A handler for a connection from `peer`.
    pub fn new(app: Arc<App>, peer: SocketAddr) -> Self {
        ConnectionHandler { app, peer }
    }
}

impl Handler for ConnectionHandler {
    fn limits(&self) -> &Limits {
        &self.app.settings.limits
    }

    fn respond(&self, req: &Request<'_>) -> Reply {
        let reply = self.app.route(req);
        let entry = AccessEntry::new(self.peer, req, self.app.settings.access_log);
        observe(&self.app, reply, entry)
    }

    fn refused(&self, status: Status, error: &RequestError) {
        self.app.requests.refused();
        if self.app.settings.access_log {
            tracing::info!(target: "sluice::access", "{} refused {}: {error}", self.peer, status.0);
        }
    }
}

/// What the access log says of a request, kept until its reply is known.
struct AccessEntry {
    peer: SocketAddr,
    head: bool,
    /// Method, target and range, formatted once; `None` when the access log is off.
    line: Option<String>,
}

impl AccessEntry {
    fn new(peer: SocketAddr, req: &Request<'_>, enabled: bool) -> Self {
        let line = enabled.then(|| {
            let mut line = format!("\"{} {}\"", req.method.as_str(), req.target);
            if let Some(range) = req.header("range") {
                line.push_str(" range=");
                line.push_str(&String::from_utf8_lossy(range));
            }
            line
        });
        AccessEntry { peer, head: req.method == Method::Head, line }
    }

    fn record(&self, app: &App, response: &Response) {
        app.requests.response(response.status.0);
        if let Some(line) = &self.line {
            let bytes = if self.head { 0 } else { response.body.len() };
            tracing::info!(target: "sluice::access", "{} {line} {} {bytes}", self.peer, response.status.0);
        }
    }
}

/// Counts and logs a reply when its response is known: now, or when a deferred one resolves.
fn observe(app: &Arc<App>, reply: Reply, entry: AccessEntry) -> Reply {
    match reply {
        Reply::Now(response) => {
            entry.record(app, &response);
            Reply::Now(response)
        }
        Reply::After(delay, response) => {
            entry.record(app, &response);
            Reply::After(delay, response)
        }
        Reply::Compute(job) => {
            let app = Arc::clone(app);
            Reply::Compute(Box::new(move || observe(&app, job(), entry)))
        }
        Reply::Body(sink) => Reply::Body(Box::new(ObservedSink { sink, app: Arc::clone(app), entry })),
    }
}

/// An upload's sink whose reply is counted and logged once the body has ended.
struct ObservedSink {
    sink: Box<dyn BodySink>,
    app: Arc<App>,
    entry: AccessEntry,
}

impl BodySink for ObservedSink {
    fn max_len(&self) -> u64 {
        self.sink.max_len()
    }
    fn write(&mut self, payload: &[u8]) -> Result<(), Response> {
        self.sink.write(payload)
    }
    fn finish(self: Box<Self>) -> Reply {
        let ObservedSink { sink, app, entry } = *self;
        observe(&app, sink.finish(), entry)
    }
}
