//! Settings as `sluice.toml` text, from the table: the effective settings `serve --check`
//! prints, and the commented file with every key and its default that `serve --print-config`
//! writes (the repository's `sluice.toml`, which a test keeps equal to it).
//!
//! Owns the layout of both texts. It does not own any setting's text or value (see
//! [`super::table`]) nor the `[[access]]` policies' and `[[protect]]` entries' fields (see [`crate::access`],
//! [`crate::protect`]).

use std::fmt::Write as _;

use super::{Config, Setting, SECTIONS, SETTINGS};

/// The top of the generated `sluice.toml`.
const HEADER: &str = "\
# sluice.toml: every setting of `sluice serve`, shown with its default.
# Use it with `sluice serve --config sluice.toml`; any command-line flag overrides the file
# (e.g. `--engine threads` beats `[engine] kind`). Durations read like \"10s\", \"250ms\", \"1m30s\", \"1.5s\".
# Sizes are an integer (bytes) or a string: \"512K\", \"64MiB\", \"1G\" (K/M/G/T and KiB/MiB/GiB/TiB are
# powers of 1024), \"50KB\", \"1.5GB\" (KB/MB/GB/TB are powers of 1000); a decimal must come to whole
# bytes. Addresses read like \"127.0.0.1:8080\", \"localhost:8080\" or \"[::]:8080\". `sluice serve --check`
# validates a file and prints the effective settings.
#
# This file is written by `sluice serve --print-config` from the settings table of the server
# (crates/sluice-server/src/config/table.rs); a test keeps the two equal.
";

/// The `[[access]]` policies, which are a list rather than settings: explained and shown
/// commented out.
const ACCESS: &str = "\
# Who may read what, per URL path prefix; the longest matching prefix decides, and a path under
# none is open. A refusal is 401 (nothing presented, or a wrong password) or 403, the same whether
# or not the path exists, and counted in /metrics by reason.
#
# \"signed\": URLs made by `sluice sign` (an expiring HMAC-SHA256 of the path or a prefix,
# optionally bound to the client's address). key_file signs URLs without a key id; `keys` holds
# keys by id (`sluice sign --kid ID`), so a new key can be added before the old one is retired.
# [[access]]
# prefix = \"/private/\"
# mode = \"signed\"
# key_file = \"/etc/sluice/sign.key\"
# keys = { k2 = \"/etc/sluice/sign-k2.key\" }
#
# \"jwt\": a JWT as \"Authorization: Bearer TOKEN\", ?jwt=TOKEN, or (RTSP) the password of
# rtsp://user:TOKEN@host/path; HS256 (oct), RS256 (RSA) or ES256 (EC P-256) keys from a JWKS file;
# exp is required, nbf honoured; the `claim` lists the path prefixes the token opens.
# [[access]]
# prefix = \"/members/\"
# mode = \"jwt\"
# jwks = \"/etc/sluice/jwks.json\"
# claim = \"paths\"
#
# \"users\": a user and password from users_file, by Basic or Digest (MD5) over HTTP and RTSP.
# One user a line: \"name:password\", \"name:digest-md5:HEX\" (MD5 of \"name:sluice:password\", for
# Basic and Digest) or \"name:sha256:HEX\" (SHA-256 of the password, Basic only). A wrong password
# is 401.
# [[access]]
# prefix = \"/studio/\"
# mode = \"users\"
# users_file = \"/etc/sluice/users\"
#
# \"open\": anyone, e.g. a free folder inside a guarded one.
# [[access]]
# prefix = \"/private/trailers/\"
# mode = \"open\"
";

/// The `[[protect]]` entries, a list like `[[access]]`: explained and shown commented out.
const PROTECT: &str = "\
# Which titles are encrypted, per URL path prefix; the longest matching prefix decides. Segments are
# encrypted per request (nothing is stored twice); a title's keys go only to viewers its [[access]]
# policy lets in: the ClearKey licence at /TITLE.mp4/clearkey (POST, W3C EME JSON) and the AES-128
# key at /TITLE.mp4/key, both 403 otherwise. Keys are read again on SIGHUP; segments encrypted with
# a new key get new entity tags.
#
# scheme: \"cenc\" (AES-CTR) or \"cbcs\" (AES-CBC, 1:9 pattern): Common Encryption of the CMAF
# tracks that DASH (manifest.mpd, ContentProtection with the KID and the licence URL) and HLS
# (master.m3u8, SAMPLE-AES with KEYFORMAT org.w3.clearkey) share, for EME players; the muxed HLS
# rendition (media.m3u8) is encrypted whole with AES-128 for players without EME.
# \"aes-128\": every HLS segment encrypted whole with AES-128 (no DASH).
#
# Keys: keys_file holds `path-or-prefix KID KEY` lines (32 hex digits each; the longest matching
# path wins; a title under the prefix with no line is refused, never served clear), or
# master_key_file holds one master key (32 or 64 hex digits) from which each title's KID and key
# are derived (HKDF-SHA256 over the title's path), so no list grows with the library, or
# cpix_file is a DASH-IF CPIX document from a key service: its one content key encrypts the
# prefix's titles, its DRMSystemList is signalled (pssh boxes, MPD and HLS data). One of the
# three. A rendition set's renditions (TITLE.<height>p.mp4) share the key of TITLE.set.
# pssh: other DRM systems' data (\"SYSTEM-UUID:BASE64\", from their licence service or a CPIX
# document) written into init segments and MPDs; their licences are acquired outside sluice.
# [[protect]]
# prefix = \"/premium/\"
# scheme = \"cbcs\"
# master_key_file = \"/etc/sluice/master.key\"
#
# [[protect]]
# prefix = \"/premium/licensed/\"
# scheme = \"cenc\"
# keys_file = \"/etc/sluice/title-keys\"
# pssh = [\"edef8ba9-79d6-4ace-a3c8-27dcd51d21ed:AAAAAA==\"]
#
# [[protect]]
# prefix = \"/premium/studio/\"
# scheme = \"cbcs\"
# cpix_file = \"/etc/sluice/studio.cpix.xml\"
";

/// The `[[source]]` entries, a list like `[[access]]`: explained and shown commented out.
const SOURCE: &str = "\
# Live paths pulled from RTSP cameras: sluice connects to the camera (DESCRIBE, answering Basic or
# Digest with the URL's user and password, SETUP of each track over TCP interleaved, PLAY, a
# keep-alive within the session timeout) and serves its stream at the live prefix + path
# (rtsp://ADDR/live/cam1) to any number of viewers, as a published path. No publisher may take
# a source's path (409). When the camera drops or cannot be reached, the path ends for its
# viewers and sluice pulls again after reconnect_min, doubling at each failure in a row up to
# reconnect_max (less up to a quarter at random); media silent for rtsp.publish_stall ends the
# path too. /streams shows each source's state and last error, the password left out.
# transport: \"tcp\" (interleaved on the RTSP connection); \"udp\" is not pulled yet.
# [[source]]
# path = \"cam1\"
# url = \"rtsp://user:password@192.168.1.20:554/stream1\"
# transport = \"tcp\"
# reconnect_min = \"1s\"
# reconnect_max = \"30s\"
";

/// The settings of one section, in table order.
fn in_section(section: &'static str) -> impl Iterator<Item = &'static Setting> {
    SETTINGS.iter().filter(move |s| s.section == section)
}

/// A doc line as written in the table (`/// text` keeps a leading space).
fn doc_line(line: &str) -> &str {
    line.strip_prefix(' ').unwrap_or(line)
}

/// `serve --check`'s text: every set value, exactly, secrets left out, then the `[[access]]`
/// policies, the `[[source]]` entries (without passwords) and the `[[protect]]` entries.
pub fn effective(c: &Config) -> String {
    let mut out = String::new();
    for (section, _) in SECTIONS {
        if !out.is_empty() {
            out.push('\n');
        }
        let _ = writeln!(out, "[{section}]");
        for setting in in_section(section).filter(|s| !s.extra.secret) {
            if let Some(value) = (setting.toml)(c) {
                let _ = writeln!(out, "{} = {value}", setting.key);
            }
        }
    }
    if !c.access.is_empty() {
        #[derive(serde::Serialize)]
        struct Policies<'a> {
            access: &'a [crate::access::AccessPolicy],
        }
        // A jwt policy's claim as it is read (each key is printed only where its mode uses it).
        let mut access = c.access.clone();
        for p in access.iter_mut().filter(|p| p.mode == crate::access::AccessMode::Jwt) {
            p.claim.get_or_insert_with(|| crate::access::DEFAULT_CLAIM.into());
        }
        out.push('\n');
        out.push_str(
            &toml::to_string(&Policies { access: &access })
                .unwrap_or_else(|e| format!("# cannot render the access policies: {e}\n")),
        );
    }
    out.push_str(&crate::rtsp::camera::render_sources(&c.source));
    out.push_str(&crate::record::render_rules(&c.record));
    if !c.protect.is_empty() {
        #[derive(serde::Serialize)]
        struct Entries<'a> {
            protect: &'a [crate::protect::ProtectPolicy],
        }
        out.push('\n');
        out.push_str(
            &toml::to_string(&Entries { protect: &c.protect })
                .unwrap_or_else(|e| format!("# cannot render the protect entries: {e}\n")),
        );
    }
    out
}

/// The repository's `sluice.toml`: every key with its default (unset ones commented out with an
/// example), each explained by its table comment.
pub fn example() -> String {
    let defaults = Config::default();
    let mut out = String::from(HEADER);
    for (section, doc) in SECTIONS {
        out.push('\n');
        // The table's section comment starts with "`[name]`: ", which the header line says.
        for (i, line) in doc.iter().map(|l| doc_line(l)).enumerate() {
            let line = if i == 0 {
                capitalised(line.split_once("`: ").map_or(line, |(_, rest)| rest))
            } else {
                line.into()
            };
            let _ = writeln!(out, "# {line}");
        }
        let _ = writeln!(out, "[{section}]");
        for setting in in_section(section) {
            for line in setting.doc {
                let _ = writeln!(out, "# {}", doc_line(line));
            }
            match (setting.toml_for_people)(&defaults) {
                Some(value) => {
                    let _ = writeln!(out, "{} = {value}", setting.key);
                }
                None => {
                    if let Some(unset) = setting.extra.unset {
                        let _ = writeln!(out, "# Unset: {unset}.");
                    }
                    let _ = writeln!(out, "# {} = {}", setting.key, setting.extra.example.unwrap_or("\"\""));
                }
            }
        }
    }
    out.push('\n');
    out.push_str(ACCESS);
    out.push('\n');
    out.push_str(PROTECT);
    out.push('\n');
    out.push_str(SOURCE);
    out
}

/// `line` with its first letter upper case.
fn capitalised(line: &str) -> String {
    let mut chars = line.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}
