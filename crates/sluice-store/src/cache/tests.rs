//! The slice cache's tests: fetching, coalescing, versions, eviction, and living with a
//! directory others touch.

use super::*;
use crate::{LocalStore, PutOptions};
use std::os::unix::fs::FileExt;

fn cache_of(root: &std::path::Path, dir: &std::path::Path, max: u64) -> SliceCache {
    let store: Arc<dyn Store> = Arc::new(LocalStore::open(root).unwrap());
    let config =
        CacheConfig { dir: dir.to_path_buf(), max_bytes: max, slice_len: 1000, revalidate: Duration::ZERO };
    SliceCache::new(store, config).unwrap()
}

fn put(root: &std::path::Path, name: &str, bytes: &[u8]) {
    let store = LocalStore::open(root).unwrap();
    crate::put_bytes(&store, &Key::new(name).unwrap(), bytes, PutOptions::default()).unwrap();
}

/// The slice files in `dir`, sorted.
fn slice_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "slice"))
        .collect();
    files.sort();
    files
}

/// The whole of `key` read through `cache`, checked against `data`.
fn read_whole(cache: &SliceCache, key: &str, data: &[u8]) {
    let v = cache.version(&Key::new(key).unwrap(), true).unwrap().unwrap();
    let mut all = vec![0u8; v.len as usize];
    cache.read_at(&v, 0, &mut all).unwrap();
    assert!(all == data, "{key} read back whole and correct");
}

fn count(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(31).wrapping_add(seed) % 251) as u8).collect()
}

#[test]
fn slices_are_fetched_once_and_the_size_holds() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
    put(root.path(), "a.bin", &data);
    let cache = cache_of(root.path(), dir.path(), 3000);
    let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
    assert!(matches!(cache.slice(&v, 0, 0, false), Err(CacheError::WouldBlock)));
    let mut all = vec![0u8; data.len()];
    cache.read_at(&v, 0, &mut all).unwrap();
    assert_eq!(all, data);
    let s = cache.stats();
    assert_eq!(s.misses.load(Ordering::Relaxed), 10);
    assert_eq!(s.evictions.load(Ordering::Relaxed), 7);
    assert!(s.held_bytes.load(Ordering::Relaxed) <= 3000);
    assert_eq!(slice_files(dir.path()).len(), 3, "evicted slices leave no file");
    // The last three slices are warm; reading them again costs no origin request.
    let before = s.origin_requests.load(Ordering::Relaxed);
    let mut tail = vec![0u8; 2500];
    cache.read_at(&v, 7500, &mut tail).unwrap();
    assert_eq!(tail, data[7500..]);
    assert_eq!(s.origin_requests.load(Ordering::Relaxed), before);
    // Bytes from the cache are the bytes read out of hits, not the slices' lengths: the cold
    // read counted none, the warm one its 2500, and ten sample-sized reads of one 1000-byte
    // slice (as an RTSP viewer reads) count 100 each.
    assert_eq!(s.bytes_from_cache.load(Ordering::Relaxed), 2500);
    for n in 0..10 {
        let mut sample = [0u8; 100];
        cache.read_at(&v, 9000 + n * 100, &mut sample).unwrap();
    }
    assert_eq!(s.bytes_from_cache.load(Ordering::Relaxed), 3500);
    assert_eq!(s.bytes_from_origin.load(Ordering::Relaxed), 10_000, "every slice fetched once");
}

#[test]
fn concurrent_misses_make_one_fetch() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    put(root.path(), "a.bin", &[7u8; 1000]);
    let cache = cache_of(root.path(), dir.path(), 1 << 20);
    let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
    std::thread::scope(|s| {
        for _ in 0..16 {
            s.spawn(|| {
                let mut b = [0u8; 1000];
                cache.slice(&v, 0, 1000, true).unwrap().read_exact_at(&mut b, 0).unwrap();
                assert_eq!(b, [7u8; 1000]);
            });
        }
    });
    let s = cache.stats();
    assert_eq!(s.misses.load(Ordering::Relaxed), 1);
    assert_eq!(s.hits.load(Ordering::Relaxed) + s.coalesced_waits.load(Ordering::Relaxed), 15);
}

#[test]
fn a_replaced_object_is_never_read_against_its_old_version() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    put(root.path(), "a.bin", &[1u8; 2000]);
    let cache = cache_of(root.path(), dir.path(), 1 << 20);
    let key = Key::new("a.bin").unwrap();
    let old = cache.version(&key, true).unwrap().unwrap();
    cache.slice(&old, 0, 0, true).unwrap();
    std::thread::sleep(Duration::from_millis(1100));
    put(root.path(), "a.bin", &[2u8; 2500]);
    assert!(matches!(cache.slice(&old, 1, 0, true), Err(CacheError::Changed)));
    let new = cache.version(&key, true).unwrap().unwrap();
    assert_ne!(new.etag, old.etag);
    let mut all = vec![0u8; 2500];
    cache.read_at(&new, 0, &mut all).unwrap();
    assert_eq!(all, [2u8; 2500]);
}

#[test]
fn a_second_cache_on_the_directory_is_refused_naming_the_first() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = cache_of(root.path(), dir.path(), 1 << 20);
    let store: Arc<dyn Store> = Arc::new(LocalStore::open(root.path()).unwrap());
    let config = first.config().clone();
    let refused = SliceCache::new(Arc::clone(&store), config.clone()).unwrap_err();
    let busy = refused.dir_in_use().expect("refused because the directory is held");
    assert_eq!(busy.pid, Some(std::process::id()));
    assert!(refused.to_string().contains("is in use by sluice pid"), "{refused}");
    drop(first);
    SliceCache::new(store, config).expect("the directory is free once the first cache is gone");
}

#[test]
fn whole_leftover_slices_are_reused_and_the_rest_removed() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let data = pattern(4500, 1);
    put(root.path(), "a.bin", &data);
    let first = cache_of(root.path(), dir.path(), 1 << 20);
    read_whole(&first, "a.bin", &data);
    // Dropping a cache cleans nothing up: the directory is as a SIGKILL leaves it.
    drop(first);
    let files = slice_files(dir.path());
    assert_eq!(files.len(), 5);
    // One slice cut short, a temporary file, a slice of an older layout, a stranger's file.
    let short = &files[1];
    std::fs::OpenOptions::new().write(true).open(short).unwrap().set_len(999).unwrap();
    std::fs::write(format!("{}.3.tmp", files[2].display()), b"partial").unwrap();
    std::fs::write(dir.path().join("1234-5.slice"), b"old").unwrap();
    std::fs::write(dir.path().join("notes.txt"), b"an operator's").unwrap();

    let second = cache_of(root.path(), dir.path(), 1 << 20);
    let s = second.stats();
    assert_eq!(count(&s.reused_slices), 4);
    assert_eq!(count(&s.held_bytes), 4500 - 1000);
    assert!(!short.exists(), "the short slice is removed");
    assert!(!dir.path().join("1234-5.slice").exists());
    assert!(dir.path().join("notes.txt").exists(), "files not the cache's are left alone");
    read_whole(&second, "a.bin", &data);
    assert_eq!(count(&s.misses), 1, "only the short slice is fetched again");
    assert_eq!(count(&s.hits), 4);
    assert_eq!(slice_files(dir.path()).len(), 5);
}

#[test]
fn leftovers_of_a_replaced_object_are_never_served_and_are_removed() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let old = pattern(2500, 2);
    put(root.path(), "a.bin", &old);
    let first = cache_of(root.path(), dir.path(), 1 << 20);
    read_whole(&first, "a.bin", &old);
    drop(first);
    std::thread::sleep(Duration::from_millis(1100));
    let new = pattern(2500, 3);
    put(root.path(), "a.bin", &new);
    let second = cache_of(root.path(), dir.path(), 1 << 20);
    assert_eq!(count(&second.stats().reused_slices), 3);
    read_whole(&second, "a.bin", &new);
    assert_eq!(count(&second.stats().misses), 3, "every slice of the new version is fetched");
    assert_eq!(slice_files(dir.path()).len(), 3, "the old version's slices are removed");
    assert_eq!(count(&second.stats().held_bytes), 2500);
}

#[test]
fn leftovers_beyond_the_size_are_evicted_oldest_first() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let data = pattern(5000, 4);
    put(root.path(), "a.bin", &data);
    read_whole(&cache_of(root.path(), dir.path(), 1 << 20), "a.bin", &data);
    let second = cache_of(root.path(), dir.path(), 2000);
    assert_eq!(count(&second.stats().reused_slices), 2);
    assert_eq!(count(&second.stats().held_bytes), 2000);
    assert_eq!(slice_files(dir.path()).len(), 2);
}

#[test]
fn a_removed_directory_is_recreated_and_refilled() {
    let (root, parent) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dir = parent.path().join("cache");
    let data = pattern(3000, 5);
    put(root.path(), "a.bin", &data);
    let cache = cache_of(root.path(), &dir, 1 << 20);
    read_whole(&cache, "a.bin", &data);
    std::fs::remove_dir_all(&dir).unwrap();
    read_whole(&cache, "a.bin", &data);
    let s = cache.stats();
    assert_eq!(count(&s.dir_recreations), 1);
    assert_eq!(count(&s.vanished_slices), 3);
    assert_eq!(count(&s.misses), 6);
    assert_eq!(count(&s.held_bytes), 3000);
    assert_eq!(slice_files(&dir).len(), 3, "refilled");
    let store: Arc<dyn Store> = Arc::new(LocalStore::open(root.path()).unwrap());
    let again = SliceCache::new(store, cache.config().clone()).unwrap_err();
    assert!(again.dir_in_use().is_some(), "the recreated directory is locked again");
    // And again, warm.
    read_whole(&cache, "a.bin", &data);
    assert_eq!(count(&s.misses), 6);
}

#[test]
fn slices_removed_by_another_process_are_forgotten_and_fetched_again() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let data = pattern(3000, 6);
    put(root.path(), "a.bin", &data);
    let cache = cache_of(root.path(), dir.path(), 1 << 20);
    read_whole(&cache, "a.bin", &data);
    let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
    // Every file removed, the lock file too (`rm -rf dir/*`).
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    // On an event loop: not served as a missing file, not fetched there either.
    assert!(matches!(cache.slice(&v, 0, 0, false), Err(CacheError::WouldBlock)));
    assert!(!cache.has(&v, 0));
    read_whole(&cache, "a.bin", &data);
    let s = cache.stats();
    assert_eq!(count(&s.vanished_slices), 3, "the other two found by the repair, not served missing");
    assert_eq!(count(&s.dir_recreations), 0);
    assert_eq!(count(&s.held_bytes), 3000);
    assert!(dir.path().join(dir::LOCK_FILE).exists(), "the lock is taken again");
    assert_eq!(slice_files(dir.path()).len(), 3);
}

#[test]
fn a_slice_the_disk_will_not_take_is_served_from_memory_and_counted() {
    let (root, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let data = pattern(2500, 7);
    put(root.path(), "a.bin", &data);
    let cache = cache_of(root.path(), dir.path(), 1 << 20);
    cache.dir.failing_writes.store(1, Ordering::Relaxed);
    let v = cache.version(&Key::new("a.bin").unwrap(), true).unwrap().unwrap();
    let first = cache.slice(&v, 0, 0, true).unwrap();
    let mut bytes = vec![0u8; 1000];
    first.read_exact_at(&mut bytes, 0).unwrap();
    assert!(bytes == data[..1000], "the failed slice's bytes are served");
    let s = cache.stats();
    assert_eq!(count(&s.write_failures), 1);
    assert!(!cache.has(&v, 0), "not cached");
    assert!(slice_files(dir.path()).is_empty(), "no partial file is left");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "only the lock file");
    // The disk takes the next ones.
    read_whole(&cache, "a.bin", &data);
    assert_eq!(count(&s.write_failures), 1);
    assert_eq!(count(&s.misses), 4);
    assert_eq!(count(&s.held_bytes), 2500);
}

#[test]
fn a_directory_another_cache_took_while_it_was_gone_is_not_written_to() {
    let (root, parent) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let dir = parent.path().join("cache");
    let data = pattern(2000, 8);
    put(root.path(), "a.bin", &data);
    let first = cache_of(root.path(), &dir, 1 << 20);
    read_whole(&first, "a.bin", &data);
    std::fs::remove_dir_all(&dir).unwrap();
    let second = cache_of(root.path(), &dir, 1 << 20);
    // The first still serves, from memory, and leaves the second's directory alone.
    read_whole(&first, "a.bin", &data);
    read_whole(&first, "a.bin", &data);
    assert_eq!(count(&first.stats().write_failures), 4);
    assert!(slice_files(&dir).is_empty(), "nothing written into the directory the second holds");
    read_whole(&second, "a.bin", &data);
    assert_eq!(slice_files(&dir).len(), 2);
}
