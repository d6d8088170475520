//! The local backend: objects are files beneath a root directory (the library root).
//!
//! A write goes to a hidden temporary file in the target's own directory (same file system, so the
//! final step is a `rename`), is fsynced, checked and then renamed into place, and the directory is
//! fsynced so the name survives a crash. A writer dropped early unlinks its temporary file.
//! Conditions are checked and applied under one lock per store, so two uploads in this process
//! cannot both pass `If-None-Match: *` (create-only is also a `link`, which the kernel refuses
//! when the name exists). Symlinks that lead out of the root are refused on the way in.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::{Committed, Condition, Key, ObjectMeta, ObjectWriter, PutOptions, Store, StoreError, Verified};

/// Temporary upload files start with this, so listings (and the library's pages) can skip them.
pub const TEMP_PREFIX: &str = ".sluice-upload-";

/// A directory of objects.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: PathBuf,
    commit_lock: Arc<Mutex<()>>,
    counter: Arc<AtomicU64>,
}

impl LocalStore {
    /// A store rooted at `root`, which must exist.
    pub fn open(root: &Path) -> Result<LocalStore, StoreError> {
        let root = root.canonicalize()?;
        if !root.is_dir() {
            return Err(StoreError::Config(format!("{} is not a directory", root.display())));
        }
        Ok(LocalStore { root, commit_lock: Arc::new(Mutex::new(())), counter: Arc::new(AtomicU64::new(0)) })
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, key: &Key) -> PathBuf {
        self.root.join(key.as_str())
    }

    /// Creates the key's parent directories and checks that, symlinks resolved, it is still
    /// beneath the root.
    fn parent_of(&self, key: &Key) -> Result<PathBuf, StoreError> {
        let path = self.path_of(key);
        let parent = path.parent().unwrap_or(&self.root);
        fs::create_dir_all(parent).map_err(|e| match e.kind() {
            io::ErrorKind::AlreadyExists | io::ErrorKind::NotADirectory => StoreError::Conflict,
            _ => e.into(),
        })?;
        let real = parent.canonicalize()?;
        if !real.starts_with(&self.root) {
            return Err(StoreError::BadKey(crate::KeyError::Forbidden));
        }
        Ok(real)
    }

    /// Where the gzip form of a key lives (nginx's `gzip_static` convention: beside it, `.gz`).
    fn gz_path_of(&self, key: &Key) -> PathBuf {
        self.root.join(format!("{}.gz", key.as_str()))
    }

    fn meta_of(&self, key: &Key, md: &fs::Metadata, encoding: Option<&str>) -> ObjectMeta {
        let modified = md.modified().ok();
        ObjectMeta {
            key: key.as_str().to_string(),
            len: md.len(),
            etag: sluice_proto::http::conditional::entity_tag(
                modified.unwrap_or(std::time::UNIX_EPOCH),
                md.len(),
            ),
            modified,
            encoding: encoding.map(str::to_string),
        }
    }

    /// The object under `key`: its plain file, else its gzip form.
    fn current(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        for (path, encoding) in [(self.path_of(key), None), (self.gz_path_of(key), Some("gzip"))] {
            match fs::metadata(path) {
                Ok(md) if md.is_file() => return Ok(Some(self.meta_of(key, &md, encoding))),
                Ok(_) => return Err(StoreError::Conflict),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(None)
    }
}

impl Store for LocalStore {
    fn head(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        match self.current(key) {
            Err(StoreError::Conflict) => Ok(None),
            other => other,
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectMeta>, StoreError> {
        let mut found = Vec::new();
        let mut dirs = vec![self.root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let md = entry.metadata()?;
                let path = entry.path();
                let Some(rel) = path.strip_prefix(&self.root).ok().and_then(Path::to_str) else { continue };
                if entry.file_name().to_string_lossy().starts_with(TEMP_PREFIX) {
                    continue;
                }
                if md.is_dir() {
                    dirs.push(path.clone());
                } else if md.is_file() && rel.starts_with(prefix) {
                    if let Ok(key) = Key::new(rel) {
                        found.push(self.meta_of(&key, &md, None));
                    }
                }
            }
        }
        found.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(found)
    }

    fn read_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>, StoreError> {
        let file = File::open(self.path_of(key)).or_else(|_| File::open(self.gz_path_of(key)))?;
        let mut buf = vec![0; range.end.saturating_sub(range.start) as usize];
        let mut done = 0;
        while done < buf.len() {
            match file.read_at(&mut buf[done..], range.start + done as u64)? {
                0 => break,
                n => done += n,
            }
        }
        buf.truncate(done);
        Ok(buf)
    }

    fn put(&self, key: &Key, options: PutOptions) -> Result<Box<dyn ObjectWriter>, StoreError> {
        let dir = self.parent_of(key)?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let temp = dir.join(format!("{TEMP_PREFIX}{}-{n}", std::process::id()));
        let file = OpenOptions::new().write(true).create_new(true).mode(0o644).open(&temp)?;
        let gzip = options.content_encoding.as_deref() == Some("gzip");
        let (target, other) = match gzip {
            true => (self.gz_path_of(key), self.path_of(key)),
            false => (self.path_of(key), self.gz_path_of(key)),
        };
        let writer = LocalWriter {
            store: self.clone(),
            key: key.clone(),
            target,
            other,
            temp: Some(temp),
            file: io::BufWriter::with_capacity(256 * 1024, file),
            condition: options.condition,
        };
        Ok(Box::new(Verified::new(writer, options.checksum)))
    }

    fn delete(&self, key: &Key, condition: &Condition) -> Result<(), StoreError> {
        let _guard = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.current(key)?.ok_or(StoreError::NotFound)?;
        if !condition.allows(Some(&current)) {
            return Err(StoreError::PreconditionFailed);
        }
        for path in [self.path_of(key), self.gz_path_of(key)] {
            match fs::remove_file(path) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
                _ => {}
            }
        }
        Ok(())
    }
}

/// A file being written beside its target.
struct LocalWriter {
    store: LocalStore,
    key: Key,
    target: PathBuf,
    /// The key's other form (plain for a gzip write, gzip for a plain one), removed on commit.
    other: PathBuf,
    /// The temporary file, until it is renamed (or removed on drop).
    temp: Option<PathBuf>,
    file: io::BufWriter<File>,
    condition: Condition,
}

impl ObjectWriter for LocalWriter {
    fn write(&mut self, data: &[u8]) -> Result<(), StoreError> {
        self.file.write_all(data).map_err(StoreError::from)
    }

    fn commit(mut self: Box<Self>) -> Result<Committed, StoreError> {
        self.file.flush()?;
        self.file.get_ref().sync_all()?;
        let temp = self.temp.clone().expect("temp file until commit");
        let _guard = self.store.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.store.current(&self.key)?;
        if !self.condition.allows(current.as_ref()) {
            return Err(StoreError::PreconditionFailed);
        }
        if self.condition == Condition::CreateOnly {
            // link(2) refuses an existing name: create-only even against other processes.
            fs::hard_link(&temp, &self.target).map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => StoreError::PreconditionFailed,
                _ => e.into(),
            })?;
            fs::remove_file(&temp)?;
        } else {
            fs::rename(&temp, &self.target)?;
        }
        self.temp = None;
        match fs::remove_file(&self.other) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        if let Some(dir) = self.target.parent() {
            File::open(dir)?.sync_all()?;
        }
        let md = fs::metadata(&self.target)?;
        let encoding = (self.target.extension() == Some("gz".as_ref())
            && self.target != self.store.path_of(&self.key))
        .then_some("gzip");
        Ok(Committed { created: current.is_none(), meta: self.store.meta_of(&self.key, &md, encoding) })
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        if let Some(temp) = self.temp.take() {
            if let Err(e) = fs::remove_file(&temp) {
                tracing::warn!(path = %temp.display(), "cannot remove an aborted upload: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Checksum;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        v.sort();
        v
    }

    #[test]
    fn writes_are_atomic_conditional_and_verified() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let key = Key::new("a/b.txt").unwrap();
        let mut w = store.put(&key, PutOptions::default()).unwrap();
        w.write(b"hello").unwrap();
        assert!(store.head(&key).unwrap().is_none(), "nothing visible before commit");
        let c = w.commit().unwrap();
        assert!(c.created);
        assert_eq!(fs::read(dir.path().join("a/b.txt")).unwrap(), b"hello");
        // Create-only refuses an existing key and leaves no temp file.
        let create_only = PutOptions { condition: Condition::CreateOnly, ..Default::default() };
        let mut w = store.put(&key, create_only).unwrap();
        w.write(b"other").unwrap();
        assert!(matches!(w.commit(), Err(StoreError::PreconditionFailed)));
        assert_eq!(names(&dir.path().join("a")), ["b.txt"]);
        // If-Match with the current tag replaces; a stale one does not.
        let tag = store.head(&key).unwrap().unwrap().etag;
        let stale =
            PutOptions { condition: Condition::IfMatch(vec!["\"0-0\"".into()]), ..Default::default() };
        let w = store.put(&key, stale).unwrap();
        assert!(matches!(w.commit(), Err(StoreError::PreconditionFailed)));
        let fresh = PutOptions { condition: Condition::IfMatch(vec![tag]), ..Default::default() };
        let mut w = store.put(&key, fresh).unwrap();
        w.write(b"world!").unwrap();
        assert!(!w.commit().unwrap().created);
        // A wrong checksum stores nothing.
        let wrong = PutOptions { checksum: Some(Checksum::Md5([0; 16])), ..Default::default() };
        let mut w = store.put(&Key::new("c.txt").unwrap(), wrong).unwrap();
        w.write(b"x").unwrap();
        assert!(matches!(w.commit(), Err(StoreError::ChecksumMismatch)));
        // A dropped writer leaves nothing.
        let mut w = store.put(&Key::new("d.txt").unwrap(), PutOptions::default()).unwrap();
        w.write(b"half").unwrap();
        drop(w);
        assert_eq!(names(dir.path()), ["a"]);
        assert_eq!(store.read_range(&key, 1..4).unwrap(), b"orl");
        assert_eq!(store.list("").unwrap().len(), 1);
        store.delete(&key, &Condition::Always).unwrap();
        assert!(matches!(store.delete(&key, &Condition::Always), Err(StoreError::NotFound)));
    }

    #[test]
    fn symlinks_out_of_the_root_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        assert!(store.put(&Key::new("out/x").unwrap(), PutOptions::default()).is_err());
        assert!(names(outside.path()).is_empty());
    }
}
