//! Live presentations: what an RTSP publisher (`ANNOUNCE`, `SETUP` with `mode=record`, `RECORD`)
//! sends, turned into a sample source the viewers' streamers read as they read a file.
//!
//! A file and a live publisher are two kinds of one source: both are an indexed [`Mp4File`] (its
//! tracks' codec parameters and sample tables) and the bytes of its samples. A file's table is
//! fixed; a live one grows as the publisher's RTP arrives, and a viewer's streamer takes the
//! newer table at each of its turns ([`LiveStream::snapshot`], [`super::Streamer::extend`]). The
//! same fan-out core paces, packetizes, queues and sends both. A live sample's "offset" is its
//! number in its track (the track in the top bits), and its bytes are kept here, shared by every
//! viewer ([`LiveStream::sample`]), not read from a file.
//!
//! This module owns the [`LiveRegistry`] (the live paths of the server, shared by every RTSP
//! loop: one publisher a path), each [`LiveStream`] (its tracks from the publisher's SDP,
//! RTP reassembled into samples by `sluice-proto`'s depacketizers, RTP timestamps put on one
//! timeline, a bounded window of samples kept) and the reading of an `ANNOUNCE`'s SDP
//! ([`tracks_from_sdp`]: H.264 per RFC 6184, H.265 per RFC 7798, AAC per RFC 3640 `AAC-hbr`,
//! Opus per RFC 7587). It does not answer requests ([`super::session`]), authorise publishers
//! (the [`super::Catalogue`]) nor send.
//!
//! Not handled yet: synchronising tracks by the publisher's RTCP sender reports (each track's
//! first packet is put at its arrival time instead, so audio and video agree within the
//! network's jitter).

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use base64::Engine as _;
use sluice_media::codec::{
    hevc, AudioCodec, AudioEntry, HevcRecord, InBandParameterSets, OpusRecord, VideoCodec, VideoEntry,
};
use sluice_media::mp4::{AacConfig, H264Config, Mp4File, Sample, Track, TrackKind};
use sluice_proto::rtp::{AacAccessUnits, H264Depacketizer, H265Depacketizer, RtpPacket};

pub mod cmaf;

/// Samples a live track keeps in its table, at most: past it the older half goes. Viewers read
/// at the live edge (they start at the latest keyframe), so what goes is behind every one of them;
/// 2,048 samples are 80 s of 25 fps video and 43 s of 48 kHz AAC.
pub const LIVE_WINDOW_SAMPLES: usize = 2048;

/// The largest access unit a publisher may send (a 4K keyframe is a few MB).
const MAX_ACCESS_UNIT: usize = 8 << 20;

/// A live sample's offset: its track in the top bits, its number in the track below.
const TRACK_SHIFT: u32 = 56;

/// AAC frames are 1,024 samples long (AAC-LC; RFC 3640's `constantDuration` is not sent by the
/// publishers sluice takes in).
const AAC_FRAME: u64 = 1024;

/// A video sample's decode time is put this far before its presentation time (capped by the
/// previous sample's), since RTP carries presentation times only and B-frames are sent before
/// the pictures shown ahead of them. 0.2 s covers the reordering of common encoders' GOPs.
const REORDER_TICKS: u64 = 18_000;

/// Why an `ANNOUNCE` is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnounceError {
    /// The body is not an SDP, or describes no medium.
    #[error("the SDP does not parse or has no media")]
    BadSdp,
    /// A medium of a codec (or packetization) sluice does not take in.
    #[error("{0}")]
    Unsupported(String),
}

/// The path has a publisher already (409 Conflict).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the path has a publisher already")]
pub struct Taken;

/// One medium of an `ANNOUNCE`: the track a viewer gets, and the `a=control` the publisher's
/// `SETUP` names.
#[derive(Debug, Clone)]
pub struct AnnouncedTrack {
    /// Codec and parameters.
    pub kind: TrackKind,
    /// The RTP clock rate, which is the live track's timescale.
    pub clock_rate: u32,
    /// The medium's `a=control` (relative or absolute), empty without one.
    pub control: String,
}

/// The tracks an `ANNOUNCE`'s SDP describes: H.264 (`packetization-mode` 0 or 1, with
/// `sprop-parameter-sets`), H.265 (RFC 7798, with `sprop-vps`, `sprop-sps` and `sprop-pps`), AAC
/// (`mpeg4-generic`, `AAC-hbr`, `config=`) and Opus (RFC 7587, mono or stereo).
pub fn tracks_from_sdp(sdp: &[u8]) -> Result<Vec<AnnouncedTrack>, AnnounceError> {
    let session = sdp_types::Session::parse(sdp).map_err(|_| AnnounceError::BadSdp)?;
    let mut tracks = Vec::new();
    for m in &session.medias {
        let attribute = |name: &str| {
            m.attributes.iter().find(|a| a.attribute == name).map(|a| a.value.as_deref().unwrap_or("").trim())
        };
        let rtpmap = attribute("rtpmap").unwrap_or_default();
        let mut encoding = rtpmap.split_whitespace().nth(1).unwrap_or_default().split('/');
        let name = encoding.next().unwrap_or_default().to_ascii_lowercase();
        let rate = encoding.next().and_then(|r| r.parse::<u32>().ok()).unwrap_or(0);
        let channels = encoding.next().and_then(|c| c.parse::<u16>().ok()).unwrap_or(1);
        let fmtp = attribute("fmtp").unwrap_or_default();
        let params: HashMap<String, &str> = fmtp
            .split_once(' ')
            .map_or("", |(_, p)| p)
            .split(';')
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim()))
            .collect();
        let kind = match name.as_str() {
            "h264" => TrackKind::H264(h264_config(&params)?),
            "mpeg4-generic" => TrackKind::Aac(aac_config(&params, rate, channels)?),
            "h265" => TrackKind::Video(hevc_entry(&params)?),
            "opus" => TrackKind::Audio(opus_entry(&params)),
            "" => return Err(AnnounceError::Unsupported(format!("{} medium without a=rtpmap", m.media))),
            other => {
                return Err(AnnounceError::Unsupported(format!(
                    "{other} is not taken in from publishers (H.264, H.265, AAC and Opus are)"
                )))
            }
        };
        let clock_rate = match &kind {
            TrackKind::Aac(a) => a.sample_rate,
            TrackKind::Audio(a) => a.sample_rate,
            _ => 90_000,
        };
        let control = attribute("control").unwrap_or_default().to_string();
        tracks.push(AnnouncedTrack { kind, clock_rate, control });
    }
    if tracks.is_empty() {
        return Err(AnnounceError::BadSdp);
    }
    Ok(tracks)
}

fn h264_config(params: &HashMap<String, &str>) -> Result<H264Config, AnnounceError> {
    let missing = || AnnounceError::Unsupported("H.264 without sprop-parameter-sets".into());
    let sets = params.get("sprop-parameter-sets").ok_or_else(missing)?;
    let (mut sps, mut pps) = (Vec::new(), Vec::new());
    for set in sets.split(',').filter(|s| !s.is_empty()) {
        let nal = base64::engine::general_purpose::STANDARD.decode(set).map_err(|_| missing())?;
        match nal.first().map(|h| h & 0x1f) {
            Some(7) => sps.push(nal),
            Some(8) => pps.push(nal),
            _ => {}
        }
    }
    let profile_level_id = match sps.first() {
        Some(s) if s.len() >= 4 => [s[1], s[2], s[3]],
        _ => return Err(missing()),
    };
    if pps.is_empty() {
        return Err(missing());
    }
    // Players choose renditions by size, and a manifest must say it: read it from the SPS.
    let (width, height) = sluice_media::protect::slice::picture_size(&sps[0]).unwrap_or((0, 0));
    Ok(H264Config { sps, pps, nal_length_size: 4, profile_level_id, width, height })
}

/// An HEVC track from RFC 7798's parameter sets; the profile, tier and level from the SPS's
/// `profile_tier_level` (the SDP's `profile-id` and friends are optional).
fn hevc_entry(params: &HashMap<String, &str>) -> Result<VideoEntry, AnnounceError> {
    let missing = || AnnounceError::Unsupported("H.265 without sprop-vps, sprop-sps and sprop-pps".into());
    let sets = |name: &str| -> Result<Vec<Vec<u8>>, AnnounceError> {
        let list = params.get(name).ok_or_else(missing)?;
        list.split(',')
            .filter(|s| !s.is_empty())
            .map(|s| base64::engine::general_purpose::STANDARD.decode(s.trim()).map_err(|_| missing()))
            .collect()
    };
    let (vps, sps, pps) = (sets("sprop-vps")?, sets("sprop-sps")?, sets("sprop-pps")?);
    // The SPS's first bytes without emulation prevention: 2 of NAL header, 1 of ids, then
    // profile_tier_level's 12 general bytes.
    let mut rbsp = Vec::with_capacity(16);
    let mut zeros = 0;
    for &b in sps.first().ok_or_else(missing)?.iter() {
        if zeros >= 2 && b == 3 {
            zeros = 0;
            continue;
        }
        zeros = if b == 0 { zeros + 1 } else { 0 };
        rbsp.push(b);
        if rbsp.len() == 15 {
            break;
        }
    }
    if rbsp.len() < 15 || vps.is_empty() || pps.is_empty() {
        return Err(missing());
    }
    let general = rbsp[3];
    let record = HevcRecord {
        profile_space: general >> 6,
        high_tier: general & 0x20 != 0,
        profile_idc: general & 0x1f,
        compatibility: u32::from_be_bytes([rbsp[4], rbsp[5], rbsp[6], rbsp[7]]),
        constraints: rbsp[8..14].try_into().expect("6 bytes"),
        level_idc: rbsp[14],
        chroma_format: 1,
        bit_depth_luma: 8,
        bit_depth_chroma: 8,
        nal_length_size: 4,
        vps,
        sps,
        pps,
    };
    let (width, height) = record.sps.first().and_then(|s| hevc::picture_size(s)).unwrap_or((0, 0));
    let sample_entry = record.sample_entry(width, height);
    Ok(VideoEntry {
        codec: VideoCodec::Hevc(record),
        width,
        height,
        colour: None,
        mastering: None,
        light_level: None,
        dolby_vision: None,
        sample_entry,
        in_band: InBandParameterSets::Unknown,
    })
}

/// An Opus track (RFC 7587: always `opus/48000/2` in `a=rtpmap`; `sprop-stereo=1` for stereo).
fn opus_entry(params: &HashMap<String, &str>) -> AudioEntry {
    let stereo = params.get("sprop-stereo") == Some(&"1") || params.get("stereo") == Some(&"1");
    let channels = if stereo { 2 } else { 1 };
    let record = OpusRecord { channels, pre_skip: 0, input_sample_rate: 48_000, mapping_family: 0 };
    AudioEntry {
        sample_entry: record.sample_entry(),
        codec: AudioCodec::Opus(record),
        sample_rate: 48_000,
        channels: u16::from(channels),
    }
}

fn aac_config(params: &HashMap<String, &str>, rate: u32, channels: u16) -> Result<AacConfig, AnnounceError> {
    let unsupported = |why: &str| AnnounceError::Unsupported(format!("AAC: {why}"));
    if !params.get("mode").is_some_and(|m| m.eq_ignore_ascii_case("AAC-hbr")) {
        return Err(unsupported("only mode=AAC-hbr is taken in"));
    }
    if params.get("sizelength") != Some(&"13") || params.get("indexlength").is_some_and(|l| *l != "3") {
        return Err(unsupported("only sizelength=13;indexlength=3 is taken in"));
    }
    let hex = params.get("config").ok_or_else(|| unsupported("no config="))?;
    let config: Option<Vec<u8>> =
        (0..hex.len() / 2).map(|i| u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()).collect();
    let config =
        config.filter(|c| c.len() >= 2 && hex.len() % 2 == 0).ok_or_else(|| unsupported("bad config="))?;
    if rate == 0 {
        return Err(unsupported("no clock rate in a=rtpmap"));
    }
    Ok(AacConfig { audio_specific_config: config, sample_rate: rate, channels })
}

/// What reassembles a live track's samples from its RTP.
enum Depacketizer {
    H264(H264Depacketizer),
    H265(H265Depacketizer),
    /// AAC-hbr: whole frames behind AU headers.
    Aac,
    /// One frame a packet (Opus).
    Frame,
}

/// One live track: its table so far and what reassembles its packets.
struct LiveTrack {
    /// Its position in the stream, kept in its samples' offsets.
    index: u64,
    kind: TrackKind,
    clock_rate: u32,
    depacketizer: Depacketizer,
    /// Samples, oldest first, with their bytes; `dropped` went before them.
    samples: VecDeque<(Sample, Arc<Vec<u8>>)>,
    dropped: u64,
    /// The first packet's place on the stream's timeline (in ticks), the last RTP timestamp,
    /// and the ticks from the first timestamp to the last (past 32-bit wrap-arounds).
    timeline: Option<(u64, u32, i64)>,
    last_decode: Option<u64>,
    /// Whether a keyframe came (video samples before the first one are not kept).
    keyed: bool,
    bytes: u64,
}

struct LiveState {
    tracks: Vec<LiveTrack>,
    /// The arrival of the first packet: zero of the stream's timeline.
    origin: Option<Instant>,
    /// Bumped with every sample, so a snapshot is rebuilt only when something changed.
    generation: u64,
    snapshot: Option<(u64, Arc<Mp4File>)>,
}

/// A table of a live stream at one moment, and how many samples of each track had gone before
/// it (a streamer holding an older table shifts its positions by the difference).
#[derive(Clone)]
pub struct LiveSnapshot {
    /// The tracks and their samples.
    pub file: Arc<Mp4File>,
    /// Per track, samples dropped before the first in `file`.
    pub dropped: Vec<u64>,
}

/// One published path. See the module docs.
pub struct LiveStream {
    path: String,
    publisher: SocketAddr,
    started: Instant,
    /// The wall-clock time at `started`.
    started_wallclock: SystemTime,
    ended: AtomicBool,
    state: Mutex<LiveState>,
    /// Where its CMAF segments are cut ([`LiveStream::cmaf`]).
    cuts: cmaf::Cuts,
}

impl std::fmt::Debug for LiveStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveStream").field("path", &self.path).field("publisher", &self.publisher).finish()
    }
}

impl LiveStream {
    fn new(path: &str, publisher: SocketAddr, tracks: Vec<AnnouncedTrack>, now: Instant) -> LiveStream {
        let tracks = tracks
            .into_iter()
            .enumerate()
            .map(|(index, t)| LiveTrack {
                index: index as u64,
                depacketizer: match &t.kind {
                    TrackKind::H264(_) => Depacketizer::H264(H264Depacketizer::new(MAX_ACCESS_UNIT)),
                    TrackKind::Video(_) => Depacketizer::H265(H265Depacketizer::new(MAX_ACCESS_UNIT)),
                    TrackKind::Aac(_) => Depacketizer::Aac,
                    TrackKind::Audio(_) => Depacketizer::Frame,
                },
                kind: t.kind,
                clock_rate: t.clock_rate,
                samples: VecDeque::new(),
                dropped: 0,
                timeline: None,
                last_decode: None,
                keyed: false,
                bytes: 0,
            })
            .collect::<Vec<_>>();
        LiveStream {
            path: path.to_string(),
            publisher,
            started: now,
            started_wallclock: SystemTime::now() - Instant::now().saturating_duration_since(now),
            ended: AtomicBool::new(false),
            state: Mutex::new(LiveState { tracks, origin: None, generation: 0, snapshot: None }),
            cuts: cmaf::Cuts::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, LiveState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The URL path it is published at.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The publisher's address.
    pub fn publisher(&self) -> SocketAddr {
        self.publisher
    }

    /// When publishing started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The wall-clock time of the stream's timeline's 0 (its first packet), once one came.
    pub fn origin_wallclock(&self) -> Option<SystemTime> {
        let origin = self.state().origin?;
        Some(self.started_wallclock + origin.saturating_duration_since(self.started))
    }

    /// Its CMAF segments, for live HLS and DASH and for recording.
    pub fn cmaf(&self) -> cmaf::LiveCmaf<'_> {
        cmaf::LiveCmaf { stream: self, cuts: &self.cuts }
    }

    /// Whether the publisher is gone: viewers get what is left, then a BYE.
    pub fn has_ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Tracks announced.
    pub fn track_count(&self) -> usize {
        self.state().tracks.len()
    }

    /// Takes one RTP packet of track `track` that arrived at `now`; returns the samples it
    /// completed. A packet that does not parse, or whose payload is malformed, is dropped (the
    /// depacketizer drops the access unit it damaged), as a lost one would be.
    pub fn push_rtp(&self, track: usize, packet: &[u8], now: Instant) -> usize {
        let Ok(packet) = RtpPacket::parse(packet) else { return 0 };
        let mut state = self.state();
        let origin = *state.origin.get_or_insert(now);
        let Some(t) = state.tracks.get_mut(track) else { return 0 };
        let arrival = crate::stream::duration_to_ticks(now.saturating_duration_since(origin), t.clock_rate);
        let mut completed: Vec<(u32, Vec<u8>, bool)> = Vec::new();
        match &mut t.depacketizer {
            Depacketizer::H264(d) => {
                if let Ok(Some(au)) = d.push(&packet) {
                    let keyframe = au.nal_units().any(|n| n.first().is_some_and(|h| h & 0x1f == 5));
                    completed.push((au.timestamp, au.data.to_vec(), keyframe));
                }
            }
            Depacketizer::H265(d) => {
                if let Ok(Some(au)) = d.push(&packet) {
                    // An IRAP picture (BLA, IDR or CRA: NAL unit types 16 to 21) starts a GOP.
                    let keyframe = length_prefixed(au).any(|n| (16..=21).contains(&(n[0] >> 1 & 0x3f)));
                    completed.push((packet.timestamp, au.to_vec(), keyframe));
                }
            }
            Depacketizer::Aac => {
                if let Ok(frames) = AacAccessUnits::parse(&packet) {
                    for (i, frame) in frames.enumerate() {
                        let ts = packet.timestamp.wrapping_add((i as u64 * AAC_FRAME) as u32);
                        completed.push((ts, frame.to_vec(), true));
                    }
                }
            }
            Depacketizer::Frame => {
                if !packet.payload.is_empty() {
                    completed.push((packet.timestamp, packet.payload.to_vec(), true));
                }
            }
        }
        state.add(track, completed, arrival)
    }

    /// Takes one sample of track `track` that arrived whole at `now` (from a publisher whose
    /// protocol frames samples itself, as RTMP does), stamped `timestamp` on the track's clock
    /// with its presentation time; returns the samples taken (as [`LiveStream::push_rtp`]: 1,
    /// or 0 for a track it does not have).
    /// H.264 and H.265 samples are NAL units with 4-byte lengths, AAC raw frames.
    pub fn push_access_unit(
        &self,
        track: usize,
        timestamp: u32,
        data: Vec<u8>,
        keyframe: bool,
        now: Instant,
    ) -> usize {
        let mut state = self.state();
        let origin = *state.origin.get_or_insert(now);
        let Some(t) = state.tracks.get(track) else { return 0 };
        let arrival = crate::stream::duration_to_ticks(now.saturating_duration_since(origin), t.clock_rate);
        state.add(track, vec![(timestamp, data, keyframe)], arrival)
    }

    /// The table as it stands, shared by every viewer asking until a sample is added.
    pub fn snapshot(&self) -> LiveSnapshot {
        let mut state = self.state();
        let generation = state.generation;
        if let Some((g, file)) = &state.snapshot {
            if *g == generation {
                let dropped = state.tracks.iter().map(|t| t.dropped).collect();
                return LiveSnapshot { file: Arc::clone(file), dropped };
            }
        }
        let tracks: Vec<Track> = state
            .tracks
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let samples: Vec<Sample> = t.samples.iter().map(|(s, _)| *s).collect();
                let duration = match (samples.first(), samples.last()) {
                    (Some(a), Some(b)) => b.composition_time().saturating_sub(a.decode_time()),
                    _ => 0,
                };
                Track {
                    id: i as u32 + 1,
                    kind: t.kind.clone(),
                    timescale: t.clock_rate,
                    duration,
                    edit_start: 0,
                    samples,
                }
            })
            .collect();
        let file_len = state.tracks.iter().map(|t| t.bytes).sum();
        let file = Arc::new(Mp4File { tracks, skipped: Vec::new(), file_len, fragmented: false });
        state.snapshot = Some((generation, Arc::clone(&file)));
        let dropped: Vec<u64> = state.tracks.iter().map(|t| t.dropped).collect();
        LiveSnapshot { file, dropped }
    }

    /// The bytes of the sample at live offset `offset` (see the module docs), while kept.
    pub fn sample(&self, offset: u64) -> Option<Arc<Vec<u8>>> {
        let track = (offset >> TRACK_SHIFT) as usize;
        let number = offset & ((1 << TRACK_SHIFT) - 1);
        let state = self.state();
        let t = state.tracks.get(track)?;
        let index = usize::try_from(number.checked_sub(t.dropped)?).ok()?;
        t.samples.get(index).map(|(_, bytes)| Arc::clone(bytes))
    }

    /// What the publisher sends, in bits a second: the kept samples' bytes over the time they
    /// span, summed over the tracks.
    pub fn bit_rate(&self) -> u64 {
        let state = self.state();
        state
            .tracks
            .iter()
            .filter_map(|t| {
                let (first, last) = (t.samples.front()?.0, t.samples.back()?.0);
                let span = last.decode_time().saturating_sub(first.decode_time());
                (span > 0).then(|| t.bytes * 8 * u64::from(t.clock_rate) / span)
            })
            .sum()
    }

    /// Whether a viewer can start: every video track has a keyframe (and audio-only streams a
    /// frame).
    pub fn is_ready(&self) -> bool {
        let state = self.state();
        state.tracks.iter().all(|t| !t.samples.is_empty())
    }
}

impl LiveState {
    /// Adds samples completed on track `track`, the first of them arriving at
    /// `arrival` ticks; a new table for snapshots when any was.
    fn add(&mut self, track: usize, completed: Vec<(u32, Vec<u8>, bool)>, arrival: u64) -> usize {
        let Some(t) = self.tracks.get_mut(track) else { return 0 };
        let added = completed.len();
        for (timestamp, data, keyframe) in completed {
            t.add(timestamp, data, keyframe, arrival);
        }
        if added > 0 {
            self.generation += 1;
        }
        added
    }
}

impl LiveTrack {
    fn add(&mut self, timestamp: u32, data: Vec<u8>, keyframe: bool, arrival: u64) {
        if self.kind.is_video() && !self.keyed && !keyframe {
            // A viewer must start at a keyframe, and nothing before the first one decodes.
            return;
        }
        self.keyed = true;
        let (base, last, ticks) = self.timeline.get_or_insert((arrival, timestamp, 0));
        // The step from the last timestamp, signed: a packet of an earlier picture (B-frames)
        // steps back, and a wrap-around of the 32-bit clock steps forward.
        *ticks += i64::from(timestamp.wrapping_sub(*last) as i32);
        *last = timestamp;
        // Every track is presented REORDER_TICKS late, so that a video sample's decode time
        // (that much earlier) is never before 0: the first pictures' would otherwise be
        // squeezed a tick apart, which players report as a discontinuity.
        let lead = REORDER_TICKS * u64::from(self.clock_rate) / 90_000;
        let presentation = (*base as i64 + *ticks).max(0) as u64 + lead;
        let decode = match (self.kind.is_video(), self.last_decode) {
            (true, last) => {
                let floor = last.map_or(0, |l| l + 1);
                presentation.saturating_sub(REORDER_TICKS).max(floor)
            }
            (_, last) => presentation.max(last.map_or(0, |l| l + 1)),
        };
        self.last_decode = Some(decode);
        let offset = (self.index << TRACK_SHIFT) | (self.dropped + self.samples.len() as u64);
        let composition = i32::try_from(presentation as i64 - decode as i64).unwrap_or(0);
        let size = data.len().min(MAX_ACCESS_UNIT) as u32;
        self.bytes += u64::from(size);
        self.samples.push_back((Sample::new(offset, size, decode, composition, keyframe), Arc::new(data)));
        if self.samples.len() > LIVE_WINDOW_SAMPLES {
            let drop = self.samples.len() / 2;
            for (s, _) in self.samples.drain(..drop) {
                self.bytes -= u64::from(s.size());
            }
            self.dropped += drop as u64;
        }
    }
}

/// The NAL units of an access unit of 4-byte-length-prefixed NAL units (none past a bad length).
fn length_prefixed(mut au: &[u8]) -> impl Iterator<Item = &[u8]> {
    std::iter::from_fn(move || {
        let (len, rest) = au.split_first_chunk::<4>()?;
        let nal = rest.get(..u32::from_be_bytes(*len) as usize).filter(|n| n.len() >= 2)?;
        au = &rest[nal.len()..];
        Some(nal)
    })
}

/// The live paths of the server. See the module docs.
#[derive(Debug)]
pub struct LiveRegistry {
    /// The URL path prefix of live paths, e.g. `/live`.
    prefix: String,
    streams: Mutex<HashMap<String, Arc<LiveStream>>>,
    /// Paths a camera source of the server feeds: no publisher takes them, live or not.
    reserved: Mutex<HashSet<String>>,
    /// Streams whose publisher went, and when, kept [`ENDED_KEPT`] for their HTTP viewers.
    ended: Mutex<HashMap<String, (Instant, Arc<LiveStream>)>>,
    /// Whether a publisher of a path that has one takes it over ([`LiveRegistry::with_takeover`]).
    takeover: bool,
}

/// How long a stream whose publisher went is still watched over HTTP ([`LiveRegistry::watch`]):
/// long enough for every player to reload its playlist once more and find that it ended (the
/// HLS `EXT-X-ENDLIST`, a static MPD) rather than lose the path mid-stream.
pub const ENDED_KEPT: Duration = Duration::from_secs(30);

/// A live path as `/streams` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveSummary {
    /// The URL path.
    pub path: String,
    /// The publisher's address.
    pub publisher: SocketAddr,
    /// How long it has been published.
    pub age: Duration,
    /// Whether viewers can play it (its media has come, a keyframe on every video track).
    pub ready: bool,
    /// What it brings in, in bits a second, over the samples it keeps (all tracks).
    pub bit_rate: u64,
}

impl LiveRegistry {
    /// Live paths under `prefix` (a URL path such as `/live`; a trailing `/` is ignored).
    pub fn new(prefix: &str) -> LiveRegistry {
        LiveRegistry {
            prefix: prefix.trim_end_matches('/').to_string(),
            streams: Mutex::default(),
            reserved: Mutex::default(),
            ended: Mutex::default(),
            takeover: false,
        }
    }

    /// A publisher of a path that has one takes it over when `takeover`: the stream it replaces
    /// ends (its viewers get the end of it, its publisher is cut off), rather than the newcomer
    /// being refused. A camera source's path is never taken over.
    pub fn with_takeover(mut self, takeover: bool) -> LiveRegistry {
        self.takeover = takeover;
        self
    }

    fn streams(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveStream>>> {
        self.streams.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `path` is under the live prefix (one name below it, at least).
    pub fn is_live_path(&self, path: &str) -> bool {
        path.strip_prefix(&self.prefix)
            .and_then(|rest| rest.strip_prefix('/'))
            .is_some_and(|name| !name.is_empty() && !name.split('/').any(|s| s.is_empty() || s == ".."))
    }

    /// The URL path of live path `name` (`cam1` is `/live/cam1`).
    pub fn path_of(&self, name: &str) -> String {
        format!("{}/{}", self.prefix, name.trim_start_matches('/'))
    }

    /// Keeps `path` for a camera source of the server: a publisher is refused it ([`Taken`])
    /// whether or not the camera is live, and [`LiveRegistry::publish_source`] takes it.
    pub fn reserve(&self, path: &str) {
        self.reserved.lock().unwrap_or_else(|e| e.into_inner()).insert(path.to_string());
    }

    /// Starts publishing `path` from `publisher` with `tracks`; [`Taken`] when it has a publisher
    /// or is a camera source's.
    pub fn publish(
        &self,
        path: &str,
        publisher: SocketAddr,
        tracks: Vec<AnnouncedTrack>,
        now: Instant,
    ) -> Result<Arc<LiveStream>, Taken> {
        if self.reserved.lock().unwrap_or_else(|e| e.into_inner()).contains(path) {
            return Err(Taken);
        }
        if self.takeover {
            if let Some(old) = self.streams().remove(path) {
                old.ended.store(true, Ordering::Release);
            }
        }
        self.publish_source(path, publisher, tracks, now)
    }

    /// Starts a camera source's `path` (reserved for it) fed from the camera at `publisher`;
    /// [`Taken`] when it is live already.
    pub fn publish_source(
        &self,
        path: &str,
        publisher: SocketAddr,
        tracks: Vec<AnnouncedTrack>,
        now: Instant,
    ) -> Result<Arc<LiveStream>, Taken> {
        let mut streams = self.streams();
        if streams.contains_key(path) {
            return Err(Taken);
        }
        let stream = Arc::new(LiveStream::new(path, publisher, tracks, now));
        streams.insert(path.to_string(), Arc::clone(&stream));
        self.ended.lock().unwrap_or_else(|e| e.into_inner()).remove(path);
        Ok(stream)
    }

    /// The stream published at `path`, if any.
    pub fn get(&self, path: &str) -> Option<Arc<LiveStream>> {
        self.streams().get(path).cloned()
    }

    /// The stream an HTTP viewer of `path` watches: the one published there, else the last one
    /// if its publisher went less than [`ENDED_KEPT`] before `now`.
    pub fn watch(&self, path: &str, now: Instant) -> Option<Arc<LiveStream>> {
        if let Some(live) = self.get(path) {
            return Some(live);
        }
        let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
        ended.retain(|_, (at, _)| now.saturating_duration_since(*at) < ENDED_KEPT);
        ended.get(path).map(|(_, s)| Arc::clone(s))
    }

    /// The publisher of `stream` is gone: the path is free again, and its viewers end after
    /// what they have not sent yet.
    pub fn end(&self, stream: &Arc<LiveStream>) {
        stream.ended.store(true, Ordering::Release);
        let mut streams = self.streams();
        if streams.get(&stream.path).is_some_and(|s| Arc::ptr_eq(s, stream)) {
            streams.remove(&stream.path);
            let mut ended = self.ended.lock().unwrap_or_else(|e| e.into_inner());
            ended.insert(stream.path.clone(), (Instant::now(), Arc::clone(stream)));
        }
    }

    /// Every live path, sorted.
    pub fn list(&self, now: Instant) -> Vec<LiveSummary> {
        let mut all: Vec<LiveSummary> = self
            .streams()
            .values()
            .map(|s| LiveSummary {
                path: s.path.clone(),
                publisher: s.publisher,
                age: now.saturating_duration_since(s.started),
                ready: s.is_ready(),
                bit_rate: s.bit_rate(),
            })
            .collect();
        all.sort_by(|a, b| a.path.cmp(&b.path));
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `ffmpeg -f rtsp` announces for H.264 and AAC (its spaces after `;` included).
    const FFMPEG_SDP: &str = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n\
        a=tool:libavformat 61.7.100\r\nm=video 0 RTP/AVP 96\r\nb=AS:200\r\na=rtpmap:96 H264/90000\r\n\
        a=fmtp:96 packetization-mode=1; sprop-parameter-sets=Z2QADKzZQUH7ARAAAAMAEAAAAwMg8UKZYA==,aOvjyyLA; profile-level-id=64000C\r\n\
        a=control:streamid=0\r\nm=audio 0 RTP/AVP 97\r\nb=AS:128\r\na=rtpmap:97 MPEG4-GENERIC/44100/1\r\n\
        a=fmtp:97 profile-level-id=1;mode=AAC-hbr;sizelength=13;indexlength=3;indexdeltalength=3; config=1208\r\n\
        a=control:streamid=1\r\n";

    #[test]
    fn reads_what_ffmpeg_announces() {
        let tracks = tracks_from_sdp(FFMPEG_SDP.as_bytes()).unwrap();
        assert_eq!(tracks.len(), 2);
        let TrackKind::H264(h) = &tracks[0].kind else { panic!("{:?}", tracks[0].kind) };
        assert_eq!((h.sps.len(), h.pps.len(), h.profile_level_id), (1, 1, [0x64, 0x00, 0x0c]));
        assert_eq!((h.width, h.height), (320, 240), "the size, read from the SPS");
        assert_eq!((tracks[0].clock_rate, tracks[0].control.as_str()), (90_000, "streamid=0"));
        let TrackKind::Aac(a) = &tracks[1].kind else { panic!("{:?}", tracks[1].kind) };
        assert_eq!(
            (a.audio_specific_config.as_slice(), a.sample_rate, a.channels),
            (&[0x12, 0x08][..], 44_100, 1)
        );
        assert_eq!(tracks[1].clock_rate, 44_100);
    }

    #[test]
    fn reads_what_ffmpeg_announces_for_h265_and_opus() {
        let sdp = "v=0\r\no=- 0 0 IN IP4 127.0.0.1\r\ns=No Name\r\nt=0 0\r\nm=video 0 RTP/AVP 96\r\n\
            a=rtpmap:96 H265/90000\r\na=fmtp:96 sprop-vps=QAEMAf//AWAAAAMAkAAAAwAAAwAelZQJ; \
            sprop-sps=QgEBAWAAAAMAkAAAAwAAAwAeoCCDFllZUpMLwFoCAAADAAIAAAMAFBA=; sprop-pps=RAHAc8CJ\r\n\
            a=control:streamid=0\r\nm=audio 0 RTP/AVP 97\r\na=rtpmap:97 opus/48000/2\r\na=control:streamid=1\r\n";
        let tracks = tracks_from_sdp(sdp.as_bytes()).unwrap();
        let TrackKind::Video(VideoEntry { codec: VideoCodec::Hevc(h), width, height, .. }) = &tracks[0].kind
        else {
            panic!("{:?}", tracks[0].kind)
        };
        // Main profile, Main tier, level 1 (30), read past the SPS's emulation prevention bytes.
        assert_eq!((h.profile_space, h.high_tier, h.profile_idc, h.level_idc), (0, false, 1, 30));
        assert_eq!((h.compatibility, h.constraints), (0x6000_0000, [0x90, 0, 0, 0, 0, 0]));
        assert_eq!((h.vps.len(), h.sps.len(), h.pps.len(), tracks[0].clock_rate), (1, 1, 1, 90_000));
        assert_eq!((*width, *height), (64, 48), "the size, read from the SPS");
        let TrackKind::Audio(a) = &tracks[1].kind else { panic!("{:?}", tracks[1].kind) };
        assert_eq!(
            (a.codec_string(), a.sample_rate, a.channels, tracks[1].clock_rate),
            ("opus", 48_000, 1, 48_000)
        );
        assert!(tracks.iter().all(|t| sluice_media::sdp::rtp_payload_format(&Track {
            id: 1,
            kind: t.kind.clone(),
            timescale: t.clock_rate,
            duration: 0,
            edit_start: 0,
            samples: Vec::new(),
        })
        .is_ok()));
    }

    #[test]
    fn refuses_what_it_cannot_take_in() {
        assert_eq!(tracks_from_sdp(b"not an sdp").unwrap_err(), AnnounceError::BadSdp);
        let vp8 = FFMPEG_SDP.replace("MPEG4-GENERIC/44100/1", "VP8/90000");
        assert!(
            matches!(tracks_from_sdp(vp8.as_bytes()), Err(AnnounceError::Unsupported(w)) if w.contains("vp8"))
        );
        let latm = FFMPEG_SDP.replace("mode=AAC-hbr", "mode=AAC-lbr");
        assert!(matches!(tracks_from_sdp(latm.as_bytes()), Err(AnnounceError::Unsupported(_))));
        let bare =
            FFMPEG_SDP.replace("sprop-parameter-sets=Z2QADKzZQUH7ARAAAAMAEAAAAwMg8UKZYA==,aOvjyyLA; ", "");
        assert!(matches!(tracks_from_sdp(bare.as_bytes()), Err(AnnounceError::Unsupported(_))));
    }

    fn aac_packet(seq: u16, timestamp: u32) -> Vec<u8> {
        let mut p = vec![0x80, 97];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&timestamp.to_be_bytes());
        p.extend_from_slice(&9u32.to_be_bytes());
        // One AU header (16 bits): size 4 in 13 bits, index 0.
        p.extend_from_slice(&[0x00, 0x10, 0x00, 0x20, 1, 2, 3, 4]);
        p
    }

    #[test]
    fn timestamps_run_on_across_the_wrap_and_the_window_keeps_the_newest() {
        let registry = LiveRegistry::new("/live/");
        assert!(
            registry.is_live_path("/live/x")
                && !registry.is_live_path("/live/")
                && !registry.is_live_path("/lives/x")
        );
        assert!(!registry.is_live_path("/live/../x") && !registry.is_live_path("/film/x"));
        let tracks = tracks_from_sdp(FFMPEG_SDP.as_bytes()).unwrap();
        let now = Instant::now();
        let stream = registry.publish("/live/x", "10.0.0.1:1".parse().unwrap(), tracks.clone(), now).unwrap();
        assert_eq!(
            registry.publish("/live/x", "10.0.0.2:1".parse().unwrap(), tracks, now).unwrap_err(),
            Taken
        );
        assert!(!stream.is_ready());
        let first = u32::MAX - 2048;
        let n = LIVE_WINDOW_SAMPLES + 10;
        for i in 0..n {
            let ts = first.wrapping_add(i as u32 * 1024);
            assert_eq!(stream.push_rtp(1, &aac_packet(i as u16, ts), now), 1);
        }
        let snapshot = stream.snapshot();
        let audio = &snapshot.file.tracks[1];
        let kept = audio.samples.len();
        assert!(kept <= LIVE_WINDOW_SAMPLES && kept > LIVE_WINDOW_SAMPLES / 2);
        assert_eq!(snapshot.dropped[1] as usize + kept, n);
        let times: Vec<u64> = audio.samples.iter().map(|s| s.decode_time()).collect();
        assert!(times.windows(2).all(|w| w[1] == w[0] + 1024), "one frame apart across the 32-bit wrap");
        let last = audio.samples.last().unwrap();
        assert_eq!(stream.sample(last.offset()).unwrap().as_slice(), &[1, 2, 3, 4]);
        assert!(stream.sample(audio.samples[0].offset() - 1).is_none(), "gone with the window");
        assert!(Arc::ptr_eq(&stream.snapshot().file, &snapshot.file), "one table until a sample comes");
        assert_eq!(registry.list(now).len(), 1);
        registry.end(&stream);
        assert!(stream.has_ended() && registry.get("/live/x").is_none());
        let watched = registry.watch("/live/x", Instant::now()).unwrap();
        assert!(Arc::ptr_eq(&watched, &stream), "watched a while after it ended");
        assert!(registry.watch("/live/x", Instant::now() + ENDED_KEPT).is_none(), "then gone");
        // A camera source's path: no publisher takes it, live or not; its source does.
        let tracks = tracks_from_sdp(FFMPEG_SDP.as_bytes()).unwrap();
        let camera: SocketAddr = "10.0.0.3:554".parse().unwrap();
        assert_eq!(registry.path_of("cam1"), "/live/cam1");
        registry.reserve("/live/cam1");
        assert_eq!(registry.publish("/live/cam1", camera, tracks.clone(), now).unwrap_err(), Taken);
        let fed = registry.publish_source("/live/cam1", camera, tracks.clone(), now).unwrap();
        assert_eq!(registry.publish("/live/cam1", camera, tracks.clone(), now).unwrap_err(), Taken);
        registry.end(&fed);
        assert_eq!(registry.publish("/live/cam1", camera, tracks.clone(), now).unwrap_err(), Taken);
        // Configured to, a second publisher takes the path over; the first one's stream ends.
        let registry = LiveRegistry::new("/live").with_takeover(true);
        let first = registry.publish("/live/t", camera, tracks.clone(), now).unwrap();
        let second = registry.publish("/live/t", camera, tracks, now).unwrap();
        assert!(first.has_ended() && !second.has_ended());
        assert!(Arc::ptr_eq(&registry.get("/live/t").unwrap(), &second));
        registry.end(&first);
        assert!(Arc::ptr_eq(&registry.get("/live/t").unwrap(), &second), "the old one's end frees nothing");
    }

    #[test]
    fn whole_samples_go_into_the_table_as_reassembled_ones_do() {
        let registry = LiveRegistry::new("/live");
        let tracks = tracks_from_sdp(FFMPEG_SDP.as_bytes()).unwrap();
        let now = Instant::now();
        let stream = registry.publish("/live/w", "10.0.0.1:1".parse().unwrap(), tracks, now).unwrap();
        let idr = vec![0, 0, 0, 2, 0x65, 0x88];
        assert_eq!(stream.push_access_unit(0, 0, vec![0, 0, 0, 2, 0x41, 1], false, now), 1);
        assert!(!stream.is_ready(), "nothing before the first keyframe is kept");
        // Presentation times of I P B (B shown before P, sent after it): 40 ms apart at 90 kHz.
        for (ts, key) in [(7_200, true), (14_400, false), (10_800, false)] {
            let data = if key { idr.clone() } else { vec![0, 0, 0, 2, 0x41, 2] };
            assert_eq!(stream.push_access_unit(0, ts, data, key, now), 1);
        }
        for i in 0..3u32 {
            assert_eq!(stream.push_access_unit(1, i * 1024, vec![0x21, i as u8], true, now), 1);
        }
        assert_eq!(stream.push_access_unit(2, 0, vec![1], true, now), 0, "no such track");
        assert!(stream.is_ready());
        let snapshot = stream.snapshot();
        let video = &snapshot.file.tracks[0].samples;
        assert_eq!(video.len(), 3);
        assert!(video[0].is_sync() && !video[1].is_sync());
        let shown: Vec<u64> = video.iter().map(|s| s.composition_time()).collect();
        // Relative to the first, and REORDER_TICKS late (so no decode time is before 0).
        assert_eq!(shown, [18_000, 25_200, 21_600], "presentation times kept, relative to the first");
        assert!(video.windows(2).all(|w| w[1].decode_time() > w[0].decode_time()));
        assert!(video.iter().all(|s| s.decode_time() <= s.composition_time()));
        assert_eq!(stream.sample(video[0].offset()).unwrap().as_slice(), idr.as_slice());
        let audio: Vec<u64> = snapshot.file.tracks[1].samples.iter().map(|s| s.decode_time()).collect();
        // 0.2 s late too, at 44.1 kHz.
        assert_eq!(audio, [8_820, 9_844, 10_868]);
    }
}
