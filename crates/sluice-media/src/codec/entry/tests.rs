//! Sample entries built by hand, as ffmpeg's muxer lays them out.

use super::*;

fn boxed(kind: &[u8; 4], payload: &[u8]) -> Vec<u8> {
    let mut out = ((payload.len() + 8) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(payload);
    out
}

/// A visual sample entry of `kind`, 160x90, with `children`.
pub(crate) fn visual(kind: &[u8; 4], children: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![0u8; VISUAL_FIELDS];
    body[7] = 1; // data_reference_index
    body[24..26].copy_from_slice(&160u16.to_be_bytes());
    body[26..28].copy_from_slice(&90u16.to_be_bytes());
    for c in children {
        body.extend_from_slice(c);
    }
    boxed(kind, &body)
}

/// An audio sample entry of `kind`: 2 channels at 48 kHz, with `children`.
pub(crate) fn audio(kind: &[u8; 4], children: &[Vec<u8>]) -> Vec<u8> {
    let mut body = vec![0u8; 28];
    body[7] = 1;
    body[17] = 2;
    body[19] = 16;
    body[24..26].copy_from_slice(&48000u16.to_be_bytes());
    for c in children {
        body.extend_from_slice(c);
    }
    boxed(kind, &body)
}

pub(crate) fn hvcc() -> Vec<u8> {
    let mut r = vec![
        1, 0x02, 0x20, 0, 0, 0, 0xB0, 0, 0, 0, 0, 0, 153, 0xF0, 0, 0xFC, 0xFD, 0xFA, 0xFA, 0, 0, 0x0F, 3,
    ];
    for (t, nal) in [(32u8, [0x40u8, 1, 0xAA]), (33, [0x42, 1, 0xBB]), (34, [0x44, 1, 0xCC])] {
        r.extend_from_slice(&[0x80 | t, 0, 1, 0, 3]);
        r.extend_from_slice(&nal);
    }
    boxed(b"hvcC", &r)
}

fn pq_colr() -> Vec<u8> {
    boxed(b"colr", &[b'n', b'c', b'l', b'x', 0, 9, 0, 16, 0, 9, 0])
}

#[test]
fn hev1_with_hdr_boxes() {
    let mdcv = boxed(
        b"mdcv",
        &[
            0x33, 0xC2, 0x86, 0xC4, 0x1D, 0x4C, 0x0B, 0xB8, 0x84, 0xD0, 0x3E, 0x80, 0x3D, 0x13, 0x40, 0x42,
            0, 0x98, 0x96, 0x80, 0, 0, 0, 0x32,
        ],
    );
    let clli = boxed(b"clli", &[0x03, 0xE8, 0x01, 0x90]);
    let raw = visual(b"hev1", &[hvcc(), pq_colr(), mdcv, clli]);
    let Some(CodecEntry::Video(mut v)) = parse_sample_entry(&raw).unwrap() else { panic!("video") };
    assert_eq!((v.width, v.height, v.name()), (160, 90, "HEVC"));
    assert_eq!(v.colour, Some(Colour { primaries: 9, transfer: 16, matrix: 9, full_range: false }));
    assert_eq!(v.video_range(), Some(VideoRange::Pq));
    assert_eq!(v.mastering.unwrap().max_luminance, 10_000_000);
    assert_eq!(v.light_level, Some(ContentLightLevel { max_content: 1000, max_frame_average: 400 }));
    assert_eq!(v.sample_entry, raw);
    // Not looked at yet: kept as hev1.
    assert_eq!(&v.carried_fourcc(), b"hev1");
    assert_eq!(v.codec_string(), "hev1.2.4.L153.B0");
    v.in_band = InBandParameterSets::SameAsRecord;
    assert_eq!(&v.carried_fourcc(), b"hvc1");
    assert_eq!(v.codec_string(), "hvc1.2.4.L153.B0");
    assert_eq!(&v.carried_sample_entry()[4..8], b"hvc1");
    v.in_band = InBandParameterSets::Different;
    assert_eq!(&v.carried_fourcc(), b"hev1");
}

#[test]
fn av1_and_vp9_entries() {
    let av1 = visual(b"av01", &[boxed(b"av1C", &[0x81, 0x08, 0x4C, 0x00]), pq_colr()]);
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&av1).unwrap() else { panic!("video") };
    assert_eq!(v.codec_string(), "av01.0.08M.10.0.110.09.16.09.0");
    let vp9 = visual(b"vp09", &[boxed(b"vpcC", &[1, 0, 0, 0, 2, 40, 0xA2, 1, 18, 9, 0, 0])]);
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&vp9).unwrap() else { panic!("video") };
    assert_eq!(v.video_range(), Some(VideoRange::Hlg), "from the vpcC without a colr");
    assert_eq!(v.codec_string(), "vp09.02.40.10.01.01.18.09.00");
    assert_eq!(
        parse_sample_entry(&visual(b"av01", &[pq_colr()])),
        Err(ConfigError::Missing { entry: "av01", record: "av1C" })
    );
}

#[test]
fn audio_entries() {
    let opus = audio(b"Opus", &[boxed(b"dOps", &[0, 2, 0x01, 0x38, 0, 0, 0xBB, 0x80, 0, 0, 0])]);
    let Some(CodecEntry::Audio(a)) = parse_sample_entry(&opus).unwrap() else { panic!("audio") };
    assert_eq!((a.codec_string(), a.sample_rate, a.channels), ("opus", 48000, 2));
    assert_eq!(a.dolby_channel_configuration(), None);
    let ac3 = audio(b"ac-3", &[boxed(b"dac3", &[0x10, 0x3D, 0xE0])]);
    let Some(CodecEntry::Audio(a)) = parse_sample_entry(&ac3).unwrap() else { panic!("audio") };
    assert_eq!((a.codec_string(), a.channels), ("ac-3", 6));
    assert_eq!(a.dolby_channel_configuration().as_deref(), Some("F801"));
    let ec3 = audio(b"ec-3", &[boxed(b"dec3", &[0x08, 0x00, 0x20, 0x0F, 0x00])]);
    let Some(CodecEntry::Audio(a)) = parse_sample_entry(&ec3).unwrap() else { panic!("audio") };
    assert_eq!(a.codec_string(), "ec-3");
    assert!(matches!(parse_sample_entry(&audio(b"ec-3", &[])), Err(ConfigError::Missing { .. })));
}

#[test]
fn other_entries_are_not_read_and_cut_entries_are_errors() {
    assert_eq!(parse_sample_entry(&visual(b"avc1", &[])), Ok(None));
    let raw = visual(b"hvc1", &[hvcc(), pq_colr()]);
    for cut in 0..raw.len() {
        assert!(parse_sample_entry(&raw[..cut]).is_err(), "cut at {cut}");
    }
    let mut inner_cut = raw.clone();
    let at = 8 + VISUAL_FIELDS;
    inner_cut[at..at + 4].copy_from_slice(&1000u32.to_be_bytes());
    assert!(parse_sample_entry(&inner_cut).is_err());
}

/// A Dolby Vision configuration box of `kind` as the specification lays it out.
pub(crate) fn dolby_vision_box(kind: &[u8; 4], profile: u8, level: u8, compatibility: u8) -> Vec<u8> {
    let bits = u16::from(profile) << 9 | u16::from(level) << 3 | 0b101;
    let mut r = vec![1, 0];
    r.extend_from_slice(&bits.to_be_bytes());
    r.push(compatibility << 4);
    r.resize(24, 0);
    boxed(kind, &r)
}

#[test]
fn dolby_vision_in_hevc_and_av1_entries() {
    // Profile 8.1 in hvc1: CODECS the HEVC string, SUPPLEMENTAL-CODECS the Dolby Vision one.
    let p81 = visual(b"hvc1", &[hvcc(), pq_colr(), dolby_vision_box(b"dvvC", 8, 7, 1)]);
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&p81).unwrap() else { panic!("video") };
    assert_eq!(v.dolby_vision.map(|d| (d.profile, d.level, d.compatibility)), Some((8, 7, 1)));
    assert_eq!(v.codec_string(), "hvc1.2.4.L153.B0");
    assert_eq!(v.supplemental_codecs().as_deref(), Some("dvh1.08.07/db1p"));
    assert_eq!(v.video_range(), Some(VideoRange::Pq));
    assert_eq!(v.carried_sample_entry(), p81, "the entry, its dvvC included, carried as it is");
    // An hev1 entry: dvhe. Profile 8.4 without a colr: HLG, from the compatibility id.
    let p84 = visual(b"hev1", &[hvcc(), dolby_vision_box(b"dvvC", 8, 4, 4)]);
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&p84).unwrap() else { panic!("video") };
    assert_eq!(v.supplemental_codecs().as_deref(), Some("dvhe.08.04/db4h"));
    assert_eq!(v.video_range(), Some(VideoRange::Hlg));
    // Profile 10.2 in av01: dav1, SDR.
    let p102 =
        visual(b"av01", &[boxed(b"av1C", &[0x81, 0x08, 0x4C, 0x00]), dolby_vision_box(b"dvvC", 10, 9, 2)]);
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&p102).unwrap() else { panic!("video") };
    assert_eq!(v.supplemental_codecs().as_deref(), Some("dav1.10.09/db2g"));
    assert_eq!(v.video_range(), Some(VideoRange::Sdr));
    // Profile 5 (no base layer others decode): CODECS the Dolby Vision string, the entry
    // carried as dvh1, PQ.
    let p5 = visual(b"hvc1", &[hvcc(), dolby_vision_box(b"dvcC", 5, 6, 0)]);
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&p5).unwrap() else { panic!("video") };
    assert_eq!((v.codec_string(), v.supplemental_codecs()), ("dvh1.05.06".into(), None));
    assert_eq!(&v.carried_sample_entry()[4..8], b"dvh1");
    assert_eq!(v.video_range(), Some(VideoRange::Pq));
    // A truncated record is an error; VP9 ignores the box.
    let mut cut = dolby_vision_box(b"dvvC", 8, 7, 1);
    cut.truncate(12);
    cut[..4].copy_from_slice(&12u32.to_be_bytes());
    assert!(parse_sample_entry(&visual(b"hvc1", &[hvcc(), cut])).is_err());
    let vp9 = visual(
        b"vp09",
        &[boxed(b"vpcC", &[1, 0, 0, 0, 2, 40, 0xA2, 1, 18, 9, 0, 0]), dolby_vision_box(b"dvvC", 8, 7, 1)],
    );
    let Some(CodecEntry::Video(v)) = parse_sample_entry(&vp9).unwrap() else { panic!("video") };
    assert_eq!(v.dolby_vision, None);
}
