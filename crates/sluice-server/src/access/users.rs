//! The `users` policy: the users file, and Basic and Digest (RFC 7616, MD5) checks with
//! stateless expiring nonces.
//!
//! Owns reading `name:password` / `name:sha256:HEX` / `name:digest-md5:HEX` lines, the
//! challenges of a 401, and checking a presented user and password. It does not own which
//! prefix a policy guards nor the refusal counts (see [`super::Access`]).

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::time::{SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::{normal_path, Access, Presented, Refusal, Rule};

/// What the users file holds of a user's password.
pub(super) enum Secret {
    /// The password itself (Basic and Digest).
    Plain(String),
    /// SHA-256 of the password (Basic only: Digest needs the password or HA1).
    Sha256(Vec<u8>),
    /// MD5 of `name:realm:password`, Digest's HA1 (Basic and Digest).
    Ha1(Vec<u8>),
}

/// The realm of Basic and Digest challenges (a stored HA1 is computed with it).
pub const REALM: &str = "sluice";

/// How long a Digest nonce is good for; a client presenting an older one is challenged again.
pub(super) const NONCE_LIFETIME: u64 = 300;

/// Reads a users file: `name:password` lines, `name:sha256:HEX` or `name:digest-md5:HEX`;
/// blank lines and `#` comments skipped.
pub(super) fn read_users(text: &str) -> Result<BTreeMap<String, Secret>, String> {
    let mut users = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) =
            line.split_once(':').ok_or_else(|| format!("line {}: not name:password", n + 1))?;
        let hex = |h: &str, len: usize| {
            hex_decode(h).filter(|b| b.len() == len).ok_or_else(|| format!("line {}: bad hex", n + 1))
        };
        let secret = if let Some(h) = rest.strip_prefix("sha256:") {
            Secret::Sha256(hex(h, 32)?)
        } else if let Some(h) = rest.strip_prefix("digest-md5:") {
            Secret::Ha1(hex(h, 16)?)
        } else {
            Secret::Plain(rest.to_string())
        };
        if name.is_empty() {
            return Err(format!("line {}: empty user name", n + 1));
        }
        users.insert(name.to_string(), secret);
    }
    if users.is_empty() {
        return Err("the users file lists no user".into());
    }
    Ok(users)
}

/// Whether a Digest `uri` (`rtsp://host/films/a.mp4`, `/films/a.mp4?x`) names `path` (decoded,
/// from the root) or something under it (an RTSP track, `…/trackID=1`).
pub(super) fn digest_uri_covers(uri: &str, path: &str) -> bool {
    let without_scheme =
        uri.split_once("://").map_or(uri, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
    let target = without_scheme.split('?').next().unwrap_or("");
    let Some(named) = normal_path(target) else { return false };
    let named = named.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    named == path || named.strip_prefix(path).is_some_and(|rest| rest.starts_with('/'))
}

pub(super) fn hex_decode(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect()
}

pub(super) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn md5_hex(text: &str) -> String {
    use md5::Digest as _;
    hex(&md5::Md5::digest(text.as_bytes()))
}

impl Access {
    /// The `WWW-Authenticate` challenges of a 401 for `path` when a `users` policy guards it
    /// (Digest with a fresh nonce, then Basic); `None` for the other modes.
    pub fn challenges(&self, path: &str, now: SystemTime) -> Option<[String; 2]> {
        let slashed = format!("{path}/");
        let (_, rule) = self.policies.iter().find(|(prefix, _)| slashed.starts_with(prefix.as_str()))?;
        if !matches!(rule, Rule::Users { .. }) {
            return None;
        }
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        Some([
            format!("Digest realm=\"{REALM}\", nonce=\"{}\", algorithm=MD5", self.nonce(now)),
            format!("Basic realm=\"{REALM}\""),
        ])
    }

    /// A Digest nonce: the time it was made and an HMAC of it with the per-process key, so the
    /// server keeps no table of the nonces it gave out.
    pub(super) fn nonce(&self, at: u64) -> String {
        format!("{at:016x}{}", hex(&self.nonce_mac(at)))
    }

    pub(super) fn nonce_mac(&self, at: u64) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.nonce_key)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key"));
        mac.update(format!("sluice-digest-nonce-v1\n{at}").as_bytes());
        mac.finalize().into_bytes()[..16].to_vec()
    }

    /// Whether `nonce` is one of ours and still fresh (checked in constant time).
    pub(super) fn nonce_is_fresh(&self, nonce: &str, now: u64) -> bool {
        let (Some(at), Some(mac)) = (nonce.get(..16), nonce.get(16..)) else { return false };
        let (Ok(at), Some(mac)) = (u64::from_str_radix(at, 16), hex_decode(mac)) else { return false };
        bool::from(self.nonce_mac(at).ct_eq(&mac)) && at <= now && now - at < NONCE_LIFETIME
    }

    pub(super) fn check_user(
        &self,
        users: &BTreeMap<String, Secret>,
        presented: &Presented<'_>,
        now: u64,
    ) -> Result<(), Refusal> {
        use sluice_proto::http::credentials::{basic, digest};
        let Some(authorization) = presented.authorization else { return Err(Refusal::Missing) };
        if let Some((name, password)) = basic(authorization) {
            let good = match users.get(&name) {
                Some(Secret::Plain(p)) => bool::from(p.as_bytes().ct_eq(password.as_bytes())),
                Some(Secret::Sha256(h)) => {
                    use sha2::Digest as _;
                    bool::from(Sha256::digest(password.as_bytes()).as_slice().ct_eq(h))
                }
                Some(Secret::Ha1(h)) => {
                    let ha1 = md5_hex(&format!("{name}:{REALM}:{password}"));
                    bool::from(ha1.as_bytes().ct_eq(hex(h).as_bytes()))
                }
                None => false,
            };
            return self.login(good, 0);
        }
        let Some(d) = digest(authorization) else { return Err(Refusal::Missing) };
        // A stale or foreign nonce gets a new challenge, as if nothing had been presented.
        if !self.nonce_is_fresh(&d.nonce, now) || d.realm != REALM {
            return Err(Refusal::Missing);
        }
        if d.algorithm.as_deref().is_some_and(|a| !a.eq_ignore_ascii_case("MD5")) {
            return Err(Refusal::BadPassword);
        }
        // The response covers its `uri`: it must name the path asked for (or, over RTSP, one of
        // its tracks), so a captured answer opens nothing else while its nonce is fresh.
        if !digest_uri_covers(&d.uri, presented.path) {
            return Err(Refusal::BadPassword);
        }
        let ha1 = match users.get(&d.username) {
            Some(Secret::Plain(p)) => md5_hex(&format!("{}:{REALM}:{p}", d.username)),
            Some(Secret::Ha1(h)) => hex(h),
            Some(Secret::Sha256(_)) | None => return self.login(false, 1),
        };
        let ha2 = md5_hex(&format!("{}:{}", presented.method, d.uri));
        let expected = match (&d.qop, &d.nc, &d.cnonce) {
            (Some(qop), Some(nc), Some(cnonce)) => {
                md5_hex(&format!("{ha1}:{}:{nc}:{cnonce}:{qop}:{ha2}", d.nonce))
            }
            _ => md5_hex(&format!("{ha1}:{}:{ha2}", d.nonce)),
        };
        self.login(bool::from(expected.as_bytes().ct_eq(d.response.to_ascii_lowercase().as_bytes())), 1)
    }

    pub(super) fn login(&self, good: bool, scheme: usize) -> Result<(), Refusal> {
        if !good {
            return Err(Refusal::BadPassword);
        }
        self.logins[scheme].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}
