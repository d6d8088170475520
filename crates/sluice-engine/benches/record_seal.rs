//! ring against aws-lc-rs on what an HTTPS file transfer spends its CPU on: sealing full 16 KiB
//! TLS 1.3 records (RFC 8446 section 5.1's largest plaintext) with each AEAD sluice negotiates,
//! through the very `MessageEncrypter` rustls calls for every record it sends.
//!
//! Each sample is timed in CPU time of the benchmarking thread (`CLOCK_THREAD_CPUTIME_ID`), not
//! wall time, so that time the thread spends descheduled on a busy machine is not counted.
//!
//! Owns only this measurement; the provider sluice uses is chosen in `src/tls.rs`, which cites
//! the figures. Run: `cargo bench -p sluice-engine --features bench-providers --bench record_seal`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use rustls::crypto::cipher::{MessageEncrypter, OutboundChunks, OutboundPlainMessage};
use rustls::crypto::CryptoProvider;
use rustls::{CipherSuite, ContentType, ProtocolVersion, SupportedCipherSuite};

/// The largest TLS plaintext record, as sluice sends file bodies.
const RECORD: usize = 16 * 1024;

/// The TLS 1.3 suites, in rustls's order of preference.
const SUITES: [(CipherSuite, &str); 3] = [
    (CipherSuite::TLS13_AES_256_GCM_SHA384, "aes-256-gcm"),
    (CipherSuite::TLS13_AES_128_GCM_SHA256, "aes-128-gcm"),
    (CipherSuite::TLS13_CHACHA20_POLY1305_SHA256, "chacha20-poly1305"),
];

/// An encrypter for `suite` of `provider`, keyed as a TLS 1.3 traffic secret is (HKDF-Expand-Label
/// through rustls's own key schedule, which sizes the key to the AEAD).
fn encrypter(provider: &CryptoProvider, suite: CipherSuite) -> Box<dyn MessageEncrypter> {
    let tls13 = provider
        .cipher_suites
        .iter()
        .find_map(|s| match s {
            SupportedCipherSuite::Tls13(t) if s.suite() == suite => Some(*t),
            _ => None,
        })
        .expect("every provider offers the three TLS 1.3 suites");
    let secret = tls13.hkdf_provider.extract_from_secret(None, &[0x5a; 48]);
    let key = rustls::internal::derive_traffic_key(secret.as_ref(), tls13.aead_alg);
    let iv = rustls::internal::derive_traffic_iv(secret.as_ref());
    tls13.aead_alg.encrypter(key, iv)
}

/// CPU time this thread has used.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn seal(c: &mut Criterion) {
    let providers = [
        ("ring", rustls::crypto::ring::default_provider()),
        ("aws-lc-rs", rustls::crypto::aws_lc_rs::default_provider()),
    ];
    let plaintext = vec![0xa5u8; RECORD];
    let mut group = c.benchmark_group("seal_16k_record");
    group.throughput(Throughput::Bytes(RECORD as u64));
    for (suite, suite_name) in SUITES {
        for (provider_name, provider) in &providers {
            let mut sealer = encrypter(provider, suite);
            let mut seq = 0u64;
            group.bench_with_input(BenchmarkId::new(suite_name, provider_name), &plaintext, |b, plain| {
                b.iter_custom(|iters| {
                    let start = thread_cpu_time();
                    for _ in 0..iters {
                        let message = OutboundPlainMessage {
                            typ: ContentType::ApplicationData,
                            version: ProtocolVersion::TLSv1_2,
                            payload: OutboundChunks::Single(plain),
                        };
                        // From 0 up, as on a connection: aws-lc-rs derives its nonce mask from
                        // the first record's and refuses anything else.
                        black_box(sealer.encrypt(message, seq).expect("sealing a record"));
                        seq += 1;
                    }
                    thread_cpu_time() - start
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // The machine is shared: many samples over a longer time so that a burst of another
    // process's work moves the estimate less.
    config = Criterion::default().sample_size(60).measurement_time(Duration::from_secs(6));
    targets = seal
}
criterion_main!(benches);
