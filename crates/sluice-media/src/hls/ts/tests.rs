//! The TS packaging's tests: the demo's segments read back with `mpeg2ts`'s reader (packets,
//! continuity counters, PCRs, PES timestamps, every access unit and AAC frame), a hand-made HEVC
//! file with AC-3 and with E-AC-3 read back the same way, and the Annex B and ADTS conversions
//! on hand-made input.

use std::collections::HashMap;
use std::time::Duration;

use mpeg2ts::ts::{ReadTsPacket, TsPacketReader, TsPayload};

use super::mux::{AUDIO_PID, PMT_PID, VIDEO_PID};
use super::*;
use crate::codec::entry::InBandParameterSets;
use crate::codec::{Ac3Record, AudioEntry, Eac3Record, HevcRecord, VideoEntry};
use crate::mp4::{AacConfig, H264Config, Sample};

fn demo() -> (Vec<u8>, Mp4File) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    let data = std::fs::read(path).unwrap();
    let file = Mp4File::from_bytes(&data).unwrap();
    (data, file)
}

/// Segment `n` as the server makes it: its reads, then the muxer.
pub(crate) fn make(file: &Mp4File, index: &SegmentIndex, data: &[u8], n: usize) -> Vec<u8> {
    let reads: Vec<(u64, Vec<u8>)> = segment_reads(file, index, n)
        .unwrap()
        .into_iter()
        .map(|r| (r.start, data[r.start as usize..r.end as usize].to_vec()))
        .collect();
    segment(file, index, n, &reads).unwrap()
}

#[test]
fn names_parse_canonically() {
    assert_eq!(TsResource::parse("master.m3u8"), Some(TsResource::Master));
    assert_eq!(TsResource::parse("media.m3u8"), Some(TsResource::Media));
    assert_eq!(TsResource::parse("seg-3.ts"), Some(TsResource::Segment(3)));
    for bad in ["seg-03.ts", "seg-.ts", "seg-3.m4s", "video.m3u8", "seg-x.ts"] {
        assert_eq!(TsResource::parse(bad), None, "{bad}");
    }
    assert_eq!(TsResource::Segment(0).content_type(), "video/mp2t");
}

/// Each segment reads back packet by packet: PAT and PMT first, continuity counters from 0
/// without a gap on each PID, a PCR starting every video PES, a video PES per frame with its
/// PTS and DTS, and every AAC frame of the segment in ADTS.
#[test]
fn segments_read_back_with_every_access_unit() {
    let (data, file) = demo();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    let video = &file.tracks[0];
    let mut last_pts = None;
    let (mut frames, mut audio_frames) = (0, 0);
    for n in 0..index.segments() {
        let ts = make(&file, &index, &data, n);
        assert_eq!(ts.len() % 188, 0);
        let mut reader = TsPacketReader::new(ts.as_slice());
        let mut counters: HashMap<u16, u8> = HashMap::new();
        let mut pids = Vec::new();
        let mut audio_pes: Vec<u8> = Vec::new();
        let mut pcrs = 0;
        let mut video_pes = 0;
        while let Some(packet) = reader.read_ts_packet().unwrap() {
            let pid = packet.header.pid.as_u16();
            let cc = packet.header.continuity_counter.as_u8();
            let expected = counters.get(&pid).map_or(0, |c| (c + 1) & 15);
            assert_eq!(cc, expected, "segment {n} PID {pid:#x}: continuity");
            counters.insert(pid, cc);
            pids.push(pid);
            if packet.adaptation_field.as_ref().is_some_and(|a| a.pcr.is_some()) {
                assert_eq!(pid, VIDEO_PID, "the PCR is on the video");
                pcrs += 1;
            }
            match packet.payload {
                Some(TsPayload::PesStart(pes)) if pid == VIDEO_PID => {
                    video_pes += 1;
                    assert!(
                        packet.adaptation_field.as_ref().is_some_and(|a| a.pcr.is_some()),
                        "a PCR on each frame"
                    );
                    let pts = pes.header.pts.unwrap().as_u64();
                    let dts = pes.header.dts.map_or(pts, |d| d.as_u64());
                    assert!(dts <= pts);
                    let i = index.samples(n, Packaged::Video).start + video_pes - 1;
                    let s = &video.samples[i];
                    let expected =
                        (s.composition_time() as i64 - video.edit_start as i64) * 90_000 / 15_360 + 126_000;
                    assert_eq!(pts as i64, expected, "frame {i}");
                    assert_eq!(packet.adaptation_field.unwrap().random_access_indicator, s.is_sync());
                    assert_eq!(&pes.data.as_ref()[..6], &[0, 0, 0, 1, 9, 0xf0], "an AUD first");
                    last_pts = Some(pts);
                }
                Some(TsPayload::PesStart(pes)) if pid == AUDIO_PID => {
                    audio_pes.extend_from_slice(pes.data.as_ref())
                }
                Some(TsPayload::PesContinuation(bytes)) if pid == AUDIO_PID => {
                    audio_pes.extend_from_slice(bytes.as_ref())
                }
                _ => {}
            }
        }
        assert_eq!(&pids[..2], &[0, PMT_PID], "segment {n} starts with its PAT and PMT");
        assert_eq!(video_pes, index.samples(n, Packaged::Video).len());
        assert_eq!(pcrs, video_pes);
        frames += video_pes;
        // The audio's bytes are ADTS frames back to back, one per sample, with the sample's bytes.
        let mut rest = audio_pes.as_slice();
        for i in index.samples(n, Packaged::Audio) {
            let s = &file.tracks[1].samples[i];
            assert_eq!(&rest[..2], &[0xff, 0xf1]);
            let len = ((usize::from(rest[3]) & 3) << 11)
                | (usize::from(rest[4]) << 3)
                | (usize::from(rest[5]) >> 5);
            assert_eq!(len, s.size() as usize + 7);
            assert!(rest[7..len] == data[s.range().start as usize..s.range().end as usize]);
            rest = &rest[len..];
            audio_frames += 1;
        }
        assert!(rest.is_empty(), "nothing but the segment's frames");
    }
    assert_eq!((frames, audio_frames), (180, 283));
    assert!(last_pts.is_some());
}

#[test]
fn annex_b_puts_an_aud_first_and_parameter_sets_before_keyframes() {
    let config = H264Config {
        sps: vec![vec![0x67, 1]],
        pps: vec![vec![0x68, 2]],
        nal_length_size: 4,
        profile_level_id: [0x64, 0, 0x1f],
        width: 16,
        height: 16,
    };
    // An AUD of the file's own, then an IDR slice, then a length past the end.
    let sample = [0, 0, 0, 2, 0x09, 0x10, 0, 0, 0, 3, 0x65, 7, 8, 0, 0, 0, 9, 1];
    let mut out = Vec::new();
    annex_b(&sample, VideoConfig::H264(&config), true, &mut out);
    assert_eq!(out, [0, 0, 0, 1, 9, 0xf0, 0, 0, 0, 1, 0x67, 1, 0, 0, 0, 1, 0x68, 2, 0, 0, 0, 1, 0x65, 7, 8]);
    out.clear();
    annex_b(
        &sample[6..13],
        VideoConfig::H264(&H264Config { nal_length_size: 4, ..config.clone() }),
        false,
        &mut out,
    );
    assert_eq!(out, [0, 0, 0, 1, 9, 0xf0, 0, 0, 0, 1, 0x65, 7, 8]);
    // Two-byte lengths.
    out.clear();
    annex_b(
        &[0, 2, 0x41, 5],
        VideoConfig::H264(&H264Config { nal_length_size: 2, ..config }),
        false,
        &mut out,
    );
    assert_eq!(out, [0, 0, 0, 1, 9, 0xf0, 0, 0, 0, 1, 0x41, 5]);
}

#[test]
fn adts_headers_say_the_configuration() {
    // AAC LC, 48 kHz, stereo: the header ffmpeg writes for a 100-byte frame.
    let lc = AacConfig { audio_specific_config: vec![0x11, 0x90], sample_rate: 48_000, channels: 2 };
    let mut out = Vec::new();
    Adts::of(&lc).unwrap().frame(&[0; 100], &mut out).unwrap();
    assert_eq!(&out[..7], &[0xff, 0xf1, 0x4c, 0x80, 0x0d, 0x7f, 0xfc]);
    // HE-AAC (object type 5) is carried as its LC core.
    let he =
        AacConfig { audio_specific_config: vec![0x2b, 0x92, 0x08, 0x00], sample_rate: 44_100, channels: 2 };
    assert_eq!(
        Adts::of(&he).unwrap(),
        Adts::of(&AacConfig { audio_specific_config: vec![0x13, 0x90], ..he.clone() }).unwrap()
    );
    let bad = AacConfig { audio_specific_config: vec![0xf8, 0x00], sample_rate: 48_000, channels: 2 };
    assert!(Adts::of(&bad).is_err());
    assert!(Adts::of(&lc).unwrap().frame(&[0; 9000], &mut out).is_err());
}

#[test]
fn playlists_are_version_3_with_the_fmp4_cuts() {
    let (_, file) = demo();
    let index = SegmentIndex::build(&file, Duration::from_secs(2)).unwrap();
    let media = media_playlist(&index);
    let m3u8_rs::Playlist::MediaPlaylist(p) = m3u8_rs::parse_playlist_res(media.as_bytes()).unwrap() else {
        panic!("{media}")
    };
    assert_eq!(p.version, Some(3));
    assert!(p.end_list && !media.contains("EXT-X-MAP"));
    let uris: Vec<&str> = p.segments.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(uris, ["seg-0.ts", "seg-1.ts", "seg-2.ts"]);
    for (s, n) in p.segments.iter().zip(0..) {
        assert!((f64::from(s.duration) - index.segment_duration(n)).abs() < 1e-4);
    }
    let master = master_playlist(&[TsRendition { prefix: "", index: &index, file: &file }]);
    let m3u8_rs::Playlist::MasterPlaylist(m) = m3u8_rs::parse_playlist_res(master.as_bytes()).unwrap() else {
        panic!("{master}")
    };
    assert_eq!(m.variants.len(), 1);
    assert_eq!(m.variants[0].uri, "media.m3u8");
    assert_eq!(m.variants[0].codecs.as_deref(), Some("avc1.4d401e,mp4a.40.2"));
    // BANDWIDTH bounds every segment's rate.
    let (data, _) = demo();
    for n in 0..index.segments() {
        let bits = make(&file, &index, &data, n).len() as f64 * 8.0;
        assert!(bits / index.segment_duration(n) <= m.variants[0].bandwidth as f64, "segment {n}");
    }
}

#[test]
fn hevc_annex_b_puts_its_aud_first_and_vps_sps_pps_before_each_irap() {
    let record = hevc_record();
    // A CRA picture (type 21) the file does not mark as a sync sample, with its own AUD.
    let sample = [0, 0, 0, 3, 0x46, 0x01, 0x10, 0, 0, 0, 3, 0x2a, 0x01, 7];
    let mut out = Vec::new();
    annex_b(&sample, VideoConfig::Hevc(&record), false, &mut out);
    let mut expected = vec![0, 0, 0, 1, 0x46, 0x01, 0x50];
    for set in [&[0x40u8, 0x01, 1][..], &[0x42, 0x01, 2], &[0x44, 0x01, 3]] {
        expected.extend_from_slice(&[0, 0, 0, 1]);
        expected.extend_from_slice(set);
    }
    expected.extend_from_slice(&[0, 0, 0, 1, 0x2a, 0x01, 7]);
    assert_eq!(out, expected);
    // A trailing picture (type 1): the delimiter only.
    out.clear();
    annex_b(
        &[0, 3, 0x02, 0x01, 9],
        VideoConfig::Hevc(&HevcRecord { nal_length_size: 2, ..record.clone() }),
        false,
        &mut out,
    );
    assert_eq!(out, [0, 0, 0, 1, 0x46, 0x01, 0x50, 0, 0, 0, 1, 0x02, 0x01, 9]);
    // A keyframe that carries its parameter sets gets no second copy.
    out.clear();
    let carrying = [
        0, 0, 0, 3, 0x40, 0x01, 1, 0, 0, 0, 3, 0x42, 0x01, 2, 0, 0, 0, 3, 0x44, 0x01, 3, 0, 0, 0, 3, 0x26,
        0x01, 5,
    ];
    annex_b(&carrying, VideoConfig::Hevc(&record), true, &mut out);
    assert_eq!(out.len(), 7 + 4 * 7, "{out:x?}");
}

fn hevc_record() -> HevcRecord {
    HevcRecord {
        profile_space: 0,
        high_tier: false,
        profile_idc: 1,
        compatibility: 0x6000_0000,
        constraints: [0x90, 0, 0, 0, 0, 0],
        level_idc: 60,
        chroma_format: 1,
        bit_depth_luma: 8,
        bit_depth_chroma: 8,
        nal_length_size: 4,
        vps: vec![vec![0x40, 0x01, 1]],
        sps: vec![vec![0x42, 0x01, 2]],
        pps: vec![vec![0x44, 0x01, 3]],
    }
}

/// A hand-made file of 2 s of 25 fps HEVC (an IDR every second, `hev1`) and 48 kHz audio of
/// `audio` (AC-3 or E-AC-3) whose samples are sync frames of distinct bytes, and its bytes.
fn hevc_and_dolby(audio: AudioCodec) -> (Vec<u8>, Mp4File) {
    let mut data = Vec::new();
    let mut video_samples = Vec::new();
    for i in 0..50u64 {
        // An IDR_W_RADL (type 19) or a TRAIL_R (type 1) slice, its length first.
        let nal: [u8; 4] =
            if i.is_multiple_of(25) { [0x26, 0x01, 0xaf, i as u8] } else { [0x02, 0x01, 0xd0, i as u8] };
        video_samples.push(Sample::new(data.len() as u64, 8, i * 3600, 0, i.is_multiple_of(25)));
        data.extend_from_slice(&[0, 0, 0, 4]);
        data.extend_from_slice(&nal);
    }
    let mut audio_samples = Vec::new();
    for i in 0..63u64 {
        audio_samples.push(Sample::new(data.len() as u64, 6, i * 1536, 0, true));
        data.extend_from_slice(&[0x0b, 0x77, 0, 0, i as u8, 0x42]);
    }
    let video = Track {
        id: 1,
        kind: TrackKind::Video(VideoEntry {
            codec: VideoCodec::Hevc(hevc_record()),
            width: 320,
            height: 180,
            colour: None,
            mastering: None,
            light_level: None,
            dolby_vision: None,
            sample_entry: vec![0, 0, 0, 8, b'h', b'e', b'v', b'1'],
            in_band: InBandParameterSets::Unknown,
        }),
        timescale: 90_000,
        duration: 180_000,
        edit_start: 0,
        samples: video_samples,
    };
    let sample_entry = match audio {
        AudioCodec::Eac3(_) => b"ec-3",
        _ => b"ac-3",
    };
    let audio = Track {
        id: 2,
        kind: TrackKind::Audio(AudioEntry {
            codec: audio,
            sample_rate: 48_000,
            channels: 2,
            sample_entry: [&[0, 0, 0, 8][..], sample_entry].concat(),
        }),
        timescale: 48_000,
        duration: 96_768,
        edit_start: 0,
        samples: audio_samples,
    };
    let file = Mp4File {
        tracks: vec![video, audio],
        skipped: vec![],
        file_len: data.len() as u64,
        fragmented: false,
    };
    (data, file)
}

/// HEVC with AC-3 and with E-AC-3: the PMT names their stream types and registrations as
/// ffmpeg's muxer does (0x24 `HEVC`, 0x81 `AC-3`, 0x87 `EAC3`), every video PES starts with
/// HEVC's delimiter and each IDR with the parameter sets, the audio goes on `private_stream_1`
/// with every sync frame as it is, and the master's `CODECS` say `hvc1` for an `hev1` file.
#[test]
fn hevc_with_ac3_and_eac3_segments_read_back() {
    let ac3 = Ac3Record { fscod: 0, bsid: 8, bsmod: 0, acmod: 2, lfe: false, bit_rate_code: 10 };
    let eac3 = Eac3Record::parse(&[0x01, 0x80, 0x20, 0x0f, 0x00]).unwrap();
    for (codec, stream_type, registration) in
        [(AudioCodec::Ac3(ac3), 0x81, b"AC-3"), (AudioCodec::Eac3(eac3), 0x87, b"EAC3")]
    {
        let (data, file) = hevc_and_dolby(codec);
        carries(&file, &SegmentIndex::build(&file, Duration::from_secs(1)).unwrap()).unwrap();
        let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
        assert_eq!(index.segments(), 2);
        let (mut video_units, mut audio) = (0, Vec::new());
        for n in 0..index.segments() {
            let ts = make(&file, &index, &data, n);
            let mut reader = TsPacketReader::new(ts.as_slice());
            let mut counters: HashMap<u16, u8> = HashMap::new();
            while let Some(packet) = reader.read_ts_packet().unwrap() {
                let pid = packet.header.pid.as_u16();
                let cc = packet.header.continuity_counter.as_u8();
                assert_eq!(cc, counters.get(&pid).map_or(0, |c| (c + 1) & 15), "continuity on {pid:#x}");
                counters.insert(pid, cc);
                match packet.payload {
                    Some(TsPayload::Pmt(pmt)) => {
                        let types: Vec<(u8, Vec<u8>)> = pmt
                            .es_info
                            .iter()
                            .map(|e| {
                                (
                                    e.stream_type as u8,
                                    e.descriptors
                                        .iter()
                                        .flat_map(|d| [&[d.tag][..], &d.data].concat())
                                        .collect(),
                                )
                            })
                            .collect();
                        assert_eq!(
                            types,
                            [
                                (0x24, [&[5][..], b"HEVC"].concat()),
                                (stream_type, [&[5][..], registration].concat())
                            ]
                        );
                    }
                    Some(TsPayload::PesStart(pes)) if pid == VIDEO_PID => {
                        let i = index.samples(n, Packaged::Video).start + video_units % 25;
                        let bytes = pes.data.as_ref();
                        assert_eq!(&bytes[..7], &[0, 0, 0, 1, 0x46, 0x01, 0x50], "HEVC's AUD first");
                        let slice = &data[file.tracks[0].samples[i].range().start as usize + 4..][..4];
                        if i.is_multiple_of(25) {
                            assert_eq!(&bytes[7..11], &[0, 0, 0, 1]);
                            assert_eq!(bytes[11] >> 1 & 0x3f, 32, "the VPS before the IDR");
                            assert_eq!(bytes.len(), 7 + 3 * 7 + 8);
                        } else {
                            assert_eq!(bytes.len(), 7 + 8);
                        }
                        assert_eq!(&bytes[bytes.len() - 4..], slice);
                        video_units += 1;
                    }
                    Some(TsPayload::PesStart(pes)) if pid == AUDIO_PID => {
                        assert_eq!(pes.header.stream_id.as_u8(), 0xbd, "private_stream_1");
                        audio.extend_from_slice(pes.data.as_ref());
                    }
                    Some(TsPayload::PesContinuation(bytes)) if pid == AUDIO_PID => {
                        audio.extend_from_slice(bytes.as_ref())
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(video_units, 50);
        let first = file.tracks[1].samples[0].range().start as usize;
        assert_eq!(audio, data[first..first + 63 * 6], "every sync frame as it is, in order");
        let master = master_playlist(&[TsRendition { prefix: "", index: &index, file: &file }]);
        let codecs = codecs(&file, &index);
        assert!(codecs.starts_with("hvc1.1.6.L60.90,"), "{codecs}");
        assert!(master.contains(&format!("CODECS=\"{codecs}\"")), "{master}");
    }
}

#[test]
fn other_codecs_are_refused_by_name() {
    let opus = crate::codec::OpusRecord::parse(&[0, 2, 0, 0, 0, 0, 0xbb, 0x80, 0, 0, 0]).unwrap();
    let (_, file) = hevc_and_dolby(AudioCodec::Opus(opus));
    let index = SegmentIndex::build(&file, Duration::from_secs(1)).unwrap();
    let reason = carries(&file, &index).unwrap_err();
    assert!(reason.contains("not opus"), "{reason}");
    let reads: Vec<(u64, Vec<u8>)> = vec![];
    assert!(matches!(segment(&file, &index, 0, &reads), Err(TsError::NotCarried(_))));
}
