//! Who may read what: the `[[access]]` policies of `sluice.toml`, signed URLs, JWTs and users
//! with passwords.
//!
//! Owns the policies per path prefix (`open`, `signed`, `jwt`, `users`), the users file and the
//! Basic and Digest (RFC 7616, MD5) checks with their stateless expiring nonces, the signature format that
//! `sluice sign` writes and the server checks (an expiring HMAC-SHA256 over a path or a path
//! prefix, optionally bound to the client's address, keys by id), JWT checks against a JWKS file,
//! the refusal reasons counted in `/metrics`, and carrying a URL's credentials on to the URLs a
//! playlist lists. It does not own routing (the app and the RTSP catalogue ask it), limits per
//! client (see [`crate::limits`]) or upload tokens (see [`crate::upload`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use hmac::{Hmac, Mac};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use sluice_proto::lru::Lru;

/// One `[[access]]` entry: the paths under `prefix` and how they are guarded.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AccessPolicy {
    /// URL path prefix, e.g. `/private/`; the longest matching prefix decides.
    pub prefix: String,
    /// `open`, `signed` or `jwt`.
    pub mode: AccessMode,
    /// `signed`: the key of signatures that name no key id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_file: Option<PathBuf>,
    /// `signed`: keys by id (`kid=` in the URL), so keys can be rotated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, PathBuf>,
    /// `jwt`: the JWKS file of the keys tokens are checked with (`oct` for HS256, `RSA` for
    /// RS256, `EC` P-256 for ES256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks: Option<PathBuf>,
    /// `jwt`: the claim listing the path prefixes the token opens.
    #[serde(default = "default_claim")]
    pub claim: String,
    /// `users`: the file of `name:password` lines (or `name:sha256:HEX`, Basic only, or
    /// `name:digest-md5:HEX` of MD5 `name:sluice:password`, Basic and Digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users_file: Option<PathBuf>,
}

fn default_claim() -> String {
    "paths".into()
}

/// How a prefix is guarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum AccessMode {
    /// Anyone may read.
    Open,
    /// A URL signed with one of the policy's keys (`sluice sign`).
    Signed,
    /// A JWT (bearer header or `?jwt=`) checked with the policy's JWKS.
    Jwt,
    /// A user and password of the policy's users file, by Basic or Digest.
    Users,
}

/// A policy that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// A key or JWKS file could not be read.
    #[error("access policy {prefix}: cannot read {path}: {source}")]
    Read {
        /// The policy's prefix.
        prefix: String,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The policy is incomplete or its keys are unusable.
    #[error("access policy {prefix}: {why}")]
    Invalid {
        /// The policy's prefix.
        prefix: String,
        /// Why.
        why: String,
    },
}

/// Why a request was refused; each is counted in `/metrics`. None of them says whether the path
/// exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No signature or token at all (401).
    Missing,
    /// The signature or token expired (403).
    Expired,
    /// The signature does not match (tampered, or made with another key) (403).
    BadSignature,
    /// The signature names a key id the policy does not have (403).
    UnknownKey,
    /// The signature or token covers other paths (403).
    WrongPrefix,
    /// The signature is bound to another client address (403).
    WrongAddress,
    /// The token is malformed, unsigned, not yet valid or signed by no known key (403).
    BadToken,
    /// An unknown user or a wrong password (401: the client may ask its user again).
    BadPassword,
}

impl Refusal {
    /// Every reason, as `/metrics` lists them.
    pub const ALL: [Refusal; 8] = [
        Refusal::Missing,
        Refusal::Expired,
        Refusal::BadSignature,
        Refusal::UnknownKey,
        Refusal::WrongPrefix,
        Refusal::WrongAddress,
        Refusal::BadToken,
        Refusal::BadPassword,
    ];

    /// The reason's label in `/metrics` and the log.
    pub fn name(self) -> &'static str {
        match self {
            Refusal::Missing => "missing",
            Refusal::Expired => "expired",
            Refusal::BadSignature => "bad_signature",
            Refusal::UnknownKey => "unknown_key",
            Refusal::WrongPrefix => "wrong_prefix",
            Refusal::WrongAddress => "wrong_address",
            Refusal::BadToken => "bad_token",
            Refusal::BadPassword => "bad_password",
        }
    }

    /// 401 when nothing was presented or a password was wrong (the client may retry with
    /// credentials), else 403.
    pub fn status(self) -> u16 {
        if matches!(self, Refusal::Missing | Refusal::BadPassword) {
            401
        } else {
            403
        }
    }
}

/// What a request presented: its URL path (decoded, from the root), its query, its bearer token
/// and who sent it.
#[derive(Debug, Clone, Copy)]
pub struct Presented<'a> {
    /// `/films/a.mp4/master.m3u8`, decoded and normalised.
    pub path: &'a str,
    /// The raw query string, if any.
    pub query: Option<&'a str>,
    /// A token from `Authorization: Bearer` (or an RTSP Basic password).
    pub bearer: Option<&'a str>,
    /// The client's address.
    pub peer: IpAddr,
    /// The whole `Authorization` header (Basic and Digest for `users`).
    pub authorization: Option<&'a str>,
    /// The request's method (`GET`, `DESCRIBE`…), which a Digest response covers.
    pub method: &'a str,
}

/// The answer to [`Access::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; `carry` is the query to append to the URLs a playlist lists (the URL's own
    /// credentials), when they came in the URL.
    Allowed {
        /// `exp=…&sig=…` or `jwt=…`, as the client sent it.
        carry: Option<String>,
    },
    /// Refused, for this reason.
    Refused(Refusal),
}

/// The query parameters a signed URL carries.
pub const SIGNED_PARAMS: [&str; 5] = ["exp", "kid", "scope", "ip", "sig"];
/// The query parameter carrying a JWT.
pub const JWT_PARAM: &str = "jwt";

/// The policies in force, with their keys loaded.
pub struct Access {
    /// Longest prefix first.
    policies: Vec<(String, Rule)>,
    refusals: [AtomicU64; Refusal::ALL.len()],
    /// Users let in, by scheme: Basic, Digest.
    logins: [AtomicU64; 2],
    /// The per-process key of Digest nonces.
    nonce_key: [u8; 32],
    /// When each client's last refusal was logged (one line a second at most per client).
    logged: Mutex<Lru<IpAddr, Instant>>,
}

/// Clients whose last refusal time is remembered, for the log's once-a-second bound.
const LOGGED_CLIENTS: u64 = 4096;

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("prefixes", &self.policies.iter().map(|p| &p.0).collect::<Vec<_>>())
            .finish()
    }
}

enum Rule {
    Open,
    Signed { keys: BTreeMap<String, Vec<u8>> },
    Jwt { keys: Vec<JwtKey>, claim: String },
    Users { users: BTreeMap<String, Secret> },
}

/// What the users file holds of a user's password.
enum Secret {
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
const NONCE_LIFETIME: u64 = 300;

/// Reads a users file: `name:password` lines, `name:sha256:HEX` or `name:digest-md5:HEX`;
/// blank lines and `#` comments skipped.
fn read_users(text: &str) -> Result<BTreeMap<String, Secret>, String> {
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
fn digest_uri_covers(uri: &str, path: &str) -> bool {
    let without_scheme =
        uri.split_once("://").map_or(uri, |(_, rest)| rest.find('/').map_or("/", |i| &rest[i..]));
    let target = without_scheme.split('?').next().unwrap_or("");
    let Some(named) = normal_path(target) else { return false };
    let named = named.trim_end_matches('/');
    let path = path.trim_end_matches('/');
    named == path || named.strip_prefix(path).is_some_and(|rest| rest.starts_with('/'))
}

fn hex_decode(h: &str) -> Option<Vec<u8>> {
    if !h.len().is_multiple_of(2) {
        return None;
    }
    (0..h.len()).step_by(2).map(|i| u8::from_str_radix(h.get(i..i + 2)?, 16).ok()).collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn md5_hex(text: &str) -> String {
    use md5::Digest as _;
    hex(&md5::Md5::digest(text.as_bytes()))
}

struct JwtKey {
    kid: Option<String>,
    algorithm: jsonwebtoken::Algorithm,
    key: jsonwebtoken::DecodingKey,
}

/// The key id of signatures that name none.
const DEFAULT_KID: &str = "";

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

impl Access {
    /// Loads `policies`' keys; a policy with no usable key is an error, so a typo cannot leave
    /// a prefix open or shut.
    pub fn load(policies: &[AccessPolicy]) -> Result<Access, AccessError> {
        let mut loaded = Vec::new();
        for p in policies {
            let invalid = |why: &str| AccessError::Invalid { prefix: p.prefix.clone(), why: why.into() };
            let read = |path: &Path| {
                let (prefix, path) = (p.prefix.clone(), path.to_owned());
                move |source| AccessError::Read { prefix, path, source }
            };
            if !p.prefix.starts_with('/') {
                return Err(invalid("the prefix must start with /"));
            }
            let rule = match p.mode {
                AccessMode::Open => Rule::Open,
                AccessMode::Signed => {
                    let mut keys = BTreeMap::new();
                    let named = p
                        .key_file
                        .iter()
                        .map(|f| (DEFAULT_KID, f))
                        .chain(p.keys.iter().map(|(k, f)| (k.as_str(), f)));
                    for (kid, file) in named {
                        let key = read_key(file).map_err(read(file))?;
                        keys.insert(kid.to_string(), key);
                    }
                    if keys.is_empty() {
                        return Err(invalid("mode = \"signed\" needs key_file or keys"));
                    }
                    Rule::Signed { keys }
                }
                AccessMode::Jwt => {
                    let file = p.jwks.as_deref().ok_or_else(|| invalid("mode = \"jwt\" needs jwks"))?;
                    let text = std::fs::read_to_string(file).map_err(read(file))?;
                    let keys = jwks_keys(&text).map_err(|why| invalid(&why))?;
                    Rule::Jwt { keys, claim: p.claim.clone() }
                }
                AccessMode::Users => {
                    let file = p
                        .users_file
                        .as_deref()
                        .ok_or_else(|| invalid("mode = \"users\" needs users_file"))?;
                    let text = std::fs::read_to_string(file).map_err(read(file))?;
                    Rule::Users { users: read_users(&text).map_err(|why| invalid(&why))? }
                }
            };
            loaded.push((p.prefix.clone(), rule));
        }
        Ok(Access::with_rules(loaded))
    }

    fn with_rules(mut policies: Vec<(String, Rule)>) -> Access {
        policies.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        let mut nonce_key = [0u8; 32];
        // Without randomness the key is still secret enough to stop forged nonces from outside
        // the host; the expiry still bounds replays.
        if getrandom::fill(&mut nonce_key).is_err() {
            let t = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
            nonce_key[..16].copy_from_slice(&t.to_le_bytes());
        }
        Access {
            policies,
            refusals: Default::default(),
            logins: Default::default(),
            nonce_key,
            logged: Mutex::new(Lru::new(LOGGED_CLIENTS)),
        }
    }

    /// Whether any policy guards anything (else every check is skipped).
    pub fn is_open(&self) -> bool {
        self.policies.iter().all(|(_, rule)| matches!(rule, Rule::Open))
    }

    /// Whether `presented` may read its path.
    pub fn check(&self, presented: &Presented<'_>, now: SystemTime) -> Decision {
        let decision = self.decide(presented, now);
        if let Decision::Refused(reason) = decision {
            if let Some(i) = Refusal::ALL.iter().position(|r| *r == reason) {
                self.refusals[i].fetch_add(1, Ordering::Relaxed);
            }
            self.log(presented, reason);
        }
        decision
    }

    fn decide(&self, presented: &Presented<'_>, now: SystemTime) -> Decision {
        // "/private" (a directory without its slash) is under "/private/" too.
        let slashed = format!("{}/", presented.path);
        let Some((_, rule)) = self.policies.iter().find(|(prefix, _)| slashed.starts_with(prefix.as_str()))
        else {
            return Decision::Allowed { carry: None };
        };
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        match rule {
            Rule::Open => Decision::Allowed { carry: None },
            Rule::Signed { keys } => match check_signed(keys, presented, now) {
                Ok(()) => Decision::Allowed { carry: carried(presented.query, &SIGNED_PARAMS) },
                Err(reason) => Decision::Refused(reason),
            },
            Rule::Users { users } => match self.check_user(users, presented, now) {
                Ok(()) => Decision::Allowed { carry: None },
                Err(reason) => Decision::Refused(reason),
            },
            Rule::Jwt { keys, claim } => {
                let from_query = presented.query.and_then(|q| param(q, JWT_PARAM));
                let Some(token) = from_query.as_deref().or(presented.bearer) else {
                    return Decision::Refused(Refusal::Missing);
                };
                match check_jwt(keys, claim, token, presented.path) {
                    Ok(()) => Decision::Allowed {
                        carry: from_query.is_some().then(|| carried(presented.query, &[JWT_PARAM])).flatten(),
                    },
                    Err(reason) => Decision::Refused(reason),
                }
            }
        }
    }

    /// One line per refusal, at most once a second per client (a client hammering a guarded
    /// path must not flood the log).
    fn log(&self, presented: &Presented<'_>, reason: Refusal) {
        let now = Instant::now();
        let mut logged = self.logged.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if logged
            .get(&presented.peer)
            .is_some_and(|last| now.saturating_duration_since(*last) < Duration::from_secs(1))
        {
            return;
        }
        logged.insert(presented.peer, now, 1);
        drop(logged);
        tracing::info!(target: "sluice::access", peer = %presented.peer, path = presented.path,
            reason = reason.name(), status = reason.status(), "refused: {}", reason.name());
    }

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
    fn nonce(&self, at: u64) -> String {
        format!("{at:016x}{}", hex(&self.nonce_mac(at)))
    }

    fn nonce_mac(&self, at: u64) -> Vec<u8> {
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.nonce_key)
            .unwrap_or_else(|_| unreachable!("HMAC takes any key"));
        mac.update(format!("sluice-digest-nonce-v1\n{at}").as_bytes());
        mac.finalize().into_bytes()[..16].to_vec()
    }

    /// Whether `nonce` is one of ours and still fresh (checked in constant time).
    fn nonce_is_fresh(&self, nonce: &str, now: u64) -> bool {
        let (Some(at), Some(mac)) = (nonce.get(..16), nonce.get(16..)) else { return false };
        let (Ok(at), Some(mac)) = (u64::from_str_radix(at, 16), hex_decode(mac)) else { return false };
        bool::from(self.nonce_mac(at).ct_eq(&mac)) && at <= now && now - at < NONCE_LIFETIME
    }

    fn check_user(
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

    fn login(&self, good: bool, scheme: usize) -> Result<(), Refusal> {
        if !good {
            return Err(Refusal::BadPassword);
        }
        self.logins[scheme].fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Users let in so far by Basic and by Digest.
    pub fn logins(&self) -> [(&'static str, u64); 2] {
        [
            ("basic", self.logins[0].load(Ordering::Relaxed)),
            ("digest", self.logins[1].load(Ordering::Relaxed)),
        ]
    }

    /// Refusals so far, by reason.
    pub fn refusals(&self) -> impl Iterator<Item = (Refusal, u64)> + '_ {
        Refusal::ALL.iter().zip(&self.refusals).map(|(r, n)| (*r, n.load(Ordering::Relaxed)))
    }
}

pub use sluice_proto::http::credentials::{credential, param};

/// The path policies and signatures speak of for a request's normalised path: `/` and the
/// decoded path, with a trailing `/` for a directory.
pub fn request_path(path: &sluice_proto::http::path::LibraryPath) -> String {
    match path.relative() {
        "" => "/".to_string(),
        rel if path.names_directory() => format!("/{rel}/"),
        rel => format!("/{rel}"),
    }
}

/// [`request_path`] of a URL path as a user gives it to `sluice sign` (percent-encoding
/// allowed); `None` when it does not normalise (it leaves the root, or is malformed).
pub fn normal_path(raw: &str) -> Option<String> {
    let raw = if raw.starts_with('/') { raw.to_string() } else { format!("/{raw}") };
    sluice_proto::http::path::normalize(&raw).ok().map(|p| request_path(&p))
}

/// The prefix one signature needs to cover a title's HLS and DASH resources, its rendition set
/// and its subtitles sidecars: the folder holding the title (`/films/` for
/// `/films/a.mp4/master.m3u8`, `/films/a.mp4` or `/films/a.set/manifest.mpd`).
pub fn title_folder(path: &str) -> String {
    let parent = |p: &str| p.rsplit_once('/').map_or(String::new(), |(dir, _)| dir.to_string());
    let mut dir = parent(path.trim_end_matches('/'));
    let lower = dir.to_ascii_lowercase();
    if lower.ends_with(".mp4") || lower.ends_with(crate::renditions::SET_SUFFIX) {
        dir = parent(&dir);
    }
    format!("{dir}/")
}

/// The parameters of `query` named in `names`, as sent, joined again.
fn carried(query: Option<&str>, names: &[&str]) -> Option<String> {
    let kept: Vec<&str> = query?
        .split('&')
        .filter(|pair| names.contains(&pair.split_once('=').map_or(*pair, |(k, _)| k)))
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
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
const URL_TEXT: &AsciiSet =
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
    let sig = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(signature(key, scope, expires, ip));
    let mut url: String = utf8_percent_encode(path, URL_TEXT).collect();
    url.push_str(&format!("?exp={expires}"));
    if let Some(kid) = kid {
        url.push_str(&format!("&kid={}", utf8_percent_encode(kid, URL_TEXT)));
    }
    if let Scope::Prefix(prefix) = scope {
        url.push_str(&format!("&scope={}", utf8_percent_encode(prefix, URL_TEXT)));
    }
    if ip.is_some() {
        url.push_str("&ip=1");
    }
    url.push_str(&format!("&sig={sig}"));
    url
}

fn check_signed(
    keys: &BTreeMap<String, Vec<u8>>,
    presented: &Presented<'_>,
    now: u64,
) -> Result<(), Refusal> {
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
    let ip = param(query, "ip").is_some().then_some(presented.peer);
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
    Ok(())
}

fn jwks_keys(text: &str) -> Result<Vec<JwtKey>, String> {
    use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
    use jsonwebtoken::Algorithm;
    let set: JwkSet = serde_json::from_str(text).map_err(|e| format!("the JWKS does not parse: {e}"))?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::OctetKey(_) => Algorithm::HS256,
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => Algorithm::ES256,
            _ => return Err("only oct (HS256), RSA (RS256) and EC P-256 (ES256) keys are supported".into()),
        };
        let key = jsonwebtoken::DecodingKey::from_jwk(jwk).map_err(|e| format!("a key is unusable: {e}"))?;
        keys.push(JwtKey { kid: jwk.common.key_id.clone(), algorithm, key });
    }
    if keys.is_empty() {
        return Err("the JWKS holds no key".into());
    }
    Ok(keys)
}

fn check_jwt(keys: &[JwtKey], claim: &str, token: &str, path: &str) -> Result<(), Refusal> {
    // `alg: none` and unknown algorithms fail here: the header names no algorithm we accept.
    let header = jsonwebtoken::decode_header(token).map_err(|_| Refusal::BadToken)?;
    let candidates =
        keys.iter().filter(|k| k.algorithm == header.alg && (header.kid.is_none() || k.kid == header.kid));
    for key in candidates {
        let mut validation = jsonwebtoken::Validation::new(key.algorithm);
        validation.validate_nbf = true;
        validation.validate_aud = false;
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp"]);
        match jsonwebtoken::decode::<serde_json::Value>(token, &key.key, &validation) {
            Ok(data) => {
                let allowed: Vec<&str> = match data.claims.get(claim) {
                    Some(serde_json::Value::String(s)) => vec![s.as_str()],
                    Some(serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_str()).collect(),
                    _ => Vec::new(),
                };
                return if allowed.iter().any(|p| path.starts_with(p)) {
                    Ok(())
                } else {
                    Err(Refusal::WrongPrefix)
                };
            }
            Err(e) => match e.kind() {
                jsonwebtoken::errors::ErrorKind::ExpiredSignature => return Err(Refusal::Expired),
                jsonwebtoken::errors::ErrorKind::InvalidSignature => continue,
                _ => return Err(Refusal::BadToken),
            },
        }
    }
    Err(Refusal::BadToken)
}

/// `uri` with `carry` appended to its query.
fn with_query(uri: &str, carry: &str) -> String {
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

fn carry_into_attributes(text: &str, open: &str, carry: &str, close: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use percent_encoding::percent_decode_str;

    const NOW: u64 = 1_800_000_000;

    fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    fn signed(keys: &[(&str, &[u8])]) -> Access {
        let keys = keys.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect();
        Access::with_rules(vec![("/private/".into(), Rule::Signed { keys }), ("/".into(), Rule::Open)])
    }

    fn ask(access: &Access, url: &str, peer: [u8; 4]) -> Decision {
        let (path, query) = url.split_once('?').map_or((url, None), |(p, q)| (p, Some(q)));
        let path = percent_decode_str(path).decode_utf8_lossy();
        access.check(
            &Presented {
                path: &path,
                query,
                bearer: None,
                peer: IpAddr::from(peer),
                authorization: None,
                method: "GET",
            },
            at(NOW),
        )
    }

    const LOCAL: [u8; 4] = [127, 0, 0, 1];

    #[test]
    fn a_signed_path_opens_that_path_until_it_expires() {
        let access = signed(&[("", b"secret")]);
        let url =
            signed_url(b"secret", None, "/private/a b.mp4", Scope::Path("/private/a b.mp4"), NOW + 60, None);
        assert!(url.starts_with("/private/a%20b.mp4?exp="), "{url}");
        assert_eq!(
            ask(&access, &url, LOCAL),
            Decision::Allowed { carry: Some(url.split_once('?').unwrap().1.into()) }
        );
        let other = url.replace("a%20b.mp4", "c.mp4");
        assert_eq!(ask(&access, &other, LOCAL), Decision::Refused(Refusal::BadSignature));
        let expired = signed_url(b"secret", None, "/private/x", Scope::Path("/private/x"), NOW, None);
        assert_eq!(ask(&access, &expired, LOCAL), Decision::Refused(Refusal::Expired));
        assert_eq!(ask(&access, "/private/a%20b.mp4", LOCAL), Decision::Refused(Refusal::Missing));
        assert_eq!(ask(&access, "/private", LOCAL), Decision::Refused(Refusal::Missing), "the folder itself");
        assert_eq!(ask(&access, "/public.mp4", LOCAL), Decision::Allowed { carry: None });
        let tampered = url.replace(&format!("exp={}", NOW + 60), &format!("exp={}", NOW + 6000));
        assert_eq!(ask(&access, &tampered, LOCAL), Decision::Refused(Refusal::BadSignature));
    }

    #[test]
    fn a_prefix_signature_covers_its_prefix_only_and_cannot_pass_for_a_path() {
        let access = signed(&[("", b"secret")]);
        let url = signed_url(
            b"secret",
            None,
            "/private/a.mp4/master.m3u8",
            Scope::Prefix("/private/a.mp4/"),
            NOW + 60,
            None,
        );
        let query = url.split_once('?').unwrap().1;
        assert!(matches!(ask(&access, &url, LOCAL), Decision::Allowed { .. }));
        assert!(matches!(
            ask(&access, &format!("/private/a.mp4/seg-3.m4s?{query}"), LOCAL),
            Decision::Allowed { .. }
        ));
        assert_eq!(
            ask(&access, &format!("/private/b.mp4?{query}"), LOCAL),
            Decision::Refused(Refusal::WrongPrefix)
        );
        // A path's signature, given a scope, does not verify.
        let path_sig = signed_url(b"secret", None, "/private/a", Scope::Path("/private/a"), NOW + 60, None);
        let as_prefix = format!("{}&scope=/private/a", path_sig.replace("/private/a?", "/private/a.mp4?"));
        assert_eq!(ask(&access, &as_prefix, LOCAL), Decision::Refused(Refusal::BadSignature));
    }

    #[test]
    fn keys_go_by_id_and_addresses_bind() {
        let access = signed(&[("", b"old"), ("k2", b"new")]);
        let new = signed_url(b"new", Some("k2"), "/private/a", Scope::Path("/private/a"), NOW + 60, None);
        assert!(matches!(ask(&access, &new, LOCAL), Decision::Allowed { .. }));
        let wrong_key =
            signed_url(b"other", Some("k2"), "/private/a", Scope::Path("/private/a"), NOW + 60, None);
        assert_eq!(ask(&access, &wrong_key, LOCAL), Decision::Refused(Refusal::BadSignature));
        let unknown = signed_url(b"new", Some("k9"), "/private/a", Scope::Path("/private/a"), NOW + 60, None);
        assert_eq!(ask(&access, &unknown, LOCAL), Decision::Refused(Refusal::UnknownKey));
        let bound = signed_url(
            b"old",
            None,
            "/private/a",
            Scope::Path("/private/a"),
            NOW + 60,
            Some(IpAddr::from(LOCAL)),
        );
        assert!(matches!(ask(&access, &bound, LOCAL), Decision::Allowed { .. }));
        assert_eq!(ask(&access, &bound, [127, 0, 0, 2]), Decision::Refused(Refusal::BadSignature));
        let counted: u64 = access.refusals().map(|(_, n)| n).sum();
        assert_eq!(counted, 3);
    }

    #[test]
    fn the_longest_prefix_decides() {
        let keys = [(String::new(), b"k".to_vec())].into_iter().collect();
        let access = Access::with_rules(vec![
            ("/private/".into(), Rule::Signed { keys }),
            ("/private/free/".into(), Rule::Open),
        ]);
        assert_eq!(ask(&access, "/private/free/a.mp4", LOCAL), Decision::Allowed { carry: None });
        assert_eq!(ask(&access, "/private/freex", LOCAL), Decision::Refused(Refusal::Missing));
    }

    #[test]
    fn jwts_are_checked_against_the_jwks() {
        use jsonwebtoken::{encode, EncodingKey, Header};
        let secret = b"jwt-secret-of-32-bytes-or-more!!";
        let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
        let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"h1","k":"{k}"}}]}}"#);
        let access = Access::with_rules(vec![(
            "/members/".into(),
            Rule::Jwt { keys: jwks_keys(&jwks).unwrap(), claim: "paths".into() },
        )]);
        let token = |exp: u64, paths: &[&str], kid: &str| {
            let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
            header.kid = Some(kid.into());
            let claims = serde_json::json!({ "exp": exp, "paths": paths });
            encode(&header, &claims, &EncodingKey::from_secret(secret)).unwrap()
        };
        let far = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600;
        let ok = token(far, &["/members/a"], "h1");
        let now = SystemTime::now();
        let ask = |path: &str, query: Option<&str>, bearer: Option<&str>| {
            access.check(
                &Presented {
                    path,
                    query,
                    bearer,
                    peer: IpAddr::from(LOCAL),
                    authorization: None,
                    method: "GET",
                },
                now,
            )
        };
        assert_eq!(ask("/members/a.mp4", None, Some(&ok)), Decision::Allowed { carry: None });
        let q = format!("jwt={ok}");
        assert_eq!(ask("/members/a.mp4", Some(&q), None), Decision::Allowed { carry: Some(q.clone()) });
        assert_eq!(ask("/members/b.mp4", Some(&q), None), Decision::Refused(Refusal::WrongPrefix));
        assert_eq!(ask("/members/a.mp4", None, None), Decision::Refused(Refusal::Missing));
        let expired = token(1_000_000, &["/members/"], "h1");
        assert_eq!(ask("/members/a.mp4", None, Some(&expired)), Decision::Refused(Refusal::Expired));
        // alg: none, with the same claims and no signature.
        let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let none = format!(
            "{}.{}.",
            b64(r#"{"alg":"none","typ":"JWT"}"#),
            b64(&format!(r#"{{"exp":{far},"paths":["/"]}}"#))
        );
        assert_eq!(ask("/members/a.mp4", None, Some(&none)), Decision::Refused(Refusal::BadToken));
        let forged = token(far, &["/"], "h1");
        let forged = format!("{}x", &forged[..forged.len() - 1]);
        assert_eq!(ask("/members/a.mp4", None, Some(&forged)), Decision::Refused(Refusal::BadToken));
    }

    #[test]
    fn users_pass_by_basic_and_digest_with_fresh_nonces_only() {
        use sluice_proto::http::credentials::{digest, DigestCredentials};
        let ha1 = md5_hex(&format!("bo:{REALM}:hashed"));
        let sha = {
            use sha2::Digest as _;
            hex(&Sha256::digest(b"shaw"))
        };
        let text = format!("# viewers\nann:se:cret\nbo:digest-md5:{ha1}\ncy:sha256:{sha}\n");
        let access =
            Access::with_rules(vec![("/".into(), Rule::Users { users: read_users(&text).unwrap() })]);
        let now = SystemTime::now();
        let ask = |authorization: Option<&str>, method: &str| {
            let presented = Presented {
                path: "/a.mp4",
                query: None,
                bearer: None,
                peer: IpAddr::from(LOCAL),
                authorization,
                method,
            };
            access.check(&presented, now)
        };
        let b64 = |s: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s));
        let allowed = Decision::Allowed { carry: None };
        assert_eq!(ask(Some(&b64("ann:se:cret")), "GET"), allowed);
        assert_eq!(ask(Some(&b64("bo:hashed")), "GET"), allowed);
        assert_eq!(ask(Some(&b64("cy:shaw")), "GET"), allowed);
        assert_eq!(ask(Some(&b64("ann:wrong")), "GET"), Decision::Refused(Refusal::BadPassword));
        assert_eq!(ask(Some(&b64("nobody:x")), "GET"), Decision::Refused(Refusal::BadPassword));
        assert_eq!(ask(None, "GET"), Decision::Refused(Refusal::Missing));
        let [offer, _] = access.challenges("/a.mp4", now).unwrap();
        let nonce = offer.split('"').nth(3).unwrap().to_string();
        let answer = |user: &str, password: &str, nonce: &str| {
            let ha1 = md5_hex(&format!("{user}:{REALM}:{password}"));
            let uri = "rtsp://127.0.0.1/a.mp4";
            let response = md5_hex(&format!("{ha1}:{nonce}:{}", md5_hex(&format!("DESCRIBE:{uri}"))));
            let d = DigestCredentials {
                username: user.into(),
                realm: REALM.into(),
                nonce: nonce.into(),
                uri: uri.into(),
                response,
                ..Default::default()
            };
            assert!(digest(&d.header()).is_some());
            d.header()
        };
        assert_eq!(ask(Some(&answer("ann", "se:cret", &nonce)), "DESCRIBE"), allowed);
        assert_eq!(ask(Some(&answer("bo", "hashed", &nonce)), "DESCRIBE"), allowed);
        assert_eq!(
            ask(Some(&answer("ann", "se:cret", &nonce)), "SETUP"),
            Decision::Refused(Refusal::BadPassword),
            "the method is covered"
        );
        assert_eq!(
            ask(Some(&answer("ann", "nope", &nonce)), "DESCRIBE"),
            Decision::Refused(Refusal::BadPassword)
        );
        assert!(digest_uri_covers("rtsp://h:1/a.mp4/trackID=1", "/a.mp4"));
        assert!(digest_uri_covers("/films/?x=1", "/films/"));
        assert!(!digest_uri_covers("rtsp://h/a.mp4x", "/a.mp4") && !digest_uri_covers("/b.mp4", "/a.mp4"));
        assert_eq!(
            ask(Some(&answer("cy", "shaw", &nonce)), "DESCRIBE"),
            Decision::Refused(Refusal::BadPassword),
            "a SHA-256 entry cannot answer Digest"
        );
        let old = access.nonce(1_000);
        assert_eq!(
            ask(Some(&answer("ann", "se:cret", &old)), "DESCRIBE"),
            Decision::Refused(Refusal::Missing)
        );
        let forged = format!("{}{}", &nonce[..15], "f".repeat(nonce.len() - 15));
        assert_eq!(
            ask(Some(&answer("ann", "se:cret", &forged)), "DESCRIBE"),
            Decision::Refused(Refusal::Missing)
        );
        assert_eq!(access.logins(), [("basic", 3), ("digest", 2)]);
        assert!(
            read_users("ann").is_err() && read_users("bo:sha256:zz").is_err() && read_users("\n").is_err()
        );
    }

    #[test]
    fn a_titles_folder_covers_its_packaging_sets_and_sidecars() {
        assert_eq!(title_folder("/films/a.mp4/master.m3u8"), "/films/");
        assert_eq!(title_folder("/films/a.mp4"), "/films/");
        assert_eq!(title_folder("/films/t.set/manifest.mpd"), "/films/");
        assert_eq!(title_folder("/a.mp4"), "/");
        assert_eq!(normal_path("films/a%20b.mp4").as_deref(), Some("/films/a b.mp4"));
        assert_eq!(normal_path("/../x"), None);
    }

    #[test]
    fn es256_keys_from_the_jwks_verify_and_cannot_be_used_as_hmac_secrets() {
        use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
        use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        let public = pair.public_key().as_ref();
        let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
        let (x, y) = (b64(&public[1..33]), b64(&public[33..65]));
        let jwks = format!(r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"e1","x":"{x}","y":"{y}"}}]}}"#);
        let access = Access::with_rules(vec![(
            "/".into(),
            Rule::Jwt { keys: jwks_keys(&jwks).unwrap(), claim: "paths".into() },
        )]);
        let far = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600;
        let claims = serde_json::json!({ "exp": far, "paths": ["/films/"] });
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("e1".into());
        let token = encode(&header, &claims, &EncodingKey::from_ec_der(pkcs8.as_ref())).unwrap();
        let ask = |token: &str| {
            let presented = Presented {
                path: "/films/a.mp4",
                query: None,
                bearer: Some(token),
                peer: IpAddr::from(LOCAL),
                authorization: None,
                method: "GET",
            };
            access.check(&presented, SystemTime::now())
        };
        assert_eq!(ask(&token), Decision::Allowed { carry: None });
        // The public key as an HMAC secret (the classic algorithm confusion) opens nothing.
        let mut hs = Header::new(Algorithm::HS256);
        hs.kid = Some("e1".into());
        let confused = encode(&hs, &claims, &EncodingKey::from_secret(public)).unwrap();
        assert_eq!(ask(&confused), Decision::Refused(Refusal::BadToken));
    }

    #[test]
    fn playlists_carry_the_credentials_on() {
        let m3u8 = "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,URI=\"audio.m3u8\",GROUP-ID=\"a\"\n#EXT-X-STREAM-INF:BANDWIDTH=1\nvideo.m3u8\n\n#EXT-X-MAP:URI=\"../x.mp4/init.mp4\"\nseg-0.m4s\n";
        let out = carry_into_m3u8(m3u8, "exp=1&sig=s");
        assert!(out.contains("URI=\"audio.m3u8?exp=1&sig=s\""), "{out}");
        assert!(out.contains("\nvideo.m3u8?exp=1&sig=s\n"), "{out}");
        assert!(out.contains("URI=\"../x.mp4/init.mp4?exp=1&sig=s\""), "{out}");
        assert!(out.ends_with("\nseg-0.m4s?exp=1&sig=s\n"), "{out}");
        let mpd = "<SegmentTemplate initialization=\"v-init.mp4\" media=\"v-seg-$Number$.m4s\"/><BaseURL>../a.en.vtt</BaseURL>";
        let out = carry_into_mpd(mpd, "exp=1&sig=s");
        assert!(out.contains("initialization=\"v-init.mp4?exp=1&amp;sig=s\""), "{out}");
        assert!(out.contains("media=\"v-seg-$Number$.m4s?exp=1&amp;sig=s\""), "{out}");
        assert!(out.contains("<BaseURL>../a.en.vtt?exp=1&amp;sig=s</BaseURL>"), "{out}");
        let page = "<a href=\"../\">up</a><a href=\"./shows/\">shows/</a><button data-src=\"./a.mp4\" data-hls=\"./a.mp4/master.m3u8\">";
        let out = carry_into_page(page, "exp=1&sig=s");
        assert!(out.contains("href=\"./shows/?exp=1&amp;sig=s\""), "{out}");
        assert!(out.contains("data-src=\"./a.mp4?exp=1&amp;sig=s\""), "{out}");
        assert!(out.contains("data-hls=\"./a.mp4/master.m3u8?exp=1&amp;sig=s\""), "{out}");
        assert!(out.contains("href=\"../\""), "the way up leaves the signed folder: {out}");
    }
}
