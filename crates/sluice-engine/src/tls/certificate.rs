//! The certificate an HTTPS listener presents ([`TlsCertificate`]): its PEM files loaded into a
//! rustls configuration (with the OCSP response it staples, checked against the leaf, and the
//! leaf's expiry, read by [`super::der`]), and reloaded on demand (SIGHUP), after which new
//! connections get the new one. It does not run connections ([`super::TlsSession`] does) nor
//! decide about kernel TLS ([`super::kernel`]); it only lets rustls's secrets be extracted.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::ServerConfig;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::der;

/// Why a certificate could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or holds nothing usable.
    #[error("cannot read {what} {path}: {reason}")]
    Pem {
        /// "certificate" or "private key".
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The reason.
        reason: String,
    },
    /// rustls refused the pair (a key that does not match the certificate, say).
    #[error("cannot use the certificate {cert} with the key {key}: {reason}")]
    Config {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// rustls's reason.
        reason: String,
    },
    /// The server certificate's DER does not say when it expires.
    #[error("cannot read the validity of the certificate {path}: {reason}")]
    Validity {
        /// The certificate file.
        path: PathBuf,
        /// The reason.
        reason: String,
    },
    /// The OCSP response cannot be stapled: unreadable, malformed, not about this certificate,
    /// not "good", or past its own nextUpdate.
    #[error("cannot staple the OCSP response {path}: {reason}")]
    Ocsp {
        /// The response file (DER).
        path: PathBuf,
        /// The reason.
        reason: String,
    },
}

/// The certificate chain and key a server presents, from two PEM files, with an OCSP response
/// to staple (DER) when one is given, swappable at run time.
#[derive(Debug)]
pub struct TlsCertificate {
    cert: PathBuf,
    key: PathBuf,
    ocsp: Option<PathBuf>,
    current: RwLock<Loaded>,
}

/// What the files held when last read.
#[derive(Debug, Clone)]
struct Loaded {
    config: Arc<ServerConfig>,
    /// The server certificate's notAfter, in seconds since the Unix epoch.
    not_after: i64,
}

impl TlsCertificate {
    /// Loads the chain from `cert` and the private key from `key` (PEM), and the OCSP response
    /// to staple from `ocsp` (DER, as `openssl ocsp -respout` writes it).
    pub fn load(cert: &Path, key: &Path, ocsp: Option<&Path>) -> Result<TlsCertificate, TlsError> {
        let loaded = server_config(cert, key, ocsp)?;
        Ok(TlsCertificate {
            cert: cert.into(),
            key: key.into(),
            ocsp: ocsp.map(Path::to_path_buf),
            current: RwLock::new(loaded),
        })
    }

    /// Reads the files again; connections accepted from now on present what they hold. On an
    /// error the certificate (and OCSP response) in use stays.
    pub fn reload(&self) -> Result<(), TlsError> {
        let loaded = server_config(&self.cert, &self.key, self.ocsp.as_deref())?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = loaded;
        Ok(())
    }

    /// The certificate file's path.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// When the server certificate in use expires (its notAfter), in seconds since the Unix
    /// epoch.
    pub fn not_after(&self) -> i64 {
        self.current.read().unwrap_or_else(|e| e.into_inner()).not_after
    }

    /// Seconds from now until [`TlsCertificate::not_after`], negative once it has passed.
    pub fn expires_in(&self) -> i64 {
        self.not_after().saturating_sub(unix_now())
    }

    pub(super) fn config(&self) -> Arc<ServerConfig> {
        Arc::clone(&self.current.read().unwrap_or_else(|e| e.into_inner()).config)
    }
}

/// Seconds since the Unix epoch now.
fn unix_now() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    since.map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// The OCSP response in `path`, checked as a client would before trusting it (see
/// [`der::OcspFacts::staplable`]).
fn ocsp_response(path: &Path, serial: &[u8]) -> Result<Vec<u8>, TlsError> {
    let refuse = |reason: String| TlsError::Ocsp { path: path.into(), reason };
    let bytes = std::fs::read(path).map_err(|e| refuse(e.to_string()))?;
    let facts = der::ocsp_response(&bytes).map_err(|e| refuse(e.to_string()))?;
    facts.staplable(serial, unix_now()).map_err(refuse)?;
    Ok(bytes)
}

/// A rustls server configuration for the pair of PEM files (and the OCSP response to staple):
/// TLS 1.2 and 1.3, ALPN `http/1.1`.
fn server_config(cert: &Path, key: &Path, ocsp: Option<&Path>) -> Result<Loaded, TlsError> {
    let pem = |what, path: &Path, reason: String| TlsError::Pem { what, path: path.into(), reason };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem("certificate", cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| pem("certificate", cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(pem("certificate", cert, "no CERTIFICATE block in the file".into()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| pem("private key", key, e.to_string()))?;
    let leaf = der::certificate(&chain[0])
        .map_err(|e| TlsError::Validity { path: cert.into(), reason: e.to_string() })?;
    let stapled = match ocsp {
        Some(path) => ocsp_response(path, &leaf.serial)?,
        None => Vec::new(),
    };
    let failed =
        |e: rustls::Error| TlsError::Config { cert: cert.into(), key: key.into(), reason: e.to_string() };
    // aws-lc-rs rather than ring: sealing a full 16 KiB record, what every file body costs, took
    // it 1,760 ns with AES-128-GCM against ring's 2,066 (-15%), 1,991 against 2,260 with
    // AES-256-GCM (-12%) and 6,667 against 6,760 with ChaCha20-Poly1305 (even): medians of three
    // rounds of benches/record_seal.rs in thread CPU time, 2026-11-28, 2-core AMD EPYC (busy).
    let mut config =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(failed)?
            .with_no_client_auth()
            .with_single_cert_with_ocsp(chain, private, stapled)
            .map_err(failed)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Lets a connection hand its keys to the kernel (kTLS) once its handshake is over; session
    // tickets are sent before that, so nothing of rustls's is left behind.
    config.enable_secret_extraction = true;
    Ok(Loaded { config: Arc::new(config), not_after: leaf.not_after })
}
