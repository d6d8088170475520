//! The library as the RTSP side sees it: MP4 files found by URL path behind the same wall as
//! HTTP's, indexed once and reused while the file is unchanged.
//!
//! Owns the index cache and the reading of samples (a `pread` each, from the page cache, when the
//! RTSP core asks through [`MediaLibrary::read_at`]). A library in an object store is read
//! through its slice cache: the index with ranged reads of the `moov` box, samples from the
//! cached slices, each read starting the fetch of the slice after it in the background
//! ([`RemoteLibrary::read_ahead`]), so that the RTSP loop's thread waits for the origin only on
//! an object's first cold slice or after a seek (RTSP reads ahead of the play-out clock, so that
//! round trip delays sends, not the stream). It does not answer requests or decide what to read
//! when (`sluice-media::rtsp` does).

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader};
use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use sluice_media::mp4::Mp4File;
use sluice_media::rtsp::{playable, Catalogue, MediaLibrary, NotFound, Refusal, Unplayable};
use sluice_proto::http::path::normalize;

use crate::library::{Entry, Library};
use crate::remote::{Found, RemoteLibrary};
use sluice_store::ObjectVersion;

/// Where the catalogue's files are.
#[derive(Debug)]
pub enum MediaSource {
    /// A local directory.
    Local(Library),
    /// An object store, through its cache.
    Remote(Arc<RemoteLibrary>),
}

/// An open presentation's bytes.
#[derive(Debug)]
pub enum MediaBytes {
    /// A local file.
    Local(File),
    /// One version of an object.
    Remote(Arc<ObjectVersion>),
}

/// Indexed files kept; beyond it the cache starts over (an index is a few hundred KB at most for
/// an hour of video, and re-indexing reads only the `moov` box).
const MAX_INDEXED: usize = 256;

/// What an index was made from: a file's length and time, or an object's entity tag.
#[derive(Debug, PartialEq, Eq)]
enum Made {
    File(u64, Option<SystemTime>),
    Object(String),
}

struct Indexed {
    made: Made,
    file: Arc<Mp4File>,
}

/// See the module docs.
pub struct MediaCatalogue {
    source: MediaSource,
    index: Mutex<HashMap<String, Indexed>>,
}

impl MediaCatalogue {
    /// A catalogue of `source`.
    pub fn new(source: MediaSource) -> MediaCatalogue {
        MediaCatalogue { source, index: Mutex::new(HashMap::new()) }
    }

    /// The file or object at URL path `path`, under its key.
    fn open_file(&self, path: &str) -> io::Result<(String, MediaBytes, Made)> {
        let not_found = || io::Error::from(io::ErrorKind::NotFound);
        let path = normalize(path).map_err(|_| not_found())?;
        if path.names_directory() {
            return Err(not_found());
        }
        let key = path.relative().to_string();
        match &self.source {
            MediaSource::Local(library) => match library.open_entry(&path) {
                Ok(Entry::File(file, meta)) => {
                    let made = Made::File(meta.len(), meta.modified().ok());
                    Ok((key, MediaBytes::Local(file), made))
                }
                _ => Err(not_found()),
            },
            MediaSource::Remote(remote) => match remote.lookup(&path, true) {
                Ok(Found::File(version)) => {
                    let made = Made::Object(version.etag.clone());
                    Ok((key, MediaBytes::Remote(version), made))
                }
                Ok(_) | Err(sluice_store::CacheError::NotFound) => Err(not_found()),
                Err(e) => {
                    tracing::warn!(path = key, "rtsp: origin: {e}");
                    Err(io::Error::other(e))
                }
            },
        }
    }
}

impl Catalogue for MediaCatalogue {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        self.index(path).map_err(|_| NotFound)
    }

    fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        let file = self.index(path)?;
        playable(&file).map_err(Refusal::Unplayable)?;
        Ok(file)
    }
}

impl MediaCatalogue {
    /// The indexed file at `path`; an MP4-named file that cannot be indexed is
    /// [`Refusal::Unplayable`] (500, with the demuxer's reason), anything else missing is 404.
    fn index(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        let (key, bytes, made) = self.open_file(path).map_err(|_| Refusal::NotFound)?;
        let mut index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = index.get(&key).filter(|i| i.made == made) {
            return Ok(Arc::clone(&i.file));
        }
        let read = match (&bytes, &self.source) {
            (MediaBytes::Local(file), _) => {
                let len = file.metadata().map_or(0, |m| m.len());
                Mp4File::read(BufReader::new(file), len)
            }
            (MediaBytes::Remote(version), MediaSource::Remote(remote)) => {
                // Large buffered reads: each read is a slice lookup (or a fetch).
                let reader = BufReader::with_capacity(256 << 10, remote.cache().reader(version));
                Mp4File::read(reader, version.len)
            }
            (MediaBytes::Remote(_), MediaSource::Local(_)) => return Err(Refusal::NotFound),
        };
        let indexed = match read {
            Ok(f) => Arc::new(f),
            Err(e) if crate::page::is_mp4(&key) => {
                return Err(Refusal::Unplayable(Unplayable::unreadable(&e)))
            }
            Err(_) => return Err(Refusal::NotFound),
        };
        if index.len() >= MAX_INDEXED {
            index.clear();
        }
        index.insert(key, Indexed { made, file: Arc::clone(&indexed) });
        Ok(indexed)
    }
}

impl MediaLibrary for MediaCatalogue {
    type Bytes = MediaBytes;

    fn open_bytes(&self, path: &str) -> io::Result<MediaBytes> {
        self.open_file(path).map(|(_, bytes, _)| bytes)
    }

    fn read_at(&self, bytes: &MediaBytes, offset: u64, into: &mut [u8]) -> io::Result<()> {
        match (bytes, &self.source) {
            (MediaBytes::Local(file), _) => file.read_exact_at(into, offset),
            (MediaBytes::Remote(version), MediaSource::Remote(remote)) => {
                remote.read_ahead(version, offset, into).map_err(io::Error::other)
            }
            (MediaBytes::Remote(_), MediaSource::Local(_)) => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
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
        let c = MediaCatalogue::new(MediaSource::Local(Library::open(dir.path()).unwrap()));
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
