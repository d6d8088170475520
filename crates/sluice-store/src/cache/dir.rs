//! The slice cache's directory on disk: the lock that gives it to one process, the file names
//! that say what each slice file holds, writing a slice whole or not at all, putting the
//! directory back when something removed it, and reading back what an earlier process left.
//!
//! It keeps no index of slices and never talks to the origin (the cache does both). Its layout:
//! - `sluice-cache.lock`, empty, `flock`ed (exclusive) by the process using the directory for
//!   as long as it runs. Empty so that the directory's bytes are the slices' bytes and nothing
//!   else (`--cache-size` bounds what is on disk); the holder's pid, for the refusal's message,
//!   comes from the kernel's lock table (`/proc/locks`), which cannot name a dead process.
//! - `KEY-VERSION-SLICELEN-OBJECTLEN-INDEX.slice`, one slice: KEY is a hash of the object's
//!   key, VERSION a hash of its key and entity tag, then the slice length the cache cut the
//!   object with, the object's length and the slice's index. The name alone tells the length the
//!   file must have, so a file left by a crash is checked without reading it, and the version it
//!   belongs to, so it is only ever found again for the same entity tag.
//! - `NAME.N.tmp`, a slice being written: renamed to NAME once whole. A crash leaves at most
//!   temporary files, never a short file under a slice's name.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::SystemTime;

use sha2::{Digest, Sha256};

/// The lock file's name.
pub const LOCK_FILE: &str = "sluice-cache.lock";

const SLICE_SUFFIX: &str = ".slice";
const TEMP_SUFFIX: &str = ".tmp";

/// Another process holds the cache directory: two processes evicting each other's slices would
/// send missing files.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the cache directory {} is in use by {}",
    dir.display(),
    pid.map_or("another process".to_string(), |p| format!("sluice pid {p}"))
)]
pub struct CacheDirInUse {
    /// The directory.
    pub dir: PathBuf,
    /// The holder's process id, when the kernel's lock table names it.
    pub pid: Option<u32>,
}

/// The lock held on the directory, and which file it is on (to notice the file being removed).
#[derive(Debug)]
struct Held {
    _file: File,
    dev: u64,
    ino: u64,
}

/// What [`CacheDir::restore`] had to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Restored {
    /// The directory was gone and was made again.
    pub recreated: bool,
    /// The lock file was gone (or replaced) and was taken again.
    pub relocked: bool,
}

/// A slice file an earlier process left whole.
#[derive(Debug, Clone)]
pub struct Leftover {
    /// Its file name.
    pub name: String,
    /// The name's KEY-VERSION part.
    pub version: String,
    /// The object's length.
    pub object_len: u64,
    /// The slice's length.
    pub len: u64,
    /// When it was written.
    pub modified: SystemTime,
}

/// What an earlier process left in the directory.
#[derive(Debug, Default)]
pub struct Scan {
    /// Slice files that are whole, for the slice length asked for.
    pub whole: Vec<Leftover>,
    /// Files of the cache's that were removed: temporary files, short or unparsable slices,
    /// slices cut with another slice length.
    pub removed: usize,
}

/// See the module docs.
#[derive(Debug)]
pub struct CacheDir {
    path: PathBuf,
    held: Mutex<Held>,
    temp_names: AtomicU64,
    /// Writes left to fail (tests only): the seam where a full disk is simulated.
    #[cfg(test)]
    pub(super) failing_writes: std::sync::atomic::AtomicU32,
}

impl CacheDir {
    /// `path`, made if missing and locked. Fails with [`CacheDirInUse`] (inside an
    /// [`io::ErrorKind::ResourceBusy`] error) when another process holds it.
    pub fn open(path: &Path) -> io::Result<CacheDir> {
        std::fs::create_dir_all(path)?;
        Ok(CacheDir {
            path: path.to_path_buf(),
            held: Mutex::new(take_lock(path)?),
            temp_names: AtomicU64::new(0),
            #[cfg(test)]
            failing_writes: std::sync::atomic::AtomicU32::new(0),
        })
    }

    fn held(&self) -> MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the lock file this process holds is still the one in the directory (a removed or
    /// emptied directory loses it, and with it the protection from a second process).
    pub fn lock_is_intact(&self) -> bool {
        let held = self.held();
        std::fs::symlink_metadata(self.path.join(LOCK_FILE))
            .is_ok_and(|m| m.dev() == held.dev && m.ino() == held.ino)
    }

    /// Makes the directory again if it is gone and takes the lock again if its file is gone.
    pub fn restore(&self) -> io::Result<Restored> {
        let mut held = self.held();
        let recreated = match std::fs::symlink_metadata(&self.path) {
            Ok(_) => false,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                std::fs::create_dir_all(&self.path)?;
                true
            }
            Err(e) => return Err(e),
        };
        let intact = std::fs::symlink_metadata(self.path.join(LOCK_FILE))
            .is_ok_and(|m| m.dev() == held.dev && m.ino() == held.ino);
        if !intact {
            *held = take_lock(&self.path)?;
        }
        Ok(Restored { recreated, relocked: !intact })
    }

    /// Removes what is not a whole slice of `slice_len` and returns what is.
    pub fn scan(&self, slice_len: u64) -> io::Result<Scan> {
        let mut scan = Scan::default();
        for entry in std::fs::read_dir(&self.path)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else { continue };
            let remove = if is_temp(&name) {
                true
            } else if let Some(stem) = name.strip_suffix(SLICE_SUFFIX) {
                let meta = entry.metadata()?;
                match parse_stem(stem) {
                    Some(p) if p.slice_len == slice_len && meta.is_file() && meta.len() == p.len => {
                        scan.whole.push(Leftover {
                            name: name.clone(),
                            version: p.version,
                            object_len: p.object_len,
                            len: p.len,
                            modified: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                        });
                        false
                    }
                    _ => true,
                }
            } else {
                // Not the cache's (the lock file, or an operator's): left alone.
                false
            };
            if remove {
                match std::fs::remove_file(entry.path()) {
                    Ok(()) => scan.removed += 1,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(scan)
    }

    /// The names in the directory now.
    pub fn names(&self) -> io::Result<HashSet<OsString>> {
        std::fs::read_dir(&self.path)?.map(|e| e.map(|e| e.file_name())).collect()
    }

    /// Whether a file called `name` is in the directory now.
    pub fn exists(&self, name: &str) -> bool {
        std::fs::symlink_metadata(self.path.join(name)).is_ok()
    }

    /// Slice file `name`, opened for reading.
    pub fn open_slice(&self, name: &str) -> io::Result<File> {
        File::open(self.path.join(name))
    }

    /// Removes slice file `name`; one already gone is not an error.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path.join(name)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Writes `bytes` as slice file `name`, whole or not at all (a temporary file renamed into
    /// place once written), and returns it open.
    pub fn write(&self, name: &str, bytes: &[u8]) -> io::Result<File> {
        let n = self.temp_names.fetch_add(1, Ordering::Relaxed);
        let temp = self.path.join(format!("{name}.{n}{TEMP_SUFFIX}"));
        let written = (|| {
            let mut file = OpenOptions::new().read(true).write(true).create_new(true).open(&temp)?;
            #[cfg(test)]
            if self
                .failing_writes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
            {
                return Err(io::Error::from_raw_os_error(libc::ENOSPC));
            }
            file.write_all(bytes)?;
            std::fs::rename(&temp, self.path.join(name))?;
            Ok(file)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&temp);
        }
        written
    }
}

/// `bytes` in an anonymous in-memory file: a descriptor the engine sends from like any slice
/// file (sendfile, splice and reads all work on it), for a slice the disk would not take.
pub fn in_memory(bytes: &[u8]) -> io::Result<File> {
    let mut file = crate::sys::memory_file(c"sluice-slice")?;
    file.write_all(bytes)?;
    Ok(file)
}

/// The KEY-VERSION part of the names of the slices of one version of `key`.
pub fn version_prefix(key: &str, etag: &str) -> String {
    let key_hash = Sha256::new().chain_update(b"key\0").chain_update(key.as_bytes()).finalize();
    let version_hash = Sha256::new()
        .chain_update(b"version\0")
        .chain_update((key.len() as u64).to_le_bytes())
        .chain_update(key.as_bytes())
        .chain_update(etag.as_bytes())
        .finalize();
    format!("{}-{}", hex(&key_hash[..8]), hex(&version_hash[..16]))
}

/// The KEY part of a [`version_prefix`]: what every version of one key shares.
pub fn key_part(prefix: &str) -> &str {
    prefix.split_once('-').map_or(prefix, |(k, _)| k)
}

/// The file name of slice `index` of the version `prefix` names.
pub fn slice_name(prefix: &str, slice_len: u64, object_len: u64, index: u64) -> String {
    format!("{prefix}-{slice_len}-{object_len}-{index}{SLICE_SUFFIX}")
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

fn is_temp(name: &str) -> bool {
    name.strip_suffix(TEMP_SUFFIX).is_some_and(|rest| rest.contains(SLICE_SUFFIX))
}

/// A slice file's name, read back.
#[derive(Debug, PartialEq, Eq)]
struct ParsedName {
    version: String,
    slice_len: u64,
    object_len: u64,
    /// The length the file must have.
    len: u64,
}

fn parse_stem(stem: &str) -> Option<ParsedName> {
    let mut parts = stem.split('-');
    let (key, version) = (parts.next()?, parts.next()?);
    let hexes = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    if !hexes(key, 16) || !hexes(version, 32) {
        return None;
    }
    let mut number = || parts.next()?.parse::<u64>().ok();
    let (slice_len, object_len, index) = (number()?, number()?, number()?);
    if parts.next().is_some() || slice_len == 0 {
        return None;
    }
    let start = index.checked_mul(slice_len).filter(|s| *s < object_len)?;
    Some(ParsedName {
        version: format!("{key}-{version}"),
        slice_len,
        object_len,
        len: slice_len.min(object_len - start),
    })
}

fn take_lock(dir: &Path) -> io::Result<Held> {
    let file =
        OpenOptions::new().read(true).write(true).create(true).truncate(false).open(dir.join(LOCK_FILE))?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let busy = CacheDirInUse { dir: dir.to_path_buf(), pid: lock_holder(&file) };
            return Err(io::Error::new(io::ErrorKind::ResourceBusy, busy));
        }
        Err(TryLockError::Error(e)) => return Err(e),
    }
    let meta = file.metadata()?;
    Ok(Held { dev: meta.dev(), ino: meta.ino(), _file: file })
}

/// The process holding a `flock` on `file`, from the kernel's table of locks.
fn lock_holder(file: &File) -> Option<u32> {
    let meta = file.metadata().ok()?;
    let table = std::fs::read_to_string("/proc/locks").ok()?;
    holder_in(&table, meta.dev(), meta.ino())
}

/// The pid of the `FLOCK` held (not waited for) on the file `dev`/`ino` in `/proc/locks` text,
/// whose lines read `1: FLOCK  ADVISORY  WRITE 1234 fe:00:5390996 0 EOF`.
fn holder_in(table: &str, dev: u64, ino: u64) -> Option<u32> {
    let file = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    table.lines().filter(|l| !l.contains("->")).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields.as_slice() {
            [_, "FLOCK", _, _, pid, id, ..] if *id == file => pid.parse().ok().filter(|p| *p > 0),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_name_says_its_version_and_length() {
        let prefix = version_prefix("films/a.mp4", "\"abc\"");
        let name = slice_name(&prefix, 1000, 2500, 2);
        let parsed = parse_stem(name.strip_suffix(SLICE_SUFFIX).unwrap()).unwrap();
        assert_eq!(
            parsed,
            ParsedName { version: prefix.clone(), slice_len: 1000, object_len: 2500, len: 500 }
        );
        assert_eq!(key_part(&prefix), key_part(&version_prefix("films/a.mp4", "\"other\"")));
        assert_ne!(prefix, version_prefix("films/a.mp4", "\"other\""));
        assert_ne!(key_part(&prefix), key_part(&version_prefix("films/b.mp4", "\"abc\"")));
        // An index past the object's end, or a name not of this layout, is no slice.
        assert_eq!(parse_stem(slice_name(&prefix, 1000, 2500, 3).strip_suffix(".slice").unwrap()), None);
        assert_eq!(parse_stem("1234-5"), None);
        assert!(is_temp(&format!("{name}.7.tmp")) && !is_temp("notes.tmp"));
    }

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = tempfile::tempdir().unwrap();
        let first = CacheDir::open(dir.path()).unwrap();
        let refused = CacheDir::open(dir.path()).unwrap_err();
        let busy = refused.get_ref().and_then(|e| e.downcast_ref::<CacheDirInUse>()).unwrap();
        assert_eq!(busy.pid, Some(std::process::id()), "the kernel's lock table names this process");
        assert_eq!(
            busy.to_string(),
            format!(
                "the cache directory {} is in use by sluice pid {}",
                dir.path().display(),
                std::process::id()
            )
        );
        drop(first);
        CacheDir::open(dir.path()).expect("free once the holder is gone");
    }

    #[test]
    fn the_lock_table_is_read_for_held_locks_only() {
        let table = "1: FLOCK  ADVISORY  WRITE 15295 fe:00:5390996 0 EOF\n\
                     1: -> FLOCK  ADVISORY  WRITE 999 fe:00:42 0 EOF\n\
                     2: FLOCK  ADVISORY  WRITE 77 fe:00:42 0 EOF\n";
        let dev = libc::makedev(0xfe, 0);
        assert_eq!(holder_in(table, dev, 42), Some(77));
        assert_eq!(holder_in(table, dev, 5390996), Some(15295));
        assert_eq!(holder_in(table, dev, 1), None);
    }

    #[test]
    fn a_removed_directory_and_lock_are_restored() {
        let parent = tempfile::tempdir().unwrap();
        let path = parent.path().join("cache");
        let dir = CacheDir::open(&path).unwrap();
        assert_eq!(dir.restore().unwrap(), Restored { recreated: false, relocked: false });
        std::fs::remove_dir_all(&path).unwrap();
        assert!(!dir.lock_is_intact());
        assert_eq!(dir.restore().unwrap(), Restored { recreated: true, relocked: true });
        assert!(dir.lock_is_intact());
        assert!(CacheDir::open(&path).is_err(), "the new lock file is held");
    }
}
