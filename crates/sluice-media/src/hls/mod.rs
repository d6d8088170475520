//! HLS (fMP4/CMAF) packaging of a progressive MP4, on the fly.
//!
//! This module owns turning an indexed [`Mp4File`](crate::mp4::Mp4File) into what an HLS client
//! fetches: the per-file [`SegmentIndex`] (where each segment starts, computed once from the
//! sample tables and small enough to cache for a whole library), the playlists ([`playlist`]),
//! the init segment and each media segment's header ([`fmp4`]). A media segment is planned as a
//! generated `moof` + `mdat` header followed by byte ranges of the original file, so the server
//! sends the sample data with the engine's zero-copy path and never reads it. It does not open
//! files, answer HTTP or cache anything (the server does).
//!
//! Per-track CMAF: each packaged track (video, audio) is also a rendition of its own, with its
//! own init segment (`video-init.mp4`) and segments (`video-seg-N.m4s`) cut at the same
//! keyframe times as the muxed ones, so one set of segments serves the HLS master (video
//! variants and an `EXT-X-MEDIA` audio group), the DASH manifest ([`mpd`]) and rendition sets
//! (several files of one title whose keyframes line up). The muxed rendition (`media.m3u8`,
//! `init.mp4`, `seg-N.m4s`) is still served, unchanged, for clients that kept its URLs: it
//! costs nothing to keep (segments are generated per request) and a redirect would cost such a
//! client a round trip per segment.
//!
//! MPEG-TS ([`ts`]): the same cuts as transport-stream segments, for players without fMP4.
//!
//! Trick play ([`iframes`]): each keyframe as a fragment of its own, listed by an HLS
//! I-frame playlist and a DASH trick-mode set. Thumbnails ([`thumbs`]): which keyframes make
//! each tile of a scrubbing strip, and the image playlist, WebVTT track and DASH image set
//! that list the tiles (decoding them is the server's).
//!
//! Subtitles (WebVTT sidecars) follow the same segments: as segmented WebVTT for HLS
//! ([`webvtt`]) and as a CMAF text track (`wvtt` samples in fMP4, [`wvtt`]) for DASH.

mod carried;
pub mod fmp4;
pub mod iframes;
pub mod index;
pub mod mpd;
pub mod playlist;
pub mod thumbs;
pub mod ts;
pub mod webvtt;
pub mod wvtt;

pub use fmp4::{init_segment, media_segment, track_init_segment, track_media_segment, SegmentPlan};
pub use index::{Packaged, SegmentIndex};

use crate::mp4::Mp4Error;

/// Why a file cannot be packaged, or a segment does not exist.
#[derive(Debug, thiserror::Error)]
pub enum HlsError {
    /// The file is not an MP4, or its index is broken.
    #[error("not a playable MP4: {0}")]
    Mp4(#[from] Mp4Error),
    /// A fragmented MP4 with no complete fragment yet (a recording that has only just started).
    #[error("fragmented MP4 with no complete fragment yet")]
    Fragmented,
    /// No track of a codec HLS (as packaged here) can carry.
    #[error("no track to package ({0})")]
    UnsupportedCodec(String),
    /// The file would need more segments than an index holds.
    #[error("more than {0} segments")]
    TooManySegments(usize),
    /// The requested segment is past the end.
    #[error("segment {0} does not exist")]
    NoSuchSegment(usize),
    /// A segment's boxes cannot describe it (offsets past 2 GiB, say).
    #[error("segment {segment} cannot be described in fMP4: {what}")]
    Unrepresentable {
        /// The segment's number.
        segment: usize,
        /// What does not fit.
        what: &'static str,
    },
    /// A subtitles segment would be larger than its bound (cues that overlap are repeated in
    /// every sample they span).
    #[error("the subtitles from {from_ms} ms to {to_ms} ms need more than {limit} bytes of samples")]
    Subtitles {
        /// Where the segment starts, in milliseconds.
        from_ms: u64,
        /// Where it ends.
        to_ms: u64,
        /// The bound.
        limit: usize,
    },
    /// The box writer refused a value.
    #[error("writing boxes: {0}")]
    Boxes(#[from] mp4_atom::Error),
}
