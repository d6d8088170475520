//! Kernel TLS (kTLS) as the TLS layer sees it: the setting ([`KernelTls`]), the start-up probe of
//! what the kernel takes ([`ktls_support`]: the `tls` ULP, and which version and cipher pairs it
//! accepts keys for), rustls's secrets in the engine's words ([`traffic_keys`]) and the records
//! that reach a session once the kernel decrypts ([`read_record`]: close_notify, KeyUpdate).
//! It does not touch a connection's socket: the engine does that (`Connection::
//! switch_to_kernel_tls`), through `sys::ktls`, which owns the kernel's structures.

use std::io;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use rustls::kernel::KernelConnection;
use rustls::server::ServerConnectionData;
use rustls::{CipherSuite, ConnectionTrafficSecrets, ProtocolVersion, SupportedCipherSuite};
use sluice_proto::kernel_tls::{RecordAction, TlsCipher, TrafficKeys};

use crate::sys;

/// Whether HTTPS connections move their record layer into the kernel when it can take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KernelTls {
    /// When the kernel offers the `tls` ULP and takes the negotiated suite.
    #[default]
    Auto,
    /// Never: every connection encrypts in user space.
    Off,
}

impl KernelTls {
    /// Every value, by name.
    pub const ALL: [KernelTls; 2] = [KernelTls::Auto, KernelTls::Off];

    /// The name in the settings and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            KernelTls::Auto => "auto",
            KernelTls::Off => "off",
        }
    }
}

/// Whether the kernel can take over TLS record encryption (kTLS), so that `sendfile` and
/// `splice` stay zero-copy under TLS, and for which protocol versions and ciphers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KtlsSupport {
    /// The kernel offers the `tls` TCP upper-layer protocol.
    pub available: bool,
    /// What the probe saw, in words.
    pub reason: String,
    /// (TLS 1.3, cipher) pairs the kernel took keys for on a loopback connection.
    pub suites: Vec<(bool, TlsCipher)>,
}

impl KtlsSupport {
    /// Whether the kernel takes keys of `suite` (as rustls negotiated it).
    pub fn takes(&self, suite: SupportedCipherSuite) -> bool {
        suite_of(suite).is_some_and(|pair| self.suites.contains(&pair))
    }

    /// The pairs in words: "TLS 1.3 AES-128-GCM, ...".
    pub fn suites_text(&self) -> String {
        let names: Vec<String> = self
            .suites
            .iter()
            .map(|(tls13, cipher)| {
                format!("TLS {} {}", if *tls13 { "1.3" } else { "1.2" }, cipher_name(*cipher))
            })
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(", ")
        }
    }
}

fn cipher_name(cipher: TlsCipher) -> &'static str {
    match cipher {
        TlsCipher::Aes128Gcm => "AES-128-GCM",
        TlsCipher::Aes256Gcm => "AES-256-GCM",
        TlsCipher::Chacha20Poly1305 => "ChaCha20-Poly1305",
    }
}

/// Every pair sluice's rustls configuration can negotiate.
const PAIRS: [(bool, TlsCipher); 6] = [
    (true, TlsCipher::Aes128Gcm),
    (true, TlsCipher::Aes256Gcm),
    (true, TlsCipher::Chacha20Poly1305),
    (false, TlsCipher::Aes128Gcm),
    (false, TlsCipher::Aes256Gcm),
    (false, TlsCipher::Chacha20Poly1305),
];

/// Probes for kernel TLS: `/proc/sys/net/ipv4/tcp_available_ulp` and, to be sure (the module may
/// load on demand), `setsockopt(TCP_ULP, "tls")` on a fresh socket: `ENOENT` means the kernel
/// has no `tls` ULP; `ENOTCONN` means it has one (the socket is not connected yet). With the ULP
/// there, each version and cipher is tried on a loopback connection of its own (keys can be set
/// once per socket), so that a connection is only switched to what the kernel takes.
///
/// Probed once per process: the start-up log, `serve --check` and the HTTPS service all ask,
/// and each suite's probe is a loopback connection of its own.
pub fn ktls_support() -> KtlsSupport {
    static PROBED: std::sync::OnceLock<KtlsSupport> = std::sync::OnceLock::new();
    PROBED.get_or_init(probe).clone()
}

fn probe() -> KtlsSupport {
    let listed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").ok();
    let ulps = listed.as_deref().map(str::trim).unwrap_or("unreadable").to_string();
    let unavailable = |reason| KtlsSupport { available: false, reason, suites: Vec::new() };
    let fd = match sys::socket::probe_socket(libc::AF_INET) {
        Ok(fd) => fd,
        Err(e) => return unavailable(format!("cannot open a probe socket: {e}")),
    };
    let set = sys::ktls::attach_ulp(fd.as_raw_fd());
    // The probe socket closes here.
    drop(fd);
    match set.as_ref().err().and_then(io::Error::raw_os_error) {
        Some(libc::ENOENT) => unavailable(format!("the kernel has no `tls` TCP ULP (available: {ulps})")),
        Some(libc::ENOTCONN) | None => {
            let suites = match probe_suites() {
                Ok(suites) => suites,
                Err(e) => {
                    return unavailable(format!("the `tls` ULP is there but a loopback probe failed: {e}"))
                }
            };
            KtlsSupport {
                available: !suites.is_empty(),
                reason: format!("the kernel offers the `tls` TCP ULP ({ulps})"),
                suites,
            }
        }
        Some(code) => unavailable(format!("TCP_ULP `tls` refused: {}", io::Error::from_raw_os_error(code))),
    }
}

/// The pairs the kernel takes keys for, each tried on a fresh loopback connection.
fn probe_suites() -> io::Result<Vec<(bool, TlsCipher)>> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
    let addr = listener.local_addr()?;
    let mut taken = Vec::new();
    for (tls13, cipher) in PAIRS {
        let client = TcpStream::connect(addr)?;
        let (_server, _) = listener.accept()?;
        let fd = client.as_raw_fd();
        let key_len = if cipher == TlsCipher::Aes128Gcm { 16 } else { 32 };
        let keys = TrafficKeys { tls13, cipher, key: vec![0; key_len], iv: [0; 12], seq: 0 };
        let took = sys::ktls::attach_ulp(fd)
            .and_then(|()| sys::ktls::set_keys(fd, sys::ktls::TLS_TX, &keys))
            .and_then(|()| sys::ktls::set_keys(fd, sys::ktls::TLS_RX, &keys));
        if took.is_ok() {
            taken.push((tls13, cipher));
        }
    }
    Ok(taken)
}

/// The (TLS 1.3, cipher) pair of a rustls suite; `None` for one the kernel has no name for.
fn suite_of(suite: SupportedCipherSuite) -> Option<(bool, TlsCipher)> {
    let tls13 = suite.version().version == ProtocolVersion::TLSv1_3;
    let cipher = match suite.suite() {
        CipherSuite::TLS13_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => TlsCipher::Aes128Gcm,
        CipherSuite::TLS13_AES_256_GCM_SHA384
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => TlsCipher::Aes256Gcm,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        | CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => TlsCipher::Chacha20Poly1305,
        _ => return None,
    };
    Some((tls13, cipher))
}

/// rustls's secrets of one direction as the engine hands them to the kernel.
pub(crate) fn traffic_keys(
    tls13: bool,
    (seq, secrets): (u64, ConnectionTrafficSecrets),
) -> Option<TrafficKeys> {
    let (cipher, key, iv) = match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (TlsCipher::Aes128Gcm, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (TlsCipher::Aes256Gcm, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (TlsCipher::Chacha20Poly1305, key, iv),
        _ => return None,
    };
    Some(TrafficKeys { tls13, cipher, key: key.as_ref().to_vec(), iv: iv.as_ref().try_into().ok()?, seq })
}

/// TLS content types and the handshake message of RFC 8446 that matter once the kernel decrypts.
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const KEY_UPDATE: u8 = 24;
/// The close_notify alert's description.
const CLOSE_NOTIFY: u8 = 0;

/// What a record the kernel handed up means for the connection `kernel` manages: the peer's
/// close_notify, a KeyUpdate (new receive keys from rustls, and when the peer asks for it our
/// KeyUpdate and new transmit keys), or anything else, which ends it.
pub(crate) fn read_record(
    kernel: &mut KernelConnection<ServerConnectionData>,
    content_type: u8,
    body: &[u8],
) -> RecordAction {
    match (content_type, body) {
        (ALERT, [_level, CLOSE_NOTIFY]) => RecordAction::PeerClosed,
        // One KeyUpdate message: type, 3-byte length 1, request_update (RFC 8446 section 4.6.3).
        (HANDSHAKE, [KEY_UPDATE, 0, 0, 1, request]) if *request <= 1 => {
            let tls13 = kernel.protocol_version() == ProtocolVersion::TLSv1_3;
            let Some(rx) = kernel.update_rx_secret().ok().and_then(|s| traffic_keys(tls13, s)) else {
                return RecordAction::Close;
            };
            let answer = if *request == 1 {
                match kernel.update_tx_secret().ok().and_then(|s| traffic_keys(tls13, s)) {
                    Some(tx) => Some((vec![KEY_UPDATE, 0, 0, 1, 0], tx)),
                    None => return RecordAction::Close,
                }
            } else {
                None
            };
            RecordAction::Rekey { rx, answer }
        }
        _ => RecordAction::Close,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ktls_probe_agrees_with_the_kernels_list() {
        let listed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp").unwrap_or_default();
        let support = ktls_support();
        if listed.split_whitespace().any(|u| u == "tls") {
            assert!(support.available, "{support:?}");
            assert!(support.suites.contains(&(true, TlsCipher::Aes128Gcm)), "{support:?}");
        } else if !support.available {
            // Not listed and not loadable on demand: the reason names the missing ULP.
            assert!(support.reason.contains("no `tls` TCP ULP"), "{support:?}");
            assert!(support.suites.is_empty());
        }
    }

    #[test]
    fn every_suite_of_the_configuration_has_a_kernel_name() {
        for suite in rustls::crypto::aws_lc_rs::default_provider().cipher_suites {
            assert!(suite_of(suite).is_some(), "{:?}", suite.suite());
        }
        let support = KtlsSupport {
            available: true,
            reason: String::new(),
            suites: vec![(true, TlsCipher::Aes128Gcm)],
        };
        let aes128 = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256;
        let chacha = rustls::crypto::aws_lc_rs::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256;
        assert!(support.takes(aes128) && !support.takes(chacha));
        assert_eq!(support.suites_text(), "TLS 1.3 AES-128-GCM");
    }
}
