//! The property of the `flv_body` fuzz target: what an RTMP publisher sends as audio and video
//! message bodies.

use crate::flv::{audio, video, Tag};

/// The first byte picks the NAL length size (0 to 4, as a sequence header may say) and the rest
/// is one message body: read as video and as audio, it never panics; an access unit taken in has
/// 4-byte lengths that walk it exactly (what a viewer's depacketizer then trusts), grows by no
/// more than the length fields widened, and flags a keyframe only where an IDR NAL unit is.
pub fn flv_body(data: &[u8]) {
    let Some((&first, body)) = data.split_first() else { return };
    let size = first % 5;
    if let Ok(Tag::Video { data: units, keyframe, .. }) = video(body, size) {
        assert!(units.len() <= 4 * body.len(), "an access unit grew past its lengths widened");
        let mut rest = &units[..];
        let mut idr = false;
        while !rest.is_empty() {
            let (len, after) = rest.split_first_chunk::<4>().expect("a whole length field");
            let nal =
                after.get(..u32::from_be_bytes(*len) as usize).expect("a NAL unit inside the access unit");
            idr |= nal.first().is_some_and(|h| h & 0x1f == 5);
            rest = &after[nal.len()..];
        }
        assert_eq!(keyframe, idr, "a keyframe is an access unit with an IDR picture");
    }
    if let Ok(Tag::Audio(frame)) = audio(body) {
        assert_eq!(frame[..], body[2..], "an AAC frame is the body after its two header bytes");
    }
}
