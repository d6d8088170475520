//! Content protection of packaged segments, per request: Common Encryption (ISO/IEC 23001-7,
//! `cenc` = AES-CTR, `cbcs` = AES-CBC with a 1:9 pattern) of the CMAF tracks, and HLS AES-128
//! whole-segment encryption.
//!
//! This module owns what changes in the bytes and texts [`crate::hls`] generates when a title is
//! protected: the init segment's `encv`/`enca` sample entries with their `sinf` and the `pssh`
//! boxes ([`boxes::protect_init`]), each media segment's samples encrypted in place with `senc`,
//! `saiz` and `saio` added to every `traf` ([`boxes::protect_segment`]), the subsample maps of
//! video samples ([`subsample`]), the ciphers ([`cipher`]), the DASH `ContentProtection` and
//! HLS `EXT-X-KEY` signalling ([`manifest`]), and reading the keys and DRM signalling a CPIX
//! document gives ([`cpix`]). It works on what `hls` wrote (box bytes and
//! manifest text), so the clear packaging stays as it is and a protected title costs only the
//! requests that ask for it. It does not hold keys, decide which title is protected or answer
//! licence requests (the server does).
//!
//! IVs are deterministic, so a segment's bytes (and its entity tag) are the same on every
//! request: `cenc` samples get an 8-byte IV from the track's kind, the segment's sequence number
//! and the sample's place in it (unique per key, which is all CTR needs); `cbcs` uses a constant
//! IV per title, as CMAF allows and as the scheme was made for.

pub mod boxes;
pub mod cipher;
pub mod cpix;
pub mod manifest;
pub mod slice;
pub mod subsample;

pub use boxes::{protect_init, protect_segment, protect_segment_in_place, TrackCrypt};

/// The W3C "common" protection system (`1077efec-c0b2-4d02-ace3-3c1e52e2fb4b`): a `pssh` that
/// only lists KIDs, which ClearKey and EME players read.
pub const COMMON_SYSTEM_ID: [u8; 16] =
    [0x10, 0x77, 0xef, 0xec, 0xc0, 0xb2, 0x4d, 0x02, 0xac, 0xe3, 0x3c, 0x1e, 0x52, 0xe2, 0xfb, 0x4b];

/// The DASH-IF ClearKey system (`e2719d58-a985-b3c9-781a-b030af78d30e`), signalled in MPDs.
pub const CLEARKEY_SYSTEM_ID: [u8; 16] =
    [0xe2, 0x71, 0x9d, 0x58, 0xa9, 0x85, 0xb3, 0xc9, 0x78, 0x1a, 0xb0, 0x30, 0xaf, 0x78, 0xd3, 0x0e];

/// A Common Encryption scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// AES-128 CTR, per-sample 8-byte IVs, video by subsample.
    Cenc,
    /// AES-128 CBC with a 1:9 pattern on video (whole blocks only) and every whole block of an
    /// audio sample; a constant IV.
    Cbcs,
}

impl Scheme {
    /// The four-character code (`schm`, DASH's `value`).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Cenc => "cenc",
            Scheme::Cbcs => "cbcs",
        }
    }
}

/// A protection system given by configuration (Widevine's, PlayReady's or FairPlay's, from their
/// licence service or a CPIX document): its `pssh` written as it is into the init segment and
/// the MPD, and what a CPIX document gives for the manifests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SystemData {
    /// The system's id.
    pub system_id: [u8; 16],
    /// Its `pssh` box's content, when it has one (FairPlay is signalled in HLS only).
    pub pssh: Option<Pssh>,
    /// The children of its MPD `ContentProtection` (CPIX `ContentProtectionData`), written in
    /// place of a `cenc:pssh`.
    pub dash: Option<String>,
    /// Lines for media playlists (`#EXT-X-KEY:...`, CPIX `HLSSignalingData`).
    pub hls_media: Vec<String>,
    /// Lines for the multivariant playlist (`#EXT-X-SESSION-KEY:...`).
    pub hls_master: Vec<String>,
}

/// What a `pssh` box holds besides its system id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Pssh {
    /// The KIDs of a version 1 box (none: version 0).
    pub kids: Vec<[u8; 16]>,
    /// The system's data.
    pub data: Vec<u8>,
}

/// How one title is protected: its scheme, KID and key, the systems to signal.
#[derive(Clone, PartialEq, Eq)]
pub struct TitleKey {
    /// The scheme of its CMAF tracks.
    pub scheme: Scheme,
    /// The key id.
    pub kid: [u8; 16],
    /// The content key.
    pub key: [u8; 16],
    /// Systems besides the W3C common one, each with its own `pssh`.
    pub systems: Vec<SystemData>,
    /// The `cbcs` constant IV a CPIX document gave (`explicitIV`); else one is made from the KID.
    pub explicit_iv: Option<[u8; 16]>,
}

impl std::fmt::Debug for TitleKey {
    // The key never reaches a log line, even through a debug print.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TitleKey").field("scheme", &self.scheme).field("kid", &hex(&self.kid)).finish()
    }
}

impl TitleKey {
    /// The constant IV of `cbcs`: the configured one, else from the KID, so it is stable and
    /// says nothing of the key.
    pub fn constant_iv(&self) -> [u8; 16] {
        if let Some(iv) = self.explicit_iv {
            return iv;
        }
        let mut iv = [0u8; 16];
        for (i, b) in self.kid.iter().enumerate() {
            iv[i] = b.rotate_left(3) ^ 0x5c ^ (i as u8);
        }
        iv
    }
}

/// Lower-case hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A KID as a UUID string (`8-4-4-4-12` hex), as `cenc:default_KID` writes it.
pub fn uuid(bytes: &[u8; 16]) -> String {
    let h = hex(bytes);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

/// Why a segment or an init segment cannot be protected.
#[derive(Debug, thiserror::Error)]
pub enum ProtectError {
    /// The bytes are not what `hls` writes (a box runs past its parent, a `trun` points outside
    /// the `mdat`).
    #[error("cannot protect: {0}")]
    Malformed(&'static str),
    /// The box writer refused a value.
    #[error("writing boxes: {0}")]
    Boxes(#[from] mp4_atom::Error),
}

#[cfg(test)]
mod tests;
