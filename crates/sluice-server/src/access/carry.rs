//! Carrying a URL's credentials (signature parameters, `?jwt=`) on to the URLs a playlist, a
//! manifest or a library page lists, so a player that opened one with credentials fetches the
//! rest with them; escaped for each output: percent-encoded for an HLS playlist, escaped as
//! markup for the MPD's XML and the page's HTML.
//!
//! It does not own which parameters are credentials nor which of them are carried (see
//! [`super::Access`]: only the checked ones, already percent-encoded).

use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};

/// What cannot stand in an HLS `URI="…"` quoted-string (RFC 8216 §4.2: no `"`, CR or LF) or in a
/// URI line (RFC 3986): percent-encoded. `%` stays, so the carried query's own escapes survive.
const PLAYLIST_URI: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'<')
    .add(b'>')
    .add(b'\\')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// `uri` with `carry` appended to its query.
fn with_query(uri: &str, carry: &str) -> String {
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}{carry}")
}

/// An HLS playlist with `carry` appended to every URI it lists (`URI="…"` attributes and URI
/// lines), so a player that fetched the playlist with credentials fetches the rest with them.
pub fn carry_into_m3u8(text: &str, carry: &str) -> String {
    let carry: String = utf8_percent_encode(carry, PLAYLIST_URI).collect();
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        if body.starts_with('#') {
            // A `data:` URI (an encrypted title's KID) is no URL to carry credentials to.
            let carried =
                |uri: &str| if uri.starts_with("data:") { uri.to_string() } else { with_query(uri, &carry) };
            out.push_str(&carry_into_attributes(body, "URI=\"", "\"", carried));
        } else if body.trim().is_empty() {
            out.push_str(body);
        } else {
            out.push_str(&with_query(body, &carry));
        }
        out.push_str(end);
    }
    out
}

/// A DASH manifest with `carry` appended to its segment templates and base URLs, escaped as XML
/// (and a template's `$` doubled, ISO/IEC 23009-1 §5.3.9.4.4).
pub fn carry_into_mpd(text: &str, carry: &str) -> String {
    let escaped = sluice_proto::markup::escape(carry);
    let template = escaped.replace('$', "$$");
    let text = carry_into_markup(text, "media=\"", "\"", &template);
    let text = carry_into_markup(&text, "initialization=\"", "\"", &template);
    // The ClearKey licence URL of an encrypted title.
    let text = carry_into_markup(&text, "<dashif:Laurl>", "</dashif:Laurl>", &escaped);
    carry_into_markup(&text, "<BaseURL>", "</BaseURL>", &escaped)
}

/// A WebVTT thumbnails track with `carry` appended to each cue's tile URL (the line before its
/// `#xywh=` fragment), percent-encoded as in a playlist; cue timings and the header as they are.
pub fn carry_into_thumbnail_vtt(text: &str, carry: &str) -> String {
    let carry: String = utf8_percent_encode(carry, PLAYLIST_URI).collect();
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        match line.split_once("#xywh=") {
            Some((url, fragment)) if !line.contains("-->") => {
                out.push_str(&with_query(url, &carry));
                out.push_str("#xywh=");
                out.push_str(fragment);
            }
            _ => out.push_str(line),
        }
    }
    out
}

/// A library page with `carry` appended to its relative links and players' sources (`./…`), so
/// a page opened with a signed URL or a `?jwt=` plays and browses with it; escaped as HTML.
pub fn carry_into_page(html: &str, carry: &str) -> String {
    let escaped = sluice_proto::markup::escape(carry);
    let mut text = html.to_string();
    for attribute in [
        "href=\"./",
        "data-src=\"./",
        "data-hls=\"./",
        "data-dash=\"./",
        "data-licence=\"./",
        "data-thumbs=\"./",
    ] {
        text = carry_into_markup(&text, attribute, "\"", &escaped);
    }
    text
}

/// [`carry_into_attributes`] for a URL written in markup, where the query's `&` is `&amp;`:
/// `escaped` is the carried query already escaped for it.
fn carry_into_markup(text: &str, open: &str, close: &str, escaped: &str) -> String {
    carry_into_attributes(text, open, close, |uri| {
        let sep = if uri.contains('?') { "&amp;" } else { "?" };
        format!("{uri}{sep}{escaped}")
    })
}

/// `text` with every value between `open` and `close` replaced by `carried(value)`.
fn carry_into_attributes(text: &str, open: &str, close: &str, carried: impl Fn(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let value_start = start + open.len();
        let Some(len) = rest[value_start..].find(close) else { break };
        out.push_str(&rest[..value_start]);
        out.push_str(&carried(&rest[value_start..value_start + len]));
        rest = &rest[value_start + len..];
    }
    out.push_str(rest);
    out
}
