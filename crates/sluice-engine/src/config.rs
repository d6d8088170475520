//! What an engine is told: which engine ([`EngineKind`]), how it sends files ([`SendStrategy`]),
//! how the threads engine assigns threads ([`ThreadsMode`]), and the bounds of [`EngineConfig`],
//! with [`check`], which refuses a configuration that cannot work before anything starts. Parsing
//! flags into these is the binary's; running them is [`crate::launch`]'s.

use std::time::Duration;

use crate::error::EngineError;

/// Which engine runs the connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// One io_uring per worker thread: multishot accept and receive, completions not readiness.
    Uring,
    /// One edge-triggered epoll loop per worker thread, `SO_REUSEPORT` listeners.
    Epoll,
    /// Blocking sockets on threads: a fixed pool, or one thread per connection.
    Threads,
    /// One task per connection on tokio's multi-threaded, work-stealing runtime.
    Tokio,
}

impl EngineKind {
    /// Every engine this build has, for tests and the lab to iterate over.
    pub const ALL: [EngineKind; 4] =
        [EngineKind::Uring, EngineKind::Epoll, EngineKind::Threads, EngineKind::Tokio];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Uring => "uring",
            EngineKind::Epoll => "epoll",
            EngineKind::Threads => "threads",
            EngineKind::Tokio => "tokio",
        }
    }

    /// The zero-copy strategy this engine sends with unless told otherwise: `sendfile`, or
    /// `splice` on io_uring, which has no `sendfile` operation.
    pub fn default_send(self) -> SendStrategy {
        match self {
            EngineKind::Uring => SendStrategy::Splice,
            _ => SendStrategy::Sendfile,
        }
    }

    /// The send strategies this engine can execute. io_uring has no `sendfile` operation; its
    /// zero-copy path is `splice`.
    pub fn strategies(self) -> &'static [SendStrategy] {
        match self {
            EngineKind::Uring => &[SendStrategy::Splice, SendStrategy::Copy],
            _ => &[SendStrategy::Sendfile, SendStrategy::Splice, SendStrategy::Copy],
        }
    }
}

/// How file bytes get from the page cache to a socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SendStrategy {
    /// `sendfile(2)`: the kernel moves file pages to the socket, no user-space copy.
    Sendfile,
    /// `splice(2)` file → pipe → socket: zero-copy through a pipe the worker owns.
    Splice,
    /// `pread(2)` into a buffer the loop owns, then `write(2)`: two copies through user space.
    Copy,
}

impl SendStrategy {
    /// Every strategy, for `--help` and tests to iterate over.
    pub const ALL: [SendStrategy; 3] = [SendStrategy::Sendfile, SendStrategy::Splice, SendStrategy::Copy];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            SendStrategy::Sendfile => "sendfile",
            SendStrategy::Splice => "splice",
            SendStrategy::Copy => "copy",
        }
    }
}

/// How the threads engine assigns threads to connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThreadsMode {
    /// A fixed pool of threads, each serving one connection at a time (a servlet container).
    Pool,
    /// A new thread for every connection.
    PerConnection,
}

macro_rules! named_enum {
    ($ty:ty, $what:literal, $($name:literal => $variant:expr),+ $(,)?) => {
        impl std::str::FromStr for $ty {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($variant),)+
                    _ => Err(format!(concat!("unknown ", $what, " `{}` (expected one of: {})"), s, [$($name),+].join(", "))),
                }
            }
        }
    };
}

named_enum!(EngineKind, "engine", "uring" => EngineKind::Uring, "epoll" => EngineKind::Epoll,
    "threads" => EngineKind::Threads, "tokio" => EngineKind::Tokio);
named_enum!(SendStrategy, "send strategy", "sendfile" => SendStrategy::Sendfile,
    "splice" => SendStrategy::Splice, "copy" => SendStrategy::Copy);
named_enum!(ThreadsMode, "threads mode", "pool" => ThreadsMode::Pool, "per-connection" => ThreadsMode::PerConnection);

impl ThreadsMode {
    /// Every mode, for `--help` to list.
    pub const ALL: [ThreadsMode; 2] = [ThreadsMode::Pool, ThreadsMode::PerConnection];

    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            ThreadsMode::Pool => "pool",
            ThreadsMode::PerConnection => "per-connection",
        }
    }
}

/// Everything an engine needs to know besides the service it runs.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The engine.
    pub kind: EngineKind,
    /// How files are sent.
    pub send: SendStrategy,
    /// Event loops (epoll); ignored by the threads engine.
    pub workers: usize,
    /// Pool or per-connection (threads engine).
    pub threads_mode: ThreadsMode,
    /// Threads in the pool (threads engine, pool mode).
    pub pool_size: usize,
    /// Longest time a connection may make no progress sending before it is dropped.
    pub send_timeout: Duration,
    /// How long shutdown waits for in-flight responses before closing what is left.
    pub shutdown_grace: Duration,
    /// Most connections open at once (over all workers); beyond it new ones are closed at once.
    pub max_connections: usize,
    /// At `max_connections`, shut down the connection that has waited longest on its client
    /// (idle, a head still arriving, a stalled reader, a lingering close) and admit the newcomer
    /// in its place, instead of refusing the newcomer: a listener that must always answer
    /// (health checks) cannot be held shut by clients that merely hold connections. Threads
    /// engine only; the others refuse.
    pub reclaim_waiting: bool,
    /// Threads that run CPU-bound work off the event loops and connection threads, on every engine.
    pub cpu_workers: usize,
    /// Most CPU jobs queued or running at once; beyond it a request gets 503.
    pub cpu_queue: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            kind: EngineKind::Epoll,
            send: SendStrategy::Sendfile,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            threads_mode: ThreadsMode::Pool,
            pool_size: 150,
            send_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            max_connections: 100_000,
            reclaim_waiting: false,
            cpu_workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            cpu_queue: 1024,
        }
    }
}

/// Checks a configuration without starting anything: a strategy the engine cannot execute is
/// refused here, before anything is bound or announced, never silently replaced.
pub fn check(config: &EngineConfig) -> Result<(), EngineError> {
    if config.workers == 0 || config.pool_size == 0 {
        return Err(EngineError::Config("workers and pool size must be at least 1".into()));
    }
    if !config.kind.strategies().contains(&config.send) {
        return Err(EngineError::Config(format!(
            "the {} engine cannot send with {}; it can use: {}",
            config.kind.name(),
            config.send.name(),
            config.kind.strategies().iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(())
}
