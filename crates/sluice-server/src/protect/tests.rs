//! `[[protect]]` entries: key sources, longest prefixes, reloading, licences.

use super::licence::licence;
use super::*;

fn policy(prefix: &str, scheme: ProtectScheme, keys: Option<&Path>, master: Option<&Path>) -> ProtectPolicy {
    ProtectPolicy {
        prefix: prefix.into(),
        scheme,
        keys_file: keys.map(Path::to_owned),
        master_key_file: master.map(Path::to_owned),
        cpix_file: None,
        pssh: Vec::new(),
    }
}

const KID_A: &str = "00112233445566778899aabbccddeeff";
const KEY_A: &str = "0f0e0d0c0b0a09080706050403020100";
const KID_B: &str = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
const KEY_B: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

#[test]
fn keys_files_give_each_title_the_longest_entry_and_reload_replaces_them() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("# title keys\n/films/ {KID_A} {KEY_A}\n/films/b.mp4 {KID_B} {KEY_B}\n"))
        .unwrap();
    let p = Protection::load(&[policy("/films/", ProtectScheme::Cenc, Some(&keys), None)]).unwrap();
    let a = p.title("/films/a.mp4").unwrap().unwrap();
    assert_eq!(sluice_media::protect::hex(&a.key.kid), KID_A);
    assert_eq!(sluice_media::protect::hex(&a.key.key), KEY_A);
    let b = p.title("/films/b.mp4").unwrap().unwrap();
    assert_eq!(sluice_media::protect::hex(&b.key.kid), KID_B);
    assert_eq!(p.title("/films/b.mp4x").unwrap().unwrap().key.kid, a.key.kid, "a title matches itself only");
    assert!(p.title("/other/a.mp4").is_none());
    assert!(p.guards("/films/a.mp4/video-seg-0.m4s"));
    let before = a.fingerprint();
    std::fs::write(&keys, format!("/films/ {KID_A} {KEY_B}\n")).unwrap();
    p.reload().unwrap();
    let after = p.title("/films/a.mp4").unwrap().unwrap();
    assert_eq!(sluice_media::protect::hex(&after.key.key), KEY_B);
    assert_ne!(after.fingerprint(), before, "a new key is a new entity tag");
    // A broken file keeps the keys in force, and the error does not show the key.
    std::fs::write(&keys, format!("/films/ {KID_A} {KEY_A}zz\n")).unwrap();
    let error = p.reload().unwrap_err().to_string();
    assert!(!error.contains(KEY_A) && error.contains("line 1"), "{error}");
    assert_eq!(p.title("/films/a.mp4").unwrap().unwrap(), after);
}

#[test]
fn a_master_key_derives_a_kid_and_key_per_title_and_prefixes_nest() {
    let dir = tempfile::tempdir().unwrap();
    let master = dir.path().join("master");
    std::fs::write(&master, format!("{KEY_A}{KEY_B}\n")).unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("/films/free/x.mp4 {KID_A} {KEY_A}\n")).unwrap();
    let p = Protection::load(&[
        policy("/films/", ProtectScheme::Cbcs, None, Some(&master)),
        policy("/films/free/", ProtectScheme::Aes128, Some(&keys), None),
    ])
    .unwrap();
    let a = p.title("/films/a.mp4").unwrap().unwrap();
    let b = p.title("/films/b.mp4").unwrap().unwrap();
    assert_eq!(a.scheme, ProtectScheme::Cbcs);
    assert_ne!(a.key.kid, b.key.kid);
    assert_ne!(a.key.key, b.key.key);
    assert_eq!(p.title("/films/a.mp4").unwrap().unwrap(), a, "derived the same every time");
    let x = p.title("/films/free/x.mp4").unwrap().unwrap();
    assert_eq!(x.scheme, ProtectScheme::Aes128);
    assert_eq!(p.title("/films/free/y.mp4"), Some(Err(NoKey)), "listed keys only");
}

#[test]
fn entries_without_a_usable_key_source_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let master = dir.path().join("master");
    std::fs::write(&master, "abcd\n").unwrap();
    let short = Protection::load(&[policy("/a/", ProtectScheme::Cenc, None, Some(&master))]);
    assert!(short.unwrap_err().to_string().contains("64 hex digits"));
    let neither = Protection::load(&[policy("/a/", ProtectScheme::Cenc, None, None)]);
    assert!(neither.unwrap_err().to_string().contains("keys_file"));
    let missing = Protection::load(&[policy("/a/", ProtectScheme::Cenc, Some(&dir.path().join("no")), None)]);
    assert!(matches!(missing, Err(ProtectError::Read { .. })));
    let mut bad = policy("/a/", ProtectScheme::Cenc, None, Some(&master));
    std::fs::write(&master, KEY_A).unwrap();
    bad.pssh = vec!["not-a-uuid:AAAA".into()];
    assert!(Protection::load(&[bad]).unwrap_err().to_string().contains("pssh"));
}

#[test]
fn the_licence_gives_the_key_of_the_kid_asked_for_only() {
    use base64::Engine as _;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("/ {KID_A} {KEY_A}\n")).unwrap();
    let p = Protection::load(&[policy("/", ProtectScheme::Cenc, Some(&keys), None)]).unwrap();
    let title = p.title("/a.mp4").unwrap().unwrap();
    let b64 = |b: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b);
    let body = |r: &sluice_proto::http::Response| match &r.body {
        sluice_proto::http::Body::Bytes(b) => serde_json::from_slice::<serde_json::Value>(b).unwrap(),
        _ => panic!("bytes"),
    };
    let asked = format!("{{\"kids\":[\"{}\"],\"type\":\"temporary\"}}", b64(&title.key.kid));
    let answer = body(&licence(&title, asked.as_bytes()));
    assert_eq!(answer["type"], "temporary");
    assert_eq!(answer["keys"][0]["kty"], "oct");
    assert_eq!(answer["keys"][0]["kid"], b64(&title.key.kid));
    assert_eq!(answer["keys"][0]["k"], b64(&title.key.key));
    let other = format!("{{\"kids\":[\"{}\"]}}", b64(&[1; 16]));
    assert_eq!(body(&licence(&title, other.as_bytes()))["keys"].as_array().unwrap().len(), 0);
    assert_eq!(licence(&title, b"nonsense").status.0, 400);
}

#[test]
fn renditions_take_their_sets_key_from_a_keys_file_or_the_master_key() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("/films/ {KID_A} {KEY_A}\n/films/movie.set {KID_B} {KEY_B}\n")).unwrap();
    let master = dir.path().join("master");
    std::fs::write(&master, format!("{KEY_A}\n")).unwrap();
    let p = Protection::load(&[
        policy("/films/", ProtectScheme::Cenc, Some(&keys), None),
        policy("/derived/", ProtectScheme::Cbcs, None, Some(&master)),
    ])
    .unwrap();
    let kid = |title: &str| sluice_media::protect::hex(&p.title(title).unwrap().unwrap().key.kid);
    for title in ["/films/movie.set", "/films/movie.1080p.mp4", "/films/movie.240p.mp4"] {
        assert_eq!(kid(title), KID_B, "{title}");
    }
    assert_eq!(kid("/films/movie.mp4"), KID_A, "a lone title is not a rendition");
    assert_eq!(kid("/films/other.720p.mp4"), KID_A, "another set's line");
    let set = kid("/derived/a.set");
    assert_eq!(kid("/derived/a.720p.mp4"), set);
    assert_eq!(kid("/derived/a.360p.mp4"), set);
    assert_ne!(kid("/derived/b.360p.mp4"), set, "each set its own key");
    assert_ne!(kid("/derived/a.mp4"), set);
    // A line for one rendition could only disagree with its set's: refused, saying which line.
    std::fs::write(&keys, format!("/films/movie.720p.mp4 {KID_A} {KEY_A}\n")).unwrap();
    let error = p.reload().unwrap_err().to_string();
    assert!(error.contains("line 1") && error.contains("/films/movie.set"), "{error}");
}

#[test]
fn a_cpix_document_keys_its_prefix_and_brings_its_drm_systems() {
    use base64::Engine as _;
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let widevine = "edef8ba9-79d6-4ace-a3c8-27dcd51d21ed";
    let mut pssh = vec![0, 0, 0, 36];
    pssh.extend_from_slice(b"pssh\0\0\0\0");
    pssh.extend_from_slice(&[
        0xed, 0xef, 0x8b, 0xa9, 0x79, 0xd6, 0x4a, 0xce, 0xa3, 0xc8, 0x27, 0xdc, 0xd5, 0x1d, 0x21, 0xed,
    ]);
    pssh.extend_from_slice(&[0, 0, 0, 4]);
    pssh.extend_from_slice(b"wv!!");
    let document = format!(
        "<cpix:CPIX xmlns:cpix=\"urn:dashif:org:cpix\" xmlns:pskc=\"urn:ietf:params:xml:ns:keyprov:pskc\">\
         <cpix:ContentKeyList><cpix:ContentKey kid=\"00112233-4455-6677-8899-aabbccddeeff\">\
         <cpix:Data><pskc:Secret><pskc:PlainValue>{}</pskc:PlainValue></pskc:Secret></cpix:Data>\
         </cpix:ContentKey></cpix:ContentKeyList><cpix:DRMSystemList>\
         <cpix:DRMSystem kid=\"00112233-4455-6677-8899-aabbccddeeff\" systemId=\"{widevine}\"><cpix:PSSH>{}</cpix:PSSH></cpix:DRMSystem>\
         </cpix:DRMSystemList></cpix:CPIX>",
        b64(&unhex(KEY_A).unwrap()),
        b64(&pssh),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("movie.cpix.xml");
    std::fs::write(&file, &document).unwrap();
    let mut entry = policy("/licensed/", ProtectScheme::Cenc, None, None);
    entry.cpix_file = Some(file.clone());
    let p = Protection::load(std::slice::from_ref(&entry)).unwrap();
    for title in ["/licensed/a.mp4", "/licensed/shows/b.mp4", "/licensed/m.720p.mp4"] {
        let t = p.title(title).unwrap().unwrap();
        assert_eq!(
            (sluice_media::protect::hex(&t.key.kid), sluice_media::protect::hex(&t.key.key)),
            (KID_A.into(), KEY_A.into())
        );
        assert_eq!(t.key.systems.len(), 1);
        assert_eq!(t.key.systems[0].pssh.as_ref().unwrap().data, b"wv!!");
    }
    // SIGHUP reads the document again: a broken one keeps the key in force, saying where.
    std::fs::write(&file, document.replace("</pskc:PlainValue>", "</pskc:PlainValueX>")).unwrap();
    let error = p.reload().unwrap_err().to_string();
    assert!(error.contains("movie.cpix.xml") && error.contains("not well-formed XML"), "{error}");
    assert!(!error.contains(&b64(&unhex(KEY_A).unwrap())), "{error}");
    assert_eq!(sluice_media::protect::hex(&p.title("/licensed/a.mp4").unwrap().unwrap().key.key), KEY_A);
    // One key source an entry; the same system twice is a mistake.
    let keys = dir.path().join("keys");
    std::fs::write(&keys, format!("/licensed/ {KID_A} {KEY_A}\n")).unwrap();
    std::fs::write(&file, &document).unwrap();
    let both = ProtectPolicy { keys_file: Some(keys), ..entry.clone() };
    let error = Protection::load(&[both]).unwrap_err().to_string();
    assert!(error.contains("set one of keys_file, master_key_file and cpix_file"), "{error}");
    let twice = ProtectPolicy { pssh: vec![format!("{widevine}:AAAA")], ..entry };
    let error = Protection::load(&[twice]).unwrap_err().to_string();
    assert!(error.contains(&format!("both give system {widevine}")), "{error}");
}
