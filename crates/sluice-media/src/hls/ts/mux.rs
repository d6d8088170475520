//! A sans-I/O MPEG-TS muxer for one HLS segment: H.264 access units and AAC frames in, 188-byte
//! packets out.
//!
//! This module owns the muxing: the PAT and PMT at the start of the segment (program 1, PMT on
//! PID 0x1000, video on 0x100 as stream type 0x1B, audio on 0x101 as 0x0F), each access unit
//! as a PES packet with PTS and DTS cut into packets with continuity counters per PID (from 0
//! in each segment, as ffmpeg's segmenter does), a PCR in the first packet of every video PES
//! (of every audio PES without video), the random-access flag on keyframes, the conversion of
//! `avcC`'s length-prefixed NAL units to Annex B with an access unit delimiter first and the
//! SPS and PPS before each keyframe, and an ADTS header before each AAC frame. The packets
//! themselves (headers, adaptation fields and their stuffing, PSI sections and their CRC, PES
//! headers) are written by the `mpeg2ts` crate (MIT, no dependencies, its reader decodes what
//! it writes): a packet codec, not a muxer, so everything above is here. It reads nothing.

use mpeg2ts::es::{StreamId, StreamType};
use mpeg2ts::pes::PesHeader;
use mpeg2ts::time::{ClockReference, Timestamp};
use mpeg2ts::ts::payload::{Bytes, Pat, Pes, Pmt};
use mpeg2ts::ts::{
    AdaptationField, ContinuityCounter, EsInfo, Pid, ProgramAssociation, TransportScramblingControl,
    TsHeader, TsPacket, TsPacketWriter, TsPayload, VersionNumber, WriteTsPacket,
};

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
    pub(crate) fn new(has_video: bool, has_audio: bool, bytes: usize) -> Result<Muxer, MuxError> {
        let mut muxer = Muxer {
            writer: TsPacketWriter::new(Vec::with_capacity(bytes)),
            pat: ContinuityCounter::new(),
            pmt: ContinuityCounter::new(),
            video: ContinuityCounter::new(),
            audio: ContinuityCounter::new(),
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
        if has_video {
            es_info.push(EsInfo {
                stream_type: StreamType::H264,
                elementary_pid: Pid::new(VIDEO_PID)?,
                descriptors: vec![],
            });
        }
        if has_audio {
            es_info.push(EsInfo {
                stream_type: StreamType::AdtsAac,
                elementary_pid: Pid::new(AUDIO_PID)?,
                descriptors: vec![],
            });
        }
        let pmt = Pmt {
            program_num: 1,
            pcr_pid: Some(Pid::new(if has_video { VIDEO_PID } else { AUDIO_PID })?),
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

    /// Audio frames (ADTS), with a PCR when the segment has no video.
    pub(crate) fn audio(&mut self, frames: &[u8], pts: u64, pcr: Option<u64>) -> Result<(), MuxError> {
        self.pes(AUDIO_PID, StreamId::new(0xC0), frames, (pts, None), pcr, true)
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
/// An access unit delimiter: any slice types (`primary_pic_type` 7).
const AUD: [u8; 6] = [0, 0, 0, 1, 0x09, 0xF0];

/// Appends the access unit `sample` (NAL units with `nal_length_size`-byte lengths) to `out` in
/// Annex B: an access unit delimiter, the SPS and PPS first on a keyframe that lacks them, then
/// its NAL units but its own delimiters. A length that runs past the sample ends it (the
/// units before are kept).
pub(crate) fn annex_b(sample: &[u8], config: &H264Config, key: bool, out: &mut Vec<u8>) {
    let size = usize::from(config.nal_length_size);
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
    out.extend_from_slice(&AUD);
    let has = |kind: u8| units.iter().any(|u| u[0] & 0x1f == kind);
    if key && !(has(7) && has(8)) {
        for unit in config.sps.iter().chain(&config.pps) {
            out.extend_from_slice(&START_CODE);
            out.extend_from_slice(unit);
        }
    }
    for unit in units.iter().filter(|u| u[0] & 0x1f != 9) {
        out.extend_from_slice(&START_CODE);
        out.extend_from_slice(unit);
    }
}

/// The sampling rates of ADTS's frequency index (ISO/IEC 14496-3 §1.6.3.4).
const RATES: [u32; 13] =
    [96_000, 88_200, 64_000, 48_000, 44_100, 32_000, 24_000, 22_050, 16_000, 12_000, 11_025, 8_000, 7_350];

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
