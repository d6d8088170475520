//! The `jwt` policy: a JWKS file's keys and checking a token against them (HS256, RS256,
//! ES256; `exp` required, `nbf` honoured, a claim listing the prefixes the token opens).
//!
//! It does not own where the token comes from (a bearer header, `?jwt=`, an RTSP password; see
//! [`super::Access`]).

use super::Refusal;

pub(super) struct JwtKey {
    kid: Option<String>,
    algorithm: jsonwebtoken::Algorithm,
    key: jsonwebtoken::DecodingKey,
}

pub(super) fn jwks_keys(text: &str) -> Result<Vec<JwtKey>, String> {
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

pub(super) fn check_jwt(keys: &[JwtKey], claim: &str, token: &str, path: &str) -> Result<(), Refusal> {
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
