//! What sluice answers over HTTP: the routes, static files, directory pages and the access log.
//!
//! Owns the mapping from a request to a [`Response`]: `/` and directories get a page listing the
//! library with a player for its videos, files get [`file_response`] (ranges, validators),
//! `/FILE.mp4/master.m3u8` and the rest of a file's HLS packaging go to [`crate::http::hls`], and
//! everything else gets its precise error. Its child [`connection`] is the handler the engine
//! drives per connection (the per-address limit, the access log). It does not parse HTTP or
//! touch sockets.

use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use percent_encoding::utf8_percent_encode;
use sluice_engine::{Counters, EngineConfig};
use sluice_proto::http::file::content_type_for;
use sluice_proto::http::path::{normalize, LibraryPath, PathError};
use sluice_proto::http::{Body, Limits, Method, Reply, Request, Response, Status};

use crate::access::Access;
use crate::config::ClientsSection;
use crate::http::hls::HlsRequest;
use crate::http::limits::ClientLimits;
use crate::http::upload::Uploads;
use crate::library::catalogue::Offers;
use crate::library::{answer_later, error_response};
use crate::library::{FileVersion, Found, Library, LibraryError, Listed};
use crate::ops::bench;
use crate::ops::metrics::RequestCounts;
use crate::protect::{licence, NoKey, Protection};

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
    /// Where RTSP is served, for the library page's `rtsp://` links; `None` without RTSP.
    pub rtsp: Option<SocketAddr>,
    /// The engine, as `/metrics` reports it.
    pub engine: EngineConfig,
}

/// The application shared by every connection.
#[derive(Debug)]
pub struct App {
    library: Arc<Library>,
    settings: AppSettings,
    counters: Arc<Counters>,
    requests: RequestCounts,
    boundary: AtomicU64,
    uploads: Option<Uploads>,
    /// Who may read what; `None` when everything is open.
    access: Option<Arc<Access>>,
    /// Limits per client address.
    clients: Arc<ClientLimits>,
    /// Which titles are encrypted (`[[protect]]`).
    protection: Arc<Protection>,
    /// Scrubbing thumbnails: their layout, decoder and tiles.
    thumbnails: Arc<crate::thumbs::Thumbnails>,
    /// The live paths, served as live HLS and DASH; `None` without RTSP.
    live: Option<Arc<sluice_rtsp::LiveRegistry>>,
    /// The recorder, which says which files are still being written.
    recorder: Option<Arc<crate::record::Recorder>>,
}

impl App {
    /// An app serving `library`, reporting the engine's `counters` at `/metrics`.
    pub fn new(library: Arc<Library>, settings: AppSettings, counters: Arc<Counters>) -> Self {
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
            access: None,
            clients: Arc::new(ClientLimits::new(ClientsSection::default())),
            protection: Arc::new(Protection::default()),
            thumbnails: Arc::new(crate::thumbs::Thumbnails::off("thumbnails are not set up on this server")),
            live: None,
            recorder: None,
        }
    }

    /// Makes and serves scrubbing thumbnails with `thumbnails`.
    pub fn with_thumbnails(mut self, thumbnails: Arc<crate::thumbs::Thumbnails>) -> Self {
        self.thumbnails = thumbnails;
        self
    }

    /// Serves the live paths of `live` as live HLS and DASH, and the files `recorder` writes
    /// as growing ones.
    pub fn with_live(
        mut self,
        live: Option<Arc<sluice_rtsp::LiveRegistry>>,
        recorder: Option<Arc<crate::record::Recorder>>,
    ) -> Self {
        self.live = live;
        self.recorder = recorder;
        self
    }

    /// The scrubbing thumbnails' maker.
    pub fn thumbnails(&self) -> &Arc<crate::thumbs::Thumbnails> {
        &self.thumbnails
    }

    /// Encrypts the titles `protection` names and serves their keys.
    pub fn with_protection(mut self, protection: Arc<Protection>) -> Self {
        self.protection = protection;
        self
    }

    /// The `[[protect]]` entries in force.
    pub fn protection(&self) -> &Arc<Protection> {
        &self.protection
    }

    /// Guards reads with `access` (`[[access]]`) and applies `clients`' limits per address.
    pub fn with_access(mut self, access: Option<Arc<Access>>, clients: Arc<ClientLimits>) -> Self {
        self.access = access;
        self.clients = clients;
        self
    }

    /// The read policies, when any guards a path.
    pub fn access(&self) -> Option<&Arc<Access>> {
        self.access.as_ref()
    }

    /// The limits per client address.
    pub fn clients(&self) -> &Arc<ClientLimits> {
        &self.clients
    }

    /// Accepts uploads (`PUT`, `DELETE`) into this store; without it they are 403. The library
    /// is told of every change, so that its caches forget the old version at once.
    pub fn with_uploads(mut self, uploads: Uploads) -> Self {
        let library = Arc::clone(&self.library);
        self.uploads = Some(uploads.on_change(move |key| library.changed(key)));
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
    pub fn library(&self) -> &Arc<Library> {
        &self.library
    }

    /// The engine's counters (the admin listener reports them).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// What may be offered of the file at library-relative `relative` (decoded), in the
    /// version `tag` names when a listing said: its HLS URL when it packages, its RTSP URL when
    /// RTSP can stream it. Indexes it if it must, so the caller must be allowed to block (the
    /// admin listener, start-up).
    pub fn offers(&self, relative: &str, tag: Option<&str>) -> Offers {
        if !crate::library::names::is_mp4(relative) {
            return Offers::default();
        }
        if let Some(known) = tag.and_then(|tag| self.library.known(relative, tag)) {
            return known.offers();
        }
        match self.library.file(relative, true) {
            Ok(Some(version)) => match self.library.described(relative, &version, true) {
                Ok(described) => described.offers(),
                Err(e) => {
                    tracing::warn!(path = relative, "cannot index: {e}");
                    Offers::default()
                }
            },
            _ => Offers::default(),
        }
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

    fn route(self: &Arc<Self>, req: &Request<'_>, peer: SocketAddr) -> Reply {
        if matches!(req.method, Method::Put | Method::Delete) {
            let Some(raw_path) = req.path() else { return not_a_path().into() };
            return match &self.uploads {
                Some(uploads) => uploads.route(req, raw_path),
                None => Response::refusal(
                    Status::FORBIDDEN,
                    "uploads are off on this server (no upload token is configured)",
                )
                .into(),
            };
        }
        if matches!(req.method, Method::Post | Method::Options) {
            return self.licence(req, peer);
        }
        if !matches!(req.method, Method::Get | Method::Head) {
            return Response::error(Status::METHOD_NOT_ALLOWED).with_header("Allow", "GET, HEAD").into();
        }
        let Some(raw_path) = req.path() else { return not_a_path().into() };
        if raw_path == crate::page::assets::HLS_JS_PATH {
            return crate::http::hls::player_script(req).into();
        }
        if raw_path == crate::page::assets::DASH_JS_PATH {
            return crate::http::hls::dash_player_script(req).into();
        }
        if raw_path == crate::page::assets::DASH_PROTECTION_JS_PATH {
            return crate::http::hls::dash_protection_script(req).into();
        }
        if self.settings.bench {
            if let Some(reply) = bench::route(raw_path, req.query()) {
                return reply;
            }
        }
        let path = match normalize(raw_path) {
            Ok(p) => p,
            Err(PathError::Escapes) => return Response::error(Status::NOT_FOUND).into(),
            Err(e @ PathError::Malformed) => return Response::refusal(Status::BAD_REQUEST, e).into(),
        };
        // sluice's own files (stored gzip forms, temporary uploads) are no client's to request.
        if sluice_store::is_reserved(path.relative()) {
            return Response::error(Status::NOT_FOUND).into();
        }
        // A span of recordings is guarded as the recordings are.
        // (Only a span's path is made; any other request is checked as it is, with no copy.)
        let recordings = match crate::http::rec::guarded_path(raw_path).map(|p| normalize(&p)) {
            Some(Ok(recordings)) => Some(recordings),
            Some(Err(_)) => return Response::error(Status::NOT_FOUND).into(),
            None => None,
        };
        let guarded = recordings.as_ref().unwrap_or(&path);
        // Checked before the library is asked, so a refusal says nothing of what exists.
        let carry = match self.access.as_ref().map(|access| check_access(access, req, guarded, peer)) {
            // A key is refused with 403 whatever the reason: a player cannot answer a challenge.
            Some(Err(_)) if self.names_a_key(&path) => return forbidden().into(),
            Some(Err(refused)) => return refused.into(),
            Some(Ok(carry)) => carry,
            None => None,
        };
        if let Some(live) = self.live.as_deref() {
            if let Some(response) = crate::http::live::respond(live, req, path.relative()) {
                return response.into();
            }
            if crate::http::rec::names_span(raw_path) {
                let sending = crate::http::rec::SpanSending {
                    max_ranges: self.settings.max_ranges,
                    boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
                };
                // Like a file: on the loop in a local library; in an object store's, at once
                // when the listing, indexes and slices are at hand, else from a job.
                let (app, raw_path) = (Arc::clone(self), raw_path.to_string());
                return answer_later(req, move |req, may_block| {
                    let span = |req: &Request<'_>| {
                        crate::http::rec::respond(&app.library, req, &raw_path, sending, may_block)
                            .unwrap_or_else(|| Ok(Response::error(Status::NOT_FOUND)))
                    };
                    match carry.as_deref() {
                        Some(carry) if is_manifest(&raw_path) => {
                            whole(req, |whole| Ok(carry_on(span(whole)?, Some(carry))))
                        }
                        _ => span(req),
                    }
                });
            }
        }
        if self.library.as_remote().is_none()
            && !self.encrypts(&path)
            && !crate::http::ts::needs_a_job(path.relative())
            && !crate::http::thumbs::needs_a_job(path.relative())
        {
            // A local library answers on the loop: opens and `moov` reads come from the page
            // cache, as the files themselves do. (A TS segment is muxed in a job.)
            return self
                .answer_carrying(req, &path, true, carry.as_deref())
                .unwrap_or_else(|e| error_response(req.target, e))
                .into();
        }
        // An object store's answers may wait for the origin: at once when nothing is missing,
        // else from a job.
        let app = Arc::clone(self);
        answer_later(req, move |req, may_block| app.answer_carrying(req, &path, may_block, carry.as_deref()))
    }

    /// [`App::answer`], with a URL's credentials (`carry`) carried on to the URLs a playlist
    /// lists. A playlist is then made whole whatever the request's range or validators said:
    /// its text changes with the credentials, so ranges and tags of the bare text mean nothing.
    fn answer_carrying(
        &self,
        req: &Request<'_>,
        path: &LibraryPath,
        may_block: bool,
        carry: Option<&str>,
    ) -> Result<Response, LibraryError> {
        let Some(carry) = carry else { return self.answer(req, path, may_block) };
        if path.names_directory() {
            return Ok(carry_on(self.answer(req, path, may_block)?, Some(carry)));
        }
        if !is_manifest(path.relative()) {
            return self.answer(req, path, may_block);
        }
        whole(req, |whole| Ok(carry_on(self.answer(whole, path, may_block)?, Some(carry))))
    }

    /// The response to a GET or HEAD of `path`; [`LibraryError::WouldBlock`] when it needs to
    /// wait and `may_block` is false.
    fn answer(
        &self,
        req: &Request<'_>,
        path: &LibraryPath,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        if let Some(response) = self.clip(req, path, may_block)? {
            return Ok(response);
        }
        // HLS first: `FILE.mp4/seg-3.m4s` names nothing in a directory (`FILE.mp4` is a file), and
        // an object store would be asked for every segment's name before finding that out.
        if let Some(response) = self.hls(req, path, may_block)? {
            return Ok(response);
        }
        match self.library.lookup(path, may_block)? {
            // "/file.mp4/" names a directory that is not there.
            Found::File(_) if path.names_directory() => Ok(Response::error(Status::NOT_FOUND)),
            // An encrypted title's file would be its clear copy.
            Found::File(_)
                if crate::library::names::is_mp4(path.relative())
                    && self.protection.guards(&full_path(path)) =>
            {
                Ok(served_encrypted())
            }
            Found::File(version) => {
                let content_type = content_type_for(path.relative());
                let max_ranges = self.settings.max_ranges;
                match self.gzip_beside(path, &version, content_type, may_block)? {
                    Some((gz, meta)) if crate::http::gzip_static::accepts_gzip(req) => {
                        Ok(crate::http::gzip_static::respond(req, path.relative(), gz, &meta, max_ranges))
                    }
                    Some(_) => Ok(self
                        .file_response(req, &version, content_type, max_ranges, may_block)?
                        .with_header("Vary", "Accept-Encoding")),
                    None => self.file_response(req, &version, content_type, max_ranges, may_block),
                }
            }
            Found::Directory if !path.names_directory() => Ok(directory_redirect(req, path)),
            Found::Directory => self.directory(req, path, may_block),
            Found::NotFound => self.gzip_form(req, path, may_block),
        }
    }

    /// A file's bytes, with ranges and validators.
    fn file_response(
        &self,
        req: &Request<'_>,
        version: &FileVersion,
        content_type: &'static str,
        max_ranges: usize,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        let boundary = self.boundary.fetch_add(1, Ordering::Relaxed);
        self.library.file_response(req, version, content_type, max_ranges, boundary, may_block)
    }

    /// `/<file>.mp4/<resource>` of an MP4 in the library: its HLS and DASH packaging; and
    /// `/<title>.set/<resource>`, a rendition set's; `None` when the path is not of that form
    /// or names no file.
    fn hls(
        &self,
        req: &Request<'_>,
        path: &LibraryPath,
        may_block: bool,
    ) -> Result<Option<Response>, LibraryError> {
        if let Some((owner, resource)) = crate::http::ts::ts_path(path.relative()) {
            // MPEG-TS, I-frame fragments and clips are clear: not for an encrypted title.
            if self.protection.guards(&format!("/{owner}")) {
                return Ok(Some(served_encrypted()));
            }
            if crate::library::names::is_mp4(owner) {
                let Some(version) = self.library.file(owner, may_block)? else { return Ok(None) };
                let request = crate::http::ts::TsRequest {
                    relative: owner,
                    version: &version,
                    what: resource,
                    max_ranges: self.settings.max_ranges,
                    boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
                };
                return crate::http::ts::respond(req, &self.library, &request, may_block).map(Some);
            }
            return crate::http::ts::respond_set(req, &self.library, owner, resource, may_block).map(Some);
        }
        if let Some((file, resource)) = crate::http::thumbs::thumbs_path(path.relative()) {
            // Thumbnails are clear pictures of the title: not for an encrypted one.
            if self.protection.guards(&format!("/{file}")) {
                return Ok(Some(served_encrypted()));
            }
            let Some(version) = self.library.file(file, may_block)? else { return Ok(None) };
            let request = crate::http::thumbs::ThumbRequest {
                relative: file,
                version: &version,
                what: resource,
                max_ranges: self.settings.max_ranges,
                boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
            };
            return crate::http::thumbs::respond(req, &self.library, &self.thumbnails, &request, may_block)
                .map(Some);
        }
        let Some((parent, name)) = path.relative().rsplit_once('/') else { return Ok(None) };
        let protection = match self.protection.title(&format!("/{parent}")) {
            Some(Ok(title)) => Some(title),
            Some(Err(NoKey)) if crate::library::names::is_title(parent) => {
                tracing::warn!(path = parent, "[[protect]]: no key is listed for this title; refused");
                return Ok(Some(Response::refusal(
                    Status::SERVICE_UNAVAILABLE,
                    "no key is configured for this title",
                )));
            }
            _ => None,
        };
        if name == licence::AES_KEY && crate::library::names::is_title(parent) {
            return Ok(Some(match &protection {
                Some(title) => licence::aes_key(title),
                None => Response::error(Status::NOT_FOUND),
            }));
        }
        if let Some(resource) = sluice_media::hls::iframes::IFrameResource::parse(name) {
            if !crate::library::names::is_mp4(parent) {
                return Ok(None);
            }
            if protection.is_some() {
                return Ok(Some(served_encrypted()));
            }
            let Some(version) = self.library.file(parent, may_block)? else { return Ok(None) };
            let request = crate::http::trick::TrickRequest {
                relative: parent,
                version: &version,
                what: resource,
                max_ranges: self.settings.max_ranges,
                boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
            };
            return crate::http::trick::respond(req, &self.library, &request, may_block).map(Some);
        }
        let Some(resource) = sluice_media::hls::playlist::Resource::parse(name) else { return Ok(None) };
        if let Some(set) = parent.strip_suffix(crate::library::renditions::SET_SUFFIX) {
            let (dir, title) = set.rsplit_once('/').unwrap_or(("", set));
            if !title.is_empty() {
                let thumbnails = Some(&*self.thumbnails);
                let set = crate::http::hls::SetRequest { dir, title, resource, thumbnails, protection };
                return crate::http::hls::respond_set(req, &self.library, &set, may_block).map(Some);
            }
        }
        if !crate::library::names::is_mp4(parent) {
            return Ok(None);
        }
        let Some(version) = self.library.file(parent, may_block)? else { return Ok(None) };
        let hls = HlsRequest {
            relative: parent,
            version: &version,
            resource,
            max_ranges: self.settings.max_ranges,
            boundary: self.boundary.fetch_add(1, Ordering::Relaxed),
            protection,
            thumbnails: Some(&*self.thumbnails),
            growing_since: self.recorder.as_ref().and_then(|r| r.growing_since(parent)),
        };
        crate::http::hls::respond(req, &self.library, &hls, may_block).map(Some)
    }

    /// The gzip form an upload kept beside a compressible local file, open, unless it is older
    /// than the file: it is written after the file, so an older one is stale (the file was
    /// changed by other means since) and the file is served without it.
    fn gzip_beside(
        &self,
        path: &LibraryPath,
        version: &FileVersion,
        content_type: &str,
        may_block: bool,
    ) -> Result<Option<(std::fs::File, std::fs::Metadata)>, LibraryError> {
        let FileVersion::Local { meta: plain, .. } = version else { return Ok(None) };
        if !sluice_store::gzip::GzipPolicy::compressible(content_type) {
            return Ok(None);
        }
        match self.library.file(&sluice_store::gzip_form_name(path.relative()), may_block)? {
            Some(FileVersion::Local { file, meta }) if meta.modified().ok() >= plain.modified().ok() => {
                Ok(Arc::try_unwrap(file).ok().map(|file| (file, meta)))
            }
            _ => Ok(None),
        }
    }

    /// A file a local library keeps only gzipped (under its hidden gzip form's name), else 404.
    /// (An object store marks a gzipped object in its metadata instead, and the file route
    /// serves it.)
    fn gzip_form(
        &self,
        req: &Request<'_>,
        path: &LibraryPath,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        if path.names_directory() || path.relative().is_empty() || self.library.as_remote().is_some() {
            return Ok(Response::error(Status::NOT_FOUND));
        }
        match self.library.file(&sluice_store::gzip_form_name(path.relative()), may_block)? {
            Some(FileVersion::Local { file, meta }) => match Arc::try_unwrap(file) {
                Ok(file) => Ok(crate::http::gzip_static::respond(
                    req,
                    path.relative(),
                    file,
                    &meta,
                    self.settings.max_ranges,
                )),
                Err(_) => Ok(Response::error(Status::INTERNAL_SERVER_ERROR)),
            },
            _ => Ok(Response::error(Status::NOT_FOUND)),
        }
    }

    /// A directory's `index.html` when it has one, else a page listing it.
    fn directory(
        &self,
        req: &Request<'_>,
        dir: &LibraryPath,
        may_block: bool,
    ) -> Result<Response, LibraryError> {
        let join = |name: &str| match dir.relative() {
            "" => name.to_string(),
            rel => format!("{rel}/{name}"),
        };
        if let Some(index) = self.library.file(&join("index.html"), may_block)? {
            return self.file_response(req, &index, "text/html; charset=utf-8", 0, may_block);
        }
        let entries = self.library.list(dir, may_block)?;
        let tags: HashMap<&str, &str> =
            entries.iter().filter_map(|e| Some((e.name.as_str(), e.tag.as_deref()?))).collect();
        // Files not indexed yet are indexed for the page up to a bound per page view; the rest
        // show their details once played or on a later view. Where blocking is not allowed, a
        // page that needs an index (or an object's version) is made again by a job.
        let may_index = Cell::new(crate::http::hls::INDEXED_PER_PAGE);
        let needs_job = Cell::new(false);
        let describe_file = |name: &str| -> Offers {
            let relative = join(name);
            if let Some(known) = tags.get(name).and_then(|tag| self.library.known(&relative, tag)) {
                return known.offers();
            }
            let version = match self.library.file(&relative, may_block) {
                Ok(Some(version)) => version,
                Err(LibraryError::WouldBlock) => {
                    needs_job.set(true);
                    return Offers::default();
                }
                Ok(None) | Err(_) => return Offers::default(),
            };
            if let Ok(known) = self.library.described(&relative, &version, false) {
                return known.offers();
            }
            if may_index.get() == 0 {
                return Offers::default();
            }
            if !may_block {
                needs_job.set(true);
                return Offers::default();
            }
            may_index.set(may_index.get() - 1);
            match self.library.described(&relative, &version, true) {
                Ok(described) => described.offers(),
                Err(e) => {
                    tracing::warn!(path = relative, "cannot index: {e}");
                    Offers::default()
                }
            }
        };
        // What the page offers of an encrypted title: its scheme, and no RTSP (clear RTP).
        let describe = |name: &str| -> Offers {
            let mut offers = describe_file(name);
            if let Some(Ok(title)) = self.protection.title(&format!("/{}", join(name))) {
                offers.protection = Some(title.scheme.name());
                offers.rtsp = false;
            }
            offers
        };
        // Rendition sets are offered once found whole and lined up, else shown with why not.
        let sets =
            match crate::library::renditions::listed_sets(&self.library, dir.relative(), &entries, may_block)
            {
                // An encrypted set says its scheme, as its renditions do.
                Ok(mut sets) => {
                    for s in &mut sets {
                        let set = format!("/{}{}", join(&s.title), crate::library::renditions::SET_SUFFIX);
                        s.protection =
                            self.protection.title(&set).and_then(Result::ok).map(|t| t.scheme.name());
                    }
                    sets
                }
                Err(LibraryError::WouldBlock) => {
                    needs_job.set(true);
                    Vec::new()
                }
                Err(e) => {
                    tracing::warn!(path = dir.relative(), "cannot look for rendition sets: {e}");
                    Vec::new()
                }
            };
        // Live paths head the library's own page.
        let live = match (&self.live, dir.relative().is_empty()) {
            (Some(live), true) => live.list(std::time::Instant::now()),
            _ => Vec::new(),
        };
        let page = listing_response(dir, &entries, &sets, &live, self.rtsp_base(req).as_deref(), describe);
        if needs_job.get() {
            return Err(LibraryError::WouldBlock);
        }
        Ok(page)
    }
}

/// `/` and the decoded path of `path`, as `[[protect]]` prefixes name it.
fn full_path(path: &LibraryPath) -> String {
    format!("/{}", path.relative())
}

/// The answer to a request target that is no path (`*`, or an absolute URL without one).
fn not_a_path() -> Response {
    Response::refusal(Status::BAD_REQUEST, "the request target is not a path")
}

/// A directory addressed without its trailing slash: redirected to it, as nginx does, so that
/// relative links on its page resolve inside it. The location is rebuilt from the normalised
/// path, never echoed: `//evil.com/../dir` must not become `//evil.com/../dir/`, which a browser
/// reads as another host.
fn directory_redirect(req: &Request<'_>, path: &LibraryPath) -> Response {
    let mut location = String::from("/");
    for segment in path.segments() {
        location.extend(utf8_percent_encode(segment, crate::library::names::SEGMENT));
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
    entries: &[Listed],
    sets: &[crate::library::renditions::SetOffer],
    live: &[sluice_rtsp::LiveSummary],
    rtsp: Option<&str>,
    describe: impl Fn(&str) -> Offers,
) -> Response {
    let page = crate::page::folder::library_page(dir, entries, sets, live, rtsp, describe);
    Response {
        status: Status::OK,
        headers: vec![
            ("Content-Type", Cow::Borrowed("text/html; charset=utf-8")),
            ("Cache-Control", Cow::Borrowed("no-cache")),
        ],
        body: Body::Bytes(Cow::Owned(page.into_bytes())),
    }
}

mod clips;
mod connection;
mod credentials;
mod kinds;
mod protection;

use credentials::{carry_on, check_access, forbidden, is_manifest, whole};
use kinds::route_kind;
use protection::served_encrypted;

pub(crate) use connection::log_rtsp;
pub use connection::ConnectionHandler;

#[cfg(test)]
mod tests;
