//! The client side of sluice's protocols, sans-I/O, beside the server side (as hyper pairs its
//! client and server roles over one set of parsers): reading HTTP/1.1 responses ([`http`]),
//! RTSP responses and the interleaved frames mixed with them ([`rtsp`]), and the media an SDP
//! describes ([`sdp`]). RTP headers are read by [`crate::rtp::RtpPacket`], the same parser the
//! server's depacketizing tests use.
//!
//! It owns the bytes a client reads. It does not own sockets, clocks, retries or counting: the
//! load generator, the uploader and the test harness drive these readers and decide what a
//! response means to them.

pub mod http;
pub mod rtsp;
pub mod sdp;

pub use http::{Progress, ResponseError, ResponseHead, ResponseReader, MAX_HEAD_BYTES};
