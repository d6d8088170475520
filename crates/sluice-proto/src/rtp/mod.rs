//! RTP packetization of media samples, and the reverse.
//!
//! This module owns the bytes of RTP (RFC 3550) and RTCP sender reports: turning one H.264 access
//! unit (RFC 6184), H.265 access unit (RFC 7798), AAC frame (RFC 3640, AAC-hbr), Opus packet (RFC 7587)
//! AC-3 frame (RFC 4184) or E-AC-3 frame (RFC 4598) into packets no larger than the path
//! allows, with sequence numbers, timestamps, marker bits and SSRC right, and counting what was
//! sent for the sender reports. The depacketizers turn packets back into access units; the tests,
//! the fuzz round trip and the RTSP load generator use them. It owns no sockets and no clocks:
//! the caller passes timestamps in and takes packets out, and decides when to send them.
//!
//! Packets are written into a caller-owned [`Packets`] buffer that is cleared and reused, so the
//! hot path (one access unit per viewer group per frame) allocates nothing once the buffer has
//! grown to the largest frame. A viewer's bounded queue of those packets, which drops whole frames
//! up to the next keyframe when the viewer falls behind, is [`queue`].

pub mod aac;
mod fragments;
pub mod frames;
pub mod h264;
pub mod h265;
mod packet;
pub mod queue;
pub mod rtcp;

pub use aac::{AacAccessUnits, AacPacketizer};
pub use frames::{eac3_sync_frames, AudioFrames, FrameFormat, FramePacketizer};
pub use h264::{AccessUnit, H264Depacketizer, H264Packetizer};
pub use h265::{H265Depacketizer, H265Packetizer};
pub use packet::{Packets, RtpPacket, RtpStream, StreamConfig, RTP_HEADER_LEN};
pub use queue::{Body, BodyRef, Offer, QueueLimits, Queued, ViewerQueue};
pub use rtcp::{ntp_timestamp, RtcpError, SenderReport};

/// Why a sample could not be packetized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PacketizeError {
    /// The packet payload limit is too small to carry anything (FU-A needs 3 bytes).
    #[error("maximum payload of {0} bytes is too small")]
    PayloadLimitTooSmall(usize),
    /// The NAL unit length prefix size is not 1, 2 or 4.
    #[error("NAL length prefix of {0} bytes is not 1, 2 or 4")]
    BadNalLengthSize(u8),
    /// A NAL unit length prefix is cut off or claims more bytes than the access unit has.
    #[error("access unit is malformed at byte {0}")]
    MalformedAccessUnit(usize),
    /// The access unit holds no (non-empty) NAL unit.
    #[error("access unit holds no NAL unit")]
    EmptyAccessUnit,
    /// An AAC frame does not fit in one packet or in the 13-bit AU-size field.
    #[error("AAC frame of {size} bytes does not fit in one packet (at most {max})")]
    FrameTooLarge {
        /// Size of the frame.
        size: usize,
        /// Largest frame that fits.
        max: usize,
    },
}

/// Why received RTP could not be depacketized.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DepacketizeError {
    /// Shorter than its headers say.
    #[error("RTP packet is truncated")]
    Truncated,
    /// RTP version is not 2.
    #[error("RTP version {0} is not 2")]
    BadVersion(u8),
    /// Padding length is zero or longer than the payload.
    #[error("RTP padding is invalid")]
    BadPadding,
    /// No payload at all.
    #[error("RTP packet has an empty payload")]
    EmptyPayload,
    /// An H.264 NAL unit type sluice does not receive (STAP-B, MTAP, FU-B, reserved, 0).
    #[error("H.264 NAL unit type {0} is not supported")]
    UnsupportedNalType(u8),
    /// A STAP-A aggregate, or a packet of several AC-3/E-AC-3 frames, is malformed.
    #[error("aggregation packet is malformed")]
    BadAggregate,
    /// An FU-A fragment is malformed or out of order (start and end together, a middle fragment
    /// without a start, a start inside a fragmented NAL unit, a changed NAL type).
    #[error("FU-A fragment is malformed or out of order")]
    BadFragment,
    /// The access unit being assembled exceeds the limit.
    #[error("access unit exceeds {0} bytes")]
    AccessUnitTooLarge(usize),
    /// The AAC AU-headers section is malformed or does not match the data.
    #[error("AAC AU headers are malformed")]
    BadAuHeaders,
    /// An AAC access unit is fragmented over packets (sluice's packetizer never does this).
    #[error("fragmented AAC access units are not supported")]
    FragmentedAu,
}
