//! External tools (ffprobe, ...; found through sluice-harness), bounded waits, metrics scrapes
//! and descriptor counts, and the figures robustness tests record.

#![allow(dead_code)]

use super::*;

/// The path of a tool the tests need; panics, saying how to get it, when it is missing.
pub fn require_tool(name: &str, package: &str) -> PathBuf {
    sluice_harness::tools::find_tool_or(name, &format!("apt-get install {package}")).unwrap_or_else(|e| {
        panic!("{e}. This test needs it and does not skip: run the project's test script (scripts/test), which installs it.")
    })
}

/// A command running ffmpeg's tool `name`, with no proxy in its environment (they never apply to
/// loopback, but be sure).
pub fn tool(name: &str) -> Command {
    let mut cmd = Command::new(require_tool(name, "ffmpeg"));
    for v in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    cmd
}

/// Video frames ffprobe decodes from `url` (HTTP, or RTSP over TCP), and what it printed on
/// stderr; panics when it fails.
pub fn ffprobe_video_frames(url: &str) -> (String, String) {
    let mut cmd = tool("ffprobe");
    if url.starts_with("rtsp://") {
        cmd.args(["-rtsp_transport", "tcp"]);
    } else {
        cmd.args(["-rw_timeout", "10000000"]);
    }
    cmd.args(["-v", "error", "-count_frames", "-select_streams", "v:0"]);
    cmd.args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"]).arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&err).into_owned();
    assert!(status.success(), "ffprobe {url} failed ({status}): {stderr}");
    (String::from_utf8_lossy(&out).trim().trim_end_matches(',').to_string(), stderr)
}

/// The video frames ffprobe decodes from `url`, as a number; panics when it cannot count them.
/// (An HLS master is a program too: its stream is listed twice, with the same count.)
pub fn video_frame_count(url: &str) -> u64 {
    let (frames, stderr) = ffprobe_video_frames(url);
    let first = frames.lines().next().unwrap_or_default();
    first.parse().unwrap_or_else(|_| panic!("ffprobe {url} counted {frames:?}: {stderr}"))
}

/// Runs a command with a time limit (sluice-harness kills it by pid if it overruns); returns
/// (status, stdout, stderr); panics when it cannot run or overruns.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> (ExitStatus, Vec<u8>, Vec<u8>) {
    let out = sluice_harness::process::run_bounded(cmd, limit).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    (out.status, out.stdout, out.stderr)
}

/// ffmpeg decodes `url` to its end without a word on stderr (no error, no concealment).
pub fn decodes_cleanly(url: &str) {
    let mut ffmpeg = tool("ffmpeg");
    ffmpeg.args(["-nostdin", "-v", "error", "-rw_timeout", "10000000", "-i", url, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut ffmpeg, Duration::from_secs(90));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffmpeg decoding {url}: {status}: {err}");
}

/// Polls `cond` every 50 ms until it is true or `limit` passes; returns whether it became true.
pub fn poll_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Reads one metric's value (the whole sample name, labels included) from `/metrics` text.
pub fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
        .parse::<f64>()
        .unwrap_or_else(|e| panic!("{name}: {e}")) as u64
}

/// Scrapes `/metrics` over `c`, checking it is Prometheus text.
pub fn metrics(c: &mut Conn) -> String {
    c.send(get("/metrics", &[]));
    let r = c.response();
    r.expect_status(200, "/metrics");
    assert!(r.header("content-type").unwrap_or("").starts_with("text/plain; version=0.0.4"), "{r:?}");
    r.body_text()
}

/// Waits until the server's descriptor count is at most `baseline` (10 s at most).
pub fn wait_fds(server: &Server, baseline: usize, limit: Duration) -> Result<(), usize> {
    let mut last = 0;
    if poll_until(limit, || {
        last = server.fd_count();
        last <= baseline
    }) {
        Ok(())
    } else {
        Err(last)
    }
}

/// The descriptor count once the server is idle: after a warm-up request, when it stops changing.
pub fn idle_fd_baseline(server: &Server) -> usize {
    let mut c = Conn::open(server.addr());
    c.send(get("/t1.html", &[("Connection", "close")]));
    c.response().expect_status(200, "warm-up");
    assert!(c.wait_close(Duration::from_secs(5)).closed, "warm-up connection not closed");
    drop(c);
    std::thread::sleep(Duration::from_millis(200));
    // Stable over three samples 100 ms apart (bounded: 5 s).
    let mut samples = vec![server.fd_count()];
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        samples.push(server.fd_count());
        let n = samples.len();
        if n >= 3 && samples[n - 1] == samples[n - 2] && samples[n - 2] == samples[n - 3] {
            break;
        }
    }
    *samples.last().unwrap()
}

/// Prints a measured figure of a robustness test as one tab-separated line that
/// `scripts/robustness_table.py` collects into docs/ROBUSTNESS.md (visible with `--nocapture`).
pub fn record_figure(test: &str, engine: &[&str], figure: impl std::fmt::Display) {
    let engine: Vec<&str> = engine.iter().copied().filter(|a| !a.starts_with("--")).collect();
    println!("ROBUSTNESS\t{test}\t{}\t{figure}", engine.join(" "));
}

/// A port free right now on 127.0.0.1.
pub fn free_port() -> u16 {
    sluice_harness::free_port().expect("a free port")
}

/// An MP4 that ffmpeg makes from its test sources: `secs` of 320x180 `testsrc2` at 25 fps and a
/// 440 Hz sine at 44.1 kHz, encoded as `codec_args` say (everything between the inputs and the
/// output file, words split at spaces).
pub fn test_film(secs: u32, codec_args: &str) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("film.mp4");
    let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
    cmd.args(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25"])
        .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=44100", "-t", &secs.to_string()])
        .args(codec_args.split_whitespace())
        .arg(&out);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
    assert!(status.success(), "ffmpeg made no film: {}", String::from_utf8_lossy(&err));
    std::fs::read(&out).unwrap()
}

/// Runs `openssl ARGS` in `dir` (certificates, CAs and OCSP responses for the HTTPS tests), which
/// must succeed.
pub fn openssl(dir: &std::path::Path, args: &[&str]) {
    let mut cmd = std::process::Command::new(require_tool("openssl", "openssl"));
    cmd.current_dir(dir).args(args);
    let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(30));
    assert!(status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&err));
}

/// The `openssl req` arguments of a new P-256 key.
const EC_KEY: [&str; 5] = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];

/// A throwaway CA in `dir` (`ca.key`, `ca.pem`, valid `days`) and the extensions its server
/// certificates get (`ext.cnf`: localhost and 127.0.0.1, server authentication).
pub fn test_ca(dir: &std::path::Path, days: &str, subject: &str) {
    let mut ca = vec!["req", "-x509"];
    ca.extend(EC_KEY);
    ca.extend(["-keyout", "ca.key", "-out", "ca.pem", "-days", days, "-subj", subject]);
    openssl(dir, &ca);
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
}

/// A server certificate `NAME.pem` (key `NAME.key`) signed by [`test_ca`]'s CA in `dir`.
pub fn test_leaf(dir: &std::path::Path, name: &str, serial: &str, days: &str, subject: &str) {
    let (key, csr, pem) = (format!("{name}.key"), format!("{name}.csr"), format!("{name}.pem"));
    let mut req = vec!["req"];
    req.extend(EC_KEY);
    req.extend(["-keyout", &key, "-out", &csr, "-subj", subject]);
    openssl(dir, &req);
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-set_serial",
            serial,
            "-days",
            days,
            "-extfile",
            "ext.cnf",
            "-out",
            &pem,
        ],
    );
}
