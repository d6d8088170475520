//! What `sluice serve` checks before it binds anything, shared with `sluice serve --check` so
//! both refuse a configuration with the same line: the settings' values and rules, listeners
//! asked for on one port, the root, the upload token files, the certificate and the store's
//! location (and with `--check --connect`, whether an s3:// store answers); and how long the
//! certificate has left, in the words of the log and `serve --check`.
//!
//! It does not bind, start an engine or serve (see [`super::Server`]).

use std::sync::Arc;

use sluice_engine::tls::{KernelTls, TlsCertificate};

use super::ServeError;
use crate::config::Config;

/// `sluice serve --check`: whether `config` can start a server, binding nothing, with the checks
/// and messages `serve` itself uses ([`preflight`]); with `connect`, also whether an s3:// store
/// answers. Returns the settings as they would run (the engine settled: io_uring probed, falling
/// back to epoll unless `demanded`) and, for a fallback, why.
pub fn check(config: &Config, demanded: bool, connect: bool) -> Result<(Config, Option<String>), ServeError> {
    preflight(config)?;
    let mut config = config.clone();
    let (kind, fallback) = sluice_engine::resolve_engine(config.engine.kind, demanded)?;
    config.engine.kind = kind;
    sluice_engine::check(&config.engine_config())?;
    if connect {
        probe_store(&config)?;
    }
    Ok((config, fallback.map(|r| r.to_string())))
}

/// Everything about `config` that can be checked without binding or connecting, in the order
/// `serve` meets it, so that `serve --check` and `serve` refuse a configuration with the same
/// line: the values, the listeners' addresses, the root, the token files, the store's location.
pub fn preflight(config: &Config) -> Result<(), ServeError> {
    config.validate()?;
    same_address(config)?;
    if let Some(root) = &config.library.root {
        root_directory(root)?;
    }
    config.uploads.load_tokens()?;
    config.uploads.gzip_mode()?;
    crate::access::Access::load(&config.access)?;
    crate::protect::Protection::load(&config.protect)?;
    tls_certificate(config)?;
    if let Some(location) = &config.store.location {
        let failed = |reason: String| ServeError::Store { location: location.clone(), reason };
        if config.store.is_remote() {
            if let Some(endpoint) = &config.store.s3_endpoint {
                let scheme = endpoint.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
                if !matches!(scheme.as_deref(), Some("http" | "https")) {
                    return Err(failed(format!(
                        "--s3-endpoint `{endpoint}` is not an http:// or https:// URL (e.g. http://127.0.0.1:8333)"
                    )));
                }
            }
            // Builds the client only (no request): a location or endpoint that does not parse.
            sluice_store::open(location, Some(config.store.s3_config()))
                .map_err(|e| failed(e.to_string()))?;
        } else {
            match std::fs::metadata(location) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(failed("not a directory".into())),
                Err(e) => return Err(failed(e.to_string())),
            }
        }
    }
    Ok(())
}

/// The certificate of `[tls]`, loaded, when HTTPS is on.
pub(super) fn tls_certificate(config: &Config) -> Result<Option<Arc<TlsCertificate>>, ServeError> {
    match (&config.tls.cert, &config.tls.key) {
        (Some(cert), Some(key)) => {
            Ok(Some(Arc::new(TlsCertificate::load(cert, key, config.tls.ocsp.as_deref())?)))
        }
        _ => Ok(None),
    }
}

/// Days before the certificate's notAfter from which the log warns (at start, on reload and
/// once a day) and `serve --check` says so. ACME clients renew with 30 days left (certbot,
/// Caddy), so 14 days left means renewal has been failing for two weeks.
pub const CERTIFICATE_WARNING_DAYS: i64 = 14;

/// How long the certificate in use has left, in a sentence, and whether that is under
/// [`CERTIFICATE_WARNING_DAYS`].
pub fn certificate_expiry(certificate: &TlsCertificate) -> (String, bool) {
    let not_after = certificate.not_after();
    let left = certificate.expires_in();
    let date = u64::try_from(not_after)
        .map(|s| httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(s)))
        .unwrap_or_else(|_| format!("{not_after} s from the Unix epoch"));
    let path = certificate.cert_path().display();
    let days = left as f64 / 86_400.0;
    let text = if left > 0 {
        format!("the certificate {path} expires in {days:.1} days ({date})")
    } else {
        format!("the certificate {path} expired {:.1} days ago ({date}); clients refuse it", -days)
    };
    (text, left < CERTIFICATE_WARNING_DAYS * 86_400)
}

/// Logs [`certificate_expiry`]: a warning when under [`CERTIFICATE_WARNING_DAYS`].
pub fn log_certificate_expiry(certificate: &TlsCertificate) {
    match certificate_expiry(certificate) {
        (text, true) => tracing::warn!("HTTPS: {text}: renew it (then SIGHUP reloads it)"),
        (text, false) => tracing::info!("HTTPS: {text}"),
    }
}

/// `serve --check`'s line on the certificate's expiry, when HTTPS is on.
pub fn certificate_note(config: &Config) -> Result<Option<String>, ServeError> {
    Ok(tls_certificate(config)?.map(|certificate| match certificate_expiry(&certificate) {
        (text, true) => format!("warning: {text}: renew it"),
        (text, false) => text,
    }))
}

/// What the kernel offers for TLS and whether sluice uses it (`tls.kernel`), in the words of
/// the start-up log and `serve --check`.
pub fn ktls_note(mode: KernelTls) -> String {
    if mode == KernelTls::Off {
        return "kernel TLS off (tls.kernel = \"off\"): file bodies under TLS are read, encrypted in user space and sent (sendfile and splice fall back to copying)".into();
    }
    let ktls = sluice_engine::tls::ktls_support();
    if ktls.available {
        format!(
            "kernel TLS on: {}; after each handshake the kernel encrypts ({}), so file bodies keep sendfile and splice (see sluice_tls_kernel_connections_total)",
            ktls.reason,
            ktls.suites_text()
        )
    } else {
        format!(
            "kernel TLS unavailable: {}; file bodies under TLS are read, encrypted in user space and sent (sendfile and splice fall back to copying)",
            ktls.reason
        )
    }
}

/// Whether scrubbing thumbnails can be made, in the words of `serve --check`: the ffmpeg found,
/// or why they will be refused (everything else is served either way).
pub fn thumbnails_note(config: &Config) -> String {
    match crate::child::find_program(&config.library.ffmpeg) {
        Some(path) => format!("thumbnails: made by {}", path.display()),
        None => format!(
            "note: thumbnails are off (503): `{}` is not an executable on PATH (set --ffmpeg to its path)",
            config.library.ffmpeg
        ),
    }
}

/// The library root must be a directory; the one message for `serve` and `serve --check`.
fn root_directory(root: &std::path::Path) -> Result<(), ServeError> {
    let source = match std::fs::metadata(root) {
        Ok(m) if m.is_dir() => return Ok(()),
        Ok(_) => std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        Err(e) => e,
    };
    Err(ServeError::Library { path: root.to_path_buf(), source })
}

/// Two listeners on one port of overlapping addresses: named as such, before binding reports it
/// as a port "in use by another process".
fn same_address(config: &Config) -> Result<(), ServeError> {
    let mut listeners = vec![("--listen (http.listen)", config.http.listen)];
    if let Some(tls) = config.tls.listen.filter(|_| config.tls.enabled()) {
        listeners.push(("--tls-listen (tls.listen)", tls));
    }
    if config.admin.enabled {
        listeners.push(("--admin-listen (admin.listen)", config.admin.listen));
    }
    if config.rtsp.enabled {
        listeners.push(("--rtsp-listen (rtsp.listen)", config.rtsp.listen));
    }
    for (i, (first, a)) in listeners.iter().enumerate() {
        for (second, b) in &listeners[i + 1..] {
            let overlap = a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified();
            if a.port() != 0 && a.port() == b.port() && overlap {
                return Err(ServeError::SameAddress { first, second, addr: *b });
            }
        }
    }
    Ok(())
}

/// Whether an s3:// store answers: its bucket is listed (a missing bucket, refused credentials
/// or an endpoint that does not answer are errors). A local store answers by being there.
pub fn probe_store(config: &Config) -> Result<(), ServeError> {
    let Some(location) = config.store.location.as_deref().filter(|_| config.store.is_remote()) else {
        return Ok(());
    };
    let failed = |reason: String| ServeError::Store { location: location.into(), reason };
    let store =
        sluice_store::open(location, Some(config.store.s3_config())).map_err(|e| failed(e.to_string()))?;
    // A listing, not a HEAD: a HEAD of a missing bucket is a bare 404, like a missing key.
    store.list("").map(drop).map_err(|e| failed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_listeners_on_one_port_are_named() {
        let mut c = Config::default();
        c.http.listen = "127.0.0.1:7000".parse().unwrap();
        c.admin.listen = "0.0.0.0:7000".parse().unwrap();
        let e = same_address(&c).unwrap_err().to_string();
        assert!(e.contains("--listen (http.listen) and --admin-listen (admin.listen)"), "{e}");
        c.admin.enabled = false;
        assert!(same_address(&c).is_ok());
        c.rtsp.listen = "127.0.0.1:7000".parse().unwrap();
        assert!(same_address(&c).unwrap_err().to_string().contains("--rtsp-listen"));
        c.rtsp.listen = "127.0.0.2:7000".parse().unwrap();
        assert!(same_address(&c).is_ok(), "another address, the same port");
        c.http.listen = "127.0.0.1:0".parse().unwrap();
        c.rtsp.listen = "127.0.0.1:0".parse().unwrap();
        assert!(same_address(&c).is_ok(), "port 0 is a free port each");
    }
}
