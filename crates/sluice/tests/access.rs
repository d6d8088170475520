//! Who may watch, end to end on every engine: `[[access]]` policies in a `sluice.toml`, URLs
//! signed by `sluice sign`, JWTs checked against a JWKS file and users with passwords (Basic and
//! Digest), over HTTP (files, playlists,
//! segments) and RTSP (DESCRIBE); and the limits per client address (429 with `Retry-After`,
//! RTSP sessions per address, upload bytes per token per day, a table that stays bounded under a flood of distinct addresses
//! from 127.0.0.0/8).
//!
//! A refused request is 403 (401 with nothing presented) whether or not the path exists; a
//! signed playlist carries its signature on to every URL it lists, so ffprobe plays HLS, DASH
//! and RTSP from the one signed URL (and from the one `sluice sign` prints for a manifest), and
//! carries nothing but the checked parameters; a Digest answer opens only its own URL.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use common::rtsp::{connect_from, RtspConn, UdpViewer};
use common::*;

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");

/// The HMAC key of `/films/` (id `k1`), and another one nobody configured.
const KEY: &str = "a-signing-key-for-the-tests";
const OTHER_KEY: &str = "not-the-configured-key";
/// The HS256 secret of `/members/`, in the JWKS as an `oct` key.
const JWT_SECRET: &[u8] = b"a-jwt-secret-of-at-least-32-bytes!!";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The demo under `/films/` (signed) and `/members/` (JWT), `/open.mp4` unguarded, with the
/// keys and the configuration beside them.
fn guarded_server(engine: &[&str], extra: &[&str]) -> (Server, Fixture, std::path::PathBuf) {
    let fx = Fixture::new();
    let demo = std::fs::read(DEMO).unwrap();
    fx.write("films/demo.mp4", &demo);
    fx.write("members/demo.mp4", &demo);
    fx.write("open.mp4", &demo);
    let keys = tempfile::tempdir().unwrap().keep();
    std::fs::write(keys.join("k1.key"), format!("{KEY}\n")).unwrap();
    std::fs::write(keys.join("other.key"), OTHER_KEY).unwrap();
    let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"m1","alg":"HS256","k":"{}"}}]}}"#, b64(JWT_SECRET));
    std::fs::write(keys.join("jwks.json"), jwks).unwrap();
    let config = format!(
        "[[access]]\nprefix = \"/films/\"\nmode = \"signed\"\nkeys = {{ k1 = \"{k1}\" }}\n\n\
         [[access]]\nprefix = \"/members/\"\nmode = \"jwt\"\njwks = \"{jwks}\"\nclaim = \"paths\"\n",
        k1 = keys.join("k1.key").display(),
        jwks = keys.join("jwks.json").display(),
    );
    std::fs::write(keys.join("sluice.toml"), config).unwrap();
    let config = keys.join("sluice.toml").display().to_string();
    let mut args = vec!["--config", config.as_str(), "--hls-segment", "2s"];
    args.extend_from_slice(extra);
    let server = Server::serve(engine, &fx, &args);
    (server, fx, keys)
}

/// The key files beside the server's configuration.
fn key_file(server_config_dir: &std::path::Path, name: &str) -> String {
    server_config_dir.join(name).display().to_string()
}

/// `sluice sign` with these arguments: the signed path and query it prints.
fn sign(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_sluice")).arg("sign").args(args).output().unwrap();
    assert!(out.status.success(), "sluice sign {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The demo's video frames as ffprobe counts them from the file, once per test binary.
fn frames_in_the_mp4(addr: std::net::SocketAddr) -> String {
    static FRAMES: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    FRAMES.get_or_init(|| ffprobe_video_frames(&format!("http://{addr}/open.mp4")).0).clone()
}

/// Every count ffprobe printed for `url` is the MP4's frame count (HLS and DASH list their
/// streams under a program too: the same count, printed again).
fn plays_whole(url: &str, expected: &str) {
    let (frames, _) = ffprobe_video_frames(url);
    let counts: Vec<&str> = frames.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        !counts.is_empty() && counts.iter().all(|c| *c == expected),
        "{url}: {frames:?}, expected {expected}"
    );
}

/// [`plays_whole`] for an `rtsp://` URL of `server`, from a try in which the server dropped no
/// frame for ffprobe ([`Server::without_rtsp_drops`]).
fn plays_whole_over_rtsp(server: &Server, url: &str, expected: &str) {
    let (frames, tries) = server.without_rtsp_drops(|| ffprobe_video_frames(url).0);
    let counts: Vec<&str> = frames.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        !counts.is_empty() && counts.iter().all(|c| *c == expected),
        "{url}: {frames:?}, expected {expected} (earlier tries, with frames dropped for a slow viewer: {tries:?})"
    );
}

fn status_of(addr: std::net::SocketAddr, target: &str, extra: &[(&str, &str)]) -> u16 {
    fetch_get(addr, target, extra).status
}

fn describe_status(server: &Server, target: &str, headers: &[(&str, &str)]) -> u16 {
    let mut c = RtspConn::open(server.rtsp_addr());
    let url = format!("rtsp://{}{target}", server.rtsp_addr());
    c.request("DESCRIBE", &url, headers).status
}

fn signed_urls(engine: &[&str]) {
    let (server, _fx, dir) = guarded_server(engine, &[]);
    let addr = server.addr();
    let k1 = key_file(&dir, "k1.key");
    let other = key_file(&dir, "other.key");
    let master = "/films/demo.mp4/master.m3u8";
    let signed = sign(&[master, "--expires", "1h", "--key-file", &k1, "--kid", "k1", "--prefix"]);
    let query = signed.split_once('?').unwrap().1.to_string();
    let with = |path: &str, query: &str| format!("{path}?{query}");

    // The playlist carries the signature on to every URL it lists.
    let playlist = fetch_get(addr, &signed, &[]);
    assert_eq!(playlist.status, 200, "{}", playlist.head_text());
    let text = playlist.body_text();
    assert!(text.contains(&format!("video.m3u8?{query}")), "{text}");
    let video = fetch_get(addr, &with("/films/demo.mp4/video.m3u8", &query), &[]).body_text();
    let segment = video.lines().find(|l| l.starts_with("video-seg-")).unwrap();
    assert!(segment.ends_with(&query), "{video}");
    assert_eq!(status_of(addr, &format!("/films/demo.mp4/{segment}"), &[]), 200);

    // Every bad signature is refused the same way for a file, a playlist, a segment, a path
    // that does not exist and an RTSP DESCRIBE.
    let expired = sign(&[master, "--expires", "0s", "--key-file", &k1, "--kid", "k1", "--prefix"]);
    let wrong_prefix =
        sign(&["/films/other/x", "--expires", "1h", "--key-file", &k1, "--kid", "k1", "--prefix"]);
    let wrong_key = sign(&[master, "--expires", "1h", "--key-file", &other, "--kid", "k1", "--prefix"]);
    let sig_at = query.find("sig=").unwrap() + 4;
    let flipped = if &query[sig_at..=sig_at] == "A" { "B" } else { "A" };
    let tampered = format!("{}{flipped}{}", &query[..sig_at], &query[sig_at + 1..]);
    let bad_queries = [
        ("expired", expired.split_once('?').unwrap().1.to_string()),
        ("wrong prefix", wrong_prefix.split_once('?').unwrap().1.to_string()),
        ("wrong key", wrong_key.split_once('?').unwrap().1.to_string()),
        ("tampered", tampered),
    ];
    let targets = ["/films/demo.mp4", master, "/films/demo.mp4/video-seg-0.m4s", "/films/missing.mp4"];
    for (what, bad) in &bad_queries {
        for target in targets {
            assert_eq!(status_of(addr, &with(target, bad), &[]), 403, "{what} {target}");
        }
        assert_eq!(describe_status(&server, &with("/films/demo.mp4", bad), &[]), 403, "{what} RTSP");
    }
    for target in targets {
        assert_eq!(status_of(addr, target, &[]), 401, "nothing presented: {target}");
    }
    assert_eq!(describe_status(&server, "/films/demo.mp4", &[]), 401, "nothing presented over RTSP");
    assert_eq!(status_of(addr, "/open.mp4", &[]), 200, "outside every policy");

    // Players we did not write play from the one signed URL: HLS, DASH and RTSP.
    let expected = frames_in_the_mp4(addr);
    plays_whole(&format!("http://{addr}{signed}"), &expected);
    let mpd = with("/films/demo.mp4/manifest.mpd", &query);
    plays_whole(&format!("http://{addr}{mpd}"), &expected);
    let rtsp = sign(&["/films/demo.mp4", "--expires", "1h", "--key-file", &k1, "--kid", "k1"]);
    plays_whole_over_rtsp(&server, &format!("rtsp://{}{rtsp}", server.rtsp_addr()), &expected);

    let metrics = server.scrape();
    assert!(metric(&metrics, "sluice_access_refused_total{reason=\"bad_signature\"}") >= 8, "{metrics}");
    assert!(metric(&metrics, "sluice_access_refused_total{reason=\"expired\"}") >= 4, "{metrics}");
    assert!(metric(&metrics, "sluice_access_refused_total{reason=\"missing\"}") >= 5, "{metrics}");
    // One log line per refusal per client per second, not one per request.
    let logged = server.logs().iter().filter(|l| l.contains("refused: ")).count();
    assert!(logged < 20, "{logged} refusal lines for ~30 refusals in a few seconds");
}

/// An HS256 JWT with these claims, signed with `secret`.
fn jwt(header: &str, claims: &str, secret: &[u8]) -> String {
    use hmac::Mac;
    let signing_input = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(signing_input.as_bytes());
    format!("{signing_input}.{}", b64(&mac.finalize().into_bytes()))
}

fn jwt_tokens(engine: &[&str]) {
    let (server, _fx, _keys) = guarded_server(engine, &[]);
    let addr = server.addr();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let header = r#"{"alg":"HS256","typ":"JWT","kid":"m1"}"#;
    let good = jwt(header, &format!(r#"{{"exp":{},"paths":["/members/"]}}"#, now + 600), JWT_SECRET);
    let bearer = format!("Bearer {good}");
    assert_eq!(status_of(addr, "/members/demo.mp4", &[("Authorization", &bearer)]), 200);
    // `?jwt=` on the master: the token is carried on, and the stream plays.
    let url = format!("http://{addr}/members/demo.mp4/master.m3u8?jwt={good}");
    let master = fetch_get(addr, url.trim_start_matches(&format!("http://{addr}")), &[]).body_text();
    assert!(master.contains(&format!("video.m3u8?jwt={good}")), "{master}");
    let expected = frames_in_the_mp4(addr);
    plays_whole(&url, &expected);
    // Over RTSP, as the password of Basic (what rtsp://user:TOKEN@host/ sends).
    let basic =
        format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("viewer:{good}")));
    assert_eq!(describe_status(&server, "/members/demo.mp4", &[("Authorization", &basic)]), 200);

    let expired = jwt(header, &format!(r#"{{"exp":{},"paths":["/members/"]}}"#, now - 60), JWT_SECRET);
    let none = format!(
        "{}.{}.",
        b64(br#"{"alg":"none","typ":"JWT"}"#),
        b64(format!(r#"{{"exp":{},"paths":["/"]}}"#, now + 600).as_bytes())
    );
    let forged = jwt(
        header,
        &format!(r#"{{"exp":{},"paths":["/"]}}"#, now + 600),
        b"another-secret-of-32-bytes-or-more!",
    );
    let elsewhere = jwt(header, &format!(r#"{{"exp":{},"paths":["/films/"]}}"#, now + 600), JWT_SECRET);
    for (what, token) in
        [("expired", &expired), ("alg none", &none), ("forged", &forged), ("other paths", &elsewhere)]
    {
        let bearer = format!("Bearer {token}");
        assert_eq!(status_of(addr, "/members/demo.mp4", &[("Authorization", &bearer)]), 403, "{what}");
        let query = format!("/members/demo.mp4/master.m3u8?jwt={token}");
        assert_eq!(status_of(addr, &query, &[]), 403, "{what} in the query");
        assert_eq!(
            describe_status(&server, &format!("/members/demo.mp4?jwt={token}"), &[]),
            403,
            "{what} RTSP"
        );
    }
}

fn per_ip_limits(engine: &[&str]) {
    let limits = [
        "--requests-per-second",
        "0.5",
        "--burst",
        "3",
        "--max-connections-per-ip",
        "2",
        "--rtsp-sessions-per-ip",
        "1",
    ];
    let (server, _fx, _keys) = guarded_server(engine, &limits);
    let addr = server.addr();
    // From 127.0.0.2: three at once, then 429 with Retry-After.
    let from = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2));
    let mut c = Conn::from_stream(connect_from(from, addr));
    for _ in 0..3 {
        c.send(get("/open.mp4", &[("Range", "bytes=0-0")]));
        assert_eq!(c.response().status, 206);
    }
    c.send(get("/open.mp4", &[("Range", "bytes=0-0")]));
    let refused = c.response();
    assert_eq!(refused.status, 429, "{}", refused.head_text());
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=2).contains(&wait), "Retry-After: {wait}");
    // Another address has its own bucket.
    let mut other = Conn::from_stream(connect_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), addr));
    other.send(get("/open.mp4", &[("Range", "bytes=0-0")]));
    assert_eq!(other.response().status, 206);

    // Two connections from 127.0.0.4; the third is answered 429 and closed.
    let four = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 4));
    let mut held: Vec<Conn> = (0..2).map(|_| Conn::from_stream(connect_from(four, addr))).collect();
    for c in &mut held {
        c.send(get("/open.mp4", &[("Range", "bytes=0-0")]));
        assert_eq!(c.response().status, 206);
    }
    let mut third = Conn::from_stream(connect_from(four, addr));
    third.send(get("/open.mp4", &[("Range", "bytes=0-0")]));
    let r = third.response();
    assert_eq!(r.status, 429, "{}", r.head_text());
    assert!(r.header("retry-after").is_some());
    drop(held);
    assert!(
        poll_until(Duration::from_secs(5), || {
            let mut again = Conn::from_stream(connect_from(four, addr));
            again.send(get("/open.mp4", &[("Range", "bytes=0-0")]));
            // The bucket of 127.0.0.4 may be empty by now: 429 from the rate says so.
            again.response().status == 206 || {
                std::thread::sleep(Duration::from_millis(500));
                false
            }
        }),
        "closing connections frees their places"
    );
    // One RTSP session per address, over all its connections.
    let five = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 5));
    let first = UdpViewer::setup(server.rtsp_addr(), five, "open.mp4").unwrap_or_else(|r| panic!("{r:?}"));
    let second =
        UdpViewer::setup(server.rtsp_addr(), five, "open.mp4").err().expect("a second session is refused");
    assert_eq!(second.status, 503, "{second:?}");
    let six = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 6));
    assert!(UdpViewer::setup(server.rtsp_addr(), six, "open.mp4").is_ok(), "another address has its own");
    first.teardown().expect(200, "TEARDOWN");
    assert!(
        UdpViewer::setup(server.rtsp_addr(), five, "open.mp4").is_ok(),
        "a released session frees its place"
    );

    let metrics = server.scrape();
    assert!(metric(&metrics, "sluice_client_limit_refused_total{limit=\"rate\"}") >= 1, "{metrics}");
    assert!(metric(&metrics, "sluice_client_limit_refused_total{limit=\"connections\"}") >= 1, "{metrics}");
}

/// Upload bytes per token per day: a declared length that does not fit is 429 before its body,
/// a chunked body when it goes over; another token has its own allowance.
fn upload_quota(engine: &[&str]) {
    let fx = Fixture::new();
    let tokens = fx.path("../tokens");
    std::fs::write(&tokens, "token-a\ntoken-b\n").unwrap();
    let tokens = tokens.display().to_string();
    let args = ["--upload-token-file", tokens.as_str(), "--upload-bytes-per-day", "1000", "--no-rtsp"];
    let server = Server::serve(engine, &fx, &args);
    let put = |name: &str, token: &str, body: &[u8], chunked: bool| {
        let auth = format!("Bearer {token}");
        let len = body.len().to_string();
        let framing =
            if chunked { ("Transfer-Encoding", "chunked") } else { ("Content-Length", len.as_str()) };
        let mut req = request("PUT", &format!("/up/{name}"), &[("Authorization", &auth), framing]);
        if chunked {
            req.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
            req.extend_from_slice(body);
            req.extend_from_slice(b"\r\n0\r\n\r\n");
        } else {
            req.extend_from_slice(body);
        }
        fetch(server.addr(), req)
    };
    assert_eq!(put("a1", "token-a", &[b'x'; 600], false).status, 201);
    let refused = put("a2", "token-a", &[b'x'; 600], false);
    assert_eq!(refused.status, 429, "{}", refused.head_text());
    let wait: u64 = refused.header("retry-after").unwrap().parse().unwrap();
    assert!((1..=86_400).contains(&wait), "until midnight UTC: {wait}");
    assert_eq!(put("a3", "token-a", &[b'x'; 500], true).status, 429, "a chunked body over the allowance");
    assert_eq!(put("b1", "token-b", &[b'x'; 900], true).status, 201, "another token's allowance");
    assert_eq!(status_of(server.addr(), "/up/a2", &[]), 404, "nothing of a refused upload is stored");
}

/// 100,000 distinct client addresses (127.0.0.0/8) connect: the table keeps at most its size
/// and the server's memory does not grow with them. One engine: the table sits above the
/// engines, whose part (a handler per connection) the tests above prove on each.
#[test]
fn a_flood_of_distinct_addresses_keeps_the_client_table_bounded() {
    let fx = Fixture::new();
    fx.write("open.mp4", b"x");
    let table_size = 1000;
    let config = fx.path("sluice.toml");
    std::fs::write(&config, format!("[clients]\nmax_connections_per_ip = 4\ntable_size = {table_size}\n"))
        .unwrap();
    let config = config.display().to_string();
    let server =
        Server::serve(&["--engine", "epoll", "--workers", "2"], &fx, &["--config", &config, "--no-rtsp"]);
    let addr = server.addr();
    let rss = || metric(&server.scrape(), "sluice_process_resident_memory_bytes");
    let started = Instant::now();
    let mut connected = 0u32;
    // Two halves: the table is full after the first and no fuller after the second.
    let mut flood = |from: u32, to: u32| {
        for n in from..to {
            if started.elapsed() > Duration::from_secs(30) {
                break;
            }
            let stream = connect_from(IpAddr::V4(Ipv4Addr::from(0x7f00_0000 | (n + 256))), addr);
            set_linger_zero(&stream);
            drop(stream);
            connected += 1;
        }
        // Every connection reaches the table once the server has accepted it.
        let full = || metric(&server.scrape(), "sluice_client_table_entries") == table_size;
        assert!(poll_until(Duration::from_secs(10), full), "the table fills to its size and no further");
    };
    let before = rss();
    flood(0, 50_000);
    flood(50_000, 100_000);
    let end = rss();
    eprintln!(
        "{connected} distinct addresses in {:?}; resident memory {before} before, {end} after",
        started.elapsed()
    );
    assert!(connected >= 5_000, "only {connected} connections in 30 s");
    // The gauge above is the table's bound; the process's memory is a looser check (connection
    // churn moves it by megabytes with or without the table), against a gross leak.
    assert!(
        end.saturating_sub(before) < 48 << 20,
        "RSS grew from {before} to {end} over {connected} addresses"
    );
}

/// Chromium opens the library page of a signed folder and hls.js plays the title from it to the
/// end: the page's player sources carry the signature, and so does every playlist and segment.
/// One engine: the browser is the slowest test, and the signed resources are proven per engine
/// by `signed_urls`.
#[test]
fn chromium_plays_a_signed_hls_url_through_the_page() {
    use common::browser::{Browser, ONE_BROWSER_AT_A_TIME, PLAY_THROUGH};
    let _turn = ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let (server, _fx, dir) = guarded_server(&["--engine", "epoll", "--workers", "2"], &[]);
    let k1 = key_file(&dir, "k1.key");
    let page = sign(&["/films/", "--expires", "1h", "--key-file", &k1, "--kid", "k1", "--prefix", "/films/"]);
    let mut browser = Browser::start();
    browser.open_page(&format!("http://{}{page}", server.addr()));
    let r = browser.eval(PLAY_THROUGH);
    assert_eq!(r["hlsJs"], serde_json::json!(true), "hls.js played: {r}");
    let src = r["src"].as_str().unwrap();
    assert!(src.starts_with("./demo.mp4/master.m3u8?") && src.contains("sig="), "{r}");
    assert!(r["first"]["error"].is_null() && r["error"].is_null(), "no media error: {r}");
    let (duration, at) = (r["first"]["duration"].as_f64().unwrap(), r["first"]["at"].as_f64().unwrap());
    assert!(at >= duration - 0.1, "played to the end: {r}");
    let log = server.log_text();
    assert!(log.contains("video-seg-2.m4s?exp="), "segments were fetched signed:\n{log}");
    assert!(!log.contains("status=401") && !log.contains("status=403"), "nothing was refused:\n{log}");
}

/// `curl` against the server with these arguments: the status it got and the head.
fn curl(url: &str, args: &[&str]) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-s", "--noproxy", "*", "-o", "/dev/null", "-D", "-", "-w", "%{http_code}"])
        .args(args)
        .arg(url);
    let (_, out, _) = run_bounded(&mut cmd, Duration::from_secs(20));
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out.get(out.len().saturating_sub(3)..).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, out)
}

/// A `users` policy on `/films/` (one plain password, one stored as Digest's HA1): ffprobe
/// plays RTSP through Digest (offered beside Basic; the logins by scheme show which it took), a
/// wrong password is 401 and counted, a client sending Basic gets in, and curl gets in over
/// HTTP by Basic and by Digest.
fn users_and_passwords(engine: &[&str]) {
    let fx = Fixture::new();
    let demo = std::fs::read(DEMO).unwrap();
    fx.write("films/demo.mp4", &demo);
    fx.write("open.mp4", &demo);
    let dir = tempfile::tempdir().unwrap();
    // MD5 of "bo:sluice:hashed", as `printf bo:sluice:hashed | md5sum` prints it.
    let bo = {
        let out = Command::new("md5sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write as _;
                c.stdin.take().unwrap().write_all(b"bo:sluice:hashed")?;
                c.wait_with_output()
            })
            .unwrap();
        String::from_utf8(out.stdout).unwrap().split_whitespace().next().unwrap().to_string()
    };
    assert_eq!(bo.len(), 32, "{bo}");
    std::fs::write(dir.path().join("users"), format!("# viewers\nann:s3cret\nbo:digest-md5:{bo}\n")).unwrap();
    let config = format!(
        "[[access]]\nprefix = \"/films/\"\nmode = \"users\"\nusers_file = \"{}\"\n",
        dir.path().join("users").display()
    );
    std::fs::write(dir.path().join("sluice.toml"), config).unwrap();
    let config = dir.path().join("sluice.toml").display().to_string();
    let server = Server::serve(engine, &fx, &["--config", &config]);
    let (addr, rtsp) = (server.addr(), server.rtsp_addr());
    let expected = frames_in_the_mp4(addr);

    // RTSP: the 401 offers Digest and Basic, one line each.
    let mut c = RtspConn::open(rtsp);
    let refused = c.request("DESCRIBE", &format!("rtsp://{rtsp}/films/demo.mp4"), &[]);
    refused.expect(401, "DESCRIBE without credentials");
    let challenges = refused.headers_named("www-authenticate");
    assert_eq!(challenges.len(), 2, "{refused:?}");
    assert!(challenges[0].starts_with("Digest realm=\"sluice\", nonce=\""), "{challenges:?}");
    assert_eq!(challenges[1], "Basic realm=\"sluice\"");
    plays_whole_over_rtsp(&server, &format!("rtsp://ann:s3cret@{rtsp}/films/demo.mp4"), &expected);
    plays_whole_over_rtsp(&server, &format!("rtsp://bo:hashed@{rtsp}/films/demo.mp4"), &expected);
    let logins =
        |m: &str, scheme: &str| metric(m, &format!("sluice_access_logins_total{{scheme=\"{scheme}\"}}"));
    let metrics = server.scrape();
    assert!(logins(&metrics, "digest") >= 2, "{metrics}");
    assert_eq!(logins(&metrics, "basic"), 0, "{metrics}");

    let mut ffprobe = Command::new(require_tool("ffprobe", "ffmpeg"));
    ffprobe.args([
        "-v",
        "error",
        "-rtsp_transport",
        "tcp",
        &format!("rtsp://ann:wrong@{rtsp}/films/demo.mp4"),
    ]);
    let (status, _, err) = run_bounded(&mut ffprobe, Duration::from_secs(30));
    let err = String::from_utf8_lossy(&err);
    assert!(!status.success() && err.contains("401"), "a wrong password is 401: {err}");

    // A client that sends Basic right away is let in; a wrong Basic password is 401.
    let basic =
        |user_pass: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(user_pass));
    assert_eq!(describe_status(&server, "/films/demo.mp4", &[("Authorization", &basic("ann:s3cret"))]), 200);
    assert_eq!(describe_status(&server, "/films/demo.mp4", &[("Authorization", &basic("ann:nope"))]), 401);
    assert_eq!(describe_status(&server, "/films/missing.mp4", &[("Authorization", &basic("ann:nope"))]), 401);

    // HTTP: curl -u sends Basic, --digest answers the Digest challenge; both are offered.
    let url = format!("http://{addr}/films/demo.mp4");
    let (status, head) = curl(&url, &[]);
    assert_eq!(status, 401, "{head}");
    assert!(head.contains("WWW-Authenticate: Digest realm=\"sluice\", nonce="), "{head}");
    assert!(head.contains("WWW-Authenticate: Basic realm=\"sluice\""), "{head}");
    assert_eq!(curl(&url, &["-u", "ann:s3cret"]).0, 200);
    assert_eq!(curl(&url, &["--digest", "-u", "bo:hashed"]).0, 200);
    assert_eq!(curl(&url, &["-u", "ann:wrong"]).0, 401);
    assert_eq!(curl(&url, &["--digest", "-u", "ann:wrong"]).0, 401);

    let metrics = server.scrape();
    assert!(logins(&metrics, "basic") >= 2, "{metrics}");
    assert!(logins(&metrics, "digest") >= 3, "{metrics}");
    assert!(metric(&metrics, "sluice_access_refused_total{reason=\"bad_password\"}") >= 5, "{metrics}");
}

fn md5_hex(text: &str) -> String {
    use md5::Digest as _;
    md5::Md5::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// The `Authorization` a Digest client sends (RFC 7616, MD5) for `method uri`, answering `nonce`.
fn digest_answer(user_password: (&str, &str), nonce: &str, method: &str, uri: &str) -> String {
    let (user, password) = user_password;
    let ha1 = md5_hex(&format!("{user}:sluice:{password}"));
    let response = md5_hex(&format!("{ha1}:{nonce}:{}", md5_hex(&format!("{method}:{uri}"))));
    format!("Digest username=\"{user}\", realm=\"sluice\", nonce=\"{nonce}\", uri=\"{uri}\", response=\"{response}\"")
}

/// A Digest answer opens only what it was computed for: over HTTP its own request-target (query
/// included), not the file a playlist or segment belongs to nor a file's folder; over RTSP its
/// own URL, and a presentation's answer the track URLs its SDP hands out. Real clients still get
/// in: curl, and ffprobe over HLS (an answer per playlist and segment) and over RTSP.
fn digest_answers_open_only_their_own_url(engine: &[&str]) {
    let fx = Fixture::new();
    let demo = std::fs::read(DEMO).unwrap();
    for name in ["studio/a.mp4", "studio/secret/b.mp4", "open.mp4"] {
        fx.write(name, &demo);
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users"), "ann:s3cret\n").unwrap();
    let users = dir.path().join("users").display().to_string();
    let config = format!("[[access]]\nprefix = \"/studio/\"\nmode = \"users\"\nusers_file = \"{users}\"\n");
    std::fs::write(dir.path().join("sluice.toml"), config).unwrap();
    let config = dir.path().join("sluice.toml").display().to_string();
    let server = Server::serve(engine, &fx, &["--config", &config, "--hls-segment", "2s"]);
    let (addr, rtsp) = (server.addr(), server.rtsp_addr());
    let refused = fetch_get(addr, "/studio/", &[]);
    assert_eq!(refused.status, 401, "{}", refused.head_text());
    let challenge = refused.header("www-authenticate").unwrap().to_string();
    let nonce = challenge.split("nonce=\"").nth(1).and_then(|n| n.split('"').next()).unwrap();
    let answer = |method: &str, uri: &str| digest_answer(("ann", "s3cret"), nonce, method, uri);

    let get = |target: &str, answered: &str| {
        status_of(addr, target, &[("Authorization", &answer("GET", answered))])
    };
    let own = ["/studio/a.mp4/master.m3u8", "/studio/a.mp4/video-seg-1.m4s", "/studio/a.mp4", "/studio/?q=1"];
    for target in own.iter().chain(&["/studio/secret/b.mp4", "/studio/secret/", "/studio/"]) {
        assert_eq!(get(target, target), 200, "an answer for {target} opens it");
    }
    for (answered, target) in [
        ("/studio/a.mp4/master.m3u8", "/studio/a.mp4"),
        ("/studio/a.mp4/video-seg-1.m4s", "/studio/a.mp4"),
        ("/studio/a.mp4/master.m3u8", "/studio/a.mp4/video.m3u8"),
        ("/studio/secret/b.mp4", "/studio/secret/"),
        ("/studio/secret/b.mp4", "/studio/"),
        ("/studio/", "/studio/secret/b.mp4"),
        ("/studio/?q=1", "/studio/"),
        ("/studio/a.mp4", "/studio/a.mp4?q=1"),
    ] {
        assert_eq!(get(target, answered), 401, "an answer for {answered} opened {target}");
    }
    assert_eq!(curl(&format!("http://{addr}/studio/?q=1"), &["--digest", "-u", "ann:s3cret"]).0, 200);
    let expected = frames_in_the_mp4(addr);
    plays_whole(&format!("http://ann:s3cret@{addr}/studio/a.mp4/master.m3u8"), &expected);

    // RTSP, each request on a new connection (none allowed before).
    let url = |path: &str| format!("rtsp://{rtsp}{path}");
    let (presentation, track) = (url("/studio/a.mp4"), |n: u8| url(&format!("/studio/a.mp4/trackID={n}")));
    let ask = |method: &str, target: &str, answered: &str| {
        let authorization = answer(method, answered);
        let mut headers = vec![("Authorization", authorization.as_str())];
        if method == "SETUP" {
            headers.push(("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1"));
        }
        RtspConn::open(rtsp).request(method, target, &headers).status
    };
    assert_eq!(ask("DESCRIBE", &presentation, &presentation), 200);
    assert_eq!(ask("SETUP", &track(1), &track(1)), 200);
    assert_eq!(ask("SETUP", &track(0), &presentation), 200, "a presentation's answer for its track");
    assert_eq!(ask("SETUP", &track(0), &format!("{presentation}?x=1")), 200, "its tracks drop its query");
    for (method, answered, target) in [
        ("SETUP", track(1), track(0)),
        ("DESCRIBE", track(0), presentation.clone()),
        ("DESCRIBE", url("/studio/"), presentation.clone()),
        ("DESCRIBE", url("/studio/secret/b.mp4"), url("/studio/secret/b.mp4x")),
        ("DESCRIBE", presentation.clone(), url("/studio/secret/b.mp4")),
        ("DESCRIBE", format!("{presentation}?x=1"), presentation.clone()),
        ("SETUP", presentation.clone(), url("/studio/secret/b.mp4/trackID=0")),
    ] {
        assert_eq!(
            ask(method, &target, &answered),
            401,
            "{method}: an answer for {answered} opened {target}"
        );
    }
    plays_whole_over_rtsp(&server, &format!("rtsp://ann:s3cret@{rtsp}/studio/a.mp4"), &expected);
}

/// `body`, the text at `path` (a master or media playlist, an MPD or a folder page), parses as
/// what it is, and every URL it lists carries `carried`, exactly.
fn lists_with(path: &str, body: &str, carried: &str) {
    let ends =
        |uri: &str| assert!(uri.ends_with(&format!("?{carried}")), "{path}: {uri} does not carry {carried}");
    if path.ends_with("master.m3u8") {
        let Ok(m3u8_rs::Playlist::MasterPlaylist(m)) = m3u8_rs::parse_playlist_res(body.as_bytes()) else {
            panic!("{path}: not a master playlist:\n{body}")
        };
        m.variants.iter().for_each(|v| ends(&v.uri));
        m.alternatives.iter().filter_map(|a| a.uri.as_deref()).for_each(ends);
        assert!(!m.variants.is_empty(), "{body}");
    } else if path.ends_with(".m3u8") {
        let Ok(m3u8_rs::Playlist::MediaPlaylist(m)) = m3u8_rs::parse_playlist_res(body.as_bytes()) else {
            panic!("{path}: not a media playlist:\n{body}")
        };
        m.segments.iter().for_each(|s| ends(&s.uri));
        m.segments.iter().filter_map(|s| s.map.as_ref()).for_each(|map| ends(&map.uri));
    } else if path.ends_with(".mpd") {
        use quick_xml::events::Event;
        let mut reader = quick_xml::Reader::from_str(body);
        let mut templates = 0;
        loop {
            match reader.read_event().unwrap_or_else(|e| panic!("{path}: not XML ({e}):\n{body}")) {
                Event::Start(e) | Event::Empty(e) => {
                    for a in e.attributes() {
                        let a = a.unwrap_or_else(|e| panic!("{path}: a broken attribute ({e}):\n{body}"));
                        let value = a.unescape_value().unwrap_or_else(|e| panic!("{path}: {e}:\n{body}"));
                        if [&b"media"[..], b"initialization"].contains(&a.key.as_ref()) {
                            ends(&value);
                            templates += 1;
                        }
                    }
                }
                Event::Eof => break,
                _ => {}
            }
        }
        assert!(templates >= 2, "{body}");
    } else {
        let carried = carried.replace('&', "&amp;");
        assert!(body.contains(&format!("data-hls=\"./demo.mp4/master.m3u8?{carried}\"")), "{body}");
        assert!(body.contains(&format!("data-dash=\"./demo.mp4/manifest.mpd?{carried}\"")), "{body}");
    }
}

/// Credentials appended again, with quotes and markup (`&sig="><script>…`), change nothing of
/// what a folder page, a playlist or an MPD says: only the parameters that were checked are
/// carried on, once, written again percent-encoded, so the page, the playlists (m3u8-rs) and the
/// MPD (quick-xml) are the very bytes the clean URL gets, and parse, for signed URLs and `?jwt=`
/// alike; a checked value holding a quote (a scope of `/films/q"t/`) is carried encoded; and
/// ffprobe plays the MPD through such a URL.
fn duplicated_and_quoted_credentials_are_carried_checked_and_escaped(engine: &[&str]) {
    let (server, fx, dir) = guarded_server(engine, &["--no-rtsp"]);
    fx.write("films/q\"t/demo.mp4", &std::fs::read(DEMO).unwrap());
    let addr = server.addr();
    let k1 = key_file(&dir, "k1.key");
    let sign_prefix = |prefix: &str| {
        let signed = sign(&[prefix, "--expires", "1h", "--key-file", &k1, "--kid", "k1", "--prefix", prefix]);
        signed.split_once('?').unwrap().1.to_string()
    };
    let films = sign_prefix("/films/");
    let quoted = sign_prefix("/films/q\"t/");
    assert!(quoted.contains("scope=/films/q%22t/"), "{quoted}");
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let claims = format!(r#"{{"exp":{},"paths":["/members/"]}}"#, now + 600);
    let token = jwt(r#"{"alg":"HS256","typ":"JWT","kid":"m1"}"#, &claims, JWT_SECRET);
    let member = format!("jwt={token}");
    let script = "\"><script>alert(1)</script>";
    let resources = ["demo.mp4/master.m3u8", "demo.mp4/video.m3u8", "demo.mp4/manifest.mpd", ""];
    let cases = [
        ("/films/", &films, format!("{films}&sig={script}&kid=\"&exp={script}&x=\"")),
        ("/films/q%22t/", &quoted, format!("{}&scope={script}", quoted.replace("%22", "\""))),
        ("/members/", &member, format!("{member}&jwt={script}&jwt=\"")),
    ];
    for (folder, clean, hostile) in &cases {
        for resource in resources {
            let path = format!("{folder}{resource}");
            let wanted = fetch_get(addr, &format!("{path}?{clean}"), &[]);
            let got = fetch_get(addr, &format!("{path}?{hostile}"), &[]);
            assert_eq!((wanted.status, got.status), (200, 200), "{path}?{hostile}: {}", got.head_text());
            let body = got.body_text();
            assert_eq!(body, wanted.body_text(), "{path}: the appended parameters changed it");
            assert!(!body.contains("alert"), "{path}:\n{body}");
            lists_with(&path, &body, clean);
        }
    }
    let encoded = "%22%3E%3Cscript%3Ealert(1)%3C/script%3E";
    let mpd = format!("http://{addr}/films/demo.mp4/manifest.mpd?{films}&sig={encoded}&kid={encoded}");
    plays_whole(&mpd, &frames_in_the_mp4(addr));
}

/// `sluice sign` of a playlist or an MPD without `--prefix` signs its title's prefix (and says
/// so): ffprobe plays every stream of the title over HLS and DASH, and of a rendition set,
/// through the one URL it prints; the URL opens no other title.
fn a_signed_manifest_opens_its_title(engine: &[&str]) {
    let (server, fx, dir) = guarded_server(engine, &["--no-rtsp"]);
    let demo = std::fs::read(DEMO).unwrap();
    fx.write("films/set/film.480p.mp4", &demo);
    fx.write("films/set/film.240p.mp4", &demo);
    let addr = server.addr();
    let k1 = key_file(&dir, "k1.key");
    let expected = frames_in_the_mp4(addr);
    let (file, set) = ("/films/demo.mp4/master.m3u8", "/films/set/film.set/master.m3u8");
    for (manifest, prefix, other) in [
        (file, "/films/demo.mp4/", set),
        ("/films/demo.mp4/manifest.mpd", "/films/demo.mp4/", "/films/set/film.480p.mp4/manifest.mpd"),
        (set, "/films/set/", file),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(["sign", manifest, "--expires", "1h", "--key-file", &k1, "--kid", "k1"])
            .output()
            .unwrap();
        let (signed, said) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{said}");
        let signed = signed.trim();
        assert!(signed.contains(&format!("&scope={prefix}&")), "{signed}");
        assert!(said.contains(&format!("signed for every path under {prefix}")), "{said}");
        plays_whole(&format!("http://{addr}{signed}"), &expected);
        let query = signed.split_once('?').unwrap().1;
        assert_eq!(status_of(addr, &format!("{other}?{query}"), &[]), 403, "{signed} opened {other}");
    }
    // Any other path is signed alone, as before.
    let file = sign(&["/films/demo.mp4", "--expires", "1h", "--key-file", &k1, "--kid", "k1"]);
    assert!(!file.contains("scope="), "{file}");
}

rtsp_matrix!(
    signed_urls,
    jwt_tokens,
    per_ip_limits,
    upload_quota,
    users_and_passwords,
    digest_answers_open_only_their_own_url,
    duplicated_and_quoted_credentials_are_carried_checked_and_escaped,
    a_signed_manifest_opens_its_title
);
