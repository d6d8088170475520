//! A library in a local directory: the directory opened once, and files opened beneath it only.
//!
//! Owns what a request may open of the root. `sluice_proto::http::path` rules out `..`; what
//! remains is symlinks, which only the kernel can judge at open time, so files are opened by
//! [`sluice_store::beneath`] (`openat2(RESOLVE_BENEATH)` relative to the root's descriptor), the
//! same rule the local store writes uploads with: a link that leaves the root fails to open,
//! whatever the path says. This module also unpacks the built-in demo library. It does not
//! decide responses.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use sluice_proto::http::path::LibraryPath;
use sluice_store::beneath::Beneath;

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
    /// The root, and the one rule for opening beneath it (shared with the local store).
    beneath: Beneath,
}

impl LocalRoot {
    /// Opens `root` as a library.
    pub fn open(root: &Path) -> io::Result<LocalRoot> {
        Ok(LocalRoot { beneath: Beneath::open(root)? })
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        self.beneath.root()
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
        self.beneath.open_read(rel)
    }

    /// Files and directories directly in a library directory, sorted, hidden names left out.
    /// Symbolic links are listed only if they resolve to something beneath the root.
    pub fn list(&self, dir: &LibraryPath) -> io::Result<Vec<Listed>> {
        let mut out = Vec::new();
        let mut file_names = Vec::new();
        for entry in std::fs::read_dir(self.beneath.root().join(dir.relative()))? {
            if let Ok(file_name) = entry?.file_name().into_string() {
                file_names.push(file_name);
            }
        }
        let present: std::collections::HashSet<&str> = file_names.iter().map(String::as_str).collect();
        for file_name in &file_names {
            // A stored gzip form is listed under the name it is the form of, unless that file is
            // there too (then it is the one listed, with its own size); other hidden names
            // (sluice's own files included) not at all.
            let Some(name) = sluice_store::listed_name(file_name) else { continue };
            if name != file_name && present.contains(name) {
                continue;
            }
            let rel = if dir.relative().is_empty() {
                file_name.to_string()
            } else {
                format!("{}/{}", dir.relative(), file_name)
            };
            // `rel` is a decoded name: `%` is encoded again so that normalising does not decode it.
            let Ok(lp) = sluice_proto::http::path::normalize(&format!("/{}", rel.replace('%', "%25"))) else {
                continue;
            };
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
            let Ok(path) = sluice_proto::http::path::normalize(&format!("{}/", dir.replace('%', "%25")))
            else {
                continue;
            };
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
        format_args!("{}-{}", crate::sys::user_id(), DEMO_MP4.len())
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
