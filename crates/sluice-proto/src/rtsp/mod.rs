//! RTSP/1.0 (RFC 2326) messages, sans-I/O.
//!
//! This module owns the bytes of an RTSP control connection: reading requests (and the
//! interleaved `$` frames a TCP client mixes in) from whatever has arrived ([`request`]), the
//! headers a streaming server must understand (`Transport`, `Range`; [`headers`]), and writing
//! responses with the headers a client expects back ([`response`]). Every refusal is an
//! [`RtspError`] that knows its status code. Parsing and writing are done by `rtsp-types`; this
//! module adds the framing limits and the meaning. It does not keep session state (which
//! session exists, what it may do next) and does not touch sockets: the server's RTSP core owns
//! that, on top of these pieces, and an engine's RTSP loop drives it through [`loops`].

pub mod headers;
pub mod loops;
pub mod request;
pub mod response;

pub use headers::{
    cseq, parse_range, parse_record_transport, parse_transport, session_id, NptStart, PlayRange,
    TransportSpec,
};
pub use loops::{ControlIo, DatagramSink, Headroom, LoopNote, OutBuf, Port, Release, RtspCore};
pub use request::{read_message, Limits, Message};
pub use response::{Reply, RtpInfoEntry};

pub use rtsp_types::{Method, StatusCode};

use std::fmt;
use std::net::SocketAddr;

/// The 4-byte header of an interleaved frame (`$`, channel, 16-bit length) that carries a
/// packet of `len` bytes on the RTSP connection (RFC 2326 §10.12); `None` if it is too long.
pub fn interleaved_header(channel: u8, len: usize) -> Option<[u8; 4]> {
    let [hi, lo] = u16::try_from(len).ok()?.to_be_bytes();
    Some([b'$', channel, hi, lo])
}

/// Reads the interleaved frame at the start of `buf` (RFC 2326 §10.12: `$`, channel, 16-bit
/// length, data): its channel, its data and the bytes it takes, header included; `None` while
/// it is incomplete or when `buf` does not start with `$`. The one reader of this layout, for
/// the server (a client's RTCP) and the client (the media).
pub fn read_interleaved(buf: &[u8]) -> Option<(u8, &[u8], usize)> {
    let [b'$', channel, hi, lo, ..] = *buf else { return None };
    let end = 4 + usize::from(u16::from_be_bytes([hi, lo]));
    Some((channel, buf.get(4..end)?, end))
}

/// The connection an error happened on, as retina's `ConnectionContext` names it: the engine's
/// number for it and the client's address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionContext {
    /// The engine's number for the connection.
    pub id: u64,
    /// The client's address.
    pub peer: SocketAddr,
}

impl fmt::Display for ConnectionContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connection {:#x} from {}", self.id, self.peer)
    }
}

/// Why a request is refused; each kind knows its RTSP status code. An error the connection saw
/// comes [`RtspError::InContext`]: with the byte position of the message in the connection's input
/// and the connection, so a log line finds the offending bytes in a capture (as retina's errors
/// do).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RtspError {
    /// The bytes are not an RTSP request (bad request line, bad header syntax).
    #[error("malformed request: {0}")]
    Malformed(&'static str),
    /// The message head did not end within the limit.
    #[error("request head larger than {limit} bytes")]
    HeadTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The body (by `Content-Length`) is larger than the limit.
    #[error("request body larger than {limit} bytes")]
    BodyTooLarge {
        /// The limit.
        limit: usize,
    },
    /// The client sent a response, not a request (sluice sends no requests to answer).
    #[error("expected a request, got a response")]
    NotARequest,
    /// RTSP/2.0 or another version than 1.0.
    #[error("RTSP version not supported")]
    UnsupportedVersion,
    /// A header the method needs is missing.
    #[error("missing {0} header")]
    MissingHeader(&'static str),
    /// A header is present but cannot be parsed.
    #[error("invalid {0} header")]
    BadHeader(&'static str),
    /// The `Session` header names no session (or one of another client).
    #[error("session not found")]
    SessionNotFound,
    /// The method cannot be used in the session's state (PLAY before SETUP, ...).
    #[error("method not valid in this state")]
    MethodNotValidInState,
    /// The method cannot be applied to the whole presentation (SETUP of the aggregate URL).
    #[error("aggregate operation not allowed")]
    AggregateNotAllowed,
    /// None of the offered transports is RTP/AVP unicast over UDP or RTP/AVP/TCP interleaved.
    #[error("unsupported transport")]
    UnsupportedTransport,
    /// A `Range` that is not `npt`, or lies outside the presentation.
    #[error("invalid range")]
    InvalidRange,
    /// The URL names no presentation (no such file, or a track the file does not have).
    #[error("not found")]
    NotFound,
    /// A method sluice does not implement (REDIRECT, SET_PARAMETER, ...; ANNOUNCE and RECORD
    /// where the server takes no publishers).
    #[error("method not implemented")]
    NotImplemented,
    /// A bound is reached (sessions per connection or in all, tracks per session): refused now,
    /// the client may retry later.
    #[error("too many sessions or tracks")]
    Overloaded,
    /// The server is at its viewer limit (`--rtsp-max-viewers`), or one more viewer would take
    /// more than its headroom: the viewers already playing keep their stream, this one is refused.
    #[error("not enough bandwidth for another viewer")]
    NotEnoughBandwidth,
    /// `error`, in the message that starts at byte `pos` of connection `conn`'s input.
    #[error("{error} (message at byte {pos} of {conn})")]
    InContext {
        /// What went wrong (never itself in context).
        error: Box<RtspError>,
        /// Where the message starts: bytes the client sent on the connection before it.
        pos: u64,
        /// The connection.
        conn: ConnectionContext,
    },
}

impl RtspError {
    /// `self` as seen in the message at byte `pos` of `conn`'s input.
    pub fn in_context(self, pos: u64, conn: ConnectionContext) -> RtspError {
        RtspError::InContext { error: Box::new(self.kind().clone()), pos, conn }
    }

    /// What went wrong, without the context.
    pub fn kind(&self) -> &RtspError {
        match self {
            RtspError::InContext { error, .. } => error.kind(),
            other => other,
        }
    }

    /// The byte position of the message in its connection's input, when known.
    pub fn position(&self) -> Option<u64> {
        match self {
            RtspError::InContext { pos, .. } => Some(*pos),
            _ => None,
        }
    }

    /// The connection, when known.
    pub fn connection(&self) -> Option<&ConnectionContext> {
        match self {
            RtspError::InContext { conn, .. } => Some(conn),
            _ => None,
        }
    }

    /// The status code the response carries.
    pub fn status(&self) -> StatusCode {
        match self.kind() {
            RtspError::Malformed(_)
            | RtspError::HeadTooLarge { .. }
            | RtspError::NotARequest
            | RtspError::MissingHeader(_)
            | RtspError::BadHeader(_) => StatusCode::BadRequest,
            RtspError::BodyTooLarge { .. } => StatusCode::RequestMessageBodyTooLarge,
            RtspError::UnsupportedVersion => StatusCode::RTSPVersionNotSupported,
            RtspError::SessionNotFound => StatusCode::SessionNotFound,
            RtspError::MethodNotValidInState => StatusCode::MethodNotValidInThisState,
            RtspError::AggregateNotAllowed => StatusCode::AggregateOperationNotAllowed,
            RtspError::UnsupportedTransport => StatusCode::UnsupportedTransport,
            RtspError::InvalidRange => StatusCode::InvalidRange,
            RtspError::NotFound => StatusCode::NotFound,
            RtspError::NotImplemented => StatusCode::NotImplemented,
            RtspError::Overloaded => StatusCode::ServiceUnavailable,
            RtspError::NotEnoughBandwidth => StatusCode::NotEnoughBandwidth,
            RtspError::InContext { .. } => unreachable!("kind() is never in context"),
        }
    }

    /// Whether the connection must close after the response: when framing is lost, the next
    /// request's start cannot be found.
    pub fn closes_connection(&self) -> bool {
        matches!(
            self.kind(),
            RtspError::Malformed(_)
                | RtspError::HeadTooLarge { .. }
                | RtspError::BodyTooLarge { .. }
                | RtspError::NotARequest
                | RtspError::UnsupportedVersion
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interleaved_header_reads_back() {
        let mut frame = interleaved_header(3, 2).unwrap().to_vec();
        frame.extend_from_slice(&[7, 8]);
        assert_eq!(
            read_message(&frame, &Limits::default()),
            Ok(Message::Interleaved { channel: 3, payload: &[7, 8], consumed: 6 })
        );
        assert_eq!(interleaved_header(0, 65_535), Some([b'$', 0, 0xff, 0xff]));
        assert_eq!(interleaved_header(0, 65_536), None);
    }

    #[test]
    fn errors_map_to_status_codes() {
        let cases = [
            (RtspError::Malformed("x"), 400, true),
            (RtspError::HeadTooLarge { limit: 1 }, 400, true),
            (RtspError::BodyTooLarge { limit: 1 }, 413, true),
            (RtspError::MissingHeader("CSeq"), 400, false),
            (RtspError::SessionNotFound, 454, false),
            (RtspError::MethodNotValidInState, 455, false),
            (RtspError::InvalidRange, 457, false),
            (RtspError::AggregateNotAllowed, 459, false),
            (RtspError::UnsupportedTransport, 461, false),
            (RtspError::UnsupportedVersion, 505, true),
            (RtspError::NotFound, 404, false),
            (RtspError::NotImplemented, 501, false),
            (RtspError::Overloaded, 503, false),
            (RtspError::NotEnoughBandwidth, 453, false),
        ];
        let conn = ConnectionContext { id: 7, peer: "10.0.0.1:40000".parse().unwrap() };
        for (e, code, closes) in cases {
            assert_eq!(u16::from(e.status()), code, "{e}");
            assert_eq!(e.closes_connection(), closes, "{e}");
            let placed = e.clone().in_context(1234, conn).in_context(1, conn);
            assert_eq!((placed.kind(), placed.position(), placed.connection()), (&e, Some(1), Some(&conn)));
            assert_eq!((u16::from(placed.status()), placed.closes_connection()), (code, closes));
        }
        let placed = RtspError::Malformed("request head").in_context(1234, conn);
        assert_eq!(
            placed.to_string(),
            "malformed request: request head (message at byte 1234 of connection 0x7 from 10.0.0.1:40000)"
        );
    }
}
