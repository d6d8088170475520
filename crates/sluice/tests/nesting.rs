//! Deeply nested input never reaches a parser that could overflow a stack, on every engine: a
//! rendition-set sidecar of inline tables, a WebVTT cue of tags and a JWT's claims, nested 1 to
//! 100,000 deep, are answered (the set and the subtitles with the reason, the token refused) by
//! the media and admin listeners, and the server keeps serving. A 60-deep sidecar once aborted
//! the whole process on `GET /streams`.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use base64::Engine as _;
use common::*;

engine_matrix!(nested_sidecars_subtitles_and_tokens_are_answered_and_the_server_lives);

const DEMO: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
const DEPTHS: [usize; 6] = [1, 4, 10, 60, 1000, 100_000];
/// The bounds the server applies: sidecars (TOML), and WebVTT cues and token JSON.
const SIDECAR_DEPTH: usize = 4;
const MAX_DEPTH: usize = 32;
const MAX_SIDECAR: usize = 64 << 10;
/// The HS256 secret of `/members/`, in the JWKS as an `oct` key.
const JWT_SECRET: &[u8] = b"a-jwt-secret-of-at-least-32-bytes!!";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// An HS256 JWT for `/members/` whose claims carry one more claim nested `depth` arrays deep.
fn nested_token(depth: usize) -> String {
    use hmac::Mac;
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 600;
    let extra = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let claims = format!(r#"{{"exp":{exp},"paths":["/members/"],"extra":{extra}}}"#);
    let signing_input = format!("{}.{}", b64(br#"{"alg":"HS256","typ":"JWT"}"#), b64(claims.as_bytes()));
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(JWT_SECRET).unwrap();
    mac.update(signing_input.as_bytes());
    format!("{signing_input}.{}", b64(&mac.finalize().into_bytes()))
}

/// A sidecar listing the folder's MP4 with one more key of inline tables nested `depth` deep.
fn nested_sidecar(depth: usize) -> String {
    format!("files = [\"movie.mp4\"]\nx = {}1{}\n", "{a = ".repeat(depth), "}".repeat(depth))
}

/// Subtitles whose one cue nests `depth` tags.
fn nested_subtitles(depth: usize) -> String {
    format!("WEBVTT\n\n00:00.000 --> 00:01.000\n{}hello{}\n", "<b>".repeat(depth), "</b>".repeat(depth))
}

/// The status answering `raw` on a fresh connection; a server that refuses a head too large may
/// stop reading before all of it is written, and its answer still counts.
fn status_of(addr: std::net::SocketAddr, raw: &[u8]) -> u16 {
    let mut c = Conn::open(addr);
    let _ = c.try_send(raw);
    c.read_response(false).unwrap_or_else(|e| panic!("no answer to a {}-byte request: {e}", raw.len())).status
}

fn nested_sidecars_subtitles_and_tokens_are_answered_and_the_server_lives(engine: &[&str]) {
    let fx = Fixture::new();
    let demo = std::fs::read(DEMO).unwrap();
    for depth in DEPTHS {
        fx.write(&format!("d{depth}/movie.mp4"), &demo);
        fx.write(&format!("d{depth}/movie.set.toml"), nested_sidecar(depth).as_bytes());
        fx.write(&format!("d{depth}/movie.en.vtt"), nested_subtitles(depth).as_bytes());
    }
    fx.write("members/demo.mp4", &demo);
    let keys = tempfile::tempdir().unwrap();
    let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"m1","alg":"HS256","k":"{}"}}]}}"#, b64(JWT_SECRET));
    std::fs::write(keys.path().join("jwks.json"), jwks).unwrap();
    let config = format!(
        "[[access]]\nprefix = \"/members/\"\nmode = \"jwt\"\njwks = \"{}\"\nclaim = \"paths\"\n",
        keys.path().join("jwks.json").display()
    );
    std::fs::write(keys.path().join("sluice.toml"), config).unwrap();
    let config = keys.path().join("sluice.toml").display().to_string();
    let mut server = Server::serve(engine, &fx, &["--config", &config]);
    let (addr, admin) = (server.addr(), server.admin_addr());

    for depth in DEPTHS {
        // The set: refused with the reason, over HLS and DASH; the folder page still answers.
        let sidecar_reason = if nested_sidecar(depth).len() > MAX_SIDECAR {
            "larger than 65536 bytes".to_string()
        } else if depth > SIDECAR_DEPTH {
            format!("nests more than {SIDECAR_DEPTH} levels deep")
        } else {
            "unknown field".to_string()
        };
        for manifest in ["master.m3u8", "manifest.mpd"] {
            let r = fetch_get(addr, &format!("/d{depth}/movie.set/{manifest}"), &[]);
            let body = r.body_text();
            assert_eq!(r.status, 500, "sidecar {depth} deep, {manifest}: {body}");
            assert!(
                body.contains("movie.set.toml") && body.contains(&sidecar_reason),
                "{depth} deep: {body}"
            );
        }
        fetch_get(addr, &format!("/d{depth}/"), &[]).expect_status(200, "the folder page");

        // The subtitles: a cue too deep is refused with the reason, one within the bound served.
        let playlist = fetch_get(addr, &format!("/d{depth}/movie.mp4/subtitles-en.m3u8"), &[]);
        playlist.expect_status(200, "the subtitles playlist");
        let text = playlist.body_text();
        let first = text.lines().find(|l| !l.is_empty() && !l.starts_with('#')).unwrap();
        let segment = fetch_get(addr, &format!("/d{depth}/movie.mp4/{first}"), &[]);
        if depth > MAX_DEPTH {
            assert_eq!(segment.status, 500, "cue {depth} deep: {}", segment.body_text());
            let body = segment.body_text();
            assert!(
                body.contains(&format!("nests more than {MAX_DEPTH} levels deep")),
                "{depth} deep: {body}"
            );
        } else {
            segment.expect_status(200, "subtitles within the bound");
            assert!(segment.body_text().contains("hello"), "{}", segment.body_text());
        }

        // The token, in the header and in the query: refused past the bound (or as too long).
        let token = nested_token(depth);
        let bearer = format!("Bearer {token}");
        let by_header = status_of(addr, &get("/members/demo.mp4", &[("Authorization", &bearer)]));
        let by_query = status_of(addr, &get(&format!("/members/demo.mp4?jwt={token}"), &[]));
        for (how, status) in [("header", by_header), ("query", by_query)] {
            // The claims object is a level of its own.
            let expected: &[u16] = if depth < MAX_DEPTH {
                &[200]
            } else if token.len() < 8 << 10 {
                &[403]
            } else {
                &[403, 414, 431]
            };
            assert!(expected.contains(&status), "token {depth} deep in the {how}: {status}");
        }
    }

    // `/streams` answers and lists each set with why it is not served.
    let mut c = Conn::open(admin);
    c.send(get("/streams", &[]));
    let r = c.response();
    r.expect_status(200, "/streams");
    let streams: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    for depth in DEPTHS {
        let path = format!("/d{depth}/movie.set");
        let set = streams["sets"].as_array().unwrap().iter().find(|s| s["path"] == path.as_str());
        let set = set.unwrap_or_else(|| panic!("{path} listed: {streams}"));
        assert_eq!(set["ready"], false, "{set}");
        assert!(set["not_ready_reason"].as_str().unwrap().contains("movie.set.toml"), "{set}");
    }
    assert!(server.running(), "the server lives; its log:\n{}", server.log_text());
    fetch_get(addr, "/members/demo.mp4", &[]).expect_status(401, "still serving");
    fetch_get(admin, "/healthz", &[]).expect_status(200, "still healthy");
}
