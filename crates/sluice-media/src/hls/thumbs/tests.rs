//! The thumbnail plan's tests on the built-in demo (6 s, keyframes at 0, 2 and 4 s).

use std::time::Duration;

use super::*;
use crate::hls::SegmentIndex;
use crate::mp4::Mp4File;

fn demo() -> Mp4File {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    Mp4File::from_bytes(&std::fs::read(path).unwrap()).unwrap()
}

fn plan(file: &Mp4File, interval: f64, columns: u32, rows: u32) -> (ThumbPlan, usize) {
    let index = SegmentIndex::build(file, Duration::from_secs(6)).unwrap();
    let keyframes = KeyFrames::of(file, &index).unwrap();
    let layout = ThumbLayout { interval, width: 160, columns, rows };
    let plan = ThumbPlan::new(&keyframes, index.duration(), index.resolution().unwrap(), layout).unwrap();
    (plan, keyframes.len())
}

#[test]
fn names_parse_canonically() {
    assert_eq!(ThumbResource::parse("images.m3u8"), Some(ThumbResource::ImagePlaylist));
    assert_eq!(ThumbResource::parse("thumbnails.vtt"), Some(ThumbResource::Vtt));
    assert_eq!(ThumbResource::parse("tile-1.jpg"), Some(ThumbResource::Tile(1)));
    for bad in ["tile-0.jpg", "tile-01.jpg", "tile-.jpg", "tile-1.png", "thumbs.vtt"] {
        assert_eq!(ThumbResource::parse(bad), None, "{bad}");
    }
}

/// A thumbnail per interval, each shown by the last keyframe at or before its time, packed
/// ⌈count ÷ per tile⌉ to the tiles; the three listings agree.
#[test]
fn the_listings_agree_on_tiles_and_cells() {
    let file = demo();
    let (plan, _) = plan(&file, 1.0, 2, 2);
    let duration = 6.0;
    assert_eq!(plan.thumbnails(), 6);
    assert_eq!(plan.tiles(), 2);
    assert_eq!(plan.picks, vec![0, 0, 1, 1, 2, 2]);
    let (w, h) = plan.cell();
    assert_eq!(w, 160);
    assert_eq!(h % 2, 0);
    assert_eq!(plan.tile_size(), (320, 2 * h));

    let text = plan.image_playlist();
    assert!(text.contains("#EXT-X-IMAGES-ONLY\n"), "{text}");
    assert_eq!(
        text.matches(&format!("#EXT-X-TILES:RESOLUTION=160x{h},LAYOUT=2x2,DURATION=1.000")).count(),
        2
    );
    let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(text.as_bytes()).unwrap() else {
        panic!("a media playlist: {text}")
    };
    assert_eq!(p.segments.iter().map(|s| s.uri.as_str()).collect::<Vec<_>>(), ["tile-1.jpg", "tile-2.jpg"]);
    let total: f32 = p.segments.iter().map(|s| s.duration).sum();
    assert!((f64::from(total) - duration).abs() < 0.01, "{text}");
    assert!(p.end_list);

    let vtt = plan.vtt("");
    let cues: Vec<&str> = vtt.lines().filter(|l| l.contains("#xywh=")).collect();
    assert_eq!(cues.len(), 6, "{vtt}");
    assert_eq!(cues[0], format!("tile-1.jpg#xywh=0,0,160,{h}"));
    assert_eq!(cues[3], format!("tile-1.jpg#xywh=160,{h},160,{h}"));
    assert_eq!(cues[4], format!("tile-2.jpg#xywh=0,0,160,{h}"));
    assert!(vtt.contains("00:00:05.000 --> 00:00:06.000\n"), "{vtt}");

    let mpd = plan.mpd_set("", 3);
    assert!(mpd.contains("value=\"2x2\"") && mpd.contains("duration=\"4000\""), "{mpd}");
    assert!(mpd.contains("media=\"thumbs/tile-$Number$.jpg\""), "{mpd}");
    assert!(plan.stream_inf("../a.mp4/").contains("URI=\"../a.mp4/thumbs/images.m3u8\""));
}

/// A tile's decoder input is a fragment per thumbnail, one interval apart, however often a
/// keyframe repeats.
#[test]
fn a_tile_reads_one_keyframe_per_thumbnail() {
    let file = demo();
    let index = SegmentIndex::build(&file, Duration::from_secs(6)).unwrap();
    let keyframes = KeyFrames::of(&file, &index).unwrap();
    let (plan, _) = plan(&file, 1.0, 2, 2);
    let input = plan.decoder_input(&keyframes, 2).unwrap();
    assert_eq!(input.len(), 2);
    assert!(plan.decoder_input(&keyframes, 3).is_err());
    assert!(plan.decoder_input(&keyframes, 0).is_err());
    // The same keyframe twice (2 is picked for 4 s and 5 s): the same bytes, other times.
    assert_eq!(input[0].ranges, input[1].ranges);
    assert_ne!(input[0].header, input[1].header);
}

#[test]
fn an_mpd_gains_the_image_set_last() {
    let file = demo();
    let (plan, _) = plan(&file, 2.0, 5, 5);
    let mpd = "<MPD>\n <Period>\n  <AdaptationSet id=\"0\">\n  </AdaptationSet>\n </Period>\n</MPD>\n";
    let with = with_image_set(mpd, &plan, "");
    assert!(with.contains("<AdaptationSet id=\"1\" contentType=\"image\""), "{with}");
    assert!(with.find("contentType=\"image\"").unwrap() < with.find(" </Period>").unwrap());
}
