//! Replays the committed fuzz corpora of `sluice load`'s readers (`fuzz/corpus/rtsp_viewer_input/`,
//! `fuzz/corpus/player_manifest/`) through the properties the fuzz targets check, so CI exercises
//! every input that once mattered without a fuzzer.

use std::path::{Path, PathBuf};

fn corpus(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(name)
}

#[test]
fn rtsp_viewer_input_corpus() {
    sluice_proto::fuzzing::replay_corpus(&corpus("rtsp_viewer_input"), sluice_load::rtsp::fuzz_viewer_input);
}

#[test]
fn player_manifest_corpus() {
    sluice_proto::fuzzing::replay_corpus(
        &corpus("player_manifest"),
        sluice_load::player::manifest::fuzz_manifest,
    );
}
