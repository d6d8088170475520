//! Replays the committed fuzz corpora (`fuzz/corpus/mp4_demux/`,
//! `fuzz/corpus/hls_package/`, `fuzz/corpus/webvtt_segment/`, `fuzz/corpus/codec_config/`,
//! `fuzz/corpus/subsample_map/`, `fuzz/corpus/mp4_clip/`, `fuzz/corpus/ts_segment/`,
//! `fuzz/corpus/cpix_document/`, `fuzz/corpus/flv_body/`)
//! through the same property checks the fuzz targets run, so every input that once mattered is
//! checked by `cargo test` (`fuzz/corpus/rtsp_session/` is `sluice-rtsp`'s).

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    sluice_proto::fuzzing::replay_corpus(&dir, check);
}

#[test]
fn mp4_demux_corpus() {
    replay("mp4_demux", sluice_media::fuzzing::mp4_demux);
}

#[test]
fn hls_package_corpus() {
    replay("hls_package", sluice_media::fuzzing::hls_package);
}

#[test]
fn webvtt_segment_corpus() {
    replay("webvtt_segment", sluice_media::fuzzing::webvtt_segment);
}

#[test]
fn codec_config_corpus() {
    replay("codec_config", sluice_media::fuzzing::codec_config);
}

#[test]
fn subsample_map_corpus() {
    replay("subsample_map", sluice_media::fuzzing::subsample_map);
}

#[test]
fn mp4_clip_corpus() {
    replay("mp4_clip", sluice_media::fuzzing::mp4_clip);
}

#[test]
fn ts_segment_corpus() {
    replay("ts_segment", sluice_media::fuzzing::ts_segment);
}

#[test]
fn cpix_document_corpus() {
    replay("cpix_document", sluice_media::fuzzing::cpix_document);
}

#[test]
fn flv_body_corpus() {
    replay("flv_body", sluice_media::fuzzing::flv_body);
}
