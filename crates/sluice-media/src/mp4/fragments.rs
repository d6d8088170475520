//! Movie fragments (`moof`) into sample tables.
//!
//! This module owns the samples of a fragmented MP4 (what OBS, `ffmpeg -movflags frag_keyframe`
//! and most recorders write): the per-track defaults of `mvex` > `trex`, and each `moof` >
//! `traf` (`tfhd`, `tfdt`, `trun`) turned into the same [`Sample`]s the `moov` tables give
//! (ISO/IEC 14496-12 §8.8). The parser ([`Fragments::add_moof`]) is sans-I/O: it takes one whole
//! `moof` box; the walk over the file's top-level boxes ([`read_fragments`]) is the only part
//! that reads, through the same `Read + Seek` source as the `moov`, so local files and objects
//! behind the slice cache are read alike. It does not read `sidx` or `mfra` (the `moof`s hold
//! everything a sample table needs, and `mfra` only lists random access points) nor sample data.
//!
//! A file still being written is indexed up to its last complete fragment: a `moof` whose
//! samples run past the end of the file, or a truncated box, ends the index there. A fragment
//! that contradicts itself (a run larger than its box, a sample of size 0, decode time going
//! backwards) fails the file, as a bad `moov` table does.

use std::io::{Read, Seek, SeekFrom};

use super::entries::{child, children};
use super::{Mp4Error, Sample, MAX_SAMPLES_PER_TRACK, SYNC_BIT};

/// Largest `moof` box read into memory: a 2-second fragment of 60 fps video with every sample
/// field is about 2 KB; ffmpeg's largest (one fragment for the whole file) stays far below this.
pub const MAX_MOOF_BYTES: u64 = 16 << 20;

/// Most bytes of fragment headers (`moof` boxes) read from one file: 256 MiB is more than the
/// 4 Mi samples a track may have with a fragment per frame, and bounds the indexing work for a
/// hostile file.
pub const MAX_FRAGMENT_HEADER_BYTES: u64 = 256 << 20;

/// Most top-level boxes walked after the `moov` (a fragment is a `moof` and an `mdat`, with
/// perhaps a `styp` and a `sidx`).
const MAX_FRAGMENT_BOXES: usize = 16 << 20;

/// Bytes read at once while walking top-level boxes: the headers of small fragments that follow
/// each other come from one read.
const WALK_WINDOW: usize = 64 << 10;

// `tfhd` flags (§8.8.7.1).
const BASE_DATA_OFFSET: u32 = 0x01;
const SAMPLE_DESCRIPTION_INDEX: u32 = 0x02;
const DEFAULT_DURATION: u32 = 0x08;
const DEFAULT_SIZE: u32 = 0x10;
const DEFAULT_FLAGS: u32 = 0x20;
const DEFAULT_BASE_IS_MOOF: u32 = 0x02_0000;

// `trun` flags (§8.8.8.1).
const DATA_OFFSET: u32 = 0x01;
const FIRST_SAMPLE_FLAGS: u32 = 0x04;
const SAMPLE_DURATION: u32 = 0x100;
const SAMPLE_SIZE: u32 = 0x200;
const SAMPLE_FLAGS: u32 = 0x400;
const SAMPLE_COMPOSITION_OFFSET: u32 = 0x800;

/// Whether sample flags (§8.8.3.1) mark a sync sample: not `sample_is_non_sync_sample`, and not
/// `sample_depends_on` = 1 (depends on other samples).
fn is_sync(flags: u32) -> bool {
    let non_sync = flags >> 16 & 1 == 1;
    let depends_on_others = flags >> 24 & 3 == 1;
    !non_sync && !depends_on_others
}

/// The samples of one track found in fragments.
#[derive(Debug, Clone, Default)]
pub(super) struct FragmentTrack {
    /// The track id (`tkhd`, `trex`, `tfhd`).
    pub(super) id: u32,
    /// `trex` defaults: duration, size, flags.
    defaults: (u32, u32, u32),
    /// Samples in decode order.
    pub(super) samples: Vec<Sample>,
    /// Decode time where the next fragment starts when it has no `tfdt`: the end of the last
    /// sample so far (in the `moov`'s tables, then in fragments).
    pub(super) end_decode_time: u64,
}

/// The fragments of a file, as read so far.
#[derive(Debug, Clone, Default)]
pub(super) struct Fragments {
    pub(super) tracks: Vec<FragmentTrack>,
    /// Fragments indexed.
    pub(super) count: u64,
}

/// A reader of big-endian fields of a box body; each read fails on a short body.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn u32(&mut self) -> Result<u32, &'static str> {
        let (head, rest) = self.0.split_first_chunk::<4>().ok_or("a fragment box is truncated")?;
        self.0 = rest;
        Ok(u32::from_be_bytes(*head))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from(self.u32()?) << 32 | u64::from(self.u32()?))
    }
}

impl Fragments {
    /// The tracks `mvex` declares, with their `trex` defaults; `moov` is the whole box. Decode
    /// times start where each track's `moov` samples end (`moov_ends`: track id, end time).
    pub(super) fn from_moov(moov: &[u8], moov_ends: &[(u32, u64)]) -> Fragments {
        let mut tracks = Vec::new();
        let body = children(moov).find(|(k, _)| k == b"moov").map(|(_, b)| b).unwrap_or_default();
        for (_, trex) in children(child(body, b"mvex").unwrap_or_default()).filter(|(k, _)| k == b"trex") {
            let mut f = Fields(trex);
            let parsed = (|| Ok::<_, &str>((f.u32()?, f.u32()?, f.u32()?, f.u32()?, f.u32()?, f.u32()?)))();
            let Ok((_, id, _, duration, size, flags)) = parsed else { continue };
            if tracks.iter().any(|t: &FragmentTrack| t.id == id) || tracks.len() >= super::MAX_TRACKS {
                continue;
            }
            let end = moov_ends.iter().find(|(i, _)| *i == id).map_or(0, |(_, e)| *e);
            tracks.push(FragmentTrack {
                id,
                defaults: (duration, size, flags),
                samples: Vec::new(),
                end_decode_time: end,
            });
        }
        Fragments { tracks, count: 0 }
    }

    /// Adds the samples of one `moof` box (`moof`, header included, read at `moof_offset`) of a
    /// file of `file_len` bytes. `Ok(false)`, adding nothing, when a sample lies past the end of
    /// the file: the fragment is not complete yet.
    pub(super) fn add_moof(
        &mut self,
        moof: &[u8],
        moof_offset: u64,
        file_len: u64,
    ) -> Result<bool, Mp4Error> {
        let bad = |what| Mp4Error::BadFragment { offset: moof_offset, what };
        let body = children(moof)
            .find(|(k, _)| k == b"moof")
            .map(|(_, b)| b)
            .ok_or_else(|| bad("not a moof box"))?;
        // Parsed into `staged` first (track index, samples, end time), kept only when the whole
        // fragment is in the file.
        let mut staged: Vec<(usize, Vec<Sample>, u64)> = Vec::new();
        // Where the data of the previous track fragment ended: the default base of the next.
        let mut data_end = moof_offset;
        for (_, traf) in children(body).filter(|(k, _)| k == b"traf") {
            let tfhd = child(traf, b"tfhd").ok_or_else(|| bad("a traf without tfhd"))?;
            let mut f = Fields(tfhd);
            let flags = f.u32().map_err(bad)? & 0x00ff_ffff;
            let id = f.u32().map_err(bad)?;
            let index = self
                .tracks
                .iter()
                .position(|t| t.id == id)
                .ok_or_else(|| bad("a traf of a track without trex"))?;
            let track = &self.tracks[index];
            let base = if flags & BASE_DATA_OFFSET != 0 {
                f.u64().map_err(bad)?
            } else if flags & DEFAULT_BASE_IS_MOOF != 0 {
                moof_offset
            } else {
                data_end
            };
            if flags & SAMPLE_DESCRIPTION_INDEX != 0 {
                f.u32().map_err(bad)?;
            }
            let (mut duration, mut size, mut sample_flags) = track.defaults;
            if flags & DEFAULT_DURATION != 0 {
                duration = f.u32().map_err(bad)?;
            }
            if flags & DEFAULT_SIZE != 0 {
                size = f.u32().map_err(bad)?;
            }
            if flags & DEFAULT_FLAGS != 0 {
                sample_flags = f.u32().map_err(bad)?;
            }
            let already =
                staged.iter().filter(|(i, _, _)| *i == index).map(|(_, s, _)| s.len()).sum::<usize>();
            let previous_end =
                staged.iter().rev().find(|(i, _, _)| *i == index).map_or(track.end_decode_time, |s| s.2);
            let mut decode_time = match child(traf, b"tfdt") {
                Some(tfdt) => {
                    let mut f = Fields(tfdt);
                    let version = f.u32().map_err(bad)? >> 24;
                    let time = if version == 1 { f.u64() } else { f.u32().map(u64::from) }.map_err(bad)?;
                    // A tfdt a little before where the last duration ends is a muxer's guess of
                    // that duration corrected; one before the last sample breaks decode order.
                    let last = staged.iter().rev().find(|(i, s, _)| *i == index && !s.is_empty());
                    let last = last.and_then(|(_, s, _)| s.last()).or(track.samples.last());
                    if last.is_some_and(|l| time < l.decode_time) {
                        return Err(bad("tfdt decode time goes backwards"));
                    }
                    time
                }
                None => previous_end,
            };
            let room = MAX_SAMPLES_PER_TRACK.saturating_sub((track.samples.len() + already) as u64);
            let mut samples = Vec::new();
            let mut run_end = base;
            for (_, trun) in children(traf).filter(|(k, _)| k == b"trun") {
                let mut f = Fields(trun);
                let head = f.u32().map_err(bad)?;
                let (version, run_flags) = (head >> 24, head & 0x00ff_ffff);
                let count = u64::from(f.u32().map_err(bad)?);
                let mut offset = run_end;
                if run_flags & DATA_OFFSET != 0 {
                    let data_offset = f.u32().map_err(bad)? as i32;
                    offset = base
                        .checked_add_signed(i64::from(data_offset))
                        .ok_or_else(|| bad("data offset before the file"))?;
                }
                let first_flags =
                    if run_flags & FIRST_SAMPLE_FLAGS != 0 { Some(f.u32().map_err(bad)?) } else { None };
                let fields = [SAMPLE_DURATION, SAMPLE_SIZE, SAMPLE_FLAGS, SAMPLE_COMPOSITION_OFFSET]
                    .iter()
                    .filter(|&&b| run_flags & b != 0)
                    .count() as u64;
                // The count is checked against what the box and the file can hold before any
                // allocation: per-sample fields take 4 bytes each, and every sample at least a byte.
                if count.saturating_mul(fields * 4) > f.0.len() as u64 {
                    return Err(bad("a trun declares more samples than its box holds"));
                }
                if count > room.saturating_sub(samples.len() as u64) {
                    return Err(bad("more samples than the limit"));
                }
                if fields == 0 && count.saturating_mul(u64::from(size.max(1))) > file_len {
                    return Err(bad("a trun's samples need more bytes than the file has"));
                }
                samples.reserve(count as usize);
                for i in 0..count {
                    let d = if run_flags & SAMPLE_DURATION != 0 { f.u32().map_err(bad)? } else { duration };
                    let s = if run_flags & SAMPLE_SIZE != 0 { f.u32().map_err(bad)? } else { size };
                    let mut fl =
                        if run_flags & SAMPLE_FLAGS != 0 { f.u32().map_err(bad)? } else { sample_flags };
                    if i == 0 {
                        fl = first_flags.unwrap_or(fl);
                    }
                    let composition_offset = if run_flags & SAMPLE_COMPOSITION_OFFSET != 0 {
                        let raw = f.u32().map_err(bad)?;
                        if version == 0 {
                            i32::try_from(raw).map_err(|_| bad("composition offset out of range"))?
                        } else {
                            raw as i32
                        }
                    } else {
                        0
                    };
                    if s == 0 || s & SYNC_BIT != 0 {
                        return Err(bad("a sample of size 0 or of 2 GiB or more"));
                    }
                    let end = offset.checked_add(u64::from(s)).ok_or_else(|| bad("a sample past 2^64"))?;
                    if end > file_len {
                        return Ok(false);
                    }
                    samples.push(Sample {
                        offset,
                        decode_time,
                        size_sync: s | if is_sync(fl) { SYNC_BIT } else { 0 },
                        composition_offset,
                    });
                    offset = end;
                    decode_time =
                        decode_time.checked_add(u64::from(d)).ok_or_else(|| bad("decode time past 2^64"))?;
                }
                run_end = offset;
            }
            data_end = run_end;
            staged.push((index, samples, decode_time));
        }
        for (index, samples, end) in staged {
            let track = &mut self.tracks[index];
            track.samples.extend_from_slice(&samples);
            track.end_decode_time = end;
        }
        self.count += 1;
        Ok(true)
    }

    /// The fragments of the file `src` of `len` bytes whose `moov` box (`tracks` as mp4parse
    /// read them) ends at `moov_end`.
    pub(super) fn read<R: Read + Seek>(
        src: &mut R,
        moov: &[u8],
        moov_end: u64,
        len: u64,
        tracks: &[mp4parse::Track],
    ) -> Result<Fragments, Mp4Error> {
        // Fragments continue each track where its `moov` samples (if any) end.
        let moov_ends: Vec<(u32, u64)> = tracks
            .iter()
            .map(|t| {
                let end = t.stts.as_ref().map_or(0, |stts| {
                    stts.samples.iter().fold(0u64, |acc, s| {
                        acc.saturating_add(u64::from(s.sample_count) * u64::from(s.sample_delta))
                    })
                });
                (t.track_id.unwrap_or(0), end)
            })
            .collect();
        let mut fragments = Fragments::from_moov(moov, &moov_ends);
        read_fragments(src, moov_end, len, &mut fragments)?;
        Ok(fragments)
    }

    /// The samples found for track `id` and where they end, taken out.
    pub(super) fn take(&mut self, id: u32) -> Option<FragmentTrack> {
        let at = self.tracks.iter().position(|t| t.id == id)?;
        Some(std::mem::take(&mut self.tracks[at]))
    }
}

impl FragmentTrack {
    /// Appends these samples to the `moov`'s of the track (`samples`); the decode time where
    /// they end. Audio samples are all sync: every frame starts decoding, whatever a muxer flags.
    pub(super) fn append_to(self, samples: &mut Vec<Sample>, video: bool) -> Result<u64, &'static str> {
        if (samples.len() + self.samples.len()) as u64 > MAX_SAMPLES_PER_TRACK {
            return Err("more samples than the limit");
        }
        if samples.last().zip(self.samples.first()).is_some_and(|(l, f)| f.decode_time < l.decode_time) {
            return Err("fragments start before the moov samples end");
        }
        samples.extend(self.samples.into_iter().map(|mut s| {
            if !video {
                s.size_sync |= SYNC_BIT;
            }
            s
        }));
        Ok(self.end_decode_time)
    }
}

/// Bytes of `src` from `at`, through a window of [`WALK_WINDOW`] bytes so that the headers of
/// fragments that follow each other are one read.
struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    /// `len` bytes at `at` (`len` may exceed the window: it is read whole).
    fn get<R: Read + Seek>(
        &mut self,
        src: &mut R,
        at: u64,
        len: usize,
        file_len: u64,
    ) -> Result<&[u8], Mp4Error> {
        let inside = at >= self.start && at + len as u64 <= self.start + self.bytes.len() as u64;
        if !inside {
            let want = (len.max(WALK_WINDOW) as u64).min(file_len.saturating_sub(at)) as usize;
            self.bytes.clear();
            self.bytes.resize(want, 0);
            src.seek(SeekFrom::Start(at))?;
            src.read_exact(&mut self.bytes)?;
            self.start = at;
        }
        let from = (at - self.start) as usize;
        Ok(&self.bytes[from..from + len])
    }
}

/// Walks the top-level boxes of a file of `len` bytes from `from` (just after the `moov`),
/// adding every complete `moof` to `fragments`. Stops, keeping what it has, at a truncated box,
/// at a fragment not yet whole in the file, or past [`MAX_FRAGMENT_HEADER_BYTES`].
pub(super) fn read_fragments<R: Read + Seek>(
    src: &mut R,
    from: u64,
    len: u64,
    fragments: &mut Fragments,
) -> Result<(), Mp4Error> {
    let mut window = Window { start: 0, bytes: Vec::new() };
    let mut header_bytes = 0u64;
    let mut offset = from;
    for _ in 0..MAX_FRAGMENT_BOXES {
        if len.saturating_sub(offset) < 8 {
            return Ok(());
        }
        let head = window.get(src, offset, (len - offset).min(16) as usize, len)?;
        let size = match u32::from_be_bytes(head[..4].try_into().expect("4 bytes")) {
            0 => len - offset,
            1 if head.len() >= 16 => u64::from_be_bytes(head[8..16].try_into().expect("8 bytes")),
            1 => return Ok(()),
            n => u64::from(n),
        };
        let kind: [u8; 4] = head[4..8].try_into().expect("4 bytes");
        if size < 8 || size > len - offset {
            // A box still being written (or a broken tail): the index ends before it.
            return Ok(());
        }
        if &kind == b"moof" {
            header_bytes += size;
            if size > MAX_MOOF_BYTES || header_bytes > MAX_FRAGMENT_HEADER_BYTES {
                return Ok(());
            }
            let moof = window.get(src, offset, size as usize, len)?;
            if !fragments.add_moof(moof, offset, len)? {
                return Ok(());
            }
        }
        offset += size;
    }
    Ok(())
}

/// Where the last of `samples` (in decode order) to be shown stops being shown: each is shown
/// for its decode span, the last one's up to `end`.
pub(crate) fn presented_end(samples: &[Sample], end: u64) -> u64 {
    let shown = samples.iter().enumerate().map(|(i, s)| {
        let next = samples.get(i + 1).map_or(end, |n| n.decode_time);
        s.composition_time().saturating_add(next.saturating_sub(s.decode_time))
    });
    shown.max().unwrap_or(end)
}

#[cfg(test)]
mod tests;
