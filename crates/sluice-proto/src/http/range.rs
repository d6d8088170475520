//! Byte ranges (RFC 9110 §14): reading a `Range` header against a representation's length, and
//! laying out a `multipart/byteranges` body.
//!
//! This module owns what a `Range` header asks for, with nginx's range filter as the oracle for
//! every case the RFC leaves open (whitespace, invalid specs, overlapping ranges, limits), and the
//! byte layout of multipart bodies. It does not decide whether a range applies at all (method,
//! `If-Range`: [`super::file`] and [`super::conditional`] do) and reads no files: a body is a list
//! of [`Segment`]s that point into one.

use std::io::Write;
use std::sync::Arc;

use crate::conn::{FileSlice, Segment};

/// One satisfiable range of a representation: its first and last byte offsets, both inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ByteRange {
    /// Offset of the first byte.
    pub start: u64,
    /// Offset of the last byte (inclusive, as `Content-Range` writes it).
    pub end: u64,
}

impl ByteRange {
    /// How many bytes the range covers; 0 for a malformed range whose end precedes its start.
    pub fn len(&self) -> u64 {
        // Saturating because the fields are public: a hand-built `0..=u64::MAX` must not overflow.
        self.end.checked_sub(self.start).map_or(0, |span| span.saturating_add(1))
    }

    /// Whether the range covers no bytes (only a malformed hand-built range does).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a `Range` header resolves to for a representation of a given length.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeOutcome {
    /// Ignore the header and send the whole representation (200): not a `bytes` range, ranges
    /// disabled, too many ranges, or ranges adding up to more than the representation.
    Full,
    /// One range (206 with `Content-Range`).
    Single(ByteRange),
    /// Several ranges, in request order (206 `multipart/byteranges`).
    Multiple(Vec<ByteRange>),
    /// No range can be satisfied, or the header is malformed (416).
    Unsatisfiable,
}

/// The largest number a range may spell: nginx parses into `off_t`, so anything above
/// `i64::MAX` is refused there as it is here. It also keeps every sum below `u64::MAX`.
const MAX_OFFSET: u64 = i64::MAX as u64;

/// Resolves a `Range` header value against a representation of `len` bytes, allowing at most
/// `max_ranges` ranges (0 disables ranges).
///
/// Follows nginx's `ngx_http_range_parse`:
/// - the value must start with `bytes=` (any case) and be at least 7 bytes long, else `Full`;
/// - spaces are allowed after `=`, around `-` and around commas, but not tabs, not after the `-`
///   of a suffix range, and not as the whole of an element (`bytes=0-1,` is `Unsatisfiable`);
/// - any syntax error, or a number above `i64::MAX`, makes the whole header `Unsatisfiable`;
/// - a last position past the end is clamped; a range starting past the end, or whose last
///   position precedes its first (`5-2`), or the suffix `-0`, is skipped; if every range is
///   skipped the header is `Unsatisfiable`;
/// - more satisfiable ranges than `max_ranges`, or ranges adding up to more than `len` (many
///   overlapping ranges would multiply the response), give `Full`.
///
/// An empty representation: RFC 9110 §14.1.1 calls a suffix range with a non-zero length
/// satisfiable whatever the length (§14.1.3: "the entire representation is used"), so a header
/// with one is answered with the whole, empty representation (`Full`, 200), as nginx does; any
/// other range of nothing is `Unsatisfiable`. (nginx also sends the whole for `0-`; RFC 9110 has
/// no satisfiable first-byte position in zero bytes, so that stays 416 here.)
pub fn resolve_range(header: &[u8], len: u64, max_ranges: usize) -> RangeOutcome {
    if max_ranges == 0 {
        return RangeOutcome::Full;
    }
    // nginx checks the length first, so a bare "bytes=" is ignored rather than refused.
    if header.len() < 7 || !header[..6].eq_ignore_ascii_case(b"bytes=") {
        return RangeOutcome::Full;
    }
    if len == 0 {
        return resolve_for_empty(&header[6..]);
    }
    let mut cursor = Cursor { bytes: &header[6..], pos: 0 };
    match parse_ranges(&mut cursor, len, max_ranges) {
        Ok(outcome) => outcome,
        Err(Refusal::Ignore) => RangeOutcome::Full,
        Err(Refusal::Unsatisfiable) => RangeOutcome::Unsatisfiable,
    }
}

/// [`resolve_range`] for an empty representation: `Full` when the header is well formed and holds
/// a suffix range of non-zero length.
fn resolve_for_empty(ranges: &[u8]) -> RangeOutcome {
    // Syntax first, against a length that every well-formed range fits.
    let mut cursor = Cursor { bytes: ranges, pos: 0 };
    match parse_ranges(&mut cursor, i64::MAX as u64, usize::MAX) {
        Err(Refusal::Unsatisfiable) => return RangeOutcome::Unsatisfiable,
        Err(Refusal::Ignore) => return RangeOutcome::Full,
        Ok(_) => {}
    }
    let nonzero_suffix = ranges.split(|&b| b == b',').any(|element| {
        let element = element.trim_ascii();
        element.first() == Some(&b'-') && element[1..].iter().any(|&d| (b'1'..=b'9').contains(&d))
    });
    if nonzero_suffix {
        RangeOutcome::Full
    } else {
        RangeOutcome::Unsatisfiable
    }
}

/// Why parsing stopped before the end of the header.
enum Refusal {
    /// Send the whole representation.
    Ignore,
    /// Answer 416.
    Unsatisfiable,
}

/// A read position in the bytes after `bytes=`; `None` from [`Cursor::peek`] is the end, which
/// plays the part of the NUL terminator nginx's parser stops at.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<u8> {
        let byte = self.peek();
        if byte.is_some() {
            self.pos += 1;
        }
        byte
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.pos += 1;
        }
    }

    /// Whether the cursor is at the end of an element: a comma or the end of the header.
    fn at_separator(&self) -> bool {
        matches!(self.peek(), None | Some(b','))
    }

    /// One or more decimal digits, refusing values above [`MAX_OFFSET`].
    fn number(&mut self) -> Result<u64, Refusal> {
        if !matches!(self.peek(), Some(b'0'..=b'9')) {
            return Err(Refusal::Unsatisfiable);
        }
        let mut value: u64 = 0;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            value = value
                .checked_mul(10)
                .and_then(|v| v.checked_add(u64::from(digit - b'0')))
                .filter(|v| *v <= MAX_OFFSET)
                .ok_or(Refusal::Unsatisfiable)?;
            self.pos += 1;
        }
        Ok(value)
    }
}

/// The range-set after `bytes=`, for `len > 0`, element by element as nginx reads it.
fn parse_ranges(cursor: &mut Cursor<'_>, len: u64, max_ranges: usize) -> Result<RangeOutcome, Refusal> {
    // The first range is kept apart so that the common single-range request allocates nothing.
    let mut first: Option<ByteRange> = None;
    let mut rest: Vec<ByteRange> = Vec::new();
    let mut count: usize = 0;
    let mut total: u64 = 0;
    loop {
        cursor.skip_spaces();
        // `start..end_exclusive`, already clamped to the representation.
        let (start, end_exclusive) = if cursor.peek() == Some(b'-') {
            cursor.pos += 1;
            let suffix = cursor.number()?;
            cursor.skip_spaces();
            if !cursor.at_separator() {
                return Err(Refusal::Unsatisfiable);
            }
            // The last `suffix` bytes; `-0` gives the empty `len..len` and is skipped below.
            (len.saturating_sub(suffix), len)
        } else {
            let start = cursor.number()?;
            cursor.skip_spaces();
            if cursor.bump() != Some(b'-') {
                return Err(Refusal::Unsatisfiable);
            }
            cursor.skip_spaces();
            if cursor.at_separator() {
                (start, len)
            } else {
                let last = cursor.number()?;
                cursor.skip_spaces();
                if !cursor.at_separator() {
                    return Err(Refusal::Unsatisfiable);
                }
                // `last <= MAX_OFFSET < u64::MAX`, so the increment cannot overflow.
                (start, if last >= len { len } else { last + 1 })
            }
        };

        if start < end_exclusive {
            // nginx checks the running total for overflow before it counts the range.
            total = total
                .checked_add(end_exclusive - start)
                .filter(|t| *t <= MAX_OFFSET)
                .ok_or(Refusal::Unsatisfiable)?;
            count += 1;
            if count > max_ranges {
                return Err(Refusal::Ignore);
            }
            let range = ByteRange { start, end: end_exclusive - 1 };
            if first.is_none() {
                first = Some(range);
            } else {
                rest.push(range);
            }
        } else if start == 0 {
            // Only reachable for an empty representation in nginx, which sends it whole; kept so
            // the parser stays a faithful copy should the empty case above ever be relaxed.
            return Err(Refusal::Ignore);
        }

        if cursor.bump() != Some(b',') {
            break;
        }
    }

    let Some(first) = first else { return Ok(RangeOutcome::Unsatisfiable) };
    if total > len {
        return Ok(RangeOutcome::Full);
    }
    if rest.is_empty() {
        return Ok(RangeOutcome::Single(first));
    }
    rest.insert(0, first);
    Ok(RangeOutcome::Multiple(rest))
}

/// The `multipart/byteranges` body for `ranges` of a `total_len`-byte representation of type
/// `content_type`, laid out byte for byte as nginx does.
///
/// Returns the response's `Content-Type` value and the body's segments: each part is
/// `\r\n--BOUNDARY\r\nContent-Type: TYPE\r\nContent-Range: bytes S-E/LEN\r\n\r\n` followed by a
/// slice of the representation made of `parts` (see [`slice_segments`]), and the body ends with `\r\n--BOUNDARY--\r\n`. The boundary is `boundary` as
/// 20 zero-padded decimal digits; the `Content-Type` line is left out when `content_type` is
/// empty, as nginx leaves it out for a response without a type.
pub fn multipart_body(
    ranges: &[ByteRange],
    total_len: u64,
    content_type: &str,
    boundary: u64,
    parts: &[Segment],
) -> (String, Vec<Segment>) {
    let response_type = format!("multipart/byteranges; boundary={boundary:020}");
    let mut segments = Vec::with_capacity(ranges.len() * 2 + 1);
    // Writing into a Vec cannot fail, so the results of `write!` below carry no information.
    for range in ranges {
        let mut head = Vec::with_capacity(96 + content_type.len());
        let _ = write!(head, "\r\n--{boundary:020}\r\n");
        if !content_type.is_empty() {
            let _ = write!(head, "Content-Type: {content_type}\r\n");
        }
        let _ = write!(head, "Content-Range: bytes {}-{}/{total_len}\r\n\r\n", range.start, range.end);
        segments.push(Segment::Bytes(head));
        segments.extend(slice_segments(parts, range));
    }
    let mut closing = Vec::with_capacity(28);
    let _ = write!(closing, "\r\n--{boundary:020}--\r\n");
    segments.push(Segment::Bytes(closing));
    (response_type, segments)
}

/// The bytes `range` covers of the representation made of `parts` in order, as segments:
/// generated bytes are copied, file slices stay file slices (narrowed), so a range of a
/// generated-plus-file body still goes out with the engine's send strategy.
pub fn slice_segments(parts: &[Segment], range: &ByteRange) -> Vec<Segment> {
    let (mut skip, mut want) = (range.start, range.len());
    let mut out = Vec::new();
    for part in parts {
        if want == 0 {
            break;
        }
        let len = part.len();
        if skip >= len {
            skip -= len;
            continue;
        }
        let take = (len - skip).min(want);
        let (from, to) = (skip as usize, (skip + take) as usize);
        out.push(match part {
            Segment::Bytes(b) => Segment::Bytes(b[from..to].to_vec()),
            Segment::Static(b) => Segment::Static(&b[from..to]),
            Segment::Shared(b) => Segment::Shared(b.slice(from, to)),
            Segment::File(f) => {
                Segment::File(FileSlice { file: Arc::clone(&f.file), offset: f.offset + skip, len: take })
            }
        });
        skip = 0;
        want -= take;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::{Read, Seek, SeekFrom};

    fn whole(file: &Arc<File>, len: u64) -> Vec<Segment> {
        vec![Segment::File(FileSlice { file: Arc::clone(file), offset: 0, len })]
    }

    #[test]
    fn slices_of_generated_and_file_parts() {
        let file = Arc::new(tempfile_with(b"0123456789"));
        let parts = vec![
            Segment::Bytes(b"ab".to_vec()),
            Segment::File(FileSlice { file: Arc::clone(&file), offset: 2, len: 6 }),
            Segment::Static(b"yz"),
        ];
        let lens = |segs: &[Segment]| segs.iter().map(Segment::len).collect::<Vec<_>>();
        assert_eq!(lens(&slice_segments(&parts, &r(0, 9))), [2, 6, 2]);
        let mid = slice_segments(&parts, &r(1, 4));
        assert_eq!(lens(&mid), [1, 3]);
        assert!(matches!(&mid[0], Segment::Bytes(b) if b == b"b"));
        assert!(matches!(&mid[1], Segment::File(f) if f.offset == 2 && f.len == 3));
        let tail = slice_segments(&parts, &r(5, 8));
        assert!(matches!(&tail[0], Segment::File(f) if f.offset == 5 && f.len == 3));
        assert!(matches!(&tail[1], Segment::Static(b) if *b == b"y"));
        assert!(slice_segments(&parts, &r(10, 12)).is_empty());
    }

    fn tempfile_with(contents: &[u8]) -> File {
        let path = std::env::temp_dir().join(format!("sluice-proto-slices-{}", std::process::id()));
        std::fs::write(&path, contents).unwrap();
        let file = File::open(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        file
    }

    fn r(start: u64, end: u64) -> ByteRange {
        ByteRange { start, end }
    }

    fn resolve(header: &str) -> RangeOutcome {
        resolve_range(header.as_bytes(), 1000, 16)
    }

    // The cases of nginx-tests range.t, against its 1000-byte file.

    #[test]
    fn nginx_single_ranges() {
        assert_eq!(resolve("bytes=0-8"), RangeOutcome::Single(r(0, 8)));
        assert_eq!(resolve("bytes=-10"), RangeOutcome::Single(r(990, 999)));
        assert_eq!(resolve("bytes=990-"), RangeOutcome::Single(r(990, 999)));
        assert_eq!(resolve("bytes=990-1990"), RangeOutcome::Single(r(990, 999)));
        assert_eq!(resolve("bytes=0-10001"), RangeOutcome::Single(r(0, 999)));
    }

    #[test]
    fn nginx_multiple_ranges_keep_request_order() {
        let expected = RangeOutcome::Multiple(vec![r(0, 9), r(990, 999), r(10, 19)]);
        assert_eq!(resolve("bytes=0-9, -10, 10-19"), expected);
        assert_eq!(resolve("bytes=0-9, -10, 100000-, 10-19"), expected);
    }

    #[test]
    fn nginx_unsatisfiable() {
        for header in
            ["bytes=100000-", "bytes=alpha", "bytes=10-alpha", "bytes=10", "bytes=10-11 12-", "bytes=5-2"]
        {
            assert_eq!(resolve(header), RangeOutcome::Unsatisfiable, "{header}");
        }
    }

    #[test]
    fn nginx_overlapping_ranges_larger_than_the_file_are_ignored() {
        assert_eq!(resolve("bytes=0-10001, 0-0"), RangeOutcome::Full);
        // Exactly the file's length in total is still served.
        assert_eq!(resolve("bytes=0-499, 500-999"), RangeOutcome::Multiple(vec![r(0, 499), r(500, 999)]));
        assert_eq!(resolve("bytes=0-499, 499-999"), RangeOutcome::Full);
    }

    #[test]
    fn nginx_max_ranges() {
        // range.t's t3.html has max_ranges 2.
        let two = |h: &str| resolve_range(h.as_bytes(), 1000, 2);
        assert_eq!(two("bytes=0-9, -10"), RangeOutcome::Multiple(vec![r(0, 9), r(990, 999)]));
        assert_eq!(two("bytes=0-9, -10, 10000-"), RangeOutcome::Multiple(vec![r(0, 9), r(990, 999)]));
        assert_eq!(two("bytes=0-9, -10, 10-19"), RangeOutcome::Full);
        assert_eq!(resolve_range(b"bytes=0-9", 1000, 0), RangeOutcome::Full);
        assert_eq!(resolve_range(b"bytes=0-9", 1000, 1), RangeOutcome::Single(r(0, 9)));
        // Like nginx, the limit is hit before a later syntax error is seen.
        assert_eq!(resolve_range(b"bytes=0-1, 2-3, junk", 1000, 1), RangeOutcome::Full);
        assert_eq!(resolve_range(b"bytes=0-1, junk, 2-3", 1000, 1), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn other_units_and_short_values_are_ignored() {
        for header in ["items=0-9", "bytes=", "bytes", "", "Bytes", "bytes 0-9", "bytes:0-9"] {
            assert_eq!(resolve(header), RangeOutcome::Full, "{header:?}");
        }
        assert_eq!(resolve("BYTES=0-9"), RangeOutcome::Single(r(0, 9)));
    }

    #[test]
    fn suffix_ranges() {
        assert_eq!(resolve("bytes=-0"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=-0, 0-0"), RangeOutcome::Single(r(0, 0)));
        assert_eq!(resolve("bytes=-1"), RangeOutcome::Single(r(999, 999)));
        assert_eq!(resolve("bytes=-1000"), RangeOutcome::Single(r(0, 999)));
        assert_eq!(resolve("bytes=-5000"), RangeOutcome::Single(r(0, 999)));
        // No space between the dash of a suffix and its length.
        assert_eq!(resolve("bytes=- 10"), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn whitespace_as_nginx_allows_it() {
        assert_eq!(resolve("bytes=  0 - 9 ,  20 -  "), RangeOutcome::Multiple(vec![r(0, 9), r(20, 999)]));
        assert_eq!(resolve("bytes=0-9,-10"), RangeOutcome::Multiple(vec![r(0, 9), r(990, 999)]));
        // Tabs are not spaces to nginx; an empty element is an error.
        assert_eq!(resolve("bytes=\t0-9"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=0-9,"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=0-9, "), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=,0-9"), RangeOutcome::Unsatisfiable);
    }

    #[test]
    fn huge_numbers_are_unsatisfiable() {
        assert_eq!(resolve("bytes=0-99999999999999999999"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=99999999999999999999-"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=-99999999999999999999"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=0-18446744073709551615"), RangeOutcome::Unsatisfiable);
        // i64::MAX itself is a number nginx accepts, and clamps.
        assert_eq!(resolve("bytes=0-9223372036854775807"), RangeOutcome::Single(r(0, 999)));
        assert_eq!(resolve("bytes=0-9223372036854775808"), RangeOutcome::Unsatisfiable);
        assert_eq!(resolve("bytes=00000000000000000000000000000005-6"), RangeOutcome::Single(r(5, 6)));
    }

    #[test]
    fn empty_representation_answers_a_nonzero_suffix_whole_and_refuses_the_rest() {
        for header in
            ["bytes=0-", "bytes=0-0", "bytes=5-10", "bytes=-0", "bytes=-00", "bytes=junk", "bytes=-1,x"]
        {
            assert_eq!(resolve_range(header.as_bytes(), 0, 16), RangeOutcome::Unsatisfiable, "{header}");
        }
        for header in ["bytes=-1", "bytes=-5", "bytes= -10", "bytes=0-0, -1", "bytes=-010"] {
            assert_eq!(resolve_range(header.as_bytes(), 0, 16), RangeOutcome::Full, "{header}");
        }
        assert_eq!(resolve_range(b"items=0-", 0, 16), RangeOutcome::Full);
    }

    #[test]
    fn byte_range_len() {
        assert_eq!(r(0, 0).len(), 1);
        assert_eq!(r(990, 999).len(), 10);
        assert_eq!(r(0, u64::MAX).len(), u64::MAX);
        assert_eq!(r(5, 2).len(), 0);
        assert!(r(5, 2).is_empty());
    }

    #[test]
    fn no_input_panics_and_every_range_fits() {
        let mut headers: Vec<Vec<u8>> = [
            "",
            "bytes=",
            "bytes=-",
            "bytes=--1",
            "bytes=-1-",
            "bytes=1--",
            "bytes=,",
            "bytes=,,,,,,",
            "bytes= ",
            "bytes=0-0,,0-0",
            "bytes=18446744073709551615-18446744073709551615",
            "bytes=18446744073709551616-",
            "bytes=9223372036854775807-",
            "bytes=-9223372036854775807",
            "bytes=-18446744073709551615",
            "bytes=0-0-0",
            "bytes=0 0-1",
            "bytes=1-0",
            "bytes=0x10-0x20",
            "bytes=+1-2",
            "bytes=1-+2",
            "bytes=\u{0}",
            "bytes=0-1\u{0}2-3",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        headers.push(b"bytes=\xff\xfe-\x80".to_vec());
        headers.push(b"bytes=0-\xc3\x28".to_vec());
        headers.push([b"bytes=".as_slice(), &[b','; 10_000]].concat());
        headers.push([b"bytes=".as_slice(), &[b'9'; 10_000]].concat());
        headers.push([b"bytes=-".as_slice(), &[b'9'; 10_000]].concat());
        let overlapping = format!("bytes={}", vec!["0-"; 10_000].join(","));
        headers.push(overlapping.clone().into_bytes());
        headers.push(format!("bytes={}", vec!["-1"; 10_000].join(", ")).into_bytes());

        for header in &headers {
            for len in [0, 1, 2, 1000, MAX_OFFSET, u64::MAX] {
                for max_ranges in [0, 1, 2, 16, usize::MAX] {
                    match resolve_range(header, len, max_ranges) {
                        RangeOutcome::Full | RangeOutcome::Unsatisfiable => {}
                        RangeOutcome::Single(range) => assert!(range.start <= range.end && range.end < len),
                        RangeOutcome::Multiple(ranges) => {
                            assert!(ranges.len() >= 2 && ranges.len() <= max_ranges);
                            let total: u64 = ranges.iter().map(ByteRange::len).sum();
                            assert!(total <= len);
                            assert!(ranges.iter().all(|r| r.start <= r.end && r.end < len));
                        }
                    }
                }
            }
        }

        // Many overlapping ranges never multiply the response, whatever the limit.
        assert_eq!(resolve_range(overlapping.as_bytes(), 1000, 16), RangeOutcome::Full);
        assert_eq!(resolve_range(overlapping.as_bytes(), 1000, usize::MAX), RangeOutcome::Full);
        // 10,000 one-byte suffixes add up to more than a 1000-byte file.
        let suffixes = format!("bytes={}", vec!["-1"; 10_000].join(","));
        assert_eq!(resolve_range(suffixes.as_bytes(), 1000, usize::MAX), RangeOutcome::Full);
    }

    /// A file in the system temporary directory, removed when dropped.
    struct TempFile {
        path: std::path::PathBuf,
        file: Arc<File>,
    }

    impl TempFile {
        fn with_contents(name: &str, contents: &[u8]) -> TempFile {
            let path = std::env::temp_dir().join(format!("sluice-proto-range-{}-{name}", std::process::id()));
            let mut file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            file.write_all(contents).unwrap();
            TempFile { path, file: Arc::new(file) }
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// The bytes the segments stand for, reading file slices back from disk.
    fn materialise(segments: &[Segment]) -> Vec<u8> {
        let mut out = Vec::new();
        for segment in segments {
            match segment {
                Segment::File(slice) => {
                    let mut file = &*slice.file;
                    file.seek(SeekFrom::Start(slice.offset)).unwrap();
                    let mut buf = vec![0; slice.len as usize];
                    file.read_exact(&mut buf).unwrap();
                    out.extend_from_slice(&buf);
                }
                other => out.extend_from_slice(other.in_memory().expect("in memory")),
            }
        }
        out
    }

    #[test]
    fn multipart_layout_matches_nginx() {
        let contents = b"abcdefghijklmnopqrstuvwxyz";
        let temp = TempFile::with_contents("multipart", contents);
        let ranges = [r(0, 1), r(24, 25), r(10, 10)];
        let (content_type, segments) = multipart_body(&ranges, 26, "text/plain", 42, &whole(&temp.file, 26));
        assert_eq!(content_type, "multipart/byteranges; boundary=00000000000000000042");
        assert_eq!(segments.len(), 7);
        assert!(matches!(&segments[1], Segment::File(s) if s.offset == 0 && s.len == 2));
        assert!(matches!(&segments[3], Segment::File(s) if s.offset == 24 && s.len == 2));

        let expected: &[u8] = b"\r\n--00000000000000000042\r\n\
            Content-Type: text/plain\r\n\
            Content-Range: bytes 0-1/26\r\n\r\n\
            ab\
            \r\n--00000000000000000042\r\n\
            Content-Type: text/plain\r\n\
            Content-Range: bytes 24-25/26\r\n\r\n\
            yz\
            \r\n--00000000000000000042\r\n\
            Content-Type: text/plain\r\n\
            Content-Range: bytes 10-10/26\r\n\r\n\
            k\
            \r\n--00000000000000000042--\r\n";
        let body = materialise(&segments);
        assert_eq!(String::from_utf8_lossy(&body), String::from_utf8_lossy(expected));
        // Content-Length is the sum of the segments, so it must be the length of these bytes.
        let content_length: u64 = segments.iter().map(Segment::len).sum();
        assert_eq!(content_length, expected.len() as u64);
    }

    #[test]
    fn multipart_without_a_type_and_with_the_largest_boundary() {
        let temp = TempFile::with_contents("multipart-untyped", b"0123456789");
        let (content_type, segments) =
            multipart_body(&[r(0, 0), r(9, 9)], 10, "", u64::MAX, &whole(&temp.file, 10));
        assert_eq!(content_type, "multipart/byteranges; boundary=18446744073709551615");
        let expected: &[u8] = b"\r\n--18446744073709551615\r\nContent-Range: bytes 0-0/10\r\n\r\n0\
            \r\n--18446744073709551615\r\nContent-Range: bytes 9-9/10\r\n\r\n9\
            \r\n--18446744073709551615--\r\n";
        assert_eq!(materialise(&segments), expected);
        assert_eq!(segments.iter().map(Segment::len).sum::<u64>(), expected.len() as u64);
    }
}
