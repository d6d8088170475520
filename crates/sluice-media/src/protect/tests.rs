//! The protected boxes of the demo file read back: the init segment by `mp4parse` (a parser this
//! crate did not write: `sinf`, `tenc`, `pssh`), the media segments by `mp4-atom` (`senc`,
//! `saiz`, `saio`), with the samples where the `trun`s say and `cenc` samples decrypting to the
//! file's bytes.

use std::time::Duration;

use mp4_atom::{Decode, Moof, TrunSamples};

use super::cipher::cenc_sample;
use super::subsample::Subsample;
use super::*;
use crate::hls::{track_init_segment, track_media_segment, Packaged, SegmentIndex};
use crate::mp4::{Mp4File, TrackKind};

fn demo() -> Vec<u8> {
    std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4")).unwrap()
}

fn title(scheme: Scheme) -> TitleKey {
    TitleKey {
        scheme,
        kid: *b"kid-of-the-demo!",
        key: *b"key-of-the-demo!",
        systems: vec![SystemData {
            system_id: [0xed; 16],
            pssh: Some(Pssh { kids: Vec::new(), data: b"opaque".to_vec() }),
            ..SystemData::default()
        }],
        explicit_iv: None,
    }
}

#[test]
fn init_segments_carry_sinf_tenc_and_pssh_as_mp4parse_reads_them() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    for scheme in [Scheme::Cenc, Scheme::Cbcs] {
        let title = title(scheme);
        for which in [Packaged::Video, Packaged::Audio] {
            let clear = track_init_segment(&file, &index, which).unwrap();
            let init = protect_init(&clear, &title).unwrap();
            let context = mp4parse::read_mp4(&mut std::io::Cursor::new(&init)).unwrap();
            assert_eq!(context.psshs.len(), 2);
            assert_eq!(&context.psshs[0].system_id[..], &COMMON_SYSTEM_ID);
            assert_eq!(context.psshs[0].kid.len(), 1);
            assert_eq!(&context.psshs[0].kid[0][..], &title.kid);
            assert_eq!(&context.psshs[1].system_id[..], &[0xed; 16]);
            assert_eq!(&context.psshs[1].data[..], b"opaque");
            let track = &context.tracks[0];
            let stsd = track.stsd.as_ref().unwrap();
            let (codec, protection) = match &stsd.descriptions[0] {
                mp4parse::SampleEntry::Video(v) => (v.codec_type, &v.protection_info),
                mp4parse::SampleEntry::Audio(a) => (a.codec_type, &a.protection_info),
                other => panic!("{other:?}"),
            };
            let expected = match which {
                Packaged::Video => mp4parse::CodecType::EncryptedVideo,
                Packaged::Audio => mp4parse::CodecType::EncryptedAudio,
            };
            assert_eq!(codec, expected);
            let sinf = &protection[0];
            let original = if which == Packaged::Video { b"avc1" } else { b"mp4a" };
            assert_eq!(sinf.original_format.value, *original);
            let schm = sinf.scheme_type.as_ref().unwrap();
            assert_eq!(&schm.scheme_type.value, scheme.name().as_bytes());
            let tenc = sinf.tenc.as_ref().unwrap();
            assert_eq!(tenc.is_encrypted, 1);
            assert_eq!(&tenc.kid[..], &title.kid);
            match scheme {
                Scheme::Cenc => {
                    assert_eq!(tenc.iv_size, 8);
                    assert!(tenc.constant_iv.is_none());
                }
                Scheme::Cbcs => {
                    assert_eq!(tenc.iv_size, 0);
                    assert_eq!(&tenc.constant_iv.as_ref().unwrap()[..], &title.constant_iv());
                    let pattern = if which == Packaged::Video { (1, 9) } else { (0, 0) };
                    assert_eq!(
                        (tenc.crypt_byte_block_count, tenc.skip_byte_block_count),
                        (Some(pattern.0), Some(pattern.1))
                    );
                }
            }
        }
    }
}

/// Reads the `senc` entries of a traf: IV and subsample map per sample.
fn senc_entries(data: &[u8], iv_size: usize, subsamples: bool) -> Vec<(Vec<u8>, Vec<Subsample>)> {
    let count = u32::from_be_bytes(data[..4].try_into().unwrap()) as usize;
    let mut at = 4;
    let mut out = Vec::new();
    for _ in 0..count {
        let iv = data[at..at + iv_size].to_vec();
        at += iv_size;
        let mut map = Vec::new();
        if subsamples {
            let n = u16::from_be_bytes([data[at], data[at + 1]]);
            at += 2;
            for _ in 0..n {
                let clear = u16::from_be_bytes([data[at], data[at + 1]]);
                let protected = u32::from_be_bytes(data[at + 2..at + 6].try_into().unwrap());
                map.push(Subsample { clear, protected });
                at += 6;
            }
        }
        out.push((iv, map));
    }
    assert_eq!(at, data.len());
    out
}

#[test]
fn cenc_segments_have_senc_saiz_saio_pointing_right_and_decrypt_to_the_file() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    let title = title(Scheme::Cenc);
    let mut seen_ivs = std::collections::HashSet::new();
    for (track, which) in index.tracks(&file) {
        let nal_length_size = match &track.kind {
            TrackKind::H264(h) => Some(h.nal_length_size),
            _ => None,
        };
        let crypt = TrackCrypt { track_id: 1, nal_length_size, slices: None, iv_tag: which as u8 + 1 };
        for n in 0..index.segments() {
            let plan = track_media_segment(&file, &index, which, n).unwrap();
            let clear: Vec<u8> =
                plan.ranges.iter().flat_map(|r| data[r.start as usize..r.end as usize].to_vec()).collect();
            let segment = protect_segment(&plan.header, &clear, &title, &[crypt]).unwrap();
            let moof_len = segment.len() - clear.len();
            assert_ne!(segment[moof_len..], clear[..], "segment {n} of {which:?} is encrypted");
            let moof = Moof::decode(&mut segment.as_slice()).unwrap();
            let traf = &moof.traf[0];
            let senc = traf.senc.as_ref().unwrap();
            assert_eq!(senc.use_subsamples, nal_length_size.is_some());
            let entries = senc_entries(&senc.data, 8, senc.use_subsamples);
            let saiz = &traf.saiz[0];
            assert_eq!(saiz.sample_count as usize, entries.len());
            let saio = &traf.saio[0];
            assert_eq!(saio.offsets.len(), 1);
            // saio points at the first entry's IV, counted from the moof's first byte.
            let at = saio.offsets[0] as usize;
            assert_eq!(&segment[at..at + 8], &entries[0].0[..]);
            let mut sample_index = 0;
            let first = index.samples(n, which).start;
            assert_eq!(traf.trun.len(), 1, "one trun per traf");
            for trun in &traf.trun {
                let TrunSamples::Explicit(samples) = &trun.samples else { panic!() };
                let mut at = trun.data_offset.unwrap() as usize;
                for s in samples {
                    let size = s.size.unwrap() as usize;
                    let (iv, map) = &entries[sample_index];
                    let info = 8 + if map.is_empty() { 0 } else { 2 + 6 * map.len() };
                    let expected = if saiz.default_sample_info_size == 0 {
                        saiz.sample_info_size[sample_index]
                    } else {
                        saiz.default_sample_info_size
                    };
                    assert_eq!(usize::from(expected), info);
                    assert!(seen_ivs.insert(iv.clone()), "IVs are unique under a key");
                    let mut sample = segment[at..at + size].to_vec();
                    let map = (!map.is_empty()).then_some(map.as_slice());
                    if let Some(map) = map {
                        let covered: usize =
                            map.iter().map(|m| usize::from(m.clear) + m.protected as usize).sum();
                        assert_eq!(covered, size);
                        assert!(map.iter().all(|m| m.protected % 16 == 0));
                    }
                    cenc_sample(&title.key, iv[..].try_into().unwrap(), &mut sample, map);
                    let original =
                        &data[track.samples[first + sample_index].range().start as usize..][..size];
                    assert_eq!(sample, original, "sample {sample_index} decrypts");
                    at += size;
                    sample_index += 1;
                }
            }
        }
    }
}

#[test]
fn cbcs_audio_has_no_per_sample_information_and_video_has_subsamples_only() {
    let data = demo();
    let file = Mp4File::from_bytes(&data).unwrap();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    let title = title(Scheme::Cbcs);
    for (track, which) in index.tracks(&file) {
        let nal_length_size = match &track.kind {
            TrackKind::H264(h) => Some(h.nal_length_size),
            _ => None,
        };
        let crypt = TrackCrypt { track_id: 1, nal_length_size, slices: None, iv_tag: which as u8 + 1 };
        let plan = track_media_segment(&file, &index, which, 0).unwrap();
        let payload: Vec<u8> =
            plan.ranges.iter().flat_map(|r| data[r.start as usize..r.end as usize].to_vec()).collect();
        let segment = protect_segment(&plan.header, &payload, &title, &[crypt]).unwrap();
        let moof = Moof::decode(&mut segment.as_slice()).unwrap();
        match which {
            Packaged::Video => {
                let senc = moof.traf[0].senc.as_ref().unwrap();
                let entries = senc_entries(&senc.data, 0, true);
                assert!(entries.iter().all(|(iv, map)| iv.is_empty() && !map.is_empty()));
            }
            Packaged::Audio => assert!(moof.traf[0].senc.is_none() && moof.traf[0].saio.is_empty()),
        }
    }
}

#[test]
fn manifests_signal_the_kid_the_scheme_and_the_licence() {
    let title = title(Scheme::Cbcs);
    let mpd = "<?xml version=\"1.0\"?>\n<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\">\n <Period>\n  <AdaptationSet id=\"0\" contentType=\"video\">\n  </AdaptationSet>\n  <AdaptationSet id=\"2\" contentType=\"text\">\n  </AdaptationSet>\n </Period>\n</MPD>\n";
    let protected = manifest::protected_mpd(mpd, &title, "/a&b.mp4/clearkey");
    assert_eq!(protected.matches("urn:mpeg:dash:mp4protection:2011\" value=\"cbcs\"").count(), 1);
    assert!(protected.contains(&format!("cenc:default_KID=\"{}\"", uuid(&title.kid))));
    assert!(protected.contains("<dashif:Laurl>/a&amp;b.mp4/clearkey</dashif:Laurl>"));
    assert!(protected.contains("urn:uuid:1077efec-c0b2-4d02-ace3-3c1e52e2fb4b"));
    assert!(protected.contains("urn:uuid:e2719d58-a985-b3c9-781a-b030af78d30e"));
    assert!(protected.contains("xmlns:cenc=\"urn:mpeg:cenc:2013\""));
    let media = "#EXTM3U\n#EXT-X-VERSION:4\n#EXT-X-MAP:URI=\"video-init.mp4\"\n#EXTINF:2,\nvideo-seg-0.m4s\n";
    let keyed = manifest::keyed_media_playlist(media, &manifest::sample_aes_key("EXT-X-KEY", &title));
    let lines: Vec<&str> = keyed.lines().collect();
    assert_eq!(lines[1], "#EXT-X-VERSION:5");
    assert!(lines[3].starts_with("#EXT-X-KEY:METHOD=SAMPLE-AES,URI=\"data:text/plain;base64,"));
    let master = "#EXTM3U\n#EXT-X-VERSION:6\n#EXT-X-STREAM-INF:BANDWIDTH=1\nvideo.m3u8\n";
    let keyed = manifest::keyed_master_playlist(master, &manifest::aes128_key("EXT-X-SESSION-KEY", "key"));
    assert_eq!(keyed.lines().nth(2), Some("#EXT-X-SESSION-KEY:METHOD=AES-128,URI=\"key\""));
}
