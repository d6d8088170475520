//! The library's reading of sample tables, on a local root and on an object store through its
//! slice cache: a fragmented MP4's `moof` headers spread over several slices are read as a local
//! file's are.

use std::time::Duration;

use sluice_store::{CacheConfig, PutOptions, Store};

use super::*;

fn seed(name: &str) -> Vec<u8> {
    std::fs::read(format!("{}/../../fuzz/corpus/mp4_demux/{name}", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Every sample of every track.
fn samples(file: &Mp4File) -> Vec<Vec<sluice_media::Sample>> {
    file.tracks.iter().map(|t| t.samples.clone()).collect()
}

#[test]
fn fragmented_files_index_alike_from_a_local_root_and_through_the_slice_cache() {
    let files = [
        ("keyframe.mp4", seed("tiny-h264-aac-frag-keyframe.mp4")),
        ("every-frame.mp4", seed("tiny-h264-aac-frag-every-frame.mp4")),
        ("growing.mp4", seed("tiny-frag-truncated-in-last-mdat")),
    ];
    let (dir, root, cache) =
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let store = sluice_store::LocalStore::open(root.path()).unwrap();
    for (name, bytes) in &files {
        std::fs::write(dir.path().join(name), bytes).unwrap();
        sluice_store::put_bytes(&store, &Key::new(name).unwrap(), bytes, PutOptions::default()).unwrap();
    }
    let store: Arc<dyn Store> = Arc::new(store);
    // Slices of 1000 bytes: each fragment's moof lies in a slice of its own.
    let config = CacheConfig {
        dir: cache.path().to_path_buf(),
        max_bytes: 1 << 20,
        slice_len: 1000,
        revalidate: Duration::from_secs(60),
    };
    let remote = Library::remote(
        RemoteLibrary::open(store, config, "test").unwrap(),
        Catalogue::new(1 << 20, Duration::from_secs(6)),
    );
    let local = Library::local(dir.path(), Catalogue::new(1 << 20, Duration::from_secs(6))).unwrap();
    for (name, bytes) in &files {
        let expected = samples(&Mp4File::from_bytes(bytes).unwrap());
        assert!(expected.iter().all(|t| !t.is_empty()), "{name}");
        for library in [&local, &remote] {
            let path = normalize(&format!("/{name}")).unwrap();
            let Ok(Found::File(version)) = library.lookup(&path, true) else { panic!("{name}") };
            let file = library.tables(name, &version, true).unwrap().unwrap();
            assert_eq!(samples(&file), expected, "{name}");
        }
    }
}
