//! Validators and conditional requests (RFC 9110 §8.8, §13).
//!
//! This module owns the entity-tag sluice gives a file, how entity-tags and HTTP dates in
//! `If-Match`, `If-None-Match`, `If-Modified-Since`, `If-Unmodified-Since` and `If-Range` are read
//! and compared, and the order in which those preconditions are evaluated. It does not build
//! responses (that is [`super::file`]'s) and reads no clock: RFC 9110's rule of ignoring dates
//! in the future needs the current time, which a sans-I/O crate does not have.

use std::time::{SystemTime, UNIX_EPOCH};

use super::request::{Method, Request};

/// The strong entity-tag of a file, in nginx's form: the modification time in seconds since the
/// Unix epoch and the length, both in lowercase hex, quoted (`"5f5e1000-3e8"`).
///
/// Being nginx's form means a cache in front of nginx keeps its validators when sluice replaces
/// it. A modification time before the epoch counts as 0.
pub fn entity_tag(modified: SystemTime, len: u64) -> String {
    let secs = modified.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("\"{secs:x}-{len:x}\"")
}

/// What the server knows about the current representation to evaluate preconditions with.
#[derive(Debug, Clone, Copy)]
pub struct Validators<'a> {
    /// The entity-tag as the `ETag` header carries it (quotes included, `W/` if weak); empty
    /// when the representation has none, so that no tag matches it.
    pub etag: &'a str,
    /// The modification time, if known.
    pub last_modified: Option<SystemTime>,
}

/// The result of evaluating a request's preconditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// No precondition stops the request: answer it normally.
    Proceed,
    /// The client's copy is current: answer 304 Not Modified.
    NotModified,
    /// A precondition is false: answer 412 Precondition Failed.
    Failed,
}

/// Evaluates `req`'s preconditions against `v` in the order of RFC 9110 §13.2.2.
///
/// 1. `If-Match` (strong comparison, `*` matches any current representation): false → `Failed`.
/// 2. Otherwise `If-Unmodified-Since`: modified after the date → `Failed`.
/// 3. `If-None-Match` (weak comparison, `*` matches): a match → `NotModified` for GET and HEAD,
///    `Failed` for other methods.
/// 4. Otherwise, for GET and HEAD, `If-Modified-Since`: not modified after the date →
///    `NotModified`.
///
/// Dates compare at one-second resolution, as HTTP dates carry no more. A date that does not
/// parse, or a date condition on a representation without a modification time, is ignored as
/// the RFC requires. `If-Range` is not a precondition on the request; see
/// [`if_range_allows_partial`].
pub fn evaluate(req: &Request<'_>, v: &Validators<'_>) -> Precondition {
    let current_tag = EntityTag::parse_whole(v.etag.as_bytes());
    let modified_secs = v.last_modified.map(unix_seconds);
    let safe = matches!(req.method, Method::Get | Method::Head);

    if let Some(list) = req.header("If-Match") {
        if !list_matches(list, current_tag, Comparison::Strong) {
            return Precondition::Failed;
        }
    } else if let Some(date) = req.header("If-Unmodified-Since") {
        if let (Some(since), Some(modified)) = (parse_date_seconds(date), modified_secs) {
            if modified > since {
                return Precondition::Failed;
            }
        }
    }

    if let Some(list) = req.header("If-None-Match") {
        if list_matches(list, current_tag, Comparison::Weak) {
            return if safe { Precondition::NotModified } else { Precondition::Failed };
        }
    } else if safe {
        if let Some(date) = req.header("If-Modified-Since") {
            if let (Some(since), Some(modified)) = (parse_date_seconds(date), modified_secs) {
                if modified <= since {
                    return Precondition::NotModified;
                }
            }
        }
    }

    Precondition::Proceed
}

/// Whether an `If-Range` value lets a `Range` header apply (RFC 9110 §13.1.5); when it does not,
/// the whole representation is sent with 200.
///
/// A value ending in `"` is an entity-tag and must match the current one strongly (a weak tag
/// never matches). Anything else is read as an HTTP date and must equal the modification time
/// to the second, as nginx requires (RFC 9110 only allows an exact match, too). A value that is
/// neither, or a date when there is no modification time, does not allow a partial response.
pub fn if_range_allows_partial(if_range: &[u8], v: &Validators<'_>) -> bool {
    let value = trim_ows(if_range);
    if value.last() == Some(&b'"') {
        return match (EntityTag::parse_whole(value), EntityTag::parse_whole(v.etag.as_bytes())) {
            (Some(sent), Some(current)) => sent.matches(current, Comparison::Strong),
            _ => false,
        };
    }
    match (parse_date_seconds(value), v.last_modified) {
        (Some(date), Some(modified)) => date == unix_seconds(modified),
        _ => false,
    }
}

/// How two entity-tags are compared (RFC 9110 §8.8.3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Comparison {
    /// Both strong and character-for-character equal.
    Strong,
    /// Opaque tags equal, whether either is weak or not.
    Weak,
}

/// A parsed entity-tag: `[W/]"opaque"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct EntityTag<'a> {
    weak: bool,
    /// The characters between the quotes.
    opaque: &'a [u8],
}

impl<'a> EntityTag<'a> {
    /// Parses one entity-tag at the start of `bytes`; returns it and the bytes after it.
    fn parse_prefix(bytes: &'a [u8]) -> Option<(EntityTag<'a>, &'a [u8])> {
        let (weak, quoted) = match bytes.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, bytes),
        };
        let inner = quoted.strip_prefix(b"\"")?;
        let close = inner.iter().position(|&b| b == b'"')?;
        let opaque = &inner[..close];
        // etagc is %x21 / %x23-7E / obs-text: no controls, spaces or DEL inside the quotes.
        if opaque.iter().any(|&b| b <= b' ' || b == 0x7f) {
            return None;
        }
        Some((EntityTag { weak, opaque }, &inner[close + 1..]))
    }

    /// Parses a value that must be exactly one entity-tag (surrounding whitespace allowed).
    fn parse_whole(bytes: &'a [u8]) -> Option<EntityTag<'a>> {
        match EntityTag::parse_prefix(trim_ows(bytes))? {
            (tag, []) => Some(tag),
            _ => None,
        }
    }

    fn matches(self, other: EntityTag<'_>, comparison: Comparison) -> bool {
        let strong_enough = comparison == Comparison::Weak || (!self.weak && !other.weak);
        strong_enough && self.opaque == other.opaque
    }
}

/// Whether an `If-Match`/`If-None-Match` value (`*` or a comma-separated list of entity-tags)
/// matches the current representation's tag.
///
/// `*` matches any current representation, even one without a tag. A malformed element is
/// skipped rather than failing the list: it cannot match anything, and the others still can.
fn list_matches(list: &[u8], current: Option<EntityTag<'_>>, comparison: Comparison) -> bool {
    let list = trim_ows(list);
    if list == b"*" {
        return true;
    }
    let Some(current) = current else { return false };
    let mut rest = list;
    loop {
        // Empty elements and OWS around commas are allowed (RFC 9110 §5.6.1).
        let start = rest.iter().position(|&b| !matches!(b, b' ' | b'\t' | b',')).unwrap_or(rest.len());
        rest = &rest[start..];
        if rest.is_empty() {
            return false;
        }
        if let Some((tag, after)) = EntityTag::parse_prefix(rest) {
            let after = trim_start_ows(after);
            if after.is_empty() || after[0] == b',' {
                if tag.matches(current, comparison) {
                    return true;
                }
                rest = after;
                continue;
            }
        }
        // Malformed element: resume after the next comma.
        rest = match rest.iter().position(|&b| b == b',') {
            Some(comma) => &rest[comma + 1..],
            None => return false,
        };
    }
}

/// Seconds since the Unix epoch, rounded down (so earlier times stay earlier); HTTP dates have
/// one-second resolution, so comparisons happen at that resolution.
fn unix_seconds(time: SystemTime) -> i128 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i128::from(after.as_secs()),
        Err(before) => {
            let before = before.duration();
            -i128::from(before.as_secs()) - i128::from(before.subsec_nanos() > 0)
        }
    }
}

/// An HTTP date (any of the three forms RFC 9110 §5.6.7 accepts) as Unix seconds.
fn parse_date_seconds(value: &[u8]) -> Option<i128> {
    let text = std::str::from_utf8(trim_ows(value)).ok()?;
    httpdate::parse_http_date(text).ok().map(unix_seconds)
}

fn trim_start_ows(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|&b| b != b' ' && b != b'\t').unwrap_or(bytes.len());
    &bytes[start..]
}

fn trim_ows(bytes: &[u8]) -> &[u8] {
    let bytes = trim_start_ows(bytes);
    let end = bytes.iter().rposition(|&b| b != b' ' && b != b'\t').map_or(0, |i| i + 1);
    &bytes[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::request::Version;
    use std::time::Duration;

    /// 2020-09-13T12:26:40Z, with a fraction of a second the HTTP date cannot carry.
    fn modified() -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(1_600_000_000_250)
    }

    const ETAG: &str = "\"5f5e1000-3e8\"";
    const MODIFIED_DATE: &str = "Sun, 13 Sep 2020 12:26:40 GMT";
    const EARLIER_DATE: &str = "Sun, 13 Sep 2020 12:26:39 GMT";
    const LATER_DATE: &str = "Sun, 13 Sep 2020 12:26:41 GMT";

    fn validators() -> Validators<'static> {
        Validators { etag: ETAG, last_modified: Some(modified()) }
    }

    fn check(method: Method, fields: &[(&str, &str)]) -> Precondition {
        let headers: Vec<httparse::Header<'_>> =
            fields.iter().map(|(name, value)| httparse::Header { name, value: value.as_bytes() }).collect();
        let req = Request { method, target: "/f", version: Version::Http11, headers: &headers };
        evaluate(&req, &validators())
    }

    fn get(fields: &[(&str, &str)]) -> Precondition {
        check(Method::Get, fields)
    }

    #[test]
    fn entity_tag_is_nginx_form() {
        assert_eq!(entity_tag(modified(), 1000), ETAG);
        assert_eq!(entity_tag(UNIX_EPOCH, 0), "\"0-0\"");
        assert_eq!(entity_tag(UNIX_EPOCH - Duration::from_secs(5), 1), "\"0-1\"");
    }

    #[test]
    fn no_conditions_proceed() {
        assert_eq!(get(&[]), Precondition::Proceed);
        assert_eq!(get(&[("Accept", "*/*")]), Precondition::Proceed);
    }

    #[test]
    fn if_match_is_strong() {
        assert_eq!(get(&[("If-Match", ETAG)]), Precondition::Proceed);
        assert_eq!(get(&[("if-match", "\"other\", \"5f5e1000-3e8\"")]), Precondition::Proceed);
        assert_eq!(get(&[("If-Match", "*")]), Precondition::Proceed);
        assert_eq!(get(&[("If-Match", "W/\"5f5e1000-3e8\"")]), Precondition::Failed);
        assert_eq!(get(&[("If-Match", "\"other\"")]), Precondition::Failed);
        assert_eq!(get(&[("If-Match", "garbage")]), Precondition::Failed);
        assert_eq!(check(Method::Put, &[("If-Match", "\"other\"")]), Precondition::Failed);
    }

    #[test]
    fn if_unmodified_since() {
        assert_eq!(get(&[("If-Unmodified-Since", MODIFIED_DATE)]), Precondition::Proceed);
        assert_eq!(get(&[("If-Unmodified-Since", LATER_DATE)]), Precondition::Proceed);
        assert_eq!(get(&[("If-Unmodified-Since", EARLIER_DATE)]), Precondition::Failed);
        assert_eq!(get(&[("If-Unmodified-Since", "yesterday")]), Precondition::Proceed);
        // If-Match takes precedence: when present, If-Unmodified-Since is not evaluated.
        assert_eq!(get(&[("If-Match", ETAG), ("If-Unmodified-Since", EARLIER_DATE)]), Precondition::Proceed);
    }

    #[test]
    fn if_none_match_lists_weak_and_star() {
        assert_eq!(get(&[("If-None-Match", ETAG)]), Precondition::NotModified);
        assert_eq!(get(&[("If-None-Match", "W/\"5f5e1000-3e8\"")]), Precondition::NotModified);
        assert_eq!(get(&[("If-None-Match", "\"a\", W/\"b\",\"5f5e1000-3e8\"")]), Precondition::NotModified);
        assert_eq!(get(&[("If-None-Match", " , ,\"a\" ,\t\"5f5e1000-3e8\" , ")]), Precondition::NotModified);
        assert_eq!(get(&[("If-None-Match", "*")]), Precondition::NotModified);
        assert_eq!(check(Method::Head, &[("If-None-Match", ETAG)]), Precondition::NotModified);
        assert_eq!(get(&[("If-None-Match", "\"a\", W/\"b\"")]), Precondition::Proceed);
        assert_eq!(get(&[("If-None-Match", "\"5f5e1000-3e8")]), Precondition::Proceed);
        assert_eq!(get(&[("If-None-Match", "5f5e1000-3e8")]), Precondition::Proceed);
        // A malformed element does not hide a later match, nor does junk glued to a tag match.
        assert_eq!(get(&[("If-None-Match", "junk, \"5f5e1000-3e8\"")]), Precondition::NotModified);
        assert_eq!(get(&[("If-None-Match", "\"5f5e1000-3e8\"x")]), Precondition::Proceed);
        // A list containing `*` is not `*`.
        assert_eq!(get(&[("If-None-Match", "\"a\", *")]), Precondition::Proceed);
        // For methods that change state a match is a failed precondition.
        assert_eq!(check(Method::Post, &[("If-None-Match", "*")]), Precondition::Failed);
        assert_eq!(check(Method::Delete, &[("If-None-Match", ETAG)]), Precondition::Failed);
    }

    #[test]
    fn if_modified_since_equal_older_newer_garbage() {
        assert_eq!(get(&[("If-Modified-Since", MODIFIED_DATE)]), Precondition::NotModified);
        assert_eq!(get(&[("If-Modified-Since", LATER_DATE)]), Precondition::NotModified);
        assert_eq!(get(&[("If-Modified-Since", EARLIER_DATE)]), Precondition::Proceed);
        assert_eq!(get(&[("If-Modified-Since", "not a date")]), Precondition::Proceed);
        assert_eq!(get(&[("If-Modified-Since", "")]), Precondition::Proceed);
        // RFC 850 and asctime forms are HTTP dates too.
        assert_eq!(
            get(&[("If-Modified-Since", "Sunday, 13-Sep-20 12:26:40 GMT")]),
            Precondition::NotModified
        );
        assert_eq!(get(&[("If-Modified-Since", "Sun Sep 13 12:26:40 2020")]), Precondition::NotModified);
        // Only GET and HEAD.
        assert_eq!(check(Method::Post, &[("If-Modified-Since", MODIFIED_DATE)]), Precondition::Proceed);
        assert_eq!(check(Method::Head, &[("If-Modified-Since", MODIFIED_DATE)]), Precondition::NotModified);
    }

    #[test]
    fn if_none_match_takes_precedence_over_if_modified_since() {
        let fields = [("If-None-Match", "\"other\""), ("If-Modified-Since", MODIFIED_DATE)];
        assert_eq!(get(&fields), Precondition::Proceed);
        let fields = [("If-None-Match", ETAG), ("If-Modified-Since", EARLIER_DATE)];
        assert_eq!(get(&fields), Precondition::NotModified);
    }

    #[test]
    fn failed_if_match_wins_over_not_modified() {
        let fields = [("If-Match", "\"other\""), ("If-None-Match", ETAG)];
        assert_eq!(get(&fields), Precondition::Failed);
    }

    #[test]
    fn without_a_modification_time_dates_are_ignored() {
        let headers = [
            httparse::Header { name: "If-Modified-Since", value: MODIFIED_DATE.as_bytes() },
            httparse::Header { name: "If-Unmodified-Since", value: EARLIER_DATE.as_bytes() },
        ];
        let req = Request { method: Method::Get, target: "/", version: Version::Http11, headers: &headers };
        let v = Validators { etag: "", last_modified: None };
        assert_eq!(evaluate(&req, &v), Precondition::Proceed);
        // Without a tag only `*` matches.
        let headers = [httparse::Header { name: "If-None-Match", value: b"\"\"" }];
        let req = Request { method: Method::Get, target: "/", version: Version::Http11, headers: &headers };
        assert_eq!(evaluate(&req, &v), Precondition::Proceed);
    }

    #[test]
    fn if_range_with_etag_date_and_wrong_values() {
        let v = validators();
        assert!(if_range_allows_partial(ETAG.as_bytes(), &v));
        assert!(if_range_allows_partial(b" \"5f5e1000-3e8\" ", &v));
        assert!(!if_range_allows_partial(b"W/\"5f5e1000-3e8\"", &v));
        assert!(!if_range_allows_partial(b"\"5f5e1000-3e9\"", &v));
        assert!(!if_range_allows_partial(b"\"a\", \"5f5e1000-3e8\"", &v));
        assert!(if_range_allows_partial(MODIFIED_DATE.as_bytes(), &v));
        assert!(!if_range_allows_partial(EARLIER_DATE.as_bytes(), &v));
        assert!(!if_range_allows_partial(LATER_DATE.as_bytes(), &v));
        assert!(!if_range_allows_partial(b"wrong", &v));
        assert!(!if_range_allows_partial(b"", &v));
        assert!(!if_range_allows_partial(b"\"", &v));
        assert!(!if_range_allows_partial(b"\xff\xfe\"", &v));
        // A weak current tag never allows a range; nor does a date without a modification time.
        let weak = Validators { etag: "W/\"5f5e1000-3e8\"", last_modified: None };
        assert!(!if_range_allows_partial(b"W/\"5f5e1000-3e8\"", &weak));
        assert!(!if_range_allows_partial(b"\"5f5e1000-3e8\"", &weak));
        assert!(!if_range_allows_partial(MODIFIED_DATE.as_bytes(), &weak));
    }

    #[test]
    fn unix_seconds_round_down() {
        assert_eq!(unix_seconds(UNIX_EPOCH + Duration::from_millis(1500)), 1);
        assert_eq!(unix_seconds(UNIX_EPOCH - Duration::from_millis(1500)), -2);
        assert_eq!(unix_seconds(UNIX_EPOCH - Duration::from_secs(3)), -3);
    }

    #[test]
    fn adversarial_values_do_not_panic() {
        let values: [&[u8]; 12] = [
            b"",
            b"\"",
            b"W/",
            b"W/\"",
            b",,,,,,,,",
            b"*, *",
            b"\"\"\"\"\"",
            b"\xff\xfe\x00",
            b"W/W/\"a\"",
            b"Sun, 99 Sep 2020 99:99:99 GMT",
            b"Fri, 31 Dec 9999 23:59:59 GMT",
            b"Thu, 01 Jan 1970 00:00:00 GMT",
        ];
        let long = [b"\"a\",".repeat(5000), vec![b','; 10_000]];
        for value in values.iter().copied().chain(long.iter().map(Vec::as_slice)) {
            for name in ["If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since"] {
                let headers = [httparse::Header { name, value }];
                let req =
                    Request { method: Method::Get, target: "/", version: Version::Http11, headers: &headers };
                let _ = evaluate(&req, &validators());
            }
            let _ = if_range_allows_partial(value, &validators());
        }
    }
}
