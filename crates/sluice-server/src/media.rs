//! The library as the RTSP side sees it: MP4 files found by URL path behind the same wall as
//! HTTP's, their indexes from the shared [`crate::catalogue::Catalogue`].
//!
//! Owns the answers to the RTSP core's two questions: which indexed file a URL names
//! ([`Catalogue::open`]) and the bytes of its samples ([`MediaLibrary::read_at`]: a `pread` from
//! the page cache for a local file; for an object store, a read of the cached slices that
//! starts fetching the slice after it in the background, so that the RTSP loop's thread waits
//! for the origin only on an object's first cold slice or after a seek). An index the page,
//! `/streams` or HLS built is reused: a warm file's `DESCRIBE` reads nothing. A file nobody
//! indexed yet is indexed here, on the RTSP loop's thread (the RTSP core asks synchronously).
//! It does not answer requests or decide what to read when (`sluice-media::rtsp` does).

use std::io;
use std::sync::Arc;

use sluice_media::mp4::Mp4File;
use sluice_media::rtsp::{playable, Catalogue, MediaLibrary, NotFound, Refusal, Unplayable};
use sluice_proto::http::path::normalize;

use crate::library::{FileVersion, Found, Library};

/// See the module docs.
#[derive(Debug)]
pub struct RtspMedia {
    library: Arc<Library>,
}

impl RtspMedia {
    /// RTSP's view of `library`.
    pub fn new(library: Arc<Library>) -> RtspMedia {
        RtspMedia { library }
    }

    /// The file at URL path `path` (still percent-encoded), with its library-relative path.
    fn open_file(&self, path: &str) -> io::Result<(String, FileVersion)> {
        let not_found = || io::Error::from(io::ErrorKind::NotFound);
        let path = normalize(path).map_err(|_| not_found())?;
        if path.names_directory() {
            return Err(not_found());
        }
        match self.library.lookup(&path, true) {
            Ok(Found::File(version)) => Ok((path.relative().to_string(), version)),
            Ok(_) => Err(not_found()),
            Err(e) => {
                tracing::warn!(path = path.relative(), "rtsp: {e}");
                Err(io::Error::other(e))
            }
        }
    }
}

impl Catalogue for RtspMedia {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        self.index(path).map_err(|_| NotFound)
    }

    fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        let file = self.index(path)?;
        playable(&file).map_err(Refusal::Unplayable)?;
        Ok(file)
    }
}

impl RtspMedia {
    /// The indexed file at `path`; an MP4-named file that cannot be indexed is
    /// [`Refusal::Unplayable`] (500, with the demuxer's reason, as HLS answers), anything else
    /// missing is 404.
    fn index(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        let (relative, version) = self.open_file(path).map_err(|_| Refusal::NotFound)?;
        match self.library.tables(&relative, &version, true) {
            Ok(Ok(tables)) => Ok(tables),
            Ok(Err(reason)) if crate::page::is_mp4(&relative) => Err(Refusal::Unplayable(Unplayable {
                status: 500,
                reason: format!("not a playable MP4: {reason}"),
            })),
            Ok(Err(_)) => Err(Refusal::NotFound),
            Err(e) => {
                tracing::warn!(path = relative, "rtsp: cannot index: {e}");
                Err(Refusal::NotFound)
            }
        }
    }
}

impl MediaLibrary for RtspMedia {
    type Bytes = FileVersion;

    fn open_bytes(&self, path: &str) -> io::Result<FileVersion> {
        self.open_file(path).map(|(_, version)| version)
    }

    fn read_at(&self, bytes: &FileVersion, offset: u64, into: &mut [u8]) -> io::Result<()> {
        self.library.read_at(bytes, offset, into)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalogue::Catalogue as Indexes;
    use std::time::Duration;

    #[test]
    fn finds_mp4s_under_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sluice-demo.mp4");
        std::fs::create_dir(dir.path().join("films")).unwrap();
        std::fs::copy(demo, dir.path().join("films/a b.mp4")).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a film").unwrap();
        let indexes = Indexes::new(1 << 20, Duration::from_secs(6));
        let c = RtspMedia::new(Arc::new(Library::local(dir.path(), indexes).unwrap()));
        let a = c.open("/films/a%20b.mp4").unwrap();
        assert!(!a.tracks.is_empty());
        assert!(Arc::ptr_eq(&a, &c.open("/films/a%20b.mp4").unwrap()), "indexed once");
        assert!(c.open("/notes.txt").is_err());
        assert!(c.open("/films/").is_err());
        assert!(c.open("/../etc/passwd").is_err());
        assert!(c.open("/missing.mp4").is_err());
        assert!(c.open_bytes("/films/a%20b.mp4").is_ok());
        assert!(c.open_bytes("/films/../../x").is_err());
    }
}
