//! HTTPS end to end, on every engine and send strategy: a test CA and server certificates made
//! here with openssl's CLI; curl (`--cacert`, so the chain is verified) fetches whole files and
//! single, suffix and multipart ranges over `https://` byte-exact (SHA-256 of the bodies), while
//! plain HTTP keeps its own port; ffprobe reads the MP4 and its HLS over `https://`; a certificate
//! swapped on disk and SIGHUP reaches new connections while an open one keeps working (checked
//! with a rustls client that reads the served certificate); a 40 MB file and ranges across it
//! arrive byte-exact and 120 pipelined requests on one TLS connection are all answered; garbage sent to the TLS port is
//! closed, plain HTTP answered a plain 400 that says it reached the HTTPS port, both counted in
//! /metrics; without `--tls-listen` the media port serves HTTPS only; and the kernel-TLS probe reports what
//! /proc/sys/net/ipv4/tcp_available_ulp says, in the start-up log and in `serve --check`.
//! The HAProxy alternative (deploy/haproxy.cfg's TLS frontend) is checked with `haproxy -c`.
//!
//! All traffic stays on 127.0.0.1; every wait is bounded.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use common::edge::sha256_hex;
use common::*;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
/// Larger than what a TLS session encrypts ahead of the socket (256 KiB), so responses are
/// encrypted in several refills.
const FILE_LEN: usize = 700_000;

/// A test CA and two server certificates it signed (`a`: serial 0xA1, `b`: serial 0xB2).
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn ca(&self) -> PathBuf {
        self.path("ca.pem")
    }
}

/// The CA and certificates, made once per test binary.
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        test_ca(d, "2", "/CN=sluice test CA");
        for (name, serial) in [("a", "0xA1"), ("b", "0xB2")] {
            test_leaf(d, name, serial, "2", &format!("/CN=sluice-{name}"));
        }
        Pki { dir }
    })
}

/// A server with HTTP on its usual port and HTTPS on another, certificate `a` (copied into
/// `tls/` of a directory of its own, so a test may swap it).
fn https_server(engine: &[&str], fx: &Fixture, extra: &[&str]) -> (Server, SocketAddr, tempfile::TempDir) {
    let pki = pki();
    let own = tempfile::tempdir().unwrap();
    std::fs::copy(pki.path("a.pem"), own.path().join("cert.pem")).unwrap();
    std::fs::copy(pki.path("a.key"), own.path().join("key.pem")).unwrap();
    let (cert, key) = (own.path().join("cert.pem"), own.path().join("key.pem"));
    let mut args = vec![
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--tls-listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    let server = Server::serve(engine, fx, &args);
    let tls = server
        .logs()
        .iter()
        .find_map(|l| parse_scheme_line(l, "https"))
        .unwrap_or_else(|| panic!("no https listening line in:\n{}", server.log_text()));
    (server, tls, own)
}

/// `curl -i` over HTTPS with the test CA, parsed.
fn curl(url: &str, extra: &[&str]) -> Response {
    let mut cmd = Command::new(require_tool("curl", "curl"));
    for v in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    let ca = pki().ca();
    cmd.args(["-sS", "-i", "--http1.1", "--max-time", "20", "--cacert", ca.to_str().unwrap()]);
    cmd.args(extra).arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    assert!(status.success(), "curl {url} {extra:?}: {}", String::from_utf8_lossy(&err));
    Response::parse(&out, false, true).unwrap().unwrap().0
}

fn ranges_over_https(engine: &[&str]) {
    let fx = Fixture::new();
    let data = pseudo_random(FILE_LEN, 7);
    fx.write("media/blob.bin", &data);
    fx.write("films/demo.mp4", &std::fs::read(DEMO).unwrap());
    let (server, tls, _own) = https_server(engine, &fx, &["--hls-segment", "2s"]);
    let url = format!("https://localhost:{}/media/blob.bin", tls.port());
    let resolve = format!("localhost:{}:127.0.0.1", tls.port());
    let r = ["--resolve", resolve.as_str()];

    let whole = curl(&url, &r);
    assert_eq!(whole.status, 200, "{}", whole.head_text());
    assert_eq!(sha256_hex(&whole.body), sha256_hex(&data), "whole file over https");

    let mut single = r.to_vec();
    single.extend(["-H", "Range: bytes=1000-299999"]);
    let one = curl(&url, &single);
    assert_eq!(one.status, 206, "{}", one.head_text());
    assert_eq!(sha256_hex(&one.body), sha256_hex(&data[1000..300_000]), "single range");

    let mut suffix = r.to_vec();
    suffix.extend(["-H", "Range: bytes=-4097"]);
    let tail = curl(&url, &suffix);
    assert_eq!(tail.status, 206, "{}", tail.head_text());
    assert_eq!(sha256_hex(&tail.body), sha256_hex(&data[FILE_LEN - 4097..]), "suffix range");

    let mut multi = r.to_vec();
    multi.extend(["-H", "Range: bytes=0-9,100000-399999,-100"]);
    let parts_resp = curl(&url, &multi);
    assert_eq!(parts_resp.status, 206, "{}", parts_resp.head_text());
    let parts = parse_multipart(&parts_resp).unwrap();
    let want = [(0usize, 10usize), (100_000, 400_000), (FILE_LEN - 100, FILE_LEN)];
    assert_eq!(parts.len(), want.len());
    for (part, (a, b)) in parts.iter().zip(want) {
        assert_eq!(sha256_hex(&part.data), sha256_hex(&data[a..b]), "multipart part {a}-{b}");
    }

    // Plain HTTP keeps its own port.
    let plain = fetch_get(server.addr(), "/media/blob.bin", &[("Range", "bytes=5-9")]);
    assert_eq!(plain.body, data[5..10]);

    // ffprobe reads the MP4 (with ranges of its own) over https.
    let mp4 = format!("https://127.0.0.1:{}/films/demo.mp4", tls.port());
    let over_https = ffprobe_video_frames(&mp4).0;
    let over_http = ffprobe_video_frames(&format!("http://{}/films/demo.mp4", server.addr())).0;
    assert_eq!(over_https, over_http, "frames over https and over http");
}

/// A 40 MB file: sparse, with distinct bytes written across TLS record and encryption-chunk
/// boundaries (16 KiB records, 48 KiB chunks) so that a lost, repeated or reordered record shows.
const BIG_LEN: usize = 40_000_000;

/// A 40 MB file and ranges across it arrive byte-exact through curl, and 120 small requests
/// pipelined in one write on one TLS connection are all answered, in order.
fn large_file_and_pipelining_over_https(engine: &[&str]) {
    let fx = Fixture::new();
    fx.sparse("big.bin", BIG_LEN as u64);
    let mut data = vec![0u8; BIG_LEN];
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::options().write(true).open(fx.path("big.bin")).unwrap();
        let marks = [0, 16_383, 49_151, 49_152 + 7, 3 * 16_384 * 101 - 500, 20_000_001, BIG_LEN - 3000];
        for (i, at) in marks.into_iter().enumerate() {
            let block = pseudo_random(3000, 100 + i as u64);
            f.write_all_at(&block, at as u64).unwrap();
            data[at..at + block.len()].copy_from_slice(&block);
        }
    }
    for (i, size) in [1usize, 700, 16_384, 16_385, 70_000].into_iter().enumerate() {
        fx.write(&format!("small/{i}.bin"), &pseudo_random(size, 200 + i as u64));
    }
    let (_server, tls, _own) = https_server(engine, &fx, &[]);
    let url = format!("https://localhost:{}/big.bin", tls.port());
    let resolve = format!("localhost:{}:127.0.0.1", tls.port());
    let r = ["--resolve", resolve.as_str(), "--max-time", "60"];

    let whole = curl(&url, &r);
    assert_eq!(whole.status, 200, "{}", whole.head_text());
    assert_eq!(whole.body.len(), BIG_LEN);
    assert_eq!(sha256_hex(&whole.body), sha256_hex(&data), "40 MB file over https");

    let mut single = r.to_vec();
    single.extend(["-H", "Range: bytes=16000-20003000"]);
    let one = curl(&url, &single);
    assert_eq!(one.status, 206, "{}", one.head_text());
    assert_eq!(sha256_hex(&one.body), sha256_hex(&data[16_000..20_003_001]), "single range");

    // TLS 1.2 records carry an explicit nonce (29 bytes of overhead, not 22): same bytes.
    let mut tls12 = r.to_vec();
    tls12.extend(["--tls-max", "1.2", "-H", "Range: bytes=16000-20003000"]);
    let one = curl(&url, &tls12);
    assert_eq!(one.status, 206, "{}", one.head_text());
    assert_eq!(sha256_hex(&one.body), sha256_hex(&data[16_000..20_003_001]), "single range over TLS 1.2");

    let mut multi = r.to_vec();
    multi.extend(["-H", "Range: bytes=49000-5000000,19999000-20004000,-5000"]);
    let parts_resp = curl(&url, &multi);
    assert_eq!(parts_resp.status, 206, "{}", parts_resp.head_text());
    let parts = parse_multipart(&parts_resp).unwrap();
    let want = [(49_000usize, 5_000_001usize), (19_999_000, 20_004_001), (BIG_LEN - 5000, BIG_LEN)];
    assert_eq!(parts.len(), want.len());
    for (part, (a, b)) in parts.iter().zip(want) {
        assert_eq!(sha256_hex(&part.data), sha256_hex(&data[a..b]), "multipart part {a}-{b}");
    }

    // Pipelined: every request written at once, every answer read back in order.
    const PIPELINED: usize = 120;
    let mut stream = tls_connect(tls);
    let mut requests = String::new();
    for i in 0..PIPELINED {
        requests.push_str(&format!("GET /small/{}.bin HTTP/1.1\r\nHost: localhost\r\n\r\n", i % 5));
    }
    stream.write_all(requests.as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut answered = 0;
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while answered < PIPELINED {
        assert!(std::time::Instant::now() < give_up, "{answered} of {PIPELINED} pipelined answers");
        while let Some((resp, used)) = Response::parse(&buf, false, false).unwrap() {
            assert_eq!(resp.status, 200, "{}", resp.head_text());
            assert_eq!(resp.body, fx.file(&format!("small/{}.bin", answered % 5)), "answer {answered}");
            buf.drain(..used);
            answered += 1;
        }
        if answered == PIPELINED {
            break;
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "closed after {answered} of {PIPELINED} pipelined answers");
        buf.extend_from_slice(&chunk[..n]);
    }
    assert!(buf.is_empty(), "nothing after the last answer");
}

/// HLS over https through ffprobe: one configuration per engine.
fn hls_over_https(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("films/demo.mp4", &std::fs::read(DEMO).unwrap());
    let (server, tls, _own) = https_server(engine, &fx, &["--hls-segment", "2s"]);
    let hls = ffprobe_video_frames(&format!("https://127.0.0.1:{}/films/demo.mp4/master.m3u8", tls.port())).0;
    let mp4 = ffprobe_video_frames(&format!("http://{}/films/demo.mp4", server.addr())).0;
    // The HLS demuxer also lists its streams under a program: the same count, printed twice.
    let counts: Vec<&str> = hls.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!counts.is_empty());
    for count in counts {
        assert_eq!(count, mp4, "video frames of the HLS over https and of the MP4");
    }
    assert!(mp4.parse::<u64>().unwrap() > 0);
}

/// A TLS client connection to `addr` trusting the test CA only.
fn tls_connect(addr: SocketAddr) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    use rustls_pki_types::pem::PemObject;
    for cert in rustls_pki_types::CertificateDer::pem_file_iter(pki().ca()).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config =
        rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::aws_lc_rs::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut stream = rustls::StreamOwned::new(conn, tcp);
    while stream.conn.is_handshaking() {
        stream.conn.complete_io(&mut stream.sock).unwrap();
    }
    stream
}

/// One request on an open TLS connection; the body of its (Content-Length framed) response.
fn tls_get(stream: &mut impl ReadWrite, path: &str) -> Response {
    stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes()).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        if let Some((resp, _)) = Response::parse(&buf, false, false).unwrap() {
            return resp;
        }
        let n = stream.read(&mut chunk).unwrap();
        assert!(n > 0, "connection closed before a whole response");
        buf.extend_from_slice(&chunk[..n]);
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// The serial number bytes of the certificate the server presented, as DER shows them.
fn served_serial(stream: &rustls::StreamOwned<rustls::ClientConnection, TcpStream>) -> Vec<u8> {
    let cert = &stream.conn.peer_certificates().unwrap()[0];
    // DER: SEQUENCE { SEQUENCE (tbs) { [0] { INTEGER 2 } (v3), INTEGER serial, ... } }: the
    // serial follows the version; 0xA1 and 0xB2 encode as two bytes, 00 A1 and 00 B2.
    let der = cert.as_ref();
    let version = [0xa0, 0x03, 0x02, 0x01, 0x02];
    let at = der.windows(version.len()).position(|w| w == version).unwrap() + version.len();
    assert_eq!(der[at], 0x02, "an INTEGER follows the version");
    let len = der[at + 1] as usize;
    der[at + 2..at + 2 + len].to_vec()
}

fn certificate_reload_on_sighup(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("hello.txt", b"hello over tls\n");
    let (server, tls, own) = https_server(engine, &fx, &[]);
    let mut old = tls_connect(tls);
    assert_eq!(served_serial(&old), [0x00, 0xA1]);
    assert_eq!(tls_get(&mut old, "/hello.txt").body, b"hello over tls\n");

    std::fs::copy(pki().path("b.pem"), own.path().join("cert.pem")).unwrap();
    std::fs::copy(pki().path("b.key"), own.path().join("key.pem")).unwrap();
    server.signal(libc::SIGHUP);
    assert!(
        poll_until(IO_TIMEOUT, || server.log_text().contains("reloaded")),
        "no reload line:\n{}",
        server.log_text()
    );
    let mut new = tls_connect(tls);
    assert_eq!(served_serial(&new), [0x00, 0xB2], "a new connection gets the new certificate");
    assert_eq!(tls_get(&mut new, "/hello.txt").status, 200);
    // The connection opened before the swap keeps its session.
    assert_eq!(tls_get(&mut old, "/hello.txt").body, b"hello over tls\n");

    // A broken pair is refused and the server keeps the certificate it has.
    std::fs::write(own.path().join("key.pem"), b"not a key").unwrap();
    server.signal(libc::SIGHUP);
    assert!(poll_until(IO_TIMEOUT, || server.log_text().contains("still serving the previous certificate")));
    assert_eq!(served_serial(&tls_connect(tls)), [0x00, 0xB2]);
}

/// Reads until the server closes (or `IO_TIMEOUT`); true when it closed.
fn closed_by_server(mut s: TcpStream) -> bool {
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
}

fn bad_handshakes_are_closed_and_counted(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("hello.txt", b"hello over tls\n");
    let (server, tls, _own) = https_server(engine, &fx, &["--header-timeout", "2s"]);
    // A good connection open throughout.
    let mut good = tls_connect(tls);
    assert_eq!(tls_get(&mut good, "/hello.txt").status, 200);

    plain_http_is_told_it_reached_the_https_port(tls);
    let mut garbage = TcpStream::connect(tls).unwrap();
    garbage.write_all(&pseudo_random(3000, 3)).unwrap();
    assert!(closed_by_server(garbage), "garbage on the TLS port is closed");
    // A client that never says anything is cut at the header deadline.
    let silent = TcpStream::connect(tls).unwrap();
    assert!(closed_by_server(silent), "a silent client is closed at the header deadline");

    assert_eq!(tls_get(&mut good, "/hello.txt").body, b"hello over tls\n", "others are undisturbed");
    let m = server.scrape();
    assert!(metric(&m, "sluice_tls_handshake_failures_total") >= 3, "{m}");
    assert!(metric(&m, "sluice_tls_handshakes_total") >= 1, "{m}");
}

/// Without --tls-listen, --listen serves HTTPS only: plain HTTP there is refused with a 400.
fn https_only_on_listen(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("hello.txt", b"hello over tls\n");
    let (cert, key) = (pki().path("a.pem"), pki().path("a.key"));
    let server = Server::serve(
        engine,
        &fx,
        &["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()],
    );
    assert!(server.log_text().contains("listening on https://"), "{}", server.log_text());
    let port = server.addr().port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let r = curl(&format!("https://localhost:{port}/hello.txt"), &["--resolve", &resolve]);
    assert_eq!(r.body, b"hello over tls\n");
    plain_http_is_told_it_reached_the_https_port(server.addr());
    assert!(metric(&server.scrape(), "sluice_tls_handshake_failures_total") >= 1);
}

/// Plain HTTP sent to the TLS port gets a plain-HTTP 400 that says so, as nginx answers, and the
/// connection is closed.
#[track_caller]
fn plain_http_is_told_it_reached_the_https_port(tls: SocketAddr) {
    let mut plain = TcpStream::connect(tls).unwrap();
    plain.write_all(b"GET /hello.txt HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    plain.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    let mut answer = Vec::new();
    let _ = plain.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{answer}");
    assert!(answer.contains("Connection: close\r\n"), "{answer}");
    assert!(answer.ends_with("plain HTTP request sent to the HTTPS port; use https://\n"), "{answer}");
}

/// What the kernel lists: the expected verdict of sluice's probe.
fn kernel_has_tls_ulp() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .is_ok_and(|s| s.split_whitespace().any(|u| u == "tls"))
}

#[test]
fn kernel_tls_detection_is_reported() {
    let pki = pki();
    let (cert, key) = (pki.path("a.pem"), pki.path("a.key"));
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--check", "--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()])
        .env_remove("SLUICE_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let available = kernel_has_tls_ulp();
    if available {
        assert!(err.contains("kernel TLS on: "), "{err}");
    } else {
        assert!(err.contains("kernel TLS unavailable: the kernel has no `tls` TCP ULP"), "{err}");
    }
    let fx = Fixture::new();
    fx.write("hello.txt", b"hello over tls\n");
    let (server, tls, _own) = https_server(&["--engine", "epoll"], &fx, &[]);
    let line = if available { "kernel TLS on: " } else { "kernel TLS unavailable" };
    assert!(server.log_text().contains(line), "{}", server.log_text());
    // Here every connection stays in user space and says why in /metrics (the VM test,
    // tests/ktls_vm.rs, shows the kernel taking them where it can).
    let r = curl(&format!("https://127.0.0.1:{}/hello.txt", tls.port()), &[]);
    assert_eq!(r.body, b"hello over tls\n");
    let m = server.scrape();
    if !available {
        assert_eq!(metric(&m, "sluice_tls_kernel_connections_total"), 0, "{m}");
        assert_eq!(metric(&m, "sluice_tls_kernel_fallbacks_total{reason=\"unsupported\"}"), 1, "{m}");
    }
    drop(server);
    // tls.kernel = off: no probe, no switch, said so.
    let (server, _, _own_off) = https_server(&["--engine", "epoll"], &fx, &["--tls-kernel", "off"]);
    assert!(server.log_text().contains("kernel TLS off"), "{}", server.log_text());

    // A key that does not load is refused before anything starts, with exit status 2.
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--check", "--tls-cert", cert.to_str().unwrap(), "--tls-key", "/nonexistent/key.pem"])
        .env_remove("SLUICE_CONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read private key"));
}

#[test]
fn haproxy_tls_frontend_is_valid() {
    let haproxy = require_tool("haproxy", "haproxy");
    let pki = pki();
    let both = pki.path("haproxy.pem");
    let mut pem = std::fs::read(pki.path("a.pem")).unwrap();
    pem.extend(std::fs::read(pki.path("a.key")).unwrap());
    std::fs::write(&both, pem).unwrap();
    let cfg = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/haproxy.cfg");
    let check = |pem: &Path| {
        let mut cmd = Command::new(&haproxy);
        cmd.args(["-c", "-f", cfg]);
        for (i, v) in ["SLUICE_HTTP_BIND", "SLUICE_RTSP_BIND", "SLUICE_STATS_BIND", "SLUICE_HTTPS_BIND"]
            .iter()
            .enumerate()
        {
            cmd.env(v, format!("127.0.0.1:{}", 20_000 + i));
        }
        for (v, a) in
            [("EDGE_A_HTTP", "127.0.0.1:1"), ("EDGE_A_RTSP", "127.0.0.1:2"), ("EDGE_B_HTTP", "127.0.0.1:3")]
        {
            cmd.env(v, a);
        }
        cmd.env("EDGE_B_RTSP", "127.0.0.1:4").env("EDGE_A_ADMIN_PORT", "5").env("EDGE_B_ADMIN_PORT", "6");
        cmd.env("SLUICE_TLS_PEM", pem);
        run_bounded(&mut cmd, Duration::from_secs(30))
    };
    let (status, out, err) = check(&both);
    assert!(status.success(), "{}{}", String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
    // The frontend is really read: a missing certificate fails the check.
    let (status, ..) = check(&pki.path("missing.pem"));
    assert!(!status.success());
}

engine_matrix!(ranges_over_https);
rtsp_matrix!(
    hls_over_https,
    large_file_and_pipelining_over_https,
    certificate_reload_on_sighup,
    bad_handshakes_are_closed_and_counted,
    https_only_on_listen
);
