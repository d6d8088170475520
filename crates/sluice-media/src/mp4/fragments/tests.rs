//! The fragment parser's tests: hand-made `moof`s for each field and flag, and ffmpeg-made
//! fragmented copies of the tiny fuzz seed against its progressive original, cut at every byte.

use super::*;
use crate::mp4::{Mp4File, Track};

fn bx(kind: &[u8; 4], parts: &[&[u8]]) -> Vec<u8> {
    let body: Vec<u8> = parts.concat();
    let mut out = ((body.len() + 8) as u32).to_be_bytes().to_vec();
    out.extend_from_slice(kind);
    out.extend_from_slice(&body);
    out
}

fn words(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}

const SYNC: u32 = 0x0200_0000;
const NON_SYNC: u32 = 0x0101_0000;

/// A `moov` with `trex` defaults for track 1 (duration 100, size 10, non-sync) and track 2
/// (duration 50, size 4, sync).
fn moov() -> Vec<u8> {
    let trex1 = bx(b"trex", &[&words(&[0, 1, 1, 100, 10, NON_SYNC])]);
    let trex2 = bx(b"trex", &[&words(&[0, 2, 1, 50, 4, 0])]);
    bx(b"moov", &[&bx(b"mvex", &[&trex1, &trex2])])
}

fn fragments() -> Fragments {
    Fragments::from_moov(&moov(), &[(1, 0), (2, 0)])
}

fn summary(samples: &[Sample]) -> Vec<(u64, u32, u64, i32, bool)> {
    samples
        .iter()
        .map(|s| (s.offset(), s.size(), s.decode_time(), s.composition_offset(), s.is_sync()))
        .collect()
}

/// The defaults of `trex` and `tfhd`, a data offset from the `moof`, first-sample flags, a
/// second `traf` whose data follows the first's, per-sample sizes and signed composition
/// offsets (`trun` version 1), then a fragment with `tfdt` and an explicit base data offset.
#[test]
fn moof_fields_become_samples() {
    let mut f = fragments();
    let traf1 = bx(
        b"traf",
        &[
            &bx(b"tfhd", &[&words(&[0, 1])]),
            &bx(b"trun", &[&words(&[DATA_OFFSET | FIRST_SAMPLE_FLAGS, 3, 1000, SYNC])]),
        ],
    );
    let traf2 = bx(
        b"traf",
        &[
            &bx(b"tfhd", &[&words(&[DEFAULT_DURATION | DEFAULT_SIZE, 2, 20, 5])]),
            &bx(
                b"trun",
                &[&words(&[1 << 24 | SAMPLE_SIZE | SAMPLE_COMPOSITION_OFFSET, 2, 6, (-5i32) as u32, 7, 7])],
            ),
        ],
    );
    let moof = bx(b"moof", &[&traf1, &traf2]);
    assert!(f.add_moof(&moof, 500, 10_000).unwrap());
    assert_eq!(
        summary(&f.tracks[0].samples),
        [(1500, 10, 0, 0, true), (1510, 10, 100, 0, false), (1520, 10, 200, 0, false)]
    );
    assert_eq!(summary(&f.tracks[1].samples), [(1530, 6, 0, -5, true), (1536, 7, 20, 7, true)]);
    assert_eq!((f.tracks[0].end_decode_time, f.tracks[1].end_decode_time), (300, 40));

    // tfdt (version 1) and an explicit base; without tfdt track 2 goes on where it ended.
    let traf1 = bx(
        b"traf",
        &[
            &bx(b"tfhd", &[&words(&[BASE_DATA_OFFSET | DEFAULT_FLAGS, 1, 0, 4000, SYNC])]),
            &bx(b"tfdt", &[&words(&[1 << 24, 0, 1000])]),
            &bx(b"trun", &[&words(&[SAMPLE_DURATION | SAMPLE_FLAGS, 2, 30, NON_SYNC, 40, SYNC])]),
        ],
    );
    let traf2 = bx(
        b"traf",
        &[
            &bx(b"tfhd", &[&words(&[DEFAULT_BASE_IS_MOOF, 2])]),
            &bx(b"trun", &[&words(&[DATA_OFFSET, 1, 100])]),
        ],
    );
    let moof = bx(b"moof", &[&traf1, &traf2]);
    assert!(f.add_moof(&moof, 3000, 10_000).unwrap());
    assert_eq!(summary(&f.tracks[0].samples[3..]), [(4000, 10, 1000, 0, false), (4010, 10, 1030, 0, true)]);
    assert_eq!(summary(&f.tracks[1].samples[2..]), [(3100, 4, 40, 0, true)]);
    assert_eq!(f.count, 2);
}

/// A fragment whose data is not all in the file yet adds nothing; malformed ones are errors,
/// found before anything is allocated for the samples they claim.
#[test]
fn incomplete_and_malformed_fragments() {
    let trun = |flags: u32, count: u32, rest: &[u32]| {
        let mut w = vec![flags, count];
        w.extend_from_slice(rest);
        bx(b"moof", &[&bx(b"traf", &[&bx(b"tfhd", &[&words(&[0, 1])]), &bx(b"trun", &[&words(&w)])])])
    };
    let mut f = fragments();
    // Three samples of 10 bytes at 100: the file must reach 130.
    assert!(!f.add_moof(&trun(DATA_OFFSET, 3, &[100]), 0, 129).unwrap());
    assert!(f.tracks[0].samples.is_empty());
    assert!(f.add_moof(&trun(DATA_OFFSET, 3, &[100]), 0, 130).unwrap());
    // 2^32 - 1 samples with sizes in a box that holds one: refused by the box length.
    let e = f.add_moof(&trun(SAMPLE_SIZE, u32::MAX, &[10]), 0, 1 << 40).unwrap_err();
    assert!(e.to_string().contains("more samples than its box holds"), "{e}");
    // ... and all from defaults: refused by the file length or the sample limit.
    let e = f.add_moof(&trun(0, 1000, &[]), 0, 5000).unwrap_err();
    assert!(e.to_string().contains("more bytes than the file has"), "{e}");
    let e = f.add_moof(&trun(0, u32::MAX, &[]), 0, 1 << 50).unwrap_err();
    assert!(e.to_string().contains("limit"), "{e}");
    // A traf of a track the moov does not declare, a sample of size 0, a truncated tfhd.
    let unknown = bx(b"moof", &[&bx(b"traf", &[&bx(b"tfhd", &[&words(&[0, 9])])])]);
    assert!(f.add_moof(&unknown, 0, 1000).is_err());
    assert!(f.add_moof(&trun(SAMPLE_SIZE, 1, &[0]), 0, 1000).is_err());
    let short = bx(b"moof", &[&bx(b"traf", &[&bx(b"tfhd", &[&words(&[BASE_DATA_OFFSET, 1])])])]);
    assert!(f.add_moof(&short, 0, 1000).is_err());
    // A tfdt before the track's last sample; one after it but before its end is taken as is.
    let at = |time: u32| {
        let tfhd = bx(b"tfhd", &[&words(&[0, 1])]);
        let tfdt = bx(b"tfdt", &[&words(&[0, time])]);
        let trun = bx(b"trun", &[&words(&[DATA_OFFSET, 1, 100])]);
        bx(b"moof", &[&bx(b"traf", &[&tfhd, &tfdt, &trun])])
    };
    assert!(f.add_moof(&at(199), 0, 1000).unwrap_err().to_string().contains("backwards"));
    assert!(f.add_moof(&at(250), 0, 1000).unwrap());
    assert_eq!(f.tracks[0].samples[3].decode_time(), 250);
    assert_eq!(f.tracks[0].end_decode_time, 350);
    assert_eq!(f.tracks[0].samples.len(), 4, "failed fragments add nothing");
}

fn seed(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../fuzz/corpus/mp4_demux/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Size, decode time, composition offset and sync flag of every sample of every track.
fn timing(file: &Mp4File) -> Vec<Vec<(u32, u64, i32, bool)>> {
    let track = |t: &Track| {
        t.samples.iter().map(|s| (s.size(), s.decode_time(), s.composition_offset(), s.is_sync())).collect()
    };
    file.tracks.iter().map(track).collect()
}

/// ffmpeg's fragmented copies of the tiny seed (a fragment per keyframe with the base at the
/// `moof`, a fragment per frame with explicit base offsets, and `frag_keyframe` alone, which
/// keeps the first fragment's samples in the `moov`) carry the progressive file's
/// samples, bytes and all, at the decode times ffprobe reads (`ffprobe -show_entries
/// packet=stream_index,dts`: ffmpeg stretches the first AAC frame over the priming it no longer
/// cuts with an edit list, and writes a fragment per frame's last audio frame with duration 0).
#[test]
fn ffmpeg_fragmented_files_match_the_progressive_original() {
    let original = seed("tiny-h264-aac.mp4");
    let progressive = Mp4File::from_bytes(&original).unwrap();
    let without_time = |file: &Mp4File| -> Vec<Vec<(u32, i32, bool)>> {
        timing(file)
            .iter()
            .map(|t| t.iter().map(|&(size, _, cts, sync)| (size, cts, sync)).collect())
            .collect()
    };
    for (name, audio_times) in [
        ("tiny-h264-aac-frag-keyframe.mp4", [0, 1600, 2624, 3648, 4672, 5696]),
        ("tiny-h264-aac-frag-every-frame.mp4", [0, 2624, 2624, 4672, 4672, 5696]),
        ("tiny-h264-aac-frag-after-moov-samples.mp4", [0, 1600, 2624, 3648, 4672, 5696]),
    ] {
        let data = seed(name);
        let file = Mp4File::from_bytes(&data).unwrap();
        assert!(file.fragmented && file.streamable().is_ok(), "{name}: {:?}", file.skipped);
        assert_eq!(without_time(&file), without_time(&progressive), "{name}");
        let times = |t: &Track| t.samples.iter().map(Sample::decode_time).collect::<Vec<_>>();
        assert_eq!(times(&file.tracks[0]), [0, 2048, 4096], "{name}");
        assert_eq!(times(&file.tracks[1]), audio_times, "{name}");
        for (t, p) in file.tracks.iter().zip(&progressive.tracks) {
            for (s, o) in t.samples.iter().zip(&p.samples) {
                let (s, o) = (s.range(), o.range());
                assert_eq!(
                    data[s.start as usize..s.end as usize],
                    original[o.start as usize..o.end as usize]
                );
            }
            let last = t.samples.last().map(|s| s.decode_time()).unwrap();
            assert!(t.duration > last, "{name}: duration {} covers the last sample", t.duration);
        }
    }
}

/// A file cut at any byte (a recording being written) indexes as the fragments wholly in it:
/// the samples are a prefix of the whole file's, and cutting later never loses any.
#[test]
fn a_file_cut_anywhere_indexes_its_complete_fragments() {
    for name in [
        "tiny-h264-aac-frag-keyframe.mp4",
        "tiny-h264-aac-frag-every-frame.mp4",
        "tiny-h264-aac-frag-after-moov-samples.mp4",
    ] {
        let data = seed(name);
        let whole = timing(&Mp4File::from_bytes(&data).unwrap());
        let mut last = 0;
        let mut seen_empty = false;
        for cut in 0..=data.len() {
            let Ok(file) = Mp4File::from_bytes(&data[..cut]) else {
                assert!(last == 0 && !seen_empty, "{name}: only a cut before the moov's end fails ({cut})");
                continue;
            };
            if file.tracks.is_empty() {
                seen_empty = true;
                assert!(matches!(file.streamable(), Err(crate::mp4::NothingToStream::Fragmented)), "{cut}");
                continue;
            }
            let got = timing(&file);
            let count: usize = got.iter().map(Vec::len).sum();
            assert!(count >= last, "{name}: cut at {cut} lost samples");
            last = count;
            for (t, w) in file.tracks.iter().zip(&whole) {
                assert!(t.samples.iter().all(|s| s.range().end <= cut as u64));
                let t = &got[file.tracks.iter().position(|x| x.id == t.id).unwrap()];
                assert_eq!(t[..], w[..t.len()], "{name}: cut at {cut}");
            }
        }
        assert_eq!(last, whole.iter().map(Vec::len).sum::<usize>());
    }
}

/// The seeds cut inside the last fragment's `mdat`, and with a trun claiming 2^32 - 1 samples.
#[test]
fn truncated_and_hostile_seeds() {
    let file = Mp4File::from_bytes(&seed("tiny-frag-truncated-in-last-mdat")).unwrap();
    assert_eq!(timing(&file).iter().map(Vec::len).collect::<Vec<_>>(), [2, 3], "the first fragment only");
    let e = Mp4File::from_bytes(&seed("tiny-frag-trun-huge-count")).unwrap_err();
    assert!(matches!(e, Mp4Error::BadFragment { .. }), "{e}");
}
