//! Sample bytes shared by the viewers of one presentation: a sample read for one viewer is kept,
//! bounded by bytes, for the viewers at (or near) the same position, so a fan-out of N viewers
//! reads each sample about once instead of N times.
//!
//! Owns the kept bytes, in the shared [`Lru`] (least recently used first out). It does not read: the caller
//! reads a missing sample through its [`MediaLibrary`](super::MediaLibrary) and hands the bytes
//! over. A sample is known by its presentation (the index's `Arc`, held by the entry so its
//! address cannot be reused while the entry lives), its offset and its size.

use std::sync::Arc;

use sluice_proto::lru::Lru;

use sluice_media::mp4::Mp4File;

/// Bytes of samples kept at most. Viewers that start within a few seconds of each other (the
/// lab's 4 s ramp) sit at most that far apart: 4 s of a 23 Mbps stream is about 12 MB, so 32 MiB
/// covers them with room for a second presentation.
pub const SAMPLE_CACHE_BYTES: usize = 32 << 20;

type Key = (usize, u64, u32);

/// See the module docs.
pub struct SampleCache {
    entries: Lru<Key, (Arc<Mp4File>, Arc<Vec<u8>>)>,
    /// The last sample larger than the whole budget: not kept, but lent out like the others.
    oversize: Arc<Vec<u8>>,
    /// Buffers of evicted entries, reused for the next reads.
    spare: Vec<Vec<u8>>,
}

impl SampleCache {
    /// A cache holding at most `budget` bytes of samples.
    pub fn new(budget: usize) -> SampleCache {
        SampleCache { entries: Lru::new(budget as u64), oversize: Arc::default(), spare: Vec::new() }
    }

    fn key(file: &Arc<Mp4File>, offset: u64, size: u32) -> Key {
        (Arc::as_ptr(file) as usize, offset, size)
    }

    /// The bytes of the sample of `file` at `offset`, `size` long, if kept.
    pub fn get(&self, file: &Arc<Mp4File>, offset: u64, size: u32) -> Option<&[u8]> {
        self.entries.peek(&Self::key(file, offset, size)).map(|((_, b), _)| b.as_slice())
    }

    /// Reads the sample with `read` (given a buffer of `size` bytes) unless it is kept, keeps
    /// it, and returns its bytes, shared: packets refer to them rather than copy them
    /// ([`sluice_proto::rtp::Packets::reference`]), and hold them past their eviction while queued;
    /// the error after a failed read (nothing is kept then).
    pub fn get_or_read<E>(
        &mut self,
        file: &Arc<Mp4File>,
        offset: u64,
        size: u32,
        read: impl FnOnce(&mut [u8]) -> Result<(), E>,
    ) -> Result<&Arc<Vec<u8>>, E> {
        let key = Self::key(file, offset, size);
        if !self.entries.contains_key(&key) {
            let mut buf = self.spare.pop().unwrap_or_default();
            buf.clear();
            buf.resize(size as usize, 0);
            if let Err(e) = read(&mut buf) {
                self.spare.push(buf);
                return Err(e);
            }
            for (evicted, (_, buf)) in
                self.entries.insert(key, (file.clone(), Arc::new(buf)), u64::from(size))
            {
                if evicted == key {
                    self.oversize = buf;
                    return Ok(&self.oversize);
                }
                // A sample still referred to by queued packets lives on with them; one no packet
                // holds any more is reused.
                if let (true, Ok(buf)) = (self.spare.len() < 8, Arc::try_unwrap(buf)) {
                    self.spare.push(buf);
                }
            }
        }
        match self.entries.get(&key) {
            Some((_, bytes)) => Ok(bytes),
            None => Ok(&self.oversize),
        }
    }

    /// Bytes kept now.
    pub fn held(&self) -> usize {
        self.entries.held() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> Arc<Mp4File> {
        let demo = concat!(env!("CARGO_MANIFEST_DIR"), "/../sluice-server/demo/sluice-demo.mp4");
        Arc::new(Mp4File::from_bytes(&std::fs::read(demo).unwrap()).unwrap())
    }

    #[test]
    fn reads_once_and_evicts_the_oldest_past_the_budget() {
        let f = file();
        let mut cache = SampleCache::new(100);
        let mut reads = 0;
        let read = |fill: u8| {
            move |b: &mut [u8]| -> Result<(), ()> {
                b.fill(fill);
                Ok(())
            }
        };
        for _ in 0..3 {
            let bytes = cache.get_or_read(&f, 0, 60, |b| {
                reads += 1;
                read(1)(b)
            });
            assert_eq!(bytes.unwrap().as_slice(), &[1; 60][..]);
        }
        assert_eq!(reads, 1, "kept after the first read");
        cache.get_or_read(&f, 60, 60, read(2)).unwrap();
        assert!(cache.get(&f, 0, 60).is_none(), "the oldest went to keep within 100 bytes");
        assert_eq!(cache.get(&f, 60, 60), Some(&[2; 60][..]));
        assert_eq!(cache.held(), 60);
        assert!(cache.get_or_read(&f, 120, 10, |_| Err("io")).is_err());
        assert_eq!(cache.held(), 60, "a failed read keeps nothing");
    }
}
