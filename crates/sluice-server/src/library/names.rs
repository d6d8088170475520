//! How the library's names are read and written: which names are MP4 files (what RTSP, HLS and
//! the page treat as video) and which characters a name's path segment escapes in a link.
//!
//! Owns these two rules so that every route, the page and the admin listener apply the same
//! ones. It does not open files or list directories (the [`crate::library`] does).

use percent_encoding::{AsciiSet, CONTROLS};

/// Characters percent-encoded in links: everything that is not safe in a path segment.
pub const SEGMENT: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'?')
    .add(b'`')
    .add(b'{')
    .add(b'}')
    .add(b'/')
    .add(b'\\')
    .add(b'^')
    .add(b'|')
    .add(b'[')
    .add(b']')
    .add(b'\'')
    .add(b'&')
    .add(b':');

/// Whether RTSP serves this file (the MP4 family the demuxer reads).
pub fn is_mp4(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".mp4", ".m4v", ".mov"].iter().any(|ext| lower.ends_with(ext))
}

/// Whether this path names what a `[[protect]]` key is for: an MP4 title or a rendition set.
pub fn is_title(name: &str) -> bool {
    is_mp4(name) || is_set(name)
}

/// Whether this path names a rendition set (`movie.set`), whose manifests are packaged from the
/// files beside it.
pub fn is_set(name: &str) -> bool {
    name.strip_suffix(super::renditions::SET_SUFFIX)
        .is_some_and(|title| !title.is_empty() && !title.ends_with('/'))
}
