//! The samples a live page follows: the latest ones (a bounded history) and a wait for the next,
//! as server-sent events. Shared by the admin listener's `/events` and `sluice load
//! --dashboard`'s; each streams with its own server, so this holds no sockets.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A comment line is sent when no sample came for this long, so idle proxies keep the stream.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How often a waiting stream checks whether it should stop.
const CHECK: Duration = Duration::from_millis(500);

/// The latest samples (at most `history` of them) and the streams' wake-up.
#[derive(Debug)]
pub struct Hub {
    ring: Mutex<Ring>,
    fresh: Condvar,
    history: usize,
}

#[derive(Debug, Default)]
struct Ring {
    /// The latest samples as JSON, oldest first.
    samples: VecDeque<Arc<str>>,
    /// The sequence number the next sample gets (the first held is `next - samples.len()`).
    next: u64,
}

impl Hub {
    /// A hub keeping the latest `history` samples.
    pub fn new(history: usize) -> Hub {
        Hub { ring: Mutex::default(), fresh: Condvar::new(), history: history.max(1) }
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a sample, dropping the oldest beyond the history, and wakes the streams.
    pub fn publish(&self, sample: &serde_json::Value) {
        let mut ring = self.ring();
        ring.samples.push_back(Arc::from(sample.to_string()));
        if ring.samples.len() > self.history {
            ring.samples.pop_front();
        }
        ring.next += 1;
        drop(ring);
        self.fresh.notify_all();
    }

    /// A new stream's first bytes (the reconnect delay and a `history` event holding every
    /// sample held) and where it goes on from.
    pub fn start(&self) -> (String, u64) {
        let ring = self.ring();
        let history: Vec<&str> = ring.samples.iter().map(|s| &**s).collect();
        (format!("retry: 1000\n\nevent: history\ndata: [{}]\n\n", history.join(",")), ring.next)
    }

    /// The next event of a stream at `cursor` (a sample, or a keep-alive comment after a quiet
    /// spell), waiting for it; `None` once `stop` says so. A stream that fell behind the history
    /// goes on from its oldest sample.
    pub fn next_event(&self, cursor: &mut u64, stop: &dyn Fn() -> bool) -> Option<String> {
        let since = Instant::now();
        let mut ring = self.ring();
        loop {
            if stop() {
                return None;
            }
            if ring.next > *cursor {
                let first = ring.next - ring.samples.len() as u64;
                *cursor = (*cursor).max(first);
                let sample = &ring.samples[(*cursor - first) as usize];
                *cursor += 1;
                return Some(format!("data: {sample}\n\n"));
            }
            if since.elapsed() >= KEEPALIVE {
                return Some(":\n\n".into());
            }
            ring = self.fresh.wait_timeout(ring, CHECK).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_gets_the_history_then_each_sample_and_skips_what_fell_out() {
        let hub = Hub::new(2);
        hub.publish(&serde_json::json!({"t": 1}));
        let (head, mut cursor) = hub.start();
        assert!(head.contains("event: history\ndata: [{\"t\":1}]\n\n"), "{head}");
        hub.publish(&serde_json::json!({"t": 2}));
        assert_eq!(hub.next_event(&mut cursor, &|| false).unwrap(), "data: {\"t\":2}\n\n");
        for t in 3..6 {
            hub.publish(&serde_json::json!({ "t": t }));
        }
        assert_eq!(hub.next_event(&mut cursor, &|| false).unwrap(), "data: {\"t\":4}\n\n", "3 fell out");
        assert!(hub.next_event(&mut cursor, &|| true).is_none());
    }
}
