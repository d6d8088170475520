//! The `jwt` policy: a JWKS file's keys and checking a token against them (HS256, RS256,
//! ES256; `exp` required, `nbf` honoured, a claim listing the prefixes the token opens).
//!
//! It does not own where the token comes from (a bearer header, `?jwt=`, an RTSP password; see
//! [`super::Access`]).

use base64::Engine as _;
use sluice_proto::nesting::{check_nesting, NestingLimit, Syntax, MAX_DEPTH};

use super::Refusal;

/// The JSON of a token or a key set: a token's parts are a few hundred bytes (a request head is
/// at most 16 KiB), a JWKS a few keys.
const JSON_NESTING: NestingLimit = NestingLimit { max_depth: MAX_DEPTH, max_len: 1 << 20 };

/// Whether a token's header and claims, the JSON a client wrote, nest within [`JSON_NESTING`]:
/// serde_json bounds its recursion at 128 levels, which a 256 KiB connection thread's stack
/// need not hold in a debug build, so the parser only sees what is measured first.
fn token_nesting_ok(token: &str) -> bool {
    let mut parts = token.split('.');
    parts.by_ref().take(2).all(|part| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part)
            .is_ok_and(|json| check_nesting(&json, Syntax::Json, JSON_NESTING).is_ok())
    }) && parts.count() == 1
}

pub(super) struct JwtKey {
    kid: Option<String>,
    algorithm: jsonwebtoken::Algorithm,
    key: jsonwebtoken::DecodingKey,
}

pub(super) fn jwks_keys(text: &str) -> Result<Vec<JwtKey>, String> {
    use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
    use jsonwebtoken::Algorithm;
    check_nesting(text.as_bytes(), Syntax::Json, JSON_NESTING)
        .map_err(|e| format!("the JWKS is refused: {e}"))?;
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

pub(super) fn check_jwt(keys: &[JwtKey], claim: &str, token: &str, path: &str) -> Result<(), Refusal> {
    if !token_nesting_ok(token) {
        return Err(Refusal::BadToken);
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header};

    const SECRET: &[u8] = b"jwt-secret-of-32-bytes-or-more!!";

    fn keys() -> Vec<JwtKey> {
        let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(SECRET);
        jwks_keys(&format!(r#"{{"keys":[{{"kty":"oct","kid":"h1","k":"{k}"}}]}}"#)).unwrap()
    }

    /// A signed token whose claims carry an extra claim nested `depth` arrays deep.
    fn token(depth: usize) -> String {
        let exp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600;
        let nested = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let claims = format!(r#"{{"exp":{exp},"paths":["/members/"],"extra":{nested}}}"#);
        let header = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(
            serde_json::to_vec(&Header {
                kid: Some("h1".into()),
                ..Header::new(jsonwebtoken::Algorithm::HS256)
            })
            .unwrap(),
        );
        let body = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(claims);
        let signed = format!("{header}.{body}");
        // Signed as written here: `encode` would need the claims as a value, built recursively.
        let signature = jsonwebtoken::crypto::sign(
            signed.as_bytes(),
            &EncodingKey::from_secret(SECRET),
            jsonwebtoken::Algorithm::HS256,
        )
        .unwrap();
        format!("{signed}.{signature}")
    }

    #[test]
    fn claims_nested_past_the_limit_are_refused_before_parsing_at_every_depth() {
        let keys = keys();
        for depth in [1, 10, MAX_DEPTH - 1, MAX_DEPTH, 60, 1000, 100_000] {
            let checked = check_jwt(&keys, "paths", &token(depth), "/members/a.mp4");
            // The claims object itself is one level.
            if depth < MAX_DEPTH {
                assert_eq!(checked, Ok(()), "{depth} deep");
            } else {
                assert_eq!(checked, Err(Refusal::BadToken), "{depth} deep");
            }
        }
        assert!(!token_nesting_ok("only.two"), "a token has three parts");
        assert!(!token_nesting_ok("a.b.c.d"));
        let deep = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("[".repeat(100_000));
        assert!(!token_nesting_ok(&format!("{deep}.e30.x")), "a header nested too deep");
    }

    #[test]
    fn a_jwks_nested_past_the_limit_is_refused_with_the_reason() {
        let deep = format!(r#"{{"keys":[],"x":{}{}}}"#, "[".repeat(60), "]".repeat(60));
        let e = jwks_keys(&deep).err().unwrap();
        assert!(e.contains("nests more than 32 levels deep"), "{e}");
    }
}
