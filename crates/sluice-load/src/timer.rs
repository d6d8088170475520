//! A microsecond-precise sleep for the open model's arrival schedule. tokio's timer wheel has
//! millisecond resolution, so an arrival waited for with `tokio::time::sleep_until` is sent up to
//! a millisecond late, and that lag lands in the measured latency (timed from the scheduled
//! instant): against a server answering in 100 µs it would dominate the result. A `timerfd`
//! armed at the absolute deadline on `CLOCK_MONOTONIC` (the clock behind `Instant` on Linux) and
//! awaited through the runtime's epoll fixes that at the cost of one `timerfd_settime` and one
//! `read` per wake-up. When a timerfd cannot be had, this falls back to tokio's timer.

use std::os::fd::OwnedFd;

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

use crate::sys::timerfd as sys;

/// One worker's precise timer (one wait at a time).
pub(crate) struct PreciseTimer {
    fd: Option<AsyncFd<OwnedFd>>,
}

impl PreciseTimer {
    /// A timerfd registered with the current runtime, or the tokio fallback.
    pub fn new() -> Self {
        PreciseTimer { fd: sys::registered() }
    }

    /// Returns at `deadline` (immediately when it has passed).
    pub async fn sleep_until(&self, deadline: Instant) {
        let now = Instant::now();
        if deadline <= now {
            return;
        }
        let Some(fd) = &self.fd else {
            tokio::time::sleep_until(deadline).await;
            return;
        };
        if sys::arm(fd.get_ref(), deadline - now).is_err() {
            tokio::time::sleep_until(deadline).await;
            return;
        }
        loop {
            let Ok(mut guard) = fd.readable().await else {
                tokio::time::sleep_until(deadline).await;
                return;
            };
            let read = guard.try_io(|inner| sys::read_expirations(inner.get_ref()));
            match read {
                Ok(Ok(())) => return,
                // Spurious readiness: wait again.
                Err(_) => continue,
                Ok(Err(_)) => {
                    tokio::time::sleep_until(deadline).await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn wakes_within_a_fraction_of_a_millisecond() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let timer = PreciseTimer::new();
            assert!(timer.fd.is_some(), "timerfd is available on Linux");
            let mut worst = Duration::ZERO;
            for _ in 0..20 {
                let deadline = Instant::now() + Duration::from_micros(300);
                timer.sleep_until(deadline).await;
                let now = Instant::now();
                assert!(now >= deadline);
                worst = worst.max(now - deadline);
            }
            // Generous for a loaded CI box; tokio's timer alone would be up to 1 ms late.
            assert!(worst < Duration::from_millis(20), "{worst:?}");
        });
    }
}
