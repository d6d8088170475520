//! The access policies: signed URLs, JWTs, users, prefixes and carried credentials.

use super::*;
use base64::Engine as _;
use percent_encoding::percent_decode_str;
use sha2::Sha256;
use users::{digest_uri_names, hex, md5_hex};

const NOW: u64 = 1_800_000_000;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

fn signed(keys: &[(&str, &[u8])]) -> Access {
    let keys = keys.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect();
    Access::with_rules(vec![("/private/".into(), Rule::Signed { keys }), ("/".into(), Rule::Open)])
}

fn ask(access: &Access, url: &str, peer: [u8; 4]) -> Decision {
    let (path, query) = url.split_once('?').map_or((url, None), |(p, q)| (p, Some(q)));
    let path = percent_decode_str(path).decode_utf8_lossy();
    access.check(
        &Presented {
            path: &path,
            query,
            bearer: None,
            peer: IpAddr::from(peer),
            authorization: None,
            method: "GET",
            target: Target::Http(url),
        },
        at(NOW),
    )
}

const LOCAL: [u8; 4] = [127, 0, 0, 1];

#[test]
fn a_signed_path_opens_that_path_until_it_expires() {
    let access = signed(&[("", b"secret")]);
    let url =
        signed_url(b"secret", None, "/private/a b.mp4", Scope::Path("/private/a b.mp4"), NOW + 60, None);
    assert!(url.starts_with("/private/a%20b.mp4?exp="), "{url}");
    assert_eq!(
        ask(&access, &url, LOCAL),
        Decision::Allowed { carry: Some(url.split_once('?').unwrap().1.into()) }
    );
    let other = url.replace("a%20b.mp4", "c.mp4");
    assert_eq!(ask(&access, &other, LOCAL), Decision::Refused(Refusal::BadSignature));
    let expired = signed_url(b"secret", None, "/private/x", Scope::Path("/private/x"), NOW, None);
    assert_eq!(ask(&access, &expired, LOCAL), Decision::Refused(Refusal::Expired));
    assert_eq!(ask(&access, "/private/a%20b.mp4", LOCAL), Decision::Refused(Refusal::Missing));
    assert_eq!(ask(&access, "/private", LOCAL), Decision::Refused(Refusal::Missing), "the folder itself");
    assert_eq!(ask(&access, "/public.mp4", LOCAL), Decision::Allowed { carry: None });
    let tampered = url.replace(&format!("exp={}", NOW + 60), &format!("exp={}", NOW + 6000));
    assert_eq!(ask(&access, &tampered, LOCAL), Decision::Refused(Refusal::BadSignature));
}

#[test]
fn a_prefix_signature_covers_its_prefix_only_and_cannot_pass_for_a_path() {
    let access = signed(&[("", b"secret")]);
    let url = signed_url(
        b"secret",
        None,
        "/private/a.mp4/master.m3u8",
        Scope::Prefix("/private/a.mp4/"),
        NOW + 60,
        None,
    );
    let query = url.split_once('?').unwrap().1;
    assert!(matches!(ask(&access, &url, LOCAL), Decision::Allowed { .. }));
    assert!(matches!(
        ask(&access, &format!("/private/a.mp4/seg-3.m4s?{query}"), LOCAL),
        Decision::Allowed { .. }
    ));
    assert_eq!(
        ask(&access, &format!("/private/b.mp4?{query}"), LOCAL),
        Decision::Refused(Refusal::WrongPrefix)
    );
    // A path's signature, given a scope, does not verify.
    let path_sig = signed_url(b"secret", None, "/private/a", Scope::Path("/private/a"), NOW + 60, None);
    let as_prefix = format!("{}&scope=/private/a", path_sig.replace("/private/a?", "/private/a.mp4?"));
    assert_eq!(ask(&access, &as_prefix, LOCAL), Decision::Refused(Refusal::BadSignature));
}

#[test]
fn keys_go_by_id_and_addresses_bind() {
    let access = signed(&[("", b"old"), ("k2", b"new")]);
    let new = signed_url(b"new", Some("k2"), "/private/a", Scope::Path("/private/a"), NOW + 60, None);
    assert!(matches!(ask(&access, &new, LOCAL), Decision::Allowed { .. }));
    let wrong_key = signed_url(b"other", Some("k2"), "/private/a", Scope::Path("/private/a"), NOW + 60, None);
    assert_eq!(ask(&access, &wrong_key, LOCAL), Decision::Refused(Refusal::BadSignature));
    let unknown = signed_url(b"new", Some("k9"), "/private/a", Scope::Path("/private/a"), NOW + 60, None);
    assert_eq!(ask(&access, &unknown, LOCAL), Decision::Refused(Refusal::UnknownKey));
    let bound = signed_url(
        b"old",
        None,
        "/private/a",
        Scope::Path("/private/a"),
        NOW + 60,
        Some(IpAddr::from(LOCAL)),
    );
    assert!(matches!(ask(&access, &bound, LOCAL), Decision::Allowed { .. }));
    assert_eq!(ask(&access, &bound, [127, 0, 0, 2]), Decision::Refused(Refusal::BadSignature));
    let counted: u64 = access.refusals().map(|(_, n)| n).sum();
    assert_eq!(counted, 3);
}

#[test]
fn the_longest_prefix_decides() {
    let keys = [(String::new(), b"k".to_vec())].into_iter().collect();
    let access = Access::with_rules(vec![
        ("/private/".into(), Rule::Signed { keys }),
        ("/private/free/".into(), Rule::Open),
    ]);
    assert_eq!(ask(&access, "/private/free/a.mp4", LOCAL), Decision::Allowed { carry: None });
    assert_eq!(ask(&access, "/private/freex", LOCAL), Decision::Refused(Refusal::Missing));
}

#[test]
fn jwts_are_checked_against_the_jwks() {
    use jsonwebtoken::{encode, EncodingKey, Header};
    let secret = b"jwt-secret-of-32-bytes-or-more!!";
    let k = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret);
    let jwks = format!(r#"{{"keys":[{{"kty":"oct","kid":"h1","k":"{k}"}}]}}"#);
    let access = Access::with_rules(vec![(
        "/members/".into(),
        Rule::Jwt { keys: jwks_keys(&jwks).unwrap(), claim: "paths".into() },
    )]);
    let token = |exp: u64, paths: &[&str], kid: &str| {
        let mut header = Header::new(jsonwebtoken::Algorithm::HS256);
        header.kid = Some(kid.into());
        let claims = serde_json::json!({ "exp": exp, "paths": paths });
        encode(&header, &claims, &EncodingKey::from_secret(secret)).unwrap()
    };
    let far = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600;
    let ok = token(far, &["/members/a"], "h1");
    let now = SystemTime::now();
    let ask = |path: &str, query: Option<&str>, bearer: Option<&str>| {
        let target = format!("{path}?{}", query.unwrap_or_default());
        let presented = Presented {
            path,
            query,
            bearer,
            peer: IpAddr::from(LOCAL),
            authorization: None,
            method: "GET",
            target: Target::Http(&target),
        };
        access.check(&presented, now)
    };
    assert_eq!(ask("/members/a.mp4", None, Some(&ok)), Decision::Allowed { carry: None });
    let q = format!("jwt={ok}");
    assert_eq!(ask("/members/a.mp4", Some(&q), None), Decision::Allowed { carry: Some(q.clone()) });
    // Only the checked token is carried on, once, whatever else the query holds.
    let doubled = format!("jwt={ok}&jwt=%22%3E%3Cscript%3E&x=\"");
    assert_eq!(ask("/members/a.mp4", Some(&doubled), None), Decision::Allowed { carry: Some(q.clone()) });
    assert_eq!(ask("/members/b.mp4", Some(&q), None), Decision::Refused(Refusal::WrongPrefix));
    assert_eq!(ask("/members/a.mp4", None, None), Decision::Refused(Refusal::Missing));
    let expired = token(1_000_000, &["/members/"], "h1");
    assert_eq!(ask("/members/a.mp4", None, Some(&expired)), Decision::Refused(Refusal::Expired));
    // alg: none, with the same claims and no signature.
    let b64 = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    let none = format!(
        "{}.{}.",
        b64(r#"{"alg":"none","typ":"JWT"}"#),
        b64(&format!(r#"{{"exp":{far},"paths":["/"]}}"#))
    );
    assert_eq!(ask("/members/a.mp4", None, Some(&none)), Decision::Refused(Refusal::BadToken));
    let forged = token(far, &["/"], "h1");
    let forged = format!("{}x", &forged[..forged.len() - 1]);
    assert_eq!(ask("/members/a.mp4", None, Some(&forged)), Decision::Refused(Refusal::BadToken));
}

#[test]
fn users_pass_by_basic_and_digest_with_fresh_nonces_only() {
    use sluice_proto::http::credentials::{digest, DigestCredentials};
    let ha1 = md5_hex(&format!("bo:{REALM}:hashed"));
    let sha = {
        use sha2::Digest as _;
        hex(&Sha256::digest(b"shaw"))
    };
    let text = format!("# viewers\nann:se:cret\nbo:digest-md5:{ha1}\ncy:sha256:{sha}\n");
    let access = Access::with_rules(vec![("/".into(), Rule::Users { users: read_users(&text).unwrap() })]);
    let now = SystemTime::now();
    let ask = |authorization: Option<&str>, method: &str| {
        let presented = Presented {
            path: "/a.mp4",
            query: None,
            bearer: None,
            peer: IpAddr::from(LOCAL),
            authorization,
            method,
            target: Target::Rtsp("rtsp://127.0.0.1/a.mp4"),
        };
        access.check(&presented, now)
    };
    let b64 = |s: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(s));
    let allowed = Decision::Allowed { carry: None };
    assert_eq!(ask(Some(&b64("ann:se:cret")), "GET"), allowed);
    assert_eq!(ask(Some(&b64("bo:hashed")), "GET"), allowed);
    assert_eq!(ask(Some(&b64("cy:shaw")), "GET"), allowed);
    assert_eq!(ask(Some(&b64("ann:wrong")), "GET"), Decision::Refused(Refusal::BadPassword));
    assert_eq!(ask(Some(&b64("nobody:x")), "GET"), Decision::Refused(Refusal::BadPassword));
    assert_eq!(ask(None, "GET"), Decision::Refused(Refusal::Missing));
    let [offer, _] = access.challenges("/a.mp4", now).unwrap();
    let nonce = offer.split('"').nth(3).unwrap().to_string();
    let answer = |user: &str, password: &str, nonce: &str| {
        let ha1 = md5_hex(&format!("{user}:{REALM}:{password}"));
        let uri = "rtsp://127.0.0.1/a.mp4";
        let response = md5_hex(&format!("{ha1}:{nonce}:{}", md5_hex(&format!("DESCRIBE:{uri}"))));
        let d = DigestCredentials {
            username: user.into(),
            realm: REALM.into(),
            nonce: nonce.into(),
            uri: uri.into(),
            response,
            ..Default::default()
        };
        assert!(digest(&d.header()).is_some());
        d.header()
    };
    assert_eq!(ask(Some(&answer("ann", "se:cret", &nonce)), "DESCRIBE"), allowed);
    assert_eq!(ask(Some(&answer("bo", "hashed", &nonce)), "DESCRIBE"), allowed);
    assert_eq!(
        ask(Some(&answer("ann", "se:cret", &nonce)), "SETUP"),
        Decision::Refused(Refusal::BadPassword),
        "the method is covered"
    );
    assert_eq!(
        ask(Some(&answer("ann", "nope", &nonce)), "DESCRIBE"),
        Decision::Refused(Refusal::BadPassword)
    );
    assert_eq!(
        ask(Some(&answer("cy", "shaw", &nonce)), "DESCRIBE"),
        Decision::Refused(Refusal::BadPassword),
        "a SHA-256 entry cannot answer Digest"
    );
    let old = access.nonce(1_000);
    assert_eq!(ask(Some(&answer("ann", "se:cret", &old)), "DESCRIBE"), Decision::Refused(Refusal::Missing));
    let forged = format!("{}{}", &nonce[..15], "f".repeat(nonce.len() - 15));
    assert_eq!(
        ask(Some(&answer("ann", "se:cret", &forged)), "DESCRIBE"),
        Decision::Refused(Refusal::Missing)
    );
    assert_eq!(access.logins(), [("basic", 3), ("digest", 2)]);
    assert!(read_users("ann").is_err() && read_users("bo:sha256:zz").is_err() && read_users("\n").is_err());
}

#[test]
fn a_titles_folder_and_a_manifests_prefix_cover_what_they_list() {
    assert_eq!(title_folder("/films/a.mp4/master.m3u8"), "/films/");
    assert_eq!(title_folder("/films/a.mp4"), "/films/");
    assert_eq!(title_folder("/films/t.set/manifest.mpd"), "/films/");
    assert_eq!(title_folder("/a.mp4"), "/");
    let manifest = |path: &str| manifest_prefix(path);
    assert_eq!(manifest("/films/a.mp4/master.m3u8").as_deref(), Some("/films/a.mp4/"));
    assert_eq!(manifest("/films/a.mp4/manifest.mpd").as_deref(), Some("/films/a.mp4/"));
    assert_eq!(manifest("/films/a.mp4/subtitles-en.m3u8").as_deref(), Some("/films/a.mp4/"));
    assert_eq!(manifest("/films/t.set/master.m3u8").as_deref(), Some("/films/"));
    assert_eq!(manifest("/live/x.M3U8").as_deref(), Some("/live/"));
    assert_eq!(manifest("/x.mpd").as_deref(), Some("/"));
    assert_eq!(manifest("/films/a.mp4"), None);
    assert_eq!(manifest("/films/a.mp4/video-seg-1.m4s"), None);
    assert_eq!(manifest("/films/"), None);
    assert_eq!(normal_path("films/a%20b.mp4").as_deref(), Some("/films/a b.mp4"));
    assert_eq!(normal_path("/../x"), None);
}

#[test]
fn es256_keys_from_the_jwks_verify_and_cannot_be_used_as_hmac_secrets() {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    use ring::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let public = pair.public_key().as_ref();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let (x, y) = (b64(&public[1..33]), b64(&public[33..65]));
    let jwks = format!(r#"{{"keys":[{{"kty":"EC","crv":"P-256","kid":"e1","x":"{x}","y":"{y}"}}]}}"#);
    let access = Access::with_rules(vec![(
        "/".into(),
        Rule::Jwt { keys: jwks_keys(&jwks).unwrap(), claim: "paths".into() },
    )]);
    let far = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 3600;
    let claims = serde_json::json!({ "exp": far, "paths": ["/films/"] });
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("e1".into());
    let token = encode(&header, &claims, &EncodingKey::from_ec_der(pkcs8.as_ref())).unwrap();
    let ask = |token: &str| {
        let presented = Presented {
            path: "/films/a.mp4",
            query: None,
            bearer: Some(token),
            peer: IpAddr::from(LOCAL),
            authorization: None,
            method: "GET",
            target: Target::Http("/films/a.mp4"),
        };
        access.check(&presented, SystemTime::now())
    };
    assert_eq!(ask(&token), Decision::Allowed { carry: None });
    // The public key as an HMAC secret (the classic algorithm confusion) opens nothing.
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("e1".into());
    let confused = encode(&hs, &claims, &EncodingKey::from_secret(public)).unwrap();
    assert_eq!(ask(&confused), Decision::Refused(Refusal::BadToken));
}

#[test]
fn playlists_carry_the_credentials_on() {
    let m3u8 = "#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,URI=\"audio.m3u8\",GROUP-ID=\"a\"\n#EXT-X-STREAM-INF:BANDWIDTH=1\nvideo.m3u8\n\n#EXT-X-MAP:URI=\"../x.mp4/init.mp4\"\nseg-0.m4s\n";
    let out = carry_into_m3u8(m3u8, "exp=1&sig=s");
    assert!(out.contains("URI=\"audio.m3u8?exp=1&sig=s\""), "{out}");
    assert!(out.contains("\nvideo.m3u8?exp=1&sig=s\n"), "{out}");
    assert!(out.contains("URI=\"../x.mp4/init.mp4?exp=1&sig=s\""), "{out}");
    assert!(out.ends_with("\nseg-0.m4s?exp=1&sig=s\n"), "{out}");
    let mpd = "<SegmentTemplate initialization=\"v-init.mp4\" media=\"v-seg-$Number$.m4s\"/><BaseURL>../a.en.vtt</BaseURL>";
    let out = carry_into_mpd(mpd, "exp=1&sig=s");
    assert!(out.contains("initialization=\"v-init.mp4?exp=1&amp;sig=s\""), "{out}");
    assert!(out.contains("media=\"v-seg-$Number$.m4s?exp=1&amp;sig=s\""), "{out}");
    assert!(out.contains("<BaseURL>../a.en.vtt?exp=1&amp;sig=s</BaseURL>"), "{out}");
    let page = "<a href=\"../\">up</a><a href=\"./shows/\">shows/</a><button data-src=\"./a.mp4\" data-hls=\"./a.mp4/master.m3u8\">";
    let out = carry_into_page(page, "exp=1&sig=s");
    assert!(out.contains("href=\"./shows/?exp=1&amp;sig=s\""), "{out}");
    assert!(out.contains("data-src=\"./a.mp4?exp=1&amp;sig=s\""), "{out}");
    assert!(out.contains("data-hls=\"./a.mp4/master.m3u8?exp=1&amp;sig=s\""), "{out}");
    assert!(out.contains("href=\"../\""), "the way up leaves the signed folder: {out}");
    let page = "<button data-thumbs=\"./a.mp4/thumbs/thumbnails.vtt\">";
    let out = carry_into_page(page, "exp=1&sig=s");
    assert!(out.contains("data-thumbs=\"./a.mp4/thumbs/thumbnails.vtt?exp=1&amp;sig=s\""), "{out}");
    let vtt = "WEBVTT\n\n00:00:00.000 --> 00:00:10.000\ntile-1.jpg#xywh=0,0,160,90\n";
    let out = carry_into_thumbnail_vtt(vtt, "exp=1&sig=\"s");
    assert_eq!(
        out, "WEBVTT\n\n00:00:00.000 --> 00:00:10.000\ntile-1.jpg?exp=1&sig=%22s#xywh=0,0,160,90\n",
        "the tile's URL carries the credentials, percent-encoded; the rest is as it was"
    );
}

#[test]
fn a_digest_uri_names_the_request_target_over_http_and_a_track_s_presentation_over_rtsp() {
    let http = |uri: &str, target: &str| digest_uri_names(uri, Target::Http(target));
    assert!(http("/studio/a.mp4", "/studio/a.mp4"));
    assert!(http("/films/?x=1", "/films/?x=1"));
    assert!(http("http://h:8080/a.mp4?x", "/a.mp4?x") && http("/a.mp4", "http://h/a.mp4"));
    assert!(http("/a.mp4?u=http://x/b", "/a.mp4?u=http://x/b"));
    // Nothing but the target itself: not what is below or above it, nor another query.
    for (uri, target) in [
        ("/studio/a.mp4/master.m3u8", "/studio/a.mp4"),
        ("/studio/a.mp4/video-seg-1.m4s", "/studio/a.mp4"),
        ("/studio/secret/b.mp4", "/studio/secret/"),
        ("/studio/secret/b.mp4", "/studio/"),
        ("/studio/a.mp4", "/studio/a.mp4/master.m3u8"),
        ("/a.mp4/trackID=1", "/a.mp4"),
        ("/a.mp4", "/a.mp4/trackID=1"),
        ("/films/?x=1", "/films/"),
        ("/films/", "/films/?x=1"),
        ("/b.mp4?u=http://h/a.mp4", "/a.mp4"),
        ("http://h", "/"),
        ("", "/a.mp4"),
    ] {
        assert!(!http(uri, target), "{uri} opened {target}");
    }
    let rtsp = |uri: &str, target: &str| digest_uri_names(uri, Target::Rtsp(target));
    let track = "rtsp://h:1/a.mp4/trackID=1";
    assert!(rtsp("rtsp://h:1/a.mp4", "rtsp://h:1/a.mp4"));
    assert!(rtsp(track, track));
    for aggregate in ["rtsp://h:1/a.mp4", "rtsp://h:1/a.mp4/", "rtsp://h:1/a.mp4?jwt=x", "/a.mp4"] {
        assert!(rtsp(aggregate, track), "{aggregate} for its track");
    }
    for (uri, target) in [
        ("rtsp://h:1/a.mp4/trackID=0", track),
        (track, "rtsp://h:1/a.mp4"),
        ("rtsp://h:1/", "rtsp://h:1/a.mp4"),
        ("rtsp://h:1/films", "rtsp://h:1/films/a.mp4/trackID=0"),
        ("rtsp://h:1/a.mp4x", "rtsp://h:1/a.mp4"),
        ("rtsp://h:1/a.mp4", "rtsp://h:1/a.mp4x/trackID=0"),
        ("rtsp://h:1/a.mp4", "rtsp://h:1/a.mp4/trackID="),
        ("rtsp://h:1/a.mp4", "rtsp://h:1/a.mp4/trackID=x"),
        ("rtsp://h:1/a.mp4", "rtsp://h:1/a.mp4/other/trackID=0"),
        ("rtsp://h:1/a.mp4?x=1", "rtsp://h:1/a.mp4"),
    ] {
        assert!(!rtsp(uri, target), "{uri} opened {target}");
    }
}

#[test]
fn only_the_checked_parameters_are_carried_one_of_each_percent_encoded() {
    let access = signed(&[("", b"secret"), ("k\"1", b"other")]);
    let prefix = "/private/q\"t/";
    let url =
        signed_url(b"other", Some("k\"1"), "/private/q\"t/a.mp4", Scope::Prefix(prefix), NOW + 60, None);
    let query = url.split_once('?').unwrap().1.to_string();
    assert!(query.contains("kid=k%221&scope=/private/q%22t/&sig="), "{query}");
    let carried = |url: &str| match ask(&access, url, LOCAL) {
        Decision::Allowed { carry } => carry.unwrap(),
        refused => panic!("{url}: {refused:?}"),
    };
    let path = "/private/q%22t/a.mp4/master.m3u8";
    assert_eq!(carried(&format!("{path}?{query}")), query);
    // A parameter appended again, another parameter, the checked values sent unencoded or with
    // padding: the same query is carried.
    let sig = query.split_once("sig=").unwrap().1;
    for sent in [
        format!("{query}&sig=\"><script>alert(1)</script>&exp=1"),
        format!("{query}&jwt=x&utm=\""),
        format!("x=\"&{}", query.replace("%22", "\"")),
        query.replace(sig, &format!("{sig}=")),
    ] {
        assert_eq!(carried(&format!("{path}?{sent}")), query, "{sent}");
    }
    // `ip` is checked for its presence only: whatever its value, `ip=1` is carried.
    let bound =
        signed_url(b"secret", None, "/private/a", Scope::Path("/private/a"), NOW + 60, Some(LOCAL.into()));
    let hostile = bound.replace("ip=1", "ip=%22%3E%3Cx%3E");
    assert_eq!(carried(&hostile), bound.split_once('?').unwrap().1);
}

#[test]
fn carried_credentials_are_escaped_for_each_output() {
    // Not a query the server would carry (it writes the checked values again, percent-encoded),
    // but whatever reaches these functions stays inside its attribute.
    let hostile = "a=\"><b>&c=$x #";
    let m3u8 = "#EXTM3U\n#EXT-X-MAP:URI=\"init.mp4\"\nseg-0.m4s\n";
    let out = carry_into_m3u8(m3u8, hostile);
    assert!(out.contains("URI=\"init.mp4?a=%22%3E%3Cb%3E&c=$x%20%23\"\n"), "{out}");
    assert!(out.ends_with("\nseg-0.m4s?a=%22%3E%3Cb%3E&c=$x%20%23\n"), "{out}");
    let mpd = "<SegmentTemplate media=\"v-$Number$.m4s\"/><BaseURL>../a.vtt</BaseURL>";
    let out = carry_into_mpd(mpd, hostile);
    assert!(out.contains("media=\"v-$Number$.m4s?a=&quot;&gt;&lt;b&gt;&amp;c=$$x #\""), "{out}");
    assert!(out.contains("<BaseURL>../a.vtt?a=&quot;&gt;&lt;b&gt;&amp;c=$x #</BaseURL>"), "{out}");
    let out = carry_into_page("<a href=\"./b/?s=1\">", hostile);
    assert_eq!(out, "<a href=\"./b/?s=1&amp;a=&quot;&gt;&lt;b&gt;&amp;c=$x #\">");
}

#[test]
fn publishing_needs_the_publish_right_and_the_policys_credentials() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    std::fs::write(&users, "alice:secret\n").unwrap();
    let policy = |prefix: &str, mode, users_file: Option<PathBuf>, publish| AccessPolicy {
        prefix: prefix.into(),
        mode,
        key_file: None,
        keys: BTreeMap::new(),
        jwks: None,
        claim: None,
        users_file,
        publish,
    };
    let only_reads = Access::load(&[policy("/live/", AccessMode::Open, None, false)]).unwrap();
    assert!(only_reads.is_open(), "open policies without publishing need no checks");
    let access = Access::load(&[
        policy("/live/", AccessMode::Open, None, true),
        policy("/live/cams/", AccessMode::Users, Some(users), true),
        policy("/live/ro/", AccessMode::Open, None, false),
    ])
    .unwrap();
    assert!(!access.is_open(), "a publish right is checked");
    let publish = |path: &str, authorization: Option<&str>| {
        access.check_publish(
            &Presented {
                path,
                query: None,
                bearer: None,
                peer: IpAddr::from(LOCAL),
                authorization,
                method: "ANNOUNCE",
                target: Target::Rtsp("rtsp://h/x"),
            },
            at(NOW),
        )
    };
    assert_eq!(publish("/live/x", None), Ok(()));
    assert_eq!(publish("/live/ro/x", None), Err(403), "no right under the longer prefix");
    assert_eq!(publish("/films/x", None), Err(403), "no policy, no right");
    assert_eq!(publish("/live/cams/door", None), Err(401), "the policy's credentials are asked for");
    assert_eq!(publish("/live/cams/door", Some("Basic YWxpY2U6c2VjcmV0")), Ok(()));
    assert_eq!(publish("/live/cams/door", Some("Basic YWxpY2U6d3Jvbmc=")), Err(401));
}
