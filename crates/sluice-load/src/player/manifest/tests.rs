//! The manifest readers' tests: HLS playlists and DASH MPDs as real packagers write them.

use super::*;

#[test]
fn hostile_times_are_refused() {
    let url = Url::parse("http://h/m.m3u8").unwrap();
    let p =
        parse_hls(&url, b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:99999999999,\na.m4s\n#EXT-X-ENDLIST\n");
    assert!(p.is_err(), "{p:?}");
    let mpd = r#"<MPD type="static" mediaPresentationDuration="PT4S"><Period><AdaptationSet mimeType="video/mp4">
      <SegmentTemplate timescale="1" media="$Number$.m4s"><SegmentTimeline><S t="99999999999" d="5"/></SegmentTimeline></SegmentTemplate>
      <Representation id="v" bandwidth="1"/></AdaptationSet></Period></MPD>"#;
    assert!(parse_dash(&url, mpd).is_err());
    fuzz_manifest(mpd.as_bytes());
    fuzz_manifest(b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1\nx.m3u8\n");
}

fn s(t: Option<u64>, d: u64, r: Option<i64>) -> mpd::S {
    mpd::S { t, d, r, ..Default::default() }
}

#[test]
fn timeline_repeats_and_gaps() {
    let tl = [s(Some(0), 90_000, Some(2)), s(None, 45_000, None), s(Some(400_000), 90_000, None)];
    assert_eq!(
        timeline_times(&tl, None).unwrap(),
        vec![(0, 90_000), (90_000, 90_000), (180_000, 90_000), (270_000, 45_000), (400_000, 90_000)]
    );
    // r=-1 runs up to the next S's t, or the period's end (the last one may be short).
    let tl = [s(Some(10), 100, Some(-1)), s(Some(310), 50, Some(-1))];
    assert_eq!(
        timeline_times(&tl, Some(420)).unwrap(),
        vec![(10, 100), (110, 100), (210, 100), (310, 50), (360, 50), (410, 50)]
    );
    assert!(timeline_times(&[s(None, 100, Some(-1))], None).is_err());
    assert!(timeline_times(&[s(None, 0, None)], None).is_err());
    assert!(timeline_times(&[s(None, 1, Some(i64::MAX / 2))], None).is_err(), "bounded");
}

#[test]
fn templates_substitute() {
    let e = |t: &str| expand_template(t, "v1", 5_000_000, 7, 180_000);
    assert_eq!(e("seg-$Number$.m4s").unwrap(), "seg-7.m4s");
    assert_eq!(e("$RepresentationID$/$Number%05d$.m4s").unwrap(), "v1/00007.m4s");
    assert_eq!(e("t-$Time$-$Bandwidth$$$.mp4").unwrap(), "t-180000-5000000$.mp4");
    assert!(e("x-$Nope$").is_err());
    assert!(e("x-$Number").is_err());
    assert!(e("x-$Number%5x$").is_err());
}

const MPD: &str = r#"<?xml version="1.0"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" type="static" mediaPresentationDuration="PT6.5S" minBufferTime="PT2S" profiles="urn:mpeg:dash:profile:isoff-live:2011">
  <BaseURL>media/</BaseURL>
  <Period id="0">
<AdaptationSet contentType="video" segmentAlignment="true">
  <SegmentTemplate timescale="90000" initialization="init-$RepresentationID$.m4s" media="chunk-$RepresentationID$-$Number%05d$.m4s" startNumber="3">
    <SegmentTimeline><S t="0" d="180000" r="2"/><S d="45000"/></SegmentTimeline>
  </SegmentTemplate>
  <Representation id="hi" bandwidth="5000000" width="1920" height="1080" codecs="avc1.640028"/>
  <Representation id="lo" bandwidth="800000" width="640" height="360" codecs="avc1.4d401e">
    <SegmentTemplate timescale="1000" initialization="lo/init.mp4" media="lo/$Time$.m4s">
      <SegmentTimeline><S t="0" d="2000" r="-1"/></SegmentTimeline>
    </SegmentTemplate>
  </Representation>
</AdaptationSet>
<AdaptationSet mimeType="audio/mp4" lang="en">
  <SegmentTemplate timescale="48000" duration="96000" initialization="a/init.mp4" media="a/$Number$.m4s"/>
  <Representation id="aac" bandwidth="128000" codecs="mp4a.40.2"/>
</AdaptationSet>
<AdaptationSet contentType="text" mimeType="text/vtt"><Representation id="sub" bandwidth="100"><BaseURL>en.vtt</BaseURL></Representation></AdaptationSet>
  </Period>
</MPD>"#;

#[test]
fn an_mpd_expands_to_segment_lists() {
    let url = Url::parse("http://127.0.0.1:8080/films/a.mp4/manifest.mpd").unwrap();
    let p = parse_dash(&url, MPD).unwrap();
    assert_eq!(p.protocol, Protocol::Dash);
    assert_eq!(p.renditions.len(), 2);
    let hi = &p.renditions[0];
    assert_eq!((hi.bandwidth, hi.height, hi.audio), (5_000_000, Some(1080), Some(0)));
    assert_eq!(hi.init.as_ref().unwrap().url, "http://127.0.0.1:8080/films/a.mp4/media/init-hi.m4s");
    let urls: Vec<&str> = hi.segments.iter().map(|s| s.resource.url.as_str()).collect();
    assert_eq!(urls.len(), 4);
    assert_eq!(urls[0], "http://127.0.0.1:8080/films/a.mp4/media/chunk-hi-00003.m4s");
    assert_eq!(urls[3], "http://127.0.0.1:8080/films/a.mp4/media/chunk-hi-00006.m4s");
    assert_eq!(hi.segments[3].start, 6.0);
    assert_eq!(hi.segments[3].duration, 0.5);
    // The representation's own template wins; r=-1 runs to the end of the presentation.
    let lo = &p.renditions[1];
    let lo_urls: Vec<&str> = lo.segments.iter().map(|s| s.resource.url.as_str()).collect();
    assert_eq!(lo_urls.len(), 4);
    assert!(lo_urls[1].ends_with("/media/lo/2000.m4s"), "{lo_urls:?}");
    assert!(lo.init.as_ref().unwrap().url.ends_with("/media/lo/init.mp4"));
    // $Number$ from 1 at a fixed duration: ceil(6.5 s / 2 s) = 4 segments; text is not played.
    assert_eq!(p.audio.len(), 1);
    let a = &p.audio[0];
    assert_eq!(a.segments.len(), 4);
    assert!(a.segments[0].resource.url.ends_with("/media/a/1.m4s"));
    assert!(a.segments[3].resource.url.ends_with("/media/a/4.m4s"));
    assert!((a.duration() - 8.0).abs() < 1e-9);
}

#[test]
fn segment_lists_and_bases() {
    let text = r#"<MPD type="static" mediaPresentationDuration="PT4S"><Period>
      <AdaptationSet mimeType="video/mp4">
        <Representation id="v" bandwidth="1000"><BaseURL>v.mp4</BaseURL>
          <SegmentList timescale="10" duration="20"><Initialization range="0-99"/>
            <SegmentURL mediaRange="100-199"/><SegmentURL mediaRange="200-250"/></SegmentList>
        </Representation>
        <Representation id="w" bandwidth="2000"><BaseURL>w.mp4</BaseURL>
          <SegmentBase indexRange="100-200"><Initialization range="0-99"/></SegmentBase></Representation>
      </AdaptationSet></Period></MPD>"#;
    let p = parse_dash(&Url::parse("http://h/x/m.mpd").unwrap(), text).unwrap();
    let v = &p.renditions[0];
    assert_eq!(v.init, Some(Resource { url: "http://h/x/v.mp4".into(), range: Some((0, 99)) }));
    assert_eq!(v.segments[1].resource.range, Some((200, 250)));
    assert_eq!((v.segments[1].start, v.segments[1].duration), (2.0, 2.0));
    let w = &p.renditions[1];
    assert_eq!(w.segments.len(), 1);
    assert_eq!(w.segments[0].resource, Resource { url: "http://h/x/w.mp4".into(), range: None });
    assert_eq!(w.segments[0].duration, 4.0);
    assert!(
        parse_dash(&Url::parse("http://h/m.mpd").unwrap(), "<MPD type=\"dynamic\"><Period/></MPD>").is_err()
    );
    assert!(parse_dash(&Url::parse("http://h/m.mpd").unwrap(), "not xml").is_err());
}

#[test]
fn hls_master_media_and_byte_ranges() {
    let url = Url::parse("http://h/f.mp4/master.m3u8").unwrap();
    let master =
        b"#EXTM3U\n#EXT-X-MEDIA:TYPE=AUDIO,GROUP-ID=\"a\",NAME=\"en\",DEFAULT=YES,URI=\"audio.m3u8\"\n\
#EXT-X-STREAM-INF:BANDWIDTH=800000,RESOLUTION=640x360,AUDIO=\"a\"\nlo/media.m3u8\n\
#EXT-X-STREAM-INF:BANDWIDTH=5000000,RESOLUTION=1920x1080,AUDIO=\"a\"\nhttp://h/hi.m3u8\n";
    let HlsPlaylist::Master(mut p) = parse_hls(&url, master).unwrap() else { panic!("master") };
    assert_eq!(p.renditions.len(), 2);
    assert_eq!(p.renditions[0].playlist.as_deref(), Some("http://h/f.mp4/lo/media.m3u8"));
    assert_eq!((p.renditions[1].height, p.renditions[1].audio), (Some(1080), Some(0)));
    assert_eq!(p.audio[0].playlist.as_deref(), Some("http://h/f.mp4/audio.m3u8"));
    let media = b"#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n\
#EXT-X-MAP:URI=\"init.mp4\"\n#EXTINF:2.0,\nseg-0.m4s\n#EXTINF:1.5,\n#EXT-X-BYTERANGE:100@0\nall.m4s\n\
#EXTINF:1.0,\n#EXT-X-BYTERANGE:50\nall.m4s\n#EXT-X-ENDLIST\n";
    fill_hls_track(&mut p.renditions[0], media).unwrap();
    let t = &p.renditions[0];
    assert_eq!(t.init.as_ref().unwrap().url, "http://h/f.mp4/lo/init.mp4");
    assert_eq!(t.segments.len(), 3);
    assert_eq!(t.segments[1].resource.range, Some((0, 99)));
    assert_eq!(t.segments[2].resource.range, Some((100, 149)));
    assert_eq!((t.segments[2].start, t.duration()), (3.5, 4.5));
    let live = b"#EXTM3U\n#EXT-X-TARGETDURATION:2\n#EXTINF:2.0,\nseg-0.m4s\n";
    assert!(fill_hls_track(&mut p.renditions[1], live).is_err());
    assert!(parse_hls(&url, b"garbage").is_err());
}

#[test]
fn an_mpd_nested_deeper_than_players_need_is_refused_before_parsing() {
    let url = Url::parse("http://h/m.mpd").unwrap();
    for depth in [1, 10, 60, 1000, 100_000] {
        let extension = format!("{}{}", "<x>".repeat(depth), "</x>".repeat(depth));
        let mpd = format!(
            r#"<MPD type="static" mediaPresentationDuration="PT2S"><Period><AdaptationSet mimeType="video/mp4">
      <SegmentTemplate timescale="1" duration="1" media="$Number$.m4s"/>{extension}
      <Representation id="v" bandwidth="1"/></AdaptationSet></Period></MPD>"#
        );
        let parsed = parse_dash(&url, &mpd);
        if depth + 3 <= MAX_DEPTH {
            assert!(parsed.is_ok(), "{depth} deep: {parsed:?}");
        } else {
            let e = parsed.expect_err("refused").0;
            assert!(e.contains("nests more than 32 levels deep"), "{depth} deep: {e}");
        }
    }
}
