//! WebVTT subtitles cut into HLS segments: the cues of a sidecar `.vtt` that show during each
//! media segment, so an HLS subtitles playlist has the same segments as the video.
//!
//! This module owns reading a WebVTT file's blocks (the header, `STYLE` and `REGION` blocks,
//! cues with their timings; `NOTE`s dropped) and writing one segment: the header with an
//! `X-TIMESTAMP-MAP` saying the cue times are the media's presentation times (local 0 is media
//! time 0, as the packaged tracks start there), the style and region blocks, and every cue that
//! overlaps the segment's time range, unchanged (a cue spanning two segments is in both, as
//! RFC 8216 §3.5 allows; players drop the repeat). A cue whose tags nest deeper than
//! [`MAX_DEPTH`] is refused, as players build cue text into a tree. It does not read files or
//! decide segment times ([`super::index`] does).

use sluice_proto::nesting::{check_nesting, NestingLimit, Syntax, MAX_DEPTH};

/// How deep a cue's tags may nest; its length is the file's, which its reader bounds.
const CUE_NESTING: NestingLimit = NestingLimit { max_depth: MAX_DEPTH, max_len: usize::MAX };

/// A WebVTT file read into blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebVtt<'a> {
    /// `STYLE` and `REGION` blocks, kept in every segment.
    pub preamble: Vec<&'a str>,
    /// Cues in file order.
    pub cues: Vec<Cue<'a>>,
}

/// One cue: its times and the block's text (identifier, timing line and payload).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cue<'a> {
    /// Start, in milliseconds.
    pub start_ms: u64,
    /// End, in milliseconds.
    pub end_ms: u64,
    /// The whole block, as in the file.
    pub block: &'a str,
}

impl<'a> Cue<'a> {
    /// The cue's identifier: the line before its timing line, if any.
    pub fn identifier(&self) -> Option<&'a str> {
        let first = self.block.lines().next().unwrap_or("");
        (!first.contains("-->")).then_some(first.trim_end())
    }

    /// The cue settings after the end time (`line:0 align:start`), `""` without.
    pub fn settings(&self) -> &'a str {
        let timing = self.block.lines().find(|l| l.contains("-->")).unwrap_or("");
        let after_arrow = timing.split_once("-->").map_or("", |(_, rest)| rest.trim_start());
        // Past the end timestamp: the rest of the line is the settings.
        after_arrow.find(char::is_whitespace).map_or("", |at| after_arrow[at..].trim())
    }

    /// The cue's text: the lines after its timing line, joined with line feeds.
    pub fn payload(&self) -> String {
        let mut lines = self.block.lines().skip_while(|l| !l.contains("-->")).skip(1);
        let mut out = String::from(lines.next().unwrap_or(""));
        for line in lines {
            out.push('\n');
            out.push_str(line);
        }
        out
    }
}

/// Why a file is not WebVTT.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebVttError {
    /// It does not start with the `WEBVTT` signature.
    #[error("not WebVTT: the file does not start with WEBVTT")]
    NoSignature,
    /// A cue's timing line does not parse.
    #[error("cue timing {0:?} does not parse")]
    Timing(String),
    /// A cue's markup nests deeper than players are asked to follow.
    #[error("the cue at {0} ms: {1}")]
    Nesting(u64, sluice_proto::nesting::NestingError),
}

impl<'a> WebVtt<'a> {
    /// Reads `text` (a BOM and either line ending accepted).
    pub fn parse(text: &'a str) -> Result<WebVtt<'a>, WebVttError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let signature = text.lines().next().unwrap_or("");
        if !(signature == "WEBVTT" || signature.starts_with("WEBVTT ") || signature.starts_with("WEBVTT\t")) {
            return Err(WebVttError::NoSignature);
        }
        let mut preamble = Vec::new();
        let mut cues = Vec::new();
        // Blocks are separated by blank lines; the first is the header.
        for block in blocks(text).skip(1) {
            let mut lines = block.lines();
            let first = lines.next().unwrap_or("");
            if first.starts_with("NOTE") && !first.contains("-->") {
                continue;
            }
            if (first == "STYLE" || first == "REGION") && cues.is_empty() && !block.contains("-->") {
                preamble.push(block);
                continue;
            }
            let timing = if first.contains("-->") { first } else { lines.next().unwrap_or("") };
            if !timing.contains("-->") {
                continue; // Not a cue: ignored, as a WebVTT parser does.
            }
            let (start_ms, end_ms) = parse_timing(timing)?;
            // Cues are passed on unchanged, and players build their cue text's tags as a tree:
            // a cue of `<b>` tags 100,000 deep would be ours to refuse, not theirs to overflow on.
            // Each cue is measured alone, as its unclosed tags close at its end.
            check_nesting(block.as_bytes(), Syntax::WebVttCue, CUE_NESTING)
                .map_err(|e| WebVttError::Nesting(start_ms, e))?;
            cues.push(Cue { start_ms, end_ms, block });
        }
        Ok(WebVtt { preamble, cues })
    }

    /// The segment from `start` to `end` seconds of media time: the header, the preamble and
    /// the cues showing in that range.
    pub fn segment(&self, start: f64, end: f64) -> String {
        let (from, to) = ((start.max(0.0) * 1000.0).round() as u64, (end.max(0.0) * 1000.0).round() as u64);
        let mut out = String::from("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\n");
        for block in &self.preamble {
            out.push_str(block.trim_end());
            out.push_str("\n\n");
        }
        for cue in self.cues.iter().filter(|c| c.start_ms < to && c.end_ms > from) {
            out.push_str(cue.block.trim_end());
            out.push_str("\n\n");
        }
        out
    }
}

/// The blank-line separated blocks of `text`, each without its trailing line break.
fn blocks(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        // Skip blank lines.
        loop {
            let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
            if rest.is_empty() || !rest[..line_end].trim().is_empty() {
                break;
            }
            rest = &rest[line_end..];
        }
        if rest.is_empty() {
            return None;
        }
        let mut end = 0;
        loop {
            let line_end = rest[end..].find('\n').map_or(rest.len(), |i| end + i + 1);
            if rest[end..line_end].trim().is_empty() {
                break;
            }
            end = line_end;
            if end == rest.len() {
                break;
            }
        }
        let block = &rest[..end];
        rest = &rest[end..];
        Some(block)
    })
}

/// `00:01.000 --> 00:02.500 line:0` in milliseconds.
fn parse_timing(line: &str) -> Result<(u64, u64), WebVttError> {
    let bad = || WebVttError::Timing(line.chars().take(80).collect());
    let (start, rest) = line.split_once("-->").ok_or_else(bad)?;
    let end = rest.split_whitespace().next().ok_or_else(bad)?;
    Ok((timestamp_ms(start.trim()).ok_or_else(bad)?, timestamp_ms(end).ok_or_else(bad)?))
}

/// `hh:mm:ss.ttt` or `mm:ss.ttt` in milliseconds.
fn timestamp_ms(text: &str) -> Option<u64> {
    let (clock, millis) = text.split_once('.')?;
    if millis.len() != 3 || !millis.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let parts: Vec<&str> = clock.split(':').collect();
    let number = |s: &str, max_len: usize| -> Option<u64> {
        (!s.is_empty() && s.len() <= max_len && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse().ok())?
    };
    let (h, m, s) = match parts.as_slice() {
        [m, s] => (0, number(m, 2)?, number(s, 2)?),
        [h, m, s] => (number(h, 9)?, number(m, 2)?, number(s, 2)?),
        _ => return None,
    };
    if m > 59 || s > 59 {
        return None;
    }
    Some(((h * 60 + m) * 60 + s) * 1000 + millis.parse::<u64>().ok()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VTT: &str = "WEBVTT - a film\r\n\r\nSTYLE\r\n::cue { color: yellow }\r\n\r\nNOTE a remark\r\n\r\n1\r\n00:00.500 --> 00:02.000\r\nHello\r\n\r\n00:00:01.500 --> 00:00:04.250 line:0\r\nWorld\r\nagain\r\n\r\n";

    #[test]
    fn cues_go_to_every_segment_they_show_in() {
        let vtt = WebVtt::parse(VTT).unwrap();
        assert_eq!(vtt.preamble.len(), 1);
        let times: Vec<(u64, u64)> = vtt.cues.iter().map(|c| (c.start_ms, c.end_ms)).collect();
        assert_eq!(times, [(500, 2000), (1500, 4250)]);
        let first = vtt.segment(0.0, 1.0);
        assert!(first.starts_with("WEBVTT\nX-TIMESTAMP-MAP=MPEGTS:0,LOCAL:00:00:00.000\n\nSTYLE"), "{first}");
        assert!(
            first.contains("1\r\n00:00.500 --> 00:02.000\r\nHello") && !first.contains("World"),
            "{first}"
        );
        assert!(!first.contains("remark"));
        let second = vtt.segment(1.0, 2.0);
        assert!(second.contains("Hello") && second.contains("World\r\nagain"), "{second}");
        let last = vtt.segment(4.0, 6.0);
        assert!(!last.contains("Hello") && last.contains("World"), "{last}");
        assert!(!vtt.segment(4.25, 6.0).contains("World"), "a cue ends where the next segment starts");
    }

    #[test]
    fn cues_split_into_identifier_settings_and_payload() {
        let vtt = WebVtt::parse(VTT).unwrap();
        let (first, second) = (&vtt.cues[0], &vtt.cues[1]);
        assert_eq!(
            (first.identifier(), first.settings(), first.payload().as_str()),
            (Some("1"), "", "Hello")
        );
        assert_eq!(
            (second.identifier(), second.settings(), second.payload().as_str()),
            (None, "line:0", "World\nagain")
        );
        let vtt = WebVtt::parse("WEBVTT\n\nid x\n00:01.000 --> 00:02.000\talign:start  line:1\n").unwrap();
        assert_eq!(vtt.cues[0].identifier(), Some("id x"));
        assert_eq!(vtt.cues[0].settings(), "align:start  line:1");
        assert_eq!(vtt.cues[0].payload(), "");
    }

    #[test]
    fn what_is_not_webvtt_is_refused() {
        assert_eq!(WebVtt::parse("1\n00:00:01,000 --> 00:00:02,000\nSRT\n"), Err(WebVttError::NoSignature));
        assert!(matches!(WebVtt::parse("WEBVTT\n\n00:01 --> 00:02.000\nx\n"), Err(WebVttError::Timing(_))));
        assert!(matches!(
            WebVtt::parse("WEBVTT\n\n00:61.000 --> 00:62.000\nx\n"),
            Err(WebVttError::Timing(_))
        ));
        assert_eq!(WebVtt::parse("WEBVTT").unwrap().cues, []);
    }

    #[test]
    fn cues_nested_too_deep_are_refused_at_any_depth() {
        for depth in [1, 10, MAX_DEPTH, MAX_DEPTH + 1, 60, 1000, 100_000] {
            let cue = format!("{}x{}", "<b>".repeat(depth), "</b>".repeat(depth));
            let text = format!("WEBVTT\n\n00:01.000 --> 00:02.000\n{cue}\n");
            match WebVtt::parse(&text) {
                Ok(vtt) => assert!(depth <= MAX_DEPTH && vtt.cues.len() == 1, "{depth} deep"),
                Err(e) => {
                    assert!(depth > MAX_DEPTH, "{depth} deep: {e}");
                    assert!(e.to_string().contains("nests more than 32 levels deep"), "{e}");
                }
            }
        }
        let unclosed = "<i>".repeat(MAX_DEPTH);
        let many =
            format!("WEBVTT\n\n00:01.000 --> 00:02.000\n{unclosed}\n\n00:02.000 --> 00:03.000\n{unclosed}\n");
        assert_eq!(WebVtt::parse(&many).unwrap().cues.len(), 2, "each cue's tags close at its end");
    }
}
