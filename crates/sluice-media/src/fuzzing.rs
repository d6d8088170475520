//! The property the `mp4_demux` fuzz target checks, shared with the test that replays the
//! committed corpus (`fuzz/corpus/mp4_demux/`), so `cargo fuzz` and `cargo test` run the same
//! check.

use crate::mp4::{Mp4File, TrackKind};
use crate::sdp::{session_description, to_bytes, SdpOptions};

/// Indexing arbitrary bytes never panics; when it succeeds, every sample lies inside the input,
/// decode times never go backwards, and the file's SDP is written and parsed back.
pub fn mp4_demux(data: &[u8]) {
    let Ok(file) = Mp4File::from_bytes(data) else { return };
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
    assert_eq!(parsed.medias.len(), file.tracks.len());
}
