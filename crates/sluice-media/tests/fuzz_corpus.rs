//! Replays the committed fuzz corpus (`fuzz/corpus/mp4_demux/`) through the same property check
//! the fuzz target runs, so every input that once mattered is checked by `cargo test`.

use std::path::PathBuf;

#[test]
fn mp4_demux_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/mp4_demux");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| sluice_media::fuzzing::mp4_demux(&data));
        assert!(result.is_ok(), "corpus input {} fails its property", path.display());
        count += 1;
    }
    assert!(count >= 5, "expected a corpus in {}, found {count} inputs", dir.display());
}

#[test]
fn rtsp_session_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/rtsp_session");
    let mut count = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let result = std::panic::catch_unwind(|| sluice_media::fuzzing::rtsp_session(&data));
        assert!(result.is_ok(), "corpus input {} fails its property", path.display());
        count += 1;
    }
    assert!(count >= 5, "expected a corpus in {}, found {count} inputs", dir.display());
}
