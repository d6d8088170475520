//! The temporary media library a test serves, with files the root must never reach beside it.

#![allow(dead_code)]

use super::*;

/// Content of the canary outside the root; no response may ever contain it.
pub const CANARY_MARK: &[u8] = b"SLUICE-CANARY";

/// A fixed mtime (2021-01-01T00:00:00Z) so that Last-Modified is a strong validator.
pub const FIXTURE_MTIME: u64 = 1_609_459_200;

/// A temporary directory holding a media root and, beside it, files the root must not reach:
///
/// ```text
/// base/canary.txt              outside the root
/// base/root/t1.html            nginx's 1000-byte pattern
/// base/root/64k.bin, 1m.bin    deterministic pseudo-random bytes
/// base/root/sub/inner.txt
/// base/root/index-less/clip.txt   a directory without index.html
/// base/root/with-index/index.html
/// base/root/link-to-canary.txt -> base/canary.txt
/// base/root/outside-dir        -> base
/// ```
pub struct Fixture {
    pub base: PathBuf,
    pub root: PathBuf,
    pub canary: Vec<u8>,
}

static FIXTURE_SEQ: AtomicUsize = AtomicUsize::new(0);

impl Fixture {
    pub fn new() -> Fixture {
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let base = std::env::temp_dir().join(format!(
            "sluice-it-{}-{}-{nanos}",
            std::process::id(),
            FIXTURE_SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let root = base.join("root");
        std::fs::create_dir_all(&root).expect("create fixture root");
        let canary = format!("SLUICE-CANARY-{}-must-never-be-served\n", base.display()).into_bytes();
        let fx = Fixture { base: base.clone(), root: root.clone(), canary };
        std::fs::write(base.join("canary.txt"), &fx.canary).unwrap();
        fx.write("t1.html", &t1_html());
        fx.write("64k.bin", &pseudo_random(64 * 1024, 64));
        fx.write("1m.bin", &pseudo_random(1024 * 1024, 1024));
        fx.write("sub/inner.txt", b"inner file\n");
        fx.write("index-less/clip.txt", b"a clip\n");
        fx.write("with-index/index.html", b"<html><body>the index page</body></html>\n");
        std::os::unix::fs::symlink(base.join("canary.txt"), root.join("link-to-canary.txt")).unwrap();
        std::os::unix::fs::symlink(&base, root.join("outside-dir")).unwrap();
        fx
    }

    /// Writes a file under the root (creating directories) with the fixed mtime.
    pub fn write(&self, rel: &str, bytes: &[u8]) {
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(&path, bytes).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(FIXTURE_MTIME)).unwrap();
    }

    /// Creates a sparse file of `len` zero bytes under the root (no disk space used).
    pub fn sparse(&self, rel: &str, len: u64) {
        let path = self.root.join(rel);
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(len).unwrap();
        f.set_modified(UNIX_EPOCH + Duration::from_secs(FIXTURE_MTIME)).unwrap();
    }

    /// The bytes of a file under the root.
    pub fn file(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.root.join(rel)).unwrap_or_else(|e| panic!("read fixture {rel}: {e}"))
    }

    /// The root as a command-line argument.
    pub fn root_arg(&self) -> String {
        self.root.to_str().expect("temp dir path is UTF-8").to_string()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }
}

impl Default for Fixture {
    fn default() -> Self {
        Fixture::new()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        // remove_dir_all does not follow the symlinks inside.
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// nginx's t1.html: `join('', map { sprintf "X%03dXXXXXX", $_ } (0 .. 99))`.
pub fn t1_html() -> Vec<u8> {
    (0..100).map(|i| format!("X{i:03}XXXXXX")).collect::<String>().into_bytes()
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub fn pseudo_random(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}
