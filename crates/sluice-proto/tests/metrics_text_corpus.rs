//! Replays the committed fuzz corpus of the `/metrics` reader (`fuzz/corpus/metrics_text/`)
//! through the property its fuzz target checks.

use std::path::PathBuf;

#[test]
fn metrics_text_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/metrics_text");
    sluice_proto::fuzzing::replay_corpus(&dir, sluice_proto::metrics_text::fuzz_metrics_text);
}
