//! A file as an HTTP response: content types, validators, conditional requests and ranges put
//! together into the answer to GET or HEAD.
//!
//! This module owns the decision between 200, 206, 304, 412 and 416 for an already opened file,
//! and the header fields that go with each. It does not find or open files, check the method or
//! the path (the handler does), or add `Content-Length`, `Date`, `Server` and `Connection` (the
//! session does, from the body).

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::time::SystemTime;

use super::conditional::{entity_tag, evaluate, if_range_allows_partial, Precondition, Validators};
use super::range::{multipart_body, resolve_range, RangeOutcome};
use super::request::{Method, Request};
use super::response::{Body, Response, Status};
use super::HeaderValue;
use crate::conn::FileSlice;

/// What a response needs to know about a file besides its contents.
#[derive(Debug, Clone)]
pub struct FileMeta {
    /// Length in bytes.
    pub len: u64,
    /// Modification time, if the file system reports one; without it the response carries no
    /// `Last-Modified` and no `ETag`, and only `*` conditions can match.
    pub modified: Option<SystemTime>,
    /// The `Content-Type` value.
    pub content_type: &'static str,
    /// An entity tag given by a store (quoted), used instead of the one made from the
    /// modification time and length: edges reading one object store must agree on it, and a
    /// replacement within the same second must change it.
    pub etag: Option<String>,
}

/// Types `mime_guess` gets wrong or leaves vague for what sluice serves: streaming formats it
/// does not know or maps to legacy types, and text types that need a charset for browsers to
/// decode UTF-8. Compared case-insensitively with the extension.
const CONTENT_TYPE_OVERRIDES: &[(&str, &str)] = &[
    ("mp4", "video/mp4"),
    ("m4v", "video/mp4"),
    ("m4s", "video/iso.segment"),
    ("m4a", "audio/mp4"),
    ("m3u8", "application/vnd.apple.mpegurl"),
    ("mpd", "application/dash+xml"),
    ("ts", "video/mp2t"),
    ("webm", "video/webm"),
    ("mp3", "audio/mpeg"),
    ("aac", "audio/aac"),
    ("json", "application/json"),
    ("html", "text/html; charset=utf-8"),
    ("htm", "text/html; charset=utf-8"),
    ("css", "text/css; charset=utf-8"),
    ("js", "text/javascript; charset=utf-8"),
    ("mjs", "text/javascript; charset=utf-8"),
    ("txt", "text/plain; charset=utf-8"),
    ("vtt", "text/vtt; charset=utf-8"),
    ("svg", "image/svg+xml"),
];

/// The type to announce for the file at `path`, from its extension (case-insensitive).
///
/// Media and web types come from a table of overrides, everything else from `mime_guess`'s
/// first guess (a string of its static table, so nothing is allocated or leaked); files
/// without a known extension are `application/octet-stream`.
pub fn content_type_for(path: &str) -> &'static str {
    let Some(extension) = Path::new(path).extension().and_then(|e| e.to_str()) else {
        return "application/octet-stream";
    };
    CONTENT_TYPE_OVERRIDES
        .iter()
        .find(|(known, _)| known.eq_ignore_ascii_case(extension))
        .map(|(_, content_type)| *content_type)
        .or_else(|| mime_guess::from_ext(extension).first_raw())
        .unwrap_or("application/octet-stream")
}

/// The answer to a GET or HEAD for `file`.
///
/// In order: the validators (`ETag` in nginx's form, `Last-Modified`) are derived from `meta`;
/// the preconditions are evaluated (304 with only the validators, or 412); then a `Range` header
/// is honoured when the method is GET or HEAD and `If-Range`, if present, allows it: one range
/// is a 206 with `Content-Range`, several a 206 `multipart/byteranges` body with `boundary`, none
/// satisfiable a 416 with `Content-Range: bytes */LEN`, and anything else the whole file with 200.
/// `max_ranges` bounds the ranges served; 0 disables ranges, and `Accept-Ranges` is then left
/// out, as nginx leaves it out.
pub fn file_response(
    req: &Request<'_>,
    file: Arc<File>,
    meta: &FileMeta,
    max_ranges: usize,
    boundary: u64,
) -> Response {
    let etag = meta.etag.clone().or_else(|| meta.modified.map(|modified| entity_tag(modified, meta.len)));
    let validators = Validators { etag: etag.as_deref().unwrap_or(""), last_modified: meta.modified };

    let outcome = match evaluate(req, &validators) {
        Precondition::Proceed => requested_range(req, &validators, meta.len, max_ranges),
        Precondition::NotModified => {
            // nginx drops Content-Type and Accept-Ranges from a 304; the validators stay so the
            // client can refresh its stored ones (RFC 9110 §15.4.5).
            let mut response = Response::new(Status::NOT_MODIFIED);
            push_validators(&mut response.headers, meta, etag);
            return response;
        }
        Precondition::Failed => return Response::error(Status::PRECONDITION_FAILED),
    };

    let mut headers: Vec<(&'static str, HeaderValue)> = Vec::with_capacity(5);
    let (status, body) = match outcome {
        RangeOutcome::Full => {
            headers.push(("Content-Type", Cow::Borrowed(meta.content_type)));
            (Status::OK, whole_file(file, meta.len))
        }
        RangeOutcome::Single(range) => {
            headers.push(("Content-Type", Cow::Borrowed(meta.content_type)));
            headers.push((
                "Content-Range",
                Cow::Owned(format!("bytes {}-{}/{}", range.start, range.end, meta.len)),
            ));
            let slice = FileSlice { file, offset: range.start, len: range.len() };
            (Status::PARTIAL_CONTENT, Body::File(slice))
        }
        RangeOutcome::Multiple(ranges) => {
            let (content_type, parts) = multipart_body(&ranges, meta.len, meta.content_type, boundary, &file);
            headers.push(("Content-Type", Cow::Owned(content_type)));
            (Status::PARTIAL_CONTENT, Body::Parts(parts))
        }
        RangeOutcome::Unsatisfiable => {
            return Response::text(Status::RANGE_NOT_SATISFIABLE, "416 Range Not Satisfiable\n")
                .with_header("Content-Range", format!("bytes */{}", meta.len));
        }
    };
    push_validators(&mut headers, meta, etag);
    if max_ranges > 0 {
        headers.push(("Accept-Ranges", Cow::Borrowed("bytes")));
    }
    Response { status, headers, body }
}

/// What the `Range` header (if it applies) asks of a `len`-byte file.
fn requested_range(req: &Request<'_>, v: &Validators<'_>, len: u64, max_ranges: usize) -> RangeOutcome {
    // RFC 9110 §14.2: Range only has meaning for GET (HEAD mirrors GET's headers).
    if !matches!(req.method, Method::Get | Method::Head) {
        return RangeOutcome::Full;
    }
    let Some(range) = req.header("Range") else { return RangeOutcome::Full };
    if let Some(if_range) = req.header("If-Range") {
        if !if_range_allows_partial(if_range, v) {
            return RangeOutcome::Full;
        }
    }
    resolve_range(range, len, max_ranges)
}

/// The whole file; an empty file is an empty body, so engines never see an empty file slice.
fn whole_file(file: Arc<File>, len: u64) -> Body {
    if len == 0 {
        Body::Empty
    } else {
        Body::File(FileSlice { file, offset: 0, len })
    }
}

fn push_validators(headers: &mut Vec<(&'static str, HeaderValue)>, meta: &FileMeta, etag: Option<String>) {
    if let Some(modified) = meta.modified {
        headers.push(("Last-Modified", Cow::Owned(httpdate::fmt_http_date(modified))));
    }
    if let Some(etag) = etag {
        headers.push(("ETag", Cow::Owned(etag)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conn::Segment;
    use crate::http::request::Version;
    use std::io::{Read, Seek, SeekFrom, Write};
    use std::time::{Duration, UNIX_EPOCH};

    /// A 1000-byte file like nginx-tests' t1.html, in the system temporary directory, removed
    /// when dropped.
    struct TempFile {
        path: std::path::PathBuf,
        file: Arc<File>,
        meta: FileMeta,
    }

    impl TempFile {
        fn new(name: &str, contents: &[u8]) -> TempFile {
            let path = std::env::temp_dir().join(format!("sluice-proto-file-{}-{name}", std::process::id()));
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            file.write_all(contents).unwrap();
            let meta = FileMeta {
                len: contents.len() as u64,
                modified: Some(UNIX_EPOCH + Duration::from_secs(1_600_000_000)),
                content_type: "text/html; charset=utf-8",
                etag: None,
            };
            TempFile { path, file: Arc::new(file), meta }
        }

        fn nginx_t1(name: &str) -> TempFile {
            let contents: String = (0..100).map(|i| format!("X{i:03}XXXXXX")).collect();
            TempFile::new(name, contents.as_bytes())
        }

        fn respond(&self, method: Method, fields: &[(&str, &str)], max_ranges: usize) -> Response {
            let headers: Vec<httparse::Header<'_>> = fields
                .iter()
                .map(|(name, value)| httparse::Header { name, value: value.as_bytes() })
                .collect();
            let req = Request { method, target: "/t1.html", version: Version::Http11, headers: &headers };
            file_response(&req, Arc::clone(&self.file), &self.meta, max_ranges, 7)
        }

        fn get(&self, fields: &[(&str, &str)]) -> Response {
            self.respond(Method::Get, fields, 16)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    fn read_slice(slice: &FileSlice) -> Vec<u8> {
        let mut file = &*slice.file;
        file.seek(SeekFrom::Start(slice.offset)).unwrap();
        let mut buf = vec![0; slice.len as usize];
        file.read_exact(&mut buf).unwrap();
        buf
    }

    fn body_bytes(body: &Body) -> Vec<u8> {
        match body {
            Body::Empty => Vec::new(),
            Body::Bytes(b) => b.to_vec(),
            Body::File(slice) => read_slice(slice),
            Body::Parts(parts) => parts
                .iter()
                .flat_map(|part| match part {
                    Segment::Bytes(b) => b.clone(),
                    Segment::Static(b) => b.to_vec(),
                    Segment::File(slice) => read_slice(slice),
                })
                .collect(),
        }
    }

    const ETAG: &str = "\"5f5e1000-3e8\"";
    const LAST_MODIFIED: &str = "Sun, 13 Sep 2020 12:26:40 GMT";

    #[test]
    fn content_types() {
        let cases = [
            ("a/movie.mp4", "video/mp4"),
            ("seg-1.m4s", "video/iso.segment"),
            ("audio.M4A", "audio/mp4"),
            ("index.m3u8", "application/vnd.apple.mpegurl"),
            ("manifest.mpd", "application/dash+xml"),
            ("seg.ts", "video/mp2t"),
            ("clip.webm", "video/webm"),
            ("song.mp3", "audio/mpeg"),
            ("song.aac", "audio/aac"),
            ("data.json", "application/json"),
            ("index.html", "text/html; charset=utf-8"),
            ("INDEX.HTML", "text/html; charset=utf-8"),
            ("style.css", "text/css; charset=utf-8"),
            ("app.js", "text/javascript; charset=utf-8"),
            ("notes.txt", "text/plain; charset=utf-8"),
            ("subs.vtt", "text/vtt; charset=utf-8"),
            ("logo.svg", "image/svg+xml"),
            ("photo.png", "image/png"),
            ("photo.JPG", "image/jpeg"),
            ("archive.unknownext", "application/octet-stream"),
            ("README", "application/octet-stream"),
            (".hidden", "application/octet-stream"),
            ("dir.d/file", "application/octet-stream"),
            ("", "application/octet-stream"),
            ("trailing.", "application/octet-stream"),
        ];
        for (path, expected) in cases {
            assert_eq!(content_type_for(path), expected, "{path}");
        }
    }

    #[test]
    fn full_response_has_validators_and_accept_ranges() {
        let temp = TempFile::nginx_t1("full");
        let response = temp.get(&[]);
        assert_eq!(response.status, Status::OK);
        assert_eq!(response.header("Content-Type"), Some("text/html; charset=utf-8"));
        assert_eq!(response.header("ETag"), Some(ETAG));
        assert_eq!(response.header("Last-Modified"), Some(LAST_MODIFIED));
        assert_eq!(response.header("Accept-Ranges"), Some("bytes"));
        assert_eq!(response.header("Content-Length"), None, "the session adds Content-Length");
        assert!(matches!(&response.body, Body::File(s) if s.offset == 0 && s.len == 1000));
    }

    #[test]
    fn single_range() {
        let temp = TempFile::nginx_t1("single");
        let response = temp.get(&[("Range", "bytes=-10")]);
        assert_eq!(response.status, Status::PARTIAL_CONTENT);
        assert_eq!(response.header("Content-Range"), Some("bytes 990-999/1000"));
        assert_eq!(response.header("Content-Type"), Some("text/html; charset=utf-8"));
        assert_eq!(response.header("ETag"), Some(ETAG));
        assert_eq!(response.body.len(), 10);
        assert_eq!(body_bytes(&response.body), b"X099XXXXXX");

        let head = temp.respond(Method::Head, &[("Range", "bytes=0-8")], 16);
        assert_eq!(head.status, Status::PARTIAL_CONTENT);
        assert_eq!(head.body.len(), 9);
    }

    #[test]
    fn multiple_ranges() {
        let temp = TempFile::nginx_t1("multiple");
        let response = temp.get(&[("Range", "bytes=0-9, -10, 100000-, 10-19")]);
        assert_eq!(response.status, Status::PARTIAL_CONTENT);
        assert_eq!(
            response.header("Content-Type"),
            Some("multipart/byteranges; boundary=00000000000000000007")
        );
        assert_eq!(response.header("Content-Range"), None);
        let expected = "\r\n--00000000000000000007\r\nContent-Type: text/html; charset=utf-8\r\n\
            Content-Range: bytes 0-9/1000\r\n\r\nX000XXXXXX\
            \r\n--00000000000000000007\r\nContent-Type: text/html; charset=utf-8\r\n\
            Content-Range: bytes 990-999/1000\r\n\r\nX099XXXXXX\
            \r\n--00000000000000000007\r\nContent-Type: text/html; charset=utf-8\r\n\
            Content-Range: bytes 10-19/1000\r\n\r\nX001XXXXXX\
            \r\n--00000000000000000007--\r\n";
        assert_eq!(String::from_utf8(body_bytes(&response.body)).unwrap(), expected);
        assert_eq!(response.body.len(), expected.len() as u64);
    }

    #[test]
    fn unsatisfiable_range() {
        let temp = TempFile::nginx_t1("unsatisfiable");
        for range in ["bytes=100000-", "bytes=alpha", "bytes=10-alpha", "bytes=10", "bytes=10-11 12-"] {
            let response = temp.get(&[("Range", range)]);
            assert_eq!(response.status, Status::RANGE_NOT_SATISFIABLE, "{range}");
            assert_eq!(response.header("Content-Range"), Some("bytes */1000"));
            assert!(!response.body.is_empty());
        }
    }

    #[test]
    fn ranges_that_are_ignored() {
        let temp = TempFile::nginx_t1("ignored");
        assert_eq!(temp.get(&[("Range", "bytes=0-10001, 0-0")]).status, Status::OK);
        assert_eq!(temp.get(&[("Range", "lines=0-1")]).status, Status::OK);
        let three = [("Range", "bytes=0-9, -10, 10-19")];
        assert_eq!(temp.respond(Method::Get, &three, 2).status, Status::OK);
        // max_ranges 0: whole file, and no Accept-Ranges to promise otherwise.
        let disabled = temp.respond(Method::Get, &[("Range", "bytes=0-9")], 0);
        assert_eq!(disabled.status, Status::OK);
        assert_eq!(disabled.header("Accept-Ranges"), None);
        // Range means nothing to other methods.
        assert_eq!(temp.respond(Method::Post, &[("Range", "bytes=0-9")], 16).status, Status::OK);
    }

    #[test]
    fn if_range() {
        let temp = TempFile::nginx_t1("if-range");
        let partial = |if_range: &str| temp.get(&[("Range", "bytes=0-9"), ("If-Range", if_range)]).status;
        assert_eq!(partial(ETAG), Status::PARTIAL_CONTENT);
        assert_eq!(partial(LAST_MODIFIED), Status::PARTIAL_CONTENT);
        assert_eq!(partial("wrong"), Status::OK);
        assert_eq!(partial("\"wrong\""), Status::OK);
        assert_eq!(partial("W/\"5f5e1000-3e8\""), Status::OK);
        assert_eq!(partial("Sun, 13 Sep 2020 12:26:41 GMT"), Status::OK);
        // If-Range does not turn an unsatisfiable range into a 416 when it does not match.
        let response = temp.get(&[("Range", "bytes=5000-"), ("If-Range", "\"wrong\"")]);
        assert_eq!(response.status, Status::OK);
        assert_eq!(response.body.len(), 1000);
    }

    #[test]
    fn not_modified_keeps_only_validators() {
        let temp = TempFile::nginx_t1("not-modified");
        for fields in
            [[("If-None-Match", ETAG)], [("If-None-Match", "*")], [("If-Modified-Since", LAST_MODIFIED)]]
        {
            let response = temp.get(&fields);
            assert_eq!(response.status, Status::NOT_MODIFIED, "{fields:?}");
            assert_eq!(response.header("ETag"), Some(ETAG));
            assert_eq!(response.header("Last-Modified"), Some(LAST_MODIFIED));
            assert_eq!(response.header("Content-Type"), None);
            assert!(matches!(response.body, Body::Empty));
        }
        // Conditions are evaluated before the range.
        let response = temp.get(&[("If-None-Match", ETAG), ("Range", "bytes=0-9")]);
        assert_eq!(response.status, Status::NOT_MODIFIED);
    }

    #[test]
    fn precondition_failed() {
        let temp = TempFile::nginx_t1("failed");
        assert_eq!(temp.get(&[("If-Match", "\"other\"")]).status, Status::PRECONDITION_FAILED);
        let earlier = [("If-Unmodified-Since", "Sun, 13 Sep 2020 12:26:39 GMT")];
        assert_eq!(temp.get(&earlier).status, Status::PRECONDITION_FAILED);
        assert_eq!(temp.get(&[("If-Match", ETAG), ("Range", "bytes=0-0")]).status, Status::PARTIAL_CONTENT);
    }

    #[test]
    fn empty_file() {
        let temp = TempFile::new("empty", b"");
        let response = temp.get(&[]);
        assert_eq!(response.status, Status::OK);
        assert!(matches!(response.body, Body::Empty));
        let response = temp.get(&[("Range", "bytes=0-")]);
        assert_eq!(response.status, Status::RANGE_NOT_SATISFIABLE);
        assert_eq!(response.header("Content-Range"), Some("bytes */0"));
    }

    #[test]
    fn without_modification_time_there_are_no_validators() {
        let mut temp = TempFile::nginx_t1("no-mtime");
        temp.meta.modified = None;
        let response = temp.get(&[("If-None-Match", "\"0-3e8\"")]);
        assert_eq!(response.status, Status::OK);
        assert_eq!(response.header("ETag"), None);
        assert_eq!(response.header("Last-Modified"), None);
        assert_eq!(temp.get(&[("Range", "bytes=0-0"), ("If-Range", LAST_MODIFIED)]).status, Status::OK);
        assert_eq!(temp.get(&[("Range", "bytes=0-0")]).status, Status::PARTIAL_CONTENT);
    }
}
