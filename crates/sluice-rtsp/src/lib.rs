//! The RTSP server core of sluice: serving an MP4 file, or a live stream a publisher sends
//! (`ANNOUNCE`/`RECORD`, [`live`]), over RTSP/RTP, sans-I/O. The control
//! connection and its sessions ([`session`]), pacing a playing session's samples into RTP packets
//! ([`stream`]), whether a viewer is admitted or refused and why ([`admission`]), and the server
//! core that joins them for an engine's RTSP loop ([`server`]).
//!
//! This crate owns the state that joins RTSP to media. It does not own what is inside a file
//! (the MP4 index, codec configurations and the SDP of a file's tracks are `sluice-media`'s, which
//! never depends on this crate), the wire formats (request framing, headers, replies, RTP
//! packetizers, RTCP reports, the per-viewer queue are `sluice-proto`'s), or sockets, timers and
//! file reads (the engine's and the server's). An engine's loop drives
//! the whole of it through [`RtspServer`] (bytes, datagrams and the time in; bytes to a
//! connection, datagrams to addresses and the next wake-up out). What [`RtspServer`] does with
//! the pieces below:
//!
//! 1. Per control connection, an [`RtspConnection`]; per worker, one [`SessionTable`]. Append what
//!    the socket read, call [`RtspConnection::receive`] with `now` and the server's
//!    [`Catalogue`], drop the bytes it consumed, write [`Output::replies`], act on
//!    [`Output::events`], close after the replies when [`Output::close`]; call again with the
//!    rest while it consumes something. When the socket closes, [`SessionTable::connection_closed`].
//!    Stop reading while unconsumed bytes exceed the request limits: [`RtspConnection::receive`]
//!    answers at most [`RtspConfig::max_pipelined`] requests a call, so the input stays bounded.
//! 2. Arm a timer at [`SessionTable::deadline`]; then [`SessionTable::expire`]. An RTCP receiver
//!    report arriving on the server's UDP port for a session is [`SessionTable::touch`] (over
//!    TCP, interleaved reports refresh the connection's sessions by themselves). Close a
//!    connection idle past [`RtspConnection::deadline`].
//! 3. For each playing session, at its streamer's [`Streamer::next_wake`]: [`Streamer::due`]
//!    lists the samples to read, [`Streamer::packetize`] turns each one's bytes into packets,
//!    [`Streamer::sender_reports`] adds RTCP; the packets go into the viewer's
//!    `sluice_proto::rtp::ViewerQueue` and out to the track's [`Delivery`]. When
//!    [`Streamer::is_done`], the session has sent everything. [`Event::Play`] comes again after a
//!    seek (`PLAY` with `Range` while playing): the streamer's positions changed under the engine.
//!
//! The server never makes the loop wait for an origin: a presentation it is still fetching is
//! [`Refusal::Warming`], and the request stays in the connection's input (the ones pipelined
//! behind it with it, so replies keep their order) to be answered again at
//! [`RtspConnection::retry_at`] (part of [`RtspServer::next_wake`]), up to [`WARM_TIMEOUT`]
//! (then 504 with the reason); a sample read that fails with `io::ErrorKind::WouldBlock` holds
//! that viewer's due samples, in order, and is tried again [`WARM_RETRY`] later.
//!
//! A file RTSP cannot stream (fragmented with no complete fragment yet, no track of a codec sluice reads, or none with an RTP payload format, not an MP4 at all) is refused
//! at `DESCRIBE`, `SETUP` and `PLAY` with the status HLS answers for it and the reason in the
//! `Sluice-Reason` header ([`playable`], whose predicate the server's pages share).
//!
//! Not handled here yet: `TEARDOWN` of one track's URL releases the whole session (RFC 2326
//! allows tearing down one stream), and `PLAY`/`PAUSE` always act on the whole session.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod admission;
pub mod config;
#[doc(hidden)]
pub mod fuzzing;
pub mod live;
mod loop_core;
pub mod playable;
pub mod samples;
pub mod server;
pub mod session;
pub mod stream;
pub mod table;

pub use admission::ADMIT_BUSY;
pub use config::{Overload, RtspConfig};
pub use live::cmaf::{LiveCmaf, LiveCmafError, LiveSegment, LiveWindow, KEPT_SEGMENTS, LIVE_SEGMENT_TARGET};
pub use live::{LiveRegistry, LiveStream, LiveSummary};
pub use playable::{first_refusal, playable, Refusal, Unplayable, REASON_HEADER};
pub use server::{Control, MediaLibrary, Note, Observer, RtspServer, LATE_SEND, LOAD_WINDOW, PACE_TICK};
pub use session::{
    Answered, Catalogue, Event, NotFound, Output, RtspConnection, METHODS, WARM_RETRY, WARM_TIMEOUT,
};
pub use sluice_proto::rtsp::{DatagramSink, Headroom, OutBuf, Port, Release, RtspCore};
pub use stream::{due_until, start_sample, Due, StreamError, StreamTrack, Streamer, SENDER_REPORT_INTERVAL};
pub use table::{ConnectionId, Delivery, RtspSession, SessionId, SessionTable, SessionTrack, ViewerBudget};

/// The built-in demo file, indexed: the fixture of this crate's unit tests.
#[cfg(test)]
pub(crate) fn demo_file() -> sluice_media::Mp4File {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
    sluice_media::Mp4File::from_bytes(&std::fs::read(path).expect("the demo file")).expect("the demo indexes")
}
