//! WebVTT in ISO BMFF (ISO/IEC 14496-30): a sidecar's cues as a CMAF text track for DASH, cut at
//! the same times as the video's segments.
//!
//! This module owns the track's init segment (a `wvtt` sample entry whose `vttC` holds the
//! file's header with its `STYLE` and `REGION` blocks; handler `text`, null media header,
//! timescale 1000 as WebVTT times are milliseconds) and its media segments: one `moof` + `mdat`
//! per media segment, whose samples tile the segment's time without a hole. Each sample spans a
//! stretch in which the same cues show and holds a `vttc` box per cue (`iden` for its
//! identifier, `ctim` for its own start where the sample starts later, `sttg` for its settings,
//! `payl` for its text), in file order; a stretch with no cue is an empty `vtte` sample. A cue that crosses a segment boundary is in both segments, its
//! times clipped to each, as CMAF requires (each segment decodes alone). Boxes are written with
//! `mp4-atom`, as the video and audio ones are ([`super::fmp4`]; its sample boxes are written as
//! plain boxes, which the crate does not model). It does not parse WebVTT ([`super::webvtt`]) or
//! decide segment times ([`super::index`]).

use std::collections::BTreeSet;

use mp4_atom::{
    Any, Encode, FourCC, Hdlr, Mdhd, Mdia, Mfhd, Minf, Moof, Nmhd, PlainText, Stbl, Stco, Stsc, Stsd, Stsz,
    Stts, Tfdt, Tfhd, Tkhd, Traf, Trak, Trun, TrunEntry, TrunSamples, VttC, Wvtt,
};

use super::fmp4::{cmaf_init, data_information, SYNC_FLAGS};
use super::webvtt::{Cue, WebVtt};
use super::HlsError;

/// The text track's timescale: WebVTT times are milliseconds.
pub const TIMESCALE: u32 = 1000;

/// Most bytes of samples one segment holds. Cues that overlap are repeated in every sample they
/// span, so cues that all overlap one another would make a segment grow with the square of their
/// number; a film's subtitles take a few hundred bytes a segment.
pub const MAX_SEGMENT_BYTES: usize = 4 << 20;

/// The text track's id: it is alone in its init segment.
const TRACK_ID: u32 = 1;

/// One sample of the text track.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextSample {
    /// Its duration in milliseconds.
    pub duration: u32,
    /// Its bytes: a `vttc` box per cue showing, or one empty `vtte` box.
    pub data: Vec<u8>,
}

/// The init segment of `vtt`'s text track.
pub fn init_segment(vtt: &WebVtt<'_>) -> Result<Vec<u8>, HlsError> {
    let entry = Wvtt {
        plaintext: PlainText { data_reference_index: 1 },
        config: VttC { config: configuration(vtt) },
        label: None,
        btrt: None,
    };
    let trak = Trak {
        tkhd: Tkhd { track_id: TRACK_ID, enabled: true, in_movie: true, ..Default::default() },
        mdia: Mdia {
            mdhd: Mdhd { timescale: TIMESCALE, language: "und".into(), ..Default::default() },
            hdlr: Hdlr { handler: b"text".into(), name: "sluice".into() },
            minf: Minf {
                nmhd: Some(Nmhd {}),
                dinf: data_information(),
                stbl: Stbl {
                    stsd: Stsd { codecs: vec![entry.into()] },
                    stts: Stts::default(),
                    stsc: Stsc::default(),
                    stsz: Stsz::default(),
                    stco: Some(Stco::default()),
                    ..Default::default()
                },
                ..Default::default()
            },
        },
        ..Default::default()
    };
    cmaf_init(vec![trak])
}

/// The `vttC` text: the signature line, then the `STYLE` and `REGION` blocks, which apply to
/// every cue.
fn configuration(vtt: &WebVtt<'_>) -> String {
    let mut config = String::from("WEBVTT");
    for block in &vtt.preamble {
        config.push_str("\n\n");
        config.push_str(&block.lines().collect::<Vec<_>>().join("\n"));
    }
    config
}

/// Media segment `n` of the text track: the samples from `from` to `to` milliseconds (see
/// [`samples`]) in a `moof` + `mdat`.
pub fn media_segment(vtt: &WebVtt<'_>, n: usize, from: u64, to: u64) -> Result<Vec<u8>, HlsError> {
    let samples = samples(vtt, from, to)?;
    let entries = samples
        .iter()
        .map(|s| TrunEntry {
            duration: Some(s.duration),
            // At most MAX_SEGMENT_BYTES.
            size: Some(s.data.len() as u32),
            flags: Some(SYNC_FLAGS),
            cts: None,
        })
        .collect();
    let mut moof = Moof {
        mfhd: Mfhd { sequence_number: u32::try_from(n + 1).unwrap_or(u32::MAX) },
        traf: vec![Traf {
            tfhd: Tfhd { track_id: TRACK_ID, default_base_is_moof: true, ..Default::default() },
            tfdt: Some(Tfdt { base_media_decode_time: from }),
            trun: vec![Trun { data_offset: Some(0), samples: TrunSamples::Explicit(entries) }],
            ..Default::default()
        }],
    };
    let payload: usize = samples.iter().map(|s| s.data.len()).sum();
    // The data offset is a fixed-width field: measure the moof once, then fill it in.
    let mut out = Vec::with_capacity(payload + 256);
    moof.encode(&mut out)?;
    let mdat_header_len = 8;
    moof.traf[0].trun[0].data_offset = Some((out.len() + mdat_header_len) as i32);
    out.clear();
    moof.encode(&mut out)?;
    out.extend_from_slice(&((payload + mdat_header_len) as u32).to_be_bytes());
    out.extend_from_slice(b"mdat");
    for sample in samples {
        out.extend_from_slice(&sample.data);
    }
    Ok(out)
}

/// The samples of the text track from `from` to `to` milliseconds: their durations add up to
/// `to - from` (none when `to <= from`); each holds the cues showing throughout it, clipped to
/// the range, or is an empty `vtte` where none shows.
pub fn samples(vtt: &WebVtt<'_>, from: u64, to: u64) -> Result<Vec<TextSample>, HlsError> {
    if to <= from {
        return Ok(Vec::new());
    }
    let too_big = || HlsError::Subtitles { from_ms: from, to_ms: to, limit: MAX_SEGMENT_BYTES };
    // The cues showing in the range, in file order: clipped times and their `vttc` boxes, as
    // in a sample that starts with the cue and in one that starts later. A cue that ends before
    // it starts never shows.
    let mut showing = Vec::new();
    let mut cue_bytes = 0;
    for cue in vtt.cues.iter().filter(|c| c.start_ms < to && c.end_ms > from && c.end_ms > c.start_ms) {
        let boxes = [cue_box(cue, false)?, cue_box(cue, true)?];
        cue_bytes += boxes[1].len();
        if cue_bytes > MAX_SEGMENT_BYTES {
            return Err(too_big());
        }
        showing.push((cue.start_ms.max(from), cue.end_ms.min(to), cue.start_ms, boxes));
    }
    // Every time a cue starts or ends cuts a sample.
    let mut cuts: Vec<u64> = showing.iter().flat_map(|&(start, end, ..)| [start, end]).collect();
    cuts.extend([from, to]);
    cuts.sort_unstable();
    cuts.dedup();
    let mut by_start: Vec<usize> = (0..showing.len()).collect();
    by_start.sort_by_key(|&i| showing[i].0);
    let mut by_end = by_start.clone();
    by_end.sort_by_key(|&i| showing[i].1);
    let (mut started, mut ended) = (0, 0);
    // Cues showing through the current stretch, by their place in the file.
    let mut active = BTreeSet::new();
    let mut out = Vec::with_capacity(cuts.len() - 1);
    let mut total = 0;
    for stretch in cuts.windows(2) {
        let (at, until) = (stretch[0], stretch[1]);
        while ended < by_end.len() && showing[by_end[ended]].1 <= at {
            active.remove(&by_end[ended]);
            ended += 1;
        }
        while started < by_start.len() && showing[by_start[started]].0 <= at {
            active.insert(by_start[started]);
            started += 1;
        }
        let data = if active.is_empty() {
            plain_box(b"vtte", Vec::new())?
        } else {
            let cue_box = |i: usize| &showing[i].3[usize::from(showing[i].2 < at)];
            let mut data = Vec::with_capacity(active.iter().map(|&i| cue_box(i).len()).sum());
            for &i in &active {
                data.extend_from_slice(cue_box(i));
            }
            data
        };
        total += data.len();
        if total > MAX_SEGMENT_BYTES {
            return Err(too_big());
        }
        let duration = u32::try_from(until - at).map_err(|_| too_big())?;
        out.push(TextSample { duration, data });
    }
    Ok(out)
}

/// The `vttc` box of a cue: `iden` (its identifier), `ctim` (its start, for a sample that
/// starts later: `started_before`, so that timestamps in its text keep their meaning), `sttg`
/// (its settings), `payl` (its text), in the order of ISO/IEC 14496-30's `VTTCueBox`.
fn cue_box(cue: &Cue<'_>, started_before: bool) -> Result<Vec<u8>, HlsError> {
    let mut inner = Vec::new();
    if let Some(id) = cue.identifier().filter(|id| !id.is_empty()) {
        inner.extend(plain_box(b"iden", id.as_bytes().to_vec())?);
    }
    if started_before {
        inner.extend(plain_box(b"ctim", timestamp(cue.start_ms).into_bytes())?);
    }
    let settings = cue.settings();
    if !settings.is_empty() {
        inner.extend(plain_box(b"sttg", settings.as_bytes().to_vec())?);
    }
    inner.extend(plain_box(b"payl", cue.payload().into_bytes())?);
    plain_box(b"vttc", inner)
}

/// A WebVTT timestamp, `hh:mm:ss.ttt`.
fn timestamp(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}.{:03}", s / 3600, s / 60 % 60, s % 60, ms % 1000)
}

/// A box of `kind` whose body is `body`.
fn plain_box(kind: &[u8; 4], body: Vec<u8>) -> Result<Vec<u8>, HlsError> {
    let mut out = Vec::with_capacity(body.len() + 8);
    Any::Unknown(FourCC::new(kind), body).encode(&mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mp4_atom::{Decode, Ftyp, Moov};

    /// The boxes of a sample as (kind, body), children of `vttc` flattened after it.
    fn boxes(mut data: &[u8]) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while !data.is_empty() {
            let size = u32::from_be_bytes(data[..4].try_into().unwrap()) as usize;
            let kind = String::from_utf8(data[4..8].to_vec()).unwrap();
            let body = &data[8..size];
            if kind == "vttc" {
                out.push((kind, String::new()));
                out.extend(boxes(body));
            } else {
                out.push((kind, String::from_utf8(body.to_vec()).unwrap()));
            }
            data = &data[size..];
        }
        out
    }

    /// Each sample as (duration, the payloads it shows).
    fn shown(samples: &[TextSample]) -> Vec<(u32, Vec<String>)> {
        samples
            .iter()
            .map(|s| {
                let payloads =
                    boxes(&s.data).into_iter().filter(|(k, _)| k == "payl").map(|(_, b)| b).collect();
                (s.duration, payloads)
            })
            .collect()
    }

    const VTT: &str = "WEBVTT\n\nSTYLE\n::cue { color: yellow }\n\nhello\n00:00.500 --> 00:02.000 line:0 align:start\nHello\nthere\n\n00:01.500 --> 00:03.000\nWorld\n\n00:05.000 --> 00:05.000\nnever\n\n00:07.000 --> 00:06.000\nnever either\n";

    #[test]
    fn samples_tile_the_segment_with_cues_and_gaps() {
        let vtt = WebVtt::parse(VTT).unwrap();
        let samples = samples(&vtt, 0, 4000).unwrap();
        assert_eq!(
            shown(&samples),
            [
                (500, vec![]),
                (1000, vec!["Hello\nthere".to_string()]),
                (500, vec!["Hello\nthere".to_string(), "World".to_string()]),
                (1000, vec!["World".to_string()]),
                (1000, vec![]),
            ]
        );
        assert_eq!(boxes(&samples[0].data), [("vtte".to_string(), String::new())]);
        // The identifier and the settings go with the cue every time it is repeated, and where
        // a sample starts after the cue, the cue's own start.
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            boxes(&samples[1].data),
            [
                pair("vttc", ""),
                pair("iden", "hello"),
                pair("sttg", "line:0 align:start"),
                pair("payl", "Hello\nthere")
            ]
        );
        assert_eq!(
            boxes(&samples[2].data),
            [
                pair("vttc", ""),
                pair("iden", "hello"),
                pair("ctim", "00:00:00.500"),
                pair("sttg", "line:0 align:start"),
                pair("payl", "Hello\nthere"),
                pair("vttc", ""),
                pair("payl", "World"),
            ]
        );
        assert_eq!(timestamp(3_723_004), "01:02:03.004");
        assert_eq!(samples.iter().map(|s| u64::from(s.duration)).sum::<u64>(), 4000);
    }

    #[test]
    fn cues_crossing_a_boundary_are_split_between_segments() {
        let vtt = WebVtt::parse(VTT).unwrap();
        // Cut at 1 s and 2.5 s: "Hello" (0.5-2 s) is in the first two, "World" (1.5-3 s) in the
        // last two, each clipped to the segment.
        assert_eq!(
            shown(&samples(&vtt, 0, 1000).unwrap()),
            [(500, vec![]), (500, vec!["Hello\nthere".into()])]
        );
        assert_eq!(
            shown(&samples(&vtt, 1000, 2500).unwrap()),
            [
                (500, vec!["Hello\nthere".to_string()]),
                (500, vec!["Hello\nthere".to_string(), "World".to_string()]),
                (500, vec!["World".to_string()]),
            ]
        );
        assert_eq!(shown(&samples(&vtt, 2500, 4000).unwrap()), [(500, vec!["World".into()]), (1000, vec![])]);
        // A cue that fills the segment is one sample of the segment's length.
        assert_eq!(
            shown(&samples(&vtt, 1600, 1900).unwrap()),
            [(300, vec!["Hello\nthere".into(), "World".into()])]
        );
    }

    #[test]
    fn empty_segments_are_one_vtte_sample() {
        let vtt = WebVtt::parse(VTT).unwrap();
        for (from, to) in [(3000, 9000), (4000, 4001)] {
            let samples = samples(&vtt, from, to).unwrap();
            assert_eq!(samples.len(), 1);
            assert_eq!(u64::from(samples[0].duration), to - from);
            assert_eq!(boxes(&samples[0].data), [("vtte".to_string(), String::new())]);
        }
        let none = WebVtt::parse("WEBVTT\n").unwrap();
        assert_eq!(shown(&samples(&none, 0, 2000).unwrap()), [(2000, vec![])]);
        assert_eq!(samples(&vtt, 2000, 2000).unwrap(), []);
    }

    #[test]
    fn overlapping_cues_beyond_the_bound_are_refused() {
        // Each cue starts 1 ms after the one before and lasts the whole segment: every sample
        // repeats all the cues started so far.
        let mut text = String::from("WEBVTT\n\n");
        for i in 0..3000u64 {
            text.push_str(&format!("00:00:{:02}.{:03} --> 00:01:00.000\ncue {i}\n\n", i / 1000, i % 1000));
        }
        let vtt = WebVtt::parse(&text).unwrap();
        assert!(matches!(samples(&vtt, 0, 60_000), Err(HlsError::Subtitles { .. })));
        assert_eq!(samples(&vtt, 0, 10).unwrap().len(), 10, "a few of them are fine");
    }

    #[test]
    fn segments_decode() {
        let vtt = WebVtt::parse(VTT).unwrap();
        let init = init_segment(&vtt).unwrap();
        let mut buf = init.as_slice();
        Ftyp::decode(&mut buf).unwrap();
        let moov = Moov::decode(&mut buf).unwrap();
        assert!(buf.is_empty());
        let trak = &moov.trak[0];
        assert_eq!(trak.mdia.mdhd.timescale, TIMESCALE);
        assert_eq!(trak.mdia.hdlr.handler, b"text".into());
        assert!(trak.mdia.minf.nmhd.is_some());
        let mp4_atom::Codec::Wvtt(entry) = &trak.mdia.minf.stbl.stsd.codecs[0] else {
            panic!("a wvtt entry")
        };
        assert_eq!(entry.config.config, "WEBVTT\n\nSTYLE\n::cue { color: yellow }");

        let segment = media_segment(&vtt, 2, 1000, 2500).unwrap();
        let mut buf = segment.as_slice();
        let moof = Moof::decode(&mut buf).unwrap();
        assert_eq!(moof.mfhd.sequence_number, 3);
        let traf = &moof.traf[0];
        assert_eq!(traf.tfdt.as_ref().unwrap().base_media_decode_time, 1000);
        let TrunSamples::Explicit(entries) = &traf.trun[0].samples else { panic!("explicit entries") };
        let durations: Vec<u32> = entries.iter().map(|e| e.duration.unwrap()).collect();
        assert_eq!(durations, [500, 500, 500]);
        // The data offset points past the mdat header at the first sample.
        let offset = traf.trun[0].data_offset.unwrap() as usize;
        assert_eq!(&segment[offset - 4..offset], b"mdat");
        let first = entries[0].size.unwrap() as usize;
        assert_eq!(boxes(&segment[offset..offset + first])[4].1, "Hello\nthere");
        let sizes: usize = entries.iter().map(|e| e.size.unwrap() as usize).sum();
        assert_eq!(offset + sizes, segment.len());
    }
}
