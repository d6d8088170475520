//! The threads engine: blocking sockets, one thread per connection at a time.
//!
//! This is the servlet-container model the source reports compare against: an acceptor hands
//! each connection to a thread that reads, handles and writes with blocking calls. In `pool` mode
//! a fixed number of threads take connections from a bounded queue (when all are busy, accepted
//! connections wait, as they would in Tomcat); in `per-connection` mode every connection gets a
//! new thread. Waiting for input uses `poll` on the socket and the shutdown signal, so a thread
//! parked on an idle keep-alive connection still notices shutdown and its deadlines.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use sluice_proto::Session;

use crate::connection::{Connection, Pump};
use crate::counters::{Counters, Event, Shard, Syscall};
use crate::listener::accept;
use crate::pool::run_job;
use crate::send::{PipePool, SendBuffers};
use crate::{new_clock, read_clock, EngineConfig, EngineError, Listeners, Service, Shutdown, ThreadsMode};

const READ_BUFFER: usize = 16 * 1024;
const COPY_BUFFER: usize = 64 * 1024;
/// Stack for connection threads: they hold no large frames (buffers are on the heap), and a
/// smaller reservation lets per-connection mode reach thousands of threads.
const STACK: usize = 256 * 1024;

pub(crate) fn run<S: Service>(
    config: &EngineConfig,
    listeners: Listeners,
    service: Arc<S>,
    shutdown: &Shutdown,
    counters: &Counters,
) -> Result<(), EngineError> {
    // One blocking acceptor is enough; extra SO_REUSEPORT sockets would only strand connections
    // in backlogs nobody accepts from.
    let Some(listener) = listeners.into_sockets().into_iter().next() else {
        return Err(EngineError::Config("no listener".into()));
    };
    let open = AtomicUsize::new(0);
    let spawn_err = |source| EngineError::Setup { what: "spawn thread", source };
    std::thread::scope(|scope| -> Result<(), EngineError> {
        match config.threads_mode {
            ThreadsMode::Pool => {
                let (tx, rx) = sync_channel::<(TcpStream, SocketAddr)>(config.pool_size);
                let rx = Arc::new(Mutex::new(rx));
                for i in 0..config.pool_size {
                    let (rx, service, open) = (Arc::clone(&rx), &*service, &open);
                    std::thread::Builder::new()
                        .name(format!("sluice-pool-{i}"))
                        .stack_size(STACK)
                        .spawn_scoped(scope, move || {
                            pool_worker(&rx, config, service, shutdown, open, counters.shard(i + 1))
                        })
                        .map_err(spawn_err)?;
                }
                accept_loop(&listener, shutdown, counters.shard(0), |stream, peer| {
                    if open.fetch_add(1, Ordering::Relaxed) >= config.max_connections {
                        open.fetch_sub(1, Ordering::Relaxed);
                        reject(counters.shard(0));
                        return;
                    }
                    // Blocks while the queue is full: the backpressure a fixed pool has.
                    if tx.send((stream, peer)).is_err() {
                        open.fetch_sub(1, Ordering::Relaxed);
                    }
                });
                // Stop accepting at once; the pool drains what it has.
                drop(listener);
                drop(tx);
            }
            ThreadsMode::PerConnection => {
                let (service, open) = (&*service, &open);
                let mut spawned_total = 0usize;
                accept_loop(&listener, shutdown, counters.shard(0), |stream, peer| {
                    if open.fetch_add(1, Ordering::Relaxed) >= config.max_connections {
                        open.fetch_sub(1, Ordering::Relaxed);
                        reject(counters.shard(0));
                        return;
                    }
                    spawned_total += 1;
                    let shard = counters.shard(spawned_total);
                    let spawned = std::thread::Builder::new()
                        .name("sluice-conn".into())
                        .stack_size(STACK)
                        .spawn_scoped(scope, move || {
                            let mut buffers = Buffers::new(shard);
                            serve(stream, peer, config, service, shutdown, &mut buffers);
                            open.fetch_sub(1, Ordering::Relaxed);
                        });
                    if let Err(e) = spawned {
                        open.fetch_sub(1, Ordering::Relaxed);
                        tracing::warn!("cannot start a connection thread: {e}");
                    }
                });
                drop(listener);
            }
        }
        Ok(())
    })
}

/// Counts a connection closed at once because `max_connections` was reached.
fn reject(counters: &Shard) {
    counters.add(Event::ConnectionsRejected, 1);
    counters.add(Event::ConnectionsClosed, 1);
    counters.syscall(Syscall::Close);
}

fn accept_loop(
    listener: &TcpListener,
    shutdown: &Shutdown,
    counters: &Shard,
    mut hand_off: impl FnMut(TcpStream, SocketAddr),
) {
    let fd = listener.as_raw_fd();
    loop {
        let mut fds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: shutdown.fd(), events: libc::POLLIN, revents: 0 },
        ];
        counters.syscall(Syscall::Poll);
        // SAFETY: fds is a live array of two pollfds.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if shutdown.is_triggered() {
            return;
        }
        if r <= 0 {
            continue;
        }
        match accept(fd, false, counters) {
            Ok((stream, peer)) => hand_off(stream, peer),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) => {
                counters.add(Event::AcceptErrors, 1);
                tracing::warn!("accept: {e}");
                std::thread::sleep(std::time::Duration::from_millis(10));
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

fn pool_worker<S: Service>(
    queue: &Mutex<Receiver<(TcpStream, SocketAddr)>>,
    config: &EngineConfig,
    service: &S,
    shutdown: &Shutdown,
    open: &AtomicUsize,
    counters: &Shard,
) {
    let mut buffers = Buffers::new(counters);
    loop {
        let job = match queue.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok((stream, peer)) = job else { return };
        serve(stream, peer, config, service, shutdown, &mut buffers);
        open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Serves one connection to its end on the calling thread.
///
/// The socket is non-blocking and the thread blocks in `poll` instead of in `read` or `send`:
/// that is how a blocking socket with timeouts is built anyway (Java's socket streams do the
/// same), and it lets one wait honour the send deadline (measured from the last byte that moved,
/// not restarted by every partial write as `SO_SNDTIMEO` would), the idle and header deadlines,
/// and shutdown, whichever comes first.
fn serve<S: Service>(
    stream: TcpStream,
    peer: SocketAddr,
    config: &EngineConfig,
    service: &S,
    shutdown: &Shutdown,
    buffers: &mut Buffers<'_>,
) {
    let counters = buffers.counters;
    serve_connection(stream, peer, config, service, shutdown, buffers);
    // A pipe serves one connection's responses; an idle pool thread holds none.
    buffers.pipes.clear();
    counters.syscall(Syscall::Close);
    counters.add(Event::ConnectionsClosed, 1);
}

fn serve_connection<S: Service>(
    stream: TcpStream,
    peer: SocketAddr,
    config: &EngineConfig,
    service: &S,
    shutdown: &Shutdown,
    buffers: &mut Buffers<'_>,
) {
    let counters = buffers.counters;
    if stream.set_nonblocking(true).is_err() {
        return;
    }
    let fd = stream.as_raw_fd();
    let mut clock = new_clock();
    let session = service.session(peer, &clock);
    let mut conn = Connection::new(stream, session, &clock);
    let mut grace_until: Option<Instant> = None;
    let mut send_buffers = SendBuffers { copy: &mut buffers.copy, pipes: &mut buffers.pipes, counters };
    loop {
        let direction = match conn.pump(&clock, config.send, &mut send_buffers) {
            // Servlet-style: CPU work runs on the connection's own thread.
            Pump::Job(job) => {
                let output = run_job(job);
                conn.job_done(output, &clock);
                continue;
            }
            // Only the session's timer can move it on; watch the socket for hang-ups alone.
            Pump::Waiting => 0,
            Pump::Failed => return,
            Pump::Finished => {
                linger(&mut conn, &mut buffers.read, &clock, counters);
                return;
            }
            Pump::Blocked => libc::POLLOUT,
            Pump::NeedInput => libc::POLLIN,
        };
        read_clock(&mut clock);
        if grace_until.is_none() && shutdown.is_triggered() {
            grace_until = Some(clock.now() + config.shutdown_grace);
            if conn.session.on_shutdown(&mut conn.out) {
                return;
            }
            continue;
        }
        let deadline = match (conn.deadline(config.send_timeout), grace_until) {
            (Some(d), Some(g)) => Some(d.min(g)),
            (d, g) => d.or(g),
        };
        let watch_shutdown = grace_until.is_none().then(|| shutdown.fd());
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
                if grace_until.is_some_and(|g| clock.now() >= g) {
                    return;
                }
                let stalled_send = !conn.out.is_empty();
                if conn.deadline(config.send_timeout).is_some_and(|d| d <= clock.now())
                    && !conn.on_deadline(&clock)
                {
                    if stalled_send {
                        counters.add(Event::SendTimeouts, 1);
                    }
                    return;
                }
            }
        }
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
    // SAFETY: fds is a live array; a negative fd is ignored by poll.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
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

fn linger<S: sluice_proto::Session>(
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
