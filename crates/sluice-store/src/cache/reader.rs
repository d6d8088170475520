//! Reading an object's bytes through the cache's slices: at an offset (the RTSP side's sample
//! reads) or as a [`Read`] + [`Seek`] stream (indexing an MP4). It does not fetch or keep
//! slices itself: every byte comes from [`SliceCache::slice`].

use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;

use super::{CacheError, ObjectVersion, SliceCache};

impl SliceCache {
    /// Fills `into` with the bytes of `version` at `offset`, through the slices (blocking on a
    /// miss): the RTSP side's sample reads and the MP4 index reads.
    pub fn read_at(&self, version: &ObjectVersion, offset: u64, into: &mut [u8]) -> Result<(), CacheError> {
        let end = offset + into.len() as u64;
        if end > version.len {
            return Err(CacheError::Io(io::Error::from(io::ErrorKind::UnexpectedEof)));
        }
        let mut done = 0usize;
        for index in self.slices_of(offset..end) {
            let range = self.slice_range(version, index);
            let from = (offset + done as u64).max(range.start);
            let take = (range.end.min(end) - from) as usize;
            let file = self.slice(version, index, take as u64, true)?;
            file.read_exact_at(&mut into[done..done + take], from - range.start)?;
            done += take;
        }
        Ok(())
    }

    /// A reader of `version` (for indexing an MP4), reading through the slices.
    pub fn reader<'a>(&'a self, version: &'a ObjectVersion) -> VersionReader<'a> {
        VersionReader { cache: self, version, pos: 0 }
    }
}

/// Reads one version of an object through the cache; see [`SliceCache::reader`].
#[derive(Debug)]
pub struct VersionReader<'a> {
    cache: &'a SliceCache,
    version: &'a ObjectVersion,
    pos: u64,
}

impl Read for VersionReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.version.len.saturating_sub(self.pos);
        // Never across a slice boundary, so one read is one slice.
        let to_boundary = self.cache.config.slice_len - self.pos % self.cache.config.slice_len;
        let n = (buf.len() as u64).min(left).min(to_boundary) as usize;
        if n == 0 {
            return Ok(0);
        }
        self.cache.read_at(self.version, self.pos, &mut buf[..n]).map_err(io::Error::other)?;
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for VersionReader<'_> {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let pos = match to {
            SeekFrom::Start(p) => Some(p),
            SeekFrom::End(d) => self.version.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = pos.ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        Ok(self.pos)
    }
}
