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

use super::{normal_path, Access, Presented, Refusal, Rule, Target};

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

/// Whether a Digest `uri` names the request's target, so that a captured answer opens nothing
/// but what it was computed for. Over HTTP it must be the request-target itself, query included
/// (RFC 7616 §3.4.6), both taken in origin form (a proxy may send the absolute form). Over RTSP
/// it must name the same path and query, or, for a track URL (`…/trackID=1`, as the SDP's
/// `a=control` hands them out), its presentation's URL, query or not: some clients answer a
/// track's `SETUP` with the URL they described, and the track URLs drop the described URL's
/// query (see the `DESCRIBE`'s `Content-Base`).
pub(super) fn digest_uri_names(uri: &str, target: Target<'_>) -> bool {
    match target {
        Target::Http(target) => origin_form(uri).is_some_and(|named| Some(named) == origin_form(target)),
        Target::Rtsp(target) => {
            let Some(((named, named_query), (asked, asked_query))) =
                origin_form(uri).map(split_query).zip(origin_form(target).map(split_query))
            else {
                return false;
            };
            let (Some(named), Some(asked)) = (normal_path(named), normal_path(asked)) else { return false };
            let (named, asked) = (named.trim_end_matches('/'), asked.trim_end_matches('/'));
            (named == asked && named_query == asked_query) || presentation_of_track(asked) == Some(named)
        }
    }
}

/// The path and query of a request-target or URL (`/films/a.mp4?x`): itself in origin form, the
/// part from the path on in absolute form (`rtsp://host:8554/films/a.mp4?x`); `None` for an
/// absolute URL without a path.
fn origin_form(uri: &str) -> Option<&str> {
    if uri.starts_with('/') {
        return Some(uri);
    }
    let (_, rest) = uri.split_once("://")?;
    let path = rest.find(['/', '?', '#'])?;
    rest[path..].starts_with('/').then(|| &rest[path..])
}

fn split_query(origin_form: &str) -> (&str, Option<&str>) {
    match origin_form.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (origin_form, None),
    }
}

/// The presentation a track URL's path belongs to (`/films/a.mp4` of `/films/a.mp4/trackID=1`).
fn presentation_of_track(path: &str) -> Option<&str> {
    let (presentation, last) = path.rsplit_once('/')?;
    let index = last.strip_prefix(sluice_media::sdp::TRACK_CONTROL)?;
    (!index.is_empty() && index.bytes().all(|b| b.is_ascii_digit())).then_some(presentation)
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

pub(crate) fn md5_hex(text: &str) -> String {
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
        // The response covers its `uri`: it must name what was asked for, so a captured answer
        // opens nothing else while its nonce is fresh.
        if !digest_uri_names(&d.uri, presented.target) {
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
