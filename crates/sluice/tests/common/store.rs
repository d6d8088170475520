//! The one SeaweedFS a test binary shares between its S3 tests.

use std::sync::OnceLock;

use sluice_harness::seaweedfs::SeaweedFs;

/// Starts SeaweedFS with `bucket` on first use (later calls get the same instance, whatever
/// bucket they name); it is killed with the process (see its docs).
pub fn shared_seaweedfs(bucket: &str) -> &'static SeaweedFs {
    static WEED: OnceLock<(tempfile::TempDir, SeaweedFs)> = OnceLock::new();
    &WEED
        .get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            let weed = SeaweedFs::start(dir.path(), bucket)
                .unwrap_or_else(|e| panic!("SeaweedFS: {e} (scripts/test installs it)"));
            // The servers these tests start take their credentials from the environment, as a
            // deployment would (set once, before any of them starts).
            std::env::set_var("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY);
            std::env::set_var("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
            (dir, weed)
        })
        .1
}
