//! Object keys: relative, `/`-separated names that can never leave the store's root.

use std::fmt;

/// A validated object key: non-empty segments separated by `/`, none of them `.` or `..`, no NUL,
/// no backslash, no leading or trailing `/`. The same key names a file under a local root and an
/// object under an S3 prefix.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Key(String);

/// Why a name is not a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// Empty, or an empty segment (`a//b`, a trailing `/`).
    #[error("empty name or segment")]
    Empty,
    /// A `.` or `..` segment, or a NUL or backslash.
    #[error("segment not allowed")]
    Forbidden,
    /// Longer than object stores accept (1024 bytes).
    #[error("name too long")]
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
        for segment in name.split('/') {
            if segment.is_empty() {
                return Err(KeyError::Empty);
            }
            if segment == "." || segment == ".." || segment.contains(['\0', '\\']) {
                return Err(KeyError::Forbidden);
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
        for bad in ["", "/a", "a/", "a//b", "../a", "a/../b", "./a", "a\\b", "a\0b"] {
            assert!(Key::new(bad).is_err(), "{bad:?}");
        }
        assert_eq!(Key::new(&"a".repeat(1025)), Err(KeyError::TooLong));
    }
}
