//! CPIX documents written after the examples of DASH-IF CPIX 2.3 (one content key; Widevine,
//! PlayReady and FairPlay systems), read whole, cut at every byte, and broken one element at a
//! time.

use super::*;

const KID: &str = "0dc3ec4f-7683-548b-81e7-3c64e582e136";
const KID_BYTES: [u8; 16] =
    [0x0d, 0xc3, 0xec, 0x4f, 0x76, 0x83, 0x54, 0x8b, 0x81, 0xe7, 0x3c, 0x64, 0xe5, 0x82, 0xe1, 0x36];
/// The key, `WADwG2qCqkq5TVml+U5PXw==` in the document.
const KEY: [u8; 16] =
    [0x58, 0x00, 0xf0, 0x1b, 0x6a, 0x82, 0xaa, 0x4a, 0xb9, 0x4d, 0x59, 0xa5, 0xf9, 0x4e, 0x4f, 0x5f];
const WIDEVINE: &str = "edef8ba9-79d6-4ace-a3c8-27dcd51d21ed";
const PLAYREADY: &str = "9a04f079-9840-4286-ab92-e65be0885f95";
const FAIRPLAY: &str = "94ce86fb-07ff-4f43-adb8-93d2fa968ca2";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

fn id(uuid: &str) -> [u8; 16] {
    let hex: String = uuid.chars().filter(|c| *c != '-').collect();
    let mut out = [0u8; 16];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap();
    }
    out
}

/// A whole `pssh` box of `system`, version 1 when `kids` are given.
fn pssh_box(system: &str, kids: &[[u8; 16]], data: &[u8]) -> Vec<u8> {
    let mut body = vec![u8::from(!kids.is_empty()), 0, 0, 0];
    body.extend_from_slice(&id(system));
    if !kids.is_empty() {
        body.extend_from_slice(&(kids.len() as u32).to_be_bytes());
        kids.iter().for_each(|k| body.extend_from_slice(k));
    }
    body.extend_from_slice(&(data.len() as u32).to_be_bytes());
    body.extend_from_slice(data);
    let mut out = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(b"pssh");
    out.extend_from_slice(&body);
    out
}

const PLAYREADY_MPD: &str =
    "<cenc:pssh>AAAAOHBzc2g=</cenc:pssh><mspr:pro xmlns:mspr=\"urn:microsoft:playready\">QAAAAA==</mspr:pro>";
const FAIRPLAY_MEDIA: &str = "#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"skd://keyserver/0dc3ec4f\",KEYFORMAT=\"com.apple.streamingkeydelivery\",KEYFORMATVERSIONS=\"1\"\n";
const FAIRPLAY_MASTER: &str = "#EXT-X-SESSION-KEY:METHOD=SAMPLE-AES,URI=\"skd://keyserver/0dc3ec4f\",KEYFORMAT=\"com.apple.streamingkeydelivery\",KEYFORMATVERSIONS=\"1\"\n";

/// The document, as the spec's examples write one: namespaces, a usage rule (not read), the
/// base64 wrapped over lines.
fn document() -> String {
    let widevine = b64(&pssh_box(WIDEVINE, &[], b"\x12\x10widevine-data"));
    let playready = b64(&pssh_box(PLAYREADY, &[KID_BYTES], b"playready-object"));
    let wrapped: String = widevine
        .as_bytes()
        .chunks(20)
        .map(|c| format!("{}\n        ", std::str::from_utf8(c).unwrap()))
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<cpix:CPIX contentId="urn:example:movie" version="2.3" xmlns:cpix="urn:dashif:org:cpix" xmlns:pskc="urn:ietf:params:xml:ns:keyprov:pskc" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
  <!-- one key for every track -->
  <cpix:ContentKeyList>
    <cpix:ContentKey kid="{KID}" commonEncryptionScheme="cbcs" explicitIV="AAECAwQFBgcICQoLDA0ODw==">
      <cpix:Data>
        <pskc:Secret>
          <pskc:PlainValue>WADwG2qCqkq5TVml+U5PXw==</pskc:PlainValue>
        </pskc:Secret>
      </cpix:Data>
    </cpix:ContentKey>
  </cpix:ContentKeyList>
  <cpix:DRMSystemList>
    <cpix:DRMSystem kid="{KID}" systemId="{WIDEVINE}">
      <cpix:PSSH>
        {wrapped}</cpix:PSSH>
    </cpix:DRMSystem>
    <cpix:DRMSystem kid="{KID}" systemId="{PLAYREADY}">
      <cpix:PSSH>{playready}</cpix:PSSH>
      <cpix:ContentProtectionData>{}</cpix:ContentProtectionData>
    </cpix:DRMSystem>
    <cpix:DRMSystem kid="{KID}" systemId="{FAIRPLAY}">
      <cpix:HLSSignalingData playlist="media">{}</cpix:HLSSignalingData>
      <cpix:HLSSignalingData playlist="master">{}</cpix:HLSSignalingData>
    </cpix:DRMSystem>
    <cpix:DRMSystem kid="{KID}" systemId="1077efec-c0b2-4d02-ace3-3c1e52e2fb4b"/>
  </cpix:DRMSystemList>
  <cpix:ContentKeyUsageRuleList>
    <cpix:ContentKeyUsageRule kid="{KID}" intendedTrackType="ALL"><cpix:VideoFilter/></cpix:ContentKeyUsageRule>
  </cpix:ContentKeyUsageRuleList>
</cpix:CPIX>
"#,
        b64(PLAYREADY_MPD.as_bytes()),
        b64(FAIRPLAY_MEDIA.as_bytes()),
        b64(FAIRPLAY_MASTER.as_bytes()),
    )
}

#[test]
fn a_documents_key_and_systems_are_read_as_the_spec_writes_them() {
    let cpix = Cpix::parse(document().as_bytes()).unwrap();
    assert_eq!(cpix.content_keys.len(), 1);
    assert_eq!(cpix.content_keys[0].kid, KID_BYTES);
    assert_eq!(cpix.content_keys[0].key, KEY);
    assert_eq!(cpix.content_keys[0].explicit_iv, Some(std::array::from_fn(|i| i as u8)));
    assert_eq!(cpix.systems.len(), 4);
    let title = cpix.title_key(Scheme::Cbcs).unwrap();
    assert_eq!((title.kid, title.key), (KID_BYTES, KEY));
    assert_eq!(title.constant_iv(), std::array::from_fn(|i| i as u8), "explicitIV is the constant IV");
    assert_eq!(title.systems.len(), 3, "the W3C common system is sluice's own: {:?}", title.systems);
    let widevine = &title.systems[0];
    assert_eq!(widevine.system_id, id(WIDEVINE));
    assert_eq!(widevine.pssh, Some(Pssh { kids: Vec::new(), data: b"\x12\x10widevine-data".to_vec() }));
    // The box written back is the document's, byte for byte.
    assert_eq!(
        crate::protect::boxes::system_pssh(widevine).unwrap(),
        pssh_box(WIDEVINE, &[], b"\x12\x10widevine-data")
    );
    let playready = &title.systems[1];
    assert_eq!(playready.pssh.as_ref().unwrap().kids, [KID_BYTES]);
    assert_eq!(
        crate::protect::boxes::system_pssh(playready).unwrap(),
        pssh_box(PLAYREADY, &[KID_BYTES], b"playready-object")
    );
    assert_eq!(playready.dash.as_deref(), Some(PLAYREADY_MPD));
    let fairplay = &title.systems[2];
    assert_eq!((fairplay.pssh.as_ref(), fairplay.dash.as_ref()), (None, None));
    assert_eq!(fairplay.hls_media, [FAIRPLAY_MEDIA.trim()]);
    assert_eq!(fairplay.hls_master, [FAIRPLAY_MASTER.trim()]);
    // Signalled: the MPD has PlayReady's data as given and Widevine's pssh, no FairPlay; the
    // playlists FairPlay's lines.
    let elements = crate::protect::manifest::content_protection(&title, "/a.mp4/clearkey");
    assert!(
        elements.contains(PLAYREADY_MPD) && elements.contains(&format!("urn:uuid:{WIDEVINE}")),
        "{elements}"
    );
    assert!(!elements.contains(FAIRPLAY), "{elements}");
    assert_eq!(
        crate::protect::manifest::system_key_lines(&title, false),
        format!("\n{}", FAIRPLAY_MEDIA.trim())
    );
    assert_eq!(
        crate::protect::manifest::system_key_lines(&title, true),
        format!("\n{}", FAIRPLAY_MASTER.trim())
    );
    assert!(!format!("{title:?}{cpix:?}").contains(&b64(&KEY)), "no key in a debug print");
}

#[test]
fn every_cut_of_a_document_is_refused_or_read_without_a_panic() {
    let whole = document();
    let whole = whole.as_bytes();
    let expected = Cpix::parse(whole).unwrap();
    for cut in 0..whole.len() {
        // A cut after the root's end tag still holds everything.
        if let Ok(part) = Cpix::parse(&whole[..cut]) {
            assert!(
                part.content_keys.len() <= 1 && part.systems.len() <= expected.systems.len(),
                "cut at {cut}"
            );
        }
    }
    // Split in two anywhere and joined, it reads the same.
    for at in (0..whole.len()).step_by(97) {
        let joined = [&whole[..at], &whole[at..]].concat();
        assert_eq!(Cpix::parse(&joined).unwrap(), expected);
    }
}

#[test]
fn refusals_name_the_element_and_never_the_key() {
    let good = document();
    let secret = "WADwG2qCqkq5TVml+U5PXw==";
    let cases: Vec<(String, &str)> = vec![
        (good.replace(secret, "WADwG2qCqkq5TVml+U5PX"), "PlainValue"),
        (good.replace(secret, "WADwG2qCqkq5TVml+U5PXwAA"), "PlainValue: 18 bytes"),
        (
            good.replace(
                &format!("<pskc:PlainValue>{secret}</pskc:PlainValue>"),
                "<pskc:EncryptedValue><xenc:CipherData/></pskc:EncryptedValue>",
            ),
            "EncryptedValue: encrypted content keys are not read",
        ),
        (
            good.replace(
                &format!("kid=\"{KID}\" commonEncryptionScheme"),
                "kid=\"not-a-uuid\" commonEncryptionScheme",
            ),
            "ContentKey@kid",
        ),
        (
            good.replace(&format!("systemId=\"{WIDEVINE}\""), &format!("systemId=\"{PLAYREADY}\"")),
            "PSSH: its system id",
        ),
        (good.replace("playlist=\"media\"", "playlist=\"other\""), "HLSSignalingData@playlist"),
        (
            good.replace(&b64(FAIRPLAY_MEDIA.as_bytes()), &b64(b"#EXT-X-ENDLIST\n")),
            "HLSSignalingData: expected #EXT-X-KEY: lines",
        ),
        (
            good.replace(&b64(PLAYREADY_MPD.as_bytes()), &b64(b"<a><b></a>")),
            "ContentProtectionData: not well-formed",
        ),
        (good.replace("cpix:CPIX", "cpix:Other"), "CPIX: the document's root"),
        (format!("{}{}", "<a>".repeat(40), "</a>".repeat(40)), "refused before parsing"),
        (good.replace("</cpix:ContentKeyList>", ""), "not well-formed XML"),
    ];
    for (text, expected) in cases {
        let error = Cpix::parse(text.as_bytes()).and_then(|c| c.title_key(Scheme::Cenc).map(|_| c));
        let error = error.expect_err(expected).to_string();
        assert!(error.contains(expected), "expected `{expected}`, got `{error}`");
        assert!(!error.contains(secret) && !error.contains("WADwG2qCqkq5TVml"), "{error}");
    }
    // Two keys: a document keys its titles with one.
    let second = good.replace(
        "</cpix:ContentKeyList>",
        "<cpix:ContentKey kid=\"11111111-1111-1111-1111-111111111111\"><cpix:Data><pskc:Secret><pskc:PlainValue>AAAAAAAAAAAAAAAAAAAAAA==</pskc:PlainValue></pskc:Secret></cpix:Data></cpix:ContentKey></cpix:ContentKeyList>",
    );
    let error = Cpix::parse(second.as_bytes()).unwrap().title_key(Scheme::Cenc).unwrap_err().to_string();
    assert!(error.starts_with("ContentKeyList: 2 content keys"), "{error}");
}
