//! gzip only when it pays: a compressible object is stored gzipped when that saves enough, and
//! plain otherwise, never bigger than plain.
//!
//! The seed measured gzip shrinking a 50 KB HTML email to 2 KB and growing an 80 B SMS to 100 B
//! (the gzip header and trailer are 18 bytes): so the decision is made per object, after
//! compressing it, against two floors (a fraction and a byte count). Deciding needs the whole
//! object, so a candidate is buffered up to [`GZIP_CANDIDATE_MAX`]; a larger one is streamed plain
//! (compressible media this large is rare, and the buffer bounds memory per upload). Where the
//! gzip form goes is the store's: beside the plain file on a local root, as the object itself in
//! an object store ([`Store::keeps_gzip_beside`]).

use std::io::Write;
use std::sync::Arc;

use flate2::write::GzEncoder;
use flate2::Compression;

use crate::{Committed, Condition, Key, ObjectWriter, PutOptions, Store, StoreError};

/// Largest object considered for gzip; larger ones are stored plain as they stream.
pub const GZIP_CANDIDATE_MAX: usize = 4 << 20;

/// When to store the gzip form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GzipMode {
    /// When it saves at least the policy's floors.
    #[default]
    Auto,
    /// Whenever it is smaller at all.
    Always,
    /// Never.
    Never,
}

impl std::str::FromStr for GzipMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(GzipMode::Auto),
            "always" => Ok(GzipMode::Always),
            "never" => Ok(GzipMode::Never),
            other => Err(format!("gzip must be auto, always or never, not `{other}`")),
        }
    }
}

/// The gzip policy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GzipPolicy {
    /// When to compress.
    pub mode: GzipMode,
    /// Least saving, as a fraction of the plain size, for `Auto` (0.10: a tenth).
    pub min_saving: f64,
    /// Least saving in bytes for `Auto`.
    pub min_saving_bytes: u64,
}

impl Default for GzipPolicy {
    fn default() -> Self {
        GzipPolicy { mode: GzipMode::Auto, min_saving: 0.10, min_saving_bytes: 512 }
    }
}

impl GzipPolicy {
    /// Whether objects of this media type are worth trying: text, HTML, JSON, XML, SVG, CSS,
    /// JavaScript, HLS playlists, WebVTT.
    pub fn compressible(content_type: &str) -> bool {
        let t = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        t.starts_with("text/")
            || t.ends_with("+json")
            || t.ends_with("+xml")
            || matches!(
                t.as_str(),
                "application/json"
                    | "application/xml"
                    | "application/javascript"
                    | "application/x-javascript"
                    | "image/svg+xml"
                    | "application/vnd.apple.mpegurl"
                    | "application/x-mpegurl"
                    | "audio/mpegurl"
                    | "audio/x-mpegurl"
            )
    }

    /// Whether to keep a gzip form of `gz` bytes for a plain object of `plain` bytes.
    pub fn keeps(&self, plain: u64, gz: u64) -> bool {
        if gz >= plain {
            return false;
        }
        let saved = plain - gz;
        match self.mode {
            GzipMode::Never => false,
            GzipMode::Always => true,
            GzipMode::Auto => {
                saved >= self.min_saving_bytes && saved as f64 >= self.min_saving * plain as f64
            }
        }
    }
}

/// gzip-compresses bytes (level 6: objects are compressed once and served many times) on the
/// caller's thread, with no thread of its own. miniz_oxide's compressor state is about 300 KiB and,
/// in debug builds, is built on the stack before it is boxed, more than the threads engine's
/// 256 KiB connection stacks hold (it overflowed there): the server compresses in the upload's CPU
/// job, on its engine's job runner (`sluice_engine::CpuPool`), whose threads have the stack for it
/// on every engine.
pub fn gzip(plain: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::with_capacity(plain.len() / 4 + 64), Compression::new(6));
    encoder.write_all(plain).expect("writing to a Vec");
    encoder.finish().expect("writing to a Vec")
}

/// Starts a write that stores the gzip form when `policy` says it pays, the plain one otherwise.
/// `options.content_type` decides whether the object is a candidate at all.
pub fn put_with_policy(
    store: Arc<dyn Store>,
    key: &Key,
    options: PutOptions,
    policy: GzipPolicy,
) -> Result<Box<dyn ObjectWriter>, StoreError> {
    let candidate = policy.mode != GzipMode::Never
        && options.content_encoding.is_none()
        && options.content_type.as_deref().is_some_and(GzipPolicy::compressible);
    if !candidate {
        return store.put(key, options);
    }
    Ok(Box::new(GzipCandidate { store, key: key.clone(), options, policy, buffer: Vec::new(), plain: None }))
}

/// A compressible object, buffered until it is known whether gzip pays.
struct GzipCandidate {
    store: Arc<dyn Store>,
    key: Key,
    options: PutOptions,
    policy: GzipPolicy,
    buffer: Vec<u8>,
    /// Once over the candidate size: the plain write it became.
    plain: Option<Box<dyn ObjectWriter>>,
}

impl ObjectWriter for GzipCandidate {
    fn write(&mut self, data: &[u8]) -> Result<(), StoreError> {
        if let Some(plain) = &mut self.plain {
            return plain.write(data);
        }
        if self.buffer.len() + data.len() > GZIP_CANDIDATE_MAX {
            let mut plain = self.store.put(&self.key, self.options.clone())?;
            plain.write(&std::mem::take(&mut self.buffer))?;
            plain.write(data)?;
            self.plain = Some(plain);
            return Ok(());
        }
        self.buffer.extend_from_slice(data);
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<Committed, StoreError> {
        let GzipCandidate { store, key, mut options, policy, buffer, plain } = *self;
        if let Some(plain) = plain {
            return plain.commit();
        }
        if let Some(expected) = &options.checksum {
            let mut h = expected.hasher();
            h.update(&buffer);
            if !expected.matches(&h.finish()) {
                return Err(StoreError::ChecksumMismatch);
            }
        }
        let compressed = gzip(&buffer);
        let keep = policy.keeps(buffer.len() as u64, compressed.len() as u64);
        if keep && !store.keeps_gzip_beside() {
            // Verified above on the plain bytes; the stored bytes are the gzip form.
            let gzip =
                PutOptions { checksum: None, content_encoding: Some("gzip".into()), ..options.clone() };
            match store.put(&key, gzip) {
                Ok(mut writer) => {
                    writer.write(&compressed)?;
                    return writer.commit();
                }
                // A store with no room for the gzip form's name keeps the plain form.
                Err(StoreError::BadKey(crate::KeyError::TooLong)) => {}
                Err(e) => return Err(e),
            }
        }
        options.checksum = None;
        let mut writer = store.put(&key, options.clone())?;
        writer.write(&buffer)?;
        let mut committed = writer.commit()?;
        if keep && store.keeps_gzip_beside() && keep_beside(&*store, &key, options, &committed, &compressed) {
            committed.gzip_beside = Some(compressed.len() as u64);
        }
        Ok(committed)
    }
}

/// Writes the gzip form beside the plain object just `committed`, only while that is still the
/// object (another upload that replaced it in between made this form stale); whether it did.
/// The upload has succeeded either way: without its gzip form the object is served plain.
fn keep_beside(
    store: &dyn Store,
    key: &Key,
    options: PutOptions,
    committed: &Committed,
    compressed: &[u8],
) -> bool {
    let options = PutOptions {
        checksum: None,
        content_encoding: Some("gzip".into()),
        condition: Condition::IfMatch(vec![committed.meta.etag.clone()]),
        ..options
    };
    let written = store.put(key, options).and_then(|mut writer| {
        writer.write(compressed)?;
        writer.commit()
    });
    match written {
        Ok(_) => true,
        // Replaced meanwhile, or no room for the hidden name beside a long one.
        Err(StoreError::PreconditionFailed | StoreError::BadKey(crate::KeyError::TooLong)) => false,
        Err(e) => {
            tracing::warn!(%key, "cannot keep the gzip form beside the upload; it is served plain: {e}");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gzip_only_when_it_pays() {
        let p = GzipPolicy::default();
        assert!(!p.keeps(80, 100), "the seed's SMS grows: stored plain");
        assert!(p.keeps(50_000, 2_000), "the seed's email shrinks 96%");
        assert!(!p.keeps(3_000, 2_600), "400 bytes saved is under the 512-byte floor");
        assert!(!p.keeps(100_000, 95_000), "5% is under the 10% floor");
        assert!(GzipPolicy { mode: GzipMode::Always, ..p }.keeps(100_000, 99_999));
        assert!(!GzipPolicy { mode: GzipMode::Always, ..p }.keeps(80, 80));
        assert!(!GzipPolicy { mode: GzipMode::Never, ..p }.keeps(50_000, 2_000));
        for t in [
            "text/html; charset=utf-8",
            "application/json",
            "image/svg+xml",
            "application/vnd.apple.mpegurl",
            "text/vtt",
        ] {
            assert!(GzipPolicy::compressible(t), "{t}");
        }
        for t in ["video/mp4", "image/jpeg", "application/octet-stream"] {
            assert!(!GzipPolicy::compressible(t), "{t}");
        }
    }
}
