//! Uploads: `PUT /<path>` writes an object into the content store, `DELETE /<path>` removes one.
//!
//! Owns who may write (bearer tokens, compared in constant time; 403 while uploads are off, the
//! default), how a request maps onto a store write (the target path obeys the same rules as GET,
//! `If-None-Match: *` and `If-Match` become the store's conditions, `Content-MD5` / `Repr-Digest`
//! its checksum) and how the store's outcome maps onto a status (201 created, 204 replaced, 412,
//! 400 on a checksum mismatch, 507 when the disk is full). The body streams from the connection
//! into the store's writer through a [`BodySink`]; nothing holds a whole body in memory, and a body
//! that never completes drops the writer, which leaves nothing behind. It does not parse HTTP
//! (`sluice-proto`) nor know how objects are stored (`sluice-store`).

use std::path::PathBuf;
use std::sync::Arc;

use percent_encoding::utf8_percent_encode;
use sluice_proto::http::file::content_type_for;
use sluice_proto::http::path::{normalize, PathError};
use sluice_proto::http::BodySink;
use sluice_proto::http::{Method, Reply, Request, Response, Status};
use sluice_store::gzip::{put_with_policy, GzipPolicy};
use sluice_store::{Checksum, Condition, Key, ObjectWriter, PutOptions, Store, StoreError};

use crate::config::{StoreSection, UploadsSection};

impl UploadsSection {
    /// The tokens that may write: `tokens` and every line of `token_file`. A token file that
    /// cannot be read or holds no token is an error (`serve` and `serve --check` alike).
    pub fn load_tokens(&self) -> Result<Vec<Vec<u8>>, UploadSetupError> {
        let mut tokens: Vec<Vec<u8>> = self.tokens.iter().map(|t| t.trim().as_bytes().to_vec()).collect();
        if let Some(path) = &self.token_file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| UploadSetupError::TokenFile { path: path.clone(), source })?;
            let before = tokens.len();
            tokens.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(|l| l.as_bytes().to_vec()),
            );
            if tokens.len() == before {
                return Err(UploadSetupError::NoToken { path: path.clone() });
            }
        }
        tokens.retain(|t| !t.is_empty());
        Ok(tokens)
    }

    /// The gzip policy's mode.
    pub fn gzip_mode(&self) -> Result<sluice_store::gzip::GzipMode, UploadSetupError> {
        self.gzip.parse().map_err(UploadSetupError::Gzip)
    }
}

impl StoreSection {
    /// Whether the store is an object store, and so the library.
    pub fn is_remote(&self) -> bool {
        // A location that fails to parse named a scheme (a directory always parses): not a
        // directory either, and opening it says why.
        self.location
            .as_deref()
            .is_some_and(|l| l.parse::<sluice_store::Location>().ok().is_none_or(|l| l.is_remote()))
    }

    /// Whether the cache directory is the default one, private to this process (and so removed
    /// when it exits).
    pub fn cache_dir_is_default(&self) -> bool {
        self.cache_dir.is_none()
    }

    /// The cache settings of an s3:// library.
    pub fn cache_config(&self) -> sluice_store::CacheConfig {
        let dir = self
            .cache_dir
            .clone()
            .unwrap_or_else(|| std::env::temp_dir().join(format!("sluice-cache-{}", std::process::id())));
        sluice_store::CacheConfig {
            dir,
            max_bytes: self.cache_size,
            slice_len: sluice_store::cache::SLICE_LEN,
            revalidate: self.cache_revalidate,
        }
    }

    /// Where recordings grow before they are uploaded into an s3:// store: `record_spool`, else
    /// a folder under the temporary directory named for the store's location, so that a restart
    /// finds what a crash left and two servers of different buckets never share one.
    pub fn record_spool_dir(&self) -> std::path::PathBuf {
        self.record_spool.clone().unwrap_or_else(|| {
            let location = self.location.as_deref().unwrap_or_default();
            let name: String = location
                .trim_start_matches("s3://")
                .trim_end_matches('/')
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '-' })
                .collect();
            std::env::temp_dir().join(format!("sluice-spool-{name}"))
        })
    }

    /// The S3 settings of this section.
    pub fn s3_config(&self) -> sluice_store::S3Config {
        sluice_store::S3Config {
            endpoint: self.s3_endpoint.clone(),
            region: self.s3_region.clone(),
            access_key_id: self.s3_access_key_id.clone(),
            secret_access_key: self.s3_secret_access_key.clone(),
            virtual_hosted: self.s3_virtual_hosted,
            timeout: self.s3_timeout,
            ..Default::default()
        }
    }
}

/// Why the upload settings could not be used.
#[derive(Debug, thiserror::Error)]
pub enum UploadSetupError {
    /// The token file could not be read.
    #[error("cannot read upload token file {path}: {source}")]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token file holds no token: uploads would be off, which a token file never asks for.
    #[error("the upload token file {} holds no token (one a line; blank lines and '#' comments are skipped)", path.display())]
    NoToken {
        /// The file.
        path: PathBuf,
    },
    /// The gzip setting is not one of its values.
    #[error("[uploads] {0}")]
    Gzip(String),
    /// The store could not be opened.
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
}

/// Uploads as the server runs them: the store and the tokens that may write to it.
#[derive(Debug, Clone)]
pub struct Uploads {
    store: Arc<dyn Store>,
    tokens: Vec<Vec<u8>>,
    max_size: u64,
    gzip: GzipPolicy,
    changed: Changed,
    daily: DailyQuota,
}

/// Bytes uploaded per token today (UTC), one entry per configured token (so bounded by them).
#[derive(Debug, Clone)]
struct DailyQuota {
    limit: u64,
    /// Per token: the day (days since the epoch) and the bytes taken on it.
    used: Arc<std::sync::Mutex<Vec<(u64, u64)>>>,
}

impl DailyQuota {
    fn new(limit: u64, tokens: usize) -> DailyQuota {
        DailyQuota { limit, used: Arc::new(std::sync::Mutex::new(vec![(0, 0); tokens])) }
    }

    /// Seconds since the epoch, and the day they fall in.
    fn today() -> (u64, u64) {
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        (now, now / 86_400)
    }

    /// Takes `bytes` of `token`'s allowance today; `Err(429)` with the wait until tomorrow when
    /// they do not fit (nothing is taken then).
    fn take(&self, token: usize, bytes: u64) -> Result<(), Response> {
        if self.limit == 0 {
            return Ok(());
        }
        let (now, day) = DailyQuota::today();
        let mut used = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(entry) = used.get_mut(token) else { return Ok(()) };
        if entry.0 != day {
            *entry = (day, 0);
        }
        if entry.1.saturating_add(bytes) > self.limit {
            let wait = (day + 1) * 86_400 - now;
            return Err(Response::refusal(
                Status::TOO_MANY_REQUESTS,
                format_args!("this token has uploaded {} of its {} bytes today", entry.1, self.limit),
            )
            .with_header("Retry-After", wait.to_string()));
        }
        entry.1 += bytes;
        Ok(())
    }
}

/// Told of every key an upload or delete changed (an s3:// library's cache forgets it), so that
/// the edge that took the write serves it at once rather than after revalidation.
#[derive(Clone, Default)]
pub struct Changed(Option<Arc<ChangeHook>>);

/// What [`Uploads::on_change`] calls.
type ChangeHook = dyn Fn(&Key) + Send + Sync;

impl Changed {
    fn tell(&self, key: &Key) {
        if let Some(f) = &self.0 {
            f(key);
        }
    }
}

impl std::fmt::Debug for Changed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Changed(hook)" } else { "Changed(none)" })
    }
}

impl Uploads {
    /// Opens the store (`library_root` unless the section names another) and reads the tokens.
    pub fn open(
        uploads: &UploadsSection,
        store: &StoreSection,
        library_root: &std::path::Path,
    ) -> Result<Uploads, UploadSetupError> {
        let tokens = uploads.load_tokens()?;
        let location = store.location.clone().unwrap_or_else(|| library_root.display().to_string());
        let store: Arc<dyn Store> = Arc::from(sluice_store::open(&location, Some(store.s3_config()))?);
        let mode = uploads.gzip_mode()?;
        let gzip = GzipPolicy { mode, min_saving: uploads.gzip_min_saving, ..GzipPolicy::default() };
        let daily = DailyQuota::new(uploads.max_bytes_per_token_per_day, tokens.len());
        Ok(Uploads { store, tokens, max_size: uploads.max_size, gzip, changed: Changed::default(), daily })
    }

    /// Calls `hook` with every key a committed upload or delete changed.
    pub fn on_change(mut self, hook: impl Fn(&Key) + Send + Sync + 'static) -> Uploads {
        self.changed = Changed(Some(Arc::new(hook)));
        self
    }

    /// Whether any token may write.
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty()
    }

    /// The store uploads go to.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Answers a PUT or DELETE.
    pub fn route(&self, req: &Request<'_>, raw_path: &str) -> Reply {
        if !self.enabled() {
            return Response::refusal(
                Status::FORBIDDEN,
                "uploads are off on this server (no upload token is configured)",
            )
            .into();
        }
        let Some(token) = self.authorized(req) else {
            return Response::refusal(
                Status::UNAUTHORIZED,
                "a valid upload token is required (Authorization: Bearer TOKEN)",
            )
            .with_header("WWW-Authenticate", "Bearer")
            .into();
        };
        let key = match key_of(raw_path) {
            Ok(key) => key,
            Err(response) => return response.into(),
        };
        let condition = match condition_of(req) {
            Ok(c) => c,
            Err(response) => return response.into(),
        };
        match req.method {
            Method::Put => self.put(req, key, condition, token),
            Method::Delete => {
                let store = Arc::clone(&self.store);
                let changed = self.changed.clone();
                Reply::Compute(Box::new(move || match store.delete(&key, &condition) {
                    Ok(()) => {
                        changed.tell(&key);
                        Response::error(Status::NO_CONTENT).into()
                    }
                    Err(e) => store_error(&key, e).into(),
                }))
            }
            _ => Response::refusal(Status::METHOD_NOT_ALLOWED, "uploads take PUT and DELETE")
                .with_header("Allow", "GET, HEAD, PUT, DELETE")
                .into(),
        }
    }

    fn put(&self, req: &Request<'_>, key: Key, condition: Condition, token: usize) -> Reply {
        let chunked = req.header("transfer-encoding").is_some();
        let declared =
            req.header("content-length").and_then(|v| std::str::from_utf8(v).ok()?.trim().parse().ok());
        if declared.is_none() && !chunked {
            return Response::refusal(
                Status::LENGTH_REQUIRED,
                "a PUT needs Content-Length or Transfer-Encoding: chunked",
            )
            .into();
        }
        if let Some(len) = declared.filter(|len: &u64| *len > self.max_size) {
            return too_large(format_args!("the upload is {len} bytes, the limit is {}", self.max_size))
                .into();
        }
        // A declared length is taken from the day's allowance before the body (refused whole
        // when it does not fit); a chunked body as it arrives.
        if let Some(len) = declared {
            if let Err(response) = self.daily.take(token, len) {
                return response.into();
            }
        }
        let checksum = match checksum_of(req) {
            Ok(c) => c,
            Err(response) => return response.into(),
        };
        let content_type = req
            .header("content-type")
            .and_then(|v| std::str::from_utf8(v).ok())
            .unwrap_or_else(|| content_type_for(key.as_str()))
            .to_string();
        let options = PutOptions {
            condition,
            checksum,
            content_type: Some(content_type),
            content_encoding: None,
            report_created: true,
        };
        match put_with_policy(Arc::clone(&self.store), &key, options, self.gzip) {
            Ok(writer) => {
                let changed = self.changed.clone();
                // A declared length was checked above; a chunked body is counted as it arrives, so
                // that going over the limit is refused with the reason rather than by the framing.
                let max_len = if declared.is_some() { self.max_size } else { u64::MAX };
                let limit = self.max_size;
                let quota = declared.is_none().then(|| (self.daily.clone(), token));
                Reply::Body(Box::new(UploadSink { key, writer, max_len, limit, received: 0, changed, quota }))
            }
            Err(e) => store_error(&key, e).into(),
        }
    }

    /// Which of the tokens the request carries, if any. Every token is compared in full, in time
    /// that depends on the lengths only, so timing tells nothing about how much of one matched.
    fn authorized(&self, req: &Request<'_>) -> Option<usize> {
        let value = req.header("authorization")?;
        let value = sluice_proto::http::request::trim_ows(value);
        let scheme = value.get(..7)?;
        if !scheme.eq_ignore_ascii_case(b"bearer ") {
            return None;
        }
        let offered = sluice_proto::http::request::trim_ows(&value[7..]);
        self.tokens.iter().enumerate().fold(None, |found, (i, token)| {
            if constant_time_eq(token, offered) {
                Some(i)
            } else {
                found
            }
        })
    }
}

/// Compares two byte strings without an early exit on the first difference.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = (a.len() ^ b.len()) as u64;
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= (x ^ y) as u64;
    }
    // Keep the optimiser from turning the loop back into an early-exit comparison.
    std::hint::black_box(diff) == 0
}

fn too_large(why: impl std::fmt::Display) -> Response {
    Response::refusal(Status::CONTENT_TOO_LARGE, why)
}

/// The key a PUT or DELETE names, or the response refusing it.
fn key_of(raw_path: &str) -> Result<Key, Response> {
    let path = match normalize(raw_path) {
        Ok(p) => p,
        Err(PathError::Escapes) => {
            return Err(Response::refusal(Status::NOT_FOUND, "the path leads out of the library"))
        }
        Err(PathError::Malformed) => {
            return Err(Response::refusal(
                Status::BAD_REQUEST,
                "the path is not valid percent-encoded UTF-8, or it holds a NUL or a backslash",
            ))
        }
    };
    if path.names_directory() || path.relative().is_empty() {
        return Err(Response::refusal(
            Status::METHOD_NOT_ALLOWED,
            "a directory is not an object: PUT and DELETE take a file's path",
        )
        .with_header("Allow", "GET, HEAD"));
    }
    Key::new(path.relative())
        .map_err(|e| Response::refusal(Status::BAD_REQUEST, format_args!("`{}`: {e}", path.relative())))
}

fn condition_of(req: &Request<'_>) -> Result<Condition, Response> {
    if let Some(v) = req.header("if-none-match") {
        return match text(v, "If-None-Match")? {
            "*" => Ok(Condition::CreateOnly),
            // A tag list only makes sense for reads; for writes only `*` is meaningful here.
            _ => {
                Err(Response::refusal(Status::BAD_REQUEST, "If-None-Match on a PUT or DELETE takes only `*`"))
            }
        };
    }
    let mut tags = Vec::new();
    for v in req.header_values("if-match") {
        tags.extend(text(v, "If-Match")?.split(',').map(|t| t.trim().to_string()).filter(|t| !t.is_empty()));
    }
    Ok(if tags.is_empty() { Condition::Always } else { Condition::IfMatch(tags) })
}

fn text<'a>(v: &'a [u8], name: &str) -> Result<&'a str, Response> {
    std::str::from_utf8(v)
        .map(str::trim)
        .map_err(|_| Response::refusal(Status::BAD_REQUEST, format_args!("{name} is not valid UTF-8")))
}

fn checksum_of(req: &Request<'_>) -> Result<Option<Checksum>, Response> {
    if let Some(v) = req.header("repr-digest") {
        return Checksum::from_repr_digest(text(v, "Repr-Digest")?)
            .map(Some)
            .map_err(|e| Response::refusal(Status::BAD_REQUEST, format_args!("Repr-Digest: {e}")));
    }
    if let Some(v) = req.header("content-md5") {
        return Checksum::from_content_md5(text(v, "Content-MD5")?)
            .map(Some)
            .map_err(|e| Response::refusal(Status::BAD_REQUEST, format_args!("Content-MD5: {e}")));
    }
    Ok(None)
}

/// The response for a store failure, with its reason (and a log line for the server's own).
fn store_error(key: &Key, e: StoreError) -> Response {
    let (status, why) = match &e {
        StoreError::NotFound => (Status::NOT_FOUND, format!("no object `{key}`")),
        StoreError::PreconditionFailed => (
            Status::PRECONDITION_FAILED,
            format!(
                "`{key}`: the condition (If-Match or If-None-Match: *) does not hold; nothing was changed"
            ),
        ),
        StoreError::ChecksumMismatch => (
            Status::BAD_REQUEST,
            format!("`{key}`: the body does not match its Content-MD5 or Repr-Digest; nothing was stored"),
        ),
        StoreError::BadKey(reason) => (Status::BAD_REQUEST, format!("`{key}`: {reason}")),
        StoreError::NoSpace => {
            (Status::INSUFFICIENT_STORAGE, format!("`{key}`: no space left in the store; nothing was stored"))
        }
        StoreError::Conflict => (
            Status(409),
            format!(
                "`{key}`: the name is a directory, or a file stands where a directory of its path would be"
            ),
        ),
        StoreError::Remote(cause) => (Status::BAD_GATEWAY, format!("the object store failed: {cause}")),
        StoreError::Io(_) | StoreError::Config(_) => {
            (Status::INTERNAL_SERVER_ERROR, "the store failed (the server's log says why)".to_string())
        }
    };
    if status.0 >= 500 {
        tracing::warn!(%key, "upload failed: {e}");
    }
    Response::refusal(status, why)
}

/// An upload's body on its way into the store.
struct UploadSink {
    changed: Changed,
    key: Key,
    writer: Box<dyn ObjectWriter>,
    /// What the framing may deliver (the limit for a declared length; unbounded for chunked).
    max_len: u64,
    /// Most bytes an upload may have.
    limit: u64,
    received: u64,
    /// For a chunked body, the day's allowance of the token it came with, taken as bytes arrive.
    quota: Option<(DailyQuota, usize)>,
}

impl BodySink for UploadSink {
    fn max_len(&self) -> u64 {
        self.max_len
    }

    fn write(&mut self, payload: &[u8]) -> Result<(), Response> {
        self.received += payload.len() as u64;
        if self.received > self.limit {
            // Dropping the writer (with the sink) stores nothing.
            return Err(too_large(format_args!(
                "the upload is over {} bytes (the limit) after {} bytes of its chunked body",
                self.limit, self.received
            )));
        }
        if let Some((quota, token)) = &self.quota {
            quota.take(*token, payload.len() as u64)?;
        }
        self.writer.write(payload).map_err(|e| store_error(&self.key, e))
    }

    fn finish(self: Box<Self>) -> Reply {
        // fsync, rename or an S3 request: not for the event loop.
        Reply::Compute(Box::new(move || {
            let UploadSink { key, writer, changed, .. } = *self;
            match writer.commit() {
                Ok(done) => {
                    changed.tell(&key);
                    let status = if done.created { Status::CREATED } else { Status::NO_CONTENT };
                    // Every byte the store kept of it, for `sluice upload`'s bytes-stored figure:
                    // an object store's gzip form alone (less than the body), a local root's file
                    // and the gzip form beside it (more).
                    let stored = done.meta.len + done.gzip_beside.unwrap_or(0);
                    let mut response = Response::error(status)
                        .with_header("ETag", done.meta.etag)
                        .with_header("Sluice-Stored-Length", stored.to_string());
                    if done.created {
                        let location: Vec<String> = key
                            .as_str()
                            .split('/')
                            .map(|s| utf8_percent_encode(s, crate::library::names::SEGMENT).to_string())
                            .collect();
                        response = response.with_header("Location", format!("/{}", location.join("/")));
                    }
                    response.into()
                }
                Err(e) => store_error(&key, e).into(),
            }
        }))
    }
}

impl std::fmt::Debug for UploadSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UploadSink").field("key", &self.key).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn example_file_documents_the_defaults() {
        let config: crate::Config = toml::from_str(include_str!("../../../../sluice.toml")).unwrap();
        let d = UploadsSection::default();
        let u = &config.uploads;
        assert_eq!(
            (u.max_size, u.gzip.as_str(), u.gzip_min_saving),
            (d.max_size, d.gzip.as_str(), d.gzip_min_saving)
        );
        assert!(u.tokens.is_empty() && u.token_file.is_none(), "uploads are off by default");
        assert!(config.store.location.is_none());
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
