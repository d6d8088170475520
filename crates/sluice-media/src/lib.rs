//! Media for sluice: what is inside a file, independent of how it is sent.
//!
//! This crate owns the demux of an MP4 file into per-track sample tables ([`mp4`]) and the session
//! description of a file for RTSP `DESCRIBE` ([`sdp`]). It reads a file's index once (the `moov`
//! box) and never the media data itself: the tables hold byte offsets, so an engine can send a
//! sample with `pread`, `sendfile` or io_uring straight from the file. It owns no sockets, no
//! clocks and no packetization (that is `sluice-proto::rtp`), and no RTSP sessions (the server
//! core that serves a file over RTSP is the `sluice-rtsp` crate, which depends on this one); its
//! [`hls`] module packages a file as HLS (fMP4 segments planned as generated headers plus file
//! ranges); its [`protect`] module encrypts those segments (Common Encryption, HLS AES-128)
//! when a title is protected; its [`flv`] module reads the bodies of RTMP's audio and video
//! messages into a live track's samples.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod codec;
pub mod flv;
#[doc(hidden)]
pub mod fuzzing;
pub mod hls;
pub mod mp4;
pub mod protect;
pub mod sdp;

pub use mp4::{
    AacConfig, H264Config, Mp4Error, Mp4File, NothingToStream, Sample, SkippedTrack, Track, TrackKind,
};
pub use sdp::{session_description, SdpOptions};
