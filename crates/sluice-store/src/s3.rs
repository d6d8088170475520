//! The S3 backend: objects in a bucket under a prefix, through the `object_store` crate.
//!
//! The rest of sluice is synchronous: an operation is called, and blocks, where blocking is
//! allowed (a CPU-pool job of the engine, a background fetch worker, an uploader's worker),
//! never on an event loop. This backend still owns a small tokio runtime (two threads), and
//! turns each operation into a task on it waited for with `futures::executor::block_on` (which
//! works from any thread, including a tokio engine's), because `object_store`'s S3 client is
//! async: its HTTP connections (hyper, under reqwest) need a tokio reactor to drive them, and
//! their pooled keep-alive connections and a multipart upload's parts in flight live on that
//! runtime between calls. The runtime only drives sockets; the waiting is the caller's job.
//! A write below [`MULTIPART_THRESHOLD`] is buffered and sent as one PutObject; a larger one becomes
//! a multipart upload whose parts are sent while the body still arrives, at most
//! [`PARTS_IN_FLIGHT`] at a time (so memory stays at a few parts whatever the object's size), and
//! which is aborted when the writer is dropped or any part fails.
//!
//! A key is the object's name, byte for byte: [`S3Store`] maps it to an `object_store` path with
//! `Path::parse` (which keeps the string as it is), never `Path::from` (which percent-encodes
//! `%`, non-ASCII and a few ASCII characters into the key itself), so an object another client
//! wrote as `été 日本.mp4` is found under that name and a name given as `caf%C3%A9.mp4` is stored
//! as exactly that. `object_store` alone encodes the key into the request URL.
//!
//! Conditions are S3 conditional writes: `If-None-Match: *` becomes `PutMode::Create` and
//! `If-Match` becomes `PutMode::Update`, decided by the store in the one request that writes the
//! object, so racing writers in other processes get exactly one winner. A store that answers a
//! conditional write with 501 Not Implemented is remembered as lacking them, and from then on the
//! condition is checked with a HEAD just before the write (a racing writer can slip between the
//! two; said in the log once). A multipart upload (objects above [`MULTIPART_THRESHOLD`]) cannot
//! carry a condition through `object_store`, so it is checked with a HEAD before completing.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::SystemTime;

use futures::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::{
    Attribute, Attributes, ClientConfigKey, MultipartUpload, ObjectStore, PutMode, PutMultipartOptions,
    PutPayload, UpdateVersion,
};
use tokio::task::JoinHandle;

use crate::{Committed, Condition, Key, ObjectMeta, ObjectWriter, PutOptions, Store, StoreError, Verified};

/// Objects at least this large are written as multipart uploads (S3's parts must be ≥ 5 MiB).
pub const MULTIPART_THRESHOLD: usize = 8 << 20;
/// Parts sent at once by one writer; with the part being filled, bounds its memory to 3 parts.
pub const PARTS_IN_FLIGHT: usize = 2;

/// Where the bucket is and how to reach it. Unset credentials and region come from the usual
/// `AWS_*` environment variables.
#[derive(Debug, Clone, Default)]
pub struct S3Config {
    /// The endpoint URL, e.g. `http://127.0.0.1:8333` (SeaweedFS, MinIO); unset means AWS.
    pub endpoint: Option<String>,
    /// The bucket.
    pub bucket: String,
    /// A key prefix inside the bucket (no leading or trailing `/`).
    pub prefix: String,
    /// The region (`us-east-1` when neither this nor `AWS_REGION` says).
    pub region: Option<String>,
    /// Access key id.
    pub access_key_id: Option<String>,
    /// Secret access key.
    pub secret_access_key: Option<String>,
    /// Virtual-hosted-style addressing (`bucket.host`); off means path style, as SeaweedFS and
    /// MinIO want.
    pub virtual_hosted: bool,
    /// Longest time one request may take (unset: [`DEFAULT_TIMEOUT`]); a server reading its
    /// library from the store answers 504 past it.
    pub timeout: Option<std::time::Duration>,
}

/// A request's time limit unless [`S3Config::timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

/// A bucket (and prefix) as a store.
#[derive(Debug, Clone)]
pub struct S3Store {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    client: Arc<AmazonS3>,
    prefix: String,
    runtime: tokio::runtime::Runtime,
    /// Cleared when the store answers a conditional write 501: conditions fall back to HEAD.
    conditional_writes: AtomicBool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Dropping a runtime inside another one's context panics; a tokio engine may hold the last
        // reference, so let the runtime's threads go without waiting for them.
        let runtime = std::mem::replace(
            &mut self.runtime,
            tokio::runtime::Builder::new_current_thread().build().expect("an empty runtime"),
        );
        runtime.shutdown_background();
    }
}

impl S3Store {
    /// Connects (lazily: no request is made until the first operation).
    pub fn new(config: S3Config) -> Result<S3Store, StoreError> {
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&config.bucket)
            .with_virtual_hosted_style_request(config.virtual_hosted)
            .with_disable_tagging(true);
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        let region = config.region.clone().or_else(|| std::env::var("AWS_REGION").ok());
        builder = builder.with_region(region.unwrap_or_else(|| "us-east-1".into()));
        if let Some(id) = &config.access_key_id {
            builder = builder.with_access_key_id(id);
        }
        if let Some(secret) = &config.secret_access_key {
            builder = builder.with_secret_access_key(secret);
        }
        // object_store retries for up to 3 minutes by default: a client of an edge would wait that
        // long for a store that is down. Two retries within the timeout, then the error.
        let timeout = config.timeout.unwrap_or(DEFAULT_TIMEOUT);
        // (Set as keys: replacing the client options would drop `allow_http` and the environment's.)
        let millis = |d: std::time::Duration| format!("{}ms", d.as_millis());
        let connect = timeout.min(std::time::Duration::from_secs(2));
        let retry =
            object_store::RetryConfig { max_retries: 2, retry_timeout: timeout, ..Default::default() };
        builder = builder
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::Timeout), millis(timeout))
            .with_config(AmazonS3ConfigKey::Client(ClientConfigKey::ConnectTimeout), millis(connect))
            .with_retry(retry);
        let client = builder.build().map_err(|e| StoreError::Config(e.to_string()))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("sluice-s3")
            .enable_all()
            .build()
            .map_err(|e| StoreError::Config(format!("runtime: {e}")))?;
        let prefix = config.prefix.trim_matches('/').to_string();
        if !prefix.is_empty() {
            ObjectPath::parse(&prefix).map_err(|e| StoreError::Config(format!("prefix `{prefix}`: {e}")))?;
        }
        let conditional_writes = AtomicBool::new(true);
        Ok(S3Store {
            inner: Arc::new(Inner { client: Arc::new(client), prefix, runtime, conditional_writes }),
        })
    }

    /// The object path of a key: the prefix and the key, as they are (see the module's docs).
    fn path_of(&self, key: &Key) -> Result<ObjectPath, StoreError> {
        let full = match self.inner.prefix.as_str() {
            "" => key.as_str().to_string(),
            prefix => format!("{prefix}/{key}"),
        };
        // A key has no control character, empty, `.` or `..` segment: parse keeps it verbatim.
        ObjectPath::parse(&full).map_err(|e| StoreError::Remote(format!("key `{key}`: {e}")))
    }

    /// Runs a future on the store's runtime and waits for it from this (any) thread.
    fn run<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreError>> + Send + 'static,
    ) -> Result<T, StoreError> {
        wait(self.inner.runtime.spawn(fut))
    }

    fn meta_of(&self, meta: object_store::ObjectMeta) -> ObjectMeta {
        let full: String = meta.location.into();
        let key = match self.inner.prefix.as_str() {
            "" => full,
            prefix => full
                .strip_prefix(prefix)
                .and_then(|k| k.strip_prefix('/'))
                .map_or_else(|| full.clone(), str::to_string),
        };
        let etag =
            meta.e_tag.map_or_else(String::new, |t| if t.starts_with('"') { t } else { format!("\"{t}\"") });
        ObjectMeta {
            key,
            len: meta.size,
            etag,
            modified: Some(SystemTime::from(meta.last_modified)),
            encoding: None,
        }
    }

    fn current(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        let client = Arc::clone(&self.inner.client);
        let path = self.path_of(key)?;
        // A HEAD through `get_opts` rather than `head`: only it returns the attributes, and a
        // reader must know that an object is stored gzipped (`Content-Encoding`).
        let options = object_store::GetOptions { head: true, ..Default::default() };
        let head = self.run(async move {
            let got = client.get_opts(&path, options).await.map_err(StoreError::from)?;
            Ok((got.meta, got.attributes))
        });
        match head {
            Ok((meta, attributes)) => {
                let mut meta = self.meta_of(meta);
                meta.encoding = attributes.get(&Attribute::ContentEncoding).map(|v| v.to_string());
                Ok(Some(meta))
            }
            Err(StoreError::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

fn wait<T>(task: JoinHandle<Result<T, StoreError>>) -> Result<T, StoreError> {
    futures::executor::block_on(task).map_err(|e| StoreError::Remote(format!("task: {e}")))?
}

impl Store for S3Store {
    fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        self.current(key)
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let client = Arc::clone(&self.inner.client);
        let base = match self.inner.prefix.as_str() {
            "" => None,
            prefix => Some(ObjectPath::parse(prefix).map_err(|e| StoreError::Config(e.to_string()))?),
        };
        let listed = self.run(async move {
            client.list(base.as_ref()).try_collect::<Vec<_>>().await.map_err(StoreError::from)
        })?;
        let mut found: Vec<ObjectMeta> = listed
            .into_iter()
            .map(|m| self.meta_of(m))
            // sluice's reserved names are nobody's objects, wherever they came from.
            .filter(|m| m.key.starts_with(prefix) && !crate::is_reserved(&m.key))
            .collect();
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    fn read_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>, StoreError> {
        let client = Arc::clone(&self.inner.client);
        let path = self.path_of(key)?;
        let bytes =
            self.run(async move { client.get_range(&path, range).await.map_err(StoreError::from) })?;
        Ok(bytes.to_vec())
    }

    fn read_range_if(&self, key: &Key, range: Range<u64>, etag: &str) -> Result<Vec<u8>, StoreError> {
        let client = Arc::clone(&self.inner.client);
        let path = self.path_of(key)?;
        let options = object_store::GetOptions {
            if_match: Some(etag.to_string()),
            range: Some(object_store::GetRange::Bounded(range)),
            ..Default::default()
        };
        let bytes = self.run(async move {
            let got = client.get_opts(&path, options).await.map_err(StoreError::from)?;
            got.bytes().await.map_err(StoreError::from)
        })?;
        Ok(bytes.to_vec())
    }

    fn put(&self, key: &Key, options: PutOptions) -> Result<Box<dyn ObjectWriter>, StoreError> {
        let mut attributes = Attributes::new();
        if let Some(t) = &options.content_type {
            attributes.insert(Attribute::ContentType, t.clone().into());
        }
        if let Some(e) = &options.content_encoding {
            attributes.insert(Attribute::ContentEncoding, e.clone().into());
        }
        let writer = S3Writer {
            store: self.clone(),
            key: key.clone(),
            condition: options.condition,
            report_created: options.report_created,
            attributes,
            written: 0,
            buffer: Vec::new(),
            multipart: None,
        };
        Ok(Box::new(Verified::new(writer, options.checksum)))
    }

    fn delete(&self, key: &Key, condition: &Condition) -> Result<(), StoreError> {
        let current = self.current(key)?.ok_or(StoreError::NotFound)?;
        if !condition.allows(Some(&current)) {
            return Err(StoreError::PreconditionFailed);
        }
        let client = Arc::clone(&self.inner.client);
        let path = self.path_of(key)?;
        self.run(async move { client.delete(&path).await.map_err(StoreError::from) })
    }
}

/// A multipart upload under way: the upload and its parts in flight.
struct Multipart {
    upload: Box<dyn MultipartUpload>,
    parts: Vec<JoinHandle<Result<(), StoreError>>>,
}

/// Why a conditional write did not happen.
enum Conditional {
    /// The store does not do conditional writes.
    Unsupported(String),
    /// It does, and this one failed (412 included).
    Failed(StoreError),
}

/// Whether an error says the store does not implement a conditional write (501).
fn unsupported(e: &object_store::Error) -> bool {
    match e {
        object_store::Error::NotImplemented => true,
        object_store::Error::Generic { .. } | object_store::Error::NotSupported { .. } => {
            let text = format!("{e:?}");
            text.contains("501") || text.contains("NotImplemented")
        }
        _ => false,
    }
}

/// An object being written to S3.
struct S3Writer {
    store: S3Store,
    key: Key,
    condition: Condition,
    report_created: bool,
    attributes: Attributes,
    /// Bytes written so far.
    written: u64,
    /// The part being filled (or the whole object, while below the threshold).
    buffer: Vec<u8>,
    multipart: Option<Multipart>,
}

/// How one PutObject is sent.
enum Put {
    /// Whatever is there.
    Overwrite,
    /// Only if nothing is there (`If-None-Match: *`).
    Create,
    /// Only if this version is there (`If-Match: TAG`).
    Update(String),
}

impl S3Writer {
    /// Sends one PutObject with `mode`.
    fn send(&self, payload: PutPayload, mode: Put) -> Result<object_store::PutResult, object_store::Error> {
        let client = Arc::clone(&self.store.inner.client);
        let path = self
            .store
            .path_of(&self.key)
            .map_err(|e| object_store::Error::Generic { store: "S3", source: e.to_string().into() })?;
        let mode = match mode {
            Put::Overwrite => PutMode::Overwrite,
            Put::Create => PutMode::Create,
            Put::Update(tag) => PutMode::Update(UpdateVersion { e_tag: Some(tag), version: None }),
        };
        let opts =
            object_store::PutOptions { mode, attributes: self.attributes.clone(), ..Default::default() };
        let task = self.store.inner.runtime.spawn(async move { client.put_opts(&path, payload, opts).await });
        futures::executor::block_on(task)
            .map_err(|e| object_store::Error::Generic { store: "S3", source: Box::new(e) })?
    }

    /// Writes the object in one PutObject, the condition decided by the store; whether it was
    /// created. Falls back to HEAD-then-PUT once a store is known to lack conditional writes.
    fn put_object(&self, payload: PutPayload) -> Result<(object_store::PutResult, bool), StoreError> {
        if self.store.inner.conditional_writes.load(Ordering::Relaxed) {
            match self.put_conditionally(payload.clone()) {
                Err(Conditional::Unsupported(e)) => {
                    tracing::warn!(
                        "the object store does not support conditional writes ({e}); checking conditions \
                         with a HEAD before each write instead, which a concurrent writer can race"
                    );
                    self.store.inner.conditional_writes.store(false, Ordering::Relaxed);
                }
                Err(Conditional::Failed(e)) => return Err(e),
                Ok(done) => return Ok(done),
            }
        }
        let current = match self.condition != Condition::Always || self.report_created {
            true => self.store.current(&self.key)?,
            false => None,
        };
        if !self.condition.allows(current.as_ref()) {
            return Err(StoreError::PreconditionFailed);
        }
        let done = self.send(payload, Put::Overwrite)?;
        Ok((done, current.is_none()))
    }

    fn put_conditionally(&self, payload: PutPayload) -> Result<(object_store::PutResult, bool), Conditional> {
        let attempt = |payload: PutPayload, mode: Put| {
            self.send(payload, mode).map_err(|e| match unsupported(&e) {
                true => Conditional::Unsupported(e.to_string()),
                false => Conditional::Failed(e.into()),
            })
        };
        match &self.condition {
            Condition::CreateOnly => Ok((attempt(payload, Put::Create)?, true)),
            Condition::IfMatch(tags) if tags.len() == 1 && tags[0] != "*" && !tags[0].starts_with("W/") => {
                Ok((attempt(payload, Put::Update(tags[0].clone()))?, false))
            }
            Condition::IfMatch(_) => {
                // `*`, several tags or weak ones: the current version decides, and the write is
                // conditional on that version still being there.
                let current = self.store.current(&self.key).map_err(Conditional::Failed)?;
                match current {
                    Some(meta) if self.condition.allows(Some(&meta)) => {
                        Ok((attempt(payload, Put::Update(meta.etag))?, false))
                    }
                    _ => Err(Conditional::Failed(StoreError::PreconditionFailed)),
                }
            }
            Condition::Always if self.report_created => match attempt(payload.clone(), Put::Create) {
                // One request for a new key; a replacement costs a second.
                Err(Conditional::Failed(StoreError::PreconditionFailed)) => {
                    Ok((attempt(payload, Put::Overwrite)?, false))
                }
                other => Ok((other?, true)),
            },
            Condition::Always => Ok((attempt(payload, Put::Overwrite)?, true)),
        }
    }

    /// Sends the buffer as the next part, starting the multipart upload if need be, after waiting
    /// for parts in flight beyond the bound.
    fn send_part(&mut self) -> Result<(), StoreError> {
        if self.multipart.is_none() {
            let client = Arc::clone(&self.store.inner.client);
            let path = self.store.path_of(&self.key)?;
            let opts = PutMultipartOptions { attributes: self.attributes.clone(), ..Default::default() };
            let upload = self
                .store
                .run(async move { client.put_multipart_opts(&path, opts).await.map_err(StoreError::from) })?;
            self.multipart = Some(Multipart { upload, parts: Vec::new() });
        }
        let part = std::mem::take(&mut self.buffer);
        let m = self.multipart.as_mut().expect("started above");
        while m.parts.iter().filter(|p| !p.is_finished()).count() >= PARTS_IN_FLIGHT {
            let oldest = m.parts.iter().position(|p| !p.is_finished()).expect("one unfinished");
            let handle = m.parts.remove(oldest);
            wait(handle)?;
        }
        let sending = m.upload.put_part(PutPayload::from(part));
        m.parts.push(self.store.inner.runtime.spawn(async move { sending.await.map_err(StoreError::from) }));
        Ok(())
    }
}

impl ObjectWriter for S3Writer {
    fn write(&mut self, mut data: &[u8]) -> Result<(), StoreError> {
        self.written += data.len() as u64;
        while !data.is_empty() {
            let room = MULTIPART_THRESHOLD - self.buffer.len();
            let take = room.min(data.len());
            self.buffer.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.buffer.len() == MULTIPART_THRESHOLD {
                self.send_part()?;
            }
        }
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<Committed, StoreError> {
        // Every request here is a round trip to the store (the seed's ~114 ms each): one PUT whose
        // condition the store decides where it can, a HEAD only where it cannot, and the stored
        // object's tag from the PUT's own answer rather than another HEAD.
        let (result, created) = if self.multipart.is_none() {
            let payload = PutPayload::from(std::mem::take(&mut self.buffer));
            self.put_object(payload)?
        } else {
            let current = match self.condition != Condition::Always || self.report_created {
                true => self.store.current(&self.key)?,
                false => None,
            };
            if !self.condition.allows(current.as_ref()) {
                return Err(StoreError::PreconditionFailed);
            }
            if !self.buffer.is_empty() {
                self.send_part()?;
            }
            let Multipart { mut upload, parts } = self.multipart.take().ok_or(StoreError::NotFound)?;
            let done = self.store.run(async move {
                for part in parts {
                    if let Err(e) = part.await.map_err(|e| StoreError::Remote(e.to_string())).and_then(|r| r)
                    {
                        let _ = upload.abort().await;
                        return Err(e);
                    }
                }
                match upload.complete().await {
                    Ok(done) => Ok(done),
                    Err(e) => {
                        let _ = upload.abort().await;
                        Err(StoreError::from(e))
                    }
                }
            })?;
            (done, current.is_none())
        };
        let etag =
            result
                .e_tag
                .map_or_else(String::new, |t| if t.starts_with('"') { t } else { format!("\"{t}\"") });
        let meta = ObjectMeta {
            key: self.key.as_str().to_string(),
            len: self.written,
            etag,
            modified: Some(SystemTime::now()),
            encoding: self.attributes.get(&Attribute::ContentEncoding).map(|v| v.to_string()),
        };
        Ok(Committed { created, meta, gzip_beside: None })
    }
}

impl Drop for S3Writer {
    fn drop(&mut self) {
        // Uncommitted: abort the multipart upload so the bucket keeps no parts.
        if let Some(Multipart { mut upload, parts }) = self.multipart.take() {
            let key = self.key.clone();
            self.store.inner.runtime.spawn(async move {
                for part in parts {
                    part.abort();
                }
                if let Err(e) = upload.abort().await {
                    tracing::warn!(%key, "cannot abort a multipart upload: {e}");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_without_conditional_writes_is_told_apart_from_a_failed_condition() {
        assert!(unsupported(&object_store::Error::NotImplemented));
        let generic =
            |text: &str| object_store::Error::Generic { store: "S3", source: text.to_string().into() };
        assert!(unsupported(&generic("Server returned non-2xx status code: 501 Not Implemented")));
        assert!(!unsupported(&generic("Server returned non-2xx status code: 503 Service Unavailable")));
        let precondition = object_store::Error::Precondition { path: "k".into(), source: "412".into() };
        assert!(!unsupported(&precondition));
        assert!(matches!(StoreError::from(precondition), StoreError::PreconditionFailed));
    }
}
