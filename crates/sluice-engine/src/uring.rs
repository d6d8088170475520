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
//! Whether io_uring can run at all is `uring_probe`'s business, not this module's.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use slab::Slab;
use sluice_proto::conn::Pending;
use sluice_proto::{Clock, Job, Session};

use crate::connection::{sort_deadlines, Connection, Pump};
use crate::counters::{Counters, Event, Shard, Syscall};
use crate::listener::{set_int_opt, socket_addr_from};
use crate::per_listener;
use crate::pool::{CpuPool, Delivery, Mailbox};
use crate::uring_probe::{self, Support};
use crate::{
    cvt, new_clock, read_clock, EngineConfig, EngineError, Listeners, SendStrategy, Service, Shutdown,
};

/// Longest sleep between deadline sweeps (as epoll's): nearer deadlines wake the loop earlier.
const SWEEP: Duration = Duration::from_millis(250);
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
/// their completion is handled, so this bounds bytes received per loop turn, not per connection;
/// 512 × 16 KiB is 8 MiB of address space, touched only as far as traffic reaches.
const RECV_BUFFERS: u16 = 512;
const RECV_BUFFER_SIZE: usize = 16 * 1024;
const BUFFER_GROUP: u16 = 0;
/// Submission queue entries; when full the worker submits early, so this only sets batch size.
const SQ_ENTRIES: u32 = 1024;
/// Copy-strategy buffer size (one read and one send move at most this much).
const COPY_BUFFER: usize = 128 * 1024;
/// Idle copy buffers kept per worker.
const COPY_POOL_MAX: usize = 64;
/// Pipe capacity asked for (the kernel grants up to `fs.pipe-max-size`, 1 MiB by default).
const PIPE_SIZE: i32 = 1 << 20;
/// Idle pipes kept per worker.
const PIPE_POOL_MAX: usize = 64;
/// Most bytes a connection buffers while it is not asking for input (a response in flight, a job
/// running). Beyond it the worker stops receiving on that connection, so a client that pipelines
/// without reading waits in its kernel buffers, not in ours: epoll gets the same bound by not
/// reading at all until the session wants input.
const STASH_MAX: usize = 64 * 1024;
/// Most bytes read and discarded while lingering (as `connection.rs`).
const LINGER_MAX_BYTES: usize = 1 << 20;
/// Slices gathered into one `sendmsg` (as `send.rs`).
const MAX_IOVECS: usize = 16;
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

pub(crate) fn run<S: Service>(
    config: &EngineConfig,
    listeners: Listeners,
    service: Arc<S>,
    shutdown: &Shutdown,
    counters: &Counters,
) -> Result<(), EngineError> {
    let support = uring_probe::support().map_err(|reason| uring_probe::refusal(&reason))?;
    let open = AtomicUsize::new(0);
    let pool = CpuPool::start(config.cpu_workers, config.cpu_queue)?;
    let pool = &pool;
    let per_worker = config.max_connections.div_ceil(config.workers.max(1));
    per_listener("uring", listeners, |index, listener| {
        let shared = Shared {
            service: &*service,
            config,
            shutdown,
            open: &open,
            counters: counters.shard(index),
            pool,
        };
        Worker::new(shared, support, listener, per_worker)?.run();
        Ok(())
    })
}

/// What every worker borrows from `run`.
struct Shared<'a, S: Service> {
    service: &'a S,
    config: &'a EngineConfig,
    shutdown: &'a Shutdown,
    open: &'a AtomicUsize,
    counters: &'a Shard,
    pool: &'a CpuPool,
}

// ---------------------------------------------------------------------------------------------
// Provided-buffer ring
// ---------------------------------------------------------------------------------------------

/// A ring of provided buffers (`IORING_REGISTER_PBUF_RING`): the kernel picks a buffer for each
/// multishot-receive completion and names it in the completion's flags; the worker hands it back
/// once it has used the bytes.
pub(crate) struct BufRing {
    /// The descriptor ring shared with the kernel: page-aligned, from `mmap`.
    ring: *mut types::BufRingEntry,
    ring_bytes: usize,
    entries: u16,
    buffer_size: usize,
    /// The buffers themselves, one allocation.
    memory: Box<[u8]>,
    /// Our copy of the tail; published to the kernel with a release store.
    tail: u16,
}

impl BufRing {
    /// Allocates `entries` (a power of two) buffers of `buffer_size` bytes, not yet registered.
    pub(crate) fn new(entries: u16, buffer_size: usize) -> io::Result<BufRing> {
        assert!(entries.is_power_of_two());
        let ring_bytes = (entries as usize * std::mem::size_of::<types::BufRingEntry>()).max(4096);
        // SAFETY: an anonymous private mapping; no pointers are passed in. The result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                ring_bytes,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(BufRing {
            ring: ptr.cast(),
            ring_bytes,
            entries,
            buffer_size,
            memory: vec![0u8; entries as usize * buffer_size].into_boxed_slice(),
            tail: 0,
        })
    }

    /// Registers the ring as buffer group `bgid` of `ring` and hands the kernel every buffer.
    pub(crate) fn register(&mut self, ring: &IoUring, bgid: u16) -> io::Result<()> {
        // SAFETY: the descriptor ring is a live mapping of `entries` entries; it stays mapped
        // until this BufRing is dropped, which its owners do only after unregistering it or
        // dropping the io_uring (see Drop of Worker and the probe).
        unsafe { ring.submitter().register_buf_ring_with_flags(self.ring as u64, self.entries, bgid, 0)? };
        for bid in 0..self.entries {
            self.push(bid);
        }
        self.publish();
        Ok(())
    }

    /// The first `len` bytes of buffer `bid`.
    fn get(&self, bid: u16, len: usize) -> &[u8] {
        let start = bid as usize * self.buffer_size;
        &self.memory[start..start + len.min(self.buffer_size)]
    }

    /// Gives buffer `bid` back to the kernel.
    fn recycle(&mut self, bid: u16) {
        if bid < self.entries {
            self.push(bid);
            self.publish();
        }
    }

    fn push(&mut self, bid: u16) {
        let index = (self.tail & (self.entries - 1)) as usize;
        let addr = self.memory.as_ptr() as u64 + (bid as usize * self.buffer_size) as u64;
        // SAFETY: index < entries, so the entry is inside the mapping. The kernel reads entries
        // only between its head and our published tail; this slot is past the tail, so it is ours.
        let entry = unsafe { &mut *self.ring.add(index) };
        entry.set_addr(addr);
        entry.set_len(self.buffer_size as u32);
        entry.set_bid(bid);
        self.tail = self.tail.wrapping_add(1);
    }

    fn publish(&self) {
        // SAFETY: the tail field overlays the first entry's `resv` (as the kernel's
        // io_uring_buf_ring lays it out); it is a naturally aligned u16 that the kernel only
        // reads, so an atomic store through it is sound. Release orders the entry writes before.
        unsafe {
            let tail = types::BufRingEntry::tail(self.ring) as *const AtomicU16;
            (*tail).store(self.tail, Ordering::Release);
        }
    }
}

impl Drop for BufRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ring.cast(), self.ring_bytes) };
    }
}

// ---------------------------------------------------------------------------------------------
// Pipes and copy buffers
// ---------------------------------------------------------------------------------------------

/// A pipe for splicing file pages to a socket, and the bytes it holds for the connection's front
/// file segment.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    pending: usize,
}

impl Pipe {
    fn new() -> io::Result<Pipe> {
        let mut fds = [0; 2];
        // Non-blocking both ends: a splice in the kernel's worker thread must never sleep on a
        // pipe (ours are always empty before a fill and sized for it, but a bug should not hang
        // a kernel thread).
        // SAFETY: pipe2 writes two descriptors into `fds`.
        cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) })?;
        // SAFETY: both descriptors are fresh and ours.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // SAFETY: fcntl on our own pipe; on failure the pipe keeps its default size.
        let granted = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_SETPIPE_SZ, PIPE_SIZE) };
        let capacity = if granted > 0 {
            granted as usize
        } else {
            // SAFETY: as above.
            let size = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
            if size > 0 {
                size as usize
            } else {
                64 * 1024
            }
        };
        Ok(Pipe { read, write, capacity, pending: 0 })
    }
}

/// Pipes a worker keeps between connections: a connection holds one only while a splice chain
/// needs it, so a worker needs about as many pipes as connections mid-send, not one per client.
/// The same policy as `send.rs`'s pool: idle pipes are closed when a sweep finds none was taken
/// since the previous sweep.
#[derive(Default)]
struct Pipes {
    free: Vec<Pipe>,
    used: bool,
}

impl Pipes {
    fn take(&mut self) -> io::Result<Pipe> {
        self.used = true;
        match self.free.pop() {
            Some(p) => Ok(p),
            None => Pipe::new(),
        }
    }

    fn put(&mut self, pipe: Pipe) {
        // A pipe still holding bytes belongs to a dead response: close it.
        if pipe.pending == 0 && self.free.len() < PIPE_POOL_MAX {
            self.free.push(pipe);
        }
    }

    fn trim(&mut self) {
        if !std::mem::take(&mut self.used) {
            self.free.clear();
        }
    }
}

/// A copy buffer lent to a connection, with the read bytes not yet sent (`start..end`); they are
/// the next bytes of the connection's front file segment.
struct CopyBuf {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

#[derive(Default)]
struct CopyPool {
    free: Vec<Box<[u8]>>,
    used: bool,
}

impl CopyPool {
    fn take(&mut self) -> CopyBuf {
        self.used = true;
        let buf = self.free.pop().unwrap_or_else(|| vec![0u8; COPY_BUFFER].into_boxed_slice());
        CopyBuf { buf, start: 0, end: 0 }
    }

    fn put(&mut self, b: CopyBuf) {
        if self.free.len() < COPY_POOL_MAX {
            self.free.push(b.buf);
        }
    }

    fn trim(&mut self) {
        if !std::mem::take(&mut self.used) {
            self.free.clear();
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------------------------

/// What is on the ring for a connection's output.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ChainKind {
    /// One send or sendmsg of in-memory segments.
    Bytes,
    /// splice file → pipe (optional) linked to splice pipe → socket.
    Splice,
    /// read file → buffer (optional) linked to send buffer → socket.
    Copy,
    /// A poll for writability after the socket was found full.
    PollOut,
}

/// The send chain in flight: its results arrive one completion at a time and are applied together
/// once all are in, so the order they are reaped in does not matter.
struct Chain {
    kind: ChainKind,
    /// Whether the chain starts with a FILE_IN operation.
    with_in: bool,
    r_in: Option<i32>,
    r_out: Option<i32>,
}

impl Chain {
    fn complete(&self) -> bool {
        (!self.with_in || self.r_in.is_some()) && self.r_out.is_some()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Recv {
    Off,
    Armed,
    /// Cancel submitted; the final completion has not arrived.
    Cancelling,
}

/// A `msghdr` and its iovecs at a stable address for an in-flight `sendmsg`.
struct MsgSlot {
    hdr: libc::msghdr,
    iov: [libc::iovec; MAX_IOVECS],
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
    shared: Shared<'a, S>,
    listener: Option<TcpListener>,
    accept_armed: bool,
    /// A failed accept (EMFILE) waits for the next sweep rather than spinning.
    accept_retry: bool,
    mailbox: Arc<Mailbox>,
    deliveries: Vec<Delivery>,
    next_id: u64,
    next_wake: Instant,
    conns: Slab<UConn<S::Session>>,
    /// Connections not closing.
    live: usize,
    clock: Clock,
    pipes: Pipes,
    copies: CopyPool,
    draining_until: Option<Instant>,
    cqes: Vec<(u64, i32, u32)>,
    due: Vec<usize>,
    /// The kernel takes `min_wait_usec` (`Support::min_wait`), so `run` waits for batches.
    batch_wait: bool,
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
        shared: Shared<'a, S>,
        support: &Support,
        listener: TcpListener,
        max_connections: usize,
    ) -> Result<Self, EngineError> {
        let setup = |what| move |source| EngineError::Setup { what, source };
        // Accepted sockets inherit TCP_NODELAY from the listener on Linux, which saves a
        // setsockopt per connection (responses are written whole; Nagle only delays their tail).
        shared.counters.syscall(Syscall::Setsockopt);
        set_int_opt(listener.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1)
            .map_err(setup("listener TCP_NODELAY"))?;
        // Completions that can be outstanding at once: per connection a final receive, a send
        // chain of two and a poll; the receive buffers; a backlog's worth of accepts. Sized so a
        // burst fits; beyond it the kernel keeps the overflow (IORING_FEAT_NODROP, required by
        // the probe) rather than dropping it, at some cost.
        let cq = (max_connections.saturating_mul(4) + RECV_BUFFERS as usize + 4096)
            .next_power_of_two()
            .clamp(4096, 1 << 17) as u32;
        let ring = uring_probe::build_ring(support.taskrun, support.submit_all, SQ_ENTRIES, cq)
            .map_err(setup("io_uring_setup"))?;
        if support.iowq_max_workers {
            let mut caps = IOWQ_MAX_WORKERS;
            if let Err(e) = ring.submitter().register_iowq_max_workers(&mut caps) {
                tracing::warn!("cannot cap io_uring worker threads: {e}");
            }
        }
        // The kernel's worker threads run where this worker may run, so a worker pinned to a
        // core (taskset, cpusets) does not spill its splices onto other cores.
        // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity fills it for this thread.
        let mut cpus: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: passes a live cpu_set_t and its size.
        if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut cpus) } == 0 {
            let _ = ring.submitter().register_iowq_aff(&cpus);
        }
        let mut bufs = BufRing::new(RECV_BUFFERS, RECV_BUFFER_SIZE).map_err(setup("receive buffers"))?;
        bufs.register(&ring, BUFFER_GROUP).map_err(setup("IORING_REGISTER_PBUF_RING"))?;
        let mut worker = Worker {
            ring,
            bufs,
            listener: Some(listener),
            accept_armed: false,
            accept_retry: false,
            mailbox: Mailbox::new()?,
            deliveries: Vec::new(),
            next_id: 0,
            next_wake: Instant::now() + SWEEP,
            conns: Slab::with_capacity(1024),
            live: 0,
            clock: new_clock(),
            pipes: Pipes::default(),
            copies: CopyPool::default(),
            draining_until: None,
            cqes: Vec::with_capacity(1024),
            due: Vec::new(),
            batch_wait: support.min_wait,
            shared,
        };
        worker.arm_accept();
        let poll = opcode::PollAdd::new(types::Fd(worker.shared.shutdown.fd()), libc::POLLIN as u32)
            .build()
            .user_data(token(SHUTDOWN, 0, 0));
        worker.push(poll);
        worker.arm_mailbox();
        Ok(worker)
    }

    /// Queues one entry, submitting first if the queue is full.
    fn push(&mut self, entry: squeue::Entry) {
        loop {
            // SAFETY: every entry built in this module points only at memory that outlives the
            // operation: the outbox segments, message slot, pipe and copy buffer of a connection
            // (kept until its last completion), or the worker's buffer ring.
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return;
            }
            self.enter(Wait::Submit);
        }
    }

    /// Queues a chain of linked entries, all in one go so a submit cannot split the chain.
    fn push_linked(&mut self, first: squeue::Entry, second: squeue::Entry) {
        loop {
            let entries = [first.clone().flags(squeue::Flags::IO_LINK), second.clone()];
            // SAFETY: as in `push`.
            if unsafe { self.ring.submission().push_multiple(&entries) }.is_ok() {
                return;
            }
            self.enter(Wait::Submit);
        }
    }

    /// One `io_uring_enter`: submits what is queued and waits as `wait` says. Errors that only
    /// mean "nothing to reap yet" are swallowed.
    fn enter(&mut self, wait: Wait) {
        let c = self.shared.counters;
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
            if let Some(until) = self.draining_until {
                if self.live == 0 || self.clock.now() >= until {
                    break;
                }
            }
            let idle = self.conns.is_empty()
                && self.draining_until.is_none()
                && self.pipes.free.is_empty()
                && self.copies.free.is_empty()
                && !self.accept_retry;
            let wait = if idle {
                // Nothing to batch; and a min-wait without a timeout would end every
                // BATCH_WAIT_USEC whether or not anything came.
                Wait::One(None)
            } else {
                // Rounded up to the millisecond, as epoll's: waking early just spins.
                let sleep = self.next_wake.saturating_duration_since(self.clock.now());
                let timeout = Duration::from_millis(sleep.as_micros().div_ceil(1000) as u64);
                if self.batch_wait {
                    Wait::Batch(timeout)
                } else {
                    Wait::One(Some(timeout))
                }
            };
            self.enter(wait);
            read_clock(&mut self.clock);
            self.reap();
            if self.clock.now() >= self.next_wake {
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
            self.shared.counters.add(Event::UringCompleted, cqes.len() as u64);
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
                self.deliver_jobs();
            }
            CANCEL => {}
            RECV => self.on_recv(key, generation, res, flags),
            FILE_IN | SOCK_OUT | POLL_OUT => self.on_send(kind, key, generation, res),
            _ => {}
        }
    }

    /// Counts one operation of `key` as finished; returns true when the connection was closing
    /// and this was its last, so it has been released.
    fn retire(&mut self, key: usize) -> bool {
        let u = &mut self.conns[key];
        u.inflight -= 1;
        if u.closing && u.inflight == 0 {
            self.release(key);
            return true;
        }
        u.closing
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
            if self.draining_until.is_some() {
                // The cancel has landed: nothing refers to the listener any more, so closing it
                // now really stops listening (new connections are refused).
                self.listener = None;
            }
        }
        if res >= 0 {
            // SAFETY: a successful accept completion carries a fresh descriptor we now own.
            let stream = unsafe { TcpStream::from_raw_fd(res) };
            self.admit(stream);
        } else {
            match -res {
                libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => {
                    self.shared.counters.add(Event::AcceptErrors, 1);
                    tracing::warn!(
                        "accept: {}; connections wait in the backlog",
                        io::Error::from_raw_os_error(-res)
                    );
                    self.accept_retry = true;
                    return;
                }
                libc::ECANCELED => return,
                _ => {}
            }
        }
        if !self.accept_armed && self.draining_until.is_none() && !self.accept_retry {
            self.arm_accept();
        }
    }

    fn admit(&mut self, stream: TcpStream) {
        let (c, open) = (self.shared.counters, self.shared.open);
        c.add(Event::ConnectionsAccepted, 1);
        let reject = self.draining_until.is_some()
            || open.fetch_add(1, Ordering::Relaxed) >= self.shared.config.max_connections;
        if reject {
            if self.draining_until.is_none() {
                open.fetch_sub(1, Ordering::Relaxed);
                c.add(Event::ConnectionsRejected, 1);
            }
            c.add(Event::ConnectionsClosed, 1);
            c.syscall(Syscall::Close);
            return;
        }
        // Multishot accept cannot return peer addresses (one buffer would serve every
        // completion), so the peer is asked for. It is the only system call of an accept on this
        // engine and is counted as one.
        c.syscall(Syscall::Accept);
        let peer = peer_of(stream.as_raw_fd()).unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let session = self.shared.service.session(peer, &self.clock);
        let mut conn = Connection::new(stream, session, &self.clock);
        self.next_id += 1;
        conn.id = self.next_id;
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
            self.shared.counters.add(Event::BytesIn, res as u64);
        }
        let closing = u.closing;
        let lingering = u.conn.lingering.is_some();
        let mut close = false;
        if closing {
            // Nothing to do with the bytes.
        } else if let (true, None) = (res > 0, bid) {
            // Data without a buffer cannot happen with buffer select; treat it as a broken socket.
            close = true;
        } else if let (true, Some(bid)) = (res > 0, bid) {
            let bytes = self.bufs.get(bid, res as usize);
            if lingering {
                if let Some((until, discarded)) = u.conn.lingering {
                    let discarded = discarded + res as usize;
                    u.conn.lingering = Some((until, discarded));
                    close = discarded > LINGER_MAX_BYTES;
                }
            } else if u.awaiting_input {
                u.conn.feed(bytes, &self.clock);
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
        } else if !lingering && (res > 0 && self.conns[key].awaiting_input || res == 0) {
            self.drive(key);
        } else {
            self.tune_recv(key);
        }
    }

    // -- sending ----------------------------------------------------------------------------

    /// Puts the next piece of the outbox on the ring. Returns false when it cannot (a pipe
    /// could not be made, or a file segment with no bytes to send was found).
    fn start_send(&mut self, key: usize) -> bool {
        let strategy = self.shared.config.send;
        let u = &mut self.conns[key];
        let id = u.conn.id;
        let sock = u.conn.stream.as_raw_fd();
        let out_token = token(SOCK_OUT, key, id);
        let in_token = token(FILE_IN, key, id);
        let more_after_front = u.conn.out.segment_after(1).is_some();
        let (file, offset, len) = match u.conn.out.front() {
            None => return true,
            Some(Pending::Bytes(_)) => {
                let mut slots = [io::IoSlice::new(&[]); MAX_IOVECS];
                let n = u.conn.out.leading_slices(&mut slots);
                let file_follows =
                    u.conn.out.segment_after(n).is_some_and(|s| matches!(s, sluice_proto::Segment::File(_)));
                let flags = libc::MSG_NOSIGNAL | if file_follows { libc::MSG_MORE } else { 0 };
                let entry = if n == 1 {
                    opcode::Send::new(types::Fd(sock), slots[0].as_ptr(), slots[0].len() as u32)
                        .flags(flags)
                        .build()
                } else {
                    let slot = u.msg.get_or_insert_with(|| {
                        Box::new(MsgSlot {
                            // SAFETY: an all-zero msghdr is valid (null pointers, zero lengths).
                            hdr: unsafe { std::mem::zeroed() },
                            iov: [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_IOVECS],
                        })
                    });
                    for (iov, s) in slot.iov.iter_mut().zip(&slots[..n]) {
                        *iov = libc::iovec { iov_base: s.as_ptr() as *mut libc::c_void, iov_len: s.len() };
                    }
                    slot.hdr.msg_iov = slot.iov.as_mut_ptr();
                    slot.hdr.msg_iovlen = n;
                    opcode::SendMsg::new(types::Fd(sock), &slot.hdr).flags(flags as u32).build()
                };
                u.chain = Some(Chain { kind: ChainKind::Bytes, with_in: false, r_in: None, r_out: None });
                u.inflight += 1;
                self.push(entry.user_data(out_token));
                return true;
            }
            Some(Pending::File(slice)) => (slice.file.as_raw_fd(), slice.offset, slice.len),
        };
        if len == 0 {
            return false;
        }
        match strategy {
            SendStrategy::Splice => {
                let pipe = match u.pipe.take() {
                    Some(p) => p,
                    None => match self.pipes.take() {
                        Ok(p) => p,
                        Err(e) => {
                            tracing::warn!("pipe2: {e}");
                            return false;
                        }
                    },
                };
                let u = &mut self.conns[key];
                let (pipe_r, pipe_w, pending, cap) =
                    (pipe.read.as_raw_fd(), pipe.write.as_raw_fd(), pipe.pending, pipe.capacity);
                u.pipe = Some(pipe);
                // SPLICE_F_NONBLOCK on the socket side (the socket is O_NONBLOCK too): a full
                // socket answers EAGAIN and the worker polls for room, instead of a kernel worker
                // thread sleeping on a slow client.
                let out_flags = libc::SPLICE_F_MOVE
                    | libc::SPLICE_F_NONBLOCK
                    | if more_after_front { libc::SPLICE_F_MORE } else { 0 };
                if pending > 0 {
                    // Bytes left in the pipe by a short send go first.
                    let drain =
                        opcode::Splice::new(types::Fd(pipe_r), -1, types::Fd(sock), -1, pending as u32)
                            .flags(out_flags)
                            .build()
                            .user_data(out_token);
                    u.chain =
                        Some(Chain { kind: ChainKind::Splice, with_in: false, r_in: None, r_out: None });
                    u.inflight += 1;
                    self.push(drain);
                } else {
                    let n = (len as usize).min(cap).min(u32::MAX as usize) as u32;
                    let fill = opcode::Splice::new(types::Fd(file), offset as i64, types::Fd(pipe_w), -1, n)
                        .flags(libc::SPLICE_F_MOVE)
                        .build()
                        .user_data(in_token);
                    // A short fill breaks the link: the drain then completes with ECANCELED and
                    // what did reach the pipe goes out in the next chain.
                    let drain = opcode::Splice::new(types::Fd(pipe_r), -1, types::Fd(sock), -1, n)
                        .flags(out_flags)
                        .build()
                        .user_data(out_token);
                    u.chain = Some(Chain { kind: ChainKind::Splice, with_in: true, r_in: None, r_out: None });
                    u.inflight += 2;
                    self.push_linked(fill, drain);
                }
            }
            SendStrategy::Copy | SendStrategy::Sendfile => {
                // (Sendfile never gets here: `run` refuses it for this engine.)
                if u.copy.is_none() {
                    u.copy = Some(self.copies.take());
                }
                let u = &mut self.conns[key];
                let copy = u.copy.as_mut().expect("just set");
                let flags = libc::MSG_NOSIGNAL | if more_after_front { libc::MSG_MORE } else { 0 };
                if copy.start < copy.end {
                    let send = opcode::Send::new(
                        types::Fd(sock),
                        copy.buf[copy.start..].as_ptr(),
                        (copy.end - copy.start) as u32,
                    )
                    .flags(flags)
                    .build()
                    .user_data(out_token);
                    u.chain = Some(Chain { kind: ChainKind::Copy, with_in: false, r_in: None, r_out: None });
                    u.inflight += 1;
                    self.push(send);
                } else {
                    let n = (len as usize).min(copy.buf.len()) as u32;
                    copy.start = 0;
                    copy.end = 0;
                    let read = opcode::Read::new(types::Fd(file), copy.buf.as_mut_ptr(), n)
                        .offset(offset)
                        .build()
                        .user_data(in_token);
                    // A short read breaks the link (the send completes with ECANCELED) and the
                    // bytes read go out in the next chain.
                    let send = opcode::Send::new(types::Fd(sock), copy.buf.as_ptr(), n)
                        .flags(flags)
                        .build()
                        .user_data(out_token);
                    u.chain = Some(Chain { kind: ChainKind::Copy, with_in: true, r_in: None, r_out: None });
                    u.inflight += 2;
                    self.push_linked(read, send);
                }
            }
        }
        true
    }

    fn on_send(&mut self, kind: u8, key: usize, generation: u64, res: i32) {
        let Some(u) = current(&mut self.conns, key, generation) else { return };
        if let Some(chain) = u.chain.as_mut() {
            if kind == FILE_IN {
                chain.r_in = Some(res);
            } else {
                chain.r_out = Some(res);
            }
        }
        if self.retire(key) {
            return;
        }
        let u = &mut self.conns[key];
        if u.closing || !u.chain.as_ref().is_some_and(Chain::complete) {
            return;
        }
        let chain = u.chain.take().expect("complete chain");
        match self.apply(key, &chain) {
            Ok(()) => {
                let u = &mut self.conns[key];
                if u.conn.out.is_empty() {
                    u.drained = true;
                    if let Some(p) = u.pipe.take() {
                        self.pipes.put(p);
                    }
                    if let Some(b) = u.copy.take() {
                        self.copies.put(b);
                    }
                }
                self.drive(key);
            }
            Err(()) => {
                self.shared.counters.add(Event::SocketErrors, 1);
                self.close(key);
            }
        }
    }

    /// Applies a finished chain's results to the outbox. An error means the socket or the file
    /// failed and the connection is to be closed.
    fn apply(&mut self, key: usize, chain: &Chain) -> Result<(), ()> {
        let c = self.shared.counters;
        let now = self.clock.now();
        let u = &mut self.conns[key];
        let r_out = chain.r_out.unwrap_or(-libc::ECANCELED);
        match chain.kind {
            ChainKind::PollOut => return if r_out < 0 && r_out != -libc::EINTR { Err(()) } else { Ok(()) },
            ChainKind::Bytes => {}
            ChainKind::Splice => {
                if let (Some(r_in), Some(pipe)) = (chain.r_in, u.pipe.as_mut()) {
                    if r_in <= 0 {
                        // 0: the file is shorter than its response.
                        return Err(());
                    }
                    pipe.pending += r_in as usize;
                }
                if r_out > 0 {
                    if let Some(pipe) = u.pipe.as_mut() {
                        pipe.pending -= (r_out as usize).min(pipe.pending);
                    }
                }
            }
            ChainKind::Copy => {
                if let (Some(r_in), Some(copy)) = (chain.r_in, u.copy.as_mut()) {
                    if r_in <= 0 {
                        return Err(());
                    }
                    copy.start = 0;
                    copy.end = r_in as usize;
                }
                if r_out > 0 {
                    if let Some(copy) = u.copy.as_mut() {
                        copy.start = (copy.start + r_out as usize).min(copy.end);
                    }
                }
            }
        }
        match r_out {
            n if n > 0 => {
                u.conn.out.advance(n as u64);
                u.conn.last_progress = now;
                c.add(Event::BytesOut, n as u64);
                Ok(())
            }
            0 => Err(()),
            // The link broke before the socket operation (a short fill): nothing was sent.
            e if e == -libc::ECANCELED && chain.with_in => Ok(()),
            e if e == -libc::EAGAIN => {
                // The socket is full: wait until it has room. Counts as the chain in flight.
                let id = u.conn.id;
                let poll = opcode::PollAdd::new(types::Fd(u.conn.stream.as_raw_fd()), libc::POLLOUT as u32)
                    .build()
                    .user_data(token(POLL_OUT, key, id));
                u.chain = Some(Chain { kind: ChainKind::PollOut, with_in: false, r_in: None, r_out: None });
                u.inflight += 1;
                self.push(poll);
                Ok(())
            }
            e if e == -libc::EINTR => Ok(()),
            _ => Err(()),
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
                    self.shared.counters.add(Event::SocketErrors, 1);
                    Step::Failed
                };
            }
            if std::mem::take(&mut u.drained) {
                u.conn.drained(&self.clock);
            }
            return match u.conn.next_step(&self.clock) {
                None => continue,
                Some(Pump::Job(job)) => Step::Job(job),
                Some(Pump::Waiting | Pump::Blocked) => Step::Busy,
                Some(Pump::NeedInput) => Step::NeedInput,
                Some(Pump::Finished) => Step::Finished,
                Some(Pump::Failed) => Step::Failed,
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
                    Step::Job(job) => {
                        if self.shared.pool.submit(job, key, u.conn.id, &self.mailbox).is_err() {
                            u.conn.job_refused(&self.clock);
                        }
                    }
                    Step::Busy | Step::NeedInput => break true,
                    Step::Failed => break false,
                    Step::Finished => {
                        // Unconsumed input dies with the response stream, as on epoll.
                        u.conn.discard_input();
                        break u.conn.start_linger(&self.clock, self.shared.counters);
                    }
                }
            };
            if !keep {
                self.close(key);
                return;
            }
        }
        self.tune_recv(key);
        if let Some(d) = self.conns[key].conn.deadline(self.shared.config.send_timeout) {
            self.next_wake = self.next_wake.min(d);
        }
    }

    /// Hands finished CPU jobs back to their connections (if those are still the same ones).
    fn deliver_jobs(&mut self) {
        self.mailbox.collect(&mut self.deliveries);
        let mut deliveries = std::mem::take(&mut self.deliveries);
        for (key, id, output) in deliveries.drain(..) {
            if let Some(u) = self.conns.get_mut(key).filter(|u| u.conn.id == id && !u.closing) {
                u.conn.job_done(output, &self.clock);
                self.drive(key);
            }
        }
        self.deliveries = deliveries;
    }

    fn arm_mailbox(&mut self) {
        let entry = opcode::PollAdd::new(types::Fd(self.mailbox.fd()), libc::POLLIN as u32)
            .multi(true)
            .build()
            .user_data(token(MAILBOX, 0, 0));
        self.push(entry);
    }

    fn sweep(&mut self) {
        self.pipes.trim();
        self.copies.trim();
        if std::mem::take(&mut self.accept_retry) && self.draining_until.is_none() && !self.accept_armed {
            self.arm_accept();
        }
        let now = self.clock.now();
        let timeout = self.shared.config.send_timeout;
        let deadlines =
            self.conns.iter().filter(|(_, u)| !u.closing).map(|(key, u)| (key, u.conn.deadline(timeout)));
        self.next_wake = sort_deadlines(deadlines, now, now + SWEEP, &mut self.due);
        for i in 0..self.due.len() {
            let key = self.due[i];
            let u = &mut self.conns[key];
            if u.closing {
                continue;
            }
            let stalled_send = u.conn.lingering.is_none() && !u.conn.out.is_empty();
            if u.conn.on_deadline(&self.clock) {
                self.drive(key);
            } else {
                if stalled_send {
                    self.shared.counters.add(Event::SendTimeouts, 1);
                }
                self.close(key);
            }
        }
    }

    fn begin_shutdown(&mut self) {
        if self.draining_until.is_some() {
            return;
        }
        self.draining_until = Some(self.clock.now() + self.shared.config.shutdown_grace);
        if self.accept_armed {
            // The listener is closed when the accept's last completion arrives; closing it
            // while the accept holds it would keep it listening.
            let cancel = opcode::AsyncCancel::new(token(ACCEPT, 0, 0)).build().user_data(token(CANCEL, 0, 0));
            self.push(cancel);
        } else {
            self.listener = None;
        }
        let keys: Vec<usize> = self.conns.iter().filter(|(_, u)| !u.closing).map(|(k, _)| k).collect();
        for key in keys {
            let u = &mut self.conns[key];
            if u.conn.lingering.is_none() && u.conn.session.on_shutdown(&mut u.conn.out) {
                self.close(key);
            } else {
                self.drive(key);
            }
        }
    }

    // -- closing ----------------------------------------------------------------------------

    /// Starts closing a connection: cancels what it has on the ring; it is released when the
    /// last completion is in.
    fn close(&mut self, key: usize) {
        let u = &mut self.conns[key];
        if u.closing {
            return;
        }
        u.closing = true;
        self.live -= 1;
        if u.inflight == 0 {
            self.release(key);
            return;
        }
        // Everything on the socket: the receive, a send or poll, a splice into it. A fill from a
        // file (on the pipe or buffer, not the socket) finishes on its own, and a linked drain
        // behind it then fails fast or sends into a socket we have not closed yet.
        let fd = u.conn.stream.as_raw_fd();
        let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
            .build()
            .user_data(token(CANCEL, 0, 0));
        self.push(cancel);
    }

    /// Frees a connection nothing on the ring refers to any more, and closes its socket.
    fn release(&mut self, key: usize) {
        let mut u = self.conns.remove(key);
        // A pipe still held here belonged to a response cut short; what a fill put in it was
        // never accounted for, so it is closed, never pooled.
        drop(u.pipe.take());
        if let Some(b) = u.copy.take() {
            self.copies.put(b);
        }
        drop(u);
        let c = self.shared.counters;
        c.syscall(Syscall::Close);
        c.add(Event::ConnectionsClosed, 1);
        self.shared.open.fetch_sub(1, Ordering::Relaxed);
        // A descriptor is free again: an accept stopped by EMFILE may succeed now (as epoll).
        if self.accept_retry && self.draining_until.is_none() && !self.accept_armed {
            self.accept_retry = false;
            self.arm_accept();
        }
    }

    /// Closes what is left and waits for the ring to let go of every buffer before they are
    /// freed.
    fn finish(mut self) {
        let keys: Vec<usize> = self.conns.iter().map(|(k, _)| k).collect();
        for key in keys {
            self.close(key);
        }
        let until = Instant::now() + FINAL_DRAIN;
        while !self.conns.is_empty() && Instant::now() < until {
            self.enter(Wait::One(Some(Duration::from_millis(100))));
            read_clock(&mut self.clock);
            self.reap();
        }
        if !self.conns.is_empty() {
            tracing::warn!(
                "{} connections still had io_uring operations in flight at exit; their buffers are leaked",
                self.conns.len()
            );
            // The kernel may still write into these; never free them.
            std::mem::forget(std::mem::take(&mut self.conns));
            let Worker { ring, bufs, .. } = self;
            drop(ring);
            std::mem::forget(bufs);
        }
    }
}

/// The connection in `key` if it is still the one that `generation` names; otherwise the
/// completion is stale (its caller still returns a receive buffer).
fn current<T>(conns: &mut Slab<UConn<T>>, key: usize, generation: u64) -> Option<&mut UConn<T>> {
    conns.get_mut(key).filter(|u| u.conn.id & 0xFF_FFFF == generation)
}

/// The peer address of a connected socket.
fn peer_of(fd: RawFd) -> Option<SocketAddr> {
    // SAFETY: zeroed storage is valid; getpeername writes at most `len` bytes into it.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid pointers to storage and len, which outlive the call.
    let r = unsafe { libc::getpeername(fd, (&mut storage as *mut libc::sockaddr_storage).cast(), &mut len) };
    if r < 0 {
        return None;
    }
    socket_addr_from(&storage)
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
