//! The property the `ts_segment` fuzz target checks: arbitrary bytes that index as an MP4 and
//! package make TS segments (the first 16) that read back packet by packet with `mpeg2ts`'s
//! reader, every packet 188 bytes, the continuity counters of each PID running from 0 without
//! a gap, and a video PES for every video sample of the segment.

use std::collections::HashMap;

use mpeg2ts::ts::{ReadTsPacket, TsPacketReader, TsPayload};

use crate::hls::ts::{segment, segment_reads};
use crate::hls::{Packaged, SegmentIndex};
use crate::mp4::Mp4File;

/// See the module docs. Never panics on input that does not index; muxer refusals (an audio
/// configuration ADTS cannot say, a frame too long for it) are answers, not failures.
pub fn ts_segment(data: &[u8]) {
    let Ok(file) = Mp4File::from_bytes(data) else { return };
    let Ok(index) = SegmentIndex::build(&file, std::time::Duration::from_secs(1)) else { return };
    for n in 0..index.segments().min(16) {
        let ranges = segment_reads(&file, &index, n).expect("the segment exists");
        let reads: Vec<(u64, Vec<u8>)> =
            ranges.into_iter().map(|r| (r.start, data[r.start as usize..r.end as usize].to_vec())).collect();
        let Ok(ts) = segment(&file, &index, n, &reads) else { continue };
        assert_eq!(ts.len() % 188, 0, "whole packets");
        let mut reader = TsPacketReader::new(ts.as_slice());
        let mut counters: HashMap<u16, u8> = HashMap::new();
        let mut video_units = 0;
        while let Some(packet) = reader.read_ts_packet().expect("our packets read back") {
            let pid = packet.header.pid.as_u16();
            let cc = packet.header.continuity_counter.as_u8();
            assert_eq!(cc, counters.get(&pid).map_or(0, |c| (c + 1) & 15), "continuity on {pid:#x}");
            counters.insert(pid, cc);
            if pid == crate::hls::ts::mux::VIDEO_PID && matches!(packet.payload, Some(TsPayload::PesStart(_)))
            {
                video_units += 1;
            }
        }
        let expected = if index.has(Packaged::Video) { index.samples(n, Packaged::Video).len() } else { 0 };
        assert_eq!(video_units, expected, "a PES per video sample");
    }
}
