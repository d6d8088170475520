//! Replays fuzz/corpus/rtsp_viewer_input through the fuzz target's property, so CI exercises
//! the corpus of the viewers' wire readers without a fuzzer.

#[test]
fn rtsp_viewer_input_corpus() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rtsp_viewer_input");
    sluice_proto::fuzzing::replay_corpus(&dir, sluice_load::rtsp::fuzz_viewer_input);
}
