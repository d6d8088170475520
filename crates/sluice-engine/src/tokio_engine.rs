//! The tokio engine: one task per connection on tokio's multi-threaded, work-stealing runtime.
//!
//! This is the mainstream Rust baseline and the nearest analogue of Java's virtual threads: code
//! that reads like a blocking loop, scheduled by a runtime over an epoll reactor. Each task drives
//! the same [`Connection`] as the other engines; tokio only decides when. Every send and read runs
//! inside `try_io`, so that a `WouldBlock` from our own system call clears tokio's readiness and
//! the task sleeps until the reactor sees a new edge. The reactor's own `epoll_wait`/`epoll_ctl`
//! calls happen inside tokio and are not in the counters; everything sluice calls itself is.

use std::io::{self, ErrorKind};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sluice_proto::Session;
use tokio::io::Interest;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Notify};

use crate::clock::{new_clock, read_clock};
use crate::config::{EngineConfig, SendStrategy};
use crate::connection::{Connection, Pump};
use crate::counters::{count_closed, ConnectionLimit};
use crate::counters::{Counters, Event, Shard, Syscall};
use crate::error::EngineError;
use crate::launch::{Launch, Service};
use crate::pool::CpuPool;
use crate::send::{PipePool, SendBuffers};
use crate::worker::ACCEPT_WARNINGS;

const READ_BUFFER: usize = 16 * 1024;
const COPY_BUFFER: usize = 64 * 1024;

/// A descriptor tokio owns, seen by the shared connection code through its raw number.
struct Borrowed(RawFd);

impl AsRawFd for Borrowed {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

/// Counts tasks still serving a connection, and wakes shutdown when the last one ends.
struct Open {
    /// Shared with the RTSP loops, whose control connections take places too.
    limit: Arc<ConnectionLimit>,
    /// This engine's connections (the limit's count includes RTSP's).
    tasks: AtomicUsize,
    idle: Notify,
}

impl Open {
    fn leave(&self) {
        self.limit.leave();
        if self.tasks.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }
}

pub(crate) fn run<S: Service>(launch: Launch<'_, S>) -> Result<(), EngineError> {
    let Launch { config, listeners, service, shutdown, counters } = launch;
    let setup = |what| move |source| EngineError::Setup { what, source };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(config.workers)
        // CPU jobs run on the engines' job runner, not here; the one blocking thread is the
        // shutdown wait below, held for the whole run.
        .max_blocking_threads(1)
        .thread_name("sluice-tokio")
        .enable_io()
        .enable_time()
        .build()
        .map_err(setup("tokio runtime"))?;
    let jobs = Arc::new(CpuPool::start(config.cpu_workers, config.cpu_queue)?);
    counters.add_cpu_pool(jobs.stats_handle());
    let result = runtime.block_on(async {
        let (stop_tx, stop_rx) = watch::channel(false);
        let open = Arc::new(Open {
            limit: counters.connection_limit(config.max_connections),
            tasks: AtomicUsize::new(0),
            idle: Notify::new(),
        });
        let config: Arc<EngineConfig> = Arc::new(config.clone());
        for listener in listeners.into_sockets() {
            listener.set_nonblocking(true).map_err(setup("listener O_NONBLOCK"))?;
            let listener = TcpListener::from_std(listener).map_err(setup("tokio listener"))?;
            tokio::spawn(accept_loop(
                listener,
                Arc::clone(&service),
                Arc::clone(&config),
                Arc::clone(&open),
                Arc::clone(&jobs),
                Arc::clone(counters),
                stop_rx.clone(),
            ));
        }
        // The eventfd is written once and stays readable; one blocking poll is all it needs.
        let fd = shutdown.fd();
        let _ = tokio::task::spawn_blocking(move || crate::sys::fd::wait_readable(fd)).await;
        let _ = stop_tx.send(true);
        let grace = tokio::time::sleep(config.shutdown_grace);
        tokio::pin!(grace);
        loop {
            let idle = open.idle.notified();
            if open.tasks.load(Ordering::Acquire) == 0 {
                break;
            }
            tokio::select! {
                _ = idle => {}
                _ = &mut grace => break,
            }
        }
        Ok::<(), EngineError>(())
    });
    // Tasks still running after the grace period are dropped here, closing their sockets.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    result
}

async fn accept_loop<S: Service>(
    listener: TcpListener,
    service: Arc<S>,
    config: Arc<EngineConfig>,
    open: Arc<Open>,
    jobs: Arc<CpuPool>,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let acceptor = counters.shard(0);
    let mut accepted = 0usize;
    loop {
        let (stream, peer) = tokio::select! {
            r = listener.accept() => {
                acceptor.syscall(Syscall::Accept);
                match r {
                    Ok(pair) => pair,
                    Err(e) => {
                        if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                            ACCEPT_WARNINGS.warn("http", &e, acceptor);
                            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        }
                        continue;
                    }
                }
            }
            _ = stop.changed() => return,
        };
        acceptor.add(Event::ConnectionsAccepted, 1);
        if !open.limit.admit(acceptor) {
            continue;
        }
        open.tasks.fetch_add(1, Ordering::AcqRel);
        acceptor.syscall(Syscall::Setsockopt);
        let _ = stream.set_nodelay(true);
        accepted += 1;
        let (service, config, open, stop) =
            (Arc::clone(&service), Arc::clone(&config), Arc::clone(&open), stop.clone());
        let counters = Arc::clone(&counters);
        let jobs = Arc::clone(&jobs);
        tokio::spawn(async move {
            let shard = counters.shard(accepted);
            serve(stream, peer, &*service, &config, shard, jobs, stop).await;
            count_closed(shard);
            open.leave();
        });
    }
}

/// What a connection task is waiting for.
enum Wake {
    Ready,
    Deadline,
    Shutdown,
}

async fn serve<S: Service>(
    stream: TcpStream,
    peer: SocketAddr,
    service: &S,
    config: &EngineConfig,
    counters: &Shard,
    jobs: Arc<CpuPool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut clock = new_clock();
    let session = service.session(peer, &clock);
    let mut conn = Connection::new(Borrowed(stream.as_raw_fd()), session, &clock);
    let mut read_buf = vec![0; READ_BUFFER];
    let mut copy_buf = if config.send == SendStrategy::Copy { vec![0; COPY_BUFFER] } else { Vec::new() };
    let mut pipes = PipePool::default();
    if *stop.borrow() {
        return;
    }
    loop {
        read_clock(&mut clock);
        let mut buffers = SendBuffers { copy: &mut copy_buf, pipes: &mut pipes, counters };
        let pumped =
            stream.try_io(Interest::WRITABLE, || match conn.pump(&clock, config.send, &mut buffers) {
                Pump::Blocked => Err(io::Error::from(ErrorKind::WouldBlock)),
                other => Ok(other),
            });
        let interest = match pumped {
            Ok(Pump::Job(job)) => {
                // CPU work leaves the runtime's workers for the engines' bounded job runner, so a
                // flood of it cannot queue without limit.
                match jobs.run_async(job).await {
                    Some(output) => conn.job_done(output, &clock),
                    None => conn.job_refused(&clock),
                }
                continue;
            }
            Ok(Pump::Yielded) => {
                // Other tasks on this runtime worker go first; the socket still has room.
                tokio::task::yield_now().await;
                continue;
            }
            // `Connection::pump` switches to kernel TLS itself and never returns this.
            Ok(Pump::Failed | Pump::KernelTls) => return,
            Ok(Pump::Finished) => return linger(&stream, &mut conn, &mut read_buf, &clock, counters).await,
            Ok(Pump::Waiting) => None,
            Ok(Pump::NeedInput) => Some(Interest::READABLE),
            Ok(Pump::Blocked) | Err(_) => Some(Interest::WRITABLE),
        };
        let deadline = conn.wait_deadline(config.send_timeout);
        let in_grace = conn.in_grace();
        let sleep = async {
            match deadline {
                Some(d) => tokio::time::sleep_until(d.into()).await,
                None => std::future::pending().await,
            }
        };
        let stopping = async {
            if in_grace || stop.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        let ready = async {
            match interest {
                Some(interest) => stream.ready(interest).await.map(|_| ()),
                None => std::future::pending().await,
            }
        };
        let wake = tokio::select! {
            r = ready => if r.is_ok() { Wake::Ready } else { return },
            _ = sleep => Wake::Deadline,
            _ = stopping => Wake::Shutdown,
        };
        read_clock(&mut clock);
        match wake {
            Wake::Ready if interest == Some(Interest::READABLE) => {
                // A read shorter than the buffer drained the socket: saying "would block" then
                // lets tokio clear readiness now instead of after one more read that finds
                // nothing (tokio clears it only if no new event came in meanwhile, so no edge is
                // lost). Measured with scripts/bench_engines.py: 3.0 -> 2.0 calls per request.
                let read = stream.try_io(Interest::READABLE, || {
                    match conn.read_and_feed(&mut read_buf, &clock, counters) {
                        Ok(n) if n > 0 && !conn.maybe_readable => Err(io::Error::from(ErrorKind::WouldBlock)),
                        other => other,
                    }
                });
                match read {
                    Ok(_) => {}
                    Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {}
                    Err(_) => return,
                }
            }
            Wake::Ready => {}
            Wake::Shutdown => {
                if !conn.begin_grace(&clock, config.shutdown_grace) {
                    return;
                }
            }
            Wake::Deadline => {
                if !conn.wait_timed_out(&clock, config.send_timeout, counters) {
                    return;
                }
            }
        }
    }
}

async fn linger<S: Session>(
    stream: &TcpStream,
    conn: &mut Connection<S, Borrowed>,
    buf: &mut [u8],
    clock: &sluice_proto::Clock,
    counters: &Shard,
) {
    if !conn.start_linger(clock, counters) {
        return;
    }
    let Some((until, _)) = conn.lingering else { return };
    let _ = tokio::time::timeout_at(until.into(), async {
        loop {
            if stream.readable().await.is_err() {
                return;
            }
            let keep = stream.try_io(Interest::READABLE, || {
                if conn.linger_read(buf, counters) {
                    Err(io::Error::from(ErrorKind::WouldBlock))
                } else {
                    Ok(())
                }
            });
            if keep.is_ok() {
                return;
            }
        }
    })
    .await;
}
