//! The library as the RTSP side sees it: MP4 files found by URL path behind the same wall as
//! HTTP's, their indexes from the shared [`crate::library::catalogue::Catalogue`].
//!
//! Owns the answers to the RTSP core's two questions: which indexed file a URL names
//! ([`Catalogue::open_playable`]) and the bytes of its samples ([`MediaLibrary::read_at`]), asked
//! synchronously on the RTSP loop's thread. For a local root both are answered at once (an index
//! read and `pread`s from the page cache), as they always were. For an object store nothing here
//! waits for the origin on that thread: a file whose version or index is not in memory is
//! [`Refusal::Warming`] while a background job ([`RemoteLibrary::in_background`](crate::library::remote::RemoteLibrary::in_background)) looks it up and reads
//! its `moov` through the slice cache (the core holds the request and asks again), and a sample
//! whose slice is not on disk is [`io::ErrorKind::WouldBlock`] while the slice is fetched in the
//! background (the core holds the viewer's samples and reads again). An index the page,
//! `/streams` or HLS built is reused: a warm file's `DESCRIBE` reads nothing. It does not answer
//! requests or decide what to read when (`sluice-rtsp` does).

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_media::mp4::Mp4File;
use sluice_proto::http::path::normalize;
use sluice_rtsp::{playable, Catalogue, LiveRegistry, MediaLibrary, NotFound, Refusal, Unplayable};
use sluice_store::CacheError;

use crate::library::{FileVersion, Found, Library, LibraryError};

/// A failed warm-up is told to the requests asking within this long (the held ones ask every
/// few ticks); one asking later starts another, so an origin that answers again is asked again.
const FAILURE_KEPT: Duration = Duration::from_millis(250);

/// Warm-ups (running, or failed lately) past which the failures that are no longer told are
/// dropped. Running ones are bounded by the background places (`RemoteLibrary::in_background`).
const MAX_WARMUPS: usize = 4096;

/// A presentation being looked up and indexed off the RTSP loop, or how that ended badly.
#[derive(Debug)]
enum Warming {
    Running,
    Failed(Unplayable, Instant),
}

/// Warm-ups by URL path: one job per presentation however many requests wait for it.
type Warmups = Arc<Mutex<HashMap<String, Warming>>>;

/// See the module docs.
#[derive(Debug)]
pub struct RtspMedia {
    library: Arc<Library>,
    warming: Warmups,
    /// Who may play what (`[[access]]`), asked on DESCRIBE and SETUP.
    access: Option<Arc<crate::access::Access>>,
    /// Encrypted titles (`[[protect]]`), which RTSP does not serve: its RTP carries clear samples.
    protection: Option<Arc<crate::protect::Protection>>,
    /// The live paths publishers send to, shared by every RTSP loop.
    live: Option<Arc<LiveRegistry>>,
}

/// Why a presentation was not resolved.
enum Miss {
    /// The client's answer.
    Refused(Refusal),
    /// The library's (or the origin's) failure, [`LibraryError::WouldBlock`] among them.
    Failed(LibraryError),
}

impl From<LibraryError> for Miss {
    fn from(e: LibraryError) -> Miss {
        Miss::Failed(e)
    }
}

/// The file at URL path `path` (still percent-encoded), with its library-relative path.
fn open_file(library: &Library, path: &str, may_block: bool) -> Result<(String, FileVersion), Miss> {
    let path = normalize(path).map_err(|_| Miss::Refused(Refusal::NotFound))?;
    if path.names_directory() {
        return Err(Miss::Refused(Refusal::NotFound));
    }
    match library.lookup(&path, may_block)? {
        Found::File(version) => Ok((path.relative().to_string(), version)),
        _ => Err(Miss::Refused(Refusal::NotFound)),
    }
}

/// The indexed file at `path`; an MP4-named file that cannot be indexed is
/// [`Refusal::Unplayable`] (500, with the demuxer's reason, as HLS answers), anything else
/// missing is 404.
fn index(library: &Library, path: &str, may_block: bool) -> Result<Arc<Mp4File>, Miss> {
    let (relative, version) = open_file(library, path, may_block)?;
    match library.tables(&relative, &version, may_block)? {
        Ok(tables) => Ok(tables),
        Err(reason) if crate::library::names::is_mp4(&relative) => {
            Err(Miss::Refused(Refusal::Unplayable(Unplayable {
                status: 500,
                reason: format!("not a playable MP4: {reason}"),
            })))
        }
        Err(_) => Err(Miss::Refused(Refusal::NotFound)),
    }
}

/// A failure of the library (the origin's, for an object store) as RTSP answers it: 404 for an
/// object that is not there, 504 when the origin did not answer in time, 502 otherwise.
fn origin_refusal(e: &LibraryError) -> Refusal {
    let status = match e {
        LibraryError::Cache(CacheError::NotFound) => return Refusal::NotFound,
        LibraryError::Cache(CacheError::Timeout(_)) => 504,
        LibraryError::Forbidden => return Refusal::NotFound,
        _ => 502,
    };
    Refusal::Unplayable(Unplayable { status, reason: format!("origin: {e}") })
}

impl RtspMedia {
    /// RTSP's view of `library`.
    pub fn new(library: Arc<Library>) -> RtspMedia {
        RtspMedia { library, warming: Arc::default(), access: None, protection: None, live: None }
    }

    /// The live paths, when publishers are taken.
    pub fn live_registry(&self) -> Option<&Arc<LiveRegistry>> {
        self.live.as_ref()
    }

    /// Takes publishers on the live paths of `live` (authorised by the access policies' `publish`
    /// right), and serves those paths to viewers.
    pub fn with_live(mut self, live: Arc<LiveRegistry>) -> Self {
        self.live = Some(live);
        self
    }
    /// Asks `access` before every DESCRIBE and SETUP of a path not yet allowed on its connection.
    pub fn with_access(mut self, access: Arc<crate::access::Access>) -> Self {
        self.access = Some(access);
        self
    }

    /// Refuses (403) the titles `protection` encrypts.
    pub fn with_protection(mut self, protection: Arc<crate::protect::Protection>) -> Self {
        self.protection = (!protection.is_empty()).then_some(protection);
        self
    }

    fn is_remote(&self) -> bool {
        self.library.as_remote().is_some()
    }

    /// The presentation at `path`, indexed. A local root answers at once (as for HTTP); an
    /// object store answers from memory and disk only, else [`Refusal::Warming`] with a
    /// warm-up started.
    fn resolve(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        if !self.is_remote() {
            return index(&self.library, path, true).map_err(|miss| match miss {
                Miss::Refused(refusal) => refusal,
                Miss::Failed(e) => {
                    tracing::warn!(path, "rtsp: cannot index: {e}");
                    Refusal::NotFound
                }
            });
        }
        if let Some(refusal) = self.warm_up_outcome(path) {
            return Err(refusal);
        }
        match index(&self.library, path, false) {
            Ok(file) => Ok(file),
            Err(Miss::Refused(refusal)) => Err(refusal),
            Err(Miss::Failed(LibraryError::WouldBlock)) => {
                self.warm_up(path);
                Err(Refusal::Warming)
            }
            Err(Miss::Failed(e)) => {
                tracing::warn!(path, "rtsp: cannot index: {e}");
                Err(origin_refusal(&e))
            }
        }
    }

    /// What a warm-up of `path` says now: still running ([`Refusal::Warming`]), failed lately
    /// (its refusal, for every request asking within [`FAILURE_KEPT`]), or nothing (done, or
    /// never started).
    fn warm_up_outcome(&self, path: &str) -> Option<Refusal> {
        let mut warming = self.warming.lock().unwrap_or_else(|e| e.into_inner());
        match warming.get(path)? {
            Warming::Running => Some(Refusal::Warming),
            Warming::Failed(unplayable, at) if at.elapsed() < FAILURE_KEPT => {
                Some(Refusal::Unplayable(unplayable.clone()))
            }
            Warming::Failed(..) => {
                warming.remove(path);
                None
            }
        }
    }

    /// Starts looking up and indexing `path` off the RTSP loop, unless that is under way (or no
    /// background place is free: the next request tries again).
    fn warm_up(&self, path: &str) {
        let mut warming = self.warming.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(warming.get(path), Some(Warming::Running)) {
            return;
        }
        let (library, table, key) = (Arc::clone(&self.library), Arc::clone(&self.warming), path.to_string());
        let Some(remote) = self.library.as_remote() else { return };
        let started = remote.in_background(move || {
            let outcome = match index(&library, &key, true) {
                Err(Miss::Failed(e)) => {
                    tracing::warn!(path = key, "rtsp: cannot index: {e}");
                    match origin_refusal(&e) {
                        Refusal::Unplayable(u) => Some(Warming::Failed(u, Instant::now())),
                        _ => None,
                    }
                }
                // Indexed, or refused for good: the catalogue or the cache's version remember it.
                _ => None,
            };
            let mut table = table.lock().unwrap_or_else(|e| e.into_inner());
            if table.len() >= MAX_WARMUPS {
                // Names made up by a client while the origin fails must not grow the table
                // without end: failures nobody asked about again go first.
                table.retain(|_, w| match w {
                    Warming::Running => true,
                    Warming::Failed(_, at) => at.elapsed() < FAILURE_KEPT,
                });
            }
            match outcome {
                Some(failed) => table.insert(key, failed),
                None => table.remove(&key),
            };
        });
        if started.is_some() {
            warming.insert(path.to_string(), Warming::Running);
        }
    }
}

impl Catalogue for RtspMedia {
    fn open(&self, path: &str) -> Result<Arc<Mp4File>, NotFound> {
        self.resolve(path).map_err(|_| NotFound)
    }

    fn open_playable(&self, path: &str) -> Result<Arc<Mp4File>, Refusal> {
        let file = self.resolve(path)?;
        playable(&file).map_err(Refusal::Unplayable)?;
        Ok(file)
    }

    fn authorize(
        &self,
        method: &str,
        url: &str,
        path: &str,
        query: Option<&str>,
        authorization: Option<&str>,
        peer: std::net::IpAddr,
    ) -> Result<(), u16> {
        // A path that does not normalise is answered (404) by the lookup, as over HTTP.
        let Ok(normal) = normalize(path) else { return Ok(()) };
        let path = format!("/{}", normal.relative());
        if self.protection.as_ref().is_some_and(|p| p.guards(&path)) {
            return Err(403);
        }
        let publishing = method == "ANNOUNCE";
        let Some(access) = &self.access else {
            // Without a policy granting it, nobody publishes.
            return if publishing { Err(403) } else { Ok(()) };
        };
        let bearer = authorization.and_then(crate::access::credential);
        let presented = crate::access::Presented {
            path: &path,
            query,
            bearer: bearer.as_deref(),
            peer,
            authorization,
            method,
            target: crate::access::Target::Rtsp(url),
        };
        if publishing {
            return access.check_publish(&presented, std::time::SystemTime::now());
        }
        match access.check(&presented, std::time::SystemTime::now()) {
            crate::access::Decision::Allowed { .. } => Ok(()),
            crate::access::Decision::Refused(reason) => Err(reason.status()),
        }
    }

    fn live(&self) -> Option<&LiveRegistry> {
        self.live.as_deref()
    }

    /// Digest and Basic on a `users` path (clients pick Digest, which keeps the password off
    /// the wire); Basic alone elsewhere (a token as the password).
    fn challenges(&self, path: &str) -> Vec<String> {
        let challenges = self.access.as_ref().and_then(|access| {
            let normal = normalize(path).ok()?;
            access.challenges(&format!("/{}", normal.relative()), std::time::SystemTime::now())
        });
        match challenges {
            Some(both) => both.to_vec(),
            None => vec!["Basic realm=\"sluice\"".to_string()],
        }
    }
}

impl MediaLibrary for RtspMedia {
    type Bytes = FileVersion;

    fn open_bytes(&self, path: &str) -> io::Result<FileVersion> {
        let may_block = !self.is_remote();
        match open_file(&self.library, path, may_block) {
            Ok((_, version)) => Ok(version),
            Err(Miss::Failed(LibraryError::WouldBlock)) => {
                self.warm_up(path);
                Err(io::ErrorKind::WouldBlock.into())
            }
            Err(Miss::Refused(_)) => Err(io::ErrorKind::NotFound.into()),
            Err(Miss::Failed(e)) => Err(io::Error::other(e)),
        }
    }

    fn read_at(&self, bytes: &FileVersion, offset: u64, into: &mut [u8]) -> io::Result<()> {
        self.library.read_at(bytes, offset, into, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::library::catalogue::Catalogue as Indexes;
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

    /// An object store's presentation is never waited for on the RTSP loop: the first asks are
    /// [`Refusal::Warming`] while a background job looks it up and indexes it; a local root's is
    /// answered at once.
    #[test]
    fn an_object_is_warmed_off_the_loop_and_a_local_file_is_answered_at_once() {
        use crate::library::remote::RemoteLibrary;
        use sluice_store::{CacheConfig, Key, LocalStore, PutOptions, Store};

        let demo = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/demo/sluice-demo.mp4")).unwrap();
        let (root, cache) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let store = LocalStore::open(root.path()).unwrap();
        sluice_store::put_bytes(&store, &Key::new("a.mp4").unwrap(), &demo, PutOptions::default()).unwrap();
        let store: Arc<dyn Store> = Arc::new(store);
        let config = CacheConfig {
            dir: cache.path().to_path_buf(),
            max_bytes: 16 << 20,
            slice_len: 64 << 10,
            revalidate: Duration::from_secs(60),
        };
        let remote = RemoteLibrary::open(store, config, "test").unwrap();
        let indexes = Indexes::new(1 << 20, Duration::from_secs(6));
        let c = RtspMedia::new(Arc::new(Library::remote(remote, indexes)));
        assert_eq!(c.open_playable("/a.mp4").err(), Some(Refusal::Warming), "cold: not read here");
        let deadline = Instant::now() + Duration::from_secs(10);
        let file = loop {
            match c.open_playable("/a.mp4") {
                Ok(file) => break file,
                Err(Refusal::Warming) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                Err(other) => panic!("{other:?}"),
            }
        };
        assert!(!file.tracks.is_empty());
        assert!(Arc::ptr_eq(&file, &c.open_playable("/a.mp4").unwrap()), "indexed once");
        // Its samples: a slice not on disk would block, and is fetched in the background.
        let bytes = c.open_bytes("/a.mp4").unwrap();
        let last = demo.len() as u64 - 100;
        let mut into = [0u8; 100];
        let mut tries = 0;
        loop {
            match c.read_at(&bytes, last, &mut into) {
                Ok(()) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock && tries < 2000 => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(e) => panic!("{e}"),
            }
        }
        assert_eq!(&into[..], &demo[demo.len() - 100..]);
        assert_eq!(
            c.open_playable("/missing.mp4").err(),
            Some(Refusal::Warming),
            "looked up off the loop too"
        );

        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.mp4"), &demo).unwrap();
        let indexes = Indexes::new(1 << 20, Duration::from_secs(6));
        let local = RtspMedia::new(Arc::new(Library::local(dir.path(), indexes).unwrap()));
        assert!(local.open_playable("/a.mp4").is_ok(), "a local file is indexed at once");
        let bytes = local.open_bytes("/a.mp4").unwrap();
        local.read_at(&bytes, last, &mut into).unwrap();
    }
}
