//! Fragmentation units: one NAL unit too large for a packet, cut into packets that each repeat a
//! payload header and carry an FU header with the start and end bits. H.264's FU-A (RFC 6184
//! §5.8) and H.265's FU (RFC 7798 §4.4.3) differ only in that payload header (one byte of FU
//! indicator, or two of payload header), so both packetizers write their fragments here.
//!
//! It owns the cutting and the start, end and marker bits; what goes in the payload header and
//! when a NAL unit is fragmented at all are the packetizers' ([`super::h264`], [`super::h265`]).

use super::packet::{Packets, RtpStream};

/// FU header bit of a NAL unit's first fragment.
const START: u8 = 0x80;
/// FU header bit of a NAL unit's last fragment.
const END: u8 = 0x40;

/// A NAL unit to be sent as fragmentation units.
pub(super) struct Fragmented<'a> {
    /// The payload header each fragment opens with (H.264's FU indicator, H.265's two bytes).
    pub header: &'a [u8],
    /// The NAL unit type the FU header carries beside the start and end bits.
    pub nal_type: u8,
    /// The NAL unit without its own header, which is not repeated.
    pub body: &'a [u8],
}

/// Writes `nal` into `out` as packets of at most `max_payload` bytes of payload at `timestamp`,
/// the last one marked when the NAL unit ends the access unit (`end_of_au`).
pub(super) fn write_fragments(
    stream: &mut RtpStream,
    out: &mut Packets,
    nal: Fragmented<'_>,
    max_payload: usize,
    end_of_au: bool,
    timestamp: u32,
) {
    let chunk = max_payload - nal.header.len() - 1;
    let count = nal.body.len().div_ceil(chunk);
    for (j, part) in nal.body.chunks(chunk).enumerate() {
        let start = if j == 0 { START } else { 0 };
        let end = if j + 1 == count { END } else { 0 };
        let marker = end_of_au && j + 1 == count;
        stream.write(out, marker, timestamp, &[nal.header, &[start | end | nal.nal_type], part]);
    }
}
