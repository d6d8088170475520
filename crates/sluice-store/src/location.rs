//! Where a store is: the one parser of `s3://BUCKET/PREFIX` locations (and of the local
//! directories every other location names).
//!
//! Every flag, config key and command that takes a store location parses it here, so a location
//! means the same everywhere and a bad one is refused with the same precise reason. This module
//! does not connect to anything: [`crate::open`] does.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// A bucket and a key prefix inside it: `s3://BUCKET` or `s3://BUCKET/PREFIX`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The prefix every key goes under, without leading or trailing `/` (empty: the bucket's root).
    pub prefix: String,
}

/// A store's location: a local directory or a bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// A directory on this machine.
    Local(PathBuf),
    /// A bucket of an S3-compatible object store.
    S3(S3Location),
}

/// Why a text is not a location.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LocationError {
    /// Not `s3://`: another scheme.
    #[error("`{0}`: only s3:// locations (or a local directory) are stores")]
    Scheme(String),
    /// `s3://` without a bucket.
    #[error("`{0}`: no bucket (s3://BUCKET/PREFIX)")]
    NoBucket(String),
    /// A bucket name S3 does not accept.
    #[error(
        "`{location}`: `{bucket}` is not a bucket name (3 to 63 lowercase letters, digits, `.` and `-`, \
         starting and ending with a letter or digit)"
    )]
    Bucket {
        /// The location.
        location: String,
        /// The bucket part.
        bucket: String,
    },
    /// A prefix that is not a key (an empty, `.` or `..` segment, a control character, ...).
    #[error("`{location}`: the prefix `{prefix}` is not a valid name: {reason}")]
    Prefix {
        /// The location.
        location: String,
        /// The prefix part.
        prefix: String,
        /// Why.
        reason: crate::KeyError,
    },
}

impl FromStr for S3Location {
    type Err = LocationError;

    fn from_str(text: &str) -> Result<S3Location, LocationError> {
        let rest = match text.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("s3") => rest,
            _ => return Err(LocationError::Scheme(text.to_string())),
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(LocationError::NoBucket(text.to_string()));
        }
        let edge_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
            && edge_ok(bucket.chars().next())
            && edge_ok(bucket.chars().last());
        if !valid_bucket {
            return Err(LocationError::Bucket { location: text.to_string(), bucket: bucket.to_string() });
        }
        let prefix = prefix.trim_matches('/');
        if !prefix.is_empty() {
            crate::Key::new(prefix).map_err(|reason| LocationError::Prefix {
                location: text.to_string(),
                prefix: prefix.to_string(),
                reason,
            })?;
        }
        Ok(S3Location { bucket: bucket.to_string(), prefix: prefix.to_string() })
    }
}

impl fmt::Display for S3Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix.as_str() {
            "" => write!(f, "s3://{}", self.bucket),
            prefix => write!(f, "s3://{}/{prefix}", self.bucket),
        }
    }
}

impl FromStr for Location {
    type Err = LocationError;

    /// `s3://…` is a bucket, any other `scheme://…` is refused, and the rest is a directory
    /// (`/srv/a://b` included: a scheme has no `/`).
    fn from_str(text: &str) -> Result<Location, LocationError> {
        let is_scheme = |s: &str| {
            s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        };
        match text.split_once("://") {
            Some((scheme, _)) if is_scheme(scheme) => text.parse().map(Location::S3),
            _ => Ok(Location::Local(PathBuf::from(text))),
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Local(dir) => write!(f, "{}", dir.display()),
            Location::S3(s3) => s3.fmt(f),
        }
    }
}

impl Location {
    /// Whether the location is an object store.
    pub fn is_remote(&self) -> bool {
        matches!(self, Location::S3(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s3_locations_parse_and_print_back() {
        let l: S3Location = "s3://media/lib/films/".parse().unwrap();
        assert_eq!((l.bucket.as_str(), l.prefix.as_str()), ("media", "lib/films"));
        assert_eq!(l.to_string(), "s3://media/lib/films");
        let l: S3Location = "s3://media".parse().unwrap();
        assert_eq!(
            (l.bucket.as_str(), l.prefix.as_str(), l.to_string().as_str()),
            ("media", "", "s3://media")
        );
        assert_eq!("s3://media/été 日本".parse::<S3Location>().unwrap().prefix, "été 日本");
        assert_eq!("/srv/media".parse::<Location>().unwrap(), Location::Local(PathBuf::from("/srv/media")));
        assert!("s3://m-1.x/p".parse::<Location>().unwrap().is_remote());
        assert_eq!("/srv/a://b".parse::<Location>().unwrap(), Location::Local(PathBuf::from("/srv/a://b")));
    }

    #[test]
    fn bad_locations_say_why() {
        let err = |text: &str| text.parse::<Location>().unwrap_err().to_string();
        assert!(err("ftp://host/x").contains("only s3://"), "{}", err("ftp://host/x"));
        assert!(err("s3://").contains("no bucket"));
        assert!(err("s3:///prefix").contains("no bucket"));
        assert!(err("s3://Media/x").contains("is not a bucket name"));
        assert!(err("s3://ab").contains("is not a bucket name"));
        assert!(err("s3://media/a//b").contains("empty segment"), "{}", err("s3://media/a//b"));
        assert!(err("s3://media/a/../b").contains("`..`"));
    }
}
