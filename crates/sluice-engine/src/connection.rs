//! One accepted connection as every engine drives it: socket, session, outbox, buffered input.
//!
//! Owns the order of work on a connection, identical on every engine: send what is queued, offer
//! buffered input to the session, and only then ask the engine for more input. Engines differ only
//! in how they wait (epoll edge, blocking `poll`); that waiting is theirs, not this module's.

use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use sluice_proto::kernel_tls::{KernelTlsRefusal, RecordAction};
use sluice_proto::{Clock, Job, JobOutput, Outbox, Session};

use crate::config::SendStrategy;
use crate::counters::{Event, Shard, Syscall};
use crate::send::{flush, Flush, Pipe, SendBuffers, SEND_TURN};
use crate::sys::{fd as sys_fd, ktls, socket};

/// TLS content types (RFC 8446 section 5.1) the engine tells apart on a kTLS socket.
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// The close_notify alert: level warning, description 0.
const ALERT_WARNING: u8 = 1;
const CLOSE_NOTIFY: u8 = 0;

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
    /// The session would hand its TLS record layer to the kernel, everything queued being
    /// sent: [`Connection::switch_to_kernel_tls`] when no receive is in flight.
    KernelTls,
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
    /// The kernel encrypts and decrypts this connection's TLS records (kTLS): what the engine
    /// reads and writes is the session's plain bytes.
    pub kernel_tls: bool,
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
            kernel_tls: false,
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
            match self.next_step(clock) {
                None => {}
                Some(Pump::KernelTls) if !self.switch_to_kernel_tls(buffers.counters, clock) => {
                    return Pump::Failed
                }
                Some(Pump::KernelTls) => {}
                Some(next) => return next,
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
            if self.session.wants_kernel_tls() {
                return Some(Pump::KernelTls);
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
                self.offer_held_input(clock);
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

    /// Offers the bytes held back from the session to it again, keeping what it does not take.
    fn offer_held_input(&mut self, clock: &Clock) {
        let used = self.session.receive(&self.input, &mut self.out, clock);
        self.input.drain(..used);
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
        let n = match socket::read(self.stream.as_raw_fd(), buf) {
            Err(e) if self.kernel_tls && e.raw_os_error() == Some(libc::EIO) => {
                return self.read_kernel_record(buf, clock, counters)
            }
            other => other?,
        };
        counters.add(Event::BytesIn, n as u64);
        self.maybe_readable = n == buf.len() || (n > 0 && self.hangup_pending);
        if n == 0 {
            self.peer_closed = true;
        } else {
            self.feed(&buf[..n], clock);
        }
        Ok(n)
    }

    /// Moves the session's TLS record layer into the kernel: attaches the `tls` ULP, takes the
    /// session's keys and gives them to the kernel. Called with the outbox empty. Bytes received
    /// ahead of the switch (io_uring's receive can complete while it is being cancelled, with the
    /// client's request right behind its Finished) go to the session first, which decrypts whole
    /// records in user space; only input it cannot take (part of a record the kernel would never
    /// see) keeps the connection in user space. Returns false when the connection cannot go on
    /// (the kernel refused keys that have left rustls).
    pub fn switch_to_kernel_tls(&mut self, counters: &Shard, clock: &Clock) -> bool {
        let fd = self.stream.as_raw_fd();
        if !self.input.is_empty() {
            self.offer_held_input(clock);
            if !self.out.is_empty() {
                // An answer to send under the user-space keys first; the switch is asked again.
                return true;
            }
        }
        if !self.input.is_empty() {
            self.session.kernel_tls_result(Err(KernelTlsRefusal::InputPending));
            return true;
        }
        counters.syscall(Syscall::Setsockopt);
        if let Err(e) = ktls::attach_ulp(fd) {
            tracing::debug!("kernel TLS: TCP_ULP refused: {e}");
            self.session.kernel_tls_result(Err(KernelTlsRefusal::Ulp));
            return true;
        }
        let Some(keys) = self.session.kernel_tls_keys(&mut self.out) else { return true };
        counters.syscall(Syscall::Setsockopt);
        counters.syscall(Syscall::Setsockopt);
        match ktls::set_keys(fd, ktls::TLS_TX, &keys.tx)
            .and_then(|()| ktls::set_keys(fd, ktls::TLS_RX, &keys.rx))
        {
            Ok(()) => {
                self.kernel_tls = true;
                self.session.kernel_tls_result(Ok(()));
                true
            }
            Err(e) => {
                tracing::debug!("kernel TLS: keys refused: {e}");
                self.session.kernel_tls_result(Err(KernelTlsRefusal::Keys));
                false
            }
        }
    }

    /// A kTLS socket's read failed with `EIO`: the next record is not application data. Reads
    /// it with its content type and lets the session say what it means: the peer's close_notify
    /// (read as the end of the stream), a key update (new keys for the kernel, and an answer
    /// when asked), or anything else, which ends the connection.
    pub fn read_kernel_record(
        &mut self,
        buf: &mut [u8],
        clock: &Clock,
        counters: &Shard,
    ) -> io::Result<usize> {
        let fd = self.stream.as_raw_fd();
        counters.syscall(Syscall::Read);
        let (content_type, n) = ktls::recv_record(fd, buf)?;
        if content_type == APPLICATION_DATA {
            counters.add(Event::BytesIn, n as u64);
            if n == 0 {
                self.peer_closed = true;
            } else {
                self.feed(&buf[..n], clock);
            }
            return Ok(n);
        }
        match self.session.kernel_tls_record(content_type, &buf[..n]) {
            RecordAction::PeerClosed => {
                tracing::debug!("kernel TLS: the peer's close_notify");
                self.peer_closed = true;
                self.maybe_readable = false;
                Ok(0)
            }
            RecordAction::Rekey { rx, answer } => {
                counters.syscall(Syscall::Setsockopt);
                ktls::set_keys(fd, ktls::TLS_RX, &rx)?;
                if let Some((key_update, tx)) = answer {
                    // Sent under the old keys, ahead of anything still queued here, which goes
                    // out under the new ones.
                    counters.syscall(Syscall::Write);
                    ktls::send_record(fd, HANDSHAKE, &key_update)?;
                    counters.syscall(Syscall::Setsockopt);
                    ktls::set_keys(fd, ktls::TLS_TX, &tx)?;
                }
                // The record was consumed: the caller reads on.
                self.maybe_readable = true;
                Err(io::Error::from(io::ErrorKind::Interrupted))
            }
            RecordAction::Close => Err(io::Error::new(io::ErrorKind::InvalidData, "TLS record refused")),
        }
    }

    /// Starts a lingering close: no more writes, keep reading until the peer closes or `LINGER`.
    /// Returns false when the connection can be closed at once.
    pub fn start_linger(&mut self, clock: &Clock, counters: &Shard) -> bool {
        if self.peer_closed {
            return false;
        }
        if self.kernel_tls {
            // The close_notify alert user-space TLS would have queued; best effort, as the
            // shutdown itself.
            counters.syscall(Syscall::Write);
            let _ = ktls::send_record(self.stream.as_raw_fd(), ALERT, &[ALERT_WARNING, CLOSE_NOTIFY]);
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

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};

    use sluice_proto::kernel_tls::{KernelTlsKeys, TlsCipher, TrafficKeys};

    use super::*;
    use crate::counters::Counters;

    /// A session that asks for kernel TLS once and records how the engine answered.
    struct Asks {
        result: Option<Result<(), KernelTlsRefusal>>,
        /// Whether received bytes are taken (whole records) or kept (part of one).
        takes_input: bool,
    }

    impl Session for Asks {
        fn receive(&mut self, input: &[u8], _out: &mut Outbox, _clock: &Clock) -> usize {
            if self.takes_input {
                input.len()
            } else {
                0
            }
        }
        fn deadline(&self) -> Option<Instant> {
            None
        }
        fn on_drained(&mut self, _clock: &Clock) {}
        fn on_deadline(&mut self, out: &mut Outbox, _clock: &Clock) {
            out.close_after_flush();
        }
        fn on_shutdown(&mut self, _out: &mut Outbox) -> bool {
            true
        }
        fn wants_kernel_tls(&self) -> bool {
            self.result.is_none()
        }
        fn kernel_tls_keys(&mut self, _out: &mut Outbox) -> Option<KernelTlsKeys> {
            let keys = TrafficKeys {
                tls13: true,
                cipher: TlsCipher::Aes128Gcm,
                key: vec![1; 16],
                iv: [2; 12],
                seq: 0,
            };
            Some(KernelTlsKeys { tx: keys.clone(), rx: keys })
        }
        fn kernel_tls_result(&mut self, result: Result<(), KernelTlsRefusal>) {
            self.result = Some(result);
        }
    }

    fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
        let client = TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        (server, client)
    }

    #[test]
    fn the_switch_happens_where_the_kernel_has_tls_and_is_refused_where_it_has_not() {
        let clock = Clock::new(Instant::now(), 0);
        let counters = Counters::new();
        let (server, _client) = connected();
        let mut conn = Connection::new(server, Asks { result: None, takes_input: true }, &clock);
        assert!(matches!(conn.next_step(&clock), Some(Pump::KernelTls)));
        assert!(conn.switch_to_kernel_tls(counters.shard(0), &clock));
        let has_tls = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
            .is_ok_and(|s| s.split_whitespace().any(|u| u == "tls"));
        match conn.session.result {
            Some(Ok(())) => assert!(conn.kernel_tls),
            // No `tls` module, and none loaded on demand: the connection stays plain TCP.
            Some(Err(KernelTlsRefusal::Ulp)) => assert!(!has_tls && !conn.kernel_tls),
            other => panic!("{other:?}"),
        }
        assert!(!matches!(conn.next_step(&clock), Some(Pump::KernelTls)), "asked once");
    }

    #[test]
    fn bytes_read_ahead_of_the_switch_that_the_session_cannot_take_keep_it_in_user_space() {
        let clock = Clock::new(Instant::now(), 0);
        let counters = Counters::new();
        let (server, _client) = connected();
        let mut conn = Connection::new(server, Asks { result: None, takes_input: false }, &clock);
        conn.stash(b"\x17\x03\x03");
        assert!(conn.switch_to_kernel_tls(counters.shard(0), &clock));
        assert_eq!(conn.session.result, Some(Err(KernelTlsRefusal::InputPending)));
        assert!(!conn.kernel_tls);
    }

    #[test]
    fn bytes_read_ahead_of_the_switch_go_to_the_session_and_the_switch_goes_on() {
        let clock = Clock::new(Instant::now(), 0);
        let counters = Counters::new();
        let (server, _client) = connected();
        let mut conn = Connection::new(server, Asks { result: None, takes_input: true }, &clock);
        conn.stash(b"a whole record");
        assert!(conn.switch_to_kernel_tls(counters.shard(0), &clock));
        assert_eq!(conn.buffered(), 0);
        assert!(
            !matches!(conn.session.result, Some(Err(KernelTlsRefusal::InputPending))),
            "{:?}",
            conn.session.result
        );
    }
}
