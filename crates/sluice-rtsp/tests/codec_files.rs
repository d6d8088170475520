//! Whether RTSP streams the codecs beyond H.264 and AAC, on the files ffmpeg made (the fuzz seeds
//! `tiny-*.mp4`): HEVC is playable, VP9 alone is refused with the reason. How these files index
//! and are described in SDP is `sluice-media`'s test of the same name.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use sluice_media::Mp4File;

fn seed(name: &str) -> Mp4File {
    let path = format!("{}/../../fuzz/corpus/mp4_demux/{name}", env!("CARGO_MANIFEST_DIR"));
    Mp4File::from_bytes(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn hevc_is_playable_and_vp9_alone_is_refused() {
    let file = seed("tiny-hev1-eac3.mp4");
    assert!(sluice_rtsp::playable(&file).is_ok());
    // VP9 has no payload format here, Opus has (RFC 7587); VP9 alone is refused, saying why.
    let mut vp9 = seed("tiny-vp9-opus.mp4");
    vp9.tracks.retain(|t| t.kind.is_video());
    let refusal = sluice_rtsp::playable(&vp9).unwrap_err();
    assert_eq!(refusal.status, 415);
    assert!(refusal.reason.contains("VP9 has no RTP payload format"), "{refusal}");
}
