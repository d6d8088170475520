//! A microsecond-precise sleep for the open model's arrival schedule. tokio's timer wheel has
//! millisecond resolution, so an arrival waited for with `tokio::time::sleep_until` is sent up to
//! a millisecond late, and that lag lands in the measured latency (timed from the scheduled
//! instant): against a server answering in 100 µs it would dominate the result. A `timerfd`
//! armed at the absolute deadline on `CLOCK_MONOTONIC` (the clock behind `Instant` on Linux) and
//! awaited through the runtime's epoll fixes that at the cost of one `timerfd_settime` and one
//! `read` per wake-up. When a timerfd cannot be had, this falls back to tokio's timer.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use tokio::io::unix::AsyncFd;
use tokio::time::Instant;

/// One worker's precise timer (one wait at a time).
pub(crate) struct PreciseTimer {
    fd: Option<AsyncFd<OwnedFd>>,
}

impl PreciseTimer {
    /// A timerfd registered with the current runtime, or the tokio fallback.
    pub fn new() -> Self {
        // SAFETY: timerfd_create takes no pointers; a non-negative result is a new descriptor
        // that nothing else owns.
        let raw =
            unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        let fd = if raw >= 0 {
            // SAFETY: `raw` is a fresh descriptor owned by nothing else; the OwnedFd moves into
            // the AsyncFd, which keeps it open and unreplaced for as long as it is registered.
            unsafe { AsyncFd::register(OwnedFd::from_raw_fd(raw)) }.ok()
        } else {
            None
        };
        PreciseTimer { fd }
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
        if arm(fd.get_ref(), deadline - now).is_err() {
            tokio::time::sleep_until(deadline).await;
            return;
        }
        loop {
            let Ok(mut guard) = fd.readable().await else {
                tokio::time::sleep_until(deadline).await;
                return;
            };
            let mut expirations = [0u8; 8];
            let read = guard.try_io(|inner| {
                // SAFETY: reads at most 8 bytes into a live 8-byte buffer.
                let n =
                    unsafe { libc::read(inner.get_ref().as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
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

/// Arms `fd` to expire `after` from now, as an absolute `CLOCK_MONOTONIC` time so the time spent
/// computing it is not added.
fn arm(fd: &OwnedFd, after: std::time::Duration) -> io::Result<()> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec into a live one.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut sec = now.tv_sec + after.as_secs() as libc::time_t;
    let mut nsec = now.tv_nsec + libc::c_long::from(after.subsec_nanos() as i32);
    if nsec >= 1_000_000_000 {
        sec += 1;
        nsec -= 1_000_000_000;
    }
    let spec = libc::itimerspec {
        it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
        it_value: libc::timespec { tv_sec: sec, tv_nsec: nsec },
    };
    // SAFETY: a valid timerfd and a pointer to a live itimerspec; the old value is not wanted.
    if unsafe { libc::timerfd_settime(fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) }
        != 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(())
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
