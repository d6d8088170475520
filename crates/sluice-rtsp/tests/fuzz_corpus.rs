//! Replays the committed `fuzz/corpus/rtsp_session/` and `fuzz/corpus/rtsp_publish/` through the
//! property checks their fuzz targets run, so every input that once mattered is checked by
//! `cargo test`.

use std::path::PathBuf;

#[test]
fn rtsp_session_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rtsp_session");
    sluice_proto::fuzzing::replay_corpus(&dir, sluice_rtsp::fuzzing::rtsp_session);
}

#[test]
fn rtsp_publish_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rtsp_publish");
    sluice_proto::fuzzing::replay_corpus(&dir, sluice_rtsp::fuzzing::rtsp_publish);
}
