//! A sans-I/O MPEG-TS muxer for one HLS segment: H.264 or HEVC access units and AAC, AC-3 or
//! E-AC-3 frames in, 188-byte packets out.
//!
//! This module owns the muxing: the PAT and PMT at the start of the segment (program 1, PMT on
//! PID 0x1000, video on 0x100, audio on 0x101, each with the stream type and descriptors of
//! [`TsVideo`] and [`TsAudio`]), each access unit as a PES packet with PTS and DTS cut into
//! packets with continuity counters per PID (from 0 in each segment, as ffmpeg's segmenter
//! does), a PCR in the first packet of every video PES (of every audio PES without video), the
//! random-access flag on keyframes, the conversion of `avcC`'s and `hvcC`'s length-prefixed NAL
//! units to Annex B with an access unit delimiter first and the parameter sets before each
//! keyframe, and an ADTS header before each AAC frame (AC-3 and E-AC-3 samples are already
//! sync frames and go as they are). The packets themselves (headers, adaptation fields and
//! their stuffing, PSI sections and their CRC, PES headers) are written by the `mpeg2ts` crate
//! (MIT, no dependencies, its reader decodes what it writes): a packet codec, not a muxer, so
//! everything above is here. It reads nothing.

use mpeg2ts::es::{StreamId, StreamType};
use mpeg2ts::pes::PesHeader;
use mpeg2ts::time::{ClockReference, Timestamp};
use mpeg2ts::ts::payload::{Bytes, Pat, Pes, Pmt};
use mpeg2ts::ts::{
    AdaptationField, ContinuityCounter, Descriptor, EsInfo, Pid, ProgramAssociation,
    TransportScramblingControl, TsHeader, TsPacket, TsPacketWriter, TsPayload, VersionNumber, WriteTsPacket,
};

use crate::codec::hevc::{self, HevcRecord};
use crate::mp4::{AacConfig, H264Config};

/// The PMT's PID.
pub const PMT_PID: u16 = 0x1000;
/// The video's PID (it carries the PCR).
pub const VIDEO_PID: u16 = 0x100;
/// The audio's PID.
pub const AUDIO_PID: u16 = 0x101;

/// Bytes of a PES header with a PTS (and with a DTS: 5 more).
const PES_HEADER_PTS: usize = 14;
/// An adaptation field with a PCR: its length byte, its flags and the PCR.
const PCR_FIELD: usize = 8;
/// Payload bytes of a TS packet.
const PAYLOAD: usize = TsPacket::SIZE - 4;

/// The tag of a registration descriptor (ISO/IEC 13818-1 §2.6.8): its four bytes name the format.
const REGISTRATION_DESCRIPTOR: u8 = 0x05;

/// A video codec the muxer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsVideo {
    /// H.264: stream type 0x1B.
    H264,
    /// HEVC: stream type 0x24 (ISO/IEC 13818-1 Amd. 3), registered as `HEVC`.
    Hevc,
}

/// An audio codec the muxer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsAudio {
    /// AAC in ADTS: stream type 0x0F.
    Aac,
    /// AC-3: stream type 0x81 on a private stream with the `AC-3` registration descriptor, as
    /// ATSC A/52 Annex A says and Apple's HLS authoring specification asks for.
    Ac3,
    /// E-AC-3: stream type 0x87 with the `EAC3` registration descriptor (ATSC A/52 Annex G).
    Eac3,
}

impl TsVideo {
    fn stream_type(self) -> StreamType {
        match self {
            TsVideo::H264 => StreamType::H264,
            TsVideo::Hevc => StreamType::H265,
        }
    }

    /// What the PMT says of the stream besides its type: the registration ffmpeg's muxer writes.
    fn descriptors(self) -> Vec<Descriptor> {
        match self {
            TsVideo::H264 => vec![],
            TsVideo::Hevc => vec![registration(b"HEVC")],
        }
    }
}

impl TsAudio {
    fn stream_type(self) -> StreamType {
        match self {
            TsAudio::Aac => StreamType::AdtsAac,
            TsAudio::Ac3 => StreamType::DolbyDigitalUpToSixChannelAudio,
            TsAudio::Eac3 => StreamType::DolbyDigitalPlusUpTo16ChannelAudioForAtsc,
        }
    }

    fn descriptors(self) -> Vec<Descriptor> {
        match self {
            TsAudio::Aac => vec![],
            TsAudio::Ac3 => vec![registration(b"AC-3")],
            TsAudio::Eac3 => vec![registration(b"EAC3")],
        }
    }

    /// The PES stream id: an MPEG audio stream for AAC, `private_stream_1` for Dolby's (ATSC
    /// A/52 Annex A §A.5).
    fn stream_id(self) -> StreamId {
        match self {
            TsAudio::Aac => StreamId::new(0xC0),
            TsAudio::Ac3 | TsAudio::Eac3 => StreamId::new(0xBD),
        }
    }
}

fn registration(format: &[u8; 4]) -> Descriptor {
    Descriptor { tag: REGISTRATION_DESCRIPTOR, data: format.to_vec() }
}

/// Why a segment cannot be muxed.
#[derive(Debug, thiserror::Error)]
pub enum MuxError {
    /// The packet writer refused a value.
    #[error("writing TS packets: {0}")]
    Packet(String),
    /// The audio cannot be carried as ADTS.
    #[error("AAC in ADTS: {0}")]
    Adts(&'static str),
}

impl From<mpeg2ts::Error> for MuxError {
    fn from(e: mpeg2ts::Error) -> MuxError {
        MuxError::Packet(e.to_string())
    }
}

/// The muxer of one segment. Timestamps are 90 kHz ticks, PCRs 27 MHz ticks, both wrapped.
pub(crate) struct Muxer {
    writer: TsPacketWriter<Vec<u8>>,
    pat: ContinuityCounter,
    pmt: ContinuityCounter,
    video: ContinuityCounter,
    audio: ContinuityCounter,
    audio_stream: StreamId,
}

fn header(pid: u16, counter: &mut ContinuityCounter) -> Result<TsHeader, MuxError> {
    let header = TsHeader {
        transport_error_indicator: false,
        transport_priority: false,
        pid: Pid::new(pid)?,
        transport_scrambling_control: TransportScramblingControl::NotScrambled,
        continuity_counter: *counter,
    };
    counter.increment();
    Ok(header)
}

fn timestamp(ticks_90k: u64) -> Timestamp {
    Timestamp::new(ticks_90k & Timestamp::MAX).expect("masked to 33 bits")
}

impl Muxer {
    /// A segment of `bytes` about this long, starting with its PAT and the PMT of the streams it
    /// has.
    pub(crate) fn new(
        video: Option<TsVideo>,
        audio: Option<TsAudio>,
        bytes: usize,
    ) -> Result<Muxer, MuxError> {
        let mut muxer = Muxer {
            writer: TsPacketWriter::new(Vec::with_capacity(bytes)),
            pat: ContinuityCounter::new(),
            pmt: ContinuityCounter::new(),
            video: ContinuityCounter::new(),
            audio: ContinuityCounter::new(),
            audio_stream: audio.unwrap_or(TsAudio::Aac).stream_id(),
        };
        let pat = Pat {
            transport_stream_id: 1,
            version_number: VersionNumber::new(),
            table: vec![ProgramAssociation { program_num: 1, program_map_pid: Pid::new(PMT_PID)? }],
        };
        let packet = TsPacket {
            header: header(0, &mut muxer.pat)?,
            adaptation_field: None,
            payload: Some(TsPayload::Pat(pat)),
        };
        muxer.writer.write_ts_packet(&packet)?;
        let mut es_info = Vec::new();
        if let Some(video) = video {
            es_info.push(EsInfo {
                stream_type: video.stream_type(),
                elementary_pid: Pid::new(VIDEO_PID)?,
                descriptors: video.descriptors(),
            });
        }
        if let Some(audio) = audio {
            es_info.push(EsInfo {
                stream_type: audio.stream_type(),
                elementary_pid: Pid::new(AUDIO_PID)?,
                descriptors: audio.descriptors(),
            });
        }
        let pmt = Pmt {
            program_num: 1,
            pcr_pid: Some(Pid::new(if video.is_some() { VIDEO_PID } else { AUDIO_PID })?),
            version_number: VersionNumber::new(),
            program_info: vec![],
            es_info,
        };
        let packet = TsPacket {
            header: header(PMT_PID, &mut muxer.pmt)?,
            adaptation_field: None,
            payload: Some(TsPayload::Pmt(pmt)),
        };
        muxer.writer.write_ts_packet(&packet)?;
        Ok(muxer)
    }

    /// One video access unit (Annex B), with its PCR.
    pub(crate) fn video(
        &mut self,
        unit: &[u8],
        pts: u64,
        dts: u64,
        key: bool,
        pcr: u64,
    ) -> Result<(), MuxError> {
        let stream = StreamId::new(0xE0);
        self.pes(VIDEO_PID, stream, unit, (pts, Some(dts).filter(|&d| d != pts)), Some(pcr), key)
    }

    /// Audio frames (ADTS, or AC-3 or E-AC-3 sync frames), with a PCR when the segment has no
    /// video.
    pub(crate) fn audio(&mut self, frames: &[u8], pts: u64, pcr: Option<u64>) -> Result<(), MuxError> {
        self.pes(AUDIO_PID, self.audio_stream, frames, (pts, None), pcr, true)
    }

    /// The segment's bytes.
    pub(crate) fn finish(self) -> Vec<u8> {
        self.writer.into_stream()
    }

    fn pes(
        &mut self,
        pid: u16,
        stream_id: StreamId,
        payload: &[u8],
        (pts, dts): (u64, Option<u64>),
        pcr: Option<u64>,
        random_access: bool,
    ) -> Result<(), MuxError> {
        let header_len = PES_HEADER_PTS + if dts.is_some() { 5 } else { 0 };
        // The length after the field itself; 0 (unbounded, allowed for video) when it does not fit.
        let pes_packet_len =
            u16::try_from(header_len - 6 + payload.len()).ok().filter(|_| pid == AUDIO_PID).unwrap_or(0);
        let adaptation_field = (pcr.is_some() || random_access).then(|| AdaptationField {
            discontinuity_indicator: false,
            random_access_indicator: random_access,
            es_priority_indicator: false,
            pcr: pcr.map(|p| ClockReference::new(p % (ClockReference::MAX + 1)).expect("wrapped")),
            opcr: None,
            splice_countdown: None,
            transport_private_data: vec![],
            extension: None,
        });
        let field_len = match &adaptation_field {
            Some(f) if f.pcr.is_some() => PCR_FIELD,
            Some(_) => 2,
            None => 0,
        };
        let first = payload.len().min(PAYLOAD - field_len - header_len);
        let counter = if pid == VIDEO_PID { &mut self.video } else { &mut self.audio };
        let pes = Pes {
            header: PesHeader {
                stream_id,
                priority: false,
                data_alignment_indicator: true,
                copyright: false,
                original_or_copy: false,
                pts: Some(timestamp(pts)),
                dts: dts.map(timestamp),
                escr: None,
            },
            pes_packet_len,
            data: Bytes::new(&payload[..first])?,
        };
        let packet = TsPacket {
            header: header(pid, counter)?,
            adaptation_field,
            payload: Some(TsPayload::PesStart(pes)),
        };
        self.writer.write_ts_packet(&packet)?;
        for chunk in payload[first..].chunks(PAYLOAD) {
            let counter = if pid == VIDEO_PID { &mut self.video } else { &mut self.audio };
            let packet = TsPacket {
                header: header(pid, counter)?,
                adaptation_field: None,
                payload: Some(TsPayload::PesContinuation(Bytes::new(chunk)?)),
            };
            self.writer.write_ts_packet(&packet)?;
        }
        Ok(())
    }
}

/// The Annex B start code before each NAL unit.
const START_CODE: [u8; 4] = [0, 0, 0, 1];
/// An H.264 access unit delimiter: any slice types (`primary_pic_type` 7).
const AVC_AUD: [u8; 6] = [0, 0, 0, 1, 0x09, 0xF0];
/// An HEVC access unit delimiter (NAL type 35, layer 0, temporal id 0): I, P and B slices
/// (`pic_type` 2), as ffmpeg's muxer writes it.
const HEVC_AUD: [u8; 7] = [0, 0, 0, 1, 0x46, 0x01, 0x50];
/// HEVC's IRAP pictures: NAL types 16 (BLA) to 23 (ITU-T H.265 Table 7-1).
const HEVC_IRAP: std::ops::RangeInclusive<u8> = 16..=23;
/// H.264's NAL types of an access unit delimiter, an SPS and a PPS (ITU-T H.264 Table 7-1).
const AVC_AUD_TYPE: u8 = 9;
const AVC_SPS: u8 = 7;
const AVC_PPS: u8 = 8;
/// HEVC's access unit delimiter NAL type.
const HEVC_AUD_TYPE: u8 = 35;

/// The decoder configuration of a video track, for [`annex_b`].
#[derive(Debug, Clone, Copy)]
pub(crate) enum VideoConfig<'a> {
    /// From `avcC`.
    H264(&'a H264Config),
    /// From `hvcC`.
    Hevc(&'a HevcRecord),
}

impl VideoConfig<'_> {
    fn nal_length_size(&self) -> usize {
        match self {
            VideoConfig::H264(c) => usize::from(c.nal_length_size),
            VideoConfig::Hevc(c) => usize::from(c.nal_length_size),
        }
    }

    fn nal_type(&self, unit: &[u8]) -> u8 {
        match self {
            VideoConfig::H264(_) => unit[0] & 0x1f,
            VideoConfig::Hevc(_) => hevc::nal_unit_type(unit),
        }
    }
}

/// Appends the access unit `sample` (NAL units with length prefixes) to `out` in Annex B: an
/// access unit delimiter, the parameter sets (H.264's SPS and PPS, HEVC's VPS, SPS and PPS)
/// first on a keyframe (for HEVC, on any IRAP picture) that lacks them, then its NAL units but
/// its own delimiters. A length that runs past the sample ends it (the units before are kept).
pub(crate) fn annex_b(sample: &[u8], config: VideoConfig<'_>, key: bool, out: &mut Vec<u8>) {
    let size = config.nal_length_size();
    let mut units = Vec::new();
    let mut rest = sample;
    while rest.len() > size {
        let len = rest[..size].iter().fold(0usize, |n, &b| (n << 8) | usize::from(b));
        let Some(unit) = rest.get(size..size + len) else { break };
        if !unit.is_empty() {
            units.push(unit);
        }
        rest = &rest[size + len..];
    }
    let has = |kind: u8| units.iter().any(|u| config.nal_type(u) == kind);
    let (aud, aud_type, parameter_sets, insert_sets) = match config {
        VideoConfig::H264(c) => {
            let sets: Vec<&Vec<u8>> = c.sps.iter().chain(&c.pps).collect();
            (&AVC_AUD[..], AVC_AUD_TYPE, sets, key && !(has(AVC_SPS) && has(AVC_PPS)))
        }
        VideoConfig::Hevc(c) => {
            let sets: Vec<&Vec<u8>> = c.vps.iter().chain(&c.sps).chain(&c.pps).collect();
            let irap = key || units.iter().any(|u| HEVC_IRAP.contains(&config.nal_type(u)));
            let has_all = has(hevc::VPS) && has(hevc::SPS) && has(hevc::PPS);
            (&HEVC_AUD[..], HEVC_AUD_TYPE, sets, irap && !has_all)
        }
    };
    out.extend_from_slice(aud);
    if insert_sets {
        for unit in parameter_sets {
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(unit);
        }
    }
    for unit in units.iter().filter(|u| config.nal_type(u) != aud_type) {
        out.extend_from_slice(&START_CODE);
        out.extend_from_slice(unit);
    }
}

/// The sampling rates of ADTS's frequency index (ISO/IEC 14496-3 §1.6.3.4).
use crate::codec::audio::AAC_SAMPLING_RATES as RATES;

/// What every ADTS header of a track says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Adts {
    /// The MPEG-4 audio object type less one (1: AAC LC).
    profile: u8,
    frequency_index: u8,
    channels: u8,
}

impl Adts {
    /// The header fields for `config`'s AudioSpecificConfig. HE-AAC (SBR, PS) is carried as its
    /// AAC LC core, as ADTS signals it implicitly.
    pub(crate) fn of(config: &AacConfig) -> Result<Adts, MuxError> {
        let asc = &config.audio_specific_config;
        let (Some(&a), Some(&b)) = (asc.first(), asc.get(1)) else {
            return Err(MuxError::Adts("the AudioSpecificConfig is shorter than 2 bytes"));
        };
        let object_type = match a >> 3 {
            5 | 29 => 2,
            t @ 1..=4 => t,
            _ => return Err(MuxError::Adts("only AAC Main, LC, SSR and LTP fit an ADTS header")),
        };
        let mut frequency_index = ((a & 0x07) << 1) | (b >> 7);
        if frequency_index == 15 {
            frequency_index = RATES
                .iter()
                .position(|&r| r == config.sample_rate)
                .ok_or(MuxError::Adts("a sampling rate ADTS has no index for"))?
                as u8;
        } else if frequency_index > 12 {
            return Err(MuxError::Adts("a reserved sampling frequency index"));
        }
        let channels = match (b >> 3) & 0x0f {
            0 if (1..=7).contains(&config.channels) => config.channels as u8,
            c @ 1..=7 => c,
            _ => return Err(MuxError::Adts("a channel layout ADTS cannot say")),
        };
        Ok(Adts { profile: object_type - 1, frequency_index, channels })
    }

    /// Appends `frame` with its ADTS header to `out`.
    pub(crate) fn frame(&self, frame: &[u8], out: &mut Vec<u8>) -> Result<(), MuxError> {
        let len = frame.len() + 7;
        if len > 0x1fff {
            return Err(MuxError::Adts("a frame longer than ADTS's 13-bit length"));
        }
        let (p, f, c) = (self.profile, self.frequency_index, self.channels);
        out.extend_from_slice(&[
            0xff,
            0xf1, // MPEG-4, layer 0, no CRC
            (p << 6) | (f << 2) | (c >> 2),
            ((c & 3) << 6) | (len >> 11) as u8,
            (len >> 3) as u8,
            ((len as u8 & 7) << 5) | 0x1f, // buffer fullness 0x7ff: variable rate
            0xfc,
        ]);
        out.extend_from_slice(frame);
        Ok(())
    }
}
