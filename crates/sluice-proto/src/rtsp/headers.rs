//! The request headers a streaming server acts on: `CSeq`, `Session`, `Transport`, `Range`.
//!
//! This module owns what those headers *mean* for sluice: which transports it accepts (RTP/AVP
//! unicast over UDP with client ports, RTP/AVP/TCP interleaved; everything else is 461), and
//! which ranges (`npt` from a position, optionally to an end, or `now`; other units are 457).
//! The syntax is parsed by `rtsp-types`' typed headers.

use std::time::Duration;

use rtsp_types::headers::{self, TypedHeader};
use rtsp_types::headers::{
    NptRange, NptTime, RtpLowerTransport, RtpProfile, Transport, TransportMode, Transports,
};
use rtsp_types::Request;

use super::RtspError;

/// The transport a client asked for in `SETUP`, one sluice can serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportSpec {
    /// RTP/AVP unicast over UDP to the client's ports.
    Udp {
        /// Client port for RTP.
        client_rtp: u16,
        /// Client port for RTCP (RTP port + 1 when the client named one port).
        client_rtcp: u16,
    },
    /// RTP/AVP/TCP: packets interleaved on the RTSP connection.
    Interleaved {
        /// Channels the client asked for (RTP, RTCP); `None` lets the server choose.
        channels: Option<(u8, u8)>,
    },
}

/// The request's `CSeq`, which every response echoes.
pub fn cseq<B>(request: &Request<B>) -> Result<u32, RtspError> {
    let value = request.header(&headers::CSEQ).ok_or(RtspError::MissingHeader("CSeq"))?;
    value.as_str().trim().parse().map_err(|_| RtspError::BadHeader("CSeq"))
}

/// The session id of the request's `Session` header (without `;timeout=`), if any.
pub fn session_id<B>(request: &Request<B>) -> Result<Option<&str>, RtspError> {
    let Some(value) = request.header(&headers::SESSION) else { return Ok(None) };
    let id = value.as_str().split(';').next().unwrap_or("").trim();
    if id.is_empty() {
        return Err(RtspError::BadHeader("Session"));
    }
    Ok(Some(id))
}

fn typed<H: TypedHeader, B: AsRef<[u8]>>(
    request: &Request<B>,
    name: &'static str,
) -> Result<Option<H>, RtspError> {
    request.typed_header::<H>().map_err(|_| RtspError::BadHeader(name))
}

/// The first transport in the request's `Transport` header that sluice serves.
///
/// A missing header is 400; a header offering nothing sluice serves (multicast, RECORD, SAVP,
/// raw UDP, UDP without client ports, or syntax `rtsp-types` cannot read) is 461 so the client
/// can retry with another transport, as ffmpeg does from UDP to TCP.
pub fn parse_transport<B: AsRef<[u8]>>(request: &Request<B>) -> Result<TransportSpec, RtspError> {
    first_supported(request, false)
}

/// The first transport in a publisher's `Transport` header (`mode=record`, RFC 2326 §12.39)
/// that sluice takes in: RTP/AVP over UDP or RTP/AVP/TCP interleaved. 461 when none is, or when
/// the header does not say `mode=record`.
pub fn parse_record_transport<B: AsRef<[u8]>>(request: &Request<B>) -> Result<TransportSpec, RtspError> {
    first_supported(request, true)
}

/// The first transport of the request's `Transport` header that [`supported`] takes for playing
/// or, with `record`, for publishing; 400 without the header, 461 when none is taken.
fn first_supported<B: AsRef<[u8]>>(request: &Request<B>, record: bool) -> Result<TransportSpec, RtspError> {
    if request.header(&headers::TRANSPORT).is_none() {
        return Err(RtspError::MissingHeader("Transport"));
    }
    let transports =
        typed::<Transports, B>(request, "Transport").map_err(|_| RtspError::UnsupportedTransport)?;
    transports
        .iter()
        .flat_map(|t| t.iter())
        .find_map(|t| supported(t, record))
        .ok_or(RtspError::UnsupportedTransport)
}

fn supported(transport: &Transport, record: bool) -> Option<TransportSpec> {
    let Transport::Rtp(rtp) = transport else { return None };
    let p = &rtp.params;
    let fits = match record {
        true => !p.mode.is_empty() && p.mode.iter().all(|m| *m == TransportMode::Record),
        false => p.mode.is_empty() || p.mode.iter().all(|m| *m == TransportMode::Play),
    };
    if rtp.profile != RtpProfile::Avp || p.multicast || !fits {
        return None;
    }
    let pair = |(a, b): (u16, Option<u16>)| Some((a, b.unwrap_or(a.checked_add(1)?)));
    match rtp.lower_transport {
        None | Some(RtpLowerTransport::Udp) => {
            let (client_rtp, client_rtcp) = pair(p.client_port?)?;
            (client_rtp != 0 && client_rtcp != 0).then_some(TransportSpec::Udp { client_rtp, client_rtcp })
        }
        Some(RtpLowerTransport::Tcp) => {
            let channels = match p.interleaved {
                None => None,
                Some((a, b)) => Some((a, b.unwrap_or(a.checked_add(1)?))),
            };
            Some(TransportSpec::Interleaved { channels })
        }
        Some(RtpLowerTransport::Other(_)) => None,
    }
}

/// Where a `PLAY` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NptStart {
    /// `now`, or no start given: resume where the stream is (the start for a new stream).
    Now,
    /// A position in the presentation.
    At(Duration),
}

/// A `PLAY` request's `Range: npt=`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlayRange {
    /// Where to start.
    pub start: NptStart,
    /// Where to stop, if given.
    pub end: Option<Duration>,
}

/// The request's `Range` header, if any. Units other than `npt` are 457 (sluice serves files,
/// which have no SMPTE time code or wall-clock times); unreadable syntax is 400.
pub fn parse_range<B: AsRef<[u8]>>(request: &Request<B>) -> Result<Option<PlayRange>, RtspError> {
    let Some(raw) = request.header(&headers::RANGE) else { return Ok(None) };
    if !raw.as_str().trim_start().starts_with("npt") {
        // Decided before parsing: an SMPTE or clock range rtsp-types cannot read is still a
        // well-formed request for a unit sluice does not serve.
        return Err(RtspError::InvalidRange);
    }
    let Some(range) = typed::<headers::Range, B>(request, "Range")? else { return Ok(None) };
    let headers::Range::Npt(npt) = range else { return Err(RtspError::InvalidRange) };
    let (start, end) = match npt {
        NptRange::Empty => (NptTime::Now, None),
        NptRange::From(start) => (start, None),
        NptRange::FromTo(start, end) => (start, Some(end)),
        NptRange::To(end) => (NptTime::Now, Some(end)),
    };
    let start = match start {
        NptTime::Now => NptStart::Now,
        t => NptStart::At(npt_duration(t)?),
    };
    let end = match end {
        None => None,
        Some(NptTime::Now) => return Err(RtspError::InvalidRange),
        Some(t) => Some(npt_duration(t)?),
    };
    if let (NptStart::At(s), Some(e)) = (start, end) {
        if e < s {
            return Err(RtspError::InvalidRange);
        }
    }
    Ok(Some(PlayRange { start, end }))
}

fn npt_duration(t: NptTime) -> Result<Duration, RtspError> {
    let (secs, nanos) = match t {
        NptTime::Now => return Err(RtspError::InvalidRange),
        NptTime::Seconds(s, n) => (Some(s), n),
        NptTime::Hms(h, m, s, n) => {
            if m >= 60 || s >= 60 {
                return Err(RtspError::InvalidRange);
            }
            (h.checked_mul(3600).and_then(|h| h.checked_add(u64::from(m) * 60 + u64::from(s))), n)
        }
    };
    let secs = secs.ok_or(RtspError::InvalidRange)?;
    Ok(Duration::new(secs, nanos.unwrap_or(0).min(999_999_999)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtsp::request::{read_message, Limits, Message};

    fn request(extra: &str) -> Request<Vec<u8>> {
        let text = format!("SETUP rtsp://127.0.0.1:8554/a.mp4/trackID=0 RTSP/1.0\r\nCSeq: 7\r\n{extra}\r\n");
        match read_message(text.as_bytes(), &Limits::default()) {
            Ok(Message::Complete(r, _)) => r,
            other => panic!("{other:?}"),
        }
    }

    fn transport(value: &str) -> Result<TransportSpec, RtspError> {
        parse_transport(&request(&format!("Transport: {value}\r\n")))
    }

    #[test]
    fn cseq_and_session() {
        let r = request("Session: 12345678;timeout=60\r\n");
        assert_eq!(cseq(&r), Ok(7));
        assert_eq!(session_id(&r), Ok(Some("12345678")));
        assert_eq!(session_id(&request("")), Ok(None));
        assert_eq!(session_id(&request("Session: ;timeout=1\r\n")), Err(RtspError::BadHeader("Session")));
        let no_cseq = match read_message(b"OPTIONS * RTSP/1.0\r\n\r\n", &Limits::default()) {
            Ok(Message::Complete(r, _)) => r,
            other => panic!("{other:?}"),
        };
        assert_eq!(cseq(&no_cseq), Err(RtspError::MissingHeader("CSeq")));
    }

    #[test]
    fn transports_sluice_serves() {
        assert_eq!(
            transport("RTP/AVP;unicast;client_port=5000-5001"),
            Ok(TransportSpec::Udp { client_rtp: 5000, client_rtcp: 5001 })
        );
        assert_eq!(
            transport("RTP/AVP/UDP;unicast;client_port=6000"),
            Ok(TransportSpec::Udp { client_rtp: 6000, client_rtcp: 6001 })
        );
        assert_eq!(
            transport("RTP/AVP/TCP;unicast;interleaved=2-3"),
            Ok(TransportSpec::Interleaved { channels: Some((2, 3)) })
        );
        assert_eq!(transport("RTP/AVP/TCP;unicast"), Ok(TransportSpec::Interleaved { channels: None }));
        // The first acceptable one of several.
        assert_eq!(
            transport("RTP/AVP;multicast,RTP/AVP;unicast;client_port=7000-7001"),
            Ok(TransportSpec::Udp { client_rtp: 7000, client_rtcp: 7001 })
        );
    }

    #[test]
    fn other_transports_are_461() {
        for t in [
            "RTP/AVP;multicast",
            "RTP/AVP;unicast",
            "RTP/SAVP;unicast;client_port=5000-5001",
            "RTP/AVP;unicast;client_port=5000-5001;mode=record",
            "RTP/AVP;unicast;client_port=65535",
            "RTP/AVP;unicast;client_port=0-1",
            "RAW/RAW/UDP;unicast;client_port=5000",
            "garbage",
        ] {
            assert_eq!(transport(t), Err(RtspError::UnsupportedTransport), "{t}");
        }
        assert_eq!(parse_transport(&request("")), Err(RtspError::MissingHeader("Transport")));
    }

    fn range(value: &str) -> Result<Option<PlayRange>, RtspError> {
        parse_range(&request(&format!("Range: {value}\r\n")))
    }

    #[test]
    fn npt_ranges() {
        let secs = Duration::from_secs;
        assert_eq!(parse_range(&request("")), Ok(None));
        assert_eq!(range("npt=0-"), Ok(Some(PlayRange { start: NptStart::At(secs(0)), end: None })));
        assert_eq!(
            range("npt=2.5-4"),
            Ok(Some(PlayRange { start: NptStart::At(Duration::from_millis(2500)), end: Some(secs(4)) }))
        );
        assert_eq!(range("npt=now-"), Ok(Some(PlayRange { start: NptStart::Now, end: None })));
        assert_eq!(
            range("npt=01:02:03-"),
            Ok(Some(PlayRange { start: NptStart::At(secs(3723)), end: None }))
        );
        assert_eq!(range("npt=4-2"), Err(RtspError::InvalidRange));
        assert_eq!(range("npt=0:61:00-"), Err(RtspError::InvalidRange));
        assert_eq!(range("smpte=0:10:00-"), Err(RtspError::InvalidRange));
        assert_eq!(range("clock=19961108T142300Z-"), Err(RtspError::InvalidRange));
        assert_eq!(range("npt=abc"), Err(RtspError::BadHeader("Range")));
        assert_eq!(range("npt=18446744073709551615:00:00-"), Err(RtspError::InvalidRange));
    }
}
