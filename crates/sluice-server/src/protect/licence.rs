//! The keys of a protected title, to viewers the title's `[[access]]` policy lets in: the W3C
//! EME ClearKey licence (`POST /<title>.mp4/clearkey` with `{"kids":[…],"type":"temporary"}`,
//! answered `{"keys":[{"kty":"oct","k":…,"kid":…}],"type":"temporary"}`, base64url without
//! padding) and the raw 16-byte key of HLS AES-128 (`GET /<title>.mp4/key`).
//!
//! Owns the two answers and the bound on a licence request's body. The access check happens
//! before, in the app, on the same path as the title's segments (a refusal is 403 on these
//! routes: a licence request cannot answer a challenge); nothing here logs a key or a KID a
//! client sent. It does not load keys ([`super::Protection`]).

use std::borrow::Cow;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use sluice_proto::http::{Body, BodySink, Reply, Response, Status};

use super::TitleProtection;

/// The name of the ClearKey licence under a title's URL.
pub const CLEARKEY: &str = "clearkey";
/// The name of the AES-128 key under a title's URL.
pub const AES_KEY: &str = "key";

/// Largest licence request body: a few KIDs of JSON.
const MAX_REQUEST: u64 = 4096;

/// Reads a licence request's body for `title`, then answers it.
pub struct LicenceRequest {
    title: TitleProtection,
    body: Vec<u8>,
}

impl LicenceRequest {
    /// A request for `title`'s keys.
    pub fn new(title: TitleProtection) -> LicenceRequest {
        LicenceRequest { title, body: Vec::new() }
    }
}

impl BodySink for LicenceRequest {
    fn max_len(&self) -> u64 {
        MAX_REQUEST
    }

    fn write(&mut self, payload: &[u8]) -> Result<(), Response> {
        self.body.extend_from_slice(payload);
        Ok(())
    }

    fn finish(self: Box<Self>) -> Reply {
        licence(&self.title, &self.body).into()
    }
}

/// The ClearKey licence for `request` (JSON): the title's key when its KID is asked for, no key
/// otherwise; 400 for a body that is not a licence request.
pub fn licence(title: &TitleProtection, request: &[u8]) -> Response {
    #[derive(serde::Deserialize)]
    struct Asked {
        kids: Vec<String>,
        #[serde(rename = "type", default)]
        kind: Option<String>,
    }
    let Ok(asked) = serde_json::from_slice::<Asked>(request) else {
        return Response::refusal(
            Status::BAD_REQUEST,
            "expected a ClearKey licence request: {\"kids\":[...]}",
        );
    };
    let kid = URL_SAFE_NO_PAD.encode(title.key.kid);
    let keys: Vec<serde_json::Value> = asked
        .kids
        .iter()
        .filter(|asked| asked.trim_end_matches('=') == kid)
        .take(1)
        .map(|_| serde_json::json!({"kty": "oct", "k": URL_SAFE_NO_PAD.encode(title.key.key), "kid": kid}))
        .collect();
    let kind = asked.kind.filter(|k| k == "persistent-license").unwrap_or_else(|| "temporary".into());
    let body = serde_json::json!({"keys": keys, "type": kind}).to_string();
    no_store(Response {
        status: Status::OK,
        headers: vec![("Content-Type", Cow::Borrowed("application/json"))],
        body: Body::Bytes(Cow::Owned(body.into_bytes())),
    })
}

/// The AES-128 key of `title`, 16 bytes.
pub fn aes_key(title: &TitleProtection) -> Response {
    no_store(Response {
        status: Status::OK,
        headers: vec![("Content-Type", Cow::Borrowed("application/octet-stream"))],
        body: Body::Bytes(Cow::Owned(title.key.key.to_vec())),
    })
}

/// Keys are not kept by caches; players on another origin may ask (the URL's credentials are
/// what guard them, as for segments).
fn no_store(response: Response) -> Response {
    response.with_header("Cache-Control", "no-store").with_header("Access-Control-Allow-Origin", "*")
}
