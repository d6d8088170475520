//! The library as the RTSP side sees it: MP4 files found by URL path behind the same wall as
//! HTTP's, indexed once and reused while the file is unchanged.
//!
//! Owns the index cache and the reading of samples (a `pread` each, from the page cache, when the
//! RTSP core asks through [`MediaLibrary::read_at`]). It does not answer requests or decide what
//! to read when (`sluice-media::rtsp` does).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sluice_media::mp4::Mp4File;
use sluice_media::rtsp::{Catalogue, MediaLibrary, NotFound};
use sluice_proto::http::path::normalize;

use crate::library::{Entry, Library};

/// Indexed files kept; beyond it the cache starts over (an index is a few hundred KB at most for
/// an hour of video, and re-indexing reads only the `moov` box).
const MAX_INDEXED: usize = 256;

struct Indexed {
    len: u64,
    modified: Option<SystemTime>,
    file: Arc<Mp4File>,
}

/// See the module docs.
pub struct MediaCatalogue {
    library: Library,
    index: Mutex<HashMap<String, Indexed>>,
}

impl MediaCatalogue {
    /// A catalogue of `library`.
    pub fn new(library: Library) -> MediaCatalogue {
        MediaCatalogue { library, index: Mutex::new(HashMap::new()) }
    }

    /// The regular file at URL path `path`, and its metadata.
    fn open_file(&self, path: &str) -> io::Result<(String, File, std::fs::Metadata)> {
        let not_found = || io::Error::from(io::ErrorKind::NotFound);
        let path = normalize(path).map_err(|_| not_found())?;
        if path.names_directory() {
            return Err(not_found());
        }
        match self.library.open_entry(&path) {
            Ok(Entry::File(file, meta)) => Ok((path.relative().to_string(), file, meta)),
            _ => Err(not_found()),
        }
    }
}

impl Catalogue for MediaCatalogue {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        let (key, file, meta) = self.open_file(path).map_err(|_| NotFound)?;
        let modified = meta.modified().ok();
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = index.get(&key).filter(|i| i.len == meta.len() && i.modified == modified) {
            return Ok(Arc::clone(&i.file));
        }
        let indexed = match Mp4File::read(BufReader::new(file), meta.len()) {
            Ok(f) => Arc::new(f),
            Err(e) => {
                tracing::debug!("rtsp: {key} is not a playable MP4: {e}");
                return Err(NotFound);
            }
        };
        if index.len() >= MAX_INDEXED {
            index.clear();
        }
        index.insert(key, Indexed { len: meta.len(), modified, file: Arc::clone(&indexed) });
        Ok(indexed)
    }
}

impl MediaLibrary for MediaCatalogue {
    type Bytes = File;

    fn open_bytes(&self, path: &str) -> io::Result<File> {
        self.open_file(path).map(|(_, file, _)| file)
    }

    fn read_at(&self, file: &File, offset: u64, into: &mut [u8]) -> io::Result<()> {
        file.read_exact_at(into, offset)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_mp4s_under_the_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sluice-demo.mp4");
        std::fs::create_dir(dir.path().join("films")).unwrap();
        std::fs::copy(demo, dir.path().join("films/a b.mp4")).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a film").unwrap();
        let c = MediaCatalogue::new(Library::open(dir.path()).unwrap());
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
