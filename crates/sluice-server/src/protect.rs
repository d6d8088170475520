//! Which titles are encrypted and with which keys: the `[[protect]]` entries of `sluice.toml`.
//!
//! Owns the entries per path prefix (the longest matching prefix decides, as for `[[access]]`,
//! with the same matching), their schemes (`cenc`, `cbcs`, `aes-128`), the keys per title, from a
//! keys file (`path-or-prefix KID KEY` lines, hex; the longest matching entry wins), derived
//! from a master key (HKDF-SHA256 over the title's path gives its KID and its key, so no list
//! grows with the library) or given by a CPIX document (one key for the prefix, and the DRM
//! systems to signal), reading them again on SIGHUP ([`Protection::reload`]: a title whose
//! key changed gets new segments, and new entity tags, from the next request), and the ClearKey
//! licence service ([`licence`]). Keys are never logged: errors name the file and the line, never
//! the value. It does not encrypt (`sluice_media::protect` does), decide who may fetch a key (the
//! `[[access]]` policies of the title's path do, as for its segments) or route requests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use hkdf::Hkdf;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sluice_media::protect::cpix::Cpix;
use sluice_media::protect::{Pssh, Scheme, SystemData, TitleKey};

pub mod licence;
pub mod packaged;

/// One `[[protect]]` entry: the titles under `prefix`, how and with which keys.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ProtectPolicy {
    /// URL path prefix, e.g. `/premium/`; the longest matching prefix decides.
    pub prefix: String,
    /// `cenc`, `cbcs` or `aes-128`.
    pub scheme: ProtectScheme,
    /// A file of `path-or-prefix KID KEY` lines (32 hex digits each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keys_file: Option<PathBuf>,
    /// A file holding a master key (32 or 64 hex digits) each title's KID and key are derived
    /// from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_key_file: Option<PathBuf>,
    /// A DASH-IF CPIX document holding the key of the prefix's titles (one `ContentKey`, its
    /// value in `PlainValue`) and the DRM systems to signal (`DRMSystemList`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpix_file: Option<PathBuf>,
    /// Other DRM systems' `pssh` data, `SYSTEM-UUID:BASE64` (from their licence service or a
    /// CPIX document), signalled in init segments and MPDs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pssh: Vec<String>,
}

/// How a prefix's titles are encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum ProtectScheme {
    /// Common Encryption, AES-CTR (DASH and HLS, EME players).
    #[serde(rename = "cenc")]
    Cenc,
    /// Common Encryption, AES-CBC with a 1:9 pattern (DASH and HLS, EME players, Apple).
    #[serde(rename = "cbcs")]
    Cbcs,
    /// HLS only: every segment encrypted whole with AES-128 (players without EME).
    #[serde(rename = "aes-128")]
    Aes128,
}

impl ProtectScheme {
    /// The name in `sluice.toml`, `/streams` and the page.
    pub fn name(self) -> &'static str {
        match self {
            ProtectScheme::Cenc => "cenc",
            ProtectScheme::Cbcs => "cbcs",
            ProtectScheme::Aes128 => "aes-128",
        }
    }

    /// The Common Encryption scheme of the CMAF tracks, `None` for AES-128.
    pub fn cenc(self) -> Option<Scheme> {
        match self {
            ProtectScheme::Cenc => Some(Scheme::Cenc),
            ProtectScheme::Cbcs => Some(Scheme::Cbcs),
            ProtectScheme::Aes128 => None,
        }
    }
}

/// An entry that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ProtectError {
    /// A key file could not be read.
    #[error("protect {prefix}: cannot read {}: {source}", path.display())]
    Read {
        /// The entry's prefix.
        prefix: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The entry is incomplete or its keys are malformed.
    #[error("protect {prefix}: {why}")]
    Invalid {
        /// The entry's prefix.
        prefix: String,
        /// Why (never a key's value).
        why: String,
    },
}

/// How one title is protected, as a request needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TitleProtection {
    /// The scheme.
    pub scheme: ProtectScheme,
    /// KID, key and the systems to signal (its `scheme` is the CENC one; `cenc` for AES-128,
    /// where it is not used).
    pub key: TitleKey,
}

impl TitleProtection {
    /// A short digest of the scheme, KID and key, for entity tags: a segment encrypted with
    /// another key is another representation.
    pub fn fingerprint(&self) -> String {
        let digest = Sha256::new()
            .chain_update(self.scheme.name())
            .chain_update(self.key.kid)
            .chain_update(self.key.key)
            .chain_update(self.key.explicit_iv.unwrap_or_default())
            .finalize();
        sluice_media::protect::hex(&digest[..6])
    }
}

/// A keys file's entries: path or prefix, then the KID and the key.
type KeyEntries = Vec<(String, ([u8; 16], [u8; 16]))>;

/// Where a prefix's keys come from.
enum Keys {
    /// `path-or-prefix` entries, longest first (a title's path ends with `/` here, so it only
    /// matches itself).
    Listed(KeyEntries),
    /// The master key the titles' keys are derived from.
    Derived(Vec<u8>),
}

struct Rule {
    scheme: ProtectScheme,
    keys: Keys,
    systems: Vec<SystemData>,
    /// The `cbcs` constant IV a CPIX document gave.
    explicit_iv: Option<[u8; 16]>,
}

/// The `[[protect]]` entries in force, their keys loaded; [`Protection::reload`] reads the key
/// files again.
pub struct Protection {
    policies: Vec<ProtectPolicy>,
    /// Longest prefix first.
    rules: RwLock<Arc<Vec<(String, Rule)>>>,
}

impl std::fmt::Debug for Protection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Protection")
            .field("prefixes", &self.policies.iter().map(|p| &p.prefix).collect::<Vec<_>>())
            .finish()
    }
}

/// Why a title under a protected prefix has no key: its responses are refused rather than
/// served clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoKey;

impl Default for Protection {
    /// Nothing protected.
    fn default() -> Protection {
        Protection { policies: Vec::new(), rules: RwLock::new(Arc::new(Vec::new())) }
    }
}

impl Protection {
    /// Loads `policies`' keys; an entry without a usable key source is an error, so a typo
    /// cannot serve a prefix clear.
    pub fn load(policies: &[ProtectPolicy]) -> Result<Protection, ProtectError> {
        let rules = load_rules(policies)?;
        Ok(Protection { policies: policies.to_vec(), rules: RwLock::new(Arc::new(rules)) })
    }

    /// Reads the key files again; on an error the keys in force stay.
    pub fn reload(&self) -> Result<(), ProtectError> {
        let rules = load_rules(&self.policies)?;
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(rules);
        Ok(())
    }

    /// Whether no entry protects anything.
    pub fn is_empty(&self) -> bool {
        self.policies.is_empty()
    }

    /// Whether `path` (decoded, from the root) lies under a protected prefix.
    pub fn guards(&self, path: &str) -> bool {
        let rules = Arc::clone(&self.rules.read().unwrap_or_else(|e| e.into_inner()));
        crate::access::longest_match(&rules, path).is_some()
    }

    /// How the title at `title` (`/films/a.mp4`, or a rendition set `/films/a.set`) is
    /// protected: `None` when it is not, `Err` when its prefix is protected but no key is listed
    /// for it. A rendition (`/films/a.720p.mp4`) has its set's key: see [`keyed_path`].
    pub fn title(&self, title: &str) -> Option<Result<TitleProtection, NoKey>> {
        let rules = Arc::clone(&self.rules.read().unwrap_or_else(|e| e.into_inner()));
        let rule = crate::access::longest_match(&rules, title)?;
        let keyed = keyed_path(title);
        let (kid, key) = match &rule.keys {
            Keys::Listed(entries) => match crate::access::longest_match(entries, &keyed) {
                Some(pair) => *pair,
                None => return Some(Err(NoKey)),
            },
            Keys::Derived(master) => derive(master, &keyed),
        };
        let scheme = rule.scheme.cenc().unwrap_or(Scheme::Cenc);
        let key = TitleKey { scheme, kid, key, systems: rule.systems.clone(), explicit_iv: rule.explicit_iv };
        Some(Ok(TitleProtection { scheme: rule.scheme, key }))
    }
}

/// The path whose key encrypts `title`: the set `/films/a.set` for a rendition
/// `/films/a.720p.mp4`, the title itself otherwise.
///
/// A set's manifests list its renditions' own segment URLs (`../a.720p.mp4/video-seg-3.m4s`),
/// which the rendition played alone serves too: the key must follow from a segment's URL alone,
/// with no directory read per segment, and be the same whichever manifest listed it. Keying
/// renditions by their set makes one content key (and KID) per set, the practice of DASH-IF IOP
/// and Apple's HLS authoring: one licence opens every rendition, so a player switching between
/// them asks for no new key mid-play, the MPD signals the KID once per `AdaptationSet` and the
/// multivariant playlist once in `EXT-X-SESSION-KEY`. The audio shares it: ClearKey has no
/// robustness levels that would make a separate audio key protect anything more.
pub fn keyed_path(title: &str) -> std::borrow::Cow<'_, str> {
    use crate::library::renditions::{rendition_height, title_of, SET_SUFFIX};
    let (dir, name) = title.rsplit_once('/').unwrap_or(("", title));
    match title_of(name).filter(|set| rendition_height(name, set).is_some()) {
        Some(set) => format!("{dir}/{set}{SET_SUFFIX}").into(),
        None => title.into(),
    }
}

/// The KID and key of `title` under `master`: HKDF-SHA256 with the title's path in the info.
fn derive(master: &[u8], title: &str) -> ([u8; 16], [u8; 16]) {
    let hkdf = Hkdf::<Sha256>::new(Some(b"sluice protect"), master);
    let (mut kid, mut key) = ([0u8; 16], [0u8; 16]);
    // 16 bytes are far below HKDF's limit of 255 hashes: expanding cannot fail.
    let _ = hkdf.expand(format!("kid {title}").as_bytes(), &mut kid);
    let _ = hkdf.expand(format!("key {title}").as_bytes(), &mut key);
    (kid, key)
}

fn load_rules(policies: &[ProtectPolicy]) -> Result<Vec<(String, Rule)>, ProtectError> {
    let mut rules = Vec::with_capacity(policies.len());
    for p in policies {
        let invalid = |why: String| ProtectError::Invalid { prefix: p.prefix.clone(), why };
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| ProtectError::Read {
                prefix: p.prefix.clone(),
                path: path.to_owned(),
                source,
            })
        };
        if !p.prefix.starts_with('/') {
            return Err(invalid("the prefix must start with /".into()));
        }
        let mut systems = Vec::new();
        for entry in &p.pssh {
            systems.push(parse_pssh(entry).map_err(|why| invalid(format!("pssh `{entry}`: {why}")))?);
        }
        let mut explicit_iv = None;
        let keys = match (&p.keys_file, &p.master_key_file, &p.cpix_file) {
            (Some(file), None, None) => Keys::Listed(
                parse_keys(&read(file)?).map_err(|why| invalid(format!("{}: {why}", file.display())))?,
            ),
            (None, Some(file), None) => {
                let master = unhex(read(file)?.trim())
                    .filter(|k| k.len() == 16 || k.len() == 32)
                    .ok_or_else(|| invalid(format!("{}: expected 32 or 64 hex digits", file.display())))?;
                Keys::Derived(master)
            }
            (None, None, Some(file)) => {
                let cenc = p.scheme.cenc().unwrap_or(Scheme::Cenc);
                let title = Cpix::parse(read(file)?.as_bytes())
                    .and_then(|cpix| cpix.title_key(cenc))
                    .map_err(|e| invalid(format!("{}: {e}", file.display())))?;
                for system in title.systems {
                    if systems.iter().any(|s: &SystemData| s.system_id == system.system_id) {
                        let id = sluice_media::protect::uuid(&system.system_id);
                        return Err(invalid(format!("pssh and {} both give system {id}", file.display())));
                    }
                    systems.push(system);
                }
                explicit_iv = title.explicit_iv;
                // Every title under the prefix (a set's renditions with it) has the document's key.
                Keys::Listed(vec![(p.prefix.clone(), (title.kid, title.key))])
            }
            _ => return Err(invalid("set one of keys_file, master_key_file and cpix_file".into())),
        };
        rules.push((p.prefix.clone(), Rule { scheme: p.scheme, keys, systems, explicit_iv }));
    }
    rules.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
    Ok(rules)
}

/// The entries of a keys file, longest first; an error names the line, never its key.
fn parse_keys(text: &str) -> Result<KeyEntries, String> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [path, kid, key] = fields[..] else {
            return Err(format!("line {}: expected `path-or-prefix KID KEY`", n + 1));
        };
        let sixteen = |hex: &str| unhex(hex).and_then(|b| <[u8; 16]>::try_from(b).ok());
        let (Some(kid), Some(key)) = (sixteen(kid), sixteen(key)) else {
            return Err(format!("line {}: KID and KEY are 32 hex digits each", n + 1));
        };
        if !path.starts_with('/') {
            return Err(format!("line {}: the path must start with /", n + 1));
        }
        if let std::borrow::Cow::Owned(set) = keyed_path(path) {
            return Err(format!(
                "line {}: {path} is a rendition of {set}, whose line keys all its renditions",
                n + 1
            ));
        }
        // A title's path matches itself only: `/a.mp4/` is what `/a.mp4` is matched as.
        let path = if path.ends_with('/') { path.to_string() } else { format!("{path}/") };
        entries.push((path, (kid, key)));
    }
    entries.sort_by_key(|(path, _)| std::cmp::Reverse(path.len()));
    Ok(entries)
}

/// `SYSTEM-UUID:BASE64` as a system's `pssh` data.
fn parse_pssh(entry: &str) -> Result<SystemData, String> {
    use base64::Engine as _;
    let (system, data) = entry.split_once(':').ok_or("expected SYSTEM-UUID:BASE64")?;
    let system_id = unhex(&system.replace('-', ""))
        .and_then(|b| <[u8; 16]>::try_from(b).ok())
        .ok_or("the system id is a UUID")?;
    let data =
        base64::engine::general_purpose::STANDARD.decode(data.trim()).map_err(|e| format!("data: {e}"))?;
    Ok(SystemData { system_id, pssh: Some(Pssh { kids: Vec::new(), data }), ..SystemData::default() })
}

/// The bytes of an even-length hex string.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests;
