//! The signalling of a protected title in its manifests, added to the text [`crate::hls`] writes.
//!
//! Owns the lines and elements: in the MPD, per video and audio `AdaptationSet`, a
//! `ContentProtection` for the scheme (`urn:mpeg:dash:mp4protection:2011` with
//! `cenc:default_KID`), one for the W3C common system with its `cenc:pssh`, one for ClearKey with
//! the licence URL (`dashif:Laurl`, which dash.js and Shaka read) and one per configured system
//! with its `pssh`; in HLS, `EXT-X-KEY` after each media playlist's `EXT-X-MAP` (so the init
//! segment stays clear, RFC 8216 §4.3.2.4) and `EXT-X-SESSION-KEY` in the master. CENC tracks are
//! `SAMPLE-AES` (`cbcs`) or `SAMPLE-AES-CTR` (`cenc`) with `KEYFORMAT="org.w3.clearkey"` and the
//! KID as a `data:` URI, which is how hls.js asks EME for the key; AES-128 segments name the key
//! URL sluice serves. It does not decide URLs (the caller passes them, escaped for nothing: this
//! module escapes).

use base64::Engine as _;

use super::boxes::{pssh_boxes, system_pssh};
use super::{uuid, Scheme, TitleKey, CLEARKEY_SYSTEM_ID, COMMON_SYSTEM_ID};

/// The `EXT-X-KEY` (or `EXT-X-SESSION-KEY`, per `tag`) attributes of a title's CENC tracks.
pub fn sample_aes_key(tag: &str, title: &TitleKey) -> String {
    let method = match title.scheme {
        Scheme::Cbcs => "SAMPLE-AES",
        Scheme::Cenc => "SAMPLE-AES-CTR",
    };
    let kid = base64::engine::general_purpose::STANDARD.encode(title.kid);
    format!(
        "#{tag}:METHOD={method},URI=\"data:text/plain;base64,{kid}\",KEYFORMAT=\"org.w3.clearkey\",KEYFORMATVERSIONS=\"1\""
    )
}

/// The `EXT-X-KEY` (or `EXT-X-SESSION-KEY`) of AES-128 segments whose key is at `uri`
/// (relative to the playlist).
pub fn aes128_key(tag: &str, uri: &str) -> String {
    format!("#{tag}:METHOD=AES-128,URI=\"{}\"", uri.replace(['"', '\n', '\r'], ""))
}

/// A media playlist with `key` (an `EXT-X-KEY` line) after its `EXT-X-MAP`, and a version of 5
/// at least (`KEYFORMAT`).
pub fn keyed_media_playlist(text: &str, key: &str) -> String {
    insert_after(text, |line| line.starts_with("#EXT-X-MAP"), key)
}

/// A master playlist with `session_key` (an `EXT-X-SESSION-KEY` line) after its header.
pub fn keyed_master_playlist(text: &str, session_key: &str) -> String {
    insert_after(text, |line| line == "#EXTM3U" || line.starts_with("#EXT-X-VERSION"), session_key)
}

/// `text` with `line` inserted after the last of the first run of lines `after` accepts (or
/// after the first line when none does), and `EXT-X-VERSION` raised to 5.
fn insert_after(text: &str, after: impl Fn(&str) -> bool, line: &str) -> String {
    let mut out = String::with_capacity(text.len() + line.len() + 1);
    let mut inserted = false;
    let mut lines = text.lines().peekable();
    while let Some(current) = lines.next() {
        match current.strip_prefix("#EXT-X-VERSION:").map(str::parse::<u32>) {
            Some(Ok(v)) if v < 5 => out.push_str("#EXT-X-VERSION:5"),
            _ => out.push_str(current),
        }
        out.push('\n');
        let next_also = lines.peek().is_some_and(|next| after(next));
        if !inserted && after(current) && !next_also {
            out.push_str(line);
            out.push('\n');
            inserted = true;
        }
    }
    if !inserted {
        // No anchor: after the first line (`#EXTM3U`).
        let (first, rest) = out.split_once('\n').unwrap_or((&out, ""));
        return format!("{first}\n{line}\n{rest}");
    }
    out
}

/// The `ContentProtection` elements of one `AdaptationSet` of `title`, whose ClearKey licence
/// is at `licence_url`.
pub fn content_protection(title: &TitleKey, licence_url: &str) -> String {
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let common = &pssh_boxes(title)[0];
    let mut out = format!(
        "   <ContentProtection schemeIdUri=\"urn:mpeg:dash:mp4protection:2011\" value=\"{}\" cenc:default_KID=\"{}\"/>\n",
        title.scheme.name(),
        uuid(&title.kid)
    );
    // No `cenc:pssh` here: dash.js asks a ClearKey CDM with `keyids` init data, which it makes
    // from the default KID unless a pssh is given (and a pssh is no `keyids`).
    out.push_str(&format!(
        "   <ContentProtection schemeIdUri=\"urn:uuid:{}\" value=\"ClearKey1.0\">\n    <dashif:Laurl>{}</dashif:Laurl>\n   </ContentProtection>\n",
        uuid(&CLEARKEY_SYSTEM_ID),
        escape(licence_url),
    ));
    out.push_str(&format!(
        "   <ContentProtection schemeIdUri=\"urn:uuid:{}\">\n    <cenc:pssh>{}</cenc:pssh>\n   </ContentProtection>\n",
        uuid(&COMMON_SYSTEM_ID),
        b64(common)
    ));
    for system in &title.systems {
        // A CPIX document's `ContentProtectionData` is the element's content as its DRM vendor
        // wants it (it carries the `cenc:pssh` itself); else the `pssh` box; a system with
        // neither (FairPlay) is HLS-only.
        let content = match (&system.dash, system_pssh(system)) {
            (Some(xml), _) => xml.trim().to_string(),
            (None, Some(pssh)) => format!("<cenc:pssh>{}</cenc:pssh>", b64(&pssh)),
            (None, None) => continue,
        };
        out.push_str(&format!(
            "   <ContentProtection schemeIdUri=\"urn:uuid:{}\">\n    {content}\n   </ContentProtection>\n",
            uuid(&system.system_id),
        ));
    }
    out
}

/// The lines configured systems add to a media playlist (`master` false) or to the multivariant
/// playlist after sluice's own key line: each system's `EXT-X-KEY` or `EXT-X-SESSION-KEY`, which
/// players pick by `KEYFORMAT`.
pub fn system_key_lines(title: &TitleKey, master: bool) -> String {
    let lines = title.systems.iter().flat_map(|s| if master { &s.hls_master } else { &s.hls_media });
    lines.map(|line| format!("\n{}", line.trim())).collect()
}

/// An MPD (as `hls::mpd` writes it) with the `cenc` and `dashif` namespaces declared and
/// [`content_protection`] first in every video and audio `AdaptationSet` (where ISO/IEC 23009-1's
/// schema puts it).
pub fn protected_mpd(mpd: &str, title: &TitleKey, licence_url: &str) -> String {
    let elements = content_protection(title, licence_url);
    let mut out = String::with_capacity(mpd.len() + 4 * elements.len());
    for line in mpd.split_inclusive('\n') {
        if let Some(rest) = line.strip_prefix("<MPD ") {
            out.push_str("<MPD xmlns:cenc=\"urn:mpeg:cenc:2013\" xmlns:dashif=\"https://dashif.org/CPS\" ");
            out.push_str(rest);
            continue;
        }
        out.push_str(line);
        let media = line.contains("contentType=\"video\"") || line.contains("contentType=\"audio\"");
        if line.trim_start().starts_with("<AdaptationSet ") && media {
            out.push_str(&elements);
        }
    }
    out
}

/// `text` escaped for XML text and attribute values.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}
