//! The `signed` policy: the signed-URL format `sluice sign` writes and the server checks (an
//! expiring HMAC-SHA256 over a path or a path prefix, optionally bound to the client's address,
//! keys by id).
//!
//! It does not own which prefix a policy guards (see [`super::Access`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use super::{param, Presented, Refusal};

/// The key id of signatures that name none.
pub(super) const DEFAULT_KID: &str = "";

/// Reads a key file: its bytes, less a trailing newline.
pub fn read_key(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut key = std::fs::read(path)?;
    while key.last().is_some_and(|b| b.is_ascii_whitespace()) {
        key.pop();
    }
    if key.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "the key file is empty"));
    }
    Ok(key)
}

/// What a signature covers: one path, or every path under a prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope<'a> {
    /// Exactly this path.
    Path(&'a str),
    /// Every path starting with this.
    Prefix(&'a str),
}

/// The HMAC-SHA256 of a signed URL: over the scope (its kind included, so a path's signature
/// cannot be passed off as a prefix's), the expiry and the bound address (`-` when unbound).
pub fn signature(key: &[u8], scope: Scope<'_>, expires: u64, ip: Option<IpAddr>) -> Vec<u8> {
    let (kind, text) = match scope {
        Scope::Path(p) => ("path", p),
        Scope::Prefix(p) => ("prefix", p),
    };
    let ip = ip.map_or_else(|| "-".to_string(), |ip| ip.to_string());
    // Any key length is accepted by HMAC.
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap_or_else(|_| unreachable!("HMAC takes any key"));
    mac.update(format!("sluice-signed-url-v1\n{kind}\n{text}\n{expires}\n{ip}").as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Characters escaped in a signed URL's path and parameters.
pub(super) const URL_TEXT: &AsciiSet =
    &NON_ALPHANUMERIC.remove(b'/').remove(b'-').remove(b'_').remove(b'.').remove(b'~');

/// The path and query of a signed URL for `path` (decoded, from the root), as `sluice sign`
/// prints it.
pub fn signed_url(
    key: &[u8],
    kid: Option<&str>,
    path: &str,
    scope: Scope<'_>,
    expires: u64,
    ip: Option<IpAddr>,
) -> String {
    let sig = signature(key, scope, expires, ip);
    let path: String = utf8_percent_encode(path, URL_TEXT).collect();
    format!("{path}?{}", signed_query(kid, scope, expires, ip.is_some(), &sig))
}

/// The query of a signed URL, each parameter percent-encoded: what `sluice sign` prints, and
/// what the server carries on from a URL it checked (so nothing but checked values, one of
/// each, and no character a page, a playlist or a manifest would have to escape).
fn signed_query(kid: Option<&str>, scope: Scope<'_>, expires: u64, bound: bool, sig: &[u8]) -> String {
    let mut query = format!("exp={expires}");
    if let Some(kid) = kid {
        query.push_str(&format!("&kid={}", utf8_percent_encode(kid, URL_TEXT)));
    }
    if let Scope::Prefix(prefix) = scope {
        query.push_str(&format!("&scope={}", utf8_percent_encode(prefix, URL_TEXT)));
    }
    if bound {
        query.push_str("&ip=1");
    }
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sig);
    query.push_str(&format!("&sig={sig}"));
    query
}

/// Whether `presented` carries a good signature for its path: `Ok` with the query to carry on
/// (the checked parameters, written again by [`signed_query`]). Of a parameter sent twice, the
/// first is the one checked.
pub(super) fn check_signed(
    keys: &BTreeMap<String, Vec<u8>>,
    presented: &Presented<'_>,
    now: u64,
) -> Result<String, Refusal> {
    let query = presented.query.unwrap_or("");
    let (Some(sig), Some(exp)) = (param(query, "sig"), param(query, "exp")) else {
        return Err(Refusal::Missing);
    };
    let expires: u64 = exp.parse().map_err(|_| Refusal::BadSignature)?;
    let kid = param(query, "kid");
    let key = keys.get(kid.as_deref().unwrap_or(DEFAULT_KID)).ok_or(Refusal::UnknownKey)?;
    let prefix = param(query, "scope");
    let scope = match &prefix {
        Some(prefix) => Scope::Prefix(prefix),
        None => Scope::Path(presented.path),
    };
    let bound = param(query, "ip").is_some();
    let ip = bound.then_some(presented.peer);
    let given = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(sig.trim_end_matches('='))
        .map_err(|_| Refusal::BadSignature)?;
    let expected = signature(key, scope, expires, ip);
    if !bool::from(expected.ct_eq(&given)) {
        return Err(Refusal::BadSignature);
    }
    // Checked once the signature is known good, so that the reasons say the truth.
    if expires <= now {
        return Err(Refusal::Expired);
    }
    if let Scope::Prefix(prefix) = scope {
        if !presented.path.starts_with(prefix) {
            return Err(Refusal::WrongPrefix);
        }
    }
    Ok(signed_query(kid.as_deref(), scope, expires, bound, &given))
}
