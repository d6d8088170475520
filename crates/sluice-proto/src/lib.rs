#![deny(unsafe_code)]
//! Sans-I/O protocol state machines for sluice: HTTP/1.1, RTSP, RTP.
//!
//! This crate owns everything a connection *means*: parsing requests, choosing responses, framing
//! bodies, deadlines as data. It owns no sockets, reads no clocks and starts no threads: an engine
//! (`sluice-engine`) feeds it bytes and the current time, and executes what it asks for through an
//! [`Outbox`]. Because of that split the same protocol code runs on every engine and is tested and
//! fuzzed without a network.
//!
//! The client side sits beside the server side ([`client`]): the HTTP response reader, RTSP
//! responses and interleaved frames, and SDP media that the load generator, the uploader and the
//! test harness read with, so each byte layout has one parser for both roles.

#![deny(missing_docs)]

pub mod buffers;
pub mod client;
pub mod conn;
pub mod duration_text;
#[doc(hidden)]
pub mod fuzzing;
pub mod http;
pub mod kernel_tls;
pub mod lru;
pub mod markup;
pub mod metrics_text;
pub mod nesting;
pub mod rtp;
pub mod rtsp;
pub mod size_text;

pub use conn::{Clock, FileSlice, Job, JobOutput, Outbox, Segment, Session, SharedBytes};
