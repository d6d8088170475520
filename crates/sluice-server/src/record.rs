//! Recording live paths into the library: each `[[record]]` rule names a live prefix, and every
//! stream published under it is written, as it comes, into fragmented MP4 files under the
//! library's `recordings/` folder (`recordings/live/cam1/2026-11-28T08-30-00.250Z.mp4`), a new file
//! every `file_duration`, the oldest deleted past `keep` or `max_bytes`.
//!
//! A recording file is the stream's CMAF init segment and then its segments, each appended whole
//! as it completes ([`sluice_rtsp::LiveCmaf`]: the same cuts and bytes live HLS and DASH serve).
//! A file appears (renamed from a reserved name) only with its first segment in it, and the
//! library serves a growing fragmented MP4 up to its last complete fragment, so a recording is
//! a title at once, over HTTP, HLS, DASH and RTSP, and a crash, even SIGKILL, loses at most the
//! segment being appended (a file it dies before renaming is deleted by the next run's
//! retention turn). Files are not synced to disk per segment: what the kernel holds
//! survives the process, and a machine crash may lose the last seconds written.
//!
//! An object store's library (`s3://…`) cannot have files appended to, so there the files grow
//! exactly so in a local spool (`store.record_spool`) and each is uploaded whole under the same
//! key once it is closed (the next file started, or the stream ended and its last segment
//! written), then removed from the spool ([`spool`]). A recording is in such a library, listed and
//! playable, only from then on: the growing file is not (`/streams` names it all the same), so
//! operators choose a short `file_duration` (e.g. 1m). An upload that fails is tried again a few
//! seconds later, and the files a stop left in the spool (a file still growing, an upload not
//! done; a crash's, even SIGKILL's, too) are uploaded at the next start; retention applies to the
//! store's objects.
//!
//! Owns the recorder thread (one per server: it polls the live paths four times a second, writes
//! what is new and applies retention every ten seconds) and the `[[record]]` settings. It does
//! not cut segments (the live stream does), serve recordings (the library does) nor list them
//! (the admin endpoints read the library).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use sluice_engine::Shutdown;
use sluice_rtsp::{LiveRegistry, LiveStream};

use crate::library::Library;

pub mod spool;
pub mod timeline;

/// The library folder recordings go into.
pub const RECORDINGS: &str = "recordings";

/// How often the recorder looks for new segments: a segment is 2 s, so it is appended within a
/// quarter of a second of completing.
const POLL: Duration = Duration::from_millis(250);

/// How often retention is applied.
const RETENTION_EVERY: Duration = Duration::from_secs(10);

/// How old a recording's temporary file must be to be taken for a crash's leftover: the
/// recorder's own lasts only from its creation to its rename, the first segment's write.
const LEFTOVER_AGE: Duration = Duration::from_secs(60);

/// One `[[record]]` rule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordConfig {
    /// Live paths under this URL prefix are recorded (`/live/` records every one).
    pub prefix: String,
    /// The longest a recording file lasts; the next segment then starts a new file.
    #[serde(
        default = "default_file_duration",
        deserialize_with = "sluice_proto::duration_text::deserialize"
    )]
    pub file_duration: Duration,
    /// Recording files older than this are deleted; `0s` keeps them.
    #[serde(default, deserialize_with = "sluice_proto::duration_text::deserialize")]
    pub keep: Duration,
    /// The most bytes this rule's recordings take, the oldest files deleted first; 0 for no limit.
    #[serde(default, deserialize_with = "sluice_proto::size_text::deserialize")]
    pub max_bytes: u64,
}

fn default_file_duration() -> Duration {
    Duration::from_secs(600)
}

/// Checks the `[[record]]` rules.
pub fn check_rules(rules: &[RecordConfig], rtsp_enabled: bool) -> Result<(), String> {
    for r in rules {
        let name = format!("[[record]] prefix = \"{}\"", r.prefix);
        if !r.prefix.starts_with('/') {
            return Err(format!("{name}: the prefix is a URL path, such as \"/live/\""));
        }
        if r.file_duration < Duration::from_secs(2) {
            return Err(format!("{name}: file_duration must be 2s at least (a segment is 2 s)"));
        }
        if !rtsp_enabled {
            return Err(format!(
                "{name}: recording needs RTSP on (rtsp.enabled), which takes the live paths in"
            ));
        }
    }
    Ok(())
}

/// The `[[record]]` rules as `serve --check` prints them.
pub fn render_rules(rules: &[RecordConfig]) -> String {
    let quote = |s: &str| toml::Value::String(s.to_string()).to_string();
    let duration = sluice_proto::duration_text::format;
    rules
        .iter()
        .map(|r| {
            format!(
                "\n[[record]]\nprefix = {}\nfile_duration = \"{}\"\nkeep = \"{}\"\nmax_bytes = \"{}\"\n",
                quote(&r.prefix),
                duration(r.file_duration),
                duration(r.keep),
                sluice_proto::size_text::format(r.max_bytes),
            )
        })
        .collect()
}

/// The file a stream is being recorded into.
#[derive(Debug)]
struct OpenFile {
    file: File,
    path: PathBuf,
    /// Where on the stream's timeline (seconds) its first segment starts.
    start: f64,
}

/// One stream being recorded.
#[derive(Debug)]
struct Recording {
    stream: Arc<LiveStream>,
    rule: usize,
    file: Option<OpenFile>,
    /// The next segment to write.
    next: u64,
    /// Whether the stream ended and its last segment is written.
    done: bool,
}

/// The recorder. See the module docs.
#[derive(Debug)]
pub struct Recorder {
    rules: Vec<RecordConfig>,
    /// Where files grow: the library root, or an object store library's spool.
    root: PathBuf,
    registry: Arc<LiveRegistry>,
    /// Where closed files go when `root` is a spool.
    uploader: Option<spool::Uploader>,
    /// Per live path, the file being written (the library path, from the root), for `/streams`.
    writing: Mutex<HashMap<String, String>>,
}

impl Recorder {
    /// A recorder of `registry`'s streams by `rules` into the library at `root`.
    pub fn new(rules: Vec<RecordConfig>, root: &Path, registry: Arc<LiveRegistry>) -> Recorder {
        Recorder { rules, root: root.to_path_buf(), registry, uploader: None, writing: Mutex::default() }
    }

    /// This recorder with `root` a spool: each closed file is uploaded into `store` (the
    /// library's object store) under its library path, `library` told of it, and then removed.
    pub fn uploading_to(mut self, store: Arc<dyn sluice_store::Store>, library: Arc<Library>) -> Recorder {
        self.uploader = Some(spool::Uploader::new(store, library));
        self
    }

    /// The library path of the file live path `path` is being recorded into, if it is.
    pub fn recording(&self, path: &str) -> Option<String> {
        self.writing.lock().unwrap_or_else(|e| e.into_inner()).get(path).cloned()
    }

    /// How many live paths are being recorded now.
    pub fn active(&self) -> usize {
        self.writing.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// When the file at library path `relative` (no leading slash) began, if it is being
    /// written now.
    pub fn growing_since(&self, relative: &str) -> Option<SystemTime> {
        let writing = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        let file = writing.values().find(|f| f.strip_prefix('/') == Some(relative))?;
        timeline::start_of(file.rsplit('/').next()?)
    }

    /// Records until `shutdown` (the recorder thread's body); the files are whole after any turn.
    /// Recording into a spool, its closed files are uploaded by a thread of their own, so that a
    /// slow or absent store never holds up the appending (a segment not appended in time leaves
    /// the live window).
    pub fn run(&self, shutdown: &Shutdown) {
        std::thread::scope(|scope| {
            let closed = self.uploader.as_ref().and_then(|uploader| {
                // What a crash left, read before this recorder opens a file of its own.
                let left = spool::spooled(&self.root);
                let (closed, receiver) = std::sync::mpsc::channel();
                let spawned = std::thread::Builder::new()
                    .name("sluice-record-upload".into())
                    .spawn_scoped(scope, move || uploader.run(&self.root, left, &receiver, shutdown));
                match spawned {
                    Ok(_) => Some(closed),
                    Err(e) => {
                        tracing::error!("recordings stay in the spool: the upload thread did not start: {e}");
                        None
                    }
                }
            });
            self.record(shutdown, closed.as_ref());
        });
    }

    /// Records until `shutdown`, sending each file it closes to `closed`, if given.
    fn record(&self, shutdown: &Shutdown, closed: Option<&Sender<PathBuf>>) {
        let close = |file: OpenFile| {
            if let Some(closed) = closed {
                // The upload thread ends only after this loop does.
                let _ = closed.send(file.path);
            }
        };
        let mut recordings: Vec<Recording> = Vec::new();
        let mut retention_at = Instant::now();
        while !shutdown.is_triggered() {
            let now = Instant::now();
            for summary in self.registry.list(now) {
                let Some(rule) = self.rules.iter().position(|r| summary.path.starts_with(&r.prefix)) else {
                    continue;
                };
                let Some(stream) = self.registry.get(&summary.path) else { continue };
                if !recordings.iter().any(|r| Arc::ptr_eq(&r.stream, &stream)) {
                    recordings.push(Recording { stream, rule, file: None, next: 0, done: false });
                }
            }
            for recording in &mut recordings {
                if let Err(e) = self.write_new(recording, close) {
                    tracing::warn!(path = recording.stream.path(), "recording: {e}");
                }
            }
            // A stream whose publisher went is done once its last segment is written.
            recordings.retain_mut(|r| {
                if r.done {
                    self.writing.lock().unwrap_or_else(|e| e.into_inner()).remove(r.stream.path());
                    if let Some(file) = r.file.take() {
                        close(file);
                    }
                }
                !r.done
            });
            if now >= retention_at {
                retention_at = now + RETENTION_EVERY;
                sweep_leftovers(&self.root.join(RECORDINGS), 0);
                let open: Vec<PathBuf> =
                    recordings.iter().filter_map(|r| r.file.as_ref().map(|f| f.path.clone())).collect();
                for rule in &self.rules {
                    match &self.uploader {
                        Some(uploader) => uploader.apply_retention(rule),
                        None => self.apply_retention(rule, &open),
                    }
                }
            }
            std::thread::sleep(POLL);
        }
    }

    /// Writes the segments of `recording` that completed since the last turn.
    /// A file it closes (the next one started) goes to `close`.
    fn write_new(&self, recording: &mut Recording, close: impl Fn(OpenFile)) -> std::io::Result<()> {
        let cmaf = recording.stream.cmaf();
        // Read before the segments: an end seen after them could be before its last segment.
        let ended = recording.stream.has_ended();
        let segments = cmaf.segments();
        for segment in &segments {
            if segment.sequence < recording.next {
                continue;
            }
            if segment.sequence > recording.next && recording.next > 0 {
                tracing::warn!(
                    path = recording.stream.path(),
                    "recording: segments {} to {} left the live window before they were written",
                    recording.next,
                    segment.sequence - 1
                );
            }
            let Ok(Some(bytes)) = cmaf.segment(segment.sequence, None) else { continue };
            let rule = &self.rules[recording.rule];
            let rotate = recording
                .file
                .as_ref()
                .is_none_or(|f| segment.start - f.start >= rule.file_duration.as_secs_f64());
            if rotate {
                let init = cmaf.init_segment(None).map_err(std::io::Error::other)?;
                let (file, path) =
                    self.create(recording.stream.path(), segment.wallclock, &[&init, &bytes])?;
                let relative = path.strip_prefix(&self.root).unwrap_or(&path).to_string_lossy().into_owned();
                tracing::info!(path = recording.stream.path(), file = %relative, "recording into a new file");
                self.writing
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(recording.stream.path().to_string(), format!("/{relative}"));
                if let Some(previous) = recording.file.replace(OpenFile { file, path, start: segment.start })
                {
                    close(previous);
                }
            } else if let Some(open) = &mut recording.file {
                open.file.write_all(&bytes)?;
            }
            recording.next = segment.sequence + 1;
        }
        recording.done = ended && segments.last().is_none_or(|s| s.sequence < recording.next);
        Ok(())
    }

    /// A new recording file of live path `path` starting at `wallclock`, holding `parts`: written
    /// under a reserved name, then renamed, so the library never sees it without a segment.
    fn create(&self, path: &str, wallclock: SystemTime, parts: &[&[u8]]) -> std::io::Result<(File, PathBuf)> {
        let dir = self.root.join(RECORDINGS).join(path.trim_start_matches('/'));
        std::fs::create_dir_all(&dir)?;
        let name = (0..100)
            .map(|n| timeline::file_name(wallclock, n))
            .find(|name| !dir.join(name).exists())
            .unwrap_or_else(|| timeline::file_name(wallclock, 100));
        let temporary = dir.join(format!("{}rec-{name}", sluice_store::RESERVED_PREFIX));
        let mut file = OpenOptions::new().create(true).truncate(true).write(true).open(&temporary)?;
        for part in parts {
            file.write_all(part)?;
        }
        let path = dir.join(name);
        std::fs::rename(&temporary, &path)?;
        Ok((file, path))
    }

    /// Deletes `rule`'s recording files past its age and size limits, never one of `open`.
    fn apply_retention(&self, rule: &RecordConfig, open: &[PathBuf]) {
        if rule.keep.is_zero() && rule.max_bytes == 0 {
            return;
        }
        let dir = self.root.join(RECORDINGS).join(rule.prefix.trim_start_matches('/'));
        let mut files = Vec::new();
        collect_files(&dir, &mut files, 0);
        files.retain(|(path, _, _)| !open.contains(path));
        retire(rule, files, |path| match std::fs::remove_file(path) {
            Ok(()) => {
                tracing::info!(file = %path.display(), "recording deleted by retention");
                true
            }
            Err(e) => {
                tracing::warn!(file = %path.display(), "recording not deleted: {e}");
                false
            }
        });
    }
}

/// Deletes, oldest first, the `files` (each with when it was last written and its length) past
/// `rule`'s age and size limits; `delete` says whether it deleted one.
fn retire<F>(rule: &RecordConfig, mut files: Vec<(F, SystemTime, u64)>, mut delete: impl FnMut(&F) -> bool) {
    if rule.keep.is_zero() && rule.max_bytes == 0 {
        return;
    }
    files.sort_by_key(|(_, modified, _)| *modified);
    let mut total: u64 = files.iter().map(|(_, _, len)| len).sum();
    let now = SystemTime::now();
    for (file, modified, len) in files {
        let too_old = !rule.keep.is_zero() && now.duration_since(modified).is_ok_and(|age| age > rule.keep);
        let too_much = rule.max_bytes > 0 && total > rule.max_bytes;
        if (too_old || too_much) && delete(&file) {
            total -= len;
        }
    }
}

/// Deletes the temporary files under `dir` (recursively, a few levels) that a recorder died
/// between creating and renaming ([`Recorder::create`]): hidden from the library by their
/// reserved names, they would otherwise stay for ever. Returns how many it deleted.
fn sweep_leftovers(dir: &Path, depth: usize) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let temporary = format!("{}rec-", sluice_store::RESERVED_PREFIX);
    let mut deleted = 0;
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let path = entry.path();
        if meta.is_dir() && depth < 8 {
            deleted += sweep_leftovers(&path, depth + 1);
        } else if meta.is_file()
            && entry.file_name().to_string_lossy().starts_with(&temporary)
            && meta.modified().is_ok_and(|m| m.elapsed().is_ok_and(|age| age > LEFTOVER_AGE))
        {
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    tracing::info!(file = %path.display(), "a recording's temporary file, left by a crash, deleted");
                    deleted += 1;
                }
                Err(e) => tracing::warn!(file = %path.display(), "a crash's temporary file not deleted: {e}"),
            }
        }
    }
    deleted
}

/// The recording files under `dir` (recursively, a few levels): path, modification time, length.
fn collect_files(dir: &Path, out: &mut Vec<(PathBuf, SystemTime, u64)>, depth: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        let path = entry.path();
        if meta.is_dir() && depth < 8 {
            collect_files(&path, out, depth + 1);
        } else if meta.is_file()
            && path.extension().is_some_and(|e| e == "mp4")
            && !sluice_store::is_reserved(&entry.file_name().to_string_lossy())
        {
            out.push((path, meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_crashs_temporary_recording_files_are_swept_and_nothing_else() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join(RECORDINGS).join("live/cam1");
        std::fs::create_dir_all(&dir).unwrap();
        let long_ago = SystemTime::now() - Duration::from_secs(600);
        let write = |name: &str, modified: SystemTime| {
            File::create(dir.join(name)).unwrap().set_modified(modified).unwrap();
        };
        // A crash's, one being written now, a recording, and another kind of reserved file.
        write(".sluice-rec-2026-11-28T08-30-00.250Z.mp4", long_ago);
        write(".sluice-rec-2026-11-28T08-40-00.250Z.mp4", SystemTime::now());
        write("2026-11-28T08-20-00.250Z.mp4", long_ago);
        write(".sluice-upload-x", long_ago);
        assert_eq!(sweep_leftovers(&root.path().join(RECORDINGS), 0), 1);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [".sluice-rec-2026-11-28T08-40-00.250Z.mp4", ".sluice-upload-x", "2026-11-28T08-20-00.250Z.mp4"]
        );
    }
}
