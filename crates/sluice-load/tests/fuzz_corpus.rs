//! Replays the committed fuzz corpus of `fuzz/corpus/player_manifest/` through the property the
//! fuzz target checks, so every manifest that once mattered is checked by `cargo test`.

use std::path::PathBuf;

#[test]
fn player_manifest_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/player_manifest");
    sluice_proto::fuzzing::replay_corpus(&dir, sluice_load::player::manifest::fuzz_manifest);
}
