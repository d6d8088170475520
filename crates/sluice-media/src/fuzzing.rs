//! The property the `mp4_demux` fuzz target checks, shared with the test that replays the
//! committed corpus (`fuzz/corpus/mp4_demux/`), so `cargo fuzz` and `cargo test` run the same
//! check (`rtsp_session`, which drives the RTSP server core, is `sluice-rtsp`'s); `hls_package`
//! packages arbitrary bytes as HLS, and [`SegmentWalk`] is the check of segments as a client received
//! them that the unit and integration tests share; `subsample_map` checks the subsample maps
//! of Common Encryption against arbitrary NAL layouts, `cpix_document` the reading of CPIX
//! documents, and `flv_body` the reading of RTMP's audio and video message bodies.

mod clip;
mod cpix;
mod flv;
mod ts;
pub use clip::{assemble, check_clip, mp4_clip};
pub use cpix::cpix_document;
pub use flv::flv_body;
pub use ts::ts_segment;

use crate::mp4::{Mp4File, TrackKind};
use crate::sdp::{session_description, to_bytes, SdpOptions};

/// Indexing arbitrary bytes never panics; when it succeeds, every sample lies inside the input,
/// decode times never go backwards, and the file's SDP is written and parsed back. A fragmented
/// file cut short (a recording being written) indexes as a prefix of the whole one.
pub fn mp4_demux(data: &[u8]) {
    let Ok(file) = Mp4File::from_bytes(data) else { return };
    let ids_unique =
        file.tracks.iter().enumerate().all(|(i, t)| file.tracks[..i].iter().all(|u| u.id != t.id));
    if file.fragmented && ids_unique {
        // Cut where the input's last byte says (so the fuzzer reaches every cut).
        let cut = data.len() * usize::from(data.last().copied().unwrap_or(0)) / 256;
        if let Ok(prefix) = Mp4File::from_bytes(&data[..cut]) {
            for track in &prefix.tracks {
                let whole = file.tracks.iter().find(|t| t.id == track.id).expect("a track of the whole file");
                assert!(whole.samples.starts_with(&track.samples), "a cut file is a prefix of the whole");
            }
        }
    }
    for track in &file.tracks {
        let mut last = 0;
        for s in &track.samples {
            assert!(s.range().end <= data.len() as u64, "sample outside the input");
            assert!(s.decode_time() >= last, "decode time went backwards");
            last = s.decode_time();
        }
        if let TrackKind::H264(h) = &track.kind {
            assert!(matches!(h.nal_length_size, 1 | 2 | 4));
        }
        let _ = track.sync_sample_at_or_before(track.duration / 2);
    }
    let sdp = to_bytes(&session_description(&file, &SdpOptions::default()));
    let parsed = sdp_types::Session::parse(&sdp).expect("our SDP parses");
    let sendable = file.tracks.iter().filter(|t| crate::sdp::rtp_payload_format(t).is_ok()).count();
    assert_eq!(parsed.medias.len(), sendable);
}

/// Reading arbitrary bytes as a sample entry, and as each configuration record, never panics,
/// nor does any prefix of them (the records are read from a `moov` that may end anywhere); an
/// entry that reads computes its codec string, and carried into an init segment (an `hev1`
/// renamed) it reads back the same.
pub fn codec_config(data: &[u8]) {
    use crate::codec::{self, CodecEntry};
    for cut in 0..=data.len() {
        let part = &data[..cut];
        let _ = codec::HevcRecord::parse(part).map(|r| r.codec_string("hvc1"));
        let _ = codec::Av1Record::parse(part).map(|r| r.codec_string(None));
        let _ = codec::Vp9Record::parse(part).map(|r| r.codec_string());
        let _ = codec::OpusRecord::parse(part);
        let _ = codec::Ac3Record::parse(part).map(|r| r.channel_configuration());
        let _ = codec::Eac3Record::parse(part).map(|r| (r.channels(), r.channel_configuration()));
        let _ = codec::DolbyVision::parse(part).map(|d| (d.codec_string("dvh1"), d.brand(), d.video_range()));
        for length_size in [1, 2, 4] {
            let _ = codec::hevc::leading_parameter_sets(part, length_size);
        }
        let _ = codec::parse_sample_entry(part);
    }
    let Ok(Some(entry)) = codec::parse_sample_entry(data) else { return };
    match &entry {
        CodecEntry::Video(v) => {
            assert!(!v.codec_string().is_empty());
            let mut carried = v.clone();
            carried.in_band = codec::InBandParameterSets::SameAsRecord;
            let bytes = carried.carried_sample_entry();
            assert_eq!(bytes.len(), v.sample_entry.len());
            let Ok(Some(CodecEntry::Video(back))) = codec::parse_sample_entry(&bytes) else {
                panic!("a carried entry reads back")
            };
            assert_eq!((back.dolby_vision, back.codec_string()), (v.dolby_vision, carried.codec_string()));
            assert_eq!((back.codec, back.colour, back.width), (v.codec.clone(), v.colour, v.width));
        }
        CodecEntry::Audio(a) => assert!(a.channels > 0 && a.sample_rate > 0),
    }
}

/// Packaging arbitrary bytes as HLS never panics; when the file indexes, the playlists and the
/// DASH manifest are written, every per-track init segment decodes (and so does it protected,
/// and its first segments encrypted, `saio` pointing at the `senc` entries), the init segment decodes as `ftyp` + `moov`, and every media segment (the first 64)
/// decodes as a `moof` whose `trun`s point inside its `mdat`, with every file range inside the
/// input and the segment's length what its parts add up to.
pub fn hls_package(data: &[u8]) {
    use crate::hls::{init_segment, media_segment, mpd, playlist, SegmentIndex};
    use mp4_atom::Decode;
    let Ok(file) = Mp4File::from_bytes(data) else { return };
    let Ok(index) = SegmentIndex::build(&file, std::time::Duration::from_secs(1)) else { return };
    let rendition = playlist::Rendition { prefix: "", index: &index };
    assert!(playlist::master_playlist(&[rendition], &[]).starts_with("#EXTM3U"));
    assert!(playlist::media_playlist(&index).contains("#EXT-X-ENDLIST"));
    let manifest = mpd::manifest(&[mpd::MpdRendition { prefix: "", index: &index, file: &file }], &[]);
    assert!(manifest.ends_with("</MPD>\n"));
    for (_, which) in index.tracks(&file) {
        assert!(playlist::track_playlist(&index, &file, which).contains("#EXT-X-ENDLIST"));
        let Ok(init) = crate::hls::track_init_segment(&file, &index, which) else { continue };
        let mut buf = init.as_slice();
        mp4_atom::Ftyp::decode(&mut buf).expect("our ftyp decodes");
        let moov = mp4_atom::Moov::decode(&mut buf).expect("our moov decodes");
        assert_eq!(moov.trak.len(), 1);
        let title = crate::protect::TitleKey {
            scheme: if which == crate::hls::Packaged::Video {
                crate::protect::Scheme::Cbcs
            } else {
                crate::protect::Scheme::Cenc
            },
            kid: [1; 16],
            key: [2; 16],
            systems: Vec::new(),
            explicit_iv: None,
        };
        let protected = crate::protect::protect_init(&init, &title).expect("our init segment protects");
        let mut buf = protected.as_slice();
        mp4_atom::Ftyp::decode(&mut buf).expect("a protected ftyp decodes");
        let nal_length_size =
            index.tracks(&file).find(|(_, w)| *w == which).and_then(|(t, _)| match &t.kind {
                TrackKind::H264(h) => Some(h.nal_length_size),
                _ => None,
            });
        let slices = index.tracks(&file).find_map(|(t, _)| match &t.kind {
            TrackKind::H264(h) => Some(crate::protect::slice::SliceHeaders::new(&h.sps, &h.pps)),
            _ => None,
        });
        let crypt =
            crate::protect::TrackCrypt { track_id: 1, nal_length_size, slices: slices.as_ref(), iv_tag: 1 };
        for n in 0..index.segments().min(8) {
            let Ok(plan) = crate::hls::track_media_segment(&file, &index, which, n) else { continue };
            let moof = mp4_atom::Moof::decode(&mut plan.header.as_slice()).expect("our moof decodes");
            assert!(moof.traf.len() <= 1);
            // Encrypted, the segment keeps its length and decodes, its senc where saio says.
            let payload: Vec<u8> = plan
                .ranges
                .iter()
                .flat_map(|r| data[r.start as usize..r.end as usize].iter().copied())
                .collect();
            let Ok(segment) = crate::protect::protect_segment(&plan.header, &payload, &title, &[crypt])
            else {
                continue;
            };
            let moof = mp4_atom::Moof::decode(&mut segment.as_slice()).expect("a protected moof decodes");
            for traf in &moof.traf {
                if let (Some(senc), Some(saio)) = (&traf.senc, traf.saio.first()) {
                    let at = saio.offsets[0] as usize;
                    assert_eq!(segment[at - 4..at], senc.data[..4], "saio points past the senc sample count");
                }
            }
        }
    }
    let Ok(init) = init_segment(&file, &index) else { return };
    let mut buf = init.as_slice();
    mp4_atom::Ftyp::decode(&mut buf).expect("our ftyp decodes");
    mp4_atom::Moov::decode(&mut buf).expect("our moov decodes");
    for n in 0..index.segments().min(64) {
        let Ok(plan) = media_segment(&file, &index, n) else { continue };
        let payload: u64 = plan.ranges.iter().map(|r| r.end - r.start).sum();
        assert!(plan.ranges.iter().all(|r| r.start < r.end && r.end <= data.len() as u64));
        let mut header = plan.header.as_slice();
        let moof = mp4_atom::Moof::decode(&mut header).expect("our moof decodes");
        assert_eq!(&header[4..8], b"mdat");
        let moof_len = (plan.header.len() - header.len()) as u64;
        for trun in moof.traf.iter().flat_map(|t| &t.trun) {
            let at = u64::try_from(trun.data_offset.unwrap_or(-1)).expect("data offset is positive");
            let bytes: u64 = trun.samples.iter().map(|e| u64::from(e.size.unwrap_or(0))).sum();
            assert!(
                at >= plan.header.len() as u64 && at + bytes <= moof_len + (header.len() as u64) + payload
            );
        }
        assert!(matches!(
            media_segment(&file, &index, index.segments()),
            Err(crate::hls::HlsError::NoSuchSegment(_))
        ));
    }
}

/// Reading arbitrary bytes as WebVTT never panics; when they read, every segment cut from them
/// reads back with exactly the cues that show during it, and the same preamble; as a `wvtt`
/// text track, each segment's samples tile its time and each holds the cues showing through it
/// (or is refused as too large, never anything else).
pub fn webvtt_segment(data: &[u8]) {
    use crate::hls::webvtt::WebVtt;
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(vtt) = WebVtt::parse(text) else { return };
    for (start, end) in [(0.0, 1.0), (1.0, 6.0), (0.0, 1e9)] {
        let segment = vtt.segment(start, end);
        let back = WebVtt::parse(&segment).expect("our segment reads");
        let (from, to) = ((start * 1000.0) as u64, (end * 1000.0) as u64);
        let showing: Vec<(u64, u64)> = vtt
            .cues
            .iter()
            .filter(|c| c.start_ms < to && c.end_ms > from)
            .map(|c| (c.start_ms, c.end_ms))
            .collect();
        let read: Vec<(u64, u64)> = back.cues.iter().map(|c| (c.start_ms, c.end_ms)).collect();
        assert_eq!(read, showing, "cues of {start}..{end} s");
        assert_eq!(back.preamble.len(), vtt.preamble.len());
        wvtt_tiles(&vtt, from, to);
    }
}

fn wvtt_tiles(vtt: &crate::hls::webvtt::WebVtt<'_>, from: u64, to: u64) {
    use crate::hls::wvtt;
    let samples = match wvtt::samples(vtt, from, to) {
        Ok(samples) => samples,
        Err(crate::hls::HlsError::Subtitles { .. }) => return,
        Err(e) => panic!("{e}"),
    };
    let total: u64 = samples.iter().map(|s| u64::from(s.duration)).sum();
    assert_eq!(total, to - from, "samples tile {from}..{to} ms");
    let mut at = from;
    for sample in &samples {
        assert!(sample.duration > 0);
        let until = at + u64::from(sample.duration);
        let through =
            vtt.cues.iter().filter(|c| c.start_ms <= at && c.end_ms >= until && c.end_ms > c.start_ms);
        let (mut cues, mut rest) = (0, sample.data.as_slice());
        while rest.len() >= 8 {
            let size = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
            assert!(size >= 8 && size <= rest.len(), "a box inside the sample");
            cues += usize::from(&rest[4..8] == b"vttc");
            rest = &rest[size..];
        }
        assert!(rest.is_empty());
        assert_eq!(cues, through.count(), "cues showing through {at}..{until} ms");
        at = until;
    }
    assert!(wvtt::media_segment(vtt, 0, from, to).is_ok());
}

/// Where a walk through a file's HLS media segments has got to: the next sample of each track
/// (in `Mp4File` order, which is the fMP4 track id minus one) and where its decode time ends.
#[derive(Debug, Clone)]
pub struct SegmentWalk {
    /// Samples seen per track.
    pub seen: Vec<usize>,
    /// Decode time after the last sample seen, per track.
    pub decode_end: Vec<Option<u64>>,
}

impl SegmentWalk {
    /// A walk from the start of `file`.
    pub fn new(file: &Mp4File) -> SegmentWalk {
        SegmentWalk { seen: vec![0; file.tracks.len()], decode_end: vec![None; file.tracks.len()] }
    }

    /// Checks media segment `n` as a client received it (`segment`, from a walk that has seen
    /// segments 0 to n - 1) against the file's tables and bytes (`data`): it decodes as one
    /// `moof` then one `mdat`, each `trun` sample is the file's next sample of that track, with
    /// its size, sync flag and bytes at the place `data_offset` says, and `tfdt` carries on
    /// where the previous segment ended. Panics, saying what differs, otherwise.
    pub fn check(&mut self, file: &Mp4File, data: &[u8], n: usize, segment: &[u8]) {
        use mp4_atom::Decode;
        let mut buf = segment;
        let moof = mp4_atom::Moof::decode(&mut buf).expect("a moof");
        assert_eq!(moof.mfhd.sequence_number as usize, n + 1);
        let mdat_start = segment.len() - buf.len();
        mp4_atom::Mdat::decode(&mut buf).expect("an mdat");
        assert!(buf.is_empty(), "segment {n} is moof + mdat");
        for traf in &moof.traf {
            let t = traf.tfhd.track_id as usize - 1;
            let track = &file.tracks[t];
            let tfdt = traf.tfdt.as_ref().expect("tfdt").base_media_decode_time;
            if let Some(end) = self.decode_end[t] {
                assert_eq!(tfdt, end, "tfdt of track {t} in segment {n} continues the previous segment");
            }
            let mut decode = tfdt;
            for trun in &traf.trun {
                let mut at = usize::try_from(trun.data_offset.expect("data offset")).expect("positive");
                assert!(at >= mdat_start + 8, "trun points into the mdat");
                for e in trun.samples.iter() {
                    let s = &track.samples[self.seen[t]];
                    assert_eq!(s.decode_time(), decode, "track {t} sample {}", self.seen[t]);
                    let size = e.size.expect("sample size") as usize;
                    assert_eq!(size as u32, s.size());
                    assert_eq!(e.flags.expect("sample flags") & 0x0001_0000 == 0, s.is_sync());
                    let r = s.range();
                    assert!(
                        segment[at..at + size] == data[r.start as usize..r.end as usize],
                        "track {t} sample {} differs from the file's bytes",
                        self.seen[t]
                    );
                    at += size;
                    decode += u64::from(e.duration.expect("sample duration"));
                    self.seen[t] += 1;
                }
            }
            self.decode_end[t] = Some(decode);
        }
    }

    /// Checks that the walk saw every sample of every track.
    pub fn finish(&self, file: &Mp4File) {
        let all: Vec<usize> = file.tracks.iter().map(|t| t.samples.len()).collect();
        assert_eq!(self.seen, all, "every sample sent once");
    }
}

/// The small H.264 + AAC file (the `mp4_demux` seed) that `hls_package` packages whole and cut,
/// and the `rtsp_session` target (in `sluice-rtsp`) serves.
pub const TINY_MP4: &[u8] = include_bytes!("../../../fuzz/corpus/mp4_demux/tiny-h264-aac.mp4");

/// The subsample map of arbitrary bytes read as an H.264 sample (the first byte picks the NAL
/// length size: 1, 2 or 4) covers the sample exactly, protects whole 16-byte blocks only and
/// never a NAL unit's length, its slice header, its first
/// [`CLEAR_LEAD`](crate::protect::subsample::CLEAR_LEAD) bytes or a non-slice NAL unit; `cenc` and `cbcs` encryption under it change no clear byte.
pub fn subsample_map(data: &[u8]) {
    use crate::protect::cipher::{cbcs_sample, cenc_sample};
    use crate::protect::subsample::{subsamples, CLEAR_LEAD};
    let Some((&selector, sample)) = data.split_first() else { return };
    let length_size = [1u8, 2, 4][usize::from(selector % 3)];
    // The sample's own bytes as parameter sets too: reading them must not panic either.
    let slices = crate::protect::slice::SliceHeaders::new(&[sample.to_vec()], &[sample.to_vec()]);
    let map = subsamples(sample, length_size, Some(&slices));
    let mut protected = vec![false; sample.len()];
    let mut pos = 0usize;
    for s in &map {
        assert_eq!(s.protected % 16, 0, "whole blocks only");
        pos += usize::from(s.clear);
        let end = pos + s.protected as usize;
        assert!(end <= sample.len(), "the map runs past the sample");
        protected[pos..end].iter_mut().for_each(|p| *p = true);
        pos = end;
    }
    assert_eq!(pos, sample.len(), "the map covers the sample exactly");
    // Walk the NAL units again: the protected bytes of each lie past its lead, inside a slice.
    let n = usize::from(length_size);
    let mut at = 0usize;
    while let Some(length) = sample.get(at..at + n) {
        let len = length.iter().fold(0usize, |v, b| (v << 8) | usize::from(*b));
        let Some(end) = (at + n).checked_add(len).filter(|&e| e <= sample.len()) else { break };
        let slice = len > 0 && (1..=5).contains(&(sample[at + n] & 0x1f));
        let header = slices.header_len(&sample[at + n..end]).unwrap_or(0);
        let lead = if slice { at + n + len.min(CLEAR_LEAD.max(header)) } else { end };
        assert!(protected[at..lead].iter().all(|p| !p), "a length, a header or a non-slice NAL is protected");
        at = end;
    }
    assert!(protected[at..].iter().all(|p| !p), "bytes that are no NAL unit stay clear");
    for cbcs in [false, true] {
        let mut encrypted = sample.to_vec();
        match cbcs {
            false => cenc_sample(&[7; 16], &[1; 8], &mut encrypted, Some(&map)),
            true => cbcs_sample(&[7; 16], &[2; 16], &mut encrypted, Some(&map), (1, 9)),
        }
        for (i, clear) in protected.iter().enumerate() {
            if !clear {
                assert_eq!(encrypted[i], sample[i], "clear byte {i} changed");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The packaging property over the demo with one byte of its index flipped at a time (a
    /// deterministic spread, not random) and over truncations of the tiny seed: what indexes
    /// still packages into decodable boxes, and nothing panics.
    #[test]
    fn damaged_files_package_or_fail_cleanly() {
        let demo =
            std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4"))
                .unwrap();
        for i in (0..10_000.min(demo.len())).step_by(17) {
            let mut bad = demo.clone();
            bad[i] ^= 0xff;
            hls_package(&bad);
        }
        for cut in (0..TINY_MP4.len()).step_by(3) {
            hls_package(&TINY_MP4[..cut]);
        }
        hls_package(TINY_MP4);
    }

    /// The subsample property over the demo's video samples, whole and cut anywhere.
    #[test]
    fn subsample_maps_of_real_and_cut_samples_hold() {
        let seed = include_bytes!("../../../fuzz/corpus/subsample_map/demo-keyframe");
        for cut in 0..=seed.len().min(2048) {
            subsample_map(&seed[..cut]);
        }
        subsample_map(seed);
    }

    /// The WebVTT property over every prefix of the seed (a file cut at every byte) and over it
    /// whole.
    #[test]
    fn webvtt_cut_anywhere_segments_or_fails_cleanly() {
        let seed = include_bytes!("../../../fuzz/corpus/webvtt_segment/film.vtt");
        for cut in 0..=seed.len() {
            webvtt_segment(&seed[..cut]);
        }
    }
}
