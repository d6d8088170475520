//! DASH, per-track CMAF and rendition sets end to end, on every engine: a three-rendition set
//! made by ffmpeg at test time (`movie.240p.mp4`, `movie.180p.mp4`, `movie.120p.mp4`, one GOP,
//! 8 s) with WebVTT sidecars is served as one HLS master and one MPD; players we did not write
//! (ffprobe, ffmpeg) decode the set over both without a word on stderr and count the MP4's
//! frames over a file's `manifest.mpd`; the MPD parses back (quick-xml) into what the files say
//! (segment timelines summing to the duration, one Representation per rendition, a text
//! AdaptationSet per sidecar, its cues as `wvtt` segments on the video's cuts that ffprobe reads);
//! each HLS playlist's `EXTINF`s are its track's MPD timeline; per-track segments carry every
//! sample of their track once; a set whose keyframes do not line up answers 409 with the times
//! and its files still play; a sidecar `TITLE.set.toml` makes a set of other names; an s3://
//! edge (SeaweedFS) serves a set; Chromium plays the set through hls.js and dash.js with the
//! first subtitles shown.
//!
//! Expected numbers come from the files (ffprobe, `sluice_media`'s tables), never constants.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::collections::HashMap;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use common::*;
use mp4_atom::Decode;
use quick_xml::events::Event;
use sluice_media::mp4::{Mp4File, TrackKind};

/// 1 s segments: the clips have a keyframe every second.
const SEGMENT: &[&str] = &["--hls-segment", "1s"];

/// Seconds of each clip: long enough for a player to switch renditions mid-play.
const CLIP_SECS: usize = 8;

/// The clips, made once per test binary: the aligned set (a keyframe every 30 frames), and two
/// files of `other` whose keyframes part (every 30 and every 45 frames).
struct Clips {
    set: Vec<(&'static str, Vec<u8>)>,
    other: Vec<(&'static str, Vec<u8>)>,
}

fn clips() -> &'static Clips {
    static CLIPS: OnceLock<Clips> = OnceLock::new();
    CLIPS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let make = |name: &str, size: &str, rate: &str, gop: &str| {
            let out = dir.path().join(name);
            let mut cmd = Command::new(require_tool("ffmpeg", "ffmpeg"));
            cmd.args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i"])
                .arg(format!("testsrc2=size={size}:rate=30"))
                .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t"])
                .arg(CLIP_SECS.to_string())
                .args([
                    "-c:v",
                    "libx264",
                    "-preset",
                    "ultrafast",
                    "-b:v",
                    rate,
                    "-g",
                    gop,
                    "-keyint_min",
                    gop,
                ])
                // One common level for every rendition: players check each against the decoder.
                .args(["-level:v", "3.0"])
                .args(["-sc_threshold", "0", "-pix_fmt", "yuv420p", "-c:a", "aac", "-b:a", "48k"])
                .args(["-movflags", "+faststart"])
                .arg(&out);
            let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
            assert!(status.success(), "ffmpeg made no {name}: {}", String::from_utf8_lossy(&err));
            std::fs::read(&out).unwrap()
        };
        Clips {
            set: vec![
                ("movie.240p.mp4", make("a.mp4", "320x240", "400k", "30")),
                ("movie.180p.mp4", make("b.mp4", "240x180", "200k", "30")),
                ("movie.120p.mp4", make("c.mp4", "160x120", "100k", "30")),
            ],
            other: vec![
                ("other.240p.mp4", make("d.mp4", "320x240", "400k", "30")),
                ("other.120p.mp4", make("e.mp4", "160x120", "100k", "45")),
            ],
        }
    })
}

const VTT_EN: &str =
    "WEBVTT\n\n00:00:00.500 --> 00:00:02.000\nHello\n\n00:00:02.000 --> 00:00:03.500\nWorld\n";
const VTT_FR: &str =
    "WEBVTT\n\n00:00:00.500 --> 00:00:02.000\nBonjour\n\n00:00:02.000 --> 00:00:03.500\nMonde\n";

/// Every file of the library, by path: the set, its subtitles, the misaligned set, and the same
/// bytes under other names with a sidecar listing them.
fn library_files() -> Vec<(String, Vec<u8>)> {
    let clips = clips();
    let mut files: Vec<(String, Vec<u8>)> =
        clips.set.iter().chain(&clips.other).map(|(n, b)| (format!("films/{n}"), b.clone())).collect();
    files.push(("films/movie.en.vtt".into(), VTT_EN.into()));
    files.push(("films/movie.fr.vtt".into(), VTT_FR.into()));
    files.push(("films/feature-high.mp4".into(), clips.set[0].1.clone()));
    files.push(("films/feature-low.mp4".into(), clips.set[2].1.clone()));
    files.push(("films/broken.set.toml".into(), b"files = [\"missing.mp4\"]\n".to_vec()));
    files.push((
        "films/feature.set.toml".into(),
        b"files = [\"feature-high.mp4\", \"feature-low.mp4\"]\n[subtitles]\nen = \"movie.en.vtt\"\n".to_vec(),
    ));
    files
}

fn ok(addr: std::net::SocketAddr, target: &str) -> Response {
    let r = fetch_get(addr, target, &[]);
    assert_eq!(r.status, 200, "{target}: {} {}", r.head_text(), r.body_text());
    r
}

/// ffprobe's count of an MP4's video frames (read as a file), once per name.
fn frames_in(addr: std::net::SocketAddr, path: &str) -> String {
    static FRAMES: OnceLock<std::sync::Mutex<HashMap<String, String>>> = OnceLock::new();
    let cache = FRAMES.get_or_init(Default::default);
    if let Some(known) = cache.lock().unwrap().get(path) {
        return known.clone();
    }
    let frames = ffprobe_video_frames(&format!("http://{addr}/{path}")).0;
    cache.lock().unwrap().insert(path.to_string(), frames.clone());
    frames
}

/// Decodes `url` with ffmpeg to the end; stderr must be empty.
fn ffmpeg_decodes_quietly(url: &str) {
    let mut ffmpeg = Command::new(require_tool("ffmpeg", "ffmpeg"));
    for v in ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"] {
        ffmpeg.env_remove(v);
    }
    ffmpeg.args(["-nostdin", "-v", "error", "-rw_timeout", "10000000", "-i", url, "-f", "null", "-"]);
    let (status, _, err) = run_bounded(&mut ffmpeg, Duration::from_secs(120));
    let err = String::from_utf8_lossy(&err);
    assert!(status.success() && err.trim().is_empty(), "ffmpeg decoding {url}: {status}: {err}");
}

/// An element of the parsed MPD: its name, attributes, children and text.
#[derive(Debug, Default)]
struct Element {
    name: String,
    attrs: HashMap<String, String>,
    children: Vec<Element>,
    text: String,
}

impl Element {
    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Element> + 'a {
        self.children.iter().filter(move |c| c.name == name)
    }
    fn one(&self, name: &str) -> &Element {
        match self.children.iter().find(|c| c.name == name) {
            Some(child) => child,
            None => panic!("no {name} in {}", self.name),
        }
    }
    fn attr(&self, name: &str) -> &str {
        self.attrs.get(name).unwrap_or_else(|| panic!("no {name} on {}: {:?}", self.name, self.attrs))
    }
}

/// Parses an MPD with quick-xml (well-formed XML, or the test fails) into elements.
fn parse_mpd(text: &str) -> Element {
    let mut reader = quick_xml::Reader::from_str(text);
    let mut stack = vec![Element::default()];
    let element = |e: &quick_xml::events::BytesStart<'_>| Element {
        name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
        attrs: e
            .attributes()
            .map(|a| {
                let a = a.unwrap();
                (
                    String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                    a.unescape_value().unwrap().into_owned(),
                )
            })
            .collect(),
        ..Default::default()
    };
    loop {
        match reader.read_event().unwrap() {
            Event::Start(e) => stack.push(element(&e)),
            Event::Empty(e) => stack.last_mut().unwrap().children.push(element(&e)),
            Event::End(_) => {
                let done = stack.pop().unwrap();
                stack.last_mut().unwrap().children.push(done);
            }
            Event::Text(t) => stack.last_mut().unwrap().text.push_str(&t.decode().unwrap()),
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(stack.len(), 1, "every element closed");
    stack.pop().unwrap().children.pop().unwrap()
}

/// `PT6.000S` in seconds.
fn iso_secs(d: &str) -> f64 {
    d.strip_prefix("PT").and_then(|s| s.strip_suffix('S')).unwrap().parse().unwrap()
}

/// The segment durations (seconds) of a Representation's timeline, expanded.
fn timeline(rep: &Element) -> Vec<f64> {
    let template = rep.one("SegmentTemplate");
    assert_eq!(template.attr("startNumber"), "0");
    let timescale: f64 = template.attr("timescale").parse().unwrap();
    let mut out = Vec::new();
    for s in template.one("SegmentTimeline").all("S") {
        let d: f64 = s.attr("d").parse().unwrap();
        let r: usize = s.attrs.get("r").map_or(0, |r| r.parse().unwrap());
        out.extend(std::iter::repeat_n(d / timescale, r + 1));
    }
    out
}

fn tables(bytes: &[u8]) -> Mp4File {
    Mp4File::from_bytes(bytes).unwrap()
}

/// The set's master and MPD say what the files are, and players decode the set over both.
fn a_set_plays_over_hls_and_dash(engine: &[&str]) {
    let fx = Fixture::new();
    for (path, bytes) in library_files() {
        fx.write(&path, &bytes);
    }
    let server = Server::serve(engine, &fx, SEGMENT);
    let addr = server.addr();
    check_set(addr);

    // ffprobe over a file's MPD counts the MP4's video frames; ffmpeg decodes the set.
    let mpd = format!("http://{addr}/films/movie.240p.mp4/manifest.mpd");
    let (frames, _) = ffprobe_video_frames(&mpd);
    // The DASH demuxer also lists its streams under a program: the same count, printed twice.
    let counts: Vec<&str> = frames.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!counts.is_empty());
    for count in counts {
        assert_eq!(count, frames_in(addr, "films/movie.240p.mp4"), "video frames over DASH and over the MP4");
    }
    ffmpeg_decodes_quietly(&format!("http://{addr}/films/movie.set/manifest.mpd"));
    ffmpeg_decodes_quietly(&format!("http://{addr}/films/movie.set/master.m3u8"));

    // Per-track segments: each carries one track, and together every sample of it once.
    for (name, bytes) in &clips().set[..1] {
        let file = tables(bytes);
        for (kind, track) in ["video", "audio"].iter().zip(&file.tracks) {
            let playlist = ok(addr, &format!("/films/{name}/{kind}.m3u8"));
            let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(&playlist.body).unwrap()
            else {
                panic!("not a media playlist")
            };
            let init = ok(addr, &format!("/films/{name}/{kind}-init.mp4"));
            let mut buf = init.body.as_slice();
            mp4_atom::Ftyp::decode(&mut buf).unwrap();
            assert_eq!(mp4_atom::Moov::decode(&mut buf).unwrap().trak.len(), 1, "{kind} alone");
            let mut samples = 0;
            for seg in &p.segments {
                let body = ok(addr, &format!("/films/{name}/{}", seg.uri)).body;
                let moof = mp4_atom::Moof::decode(&mut body.as_slice()).unwrap();
                assert_eq!(moof.traf.len(), 1, "{kind} alone in {}", seg.uri);
                samples += moof.traf[0].trun.iter().map(|t| t.samples.len()).sum::<usize>();
            }
            assert_eq!(samples, track.samples.len(), "every {kind} sample once");
        }
    }

    // The set whose keyframes part: 409 with the times; its files are still served.
    let r = fetch_get(addr, "/films/other.set/master.m3u8", &[]);
    assert_eq!(r.status, 409, "{}", r.body_text());
    let body = r.body_text();
    assert!(body.contains("other.240p.mp4") && body.contains("other.120p.mp4"), "{body}");
    assert!(body.contains("1.000") && body.contains("1.500"), "the times: {body}");
    assert_eq!(fetch_get(addr, "/films/other.set/manifest.mpd", &[]).status, 409);
    ok(addr, "/films/other.120p.mp4/master.m3u8");
    ok(addr, "/films/other.120p.mp4/manifest.mpd");

    // A sidecar names a set of other names.
    let master = ok(addr, "/films/feature.set/master.m3u8").body_text();
    assert_eq!(master.matches("#EXT-X-STREAM-INF").count(), 2, "{master}");
    assert!(master.contains("../feature-high.mp4/video.m3u8"), "{master}");
    assert!(master.contains("LANGUAGE=\"en\""), "{master}");
    assert_eq!(fetch_get(addr, "/films/nothing.set/master.m3u8", &[]).status, 404);
    let broken = fetch_get(addr, "/films/broken.set/master.m3u8", &[]);
    assert_eq!(broken.status, 500);
    assert!(broken.body_text().contains("missing.mp4"), "the reason: {}", broken.body_text());

    // The page and /streams offer the sets that work, and DASH where HLS works.
    let page = ok(addr, "/films/").body_text();
    assert!(page.contains("data-dash=\"./movie.set/manifest.mpd\""), "{page}");
    assert!(page.contains("data-hls=\"./feature.set/master.m3u8\""), "{page}");
    // The set that would answer 409 is shown with its reason and times, not a Play button.
    assert!(!page.contains("./other.set/"), "no URL of a set that would answer 409: {page}");
    let other = page
        .split("<li")
        .find(|li| li.contains("<strong>other</strong>"))
        .unwrap_or_else(|| panic!("{page}"));
    assert!(other.contains("Cannot be played: the renditions&#39; keyframes do not line up"), "{other}");
    assert!(
        other.contains("1.000") && other.contains("1.500") && !other.contains("class=\"play\""),
        "{other}"
    );
    let broken = page
        .split("<li")
        .find(|li| li.contains("<strong>broken</strong>"))
        .unwrap_or_else(|| panic!("{page}"));
    assert!(broken.contains("Cannot be played: ") && broken.contains("missing.mp4"), "{broken}");
    assert!(page.contains("data-dash=\"./other.120p.mp4/manifest.mpd\""), "{page}");
    let mut c = Conn::open(server.admin_addr());
    c.send(request("GET", "/streams", &[]));
    let streams: serde_json::Value = serde_json::from_slice(&c.response().body).unwrap();
    let listed = streams["sets"].as_array().unwrap();
    let sets: Vec<&str> =
        listed.iter().filter(|s| s["ready"] == true).map(|s| s["path"].as_str().unwrap()).collect();
    assert_eq!(sets, ["/films/feature.set", "/films/movie.set"], "{streams}");
    for (path, why) in [("/films/broken.set", "missing.mp4"), ("/films/other.set", "line up")] {
        let set = listed.iter().find(|s| s["path"] == path).expect(path);
        assert!(set["not_ready_reason"].as_str().unwrap().contains(why), "the reason: {set}");
    }
    let movie = listed.iter().find(|s| s["path"] == "/films/movie.set").unwrap();
    assert!(movie["dash"].as_str().unwrap().ends_with("/films/movie.set/manifest.mpd"), "{movie}");
    assert_eq!(movie["subtitles"], serde_json::json!(["en", "fr"]));
    let item =
        streams["items"].as_array().unwrap().iter().find(|i| i["path"] == "/films/movie.120p.mp4").unwrap();
    assert!(item["dash"].as_str().unwrap().ends_with("/films/movie.120p.mp4/manifest.mpd"), "{item}");
    assert_eq!(fetch_get(addr, "/films/movie.set/video-seg-0.m4s", &[]).status, 404);

    // Subtitles segments change with their sidecar, not with the MP4: so do their tags.
    let targets = ["/films/movie.set/subtitles-fr-seg-1.m4s", "/films/movie.240p.mp4/subtitles-fr-1.vtt"];
    let before: Vec<Response> = targets.iter().map(|t| ok(addr, t)).collect();
    fx.write("films/movie.fr.vtt", VTT_FR.replace("Bonjour", "Salut").as_bytes());
    for (target, old) in targets.iter().zip(&before) {
        let tag = old.header("etag").unwrap();
        let new = fetch_get(addr, target, &[("If-None-Match", tag)]);
        assert_eq!(new.status, 200, "{target}: an edited sidecar is not the one tagged {tag}");
        assert_ne!(new.header("etag"), Some(tag), "{target}");
        assert!(contains(&new.body, b"Salut") && !contains(&new.body, b"Bonjour"), "{target}");
    }
}

/// The set `films/movie.set` as a client sees it: master playlist, MPD, subtitles.
fn check_set(addr: std::net::SocketAddr) {
    let files: Vec<(&str, Mp4File)> = clips().set.iter().map(|(n, b)| (*n, tables(b))).collect();
    let master = ok(addr, "/films/movie.set/master.m3u8");
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(&master.body).unwrap() else {
        panic!("not a master playlist: {}", master.body_text())
    };
    // A variant per rendition, and each rendition's keyframes as an I-frame stream.
    let (iframes, variants): (Vec<_>, Vec<_>) = m.variants.iter().partition(|v| v.is_i_frame);
    assert_eq!(variants.len(), 3, "{}", master.body_text());
    let iframe_uris: Vec<&str> = iframes.iter().map(|v| v.uri.as_str()).collect();
    let expected: Vec<String> =
        files.iter().map(|(name, _)| format!("../{name}/video-iframes.m3u8")).collect();
    assert_eq!(iframe_uris, expected, "{}", master.body_text());
    for (variant, (name, file)) in variants.iter().zip(&files) {
        assert_eq!(variant.uri, format!("../{name}/video.m3u8"));
        let TrackKind::H264(h) = &file.tracks[0].kind else { panic!("video first") };
        let res = variant.resolution.unwrap();
        assert_eq!((res.width, res.height), (u64::from(h.width), u64::from(h.height)));
        assert_eq!(variant.frame_rate, Some(30.0));
        assert!(variant.bandwidth >= variant.average_bandwidth.unwrap() && variant.bandwidth > 0);
        assert!(
            variant.codecs.as_deref().unwrap().starts_with("avc1.")
                && variant.codecs.as_deref().unwrap().ends_with(",mp4a.40.2")
        );
        assert_eq!(variant.audio.as_deref(), Some("audio"));
        assert_eq!(variant.subtitles.as_deref(), Some("subs"));
    }
    assert!(m.variants[0].bandwidth > m.variants[2].bandwidth, "renditions by rate");
    let languages: Vec<&str> = m
        .alternatives
        .iter()
        .filter(|a| a.media_type == m3u8_rs::AlternativeMediaType::Subtitles)
        .map(|a| a.language.as_deref().unwrap())
        .collect();
    assert_eq!(languages, ["en", "fr"]);
    // The first subtitles are on by default, as in DASH players: one DEFAULT=YES in the group,
    // AUTOSELECT=YES on each.
    let subtitles: Vec<(bool, bool)> = m
        .alternatives
        .iter()
        .filter(|a| a.media_type == m3u8_rs::AlternativeMediaType::Subtitles)
        .map(|a| (a.default, a.autoselect))
        .collect();
    assert_eq!(subtitles, [(true, true), (false, true)], "{}", master.body_text());
    // Segmented WebVTT: a segment per media segment, each with the cues showing during it.
    let subs = ok(addr, "/films/movie.set/subtitles-fr.m3u8");
    let m3u8_rs::Playlist::MediaPlaylist(subs) = m3u8_rs::parse_playlist_res(&subs.body).unwrap() else {
        panic!("not a media playlist: {}", subs.body_text())
    };
    assert_eq!(subs.segments.len(), CLIP_SECS);
    assert!(subs.end_list);
    let cues = |n: usize| ok(addr, &format!("/films/movie.set/{}", subs.segments[n].uri)).body_text();
    assert!(cues(1).starts_with("WEBVTT\nX-TIMESTAMP-MAP=") && cues(1).contains("Bonjour"), "{}", cues(1));
    assert!(cues(2).contains("Monde") && !cues(2).contains("Bonjour"), "{}", cues(2));
    assert!(!cues(5).contains("Monde"), "{}", cues(5));
    assert!(ok(addr, "/films/movie.240p.mp4/subtitles-en-0.vtt").body_text().contains("Hello"));
    assert!(ok(addr, "/films/movie.fr.vtt").body_text().contains("Bonjour"));
    assert_eq!(fetch_get(addr, "/films/movie.set/subtitles-de.m3u8", &[]).status, 404);

    let mpd = ok(addr, "/films/movie.set/manifest.mpd");
    assert_eq!(mpd.header("content-type"), Some("application/dash+xml"));
    let root = parse_mpd(&mpd.body_text());
    assert_eq!(root.name, "MPD");
    assert_eq!(root.attr("type"), "static");
    let duration = iso_secs(root.attr("mediaPresentationDuration"));
    assert!(iso_secs(root.attr("minBufferTime")) > 0.0);
    let period = root.one("Period");
    let sets: Vec<&Element> = period.all("AdaptationSet").collect();
    let of = |kind: &str| sets.iter().filter(|s| s.attr("contentType") == kind).copied().collect::<Vec<_>>();
    // The video's keyframes are a trick-mode set of their own, naming the video set.
    let trick_mode = |s: &&Element| {
        s.all("EssentialProperty").any(|p| p.attr("schemeIdUri") == "http://dashif.org/guidelines/trickmode")
    };
    let (tricks, video): (Vec<&Element>, Vec<&Element>) = of("video").into_iter().partition(trick_mode);
    let (audio, text) = (of("audio"), of("text"));
    assert_eq!((video.len(), audio.len(), text.len(), tricks.len()), (1, 1, 2, 1));
    assert_eq!(tricks[0].one("EssentialProperty").attr("value"), video[0].attr("id"));
    assert_eq!(tricks[0].all("Representation").count(), 3);
    let reps: Vec<&Element> = video[0].all("Representation").collect();
    assert_eq!(reps.len(), 3);
    for (rep, (name, file)) in reps.iter().zip(&files) {
        let TrackKind::H264(h) = &file.tracks[0].kind else { panic!("video first") };
        assert_eq!(rep.attr("width"), h.width.to_string());
        assert!(rep.attr("codecs").starts_with("avc1."));
        let template = rep.one("SegmentTemplate");
        assert_eq!(template.attr("media"), format!("../{name}/video-seg-$Number$.m4s"));
        assert_eq!(template.attr("timescale"), file.tracks[0].timescale.to_string());
        let segments = timeline(rep);
        assert_eq!(segments.len(), CLIP_SECS, "one segment a second: {segments:?}");
        let total: f64 = segments.iter().sum();
        assert!((total - duration).abs() < 0.05, "timeline {total} s, presentation {duration} s");
        // The timeline is the file's: its sum is the track's last decode time plus a frame.
        let video = &file.tracks[0];
        let last = video.samples.last().unwrap().decode_time() as f64 / f64::from(video.timescale);
        assert!((total - last - 1.0 / 30.0).abs() < 0.002, "{total} vs {last}");
        // The numbers address the segments HLS lists.
        ok(addr, &format!("/films/{name}/video-seg-3.m4s"));
    }
    let audio_rep = audio[0].one("Representation");
    assert_eq!(audio_rep.attr("codecs"), "mp4a.40.2");
    assert_eq!(audio_rep.attr("audioSamplingRate"), "48000");
    let audio_total: f64 = timeline(audio_rep).iter().sum();
    assert!((audio_total - duration).abs() < 0.1, "audio {audio_total} s");
    let langs: Vec<&str> = text.iter().map(|t| t.attr("lang")).collect();
    assert_eq!(langs, ["en", "fr"]);
    check_text_tracks(addr, reps[0], &text);
    check_playlist_durations(addr, reps[0], audio_rep);

    // A typed reading of the MPD schema (dash-mpd-core, through `sluice load`'s DASH player) finds
    // the same renditions, and every segment it expands the templates to is there, init first.
    let url = url::Url::parse(&format!("http://{addr}/films/movie.set/manifest.mpd")).unwrap();
    let presentation = sluice_load::player::manifest::parse_dash(&url, &mpd.body_text())
        .unwrap_or_else(|e| panic!("dash-mpd-core does not read the MPD: {e}\n{}", mpd.body_text()));
    assert_eq!(presentation.renditions.len(), 3);
    assert_eq!(presentation.audio.len(), 1);
    for track in presentation.renditions.iter().chain(&presentation.audio) {
        assert_eq!(track.segments.len(), CLIP_SECS, "{}", track.name);
        assert!((track.duration() - duration).abs() < 0.1, "{}: {} s", track.name, track.duration());
        let init = track.init.as_ref().unwrap_or_else(|| panic!("{} has no init segment", track.name));
        for resource in std::iter::once(init).chain(track.segments.iter().map(|s| &s.resource)) {
            let path = url::Url::parse(&resource.url).unwrap().path().to_string();
            assert_eq!(fetch_get(addr, &path, &[]).status, 200, "{}", resource.url);
        }
    }
}

/// Where each segment of a Representation's timeline starts, then where the last ends, in its
/// timescale's ticks; and the timescale.
fn timeline_ticks(rep: &Element) -> (u64, Vec<u64>) {
    let template = rep.one("SegmentTemplate");
    let timescale: u64 = template.attr("timescale").parse().unwrap();
    let timeline = template.one("SegmentTimeline");
    let mut at: u64 = timeline.all("S").next().unwrap().attr("t").parse().unwrap();
    let mut out = vec![at];
    for s in timeline.all("S") {
        let d: u64 = s.attr("d").parse().unwrap();
        let r: usize = s.attrs.get("r").map_or(0, |r| r.parse().unwrap());
        for _ in 0..=r {
            at += d;
            out.push(at);
        }
    }
    (timescale, out)
}

/// The samples of a `wvtt` media segment: (start ms, duration ms, payloads shown), checking the
/// boxes on the way (a `vttc` with a `payl` per cue, or one empty `vtte`).
fn text_samples(segment: &[u8]) -> Vec<(u64, u64, Vec<String>)> {
    let mut buf = segment;
    let moof = mp4_atom::Moof::decode(&mut buf).unwrap();
    assert_eq!(moof.traf.len(), 1);
    let traf = &moof.traf[0];
    let mut at = traf.tfdt.as_ref().unwrap().base_media_decode_time;
    let mut offset = usize::try_from(traf.trun[0].data_offset.unwrap()).unwrap();
    assert_eq!(&segment[offset - 4..offset], b"mdat");
    let mut out = Vec::new();
    for trun in &traf.trun {
        let mp4_atom::TrunSamples::Explicit(entries) = &trun.samples else { panic!("explicit trun entries") };
        for e in entries {
            let (duration, size) = (u64::from(e.duration.unwrap()), e.size.unwrap() as usize);
            let mut payloads = Vec::new();
            let mut sample = &segment[offset..offset + size];
            while !sample.is_empty() {
                let len = u32::from_be_bytes(sample[..4].try_into().unwrap()) as usize;
                match &sample[4..8] {
                    b"vtte" => assert_eq!((len, size), (8, 8), "an empty vtte alone"),
                    b"vttc" => {
                        let mut inner = &sample[8..len];
                        while !inner.is_empty() {
                            let l = u32::from_be_bytes(inner[..4].try_into().unwrap()) as usize;
                            if &inner[4..8] == b"payl" {
                                payloads.push(String::from_utf8(inner[8..l].to_vec()).unwrap());
                            }
                            inner = &inner[l..];
                        }
                    }
                    other => panic!("{:?} in a wvtt sample", String::from_utf8_lossy(other)),
                }
                sample = &sample[len..];
            }
            out.push((at, duration, payloads));
            at += duration;
            offset += size;
        }
    }
    assert_eq!(offset, segment.len(), "the samples fill the mdat");
    out
}

/// The MPD's text tracks: `wvtt` in fMP4 on the video's cuts (milliseconds), whose segments
/// tile time with each cue where it shows (split at the cuts), which ffprobe reads; the same for
/// a file's own MPD.
fn check_text_tracks(addr: std::net::SocketAddr, video: &Element, text: &[&Element]) {
    let (timescale, video_ticks) = timeline_ticks(video);
    let cuts: Vec<u64> = video_ticks.iter().map(|t| (t * 1000 + timescale / 2) / timescale).collect();
    for set in text {
        let lang = set.attr("lang");
        assert_eq!((set.attr("mimeType"), set.attr("codecs")), ("application/mp4", "wvtt"));
        assert_eq!(set.one("Role").attr("value"), "subtitle");
        let rep = set.one("Representation");
        let template = rep.one("SegmentTemplate");
        assert_eq!(template.attr("initialization"), format!("subtitles-{lang}-init.mp4"));
        assert_eq!(template.attr("media"), format!("subtitles-{lang}-seg-$Number$.m4s"));
        assert_eq!(timeline_ticks(rep), (1000, cuts.clone()), "{lang} on the video's cuts");
    }
    let init = ok(addr, "/films/movie.set/subtitles-fr-init.mp4");
    assert_eq!(init.header("content-type"), Some("application/mp4"));
    let mut buf = init.body.as_slice();
    mp4_atom::Ftyp::decode(&mut buf).unwrap();
    let moov = mp4_atom::Moov::decode(&mut buf).unwrap();
    assert_eq!(moov.trak[0].mdia.hdlr.handler, b"text".into());
    assert_eq!(moov.trak[0].mdia.mdhd.timescale, 1000);
    assert!(matches!(moov.trak[0].mdia.minf.stbl.stsd.codecs[0], mp4_atom::Codec::Wvtt(_)));
    // Every segment covers its stretch of time; merged, the stretches show each cue of the
    // file exactly when it shows (VTT_FR), split where it crosses a cut.
    let mut whole = init.body.clone();
    let mut shown: Vec<(String, u64, u64)> = Vec::new();
    let mut starts = Vec::new();
    for n in 0..cuts.len() - 1 {
        let segment = ok(addr, &format!("/films/movie.set/subtitles-fr-seg-{n}.m4s")).body;
        let samples = text_samples(&segment);
        assert_eq!(samples[0].0, cuts[n], "segment {n} starts at its cut");
        let end = samples.last().map(|(at, d, _)| at + d).unwrap();
        assert_eq!(end, cuts[n + 1], "segment {n} ends at the next cut");
        for (at, duration, payloads) in samples {
            starts.push(at);
            for payload in payloads {
                match shown.iter_mut().find(|(p, _, e)| *p == payload && *e == at) {
                    Some(stretch) => stretch.2 = at + duration,
                    None => shown.push((payload, at, at + duration)),
                }
            }
        }
        whole.extend_from_slice(&segment);
    }
    assert_eq!(shown, [("Bonjour".to_string(), 500, 2000), ("Monde".to_string(), 2000, 3500)]);
    let mut expected: Vec<u64> = cuts[..cuts.len() - 1].iter().copied().chain([500, 2000, 3500]).collect();
    expected.sort_unstable();
    expected.dedup();
    assert_eq!(starts, expected, "a sample at every cut and wherever a cue starts or ends");
    // ffprobe reads the init segment and the segments as one fragmented MP4: a wvtt track in
    // milliseconds, a packet at each sample's start. (FFmpeg 5.1 knows the sample entry but has
    // no codec for it, so it calls the stream data; later versions call it webvtt.)
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("subtitles-fr.mp4");
    std::fs::write(&path, &whole).unwrap();
    let mut probe = tool("ffprobe");
    probe.args(["-v", "error", "-show_entries", "stream=codec_type,codec_name,codec_tag_string,time_base"]);
    probe.args(["-show_entries", "packet=pts", "-of", "json"]).arg(&path);
    let (status, out, err) = run_bounded(&mut probe, Duration::from_secs(60));
    assert!(status.success() && err.is_empty(), "ffprobe: {}", String::from_utf8_lossy(&err));
    let probed: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let stream = &probed["streams"][0];
    assert_eq!(stream["codec_tag_string"], "wvtt", "{probed}");
    assert_eq!(stream["time_base"], "1/1000", "{probed}");
    let kind = (stream["codec_type"].as_str().unwrap(), stream["codec_name"].as_str().unwrap_or("unknown"));
    assert!(matches!(kind, ("subtitle", "webvtt") | ("data", "unknown")), "{probed}");
    let pts: Vec<u64> =
        probed["packets"].as_array().unwrap().iter().map(|p| p["pts"].as_u64().unwrap()).collect();
    assert_eq!(pts, expected, "{probed}");

    // A file's own MPD: its text track beside it, cut at its segments.
    let mpd = parse_mpd(&ok(addr, "/films/movie.240p.mp4/manifest.mpd").body_text());
    let period = mpd.one("Period");
    let text = period.all("AdaptationSet").find(|s| s.attr("contentType") == "text").unwrap();
    assert_eq!(text.attr("codecs"), "wvtt");
    let hello = text_samples(&ok(addr, "/films/movie.240p.mp4/subtitles-en-seg-1.m4s").body);
    assert_eq!(hello, [(1000, 1000, vec!["Hello".to_string()])]);
    ok(addr, "/films/movie.240p.mp4/subtitles-en-init.mp4");
    for missing in [
        "movie.set/subtitles-de-init.mp4",
        "movie.set/subtitles-fr-seg-8.m4s",
        "movie.240p.mp4/subtitles-fr-seg-99.m4s",
    ] {
        assert_eq!(fetch_get(addr, &format!("/films/{missing}"), &[]).status, 404, "{missing}");
    }
}

/// Each HLS playlist's `EXTINF`s are its track's own segment durations, those of the MPD's
/// timeline of that track (the audio's are not the video's), and its `EXT-X-TARGETDURATION` the
/// longest rounded (RFC 8216 §4.3.3.1); the subtitles follow the video.
fn check_playlist_durations(addr: std::net::SocketAddr, video: &Element, audio: &Element) {
    let seconds = |rep: &Element| {
        let (timescale, ticks) = timeline_ticks(rep);
        ticks.windows(2).map(|w| (w[1] - w[0]) as f64 / timescale as f64).collect::<Vec<f64>>()
    };
    let name = clips().set[0].0;
    for (playlist, expected) in [
        (format!("/films/{name}/video.m3u8"), seconds(video)),
        (format!("/films/{name}/audio.m3u8"), seconds(audio)),
        ("/films/movie.set/subtitles-en.m3u8".to_string(), seconds(video)),
    ] {
        let text = ok(addr, &playlist);
        let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(&text.body).unwrap() else {
            panic!("not a media playlist: {}", text.body_text())
        };
        let listed: Vec<f64> = p.segments.iter().map(|s| f64::from(s.duration)).collect();
        assert_eq!(listed.len(), expected.len(), "{playlist}");
        for (l, e) in listed.iter().zip(&expected) {
            assert!((l - e).abs() < 1e-5, "{playlist}: EXTINFs {listed:?}, timeline {expected:?}");
        }
        let longest = listed.iter().copied().fold(0.0, f64::max);
        assert_eq!(p.target_duration, longest.round() as u64, "{playlist}: {}", text.body_text());
    }
    // The audio's segments end on AAC frames (1,024 samples at 48 kHz), not on the video's cuts.
    assert!(seconds(audio).iter().zip(seconds(video)).any(|(a, v)| (a - v).abs() > 0.001));
}

/// An s3:// edge serves the set like a local root does.
fn an_edge_serves_a_set(engine: &[&str]) {
    let location = format!("dashedge/{}", common::edge::engine_tag(engine));
    for (path, bytes) in library_files().into_iter().filter(|(p, _)| p.contains("movie")) {
        common::edge::put_object(&location, &path, &bytes);
    }
    let cache = tempfile::tempdir().unwrap();
    let server = common::edge::start_edge(engine, &location, cache.path(), SEGMENT);
    check_set(server.addr());
    ffmpeg_decodes_quietly(&format!("http://{}/films/movie.set/manifest.mpd", server.addr()));
}

engine_matrix!(a_set_plays_over_hls_and_dash, an_edge_serves_a_set);

/// Presses Play on the page's rendition set with the player `via` chooses (the players start at
/// the top rendition and keep 2 s of buffer, so that what they fetch follows the network), and
/// waits (bounded) until 2 s have played on the top rendition: the player's state then.
const START_SET: &str = r#"(async (via) => {
  const v = document.getElementById('player');
  document.getElementById('via').value = via;
  window.sluiceHlsConfig = { maxBufferLength: 2, maxMaxBufferLength: 2, abrEwmaDefaultEstimate: 5e6 };
  window.sluiceDashSettings = { streaming: { buffer: { bufferTimeDefault: 2, bufferTimeAtTopQuality: 2,
    bufferTimeAtTopQualityLongForm: 2 }, abr: { initialBitrate: { video: 5000 } } } };
  // The end is the 'ended' event, or the last frame shown for a second: on a busy machine (CI's
  // two cores running two test programs) hls.js switching renditions at the last segment once
  // left Chromium at the duration without 'ended' (at 7.999999 of 7.999999, every frame played).
  window.sluiceEnded = new Promise((res, rej) => {
    let atEnd = 0;
    const poll = setInterval(() => {
      atEnd = isFinite(v.duration) && v.duration > 0 && v.currentTime >= v.duration - 0.01 ? atEnd + 1 : 0;
      if (atEnd >= 10) { done(); }
    }, 100);
    const t = setTimeout(() => { clearInterval(poll); rej(new Error('no end by 60 s, at ' + v.currentTime)); }, 60000);
    const done = () => { clearTimeout(t); clearInterval(poll); res(); };
    v.addEventListener('ended', done, { once: true });
  });
  window.sluiceEnded.catch(() => {});
  document.querySelector('li.set[data-name="movie"] button.play').click();
  await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error('not 2 s on the top rendition by 20 s: ' + JSON.stringify(window.sluicePlayer.state) + ' at ' + v.currentTime)), 20000);
    const on = () => { const s = window.sluicePlayer.state;
      if (v.currentTime >= 2 && s.playing >= 0 && s.heights[s.playing] === Math.max(...s.heights)) {
        clearTimeout(t); v.removeEventListener('timeupdate', on); res(); } };
    v.addEventListener('timeupdate', on);
  });
  return JSON.parse(JSON.stringify(window.sluicePlayer.state));
})"#;

/// Waits for the end; the player's state and what the video element says.
const FINISH_SET: &str = r#"(async () => {
  const v = document.getElementById('player');
  await window.sluiceEnded;
  const q = v.getVideoPlaybackQuality();
  const p = window.sluicePlayer;
  const segments = performance.getEntriesByType('resource').filter((e) => e.name.includes('seg-'))
    .map((e) => e.name.split('/').slice(-2).join('/') + ' ' + Math.round(e.duration) + 'ms');
  const text = Array.from(v.textTracks).map((t) => ({ lang: t.language, mode: t.mode,
    cues: Array.from(t.cues || []).map((c) => [c.startTime, c.endTime, c.text]) }));
  return { state: p.state, duration: v.duration, at: v.currentTime, frames: q.totalVideoFrames, segments, text,
           estimate: p.hls ? p.hls.bandwidthEstimate : null,
           error: v.error && v.error.code, tracks: document.getElementById('tracks').textContent };
})()"#;

/// Chromium plays the set to its end through hls.js and through dash.js, switching down a
/// rendition when DevTools throttles the network mid-play; both players list the subtitles and
/// show the first by default, each cue when the file says (dash.js from the `wvtt` segments).
/// One engine: the page and the players do not depend on it, and the segment bytes are proven on
/// every engine by ffmpeg above.
#[test]
fn chromium_plays_a_set_with_abr_over_hls_and_dash() {
    let _turn = common::browser::ONE_BROWSER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let fx = Fixture::new();
    for (path, bytes) in library_files() {
        fx.write(&path, &bytes);
    }
    let server = Server::serve(&["--engine", "epoll", "--workers", "2"], &fx, SEGMENT);
    let mut browser = common::browser::Browser::start();
    let page = format!("http://{}/films/", server.addr());
    browser.open_page(&page);
    for via in ["hls", "dash"] {
        browser.call("Page.navigate", serde_json::json!({ "url": page }));
        assert!(poll_until(IO_TIMEOUT, || browser
            .eval("document.readyState === 'complete' && !!document.querySelector('li.set')")
            == serde_json::json!(true)));
        browser.call("Network.enable", serde_json::json!({}));
        let unthrottled = serde_json::json!({ "offline": false, "latency": 0,
            "downloadThroughput": -1, "uploadThroughput": -1 });
        browser.call("Network.emulateNetworkConditions", unthrottled.clone());
        let started = browser.eval(&format!("{START_SET}('{via}')"));
        let top = started["playing"].as_i64().unwrap();
        // 25 KB/s: the top rendition (about 60 KB a second of video and audio) no longer fits,
        // the lowest (about 20 KB) does.
        browser.call(
            "Network.emulateNetworkConditions",
            serde_json::json!({ "offline": false, "latency": 50, "downloadThroughput": 25_000, "uploadThroughput": 25_000 }),
        );
        let r = browser.eval(FINISH_SET);
        browser.call("Network.emulateNetworkConditions", unthrottled);
        let state = &r["state"];
        assert_eq!(state["via"], serde_json::json!(via), "{r}");
        assert!(r["error"].is_null(), "no media error: {r}");
        let duration = r["duration"].as_f64().unwrap();
        assert!((duration - CLIP_SECS as f64).abs() < 0.3, "duration {duration}: {r}");
        assert!(r["at"].as_f64().unwrap() >= duration - 0.1, "played to the end: {r}");
        let heights: Vec<u64> =
            state["heights"].as_array().unwrap().iter().map(|h| h.as_u64().unwrap()).collect();
        let mut sorted = heights.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, [120, 180, 240], "three renditions listed: {r}");
        let top_height = heights[top as usize];
        let switches: Vec<u64> =
            state["switches"].as_array().unwrap().iter().filter_map(|h| h.as_u64()).collect();
        let after = &switches[started["switches"].as_array().unwrap().len()..];
        assert!(
            after.iter().any(|&h| h < top_height),
            "{via}: a switch down from {top_height}p once throttled: {r}"
        );
        let subtitles: Vec<&str> =
            state["subtitles"].as_array().unwrap().iter().filter_map(|s| s.as_str()).collect();
        assert_eq!(subtitles, ["en", "fr"], "{via} lists the subtitles: {r}");
        assert!(r["tracks"].as_str().unwrap().contains("Subtitles: en, fr"), "the page shows them: {r}");
        let showing: Vec<&serde_json::Value> =
            r["text"].as_array().unwrap().iter().filter(|t| t["mode"] == "showing").collect();
        assert_eq!(showing.len(), 1, "{via}: one subtitle track shown by default: {r}");
        assert_eq!(showing[0]["lang"], "en", "{via}: the first: {r}");
        // A cue split across segments may come back as several: together they span the file's.
        let cues = showing[0]["cues"].as_array().unwrap();
        for (text, start, end) in [("Hello", 0.5, 2.0), ("World", 2.0, 3.5)] {
            let spans: Vec<(f64, f64)> = cues
                .iter()
                .filter(|c| c[2] == text)
                .map(|c| (c[0].as_f64().unwrap(), c[1].as_f64().unwrap()))
                .collect();
            let first = spans.iter().map(|s| s.0).fold(f64::MAX, f64::min);
            let last = spans.iter().map(|s| s.1).fold(0.0, f64::max);
            assert!(
                (first - start).abs() < 0.05 && (last - end).abs() < 0.05,
                "{via}: {text} {spans:?}: {r}"
            );
        }
        eprintln!("{via}: {r}");
    }
}
