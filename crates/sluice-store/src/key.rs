//! Object keys: relative, `/`-separated names that can never leave the store's root, and the
//! names sluice keeps for itself beside them.
//!
//! A key is the name the user gave, as UTF-8, once: the same string names a file under a local
//! root and, byte for byte, an object under an S3 prefix (the S3 backend leaves its own URL
//! encoding to `object_store`). This module does not map keys to paths or objects; the backends do.

use std::fmt;

/// Segments starting with this are sluice's own files (temporary uploads, stored gzip forms): no
/// client may upload, list or request them.
pub const RESERVED_PREFIX: &str = ".sluice-";

/// Before a file's name, the name of its stored gzip form beside it (`dir/.sluice-gzip.x.html`
/// for `dir/x.html`).
pub(crate) const GZIP_FORM_PREFIX: &str = ".sluice-gzip.";

/// The name under which a local root keeps the gzip form of `relative` (a key or a library path):
/// a hidden name in the same directory, in the reserved namespace, so it is never a name a client
/// can upload, list or request. The app's gzip route and the store both use this, so they agree.
pub fn gzip_form_name(relative: &str) -> String {
    match relative.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/{GZIP_FORM_PREFIX}{name}"),
        None => format!("{GZIP_FORM_PREFIX}{relative}"),
    }
}

/// Before a file's name, the names of objects sluice derives from it (thumbnail tiles) beside
/// it (`dir/.sluice-derived.film.mp4.OBJECT` for `dir/film.mp4`).
const DERIVED_PREFIX: &str = ".sluice-derived.";

/// The key under which the object `object` derived from the file `relative` (a key or a
/// library path) is kept: a hidden name in the file's directory, in the reserved namespace, so
/// it is never a name a client can upload, list or request, on a local root and in an object
/// store alike. `object` is sluice's own (a version fingerprint and a resource name), one
/// segment; `None` when the result is not a valid key otherwise (too long, say).
pub fn derived_key(relative: &str, object: &str) -> Option<Key> {
    if object.is_empty() || object.contains('/') {
        return None;
    }
    let name = match relative.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/{DERIVED_PREFIX}{name}.{object}"),
        None => format!("{DERIVED_PREFIX}{relative}.{object}"),
    };
    // Valid but for the reserved segment this adds: the original must be a key itself.
    Key::new(relative).ok()?;
    (name.len() <= 1024 && !name.chars().any(char::is_control)).then_some(Key(name))
}

/// The name a directory listing shows for the file `file_name`: itself, the original's name for a
/// stored gzip form, and `None` for hidden files (a leading `.`: sluice's own and the user's).
pub fn listed_name(file_name: &str) -> Option<&str> {
    match file_name.strip_prefix(GZIP_FORM_PREFIX) {
        Some(original) if !original.is_empty() && !original.starts_with('.') => Some(original),
        _ if file_name.starts_with('.') => None,
        _ => Some(file_name),
    }
}

/// Whether any segment of `relative` is in the reserved namespace ([`RESERVED_PREFIX`]).
pub fn is_reserved(relative: &str) -> bool {
    relative.split('/').any(|segment| segment.starts_with(RESERVED_PREFIX))
}

/// A validated object key: non-empty segments separated by `/`, none of them `.` or `..` nor in
/// the reserved namespace, no control character, no backslash, no leading or trailing `/`. The
/// same key names a file under a local root and an object under an S3 prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(String);

/// Why a name is not a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Empty, or an empty segment (`a//b`, a trailing `/`).
    #[error("the name is empty or has an empty segment")]
    Empty,
    /// A `.` or `..` segment, or a backslash.
    #[error("the name has a `.` or `..` segment or a backslash")]
    Forbidden,
    /// A control character (NUL, newline, tab, DEL, ...).
    #[error("the name contains a control character")]
    Control,
    /// A segment in sluice's reserved namespace.
    #[error("names starting with `{RESERVED_PREFIX}` are reserved for sluice's own files")]
    Reserved,
    /// Longer than object stores accept (1024 bytes).
    #[error("the name is longer than 1024 bytes")]
    TooLong,
}

impl Key {
    /// Validates `name` as a key.
    pub fn new(name: &str) -> Result<Key, KeyError> {
        if name.len() > 1024 {
            return Err(KeyError::TooLong);
        }
        if name.is_empty() {
            return Err(KeyError::Empty);
        }
        if name.chars().any(char::is_control) {
            return Err(KeyError::Control);
        }
        for segment in name.split('/') {
            if segment.is_empty() {
                return Err(KeyError::Empty);
            }
            if segment == "." || segment == ".." || segment.contains('\\') {
                return Err(KeyError::Forbidden);
            }
            if segment.starts_with(RESERVED_PREFIX) {
                return Err(KeyError::Reserved);
            }
        }
        Ok(Key(name.to_string()))
    }

    /// The key as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_stay_beneath_the_root() {
        assert_eq!(Key::new("a/b.mp4").unwrap().as_str(), "a/b.mp4");
        for bad in ["", "/a", "a/", "a//b", "../a", "a/../b", "./a", "a\\b"] {
            assert!(Key::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Key::new(&"a".repeat(1025)), Err(KeyError::TooLong));
    }

    #[test]
    fn names_are_the_users_bytes_without_control_characters() {
        for good in
            ["my clip – été 日本.mp4", "a+b=c&d.mp4", "100%.mp4", "caf%C3%A9.mp4", "x.html.gz", ".hidden"]
        {
            assert_eq!(Key::new(good).unwrap().as_str(), good);
        }
        for bad in ["a\0b", "a\nb", "tab\there", "del\u{7f}", "c1\u{85}"] {
            assert_eq!(Key::new(bad), Err(KeyError::Control), "{bad:?}");
        }
    }

    #[test]
    fn derived_objects_are_reserved_hidden_names_beside_the_original() {
        let key = derived_key("a/film.mp4", "v1.tile-1.jpg").unwrap();
        assert_eq!(key.as_str(), "a/.sluice-derived.film.mp4.v1.tile-1.jpg");
        assert!(is_reserved(key.as_str()) && listed_name(".sluice-derived.film.mp4.x").is_none());
        assert_eq!(Key::new(key.as_str()), Err(KeyError::Reserved), "no client may upload it");
        assert!(derived_key("film.mp4", "a/b").is_none() && derived_key("../x", "a").is_none());
    }

    #[test]
    fn gzip_forms_are_reserved_hidden_names_beside_the_original() {
        assert_eq!(gzip_form_name("x.html"), ".sluice-gzip.x.html");
        assert_eq!(gzip_form_name("a/b/x.html"), "a/b/.sluice-gzip.x.html");
        assert!(is_reserved(&gzip_form_name("a/x.html")));
        assert_eq!(Key::new(&gzip_form_name("a/x.html")), Err(KeyError::Reserved));
        assert_eq!(Key::new("a/.sluice-upload-1-2/x"), Err(KeyError::Reserved));
        assert!(!is_reserved("a/x.html.gz") && !is_reserved(".sluicefile"));
        assert_eq!(listed_name(".sluice-gzip.x.html"), Some("x.html"));
        assert_eq!(listed_name("x.html.gz"), Some("x.html.gz"));
        assert_eq!(listed_name(".sluice-upload-1-2"), None);
        assert_eq!(listed_name(".hidden"), None);
    }
}
