//! Who may read what: the `[[access]]` policies of `sluice.toml`, signed URLs, JWTs and users
//! with passwords.
//!
//! Owns the policies per path prefix (`open`, `signed`, `jwt`, `users`): loading them, deciding
//! a request by the longest matching prefix, and the refusal reasons counted in `/metrics`. Each
//! mode's own checks are a child module: [`users`] (the users file, Basic and Digest with
//! stateless expiring nonces), [`signed`] (the signature format `sluice sign` writes), [`jwt`]
//! (JWKS keys and tokens), and [`carry`] carries a URL's credentials on to the URLs a playlist
//! lists. It does not own routing (the app and the RTSP catalogue ask it), limits per client
//! (see [`crate::http::limits`]) or upload tokens (see [`crate::http::upload`]).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

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
    /// `jwt`: the claim listing the path prefixes the token opens (`paths` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// `users`: the file of `name:password` lines (or `name:sha256:HEX`, Basic only, or
    /// `name:digest-md5:HEX` of MD5 `name:sluice:password`, Basic and Digest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub users_file: Option<PathBuf>,
    /// Whether the paths under `prefix` may be published to (RTSP `ANNOUNCE`), by whoever the
    /// policy's mode lets read them. Publishing anywhere else is refused (403).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub publish: bool,
}

/// The claim a `jwt` policy reads when it names none.
pub const DEFAULT_CLAIM: &str = "paths";

impl AccessPolicy {
    /// The keys set that belong to another mode, by name: a `jwks` on a `signed` policy is a
    /// mistake (the operator meant another mode, or another prefix), not something to ignore.
    fn stray_keys(&self) -> Vec<&'static str> {
        let set = [
            ("key_file", self.key_file.is_some()),
            ("keys", !self.keys.is_empty()),
            ("jwks", self.jwks.is_some()),
            ("claim", self.claim.is_some()),
            ("users_file", self.users_file.is_some()),
        ];
        let own: &[&str] = match self.mode {
            AccessMode::Open => &[],
            AccessMode::Signed => &["key_file", "keys"],
            AccessMode::Jwt => &["jwks", "claim"],
            AccessMode::Users => &["users_file"],
        };
        set.iter().filter(|(key, is_set)| *is_set && !own.contains(key)).map(|(key, _)| *key).collect()
    }
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
    /// The request's target as its request line sent it, which a Digest response must name.
    pub target: Target<'a>,
}

/// A request's target as its request line sent it: what a Digest answer must name.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// An HTTP request-target (`/films/a.mp4/master.m3u8?x=1`, or absolute-form).
    Http(&'a str),
    /// An RTSP request URL (`rtsp://host:8554/films/a.mp4/trackID=1`).
    Rtsp(&'a str),
}

/// The answer to [`Access::check`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Allowed; `carry` is the query to append to the URLs a playlist lists (the URL's own
    /// credentials), when they came in the URL.
    Allowed {
        /// `exp=…&sig=…` or `jwt=…`: only the parameters that were checked, one of each (the
        /// one checked), written again percent-encoded as `sluice sign` writes them, so nothing
        /// else a client appended to its URL reaches a page or a manifest.
        carry: Option<String>,
    },
    /// Refused, for this reason.
    Refused(Refusal),
}

/// The query parameter carrying a JWT.
pub const JWT_PARAM: &str = "jwt";

/// The policies in force, with their keys loaded.
pub struct Access {
    /// Longest prefix first.
    policies: Vec<(String, Rule)>,
    /// Each policy's prefix and whether it may be published to, longest first.
    publish: Vec<(String, bool)>,
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
            let stray = p.stray_keys();
            if !stray.is_empty() {
                let mode = match p.mode {
                    AccessMode::Open => "open",
                    AccessMode::Signed => "signed",
                    AccessMode::Jwt => "jwt",
                    AccessMode::Users => "users",
                };
                return Err(invalid(&format!("{} has no use with mode = \"{mode}\"", stray.join(", "))));
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
                    Rule::Jwt { keys, claim: p.claim.clone().unwrap_or_else(|| DEFAULT_CLAIM.into()) }
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
        let mut access = Access::with_rules(loaded);
        access.publish = policies.iter().map(|p| (p.prefix.clone(), p.publish)).collect();
        access.publish.sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        Ok(access)
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
            publish: Vec::new(),
            refusals: Default::default(),
            logins: Default::default(),
            nonce_key,
            logged: Mutex::new(Lru::new(LOGGED_CLIENTS)),
        }
    }

    /// Whether any policy guards anything or grants publishing (else every check is skipped).
    pub fn is_open(&self) -> bool {
        self.policies.iter().all(|(_, rule)| matches!(rule, Rule::Open))
            && self.publish.iter().all(|(_, publish)| !publish)
    }

    /// Whether `presented` may publish to its path: the policy deciding the path grants it
    /// (`publish = true`, else 403 whatever was presented), and what was presented passes the
    /// policy's mode as a read would (401 or 403 with the reason counted, else).
    pub fn check_publish(&self, presented: &Presented<'_>, now: SystemTime) -> Result<(), u16> {
        if longest_match(&self.publish, presented.path) != Some(&true) {
            return Err(403);
        }
        match self.check(presented, now) {
            Decision::Allowed { .. } => Ok(()),
            Decision::Refused(reason) => Err(reason.status()),
        }
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
        let Some(rule) = longest_match(&self.policies, presented.path) else {
            return Decision::Allowed { carry: None };
        };
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        match rule {
            Rule::Open => Decision::Allowed { carry: None },
            Rule::Signed { keys } => match check_signed(keys, presented, now) {
                Ok(carry) => Decision::Allowed { carry: Some(carry) },
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
                    Ok(()) => Decision::Allowed { carry: from_query.as_deref().map(jwt_query) },
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
}

impl Access {
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

/// The rule of the first prefix among `rules` (longest first) that `path` (decoded, from the
/// root) lies under; `/private` (a directory without its slash) is under `/private/` too. The
/// `[[protect]]` entries and their keys files match the same way.
pub fn longest_match<'a, T>(rules: &'a [(String, T)], path: &str) -> Option<&'a T> {
    let slashed = format!("{path}/");
    rules.iter().find(|(prefix, _)| slashed.starts_with(prefix.as_str())).map(|(_, rule)| rule)
}

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
    if lower.ends_with(".mp4") || lower.ends_with(crate::library::renditions::SET_SUFFIX) {
        dir = parent(&dir);
    }
    format!("{dir}/")
}

/// The prefix `sluice sign` signs a playlist or an MPD with when not told another, so that the
/// URLs it lists open too: the title's packaging, `/films/a.mp4/` for `/films/a.mp4/master.m3u8`
/// (its playlists, segments and subtitles are all under it); for a rendition set's
/// (`/films/a.set/master.m3u8`) the folder holding the set, whose renditions are the files beside
/// it (`../a.720p.mp4/video.m3u8`, or any file its sidecar names); for any other playlist or MPD
/// file, its folder. `None` for a path that is neither.
pub fn manifest_prefix(path: &str) -> Option<String> {
    let lower = path.to_ascii_lowercase();
    if !(lower.ends_with(".m3u8") || lower.ends_with(".mpd")) {
        return None;
    }
    let (dir, _) = path.rsplit_once('/')?;
    if dir.ends_with(crate::library::renditions::SET_SUFFIX) {
        return Some(title_folder(path));
    }
    Some(format!("{dir}/"))
}

/// The query carrying a checked JWT on: `jwt=TOKEN`, percent-encoded.
fn jwt_query(token: &str) -> String {
    format!("{JWT_PARAM}={}", percent_encoding::utf8_percent_encode(token, signed::URL_TEXT))
}

mod carry;
mod jwt;
mod signed;
pub(crate) mod users;

use jwt::{check_jwt, jwks_keys, JwtKey};
use signed::{check_signed, DEFAULT_KID};
use users::{read_users, Secret};

pub use carry::{carry_into_m3u8, carry_into_mpd, carry_into_page, carry_into_thumbnail_vtt};
pub use signed::{read_key, signature, signed_url, Scope};
pub use users::REALM;

#[cfg(test)]
mod tests;
