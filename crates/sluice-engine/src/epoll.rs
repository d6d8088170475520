//! The epoll engine: one edge-triggered event loop per worker thread, thread per core.
//!
//! Each worker owns an epoll instance, its own `SO_REUSEPORT` listener, its connections, a read
//! buffer and a copy buffer; nothing is shared between loops but the connection count and the
//! shutdown signal. Sockets are registered once for input and output edges and never modified, so
//! a keep-alive request costs a read, a write (plus `sendfile`) and its share of `epoll_wait`.
//! Deadlines are checked by a sweep (`worker::sweep`, shared with io_uring) rather than a timer per
//! connection: at 10,000 connections a sweep is a few tens of microseconds, cheaper than a timer
//! system call each. Admission, the drain on shutdown and CPU-job delivery are `worker`'s too.

use std::net::TcpListener;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use slab::Slab;

use crate::clock::read_clock;
use crate::connection::{Connection, Pump};
use crate::counters::{Event, Shard, Syscall};
use crate::error::EngineError;
use crate::launch::{per_listener, Launch, Service};
use crate::listener::accept;
use crate::pool::CpuPool;
use crate::send::{PipePool, SendBuffers};
use crate::shutdown::Shutdown;
use crate::sys::epoll::Epoll;
use crate::worker::{self, EventLoop, LoopCore, Parts, ACCEPTS_PER_TURN_BEHIND, ACCEPT_WARNINGS};

const LISTENER: u64 = u64::MAX;
const SHUTDOWN: u64 = u64::MAX - 1;
const MAILBOX: u64 = u64::MAX - 2;
const READ_BUFFER: usize = 64 * 1024;
const COPY_BUFFER: usize = 64 * 1024;
const EVENTS: usize = 1024;
/// Reads one connection may make per wake-up before the loop serves the others: a client that
/// always fills the buffer (pipelined uploads over loopback) must not hold the loop. 16 reads of
/// 64 KiB is 1 MiB per turn.
const READS_PER_TURN: usize = 16;

pub(crate) fn run<S: Service>(launch: Launch<'_, S>) -> Result<(), EngineError> {
    let Launch { config, listeners, service, shutdown, counters } = launch;
    let limit = counters.connection_limit(config.max_connections);
    let pool = CpuPool::start(config.cpu_workers, config.cpu_queue)?;
    counters.add_cpu_pool(pool.stats_handle());
    let (limit, pool) = (&*limit, &pool);
    per_listener("epoll", listeners, |index, listener| {
        let core = LoopCore::new(config, counters.shard(index), limit, pool)?;
        Worker::new(core, listener, &*service, shutdown)?.run();
        Ok(())
    })
}

struct Worker<'a, S: Service> {
    epoll: Epoll,
    listener: Option<TcpListener>,
    service: &'a S,
    shutdown: &'a Shutdown,
    core: LoopCore<'a>,
    conns: Slab<Connection<S::Session>>,
    read_buf: Box<[u8]>,
    copy_buf: Box<[u8]>,
    pipes: PipePool,
    /// Connections that used their read budget with input still waiting, or their send budget
    /// (`send::SEND_TURN`) with output still queued; driven next turn, after that turn's events.
    ready: Vec<usize>,
    /// Accepting stopped on an error (EMFILE): connections may wait in the backlog with no new
    /// edge coming, so the loop retries when a descriptor is freed and on every sweep.
    accept_pending: bool,
    /// The listener had more connections than a turn takes: the rest are taken at the end of the
    /// next turns, one turn's worth each.
    more_to_accept: bool,
}

impl<'a, S: Service> EventLoop<'a> for Worker<'a, S> {
    type Session = S::Session;
    type Stream = std::net::TcpStream;

    fn core(&mut self) -> &mut LoopCore<'a> {
        &mut self.core
    }

    fn parts(&mut self, key: usize) -> Option<Parts<'_, 'a, S::Session, Self::Stream>> {
        Some((self.conns.get_mut(key)?, &mut self.core))
    }

    fn each_deadline(&self, send_timeout: Duration, mut each: impl FnMut(usize, Option<Instant>)) {
        for (key, conn) in &self.conns {
            each(key, conn.deadline(send_timeout));
        }
    }

    fn drive(&mut self, key: usize) {
        Worker::drive(self, key);
    }

    fn close(&mut self, key: usize) {
        Worker::close(self, key);
    }
}

impl<'a, S: Service> Worker<'a, S> {
    fn new(
        core: LoopCore<'a>,
        listener: TcpListener,
        service: &'a S,
        shutdown: &'a Shutdown,
    ) -> Result<Self, EngineError> {
        let setup = |what| move |source| EngineError::Setup { what, source };
        listener.set_nonblocking(true).map_err(setup("listener O_NONBLOCK"))?;
        let epoll = Epoll::new().map_err(setup("epoll_create1"))?;
        let worker = Worker {
            epoll,
            listener: None,
            service,
            shutdown,
            core,
            conns: Slab::with_capacity(1024),
            read_buf: vec![0; READ_BUFFER].into_boxed_slice(),
            copy_buf: vec![0; COPY_BUFFER].into_boxed_slice(),
            pipes: PipePool::default(),
            ready: Vec::new(),
            accept_pending: false,
            more_to_accept: false,
        };
        worker
            .register(listener.as_raw_fd(), libc::EPOLLIN | libc::EPOLLET, LISTENER)
            .map_err(setup("epoll_ctl listener"))?;
        worker.register(shutdown.fd(), libc::EPOLLIN, SHUTDOWN).map_err(setup("epoll_ctl shutdown"))?;
        worker
            .register(worker.core.mailbox_fd(), libc::EPOLLIN, MAILBOX)
            .map_err(setup("epoll_ctl mailbox"))?;
        Ok(Worker { listener: Some(listener), ..worker })
    }

    fn counters(&self) -> &'a Shard {
        self.core.counters
    }

    fn register(&self, fd: RawFd, events: i32, token: u64) -> std::io::Result<()> {
        self.counters().syscall(Syscall::EpollCtl);
        self.epoll.add(fd, events, token)
    }

    fn deregister(&self, fd: RawFd) {
        self.counters().syscall(Syscall::EpollCtl);
        self.epoll.delete(fd);
    }

    fn run(mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; EVENTS];
        loop {
            if self.core.finished(self.conns.len()) {
                break;
            }
            // With nothing to time out, sleep until something happens; idle pipes still need the
            // sweep that releases them.
            let timeout = if !self.ready.is_empty() || self.more_to_accept {
                0
            } else if self.conns.is_empty()
                && self.core.draining_until.is_none()
                && self.pipes.is_empty()
                && !self.accept_pending
            {
                -1
            } else {
                self.core.sleep().as_millis().min(i32::MAX as u128) as i32
            };
            self.counters().syscall(Syscall::EpollWait);
            let n = self.epoll.wait(&mut events, timeout);
            read_clock(&mut self.core.clock);
            let mut ready = std::mem::take(&mut self.ready);
            // A connection driven by an event as well as from the queue may have been queued
            // twice; once is its fair share.
            ready.sort_unstable();
            ready.dedup();
            for ev in events.iter().take(n.max(0) as usize) {
                match ev.u64 {
                    LISTENER => self.more_to_accept = true,
                    SHUTDOWN => self.begin_shutdown(),
                    MAILBOX => worker::deliver_jobs(&mut self),
                    key => {
                        if let Some(conn) = self.conns.get_mut(key as usize) {
                            let input = libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR;
                            let hangup = libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR;
                            conn.maybe_readable |= ev.events & input as u32 != 0;
                            // A request and the client's FIN often arrive as one edge: the read
                            // that takes the request is short, yet the end of stream still waits.
                            conn.hangup_pending |= ev.events & hangup as u32 != 0;
                        }
                        self.drive(key as usize)
                    }
                }
            }
            // The connections that used a budget last turn go after the ones with fresh events,
            // so a new request is answered before a large response's next turn.
            for key in ready {
                self.drive(key);
            }
            if self.more_to_accept {
                self.accept_all();
            }
            if self.core.sweep_due() {
                self.pipes.trim();
                if self.accept_pending {
                    self.accept_all();
                }
                worker::sweep(&mut self);
            }
        }
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.close(key);
        }
    }

    fn accept_all(&mut self) {
        self.accept_pending = false;
        self.more_to_accept = false;
        let Some(listener) = &self.listener else { return };
        let listen_fd = listener.as_raw_fd();
        // Behind: a connection used its send budget this turn with bytes still to go.
        let limit = if self.ready.is_empty() { usize::MAX } else { ACCEPTS_PER_TURN_BEHIND };
        let mut taken = 0;
        loop {
            if taken == limit {
                self.more_to_accept = true;
                self.core.counters.add(Event::AcceptsDeferred, 1);
                break;
            }
            taken += 1;
            match accept(listen_fd, true, self.core.counters) {
                Ok((stream, peer)) => {
                    let Some(id) = self.core.admit() else { continue };
                    let key = self.conns.vacant_key();
                    let events = libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET;
                    if self.register(stream.as_raw_fd(), events, key as u64).is_err() {
                        self.core.closed();
                        continue;
                    }
                    let session = self.service.session(peer, &self.core.clock);
                    let mut conn = Connection::new(stream, session, &self.core.clock);
                    conn.id = id;
                    self.conns.insert(conn);
                    // The first request often arrives with the handshake; the registration's
                    // initial edge will deliver it on the next wait.
                }
                Err(e) => match e.raw_os_error() {
                    Some(libc::EINTR | libc::ECONNABORTED | libc::EPROTO) => continue,
                    Some(libc::EMFILE | libc::ENFILE) => {
                        self.accept_pending = true;
                        ACCEPT_WARNINGS.warn("http", &e, self.core.counters);
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
        if self.core.draining_until.is_some() {
            return;
        }
        self.deregister(self.shutdown.fd());
        if let Some(listener) = self.listener.take() {
            self.deregister(listener.as_raw_fd());
        }
        worker::begin_drain(self);
    }

    /// Moves one connection forward after an event or a deadline.
    fn drive(&mut self, key: usize) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let core = &self.core;
        let keep = if conn.lingering.is_some() {
            conn.linger_read(&mut self.read_buf, core.counters)
        } else {
            let mut buffers =
                SendBuffers { copy: &mut self.copy_buf, pipes: &mut self.pipes, counters: core.counters };
            let mut reads = 0;
            loop {
                match conn.pump(&core.clock, core.config.send, &mut buffers) {
                    Pump::Job(job) => core.run_job(key, conn, job),
                    Pump::Waiting => break true,
                    Pump::Blocked => break true,
                    // Its socket still has room and no edge will say so: it goes to the back of
                    // the ready queue, driven after the connections whose events are in.
                    Pump::Yielded => {
                        self.ready.push(key);
                        break true;
                    }
                    // `Connection::pump` switches to kernel TLS itself and never returns this.
                    Pump::Failed | Pump::KernelTls => break false,
                    Pump::Finished => {
                        break conn.start_linger(&core.clock, core.counters)
                            && conn.linger_read(&mut self.read_buf, core.counters)
                    }
                    Pump::NeedInput if !conn.maybe_readable => break true,
                    Pump::NeedInput if reads == READS_PER_TURN => {
                        self.ready.push(key);
                        break true;
                    }
                    Pump::NeedInput => {
                        reads += 1;
                        match conn.read_and_feed(&mut self.read_buf, &core.clock, core.counters) {
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
        } else if let Some(conn) = self.conns.get(key) {
            let deadline = conn.deadline(self.core.config.send_timeout);
            self.core.wake_by(deadline);
        }
    }

    fn close(&mut self, key: usize) {
        if self.conns.try_remove(key).is_some() {
            // Closing the descriptor removes it from the epoll set.
            self.core.closed();
            if self.accept_pending {
                self.accept_all();
            }
        }
    }
}
