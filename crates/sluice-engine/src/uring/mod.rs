//! The io_uring engine: one ring per worker thread, thread per core, completions instead of
//! readiness.
//!
//! Each worker owns a ring, its own `SO_REUSEPORT` listener, its connections, a provided-buffer
//! ring that multishot receives fill, a pool of pipes (splice) and of copy buffers (copy); nothing
//! is shared between workers but the connection count, the CPU pool and the shutdown signal. One
//! multishot accept per listener and one multishot receive per connection stay armed, so a
//! keep-alive request costs no system call of its own: its bytes arrive as a completion, its
//! response leaves as a send (or a linked splice pair, or a linked read and send) queued on the
//! ring, and the worker's one `io_uring_enter` per loop turn submits and reaps everything at once.
//! Where the kernel has `IORING_FEAT_MIN_TIMEOUT`, that enter waits for a batch of completions
//! rather than the first one, for at most a few microseconds (`Wait::Batch`).
//!
//! The order of work on a connection is `Connection::pump`'s (send what is queued, offer buffered
//! input, only then take more input), re-expressed for sends that complete later: at most one send
//! chain is in flight per connection, and its completion advances the outbox and moves the
//! connection on. Deadlines, graceful shutdown and lingering close have epoll's semantics.
//!
//! Memory the kernel may still touch is never freed under it: a closing connection cancels its
//! operations by descriptor and keeps its slab slot, outbox, pipe and copy buffer until the last of
//! its completions has arrived; only then are they released and the socket closed.
//!
//! Whether io_uring can run at all is [`probe`]'s business; the provided-buffer ring is
//! [`BufRing`]'s, the send chains are [`chain`]'s, and closing connections and the worker's
//! shutdown without freeing memory under the kernel are [`closing`]'s. This module is the worker
//! loop: accepting, receiving, driving connections and deadlines.

mod chain;
mod closing;
pub(crate) mod probe;

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use slab::Slab;
use sluice_proto::{Job, Session};

use self::chain::{Chain, CopyBuf, CopyPool, MsgSlot};
use self::probe::Support;
use crate::clock::read_clock;
use crate::connection::{Connection, Pump};
use crate::counters::{Event, Syscall};
use crate::error::EngineError;
use crate::launch::{per_listener, Launch, Service};
use crate::listener::set_int_opt;
use crate::pool::CpuPool;
use crate::send::{Pipe, PipePool};
use crate::shutdown::Shutdown;
use crate::sys::buf_ring::BufRing;
use crate::sys::socket::{accepted_stream, peer_of};
use crate::sys::{fd as sys_fd, uring as sys_uring};
use crate::worker::{self, EventLoop, LoopCore, Parts, ACCEPTS_PER_TURN_BEHIND, ACCEPT_WARNINGS};

/// Completions a worker with connections waits for in one `io_uring_enter` when the kernel has
/// `IORING_FEAT_MIN_TIMEOUT` (see `Wait::Batch`). A keep-alive request is two completions (its
/// receive and its send), so 32 is about 16 requests a call. Measured on `/bench/hello`, 1 worker,
/// wrk with 100 connections (2 cores, Linux 6.18, 2026-11-22): 16 gave 0.093 `io_uring_enter` per
/// request, 32 gave 0.055, against 0.39 waiting for one; at 100 connections and more the count,
/// not the timer below, ends most waits. Larger batches save little more (64 with a 100 µs wait:
/// 0.027) and start to add latency (p50 0.35 → 0.52 ms).
const BATCH: usize = 32;
/// How long a batching wait may hold completions that are already in. Measured with one busy
/// connection among 99 idle ones (wrk -c1): 50 µs cost that client 30 µs at p50 (56 → 86 µs) and a
/// third of its req/s, since its next request lands inside the wait; 20 µs cost nothing
/// measurable (55 µs), and at 100 and 1000 connections did as well as 50 (0.061 vs 0.055 calls
/// per request at 100).
const BATCH_WAIT_USEC: u32 = 20;
/// Provided receive buffers per worker, and their size. Buffers go back to the ring as soon as
/// their completion is handled, so this bounds bytes received per loop turn, not per connection.
/// The kernel takes them in turn, so every buffer is soon used and its pages resident: with
/// 16 KiB buffers (8 MiB a worker) the resident size crept for as long as ever larger requests
/// kept reaching pages not touched before (+11% over five rounds of 1,500 malformed connections
/// after a warm-up, `tests/overload.rs`; 12 → 19 MB in the robustness issue). One page each
/// (2 MiB a worker) is all resident after the first few hundred requests, and a request larger
/// than a page simply arrives in more than one completion.
const RECV_BUFFERS: u16 = 512;
const RECV_BUFFER_SIZE: usize = 4096;
const BUFFER_GROUP: u16 = 0;
/// Most completion queue entries per ring (16 bytes each); see `Worker::new`.
const CQ_MAX: usize = 1 << 14;
/// Submission queue entries; when full the worker submits early, so this only sets batch size.
const SQ_ENTRIES: u32 = 1024;
/// Copy-strategy buffer size (one read and one send move at most this much).
const COPY_BUFFER: usize = 128 * 1024;
/// Idle copy buffers kept per worker.
const COPY_POOL_MAX: usize = 64;
/// Most bytes a connection buffers while it is not asking for input (a response in flight, a job
/// running). Beyond it the worker stops receiving on that connection, so a client that pipelines
/// without reading waits in its kernel buffers, not in ours: epoll gets the same bound by not
/// reading at all until the session wants input.
const STASH_MAX: usize = 64 * 1024;
/// Room for one TLS record's body, read on its own on a kernel-TLS socket (an alert, a key
/// update; application data if one raced in).
const RECORD_BUFFER: usize = 16 * 1024 + 256;
/// Caps on the kernel's worker threads for this ring: bounded (regular-file reads and splices
/// that miss the page cache) and unbounded (splices into sockets). Without a cap io-wq may start
/// a thread per blocked request.
const IOWQ_MAX_WORKERS: [u32; 2] = [4, 4];
/// How long the worker waits, at exit, for cancelled operations to complete before leaking the
/// memory they reference instead of freeing it under the kernel.
const FINAL_DRAIN: Duration = Duration::from_secs(5);

// user_data: kind in the top 8 bits, the connection's generation in the next 24, its slab key in
// the low 32. The generation makes a completion for an earlier occupant of a slot recognisable.
const ACCEPT: u8 = 1;
const SHUTDOWN: u8 = 2;
const MAILBOX: u8 = 3;
const CANCEL: u8 = 4;
const RECV: u8 = 5;
/// The first operation of a send chain (splice file → pipe, or read file → buffer).
const FILE_IN: u8 = 6;
/// The operation that puts bytes on the socket (send, sendmsg, splice pipe → socket).
const SOCK_OUT: u8 = 7;
/// A poll for writability after a send found the socket full.
const POLL_OUT: u8 = 8;

fn token(kind: u8, key: usize, generation: u64) -> u64 {
    (kind as u64) << 56 | (generation & 0xFF_FFFF) << 32 | (key as u64 & 0xFFFF_FFFF)
}

fn untoken(data: u64) -> (u8, usize, u64) {
    ((data >> 56) as u8, (data & 0xFFFF_FFFF) as usize, (data >> 32) & 0xFF_FFFF)
}

pub(crate) fn run<S: Service>(launch: Launch<'_, S>) -> Result<(), EngineError> {
    let Launch { config, listeners, service, shutdown, counters } = launch;
    let support = probe::support().map_err(|reason| probe::refusal(&reason))?;
    let limit = counters.connection_limit(config.max_connections);
    let pool = CpuPool::start(config.cpu_workers, config.cpu_queue)?;
    counters.add_cpu_pool(pool.stats_handle());
    let (limit, pool) = (&*limit, &pool);
    let per_worker = config.max_connections.div_ceil(config.workers.max(1));
    per_listener("uring", listeners, |index, listener| {
        let core = LoopCore::new(config, counters.shard(index), limit, pool)?;
        Worker::new(core, &*service, shutdown, support, listener, per_worker)?.run();
        Ok(())
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Recv {
    Off,
    Armed,
    /// Cancel submitted; the final completion has not arrived.
    Cancelling,
}

/// One connection on the ring. The session, outbox, deadlines and lingering are
/// [`Connection`]'s; what is here is what asynchronous sends and receives add.
struct UConn<S> {
    conn: Connection<S>,
    /// The last pump ended wanting input, so received bytes go straight to the session.
    awaiting_input: bool,
    /// A send chain finished with the outbox empty; `on_drained` is due.
    drained: bool,
    recv: Recv,
    chain: Option<Chain>,
    pipe: Option<Pipe>,
    copy: Option<CopyBuf>,
    msg: Option<Box<MsgSlot>>,
    /// Operations submitted and not yet completed for good (a multishot counts until its last).
    inflight: u32,
    closing: bool,
}

/// What a connection needs next (as `connection::Pump`, with sends asynchronous).
enum Step {
    Job(Job),
    /// Waiting for a send chain, a job or the session's deadline.
    Busy,
    NeedInput,
    Finished,
    Failed,
}

// ---------------------------------------------------------------------------------------------
// The worker
// ---------------------------------------------------------------------------------------------

struct Worker<'a, S: Service> {
    // Declared first so it is dropped first: the ring must be gone before the memory it may use.
    ring: IoUring,
    bufs: BufRing,
    service: &'a S,
    shutdown: &'a Shutdown,
    core: LoopCore<'a>,
    listener: Option<TcpListener>,
    accept_armed: bool,
    /// A failed accept (EMFILE) waits for the next sweep rather than spinning.
    accept_retry: bool,
    /// Connections the multishot accept delivered and the loop has not taken on yet: a loop
    /// behind on its sends takes one per turn (see `take_newcomers`).
    newcomers: VecDeque<TcpStream>,
    /// This turn, a connection finished a send with more of its response still to go: the loop
    /// is behind on its sends.
    behind: bool,
    conns: Slab<UConn<S::Session>>,
    /// Connections not closing.
    live: usize,
    pipes: PipePool,
    copies: CopyPool,
    cqes: Vec<(u64, i32, u32)>,
    /// The kernel takes `min_wait_usec` (`Support::min_wait`), so `run` waits for batches.
    batch_wait: bool,
}

impl<'a, S: Service> EventLoop<'a> for Worker<'a, S> {
    type Session = S::Session;
    type Stream = TcpStream;

    fn core(&mut self) -> &mut LoopCore<'a> {
        &mut self.core
    }

    fn parts(&mut self, key: usize) -> Option<Parts<'_, 'a, S::Session, Self::Stream>> {
        let u = self.conns.get_mut(key).filter(|u| !u.closing)?;
        Some((&mut u.conn, &mut self.core))
    }

    fn each_deadline(&self, send_timeout: Duration, mut each: impl FnMut(usize, Option<Instant>)) {
        for (key, u) in self.conns.iter().filter(|(_, u)| !u.closing) {
            each(key, u.conn.deadline(send_timeout));
        }
    }

    fn drive(&mut self, key: usize) {
        Worker::drive(self, key);
    }

    fn close(&mut self, key: usize) {
        Worker::close(self, key);
    }
}

/// What an `io_uring_enter` waits for after submitting.
#[derive(Clone, Copy)]
enum Wait {
    /// Nothing: submit and return.
    Submit,
    /// One completion, or the timeout (none: wait for ever).
    One(Option<Duration>),
    /// Up to `BATCH` completions (fewer with fewer connections), returning `BATCH_WAIT_USEC`
    /// after the wait began if at least one is in; with none in, one completion or the timeout.
    Batch(Duration),
}

impl<'a, S: Service> Worker<'a, S> {
    fn new(
        core: LoopCore<'a>,
        service: &'a S,
        shutdown: &'a Shutdown,
        support: &Support,
        listener: TcpListener,
        max_connections: usize,
    ) -> Result<Self, EngineError> {
        let setup = |what| move |source| EngineError::Setup { what, source };
        // Accepted sockets inherit TCP_NODELAY from the listener on Linux, which saves a
        // setsockopt per connection (responses are written whole; Nagle only delays their tail).
        core.counters.syscall(Syscall::Setsockopt);
        set_int_opt(listener.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
            .map_err(setup("listener TCP_NODELAY"))?;
        // Completions that can be outstanding at once: per connection a final receive, a send
        // chain of two and a poll; the receive buffers; a backlog's worth of accepts. Sized so a
        // burst fits; beyond it the kernel keeps the overflow (IORING_FEAT_NODROP, required by
        // the probe) rather than dropping it, at some cost. Capped at CQ_MAX: the ring's pages
        // become resident as the queue's head first passes over them, so a 2 MiB ring (the old
        // cap of 131,072 entries, reached with the default connection limit) kept the resident
        // size creeping by up to 2 MiB per worker long after start-up; 16,384 entries (256 KiB)
        // still hold a turn's completions for 4,000 connections per worker.
        let cq = (max_connections.saturating_mul(4) + RECV_BUFFERS as usize + 4096)
            .next_power_of_two()
            .clamp(4096, CQ_MAX) as u32;
        let ring = probe::build_ring(support.taskrun, support.submit_all, SQ_ENTRIES, cq)
            .map_err(setup("io_uring_setup"))?;
        if support.iowq_max_workers {
            let mut caps = IOWQ_MAX_WORKERS;
            if let Err(e) = ring.submitter().register_iowq_max_workers(&mut caps) {
                tracing::warn!("cannot cap io_uring worker threads: {e}");
            }
        }
        // The kernel's worker threads run where this worker may run, so a worker pinned to a
        // core (taskset, cpusets) does not spill its splices onto other cores.
        if let Some(cpus) = sys_fd::thread_cpus() {
            let _ = ring.submitter().register_iowq_aff(&cpus);
        }
        let mut bufs = BufRing::new(RECV_BUFFERS, RECV_BUFFER_SIZE).map_err(setup("receive buffers"))?;
        bufs.register(&ring, BUFFER_GROUP).map_err(setup("IORING_REGISTER_PBUF_RING"))?;
        let mut worker = Worker {
            ring,
            bufs,
            service,
            shutdown,
            core,
            listener: Some(listener),
            accept_armed: false,
            accept_retry: false,
            newcomers: VecDeque::new(),
            behind: false,
            conns: Slab::with_capacity(1024),
            live: 0,
            pipes: PipePool::default(),
            copies: CopyPool::default(),
            cqes: Vec::with_capacity(1024),
            batch_wait: support.min_wait,
        };
        worker.arm_accept();
        let poll = opcode::PollAdd::new(types::Fd(worker.shutdown.fd()), libc::POLLIN as u32)
            .build()
            .user_data(token(SHUTDOWN, 0, 0));
        worker.push(poll);
        worker.arm_mailbox();
        Ok(worker)
    }

    /// Queues one entry, submitting first if the queue is full.
    fn push(&mut self, entry: squeue::Entry) {
        loop {
            // Every entry built in this module points only at memory that outlives the
            // operation: the outbox segments, message slot, pipe and copy buffer of a connection
            // (kept until its last completion), or the worker's buffer ring.
            if sys_uring::push(&mut self.ring, &entry) {
                return;
            }
            self.enter(Wait::Submit);
        }
    }

    /// Queues a chain of linked entries, all in one go so a submit cannot split the chain.
    fn push_linked(&mut self, first: squeue::Entry, second: squeue::Entry) {
        loop {
            let entries = [first.clone().flags(squeue::Flags::IO_LINK), second.clone()];
            // As in `push`.
            if sys_uring::push_all(&mut self.ring, &entries) {
                return;
            }
            self.enter(Wait::Submit);
        }
    }

    /// One `io_uring_enter`: submits what is queued and waits as `wait` says. Errors that only
    /// mean "nothing to reap yet" are swallowed.
    fn enter(&mut self, wait: Wait) {
        let c = self.core.counters;
        c.syscall(Syscall::IoUringEnter);
        let before = self.ring.submission().len();
        let (want, timeout, min_wait_usec) = match wait {
            Wait::Submit => (0, None, 0),
            Wait::One(timeout) => (1, timeout, 0),
            // Never more than there are connections: a wait for completions that cannot come
            // ends only on the timer. Unclamped, 10 connections lost a third of their req/s
            // (89k → 59k, p50 0.06 → 0.11 ms); clamped they keep it, at 0.19 calls per request
            // instead of 0.6.
            Wait::Batch(timeout) => (BATCH.min(self.live).max(1), Some(timeout), BATCH_WAIT_USEC),
        };
        let result = match timeout {
            Some(t) => {
                let ts = types::Timespec::from(t);
                let args = types::SubmitArgs::new().timespec(&ts).min_wait_usec(min_wait_usec);
                self.ring.submitter().submit_with_args(want, &args)
            }
            None => self.ring.submitter().submit_and_wait(want),
        };
        let after = self.ring.submission().len();
        c.add(Event::UringSubmitted, before.saturating_sub(after) as u64);
        if let Err(e) = result {
            match e.raw_os_error() {
                // Timed out, interrupted, or the completion queue must be drained first.
                Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => {}
                _ => tracing::warn!("io_uring_enter: {e}"),
            }
        }
    }

    fn run(mut self) {
        loop {
            if self.core.finished(self.live) {
                break;
            }
            let idle = self.conns.is_empty()
                && self.newcomers.is_empty()
                && self.core.draining_until.is_none()
                && self.pipes.is_empty()
                && self.copies.is_empty()
                && !self.accept_retry;
            let wait = if !self.newcomers.is_empty() {
                // Newcomers wait for the next turn, not for the next completion.
                Wait::Submit
            } else if idle {
                // Nothing to batch; and a min-wait without a timeout would end every
                // BATCH_WAIT_USEC whether or not anything came.
                Wait::One(None)
            } else {
                let timeout = self.core.sleep();
                if self.batch_wait {
                    Wait::Batch(timeout)
                } else {
                    Wait::One(Some(timeout))
                }
            };
            self.enter(wait);
            read_clock(&mut self.core.clock);
            self.reap();
            self.take_newcomers();
            if self.core.sweep_due() {
                self.sweep();
            }
        }
        self.finish();
    }

    /// Takes every completion off the queue and handles each.
    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        loop {
            cqes.clear();
            cqes.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
            if cqes.is_empty() {
                break;
            }
            self.core.counters.add(Event::UringCompleted, cqes.len() as u64);
            for &(data, res, flags) in &cqes {
                self.complete(data, res, flags);
            }
        }
        self.cqes = cqes;
    }

    fn complete(&mut self, data: u64, res: i32, flags: u32) {
        let (kind, key, generation) = untoken(data);
        match kind {
            ACCEPT => self.on_accept(res, flags),
            SHUTDOWN => self.begin_shutdown(),
            MAILBOX => {
                if !cqueue::more(flags) {
                    self.arm_mailbox();
                }
                worker::deliver_jobs(self);
            }
            CANCEL => {}
            RECV => self.on_recv(key, generation, res, flags),
            FILE_IN | SOCK_OUT | POLL_OUT => self.on_send(kind, key, generation, res),
            _ => {}
        }
    }

    // -- accepting --------------------------------------------------------------------------

    fn arm_accept(&mut self) {
        let Some(listener) = &self.listener else { return };
        let entry = opcode::AcceptMulti::new(types::Fd(listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK)
            .build()
            .user_data(token(ACCEPT, 0, 0));
        self.accept_armed = true;
        self.push(entry);
    }

    fn on_accept(&mut self, res: i32, flags: u32) {
        if !cqueue::more(flags) {
            self.accept_armed = false;
            if self.core.draining_until.is_some() {
                // The cancel has landed: nothing refers to the listener any more, so closing it
                // now really stops listening (new connections are refused).
                self.listener = None;
            }
        }
        if res >= 0 {
            // A successful accept completion carries a fresh descriptor we now own.
            let stream = accepted_stream(res);
            if self.core.draining_until.is_none() {
                self.newcomers.push_back(stream);
            }
        } else {
            match -res {
                libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => {
                    ACCEPT_WARNINGS.warn("http", &io::Error::from_raw_os_error(-res), self.core.counters);
                    self.accept_retry = true;
                    return;
                }
                libc::ECANCELED => return,
                _ => {}
            }
        }
        if !self.accept_armed && self.core.draining_until.is_none() && !self.accept_retry {
            self.arm_accept();
        }
    }

    /// Takes on the connections accepted since the last turn, after the turn's completions were
    /// handled: every one while the loop keeps up, one per turn while it is behind, so a flash
    /// crowd waits here rather than splitting the loop between itself and the viewers already
    /// being served (the epoll loop leaves them in the backlog by the same rule).
    fn take_newcomers(&mut self) {
        let limit = if std::mem::take(&mut self.behind) { ACCEPTS_PER_TURN_BEHIND } else { usize::MAX };
        for _ in 0..limit {
            let Some(stream) = self.newcomers.pop_front() else { return };
            self.admit(stream);
        }
        if !self.newcomers.is_empty() {
            self.core.counters.add(Event::AcceptsDeferred, 1);
        }
    }

    fn admit(&mut self, stream: TcpStream) {
        let c = self.core.counters;
        c.add(Event::ConnectionsAccepted, 1);
        let Some(id) = self.core.admit() else { return };
        // Multishot accept cannot return peer addresses (one buffer would serve every
        // completion), so the peer is asked for. It is the only system call of an accept on this
        // engine and is counted as one.
        c.syscall(Syscall::Accept);
        let peer = peer_of(stream.as_raw_fd()).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let session = self.service.session(peer, &self.core.clock);
        let mut conn = Connection::new(stream, session, &self.core.clock);
        conn.id = id;
        let key = self.conns.insert(UConn {
            conn,
            awaiting_input: true,
            drained: false,
            recv: Recv::Off,
            chain: None,
            pipe: None,
            copy: None,
            msg: None,
            inflight: 0,
            closing: false,
        });
        self.live += 1;
        self.drive(key);
    }

    // -- receiving --------------------------------------------------------------------------

    /// Arms or cancels the connection's multishot receive as its state asks.
    fn tune_recv(&mut self, key: usize) {
        let u = &mut self.conns[key];
        let want = !u.closing
            && !u.conn.peer_closed
            && !u.conn.session.wants_kernel_tls()
            && (u.conn.lingering.is_some() || u.awaiting_input || u.conn.buffered() < STASH_MAX);
        let id = u.conn.id;
        let fd = u.conn.stream.as_raw_fd();
        match (want, u.recv) {
            (true, Recv::Off) => {
                u.recv = Recv::Armed;
                u.inflight += 1;
                let entry = opcode::RecvMulti::new(types::Fd(fd), BUFFER_GROUP)
                    .build()
                    .user_data(token(RECV, key, id));
                self.push(entry);
            }
            (false, Recv::Armed) => {
                u.recv = Recv::Cancelling;
                let entry =
                    opcode::AsyncCancel::new(token(RECV, key, id)).build().user_data(token(CANCEL, 0, 0));
                self.push(entry);
            }
            _ => {}
        }
    }

    fn on_recv(&mut self, key: usize, generation: u64, res: i32, flags: u32) {
        let bid = cqueue::buffer_select(flags);
        let more = cqueue::more(flags);
        let Some(u) = current(&mut self.conns, key, generation) else {
            if let Some(bid) = bid {
                self.bufs.recycle(bid);
            }
            return;
        };
        if !more {
            u.recv = Recv::Off;
        }
        if res > 0 {
            self.core.counters.add(Event::BytesIn, res as u64);
        }
        let closing = u.closing;
        let lingering = u.conn.lingering.is_some();
        let mut close = false;
        let mut kernel_record = false;
        if closing {
            // Nothing to do with the bytes.
        } else if let (true, None) = (res > 0, bid) {
            // Data without a buffer cannot happen with buffer select; treat it as a broken socket.
            close = true;
        } else if let (true, Some(bid)) = (res > 0, bid) {
            let bytes = self.bufs.get(bid, res as usize);
            if lingering {
                close = !u.conn.discard_lingering(res as usize);
            } else if u.awaiting_input {
                u.conn.feed(bytes, &self.core.clock);
            } else {
                // Not asking for input: keep the bytes for when it is (epoll would leave them in
                // the kernel; `tune_recv` stops receiving past STASH_MAX).
                u.conn.stash(bytes);
            }
        } else if res == 0 {
            u.conn.peer_closed = true;
            close = lingering;
        } else {
            match -res {
                // Out of buffers (they are back by the time the re-arm is submitted), our own
                // pause, or an interruption: re-armed below as the state asks.
                libc::ENOBUFS | libc::ECANCELED | libc::EINTR | libc::EAGAIN => {}
                // Kernel TLS: the next record is an alert or a key update, read on its own.
                libc::EIO if u.conn.kernel_tls && !lingering => {
                    let mut record = vec![0; RECORD_BUFFER];
                    match u.conn.read_kernel_record(&mut record, &self.core.clock, self.core.counters) {
                        Ok(_) => kernel_record = true,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => kernel_record = true,
                        Err(_) => close = true,
                    }
                }
                // Reset or another socket error: the connection is over (epoll closes without
                // counting these, for read errors, too).
                _ => close = true,
            }
        }
        if let Some(bid) = bid {
            self.bufs.recycle(bid);
        }
        if !more && self.retire(key) {
            return;
        }
        if closing {
            return;
        }
        if close {
            self.close(key);
        } else if !lingering
            && (res > 0 && self.conns[key].awaiting_input
                || res == 0
                || kernel_record
                || self.conns[key].conn.session.wants_kernel_tls())
        {
            self.drive(key);
        } else {
            self.tune_recv(key);
        }
    }

    // -- driving ----------------------------------------------------------------------------

    /// `Connection::pump` for asynchronous sends: start the next send chain if output is queued,
    /// else let `Connection::next_step` (the session's half, shared with every engine) say what
    /// the connection needs next.
    fn pump(&mut self, key: usize) -> Step {
        loop {
            let u = &mut self.conns[key];
            if u.chain.is_some() {
                return Step::Busy;
            }
            if !u.conn.out.is_empty() {
                return if self.start_send(key) {
                    if self.conns[key].chain.is_some() {
                        Step::Busy
                    } else {
                        continue;
                    }
                } else {
                    self.core.counters.add(Event::SocketErrors, 1);
                    Step::Failed
                };
            }
            if std::mem::take(&mut u.drained) {
                u.conn.drained(&self.core.clock);
            }
            return match u.conn.next_step(&self.core.clock) {
                None => continue,
                Some(Pump::Job(job)) => Step::Job(job),
                Some(Pump::Waiting | Pump::Blocked | Pump::Yielded) => Step::Busy,
                Some(Pump::NeedInput) => Step::NeedInput,
                Some(Pump::Finished) => Step::Finished,
                Some(Pump::Failed) => Step::Failed,
                // A receive in flight could take ciphertext from under the kernel: switch once
                // it is off (`tune_recv` cancels it meanwhile).
                Some(Pump::KernelTls) if u.recv == Recv::Off => {
                    if u.conn.switch_to_kernel_tls(self.core.counters, &self.core.clock) {
                        continue;
                    }
                    Step::Failed
                }
                Some(Pump::KernelTls) => Step::Busy,
            };
        }
    }

    /// Moves one connection forward after a completion, a job or a deadline.
    fn drive(&mut self, key: usize) {
        match self.conns.get(key) {
            Some(u) if !u.closing => {}
            _ => return,
        }
        if self.conns[key].conn.lingering.is_none() {
            let keep = loop {
                let step = self.pump(key);
                let u = &mut self.conns[key];
                u.awaiting_input = matches!(step, Step::NeedInput);
                match step {
                    Step::Job(job) => self.core.run_job(key, &mut u.conn, job),
                    Step::Busy | Step::NeedInput => break true,
                    Step::Failed => break false,
                    Step::Finished => {
                        // Unconsumed input dies with the response stream, as on epoll.
                        u.conn.discard_input();
                        break u.conn.start_linger(&self.core.clock, self.core.counters);
                    }
                }
            };
            if !keep {
                self.close(key);
                return;
            }
        }
        self.tune_recv(key);
        let deadline = self.conns[key].conn.deadline(self.core.config.send_timeout);
        self.core.wake_by(deadline);
    }

    fn arm_mailbox(&mut self) {
        let entry = opcode::PollAdd::new(types::Fd(self.core.mailbox_fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(token(MAILBOX, 0, 0));
        self.push(entry);
    }

    fn sweep(&mut self) {
        self.pipes.trim();
        self.copies.trim();
        if std::mem::take(&mut self.accept_retry) && self.core.draining_until.is_none() && !self.accept_armed
        {
            self.arm_accept();
        }
        worker::sweep(self);
    }
}

/// The connection in `key` if it is still the one that `generation` names; otherwise the
/// completion is stale (its caller still returns a receive buffer).
fn current<T>(conns: &mut Slab<UConn<T>>, key: usize, generation: u64) -> Option<&mut UConn<T>> {
    conns.get_mut(key).filter(|u| u.conn.id & 0xFF_FFFF == generation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip() {
        let t = token(SOCK_OUT, 123_456, 0x1_234_567);
        assert_eq!(untoken(t), (SOCK_OUT, 123_456, 0x234_567));
        assert_eq!(untoken(token(ACCEPT, 0, 0)), (ACCEPT, 0, 0));
    }
}
