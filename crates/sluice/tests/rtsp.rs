//! RTSP serving end to end, on every engine: clients we did not write (ffprobe, ffmpeg, and
//! `sluice load rtsp`) read the demo MP4 over RTSP/RTP (UDP and TCP interleaved)
//! to the end and count the frames the file has; a raw RTSP client checks the details no player
//! shows: `Range: npt=` seeks to the keyframe at or before the position, `RTP-Info` names the
//! first packet's sequence number and timestamp, PAUSE stops and PLAY resumes without loss,
//! TEARDOWN, the session timeout and a closed connection release the session (seen in
//! `/metrics`), and out-of-order, foreign, malformed and unsupported requests get the RTSP status
//! codes RFC 2326 gives them.
//!
//! The expected numbers (frame counts, keyframe times, codec parameters) come from ffprobe run on
//! the MP4 file itself, never from constants. Every wait is bounded and all traffic stays on
//! 127.0.0.1.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

// common's engine matrix covers HTTP send strategies; RTSP uses its own, `rtsp_matrix`.
#[allow(unused_macros)]
#[macro_use]
mod common;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use common::rtsp::*;
use common::*;
use sluice_load::rtsp::{RtspReport, RtspTransport};

rtsp_matrix!(
    ffprobe_reads_the_streams_over_rtsp,
    ffprobe_counts_every_video_frame_over_tcp,
    ffprobe_counts_every_video_frame_with_two_rtsp_loops,
    ffmpeg_reads_to_the_end_over_udp,
    ffmpeg_reads_to_the_end_over_tcp,
    describe_returns_the_sdp_of_the_mp4,
    play_with_range_seeks_to_the_keyframe_before,
    pause_stops_sending_and_play_resumes_without_loss,
    teardown_releases_the_session,
    session_timeout_releases_a_silent_udp_session,
    closing_the_connection_releases_its_interleaved_session,
    out_of_order_and_foreign_requests_get_rtsp_errors,
    unsupported_transports_get_461,
    malformed_requests_get_400_and_unknown_paths_404,
    fifty_viewers_over_tcp_get_every_sample,
    fifty_viewers_over_udp_get_every_sample,
);

const DEMO_NAME: &str = "sluice-demo.mp4";
/// A second copy in a subdirectory, with a space in its name (percent-encoded in the URL).
const NESTED_NAME: &str = "films/second clip.mp4";
const NESTED_URL_PATH: &str = "films/second%20clip.mp4";

fn demo_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sluice-server/demo/sluice-demo.mp4")
}

/// The fixture library plus the demo MP4 at its top, a copy in a subdirectory, and a copy
/// outside the root (beside the canary) that no URL may reach.
fn demo_library() -> Fixture {
    let fx = Fixture::new();
    let demo = std::fs::read(demo_path()).expect("read the demo MP4");
    fx.write(DEMO_NAME, &demo);
    fx.write(NESTED_NAME, &demo);
    std::fs::write(fx.base.join("outside.mp4"), &demo).unwrap();
    fx
}

// ---------------------------------------------------------------------------------------------
// What the file holds, by ffprobe
// ---------------------------------------------------------------------------------------------

/// A video packet of the file, in decode order.
#[derive(Debug, Clone, Copy)]
struct VideoPacket {
    pts: f64,
    key: bool,
}

/// Facts about the demo MP4, from ffprobe on the file.
#[derive(Debug)]
struct Media {
    /// Video frames ffprobe counts by decoding (`-count_frames`).
    video_frames: u64,
    /// Audio frames (packets) of the AAC track.
    audio_frames: u64,
    /// Video packets in decode order.
    packets: Vec<VideoPacket>,
    duration: f64,
    video: serde_json::Value,
    audio: serde_json::Value,
}

impl Media {
    /// Presentation time of the keyframe at or before `t`.
    fn keyframe_at_or_before(&self, t: f64) -> f64 {
        self.packets
            .iter()
            .filter(|p| p.key && p.pts <= t + 1e-9)
            .map(|p| p.pts)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// Presentation times, in decode order, of the packets from the keyframe at `key` on.
    fn pts_from_keyframe(&self, key: f64) -> Vec<f64> {
        let i = self
            .packets
            .iter()
            .position(|p| p.key && (p.pts - key).abs() < 1e-6)
            .unwrap_or_else(|| panic!("no keyframe at {key} in {:?}", self.packets));
        self.packets[i..].iter().map(|p| p.pts).collect()
    }
}

fn ffprobe_json(args: &[&str], target: &str) -> serde_json::Value {
    let mut cmd = Command::new(require_tool("ffprobe", "ffmpeg"));
    cmd.args(["-v", "error", "-of", "json"]).args(args).arg(target);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "ffprobe {args:?} {target}: {status}: {}", String::from_utf8_lossy(&err));
    serde_json::from_slice(&out).unwrap_or_else(|e| panic!("ffprobe {args:?} {target}: bad JSON: {e}"))
}

fn num(v: &serde_json::Value, what: &str) -> f64 {
    match v {
        serde_json::Value::Number(n) => n.as_f64().unwrap(),
        serde_json::Value::String(s) => s.parse().unwrap_or_else(|_| panic!("{what}: {s:?} is not a number")),
        other => panic!("{what}: {other} is not a number"),
    }
}

fn media() -> &'static Media {
    static MEDIA: OnceLock<Media> = OnceLock::new();
    MEDIA.get_or_init(|| {
        let file = demo_path();
        let file = file.to_str().unwrap();
        let info = ffprobe_json(&["-show_streams", "-show_format"], file);
        let streams = info["streams"].as_array().expect("streams").clone();
        let find = |kind: &str| {
            streams
                .iter()
                .find(|s| s["codec_type"] == kind)
                .unwrap_or_else(|| panic!("the demo has no {kind} stream: {info}"))
                .clone()
        };
        let (video, audio) = (find("video"), find("audio"));
        let counted = ffprobe_json(
            &["-count_frames", "-select_streams", "v:0", "-show_entries", "stream=nb_read_frames"],
            file,
        );
        let video_frames = num(&counted["streams"][0]["nb_read_frames"], "nb_read_frames") as u64;
        let audio_frames = num(&audio["nb_frames"], "audio nb_frames") as u64;
        let pk = ffprobe_json(
            &["-show_packets", "-select_streams", "v:0", "-show_entries", "packet=pts_time,flags"],
            file,
        );
        let packets: Vec<VideoPacket> = pk["packets"]
            .as_array()
            .expect("packets")
            .iter()
            .map(|p| VideoPacket {
                pts: num(&p["pts_time"], "pts_time"),
                key: p["flags"].as_str().unwrap_or("").contains('K'),
            })
            .collect();
        assert_eq!(packets.len() as u64, video_frames, "packets and frames of the demo");
        assert!(packets.iter().filter(|p| p.key).count() >= 2, "the demo has several keyframes");
        let duration = num(&info["format"]["duration"], "duration");
        Media { video_frames, audio_frames, packets, duration, video, audio }
    })
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn rtsp_url(server: &Server, path: &str) -> String {
    format!("rtsp://{}/{path}", server.rtsp_addr())
}

fn scrape(server: &Server) -> String {
    server.scrape()
}

const SESSIONS: &str = "sluice_rtsp_sessions";
const CREATED: &str = "sluice_rtsp_sessions_created_total";
const REQUESTS: &str = "sluice_rtsp_requests_total";
const RTP_PACKETS: &str = "sluice_rtp_packets_sent_total";
const RTP_BYTES: &str = "sluice_rtp_bytes_sent_total";
const FRAMES_DROPPED: &str = "sluice_rtp_frames_dropped_total";
const PACKETS_DROPPED: &str = "sluice_rtp_packets_dropped_total";
const LATE_SENDS: &str = "sluice_rtp_late_sends_total";

fn released(reason: &str) -> String {
    format!("sluice_rtsp_sessions_released_total{{reason=\"{reason}\"}}")
}

/// A media section of an SDP.
#[derive(Debug)]
struct SdpMedia {
    kind: String,
    payload_type: u8,
    attrs: Vec<(String, String)>,
}

impl SdpMedia {
    fn attr(&self, name: &str) -> Option<&str> {
        self.attrs.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The value of `a=NAME:<pt> VALUE` for this section's payload type.
    fn pt_attr(&self, name: &str) -> Option<&str> {
        let v = self.attr(name)?;
        let (pt, rest) = v.split_once(' ')?;
        (pt.parse::<u8>().ok()? == self.payload_type).then_some(rest.trim())
    }

    /// `key=value` parameters of the fmtp line.
    fn fmtp(&self) -> HashMap<String, String> {
        self.pt_attr("fmtp")
            .unwrap_or("")
            .split(';')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect()
    }
}

#[derive(Debug)]
struct Sdp {
    session: Vec<String>,
    media: Vec<SdpMedia>,
}

fn parse_sdp(text: &str) -> Sdp {
    let mut sdp = Sdp { session: Vec::new(), media: Vec::new() };
    for line in text.lines().map(str::trim_end).filter(|l| !l.is_empty()) {
        if let Some(m) = line.strip_prefix("m=") {
            let f: Vec<&str> = m.split_whitespace().collect();
            assert!(f.len() >= 4, "bad m= line {line:?} in\n{text}");
            sdp.media.push(SdpMedia {
                kind: f[0].to_string(),
                payload_type: f[3].parse().unwrap_or_else(|_| panic!("bad payload type in {line:?}")),
                attrs: Vec::new(),
            });
        } else if let (Some(a), Some(m)) = (line.strip_prefix("a="), sdp.media.last_mut()) {
            let (n, v) = a.split_once(':').unwrap_or((a, ""));
            m.attrs.push((n.to_string(), v.to_string()));
        } else {
            sdp.session.push(line.to_string());
        }
    }
    sdp
}

/// A track as DESCRIBE gave it.
#[derive(Debug, Clone)]
struct TrackInfo {
    url: String,
    control: String,
    payload_type: u8,
    clock: u32,
}

/// The presentation's URL, the SDP, and its video and audio tracks.
struct Described {
    url: String,
    sdp: Sdp,
    video: TrackInfo,
    audio: TrackInfo,
}

/// DESCRIBE `path`; resolves each track's control URL against Content-Base.
#[track_caller]
fn describe(c: &mut RtspConn, path: &str) -> Described {
    let url = c.url(path);
    let r = c.request("DESCRIBE", &url, &[("Accept", "application/sdp")]);
    r.expect(200, &format!("DESCRIBE {url}"));
    assert_eq!(r.header("content-type"), Some("application/sdp"), "DESCRIBE Content-Type:\n{r:?}");
    let base = r.header("content-base").map_or_else(|| format!("{url}/"), str::to_string);
    assert!(base.ends_with('/'), "Content-Base must end in '/' for relative controls:\n{r:?}");
    let sdp = parse_sdp(&r.body_text());
    let track = |kind: &str| {
        let m = sdp
            .media
            .iter()
            .find(|m| m.kind == kind)
            .unwrap_or_else(|| panic!("no m={kind} in the SDP:\n{}", r.body_text()));
        let control = m.attr("control").unwrap_or_else(|| panic!("m={kind} without a=control")).to_string();
        let rtpmap = m.pt_attr("rtpmap").unwrap_or_else(|| panic!("m={kind} without a=rtpmap"));
        let clock = rtpmap.split('/').nth(1).and_then(|c| c.parse().ok()).expect("clock rate in rtpmap");
        let url = if control.starts_with("rtsp://") { control.clone() } else { format!("{base}{control}") };
        TrackInfo { url, control, payload_type: m.payload_type, clock }
    };
    let (video, audio) = (track("video"), track("audio"));
    Described { url, sdp, video, audio }
}

/// What a SETUP answered.
#[derive(Debug)]
struct SetUp {
    session: String,
    timeout: Option<u64>,
    transport: String,
    ssrc: Option<u32>,
}

fn ssrc_of(transport: &str) -> Option<u32> {
    param(transport, "ssrc").map(|s| u32::from_str_radix(&s, 16).expect("ssrc is hex"))
}

#[track_caller]
fn setup(c: &mut RtspConn, track_url: &str, session: Option<&str>, transport: &str) -> SetUp {
    let mut headers = vec![("Transport", transport)];
    if let Some(s) = session {
        headers.push(("Session", s));
    }
    let r = c.request("SETUP", track_url, &headers);
    r.expect(200, &format!("SETUP {track_url} ({transport})"));
    let id = r.session_id().unwrap_or_else(|| panic!("SETUP without a Session header:\n{r:?}"));
    assert!(!id.is_empty(), "empty session id:\n{r:?}");
    if let Some(s) = session {
        assert_eq!(id, s, "SETUP of a second track keeps the session:\n{r:?}");
    }
    let t = r.header("transport").unwrap_or_else(|| panic!("SETUP without a Transport header:\n{r:?}"));
    SetUp { session: id, timeout: r.session_timeout(), transport: t.to_string(), ssrc: ssrc_of(t) }
}

/// SETUP over TCP interleaved on `channels`; checks the reply confirms them.
#[track_caller]
fn setup_tcp(c: &mut RtspConn, track_url: &str, session: Option<&str>, channels: (u8, u8)) -> SetUp {
    let s = setup(
        c,
        track_url,
        session,
        &format!("RTP/AVP/TCP;unicast;interleaved={}-{}", channels.0, channels.1),
    );
    assert!(s.transport.starts_with("RTP/AVP/TCP"), "{s:?}");
    assert_eq!(
        param(&s.transport, "interleaved").as_deref().and_then(pair),
        Some((u16::from(channels.0), u16::from(channels.1))),
        "the channels asked for, when free, are the ones used: {s:?}"
    );
    s
}

/// RTP packets and RTCP packet types received on interleaved channels.
#[derive(Default)]
struct Received {
    rtp: HashMap<u8, Vec<(Instant, Rtp)>>,
    rtcp: HashMap<u8, Vec<Vec<(u8, u32)>>>,
}

impl Received {
    /// Files a frame: even channels carry RTP, odd ones RTCP (as set up here).
    fn add(&mut self, f: Frame) {
        if f.channel.is_multiple_of(2) {
            let p = parse_rtp(&f.payload).unwrap_or_else(|e| panic!("channel {}: {e}", f.channel));
            self.rtp.entry(f.channel).or_default().push((f.at, p));
        } else {
            let types = rtcp_packets(&f.payload).unwrap_or_else(|e| panic!("channel {}: {e}", f.channel));
            self.rtcp.entry(f.channel).or_default().push(types);
        }
    }

    fn packets(&self, channel: u8) -> Vec<&Rtp> {
        self.rtp.get(&channel).map(|v| v.iter().map(|(_, p)| p).collect()).unwrap_or_default()
    }

    fn has_bye(&self, channel: u8) -> bool {
        self.rtcp.get(&channel).is_some_and(|v| v.iter().flatten().any(|(t, _)| *t == 203))
    }

    fn rtcp_of(&self, channel: u8, kind: u8) -> Vec<u32> {
        self.rtcp
            .get(&channel)
            .map(|v| v.iter().flatten().filter(|(t, _)| *t == kind).map(|(_, s)| *s).collect())
            .unwrap_or_default()
    }

    /// Reads frames until `done` or `deadline`.
    fn read_until(&mut self, c: &mut RtspConn, deadline: Instant, mut done: impl FnMut(&Received) -> bool) {
        while !done(self) {
            match c.next_frame(deadline) {
                Ok(Some(f)) => self.add(f),
                Ok(None) => return,
                Err(e) => panic!("reading interleaved frames: {e}"),
            }
        }
    }
}

/// A video access unit: its packets' timestamp, the NAL types that start in it, when its last
/// packet arrived.
#[derive(Debug)]
struct AccessUnit {
    timestamp: u32,
    nal_types: Vec<u8>,
    packets: usize,
    complete_at: Option<Instant>,
}

/// Groups video packets into access units (the marker bit ends one; RFC 6184 §5.1).
fn access_units(packets: &[(Instant, Rtp)]) -> Vec<AccessUnit> {
    let mut aus: Vec<AccessUnit> = Vec::new();
    let mut open = false;
    for (at, p) in packets {
        let types = h264_nal_types(&p.payload).unwrap_or_else(|e| panic!("packet seq {}: {e}", p.seq));
        if open {
            let au = aus.last_mut().unwrap();
            assert_eq!(
                au.timestamp, p.timestamp,
                "packet seq {} changes the timestamp inside an access unit (the previous packet had no marker)",
                p.seq
            );
            au.nal_types.extend(types);
            au.packets += 1;
        } else {
            aus.push(AccessUnit { timestamp: p.timestamp, nal_types: types, packets: 1, complete_at: None });
        }
        open = !p.marker;
        if p.marker {
            aus.last_mut().unwrap().complete_at = Some(*at);
        }
    }
    aus
}

/// Asserts sequence numbers go up by one from packet to packet.
#[track_caller]
fn assert_contiguous(packets: &[&Rtp], what: &str) {
    for w in packets.windows(2) {
        assert_eq!(
            w[1].seq,
            w[0].seq.wrapping_add(1),
            "{what}: sequence numbers jump from {} to {} (lost, repeated or reordered packets)",
            w[0].seq,
            w[1].seq
        );
    }
}

/// `a` − `b` of two RTP timestamps, as a signed difference.
fn ts_diff(a: u32, b: u32) -> i64 {
    i64::from(a.wrapping_sub(b) as i32)
}

// ---------------------------------------------------------------------------------------------
// Clients we did not write
// ---------------------------------------------------------------------------------------------

fn ffprobe_reads_the_streams_over_rtsp(engine: &[&str]) {
    let m = media();
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let url = rtsp_url(&server, DEMO_NAME);
    // ffprobe's own choice of transport (UDP first).
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-timeout", "5000000", "-of", "json"])
        .args([
            "-show_entries",
            "stream=codec_type,codec_name,profile,level,width,height,sample_rate,channels",
        ])
        .arg(&url);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&err);
    assert!(status.success(), "ffprobe {url} failed ({status}): {stderr}");
    assert!(stderr.trim().is_empty(), "ffprobe reported errors reading {url}: {stderr}");
    let info: serde_json::Value = serde_json::from_slice(&out).expect("ffprobe JSON");
    let streams = info["streams"].as_array().expect("streams");
    assert_eq!(streams.len(), 2, "one video and one audio stream over RTSP: {info}");
    let got = |kind: &str| {
        streams
            .iter()
            .find(|s| s["codec_type"] == kind)
            .unwrap_or_else(|| panic!("no {kind} over RTSP: {info}"))
    };
    let (v, a) = (got("video"), got("audio"));
    assert_eq!(v["codec_name"], "h264", "{info}");
    assert_eq!(a["codec_name"], "aac", "{info}");
    for key in ["profile", "level", "width", "height"] {
        assert_eq!(v[key], m.video[key], "video {key} over RTSP vs the file: {info}");
    }
    for key in ["profile", "sample_rate", "channels"] {
        assert_eq!(a[key], m.audio[key], "audio {key} over RTSP vs the file: {info}");
    }
}

fn ffprobe_counts_every_video_frame_over_tcp(engine: &[&str]) {
    ffprobe_counts_every_video_frame(engine, "tcp", &[]);
}

/// With two RTSP loops, ffprobe (whose connection either loop may accept, and hand to the one
/// its address belongs to) still counts every frame, over UDP and over TCP.
fn ffprobe_counts_every_video_frame_with_two_rtsp_loops(engine: &[&str]) {
    for transport in ["udp", "tcp"] {
        ffprobe_counts_every_video_frame(engine, transport, &["--rtsp-loops", "2"]);
    }
}

/// ffprobe decodes every video frame of the demo over RTSP with `transport`, from a server
/// started with `extra`.
fn ffprobe_counts_every_video_frame(engine: &[&str], transport: &str, extra: &[&str]) {
    let m = media();
    let fx = demo_library();
    let server = Server::serve(engine, &fx, extra);
    let url = rtsp_url(&server, DEMO_NAME);
    let mut cmd = tool("ffprobe");
    cmd.args(["-v", "error", "-rtsp_transport", transport, "-timeout", "5000000", "-count_frames"])
        .args(["-select_streams", "v:0", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"])
        .arg(&url);
    let started = Instant::now();
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out);
    let stderr = String::from_utf8_lossy(&err);
    assert!(status.success(), "ffprobe {url} failed ({status}): {stderr}");
    assert!(stderr.trim().is_empty(), "ffprobe reported errors reading {url} over {transport}: {stderr}");
    assert_eq!(
        stdout.trim().trim_end_matches(','),
        m.video_frames.to_string(),
        "video frames ffprobe counts over RTSP/{transport} {extra:?} vs in the file (stderr: {stderr})"
    );
    // Paced in real time: the whole file cannot arrive much faster than it plays.
    assert!(took.as_secs_f64() > m.duration - 1.5, "{} s of media read in {took:?}", m.duration);
}

/// ffmpeg decodes the video of the demo over RTSP to the end; returns the frames it counted.
fn ffmpeg_reads_to_the_end(engine: &[&str], transport: &str) {
    let m = media();
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let url = rtsp_url(&server, DEMO_NAME);
    let mut cmd = tool("ffmpeg");
    cmd.args(["-nostdin", "-hide_banner", "-nostats", "-v", "error"])
        .args(["-rtsp_transport", transport, "-timeout", "5000000", "-i"])
        .arg(&url)
        .args(["-map", "0:v", "-fps_mode", "passthrough", "-f", "null", "-progress", "pipe:1", "-"]);
    let started = Instant::now();
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(60));
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out);
    let stderr = String::from_utf8_lossy(&err);
    assert!(status.success(), "ffmpeg over {transport} failed ({status}): {stderr}");
    assert!(stderr.trim().is_empty(), "ffmpeg reported errors reading {url} over {transport}:\n{stderr}");
    assert!(
        stdout.lines().any(|l| l.trim() == "progress=end"),
        "ffmpeg's progress never reached the end:\n{stdout}"
    );
    let frames: u64 = stdout
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix("frame="))
        .unwrap_or_else(|| panic!("no frame= in ffmpeg's progress:\n{stdout}"))
        .trim()
        .parse()
        .expect("frame= is a number");
    assert_eq!(frames, m.video_frames, "video frames ffmpeg decoded over RTSP/{transport} vs in the file");
    assert!(took.as_secs_f64() > m.duration - 1.5, "{} s of media read in {took:?}", m.duration);
    // Nothing was dropped for a reader that keeps up.
    let text = scrape(&server);
    assert_eq!(metric(&text, FRAMES_DROPPED), 0, "frames dropped for ffmpeg over {transport}");
    assert_eq!(metric(&text, PACKETS_DROPPED), 0, "packets dropped for ffmpeg over {transport}");
}

fn ffmpeg_reads_to_the_end_over_udp(engine: &[&str]) {
    ffmpeg_reads_to_the_end(engine, "udp");
}

fn ffmpeg_reads_to_the_end_over_tcp(engine: &[&str]) {
    ffmpeg_reads_to_the_end(engine, "tcp");
}

// ---------------------------------------------------------------------------------------------
// DESCRIBE
// ---------------------------------------------------------------------------------------------

fn base64_decode(s: &str) -> Vec<u8> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.trim().bytes().filter(|&c| c != b'=') {
        let v = ALPHABET.iter().position(|&a| a == c).unwrap_or_else(|| panic!("{s:?} is not base64"));
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    out
}

fn hex_decode(s: &str) -> Vec<u8> {
    assert!(s.len().is_multiple_of(2), "{s:?}: odd number of hex digits");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap_or_else(|_| panic!("{s:?} is not hex")))
        .collect()
}

/// profile_idc of an H.264 profile as ffprobe names it.
fn profile_idc(name: &str) -> u8 {
    match name {
        "Baseline" | "Constrained Baseline" => 66,
        "Main" => 77,
        "Extended" => 88,
        "High" => 100,
        "High 10" => 110,
        "High 4:2:2" => 122,
        "High 4:4:4 Predictive" => 244,
        other => panic!("unknown H.264 profile {other:?}"),
    }
}

fn describe_returns_the_sdp_of_the_mp4(engine: &[&str]) {
    let m = media();
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = RtspConn::open(server.rtsp_addr());
    let r = c.request("OPTIONS", &c.url(DEMO_NAME), &[]);
    r.expect(200, "OPTIONS");
    let d = describe(&mut c, DEMO_NAME);
    let text = || format!("{:#?}", d.sdp);
    assert_eq!(d.sdp.session.first().map(String::as_str), Some("v=0"), "{}", text());
    assert_eq!(d.sdp.media.len(), 2, "one media section per track: {}", text());
    assert_ne!(d.video.control, d.audio.control, "{}", text());
    assert_ne!(d.video.payload_type, d.audio.payload_type, "{}", text());
    assert!((96..=127).contains(&d.video.payload_type), "dynamic payload types: {}", text());
    // The presentation's length.
    if let Some(range) = d.sdp.session.iter().find_map(|l| l.strip_prefix("a=range:")) {
        let (start, end) = npt_range(range).unwrap();
        assert_eq!(start, 0.0, "{range}");
        let end = end.unwrap_or_else(|| panic!("a=range without an end: {range}"));
        assert!((end - m.duration).abs() < 0.05, "a=range {range} vs the file's {} s", m.duration);
    }

    // H.264 (RFC 6184 §8.2): the parameter sets of the file, and a profile-level-id that agrees
    // with its SPS and with what ffprobe reads in the file.
    let video = d.sdp.media.iter().find(|s| s.kind == "video").unwrap();
    assert_eq!(
        video.pt_attr("rtpmap").map(str::to_ascii_uppercase).as_deref(),
        Some("H264/90000"),
        "{}",
        text()
    );
    assert_eq!(d.video.clock, 90_000);
    let fmtp = video.fmtp();
    assert_eq!(fmtp.get("packetization-mode").map(String::as_str), Some("1"), "{}", text());
    let sets: Vec<Vec<u8>> = fmtp
        .get("sprop-parameter-sets")
        .unwrap_or_else(|| panic!("no sprop-parameter-sets: {}", text()))
        .split(',')
        .map(base64_decode)
        .collect();
    let sps = sets.iter().find(|s| s.first().map(|b| b & 0x1f) == Some(7)).expect("an SPS in sprop");
    assert!(sets.iter().any(|s| s.first().map(|b| b & 0x1f) == Some(8)), "a PPS in sprop: {}", text());
    assert!(sps.len() >= 4, "SPS {sps:02x?}");
    let pli =
        hex_decode(fmtp.get("profile-level-id").unwrap_or_else(|| panic!("no profile-level-id: {}", text())));
    assert_eq!(pli, sps[1..4], "profile-level-id is the SPS's profile, constraints and level");
    assert_eq!(pli[0], profile_idc(m.video["profile"].as_str().unwrap()), "profile_idc vs the file");
    assert_eq!(u64::from(pli[2]), m.video["level"].as_u64().unwrap(), "level_idc vs the file");

    // AAC (RFC 3640 AAC-hbr) with the file's AudioSpecificConfig.
    let audio = d.sdp.media.iter().find(|s| s.kind == "audio").unwrap();
    let rate: u32 = m.audio["sample_rate"].as_str().unwrap().parse().unwrap();
    let channels = m.audio["channels"].as_u64().unwrap();
    let rtpmap = audio.pt_attr("rtpmap").unwrap().to_ascii_uppercase();
    assert!(
        rtpmap == format!("MPEG4-GENERIC/{rate}/{channels}")
            || (channels == 1 && rtpmap == format!("MPEG4-GENERIC/{rate}")),
        "audio rtpmap {rtpmap:?} for {rate} Hz, {channels} channels"
    );
    assert_eq!(d.audio.clock, rate, "the AAC RTP clock is the sampling rate");
    let fmtp = audio.fmtp();
    for (k, v) in [("mode", "AAC-hbr"), ("sizelength", "13"), ("indexlength", "3"), ("indexdeltalength", "3")]
    {
        assert_eq!(fmtp.get(k).map(String::as_str), Some(v), "fmtp {k}: {}", text());
    }
    let config = hex_decode(fmtp.get("config").unwrap_or_else(|| panic!("no config: {}", text())));
    assert!(config.len() >= 2, "config {config:02x?}");
    let object_type = config[0] >> 3;
    let freq_index = ((config[0] & 7) << 1) | (config[1] >> 7);
    let channel_config = (config[1] >> 3) & 0xf;
    const RATES: [u32; 13] =
        [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350];
    assert_eq!(m.audio["profile"], "LC", "the demo's AAC is LC");
    assert_eq!(object_type, 2, "AudioSpecificConfig object type (AAC LC) in {config:02x?}");
    assert_eq!(RATES.get(usize::from(freq_index)), Some(&rate), "sampling frequency index in {config:02x?}");
    assert_eq!(u64::from(channel_config), channels, "channel configuration in {config:02x?}");

    // Every MP4 of the library: a nested path with a space, percent-encoded.
    let nested = describe(&mut c, NESTED_URL_PATH);
    assert_eq!(nested.sdp.media.len(), 2);
    let s = setup_tcp(&mut c, &nested.video.url, None, (0, 1));
    c.request("TEARDOWN", &nested.url, &[("Session", &s.session)]).expect(200, "TEARDOWN nested");
}

// ---------------------------------------------------------------------------------------------
// PLAY: seeking, RTP-Info, timestamps, pacing
// ---------------------------------------------------------------------------------------------

fn play_with_range_seeks_to_the_keyframe_before(engine: &[&str]) {
    let m = media();
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut c, DEMO_NAME);
    let v = setup_tcp(&mut c, &d.video.url, None, (0, 1));
    let a = setup_tcp(&mut c, &d.audio.url, Some(&v.session), (2, 3));
    let (v_ssrc, a_ssrc) =
        (v.ssrc.expect("ssrc= in the video Transport"), a.ssrc.expect("ssrc= in the audio Transport"));

    let seek = 2.5;
    let key = m.keyframe_at_or_before(seek);
    let expected_pts = m.pts_from_keyframe(key);
    let r = c.request("PLAY", &d.url, &[("Session", &v.session), ("Range", &format!("npt={seek}-"))]);
    let played_at = Instant::now();
    r.expect(200, "PLAY with Range: npt=2.5-");
    assert_eq!(r.session_id().as_deref(), Some(v.session.as_str()), "PLAY echoes the session:\n{r:?}");
    let range = r.header("range").unwrap_or_else(|| panic!("PLAY without a Range header:\n{r:?}"));
    let (start, _) = npt_range(range).unwrap();
    assert!(
        (start - key).abs() < 0.0015,
        "PLAY from {seek} s must start at the keyframe at or before it ({key} s), got Range {range:?}"
    );
    let infos =
        rtp_info(r.header("rtp-info").unwrap_or_else(|| panic!("PLAY without RTP-Info:\n{r:?}"))).unwrap();
    assert_eq!(infos.len(), 2, "one RTP-Info entry per track: {infos:?}");
    let info_of = |t: &TrackInfo| {
        infos
            .iter()
            .find(|i| i.url == t.url || i.url.ends_with(&format!("/{}", t.control)))
            .unwrap_or_else(|| panic!("no RTP-Info entry for {}: {infos:?}", t.url))
            .clone()
    };
    let (vi, ai) = (info_of(&d.video), info_of(&d.audio));
    let (v_seq, v_rtptime) = (vi.seq.expect("video seq"), vi.rtptime.expect("video rtptime"));
    let (a_seq, a_rtptime) = (ai.seq.expect("audio seq"), ai.rtptime.expect("audio rtptime"));

    // Everything until both tracks say BYE, or for the rest of the file plus a margin.
    let mut rx = Received::default();
    let deadline = played_at + Duration::from_secs_f64(m.duration - key + 8.0);
    rx.read_until(&mut c, deadline, |rx| rx.has_bye(1) && rx.has_bye(3));
    let video = rx.rtp.get(&0).cloned().unwrap_or_default();
    let audio = rx.packets(2);
    assert!(!video.is_empty(), "no video RTP on channel 0 after PLAY");
    assert!(!audio.is_empty(), "no audio RTP on channel 2 after PLAY");

    // The first video packet is the one RTP-Info announced, at the Range start, and opens a keyframe.
    let first = &video[0].1;
    assert_eq!(first.seq, v_seq, "the first video packet's seq vs RTP-Info");
    assert!(
        ts_diff(first.timestamp, v_rtptime).abs() <= 1,
        "the first video packet's timestamp {} vs RTP-Info rtptime {v_rtptime}",
        first.timestamp
    );
    assert_eq!(first.ssrc, v_ssrc, "video SSRC vs the Transport's");
    assert_eq!(first.payload_type, d.video.payload_type, "video payload type vs the SDP");
    let aus = access_units(&video);
    let first_au = &aus[0];
    assert!(
        first_au.nal_types.contains(&5) && !first_au.nal_types.contains(&1),
        "the first access unit after a seek must be a keyframe (IDR), its NAL types are {:?}",
        first_au.nal_types
    );
    let first_types = h264_nal_types(&first.payload).unwrap();
    assert!(
        first_types.iter().all(|t| matches!(t, 5..=9)),
        "the first packet starts the keyframe (IDR, SEI, SPS, PPS or AUD), not {first_types:?}"
    );

    // Audio: the announced seq, and a first timestamp within one AAC frame of the Range start.
    assert_eq!(audio[0].seq, a_seq, "the first audio packet's seq vs RTP-Info");
    assert_eq!(audio[0].ssrc, a_ssrc, "audio SSRC vs the Transport's");
    assert_eq!(audio[0].payload_type, d.audio.payload_type, "audio payload type vs the SDP");
    assert!(
        ts_diff(audio[0].timestamp, a_rtptime).abs() <= 1024,
        "the first audio timestamp {} is more than one AAC frame from RTP-Info rtptime {a_rtptime}",
        audio[0].timestamp
    );

    // The rest of the file from the keyframe, each access unit once, at its own timestamp.
    assert_contiguous(&video.iter().map(|(_, p)| p).collect::<Vec<_>>(), "video after the seek");
    assert_contiguous(&audio, "audio after the seek");
    let got: Vec<i64> = aus.iter().map(|au| ts_diff(au.timestamp, v_rtptime)).collect();
    let want: Vec<i64> = expected_pts.iter().map(|pts| ((pts - key) * 90_000.0).round() as i64).collect();
    assert_eq!(got.len(), want.len(), "access units after the seek to {key} s (decode order)");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1, "access unit {i}: timestamp {g} after rtptime, the file says {w}");
    }
    assert!(aus.iter().all(|au| au.complete_at.is_some()), "every access unit ends with a marker");

    // Paced by the timestamps: the last frame cannot arrive long before its time.
    let media_span = expected_pts.iter().cloned().fold(f64::NEG_INFINITY, f64::max) - key;
    let last_at = aus.last().unwrap().complete_at.unwrap() - played_at;
    assert!(
        last_at.as_secs_f64() > media_span - 1.0 && last_at.as_secs_f64() < media_span + 3.0,
        "{media_span:.2} s of media arrived over {last_at:?}: not paced in real time"
    );

    // RTCP: sender reports and, at the end, BYE for each track (ffmpeg and ffprobe end on it).
    assert!(rx.rtcp_of(1, 200).contains(&v_ssrc), "no RTCP sender report for the video SSRC on channel 1");
    assert!(rx.rtcp_of(3, 200).contains(&a_ssrc), "no RTCP sender report for the audio SSRC on channel 3");
    assert!(
        rx.rtcp_of(1, 203).contains(&v_ssrc) && rx.rtcp_of(3, 203).contains(&a_ssrc),
        "the server must send RTCP BYE for each track when the file ends (channels 1 and 3 got {:?} / {:?})",
        rx.rtcp.get(&1),
        rx.rtcp.get(&3)
    );

    // /metrics counted what went out: every RTP packet we received (RTCP may count too).
    let rtp_count = (video.len() + audio.len()) as u64;
    let rtcp_count = rx.rtcp.values().map(|v| v.len() as u64).sum::<u64>();
    let rtp_bytes: u64 = video
        .iter()
        .map(|(_, p)| p.payload.len() as u64 + 12)
        .chain(audio.iter().map(|p| p.payload.len() as u64 + 12))
        .sum();
    let text = wait_metrics(&server, "RTP counters reach what was received", |t| {
        metric(t, RTP_PACKETS) >= rtp_count
    });
    assert!(
        metric(&text, RTP_PACKETS) <= rtp_count + rtcp_count,
        "{RTP_PACKETS} {} but {rtp_count} RTP (+{rtcp_count} RTCP) packets were received",
        metric(&text, RTP_PACKETS)
    );
    assert!(metric(&text, RTP_BYTES) >= rtp_bytes, "{RTP_BYTES} {} < {rtp_bytes}", metric(&text, RTP_BYTES));
    assert_eq!(metric(&text, FRAMES_DROPPED), 0);
    assert_eq!(metric(&text, PACKETS_DROPPED), 0);
}

fn pause_stops_sending_and_play_resumes_without_loss(engine: &[&str]) {
    let m = media();
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut c, DEMO_NAME);
    let v = setup_tcp(&mut c, &d.video.url, None, (0, 1));
    setup_tcp(&mut c, &d.audio.url, Some(&v.session), (2, 3));
    let session = [("Session", v.session.as_str())];

    let r = c.request("PLAY", &d.url, &session);
    r.expect(200, "PLAY");
    let played_at = Instant::now();
    let infos = rtp_info(r.header("rtp-info").expect("RTP-Info")).unwrap();
    let vi = infos
        .iter()
        .find(|i| i.url.ends_with(&format!("/{}", d.video.control)))
        .expect("video RTP-Info")
        .clone();
    let rtptime0 = vi.rtptime.expect("rtptime");
    let mut rx = Received::default();
    rx.read_until(&mut c, played_at + Duration::from_secs(1), |_| false);

    let r = c.request("PAUSE", &d.url, &session);
    r.expect(200, "PAUSE");
    while let Some(f) = c.pending.pop_front() {
        rx.add(f);
    }
    let before = rx.packets(0).len();
    assert!(before > 0, "no video in the first second of PLAY");
    let last_before = rx.packets(0).last().map(|p| p.seq).unwrap();
    // Paused: no RTP at all (RTCP may go on).
    let mut after_pause = Received::default();
    after_pause.read_until(&mut c, Instant::now() + Duration::from_millis(1500), |_| false);
    let leaked: usize = after_pause.rtp.values().map(Vec::len).sum();
    assert_eq!(leaked, 0, "RTP packets kept coming for 1.5 s after the PAUSE reply");

    let r = c.request("GET_PARAMETER", &d.url, &session);
    r.expect(200, "GET_PARAMETER keep-alive");
    assert_eq!(r.session_id().as_deref(), Some(v.session.as_str()), "{r:?}");

    let r = c.request("PLAY", &d.url, &session);
    r.expect(200, "PLAY after PAUSE");
    let resumed_at = Instant::now();
    let (start, _) = npt_range(r.header("range").expect("Range after resume")).unwrap();
    assert!((0.9..2.0).contains(&start), "resumed at npt {start}, paused after about 1 s of playing");
    let infos = rtp_info(r.header("rtp-info").expect("RTP-Info after resume")).unwrap();
    let vi = infos
        .iter()
        .find(|i| i.url.ends_with(&format!("/{}", d.video.control)))
        .expect("video RTP-Info")
        .clone();
    assert_eq!(
        vi.seq,
        Some(last_before.wrapping_add(1)),
        "the resumed stream's first seq follows the last one sent"
    );
    let expect_rtptime = rtptime0.wrapping_add((start * 90_000.0).round() as u32);
    assert!(
        ts_diff(vi.rtptime.expect("rtptime"), expect_rtptime).abs() <= 2,
        "RTP-Info rtptime {:?} after resuming at {start} s; the first PLAY's rtptime {rtptime0} + {start} s is {expect_rtptime}",
        vi.rtptime
    );

    rx.read_until(&mut c, resumed_at + Duration::from_secs_f64(m.duration + 8.0), |rx| {
        rx.has_bye(1) && rx.has_bye(3)
    });
    let video = rx.rtp.get(&0).cloned().unwrap_or_default();
    assert_contiguous(&video.iter().map(|(_, p)| p).collect::<Vec<_>>(), "video across PAUSE/PLAY");
    assert_contiguous(&rx.packets(2), "audio across PAUSE/PLAY");
    assert_eq!(video[before].1.seq, last_before.wrapping_add(1));
    let aus = access_units(&video);
    let got: Vec<i64> = aus.iter().map(|au| ts_diff(au.timestamp, rtptime0)).collect();
    let want: Vec<i64> = m.packets.iter().map(|p| (p.pts * 90_000.0).round() as i64).collect();
    assert_eq!(got.len(), want.len(), "every access unit exactly once across PAUSE and PLAY");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!((g - w).abs() <= 1, "access unit {i}: timestamp {g} after rtptime, the file says {w}");
    }
    c.request("TEARDOWN", &d.url, &session).expect(200, "TEARDOWN");
}

// ---------------------------------------------------------------------------------------------
// Releasing sessions
// ---------------------------------------------------------------------------------------------

fn teardown_releases_the_session(engine: &[&str]) {
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    // A fresh server lists every RTSP series, at zero.
    let text = scrape(&server);
    for name in [
        SESSIONS.to_string(),
        CREATED.to_string(),
        released("teardown"),
        released("timeout"),
        released("connection_closed"),
        REQUESTS.to_string(),
        RTP_PACKETS.to_string(),
        RTP_BYTES.to_string(),
        FRAMES_DROPPED.to_string(),
        PACKETS_DROPPED.to_string(),
    ] {
        assert_eq!(metric(&text, &name), 0, "{name} on a fresh server");
    }

    let mut c = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut c, DEMO_NAME);
    let v = setup_tcp(&mut c, &d.video.url, None, (0, 1));
    setup_tcp(&mut c, &d.audio.url, Some(&v.session), (2, 3));
    let session = [("Session", v.session.as_str())];
    c.request("PLAY", &d.url, &session).expect(200, "PLAY");
    let mut rx = Received::default();
    rx.read_until(&mut c, Instant::now() + IO_TIMEOUT, |rx| rx.packets(0).len() >= 5);
    assert!(rx.packets(0).len() >= 5, "video RTP after PLAY");
    let text = scrape(&server);
    assert_eq!(metric(&text, SESSIONS), 1, "one live session");
    assert_eq!(metric(&text, CREATED), 1);
    assert_eq!(metric(&text, &released("teardown")), 0);
    assert!(metric(&text, RTP_PACKETS) >= 5, "{RTP_PACKETS}");

    let r = c.request("TEARDOWN", &d.url, &session);
    r.expect(200, "TEARDOWN");
    // Nothing more for the session once TEARDOWN is answered (RTCP, e.g. BYE, may still come);
    // what arrived before the reply was queued while it was awaited, and is not counted.
    c.pending.clear();
    let mut after = Received::default();
    after.read_until(&mut c, Instant::now() + Duration::from_millis(700), |_| false);
    assert_eq!(after.rtp.values().map(Vec::len).sum::<usize>(), 0, "RTP after the TEARDOWN reply");

    let text = wait_metrics(&server, "the session is released by TEARDOWN", |t| {
        metric(t, SESSIONS) == 0 && metric(t, &released("teardown")) == 1
    });
    assert_eq!(metric(&text, CREATED), 1);
    assert_eq!(metric(&text, &released("timeout")), 0);
    assert_eq!(metric(&text, &released("connection_closed")), 0);
    // DESCRIBE, SETUP, SETUP, PLAY, TEARDOWN.
    wait_metrics(&server, "five RTSP requests counted", |t| metric(t, REQUESTS) == 5);

    // The session is gone for good.
    c.request("PLAY", &d.url, &session).expect(454, "PLAY of a torn-down session");
    drop(c);
    std::thread::sleep(Duration::from_millis(300));
    let text = scrape(&server);
    assert_eq!(metric(&text, &released("connection_closed")), 0, "no session was left to close");
    assert_eq!(metric(&text, SESSIONS), 0);
}

fn session_timeout_releases_a_silent_udp_session(engine: &[&str]) {
    let fx = demo_library();
    let server =
        Server::serve(engine, &fx, &["--rtsp-listen", "127.0.0.1:0", "--rtsp-session-timeout", "2s"]);
    let mut c = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut c, DEMO_NAME);
    let (rtp, rtcp) = udp_port_pair();
    let (rtp, rtcp) = (UdpSink::start(rtp), UdpSink::start(rtcp));
    let s = setup(
        &mut c,
        &d.video.url,
        None,
        &format!("RTP/AVP;unicast;client_port={}-{}", rtp.port(), rtcp.port()),
    );
    assert_eq!(s.timeout, Some(2), "the Session header announces the 2 s timeout: {s:?}");
    assert_eq!(
        param(&s.transport, "client_port").as_deref().and_then(pair),
        Some((rtp.port(), rtcp.port())),
        "{s:?}"
    );
    let (server_rtp, _) = param(&s.transport, "server_port")
        .as_deref()
        .and_then(pair)
        .unwrap_or_else(|| panic!("a UDP Transport reply names the server's ports: {s:?}"));
    let session = [("Session", s.session.as_str())];
    c.request("PLAY", &d.url, &session).expect(200, "PLAY over UDP");

    // Kept alive by GET_PARAMETER for longer than the timeout.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(700));
        c.request("GET_PARAMETER", &d.url, &session).expect(200, "GET_PARAMETER keep-alive");
    }
    let silent_from = Instant::now();
    let text = scrape(&server);
    assert_eq!(metric(&text, SESSIONS), 1, "kept alive for 2.1 s with a 2 s timeout");
    assert_eq!(metric(&text, &released("timeout")), 0);
    assert!(rtp.count() > 0, "no RTP datagrams reached client_port {}", rtp.port());
    for dgram in rtp.datagrams() {
        assert_eq!(dgram.from, SocketAddr::from(([127, 0, 0, 1], server_rtp)), "RTP comes from server_port");
        let p = parse_rtp(&dgram.data).unwrap();
        assert_eq!(Some(p.ssrc), s.ssrc, "SSRC vs the Transport's");
        assert_eq!(p.payload_type, d.video.payload_type);
    }

    // Silent (the control connection stays open): released within the timeout plus slack.
    let text = wait_metrics(&server, "the silent session times out", |t| {
        metric(t, SESSIONS) == 0 && metric(t, &released("timeout")) == 1
    });
    let took = silent_from.elapsed();
    assert!(
        took >= Duration::from_millis(1900),
        "released {took:?} after the last request, before its 2 s timeout"
    );
    assert_eq!(metric(&text, &released("teardown")), 0);
    assert_eq!(metric(&text, &released("connection_closed")), 0);

    // It stops sending, before the end of the file.
    std::thread::sleep(Duration::from_millis(300));
    let n = rtp.count();
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(rtp.count(), n, "RTP kept coming after the session timed out");
    // And it is gone, also for a new connection from the same address.
    let mut c2 = RtspConn::open(server.rtsp_addr());
    c2.request("GET_PARAMETER", &d.url, &session).expect(454, "the timed-out session");
    drop(c);
}

fn closing_the_connection_releases_its_interleaved_session(engine: &[&str]) {
    let fx = demo_library();
    let server =
        Server::serve(engine, &fx, &["--rtsp-listen", "127.0.0.1:0", "--rtsp-session-timeout", "3s"]);
    // An interleaved session and a UDP one, each on its own connection, both playing.
    let mut a = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut a, DEMO_NAME);
    let t = setup_tcp(&mut a, &d.video.url, None, (0, 1));
    a.request("PLAY", &d.url, &[("Session", &t.session)]).expect(200, "PLAY interleaved");
    let mut rx = Received::default();
    rx.read_until(&mut a, Instant::now() + IO_TIMEOUT, |rx| !rx.packets(0).is_empty());
    assert!(!rx.packets(0).is_empty(), "interleaved RTP after PLAY");
    let mut b = RtspConn::open(server.rtsp_addr());
    let (rtp, rtcp) = udp_port_pair();
    let (rtp, _rtcp) = (UdpSink::start(rtp), UdpSink::start(rtcp));
    let u = setup(
        &mut b,
        &d.video.url,
        None,
        &format!("RTP/AVP;unicast;client_port={}-{}", rtp.port(), rtp.port() + 1),
    );
    b.request("PLAY", &d.url, &[("Session", &u.session)]).expect(200, "PLAY over UDP");
    assert_eq!(metric(&scrape(&server), SESSIONS), 2);

    // Both connections close: the interleaved session goes with its connection at once; the UDP
    // one stays (its client may come back on a new connection) until it times out.
    drop(a);
    drop(b);
    let closed_at = Instant::now();
    let text = wait_metrics(&server, "the interleaved session is released when its connection closes", |t| {
        metric(t, &released("connection_closed")) == 1
    });
    if closed_at.elapsed() < Duration::from_millis(2500) {
        assert_eq!(metric(&text, SESSIONS), 1, "the UDP session outlives its control connection");
        assert_eq!(metric(&text, &released("timeout")), 0);
    }
    let text = wait_metrics(&server, "the UDP session times out", |t| {
        metric(t, SESSIONS) == 0 && metric(t, &released("timeout")) == 1
    });
    assert_eq!(metric(&text, &released("connection_closed")), 1);
    assert_eq!(metric(&text, &released("teardown")), 0);
    assert_eq!(metric(&text, CREATED), 2);
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

fn out_of_order_and_foreign_requests_get_rtsp_errors(engine: &[&str]) {
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut c, DEMO_NAME);
    // PLAY (and PAUSE) before any SETUP: nothing set up is 455; a made-up session is 454.
    c.request("PLAY", &d.url, &[]).expect(455, "PLAY before SETUP");
    c.request("PAUSE", &d.url, &[]).expect(455, "PAUSE before SETUP");
    let made_up = "0123456789abcdef";
    for method in ["PLAY", "PAUSE", "TEARDOWN", "GET_PARAMETER"] {
        c.request(method, &d.url, &[("Session", made_up)])
            .expect(454, &format!("{method} of an unknown session"));
    }
    c.request("PLAY", &d.url, &[("Session", "not-even-hex")]).expect(454, "PLAY of a malformed session id");
    // The aggregate URL of a two-track presentation cannot be SETUP.
    c.request("SETUP", &d.url, &[("Transport", "RTP/AVP/TCP;unicast;interleaved=0-1")])
        .expect(459, "SETUP of the aggregate URL");

    // An interleaved session, used from another connection (same address): 454 for everything.
    let s = setup_tcp(&mut c, &d.video.url, None, (0, 1));
    let id = s.session.as_str();
    let mut other = RtspConn::open(server.rtsp_addr());
    for method in ["PLAY", "PAUSE", "GET_PARAMETER", "TEARDOWN"] {
        other
            .request(method, &d.url, &[("Session", id)])
            .expect(454, &format!("{method} from another connection"));
    }
    other
        .request(
            "SETUP",
            &d.audio.url,
            &[("Session", id), ("Transport", "RTP/AVP/TCP;unicast;interleaved=2-3")],
        )
        .expect(454, "SETUP of a track into another connection's session");
    // A second track of another presentation cannot join the session.
    let nested = describe(&mut c, NESTED_URL_PATH);
    c.request(
        "SETUP",
        &nested.audio.url,
        &[("Session", id), ("Transport", "RTP/AVP/TCP;unicast;interleaved=2-3")],
    )
    .expect(459, "SETUP of another file's track into the session");

    // The owner still has it, untouched by the other connection's TEARDOWN.
    assert_eq!(metric(&scrape(&server), SESSIONS), 1);
    c.request("PLAY", &d.url, &[("Session", id)]).expect(200, "PLAY by the owner");
    // SETUP while playing is not valid in this state.
    c.request(
        "SETUP",
        &d.audio.url,
        &[("Session", id), ("Transport", "RTP/AVP/TCP;unicast;interleaved=2-3")],
    )
    .expect(455, "SETUP while playing");
    c.request("TEARDOWN", &d.url, &[("Session", id)]).expect(200, "TEARDOWN by the owner");
    c.request("PLAY", &d.url, &[("Session", id)]).expect(454, "PLAY after TEARDOWN");
    // RECORD of a connection that announced nothing, and a method sluice does not do.
    c.request("RECORD", &d.url, &[("Session", id)]).expect(455, "RECORD without ANNOUNCE");
    c.request("SET_PARAMETER", &d.url, &[]).expect(501, "SET_PARAMETER");
    c.request("OPTIONS", "*", &[]).expect(200, "OPTIONS after the errors, same connection");
}

fn unsupported_transports_get_461(engine: &[&str]) {
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let mut c = RtspConn::open(server.rtsp_addr());
    let d = describe(&mut c, DEMO_NAME);
    for transport in [
        "RTP/AVP/UDP;multicast",
        "RTP/AVP;multicast;client_port=5000-5001",
        "RTP/SAVP;unicast;client_port=5000-5001",
        "RTP/AVP;unicast;client_port=5000-5001;mode=record",
        "RAW/RAW/UDP;unicast;client_port=5000-5001",
        "garbage",
        "RTP/AVP;unicast",
    ] {
        let r = c.request("SETUP", &d.video.url, &[("Transport", transport)]);
        r.expect(461, &format!("SETUP with Transport: {transport}"));
        assert!(r.header("session").is_none(), "no session for a refused SETUP:\n{r:?}");
    }
    // No Transport at all is a bad request (and the connection goes on).
    c.request("SETUP", &d.video.url, &[]).expect(400, "SETUP without Transport");
    assert_eq!(metric(&scrape(&server), CREATED), 0, "no session was created by refused SETUPs");
    // Of several offered, the first supported one is chosen.
    let s = setup(&mut c, &d.video.url, None, "RTP/AVP;multicast,RTP/AVP/TCP;unicast;interleaved=4-5");
    assert!(s.transport.starts_with("RTP/AVP/TCP"), "{s:?}");
    assert_eq!(param(&s.transport, "interleaved").as_deref().and_then(pair), Some((4, 5)), "{s:?}");
}

fn malformed_requests_get_400_and_unknown_paths_404(engine: &[&str]) {
    let fx = demo_library();
    let server = Server::serve(engine, &fx, &[]);
    let addr = server.rtsp_addr();
    // Framing is lost: 400, `Connection: close`, and nothing after it is answered.
    for raw in [
        &b"GARBAGE\r\n\r\nOPTIONS * RTSP/1.0\r\nCSeq: 2\r\n\r\n"[..],
        b"OPTIONS * RTSP/1.0\r\nCSeq 1\r\n\r\nOPTIONS * RTSP/1.0\r\nCSeq: 2\r\n\r\n",
        b"\x01\x02\x03 junk \xff\r\n\r\nOPTIONS * RTSP/1.0\r\nCSeq: 2\r\n\r\n",
    ] {
        let what = lossy_prefix(raw, 24);
        let mut c = RtspConn::open(addr);
        let _ = c.try_send_raw(raw);
        let r = c.response().unwrap_or_else(|e| panic!("{what:?}: no response: {e}"));
        r.expect(400, &format!("malformed {what:?}"));
        assert!(r.says_close(), "{what:?}: a 400 for lost framing says Connection: close:\n{r:?}");
        let (closed, extra) = c.wait_close(Duration::from_secs(3));
        assert!(closed, "{what:?}: the server must close the connection after the 400");
        assert!(
            extra.is_empty(),
            "{what:?}: answered past the malformed request: {:?}",
            lossy_prefix(&extra, 200)
        );
    }
    // A request without CSeq is a bad request too.
    let mut c = RtspConn::open(addr);
    c.send_raw(b"OPTIONS * RTSP/1.0\r\n\r\n");
    let r = c.response().expect("a reply to OPTIONS without CSeq");
    r.expect(400, "OPTIONS without CSeq");
    assert!(r.header("cseq").is_none(), "{r:?}");
    drop(c);

    // Unknown paths, files that are not MP4s, tracks the file does not have, and anything outside
    // the root: 404 (400 where the URL itself is refused), never a description.
    let mut c = RtspConn::open(addr);
    for path in ["nope.mp4", "sub/nope.mp4", "t1.html", "sub/inner.txt", "sluice-demo.mp4/trackID=0"] {
        c.request("DESCRIBE", &c.url(path), &[]).expect(404, &format!("DESCRIBE {path}"));
    }
    c.request("SETUP", &c.url("nope.mp4/trackID=0"), &[("Transport", "RTP/AVP/TCP;unicast")])
        .expect(404, "SETUP of a missing file");
    c.request("SETUP", &c.url("sluice-demo.mp4/trackID=7"), &[("Transport", "RTP/AVP/TCP;unicast")])
        .expect(404, "SETUP of a missing track");
    for path in [
        "../outside.mp4",
        "%2e%2e/outside.mp4",
        "sub/../../outside.mp4",
        "outside-dir/outside.mp4",
        "..%2foutside.mp4",
    ] {
        let url = c.url(path);
        let r = c.request("DESCRIBE", &url, &[]);
        assert!(matches!(r.status, 400 | 404), "DESCRIBE {url} reaches outside the root:\n{r:?}");
    }
    drop(c);

    // The server is fine: OPTIONS on a new connection lists the methods.
    let mut c = RtspConn::open(addr);
    let r = c.request("OPTIONS", "*", &[]);
    r.expect(200, "OPTIONS on a new connection");
    let public: Vec<String> = r
        .header("public")
        .unwrap_or_else(|| panic!("OPTIONS without Public:\n{r:?}"))
        .split(',')
        .map(|m| m.trim().to_string())
        .collect();
    for method in ["OPTIONS", "DESCRIBE", "SETUP", "PLAY", "PAUSE", "TEARDOWN", "GET_PARAMETER"] {
        assert!(public.iter().any(|p| p == method), "Public lacks {method}: {public:?}");
    }
    // And HTTP beside it too.
    fetch_get(server.addr(), "/t1.html", &[]).expect_status(200, "HTTP after RTSP errors");
}

// ---------------------------------------------------------------------------------------------
// Many viewers
// ---------------------------------------------------------------------------------------------

fn fifty_viewers(engine: &[&str], transport: RtspTransport) {
    let m = media();
    // The built-in demo library (no --root).
    let server = Server::start(engine, &[]);
    let url = rtsp_url(&server, DEMO_NAME);
    let json = std::env::temp_dir().join(format!(
        "sluice-rtsp-it-{}-{}-{}.json",
        std::process::id(),
        engine.join("_").replace('-', ""),
        transport.name()
    ));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
    cmd.args(["load", "rtsp", &url, "--clients", "50", "--transport", transport.name(), "--ramp", "1s"])
        .args(["--duration", "40s", "--idle-end", "2s", "--threads", "2", "--json"])
        .arg(&json);
    let (status, out, err) = run_bounded(&mut cmd, Duration::from_secs(90));
    let stdout = String::from_utf8_lossy(&out);
    let stderr = String::from_utf8_lossy(&err);
    assert!(status.success(), "sluice load rtsp failed ({status}):\n{stdout}\n{stderr}");
    let text = std::fs::read_to_string(&json)
        .unwrap_or_else(|e| panic!("{}: {e}\n{stdout}\n{stderr}", json.display()));
    let _ = std::fs::remove_file(&json);
    let report = RtspReport::from_json(&text).expect("the JSON report reads back");
    assert_eq!(report.settings.transport, transport);
    let s = &report.summary;
    let text = wait_metrics(&server, "the viewers' sessions are released", |t| metric(t, SESSIONS) == 0);
    let dropped = metric(&text, FRAMES_DROPPED);
    // What the machine was doing, for the messages: the server drops frames (under its default
    // `degrade` policy) when its RTSP loop falls behind, which a busy CI machine makes happen.
    let load = format!(
        "server: {dropped} frames dropped, {} samples sent late (> 50 ms), {} packets dropped; \
         machine load average {}",
        metric(&text, LATE_SENDS),
        metric(&text, PACKETS_DROPPED),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim()
    );
    let detail = || {
        format!(
            "{load}\n{s:#?}\nviewers with a problem: {:#?}",
            report
                .viewers
                .iter()
                .filter(|v| v.samples != m.video_frames
                    || v.audio_frames != m.audio_frames
                    || v.lost_packets > 0
                    || v.failure.is_some())
                .collect::<Vec<_>>()
        )
    };
    assert_eq!(s.clients, 50, "{}", detail());
    assert_eq!(s.failures.total(), 0, "failed viewers: {}", detail());
    assert_eq!(s.playing_clients, 50, "{}", detail());
    assert_eq!(s.lost_packets, 0, "every packet the server sent arrives: {}", detail());
    assert_eq!(s.ends.stream_end + s.ends.closed, 50, "every viewer reached the end: {}", detail());
    assert_eq!(metric(&text, CREATED), 50, "one session per viewer");
    // Every sample a viewer misses must be a frame the server says it dropped, and no other:
    // on a quiet machine none is, and all 50 viewers get every sample; on a busy one the loop
    // may fall behind and drop whole frames (counted in its metrics), never lose one silently.
    let missing: u64 = report
        .viewers
        .iter()
        .map(|v| {
            assert!(v.samples <= m.video_frames, "viewer {} got more than the file: {}", v.index, detail());
            assert!(v.audio_frames <= m.audio_frames, "viewer {}: {}", v.index, detail());
            (m.video_frames - v.samples) + (m.audio_frames - v.audio_frames)
        })
        .sum();
    assert_eq!(missing, dropped, "samples the viewers missed vs frames the server dropped: {}", detail());
    if dropped == 0 {
        assert_eq!(s.perfect_clients, 50, "{}", detail());
    } else {
        eprintln!("fifty viewers over {}: {load}", transport.name());
    }
}

fn fifty_viewers_over_tcp_get_every_sample(engine: &[&str]) {
    fifty_viewers(engine, RtspTransport::Tcp);
}

fn fifty_viewers_over_udp_get_every_sample(engine: &[&str]) {
    fifty_viewers(engine, RtspTransport::Udp);
}

// ---------------------------------------------------------------------------------------------
// Turning RTSP off
// ---------------------------------------------------------------------------------------------

#[test]
fn no_rtsp_serves_http_only() {
    let fx = demo_library();
    let server = Server::serve(&["--engine", "epoll"], &fx, &["--no-rtsp"]);
    let logs = server.logs();
    assert!(
        !logs.iter().any(|l| l.contains("rtsp://") || parse_rtsp_listen_line(l).is_some()),
        "--no-rtsp still logs an RTSP listener:\n{}",
        logs.join("\n")
    );
    let addr = std::panic::catch_unwind(AssertUnwindSafe(|| server.rtsp_addr()));
    assert!(addr.is_err(), "rtsp_addr() is {addr:?} with --no-rtsp");
    fetch_get(server.addr(), "/t1.html", &[]).expect_status(200, "HTTP with --no-rtsp");
}
