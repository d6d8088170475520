//! The codecs beyond H.264 and AAC on files ffmpeg made (the fuzz seeds `tiny-*.mp4`: 0.6 s of
//! 64x64 video at 10 fps, a keyframe every 3 frames, and 48 kHz audio): indexed with the
//! frame counts ffprobe gives (`ffprobe -count_frames`: 6 video frames each; 19 AC-3 and E-AC-3
//! frames, 31 Opus packets), the codec strings and ranges their records say, and packaged with
//! the file's own sample entry in the init segment.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use sluice_media::codec::{InBandParameterSets, VideoRange};
use sluice_media::hls::{mpd, playlist, track_init_segment, Packaged, SegmentIndex};
use sluice_media::{Mp4File, TrackKind};

fn seed(name: &str) -> (Vec<u8>, Mp4File) {
    let path = format!("{}/../../fuzz/corpus/mp4_demux/{name}", env!("CARGO_MANIFEST_DIR"));
    let data = std::fs::read(path).unwrap();
    let file = Mp4File::from_bytes(&data).unwrap();
    (data, file)
}

/// Indexes `name` and checks its tracks: `(video codec string, audio codec string, audio
/// frames)`; returns the file.
fn check(name: &str, video: &str, audio: &str, audio_frames: usize) -> (Vec<u8>, Mp4File) {
    let (data, file) = seed(name);
    assert_eq!(file.tracks.len(), 2, "{name}: {:?}", file.skipped);
    let (v, a) = (&file.tracks[0], &file.tracks[1]);
    assert!(v.kind.is_video() && !a.kind.is_video());
    assert_eq!(v.samples.len(), 6, "{name}");
    assert_eq!(v.samples.iter().filter(|s| s.is_sync()).count(), 2, "{name}");
    assert_eq!(a.samples.len(), audio_frames, "{name}");
    assert_eq!(v.kind.codec_string(), video, "{name}");
    assert_eq!(a.kind.codec_string(), audio, "{name}");
    assert_eq!(v.kind.resolution(), Some((64, 64)));
    (data, file)
}

/// The init segment of `which` carries the file's sample entry, `fourcc` its type.
fn carries_entry(file: &Mp4File, which: Packaged, fourcc: &[u8; 4]) {
    let index = SegmentIndex::build(file, Duration::from_secs(1)).unwrap();
    let init = track_init_segment(file, &index, which).unwrap();
    let entry = match &file.tracks[which as usize].kind {
        TrackKind::Video(v) => v.sample_entry.clone(),
        TrackKind::Audio(a) => a.sample_entry.clone(),
        other => panic!("{other:?}"),
    };
    let mut expected = entry.clone();
    expected[4..8].copy_from_slice(fourcc);
    let at = init.windows(expected.len()).position(|w| w == expected.as_slice());
    assert!(at.is_some(), "the init segment holds the {} entry", String::from_utf8_lossy(fourcc));
    // And it reads back as an fMP4 init segment with one track.
    let mut buf = init.as_slice();
    use mp4_atom::Decode;
    mp4_atom::Ftyp::decode(&mut buf).unwrap();
    let moov = mp4_atom::Moov::decode(&mut buf).unwrap();
    assert_eq!(moov.trak.len(), 1);
    assert_eq!(moov.trak[0].mdia.minf.stbl.stsd.codecs.len(), 1);
}

#[test]
fn hev1_is_carried_as_hvc1_beside_e_ac_3() {
    let (_, file) = check("tiny-hev1-eac3.mp4", "hvc1.1.6.L30.90", "ec-3", 19);
    let TrackKind::Video(v) = &file.tracks[0].kind else { unreachable!() };
    assert_eq!(&v.fourcc(), b"hev1");
    // ffmpeg keeps libx265's parameter sets in the hvcC only.
    assert_eq!(v.in_band, InBandParameterSets::None);
    carries_entry(&file, Packaged::Video, b"hvc1");
    carries_entry(&file, Packaged::Audio, b"ec-3");
    let TrackKind::Audio(a) = &file.tracks[1].kind else { unreachable!() };
    assert_eq!((a.sample_rate, a.channels), (48_000, 1));
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    assert!(
        manifest.contains(
            r#"<AudioChannelConfiguration schemeIdUri="urn:dolby:dash:audio_channel_configuration:2011" value="4000"/>"#
        ),
        "mono E-AC-3 is its centre channel:\n{manifest}"
    );
}

#[test]
fn ten_bit_hlg_hvc1_beside_ac_3() {
    let (_, file) = check("tiny-hvc1-hlg-ac3.mp4", "hvc1.2.4.L30.90", "ac-3", 19);
    let TrackKind::Video(v) = &file.tracks[0].kind else { unreachable!() };
    assert_eq!(v.video_range(), Some(VideoRange::Hlg));
    carries_entry(&file, Packaged::Video, b"hvc1");
    carries_entry(&file, Packaged::Audio, b"ac-3");
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    let master = playlist::master_playlist(&[playlist::Rendition { prefix: "", index: &index }], &[]);
    assert!(
        master.contains("VIDEO-RANGE=HLG") && master.contains(r#"CODECS="hvc1.2.4.L30.90,ac-3""#),
        "{master}"
    );
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    assert!(manifest.contains(
        r#"<SupplementalProperty schemeIdUri="urn:mpeg:mpegB:cicp:TransferCharacteristics" value="18"/>"#
    ));
}

#[test]
fn ten_bit_pq_av1_beside_opus() {
    let (_, file) = check("tiny-av1-pq-opus.mp4", "av01.0.00M.10.0.110.09.16.09.0", "opus", 31);
    carries_entry(&file, Packaged::Video, b"av01");
    carries_entry(&file, Packaged::Audio, b"Opus");
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    assert_eq!(index.video_range(), Some(VideoRange::Pq));
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    for (name, value) in [("ColourPrimaries", 9), ("TransferCharacteristics", 16), ("MatrixCoefficients", 9)]
    {
        let property =
            format!(r#"<EssentialProperty schemeIdUri="urn:mpeg:mpegB:cicp:{name}" value="{value}"/>"#);
        assert!(manifest.contains(&property), "{property} in\n{manifest}");
    }
}

#[test]
fn vp9_beside_opus() {
    let (_, file) = check("tiny-vp9-opus.mp4", "vp09.00.10.08", "opus", 31);
    carries_entry(&file, Packaged::Video, b"vp09");
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    let master = playlist::master_playlist(&[playlist::Rendition { prefix: "", index: &index }], &[]);
    assert!(!master.contains("VIDEO-RANGE"), "ffmpeg wrote no colour for it: {master}");
}

/// An AV1 rendition beside an H.264 one: the MPD gives each codec family its own video
/// adaptation set, the HLS master a variant each.
#[test]
fn mixed_codecs_get_an_adaptation_set_each() {
    let (_, av1) = seed("tiny-av1-pq-opus.mp4");
    let (_, vp9) = seed("tiny-vp9-opus.mp4");
    let (_, h264) = seed("tiny-h264-aac.mp4");
    let indexes: Vec<SegmentIndex> =
        [&h264, &av1, &vp9].iter().map(|f| SegmentIndex::build(f, Duration::from_secs(1)).unwrap()).collect();
    let files = [&h264, &av1, &vp9];
    let prefixes = ["a/", "b/", "c/"];
    let renditions: Vec<mpd::MpdRendition<'_>> = (0..3)
        .map(|i| mpd::MpdRendition { prefix: prefixes[i], index: &indexes[i], file: files[i] })
        .collect();
    let manifest = mpd::manifest(&renditions, &[]);
    assert_eq!(manifest.matches(r#"contentType="video""#).count(), 3, "{manifest}");
    let master_renditions: Vec<playlist::Rendition<'_>> =
        (0..3).map(|i| playlist::Rendition { prefix: prefixes[i], index: &indexes[i] }).collect();
    let master = playlist::master_playlist(&master_renditions, &[]);
    assert_eq!(master.matches("#EXT-X-STREAM-INF").count(), 3, "{master}");
    assert!(master.contains("av01.0.00M.10") && master.contains("vp09.00.10.08") && master.contains("avc1."));
}

/// RTSP describes the HEVC track with its parameter sets (RFC 7798 §7.1) and the E-AC-3 one as
/// `eac3` at its sampling rate (RFC 4598 §6).
#[test]
fn hevc_and_eac3_are_described_for_rtsp() {
    let (_, file) = seed("tiny-hev1-eac3.mp4");
    let sdp = sluice_media::sdp::to_bytes(&sluice_media::session_description(&file, &Default::default()));
    let sdp = String::from_utf8(sdp).unwrap();
    assert_eq!(sdp.matches("m=").count(), 2, "{sdp}");
    assert!(sdp.contains("a=rtpmap:96 H265/90000"), "{sdp}");
    let TrackKind::Audio(a) = &file.tracks[1].kind else { unreachable!() };
    assert!(sdp.contains(&format!("a=rtpmap:97 eac3/{}/{}\r\n", a.sample_rate, a.channels)), "{sdp}");
    let TrackKind::Video(v) = &file.tracks[0].kind else { unreachable!() };
    let sluice_media::codec::VideoCodec::Hevc(h) = &v.codec else { unreachable!() };
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    for (name, sets) in [("vps", &h.vps), ("sps", &h.sps), ("pps", &h.pps)] {
        let value = sdp.split(&format!("sprop-{name}=")).nth(1).unwrap().split([';', '\r']).next().unwrap();
        assert_eq!(&b64.decode(value).unwrap(), &sets[0], "sprop-{name}");
    }
    // VP9 has no payload format here, Opus has (RFC 7587); whether RTSP refuses VP9 alone is
    // `sluice-rtsp`'s test (`tests/codec_files.rs`).
    let (_, vp9) = seed("tiny-vp9-opus.mp4");
    let sdp = String::from_utf8(sluice_media::sdp::to_bytes(&sluice_media::session_description(
        &vp9,
        &Default::default(),
    )))
    .unwrap();
    assert!(sdp.contains("a=rtpmap:97 opus/48000/2") && !sdp.contains("m=video"), "{sdp}");
}

/// The HLG HEVC seed's sample entry with a Dolby Vision box written here (profile, level 4,
/// compatibility id), read as the demuxer reads entries.
fn with_dolby_vision(file: &Mp4File, profile: u8, compatibility: u8) -> Mp4File {
    let TrackKind::Video(v) = &file.tracks[0].kind else { unreachable!() };
    let bits = u16::from(profile) << 9 | 4 << 3 | 0b101;
    let mut record = vec![1, 0];
    record.extend_from_slice(&bits.to_be_bytes());
    record.push(compatibility << 4);
    record.resize(24, 0);
    let mut entry = v.sample_entry.clone();
    entry.extend_from_slice(&32u32.to_be_bytes());
    entry.extend_from_slice(b"dvvC");
    entry.extend_from_slice(&record);
    let size = entry.len() as u32;
    entry[..4].copy_from_slice(&size.to_be_bytes());
    let Ok(Some(sluice_media::codec::CodecEntry::Video(mut dv))) =
        sluice_media::codec::parse_sample_entry(&entry)
    else {
        panic!("the entry with a dvvC reads")
    };
    dv.in_band = v.in_band;
    let mut file = file.clone();
    file.tracks[0].kind = TrackKind::Video(dv);
    file
}

/// Dolby Vision with an HLG base layer (8.4): `CODECS` the HEVC string, `SUPPLEMENTAL-CODECS`
/// and the MPD's SCTE 214 attributes the Dolby Vision string and brand, the range HLG. Profile
/// 5: `CODECS` and `codecs` the Dolby Vision string, the entry carried as `dvh1`, PQ.
#[test]
fn dolby_vision_is_supplemental_or_the_codec() {
    let (_, hlg) = seed("tiny-hvc1-hlg-ac3.mp4");
    let file = with_dolby_vision(&hlg, 8, 4);
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    assert_eq!(index.supplemental_codecs(), Some("dvh1.08.04/db4h"));
    let master = playlist::master_playlist(&[playlist::Rendition { prefix: "", index: &index }], &[]);
    assert!(master.contains(r#"CODECS="hvc1.2.4.L30.90,ac-3""#), "{master}");
    assert!(master.contains(r#",SUPPLEMENTAL-CODECS="dvh1.08.04/db4h",VIDEO-RANGE=HLG"#), "{master}");
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    assert!(manifest.contains(r#"xmlns:scte214="urn:scte:dash:scte214-extensions""#), "{manifest}");
    assert!(
        manifest.contains(
            r#"codecs="hvc1.2.4.L30.90" scte214:supplementalCodecs="dvh1.08.04" scte214:supplementalProfiles="db4h""#
        ),
        "{manifest}"
    );
    carries_entry(&file, Packaged::Video, b"hvc1");
    // Without Dolby Vision, no namespace and no supplement.
    let plain = SegmentIndex::build(&hlg, Duration::from_secs(1)).unwrap();
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &plain, file: &hlg }], &[]);
    assert!(!manifest.contains("scte214"), "{manifest}");

    let file = with_dolby_vision(&hlg, 5, 0);
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    assert_eq!((index.supplemental_codecs(), index.video_range()), (None, Some(VideoRange::Pq)));
    let master = playlist::master_playlist(&[playlist::Rendition { prefix: "", index: &index }], &[]);
    assert!(master.contains(r#"CODECS="dvh1.05.04,ac-3""#) && master.contains("VIDEO-RANGE=PQ"), "{master}");
    assert!(!master.contains("SUPPLEMENTAL-CODECS"), "{master}");
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    assert!(manifest.contains(r#"codecs="dvh1.05.04""#) && !manifest.contains("scte214"), "{manifest}");
    carries_entry(&file, Packaged::Video, b"dvh1");
}
