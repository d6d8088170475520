//! DASH-IF CPIX (Content Protection Information Exchange, version 2.3) documents as a source of
//! content keys and DRM signalling: what a key service hands a packager.
//!
//! Owns reading a document: its `ContentKeyList` (each `ContentKey`'s `kid`, `explicitIV` and
//! clear key in `Data/Secret/PlainValue`, base64) and its `DRMSystemList` (each `DRMSystem`'s
//! `systemId` and `kid`, its `PSSH` box, its `ContentProtectionData` for the MPD and its
//! `HLSSignalingData` for the media or multivariant playlist, all base64), and turning them into
//! the [`TitleKey`] of the titles it keys ([`Cpix::title_key`]). The document is measured for
//! nesting and length before it is parsed (quick-xml), and every refusal names the element and
//! the reason, never a key. It does not read files or decide which titles a document keys (the
//! server's `[[protect]]` entries do); encrypted content keys (`EncryptedValue`, which needs the
//! recipient's private key) and usage rules are not read: a document for sluice holds one clear
//! content key, which encrypts every track of its titles.

use base64::Engine as _;
use quick_xml::events::{BytesStart, Event};
use sluice_proto::nesting::{check_nesting, NestingError, NestingLimit, Syntax};

use super::{Pssh, Scheme, SystemData, TitleKey, CLEARKEY_SYSTEM_ID, COMMON_SYSTEM_ID};

/// Largest document read: a few keys and systems' data (PlayReady headers are some kilobytes).
pub const MAX_LEN: usize = 1 << 20;
/// Deepest nesting: `CPIX/ContentKeyList/ContentKey/Data/Secret/PlainValue` is 6, usage rules'
/// filters 4; a `ContentProtectionData` fragment gets its own check.
pub const MAX_DEPTH: usize = 8;

/// Why a CPIX document cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CpixError {
    /// Too long or nested too deep: refused before parsing.
    #[error("refused before parsing: {0}")]
    Bounds(#[from] NestingError),
    /// Not well-formed XML.
    #[error("not well-formed XML at byte {at}: {reason}")]
    Xml {
        /// Where the parser stopped.
        at: u64,
        /// What it said.
        reason: String,
    },
    /// An element is missing, malformed or not what sluice can use.
    #[error("{element}: {reason}")]
    Element {
        /// The element (or `Element@attribute`).
        element: &'static str,
        /// Why (never a key's value).
        reason: String,
    },
}

fn refused(element: &'static str, reason: impl Into<String>) -> CpixError {
    CpixError::Element { element, reason: reason.into() }
}

/// One `ContentKey`.
#[derive(Clone, PartialEq, Eq)]
pub struct ContentKey {
    /// Its `kid`.
    pub kid: [u8; 16],
    /// Its clear value.
    pub key: [u8; 16],
    /// Its `explicitIV`, when given.
    pub explicit_iv: Option<[u8; 16]>,
}

impl std::fmt::Debug for ContentKey {
    // The key never reaches a log line, even through a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContentKey").field("kid", &super::uuid(&self.kid)).finish()
    }
}

/// One `DRMSystem`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DrmSystem {
    /// Its `systemId`.
    pub system_id: [u8; 16],
    /// The content key it is for.
    pub kid: [u8; 16],
    /// Its `PSSH`: a whole `pssh` box.
    pub pssh: Option<Vec<u8>>,
    /// Its `ContentProtectionData`: the children of the MPD's `ContentProtection` (UTF-8 XML).
    pub content_protection_data: Option<String>,
    /// Its `HLSSignalingData` for media playlists (`playlist="media"`, the default).
    pub hls_media: Option<String>,
    /// Its `HLSSignalingData` for the multivariant playlist (`playlist="master"`).
    pub hls_master: Option<String>,
}

/// A CPIX document's content keys and DRM systems.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cpix {
    /// `ContentKeyList`.
    pub content_keys: Vec<ContentKey>,
    /// `DRMSystemList`.
    pub systems: Vec<DrmSystem>,
}

/// The elements whose text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    PlainValue,
    Pssh,
    ContentProtectionData,
    HlsMedia,
    HlsMaster,
}

impl Field {
    fn element(self) -> &'static str {
        match self {
            Field::PlainValue => "PlainValue",
            Field::Pssh => "PSSH",
            Field::ContentProtectionData => "ContentProtectionData",
            Field::HlsMedia | Field::HlsMaster => "HLSSignalingData",
        }
    }
}

impl Cpix {
    /// Reads a CPIX document.
    pub fn parse(text: &[u8]) -> Result<Cpix, CpixError> {
        check_nesting(text, Syntax::Xml, NestingLimit { max_depth: MAX_DEPTH, max_len: MAX_LEN })?;
        let mut reader = quick_xml::Reader::from_reader(text);
        let mut cpix = Cpix::default();
        let mut root_seen = false;
        // The element being read (its text collects here), and the key and system it is in.
        let mut field: Option<(Field, String)> = None;
        let mut key: Option<(ContentKey, bool)> = None;
        let mut system: Option<DrmSystem> = None;
        loop {
            let at = reader.buffer_position();
            let event = reader.read_event().map_err(|e| CpixError::Xml { at, reason: e.to_string() })?;
            match event {
                Event::Start(ref e) | Event::Empty(ref e) => {
                    let empty = matches!(event, Event::Empty(_));
                    let name = e.local_name();
                    let name = name.as_ref();
                    if !root_seen {
                        if name != b"CPIX" {
                            return Err(refused("CPIX", "the document's root is not a CPIX element"));
                        }
                        root_seen = true;
                        continue;
                    }
                    match name {
                        b"ContentKey" => {
                            let kid = uuid_attribute(e, "ContentKey@kid", b"kid")?;
                            let explicit_iv = match attribute(e, b"explicitIV")? {
                                Some(iv) => Some(sixteen(
                                    &decode_base64(&iv, "ContentKey@explicitIV")?,
                                    "ContentKey@explicitIV",
                                )?),
                                None => None,
                            };
                            let content_key = ContentKey { kid, key: [0; 16], explicit_iv };
                            if empty {
                                return Err(refused(
                                    "ContentKey",
                                    "no Data/Secret/PlainValue: the key is missing",
                                ));
                            }
                            key = Some((content_key, false));
                        }
                        b"EncryptedValue" if key.is_some() => {
                            return Err(refused(
                                "EncryptedValue",
                                "encrypted content keys are not read: ask the key service for PlainValue",
                            ));
                        }
                        b"PlainValue" if key.is_some() && !empty => {
                            field = Some((Field::PlainValue, String::new()))
                        }
                        b"DRMSystem" => {
                            let system_id = uuid_attribute(e, "DRMSystem@systemId", b"systemId")?;
                            let kid = uuid_attribute(e, "DRMSystem@kid", b"kid")?;
                            system = Some(DrmSystem { system_id, kid, ..DrmSystem::default() });
                            if empty {
                                cpix.systems.extend(system.take());
                            }
                        }
                        b"PSSH" if system.is_some() && !empty => field = Some((Field::Pssh, String::new())),
                        b"ContentProtectionData" if system.is_some() && !empty => {
                            field = Some((Field::ContentProtectionData, String::new()))
                        }
                        b"HLSSignalingData" if system.is_some() && !empty => {
                            let which = match attribute(e, b"playlist")?.as_deref() {
                                None | Some("media") => Field::HlsMedia,
                                Some("master") => Field::HlsMaster,
                                Some(_) => {
                                    return Err(refused(
                                        "HLSSignalingData@playlist",
                                        "expected media or master",
                                    ))
                                }
                            };
                            field = Some((which, String::new()));
                        }
                        _ => {}
                    }
                }
                Event::Text(t) => {
                    if let Some((_, text)) = field.as_mut() {
                        text.push_str(&t.decode().map_err(|e| CpixError::Xml { at, reason: e.to_string() })?);
                    }
                }
                Event::CData(t) => {
                    if let Some((_, text)) = field.as_mut() {
                        text.push_str(&t.decode().map_err(|e| CpixError::Xml { at, reason: e.to_string() })?);
                    }
                }
                Event::GeneralRef(_) => {
                    if let Some((which, _)) = &field {
                        return Err(refused(
                            which.element(),
                            "an entity reference where base64 was expected",
                        ));
                    }
                }
                Event::End(ref e) => match e.local_name().as_ref() {
                    b"ContentKey" => {
                        let (content_key, has_value) =
                            key.take().ok_or_else(|| refused("ContentKey", "misplaced"))?;
                        if !has_value {
                            return Err(refused(
                                "ContentKey",
                                "no Data/Secret/PlainValue: the key is missing",
                            ));
                        }
                        if cpix.content_keys.iter().any(|k| k.kid == content_key.kid) {
                            return Err(refused("ContentKey@kid", "two content keys have the same kid"));
                        }
                        cpix.content_keys.push(content_key);
                    }
                    b"DRMSystem" => cpix.systems.extend(system.take()),
                    _ => {
                        let Some((which, text)) = field.take() else { continue };
                        let bytes = decode_base64(&text, which.element())?;
                        match which {
                            Field::PlainValue => {
                                let (content_key, has_value) =
                                    key.as_mut().ok_or_else(|| refused("PlainValue", "misplaced"))?;
                                // An AES-128 key; the reason never shows the value.
                                content_key.key = sixteen(&bytes, "PlainValue")?;
                                *has_value = true;
                            }
                            other => {
                                let system =
                                    system.as_mut().ok_or_else(|| refused(other.element(), "misplaced"))?;
                                set_system_field(system, other, bytes)?;
                            }
                        }
                    }
                },
                Event::Eof => break,
                _ => {}
            }
        }
        if !root_seen {
            return Err(refused("CPIX", "no CPIX element: an empty document"));
        }
        Ok(cpix)
    }

    /// The key of the titles this document keys, under `scheme`, with the systems to signal:
    /// its one content key (sluice encrypts every track of a title with one key) and the DRM
    /// systems for it, but the W3C common and ClearKey ones, which sluice signals itself.
    pub fn title_key(&self, scheme: Scheme) -> Result<TitleKey, CpixError> {
        let [content_key] = &self.content_keys[..] else {
            return Err(refused(
                "ContentKeyList",
                format!(
                    "{} content keys; sluice encrypts every track of a title with one, so a document keys its titles with one",
                    self.content_keys.len()
                ),
            ));
        };
        let mut systems: Vec<SystemData> = Vec::new();
        for system in &self.systems {
            if system.kid != content_key.kid {
                return Err(refused(
                    "DRMSystem@kid",
                    format!("{} is not the content key's", super::uuid(&system.kid)),
                ));
            }
            if system.system_id == COMMON_SYSTEM_ID || system.system_id == CLEARKEY_SYSTEM_ID {
                continue;
            }
            if systems.iter().any(|s| s.system_id == system.system_id) {
                return Err(refused(
                    "DRMSystem@systemId",
                    format!("{} twice", super::uuid(&system.system_id)),
                ));
            }
            let pssh = match &system.pssh {
                Some(pssh) => Some(pssh_content(pssh, &system.system_id)?),
                None => None,
            };
            systems.push(SystemData {
                system_id: system.system_id,
                pssh,
                dash: system.content_protection_data.clone(),
                hls_media: system.hls_media.iter().flat_map(|t| lines(t)).collect(),
                hls_master: system.hls_master.iter().flat_map(|t| lines(t)).collect(),
            });
        }
        Ok(TitleKey {
            scheme,
            kid: content_key.kid,
            key: content_key.key,
            systems,
            explicit_iv: content_key.explicit_iv,
        })
    }
}

/// The non-empty lines of a signalling text.
fn lines(text: &str) -> Vec<String> {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).map(String::from).collect()
}

/// Checks and keeps one system's field: a `pssh` box of the system; well-formed XML for the MPD;
/// `#EXT-X-KEY` (media) or `#EXT-X-SESSION-KEY` (master) lines only, so a document cannot add
/// other tags to a playlist.
fn set_system_field(system: &mut DrmSystem, field: Field, bytes: Vec<u8>) -> Result<(), CpixError> {
    let element = field.element();
    let utf8 = |bytes: Vec<u8>| String::from_utf8(bytes).map_err(|_| refused(element, "not UTF-8 text"));
    match field {
        Field::Pssh => {
            pssh_content(&bytes, &system.system_id)?;
            system.pssh = Some(bytes);
        }
        Field::ContentProtectionData => {
            let xml = utf8(bytes)?;
            well_formed_fragment(&xml)?;
            system.content_protection_data = Some(xml);
        }
        Field::HlsMedia | Field::HlsMaster => {
            let text = utf8(bytes)?;
            let tag = if field == Field::HlsMedia { "#EXT-X-KEY:" } else { "#EXT-X-SESSION-KEY:" };
            if let Some(line) = lines(&text).iter().find(|l| !l.starts_with(tag) || l.contains(['\r', '\0']))
            {
                let shown: String = line.chars().take(40).collect();
                return Err(refused(element, format!("expected {tag} lines, found `{shown}`")));
            }
            if field == Field::HlsMedia {
                system.hls_media = Some(text);
            } else {
                system.hls_master = Some(text);
            }
        }
        Field::PlainValue => unreachable!("a content key's field"),
    }
    Ok(())
}

/// The content of a whole `pssh` box (ISO/IEC 23001-7 §8.1) of `system_id`.
fn pssh_content(pssh: &[u8], system_id: &[u8; 16]) -> Result<Pssh, CpixError> {
    let bad = |why: &str| refused("PSSH", why.to_string());
    let u32_at =
        |at: usize| pssh.get(at..at + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize);
    if u32_at(0) != Some(pssh.len()) || pssh.get(4..8) != Some(b"pssh") {
        return Err(bad("not one whole pssh box"));
    }
    let version = pssh[8];
    if pssh.get(12..28) != Some(&system_id[..]) {
        return Err(bad("its system id is not the DRMSystem's systemId"));
    }
    let mut at = 28;
    let mut kids = Vec::new();
    match version {
        0 => {}
        1 => {
            let count = u32_at(at).ok_or_else(|| bad("cut short"))?;
            at += 4;
            if count > (pssh.len() - at) / 16 {
                return Err(bad("more KIDs than bytes"));
            }
            for _ in 0..count {
                kids.push(sixteen(&pssh[at..at + 16], "PSSH")?);
                at += 16;
            }
        }
        _ => return Err(bad("version 0 or 1 expected")),
    }
    let len = u32_at(at).ok_or_else(|| bad("cut short"))?;
    at += 4;
    if pssh.len() - at != len {
        return Err(bad("its data size is not the rest of the box"));
    }
    Ok(Pssh { kids, data: pssh[at..].to_vec() })
}

/// Whether `xml` is a well-formed fragment (elements closed in order), within the bounds.
fn well_formed_fragment(xml: &str) -> Result<(), CpixError> {
    let element = "ContentProtectionData";
    check_nesting(xml.as_bytes(), Syntax::Xml, NestingLimit { max_depth: MAX_DEPTH, max_len: MAX_LEN })
        .map_err(|e| refused(element, e.to_string()))?;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut depth = 0usize;
    loop {
        match reader.read_event() {
            Ok(Event::Start(_)) => depth += 1,
            Ok(Event::End(_)) => depth -= 1,
            Ok(Event::Eof) if depth == 0 => return Ok(()),
            Ok(Event::Eof) => return Err(refused(element, "an element is not closed")),
            Ok(Event::Decl(_) | Event::DocType(_)) => {
                return Err(refused(element, "a declaration in an MPD element's content"))
            }
            Ok(_) => {}
            Err(e) => return Err(refused(element, format!("not well-formed XML: {e}"))),
        }
    }
}

/// The value of attribute `name` (local name), unescaped.
fn attribute(e: &BytesStart<'_>, name: &[u8]) -> Result<Option<String>, CpixError> {
    for a in e.attributes() {
        let a = a.map_err(|err| CpixError::Xml { at: 0, reason: err.to_string() })?;
        if a.key.local_name().as_ref() == name {
            let value =
                a.unescape_value().map_err(|err| CpixError::Xml { at: 0, reason: err.to_string() })?;
            return Ok(Some(value.into_owned()));
        }
    }
    Ok(None)
}

/// A UUID attribute (`8-4-4-4-12` hex) as 16 bytes.
fn uuid_attribute(e: &BytesStart<'_>, element: &'static str, name: &[u8]) -> Result<[u8; 16], CpixError> {
    let value = attribute(e, name)?.ok_or_else(|| refused(element, "missing"))?;
    let digits: String = value.chars().filter(|c| *c != '-').collect();
    if digits.len() != 32 || !digits.is_ascii() {
        return Err(refused(element, format!("`{value}` is not a UUID")));
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&digits[2 * i..2 * i + 2], 16)
            .map_err(|_| refused(element, format!("`{value}` is not a UUID")))?;
    }
    Ok(out)
}

/// Base64 text (whitespace between lines allowed) as bytes.
fn decode_base64(text: &str, element: &'static str) -> Result<Vec<u8>, CpixError> {
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD
        .decode(compact)
        .map_err(|e| refused(element, format!("not base64: {e}")))
}

/// Exactly 16 bytes.
fn sixteen(bytes: &[u8], element: &'static str) -> Result<[u8; 16], CpixError> {
    <[u8; 16]>::try_from(bytes)
        .map_err(|_| refused(element, format!("{} bytes where 16 were expected", bytes.len())))
}

#[cfg(test)]
mod tests;
