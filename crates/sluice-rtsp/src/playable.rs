//! Whether RTSP can stream a file, and why not: the one predicate the RTSP core answers
//! `DESCRIBE`, `SETUP` and `PLAY` by, and the server's pages ask before they offer an `rtsp://`
//! URL for a file.
//!
//! This module owns the verdict ([`playable`]), its status and reason ([`Unplayable`]), and how
//! a refusal goes out: the status HLS answers for the same file (501 for a fragmented MP4 with no complete fragment yet, 415
//! when no track is of a codec sluice reads or none has an RTP payload format, 500 for a file that cannot be indexed), the reason in the
//! [`REASON_HEADER`] response header (one line) and in a `text/plain` body, and one warning per
//! file and reason however many requests are refused ([`first_refusal`]). It does not find or
//! index files (the server's [`super::Catalogue`] does) or write the log line (the engine's
//! [`super::Observer`] does, from [`super::Note::Unplayable`]).

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

use sluice_media::mp4::{Mp4Error, Mp4File, NothingToStream};

/// The response header that carries why a presentation is refused, one line of text, e.g.
/// `Sluice-Reason: cannot stream /films/a.mp4 over RTSP: fragmented MP4 with no complete fragment yet`.
/// The body of the response says the same after its status.
pub const REASON_HEADER: &str = "Sluice-Reason";

/// Refusals remembered for [`first_refusal`]; past it the memory starts over (a refusal may then
/// be logged once more).
const REMEMBERED_REFUSALS: usize = 4096;

/// Why a file cannot be streamed: the status to answer and the reason to give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Unplayable {
    /// The status code (RTSP's and HTTP's agree on these): 501, 415 or 500.
    pub status: u16,
    /// Why, one line, naming no path (the caller adds the file it refused).
    pub reason: String,
}

impl Unplayable {
    /// The file is not an MP4 the demuxer can index (truncated, damaged, another format under an
    /// `.mp4` name): 500, as HLS answers.
    pub fn unreadable(error: &Mp4Error) -> Unplayable {
        Unplayable { status: 500, reason: format!("not a playable MP4: {error}") }
    }

    /// The file was indexed but has nothing RTSP can send.
    pub fn nothing_to_stream(why: &NothingToStream) -> Unplayable {
        let status = match why {
            NothingToStream::Fragmented => 501,
            NothingToStream::NoTrack(_) => 415,
        };
        Unplayable { status, reason: why.to_string() }
    }
}

/// What a catalogue answers for a path RTSP will not serve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No such presentation (404).
    NotFound,
    /// A file that cannot be streamed, and why.
    Unplayable(Unplayable),
    /// Not known yet: the server is reading the presentation's index (or looking the file up)
    /// off the RTSP loop, from an origin that takes a round trip or more. The core holds the
    /// request and asks again ([`super::session::WARM_RETRY`]), up to
    /// [`super::session::WARM_TIMEOUT`].
    Warming,
}

/// Whether RTSP can stream `file`: at least one track with samples (in the `moov` or in complete
/// movie fragments) of a codec with an RTP payload format
/// here ([`sluice_media::sdp::rtp_payload_format`]); 415 with why each track is not, else.
pub fn playable(file: &Mp4File) -> Result<(), Unplayable> {
    file.streamable().map_err(|why| Unplayable::nothing_to_stream(&why))?;
    let why: Vec<String> = file
        .tracks
        .iter()
        .map(|t| sluice_media::sdp::rtp_payload_format(t).map_err(|why| format!("track {}: {why}", t.id)))
        .filter_map(Result::err)
        .collect();
    if why.len() < file.tracks.len() {
        return Ok(());
    }
    Err(Unplayable { status: 415, reason: format!("no track RTSP can send ({})", why.join("; ")) })
}

/// Whether this refusal of `path` is the first one seen in this process (so the caller logs it),
/// or one already logged. Shared by every RTSP loop, so a file refused a thousand times, on any
/// loop, is one warning.
pub fn first_refusal(path: &str, refusal: &Unplayable) -> bool {
    static SEEN: Mutex<Option<HashSet<u64>>> = Mutex::new(None);
    let mut hasher = DefaultHasher::new();
    (path, refusal.status, &refusal.reason).hash(&mut hasher);
    let key = hasher.finish();
    let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
    let seen = seen.get_or_insert_with(HashSet::new);
    if seen.len() >= REMEMBERED_REFUSALS {
        seen.clear();
    }
    seen.insert(key)
}

/// The default of [`super::Catalogue::open_playable`]: the catalogue's file, if [`playable`].
pub(crate) fn checked(file: Arc<Mp4File>) -> Result<Arc<Mp4File>, Refusal> {
    playable(&file).map_err(Refusal::Unplayable)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_media::mp4::SkippedTrack;

    use crate::demo_file as demo;

    #[test]
    fn the_demo_is_playable() {
        assert_eq!(playable(&demo()), Ok(()));
    }

    #[test]
    fn refusals_carry_the_status_hls_answers() {
        let fragmented = Mp4File {
            tracks: vec![],
            skipped: vec![SkippedTrack { id: 1, reason: "no samples".into() }],
            file_len: 100,
            fragmented: true,
        };
        let u = playable(&fragmented).unwrap_err();
        assert_eq!(u.status, 501);
        assert!(u.reason.contains("fragmented"), "{u}");
        let mpeg4 = Mp4File {
            tracks: vec![],
            skipped: vec![SkippedTrack { id: 1, reason: "video codec MP4V is not served".into() }],
            file_len: 100,
            fragmented: false,
        };
        let u = playable(&mpeg4).unwrap_err();
        assert_eq!(u.status, 415);
        assert!(u.reason.contains("no H.264, HEVC, AV1, VP9, AAC") && u.reason.contains("MP4V"), "{u}");
        let broken = Unplayable::unreadable(&Mp4File::from_bytes(b"not a film").unwrap_err());
        assert_eq!(broken.status, 500);
        assert!(broken.reason.starts_with("not a playable MP4: malformed box"), "{broken}");
        // The same problems an HLS request is answered with.
        let hls = sluice_media::hls::SegmentIndex::build(&fragmented, std::time::Duration::from_secs(6));
        assert!(matches!(hls, Err(sluice_media::hls::HlsError::Fragmented)));
    }

    #[test]
    fn each_refusal_is_first_once() {
        let u = Unplayable { status: 501, reason: "fragmented".into() };
        let path = "/first-refusal-test.mp4";
        assert!(first_refusal(path, &u));
        assert!(!first_refusal(path, &u));
        assert!(first_refusal("/first-refusal-test-2.mp4", &u), "another file");
        let other = Unplayable { status: 500, reason: "damaged".into() };
        assert!(first_refusal(path, &other), "the same path with another problem");
    }
}
