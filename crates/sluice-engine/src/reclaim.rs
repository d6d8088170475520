//! Places at the connection limit taken back from connections the server only waits on.
//!
//! A listener capped at `max_connections` that refuses newcomers can be locked out by clients
//! that merely hold connections: idle keep-alives, heads that never finish, readers that stopped
//! reading, connections lingering before their close. For the admin listener that means health
//! checks refused while such clients sit there. This module owns the registry of the threads
//! engine's connections that wait on their client (for bytes in, for room to send, for the
//! client's close) and since when; at the limit the acceptor shuts down the one that has waited
//! longest and admits the newcomer in its place. nginx does the same with idle keep-alive
//! connections when it runs out of connections. A connection the server works for (a job, a
//! response being produced) is never taken. It does not decide what waiting means (the threads
//! engine marks it) and closes nothing itself: `shutdown(2)` wakes the connection's own thread,
//! whose next read or send ends the connection.

use std::collections::BTreeMap;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The connections waiting on their clients, oldest wait first.
#[derive(Debug, Default)]
pub(crate) struct Waiting {
    /// By (waiting since, connection number): the socket to shut down.
    by_age: Mutex<BTreeMap<(Instant, u64), RawFd>>,
    next: AtomicU64,
}

impl Waiting {
    /// A ticket for a connection on `fd`, not waiting yet. The ticket must be dropped before the
    /// socket is closed: the registry names the socket only while its ticket lives, so a shut
    /// down can never reach a descriptor that was closed and reused.
    pub fn ticket(&self, fd: RawFd) -> Ticket<'_> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        Ticket { waiting: self, fd, number, since: None, shut_down: false }
    }

    /// Shuts down the connection that has waited on its client longest, if any; true when one
    /// was. Its thread sees the end of stream (or a failed send) at once and closes it.
    pub fn shut_down_longest(&self) -> bool {
        let mut by_age = self.by_age.lock().unwrap_or_else(|e| e.into_inner());
        let Some((_, fd)) = by_age.pop_first() else { return false };
        // `fd` is the open socket of a live ticket (tickets leave the registry, under this lock,
        // before their sockets close); shutting it down only ends its streams.
        crate::sys::fd::shutdown(fd, libc::SHUT_RDWR);
        true
    }

    /// Connections waiting now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_age.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}

/// One connection's place in [`Waiting`]; leaves it when dropped.
pub(crate) struct Ticket<'a> {
    waiting: &'a Waiting,
    fd: RawFd,
    number: u64,
    /// Since when the connection has waited on its client, as the registry has it.
    since: Option<Instant>,
    /// Its socket was shut down to make room: it never enters the registry again.
    shut_down: bool,
}

impl Ticket<'_> {
    /// The connection waits on its client since `since` (`None`: the server works for it). The
    /// registry is touched only when that changes.
    pub fn set(&mut self, since: Option<Instant>) {
        if since == self.since || self.shut_down {
            return;
        }
        let mut by_age = self.waiting.by_age.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = self.since.take() {
            if by_age.remove(&(old, self.number)).is_none() {
                // Shut down already: it stays out, and its thread is about to see why.
                self.shut_down = true;
                return;
            }
        }
        if let Some(new) = since {
            by_age.insert((new, self.number), self.fd);
        }
        self.since = since;
    }
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        self.set(None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsRawFd;
    use std::time::Duration;

    fn pair(listener: &TcpListener) -> (TcpStream, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn the_longest_wait_is_shut_down_and_working_connections_are_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let waiting = Waiting::default();
        let t0 = Instant::now();
        let (_c1, mut old) = pair(&listener);
        let (_c2, mut young) = pair(&listener);
        let (_c3, mut busy) = pair(&listener);
        let mut old_ticket = waiting.ticket(old.as_raw_fd());
        let mut young_ticket = waiting.ticket(young.as_raw_fd());
        let mut busy_ticket = waiting.ticket(busy.as_raw_fd());
        old_ticket.set(Some(t0));
        young_ticket.set(Some(t0 + Duration::from_secs(1)));
        busy_ticket.set(Some(t0));
        busy_ticket.set(None);
        assert_eq!(waiting.len(), 2);

        assert!(waiting.shut_down_longest());
        let mut buf = [0u8; 1];
        assert_eq!(old.read(&mut buf).unwrap(), 0, "the oldest wait sees its end of stream");
        assert_eq!(waiting.len(), 1);
        old_ticket.set(None);
        old_ticket.set(Some(t0 + Duration::from_secs(5)));
        assert_eq!(waiting.len(), 1, "a connection shut down does not come back");

        assert!(waiting.shut_down_longest());
        assert_eq!(young.read(&mut buf).unwrap(), 0);
        assert!(!waiting.shut_down_longest(), "nothing waits: the one working stays");
        busy.set_nonblocking(true).unwrap();
        assert!(busy.read(&mut buf).is_err(), "still open, nothing to read");
        drop((old_ticket, young_ticket, busy_ticket));
        assert_eq!(waiting.len(), 0);
    }
}
