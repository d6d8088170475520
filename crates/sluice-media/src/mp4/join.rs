//! Joining the sample tables of consecutive files of one stream (a live path's recording files)
//! into the tables of one file whose bytes are theirs laid end to end, so a clip of a span across
//! them is planned as a clip of one file ([`super::clip`]) and its sample data sent from each
//! file's own bytes.
//!
//! Owns the joining: which files may be joined (the same tracks with the same codec parameters,
//! as one publish's files have) and the joined timeline. A file that follows on from the one
//! before (its first sample where that one's last ends, within half a second) keeps its times; a
//! new publish, whose timeline starts again, is moved to follow on, so the joined presentation is
//! the files' one after the other with no gap. It does not read files or write boxes.

use super::{Mp4File, Sample, Track};
use crate::hls::index::sample_duration;

/// How far apart, in seconds, one file's end and the next file's start may be and still be
/// one timeline (the recorder's files of one publish follow on exactly).
const FOLLOWS_ON: f64 = 0.5;

/// Why files cannot be joined.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// There were no files.
    #[error("no files to join")]
    Empty,
    /// A file's tracks differ from the first file's (another codec, other parameters).
    #[error("file {index} has other tracks than the first (a new publish with other codec settings)")]
    OtherTracks {
        /// Which file, from 0.
        index: usize,
    },
}

/// Where each joined file's bytes start in the joined file.
#[derive(Debug, Clone)]
pub struct Joined {
    /// The joined tables.
    pub file: Mp4File,
    /// Each file's first byte in the joined file (its bytes follow on to the next's).
    pub bases: Vec<u64>,
}

/// The tables of `files` joined, in order. Every file must have the first one's tracks.
pub fn join(files: &[&Mp4File]) -> Result<Joined, JoinError> {
    let first = files.first().ok_or(JoinError::Empty)?;
    let mut tracks: Vec<Track> =
        first.tracks.iter().map(|t| Track { samples: Vec::new(), ..t.clone() }).collect();
    let mut bases = Vec::with_capacity(files.len());
    let mut base = 0u64;
    // Where the joined main track (the first) ends, in seconds; `None` before the first file.
    let mut end: Option<f64> = None;
    for (index, file) in files.iter().enumerate() {
        let same = file.tracks.len() == tracks.len()
            && file.tracks.iter().zip(&tracks).all(|(t, j)| t.kind == j.kind && t.timescale == j.timescale);
        if !same {
            return Err(JoinError::OtherTracks { index });
        }
        // The file's shift in seconds: none when it follows on, else what makes it.
        let start = file.tracks[0].samples.first().map_or(0.0, |s| seconds(&file.tracks[0], s.decode_time()));
        let shift = match end {
            Some(e) if (start - e).abs() > FOLLOWS_ON => e - start,
            _ => 0.0,
        };
        for (joined, track) in tracks.iter_mut().zip(&file.tracks) {
            let ticks = (shift * f64::from(track.timescale)).round() as i64;
            joined.samples.extend(track.samples.iter().map(|s| {
                let time = s.decode_time().saturating_add_signed(ticks);
                Sample::new(base + s.offset(), s.size(), time, s.composition_offset(), s.is_sync())
            }));
        }
        let main = &tracks[0];
        end = main.samples.len().checked_sub(1).map(|last| {
            seconds(main, main.samples[last].decode_time() + u64::from(sample_duration(main, last)))
        });
        bases.push(base);
        base += file.file_len;
    }
    for track in &mut tracks {
        // Decode times may not go back where a shifted file's rounding met the one before.
        let mut floor = 0;
        for s in &mut track.samples {
            if s.decode_time() < floor {
                *s = Sample::new(s.offset(), s.size(), floor, s.composition_offset(), s.is_sync());
            }
            floor = s.decode_time() + 1;
        }
        let end =
            track.samples.len().checked_sub(1).map_or(0, |last| {
                track.samples[last].decode_time() + u64::from(sample_duration(track, last))
            });
        track.duration =
            super::fragments::presented_end(&track.samples, end).saturating_sub(track.edit_start);
    }
    let file = Mp4File { tracks, skipped: Vec::new(), file_len: base, fragmented: false };
    Ok(Joined { file, bases })
}

fn seconds(track: &Track, ticks: u64) -> f64 {
    ticks as f64 / f64::from(track.timescale.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mp4::TrackKind;

    /// A one-track file of `n` samples of 100 ticks from `t0`, 10 bytes each from offset 8.
    fn file(t0: u64, n: u64, kind: &TrackKind) -> Mp4File {
        let samples = (0..n).map(|i| Sample::new(8 + 10 * i, 10, t0 + 100 * i, 0, i == 0)).collect();
        let track =
            Track { id: 1, kind: kind.clone(), timescale: 1000, duration: 100 * n, edit_start: 0, samples };
        Mp4File { tracks: vec![track], skipped: Vec::new(), file_len: 8 + 10 * n, fragmented: true }
    }

    fn kind() -> TrackKind {
        Mp4File::from_bytes(&crate::mp4::tests::demo()).unwrap().tracks[0].kind.clone()
    }

    #[test]
    fn files_that_follow_on_keep_their_times_and_lay_their_bytes_end_to_end() {
        let k = kind();
        let (a, b) = (file(5000, 20, &k), file(7000, 10, &k));
        let joined = join(&[&a, &b]).unwrap();
        assert_eq!(joined.bases, vec![0, a.file_len]);
        assert_eq!(joined.file.file_len, a.file_len + b.file_len);
        let samples = &joined.file.tracks[0].samples;
        assert_eq!(samples.len(), 30);
        assert_eq!((samples[20].decode_time(), samples[20].offset()), (7000, a.file_len + 8));
        assert_eq!(joined.file.tracks[0].duration, 8000);
    }

    #[test]
    fn a_new_publish_is_moved_to_follow_on_and_other_tracks_are_refused() {
        let k = kind();
        let (a, b) = (file(5000, 20, &k), file(0, 10, &k));
        let samples = join(&[&a, &b]).unwrap().file.tracks.remove(0).samples;
        assert_eq!(samples[20].decode_time(), 7000, "the second publish starts where the first ends");
        assert!(samples.windows(2).all(|w| w[0].decode_time() < w[1].decode_time()));
        let mut other = file(7000, 10, &k);
        other.tracks[0].timescale = 90_000;
        assert!(matches!(join(&[&a, &other]), Err(JoinError::OtherTracks { index: 1 })));
        assert!(matches!(join(&[]), Err(JoinError::Empty)));
    }
}
