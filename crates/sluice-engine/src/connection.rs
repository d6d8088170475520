//! One accepted connection as every engine drives it: socket, session, outbox, buffered input.
//!
//! Owns the order of work on a connection, identical on every engine: send what is queued, offer
//! buffered input to the session, and only then ask the engine for more input. Engines differ only
//! in how they wait (epoll edge, blocking `poll`); that waiting is theirs, not this module's.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use sluice_proto::{Clock, Job, JobOutput, Outbox, Session};

use crate::config::SendStrategy;
use crate::counters::{Event, Shard, Syscall};
use crate::send::{flush, Flush, Pipe, SendBuffers, SEND_TURN};
use crate::sys::{fd as sys_fd, socket};

/// How long a closing connection keeps reading (and discarding) what the client still sends, so
/// that the kernel does not answer unread data with a reset that destroys our last response
/// before the client reads it (nginx's lingering close, for the same reason).
pub(crate) const LINGER: Duration = Duration::from_secs(2);
/// Most bytes read and discarded while lingering.
const LINGER_MAX_BYTES: usize = 1 << 20;

/// What a connection needs next.
pub(crate) enum Pump {
    /// The session has CPU-bound work to run off the loop; give it back with `job_done`.
    Job(Job),
    /// The session waits for a job or its own deadline and takes no input meanwhile.
    Waiting,
    /// Everything queued is sent and the session waits for more bytes.
    NeedInput,
    /// The socket cannot take more now.
    Blocked,
    /// The connection used its turn's send budget (`send::SEND_TURN`) with more to send and
    /// room likely left: serve the other ready connections, then come back without waiting.
    Yielded,
    /// The response stream is over: close after lingering.
    Finished,
    /// The socket failed or the peer is gone: close now.
    Failed,
}

/// A connection's state, whatever engine runs it. `T` is the socket as the engine holds it (a
/// std `TcpStream`, or tokio's, whose readiness tokio tracks).
pub(crate) struct Connection<S, T = TcpStream> {
    /// Tells this connection from a later one in the same slab slot, for job deliveries.
    pub id: u64,
    pub stream: T,
    pub session: S,
    pub out: Outbox,
    input: Vec<u8>,
    offer: bool,
    /// Last time bytes moved either way; the send deadline counts from here.
    pub last_progress: Instant,
    pub peer_closed: bool,
    /// Whether the socket may hold unread bytes. A read shorter than the buffer empties the
    /// receive queue, so an edge-triggered engine can wait for the next edge instead of paying a
    /// `read` that returns `EAGAIN` after every request.
    pub maybe_readable: bool,
    /// The peer's end of stream (or a hang-up) has been signalled and not yet read. A short read
    /// then does not mean the receive queue is empty: the end of stream is still to be read,
    /// and no further edge will announce it.
    pub hangup_pending: bool,
    /// The pipe this connection splices through, held only while bytes are in it.
    pipe: Option<Pipe>,
    /// Set once the connection is lingering: until when, and how much it has discarded.
    pub lingering: Option<(Instant, usize)>,
    /// The end of the shutdown grace, for engines that watch shutdown per connection.
    grace_until: Option<Instant>,
    /// `Session::on_close` for `S`, kept here so that `Drop` (which cannot require `S: Session`
    /// of a struct that does not) calls it.
    on_close: fn(&mut S, &Outbox),
}

impl<S: Session, T: AsRawFd> Connection<S, T> {
    pub fn new(stream: T, session: S, clock: &Clock) -> Self {
        Connection {
            id: 0,
            stream,
            session,
            out: Outbox::new(),
            input: Vec::new(),
            offer: false,
            last_progress: clock.now(),
            peer_closed: false,
            maybe_readable: true,
            hangup_pending: false,
            pipe: None,
            lingering: None,
            grace_until: None,
            on_close: S::on_close,
        }
    }

    /// Sends queued output and offers buffered input, until the connection needs something from
    /// outside: more input, writability, a job run, or closing.
    ///
    /// One call is one turn: it writes at most [`SEND_TURN`] bytes, whether of one response or of
    /// several pipelined ones, and then yields.
    pub fn pump(&mut self, clock: &Clock, strategy: SendStrategy, buffers: &mut SendBuffers<'_>) -> Pump {
        let mut sent = 0;
        loop {
            if !self.out.is_empty() {
                let fd = self.stream.as_raw_fd();
                // In-memory bytes go out whole, so a turn may pass the budget by those.
                let left = SEND_TURN.saturating_sub(sent);
                match flush(fd, &mut self.out, strategy, buffers, &mut self.pipe, left) {
                    Ok((n, done)) => {
                        sent += n;
                        if n > 0 {
                            self.last_progress = clock.now();
                        }
                        match done {
                            Flush::Blocked => return Pump::Blocked,
                            Flush::Yielded => return Pump::Yielded,
                            Flush::Drained => {}
                        }
                        if let Some(pipe) = self.pipe.take() {
                            buffers.pipes.put(pipe);
                        }
                        self.drained(clock);
                    }
                    Err(_) => {
                        buffers.counters.add(Event::SocketErrors, 1);
                        return Pump::Failed;
                    }
                }
            }
            if let Some(next) = self.next_step(clock) {
                return next;
            }
        }
    }

    /// The outbox has drained: idle timers start now, and held-back input may follow.
    pub fn drained(&mut self, clock: &Clock) {
        self.session.on_drained(clock);
        self.offer = true;
    }

    /// The session's half of [`Connection::pump`], for an outbox with nothing left to send:
    /// what the connection needs next, or `None` when the session queued output to send first.
    /// Engines whose sends complete asynchronously (io_uring) call it directly.
    pub fn next_step(&mut self, clock: &Clock) -> Option<Pump> {
        loop {
            self.session.refill(&mut self.out, clock);
            if !self.out.is_empty() {
                return None;
            }
            if self.out.closing() {
                return Some(Pump::Finished);
            }
            if let Some(job) = self.session.take_job() {
                return Some(Pump::Job(job));
            }
            if !self.session.wants_input() {
                return Some(Pump::Waiting);
            }
            if self.offer && !self.input.is_empty() {
                self.offer = false;
                let used = self.session.receive(&self.input, &mut self.out, clock);
                self.input.drain(..used);
                if !self.out.is_empty() {
                    return None;
                }
                if self.out.closing() || !self.session.wants_input() {
                    continue;
                }
            }
            return Some(if self.peer_closed { Pump::Failed } else { Pump::NeedInput });
        }
    }

    /// Keeps received bytes for later, unoffered: for engines whose receives complete while the
    /// session is not asking for input (epoll leaves such bytes in the kernel instead).
    pub fn stash(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    /// Bytes received and not yet consumed by the session.
    pub fn buffered(&self) -> usize {
        self.input.len()
    }

    /// Drops unconsumed input: it dies with the response stream when the connection closes.
    pub fn discard_input(&mut self) {
        self.input = Vec::new();
    }

    /// Hands a finished job's output to the session and lets the rest of its input follow.
    pub fn job_done(&mut self, output: JobOutput, clock: &Clock) {
        self.session.job_done(output, &mut self.out, clock);
        self.offer = true;
    }

    /// Tells the session its job could not be queued.
    pub fn job_refused(&mut self, clock: &Clock) {
        self.session.job_refused(&mut self.out, clock);
        self.offer = true;
    }

    /// Hands freshly read bytes to the session, keeping what it does not consume yet.
    pub fn feed(&mut self, bytes: &[u8], clock: &Clock) {
        self.last_progress = clock.now();
        if self.input.is_empty() {
            // The common case: a whole request in one read, consumed straight from the loop's
            // buffer without copying it into the connection.
            let used = self.session.receive(bytes, &mut self.out, clock);
            self.input.extend_from_slice(&bytes[used..]);
        } else {
            self.input.extend_from_slice(bytes);
            let used = self.session.receive(&self.input, &mut self.out, clock);
            self.input.drain(..used);
        }
        if self.input.capacity() > 64 * 1024 && self.input.len() < 4 * 1024 {
            // Idle connections should not keep the high-water mark of a burst.
            self.input.shrink_to(4 * 1024);
        }
    }

    /// Reads once from the socket into `buf` and feeds the session.
    pub fn read_and_feed(&mut self, buf: &mut [u8], clock: &Clock, counters: &Shard) -> io::Result<usize> {
        counters.syscall(Syscall::Read);
        let n = socket::read(self.stream.as_raw_fd(), buf)?;
        counters.add(Event::BytesIn, n as u64);
        self.maybe_readable = n == buf.len() || (n > 0 && self.hangup_pending);
        if n == 0 {
            self.peer_closed = true;
        } else {
            self.feed(&buf[..n], clock);
        }
        Ok(n)
    }

    /// Starts a lingering close: no more writes, keep reading until the peer closes or `LINGER`.
    /// Returns false when the connection can be closed at once.
    pub fn start_linger(&mut self, clock: &Clock, counters: &Shard) -> bool {
        if self.peer_closed {
            return false;
        }
        counters.syscall(Syscall::Shutdown);
        sys_fd::shutdown(self.stream.as_raw_fd(), libc::SHUT_WR);
        self.lingering = Some((clock.now() + LINGER, 0));
        true
    }

    /// Reads and discards while lingering; returns true while the connection should stay open.
    pub fn linger_read(&mut self, buf: &mut [u8], counters: &Shard) -> bool {
        if self.lingering.is_none() {
            return false;
        }
        loop {
            counters.syscall(Syscall::Read);
            // MSG_DONTWAIT so the same code never blocks on the threads engine's blocking sockets.
            let n = socket::recv_raw(self.stream.as_raw_fd(), buf, libc::MSG_DONTWAIT);
            match n {
                0 => return false,
                n if n > 0 => {
                    if !self.discard_lingering(n as usize) {
                        return false;
                    }
                }
                _ => {
                    let err = io::Error::last_os_error();
                    return match err.kind() {
                        io::ErrorKind::Interrupted => continue,
                        io::ErrorKind::WouldBlock => true,
                        _ => false,
                    };
                }
            }
        }
    }

    /// Counts `n` bytes read and thrown away while lingering; returns false once the client has
    /// sent more than a lingering close is worth waiting through (the connection then closes).
    /// Engines that receive on their own (io_uring) call it for each completion.
    pub fn discard_lingering(&mut self, n: usize) -> bool {
        let Some((until, discarded)) = self.lingering else { return false };
        let discarded = discarded.saturating_add(n);
        self.lingering = Some((until, discarded));
        discarded <= LINGER_MAX_BYTES
    }

    /// When the engine must next look at this connection if nothing happens on its socket.
    pub fn deadline(&self, send_timeout: Duration) -> Option<Instant> {
        if let Some((until, _)) = self.lingering {
            Some(until)
        } else if !self.out.is_empty() {
            Some(self.last_progress + send_timeout)
        } else {
            self.session.deadline()
        }
    }

    /// Handles a passed deadline; returns false when the connection is to be closed at once
    /// (a stalled send, counted as a send timeout, or an expired linger), true when the session
    /// queued a last word to send (a 408, say) or simply moved on.
    pub fn expire(&mut self, clock: &Clock, counters: &Shard) -> bool {
        if self.lingering.is_some() {
            return false;
        }
        if !self.out.is_empty() {
            counters.add(Event::SendTimeouts, 1);
            return false;
        }
        self.session.on_deadline(&mut self.out, clock);
        true
    }

    /// Shutdown has begun and this connection's own engine watches it (threads, tokio): the grace
    /// period starts now. Returns false when the session closes at once (nothing in flight).
    pub fn begin_grace(&mut self, clock: &Clock, grace: Duration) -> bool {
        self.grace_until = Some(clock.now() + grace);
        !(self.lingering.is_none() && self.session.on_shutdown(&mut self.out))
    }

    /// Whether shutdown has begun for this connection.
    pub fn in_grace(&self) -> bool {
        self.grace_until.is_some()
    }

    /// How long a blocking wait on this connection may last: its own deadline or the end of the
    /// shutdown grace, whichever is first.
    pub fn wait_deadline(&self, send_timeout: Duration) -> Option<Instant> {
        match (self.deadline(send_timeout), self.grace_until) {
            (Some(d), Some(g)) => Some(d.min(g)),
            (d, g) => d.or(g),
        }
    }

    /// A blocking wait ended at [`Connection::wait_deadline`]: returns false when the connection
    /// is to be closed (the grace is over, or [`Connection::expire`] says so).
    pub fn wait_timed_out(&mut self, clock: &Clock, send_timeout: Duration, counters: &Shard) -> bool {
        let now = clock.now();
        if self.grace_until.is_some_and(|g| now >= g) {
            return false;
        }
        match self.deadline(send_timeout) {
            Some(d) if d <= now => self.expire(clock, counters),
            _ => true,
        }
    }
}

/// Every engine's connections end here, whatever ended them (the stream finished, the peer left,
/// a deadline, the shutdown grace): the session learns how much of its output was sent, so that a
/// response cut short is told from a whole one in one place for all four engines.
impl<S, T> Drop for Connection<S, T> {
    fn drop(&mut self) {
        (self.on_close)(&mut self.session, &self.out);
    }
}
