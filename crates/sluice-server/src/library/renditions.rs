//! Rendition sets and subtitles found by file name, with no configuration.
//!
//! This module owns the naming conventions and their checks: MP4s of one title in one directory
//! named `TITLE.<height>p.mp4` (`movie.1080p.mp4`, `movie.720p.mp4`) form the set `TITLE.set`,
//! or an optional sidecar `TITLE.set.toml` lists the files (for other naming schemes); WebVTT
//! sidecars `TITLE.<language>.vtt` (`movie.en.vtt`) are the title's subtitles, for the set and
//! for each of its files (and for a lone `TITLE.mp4`). A set whose renditions' segments (cut at
//! keyframes) do not start at the same times cannot be switched between cleanly: it is
//! [`SetError::Misaligned`], with the times, and its files are still served one by one. It does
//! not package or answer anything (`crate::http::hls` does), and reads the directory and sidecars
//! through the [`Library`], so local and object-store libraries behave alike.

use std::sync::Arc;

use sluice_media::hls::SegmentIndex;
use sluice_proto::nesting::{check_nesting, NestingLimit, Syntax};

use crate::library::catalogue::Described;
use crate::library::{decoded_path, FileVersion, Library, LibraryError};

/// A rendition set as the page shows it: offered when it was found and its keyframes line up, else
/// with the reason it cannot be played.
#[derive(Debug, Clone, PartialEq)]
pub struct SetOffer {
    /// The title (`movie` of `movie.set`).
    pub title: String,
    /// Each rendition's file name and resolution, highest first.
    pub renditions: Vec<(String, Option<(u16, u16)>)>,
    /// The subtitles' languages.
    pub subtitles: Vec<String>,
    /// Why it cannot be played (its renditions do not line up, its sidecar is wrong, none of
    /// its files packages): the page shows the reason instead of a Play button. `None` when
    /// it plays.
    pub refused: Option<String>,
    /// Its `[[protect]]` scheme (`cenc`, `cbcs`, `aes-128`) when it is encrypted.
    pub protection: Option<&'static str>,
}

/// The suffix of a set's name in URLs: `/movies/movie.set/master.m3u8`.
pub const SET_SUFFIX: &str = ".set";

/// Largest sidecar read (a list of file names).
const MAX_SIDECAR: u64 = 64 << 10;
/// Deepest nesting of a sidecar, which needs 2 (`[subtitles]`, `files = [...]`). toml's parser
/// takes some 3 KiB of stack per inline table in a release build and 20 KiB in a debug build
/// (measured on a 256 KiB thread: 39 and 11 levels fit), and it runs on connection threads of
/// 256 KiB that have used some already: 4 keeps a debug build's parse under 100 KiB.
const SIDECAR_DEPTH: usize = 4;

/// Two renditions' segment starts this close (seconds) are the same keyframe: different
/// timescales round a frame's time differently by a tick.
const ALIGNMENT_TOLERANCE: f64 = 0.002;

/// The `height` of `TITLE.<height>p.mp4` when `name` is a rendition of `title` by the naming
/// convention.
pub fn rendition_height(name: &str, title: &str) -> Option<u32> {
    let rest = name.strip_prefix(title)?.strip_prefix('.')?;
    let digits = rest.strip_suffix("p.mp4")?;
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The title of a file name: `movie` of `movie.720p.mp4` (a rendition) and of `movie.mp4`.
pub fn title_of(name: &str) -> Option<&str> {
    let stem = name.strip_suffix(".mp4")?;
    match stem.rsplit_once('.') {
        Some((title, height)) if rendition_height(name, title).is_some() && !height.is_empty() => Some(title),
        _ => Some(stem),
    }
}

/// The language of `TITLE.<language>.vtt` when `name` is a subtitles sidecar of `title`.
pub fn subtitle_language<'n>(name: &'n str, title: &str) -> Option<&'n str> {
    let language = name.strip_prefix(title)?.strip_prefix('.')?.strip_suffix(".vtt")?;
    sluice_media::hls::playlist::is_language(language).then_some(language)
}

/// One WebVTT sidecar of a title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sidecar {
    /// Its language, from the name.
    pub language: String,
    /// Its file name in the title's directory.
    pub name: String,
}

/// One file of a set.
#[derive(Debug, Clone)]
pub struct Member {
    /// Its file name in the set's directory.
    pub name: String,
    /// Its path in the library.
    pub relative: String,
    /// The version served.
    pub version: FileVersion,
    /// What it is as a video (it packages: others are left out of the set).
    pub described: Arc<Described>,
}

impl Member {
    /// Its segment index (members are made only of files that package: `None` never).
    pub fn index(&self) -> Option<&SegmentIndex> {
        self.described.hls.as_ref().ok().map(|p| &p.index)
    }
}

/// The files of a set, highest resolution first.
#[derive(Debug, Clone)]
pub struct RenditionSet {
    /// Its members.
    pub members: Vec<Member>,
    /// The title's subtitles.
    pub subtitles: Vec<Sidecar>,
}

/// Why a set cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum SetError {
    /// No file of the directory belongs to it.
    #[error("no such set")]
    NotFound,
    /// The sidecar does not parse or names a file that is not there.
    #[error("{0}")]
    Sidecar(String),
    /// The members' segments do not start at the same times (the message has them).
    #[error("{0}")]
    Misaligned(String),
    /// The library could not answer (or would have to wait).
    #[error(transparent)]
    Library(#[from] LibraryError),
}

/// The sidecar's form: `files = ["a.mp4", "b.mp4"]`, optionally `[subtitles] en = "a.vtt"`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct SetFile {
    files: Vec<String>,
    #[serde(default)]
    subtitles: std::collections::BTreeMap<String, String>,
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_string()
    } else {
        format!("{dir}/{name}")
    }
}

/// The names of the files directly in `dir`.
fn file_names(library: &Library, dir: &str, may_block: bool) -> Result<Vec<String>, LibraryError> {
    let Some(path) = decoded_path(&if dir.is_empty() { String::new() } else { format!("{dir}/") }) else {
        return Ok(Vec::new());
    };
    Ok(library.list(&path, may_block)?.into_iter().filter(|e| !e.is_dir).map(|e| e.name).collect())
}

/// The subtitles sidecars of `title` in a listing.
fn sidecars_in(names: &[String], title: &str) -> Vec<Sidecar> {
    names
        .iter()
        .filter_map(|n| Some(Sidecar { language: subtitle_language(n, title)?.to_string(), name: n.clone() }))
        .collect()
}

/// The subtitles of the file `dir/name` (by its title).
pub fn subtitles_of_file(
    library: &Library,
    dir: &str,
    name: &str,
    may_block: bool,
) -> Result<Vec<Sidecar>, LibraryError> {
    let Some(title) = title_of(name) else { return Ok(Vec::new()) };
    Ok(sidecars_in(&file_names(library, dir, may_block)?, title))
}

/// The set `title` of `dir`: its members (from the sidecar, else by name), checked to line up.
pub fn find_set(
    library: &Library,
    dir: &str,
    title: &str,
    may_block: bool,
) -> Result<RenditionSet, SetError> {
    let names = file_names(library, dir, may_block)?;
    let sidecar_name = format!("{title}{SET_SUFFIX}.toml");
    let (files, subtitles) = if names.contains(&sidecar_name) {
        let set = read_sidecar(library, &join(dir, &sidecar_name), may_block)?;
        let mut subtitles = Vec::new();
        for (language, name) in set.subtitles {
            if !sluice_media::hls::playlist::is_language(&language) || !names.contains(&name) {
                return Err(SetError::Sidecar(format!(
                    "{sidecar_name}: subtitles {language} = {name:?}: not a language tag and a file of the folder"
                )));
            }
            subtitles.push(Sidecar { language, name });
        }
        if subtitles.is_empty() {
            subtitles = sidecars_in(&names, title);
        }
        for file in &set.files {
            if !names.contains(file) || file.contains('/') {
                return Err(SetError::Sidecar(format!(
                    "{sidecar_name} lists {file:?}, not a file of the folder"
                )));
            }
        }
        (set.files, subtitles)
    } else {
        let mut by_height: Vec<(u32, String)> =
            names.iter().filter_map(|n| Some((rendition_height(n, title)?, n.clone()))).collect();
        by_height.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        (by_height.into_iter().map(|(_, n)| n).collect(), sidecars_in(&names, title))
    };
    let mut members = Vec::new();
    for name in files {
        let relative = join(dir, &name);
        let Some(version) = library.file(&relative, may_block)? else { continue };
        let described = library.described(&relative, &version, may_block)?;
        if described.hls.is_err() {
            continue;
        }
        members.push(Member { name, relative, version, described });
    }
    if members.is_empty() {
        return Err(SetError::NotFound);
    }
    check_alignment(&members)?;
    Ok(RenditionSet { members, subtitles })
}

/// The sets of `dir` (whose listing is `entries`), as the page shows them: every title with a
/// rendition-named MP4 or a sidecar, offered when found whole and lined up, else with the reason
/// it cannot be played (its files are listed on their own either way).
pub fn listed_sets(
    library: &Library,
    dir: &str,
    entries: &[crate::library::Listed],
    may_block: bool,
) -> Result<Vec<SetOffer>, LibraryError> {
    let sets = named_sets(library, dir, entries, may_block)?;
    Ok(sets
        .into_iter()
        .map(|(title, found)| {
            found.unwrap_or_else(|e| {
                tracing::debug!(dir, title, "rendition set not offered: {e}");
                SetOffer {
                    title,
                    renditions: Vec::new(),
                    subtitles: Vec::new(),
                    refused: Some(refusal(e)),
                    protection: None,
                }
            })
        })
        .collect())
}

/// Why a set cannot be served, as the page and `/streams` say it.
fn refusal(e: SetError) -> String {
    match e {
        SetError::NotFound => "none of its renditions can be packaged".to_string(),
        e => e.to_string(),
    }
}

/// A set's title, and what it offers or why it cannot be served.
type NamedSet = (String, Result<SetOffer, SetError>);

/// Every set `dir` (whose listing is `entries`) names: each title with a rendition-named MP4 or
/// a sidecar, as it would be offered, or why it cannot be.
fn named_sets(
    library: &Library,
    dir: &str,
    entries: &[crate::library::Listed],
    may_block: bool,
) -> Result<Vec<NamedSet>, LibraryError> {
    let mut titles: Vec<&str> = entries
        .iter()
        .filter(|e| !e.is_dir)
        .filter_map(|e| {
            e.name.strip_suffix(".set.toml").or_else(|| {
                let title = title_of(&e.name)?;
                rendition_height(&e.name, title).map(|_| title)
            })
        })
        .collect();
    titles.sort_unstable();
    titles.dedup();
    let mut sets = Vec::new();
    for title in titles {
        let found = match find_set(library, dir, title, may_block) {
            Ok(set) => Ok(SetOffer {
                title: title.to_string(),
                renditions: set
                    .members
                    .iter()
                    .map(|m| (m.name.clone(), m.index().and_then(|i| i.resolution())))
                    .collect(),
                subtitles: set.subtitles.iter().map(|s| s.language.clone()).collect(),
                refused: None,
                protection: None,
            }),
            Err(SetError::Library(e)) => return Err(e),
            Err(e) => Err(e),
        };
        sets.push((title.to_string(), found));
    }
    Ok(sets)
}

/// A set `/streams` lists: its folder (no leading slash), its title, and what it offers or why
/// it cannot be served.
#[derive(Debug)]
pub struct ListedSet {
    /// Its folder in the library.
    pub dir: String,
    /// Its title.
    pub title: String,
    /// What it offers, or why it cannot be served (a sidecar refused, renditions that do not
    /// line up).
    pub offer: Result<SetOffer, String>,
}

/// The sets named among `files` (a library's `(path, size, tag)` list, as `/streams` has it),
/// served or not; blocks for the indexes.
pub fn sets_of_files(library: &Library, files: &[(String, u64, Option<String>)]) -> Vec<ListedSet> {
    let mut by_dir: std::collections::BTreeMap<&str, Vec<crate::library::Listed>> = Default::default();
    for (path, len, tag) in files {
        let path = path.trim_start_matches('/');
        let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
        by_dir.entry(dir).or_default().push(crate::library::Listed {
            name: name.to_string(),
            is_dir: false,
            len: *len,
            tag: tag.clone(),
        });
    }
    let mut out = Vec::new();
    for (dir, entries) in by_dir {
        match named_sets(library, dir, &entries, true) {
            Ok(sets) => out.extend(sets.into_iter().map(|(title, found)| ListedSet {
                dir: dir.to_string(),
                title,
                offer: found.map_err(refusal),
            })),
            Err(e) => tracing::warn!(path = dir, "cannot look for rendition sets: {e}"),
        }
    }
    out
}

fn read_sidecar(library: &Library, relative: &str, may_block: bool) -> Result<SetFile, SetError> {
    let text = read_text(library, relative, MAX_SIDECAR, may_block)?;
    parse_sidecar(&text).map_err(|e| SetError::Sidecar(format!("{relative}: {e}")))
}

/// A sidecar's text as a [`SetFile`]. Anyone who may upload may write one, and toml's parser
/// recurses once per inline table without a bound, on whatever thread asked (an admin or a
/// threads-engine connection thread has a 256 KiB stack): the nesting is measured first.
fn parse_sidecar(text: &str) -> Result<SetFile, String> {
    let limit = NestingLimit { max_depth: SIDECAR_DEPTH, max_len: MAX_SIDECAR as usize };
    check_nesting(text.as_bytes(), Syntax::Toml, limit)
        .map_err(|e| format!("refused before parsing: {e}"))?;
    toml::from_str(text).map_err(|e| e.to_string())
}

/// The text of the small file at `relative` (a sidecar, subtitles): at most `limit` bytes of
/// UTF-8, else [`SetError::Sidecar`] says why.
pub fn read_text(library: &Library, relative: &str, limit: u64, may_block: bool) -> Result<String, SetError> {
    let Some(version) = library.file(relative, may_block)? else { return Err(SetError::NotFound) };
    if version.len() > limit {
        return Err(SetError::Sidecar(format!("{relative} is larger than {limit} bytes")));
    }
    let mut bytes = vec![0u8; version.len() as usize];
    library.read_at(&version, 0, &mut bytes, may_block).map_err(|e| {
        if e.kind() == std::io::ErrorKind::WouldBlock {
            SetError::Library(LibraryError::WouldBlock)
        } else {
            SetError::Library(LibraryError::Io(e))
        }
    })?;
    String::from_utf8(bytes).map_err(|_| SetError::Sidecar(format!("{relative} is not UTF-8")))
}

/// Whether every member's segments start at the first member's times; else the message says
/// where they part.
fn check_alignment(members: &[Member]) -> Result<(), SetError> {
    let times = |m: &Member| m.index().map(|i| i.boundaries().collect::<Vec<f64>>()).unwrap_or_default();
    let first = &members[0];
    let reference = times(first);
    for other in &members[1..] {
        let theirs = times(other);
        let parts = reference.len() != theirs.len()
            || reference.iter().zip(&theirs).any(|(a, b)| (a - b).abs() > ALIGNMENT_TOLERANCE);
        if parts {
            let list = |t: &[f64]| t.iter().map(|s| format!("{s:.3}")).collect::<Vec<_>>().join(", ");
            let at = reference
                .iter()
                .zip(&theirs)
                .position(|(a, b)| (a - b).abs() > ALIGNMENT_TOLERANCE)
                .unwrap_or(reference.len().min(theirs.len()));
            return Err(SetError::Misaligned(format!(
                "the renditions' keyframes do not line up, so players cannot switch between them: \
                 segment {at} starts at {} s in {} and at {} s in {}\n\
                 {} segments start at (s): {}\n{} segments start at (s): {}",
                reference.get(at).map_or("(none)".into(), |t| format!("{t:.3}")),
                first.name,
                theirs.get(at).map_or("(none)".into(), |t| format!("{t:.3}")),
                other.name,
                first.name,
                list(&reference),
                other.name,
                list(&theirs),
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_convention() {
        assert_eq!(rendition_height("movie.720p.mp4", "movie"), Some(720));
        assert_eq!(rendition_height("movie.x.720p.mp4", "movie.x"), Some(720));
        for bad in
            ["movie.mp4", "movie.p.mp4", "movie.720.mp4", "movie.720p.mov", "film.720p.mp4", "movie720p.mp4"]
        {
            assert_eq!(rendition_height(bad, "movie"), None, "{bad}");
        }
        assert_eq!(title_of("movie.1080p.mp4"), Some("movie"));
        assert_eq!(title_of("movie.mp4"), Some("movie"));
        assert_eq!(title_of("my.movie.mp4"), Some("my.movie"));
        assert_eq!(title_of("movie.vtt"), None);
        assert_eq!(subtitle_language("movie.en.vtt", "movie"), Some("en"));
        assert_eq!(subtitle_language("movie.pt-BR.vtt", "movie"), Some("pt-BR"));
        assert_eq!(subtitle_language("movie.vtt", "movie"), None);
        assert_eq!(subtitle_language("movie.English.vtt", "movie"), None);
        assert_eq!(subtitle_language("other.en.vtt", "movie"), None);
    }

    #[test]
    fn sidecar_parses() {
        let set: SetFile =
            toml::from_str("files = [\"a.mp4\", \"b.mp4\"]\n[subtitles]\nen = \"a-english.vtt\"\n").unwrap();
        assert_eq!(set.files, ["a.mp4", "b.mp4"]);
        assert_eq!(set.subtitles.get("en").map(String::as_str), Some("a-english.vtt"));
        assert!(toml::from_str::<SetFile>("file = []").is_err());
    }

    #[test]
    fn sidecars_nested_at_any_depth_are_refused_with_a_reason_on_a_connection_threads_stack() {
        // The threads engine's connection threads (and the admin listener's) have 256 KiB.
        let parse_all = || {
            for depth in [1, SIDECAR_DEPTH - 1, SIDECAR_DEPTH, SIDECAR_DEPTH + 1, 10, 60, 1000, 100_000] {
                let forms = [
                    format!("files = []\nx = {}1{}", "{a = ".repeat(depth), "}".repeat(depth)),
                    format!("files = []\nx = {}1{}", "[".repeat(depth), "]".repeat(depth)),
                    format!("files = []\n{} = 1", vec!["a"; depth + 1].join(".")),
                    format!("files = []\n[{}]", vec!["a"; depth].join(".")),
                ];
                for text in forms {
                    let parsed = parse_sidecar(&text);
                    let e = parsed.expect_err("an unknown key is refused whatever its depth");
                    if depth > SIDECAR_DEPTH && text.len() <= MAX_SIDECAR as usize {
                        assert!(e.contains("nests more than 4 levels deep"), "{depth} deep: {e}");
                    } else if depth > SIDECAR_DEPTH {
                        assert!(e.contains("more than the 65536 allowed"), "{depth} deep: {e}");
                    } else {
                        assert!(e.contains("unknown field"), "{depth} deep, parsed and refused: {e}");
                    }
                }
            }
        };
        let thread = std::thread::Builder::new().stack_size(256 * 1024).spawn(parse_all).unwrap();
        thread.join().expect("every depth answered on a 256 KiB stack");
    }
}
