//! The epoll engine: one edge-triggered event loop per worker thread, thread per core.
//!
//! Each worker owns an epoll instance, its own `SO_REUSEPORT` listener, its connections, a read
//! buffer and a copy buffer; nothing is shared between loops but the connection count and the
//! shutdown signal. Sockets are registered once for input and output edges and never modified, so
//! a keep-alive request costs a read, a write (plus `sendfile`) and its share of `epoll_wait`.
//! Deadlines are checked by a sweep every [`SWEEP`] rather than a timer per connection: at 10,000
//! connections a sweep is a few tens of microseconds, cheaper than a timer system call each.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use slab::Slab;
use sluice_proto::{Clock, Session};

use crate::connection::{sort_deadlines, Connection, Pump};
use crate::counters::{Counters, Event, Shard, Syscall};
use crate::listener::accept;
use crate::pool::{CpuPool, Delivery, Mailbox};
use crate::send::{PipePool, SendBuffers};
use crate::{
    cvt, new_clock, per_listener, read_clock, EngineConfig, EngineError, Listeners, Service, Shutdown,
};

const LISTENER: u64 = u64::MAX;
const SHUTDOWN: u64 = u64::MAX - 1;
const MAILBOX: u64 = u64::MAX - 2;
/// Longest sleep between deadline sweeps. The loop wakes earlier for any nearer deadline (a
/// `latency?ms=` reply is due to the millisecond), so this only bounds how stale the sweep's
/// view of far deadlines (idle connections) can get.
const SWEEP: Duration = Duration::from_millis(250);
const READ_BUFFER: usize = 64 * 1024;
const COPY_BUFFER: usize = 64 * 1024;
const EVENTS: usize = 1024;
/// Reads one connection may make per wake-up before the loop serves the others: a client that
/// always fills the buffer (pipelined uploads over loopback) must not hold the loop. 16 reads of
/// 64 KiB is 1 MiB per turn.
const READS_PER_TURN: usize = 16;

pub(crate) fn run<S: Service>(
    config: &EngineConfig,
    listeners: Listeners,
    service: Arc<S>,
    shutdown: &Shutdown,
    counters: &Counters,
) -> Result<(), EngineError> {
    let open = AtomicUsize::new(0);
    let pool = CpuPool::start(config.cpu_workers, config.cpu_queue)?;
    let pool = &pool;
    per_listener("epoll", listeners, |index, listener| {
        Worker::new(config, listener, &*service, shutdown, &open, counters.shard(index), pool)?.run();
        Ok(())
    })
}

struct Worker<'a, S: Service> {
    epoll: OwnedFd,
    listener: Option<TcpListener>,
    service: &'a S,
    config: &'a EngineConfig,
    shutdown: &'a Shutdown,
    open: &'a AtomicUsize,
    counters: &'a Shard,
    pool: &'a CpuPool,
    mailbox: Arc<Mailbox>,
    deliveries: Vec<Delivery>,
    next_id: u64,
    /// When the loop must next sweep deadlines: the nearest deadline, at most `SWEEP` away.
    next_wake: Instant,
    conns: Slab<Connection<S::Session>>,
    clock: Clock,
    read_buf: Box<[u8]>,
    copy_buf: Box<[u8]>,
    pipes: PipePool,
    draining_until: Option<Instant>,
    /// Reused by the sweep so it allocates nothing.
    due: Vec<usize>,
    /// Connections that used their read budget with input still waiting; driven next turn.
    ready: Vec<usize>,
    /// Accepting stopped on an error (EMFILE): connections may wait in the backlog with no new
    /// edge coming, so the loop retries when a descriptor is freed and on every sweep.
    accept_pending: bool,
}

impl<'a, S: Service> Worker<'a, S> {
    fn new(
        config: &'a EngineConfig,
        listener: TcpListener,
        service: &'a S,
        shutdown: &'a Shutdown,
        open: &'a AtomicUsize,
        counters: &'a Shard,
        pool: &'a CpuPool,
    ) -> Result<Self, EngineError> {
        let setup = |what| move |source| EngineError::Setup { what, source };
        listener.set_nonblocking(true).map_err(setup("listener O_NONBLOCK"))?;
        // SAFETY: epoll_create1 takes no pointers; the result is checked.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) }).map_err(setup("epoll_create1"))?;
        // SAFETY: fd is a fresh descriptor we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        let worker = Worker {
            epoll,
            listener: None,
            service,
            config,
            shutdown,
            open,
            counters,
            pool,
            mailbox: Mailbox::new()?,
            deliveries: Vec::new(),
            next_id: 0,
            next_wake: Instant::now() + SWEEP,
            conns: Slab::with_capacity(1024),
            clock: new_clock(),
            read_buf: vec![0; READ_BUFFER].into_boxed_slice(),
            copy_buf: vec![0; COPY_BUFFER].into_boxed_slice(),
            pipes: PipePool::default(),
            draining_until: None,
            due: Vec::new(),
            ready: Vec::new(),
            accept_pending: false,
        };
        worker
            .register(listener.as_raw_fd(), libc::EPOLLIN | libc::EPOLLET, LISTENER)
            .map_err(setup("epoll_ctl listener"))?;
        worker.register(shutdown.fd(), libc::EPOLLIN, SHUTDOWN).map_err(setup("epoll_ctl shutdown"))?;
        worker.register(worker.mailbox.fd(), libc::EPOLLIN, MAILBOX).map_err(setup("epoll_ctl mailbox"))?;
        Ok(Worker { listener: Some(listener), ..worker })
    }

    fn register(&self, fd: RawFd, events: i32, token: u64) -> std::io::Result<()> {
        self.counters.syscall(Syscall::EpollCtl);
        let mut ev = libc::epoll_event { events: events as u32, u64: token };
        // SAFETY: ev is a live epoll_event; both descriptors are open.
        cvt(unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) }).map(|_| ())
    }

    fn deregister(&self, fd: RawFd) {
        self.counters.syscall(Syscall::EpollCtl);
        // SAFETY: EPOLL_CTL_DEL ignores the event pointer on kernels since 2.6.9.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, std::ptr::null_mut()) };
    }

    fn run(mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        loop {
            if let Some(until) = self.draining_until {
                if self.conns.is_empty() || self.clock.now() >= until {
                    break;
                }
            }
            let wait = self.next_wake.saturating_duration_since(self.clock.now());
            // With nothing to time out, sleep until something happens; idle pipes still need the
            // sweep that releases them.
            let timeout = if !self.ready.is_empty() {
                0
            } else if self.conns.is_empty()
                && self.draining_until.is_none()
                && self.pipes.is_empty()
                && !self.accept_pending
            {
                -1
            } else {
                // Rounded up: waking a little late is harmless, waking early just spins.
                wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
            };
            self.counters.syscall(Syscall::EpollWait);
            // SAFETY: events has EVENTS initialised slots.
            let n = unsafe {
                libc::epoll_wait(self.epoll.as_raw_fd(), events.as_mut_ptr(), EVENTS as i32, timeout)
            };
            read_clock(&mut self.clock);
            for key in std::mem::take(&mut self.ready) {
                self.drive(key);
            }
            for ev in events.iter().take(n.max(0) as usize) {
                match ev.u64 {
                    LISTENER => self.accept_all(),
                    SHUTDOWN => self.begin_shutdown(),
                    MAILBOX => self.deliver_jobs(),
                    key => {
                        if let Some(conn) = self.conns.get_mut(key as usize) {
                            let input = libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR;
                            conn.maybe_readable |= ev.events & input as u32 != 0;
                        }
                        self.drive(key as usize)
                    }
                }
            }
            if self.clock.now() >= self.next_wake {
                self.sweep();
            }
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.close(key);
        }
    }

    fn accept_all(&mut self) {
        self.accept_pending = false;
        let Some(listener) = &self.listener else { return };
        let listen_fd = listener.as_raw_fd();
        loop {
            match accept(listen_fd, true, self.counters) {
                Ok((stream, peer)) => {
                    if self.open.fetch_add(1, Ordering::Relaxed) >= self.config.max_connections {
                        self.open.fetch_sub(1, Ordering::Relaxed);
                        self.counters.add(Event::ConnectionsRejected, 1);
                        self.counters.add(Event::ConnectionsClosed, 1);
                        self.counters.syscall(Syscall::Close);
                        continue;
                    }
                    let key = self.conns.vacant_key();
                    let events = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
                    if self.register(stream.as_raw_fd(), events, key as u64).is_err() {
                        self.open.fetch_sub(1, Ordering::Relaxed);
                        self.counters.add(Event::ConnectionsClosed, 1);
                        self.counters.syscall(Syscall::Close);
                        continue;
                    }
                    let session = self.service.session(peer, &self.clock);
                    let mut conn = Connection::new(stream, session, &self.clock);
                    self.next_id += 1;
                    conn.id = self.next_id;
                    self.conns.insert(conn);
                    // The first request often arrives with the handshake; the registration's
                    // initial edge will deliver it on the next wait.
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR | libc::ECONNABORTED | libc::EPROTO) => continue,
                    Some(libc::EMFILE | libc::ENFILE) => {
                        self.accept_pending = true;
                        self.counters.add(Event::AcceptErrors, 1);
                        tracing::warn!("accept: {e}; connection left in the backlog");
                        break;
                    }
                    Some(libc::EAGAIN) => break,
                    // Anything else (TCP_NODELAY failing on a connection reset in the backlog,
                    // ENOBUFS, ...) may leave others queued: look again on the next sweep.
                    _ => {
                        self.accept_pending = true;
                        break;
                    }
                },
            }
        }
    }

    fn begin_shutdown(&mut self) {
        if self.draining_until.is_some() {
            return;
        }
        self.deregister(self.shutdown.fd());
        if let Some(listener) = self.listener.take() {
            self.deregister(listener.as_raw_fd());
        }
        self.draining_until = Some(self.clock.now() + self.config.shutdown_grace);
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            let conn = &mut self.conns[key];
            if conn.lingering.is_none() && conn.session.on_shutdown(&mut conn.out) {
                self.close(key);
            } else {
                self.drive(key);
            }
        }
    }

    /// Moves one connection forward after an event or a deadline.
    fn drive(&mut self, key: usize) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let keep = if conn.lingering.is_some() {
            conn.linger_read(&mut self.read_buf, self.counters)
        } else {
            let mut buffers =
                SendBuffers { copy: &mut self.copy_buf, pipes: &mut self.pipes, counters: self.counters };
            let mut reads = 0;
            loop {
                match conn.pump(&self.clock, self.config.send, &mut buffers) {
                    Pump::Job(job) => {
                        if self.pool.submit(job, key, conn.id, &self.mailbox).is_err() {
                            conn.job_refused(&self.clock);
                        }
                    }
                    Pump::Waiting => break true,
                    Pump::Blocked => break true,
                    Pump::Failed => break false,
                    Pump::Finished => {
                        break conn.start_linger(&self.clock, self.counters)
                            && conn.linger_read(&mut self.read_buf, self.counters)
                    }
                    Pump::NeedInput if !conn.maybe_readable => break true,
                    Pump::NeedInput if reads == READS_PER_TURN => {
                        self.ready.push(key);
                        break true;
                    }
                    Pump::NeedInput => {
                        reads += 1;
                        match conn.read_and_feed(&mut self.read_buf, &self.clock, self.counters) {
                            Ok(_) => {}
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                                conn.maybe_readable = false;
                                break true;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(_) => break false,
                        }
                    }
                }
            }
        };
        if !keep {
            self.close(key);
        } else if let Some(d) = self.conns.get(key).and_then(|c| c.deadline(self.config.send_timeout)) {
            self.next_wake = self.next_wake.min(d);
        }
    }

    /// Hands finished CPU jobs back to their connections (if those are still the same ones).
    fn deliver_jobs(&mut self) {
        self.mailbox.collect(&mut self.deliveries);
        let mut deliveries = std::mem::take(&mut self.deliveries);
        for (key, id, output) in deliveries.drain(..) {
            if let Some(conn) = self.conns.get_mut(key).filter(|c| c.id == id) {
                conn.job_done(output, &self.clock);
                self.drive(key);
            }
        }
        self.deliveries = deliveries;
    }

    fn sweep(&mut self) {
        self.pipes.trim();
        if self.accept_pending {
            self.accept_all();
        }
        let now = self.clock.now();
        let timeout = self.config.send_timeout;
        let deadlines = self.conns.iter().map(|(key, conn)| (key, conn.deadline(timeout)));
        self.next_wake = sort_deadlines(deadlines, now, now + SWEEP, &mut self.due);
        for i in 0..self.due.len() {
            let key = self.due[i];
            let conn = &mut self.conns[key];
            let stalled_send = conn.lingering.is_none() && !conn.out.is_empty();
            if conn.on_deadline(&self.clock) {
                self.drive(key);
            } else {
                if stalled_send {
                    self.counters.add(Event::SendTimeouts, 1);
                }
                self.close(key);
            }
        }
    }

    fn close(&mut self, key: usize) {
        if self.conns.try_remove(key).is_some() {
            // Closing the descriptor removes it from the epoll set.
            self.open.fetch_sub(1, Ordering::Relaxed);
            self.counters.syscall(Syscall::Close);
            self.counters.add(Event::ConnectionsClosed, 1);
            if self.accept_pending {
                self.accept_all();
            }
        }
    }
}
