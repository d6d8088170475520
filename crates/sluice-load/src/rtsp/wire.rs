//! The bytes a viewer reads that only a viewer reads, parsed without trusting them: the segments
//! of a UDP GRO message ([`gro_segments`], with the segment size from its `UDP_GRO` control
//! message, [`gro_segment_size`]). Every function takes whatever the kernel handed over and either
//! reads it or says it cannot; none panics and none allocates. RTP headers, RTSP responses and
//! interleaved frames are read by sluice-proto's client side (`RtpPacket`,
//! `sluice_proto::client::rtsp`), which the fuzz property here drives too.
//!
//! It owns the GRO layouts. It does not own sockets, counting or the RTSP exchange.

use sluice_proto::client::rtsp::Interleaved;
use sluice_proto::rtp::RtpPacket;

/// `SOL_UDP` and `UDP_GRO` (linux/udp.h), the control message that carries a GRO message's
/// segment size.
const SOL_UDP: i32 = 17;
const UDP_GRO: i32 = 104;

/// The segment size a `UDP_GRO` control message gives, read from the raw control buffer of a
/// `recvmsg` (a sequence of `cmsghdr`s, each padded to 8 bytes on 64-bit Linux). `None` when
/// there is none (the message is one datagram). A malformed buffer reads as none.
pub fn gro_segment_size(control: &[u8]) -> Option<usize> {
    const HEADER: usize = std::mem::size_of::<usize>() + 8; // cmsg_len, cmsg_level, cmsg_type
    const ALIGN: usize = std::mem::size_of::<usize>();
    let mut at = 0;
    while at + HEADER <= control.len() {
        let field = |from: usize, len: usize| control.get(at + from..at + from + len);
        let len_bytes = field(0, ALIGN)?;
        let len = if ALIGN == 8 {
            usize::try_from(u64::from_ne_bytes(len_bytes.try_into().ok()?)).ok()?
        } else {
            u32::from_ne_bytes(len_bytes.try_into().ok()?) as usize
        };
        let level = i32::from_ne_bytes(field(ALIGN, 4)?.try_into().ok()?);
        let kind = i32::from_ne_bytes(field(ALIGN + 4, 4)?.try_into().ok()?);
        if len < HEADER || at + len > control.len() {
            return None;
        }
        if level == SOL_UDP && kind == UDP_GRO {
            // The kernel writes an int (older kernels) or a u16; both start with the low bytes
            // on little-endian machines, so read what is there.
            let data = &control[at + HEADER..at + len];
            let size = match data.len() {
                n if n >= 4 => i32::from_ne_bytes(data[..4].try_into().ok()?) as i64,
                n if n >= 2 => i64::from(u16::from_ne_bytes(data[..2].try_into().ok()?)),
                _ => return None,
            };
            return usize::try_from(size).ok().filter(|&s| s > 0);
        }
        at += len.div_ceil(ALIGN) * ALIGN;
    }
    None
}

/// The datagrams of one received message: `segment` bytes each (the last may be shorter), or
/// the whole message when it was not coalesced (`segment` is `None`, or not smaller).
pub fn gro_segments(message: &[u8], segment: Option<usize>) -> std::slice::Chunks<'_, u8> {
    let size = segment.filter(|&s| s > 0).unwrap_or(message.len()).max(1);
    message.chunks(size)
}

/// The fuzz property of everything here (fuzz target `rtsp_viewer_input`): `data` read as an RTP
/// packet, a control buffer, a GRO message and a TCP stream never panics, every payload and
/// segment lies within the input, and the stream gives the same items whole as when it arrives
/// in two reads split at any byte.
pub fn fuzz_viewer_input(data: &[u8]) {
    if let Ok(p) = RtpPacket::parse(data) {
        let start = p.payload.as_ptr() as usize - data.as_ptr() as usize;
        assert!(start + p.payload.len() <= data.len());
    }
    let segment = gro_segment_size(data);
    let first = usize::from(data.first().copied().unwrap_or(0));
    let total: usize = gro_segments(data, segment.or(Some(first))).map(<[u8]>::len).sum();
    assert_eq!(total, data.len());
    let whole = read_stream(&[data]);
    let step = (data.len() / 256).max(1);
    for split in (0..=data.len()).step_by(step) {
        let (a, b) = data.split_at(split);
        assert_eq!(read_stream(&[a, b]), whole, "split at {split} changed the items");
    }
}

/// Feeds `chunks` as successive reads, the way the TCP receive loop does; returns the items seen
/// and whether the stream turned out malformed.
fn read_stream(chunks: &[&[u8]]) -> (Vec<String>, bool) {
    let mut pending: Vec<u8> = Vec::new();
    let mut seen = Vec::new();
    for chunk in chunks {
        pending.extend_from_slice(chunk);
        let mut at = 0;
        loop {
            match Interleaved::parse(&pending[at..]) {
                Ok(Some((item, n))) => {
                    assert!(n > 0 && at + n <= pending.len());
                    seen.push(format!("{item:?}"));
                    at += n;
                }
                Ok(None) => break,
                Err(()) => return (seen, true),
            }
        }
        pending.drain(..at);
    }
    (seen, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtp(marker: bool, seq: u16, ts: u32, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![0x80, if marker { 0xe0 } else { 0x60 }];
        p.extend_from_slice(&seq.to_be_bytes());
        p.extend_from_slice(&ts.to_be_bytes());
        p.extend_from_slice(&[1, 2, 3, 4]);
        p.extend_from_slice(payload);
        p
    }

    #[test]
    fn rtp_headers_are_read() {
        let p = rtp(true, 65535, 90_000, b"abc");
        let h = RtpPacket::parse(&p).unwrap();
        assert_eq!((h.marker, h.sequence, h.timestamp, h.payload), (true, 65535, 90_000, &b"abc"[..]));
        // Two CSRCs, an extension of one word and two bytes of padding.
        let mut q = vec![0xb2, 0x60, 0, 1, 0, 0, 0, 2, 9, 9, 9, 9];
        q.extend_from_slice(&[0; 8]);
        q.extend_from_slice(&[0xbe, 0xde, 0, 1, 7, 7, 7, 7]);
        q.extend_from_slice(b"xy");
        q.extend_from_slice(&[0, 2]);
        let h = RtpPacket::parse(&q).unwrap();
        assert_eq!((h.marker, h.sequence, h.payload), (false, 1, &b"xy"[..]));
        for bad in [
            &b""[..],
            &[0x80; 11][..],
            &[0x40; 12][..],
            &[0x8f; 20][..],
            &[0xa0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 200][..],
        ] {
            assert_eq!(RtpPacket::parse(bad).ok(), None, "{bad:?}");
        }
    }

    /// A control buffer as the kernel writes it: one `cmsghdr` per message.
    fn cmsgs(items: &[(i32, i32, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for (level, kind, data) in items {
            let len = 16 + data.len();
            out.extend_from_slice(&(len as u64).to_ne_bytes());
            out.extend_from_slice(&level.to_ne_bytes());
            out.extend_from_slice(&kind.to_ne_bytes());
            out.extend_from_slice(data);
            out.resize(out.len().div_ceil(8) * 8, 0);
        }
        out
    }

    #[test]
    fn the_gro_segment_size_is_read_from_its_control_message() {
        assert_eq!(gro_segment_size(&cmsgs(&[(SOL_UDP, UDP_GRO, &1400i32.to_ne_bytes())])), Some(1400));
        assert_eq!(gro_segment_size(&cmsgs(&[(SOL_UDP, UDP_GRO, &1200u16.to_ne_bytes())])), Some(1200));
        // After another control message (a timestamp, say).
        let two = cmsgs(&[(1, 29, &[0; 16]), (SOL_UDP, UDP_GRO, &1400i32.to_ne_bytes())]);
        assert_eq!(gro_segment_size(&two), Some(1400));
        assert_eq!(gro_segment_size(&[]), None);
        assert_eq!(gro_segment_size(&cmsgs(&[(1, 29, &[0; 16])])), None);
        // A length past the buffer, or shorter than a header, is malformed.
        let mut bad = cmsgs(&[(SOL_UDP, UDP_GRO, &1400i32.to_ne_bytes())]);
        bad[..8].copy_from_slice(&400u64.to_ne_bytes());
        assert_eq!(gro_segment_size(&bad), None);
        bad[..8].copy_from_slice(&3u64.to_ne_bytes());
        assert_eq!(gro_segment_size(&bad), None);
        assert_eq!(gro_segment_size(&cmsgs(&[(SOL_UDP, UDP_GRO, &0i32.to_ne_bytes())])), None);
    }

    #[test]
    fn a_gro_message_splits_into_its_datagrams() {
        let message: Vec<u8> = (0..10u8).collect();
        let parts: Vec<&[u8]> = gro_segments(&message, Some(4)).collect();
        assert_eq!(parts, [&[0, 1, 2, 3][..], &[4, 5, 6, 7], &[8, 9]]);
        assert_eq!(gro_segments(&message, None).count(), 1);
        assert_eq!(gro_segments(&message, Some(0)).count(), 1);
        assert_eq!(gro_segments(&message, Some(64)).count(), 1);
        assert_eq!(gro_segments(&[], Some(4)).count(), 0);
    }

    #[test]
    fn the_fuzz_property_holds_for_sample_inputs() {
        let mut stream = vec![b'$', 0, 0, 14];
        stream.extend_from_slice(&rtp(true, 1, 2, b"ab"));
        stream.extend_from_slice(b"RTSP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx$");
        for input in [
            &stream[..],
            &cmsgs(&[(SOL_UDP, UDP_GRO, &3i32.to_ne_bytes())]),
            b"",
            b"$",
            &rtp(false, 9, 9, b""),
        ] {
            fuzz_viewer_input(input);
        }
    }
}
