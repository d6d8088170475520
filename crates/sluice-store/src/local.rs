//! The local backend: objects are files beneath a root directory (the library root).
//!
//! Every path is opened through [`Beneath`] (`openat2(RESOLVE_BENEATH)`), the same rule the
//! library's reads use, so a symlink leading out of the root is refused on the way in as on the
//! way out. A write goes to a hidden temporary file in the deepest directory of the key's path
//! that already exists (same file system as the target, so the final step is a `rename`), is
//! fsynced and checked; only then are the missing parent directories created and the file renamed
//! into place, and the directory fsynced so the name survives a crash. A refused or dropped write
//! so leaves nothing behind, not even a directory; temporary files a killed process left are
//! removed when the store opens. Conditions are checked and applied under one lock per store, so
//! two uploads in this process cannot both pass `If-None-Match: *` (create-only is also a `link`,
//! which the kernel refuses when the name exists). A key's gzip form is kept beside its file under
//! the hidden gzip form name ([`crate::gzip_form_name`]), never under a name a client could also
//! upload; the file itself stays under its own name (a folder with only gzip forms in it would be
//! lost to a backup or a second server of it). A plain write removes a gzip form it would make
//! stale; a gzip write leaves the plain file.

use std::fs::{self, File};
use std::io::{self, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::beneath::{escapes, Beneath, Dir};
use crate::key::{gzip_form_name, GZIP_FORM_PREFIX as GZIP_FORM, RESERVED_PREFIX};
use crate::{
    Committed, Condition, Key, KeyError, ObjectMeta, ObjectWriter, PutOptions, Store, StoreError, Verified,
};

/// Temporary upload files start with this, so listings (and the library's pages) can skip them.
pub const TEMP_PREFIX: &str = ".sluice-upload-";

/// The longest file name most Linux file systems take (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// A directory of objects.
#[derive(Debug, Clone)]
pub struct LocalStore {
    beneath: Arc<Beneath>,
    commit_lock: Arc<Mutex<()>>,
    counter: Arc<AtomicU64>,
}

/// A key's file opened to read: the file, its metadata and its encoding (`Some("gzip")` for a
/// stored gzip form).
type Opened = (File, fs::Metadata, Option<&'static str>);

/// A key's directory (`""` for the root) and its file name.
fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

/// What a failed open beneath the root means for a key.
fn open_error(e: io::Error) -> StoreError {
    match e.raw_os_error() {
        // Nothing there, or a path through a regular file (`a.txt/x`): no such object.
        Some(libc::ENOENT | libc::ENOTDIR) => StoreError::NotFound,
        // A symlink out of the root: not a name this store has.
        _ if escapes(&e) => StoreError::NotFound,
        _ => e.into(),
    }
}

impl LocalStore {
    /// A store rooted at `root`, which must exist. Temporary files of uploads that a killed sluice
    /// left beneath it are removed (one log line says how many).
    pub fn open(root: &Path) -> Result<LocalStore, StoreError> {
        let beneath = Beneath::open(root).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => StoreError::Config(format!("{}: no such directory", root.display())),
            _ => StoreError::Config(format!("{}: {e}", root.display())),
        })?;
        if !beneath.root().is_dir() {
            return Err(StoreError::Config(format!("{} is not a directory", root.display())));
        }
        let store = LocalStore {
            beneath: Arc::new(beneath),
            commit_lock: Arc::new(Mutex::new(())),
            counter: Arc::new(AtomicU64::new(0)),
        };
        let swept = sweep_temporaries(store.root());
        if swept > 0 {
            tracing::info!(
                root = %store.root().display(),
                "removed {swept} temporary upload file(s) left by an interrupted sluice"
            );
        }
        Ok(store)
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        self.beneath.root()
    }

    fn meta_of(&self, key: &str, md: &fs::Metadata, encoding: Option<&str>) -> ObjectMeta {
        let modified = md.modified().ok();
        ObjectMeta {
            key: key.to_string(),
            len: md.len(),
            etag: sluice_proto::http::conditional::entity_tag(
                modified.unwrap_or(std::time::UNIX_EPOCH),
                md.len(),
            ),
            modified,
            encoding: encoding.map(str::to_string),
        }
    }

    /// The key's file (plain, else its gzip form) opened to read, with its encoding.
    fn open_object(&self, key: &Key) -> Result<Option<Opened>, StoreError> {
        for (rel, encoding) in
            [(key.as_str().to_string(), None), (gzip_form_name(key.as_str()), Some("gzip"))]
        {
            match self.beneath.open_read(&rel) {
                Ok(file) => {
                    let md = file.metadata()?;
                    if md.is_file() {
                        return Ok(Some((file, md, encoding)));
                    }
                    return Err(StoreError::Conflict);
                }
                Err(e) => match open_error(e) {
                    StoreError::NotFound => {}
                    other => return Err(other),
                },
            }
        }
        Ok(None)
    }

    /// The object under `key`: its plain file, else its gzip form.
    fn current(&self, key: &Key) -> Result<Option<ObjectMeta>, StoreError> {
        Ok(self.open_object(key)?.map(|(_, md, encoding)| self.meta_of(key.as_str(), &md, encoding)))
    }

    /// The deepest directory of `dir` (a key's directory) that exists, opened, and the path of
    /// the rest, which a commit creates. A regular file in the way is a conflict; a symlink out
    /// of the root is not a name this store accepts.
    fn deepest_existing(&self, dir: &str) -> Result<Dir, StoreError> {
        let mut candidate = dir;
        loop {
            match self.beneath.dir(candidate) {
                Ok(d) => return Ok(d),
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) && !candidate.is_empty() => {
                    candidate = split(candidate).0;
                }
                Err(e) => return Err(write_error(e)),
            }
        }
    }
}

/// What a failed write-side operation beneath the root means.
fn write_error(e: io::Error) -> StoreError {
    match e.raw_os_error() {
        Some(libc::ENOTDIR | libc::EEXIST | libc::EISDIR) => StoreError::Conflict,
        _ if escapes(&e) => StoreError::BadKey(KeyError::Forbidden),
        _ => e.into(),
    }
}

/// Removes `.sluice-upload-*` files beneath `root` whose writer is gone (the process id in the
/// name is not running); how many. Another sluice writing into the same root keeps its files.
fn sweep_temporaries(root: &Path) -> usize {
    let me = std::process::id();
    let mut removed = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if kind.is_dir() {
                dirs.push(entry.path());
            } else if let Some(rest) = name.strip_prefix(TEMP_PREFIX) {
                let pid = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
                let orphan = match pid {
                    Some(pid) => pid != me && !process_alive(pid),
                    None => true,
                };
                if orphan && kind.is_file() && fs::remove_file(entry.path()).is_ok() {
                    removed += 1;
                }
            }
        }
    }
    removed
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    match crate::sys::signal_zero(pid) {
        Ok(()) => true,
        Err(e) => e.raw_os_error() == Some(libc::EPERM),
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
        let root = self.root().to_path_buf();
        let mut found = Vec::new();
        let mut dirs = vec![root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in fs::read_dir(&dir)? {
                let entry = entry?;
                let md = entry.metadata()?;
                let path = entry.path();
                let Some(rel) = path.strip_prefix(&root).ok().and_then(Path::to_str) else { continue };
                let (parent, name) = split(rel);
                if md.is_dir() {
                    if !name.starts_with(RESERVED_PREFIX) {
                        dirs.push(path.clone());
                    }
                    continue;
                }
                // A gzip form is listed as the key it is the form of; other reserved names
                // (temporary uploads) not at all.
                let (key, encoding) = match name.strip_prefix(GZIP_FORM) {
                    Some(original) if parent.is_empty() => (original.to_string(), Some("gzip")),
                    Some(original) => (format!("{parent}/{original}"), Some("gzip")),
                    None if name.starts_with(RESERVED_PREFIX) => continue,
                    None => (rel.to_string(), None),
                };
                if md.is_file() && key.starts_with(prefix) && Key::new(&key).is_ok() {
                    found.push(self.meta_of(&key, &md, encoding));
                }
            }
        }
        found.sort_by(|a, b| (&a.key, a.encoding.is_some()).cmp(&(&b.key, b.encoding.is_some())));
        // A key with both forms (its file and the gzip form beside it) is its plain file.
        found.dedup_by(|later, earlier| later.key == earlier.key);
        Ok(found)
    }

    fn read_range(&self, key: &Key, range: Range<u64>) -> Result<Vec<u8>, StoreError> {
        let (file, _, _) = self.open_object(key)?.ok_or(StoreError::NotFound)?;
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
        let (dir, name) = split(key.as_str());
        let gzip = options.content_encoding.as_deref() == Some("gzip");
        let gz_name = gzip_form_name(name);
        if gzip && gz_name.len() > NAME_MAX {
            // No room for the hidden name: the caller stores the plain form instead.
            return Err(StoreError::BadKey(KeyError::TooLong));
        }
        let (target, stale) = match gzip {
            true => (gz_name, None),
            false => (name.to_string(), Some(gz_name)),
        };
        let temp_dir = self.deepest_existing(dir)?;
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        let temp = format!("{TEMP_PREFIX}{}-{n}", std::process::id());
        let file = temp_dir.create_new(&temp)?;
        let writer = LocalWriter {
            store: self.clone(),
            key: key.clone(),
            dir: dir.to_string(),
            target,
            stale,
            encoding: gzip.then_some("gzip"),
            temp: Some((temp_dir, temp)),
            file: io::BufWriter::with_capacity(256 * 1024, file),
            condition: options.condition,
        };
        Ok(Box::new(Verified::new(writer, options.checksum)))
    }

    fn keeps_gzip_beside(&self) -> bool {
        true
    }

    fn delete(&self, key: &Key, condition: &Condition) -> Result<(), StoreError> {
        let _guard = self.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = match self.current(key) {
            Err(StoreError::Conflict) => None,
            other => other?,
        };
        let current = current.ok_or(StoreError::NotFound)?;
        if !condition.allows(Some(&current)) {
            return Err(StoreError::PreconditionFailed);
        }
        let (dir, name) = split(key.as_str());
        let dir = self.beneath.dir(dir).map_err(open_error)?;
        // Every form goes: the plain file and the gzip form.
        dir.unlink_if_present(name)?;
        dir.unlink_if_present(&gzip_form_name(name))?;
        Ok(())
    }
}

/// A file being written, until its commit renames it into place.
struct LocalWriter {
    store: LocalStore,
    key: Key,
    /// The key's directory, created on commit if missing.
    dir: String,
    /// The file name the bytes go to in `dir` (the key's, or its gzip form's).
    target: String,
    /// The gzip form a plain write makes stale, removed on commit (a gzip write keeps the plain
    /// file it is the form of).
    stale: Option<String>,
    encoding: Option<&'static str>,
    /// The temporary file and the directory it is in, until it is renamed (or removed on drop).
    temp: Option<(Dir, String)>,
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
        let _guard = self.store.commit_lock.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.store.current(&self.key)?;
        if !self.condition.allows(current.as_ref()) {
            return Err(StoreError::PreconditionFailed);
        }
        // Only now, with the object accepted, do its directories come into being.
        let target_dir = self.store.beneath.create_dirs(&self.dir).map_err(write_error)?;
        let (temp_dir, temp) = self.temp.as_ref().ok_or(StoreError::NotFound)?;
        if self.condition == Condition::CreateOnly {
            // link(2) refuses an existing name: create-only even against other processes.
            temp_dir.link(temp, &target_dir, &self.target).map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => StoreError::PreconditionFailed,
                _ => write_error(e),
            })?;
            temp_dir.unlink(temp)?;
        } else {
            temp_dir.rename(temp, &target_dir, &self.target).map_err(write_error)?;
        }
        let moved_from_elsewhere = !temp_dir.same_as(&target_dir);
        let temp_dir = self.temp.take().map(|(d, _)| d);
        if let Some(stale) = &self.stale {
            target_dir.unlink_if_present(stale)?;
        }
        target_dir.sync()?;
        if let (true, Some(temp_dir)) = (moved_from_elsewhere, temp_dir) {
            temp_dir.sync()?;
        }
        let md = target_dir.metadata(&self.target)?;
        Ok(Committed {
            created: current.is_none(),
            meta: self.store.meta_of(self.key.as_str(), &md, self.encoding),
            gzip_beside: None,
        })
    }
}

impl Drop for LocalWriter {
    fn drop(&mut self) {
        if let Some((dir, temp)) = self.temp.take() {
            if let Err(e) = dir.unlink(&temp) {
                tracing::warn!(key = %self.key, "cannot remove an aborted upload's temporary file {temp}: {e}");
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
        assert!(matches!(
            store.put(&Key::new("out/x").unwrap(), PutOptions::default()),
            Err(StoreError::BadKey(_))
        ));
        assert!(matches!(
            store.put(&Key::new("out/new/x").unwrap(), PutOptions::default()),
            Err(StoreError::BadKey(_))
        ));
        assert!(names(outside.path()).is_empty());
        assert!(store.head(&Key::new("out/x").unwrap()).unwrap().is_none());
    }

    #[test]
    fn refused_writes_create_no_directories_and_paths_under_a_file_are_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let deep = Key::new("new/deeper/x.txt").unwrap();
        let wrong = PutOptions { checksum: Some(Checksum::Md5([0; 16])), ..Default::default() };
        let mut w = store.put(&deep, wrong).unwrap();
        w.write(b"x").unwrap();
        assert!(matches!(w.commit(), Err(StoreError::ChecksumMismatch)));
        let create_only =
            PutOptions { condition: Condition::IfMatch(vec!["*".into()]), ..Default::default() };
        assert!(matches!(
            store.put(&deep, create_only).unwrap().commit(),
            Err(StoreError::PreconditionFailed)
        ));
        drop(store.put(&deep, PutOptions::default()).unwrap());
        assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
        crate::put_bytes(&store, &deep, b"x", PutOptions::default()).unwrap();
        assert_eq!(fs::read(dir.path().join("new/deeper/x.txt")).unwrap(), b"x");
        // A path under a regular file is no object, and no place for one.
        let under = Key::new("new/deeper/x.txt/y").unwrap();
        assert!(store.head(&under).unwrap().is_none());
        assert!(matches!(store.delete(&under, &Condition::Always), Err(StoreError::NotFound)));
        assert!(matches!(store.read_range(&under, 0..1), Err(StoreError::NotFound)));
        assert!(matches!(store.put(&under, PutOptions::default()), Err(StoreError::Conflict)));
    }

    #[test]
    fn gzip_forms_never_take_a_users_name() {
        let dir = tempfile::tempdir().unwrap();
        let store = LocalStore::open(dir.path()).unwrap();
        let html = Key::new("m/x.html").unwrap();
        let gz = Key::new("m/x.html.gz").unwrap();
        let gzip = PutOptions { content_encoding: Some("gzip".into()), ..Default::default() };
        crate::put_bytes(&store, &html, b"GZ-FORM", gzip).unwrap();
        crate::put_bytes(&store, &gz, b"users own gz", PutOptions::default()).unwrap();
        assert_eq!(names(&dir.path().join("m")), [".sluice-gzip.x.html", "x.html.gz"]);
        let listed: Vec<_> = store.list("").unwrap().into_iter().map(|m| (m.key, m.encoding)).collect();
        assert_eq!(listed, [("m/x.html".into(), Some("gzip".into())), ("m/x.html.gz".into(), None)]);
        assert_eq!(store.head(&html).unwrap().unwrap().encoding.as_deref(), Some("gzip"));
        assert_eq!(store.read_range(&gz, 0..100).unwrap(), b"users own gz");
        // A plain replacement removes the gzip form; a delete removes every form and only them.
        crate::put_bytes(&store, &html, b"plain", PutOptions::default()).unwrap();
        assert_eq!(names(&dir.path().join("m")), ["x.html", "x.html.gz"]);
        // A gzip form written beside the file leaves the file, which stays the object.
        crate::put_bytes(
            &store,
            &html,
            b"GZ",
            PutOptions { content_encoding: Some("gzip".into()), ..Default::default() },
        )
        .unwrap();
        assert_eq!(names(&dir.path().join("m")), [".sluice-gzip.x.html", "x.html", "x.html.gz"]);
        assert_eq!(store.head(&html).unwrap().unwrap().encoding, None);
        assert_eq!(store.read_range(&html, 0..100).unwrap(), b"plain");
        let listed: Vec<_> =
            store.list("m/x.html").unwrap().into_iter().map(|m| (m.key, m.encoding)).collect();
        assert_eq!(listed, [("m/x.html".into(), None), ("m/x.html.gz".into(), None)]);
        store.delete(&html, &Condition::Always).unwrap();
        assert_eq!(names(&dir.path().join("m")), ["x.html.gz"]);
        // No room for the hidden name beside a 250-byte name: the caller stores it plain.
        let long = Key::new(&"n".repeat(250)).unwrap();
        let gzip = PutOptions { content_encoding: Some("gzip".into()), ..Default::default() };
        assert!(matches!(store.put(&long, gzip), Err(StoreError::BadKey(KeyError::TooLong))));
    }

    #[test]
    fn temporary_files_of_dead_writers_are_swept_at_open() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir_all(dir.path().join("a/b")).unwrap();
        // A pid beyond pid_max is never running.
        fs::write(dir.path().join(format!("{TEMP_PREFIX}999999999-0")), b"x").unwrap();
        fs::write(dir.path().join(format!("a/b/{TEMP_PREFIX}999999999-7")), b"x").unwrap();
        let live = format!("{TEMP_PREFIX}{}-0", std::process::id());
        fs::write(dir.path().join(&live), b"mine").unwrap();
        fs::write(dir.path().join("a/keep.txt"), b"k").unwrap();
        LocalStore::open(dir.path()).unwrap();
        assert_eq!(names(dir.path()), [live, "a".to_string()]);
        assert_eq!(names(&dir.path().join("a")), ["b", "keep.txt"]);
        assert!(names(&dir.path().join("a/b")).is_empty());
    }
}
