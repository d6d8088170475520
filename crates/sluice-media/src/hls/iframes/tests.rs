//! The trick-play track's tests on the built-in demo (keyframes at 0, 2 and 4 s).

use std::time::Duration;

use mp4_atom::Decode;

use super::*;
use crate::hls::mpd::MpdRendition;
use crate::hls::playlist::{master_playlist, Rendition};

fn demo() -> (Vec<u8>, Mp4File) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    let data = std::fs::read(path).unwrap();
    let file = Mp4File::from_bytes(&data).unwrap();
    (data, file)
}

#[test]
fn names_parse_canonically() {
    assert_eq!(IFrameResource::parse("video-iframes.m3u8"), Some(IFrameResource::Playlist));
    assert_eq!(IFrameResource::parse("video-iframe-0.m4s"), Some(IFrameResource::Fragment(0)));
    assert_eq!(IFrameResource::parse("video-iframe-12.m4s"), Some(IFrameResource::Fragment(12)));
    for bad in [
        "video-iframe-01.m4s",
        "video-iframe-.m4s",
        "video-iframe-x.m4s",
        "video-iframe-1.mp4",
        "iframes.m3u8",
    ] {
        assert_eq!(IFrameResource::parse(bad), None, "{bad}");
    }
    assert_eq!(fragment_name("$Number$"), "video-iframe-$Number$.m4s");
}

/// One entry per keyframe, lasting until the next, each the whole of its fragment.
#[test]
fn the_playlist_lists_every_keyframe() {
    let (_, file) = demo();
    let index = SegmentIndex::build(&file, Duration::from_secs(6)).unwrap();
    let keyframes = KeyFrames::of(&file, &index).unwrap();
    assert_eq!(keyframes.len(), 3);
    let text = keyframes.playlist();
    let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(text.as_bytes()).unwrap() else {
        panic!("a media playlist: {text}")
    };
    assert!(p.i_frames_only && p.end_list, "{text}");
    assert!(p.version.unwrap() >= 4, "EXT-X-I-FRAMES-ONLY needs version 4: {text}");
    assert_eq!(p.segments.len(), 3);
    assert_eq!(p.segments[0].map.as_ref().unwrap().uri, "video-init.mp4");
    for (n, s) in p.segments.iter().enumerate() {
        assert_eq!(s.uri, format!("video-iframe-{n}.m4s"));
        assert!((s.duration - 2.0).abs() < 1e-4, "{}", s.duration);
        let range = s.byte_range.as_ref().unwrap();
        assert_eq!((range.length, range.offset), (keyframes.fragment(n).unwrap().len(), Some(0)));
        assert!((keyframes.time(n) - 2.0 * n as f64).abs() < 1e-9);
    }
}

/// Each fragment is one `moof` with the keyframe alone, at its own decode time, lasting until
/// the next keyframe, and an `mdat` of its bytes.
#[test]
fn fragments_hold_one_keyframe() {
    let (data, file) = demo();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    let keyframes = KeyFrames::of(&file, &index).unwrap();
    let video = &file.tracks[0];
    let mut decode_end = None;
    for n in 0..keyframes.len() {
        let plan = keyframes.fragment(n).unwrap();
        let mut bytes = plan.header.clone();
        for r in &plan.ranges {
            bytes.extend_from_slice(&data[r.start as usize..r.end as usize]);
        }
        let mut buf = bytes.as_slice();
        let moof = mp4_atom::Moof::decode(&mut buf).unwrap();
        let mdat = mp4_atom::Mdat::decode(&mut buf).unwrap();
        assert!(buf.is_empty());
        let traf = &moof.traf[0];
        assert_eq!(traf.tfhd.track_id, 1, "the video init segment's track");
        let sample = &video.samples[n * 60];
        assert!(sample.is_sync());
        let tfdt = traf.tfdt.as_ref().unwrap().base_media_decode_time;
        assert_eq!(tfdt, sample.decode_time());
        if let Some(end) = decode_end {
            assert_eq!(tfdt, end, "the fragments are one continuous timeline");
        }
        let TrunSamples::Explicit(entries) = &traf.trun[0].samples else { panic!("explicit") };
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].flags, Some(SYNC_FLAGS));
        decode_end = Some(tfdt + u64::from(entries[0].duration.unwrap()));
        let at = traf.trun[0].data_offset.unwrap() as usize;
        assert_eq!(at, bytes.len() - sample.size() as usize);
        assert!(mdat.data == data[sample.range().start as usize..sample.range().end as usize]);
    }
    assert!(matches!(keyframes.fragment(3), Err(HlsError::NoSuchSegment(3))));
}

/// The master lists the I-frame stream beside the video variant; the MPD has the trick-mode set
/// pointing at the video set.
#[test]
fn manifests_offer_the_trick_play_track() {
    let (_, file) = demo();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    let mut master = master_playlist(&[Rendition { prefix: "", index: &index }], &[]);
    master.push_str(&stream_inf(&file, &index, ""));
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(master.as_bytes()).unwrap() else {
        panic!("a master playlist: {master}")
    };
    let iframes: Vec<_> = m.variants.iter().filter(|v| v.is_i_frame).collect();
    assert_eq!(iframes.len(), 1, "{master}");
    assert_eq!(iframes[0].uri, "video-iframes.m3u8");
    assert_eq!(iframes[0].codecs.as_deref(), Some("avc1.4d401e"));
    assert!(iframes[0].bandwidth >= iframes[0].average_bandwidth.unwrap());
    let mpd = crate::hls::mpd::manifest(&[MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    for part in [
        "<EssentialProperty schemeIdUri=\"http://dashif.org/guidelines/trickmode\" value=\"0\"/>",
        "<Representation id=\"video0-trick\"",
        "maxPlayoutRate=\"60\" codingDependency=\"false\"",
        "initialization=\"video-init.mp4\" media=\"video-iframe-$Number$.m4s\"",
        "<S t=\"0\" d=\"30720\" r=\"2\"/>",
    ] {
        assert!(mpd.contains(part), "{part} in {mpd}");
    }
    // Audio alone has no trick-play track.
    let mut audio_only = file.clone();
    audio_only.tracks.remove(0);
    let index = SegmentIndex::build(&audio_only, Duration::from_secs(2)).unwrap();
    assert!(KeyFrames::of(&audio_only, &index).is_none());
    assert_eq!(stream_inf(&audio_only, &index, ""), "");
}
