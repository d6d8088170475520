//! Building RTSP responses.
//!
//! This module owns the headers sluice puts on responses: the echoed `CSeq` (every response, so a
//! client can match it), `Session` with its timeout, the chosen `Transport`, `RTP-Info` and
//! `Range` after `PLAY`, `Public` for `OPTIONS`, bodies with their length and type. The message
//! is an `rtsp-types` response and is serialized by it. Which status to answer is the session's
//! decision, not this module's.

use std::time::Duration;

use rtsp_types::headers::{
    self, NptRange, NptTime, RtpInfos, RtpLowerTransport, RtpProfile, RtpTransport, RtpTransportParameters,
    Transport, Transports,
};
use rtsp_types::{Method, Response, StatusCode, Url, Version};

use super::{RtspError, TransportSpec};

/// What the server sends back about one stream of a `PLAY` (one entry of `RTP-Info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtpInfoEntry {
    /// The stream's URL (the one its `SETUP` used).
    pub url: Url,
    /// Sequence number of the first packet sent after the `PLAY`.
    pub seq: u16,
    /// RTP timestamp of the `Range` start.
    pub rtptime: u32,
}

/// A response under construction, and the header lines that repeat a name already set
/// (`rtsp-types` keeps one value per name).
#[derive(Debug, Clone)]
pub struct Reply(Response<Vec<u8>>, Vec<String>);

impl Reply {
    /// The status code, for the access log.
    pub fn status(&self) -> u16 {
        u16::from(self.0.status())
    }

    /// A header's value, for the access log.
    pub fn header_value(&self, name: &headers::HeaderName) -> Option<&rtsp_types::HeaderValue> {
        self.0.header(name)
    }

    /// A response with `status`, echoing `cseq` (absent only when the request had none).
    pub fn new(status: StatusCode, cseq: Option<u32>) -> Reply {
        let mut builder = Response::builder(Version::V1_0, status).header(headers::SERVER, "sluice");
        if status == StatusCode::Ok {
            // rtsp-types would write "Ok"; RFC 2326 §7.1.1 spells it "OK", and so do clients' logs.
            builder = builder.reason_phrase("OK");
        }
        if let Some(cseq) = cseq {
            builder = builder.header(headers::CSEQ, cseq.to_string());
        }
        Reply(builder.build(Vec::new()), Vec::new())
    }

    /// The response to a refused request; asks the client to close when framing was lost.
    pub fn error(error: &RtspError, cseq: Option<u32>) -> Reply {
        let reply = Reply::new(error.status(), cseq);
        if error.closes_connection() {
            reply.header(headers::CONNECTION, "close")
        } else {
            reply
        }
    }

    /// Sets a header.
    pub fn header(mut self, name: headers::HeaderName, value: impl Into<String>) -> Reply {
        self.0.insert_header(name, value.into());
        self
    }

    /// One more `name: value` line beside the header of that name already set: each challenge
    /// of a 401 on a line of its own (`WWW-Authenticate: Digest …` and `… Basic …`), as clients
    /// read them.
    pub fn another_header(mut self, name: headers::HeaderName, value: impl Into<String>) -> Reply {
        self.1.push(format!("{}: {}\r\n", name.as_str(), value.into()));
        self
    }

    /// `Session: <id>;timeout=<secs>`: the client must send a request within the timeout.
    pub fn session(mut self, id: &str, timeout: Duration) -> Reply {
        self.0.insert_typed_header(&headers::Session::with_timeout(id.to_string(), timeout.as_secs()));
        self
    }

    /// `Public:` listing the methods the server supports (the answer to `OPTIONS`).
    pub fn public(self, methods: &[Method]) -> Reply {
        let list: Vec<&str> = methods.iter().map(<&str>::from).collect();
        self.header(headers::PUBLIC, list.join(", "))
    }

    /// `Transport:` the client's choice confirmed, with the server's ports (UDP) and the SSRC.
    pub fn transport(mut self, spec: &TransportSpec, server_ports: Option<(u16, u16)>, ssrc: u32) -> Reply {
        let mut params = RtpTransportParameters { unicast: true, ssrc: vec![ssrc], ..Default::default() };
        let lower = match *spec {
            TransportSpec::Udp { client_rtp, client_rtcp } => {
                params.client_port = Some((client_rtp, Some(client_rtcp)));
                params.server_port = server_ports.map(|(rtp, rtcp)| (rtp, Some(rtcp)));
                None
            }
            TransportSpec::Interleaved { channels } => {
                params.interleaved = channels.map(|(rtp, rtcp)| (rtp, Some(rtcp)));
                Some(RtpLowerTransport::Tcp)
            }
        };
        let transport = RtpTransport { profile: RtpProfile::Avp, lower_transport: lower, params };
        self.0.insert_typed_header(&Transports::from(vec![Transport::Rtp(transport)]));
        self
    }

    /// `RTP-Info:` where each stream resumes after a `PLAY`.
    pub fn rtp_info(mut self, entries: &[RtpInfoEntry]) -> Reply {
        let infos = entries
            .iter()
            .map(|e| headers::rtp_info::v1::RtpInfo {
                uri: e.url.clone(),
                seq: Some(e.seq),
                rtptime: Some(e.rtptime),
            })
            .collect();
        self.0.insert_typed_header(&RtpInfos::V1(infos));
        self
    }

    /// `Range: npt=<start>-[<end>]`: the part of the presentation a `PLAY` will send.
    pub fn range(mut self, start: Duration, end: Option<Duration>) -> Reply {
        let npt = |d: Duration| NptTime::Seconds(d.as_secs(), Some(d.subsec_nanos()));
        let range = match end {
            Some(end) => NptRange::FromTo(npt(start), npt(end)),
            None => NptRange::From(npt(start)),
        };
        self.0.insert_typed_header(&headers::Range::Npt(range));
        self
    }

    /// A body of `content_type` (e.g. `application/sdp` for `DESCRIBE`), with its length.
    pub fn body(self, content_type: &str, body: Vec<u8>) -> Reply {
        let len = body.len();
        let mut response = self.0.replace_body(body);
        response.insert_header(headers::CONTENT_TYPE, content_type.to_string());
        response.insert_header(headers::CONTENT_LENGTH, len.to_string());
        Reply(response, self.1)
    }

    /// The response as `rtsp-types` holds it.
    pub fn response(&self) -> &Response<Vec<u8>> {
        &self.0
    }

    /// Appends the serialized response to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        let start = out.len();
        self.0.write(out).expect("writing into a Vec cannot fail");
        if self.1.is_empty() {
            return;
        }
        if let Some(end) = out[start..].windows(4).position(|w| w == b"\r\n\r\n") {
            let at = start + end + 2;
            let lines = self.1.concat().into_bytes();
            out.splice(at..at, lines);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(reply: &Reply) -> String {
        let mut out = Vec::new();
        reply.write(&mut out);
        String::from_utf8(out).unwrap()
    }

    fn parse(reply: &Reply) -> Response<Vec<u8>> {
        let mut out = Vec::new();
        reply.write(&mut out);
        match rtsp_types::Message::<Vec<u8>>::parse(&out).unwrap() {
            (rtsp_types::Message::Response(r), n) if n == out.len() => r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn setup_reply_over_udp_and_tcp() {
        let udp = TransportSpec::Udp { client_rtp: 5000, client_rtcp: 5001 };
        let reply = Reply::new(StatusCode::Ok, Some(3)).session("a1b2c3", Duration::from_secs(60)).transport(
            &udp,
            Some((6970, 6971)),
            0xdeadbeef,
        );
        let t = text(&reply);
        assert!(t.starts_with("RTSP/1.0 200 OK\r\n"), "{t}");
        assert!(t.contains("CSeq: 3\r\n"), "{t}");
        assert!(t.contains("Session: a1b2c3;timeout=60\r\n"), "{t}");
        assert!(
            t.contains(
                "Transport: RTP/AVP;unicast;ssrc=DEADBEEF;client_port=5000-5001;server_port=6970-6971\r\n"
            ),
            "{t}"
        );
        // The typed header reads back as what the client asked for.
        let r = parse(&reply);
        let back = r.typed_header::<Transports>().unwrap().unwrap();
        let Transport::Rtp(rtp) = &back[0] else { panic!() };
        assert_eq!(rtp.params.client_port, Some((5000, Some(5001))));

        let tcp = TransportSpec::Interleaved { channels: Some((0, 1)) };
        let t = text(&Reply::new(StatusCode::Ok, Some(4)).transport(&tcp, None, 1));
        assert!(t.contains("Transport: RTP/AVP/TCP;unicast;interleaved=0-1;ssrc=00000001\r\n"), "{t}");
    }

    #[test]
    fn play_reply_with_rtp_info_and_range() {
        let url = Url::parse("rtsp://127.0.0.1:8554/a.mp4/trackID=0").unwrap();
        let reply = Reply::new(StatusCode::Ok, Some(5))
            .range(Duration::from_millis(2500), Some(Duration::from_secs(6)))
            .rtp_info(&[RtpInfoEntry { url, seq: 17, rtptime: 90_000 }]);
        let t = text(&reply);
        assert!(t.contains("Range: npt=2.500000000-6.000000000\r\n"), "{t}");
        assert!(
            t.contains("RTP-Info: url=rtsp://127.0.0.1:8554/a.mp4/trackID=0;seq=17;rtptime=90000\r\n"),
            "{t}"
        );
    }

    #[test]
    fn describe_body_and_options() {
        let reply = Reply::new(StatusCode::Ok, Some(2)).body("application/sdp", b"v=0\r\n".to_vec());
        let r = parse(&reply);
        assert_eq!(r.body().as_slice(), b"v=0\r\n");
        assert_eq!(r.header(&headers::CONTENT_TYPE).unwrap().as_str(), "application/sdp");
        let t = text(&Reply::new(StatusCode::Ok, Some(1)).public(&[Method::Options, Method::Describe]));
        assert!(t.contains("Public: OPTIONS, DESCRIBE\r\n"), "{t}");
    }

    #[test]
    fn error_replies() {
        let t = text(&Reply::error(&RtspError::UnsupportedTransport, Some(9)));
        assert!(t.starts_with("RTSP/1.0 461 "), "{t}");
        assert!(t.contains("CSeq: 9\r\n") && !t.contains("Connection"), "{t}");
        let t = text(&Reply::error(&RtspError::HeadTooLarge { limit: 1 }, None));
        assert!(
            t.starts_with("RTSP/1.0 400 ") && t.contains("Connection: close\r\n") && !t.contains("CSeq"),
            "{t}"
        );
        let t = text(&Reply::error(&RtspError::SessionNotFound, Some(1)));
        assert!(t.starts_with("RTSP/1.0 454 "), "{t}");
    }

    #[test]
    fn another_header_adds_a_line_of_the_same_name_before_the_body() {
        let reply = Reply::new(StatusCode::Unauthorized, Some(2))
            .header(headers::WWW_AUTHENTICATE, "Digest realm=\"sluice\", nonce=\"n\"")
            .another_header(headers::WWW_AUTHENTICATE, "Basic realm=\"sluice\"");
        let text = text(&reply);
        let head = text.split("\r\n\r\n").next().unwrap();
        let lines: Vec<&str> = head.lines().filter(|l| l.starts_with("WWW-Authenticate: ")).collect();
        assert_eq!(
            lines,
            [
                "WWW-Authenticate: Digest realm=\"sluice\", nonce=\"n\"",
                "WWW-Authenticate: Basic realm=\"sluice\""
            ],
            "{text}"
        );
        assert!(text.ends_with("\r\n\r\n"), "{text}");
    }
}
