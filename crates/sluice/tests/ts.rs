//! MPEG-TS HLS end to end, on every engine: over `FILE.mp4/ts/master.m3u8` ffprobe counts every
//! video frame and every audio packet of the MP4, `ffmpeg -v error` decodes it (and each
//! segment alone) without a word on stderr, the segments are cut where the fMP4 ones are, and
//! the packets pass checks by readers we did not write: ffmpeg's MPEG-TS demuxer finds no
//! continuity error (its trace log) and the PMT's PCR PID, and `mpeg2ts`'s reader finds a PCR at
//! most 100 ms apart (ISO/IEC 13818-1 §2.7.2). (TSDuck's `tsanalyze` is not packaged for this
//! system's Debian, so it is not used.) A rendition set has a TS master too, and the page and
//! `/streams` offer TS, the I-frame playlist and clips. HEVC with AC-3 and with E-AC-3 pass the
//! same checks, with their stream types and registrations in the PMT; VP9 and Opus are not
//! offered over TS.
//!
//! The files are made by ffmpeg for the test (H.264: 20 s, B-frames, a keyframe every 2 s, AAC
//! at 44.1 kHz; HEVC: 8 s, the same GOPs); the expected numbers come from ffprobe on them.
//! Every wait is bounded and all traffic stays on 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use mpeg2ts::ts::{ReadTsPacket, TsPacketReader};

/// The test's file: 20 s of 25 fps H.264 with two B-frames and a keyframe every 2 s, and AAC at
/// 44.1 kHz, made once per test binary.
fn film() -> &'static [u8] {
    static FILM: OnceLock<Vec<u8>> = OnceLock::new();
    FILM.get_or_init(|| {
        test_film(20, "-c:v libx264 -preset ultrafast -bf 2 -g 50 -keyint_min 50 -sc_threshold 0 -pix_fmt yuv420p -c:a aac -b:a 64k")
    })
}

fn ok(addr: SocketAddr, target: &str) -> Response {
    let r = fetch_get(addr, target, &[]);
    assert_eq!(r.status, 200, "{target}: {}", r.head_text());
    r
}

/// (video frames, audio frames, audio packets) ffprobe reads from `url`.
fn counts(url: &str) -> (u64, u64, u64) {
    let mut cmd = tool("ffprobe");
    cmd.args(["-rw_timeout", "10000000", "-v", "error", "-count_frames", "-count_packets"])
        .args(["-show_entries", "stream=codec_type,nb_read_frames,nb_read_packets", "-of", "csv=p=0"])
        .arg(url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "ffprobe {url}: {}", String::from_utf8_lossy(&err));
    let text = String::from_utf8_lossy(&out);
    let line = |kind: &str| -> (u64, u64) {
        let l = text.lines().find(|l| l.starts_with(kind)).unwrap_or_else(|| panic!("no {kind} in {text}"));
        // (AC-3's audio service type side data ends the line with an empty field.)
        let fields: Vec<u64> = l
            .split(',')
            .skip(1)
            .filter(|f| !f.trim().is_empty())
            .map(|f| f.trim().parse().unwrap())
            .collect();
        (fields[0], fields[1])
    };
    let (video, _) = line("video");
    let (audio_frames, audio_packets) = line("audio");
    (video, audio_frames, audio_packets)
}

fn media_playlist(r: &Response) -> m3u8_rs::MediaPlaylist {
    match m3u8_rs::parse_playlist_res(&r.body) {
        Ok(m3u8_rs::Playlist::MediaPlaylist(p)) => p,
        _ => panic!("not a media playlist: {}", r.body_text()),
    }
}

/// Each segment of the TS media playlist `ts` under `dir` alone: it decodes (it starts on a
/// keyframe with its parameter sets), ffmpeg's demuxer finds no continuity error, the PCR PID
/// and each of `pmt` in its trace of the PMT, and the PCRs are at most 100 ms apart.
fn each_segment_passes(addr: SocketAddr, dir: &str, ts: &m3u8_rs::MediaPlaylist, pmt: &[&str]) {
    let tmp = tempfile::tempdir().unwrap();
    for (n, s) in ts.segments.iter().enumerate() {
        let seg = ok(addr, &format!("{dir}{}", s.uri));
        assert_eq!(seg.header("content-type"), Some("video/mp2t"));
        assert_eq!(seg.body.len() % 188, 0);
        let path = tmp.path().join(format!("seg-{n}.ts"));
        std::fs::write(&path, &seg.body).unwrap();
        decodes_cleanly(path.to_str().unwrap());
        let mut probe = tool("ffprobe");
        probe.args(["-v", "trace", "-count_packets", "-show_entries", "stream=nb_read_packets"]).arg(&path);
        let (status, _, log) = run_bounded(&mut probe, Duration::from_secs(30));
        let log = String::from_utf8_lossy(&log);
        assert!(status.success(), "{log}");
        assert!(!log.contains("Continuity check failed"), "{dir} segment {n}: {log}");
        assert!(log.contains("pcr_pid=0x100"), "{dir} segment {n}: the PMT names the video's PCR PID");
        for entry in pmt {
            assert!(log.contains(entry), "{dir} segment {n}: no {entry} in the PMT: {log}");
        }
        let mut reader = TsPacketReader::new(seg.body.as_slice());
        let mut pcrs = Vec::new();
        while let Some(packet) = reader.read_ts_packet().unwrap() {
            if let Some(pcr) = packet.adaptation_field.and_then(|a| a.pcr) {
                assert_eq!(packet.header.pid.as_u16(), 0x100);
                pcrs.push(pcr.as_u64());
            }
        }
        assert!(pcrs.len() as f64 >= f64::from(s.duration) * 10.0, "{dir} segment {n}: {} PCRs", pcrs.len());
        for w in pcrs.windows(2) {
            assert!(
                w[1] >= w[0] && w[1] - w[0] <= 27_000_000 / 10,
                "{dir} segment {n}: PCRs {} then {}",
                w[0],
                w[1]
            );
        }
    }
}

fn ts_master_plays_every_frame(engine: &[&str]) {
    let fx = Fixture::new();
    fx.write("films/film.mp4", film());
    let server = Server::serve(engine, &fx, &["--hls-segment", "6s"]);
    let addr = server.addr();
    let master = ok(addr, "/films/film.mp4/ts/master.m3u8");
    assert_eq!(master.header("content-type"), Some("application/vnd.apple.mpegurl"));
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
        panic!("not a master playlist: {}", master.body_text())
    };
    assert_eq!(m.version, Some(3), "{}", master.body_text());
    assert_eq!(m.variants.len(), 1);
    assert_eq!(
        m.variants[0].codecs.as_deref().map(|c| c.split(',').count()),
        Some(2),
        "video and audio muxed"
    );

    // Every frame of the MP4: the video's frames, and the audio's packets (TS has no edit
    // list, so the AAC priming frame the MP4's edit hides is decoded too).
    let (mp4_video, _, mp4_audio_packets) = counts(&format!("http://{addr}/films/film.mp4"));
    let url = format!("http://{addr}/films/film.mp4/ts/master.m3u8");
    let (video, audio_frames, audio_packets) = counts(&url);
    assert_eq!(video, mp4_video, "video frames over TS and in the MP4");
    assert_eq!((audio_frames, audio_packets), (mp4_audio_packets, mp4_audio_packets), "audio frames");
    decodes_cleanly(&url);

    // The same cuts as the fMP4 segments.
    let media = ok(addr, &format!("/films/film.mp4/ts/{}", m.variants[0].uri));
    let ts = media_playlist(&media);
    let fmp4 = media_playlist(&ok(addr, "/films/film.mp4/media.m3u8"));
    assert_eq!(ts.segments.len(), fmp4.segments.len());
    for (a, b) in ts.segments.iter().zip(&fmp4.segments) {
        assert!((a.duration - b.duration).abs() < 1e-4, "{} against {}", a.duration, b.duration);
    }
    assert!(ts.segments.len() >= 3, "{}", media.body_text());

    each_segment_passes(addr, "/films/film.mp4/ts/", &ts, &["stream_type=1b", "stream_type=f"]);
    let past = format!("/films/film.mp4/ts/seg-{}.ts", ts.segments.len());
    assert_eq!(fetch_get(addr, &past, &[]).status, 404);
    assert_eq!(fetch_get(addr, "/films/film.mp4/ts/seg-01.ts", &[]).status, 404);
    assert_eq!(fetch_get(addr, "/films/missing.mp4/ts/master.m3u8", &[]).status, 404);
    // Segments validate like any.
    let seg = ok(addr, "/films/film.mp4/ts/seg-0.ts");
    let etag = seg.header("etag").unwrap();
    assert_eq!(fetch_get(addr, "/films/film.mp4/ts/seg-0.ts", &[("If-None-Match", etag)]).status, 304);
    let part = fetch_get(addr, "/films/film.mp4/ts/seg-0.ts", &[("Range", "bytes=188-375")]);
    assert!(part.status == 206 && part.body == seg.body[188..376]);
}

/// A rendition set's TS master lists each file's TS playlist and plays; its fMP4 master lists
/// each file's I-frame stream; the page and `/streams` offer TS, the I-frame playlist and clips.
fn sets_page_and_streams_offer_ts_trick_play_and_clips(engine: &[&str]) {
    let fx = Fixture::new();
    // Two renditions of one title (the same encoding under both names: their keyframes align).
    fx.write("films/movie.180p.mp4", film());
    fx.write("films/movie.360p.mp4", film());
    let server = Server::serve(engine, &fx, &["--hls-segment", "6s"]);
    let addr = server.addr();
    let master = ok(addr, "/films/movie.set/ts/master.m3u8");
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
        panic!("not a master playlist: {}", master.body_text())
    };
    let uris: Vec<&str> = m.variants.iter().map(|v| v.uri.as_str()).collect();
    assert_eq!(
        uris,
        ["../../movie.360p.mp4/ts/media.m3u8", "../../movie.180p.mp4/ts/media.m3u8"],
        "{}",
        master.body_text()
    );
    let (mp4_video, _, _) = counts(&format!("http://{addr}/films/movie.180p.mp4"));
    let (video, _, _) = counts(&format!("http://{addr}/films/movie.set/ts/master.m3u8"));
    assert_eq!(video, mp4_video);
    assert_eq!(
        fetch_get(addr, "/films/movie.set/ts/media.m3u8", &[]).status,
        404,
        "a set has no media playlist"
    );

    let fmp4 = ok(addr, "/films/movie.set/master.m3u8");
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&fmp4.body).unwrap() else {
        panic!("not a master playlist: {}", fmp4.body_text())
    };
    let iframes: Vec<&str> = m.variants.iter().filter(|v| v.is_i_frame).map(|v| v.uri.as_str()).collect();
    assert_eq!(iframes.len(), 2, "{}", fmp4.body_text());
    for uri in iframes {
        let target = format!("/films/movie.set/{uri}");
        let p = ok(addr, &target);
        assert!(p.body_text().contains("#EXT-X-I-FRAMES-ONLY"), "{target}");
    }

    let page = ok(addr, "/films/").body_text();
    assert!(page.contains("data-rel=\"./movie.180p.mp4/ts/master.m3u8\""), "{page}");
    assert!(page.contains("./movie.180p.mp4?start=0&amp;end=20"), "{page}");
    let mut c = Conn::open(server.admin_addr());
    c.send(request("GET", "/streams", &[]));
    let streams: serde_json::Value = serde_json::from_slice(&c.response().body).unwrap();
    let item =
        streams["items"].as_array().unwrap().iter().find(|i| i["path"] == "/films/movie.180p.mp4").unwrap();
    for (key, example) in [("hls_ts", None), ("iframes", None), ("clip_template", Some(("{start}", "{end}")))]
    {
        let url = item[key].as_str().unwrap_or_else(|| panic!("{key} in {item}"));
        let url = example.map_or(url.to_string(), |(s, e)| url.replace(s, "2").replace(e, "4"));
        let target = url.split_once(&addr.to_string()).unwrap().1;
        assert_eq!(fetch_get(addr, target, &[]).status, 200, "{key}: {url}");
    }
    let set = &streams["sets"][0];
    assert!(set["hls_ts"].as_str().unwrap().ends_with("/films/movie.set/ts/master.m3u8"), "{set}");
}

/// The HEVC files (8-bit `hev1` with E-AC-3, 10-bit `hvc1` with AC-3; 8 s, B-frames, a
/// keyframe every 2 s, closed GOPs) with the audio codec string and the stream type and
/// registration ffmpeg's demuxer must find in their PMT, and a VP9 and Opus file TS does not
/// carry; made once per test binary.
#[allow(clippy::type_complexity)]
fn hevc_films() -> &'static [(&'static str, Vec<u8>, &'static str, [&'static str; 2])] {
    static FILMS: OnceLock<Vec<(&'static str, Vec<u8>, &'static str, [&'static str; 2])>> = OnceLock::new();
    const X265: &str = "-c:v libx265 -preset ultrafast -x265-params log-level=error:keyint=50:min-keyint=50:scenecut=0:open-gop=0";
    FILMS.get_or_init(|| {
        vec![
            (
                "hevc8-hev1-eac3.mp4",
                test_film(8, &format!("{X265} -pix_fmt yuv420p -c:a eac3 -b:a 96k")),
                "ec-3",
                ["stream_type=87", "reg_desc=EAC3"],
            ),
            (
                "hevc10-hvc1-ac3.mp4",
                test_film(8, &format!("{X265} -pix_fmt yuv420p10le -tag:v hvc1 -c:a ac3 -b:a 96k")),
                "ac-3",
                ["stream_type=81", "reg_desc=AC-3"],
            ),
            (
                "vp9-opus.mp4",
                test_film(2, "-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 50 -c:a libopus -b:a 48k"),
                "opus",
                ["", ""],
            ),
        ]
    })
}

/// HEVC with AC-3 and with E-AC-3 over TS: the master is version 3 with the fMP4 master's
/// `CODECS` but `hvc1` for HEVC, ffprobe counts every video frame and audio packet of the MP4
/// over it and ffmpeg decodes it without a word, the cuts are the fMP4 ones, and each segment
/// passes the checks the H.264 one does with HEVC's and the Dolby codec's stream types and
/// registrations in its PMT. The page and `/streams` offer TS for them and not for VP9 and
/// Opus, whose TS master is 415.
fn hevc_with_ac3_and_eac3_play_over_ts(engine: &[&str]) {
    let fx = Fixture::new();
    for (name, bytes, _, _) in hevc_films() {
        fx.write(&format!("films/{name}"), bytes);
    }
    let server = Server::serve(engine, &fx, &["--hls-segment", "2s"]);
    let addr = server.addr();
    let page = ok(addr, "/films/").body_text();
    let mut c = Conn::open(server.admin_addr());
    c.send(request("GET", "/streams", &[]));
    let streams: serde_json::Value = serde_json::from_slice(&c.response().body).unwrap();
    for (name, _, audio_codec, pmt) in hevc_films() {
        let item = streams["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["path"] == format!("/films/{name}"))
            .unwrap_or_else(|| panic!("{name} in {streams}"));
        let offered = page.contains(&format!("data-rel=\"./{name}/ts/master.m3u8\""));
        let master_target = format!("/films/{name}/ts/master.m3u8");
        if *audio_codec == "opus" {
            assert!(!offered, "{name}: TS offered on the page: {page}");
            assert!(item["hls_ts"].is_null(), "{name}: TS in /streams: {item}");
            assert!(item["hls"].is_string(), "{name}: still offered as fMP4 HLS: {item}");
            let refused = fetch_get(addr, &master_target, &[]);
            assert_eq!(refused.status, 415, "{}", refused.body_text());
            assert!(refused.body_text().contains("vp09"), "{}", refused.body_text());
            continue;
        }
        assert!(offered, "{name}: TS not offered on the page: {page}");
        assert!(item["hls_ts"].as_str().is_some_and(|u| u.ends_with(&master_target)), "{item}");

        let master = ok(addr, &master_target);
        let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
            panic!("not a master playlist: {}", master.body_text())
        };
        assert!(m.version.is_some_and(|v| v >= 3), "{}", master.body_text());
        assert_eq!(m.variants.len(), 1);
        let fmp4 = ok(addr, &format!("/films/{name}/master.m3u8"));
        let m3u8_rs::Playlist::MasterPlaylist(f) = m3u8_rs::parse_playlist_res(&fmp4.body).unwrap() else {
            panic!("not a master playlist: {}", fmp4.body_text())
        };
        let fmp4_codecs = f.variants.iter().find(|v| !v.is_i_frame).unwrap().codecs.clone().unwrap();
        let expected = fmp4_codecs.replace("hev1.", "hvc1.");
        let codecs = m.variants[0].codecs.as_deref().unwrap();
        assert_eq!(codecs, expected, "{}", master.body_text());
        assert!(codecs.starts_with("hvc1.") && codecs.ends_with(&format!(",{audio_codec}")), "{codecs}");

        let (mp4_video, _, mp4_audio_packets) = counts(&format!("http://{addr}/films/{name}"));
        let url = format!("http://{addr}{master_target}");
        let (video, audio_frames, audio_packets) = counts(&url);
        assert_eq!(video, mp4_video, "{name}: video frames over TS and in the MP4");
        assert_eq!((audio_frames, audio_packets), (mp4_audio_packets, mp4_audio_packets), "{name}: audio");
        decodes_cleanly(&url);

        let dir = format!("/films/{name}/ts/");
        let ts = media_playlist(&ok(addr, &format!("{dir}{}", m.variants[0].uri)));
        let fmp4_media = media_playlist(&ok(addr, &format!("/films/{name}/media.m3u8")));
        assert_eq!(ts.segments.len(), fmp4_media.segments.len());
        assert!(ts.segments.len() >= 4, "{name}: {} segments", ts.segments.len());
        for (a, b) in ts.segments.iter().zip(&fmp4_media.segments) {
            assert!((a.duration - b.duration).abs() < 1e-4, "{} against {}", a.duration, b.duration);
        }
        each_segment_passes(addr, &dir, &ts, &["stream_type=24", "reg_desc=HEVC", pmt[0], pmt[1]]);
    }
}

engine_matrix!(
    ts_master_plays_every_frame,
    sets_page_and_streams_offer_ts_trick_play_and_clips,
    hevc_with_ac3_and_eac3_play_over_ts
);
