//! The threads engine: blocking sockets, one thread per connection at a time.
//!
//! This is the servlet-container model the source reports compare against: an acceptor hands
//! each connection to a thread that reads, handles and writes with blocking calls. In `pool` mode
//! a fixed number of threads take connections from a bounded queue (when all are busy, accepted
//! connections wait, as they would in Tomcat); in `per-connection` mode every connection gets a
//! new thread. Waiting for input uses `poll` on the socket and the shutdown signal, so a thread
//! parked on an idle keep-alive connection still notices shutdown and its deadlines.
//!
//! A connection's session starts when it is accepted, not when a thread takes it, so its header
//! deadline runs while it waits in the queue; the acceptor answers those that expire there (408)
//! and, when the queue is full, refuses newcomers at once (503) instead of blocking. CPU-bound
//! work goes to the engines' one job runner ([`CpuPool`]) while the connection's thread waits for
//! it, as a servlet's would: at most `cpu_workers` jobs at once with `cpu_queue` waiting; beyond
//! that the request gets 503.

use std::collections::VecDeque;
use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use sluice_proto::{Clock, Session};

use crate::clock::{new_clock, read_clock};
use crate::config::{EngineConfig, SendStrategy, ThreadsMode};
use crate::connection::{Connection, Pump};
use crate::counters::{count_closed, ConnectionLimit};
use crate::counters::{Event, Shard, Syscall};
use crate::error::EngineError;
use crate::launch::{Launch, Service};
use crate::listener::accept;
use crate::pool::CpuPool;
use crate::reclaim::{Ticket, Waiting};
use crate::send::{flush, PipePool, SendBuffers, SEND_TURN};
use crate::shutdown::Shutdown;
use crate::sys::fd as sys_fd;
use crate::worker::{ACCEPT_WARNINGS, SWEEP};

const READ_BUFFER: usize = 16 * 1024;
const COPY_BUFFER: usize = 64 * 1024;
/// Stack for connection threads: they hold no large frames (buffers are on the heap), and a
/// smaller reservation lets per-connection mode reach thousands of threads.
const STACK: usize = 256 * 1024;

pub(crate) fn run<S: Service>(launch: Launch<'_, S>) -> Result<(), EngineError> {
    let Launch { config, listeners, service, shutdown, counters } = launch;
    // One blocking acceptor is enough; extra SO_REUSEPORT sockets would only strand connections
    // in backlogs nobody accepts from.
    let Some(listener) = listeners.into_sockets().into_iter().next() else {
        return Err(EngineError::Config("no listener".into()));
    };
    let limit = counters.connection_limit(config.max_connections);
    let jobs = CpuPool::start(config.cpu_workers, config.cpu_queue)?;
    counters.add_cpu_pool(jobs.stats_handle());
    let waiting = Waiting::default();
    let engine = Engine { config, shutdown, limit: &limit, jobs: &jobs, waiting: &waiting };
    let acceptor = counters.shard(0);
    let spawn_err = |source| EngineError::Setup { what: "spawn thread", source };
    let backlog = Backlog::new(config.pool_size);
    std::thread::scope(|scope| -> Result<(), EngineError> {
        match config.threads_mode {
            ThreadsMode::Pool => {
                for i in 0..config.pool_size {
                    let (backlog, engine) = (&backlog, &engine);
                    std::thread::Builder::new()
                        .name(format!("sluice-pool-{i}"))
                        .stack_size(STACK)
                        .spawn_scoped(scope, move || pool_worker::<S>(backlog, engine, counters.shard(i + 1)))
                        .map_err(spawn_err)?;
                }
                let mut expired = Vec::new();
                accept_loop(
                    &listener,
                    shutdown,
                    acceptor,
                    || backlog.oldest_deadline(),
                    |stream, peer, clock| {
                        let Some(conn) = engine.open(stream, peer, &*service, clock, acceptor) else {
                            return;
                        };
                        if let Err(mut conn) = backlog.push(Box::new(conn)) {
                            // Every thread is busy and the queue is full: say so now rather than
                            // leave the client waiting behind connections that hold threads.
                            acceptor.add(Event::ConnectionsShed, 1);
                            conn.session.on_overload(&mut conn.out, clock);
                            engine.last_word(*conn, acceptor);
                        }
                    },
                    |clock| {
                        // Connections whose header deadline passed while they queued: answered
                        // here (408), so a flood of slow clients is cut on time, not when a
                        // thread gets to them.
                        backlog.take_expired(clock.now(), &mut expired);
                        for mut conn in expired.drain(..) {
                            if conn.expire(clock, acceptor) {
                                engine.last_word(*conn, acceptor);
                            } else {
                                engine.closed(acceptor);
                            }
                        }
                    },
                );
                // Stop accepting at once; the pool drains what it has.
                drop(listener);
                backlog.close();
            }
            ThreadsMode::PerConnection => {
                let mut spawned_total = 0usize;
                accept_loop(
                    &listener,
                    shutdown,
                    acceptor,
                    || None,
                    |stream, peer, clock| {
                        let Some(conn) = engine.open(stream, peer, &*service, clock, acceptor) else {
                            return;
                        };
                        spawned_total += 1;
                        let shard = counters.shard(spawned_total);
                        let engine = &engine;
                        // Waiting for its head from now, before its thread runs: a burst of
                        // newcomers whose threads have not started yet still leaves room to
                        // reclaim. The ticket comes first so it is dropped first, whatever
                        // happens to the pair.
                        let admitted = (engine.ticket(&conn, || clock.now()), conn);
                        let spawned = std::thread::Builder::new()
                            .name("sluice-conn".into())
                            .stack_size(STACK)
                            .spawn_scoped(scope, move || {
                                let (ticket, conn) = admitted;
                                let mut buffers = Buffers::new(shard);
                                engine.serve(conn, ticket, &mut buffers);
                            });
                        if let Err(e) = spawned {
                            engine.limit.leave();
                            tracing::warn!("cannot start a connection thread: {e}");
                        }
                    },
                    |_| {},
                );
                drop(listener);
            }
        }
        Ok(())
    })
}

/// What every thread of the engine shares.
struct Engine<'a> {
    config: &'a EngineConfig,
    shutdown: &'a Shutdown,
    limit: &'a ConnectionLimit,
    jobs: &'a CpuPool,
    /// Connections waiting on their clients, for `reclaim_waiting`.
    waiting: &'a Waiting,
}

impl Engine<'_> {
    /// Admits an accepted connection and starts its session: its deadlines run from now.
    fn open<S: Service>(
        &self,
        stream: TcpStream,
        peer: SocketAddr,
        service: &S,
        clock: &Clock,
        counters: &Shard,
    ) -> Option<Connection<S::Session>> {
        let reclaim = || self.config.reclaim_waiting && self.waiting.shut_down_longest();
        if !self.limit.admit_or(counters, reclaim) {
            return None;
        }
        // Blocking waits happen in `poll`; the socket itself never blocks (see `serve`).
        if stream.set_nonblocking(true).is_err() {
            self.closed(counters);
            return None;
        }
        let session = service.session(peer, clock);
        Some(Connection::new(stream, session, clock))
    }

    /// The connection's place among those waiting on their clients, when the engine reclaims
    /// places: waiting for its head from `now`.
    fn ticket<S: Session>(&self, conn: &Connection<S>, now: impl FnOnce() -> Instant) -> Option<Ticket<'_>> {
        let mut ticket = self.config.reclaim_waiting.then(|| self.waiting.ticket(conn.stream.as_raw_fd()))?;
        ticket.set(Some(now()));
        Some(ticket)
    }

    /// Sends what a connection that will not be served has queued (a 503 or a 408), as far as the
    /// socket takes it without waiting, and closes it.
    fn last_word<S: Session>(&self, mut conn: Connection<S>, counters: &Shard) {
        let mut pipes = PipePool::default();
        let mut buffers = SendBuffers { copy: &mut [], pipes: &mut pipes, counters };
        let mut pipe = None;
        let _ = flush(
            conn.stream.as_raw_fd(),
            &mut conn.out,
            SendStrategy::Copy,
            &mut buffers,
            &mut pipe,
            SEND_TURN,
        );
        drop(conn);
        self.closed(counters);
    }

    /// A connection admitted by [`Engine::open`] has closed.
    fn closed(&self, counters: &Shard) {
        self.limit.leave();
        count_closed(counters);
    }

    /// Serves one connection to its end on the calling thread.
    fn serve<S: Session>(&self, conn: Connection<S>, ticket: Option<Ticket<'_>>, buffers: &mut Buffers<'_>) {
        let counters = buffers.counters;
        serve_connection(conn, ticket, self, buffers);
        // A pipe serves one connection's responses; an idle pool thread holds none.
        buffers.pipes.clear();
        self.closed(counters);
    }
}

/// Accepted connections waiting for a pool thread, oldest first, at most `capacity` of them.
/// Each connection is boxed: it moves twice (into the queue, out to a thread), and a full queue
/// hands it straight back.
struct Backlog<C> {
    queue: Mutex<(VecDeque<Box<C>>, bool)>,
    ready: Condvar,
    capacity: usize,
}

impl<S: Session> Backlog<Connection<S>> {
    fn new(capacity: usize) -> Self {
        Backlog {
            queue: Mutex::new((VecDeque::new(), false)),
            ready: Condvar::new(),
            capacity: capacity.max(1),
        }
    }

    /// Queues a connection for the next free thread; gives it back when the queue is full.
    fn push(&self, conn: Box<Connection<S>>) -> Result<(), Box<Connection<S>>> {
        let Ok(mut q) = self.queue.lock() else { return Err(conn) };
        if q.0.len() >= self.capacity {
            return Err(conn);
        }
        q.0.push_back(conn);
        drop(q);
        self.ready.notify_one();
        Ok(())
    }

    /// The next connection to serve, waiting for one; `None` once the queue is closed and empty.
    fn pop(&self) -> Option<Box<Connection<S>>> {
        let mut q = self.queue.lock().ok()?;
        loop {
            if let Some(conn) = q.0.pop_front() {
                return Some(conn);
            }
            if q.1 {
                return None;
            }
            q = self.ready.wait(q).ok()?;
        }
    }

    /// The deadline of the oldest queued connection: the acceptor must look again by then.
    fn oldest_deadline(&self) -> Option<Instant> {
        let q = self.queue.lock().ok()?;
        q.0.front().and_then(|c| c.session.deadline())
    }

    /// Moves the queued connections whose deadline has passed into `into`. Connections queue in
    /// the order they were accepted, with the same header timeout, so they expire in order.
    fn take_expired(&self, now: Instant, into: &mut Vec<Box<Connection<S>>>) {
        let Ok(mut q) = self.queue.lock() else { return };
        while q.0.front().is_some_and(|c| c.session.deadline().is_some_and(|d| d <= now)) {
            into.extend(q.0.pop_front());
        }
    }

    /// No more connections will come: threads finish the queue and exit.
    fn close(&self) {
        if let Ok(mut q) = self.queue.lock() {
            q.1 = true;
        }
        self.ready.notify_all();
    }
}

/// Waits for connections (and shutdown) and hands each to `hand_off` with the time it was
/// accepted; `idle` runs whenever the wait ends, and the wait ends by `next_deadline` (or within a sweep) when it names one.
fn accept_loop(
    listener: &TcpListener,
    shutdown: &Shutdown,
    counters: &Shard,
    next_deadline: impl Fn() -> Option<Instant>,
    mut hand_off: impl FnMut(TcpStream, SocketAddr, &Clock),
    mut idle: impl FnMut(&Clock),
) {
    let fd = listener.as_raw_fd();
    let mut clock = new_clock();
    loop {
        let mut fds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: shutdown.fd(), events: libc::POLLIN, revents: 0 },
        ];
        let timeout = next_deadline().map_or(-1, |d| {
            let left = d.saturating_duration_since(Instant::now()).min(SWEEP);
            left.as_micros().div_ceil(1000) as i32
        });
        counters.syscall(Syscall::Poll);
        let r = sys_fd::poll(&mut fds, timeout);
        if shutdown.is_triggered() {
            return;
        }
        read_clock(&mut clock);
        idle(&clock);
        if r <= 0 || fds[0].revents == 0 {
            continue;
        }
        match accept(fd, false, counters) {
            Ok((stream, peer)) => hand_off(stream, peer, &clock),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                ACCEPT_WARNINGS.warn("http", &e, counters);
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(_) => {}
        }
    }
}

struct Buffers<'a> {
    read: Box<[u8]>,
    copy: Box<[u8]>,
    pipes: PipePool,
    counters: &'a Shard,
}

impl<'a> Buffers<'a> {
    fn new(counters: &'a Shard) -> Self {
        Buffers {
            read: vec![0; READ_BUFFER].into_boxed_slice(),
            copy: vec![0; COPY_BUFFER].into_boxed_slice(),
            pipes: PipePool::default(),
            counters,
        }
    }
}

fn pool_worker<S: Service>(backlog: &Backlog<Connection<S::Session>>, engine: &Engine<'_>, counters: &Shard) {
    let mut buffers = Buffers::new(counters);
    while let Some(conn) = backlog.pop() {
        let ticket = engine.ticket(&conn, Instant::now);
        engine.serve(*conn, ticket, &mut buffers);
    }
}

/// Serves one connection on the calling thread.
///
/// The socket is non-blocking and the thread blocks in `poll` instead of in `read` or `send`:
/// that is how a blocking socket with timeouts is built anyway (Java's socket streams do the
/// same), and it lets one wait honour the send deadline (measured from the last byte that moved,
/// not restarted by every partial write as `SO_SNDTIMEO` would), the idle and header deadlines,
/// and shutdown, whichever comes first.
fn serve_connection<S: Session>(
    mut conn: Connection<S>,
    ticket: Option<Ticket<'_>>,
    engine: &Engine<'_>,
    buffers: &mut Buffers<'_>,
) {
    let (config, shutdown) = (engine.config, engine.shutdown);
    let counters = buffers.counters;
    let fd = conn.stream.as_raw_fd();
    let mut clock = new_clock();
    let mut send_buffers = SendBuffers { copy: &mut buffers.copy, pipes: &mut buffers.pipes, counters };
    // A local, dropped before `conn` (a parameter): the registry never names a closed socket.
    let mut ticket = ticket;
    // (bytes sent, since when) of the current wait for input: a new connection's from its accept.
    let mut input_wait: Option<(u64, Instant)> = Some((0, conn.last_progress));
    loop {
        let direction = match conn.pump(&clock, config.send, &mut send_buffers) {
            // Servlet-style: the connection's thread waits for its CPU work.
            Pump::Job(job) => {
                mark_waiting(&mut ticket, None);
                input_wait = None;
                match engine.jobs.run_waiting(job) {
                    Some(output) => conn.job_done(output, &clock),
                    None => conn.job_refused(&clock),
                }
                continue;
            }
            // Only the session's timer can move it on; watch the socket for hang-ups alone.
            Pump::Waiting => 0,
            // `Connection::pump` switches to kernel TLS itself and never returns this.
            Pump::Failed | Pump::KernelTls => return,
            Pump::Finished => {
                // The response is out; only the client's close is awaited.
                mark_waiting(&mut ticket, Some(clock.now()));
                linger(&mut conn, &mut buffers.read, &clock, counters);
                return;
            }
            Pump::Blocked => libc::POLLOUT,
            Pump::NeedInput => libc::POLLIN,
            // The connection has its own thread: giving the core up is all fairness asks.
            // It is sending, not waiting on its client: no place to reclaim.
            Pump::Yielded => {
                mark_waiting(&mut ticket, None);
                std::thread::yield_now();
                continue;
            }
        };
        // Waiting for input counts from the last response sent, not from the last byte of a head
        // that trickles in; waiting to send counts from the last byte the client took.
        let sent = conn.out.sent_total();
        input_wait = (direction == libc::POLLIN).then(|| match input_wait {
            Some((before, since)) if before == sent => (before, since),
            _ => (sent, clock.now()),
        });
        let since =
            if direction == libc::POLLOUT { Some(conn.last_progress) } else { input_wait.map(|w| w.1) };
        mark_waiting(&mut ticket, since);
        read_clock(&mut clock);
        if !conn.in_grace() && shutdown.is_triggered() {
            if !conn.begin_grace(&clock, config.shutdown_grace) {
                return;
            }
            continue;
        }
        let deadline = conn.wait_deadline(config.send_timeout);
        let watch_shutdown = (!conn.in_grace()).then(|| shutdown.fd());
        counters.syscall(Syscall::Poll);
        let woke = wait(fd, direction, deadline, watch_shutdown, &clock);
        // The wait may have lasted a whole keep-alive period: every deadline and `Date` from
        // here on must count from now, not from before it.
        read_clock(&mut clock);
        match woke {
            Wait::Ready if direction == libc::POLLOUT => {}
            Wait::Ready => match conn.read_and_feed(&mut buffers.read, &clock, counters) {
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::WouldBlock) => {}
                Err(_) => return,
            },
            Wait::Shutdown => {}
            Wait::TimedOut => {
                if !conn.wait_timed_out(&clock, config.send_timeout, counters) {
                    return;
                }
            }
        }
    }
}

/// Tells the registry of waiting connections (when reclaiming) since when this one waits on its
/// client, or that the server works for it.
fn mark_waiting(ticket: &mut Option<Ticket<'_>>, since: Option<Instant>) {
    if let Some(ticket) = ticket {
        ticket.set(since);
    }
}

enum Wait {
    Ready,
    Shutdown,
    TimedOut,
}

/// Blocks until `fd` is ready for `direction`, the deadline passes, or shutdown starts.
fn wait(
    fd: i32,
    direction: libc::c_short,
    deadline: Option<Instant>,
    shutdown_fd: Option<i32>,
    clock: &sluice_proto::Clock,
) -> Wait {
    let timeout = deadline.map_or(-1, |d| {
        let left = d.saturating_duration_since(clock.now());
        // Round up so a wake-up never comes just before the deadline and spins.
        left.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32
    });
    let mut fds = [
        libc::pollfd { fd, events: direction, revents: 0 },
        libc::pollfd { fd: shutdown_fd.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
    ];
    // A negative fd is ignored by poll.
    let r = sys_fd::poll(&mut fds, timeout);
    if r == 0 {
        Wait::TimedOut
    } else if r > 0 && fds[0].revents != 0 {
        // Errors and hang-ups count as ready: the next read or send reports them.
        Wait::Ready
    } else {
        // The shutdown signal, or EINTR: either way, look again.
        Wait::Shutdown
    }
}

fn linger<S: Session>(
    conn: &mut Connection<S>,
    buf: &mut [u8],
    clock: &sluice_proto::Clock,
    counters: &Shard,
) {
    if !conn.start_linger(clock, counters) {
        return;
    }
    let fd = conn.stream.as_raw_fd();
    let mut clock = clock.clone();
    while let Some((until, _)) = conn.lingering {
        read_clock(&mut clock);
        if clock.now() >= until {
            return;
        }
        counters.syscall(Syscall::Poll);
        match wait(fd, libc::POLLIN, Some(until), None, &clock) {
            Wait::Ready => {
                if !conn.linger_read(buf, counters) {
                    return;
                }
            }
            _ => return,
        }
    }
}
