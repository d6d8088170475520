//! Large response buffers kept for the next response: what a protected segment is read and
//! encrypted into, handed back by the [`crate::Outbox`] once the engine has sent it.
//!
//! Why: the server sets glibc's mmap threshold to 1 MiB (so a freed large block goes back to the
//! kernel at once), and a video segment is larger. Each encrypted segment was therefore a fresh
//! mapping, faulted in page by page and zeroed by the kernel, then unmapped: page faults, page
//! zeroing and unmapping were 15% of an encrypted segment's CPU (`perf record`, 2026-11-28, see
//! docs/BENCHMARKS.md "Encrypted segments"). A buffer taken from here has its pages already.
//!
//! The pool is bounded in count and in each buffer's size, so what it holds when idle is at most
//! [`MAX_KEPT`] × [`MAX_BUFFER`]; buffers past either bound are freed as before. It owns only the
//! keeping; who fills a buffer and who sends it is theirs.

use std::sync::Mutex;

/// Buffers kept at most: enough for the segments one server has in flight at a time on a core
/// (the CPU pool's workers plus the sockets still draining theirs).
pub const MAX_KEPT: usize = 16;

/// The largest buffer kept (a 6 s 1080p segment at 12 Mb/s is 9 MB); larger ones are rare and
/// go back to the kernel.
pub const MAX_BUFFER: usize = 16 << 20;

/// The smallest buffer worth keeping here; smaller ones are the outbox's own to recycle, or
/// malloc's, which keeps them in its arenas anyway.
pub const MIN_BUFFER: usize = 256 << 10;

static KEPT: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// A buffer of exactly `len` bytes, from the pool when it has one large enough. Its contents are
/// unspecified (the previous response's bytes, or zeros): the caller overwrites all of it.
pub fn take(len: usize) -> Vec<u8> {
    let kept = {
        let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
        // The smallest that fits, so a large buffer stays for a large segment.
        let best = kept
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= len)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i);
        best.map(|i| kept.swap_remove(i))
    };
    match kept {
        Some(mut buffer) => {
            // Only what lies past the previous length is written here; the rest is overwritten
            // by the caller, so it is not zeroed twice.
            buffer.resize(len, 0);
            buffer
        }
        None => vec![0; len],
    }
}

/// Gives a sent buffer back. Buffers outside [`MIN_BUFFER`]..=[`MAX_BUFFER`], or beyond
/// [`MAX_KEPT`] kept, are freed.
pub fn give(buffer: Vec<u8>) {
    if !(MIN_BUFFER..=MAX_BUFFER).contains(&buffer.capacity()) {
        return;
    }
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    if kept.len() < MAX_KEPT {
        kept.push(buffer);
    }
}

/// Buffers held now.
#[cfg(test)]
fn kept() -> usize {
    KEPT.lock().unwrap_or_else(|e| e.into_inner()).len()
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test: the pool is process-wide, and tests run in parallel.
    #[test]
    fn keeps_bounded_buffers_and_hands_them_back() {
        let a = take(MIN_BUFFER * 2);
        assert_eq!(a.len(), MIN_BUFFER * 2);
        let pointer = a.as_ptr();
        give(a);
        // A smaller request is served by the kept buffer, sized to the request.
        let b = take(MIN_BUFFER + 1);
        assert_eq!(b.len(), MIN_BUFFER + 1);
        assert_eq!(b.as_ptr(), pointer, "the kept buffer is reused");
        give(b);
        // Growing a kept buffer past its capacity is a new allocation of the right size.
        let c = take(MIN_BUFFER * 4);
        assert_eq!(c.len(), MIN_BUFFER * 4);
        assert!(c.iter().all(|&x| x == 0), "a new buffer is zeroed");
        drop(c);
        // Small and huge buffers are not kept.
        let before = kept();
        give(vec![0; 1024]);
        give(Vec::with_capacity(MAX_BUFFER + 1));
        assert_eq!(kept(), before);
        // The count is bounded.
        for _ in 0..MAX_KEPT + 4 {
            give(Vec::with_capacity(MIN_BUFFER));
        }
        assert_eq!(kept(), MAX_KEPT);
    }
}
