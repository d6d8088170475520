//! Credentials a client presents for reading: the token of an `Authorization` header (`Bearer`,
//! or the password of `Basic`, which RTSP clients send for `rtsp://user:TOKEN@host/`), the user
//! and password of `Basic`, the parameters of `Digest` (RFC 7616) and the parameters of a query
//! string (`?exp=…&sig=…`, `?jwt=…`).
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
        let (_, password) = basic(authorization)?;
        return (!password.is_empty()).then_some(password);
    }
    None
}

/// The user and password of a `Basic` value (base64 of `user:password`, split at the first
/// colon); `None` for other schemes or malformed values.
pub fn basic(authorization: &str) -> Option<(String, String)> {
    let (scheme, rest) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

/// The parameters of a `Digest` `Authorization` value (RFC 7616 §3.4, RFC 2617), as RTSP and
/// HTTP clients send them; values unquoted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DigestCredentials {
    /// `username`.
    pub username: String,
    /// `realm`, as the server's challenge named it.
    pub realm: String,
    /// `nonce`, as the server's challenge gave it.
    pub nonce: String,
    /// `uri`: the request target the response was computed over.
    pub uri: String,
    /// `response`: the hex MD5 the server checks.
    pub response: String,
    /// `algorithm`, when sent (`MD5` is the default).
    pub algorithm: Option<String>,
    /// `qop` (`auth`), when the client used one.
    pub qop: Option<String>,
    /// `nc`, with `qop`.
    pub nc: Option<String>,
    /// `cnonce`, with `qop`.
    pub cnonce: Option<String>,
}

impl DigestCredentials {
    /// The `Authorization` value carrying these parameters (every value quoted, escaped), as a
    /// client writes it.
    pub fn header(&self) -> String {
        let quote = |v: &str| v.replace('\\', "\\\\").replace('"', "\\\"");
        let mut out = format!(
            "Digest username=\"{}\", realm=\"{}\", nonce=\"{}\", uri=\"{}\", response=\"{}\"",
            quote(&self.username),
            quote(&self.realm),
            quote(&self.nonce),
            quote(&self.uri),
            quote(&self.response)
        );
        for (name, value) in
            [("algorithm", &self.algorithm), ("qop", &self.qop), ("nc", &self.nc), ("cnonce", &self.cnonce)]
        {
            if let Some(value) = value {
                out.push_str(&format!(", {name}=\"{}\"", quote(value)));
            }
        }
        out
    }
}

/// The parameters of a `Digest` value; `None` for other schemes, malformed parameter lists, or
/// when `username`, `realm`, `nonce`, `uri` or `response` is missing. A parameter's first
/// occurrence wins; unknown parameters are skipped.
pub fn digest(authorization: &str) -> Option<DigestCredentials> {
    let (scheme, rest) = authorization.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("digest") {
        return None;
    }
    let params = auth_params(rest)?;
    let get = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
    Some(DigestCredentials {
        username: get("username")?,
        realm: get("realm")?,
        nonce: get("nonce")?,
        uri: get("uri")?,
        response: get("response")?,
        algorithm: get("algorithm"),
        qop: get("qop"),
        nc: get("nc"),
        cnonce: get("cnonce"),
    })
}

/// A `WWW-Authenticate` challenge a server sends (RFC 7235 §4.1): its scheme, lowercased
/// (`basic`, `digest`), and its parameters (`realm`, `nonce`, `qop`, ...), names lowercased and
/// values unquoted; `None` when the parameter list is malformed. What a client answers with.
pub fn challenge(value: &str) -> Option<(String, Vec<(String, String)>)> {
    let value = value.trim();
    let (scheme, rest) = value.split_once(' ').unwrap_or((value, ""));
    if scheme.is_empty() {
        return None;
    }
    Some((scheme.to_ascii_lowercase(), auth_params(rest)?))
}

/// `name=value` pairs separated by commas, a value a token or a quoted string with `\`
/// escapes (RFC 7235 §2.1); names lowercased. `None` when the list is malformed.
fn auth_params(mut rest: &str) -> Option<Vec<(String, String)>> {
    let mut params = Vec::new();
    loop {
        rest = rest.trim_start_matches([' ', '\t', ',']);
        if rest.is_empty() {
            return Some(params);
        }
        let (name, after) = rest.split_once('=')?;
        let name = name.trim_end_matches([' ', '\t']);
        if name.is_empty() || name.contains([' ', '\t', ',', '"']) {
            return None;
        }
        rest = after.trim_start_matches([' ', '\t']);
        let value = if let Some(quoted) = rest.strip_prefix('"') {
            let mut value = String::new();
            let mut chars = quoted.char_indices();
            let end = loop {
                match chars.next()? {
                    (_, '\\') => value.push(chars.next()?.1),
                    (i, '"') => break i + 1,
                    (_, c) => value.push(c),
                }
            };
            rest = &quoted[end..];
            value
        } else {
            let end = rest.find([',', ' ', '\t']).unwrap_or(rest.len());
            let (token, after) = rest.split_at(end);
            if token.is_empty() {
                return None;
            }
            rest = after;
            token.to_string()
        };
        // A value ends at a comma, blanks or the end.
        if !(rest.is_empty() || rest.starts_with([',', ' ', '\t'])) {
            return None;
        }
        params.push((name.to_ascii_lowercase(), value));
    }
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
    fn basic_gives_user_and_password() {
        let b = base64::engine::general_purpose::STANDARD.encode("ann:pa:ss");
        assert_eq!(basic(&format!("basic {b}")), Some(("ann".into(), "pa:ss".into())));
        assert_eq!(basic("Digest x=1"), None);
        assert_eq!(basic("Basic !!"), None);
    }

    /// What ffmpeg sends for `rtsp://ann:secret@host/films/a.mp4`.
    const FFMPEG: &str = "Digest username=\"ann\", realm=\"sluice\", nonce=\"0000000065a1b2c3ab\", uri=\"rtsp://127.0.0.1:8554/films/a.mp4\", response=\"0123456789abcdef0123456789abcdef\"";

    #[test]
    fn challenges_are_read_as_a_client_answers_them() {
        let (scheme, params) = challenge("Digest realm=\"cam\", nonce=\"ab,c\", stale=FALSE").unwrap();
        assert_eq!(scheme, "digest");
        assert_eq!(params[1], ("nonce".to_string(), "ab,c".to_string()));
        assert_eq!(challenge("Basic realm=\"x\"").unwrap().1, [("realm".to_string(), "x".to_string())]);
        assert_eq!(challenge("Basic").unwrap(), ("basic".to_string(), Vec::new()));
        assert_eq!(challenge("Digest realm=\"x"), None);
    }

    #[test]
    fn digest_parameters_are_read_quoted_or_not() {
        let d = digest(FFMPEG).unwrap();
        assert_eq!(d.username, "ann");
        assert_eq!(d.uri, "rtsp://127.0.0.1:8554/films/a.mp4");
        assert_eq!(d.qop, None);
        let with_qop = format!("{FFMPEG}, algorithm=MD5,qop=auth, nc=00000001 ,cnonce=\"c\\\"q\"");
        let d = digest(&with_qop).unwrap();
        assert_eq!(
            (d.algorithm.as_deref(), d.qop.as_deref(), d.nc.as_deref(), d.cnonce.as_deref()),
            (Some("MD5"), Some("auth"), Some("00000001"), Some("c\"q"))
        );
        assert_eq!(digest(&d.header()), Some(d));
        for bad in ["Digest", "Digest username=\"a\"", "Basic abc", "Digest username=\"a", "Digest a=\"x\"y"]
        {
            assert_eq!(digest(bad), None, "{bad}");
        }
    }

    #[test]
    fn digest_split_at_every_byte_parses_whole_or_not_at_all() {
        // Every proper prefix lacks the response's closing quote or a field, so none parses;
        // and any field value split anywhere round-trips through the header.
        for i in 0..FFMPEG.len() {
            assert_eq!(digest(&FFMPEG[..i]), None, "{}", &FFMPEG[..i]);
        }
        for i in 0..=FFMPEG.len() {
            let (a, b) = FFMPEG.split_at(i);
            let d = DigestCredentials {
                username: a.into(),
                realm: b.into(),
                nonce: "n".into(),
                uri: b.into(),
                response: a.into(),
                ..Default::default()
            };
            assert_eq!(digest(&d.header()), Some(d), "{a:?} | {b:?}");
        }
    }

    #[test]
    fn the_first_parameter_of_a_name_wins_decoded() {
        assert_eq!(param("a=1&sig=x%2By&sig=2", "sig").as_deref(), Some("x+y"));
        assert_eq!(param("ip&exp=3", "ip").as_deref(), Some(""));
        assert_eq!(param("signature=1", "sig"), None);
    }
}
