//! The property the `ts_segment` fuzz target checks: arbitrary bytes that index as an MP4 and
//! package make TS segments (the first 16) that read back packet by packet with `mpeg2ts`'s
//! reader, every packet 188 bytes, the continuity counters of each PID running from 0 without
//! a gap, a PMT naming the stream type of each track's codec (H.264 or HEVC, AAC, AC-3 or
//! E-AC-3), and a video PES for every video sample of the segment, starting with its codec's
//! access unit delimiter. A file in a codec TS does not carry is refused, never muxed.

use std::collections::HashMap;

use mpeg2ts::ts::{ReadTsPacket, TsPacketReader, TsPayload};

use crate::codec::{AudioCodec, VideoCodec};
use crate::hls::ts::{carries, segment, segment_reads, TsError};
use crate::hls::{Packaged, SegmentIndex};
use crate::mp4::{Mp4File, TrackKind};

/// The stream type the PMT gives a track of `kind`, and for video the start of its AUD.
fn expected(kind: &TrackKind) -> Option<(u8, &'static [u8])> {
    match kind {
        TrackKind::H264(_) => Some((0x1b, &[0, 0, 0, 1, 0x09])),
        TrackKind::Aac(_) => Some((0x0f, &[])),
        TrackKind::Video(v) => {
            matches!(v.codec, VideoCodec::Hevc(_)).then_some((0x24, &[0, 0, 0, 1, 0x46, 0x01]))
        }
        TrackKind::Audio(a) => match a.codec {
            AudioCodec::Ac3(_) => Some((0x81, &[])),
            AudioCodec::Eac3(_) => Some((0x87, &[])),
            AudioCodec::Opus(_) => None,
        },
    }
}

/// See the module docs. Never panics on input that does not index; muxer refusals (an audio
/// configuration ADTS cannot say, a frame too long for it) are answers, not failures.
pub fn ts_segment(data: &[u8]) {
    let Ok(file) = Mp4File::from_bytes(data) else { return };
    let Ok(index) = SegmentIndex::build(&file, std::time::Duration::from_secs(1)) else { return };
    let tracks: Vec<Option<(u8, &[u8])>> = index.tracks(&file).map(|(t, _)| expected(&t.kind)).collect();
    let carried = tracks.iter().all(Option::is_some);
    assert_eq!(carries(&file, &index).is_ok(), carried, "what TS carries");
    let stream_types: Vec<u8> = tracks.iter().flatten().map(|(t, _)| *t).collect();
    let aud = index
        .tracks(&file)
        .find(|(_, w)| *w == Packaged::Video)
        .and_then(|(t, _)| expected(&t.kind))
        .map(|(_, a)| a);
    for n in 0..index.segments().min(16) {
        let ranges = segment_reads(&file, &index, n).expect("the segment exists");
        let reads: Vec<(u64, Vec<u8>)> =
            ranges.into_iter().map(|r| (r.start, data[r.start as usize..r.end as usize].to_vec())).collect();
        let ts = match segment(&file, &index, n, &reads) {
            Ok(ts) => ts,
            Err(TsError::NotCarried(_)) => {
                assert!(!carried, "refused a file TS carries");
                continue;
            }
            Err(_) => continue,
        };
        assert!(carried, "muxed a codec TS does not carry");
        assert_eq!(ts.len() % 188, 0, "whole packets");
        let mut reader = TsPacketReader::new(ts.as_slice());
        let mut counters: HashMap<u16, u8> = HashMap::new();
        let mut video_units = 0;
        while let Some(packet) = reader.read_ts_packet().expect("our packets read back") {
            let pid = packet.header.pid.as_u16();
            let cc = packet.header.continuity_counter.as_u8();
            assert_eq!(cc, counters.get(&pid).map_or(0, |c| (c + 1) & 15), "continuity on {pid:#x}");
            counters.insert(pid, cc);
            match packet.payload {
                Some(TsPayload::Pmt(pmt)) => {
                    let types: Vec<u8> = pmt.es_info.iter().map(|e| e.stream_type as u8).collect();
                    assert_eq!(types, stream_types, "the PMT's stream types");
                }
                Some(TsPayload::PesStart(pes)) if pid == crate::hls::ts::mux::VIDEO_PID => {
                    let aud = aud.expect("video PES only with video");
                    let unit = pes.data.as_ref();
                    assert_eq!(&unit[..aud.len().min(unit.len())], aud, "the codec's AUD first");
                    video_units += 1;
                }
                _ => {}
            }
        }
        let expected = if index.has(Packaged::Video) { index.samples(n, Packaged::Video).len() } else { 0 };
        assert_eq!(video_units, expected, "a PES per video sample");
    }
}
