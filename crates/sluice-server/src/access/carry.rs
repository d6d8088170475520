//! Carrying a URL's credentials (signature parameters, `?jwt=`) on to the URLs a playlist, a
//! manifest or a library page lists, so a player that opened one with credentials fetches the
//! rest with them.
//!
//! It does not own which parameters are credentials (see [`super::Access`]).

/// `uri` with `carry` appended to its query.
pub(super) fn with_query(uri: &str, carry: &str) -> String {
    let sep = if uri.contains('?') { '&' } else { '?' };
    format!("{uri}{sep}{carry}")
}

/// An HLS playlist with `carry` appended to every URI it lists (`URI="…"` attributes and URI
/// lines), so a player that fetched the playlist with credentials fetches the rest with them.
pub fn carry_into_m3u8(text: &str, carry: &str) -> String {
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.split_inclusive('\n') {
        let (body, end) = match line.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (line, ""),
        };
        if body.starts_with('#') {
            out.push_str(&carry_into_attributes(body, "URI=\"", carry, "\""));
        } else if body.trim().is_empty() {
            out.push_str(body);
        } else {
            out.push_str(&with_query(body, carry));
        }
        out.push_str(end);
    }
    out
}

/// A DASH manifest with `carry` appended to its segment templates and base URLs.
pub fn carry_into_mpd(text: &str, carry: &str) -> String {
    let escaped = carry.replace('&', "&amp;");
    let text = carry_into_attributes(text, "media=\"", &escaped, "\"");
    let text = carry_into_attributes(&text, "initialization=\"", &escaped, "\"");
    carry_into_attributes(&text, "<BaseURL>", &escaped, "</BaseURL>")
}

/// A library page with `carry` appended to its relative links and players' sources (`./…`), so
/// a page opened with a signed URL or a `?jwt=` plays and browses with it.
pub fn carry_into_page(html: &str, carry: &str) -> String {
    let escaped = carry.replace('&', "&amp;");
    let mut text = html.to_string();
    for attribute in ["href=\"./", "data-src=\"./", "data-hls=\"./", "data-dash=\"./"] {
        text = carry_into_attributes(&text, attribute, &escaped, "\"");
    }
    text
}

pub(super) fn carry_into_attributes(text: &str, open: &str, carry: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let value_start = start + open.len();
        let Some(len) = rest[value_start..].find(close) else { break };
        out.push_str(&rest[..value_start]);
        let value = &rest[value_start..value_start + len];
        let sep = if value.contains('?') {
            if carry.contains("&amp;") {
                "&amp;"
            } else {
                "&"
            }
        } else {
            "?"
        };
        out.push_str(&format!("{value}{sep}{carry}"));
        rest = &rest[value_start + len..];
    }
    out.push_str(rest);
    out
}
