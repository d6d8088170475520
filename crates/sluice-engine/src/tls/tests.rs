//! The TLS session's own tests: certificates that do not load, and the way to kernel TLS
//! driven without a kernel (a rustls client in memory on the other end): the keys handed over
//! match the client's, and every refusal leaves the connection working in user space.

use std::io::{Read, Write};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, SignatureScheme};
use sluice_proto::kernel_tls::TlsCipher;

use super::*;

/// A self-signed test certificate for `localhost` (P-256) and its key; tests only.
const CERT: &str = "-----BEGIN CERTIFICATE-----\nMIIBljCCATugAwIBAgIUcScgQJnU611Ci5iT9KtjTcV0BHYwCgYIKoZIzj0EAwIw\nFDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTEyODAxMTkxMVoYDzIxMjYxMTA0\nMDExOTExWjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO\nPQMBBwNCAASeE2suobXAuQ+NQVil8t0ZnS9lk3/N1oGRTovmSPWfSpqrjYX7hwyE\nfMIWRVs+4WQVXpKkPTh0xwSKh08mHS/Do2kwZzAdBgNVHQ4EFgQUweRuNEnVGp+s\nDikrGgu00z/XTtwwHwYDVR0jBBgwFoAUweRuNEnVGp+sDikrGgu00z/XTtwwDwYD\nVR0TAQH/BAUwAwEB/zAUBgNVHREEDTALgglsb2NhbGhvc3QwCgYIKoZIzj0EAwID\nSQAwRgIhALbdaYYnu0x5nixya0yxwfQhV4jYmxVZnrNCCDoeBe6yAiEA6DIDw7ke\na+EUnWC2kHqoirY9AnzfylH+mGyB1H8ACbQ=\n-----END CERTIFICATE-----\n";
const KEY: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg+6jWR1t9poznLgZf\nccgU1CBn3sqLfpF70BcMb02LRLKhRANCAASeE2suobXAuQ+NQVil8t0ZnS9lk3/N\n1oGRTovmSPWfSpqrjYX7hwyEfMIWRVs+4WQVXpKkPTh0xwSKh08mHS/D\n-----END PRIVATE KEY-----\n";

#[test]
fn a_missing_or_empty_pem_is_named() {
    let dir = std::env::temp_dir().join(format!("sluice-tls-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, b"").expect("write");
    let e = TlsCertificate::load(&empty, &dir.join("none.pem"), None).expect_err("no certificate");
    assert!(e.to_string().contains("no CERTIFICATE block"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Answers every input with `hello\n`.
struct Hello;

impl Session for Hello {
    fn receive(&mut self, input: &[u8], out: &mut Outbox, _clock: &Clock) -> usize {
        out.push(Segment::Static(b"hello\n"));
        input.len()
    }
    fn deadline(&self) -> Option<Instant> {
        None
    }
    fn on_drained(&mut self, _clock: &Clock) {}
    fn on_deadline(&mut self, out: &mut Outbox, _clock: &Clock) {
        out.close_after_flush();
    }
    fn on_shutdown(&mut self, _out: &mut Outbox) -> bool {
        true
    }
}

/// Trusts any certificate: these tests are about records and keys, not the chain.
#[derive(Debug)]
struct AnyCertificate;

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms.supported_schemes()
    }
}

/// A server session with kernel TLS as `support` says, and a client that can give its secrets.
fn pair(
    support: Option<KtlsSupport>,
) -> (TlsSession<Hello>, ClientConnection, Arc<Counters>, tempfile_dir::Dir) {
    let dir = tempfile_dir::Dir::new();
    let (cert, key) = (dir.0.join("cert.pem"), dir.0.join("key.pem"));
    std::fs::write(&cert, CERT).expect("write");
    std::fs::write(&key, KEY).expect("write");
    let certificate = TlsCertificate::load(&cert, &key, None).expect("the test certificate loads");
    let counters = Counters::new();
    let session = TlsSession::new(Hello, certificate.config(), Arc::clone(&counters), support.map(Arc::new));
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate))
            .with_no_client_auth();
    config.enable_secret_extraction = true;
    let client =
        ClientConnection::new(Arc::new(config), "localhost".try_into().expect("name")).expect("client");
    (session, client, counters, dir)
}

/// A directory of its own for one test's PEM files, removed at the end.
mod tempfile_dir {
    pub struct Dir(pub std::path::PathBuf);
    impl Dir {
        pub fn new() -> Dir {
            static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("sluice-tls-kernel-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).expect("temp dir");
            Dir(path)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn clock() -> Clock {
    Clock::new(Instant::now(), 1_700_000_000)
}

/// Everything the engine would send, taken out of `out`.
fn drain(out: &mut Outbox) -> Vec<u8> {
    let mut bytes = Vec::new();
    while let Some(front) = out.front() {
        let n = match front {
            Pending::Bytes(b) => {
                bytes.extend_from_slice(b);
                b.len()
            }
            Pending::File(_) => unreachable!("no files in these tests"),
        };
        out.advance(n as u64);
    }
    bytes
}

/// Moves records both ways, as an engine and a socket would, a bounded number of rounds.
fn exchange(session: &mut TlsSession<Hello>, client: &mut ClientConnection, out: &mut Outbox) {
    let clock = clock();
    for _ in 0..20 {
        let mut to_server = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut to_server).expect("client writes");
        }
        if !to_server.is_empty() {
            session.receive(&to_server, out, &clock);
        }
        session.refill(out, &clock);
        let to_client = drain(out);
        if !to_client.is_empty() {
            client.read_tls(&mut &to_client[..]).expect("client reads");
            client.process_new_packets().expect("client accepts the server's records");
        }
        if to_server.is_empty() && to_client.is_empty() {
            return;
        }
    }
}

/// What the client reads of the application data so far.
fn client_reads(client: &mut ClientConnection) -> Vec<u8> {
    let mut plain = Vec::new();
    let _ = client.reader().read_to_end(&mut plain);
    plain
}

fn all_suites() -> KtlsSupport {
    let suites = [TlsCipher::Aes128Gcm, TlsCipher::Aes256Gcm, TlsCipher::Chacha20Poly1305];
    KtlsSupport {
        available: true,
        reason: "test".into(),
        suites: [true, false].iter().flat_map(|&v| suites.map(|c| (v, c))).collect(),
    }
}

#[test]
fn the_keys_handed_to_the_kernel_are_the_clients_keys_where_user_space_stopped() {
    let (mut session, mut client, counters, _dir) = pair(Some(all_suites()));
    let mut out = Outbox::new();
    exchange(&mut session, &mut client, &mut out);
    assert!(!client.is_handshaking());
    // The handshake and the session tickets have gone out; nothing is encrypted until the switch.
    assert!(session.wants_kernel_tls() && !session.wants_input());
    let keys = session.kernel_tls_keys(&mut out).expect("keys for the kernel");
    session.kernel_tls_result(Ok(()));
    assert_eq!(counters.events(Event::TlsKernelConnections), 1);
    let theirs = client.dangerous_extract_secrets().expect("client secrets");
    let tls13 = true;
    assert_eq!(
        Some(keys.tx.clone()),
        kernel::traffic_keys(tls13, theirs.rx),
        "our transmit is their receive"
    );
    assert_eq!(
        Some(keys.rx.clone()),
        kernel::traffic_keys(tls13, theirs.tx),
        "our receive is their transmit"
    );
    // The tickets were records under the transmit key before the switch.
    assert!(keys.tx.seq > 0, "{:?}", keys.tx);
    assert_eq!(keys.rx.seq, 0, "{:?}", keys.rx);

    // After the switch, bytes are plain both ways.
    let clock = clock();
    assert!(session.wants_input());
    assert_eq!(session.receive(b"GET\n", &mut out, &clock), 4);
    assert_eq!(drain(&mut out), b"hello\n");
    // The peer's close_notify ends input; a KeyUpdate asking for ours gives new keys both ways.
    assert!(matches!(session.kernel_tls_record(21, &[1, 0]), RecordAction::PeerClosed));
    match session.kernel_tls_record(22, &[24, 0, 0, 1, 1]) {
        RecordAction::Rekey { rx, answer: Some((body, tx)) } => {
            assert_eq!((rx.seq, tx.seq), (0, 0));
            assert!(rx.key != keys.rx.key && tx.key != keys.tx.key);
            assert_eq!(body, [24, 0, 0, 1, 0]);
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(session.kernel_tls_record(21, &[2, 40]), RecordAction::Close), "a fatal alert closes");
}

#[test]
fn a_refused_ulp_leaves_the_connection_in_user_space() {
    let (mut session, mut client, counters, _dir) = pair(Some(all_suites()));
    let mut out = Outbox::new();
    exchange(&mut session, &mut client, &mut out);
    assert!(session.wants_kernel_tls());
    session.kernel_tls_result(Err(KernelTlsRefusal::Ulp));
    assert!(!session.wants_kernel_tls());
    client.writer().write_all(b"GET\n").expect("write");
    exchange(&mut session, &mut client, &mut out);
    assert_eq!(client_reads(&mut client), b"hello\n");
    assert_eq!(counters.events(Event::TlsKernelFallbackUlp), 1);
    assert_eq!(counters.events(Event::TlsKernelConnections), 0);
}

#[test]
fn part_of_a_record_read_before_the_switch_keeps_the_connection_in_user_space() {
    let (mut session, mut client, counters, _dir) = pair(Some(all_suites()));
    let mut out = Outbox::new();
    exchange(&mut session, &mut client, &mut out);
    client.writer().write_all(b"GET\n").expect("write");
    let mut record = Vec::new();
    client.write_tls(&mut record).expect("client writes");
    let clock = clock();
    session.receive(&record[..3], &mut out, &clock);
    assert!(session.kernel_tls_keys(&mut out).is_none(), "three bytes of a record are user space's");
    assert_eq!(counters.events(Event::TlsKernelFallbackInput), 1);
    session.receive(&record[3..], &mut out, &clock);
    exchange(&mut session, &mut client, &mut out);
    assert_eq!(client_reads(&mut client), b"hello\n");
}

#[test]
fn a_suite_the_kernel_does_not_take_is_counted_and_served_in_user_space() {
    let none = KtlsSupport { available: false, reason: "test".into(), suites: Vec::new() };
    let (mut session, mut client, counters, _dir) = pair(Some(none));
    let mut out = Outbox::new();
    exchange(&mut session, &mut client, &mut out);
    assert!(!session.wants_kernel_tls());
    assert_eq!(counters.events(Event::TlsKernelFallbackUnsupported), 1);
    client.writer().write_all(b"GET\n").expect("write");
    exchange(&mut session, &mut client, &mut out);
    assert_eq!(client_reads(&mut client), b"hello\n");
}

#[test]
fn a_whole_record_read_before_the_switch_is_decrypted_here_and_answered_after_it() {
    let (mut session, mut client, counters, _dir) = pair(Some(all_suites()));
    let mut out = Outbox::new();
    exchange(&mut session, &mut client, &mut out);
    assert!(session.wants_kernel_tls());
    // The request right behind the client's Finished, taken before the switch.
    client.writer().write_all(b"GET\n").expect("write");
    let mut record = Vec::new();
    client.write_tls(&mut record).expect("client writes");
    let clock = clock();
    assert_eq!(session.receive(&record, &mut out, &clock), record.len());
    assert!(out.is_empty(), "nothing is answered under the user-space keys");
    let keys = session.kernel_tls_keys(&mut out).expect("a whole record does not hold the switch back");
    session.kernel_tls_result(Ok(()));
    assert_eq!(keys.rx.seq, 1, "the kernel's receive starts after the record taken here");
    assert_eq!(counters.events(Event::TlsKernelFallbackInput), 0);
    // After the switch the request is answered, in plain bytes for the kernel to encrypt.
    session.refill(&mut out, &clock);
    assert_eq!(drain(&mut out), b"hello\n");
}
