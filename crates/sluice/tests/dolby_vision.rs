//! Dolby Vision signalling on every engine: ffmpeg makes an HEVC 10-bit PQ clip (`hvc1`), the test
//! inserts a `dvvC` box (profile 8.1, level 1: an HDR10 base layer) into its sample entry, and the
//! server announces it as Apple's HLS authoring specification and DASH-IF IOP 6 ask: the master
//! playlist's `CODECS` is the HEVC string, `SUPPLEMENTAL-CODECS` is `dvh1.08.01/db1p` and
//! `VIDEO-RANGE` is PQ; the MPD (parsed as XML) declares the SCTE 214 namespace and gives the
//! video `Representation` `scte214:supplementalCodecs` and `scte214:supplementalProfiles`;
//! `/streams` lists the Dolby Vision string. The init segment keeps the `dvvC`: ffprobe reads
//! the init segment and the first segment as HEVC, with the Dolby Vision configuration ffmpeg
//! reports from that box.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use quick_xml::events::Event;
use serde_json::Value;

rtsp_matrix!(dolby_vision_is_announced_and_carried);

/// The box at `at` in `data`: its type and where it ends (32-bit sizes: ffmpeg writes no
/// other for a clip this small).
fn box_at(data: &[u8], at: usize) -> ([u8; 4], usize) {
    let size = u32::from_be_bytes(data[at..at + 4].try_into().unwrap()) as usize;
    assert!(size >= 8, "a 32-bit box size at {at}");
    (data[at + 4..at + 8].try_into().unwrap(), at + size)
}

/// The start of the first box of type `kind` among the boxes in `data[from..to]`.
fn find(data: &[u8], from: usize, to: usize, kind: &[u8; 4]) -> Option<usize> {
    let mut at = from;
    while at + 8 <= to {
        let (k, end) = box_at(data, at);
        if &k == kind {
            return Some(at);
        }
        at = end;
    }
    None
}

/// `mp4` with `child` appended to the first video sample entry, every box around it grown by
/// its size. The moov must follow the mdat (ffmpeg's layout without `+faststart`), so the chunk
/// offsets into the mdat stay right.
fn with_box_in_sample_entry(mp4: &[u8], child: &[u8]) -> Vec<u8> {
    let moov = find(mp4, 0, mp4.len(), b"moov").unwrap();
    let mdat = find(mp4, 0, mp4.len(), b"mdat").unwrap();
    assert!(moov > mdat, "the moov after the mdat, or inserting would move the samples");
    let mut path = vec![moov];
    let mut trak_at = moov + 8;
    let (_, moov_end) = box_at(mp4, moov);
    // The video track: the one whose handler is `vide`.
    let trak = loop {
        let trak = find(mp4, trak_at, moov_end, b"trak").unwrap();
        let (_, end) = box_at(mp4, trak);
        let mdia = find(mp4, trak + 8, end, b"mdia").unwrap();
        let hdlr = find(mp4, mdia + 8, box_at(mp4, mdia).1, b"hdlr").unwrap();
        if &mp4[hdlr + 16..hdlr + 20] == b"vide" {
            break trak;
        }
        trak_at = end;
    };
    path.push(trak);
    let mut at = trak;
    for kind in [b"mdia", b"minf", b"stbl", b"stsd"] {
        at = find(mp4, at + 8, box_at(mp4, at).1, kind).unwrap();
        path.push(at);
    }
    // stsd: full box header and entry count, then the first entry.
    let entry = at + 16;
    let (fourcc, entry_end) = box_at(mp4, entry);
    assert_eq!(&fourcc, b"hvc1");
    path.push(entry);
    let mut out = mp4.to_vec();
    for start in path {
        let size = u32::from_be_bytes(out[start..start + 4].try_into().unwrap()) + child.len() as u32;
        out[start..start + 4].copy_from_slice(&size.to_be_bytes());
    }
    out.splice(entry_end..entry_end, child.iter().copied());
    out
}

/// A `dvvC` box as Dolby Vision Streams Within the ISO Base Media File Format lays it out:
/// version 1.0, profile, level, RPU and BL present, the compatibility id, reserved bytes.
fn dvvc(profile: u8, level: u8, compatibility: u8) -> Vec<u8> {
    let bits = u16::from(profile) << 9 | u16::from(level) << 3 | 0b101;
    let mut body = vec![1, 0];
    body.extend_from_slice(&bits.to_be_bytes());
    body.push(compatibility << 4);
    body.resize(24, 0);
    let mut out = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(b"dvvC");
    out.extend_from_slice(&body);
    out
}

/// The clip: 2 s of 160x90 HEVC 10-bit with PQ colour at 25 fps, a keyframe a second, with a
/// profile 8.1 `dvvC`.
fn clip() -> &'static Vec<u8> {
    static CLIP: OnceLock<Vec<u8>> = OnceLock::new();
    CLIP.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("pq.mp4");
        let mut cmd = tool("ffmpeg");
        cmd.args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=160x90:rate=25", "-t", "2"])
            .args(["-c:v", "libx265", "-preset", "ultrafast", "-x265-params"])
            .args(["log-level=error:keyint=25:open-gop=0:hdr10=1:colorprim=bt2020:transfer=smpte2084:colormatrix=bt2020nc"])
            .args(["-pix_fmt", "yuv420p10le", "-tag:v", "hvc1"])
            .args(["-color_primaries", "bt2020", "-color_trc", "smpte2084", "-colorspace", "bt2020nc"])
            .arg(&out);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
        assert!(status.success(), "ffmpeg: {}", String::from_utf8_lossy(&err));
        with_box_in_sample_entry(&std::fs::read(&out).unwrap(), &dvvc(8, 1, 1))
    })
}

/// ffprobe's streams of `path` as JSON, with their side data.
fn probe_streams(path: &std::path::Path) -> Value {
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-of", "json", "-count_frames", "-show_streams"]).arg(path);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffprobe {}: {status}: {err}", path.display());
    serde_json::from_slice(&out).unwrap()
}

/// The Dolby Vision side data ffmpeg reports of the first stream, if any.
fn dovi_side_data(info: &Value) -> Option<Value> {
    info["streams"][0]["side_data_list"]
        .as_array()?
        .iter()
        .find(|d| d["side_data_type"].as_str().is_some_and(|t| t.contains("DOVI")))
        .cloned()
}

/// The attributes of every element named `name` in `xml` (parsed with quick-xml; malformed XML
/// fails the test).
fn elements(xml: &str, name: &str) -> Vec<Vec<(String, String)>> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut found = Vec::new();
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == name.as_bytes() => found.push(
                e.attributes()
                    .map(|a| {
                        let a = a.unwrap();
                        (
                            String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                            a.unescape_value().unwrap().into_owned(),
                        )
                    })
                    .collect(),
            ),
            Event::Eof => break,
            _ => {}
        }
    }
    found
}

fn attr<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

fn dolby_vision_is_announced_and_carried(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("pq.mp4", clip());
    // What ffmpeg makes of the source: HEVC, PQ, and the Dolby Vision configuration the box says.
    let source = probe_streams(&fx.path("pq.mp4"));
    let video = &source["streams"][0];
    assert_eq!(
        (video["codec_name"].as_str(), video["color_transfer"].as_str()),
        (Some("hevc"), Some("smpte2084"))
    );
    let source_dovi = dovi_side_data(&source);
    // ffmpeg reads `dvvC` (libavformat's mov demuxer since 4.4), so the comparison with what it
    // reads from the init segment below is not of two absences.
    let d = source_dovi.as_ref().unwrap_or_else(|| panic!("ffprobe reports no Dolby Vision: {source}"));
    assert_eq!((d["dv_profile"].as_i64(), d["dv_level"].as_i64()), (Some(8), Some(1)), "{d}");
    assert_eq!(d["dv_bl_signal_compatibility_id"].as_i64(), Some(1), "{d}");

    let server = Server::serve(engine, &fx, &["--hls-segment", "1s"]);
    let addr = server.addr();
    let master = fetch_get(addr, "/pq.mp4/master.m3u8", &[]);
    master.expect_status(200, "the master playlist");
    let master = master.body_text();
    let Ok((_, m3u8_rs::Playlist::MasterPlaylist(parsed))) = m3u8_rs::parse_playlist(master.as_bytes())
    else {
        panic!("not a master playlist: {master}")
    };
    let variant = &parsed.variants[0];
    let codecs = variant.codecs.clone().unwrap();
    assert!(codecs.starts_with("hvc1.2.4.L"), "CODECS is the base layer's HEVC: {master}");
    let other = variant.other_attributes.clone().unwrap_or_default();
    let value = |k: &str| other.get(k).cloned();
    use m3u8_rs::QuotedOrUnquoted::{Quoted, Unquoted};
    assert_eq!(value("SUPPLEMENTAL-CODECS"), Some(Quoted("dvh1.08.01/db1p".into())), "{master}");
    assert_eq!(value("VIDEO-RANGE"), Some(Unquoted("PQ".into())), "{master}");
    let iframes = master.lines().find(|l| l.starts_with("#EXT-X-I-FRAME-STREAM-INF")).unwrap();
    assert!(iframes.contains("SUPPLEMENTAL-CODECS=\"dvh1.08.01/db1p\""), "{master}");

    let mpd = fetch_get(addr, "/pq.mp4/manifest.mpd", &[]);
    mpd.expect_status(200, "the MPD");
    let mpd = mpd.body_text();
    let root = &elements(&mpd, "MPD")[0];
    assert_eq!(attr(root, "xmlns:scte214"), Some("urn:scte:dash:scte214-extensions"), "{mpd}");
    let representations = elements(&mpd, "Representation");
    let video_rep = representations.iter().find(|r| attr(r, "id") == Some("video0")).unwrap();
    assert_eq!(attr(video_rep, "codecs"), Some(codecs.as_str()), "{mpd}");
    assert_eq!(attr(video_rep, "scte214:supplementalCodecs"), Some("dvh1.08.01"), "{mpd}");
    assert_eq!(attr(video_rep, "scte214:supplementalProfiles"), Some("db1p"), "{mpd}");

    let streams = server.streams();
    assert!(streams.contains("\"dolby_vision\":\"dvh1.08.01/db1p\""), "/streams: {streams}");

    // The init segment and the first segment, as a player gets them, read back by ffprobe.
    let init = fetch_get(addr, "/pq.mp4/video-init.mp4", &[]);
    init.expect_status(200, "the init segment");
    let first = fetch_get(addr, "/pq.mp4/video-seg-0.m4s", &[]);
    first.expect_status(200, "the first segment");
    let dir = tempfile::tempdir().unwrap();
    let joined = dir.path().join("first.mp4");
    std::fs::write(&joined, [init.body.as_slice(), first.body.as_slice()].concat()).unwrap();
    assert!(init.body.windows(4).any(|w| w == b"dvvC"), "the init segment keeps the dvvC");
    let served = probe_streams(&joined);
    let video = &served["streams"][0];
    assert_eq!(video["codec_name"].as_str(), Some("hevc"), "{served}");
    assert_eq!(
        video["nb_read_frames"].as_str(),
        Some("25"),
        "a second of frames in the first segment: {served}"
    );
    assert_eq!(dovi_side_data(&served), source_dovi, "the same Dolby Vision configuration read back");
}
