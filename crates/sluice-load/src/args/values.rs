//! How the library's option types are spelled on the command line, and what `--help` says of
//! each spelling: clap's [`ValueEnum`] for [`Method`], [`ConnectionMode`], [`Pacing`] and
//! [`RtspTransport`], so the flags parse straight into them (no mirror enums). It parses
//! nothing else.

use clap::builder::PossibleValue;
use clap::ValueEnum;

use crate::player::Pacing;
use crate::rtsp::RtspTransport;
use crate::{ConnectionMode, Method};

impl ValueEnum for Method {
    fn value_variants<'a>() -> &'a [Self] {
        &[Method::Get, Method::Head]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            Method::Get => "get",
            Method::Head => "head",
        }))
    }
}

impl ValueEnum for ConnectionMode {
    fn value_variants<'a>() -> &'a [Self] {
        &[ConnectionMode::KeepAlive, ConnectionMode::PerRequest]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            ConnectionMode::KeepAlive => PossibleValue::new("keep-alive").help(
                "Reuse connections (closed: one per virtual user; open: a shared pool of --max-connections)",
            ),
            ConnectionMode::PerRequest => {
                PossibleValue::new("per-request").help("A new connection for every request")
            }
        })
    }
}

impl ValueEnum for Pacing {
    fn value_variants<'a>() -> &'a [Self] {
        &[Pacing::RealTime, Pacing::Fast]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            Pacing::RealTime => PossibleValue::new("realtime")
                .help("As a player: a start-up buffer, then each segment as the playhead nears it"),
            Pacing::Fast => {
                PossibleValue::new("fast").help("Every segment as soon as the previous one arrived")
            }
        })
    }
}

impl ValueEnum for RtspTransport {
    fn value_variants<'a>() -> &'a [Self] {
        &[RtspTransport::Tcp, RtspTransport::Udp]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(match self {
            RtspTransport::Tcp => {
                PossibleValue::new("tcp").help("RTP/AVP/TCP interleaved on the RTSP connection")
            }
            RtspTransport::Udp => PossibleValue::new("udp").help("RTP/AVP over UDP unicast"),
        })
    }
}
