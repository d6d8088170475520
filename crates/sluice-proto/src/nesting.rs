//! How deeply a document nests, measured before a recursive parser sees it.
//!
//! The parsers sluice hands untrusted text to (TOML for rendition-set sidecars, JSON in tokens and
//! key sets, XML for DASH manifests the load generator fetches) recurse once per nesting level,
//! and not all of them bound it: toml's limit stops nested arrays but not nested inline tables,
//! and a 257-byte sidecar of tables 60 deep overflowed a 256 KiB connection thread's stack. This
//! module owns the one check every such parser's input passes first: a single pass, no recursion,
//! that counts nesting outside strings and comments and refuses a document deeper than a limit
//! (or longer than one) with a [`NestingError`] that says so. It over-counts in odd corners (a
//! float's dot after a dotted key, an array of tables' double bracket), never under-counts, so
//! what it lets through cannot nest deeper than the limit in the parser. It does not parse: a
//! document that passes may still be refused by its parser.

/// Levels allowed by default: far beyond what the documents sluice reads nest legitimately (a
/// JWT or JWKS 3, a DASH MPD 7, WebVTT cue tags a few), and shallow enough that serde_json's
/// recursion fits a connection thread's 256 KiB stack even in a debug build (about 2 KiB a
/// level there). A parser that takes more a level uses a tighter bound (TOML sidecars do).
pub const MAX_DEPTH: usize = 32;

/// The syntax a document is measured in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// JSON: `[` and `{` nest; `"` strings with `\` escapes.
    Json,
    /// TOML: `[` and `{` nest, and so does each dot of a dotted key (`a.b.c = 1` makes tables two
    /// deep); basic, literal and multi-line strings; `#` comments.
    Toml,
    /// XML: an element nests until its end tag (a self-closing one does not); quoted attribute
    /// values, comments, CDATA, processing instructions and declarations are skipped.
    Xml,
    /// WebVTT cue text: `<b>`, `<c.x>`, `<v Name>` nest until their end tag; a timestamp tag
    /// (`<00:01.000>`) does not. Tags hold no quoted values, so a `'` in a voice's name is text.
    WebVttCue,
}

/// The bounds a document must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NestingLimit {
    /// Deepest nesting allowed.
    pub max_depth: usize,
    /// Most bytes allowed.
    pub max_len: usize,
}

/// Why a document was refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NestingError {
    /// It is longer than allowed.
    #[error("it is {len} bytes, more than the {max} allowed")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// It nests deeper than allowed.
    #[error("it nests more than {max} levels deep (at byte {at})")]
    TooDeep {
        /// The limit.
        max: usize,
        /// Where the level past the limit opens.
        at: usize,
    },
}

/// Checks that `text`, read as `syntax`, keeps within `limit`.
pub fn check_nesting(text: &[u8], syntax: Syntax, limit: NestingLimit) -> Result<(), NestingError> {
    if text.len() > limit.max_len {
        return Err(NestingError::TooLong { len: text.len(), max: limit.max_len });
    }
    let max = limit.max_depth;
    match syntax {
        Syntax::Json => brackets(text, max, false),
        Syntax::Toml => brackets(text, max, true),
        Syntax::Xml => markup(text, max, true),
        Syntax::WebVttCue => markup(text, max, false),
    }
}

/// JSON and TOML: brackets, and for TOML the dots of dotted keys, outside strings and comments.
fn brackets(text: &[u8], max: usize, toml: bool) -> Result<(), NestingError> {
    // What each open bracket added to the depth: one, plus the dots of the key it is the value
    // of (`a.b = {` opens three levels). At most `max` entries: deeper is refused first.
    let mut opened: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    // Dots of the dotted key being read (TOML), until the value it names ends.
    let mut dots = 0usize;
    let mut i = 0;
    while i < text.len() {
        let b = text[i];
        match b {
            b'[' | b'{' => {
                let adds = 1 + dots;
                dots = 0;
                depth += adds;
                if depth > max {
                    return Err(NestingError::TooDeep { max, at: i });
                }
                opened.push(adds);
            }
            b']' | b'}' => {
                depth -= opened.pop().unwrap_or(0);
                dots = 0;
            }
            b',' | b'\n' => dots = 0,
            b'.' if toml => {
                dots += 1;
                if depth + dots > max {
                    return Err(NestingError::TooDeep { max, at: i });
                }
            }
            b'#' if toml => {
                i = end_of_line(text, i);
                continue;
            }
            b'"' => {
                i = if toml && text[i..].starts_with(b"\"\"\"") {
                    after_multiline(text, i + 3, b'"', true)
                } else {
                    after_string(text, i + 1, b'"', true, toml)
                };
                continue;
            }
            b'\'' if toml => {
                i = if text[i..].starts_with(b"'''") {
                    after_multiline(text, i + 3, b'\'', false)
                } else {
                    after_string(text, i + 1, b'\'', false, true)
                };
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    Ok(())
}

/// The index of the line break ending the line at `from` (or the end).
fn end_of_line(text: &[u8], from: usize) -> usize {
    text[from..].iter().position(|&b| b == b'\n').map_or(text.len(), |n| from + n)
}

/// The index after a one-line string starting at `from` (after its opening quote). A string
/// left open ends at the line break when `one_line` (the parser refuses it there, having nested
/// no further), else at the end.
fn after_string(text: &[u8], from: usize, quote: u8, escapes: bool, one_line: bool) -> usize {
    let mut i = from;
    while i < text.len() {
        match text[i] {
            b'\\' if escapes => i += 2,
            b'\n' if one_line => return i,
            b if b == quote => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

/// The index after a TOML multi-line string starting at `from` (after its three quotes): it
/// ends at the first run of three or more quotes (up to two more are part of its text).
fn after_multiline(text: &[u8], from: usize, quote: u8, escapes: bool) -> usize {
    let mut i = from;
    while i < text.len() {
        match text[i] {
            b'\\' if escapes => i += 2,
            b if b == quote => {
                let run = text[i..].iter().take_while(|&&c| c == quote).count();
                if run >= 3 {
                    return i + run;
                }
                i += run;
            }
            _ => i += 1,
        }
    }
    text.len()
}

/// XML and WebVTT cue text: elements, by their start and end tags.
fn markup(text: &[u8], max: usize, xml: bool) -> Result<(), NestingError> {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        if text[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &text[i..];
        if xml {
            let skip = [(&b"<!--"[..], &b"-->"[..]), (b"<![CDATA[", b"]]>"), (b"<?", b"?>"), (b"<!", b">")];
            if let Some((_, close)) = skip.iter().find(|(open, _)| rest.starts_with(open)) {
                i = find(text, i + 2, close).map_or(text.len(), |at| at + close.len());
                continue;
            }
        }
        let next = rest.get(1).copied().unwrap_or(0);
        if next == b'/' {
            depth = depth.saturating_sub(1);
            i += 2;
        } else if next.is_ascii_alphabetic() || next == b'_' || next == b':' || next >= 0x80 {
            let end = tag_end(text, i + 1, xml);
            let closed = text.get(end) == Some(&b'>');
            if !(xml && closed && text[end - 1] == b'/') {
                depth += 1;
                if depth > max {
                    return Err(NestingError::TooDeep { max, at: i });
                }
            }
            i = if closed { end + 1 } else { end };
        } else {
            // Not a tag (a WebVTT timestamp, or a stray `<` the parser refuses).
            i += 1;
        }
    }
    Ok(())
}

/// The index of the `>` ending the start tag whose name starts at `from`, or of a `<` that
/// comes first (measured as a tag of its own: never hidden), or the end; in XML a `>` or `<`
/// inside a quoted attribute value does not end it.
fn tag_end(text: &[u8], from: usize, quotes: bool) -> usize {
    let mut i = from;
    while i < text.len() {
        match text[i] {
            b'>' | b'<' => return i,
            q @ (b'"' | b'\'') if quotes => {
                i = text[i + 1..].iter().position(|&b| b == q).map_or(text.len(), |n| i + 1 + n + 1);
            }
            _ => i += 1,
        }
    }
    text.len()
}

/// Where `needle` first occurs in `text` at or after `from`.
fn find(text: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    text.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|n| from + n)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: NestingLimit = NestingLimit { max_depth: 4, max_len: 1 << 20 };

    fn depth_ok(text: &str, syntax: Syntax) -> bool {
        check_nesting(text.as_bytes(), syntax, LIMIT).is_ok()
    }

    #[test]
    fn json_nesting_counts_brackets_outside_strings() {
        assert!(depth_ok(r#"{"a":[{"b":[1]}]}"#, Syntax::Json));
        assert!(!depth_ok(r#"{"a":[{"b":[[1]]}]}"#, Syntax::Json));
        assert!(depth_ok(r#"{"a":"[[[[[[[[{{{{{"}"#, Syntax::Json), "brackets in a string");
        assert!(depth_ok(r#"{"a":"\"[[[[[[[["}"#, Syntax::Json), "an escaped quote does not end it");
        assert!(!depth_ok(r#"{"a":"\\",  "b":[[[[1]]]]}"#, Syntax::Json), "an escaped backslash does");
        assert!(depth_ok("[][][][][][][][][][]", Syntax::Json), "siblings do not nest");
        assert!(depth_ok("]]]]]]]][[[[", Syntax::Json), "stray closers do not hide openers");
        assert!(!depth_ok("]]]]]]]][[[[[", Syntax::Json));
    }

    #[test]
    fn toml_nesting_counts_inline_tables_arrays_and_dotted_keys() {
        assert!(depth_ok("files = [\"a.mp4\", \"b.mp4\"]\n[subtitles]\nen = \"a.vtt\"\n", Syntax::Toml));
        assert!(depth_ok("a = {b = {c = {d = 1}}}", Syntax::Toml));
        assert!(depth_ok("a = {b = {c = {d = {e = 1}}}}", Syntax::Toml));
        assert!(!depth_ok("a = {b = {c = {d = {e = {f = 1}}}}}", Syntax::Toml));
        assert!(depth_ok("a.b.c.d.e = 1", Syntax::Toml));
        assert!(!depth_ok("a.b.c.d.e.f = 1", Syntax::Toml), "a dotted key makes tables");
        assert!(!depth_ok("[a.b.c.d.e]\n", Syntax::Toml), "so does a table header");
        assert!(
            !depth_ok("a.b.c = {d = {e = {f = 1}}}", Syntax::Toml),
            "a dotted key's value nests below it"
        );
        assert!(depth_ok("a.b = 1\nc.d = 2\ne.f = 3\n", Syntax::Toml), "keys on separate lines");
        assert!(depth_ok("a = \"{{{{{{.....\"\nb = '[[[[[['", Syntax::Toml), "strings");
        assert!(depth_ok("# {{{{{{{{ a.b.c.d.e.f\nx = 1", Syntax::Toml), "a comment");
        assert!(depth_ok("a = \"\"\"\n{{{{{{\n\"\"\"\"\"", Syntax::Toml), "a multi-line string");
        assert!(!depth_ok("a = \"\"\"x\"\"\"\"\"\nb = [[[[[1]]]]]", Syntax::Toml), "ends at its quotes");
        assert!(depth_ok("a = '''\n[[[[[['''", Syntax::Toml));
        assert!(!depth_ok("a = \"open\nb = [[[[[1]]]]]", Syntax::Toml), "an open string ends at its line");
    }

    #[test]
    fn xml_nesting_counts_elements() {
        assert!(depth_ok("<?xml version=\"1.0\"?><a><b><c><d/></c></b></a>", Syntax::Xml));
        assert!(depth_ok("<a><b><c><d></d></c></b></a>", Syntax::Xml));
        assert!(depth_ok("<a><b><c><d><e/></d></c></b></a>", Syntax::Xml), "a self-closing element");
        assert!(!depth_ok("<a><b><c><d><e></e></d></c></b></a>", Syntax::Xml));
        assert!(!depth_ok("<a x=1 <b><c><d><e>", Syntax::Xml), "a `<` in a tag is not hidden");
        assert!(depth_ok("<a><!-- <b><c><d><e> --><![CDATA[<b><c><d><e>]]></a>", Syntax::Xml));
        assert!(depth_ok("<a x='>' y=\"<b><c><d><e>\"><b/><b/></a>", Syntax::Xml), "attribute values");
        assert!(depth_ok("<!DOCTYPE a><a>1 &lt; 2 < 3</a>", Syntax::Xml));
        assert!(!depth_ok("<a><b><c><d><e>", Syntax::Xml), "unclosed elements count");
    }

    #[test]
    fn webvtt_cue_nesting_counts_tags_but_not_timestamps() {
        assert!(depth_ok("<v O'Brien><b><i><u>hi</u></i></b></v>", Syntax::WebVttCue));
        assert!(!depth_ok("<v O'Brien><b><i><u><c>hi</c></u></i></b></v>", Syntax::WebVttCue));
        assert!(depth_ok("<b>a <00:00:01.000>b <00:00:02.000>c <00:00:03.000>d</b>", Syntax::WebVttCue));
        assert!(depth_ok("1 < 2 and 3 > 2", Syntax::WebVttCue));
    }

    #[test]
    fn length_is_bounded() {
        let limit = NestingLimit { max_depth: 4, max_len: 8 };
        assert_eq!(check_nesting(b"12345678", Syntax::Json, limit), Ok(()));
        assert_eq!(
            check_nesting(b"123456789", Syntax::Json, limit),
            Err(NestingError::TooLong { len: 9, max: 8 })
        );
    }

    #[test]
    fn every_depth_up_to_a_hundred_thousand_is_measured_without_recursion() {
        let limit = NestingLimit { max_depth: MAX_DEPTH, max_len: usize::MAX };
        for depth in [1, 10, 31, 32, 33, 60, 1000, 100_000] {
            let json = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
            let toml = format!("a = {}1{}", "{a = ".repeat(depth), "}".repeat(depth));
            let xml = format!("{}{}", "<a>".repeat(depth), "</a>".repeat(depth));
            let vtt = format!("{}x{}", "<b>".repeat(depth), "</b>".repeat(depth));
            for (text, syntax) in
                [(json, Syntax::Json), (toml, Syntax::Toml), (xml, Syntax::Xml), (vtt, Syntax::WebVttCue)]
            {
                let checked = check_nesting(text.as_bytes(), syntax, limit);
                if depth <= MAX_DEPTH {
                    assert_eq!(checked, Ok(()), "{syntax:?} {depth} deep");
                } else {
                    assert!(
                        matches!(checked, Err(NestingError::TooDeep { max: MAX_DEPTH, .. })),
                        "{syntax:?} {depth} deep: {checked:?}"
                    );
                }
            }
        }
    }
}
