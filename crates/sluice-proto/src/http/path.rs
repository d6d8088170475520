//! Request paths: percent-decoding once and normalising to a path relative to the library root.
//!
//! [`normalize`] is the first of two walls between a request and the rest of the file system: it
//! rejects what can never name a file under the root (`..` that climbs out, NUL, backslashes).
//! The second wall, symlinks that leave the root, can only be checked against the file system and
//! is the server's (it opens files with `RESOLVE_BENEATH`).

use percent_encoding::percent_decode_str;

/// Why a path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    /// Not a path at all (no leading `/`, invalid percent-encoding, not UTF-8, NUL, backslash).
    #[error(
        "the path is malformed (it must start with `/`, be valid UTF-8 once percent-decoded, and hold \
         no NUL or backslash)"
    )]
    Malformed,
    /// A `..` that would climb above the root.
    #[error("path leaves the root")]
    Escapes,
}

/// A decoded request path, relative to the root, with `.` and `..` resolved and no empty segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LibraryPath {
    relative: String,
    is_dir: bool,
}

impl LibraryPath {
    /// The path relative to the root, segments joined by `/`; empty for the root itself.
    pub fn relative(&self) -> &str {
        &self.relative
    }

    /// Whether the request named a directory (ended with `/`, or is the root).
    pub fn names_directory(&self) -> bool {
        self.is_dir
    }

    /// The segments of the path.
    pub fn segments(&self) -> impl Iterator<Item = &str> {
        self.relative.split('/').filter(|s| !s.is_empty())
    }
}

/// Percent-decodes a request path exactly once and normalises it.
///
/// Decoding once matters: `%252e%252e` decodes to the literal name `%2e%2e`, which is a
/// harmless file name, never a second chance at `..`.
pub fn normalize(raw: &str) -> Result<LibraryPath, PathError> {
    if !raw.starts_with('/') {
        return Err(PathError::Malformed);
    }
    if !valid_percent_encoding(raw) {
        return Err(PathError::Malformed);
    }
    let decoded = percent_decode_str(raw).decode_utf8().map_err(|_| PathError::Malformed)?;
    if decoded.bytes().any(|b| b == 0 || b == b'\\') {
        return Err(PathError::Malformed);
    }
    let mut segments: Vec<&str> = Vec::new();
    for segment in decoded.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                if segments.pop().is_none() {
                    return Err(PathError::Escapes);
                }
            }
            s => segments.push(s),
        }
    }
    let is_dir =
        decoded.ends_with('/') || segments.is_empty() || decoded.ends_with("/.") || decoded.ends_with("/..");
    Ok(LibraryPath { relative: segments.join("/"), is_dir })
}

fn valid_percent_encoding(raw: &str) -> bool {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            if i + 2 >= b.len() {
                return false;
            }
            if !(b[i + 1].is_ascii_hexdigit() && b[i + 2].is_ascii_hexdigit()) {
                return false;
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_paths() {
        assert_eq!(normalize("/").unwrap().relative(), "");
        assert!(normalize("/").unwrap().names_directory());
        assert_eq!(normalize("/a/b.mp4").unwrap().relative(), "a/b.mp4");
        assert_eq!(normalize("//a/./b.mp4").unwrap().relative(), "a/b.mp4");
        assert_eq!(normalize("/a/../b.mp4").unwrap().relative(), "b.mp4");
        assert_eq!(normalize("/my%20film.mp4").unwrap().relative(), "my film.mp4");
        assert!(normalize("/dir/").unwrap().names_directory());
    }

    #[test]
    fn traversal_is_refused() {
        for raw in
            ["/..", "/../etc/passwd", "/a/../../b", "/%2e%2e/x", "/%2E%2E/%2e%2e/x", "/a/%2e%2e/%2e%2e/x"]
        {
            assert_eq!(normalize(raw), Err(PathError::Escapes), "{raw}");
        }
    }

    #[test]
    fn decoding_happens_once() {
        assert_eq!(normalize("/%252e%252e/x").unwrap().relative(), "%2e%2e/x");
    }

    #[test]
    fn malformed_is_refused() {
        for raw in ["a", "", "/a%00b", "/a%", "/a%2", "/a%zz", "/a\\..\\b", "/%5c..%5cb", "/%ff"] {
            assert_eq!(normalize(raw), Err(PathError::Malformed), "{raw}");
        }
    }
}
