//! Uploads (`PUT`, `DELETE`) end to end on every engine: tokens, conditions, checksums, limits,
//! atomicity (a cut upload leaves nothing), into a local root and into a real SeaweedFS.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::*;
use sluice_harness::seaweedfs::SeaweedFs;
use sluice_store::{Key, S3Store, Store};

engine_matrix!(
    uploads_need_a_valid_token,
    uploads_create_replace_and_respect_conditions,
    a_checksum_mismatch_stores_nothing,
    too_large_is_413_before_the_body,
    a_cut_upload_leaves_nothing,
    an_uploaded_mp4_plays_over_http_and_rtsp,
    uploads_to_s3_land_and_cut_ones_leave_nothing,
    gzip_is_stored_only_when_it_pays_and_served_both_ways,
);

const TOKEN: &str = "test-token-0123456789";

/// A server over `fx` that accepts `TOKEN`.
fn upload_server(engine: &[&str], fx: &Fixture, extra: &[&str]) -> Server {
    let tokens = fx.base.join("tokens");
    std::fs::write(&tokens, format!("# upload tokens\n{TOKEN}\n")).unwrap();
    let tokens = tokens.to_str().unwrap().to_string();
    let mut args = vec!["--upload-token-file", tokens.as_str()];
    args.extend_from_slice(extra);
    Server::serve(engine, fx, &args)
}

/// One request with `headers` (each ending in CRLF) and `body` on a fresh connection.
fn request(server: &Server, method: &str, path: &str, headers: &str, body: &[u8]) -> Response {
    let mut c = Conn::open(server.addr());
    let mut raw =
        format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{headers}\r\n")
            .into_bytes();
    raw.extend_from_slice(body);
    let _ = c.try_send(raw);
    c.read_response(method == "HEAD").unwrap_or_else(|e| panic!("{method} {path}: {e}"))
}

fn put(server: &Server, path: &str, headers: &str, body: &[u8]) -> Response {
    let headers = format!("Authorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n{headers}", body.len());
    request(server, "PUT", path, &headers, body)
}

/// Names in a directory, temporary upload files included (none when it does not exist).
fn names(dir: &Path) -> Vec<String> {
    if !dir.exists() {
        return Vec::new();
    }
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    v.sort();
    v
}

fn uploads_need_a_valid_token(engine: &[&str]) {
    let fx = Fixture::new();
    // Off by default: 403, nothing written.
    let server = Server::serve(engine, &fx, &[]);
    let r = request(
        &server,
        "PUT",
        "/new.txt",
        &format!("Authorization: Bearer {TOKEN}\r\nContent-Length: 2\r\n"),
        b"hi",
    );
    r.expect_status(403, "PUT while uploads are off");
    drop(server);
    let server = upload_server(engine, &fx, &[]);
    request(&server, "PUT", "/new.txt", "Content-Length: 2\r\n", b"hi")
        .expect_status(401, "PUT without a token");
    let wrong = "Authorization: Bearer test-token-0123456788\r\nContent-Length: 2\r\n";
    request(&server, "PUT", "/new.txt", wrong, b"hi").expect_status(401, "PUT with a wrong token");
    let prefix = "Authorization: Bearer test-token\r\nContent-Length: 2\r\n";
    request(&server, "PUT", "/new.txt", prefix, b"hi").expect_status(401, "PUT with a prefix of the token");
    let basic = "Authorization: Basic dGVzdDp0ZXN0\r\nContent-Length: 2\r\n";
    request(&server, "PUT", "/new.txt", basic, b"hi").expect_status(401, "PUT with Basic credentials");
    request(&server, "DELETE", "/t1.html", "", b"").expect_status(401, "DELETE without a token");
    assert!(!fx.path("new.txt").exists());
    assert_eq!(fx.file("t1.html"), t1_html());
    put(&server, "/new.txt", "", b"hi").expect_status(201, "PUT with the token");
    assert_eq!(fx.file("new.txt"), b"hi");
}

fn uploads_create_replace_and_respect_conditions(engine: &[&str]) {
    let fx = Fixture::new();
    let server = upload_server(engine, &fx, &[]);
    let created = put(&server, "/up/a.txt", "", b"first");
    created.expect_status(201, "create");
    let etag = created.header("etag").expect("an ETag on create").to_string();
    let got = request(&server, "GET", "/up/a.txt", "", b"");
    got.expect_status(200, "GET after PUT");
    assert_eq!(got.body, b"first");
    assert_eq!(got.header("etag"), Some(etag.as_str()), "GET serves the ETag the PUT returned");
    put(&server, "/up/a.txt", "If-None-Match: *\r\n", b"second")
        .expect_status(412, "create-only on an existing key");
    assert_eq!(fx.file("up/a.txt"), b"first");
    put(&server, "/up/b.txt", "If-None-Match: *\r\n", b"b").expect_status(201, "create-only on a new key");
    put(&server, "/up/a.txt", "If-Match: \"1-1\"\r\n", b"second")
        .expect_status(412, "If-Match with a stale tag");
    put(&server, "/up/a.txt", &format!("If-Match: {etag}\r\n"), b"second!")
        .expect_status(204, "If-Match replace");
    assert_eq!(fx.file("up/a.txt"), b"second!");
    put(&server, "/up/c.txt", "If-Match: *\r\n", b"c").expect_status(412, "If-Match on a missing key");
    // Chunked bodies and 100-continue reach the store the same way.
    let mut c = Conn::open(server.addr());
    c.send(format!(
        "PUT /up/chunked.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n"
    ));
    let interim = c.read_exact_raw(25).unwrap();
    assert_eq!(interim, b"HTTP/1.1 100 Continue\r\n\r\n");
    let data = pseudo_random(300_000, 3);
    for chunk in data.chunks(70_000) {
        c.send(format!("{:x}\r\n", chunk.len()));
        c.send(chunk);
        c.send("\r\n");
    }
    c.send("0\r\n\r\n");
    c.response().expect_status(201, "chunked PUT");
    assert_eq!(fx.file("up/chunked.bin"), data);
    // Paths obey GET's rules; directories are not objects.
    put(&server, "/../escape.txt", "", b"x").expect_status(404, "a path leaving the root");
    put(&server, "/outside-dir/x.txt", "", b"x")
        .expect_status(400, "a path through a symlink leaving the root");
    assert!(!fx.base.join("x.txt").exists());
    put(&server, "/up/", "", b"x").expect_status(405, "PUT on a directory");
    // DELETE.
    request(
        &server,
        "DELETE",
        "/up/b.txt",
        &format!("Authorization: Bearer {TOKEN}\r\nIf-Match: \"1-1\"\r\n"),
        b"",
    )
    .expect_status(412, "DELETE with a stale tag");
    request(&server, "DELETE", "/up/b.txt", &format!("Authorization: Bearer {TOKEN}\r\n"), b"")
        .expect_status(204, "DELETE");
    request(&server, "DELETE", "/up/b.txt", &format!("Authorization: Bearer {TOKEN}\r\n"), b"")
        .expect_status(404, "DELETE again");
    assert_eq!(names(&fx.path("up")), ["a.txt", "chunked.bin"], "no temporary files left");
}

fn a_checksum_mismatch_stores_nothing(engine: &[&str]) {
    let fx = Fixture::new();
    let server = upload_server(engine, &fx, &[]);
    // MD5("hello") = 5d41402abc4b2a76b9719d911017c592; SHA-256("hello") = 2cf24dba...
    let md5_hello = "XUFAKrxLKna5cZ2REBfFkg==";
    let sha_hello = "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=";
    put(&server, "/sum/a.txt", &format!("Content-MD5: {md5_hello}\r\n"), b"hellO")
        .expect_status(400, "Content-MD5 mismatch");
    put(&server, "/sum/b.txt", &format!("Repr-Digest: sha-256=:{sha_hello}:\r\n"), b"hellO")
        .expect_status(400, "Repr-Digest mismatch");
    put(&server, "/sum/c.txt", "Content-MD5: not-base64\r\n", b"hello")
        .expect_status(400, "malformed Content-MD5");
    assert!(names(&fx.path("sum")).is_empty(), "a mismatch stores nothing: {:?}", names(&fx.path("sum")));
    put(&server, "/sum/a.txt", &format!("Content-MD5: {md5_hello}\r\n"), b"hello")
        .expect_status(201, "Content-MD5 match");
    put(&server, "/sum/b.txt", &format!("Repr-Digest: sha-256=:{sha_hello}:\r\n"), b"hello")
        .expect_status(201, "Repr-Digest match");
    assert_eq!(names(&fx.path("sum")), ["a.txt", "b.txt"]);
}

fn too_large_is_413_before_the_body(engine: &[&str]) {
    let fx = Fixture::new();
    let server = upload_server(engine, &fx, &["--max-upload", "1000"]);
    // With 100-continue: 413 instead of the 100, and no body is ever sent.
    let mut c = Conn::open(server.addr());
    c.send(format!(
        "PUT /big.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 1001\r\nExpect: 100-continue\r\n\r\n"
    ));
    let r = c.response();
    r.expect_status(413, "over the limit with 100-continue");
    assert!(r.says_close());
    // Without: answered 413 after the head alone, while the client has not sent a byte of body.
    let mut c = Conn::open(server.addr());
    c.send(format!("PUT /big.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: 5000000000\r\n\r\n"));
    c.response().expect_status(413, "over the limit, body not sent");
    // A chunked body that grows past the limit is cut.
    let mut c = Conn::open(server.addr());
    c.send(format!("PUT /big.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nTransfer-Encoding: chunked\r\n\r\n"));
    let _ = c.try_send(format!("800\r\n{}\r\n", "x".repeat(0x800)));
    c.response().expect_status(413, "chunked past the limit");
    put(&server, "/ok.bin", "", &[7u8; 1000]).expect_status(201, "at the limit");
    assert!(!fx.path("big.bin").exists());
    assert!(!names(&fx.root).iter().any(|n| n.starts_with(".sluice-upload")), "{:?}", names(&fx.root));
}

fn a_cut_upload_leaves_nothing(engine: &[&str]) {
    let fx = Fixture::new();
    let server = upload_server(engine, &fx, &["--body-timeout", "1s"]);
    let data = pseudo_random(4 << 20, 9);
    // Reset half way.
    let mut c = Conn::open(server.addr());
    c.send(format!("PUT /cut/reset.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n", data.len()));
    c.send(&data[..data.len() / 2]);
    c.set_reset_on_close();
    drop(c);
    // Stalled half way: the body timeout cuts it.
    let mut c = Conn::open(server.addr());
    c.send(format!("PUT /cut/stall.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n", data.len()));
    c.send(&data[..data.len() / 2]);
    let r = c.response();
    r.expect_status(408, "a stalled upload");
    // Neither leaves a file (the server removes temporaries when the connection goes).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !names(&fx.path("cut")).is_empty() {
        assert!(Instant::now() < deadline, "a cut upload left {:?}", names(&fx.path("cut")));
        std::thread::sleep(Duration::from_millis(50));
    }
    // The whole thing still works afterwards, on the same key.
    put(&server, "/cut/reset.bin", "", &data).expect_status(201, "a complete upload");
    assert_eq!(fx.file("cut/reset.bin"), data);
}

fn an_uploaded_mp4_plays_over_http_and_rtsp(engine: &[&str]) {
    let fx = Fixture::new();
    let server = upload_server(engine, &fx, &[]);
    let mp4 =
        std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4")).unwrap();
    put(&server, "/clips/new.mp4", "Content-Type: video/mp4\r\n", &mp4).expect_status(201, "MP4 upload");
    for url in [
        format!("http://{}/clips/new.mp4", server.addr()),
        format!("rtsp://{}/clips/new.mp4", server.rtsp_addr()),
    ] {
        let (frames, stderr) = ffprobe_video_frames(&url);
        assert_eq!(frames, "180", "frames over {url} (stderr: {stderr})");
    }
}

/// The SeaweedFS this binary's tests share.
fn weed() -> &'static SeaweedFs {
    shared_seaweedfs("uploads")
}

fn uploads_to_s3_land_and_cut_ones_leave_nothing(engine: &[&str]) {
    let weed = weed();
    let fx = Fixture::new();
    // Each engine writes into its own bucket (SeaweedFS creates it on first write), so that
    // the open multipart uploads counted below are this test's alone.
    let bucket: String = format!("up-{}", engine.join("-"))
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect::<String>()
        .split('-')
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("-");
    let store_arg = format!("s3://{bucket}/p");
    let server = upload_server(
        engine,
        &fx,
        // The bucket does not exist until the first upload creates it: without --store-wait an
        // edge refuses to start on a missing bucket.
        &["--store", &store_arg, "--s3-endpoint", &weed.s3_endpoint, "--body-timeout", "1s", "--store-wait"],
    );
    let mut config = weed.s3_config("p");
    config.bucket = bucket.clone();
    let store = S3Store::new(config).unwrap();
    let small = pseudo_random(50_000, 5);
    put(&server, "/mail/email.html", "", &small).expect_status(201, "small upload to S3");
    put(&server, "/mail/email.html", "If-None-Match: *\r\n", &small).expect_status(412, "create-only on S3");
    let key = Key::new("mail/email.html").unwrap();
    assert_eq!(store.read_range(&key, 0..50_000).unwrap(), small);
    // Multipart (above 8 MiB), then one cut half way, then one that stalls.
    let big = pseudo_random(20 << 20, 6);
    put(&server, "/big.bin", "", &big).expect_status(201, "multipart upload to S3");
    assert_eq!(store.read_range(&Key::new("big.bin").unwrap(), 0..big.len() as u64).unwrap(), big);
    let mut c = Conn::open(server.addr());
    c.send(format!("PUT /cut.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n", big.len()));
    c.send(&big[..big.len() / 2 + 1]);
    c.set_reset_on_close();
    drop(c);
    let mut c = Conn::open(server.addr());
    c.send(format!("PUT /stall.bin HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {TOKEN}\r\nContent-Length: {}\r\n\r\n", big.len()));
    c.send(&big[..big.len() / 2 + 1]);
    c.response().expect_status(408, "a stalled S3 upload");
    for name in ["cut.bin", "stall.bin"] {
        assert!(store.head(&Key::new(name).unwrap()).unwrap().is_none(), "{name} was stored");
    }
    let keys: Vec<String> = store.list("").unwrap().into_iter().map(|m| m.key).collect();
    assert_eq!(keys, ["big.bin", "mail/email.html"]);
    // No multipart upload is left open once the aborts have landed.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let open = weed.open_multipart_uploads(&bucket).unwrap();
        if open == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "{open} multipart uploads left open in {bucket}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out).expect("valid gzip");
    out
}

fn gzip_is_stored_only_when_it_pays_and_served_both_ways(engine: &[&str]) {
    use sluice_load::payload::{email_html, sms};
    let fx = Fixture::new();
    let server = upload_server(engine, &fx, &[]);
    let email = email_html(50_000, 1);
    let sms = sms(80, 1);
    let created = put(&server, "/msg/email.html", "Content-Type: text/html; charset=utf-8\r\n", &email);
    created.expect_status(201, "email");
    put(&server, "/msg/sms.txt", "", &sms).expect_status(201, "sms");
    // The email stays a file under its own name, byte for byte (a backup or a second server of
    // the folder gets it), with its gzip form at a tenth of its size or less beside it under a
    // hidden name no client can use; the SMS (gzip would grow it) is plain only.
    assert_eq!(names(&fx.path("msg")), [".sluice-gzip.email.html", "email.html", "sms.txt"]);
    assert_eq!(fx.file("msg/email.html"), email);
    let stored = fx.file("msg/.sluice-gzip.email.html");
    assert!(stored.len() * 10 <= email.len(), "email stored at {} bytes of {}", stored.len(), email.len());
    assert_eq!(gunzip(&stored), email);
    let kept: usize = created.header("sluice-stored-length").unwrap().parse().unwrap();
    assert_eq!(kept, email.len() + stored.len(), "every byte kept: the file and its gzip form");
    assert_eq!(fx.file("msg/sms.txt"), sms);
    // A client that accepts gzip gets the stored bytes; one that does not gets the email inflated.
    let gz = request(&server, "GET", "/msg/email.html", "Accept-Encoding: gzip, deflate, br\r\n", b"");
    gz.expect_status(200, "GET with gzip");
    assert_eq!(gz.header("content-encoding"), Some("gzip"));
    assert_eq!(gz.header("vary"), Some("Accept-Encoding"));
    assert!(gz.header("content-type").unwrap().starts_with("text/html"));
    assert_eq!(gz.body, stored);
    let plain = request(&server, "GET", "/msg/email.html", "", b"");
    plain.expect_status(200, "GET without gzip");
    assert_eq!(plain.header("content-encoding"), None);
    assert_eq!(plain.header("vary"), Some("Accept-Encoding"));
    assert_eq!(plain.body, email, "identity is byte-exact");
    assert_ne!(gz.header("etag"), plain.header("etag"), "each encoding has its own ETag");
    let refused = request(&server, "GET", "/msg/email.html", "Accept-Encoding: gzip;q=0\r\n", b"");
    assert_eq!(refused.body, email, "gzip;q=0 is a refusal");
    // Ranges apply to the representation sent.
    let range = request(&server, "GET", "/msg/email.html", "Range: bytes=100-199\r\n", b"");
    range.expect_status(206, "range of the identity form");
    assert_eq!(range.body, &email[100..200]);
    let range =
        request(&server, "GET", "/msg/email.html", "Accept-Encoding: gzip\r\nRange: bytes=0-9\r\n", b"");
    range.expect_status(206, "range of the gzip form");
    assert_eq!(range.body, &stored[..10]);
    // The page lists the email once, at its own size.
    let page = request(&server, "GET", "/msg/", "", b"").body_text();
    assert_eq!(page.matches(">email.html<").count(), 1, "{page}");
    let size = format!(">email.html</a><span class=\"size\">{:.1} KB<", email.len() as f64 / 1000.0);
    assert!(page.contains(&size), "{size} in {page}");
    // The file changed by other means than an upload: its older gzip form is stale, and even a
    // client that accepts gzip gets the file.
    let edited = email_html(40_000, 2);
    let file =
        std::fs::OpenOptions::new().write(true).truncate(true).open(fx.path("msg/email.html")).unwrap();
    std::io::Write::write_all(&mut &file, &edited).unwrap();
    file.set_modified(std::time::SystemTime::now() + Duration::from_secs(2)).unwrap();
    drop(file);
    let gz = request(&server, "GET", "/msg/email.html", "Accept-Encoding: gzip\r\n", b"");
    assert_eq!((gz.header("content-encoding"), &gz.body), (None, &edited), "the stale form is not served");
    // A replacement that no longer pays drops the gzip form.
    put(&server, "/msg/email.html", "", &sluice_load::payload::PayloadKind::Random.generate(5000, 3))
        .expect_status(204, "replace with incompressible bytes");
    assert_eq!(names(&fx.path("msg")), ["email.html", "sms.txt"]);
}
