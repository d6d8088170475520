//! The provided-buffer ring (`IORING_REGISTER_PBUF_RING`) multishot receives fill: the worker's
//! receive memory, lent to the kernel and handed back buffer by buffer. It owns the mapping and
//! the tail it publishes; it does not know connections or what the bytes mean.

use std::io;
use std::sync::atomic::{AtomicU16, Ordering};

use io_uring::{types, IoUring};

/// A ring of provided buffers (`IORING_REGISTER_PBUF_RING`): the kernel picks a buffer for each
/// multishot-receive completion and names it in the completion's flags; the worker hands it back
/// once it has used the bytes.
pub(crate) struct BufRing {
    /// The descriptor ring shared with the kernel: page-aligned, from `mmap`.
    ring: *mut types::BufRingEntry,
    ring_bytes: usize,
    entries: u16,
    buffer_size: usize,
    /// The buffers themselves: one page-aligned anonymous mapping, so that a buffer of a page's
    /// size is exactly one page (a heap allocation starts 16 bytes into its first page, and every
    /// buffer would then straddle two).
    memory: *mut u8,
    memory_bytes: usize,
    /// Our copy of the tail; published to the kernel with a release store.
    tail: u16,
}

impl BufRing {
    /// Allocates `entries` (a power of two) buffers of `buffer_size` bytes, not yet registered.
    pub(crate) fn new(entries: u16, buffer_size: usize) -> io::Result<BufRing> {
        assert!(entries.is_power_of_two());
        let ring_bytes = (entries as usize * std::mem::size_of::<types::BufRingEntry>()).max(4096);
        let memory_bytes = entries as usize * buffer_size;
        let ring = map_anonymous(ring_bytes)?;
        let memory = match map_anonymous(memory_bytes) {
            Ok(m) => m,
            Err(e) => {
                // SAFETY: unmaps exactly the mapping made just above.
                unsafe { libc::munmap(ring.cast(), ring_bytes) };
                return Err(e);
            }
        };
        Ok(BufRing { ring: ring.cast(), ring_bytes, entries, buffer_size, memory, memory_bytes, tail: 0 })
    }

    /// Registers the ring as buffer group `bgid` of `ring` and hands the kernel every buffer.
    pub(crate) fn register(&mut self, ring: &IoUring, bgid: u16) -> io::Result<()> {
        // SAFETY: the descriptor ring is a live mapping of `entries` entries; it stays mapped
        // until this BufRing is dropped, which its owners do only after unregistering it or
        // dropping the io_uring (see Drop of Worker and the probe).
        unsafe { ring.submitter().register_buf_ring_with_flags(self.ring as u64, self.entries, bgid, 0)? };
        for bid in 0..self.entries {
            self.push(bid);
        }
        self.publish();
        Ok(())
    }

    /// The first `len` bytes of buffer `bid`.
    pub(crate) fn get(&self, bid: u16, len: usize) -> &[u8] {
        let start = (bid as usize).min(self.entries as usize - 1) * self.buffer_size;
        // SAFETY: `start + len.min(buffer_size)` is inside the mapping, which lives as long as
        // self; the kernel wrote these bytes before posting the completion that named `bid`, and
        // it writes the buffer again only after `recycle` hands it back.
        unsafe { std::slice::from_raw_parts(self.memory.add(start), len.min(self.buffer_size)) }
    }

    /// Gives buffer `bid` back to the kernel.
    pub(crate) fn recycle(&mut self, bid: u16) {
        if bid < self.entries {
            self.push(bid);
            self.publish();
        }
    }

    fn push(&mut self, bid: u16) {
        let index = (self.tail & (self.entries - 1)) as usize;
        let addr = self.memory as u64 + (bid as usize * self.buffer_size) as u64;
        // SAFETY: index < entries, so the entry is inside the mapping. The kernel reads entries
        // only between its head and our published tail; this slot is past the tail, so it is ours.
        let entry = unsafe { &mut *self.ring.add(index) };
        entry.set_addr(addr);
        entry.set_len(self.buffer_size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's `resv` (as the kernel's
        // io_uring_buf_ring lays it out); it is a naturally aligned u16 that the kernel only
        // reads, so an atomic store through it is sound. Release orders the entry writes before.
        unsafe {
            let tail = types::BufRingEntry::tail(self.ring) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mappings made in `new`.
        unsafe {
            libc::munmap(self.ring.cast(), self.ring_bytes);
            libc::munmap(self.memory.cast(), self.memory_bytes);
        }
    }
}

/// A private anonymous mapping of `bytes`: page-aligned, and resident only as far as it is
/// touched.
fn map_anonymous(bytes: usize) -> io::Result<*mut u8> {
    // SAFETY: an anonymous private mapping; no pointers are passed in. The result is checked.
    let ptr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if ptr == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    Ok(ptr.cast())
}
