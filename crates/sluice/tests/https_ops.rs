//! What an operator of an nginx HTTPS port expects of sluice's, end to end: `[tls] hsts` on every
//! HTTPS response (an error too) and never over plain HTTP; `[tls] ocsp` stapled to the handshake
//! (`openssl s_client -status` reads it), refused at start when revoked, about another
//! certificate or not DER, and on SIGHUP when bad (the previous one kept, the reason logged);
//! and the certificate's expiry in `/metrics`, in `serve --check` and as a warning in the log
//! under 14 days, following a reload. A throwaway CA made here with openssl's CLI signs the
//! certificates and, as an OCSP responder (`openssl ocsp -index`), the responses.
//!
//! All traffic stays on 127.0.0.1; every wait is bounded.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use common::*;

const HSTS: &str = "max-age=31536000; includeSubDomains";
const DAY: f64 = 86_400.0;

/// A CA, a certificate of 365 days (`long`, serial 0x5E) and one of 3 days (`short`, 0x3D), and
/// OCSP responses: `long-good.der`, `short-good.der`, `long-revoked.der`.
struct Pki {
    dir: tempfile::TempDir,
}

impl Pki {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn arg(&self, name: &str) -> String {
        self.path(name).to_str().unwrap().to_string()
    }
}

/// The CA, certificates and OCSP responses, made once per test binary.
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        test_ca(d, "400", "/CN=sluice ops test CA");
        for (name, serial, days) in [("long", "0x5E", "365"), ("short", "0x3D", "3")] {
            test_leaf(d, name, serial, days, "/CN=localhost");
        }
        // The responder's databases (openssl ca's index.txt: status, notAfter, revocation time,
        // serial, file, subject): 5E valid in one, revoked in the other.
        let short = "V\t301231235959Z\t\t3D\tunknown\t/CN=short\n";
        let good = format!("V\t301231235959Z\t\t5E\tunknown\t/CN=long\n{short}");
        let revoked = format!("R\t301231235959Z\t261101000000Z\t5E\tunknown\t/CN=long\n{short}");
        std::fs::write(d.join("good.txt"), good).unwrap();
        std::fs::write(d.join("revoked.txt"), revoked).unwrap();
        for (cert, db, out) in [
            ("long", "good.txt", "long-good.der"),
            ("short", "good.txt", "short-good.der"),
            ("long", "revoked.txt", "long-revoked.der"),
        ] {
            let request = format!("{out}.req");
            openssl(
                d,
                &[
                    "ocsp",
                    "-issuer",
                    "ca.pem",
                    "-cert",
                    &format!("{cert}.pem"),
                    "-no_nonce",
                    "-reqout",
                    &request,
                ],
            );
            openssl(
                d,
                &[
                    "ocsp", "-index", db, "-rsigner", "ca.pem", "-rkey", "ca.key", "-CA", "ca.pem", "-reqin",
                    &request, "-respout", out, "-ndays", "1",
                ],
            );
        }
        std::fs::write(d.join("garbage.der"), b"not an OCSP response").unwrap();
        Pki { dir }
    })
}

/// Copies the named certificate and key (`long` or `short`) and OCSP response into `dir` as
/// cert.pem, key.pem and ocsp.der, where a test may swap them.
fn install(dir: &Path, cert: &str, ocsp: Option<&str>) {
    let pki = pki();
    std::fs::copy(pki.path(&format!("{cert}.pem")), dir.join("cert.pem")).unwrap();
    std::fs::copy(pki.path(&format!("{cert}.key")), dir.join("key.pem")).unwrap();
    if let Some(ocsp) = ocsp {
        std::fs::copy(pki.path(ocsp), dir.join("ocsp.der")).unwrap();
    }
}

/// An HTTPS server on its own port with the named certificate and OCSP response installed in a
/// directory of the test's own; returns the server, the HTTPS address and that directory.
fn https_server(
    engine: &[&str],
    fx: &Fixture,
    (cert, ocsp): (&str, Option<&str>),
    extra: &[&str],
) -> (Server, SocketAddr, tempfile::TempDir) {
    let own = tempfile::tempdir().unwrap();
    install(own.path(), cert, ocsp);
    let (cert, key, staple) =
        (own.path().join("cert.pem"), own.path().join("key.pem"), own.path().join("ocsp.der"));
    let mut args = vec!["--tls-cert", cert.to_str().unwrap(), "--tls-key", key.to_str().unwrap()];
    args.extend(["--tls-listen", "127.0.0.1:0"]);
    if ocsp.is_some() {
        args.extend(["--tls-ocsp", staple.to_str().unwrap()]);
    }
    args.extend_from_slice(extra);
    let server = Server::serve(engine, fx, &args);
    let tls = server
        .logs()
        .iter()
        .find_map(|l| parse_scheme_line(l, "https"))
        .unwrap_or_else(|| panic!("no https listening line in:\n{}", server.log_text()));
    (server, tls, own)
}

/// `curl -i` over HTTPS, verifying the chain with the test CA.
fn curl(tls: SocketAddr, target: &str) -> Response {
    let mut cmd = Command::new(require_tool("curl", "curl"));
    for v in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    let resolve = format!("localhost:{}:127.0.0.1", tls.port());
    cmd.args(["-sS", "-i", "--http1.1", "--max-time", "20", "--cacert", &pki().arg("ca.pem")]);
    cmd.args(["--resolve", &resolve]).arg(format!("https://localhost:{}{target}", tls.port()));
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    assert!(status.success(), "curl {target}: {}", String::from_utf8_lossy(&err));
    Response::parse(&out, false, true).unwrap().unwrap().0
}

/// What `openssl s_client -status` prints of the handshake (the stapled OCSP response).
fn s_client_status(tls: SocketAddr) -> String {
    let mut cmd = Command::new(require_tool("openssl", "openssl"));
    cmd.args(["s_client", "-connect", &tls.to_string(), "-servername", "localhost", "-status"]);
    cmd.args(["-CAfile", &pki().arg("ca.pem")]).stdin(Stdio::null());
    let (_, out, _) = run_bounded(&mut cmd, Duration::from_secs(30));
    String::from_utf8_lossy(&out).into_owned()
}

/// `sluice serve --check` with `args`: its exit code and standard error.
fn check(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["serve", "--check"])
        .args(args)
        .env_remove("SLUICE_CONFIG")
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Days the certificate has left, as `/metrics` says.
fn expiry_days(server: &Server) -> f64 {
    metric(&server.scrape(), "sluice_tls_certificate_expiry_seconds") as f64 / DAY
}

fn is_expiry_warning(line: &str) -> bool {
    line.contains("WARN") && line.contains("expires in")
}

/// HSTS on an answer and on an error over HTTPS and none over plain HTTP; the OCSP response
/// stapled; the expiry of a 365-day certificate in `/metrics`, without a warning.
fn hsts_ocsp_and_expiry(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("hello.txt", b"hello\n");
    let (server, tls, _own) = https_server(engine, &fx, ("long", Some("long-good.der")), &["--hsts", HSTS]);
    let found = curl(tls, "/hello.txt");
    assert_eq!((found.status, found.body.as_slice()), (200, &b"hello\n"[..]), "{}", found.head_text());
    assert_eq!(found.header("strict-transport-security"), Some(HSTS), "{}", found.head_text());
    let missing = curl(tls, "/missing.txt");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("strict-transport-security"), Some(HSTS), "{}", missing.head_text());
    let plain = fetch_get(server.addr(), "/hello.txt", &[]);
    assert_eq!(plain.status, 200);
    assert_eq!(plain.header("strict-transport-security"), None, "RFC 6797 7.2: {}", plain.head_text());

    let status = s_client_status(tls);
    assert!(status.contains("OCSP Response Status: successful"), "{status}");
    assert!(status.contains("Cert Status: good"), "{status}");

    let days = expiry_days(&server);
    assert!((364.9..=365.0).contains(&days), "{days} days");
    assert!(!server.logs().iter().any(|l| is_expiry_warning(l)), "{}", server.log_text());
}

rtsp_matrix!(hsts_ocsp_and_expiry);

/// `serve --check` says how long the certificate has left (a warning under 14 days) and refuses
/// an OCSP response that is revoked, about another certificate or not one, with the reason.
#[test]
fn check_reports_expiry_and_refuses_bad_ocsp_responses() {
    let pki = pki();
    let pair = |name: &str| {
        [
            "--tls-cert".to_string(),
            pki.arg(&format!("{name}.pem")),
            "--tls-key".into(),
            pki.arg(&format!("{name}.key")),
        ]
    };
    let run = |cert: &str, more: &[&str]| {
        let mut args: Vec<String> = pair(cert).to_vec();
        args.extend(more.iter().map(|s| s.to_string()));
        check(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (code, err) = run("long", &["--tls-ocsp", &pki.arg("long-good.der")]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("expires in 365.0 days") && !err.contains("warning"), "{err}");
    let (code, err) = run("short", &[]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("warning: the certificate") && err.contains("expires in 3.0 days"), "{err}");
    for (cert, ocsp, why) in [
        ("long", "long-revoked.der", "it says the certificate is revoked"),
        ("short", "long-good.der", "it is about another certificate"),
        ("long", "garbage.der", "OCSPResponse: expected tag 0x30"),
        ("long", "missing.der", "No such file"),
    ] {
        let (code, err) = run(cert, &["--tls-ocsp", &pki.arg(ocsp)]);
        assert_eq!(code, Some(2), "{ocsp}: {err}");
        assert!(err.contains("cannot staple the OCSP response") && err.contains(why), "{ocsp}: {err}");
    }
}

/// SIGHUP: a revoked OCSP response is refused (logged, the good one still stapled), then a
/// 3-day certificate with its own response is taken: `/metrics` follows and the log warns.
/// Without `--tls-ocsp` nothing is stapled.
#[test]
fn reload_keeps_a_good_staple_and_reports_the_new_expiry() {
    let fx = Fixture::new();
    let engine = ["--engine", "epoll", "--workers", "1"];
    let (server, tls, own) = https_server(&engine, &fx, ("long", Some("long-good.der")), &[]);
    std::fs::copy(pki().path("long-revoked.der"), own.path().join("ocsp.der")).unwrap();
    server.signal(libc::SIGHUP);
    let refused = |l: &String| l.contains("SIGHUP") && l.contains("it says the certificate is revoked");
    assert!(poll_until(IO_TIMEOUT, || server.logs().iter().any(refused)), "{}", server.log_text());
    let status = s_client_status(tls);
    assert!(status.contains("Cert Status: good"), "the previous response is kept: {status}");
    assert!(expiry_days(&server) > 364.0);

    install(own.path(), "short", Some("short-good.der"));
    server.signal(libc::SIGHUP);
    assert!(
        poll_until(IO_TIMEOUT, || server.logs().iter().any(|l| is_expiry_warning(l))),
        "{}",
        server.log_text()
    );
    let days = expiry_days(&server);
    assert!((2.9..=3.0).contains(&days), "{days} days after the reload");
    let status = s_client_status(tls);
    assert!(status.contains("Serial Number: 3D") && status.contains("Cert Status: good"), "{status}");
    drop(server);

    // A server started with the 3-day certificate warns at once; nothing stapled without --tls-ocsp.
    let (server, tls, _own) = https_server(&engine, &fx, ("short", None), &[]);
    assert!(server.logs().iter().any(|l| is_expiry_warning(l)), "{}", server.log_text());
    let status = s_client_status(tls);
    assert!(status.contains("OCSP response: no response sent"), "{status}");
}
