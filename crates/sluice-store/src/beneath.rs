//! The one rule that keeps file access beneath a root directory, for reads and writes alike.
//!
//! Names are checked before they get here (no `..`, no NUL); what remains is symlinks, which only
//! the kernel can judge at open time. So every path is opened with `openat2(RESOLVE_BENEATH)`
//! relative to the root's descriptor: a link that leaves the root fails to open (`EXDEV`),
//! whatever the path says. Writes work through [`Dir`], a directory opened that way, with the
//! `*at` calls on single names, which never follow a final symlink out of it. Kernels without
//! `openat2` (before 5.6, or a seccomp profile that predates it) get the same rule by
//! canonicalising the path and checking its prefix. This module owns no policy about what a
//! name means (keys, gzip forms, listings): the library and the local store decide that.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::sys;

/// A root directory, opened once, beneath which paths are opened.
#[derive(Debug)]
pub struct Beneath {
    root: PathBuf,
    root_fd: OwnedFd,
    openat2: AtomicBool,
}

/// Flags for opening a file to read: `O_NONBLOCK` so that a FIFO planted beneath the root cannot
/// block the opening thread (reads of regular files ignore it).
const READ_FLAGS: libc::c_int = libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;

fn c_name(name: &str) -> io::Result<CString> {
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))
}

impl Beneath {
    /// Opens `root` (which must be a directory).
    pub fn open(root: &Path) -> io::Result<Beneath> {
        let root = root.canonicalize()?;
        let c = CString::new(root.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in root path"))?;
        let root_fd = sys::open(&c, libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)?;
        let beneath = Beneath { root, root_fd, openat2: AtomicBool::new(true) };
        // Probe once: a kernel before 5.6 says ENOSYS, and seccomp profiles that predate openat2
        // say EPERM, which at request time would be indistinguishable from a forbidden file.
        if let Err(e) = beneath.open_with(".", READ_FLAGS) {
            if matches!(e.raw_os_error(), Some(libc::ENOSYS | libc::EPERM)) {
                tracing::warn!("openat2 refused ({e}); checking paths by canonicalising them instead");
                beneath.openat2.store(false, Ordering::Relaxed);
            }
        }
        Ok(beneath)
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Opens `rel` (a relative path, `.` for the root) to read. A symlink that leads out of the
    /// root fails with `EXDEV` (or `ELOOP`).
    pub fn open_read(&self, rel: &str) -> io::Result<File> {
        self.open_with(rel, READ_FLAGS).map(File::from)
    }

    /// Opens the directory `rel` (`""` or `.` for the root) for `*at` operations.
    pub fn dir(&self, rel: &str) -> io::Result<Dir> {
        let rel = if rel.is_empty() { "." } else { rel };
        let fd = self.open_with(rel, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC)?;
        Ok(Dir { fd })
    }

    /// Creates the directory `rel` and its missing parents beneath the root (mode 0755 less the
    /// umask) and opens it. A regular file in the way fails with `ENOTDIR`.
    pub fn create_dirs(&self, rel: &str) -> io::Result<Dir> {
        let segments: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
        let mut parent = self.dir("")?;
        for (i, segment) in segments.iter().enumerate() {
            let so_far = segments[..=i].join("/");
            parent = match self.dir(&so_far) {
                Ok(dir) => dir,
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {
                    match parent.mkdir(segment) {
                        Err(e) if e.raw_os_error() != Some(libc::EEXIST) => return Err(e),
                        _ => {}
                    }
                    self.dir(&so_far)?
                }
                Err(e) => return Err(e),
            };
        }
        Ok(parent)
    }

    /// Opens `rel` with `flags`, beneath the root.
    pub fn open_with(&self, rel: &str, flags: libc::c_int) -> io::Result<OwnedFd> {
        let c = c_name(rel)?;
        if self.openat2.load(Ordering::Relaxed) {
            let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
            let err = match sys::openat2(self.root_fd.as_fd(), &c, flags, resolve) {
                Ok(fd) => return Ok(fd),
                Err(err) => err,
            };
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
        sys::open(&c, flags)
    }
}

/// Whether an error means "the path leads out of the root" (a symlink escaping it).
pub fn escapes(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EXDEV | libc::ELOOP))
}

/// A directory opened beneath a root; its operations take single names (no `/`), and never
/// follow a symlink in the final name out of the directory.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
}

impl Dir {
    /// Creates `name`, which must not exist, to write (mode 0644 less the umask).
    pub fn create_new(&self, name: &str) -> io::Result<File> {
        let c = c_name(name)?;
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        sys::openat(self.fd.as_fd(), &c, flags, 0o644).map(File::from)
    }

    /// Creates the directory `name`.
    pub fn mkdir(&self, name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        sys::mkdirat(self.fd.as_fd(), &c, 0o755)
    }

    /// Renames `name` to `to_name` in `to` (replacing what is there).
    pub fn rename(&self, name: &str, to: &Dir, to_name: &str) -> io::Result<()> {
        let (from, dest) = (c_name(name)?, c_name(to_name)?);
        sys::renameat(self.fd.as_fd(), &from, to.fd.as_fd(), &dest)
    }

    /// Links `name` as `to_name` in `to`; `EEXIST` when that name exists (the kernel decides,
    /// atomically, which is what create-only needs).
    pub fn link(&self, name: &str, to: &Dir, to_name: &str) -> io::Result<()> {
        let (from, dest) = (c_name(name)?, c_name(to_name)?);
        // Flags 0: a final symlink is linked, not followed.
        sys::linkat(self.fd.as_fd(), &from, to.fd.as_fd(), &dest)
    }

    /// Removes the file `name`.
    pub fn unlink(&self, name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        sys::unlinkat(self.fd.as_fd(), &c)
    }

    /// Removes the file `name`; `Ok` when there is none.
    pub fn unlink_if_present(&self, name: &str) -> io::Result<()> {
        match self.unlink(name) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// The metadata of `name` (a symlink's own, not its target's).
    pub fn metadata(&self, name: &str) -> io::Result<std::fs::Metadata> {
        let c = c_name(name)?;
        let flags = libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        File::from(sys::openat(self.fd.as_fd(), &c, flags, 0)?).metadata()
    }

    /// Flushes the directory's entries to disk, so that a rename survives a crash.
    pub fn sync(&self) -> io::Result<()> {
        sys::fsync(self.fd.as_fd())
    }

    /// Whether both are the same directory.
    pub fn same_as(&self, other: &Dir) -> bool {
        use std::os::unix::fs::MetadataExt;
        let stat = |d: &Dir| File::from(d.fd.try_clone().ok()?).metadata().ok().map(|m| (m.dev(), m.ino()));
        stat(self).is_some() && stat(self) == stat(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_stay_beneath_the_root() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), b"canary").unwrap();
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("ok.txt"), b"fine").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.path().join("link.txt")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("dirlink")).unwrap();
        std::os::unix::fs::symlink("ok.txt", root.path().join("inside.txt")).unwrap();
        let b = Beneath::open(root.path()).unwrap();
        assert!(b.open_read("ok.txt").is_ok());
        assert!(b.open_read("inside.txt").is_ok());
        assert!(escapes(&b.open_read("link.txt").unwrap_err()));
        assert!(escapes(&b.open_read("dirlink/secret.txt").unwrap_err()));
        assert!(escapes(&b.create_dirs("dirlink/new").unwrap_err()));
        assert!(std::fs::read_dir(outside.path()).unwrap().count() == 1, "nothing created outside");
        assert_eq!(b.create_dirs("ok.txt/x").unwrap_err().raw_os_error(), Some(libc::ENOTDIR));
        let dir = b.create_dirs("a/b/c").unwrap();
        assert!(root.path().join("a/b/c").is_dir());
        let mut f = dir.create_new("n").unwrap();
        std::io::Write::write_all(&mut f, b"x").unwrap();
        assert_eq!(dir.create_new("n").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        dir.link("n", &dir, "m").unwrap();
        assert_eq!(dir.link("n", &dir, "m").unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        dir.rename("n", &b.dir("a").unwrap(), "moved").unwrap();
        assert_eq!(std::fs::read(root.path().join("a/moved")).unwrap(), b"x");
        dir.unlink("m").unwrap();
        dir.unlink_if_present("m").unwrap();
        assert!(b.dir("a/b/c").unwrap().same_as(&dir));
    }
}
