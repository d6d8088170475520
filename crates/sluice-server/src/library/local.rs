//! A library in a local directory: the directory opened once, and files opened beneath it only.
//!
//! Owns the wall between requests and the rest of the file system. `sluice_proto::http::path` rules out `..`;
//! what remains is symlinks, which only the kernel can judge at open time, so files are opened with
//! `openat2(RESOLVE_BENEATH)` relative to the root's descriptor: a link that leaves the root fails
//! to open, whatever the path says. Kernels without `openat2` (before 5.6) get the same rule by
//! canonicalising the path and checking its prefix. This module also unpacks the built-in demo
//! library. It does not decide responses.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use sluice_proto::http::path::LibraryPath;

use super::Listed;

/// What opening a library path found.
#[derive(Debug)]
pub enum Entry {
    /// A regular file, opened for reading, with its metadata.
    File(File, std::fs::Metadata),
    /// A directory.
    Directory,
}

/// Why a library path could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Nothing there, or not a file or directory, or a link leaving the root.
    #[error("not found")]
    NotFound,
    /// There, but the server may not read it.
    #[error("permission denied")]
    Forbidden,
    /// Something else went wrong.
    #[error("{0}")]
    Io(io::Error),
}

/// A served directory.
#[derive(Debug)]
pub struct LocalRoot {
    root: PathBuf,
    root_fd: OwnedFd,
    openat2: AtomicBool,
}

impl LocalRoot {
    /// Opens `root` as a library.
    pub fn open(root: &Path) -> io::Result<LocalRoot> {
        let root = root.canonicalize()?;
        let c = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in root path"))?;
        // SAFETY: c is a valid C string; the result is checked.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is fresh and ours.
        let root_fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let library = LocalRoot { root, root_fd, openat2: AtomicBool::new(true) };
        // Probe once: a kernel before 5.6 says ENOSYS, and seccomp profiles that predate openat2
        // say EPERM, which at request time would be indistinguishable from a forbidden file.
        if let Err(e) = library.open_beneath(".") {
            if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
                tracing::warn!("openat2 refused ({e}); checking paths by canonicalising them instead");
                library.openat2.store(false, Ordering::Relaxed);
            }
        }
        Ok(library)
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens a normalised path beneath the root.
    pub fn open_entry(&self, path: &LibraryPath) -> Result<Entry, OpenError> {
        let rel = if path.relative().is_empty() { "." } else { path.relative() };
        let file = self.open_beneath(rel).map_err(|e| match e.raw_os_error() {
            Some(libc::ENOENT | libc::ENOTDIR | libc::EXDEV | libc::ELOOP | libc::ENAMETOOLONG) => {
                OpenError::NotFound
            }
            Some(libc::EACCES | libc::EPERM) => OpenError::Forbidden,
            _ => OpenError::Io(e),
        })?;
        let meta = file.metadata().map_err(OpenError::Io)?;
        if meta.is_dir() {
            Ok(Entry::Directory)
        } else if meta.is_file() {
            Ok(Entry::File(file, meta))
        } else {
            // FIFOs, sockets and devices are not media.
            Err(OpenError::NotFound)
        }
    }

    fn open_beneath(&self, rel: &str) -> io::Result<File> {
        let c = CString::new(rel).map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        // O_NONBLOCK so that a FIFO planted in the library cannot block the opening thread;
        // reads of regular files ignore it.
        let flags = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
        if self.openat2.load(Ordering::Relaxed) {
            // SAFETY: zeroed open_how is valid; fields are set below.
            let mut how: libc::open_how = unsafe { std::mem::zeroed() };
            how.flags = flags as u64;
            how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
            // SAFETY: passes a valid C string and a live open_how of the right size.
            let fd = unsafe {
                libc::syscall(
                    libc::SYS_openat2,
                    self.root_fd.as_raw_fd(),
                    c.as_ptr(),
                    &how as *const libc::open_how,
                    std::mem::size_of::<libc::open_how>(),
                )
            };
            if fd >= 0 {
                // SAFETY: a fresh descriptor we own.
                return Ok(unsafe { File::from_raw_fd(fd as i32) });
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENOSYS) => {
                    tracing::warn!("openat2 is not available; checking paths by canonicalising them");
                    self.openat2.store(false, Ordering::Relaxed);
                }
                _ => return Err(err),
            }
        }
        let full = self.root.join(rel).canonicalize()?;
        if !full.starts_with(&self.root) {
            return Err(io::Error::from_raw_os_error(libc::EXDEV));
        }
        let c = CString::new(full.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        // SAFETY: valid C string; result checked.
        let fd = unsafe { libc::open(c.as_ptr(), flags) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a fresh descriptor we own.
        Ok(unsafe { File::from_raw_fd(fd) })
    }

    /// Files and directories directly in a library directory, sorted, hidden names left out.
    /// Symbolic links are listed only if they resolve to something beneath the root.
    pub fn list(&self, dir: &LibraryPath) -> io::Result<Vec<Listed>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.root.join(dir.relative()))? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.starts_with('.') {
                continue;
            }
            let rel = if dir.relative().is_empty() {
                name.to_string()
            } else {
                format!("{}/{}", dir.relative(), name)
            };
            let Ok(lp) = sluice_proto::http::path::normalize(&format!("/{rel}")) else { continue };
            match self.open_entry(&lp) {
                Ok(Entry::File(_, meta)) => {
                    out.push(Listed { name: name.to_string(), is_dir: false, len: meta.len(), tag: None })
                }
                Ok(Entry::Directory) => {
                    out.push(Listed { name: name.to_string(), is_dir: true, len: 0, tag: None })
                }
                Err(_) => {}
            }
        }
        out.sort_by(|a, b| (!a.is_dir, &a.name).cmp(&(!b.is_dir, &b.name)));
        Ok(out)
    }
}

impl LocalRoot {
    /// Every file of the library as (URL path, size, no tag), depth first in listing order, at most
    /// `limit` of them and at most 16 directories deep (a listing must stay cheap on a huge tree).
    pub fn files(&self, limit: usize) -> Vec<(String, u64, Option<String>)> {
        let mut out = Vec::new();
        let mut dirs = vec![(String::new(), 0usize)];
        while let Some((dir, depth)) = dirs.pop() {
            let Ok(path) = sluice_proto::http::path::normalize(&format!("{dir}/")) else { continue };
            let Ok(entries) = self.list(&path) else { continue };
            let mut subdirs = Vec::new();
            for e in entries {
                if out.len() >= limit {
                    return out;
                }
                let rel = format!("{dir}/{}", e.name);
                if e.is_dir {
                    if depth < 16 {
                        subdirs.push((rel, depth + 1));
                    }
                } else {
                    out.push((rel, e.len, None));
                }
            }
            dirs.extend(subdirs.into_iter().rev());
        }
        out
    }
}

/// The built-in demo video, embedded so that `sluice serve` works with no arguments.
const DEMO_MP4: &[u8] = include_bytes!("../../demo/sluice-demo.mp4");

/// Unpacks the demo library into a directory of its own under the system's temporary directory
/// (a real file, so that `sendfile` has something to send) and returns that directory.
pub fn unpack_demo() -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "sluice-demo-{}-{}",
        env!("CARGO_PKG_VERSION"),
        // Distinguishes users on a shared machine, and a rebuilt asset.
        // SAFETY: getuid cannot fail.
        format_args!("{}-{}", unsafe { libc::getuid() }, DEMO_MP4.len())
    ));
    std::fs::create_dir_all(&dir)?;
    let target = dir.join("sluice-demo.mp4");
    let intact = std::fs::read(&target).is_ok_and(|b| b == DEMO_MP4);
    if !intact {
        // Written beside the target and renamed, so a concurrent `sluice serve` never sees half.
        let tmp = dir.join(format!(".sluice-demo.mp4.{}", std::process::id()));
        std::fs::write(&tmp, DEMO_MP4)?;
        std::fs::rename(&tmp, &target)?;
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_proto::http::path::normalize;

    #[test]
    fn symlinks_leaving_the_root_do_not_open() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), b"canary").unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("ok.txt"), b"fine").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.path().join("link.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("dirlink")).unwrap();
        std::os::unix::fs::symlink("ok.txt", root.path().join("inside.txt")).unwrap();
        let lib = LocalRoot::open(root.path()).unwrap();
        assert!(matches!(lib.open_entry(&normalize("/ok.txt").unwrap()), Ok(Entry::File(..))));
        assert!(matches!(lib.open_entry(&normalize("/inside.txt").unwrap()), Ok(Entry::File(..))));
        assert!(matches!(lib.open_entry(&normalize("/link.txt").unwrap()), Err(OpenError::NotFound)));
        assert!(matches!(
            lib.open_entry(&normalize("/dirlink/secret.txt").unwrap()),
            Err(OpenError::NotFound)
        ));
        assert!(matches!(lib.open_entry(&normalize("/").unwrap()), Ok(Entry::Directory)));
        let names: Vec<_> = lib.list(&normalize("/").unwrap()).unwrap().into_iter().map(|l| l.name).collect();
        assert_eq!(names, vec!["inside.txt", "ok.txt"]);
    }

    #[test]
    fn demo_unpacks_intact() {
        let dir = unpack_demo().unwrap();
        assert_eq!(std::fs::read(dir.join("sluice-demo.mp4")).unwrap(), DEMO_MP4);
    }
}
