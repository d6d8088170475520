//! The recordings of a live path on the wall clock: which files hold which span, for the admin
//! listener's `/recordings` and for `/rec/` spans across files.
//!
//! A recording file's name is the wall-clock time of its first segment, to the millisecond
//! (`2026-11-28T08-30-00.250Z.mp4`), and its length is its samples' span, read from the file
//! through the library's catalogue (so a growing file is re-read as it grows, and every file once
//! a version). It does not write recordings ([`super::Recorder`]) nor answer requests.

use std::time::{Duration, SystemTime};

use sluice_media::mp4::Mp4File;

use crate::library::{Library, LibraryError};

/// One recording file.
#[derive(Debug, Clone)]
pub struct RecordedFile {
    /// Its library path (`recordings/live/cam1/….mp4`, no leading slash).
    pub relative: String,
    /// The wall-clock time its first segment starts.
    pub start: SystemTime,
    /// How long its samples last.
    pub duration: Duration,
    /// Its size in bytes.
    pub bytes: u64,
}

impl RecordedFile {
    /// When its last sample ends.
    pub fn end(&self) -> SystemTime {
        self.start + self.duration
    }
}

/// The file name of a recording starting at `start` (its `n`th of that millisecond, from 0).
pub fn file_name(start: SystemTime, n: usize) -> String {
    let stamp = chrono::DateTime::<chrono::Utc>::from(start).format("%Y-%m-%dT%H-%M-%S%.3fZ");
    match n {
        0 => format!("{stamp}.mp4"),
        n => format!("{stamp}-{n}.mp4"),
    }
}

/// The start a recording's file name says, if it is one's.
pub fn start_of(name: &str) -> Option<SystemTime> {
    let stem = name.strip_suffix(".mp4")?;
    let stamp = match stem.find('Z') {
        Some(z) => &stem[..=z],
        None => stem,
    };
    let parsed = chrono::NaiveDateTime::parse_from_str(stamp, "%Y-%m-%dT%H-%M-%S%.fZ").ok()?;
    Some(SystemTime::from(parsed.and_utc()))
}

/// The recordings of live path `path` (`/live/cam1`) overlapping `from..to`, oldest first; a
/// file that does not index (its first segment not complete yet) is left out. Of an object store,
/// [`LibraryError::WouldBlock`] when the listing or an index is not at hand and `may_block` is
/// false.
pub fn recordings(
    library: &Library,
    path: &str,
    (from, to): (SystemTime, SystemTime),
    may_block: bool,
) -> Result<Vec<RecordedFile>, LibraryError> {
    let dir = format!("{}/{}/", super::RECORDINGS, path.trim_matches('/'));
    let Some(listing_path) = crate::library::decoded_path(&dir) else { return Ok(Vec::new()) };
    let listed = match library.list(&listing_path, may_block) {
        Ok(listed) => listed,
        Err(LibraryError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut files = Vec::new();
    for entry in listed.iter().filter(|e| !e.is_dir) {
        let Some(start) = start_of(&entry.name) else { continue };
        if start >= to {
            continue;
        }
        let relative = format!("{dir}{}", entry.name);
        let Some(version) = library.file(&relative, may_block)? else { continue };
        let Ok(tables) = library.tables(&relative, &version, may_block)? else { continue };
        let file = RecordedFile { relative, start, duration: span(&tables), bytes: entry.len };
        if file.end() > from {
            files.push(file);
        }
    }
    files.sort_by_key(|f| f.start);
    Ok(files)
}

/// How long the samples of a recording last: its longest track's, from its first sample's
/// decode time (a recording's times are its stream's, not from 0).
pub fn span(file: &Mp4File) -> Duration {
    let secs = file
        .tracks
        .iter()
        .filter_map(|t| {
            let (first, last) = (t.samples.first()?, t.samples.last()?);
            let end = t.samples.len().checked_sub(2).map_or(last.decode_time(), |i| {
                last.decode_time() + (last.decode_time() - t.samples[i].decode_time())
            });
            Some(end.saturating_sub(first.decode_time()) as f64 / f64::from(t.timescale.max(1)))
        })
        .fold(0.0, f64::max);
    Duration::from_secs_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_when_a_recording_starts() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_854_625_250);
        assert_eq!(file_name(at, 0), "2026-11-28T08-30-25.250Z.mp4");
        assert_eq!(start_of(&file_name(at, 0)), Some(at));
        assert_eq!(start_of(&file_name(at, 2)), Some(at), "a second file of the same millisecond");
        assert_eq!(start_of("2026-11-28T08-30-25Z.mp4"), Some(at - Duration::from_millis(250)));
        assert_eq!(start_of("film.mp4"), None);
    }
}
