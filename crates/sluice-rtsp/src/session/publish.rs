//! A connection that publishes (`ANNOUNCE`, `SETUP` with `mode=record`, `RECORD`, `TEARDOWN`),
//! and how a viewer's request finds a live path rather than a file.
//!
//! It owns the publisher's side of the exchange: the `ANNOUNCE` takes the path in the server's
//! [`LiveRegistry`] (409 when it has a publisher, 415 for a codec sluice does not take in), each
//! `SETUP` binds a track to a pair of interleaved channels, or over UDP to the address the
//! publisher sends from (to the loop's RTP port, which the reply names), `RECORD` starts taking
//! the RTP the publisher sends on them into the [`LiveStream`], and a `TEARDOWN` or the connection's end frees the path (its viewers end
//! after what they have not sent). A publisher silent for the stall deadline is dropped by the
//! connection's idle deadline ([`RtspConnection::deadline`]). Authorising the `ANNOUNCE` is the
//! [`Catalogue`]'s, asked as for a `DESCRIBE`, with the method named.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use rtsp_types::headers;
use sluice_proto::rtsp::{parse_record_transport, session_id, Reply, RtspError, StatusCode, TransportSpec};

use super::{split_url, Catalogue, Exchange, RtspConnection};
use crate::live::{tracks_from_sdp, AnnounceError, LiveStream, Taken};
use crate::playable::{Refusal, REASON_HEADER};
use crate::table::SessionId;
use sluice_media::mp4::Mp4File;

/// What one connection publishes.
#[derive(Debug)]
pub(super) struct Publishing {
    stream: Arc<LiveStream>,
    /// Per track, the absolute URL its `SETUP` names (its `a=control` against the `ANNOUNCE`'s).
    controls: Vec<String>,
    /// Interleaved RTP channel of each track set up over TCP.
    channels: Vec<(u8, usize)>,
    /// Where each track set up over UDP sends its RTP from.
    sources: Vec<(SocketAddr, usize)>,
    session: SessionId,
    recording: bool,
    /// RTP came since `RECORD`.
    flowing: bool,
}

impl Publishing {
    /// Whether its media flows (RTP came since `RECORD`).
    pub(super) fn is_taken_over(&self) -> bool {
        self.stream.has_ended()
    }

    pub(super) fn is_flowing(&self) -> bool {
        self.flowing
    }
}

/// The presentation at `path` for a viewer: a live path's table as it stands (held, as a file
/// still warming is, until the publisher's first keyframe has come), else the catalogue's file.
#[allow(clippy::type_complexity)]
pub(super) fn open_presentation(
    x: &mut Exchange<'_>,
    path: &str,
) -> Result<(Arc<Mp4File>, Option<(Arc<LiveStream>, Vec<u64>)>), Refusal> {
    if let Some(registry) = x.catalogue.live().filter(|r| r.is_live_path(path)) {
        return match registry.get(path) {
            Some(stream) if stream.is_ready() => {
                let snapshot = stream.snapshot();
                Ok((snapshot.file, Some((stream, snapshot.dropped))))
            }
            Some(_) => Err(Refusal::Warming),
            None => Err(Refusal::NotFound),
        };
    }
    x.catalogue.open_playable(path).map(|file| (file, None))
}

/// `url` without its query, as track URLs are compared.
fn unsigned(url: &rtsp_types::Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.to_string().trim_end_matches('/').to_string()
}

fn with_reason(status: u16, cseq: u32, reason: &str) -> Reply {
    let header = headers::HeaderName::from_static_str(REASON_HEADER).expect("an ASCII header name");
    let line: String = reason.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    Reply::new(StatusCode::from(status), Some(cseq)).header(header, line)
}

impl RtspConnection {
    /// Whether a `SETUP` is a publisher's (`mode=record` on a connection that announced).
    pub(super) fn is_publishing_setup(&self, x: &Exchange<'_>) -> bool {
        self.publishing.is_some()
            && x.request
                .header(&headers::TRANSPORT)
                .is_some_and(|t| t.as_str().to_ascii_lowercase().contains("mode=record"))
    }

    /// Whether a `TEARDOWN` names this connection's publishing session.
    pub(super) fn is_publishing_teardown(&self, x: &Exchange<'_>) -> bool {
        let named = session_id(x.request).ok().flatten().and_then(SessionId::parse);
        self.publishing.as_ref().is_some_and(|p| Some(p.session) == named)
    }

    pub(super) fn announce(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        let registry = x.catalogue.live().ok_or(RtspError::NotImplemented)?;
        let url = x.request.request_uri().ok_or(RtspError::NotFound)?;
        let (path, track) = split_url(url);
        if track.is_some() || !registry.is_live_path(&path) {
            return Ok(with_reason(403, x.cseq, &format!("{path} is not a live path")));
        }
        if self.publishing.is_some() {
            return Err(RtspError::MethodNotValidInState);
        }
        let tracks = match tracks_from_sdp(x.request.body()) {
            Ok(tracks) => tracks,
            Err(AnnounceError::BadSdp) => return Ok(with_reason(400, x.cseq, "the SDP does not parse")),
            Err(AnnounceError::Unsupported(why)) => return Ok(with_reason(415, x.cseq, &why)),
        };
        let base = unsigned(url);
        let controls = tracks
            .iter()
            .enumerate()
            .map(|(i, t)| match t.control.as_str() {
                c if c.starts_with("rtsp://") || c.starts_with("rtsps://") => {
                    c.trim_end_matches('/').to_string()
                }
                "" | "*" if tracks.len() == 1 => base.clone(),
                "" | "*" => format!("{base}/trackID={i}"),
                c => format!("{base}/{c}"),
            })
            .collect();
        let stream = match registry.publish(&path, self.peer, tracks, x.now) {
            Ok(stream) => stream,
            Err(Taken) => return Ok(with_reason(409, x.cseq, &format!("{path} has a publisher already"))),
        };
        let session = x.table.new_id();
        self.publishing = Some(Publishing {
            stream,
            controls,
            channels: Vec::new(),
            sources: Vec::new(),
            session,
            recording: false,
            flowing: false,
        });
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq)))
    }

    pub(super) fn setup_record(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        let timeout = x.table.config.session_timeout;
        let p = self.publishing.as_mut().ok_or(RtspError::MethodNotValidInState)?;
        if let Some(named) = session_id(x.request)? {
            if SessionId::parse(named) != Some(p.session) {
                return Err(RtspError::SessionNotFound);
            }
        }
        let url = unsigned(x.request.request_uri().ok_or(RtspError::NotFound)?);
        let track = p.controls.iter().position(|c| *c == url).ok_or(RtspError::NotFound)?;
        p.channels.retain(|(_, t)| *t != track);
        p.sources.retain(|(_, t)| *t != track);
        let wanted = match parse_record_transport(x.request)? {
            TransportSpec::Interleaved { channels } => channels,
            TransportSpec::Udp { client_rtp, client_rtcp } => {
                // RTP to the server's RTP port (the loop's own, which this connection is on).
                let (rtp, rtcp) = x.table.config.udp_server_ports.ok_or(RtspError::UnsupportedTransport)?;
                p.sources.push((SocketAddr::new(self.peer.ip(), client_rtp), track));
                return Ok(Reply::new(StatusCode::Ok, Some(x.cseq)).session(&p.session.to_string(), timeout).header(
                    headers::TRANSPORT,
                    format!(
                        "RTP/AVP;unicast;client_port={client_rtp}-{client_rtcp};server_port={rtp}-{rtcp};mode=record"
                    ),
                ));
            }
        };
        let used = |c: u8| p.channels.iter().any(|(rtp, _)| *rtp == c || rtp + 1 == c);
        let (rtp, rtcp) = match wanted {
            Some((a, b)) if b == a.wrapping_add(1) && !used(a) && !used(b) => (a, b),
            _ => {
                (0..=254u8).step_by(2).find(|c| !used(*c)).map(|c| (c, c + 1)).ok_or(RtspError::Overloaded)?
            }
        };
        p.channels.push((rtp, track));
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq))
            .session(&p.session.to_string(), timeout)
            .header(headers::TRANSPORT, format!("RTP/AVP/TCP;unicast;interleaved={rtp}-{rtcp};mode=record")))
    }

    pub(super) fn record(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        x.catalogue.live().ok_or(RtspError::NotImplemented)?;
        let timeout = x.table.config.session_timeout;
        let named = session_id(x.request)?.ok_or(RtspError::MethodNotValidInState)?;
        let p = self.publishing.as_mut().ok_or(RtspError::MethodNotValidInState)?;
        if SessionId::parse(named) != Some(p.session) {
            return Err(RtspError::SessionNotFound);
        }
        if p.channels.is_empty() && p.sources.is_empty() {
            return Err(RtspError::MethodNotValidInState);
        }
        p.recording = true;
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq)).session(&p.session.to_string(), timeout))
    }

    pub(super) fn stop_publishing(&mut self, x: &mut Exchange<'_>) -> Result<Reply, RtspError> {
        self.end_publishing(x.catalogue);
        Ok(Reply::new(StatusCode::Ok, Some(x.cseq)))
    }

    /// Ends what this connection publishes, if anything: the path is free again and its
    /// viewers end after what they have not sent. Called at `TEARDOWN` and when the connection
    /// goes (closed by the publisher, or dropped at the stall deadline).
    pub fn end_publishing(&mut self, catalogue: &dyn Catalogue) {
        if let Some(p) = self.publishing.take() {
            if let Some(registry) = catalogue.live() {
                registry.end(&p.stream);
            }
        }
    }

    /// Whether this connection publishes (it announced a live path).
    pub fn is_publishing(&self) -> bool {
        self.publishing.is_some()
    }

    /// Takes a datagram from `from` that arrived at `now` on the server's RTP port: RTP of a
    /// track this connection records over UDP from there goes into its stream, and keeps the
    /// publisher from its stall deadline. Returns whether it was this connection's.
    pub(crate) fn published_datagram(&mut self, from: SocketAddr, packet: &[u8], now: Instant) -> bool {
        let Some(p) = &mut self.publishing else { return false };
        let Some(&(_, track)) = p.sources.iter().find(|(source, _)| *source == from) else { return false };
        if p.recording {
            p.stream.push_rtp(track, packet, now);
            p.flowing = true;
            self.last_activity = now;
        }
        true
    }

    /// Takes an interleaved frame that arrived at `now`: RTP on a recording publisher's channel
    /// goes into its stream. Returns whether the connection publishes (a publisher's frames
    /// are its own, not a viewer's RTCP).
    pub(super) fn published(&mut self, channel: u8, payload: &[u8], now: Instant) -> bool {
        let Some(p) = &mut self.publishing else { return false };
        if p.recording {
            if let Some(&(_, track)) = p.channels.iter().find(|(rtp, _)| *rtp == channel) {
                p.stream.push_rtp(track, payload, now);
                p.flowing = true;
            }
        }
        true
    }
}
