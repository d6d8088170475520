//! Payload digests an upload declares: `Content-MD5` (RFC 1864) and `Repr-Digest` (RFC 9530).

use base64::Engine as _;
use md5::Digest as _;

/// A digest the payload must have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Checksum {
    /// MD5 of the payload (`Content-MD5: <base64>`).
    Md5([u8; 16]),
    /// SHA-256 of the payload (`Repr-Digest: sha-256=:<base64>:`).
    Sha256([u8; 32]),
}

/// Why a digest header could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChecksumError {
    /// Not valid base64 of the right length.
    #[error("malformed digest")]
    Malformed,
    /// `Repr-Digest` names no algorithm this store verifies.
    #[error("no supported digest algorithm")]
    Unsupported,
}

impl Checksum {
    /// Reads a `Content-MD5` value.
    pub fn from_content_md5(value: &str) -> Result<Checksum, ChecksumError> {
        let bytes = decode(value.trim())?;
        Ok(Checksum::Md5(bytes.try_into().map_err(|_| ChecksumError::Malformed)?))
    }

    /// Reads a `Repr-Digest` value: a dictionary of `algorithm=:base64:` members; `sha-256` is
    /// used, other algorithms are ignored (RFC 9530 §3), none usable is an error.
    pub fn from_repr_digest(value: &str) -> Result<Checksum, ChecksumError> {
        for member in value.split(',') {
            let Some((algorithm, digest)) = member.trim().split_once('=') else {
                return Err(ChecksumError::Malformed);
            };
            if algorithm.trim().eq_ignore_ascii_case("sha-256") {
                let inner = digest.trim().strip_prefix(':').and_then(|d| d.strip_suffix(':'));
                let bytes = decode(inner.ok_or(ChecksumError::Malformed)?)?;
                return Ok(Checksum::Sha256(bytes.try_into().map_err(|_| ChecksumError::Malformed)?));
            }
        }
        Err(ChecksumError::Unsupported)
    }

    /// A hasher computing this kind of digest.
    pub fn hasher(&self) -> Hasher {
        match self {
            Checksum::Md5(_) => Hasher::Md5(md5::Md5::new()),
            Checksum::Sha256(_) => Hasher::Sha256(sha2::Sha256::new()),
        }
    }

    /// Whether a computed digest is this one.
    pub fn matches(&self, computed: &Checksum) -> bool {
        self == computed
    }

    /// The digest as `Content-MD5` or `Repr-Digest` writes it.
    pub fn header(&self) -> (&'static str, String) {
        let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
        match self {
            Checksum::Md5(d) => ("Content-MD5", b64(d)),
            Checksum::Sha256(d) => ("Repr-Digest", format!("sha-256=:{}:", b64(d))),
        }
    }
}

fn decode(b64: &str) -> Result<Vec<u8>, ChecksumError> {
    base64::engine::general_purpose::STANDARD.decode(b64).map_err(|_| ChecksumError::Malformed)
}

/// A running digest.
#[derive(Debug, Clone)]
pub enum Hasher {
    /// MD5.
    Md5(md5::Md5),
    /// SHA-256.
    Sha256(sha2::Sha256),
}

impl Hasher {
    /// Adds bytes.
    pub fn update(&mut self, data: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(data),
            Hasher::Sha256(h) => h.update(data),
        }
    }

    /// The digest of everything added.
    pub fn finish(self) -> Checksum {
        match self {
            Hasher::Md5(h) => Checksum::Md5(h.finalize().into()),
            Hasher::Sha256(h) => Checksum::Sha256(h.finalize().into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_parse_and_verify() {
        // RFC 9530 §B.1's example: sha-256 of `{"hello": "world"}`.
        let c = Checksum::from_repr_digest("sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:").unwrap();
        let mut h = c.hasher();
        h.update(b"{\"hello\": \"world\"}");
        assert!(c.matches(&h.finish()));
        assert_eq!(c.header().1, "sha-256=:X48E9qOokqqrvdts8nOJRJN3OWDUoyWxBf7kbu9DBPE=:");
        // RFC 1864: MD5 of nothing.
        let m = Checksum::from_content_md5("1B2M2Y8AsgTpgAmY7PhCfg==").unwrap();
        assert!(m.matches(&m.hasher().finish()));
        assert_eq!(Checksum::from_repr_digest("md5=:x:"), Err(ChecksumError::Unsupported));
        assert_eq!(Checksum::from_content_md5("abc"), Err(ChecksumError::Malformed));
    }
}
