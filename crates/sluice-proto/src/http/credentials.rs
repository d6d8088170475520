//! Credentials a client presents for reading: the token of an `Authorization` header (`Bearer`,
//! or the password of `Basic`, which RTSP clients send for `rtsp://user:TOKEN@host/`) and the
//! parameters of a query string (`?exp=…&sig=…`, `?jwt=…`).
//!
//! Owns only the parsing of these untrusted bytes (fuzzed by the `access_credentials` target);
//! what the credentials are worth is the server's business.

use base64::Engine as _;
use percent_encoding::percent_decode_str;

/// The token in an `Authorization` header value: `Bearer TOKEN`, or the password of `Basic`
/// (base64 of `user:password`); `None` for other schemes, malformed values or empty tokens.
pub fn credential(authorization: &str) -> Option<String> {
    let (scheme, rest) = authorization.trim().split_once(' ')?;
    let rest = rest.trim();
    if scheme.eq_ignore_ascii_case("bearer") {
        return (!rest.is_empty()).then(|| rest.to_string());
    }
    if scheme.eq_ignore_ascii_case("basic") {
        let decoded = base64::engine::general_purpose::STANDARD.decode(rest).ok()?;
        let text = String::from_utf8(decoded).ok()?;
        let (_, password) = text.split_once(':')?;
        return (!password.is_empty()).then(|| password.to_string());
    }
    None
}

/// The first value of query parameter `name` in `query` (without its `?`), percent-decoded
/// (`+` is a space); a parameter with no `=` has the empty value.
pub fn param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == name).then(|| percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_come_from_bearer_and_basic() {
        assert_eq!(credential("Bearer abc").as_deref(), Some("abc"));
        let basic = base64::engine::general_purpose::STANDARD.encode("viewer:tok.en");
        assert_eq!(credential(&format!("Basic {basic}")).as_deref(), Some("tok.en"));
        for bad in ["", "Bearer", "Bearer  ", "Basic !!", "Digest x", "Basic dXNlcg=="] {
            assert_eq!(credential(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_first_parameter_of_a_name_wins_decoded() {
        assert_eq!(param("a=1&sig=x%2By&sig=2", "sig").as_deref(), Some("x+y"));
        assert_eq!(param("ip&exp=3", "ip").as_deref(), Some(""));
        assert_eq!(param("signature=1", "sig"), None);
    }
}
