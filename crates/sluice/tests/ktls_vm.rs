//! Kernel TLS for real, in a virtual machine: the host's kernel may have no `tls` module, so
//! this test boots Debian's kernel (its package unpacked into a cache folder by
//! `scripts/ktls-vm-kernel`, which `scripts/test` runs) under `qemu -accel tcg` with a busybox
//! initramfs built here from this build's own `sluice`, curl, openssl and their shared
//! libraries. Inside, sluice serves HTTPS once before `tls.ko` is loaded (every connection must
//! fall back to user space, counted with its reason), then with the module in: on epoll with
//! sendfile and with splice and on io_uring with splice (io_uring has no sendfile) a whole file,
//! a single range, a multipart range and a connection the client cuts mid-body, after which the
//! server still answers; on the first of them also a 50 MB file and TLS 1.3 with AES-128-GCM and
//! ChaCha20-Poly1305 and TLS 1.2 with AES-256-GCM and ChaCha20-Poly1305 (curl's default being
//! TLS 1.3 AES-256-GCM); on threads with sendfile and tokio with splice the whole file and the
//! cut; and once more with `--tls-kernel off`. Bodies are compared by SHA-256 (OpenSSL's inside,
//! the multipart body whole in base64); `/metrics` must count every connection as handed to the
//! kernel, none fallen back, and the configured strategy used for the file bodies; and the
//! clients' close_notify alerts must have reached sluice through the kernel's record path.
//!
//! Everything is bounded: qemu is killed by its pid at the deadline; inside, every curl has a
//! `--max-time`. The output names the kernel that booted. KVM is not used (it hangs on the
//! machines this runs on); TCG is slow, so the 50 MB file and the other suites are fetched on one
//! configuration only, and threads and tokio run the fewest cases (the suite's budget for this
//! test is 90 s). Without the kernel package or the tools the test fails and says to run
//! `./scripts/test`.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// The engine matrix macro is not used here.
#[allow(unused_macros)]
mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::edge::sha256_hex;
use common::*;

/// The file the small cases fetch: several TLS records and several sendfile/splice calls.
const SMALL_LEN: usize = 700_000;
/// The large file, in the initramfs: its SHA-256 is computed here, which under TCG would take
/// seconds.
const BIG_MB: usize = 50;
/// The whole VM run at most; it took 53 s (the test 58 s) on 2 cores shared with other builds,
/// load average 16 (`cargo test -p sluice --test ktls_vm`).
const VM_LIMIT: Duration = Duration::from_secs(240);
/// Kernel modules loaded before `tls.ko`, in dependency order: what AES-GCM and
/// ChaCha20-Poly1305 need in Debian's 6.1 kernel, where they are modules.
const MODULES: [&str; 10] = [
    "gf128mul",
    "ghash-generic",
    "ctr",
    "gcm",
    "libchacha",
    "chacha_generic",
    "libpoly1305",
    "poly1305_generic",
    "chacha20poly1305",
    "tls",
];
/// How much of the cases a configuration runs: TCG is slow, and the suite's budget is 90 s.
#[derive(Clone, Copy, PartialEq)]
enum Cases {
    /// Everything, the 50 MB file and the other suites too.
    All,
    /// Whole file, single and multipart range, cut connection.
    Usual,
    /// Whole file and cut connection: the switch works on this engine too.
    Few,
}

/// AES-NI and PCLMUL implementations, loaded first when the (emulated) processor has the
/// instructions (`-cpu max` does): the generic C AES-GCM takes twice as long under TCG.
const FAST_MODULES: [&str; 4] = ["cryptd", "crypto_simd", "aesni-intel", "ghash-clmulni-intel"];

/// (engine, send strategy, cases) with kernel TLS on.
const CONFIGS: [(&str, &str, Cases); 5] = [
    ("epoll", "sendfile", Cases::All),
    ("epoll", "splice", Cases::Usual),
    ("uring", "splice", Cases::Usual),
    ("threads", "sendfile", Cases::Few),
    ("tokio", "splice", Cases::Few),
];

fn run_tests_script_hint() -> String {
    "run ./scripts/test (it installs qemu-system-x86, busybox-static and cpio, and fetches the kernel \
     with scripts/ktls-vm-kernel)"
        .into()
}

/// The unpacked kernel package, as scripts/ktls-vm-kernel names its folder.
fn kernel_root() -> PathBuf {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/ktls-vm-kernel");
    let out = Command::new(script).arg("--check").output().unwrap();
    assert!(
        out.status.success(),
        "the kernel package of the VM test is not in its cache folder: {}",
        run_tests_script_hint()
    );
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

fn only_match(dir: &Path, what: &str, ok: impl Fn(&Path) -> bool) -> PathBuf {
    let found: Vec<PathBuf> = walk(dir).into_iter().filter(|p| ok(p)).collect();
    assert!(found.len() == 1, "expected one {what} under {}, found {found:?}", dir.display());
    found.into_iter().next().unwrap()
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.is_symlink() {
                todo.push(path);
            } else {
                files.push(path);
            }
        }
    }
    files
}

/// Copies the executable `program` to `bin/` of `root` with every shared library `ldd` names,
/// each at its own path (so the dynamic loader finds them as on the host). Debug information is
/// left out: the initramfs stays small and unpacks fast.
fn install_program(root: &Path, program: &Path, name: &str) {
    let target = root.join("bin").join(name);
    let (status, _, err) = run_bounded(
        Command::new(require_tool("objcopy", "binutils")).arg("--strip-debug").arg(program).arg(&target),
        Duration::from_secs(60),
    );
    assert!(status.success(), "objcopy {}: {}", program.display(), String::from_utf8_lossy(&err));
    let (status, out, _) = run_bounded(Command::new("ldd").arg(program), Duration::from_secs(10));
    assert!(status.success(), "ldd {}", program.display());
    for line in String::from_utf8_lossy(&out).lines() {
        let path = match line.split_once("=>") {
            Some((_, right)) => right.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        let Some(path) = path.filter(|p| p.starts_with('/')) else { continue };
        let inside = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().unwrap()).unwrap();
        std::fs::copy(std::fs::canonicalize(path).unwrap(), &inside).unwrap();
    }
}

/// A self-signed certificate for 127.0.0.1 and its key (openssl's CLI, as tests/https.rs).
fn make_certificate(dir: &Path) {
    let (status, _, err) = run_bounded(
        Command::new(require_tool("openssl", "openssl")).current_dir(dir).args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            "key.pem",
            "-out",
            "cert.pem",
            "-days",
            "2",
            "-subj",
            "/CN=sluice vm",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ]),
        Duration::from_secs(30),
    );
    assert!(status.success(), "openssl: {}", String::from_utf8_lossy(&err));
}

/// The VM's /init: a busybox shell script printing `KTLS <tag> <case> <value>` lines.
fn init_script() -> String {
    let modules = MODULES.join(" ");
    let fast = FAST_MODULES.join(" ");
    let configs: Vec<String> = CONFIGS
        .iter()
        .map(|(engine, send, cases)| {
            let cases = match cases {
                Cases::All => "all",
                Cases::Usual => "usual",
                Cases::Few => "few",
            };
            format!("serve {engine} {send} auto && cases {engine}-{send} {cases}")
        })
        .collect();
    let configs = configs.join("\n");
    format!(
        r#"#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /tmp
ip link set lo up
say() {{ echo "KTLS $*"; }}
say boot kernel $(uname -r)
fetch() {{ curl -sS --http1.1 --max-time 60 --cacert /pki/cert.pem "$@"; }}
sum() {{ openssl dgst -sha256 -r | cut -d' ' -f1; }}
PID=
serve() {{
  [ -n "$PID" ] && kill $PID && wait $PID
  /bin/sluice serve --root /media --engine $1 --workers 1 --send $2 --tls-kernel $3 \
    --log-level info,sluice_engine=debug \
    --listen 127.0.0.1:8443 --admin-listen 127.0.0.1:9090 \
    --tls-cert /pki/cert.pem --tls-key /pki/key.pem >/tmp/sluice.log 2>&1 &
  PID=$!
  i=0
  while [ $i -lt 300 ]; do
    curl -s -o /dev/null --max-time 2 http://127.0.0.1:9090/metrics && return 0
    sleep 0.1; i=$((i+1))
  done
  say error sluice did not start: $(cat /tmp/sluice.log)
  return 1
}}
metrics() {{
  say $1 metrics $(curl -s --max-time 10 http://127.0.0.1:9090/metrics | grep -E '^sluice_(tls_kernel|syscalls_total.kind="(sendfile|splice)"|io_uring_submitted)' | tr ' ' '=' | tr '\n' ' ')
}}
cases() {{
  say $1 start $(cut -d' ' -f1 /proc/uptime)
  say $1 whole $(fetch https://127.0.0.1:8443/small.bin | sum)
  if [ $2 != few ]; then
    say $1 range $(fetch -r 1000-99999 https://127.0.0.1:8443/small.bin | sum)
    fetch -i -r 0-99,5000-5999,600000-699999 https://127.0.0.1:8443/small.bin >/tmp/multi
    say $1 multipart $(base64 -w0 /tmp/multi)
  fi
  if [ $2 = all ]; then
    say $1 big-start $(cut -d' ' -f1 /proc/uptime)
    say $1 big $(fetch https://127.0.0.1:8443/big.bin | sum)
    say $1 big-end $(cut -d' ' -f1 /proc/uptime)
    say $1 tls13-aes128 $(fetch --tls13-ciphers TLS_AES_128_GCM_SHA256 https://127.0.0.1:8443/small.bin | sum)
    say $1 tls13-chacha $(fetch --tls13-ciphers TLS_CHACHA20_POLY1305_SHA256 https://127.0.0.1:8443/small.bin | sum)
    say $1 tls12-aes256 $(fetch --tls-max 1.2 --ciphers ECDHE-ECDSA-AES256-GCM-SHA384 https://127.0.0.1:8443/small.bin | sum)
    say $1 tls12-chacha $(fetch --tls-max 1.2 --ciphers ECDHE-ECDSA-CHACHA20-POLY1305 https://127.0.0.1:8443/small.bin | sum)
  fi
  fetch https://127.0.0.1:8443/big.bin 2>/dev/null | head -c 300000 | wc -c >/dev/null
  say $1 cut $(fetch https://127.0.0.1:8443/small.bin | sum)
  metrics $1
  say $1 close-notify $(grep -c "peer's close_notify" /tmp/sluice.log)
  say $1 end $(cut -d' ' -f1 /proc/uptime)
}}
say boot ready $(cut -d' ' -f1 /proc/uptime)
say boot ulp-before $(cat /proc/sys/net/ipv4/tcp_available_ulp)
serve epoll sendfile auto && say fallback whole $(fetch https://127.0.0.1:8443/small.bin | sum)
say fallback log $(grep -o 'kernel TLS [a-z]*' /tmp/sluice.log | head -1 | tr ' ' '_')
metrics fallback
for m in {fast}; do insmod /modules/$m.ko 2>/dev/null; done
for m in {modules}; do insmod /modules/$m.ko || say error insmod $m; done
say boot aes $(grep -m1 -o 'gcm-aesni' /proc/crypto)
say boot ulp-after $(cat /proc/sys/net/ipv4/tcp_available_ulp)
{configs}
serve epoll sendfile off
say off-cfg log $(grep -o 'kernel TLS [a-z]*' /tmp/sluice.log | head -1 | tr ' ' '_')
say off-cfg whole $(fetch https://127.0.0.1:8443/small.bin | sum)
metrics off-cfg
kill $PID
say done at $(cut -d' ' -f1 /proc/uptime)
poweroff -f
"#
    )
}

/// Builds the initramfs (an uncompressed newc cpio: the kernel unpacks it without
/// decompressing, which under TCG saves seconds) and returns its path.
fn build_initramfs(dir: &Path, kernel: &Path, small: &[u8], big: &[u8]) -> PathBuf {
    let root = dir.join("root");
    for d in ["bin", "media", "modules", "pki", "proc", "sys", "dev", "tmp"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let busybox = Path::new("/bin/busybox");
    assert!(busybox.exists(), "no /bin/busybox (busybox-static): {}", run_tests_script_hint());
    std::fs::copy(busybox, root.join("bin/busybox")).unwrap();
    install_program(&root, Path::new(env!("CARGO_BIN_EXE_sluice")), "sluice");
    install_program(&root, &require_tool("curl", "curl"), "curl");
    // OpenSSL's SHA-256 (with the SHA extensions `-cpu max` emulates) rather than busybox's C
    // loop: the whole test took 58 s with it at load average 16, 69 to 86 s with busybox's at 8
    // to 11, on the same 2 cores.
    install_program(&root, &require_tool("openssl", "openssl"), "openssl");
    for name in MODULES.into_iter().chain(FAST_MODULES) {
        let found = only_match(kernel, &format!("{name}.ko"), |p| {
            p.file_name().is_some_and(|f| f == format!("{name}.ko").as_str())
        });
        std::fs::copy(found, root.join("modules").join(format!("{name}.ko"))).unwrap();
    }
    make_certificate(&root.join("pki"));
    std::fs::write(root.join("media/small.bin"), small).unwrap();
    std::fs::write(root.join("media/big.bin"), big).unwrap();
    let init = root.join("init");
    std::fs::write(&init, init_script()).unwrap();
    std::fs::set_permissions(&init, std::fs::Permissions::from_mode(0o755)).unwrap();
    let image = dir.join("initramfs.cpio");
    let cpio = require_tool("cpio", "cpio");
    let mut child = Command::new(cpio)
        .current_dir(&root)
        .args(["-o", "-H", "newc", "--quiet", "-O"])
        .arg(&image)
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut names = String::new();
    for path in walk(&root) {
        names.push_str(path.strip_prefix(&root).unwrap().to_str().unwrap());
        names.push('\n');
    }
    // Directories first, so that cpio creates them before their files.
    let mut dirs: Vec<String> = Vec::new();
    for path in walk(&root) {
        let mut p = path.strip_prefix(&root).unwrap().parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.push(d.to_str().unwrap().to_string());
            p = d.parent();
        }
    }
    for d in ["proc", "sys", "dev", "tmp"] {
        dirs.push(d.into());
    }
    dirs.sort();
    dirs.dedup();
    let list = format!("{}\n{names}", dirs.join("\n"));
    child.stdin.take().unwrap().write_all(list.as_bytes()).unwrap();
    assert!(child.wait().unwrap().success(), "cpio failed");
    image
}

/// The `KTLS <tag> <case> <value>` lines of the console, as (tag, case) -> value.
fn report(console: &str) -> BTreeMap<(String, String), String> {
    console
        .lines()
        // A kernel message may share the line the script's output starts on.
        .filter_map(|l| l.trim_end_matches('\r').split_once("KTLS ").map(|(_, rest)| rest))
        .filter_map(|l| {
            let mut words = l.splitn(3, ' ');
            let (tag, case) = (words.next()?, words.next()?);
            Some(((tag.to_string(), case.to_string()), words.next().unwrap_or("").trim().to_string()))
        })
        .collect()
}

/// A metric's value from a `metrics` line (`name{labels}=value` words).
fn metric_of(line: &str, name: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("no {name} in {line}"))
        .parse::<f64>()
        .unwrap() as u64
}

#[test]
fn kernel_tls_serves_byte_exact_in_a_vm_and_falls_back_without_the_module() {
    let kernel = kernel_root();
    let qemu = require_tool("qemu-system-x86_64", "qemu-system-x86");
    let vmlinuz = only_match(&kernel.join("boot"), "vmlinuz", |p| {
        p.file_name().and_then(|f| f.to_str()).is_some_and(|f| f.starts_with("vmlinuz-"))
    });
    let dir = tempfile::tempdir().unwrap();
    let small: Vec<u8> = (0..SMALL_LEN as u64).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    // xorshift64: no period within the file, so a misplaced slice cannot hash the same.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let big: Vec<u8> = (0..BIG_MB * (1 << 20) / 8)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()
        })
        .collect();
    let image = build_initramfs(dir.path(), &kernel, &small, &big);

    let started = Instant::now();
    let mut cmd = Command::new(qemu);
    cmd.args([
        "-accel",
        "tcg",
        "-cpu",
        "max",
        "-smp",
        "2",
        "-m",
        "768",
        "-nographic",
        "-no-reboot",
        "-kernel",
    ])
    .arg(&vmlinuz)
    .arg("-initrd")
    .arg(&image)
    .args(["-append", "console=ttyS0 panic=-1 quiet loglevel=1 rdinit=/init"]);
    let (_, out, err) = run_bounded(&mut cmd, VM_LIMIT);
    let took = started.elapsed();
    let r = report(&String::from_utf8_lossy(&out));
    // The console as failures show it: long lines (the multipart body in base64) cut short.
    let console: String = String::from_utf8_lossy(&out)
        .lines()
        .map(|l| {
            if l.len() > 300 {
                format!("{}...\n", l.chars().take(300).collect::<String>())
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let get = |tag: &str, case: &str| -> &str {
        r.get(&(tag.to_string(), case.to_string())).map(String::as_str).unwrap_or_else(|| {
            panic!("no `{tag} {case}` in the VM's console:\n{console}\n{}", String::from_utf8_lossy(&err))
        })
    };
    let errors: Vec<_> = r.iter().filter(|((t, _), _)| t == "error").collect();
    assert!(errors.is_empty(), "{errors:?}\n{console}");
    assert!(console.contains("KTLS done"), "the VM did not finish:\n{console}");
    println!("booted {} under qemu TCG; the run took {took:.1?}", get("boot", "kernel"));
    println!("the initramfs was unpacked and ready {} s after boot", get("boot", "ready"));
    let aes = if get("boot", "aes").is_empty() { "generic C" } else { "AES-NI" };
    println!("the kernel's AES-GCM: {aes}");

    // Before the module: no `tls` ULP, every connection in user space, counted.
    assert!(!get("boot", "ulp-before").contains("tls"), "{console}");
    assert!(get("boot", "ulp-after").contains("tls"), "{console}");
    let whole = sha256_hex(&small);
    assert_eq!(get("fallback", "whole"), whole, "fallback: the whole file");
    assert_eq!(get("fallback", "log"), "kernel_TLS_unavailable", "{console}");
    let m = get("fallback", "metrics");
    assert_eq!(metric_of(m, "sluice_tls_kernel_connections_total"), 0, "{m}");
    assert_eq!(metric_of(m, "sluice_tls_kernel_fallbacks_total{reason=\"unsupported\"}"), 1, "{m}");

    // With the module: every case byte-exact and on kernel TLS, with the configured strategy.
    let range = sha256_hex(&small[1000..100_000]);
    for (engine, send, cases) in CONFIGS {
        let tag = format!("{engine}-{send}");
        assert_eq!(get(&tag, "whole"), whole, "{tag}: the whole file");
        assert_eq!(get(&tag, "cut"), whole, "{tag}: the file after a client cut a body short");
        let mut connections = 3;
        let uptime = |case: &str| get(&tag, case).parse::<f64>().unwrap();
        println!("{tag}: {:.1} s in the VM", uptime("end") - uptime("start"));
        if cases == Cases::Few {
            check_metrics(&tag, engine, send, get(&tag, "metrics"), connections);
            let close_notify: u64 = get(&tag, "close-notify").parse().unwrap();
            assert!(close_notify + 1 >= connections, "{tag}: {close_notify} close_notify of {connections}");
            continue;
        }
        assert_eq!(get(&tag, "range"), range, "{tag}: one range");
        connections += 2;
        let multi = base64_decode(get(&tag, "multipart"));
        let resp = Response::parse(&multi, false, true).unwrap().unwrap().0;
        assert_eq!(resp.status, 206, "{tag}: multipart");
        let parts = parse_multipart(&resp).unwrap();
        assert_eq!(parts.len(), 3, "{tag}: multipart parts");
        for (part, (a, b)) in parts.iter().zip([(0, 100), (5000, 6000), (600_000, 700_000)]) {
            assert_eq!(sha256_hex(&part.data), sha256_hex(&small[a..b]), "{tag}: multipart part {a}-{b}");
        }
        if cases == Cases::All {
            assert_eq!(get(&tag, "big"), sha256_hex(&big), "{tag}: the {BIG_MB} MB file");
            // The other suites the kernel takes (curl's default is TLS 1.3 AES-256-GCM).
            for suite in ["tls13-aes128", "tls13-chacha", "tls12-aes256", "tls12-chacha"] {
                assert_eq!(get(&tag, suite), whole, "{tag}: {suite}");
            }
            connections += 5;
            println!("{tag}: the {BIG_MB} MB file took {:.1} s", uptime("big-end") - uptime("big-start"));
        }
        check_metrics(&tag, engine, send, get(&tag, "metrics"), connections);
        // curl ends its connections with a close_notify, which reaches sluice as a record of
        // its own through recvmsg (the cut one's may not).
        let close_notify: u64 = get(&tag, "close-notify").parse().unwrap();
        assert!(close_notify + 1 >= connections, "{tag}: {close_notify} close_notify of {connections}");
    }

    // tls.kernel = off: user space although the kernel could, and said so.
    assert_eq!(get("off-cfg", "log"), "kernel_TLS_off", "{console}");
    assert_eq!(get("off-cfg", "whole"), whole);
    let m = get("off-cfg", "metrics");
    assert_eq!(metric_of(m, "sluice_tls_kernel_connections_total"), 0, "{m}");
}

/// Every connection of a configuration (`connections`) on kernel TLS, none fallen back, and the
/// file bodies sent the configured way.
fn check_metrics(tag: &str, engine: &str, send: &str, m: &str, connections: u64) {
    assert_eq!(metric_of(m, "sluice_tls_kernel_connections_total"), connections, "{tag}: {m}");
    for reason in ["unsupported", "input_pending", "ulp", "keys"] {
        let name = format!("sluice_tls_kernel_fallbacks_total{{reason=\"{reason}\"}}");
        assert_eq!(metric_of(m, &name), 0, "{tag}: {m}");
    }
    if engine == "uring" {
        // io_uring's splices are operations, not system calls: that it ran on the ring is
        // what the counters can tell.
        assert!(metric_of(m, "sluice_io_uring_submitted_total") > 0, "{tag}: {m}");
    } else {
        let calls = metric_of(m, &format!("sluice_syscalls_total{{kind=\"{send}\"}}"));
        assert!(calls > 0, "{tag}: no {send} calls: {m}");
    }
}

/// Standard base64 (busybox `base64 -w0`), decoded.
fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    digits
        .chunks(4)
        .flat_map(|q| {
            let n = q.iter().enumerate().fold(0u32, |n, (i, &d)| n | u32::from(d) << (18 - 6 * i));
            let bytes = n.to_be_bytes();
            bytes[1..q.len()].to_vec()
        })
        .collect()
}
