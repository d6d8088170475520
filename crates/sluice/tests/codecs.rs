//! HEVC (8-bit `hev1`, 10-bit `hvc1`), AV1 (10-bit, PQ), VP9, Opus, AC-3 and E-AC-3 over HLS
//! and DASH, on every engine: for MP4s ffmpeg makes here (2 s of 160x90 at 25 fps, a keyframe
//! a second), ffprobe reading the server's `master.m3u8` and `manifest.mpd` counts every video
//! frame it decodes and every audio packet ffprobe counts in the MP4, ffmpeg decodes both without a word
//! on stderr, and the `CODECS` and `codecs` the server announces are the strings this test
//! computes itself from what ffprobe reports (profile, level, pixel format, colour) and from the
//! configuration records' bytes ffprobe dumps, by a parser of its own. `/streams` lists them.
//! The same from an edge of an S3 store (SeaweedFS) holding the clips.
//! Over RTSP, ffmpeg's client (a receiver this project did not write) decodes every frame of the
//! HEVC (RFC 7798), Opus (RFC 7587) and AC-3 (RFC 4184) tracks from sluice's packets; AV1 and VP9
//! tracks are left out of the session (their `SETUP` is 404). E-AC-3 (RFC 4598) is sent, but no
//! receiver on this machine other than ours depacketizes it: ffmpeg's RTSP client reports an
//! `eac3` track as an unknown codec and GStreamer here has only `rtpac3depay` (RFC 4184). So this
//! test's own reader, written from RFC 4598, reassembles every E-AC-3 frame, which must be byte
//! for byte the stream ffmpeg copies out of the MP4: the clip's, whole frames a packet each, and a
//! 5.1 file's at 640 kb/s, in fragments, over TCP and over UDP. A rendition set of an H.264 file and an AV1 one (keyframes aligned)
//! is one master playlist with a variant each and one MPD with a video adaptation set each, and
//! ffmpeg decodes both.
//!
//! Expected numbers come from the files (ffprobe), never constants.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::time::Duration;

use common::codec_clips::clips;
use common::edge::{put_object, start_edge};
use common::*;
use serde_json::Value;

rtsp_matrix!(
    every_codec_over_hls_and_dash,
    an_edge_serves_every_codec,
    rtsp_sends_hevc_opus_and_ac_3,
    rtsp_sends_every_e_ac_3_frame,
    mixed_h264_and_av1_set
);

/// ffprobe's JSON for `target`: streams with frame and packet counts, and `extra` entries.
fn probe(target: &str, extra: &[&str]) -> Value {
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-rw_timeout", "10000000", "-of", "json", "-count_frames", "-count_packets"])
        .args(extra)
        .args(["-show_entries"])
        .arg(
            "stream=codec_type,codec_name,nb_read_frames,nb_read_packets,profile,level,pix_fmt,width,height,\
             sample_rate,r_frame_rate,color_primaries,color_transfer,color_space,color_range,extradata",
        )
        .arg(target);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(90));
    assert!(status.success(), "ffprobe {target}: {status}: {}", String::from_utf8_lossy(&err));
    serde_json::from_slice(&out).unwrap()
}

fn stream<'a>(info: &'a Value, kind: &str) -> &'a Value {
    info["streams"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["codec_type"] == kind)
        .unwrap_or_else(|| panic!("no {kind} stream in {info}"))
}

fn count(s: &Value, field: &str) -> u64 {
    s[field].as_str().unwrap_or_else(|| panic!("no {field} in {s}")).parse().unwrap()
}

/// The bytes of ffprobe's `-show_data` hex dump (`00000000: 0102 2000 ...  ascii`).
fn dump_bytes(dump: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for line in dump.lines().filter(|l| l.len() > 10) {
        let hex: String = line[10..].chars().take(40).filter(|c| !c.is_whitespace()).collect();
        for i in (0..hex.len() / 2 * 2).step_by(2) {
            out.push(u8::from_str_radix(&hex[i..i + 2], 16).unwrap());
        }
    }
    out
}

/// ISO/IEC 23091-2 code points of the names ffprobe gives.
fn code_point(name: &str) -> u8 {
    match name {
        "bt709" => 1,
        "bt2020" | "bt2020nc" => 9,
        "smpte2084" => 16,
        "arib-std-b67" => 18,
        other => panic!("no code point for {other}"),
    }
}

/// The codec string of the source's video, computed here: HEVC from its `hvcC` bytes (checked
/// against ffprobe's profile and level), AV1 and VP9 from ffprobe's fields.
fn expected_video_codecs(video: &Value, fps: f64) -> String {
    let bits = if video["pix_fmt"].as_str().unwrap().contains("10") { 10 } else { 8 };
    let profile = video["profile"].as_str().unwrap();
    let level = video["level"].as_i64().unwrap();
    match video["codec_name"].as_str().unwrap() {
        "hevc" => {
            let hvcc = dump_bytes(video["extradata"].as_str().unwrap());
            assert_eq!(hvcc[0], 1, "an hvcC");
            let idc = hvcc[1] & 0x1f;
            assert_eq!(idc, if profile == "Main 10" { 2 } else { 1 }, "profile {profile}");
            assert_eq!(i64::from(hvcc[12]), level);
            let compat = u32::from_be_bytes(hvcc[2..6].try_into().unwrap());
            let reversed =
                (0..32).filter(|i| compat & (1 << (31 - i)) != 0).fold(0u32, |acc, i| acc | 1 << i);
            let tier = if hvcc[1] & 0x20 != 0 { 'H' } else { 'L' };
            let mut s = format!("hvc1.{idc}.{reversed:X}.{tier}{level}");
            let constraints = &hvcc[6..12];
            let used = constraints.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
            for b in &constraints[..used] {
                s.push_str(&format!(".{b:X}"));
            }
            s
        }
        "av1" => {
            let av1c = dump_bytes(video["extradata"].as_str().unwrap());
            let p = match profile {
                "Main" => 0,
                "High" => 1,
                _ => 2,
            };
            let tier = if av1c[2] & 0x80 != 0 { 'H' } else { 'M' };
            let mut s = format!("av01.{p}.{level:02}{tier}.{bits:02}");
            if let Some(primaries) = video["color_primaries"].as_str() {
                let cp = code_point(primaries);
                let tc = code_point(video["color_transfer"].as_str().unwrap());
                let mc = code_point(video["color_space"].as_str().unwrap());
                let full = u8::from(video["color_range"] == "pc");
                s.push_str(&format!(".0.11{}.{cp:02}.{tc:02}.{mc:02}.{full}", av1c[2] & 3));
            }
            s
        }
        "vp9" => {
            let p: u8 = profile.trim_start_matches("Profile ").parse().unwrap();
            // VP9 levels by picture size and luma sample rate (the VP9 bitstream
            // specification, Annex A), the way ffmpeg's muxer picks one.
            let (w, h) = (video["width"].as_f64().unwrap(), video["height"].as_f64().unwrap());
            let levels =
                [(10, 36_864.0, 829_440.0), (11, 73_728.0, 2_764_800.0), (20, 122_880.0, 4_608_000.0)];
            let level =
                levels.iter().find(|(_, size, rate)| w * h <= *size && w * h * fps <= *rate).unwrap().0;
            format!("vp09.{p:02}.{level}.{bits:02}")
        }
        other => panic!("no codec string for {other}"),
    }
}

fn expected_audio_codecs(audio: &Value) -> &'static str {
    match audio["codec_name"].as_str().unwrap() {
        "opus" => "opus",
        "ac3" => "ac-3",
        "eac3" => "ec-3",
        other => panic!("no codec string for {other}"),
    }
}

fn every_codec_over_hls_and_dash(engine: &[&str]) {
    let fx = Fixture::new();
    for (name, bytes) in clips() {
        fx.write(name, bytes);
    }
    let server = Server::serve(engine, &fx, &["--hls-segment", "1s"]);
    check_every_clip(&server, &fx);
}

/// The same from an edge of an S3 store (SeaweedFS) holding the clips.
fn an_edge_serves_every_codec(engine: &[&str]) {
    static PUT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    PUT.get_or_init(|| {
        for (name, bytes) in clips() {
            put_object("codecedge/lib", name, bytes);
        }
    });
    // The local copies are what ffprobe reads as the source.
    let fx = Fixture::new();
    for (name, bytes) in clips() {
        fx.write(name, bytes);
    }
    let cache = tempfile::tempdir().unwrap();
    let server = start_edge(engine, "codecedge/lib", cache.path(), &["--hls-segment", "1s"]);
    check_every_clip(&server, &fx);
}

/// Each clip of `fx` over `server`'s HLS and DASH: the codec strings, ranges and Dolby channel
/// configuration announced, every frame there, decoded without a word; `/streams` lists them.
fn check_every_clip(server: &Server, fx: &Fixture) {
    let addr = server.addr();
    let streams = server.streams();
    for (name, _) in clips() {
        let source = probe(fx.path(name).to_str().unwrap(), &["-show_data"]);
        let (video, audio) = (stream(&source, "video"), stream(&source, "audio"));
        let rate: Vec<f64> =
            video["r_frame_rate"].as_str().unwrap().split('/').map(|n| n.parse().unwrap()).collect();
        let video_codecs = expected_video_codecs(video, rate[0] / rate[1]);
        let audio_codecs = expected_audio_codecs(audio);

        let master_url = format!("http://{addr}/{name}/master.m3u8");
        let master = fetch_get(addr, &format!("/{name}/master.m3u8"), &[]);
        master.expect_status(200, &master_url);
        let master = master.body_text();
        assert!(master.contains(&format!("CODECS=\"{video_codecs},{audio_codecs}\"")), "{name}: {master}");
        let pq = video["color_transfer"] == "smpte2084";
        assert_eq!(master.contains("VIDEO-RANGE=PQ"), pq, "{name}: {master}");
        let mpd_url = format!("http://{addr}/{name}/manifest.mpd");
        let mpd = fetch_get(addr, &format!("/{name}/manifest.mpd"), &[]).body_text();
        assert!(mpd.contains(&format!("codecs=\"{video_codecs}\"")), "{name}: {mpd}");
        assert!(mpd.contains(&format!("codecs=\"{audio_codecs}\"")), "{name}: {mpd}");
        assert_eq!(
            mpd.contains("urn:mpeg:mpegB:cicp:TransferCharacteristics\" value=\"16\""),
            pq,
            "{name}: {mpd}"
        );
        assert_eq!(
            mpd.contains("urn:dolby:dash:audio_channel_configuration:2011"),
            audio_codecs.contains('3')
        );
        assert!(streams.contains(&video_codecs) && streams.contains(audio_codecs), "/streams: {streams}");

        for url in [&master_url, &mpd_url] {
            // One stream at a time: reading both, ffmpeg's DASH demuxer stops a packet short of
            // the end of the audio (so it does for the H.264 and AAC demo file too).
            for (kind, select, field) in [("video", "v", "nb_read_frames"), ("audio", "a", "nb_read_packets")]
            {
                let served = probe(url, &["-select_streams", select]);
                assert_eq!(
                    count(stream(&served, kind), field),
                    count(stream(&source, kind), field),
                    "{kind} {field} of {url} and of the MP4"
                );
            }
            decodes_cleanly(url);
        }
    }
}

fn rtsp_sends_hevc_opus_and_ac_3(engine: &[&str]) {
    let fx = Fixture::new();
    for (name, bytes) in clips() {
        fx.write(name, bytes);
    }
    let server = Server::serve(engine, &fx, &[]);
    let rtsp = server.rtsp_addr();
    for (name, _) in clips() {
        let source = probe(fx.path(name).to_str().unwrap(), &[]);
        let url = format!("rtsp://{rtsp}/{name}");
        // ffmpeg's client has no E-AC-3 depacketizer: it sets up only the video of such a clip
        // (rtsp_sends_every_e_ac_3_frame counts the E-AC-3 frames with this test's own reader).
        let has_eac3 = source["streams"].as_array().unwrap().iter().any(|s| s["codec_name"] == "eac3");
        let media = if has_eac3 { "video" } else { "video+audio" };
        let mut cmd = tool("ffprobe");
        cmd.args(["-v", "error", "-rtsp_transport", "tcp", "-allowed_media_types", media])
            .args(["-of", "json", "-count_frames", "-show_entries"])
            .args(["stream=codec_type,codec_name,nb_read_frames", &url]);
        let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(90));
        let err = String::from_utf8_lossy(&err);
        assert!(status.success() && err.trim().is_empty(), "ffprobe {url}: {status}: {err}");
        let served: Value = serde_json::from_slice(&out).unwrap();
        // What RTSP sends and ffmpeg receives: HEVC (RFC 7798), Opus (RFC 7587) and AC-3
        // (RFC 4184); AV1 and VP9 are left out of the session.
        let sendable = |codec: &str| matches!(codec, "hevc" | "opus" | "ac3");
        let expected: Vec<(String, u64)> = source["streams"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| sendable(s["codec_name"].as_str().unwrap()))
            .map(|s| (s["codec_name"].as_str().unwrap().to_string(), count(s, "nb_read_frames")))
            .collect();
        let got: Vec<(String, u64)> = served["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["codec_name"].as_str().unwrap().to_string(), count(s, "nb_read_frames")))
            .collect();
        assert_eq!(got, expected, "every frame of each track RTSP sends, over {url}");
        let mut cmd = tool("ffmpeg");
        cmd.args(["-nostdin", "-v", "error", "-rtsp_transport", "tcp", "-allowed_media_types", media])
            .args(["-i", &url, "-f", "null", "-"]);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(90));
        let err = String::from_utf8_lossy(&err);
        assert!(status.success() && err.trim().is_empty(), "ffmpeg decoding {url}: {status}: {err}");
    }
    // The SETUP of a track left out of the session is refused.
    let mut c = common::rtsp::RtspConn::open(rtsp);
    let url = c.url("/vp9-opus.mp4");
    let r = c.request("DESCRIBE", &url, &[]);
    r.expect(200, "DESCRIBE of VP9 and Opus");
    let transport = [("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")];
    c.request("SETUP", &format!("{url}/trackID=0"), &transport).expect(404, "SETUP of the VP9 track");
}

/// RFC 4598 §4 read by this test alone: each packet's two-byte payload header (six zero bits,
/// the frame type FT, NF); FT 0 holds NF whole sync frames, each as long as its `frmsiz` says
/// (ETSI TS 102 366 E.1.2.1: 16-bit words minus one), the marker set; FT 1 a fragment, NF the
/// fragment count, the marker on the last. Returns the frames in order.
fn rfc4598_frames(packets: &[common::rtsp::Rtp]) -> Vec<Vec<u8>> {
    let (mut frames, mut partial, mut fragments) = (Vec::new(), Vec::new(), 0u8);
    for p in packets {
        let [head, nf, body @ ..] = p.payload.as_slice() else {
            panic!("packet {} has no payload header", p.seq)
        };
        assert_eq!(head >> 2, 0, "packet {}: bits that must be zero", p.seq);
        match head & 3 {
            0 => {
                assert!(p.marker && partial.is_empty() && *nf >= 1, "packet {}: whole frames", p.seq);
                let mut rest = body;
                for _ in 0..*nf {
                    assert_eq!(&rest[..2], [0x0b, 0x77], "packet {}: a sync word", p.seq);
                    let size = (usize::from(rest[2] & 7) << 8 | usize::from(rest[3])) * 2 + 2;
                    frames.push(rest[..size].to_vec());
                    rest = &rest[size..];
                }
                assert!(rest.is_empty(), "packet {}: NF frames fill the payload", p.seq);
            }
            1 => {
                fragments += 1;
                partial.extend_from_slice(body);
                assert_eq!(p.marker, fragments == *nf, "packet {}: the marker on the last fragment", p.seq);
                if p.marker {
                    frames.push(std::mem::take(&mut partial));
                    fragments = 0;
                }
            }
            other => panic!("packet {}: frame type {other}", p.seq),
        }
    }
    assert!(partial.is_empty(), "a frame's fragments cut short");
    frames
}

/// A 5.1 E-AC-3 file at 640 kb/s, audio only: 2560-byte frames, larger than a packet.
fn surround_e_ac_3() -> &'static Vec<u8> {
    static CLIP: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    CLIP.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("surround.mp4");
        let mut cmd = tool("ffmpeg");
        cmd.args([
            "-nostdin",
            "-v",
            "error",
            "-y",
            "-f",
            "lavfi",
            "-i",
            "sine=frequency=440:sample_rate=48000",
        ])
        .args(["-t", "2", "-ac", "6", "-c:a", "eac3", "-b:a", "640k"])
        .arg(&out);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(60));
        assert!(status.success(), "ffmpeg: {}", String::from_utf8_lossy(&err));
        std::fs::read(&out).unwrap()
    })
}

/// Every E-AC-3 frame of the HEVC clip's track (frames that fit a packet) and of a 5.1 file
/// (frames in fragments), over RTSP interleaved, read by [`rfc4598_frames`].
fn rtsp_sends_every_e_ac_3_frame(engine: &[&str]) {
    let (name, bytes) = clips().iter().find(|(n, _)| n.contains("eac3")).unwrap();
    let fx = Fixture::new();
    fx.write(name, bytes);
    fx.write("surround.mp4", surround_e_ac_3());
    let server = Server::serve(engine, &fx, &[]);
    let mut fragmented = 0;
    for (name, track) in [(*name, 1), ("surround.mp4", 0)] {
        let path = fx.path(name);
        let source = probe(path.to_str().unwrap(), &["-select_streams", "a"]);
        let expected_frames = count(stream(&source, "audio"), "nb_read_frames");
        let mut cmd = tool("ffmpeg");
        cmd.args(["-nostdin", "-v", "error", "-i"])
            .arg(&path)
            .args(["-map", "0:a", "-c", "copy", "-f", "eac3", "-"]);
        let (status, elementary, err) = run_bounded(&mut cmd, Duration::from_secs(60));
        assert!(status.success(), "ffmpeg copying the E-AC-3 out: {}", String::from_utf8_lossy(&err));

        let mut c = common::rtsp::RtspConn::open(server.rtsp_addr());
        let url = c.url(name);
        let r = c.request("DESCRIBE", &url, &[("Accept", "application/sdp")]);
        r.expect(200, "DESCRIBE");
        let sdp = String::from_utf8_lossy(&r.body).to_string();
        let rate = stream(&source, "audio")["sample_rate"].as_str().unwrap().to_string();
        assert!(sdp.contains(&format!("a=rtpmap:{} eac3/{rate}/", 96 + track)), "{sdp}");
        // The E-AC-3 track alone, on interleaved channels 0 and 1.
        let transport = [("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")];
        let r = c.request("SETUP", &format!("{url}/trackID={track}"), &transport);
        let session = r.expect(200, "SETUP of the E-AC-3 track").session_id().unwrap();
        c.request("PLAY", &url, &[("Session", &session)]).expect(200, "PLAY");
        // The clips last 2 s; the stream ends with an RTCP BYE.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut packets = Vec::new();
        loop {
            match c.next_frame(deadline) {
                Ok(Some(f)) if f.channel == 0 => packets.push(common::rtsp::parse_rtp(&f.payload).unwrap()),
                Ok(Some(f)) => {
                    let rtcp = common::rtsp::rtcp_packets(&f.payload).unwrap();
                    if rtcp.iter().any(|(kind, _)| *kind == 203) {
                        break;
                    }
                }
                other => panic!("{name}: the stream did not end with a BYE within 20 s: {other:?}"),
            }
        }
        assert!(
            packets.windows(2).all(|w| w[1].seq == w[0].seq.wrapping_add(1)),
            "{name}: consecutive sequence numbers"
        );
        let frames = rfc4598_frames(&packets);
        assert_eq!(frames.len() as u64, expected_frames, "{name}: every E-AC-3 frame of the MP4");
        assert!(frames.concat() == elementary, "{name}: the frames are the MP4's, byte for byte");
        // Each packet's timestamp advances by its frames' samples (1536 a frame of six blocks).
        let first = packets[0].timestamp;
        let mut sent = 0u32;
        for p in &packets {
            assert_eq!(p.timestamp.wrapping_sub(first), sent * 1536, "{name}: packet {}", p.seq);
            sent += if p.payload[0] & 3 == 0 { u32::from(p.payload[1]) } else { u32::from(p.marker) };
        }
        fragmented += packets.iter().filter(|p| p.payload[0] & 3 == 1).count();
        if track == 0 {
            // Over UDP too, where a frame's fragments leave together (one GSO message where the
            // engine has it): every frame, in order.
            let mut viewer =
                common::rtsp::UdpViewer::setup(server.rtsp_addr(), "127.0.0.1".parse().unwrap(), name)
                    .unwrap_or_else(|r| panic!("SETUP over UDP: {r:?}"));
            viewer.play();
            let arrived = || {
                let mut rtp: Vec<common::rtsp::Rtp> = viewer
                    .rtp
                    .datagrams()
                    .iter()
                    .map(|d| common::rtsp::parse_rtp(&d.data).unwrap())
                    .collect();
                // In sequence order (the first datagram is the first sent: loopback keeps order).
                let first = rtp.first().map_or(0, |p| p.seq);
                rtp.sort_by_key(|p| p.seq.wrapping_sub(first));
                rtp
            };
            let whole = |rtp: &[common::rtsp::Rtp]| {
                rtp.len() >= packets.len() && rtp.last().is_some_and(|p| p.marker)
            };
            assert!(
                poll_until(Duration::from_secs(20), || whole(&arrived())),
                "{name}: every packet over UDP"
            );
            let frames = rfc4598_frames(&arrived());
            assert_eq!(frames.len() as u64, expected_frames, "{name}: every E-AC-3 frame over UDP");
            assert!(frames.concat() == elementary, "{name}: the frames over UDP are the MP4's");
        }
    }
    assert!(fragmented > 0, "the 5.1 file's frames went in fragments");
}

fn mixed_h264_and_av1_set(engine: &[&str]) {
    static H264: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    let h264 = H264.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("movie.180p.mp4");
        let mut cmd = tool("ffmpeg");
        cmd.args(["-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x180:rate=25"])
            .args(["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "-t", "2"])
            .args([
                "-c:v",
                "libx264",
                "-preset",
                "ultrafast",
                "-g",
                "25",
                "-keyint_min",
                "25",
                "-sc_threshold",
                "0",
            ])
            .args(["-pix_fmt", "yuv420p", "-c:a", "aac", "-movflags", "+faststart"])
            .arg(&out);
        let (status, _, err) = run_bounded(&mut cmd, Duration::from_secs(120));
        assert!(status.success(), "ffmpeg: {}", String::from_utf8_lossy(&err));
        std::fs::read(&out).unwrap()
    });
    let av1 = &clips().iter().find(|(n, _)| n.starts_with("av1")).unwrap().1;
    let fx = Fixture::new();
    fx.write("movie.180p.mp4", h264);
    fx.write("movie.90p.mp4", av1);
    let server = Server::serve(engine, &fx, &["--hls-segment", "1s"]);
    let addr = server.addr();
    let master = fetch_get(addr, "/movie.set/master.m3u8", &[]);
    master.expect_status(200, "the set's master playlist");
    let master = master.body_text();
    let variants: Vec<&str> = master.lines().filter(|l| l.starts_with("#EXT-X-STREAM-INF")).collect();
    assert_eq!(variants.len(), 2, "{master}");
    assert!(variants[0].contains("CODECS=\"avc1.") && variants[1].contains("CODECS=\"av01."), "{master}");
    let mpd = fetch_get(addr, "/movie.set/manifest.mpd", &[]);
    mpd.expect_status(200, "the set's MPD");
    let mpd = mpd.body_text();
    assert_eq!(mpd.matches("contentType=\"video\"").count(), 2, "a video adaptation set per codec: {mpd}");
    for url in
        [format!("http://{addr}/movie.set/master.m3u8"), format!("http://{addr}/movie.set/manifest.mpd")]
    {
        let served = probe(&url, &["-select_streams", "v"]);
        let mut frames: Vec<u64> = served["streams"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["codec_type"] == "video")
            .map(|s| count(s, "nb_read_frames"))
            .collect();
        frames.sort_unstable();
        let mut expected: Vec<u64> = [h264, av1]
            .iter()
            .map(|b| {
                let file = sluice_media::Mp4File::from_bytes(b).unwrap();
                file.tracks.iter().find(|t| t.kind.is_video()).unwrap().samples.len() as u64
            })
            .collect();
        expected.sort_unstable();
        assert_eq!(frames, expected, "each rendition's frames over {url}");
        decodes_cleanly(&url);
    }
}
