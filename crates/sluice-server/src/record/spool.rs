//! Recordings of an object store's library: the files a recorder closed in its local spool are
//! uploaded whole into the store under their library path (`recordings/live/cam1/….mp4`), through
//! the store's one writer (the uploads' and thumbnails' own), and then removed from the spool;
//! retention deletes the store's objects.
//!
//! Uploads run on a thread of their own, fed the files the recorder closes, so that a slow or
//! absent store never holds up the recording. It does not write the files (the
//! [`super::Recorder`] does, in the spool exactly as in a local library) nor decide when one is
//! closed (the recorder says).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use sluice_engine::Shutdown;

use sluice_store::{Condition, Key, KeyError, PutOptions, Store, StoreError};

use super::{collect_files, retire, timeline, RecordConfig, RECORDINGS};
use crate::library::Library;

/// How long after a failed upload the spool is tried again: the store may be down for a while,
/// and every file stays in the spool meanwhile.
pub const RETRY_EVERY: Duration = Duration::from_secs(5);

/// How much of a file is read and sent at a time.
const CHUNK: usize = 1 << 20;

/// Why one file was not uploaded.
#[derive(Debug, thiserror::Error)]
pub enum UploadError {
    /// Reading the spool's file, or removing it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The store refused or failed the write.
    #[error("{}", sluice_store::one_line(&.0.to_string()))]
    Store(#[from] StoreError),
    /// The file's library path is no key (it is named by the recorder, so it always is).
    #[error("{0}")]
    Key(#[from] KeyError),
}

/// Uploads closed recording files into the library's store.
#[derive(Debug)]
pub struct Uploader {
    store: Arc<dyn Store>,
    library: Arc<Library>,
}

/// The recording files in the spool at `spool`, oldest first.
pub fn spooled(spool: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    collect_files(&spool.join(RECORDINGS), &mut files, 0);
    files.sort_by_key(|(_, modified, _)| *modified);
    files.into_iter().map(|(path, _, _)| path).collect()
}

impl Uploader {
    /// An uploader into `store`, telling `library` of each object it writes or deletes.
    pub fn new(store: Arc<dyn Store>, library: Arc<Library>) -> Uploader {
        Uploader { store, library }
    }

    /// The upload thread's body: uploads `pending` (what a crash left) and each file the
    /// recorder sends on `closed`, trying a failed one again every [`RETRY_EVERY`], until
    /// `shutdown` or the recorder's end (what is left stays in the spool for the next start).
    pub fn run(
        &self,
        spool: &Path,
        mut pending: Vec<PathBuf>,
        closed: &Receiver<PathBuf>,
        shutdown: &Shutdown,
    ) {
        let mut retry_at = Instant::now();
        while !shutdown.is_triggered() {
            match closed.recv_timeout(super::POLL) {
                Ok(path) => {
                    pending.push(path);
                    // A file just closed goes at once, with any that failed before.
                    retry_at = Instant::now();
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            if !pending.is_empty() && Instant::now() >= retry_at {
                self.upload_pending(spool, &mut pending);
                if !pending.is_empty() {
                    retry_at = Instant::now() + RETRY_EVERY;
                }
            }
        }
    }

    /// Uploads each of the spool's files `pending`; the ones that failed stay in it.
    pub fn upload_pending(&self, spool: &Path, pending: &mut Vec<PathBuf>) {
        pending.retain(|path| {
            let relative = path.strip_prefix(spool).unwrap_or(path).to_string_lossy().into_owned();
            match self.upload(path, &relative) {
                Ok(len) => {
                    tracing::info!(file = %relative, bytes = len, "recording uploaded into the store");
                    false
                }
                Err(e) => {
                    tracing::warn!(
                        file = %relative,
                        "recording not uploaded yet (kept in the spool, tried again in {}s): {e}",
                        RETRY_EVERY.as_secs()
                    );
                    true
                }
            }
        });
    }

    /// Uploads the spool's file at `path` as the object `relative`, then removes the file; its
    /// length.
    fn upload(&self, path: &Path, relative: &str) -> Result<u64, UploadError> {
        let key = Key::new(relative)?;
        let mut file = File::open(path)?;
        let options = PutOptions { content_type: Some("video/mp4".into()), ..PutOptions::default() };
        let mut writer = self.store.put(&key, options)?;
        let mut chunk = vec![0; CHUNK];
        let mut len = 0;
        loop {
            let n = file.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            writer.write(&chunk[..n])?;
            len += n as u64;
        }
        writer.commit()?;
        self.library.changed(&key);
        std::fs::remove_file(path)?;
        Ok(len)
    }

    /// Deletes `rule`'s recording objects past its age and size limits. An object's age is from
    /// when it was stored (its file closed), else from its name's start.
    pub fn apply_retention(&self, rule: &RecordConfig) {
        if rule.keep.is_zero() && rule.max_bytes == 0 {
            return;
        }
        let prefix = format!("{RECORDINGS}/{}", rule.prefix.trim_start_matches('/'));
        let listed = match self.store.list(&prefix) {
            Ok(listed) => listed,
            Err(e) => {
                tracing::warn!(
                    "recordings not listed for retention: {}",
                    sluice_store::one_line(&e.to_string())
                );
                return;
            }
        };
        let files: Vec<(String, SystemTime, u64)> = listed
            .into_iter()
            .filter(|m| m.key.ends_with(".mp4"))
            .map(|m| {
                let name = m.key.rsplit('/').next().unwrap_or_default();
                let modified =
                    m.modified.or_else(|| timeline::start_of(name)).unwrap_or(SystemTime::UNIX_EPOCH);
                (m.key, modified, m.len)
            })
            .collect();
        retire(rule, files, |name| {
            let deleted = Key::new(name).map_err(UploadError::from).and_then(|key| {
                self.store.delete(&key, &Condition::Always)?;
                self.library.changed(&key);
                Ok(())
            });
            match deleted {
                Ok(()) => {
                    tracing::info!(file = %name, "recording deleted by retention");
                    true
                }
                Err(e) => {
                    tracing::warn!(file = %name, "recording not deleted: {e}");
                    false
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use std::ops::Range;
    use std::sync::atomic::{AtomicBool, Ordering};

    use sluice_store::{LocalStore, ObjectMeta, ObjectWriter};

    use super::*;
    use crate::library::catalogue::Catalogue;

    /// A store that refuses writes while `down`.
    #[derive(Debug)]
    struct Flaky {
        inner: LocalStore,
        down: AtomicBool,
    }

    impl Store for Flaky {
        fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
            self.inner.head(key)
        }
        fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
            self.inner.list(prefix)
        }
        fn read_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>, StoreError> {
            self.inner.read_range(key, range)
        }
        fn put(&self, key: &Key, options: PutOptions) -> Result<Box<dyn ObjectWriter>, StoreError> {
            match self.down.load(Ordering::Relaxed) {
                true => Err(StoreError::Config("the store is down".into())),
                false => self.inner.put(key, options),
            }
        }
        fn delete(&self, key: &Key, condition: &Condition) -> Result<(), StoreError> {
            self.inner.delete(key, condition)
        }
    }

    fn write(spool: &Path, relative: &str, len: usize) -> PathBuf {
        let path = spool.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, vec![b'x'; len]).unwrap();
        // Modification times a little apart, so "oldest" is unambiguous.
        std::thread::sleep(Duration::from_millis(20));
        path
    }

    #[test]
    fn closed_files_are_uploaded_and_leave_the_spool_and_a_failed_one_waits() {
        let (spool, bucket) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = Arc::new(Flaky { inner: LocalStore::open(bucket.path()).unwrap(), down: true.into() });
        let library =
            Arc::new(Library::local(bucket.path(), Catalogue::new(1 << 20, Duration::from_secs(6))).unwrap());
        let uploader = Uploader::new(Arc::clone(&store) as Arc<dyn Store>, library);
        let first = write(spool.path(), "recordings/live/a/2026-11-28T08-30-00.000Z.mp4", 300);
        let second = write(spool.path(), "recordings/live/b/2026-11-28T08-30-04.000Z.mp4", 200);
        let key = |p: &Path| Key::new(&p.strip_prefix(spool.path()).unwrap().to_string_lossy()).unwrap();
        let mut pending = spooled(spool.path());
        assert_eq!(pending, vec![first.clone(), second.clone()], "what a crash left, oldest first");

        uploader.upload_pending(spool.path(), &mut pending);
        assert_eq!(pending.len(), 2, "the store is down: both wait");
        assert!(first.exists() && store.head(&key(&first)).unwrap().is_none(), "kept in the spool");

        store.down.store(false, Ordering::Relaxed);
        uploader.upload_pending(spool.path(), &mut pending);
        assert!(pending.is_empty() && spooled(spool.path()).is_empty(), "uploaded files leave the spool");
        assert_eq!(store.read_range(&key(&first), 0..300).unwrap(), vec![b'x'; 300], "uploaded whole");
        assert_eq!(store.read_range(&key(&second), 0..200).unwrap(), vec![b'x'; 200]);
    }

    #[test]
    fn retention_deletes_the_stores_oldest_objects_past_the_size_limit() {
        let bucket = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(LocalStore::open(bucket.path()).unwrap());
        let library =
            Arc::new(Library::local(bucket.path(), Catalogue::new(1 << 20, Duration::from_secs(6))).unwrap());
        let names = ["00", "04", "08"].map(|s| format!("recordings/live/a/2026-11-28T08-30-{s}.000Z.mp4"));
        for name in &names {
            sluice_store::put_bytes(&*store, &Key::new(name).unwrap(), &[0; 100], PutOptions::default())
                .unwrap();
            // Modification times a little apart, so "oldest" is unambiguous.
            std::thread::sleep(Duration::from_millis(20));
        }
        let rule = RecordConfig {
            prefix: "/live/".into(),
            file_duration: Duration::from_secs(4),
            keep: Duration::ZERO,
            max_bytes: 250,
        };
        Uploader::new(Arc::clone(&store), library).apply_retention(&rule);
        let left: Vec<String> = store.list("recordings/").unwrap().into_iter().map(|m| m.key).collect();
        assert_eq!(left, names[1..].to_vec(), "the oldest of 300 bytes goes, 200 stay under 250");
    }
}
