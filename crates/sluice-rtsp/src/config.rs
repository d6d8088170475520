//! Settings and bounds of the RTSP side ([`RtspConfig`]) and the overload policy
//! ([`Overload`]): what the server's configuration gives the RTSP core. Owns the values and their
//! defaults, not their parsing (the server's) nor their use.

use std::time::Duration;

use sluice_proto::rtsp::Limits;

/// What the server does when one more viewer would take more than the RTSP loop has left.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overload {
    /// Answer the newcomer's `SETUP` (or first `PLAY`) with 453 Not Enough Bandwidth, so the
    /// viewers already playing keep every packet.
    Refuse,
    /// Admit everyone up to [`RtspConfig::max_viewers`]; when the loop falls behind, every late
    /// viewer drops whole frames up to its next keyframe, so the loss is shared evenly. The
    /// default: admission by load is a choice of the operator's (a debug build or a busy machine
    /// makes the loop look loaded).
    #[default]
    Degrade,
}

/// Settings and bounds of the RTSP side.
#[derive(Debug, Clone)]
pub struct RtspConfig {
    /// A session without a request (or RTCP report) for this long is released; the `Session`
    /// header tells clients (RFC 2326 §12.37).
    pub session_timeout: Duration,
    /// Size limits of one request.
    pub limits: Limits,
    /// Requests answered per [`RtspConnection::receive`](super::RtspConnection::receive) call; the rest wait until the engine
    /// has written the replies and calls again, so a pipelining client cannot queue unbounded
    /// replies.
    pub max_pipelined: usize,
    /// Sessions one connection may hold.
    pub max_sessions_per_connection: usize,
    /// Sessions in the table in all.
    pub max_sessions: usize,
    /// Sessions one client address may hold (0: no limit); one more is refused with 503. A
    /// client's connections all meet on one loop (they are spread by address), so the loop's
    /// table counts them all.
    pub max_sessions_per_ip: usize,
    /// Tracks one session may set up.
    pub max_tracks_per_session: usize,
    /// The server's RTP and RTCP UDP ports (the engine's shared sockets), `None` to refuse UDP
    /// with 461 so clients fall back to TCP.
    pub udp_server_ports: Option<(u16, u16)>,
    /// Largest RTP payload (the path MTU minus IP, UDP and RTP headers).
    pub max_payload: usize,
    /// Whether each answered request is recorded in [`Output::access`](super::Output::access) for the access log.
    pub access_log: bool,
    /// Viewers (sessions) served at once at most: one more is answered 453, whatever the load.
    pub max_viewers: usize,
    /// What to do when the loop's headroom runs out.
    pub overload: Overload,
    /// A publisher that sends nothing for this long is dropped, and its viewers get the end of
    /// the stream.
    pub publish_stall: Duration,
}

impl Default for RtspConfig {
    fn default() -> Self {
        RtspConfig {
            session_timeout: Duration::from_secs(60),
            limits: Limits::default(),
            max_pipelined: 16,
            max_sessions_per_connection: 8,
            max_sessions: 10_000,
            max_sessions_per_ip: 0,
            max_tracks_per_session: 8,
            udp_server_ports: Some((6970, 6971)),
            max_payload: 1400,
            access_log: false,
            max_viewers: 10_000,
            overload: Overload::Degrade,
            publish_stall: Duration::from_secs(10),
        }
    }
}
