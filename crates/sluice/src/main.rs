//! The `sluice` command: parses the command line, sets up logging and signals, and hands over to
//! the library crates. No server logic lives here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use sluice_engine::{EngineKind, SendStrategy, Shutdown, ThreadsMode};
use sluice_server::config::{parse_duration, Config, LogFormat};
use sluice_server::Server;

mod lab_cmd;
mod load_cmd;
mod store_args;
mod upload_cmd;

/// sluice: a media streaming server whose I/O path is a setting.
#[derive(Parser, Debug)]
#[command(name = "sluice", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve a media library over HTTP and RTSP (the built-in demo library when no --root is given).
    Serve(Box<ServeArgs>),
    /// Generate load: `sluice load http` (closed and open models, HDR latency, thresholds),
    /// `sluice load rtsp` (viewers counting the video samples they receive).
    Load(load_cmd::LoadArgs),
    /// Run the published I/O experiments against sluice and real peers, with reports.
    Lab(lab_cmd::LabArgs),
    /// Upload files, a tree or generated payloads to a sluice server or an S3 bucket, in parallel
    /// over kept-alive connections, with checksums, retries and a summary.
    Upload(Box<upload_cmd::UploadArgs>),
}

/// Every flag overrides the same setting in the configuration file.
#[derive(Args, Debug, Default)]
struct ServeArgs {
    /// Configuration file (see sluice.toml in the repository for every key).
    #[arg(long, short, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// Directory to serve.
    #[arg(long)]
    root: Option<PathBuf>,
    /// HTTP address, e.g. 127.0.0.1:8080 (port 0 picks a free port).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// RTSP address, e.g. 127.0.0.1:8554 (port 0 picks a free port); every MP4 of the library is
    /// at rtsp://ADDR/<path>.
    #[arg(long, conflicts_with = "no_rtsp")]
    rtsp_listen: Option<SocketAddr>,
    /// Do not serve RTSP.
    #[arg(long)]
    no_rtsp: bool,
    /// An RTSP session with no request or RTCP report for this long is released (default 60s).
    #[arg(long, value_parser = parse_duration)]
    rtsp_session_timeout: Option<Duration>,
    /// I/O engine: uring, epoll, threads or tokio (RTSP runs on io_uring with uring, else epoll).
    #[arg(long)]
    engine: Option<EngineKind>,
    /// Send strategy: sendfile or copy.
    #[arg(long)]
    send: Option<SendStrategy>,
    /// Event loops (epoll engine); default one per core.
    #[arg(long)]
    workers: Option<usize>,
    /// Threads engine: pool or per-connection.
    #[arg(long)]
    threads_mode: Option<ThreadsMode>,
    /// Threads in the pool (threads engine, pool mode).
    #[arg(long)]
    pool_size: Option<usize>,
    /// Most connections open at once.
    #[arg(long)]
    max_connections: Option<usize>,
    /// Threads for CPU-bound requests on the event-loop engines.
    #[arg(long)]
    cpu_workers: Option<usize>,
    /// Most CPU-bound requests queued or running at once (503 beyond).
    #[arg(long)]
    cpu_queue: Option<usize>,
    /// Do not serve the benchmark endpoints under /bench/.
    #[arg(long)]
    no_bench: bool,
    /// Time allowed for a request head (e.g. 10s).
    #[arg(long, value_parser = parse_duration)]
    header_timeout: Option<Duration>,
    /// Idle time allowed between requests on a kept-alive connection.
    #[arg(long, value_parser = parse_duration)]
    keepalive_timeout: Option<Duration>,
    /// Longest pause between reads of a request body.
    #[arg(long, value_parser = parse_duration)]
    body_timeout: Option<Duration>,
    /// Longest time without send progress before a client is dropped.
    #[arg(long, value_parser = parse_duration)]
    send_timeout: Option<Duration>,
    /// Time in-flight responses get to finish on SIGTERM/SIGINT.
    #[arg(long, value_parser = parse_duration)]
    shutdown_grace: Option<Duration>,
    /// Most byte ranges honoured per request (0 turns ranges off).
    #[arg(long)]
    max_ranges: Option<usize>,
    /// Log a line per request: true or false.
    #[arg(long)]
    access_log: Option<bool>,
    /// Log format: human or json.
    #[arg(long)]
    log_format: Option<LogFormat>,
    /// Log filter, e.g. info, debug, "info,sluice::access=off".
    #[arg(long)]
    log_level: Option<String>,
    #[command(flatten)]
    store: store_args::StoreArgs,
}

impl ServeArgs {
    /// The file's settings (or the defaults) with every given flag applied on top.
    fn into_config(self) -> anyhow::Result<Config> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        macro_rules! set {
            ($flag:expr => $($field:tt)+) => {
                if let Some(v) = $flag {
                    c.$($field)+ = v;
                }
            };
        }
        if self.root.is_some() {
            c.library.root = self.root;
        }
        if self.workers.is_some() {
            c.engine.workers = self.workers;
        }
        if self.cpu_workers.is_some() {
            c.engine.cpu_workers = self.cpu_workers;
        }
        if self.no_bench {
            c.http.bench = false;
        }
        set!(self.listen => http.listen);
        if self.rtsp_listen.is_some() {
            c.rtsp.enabled = true;
        }
        if self.no_rtsp {
            c.rtsp.enabled = false;
        }
        set!(self.rtsp_listen => rtsp.listen);
        set!(self.rtsp_session_timeout => rtsp.session_timeout);
        set!(self.engine => engine.kind);
        if self.send.is_some() {
            c.engine.send = self.send;
        }
        set!(self.threads_mode => engine.threads_mode);
        set!(self.pool_size => engine.pool_size);
        set!(self.max_connections => engine.max_connections);
        set!(self.cpu_queue => engine.cpu_queue);
        set!(self.header_timeout => limits.header_timeout);
        set!(self.keepalive_timeout => limits.keepalive_timeout);
        set!(self.body_timeout => limits.body_timeout);
        set!(self.send_timeout => limits.send_timeout);
        set!(self.shutdown_grace => limits.shutdown_grace);
        set!(self.max_ranges => library.max_ranges);
        set!(self.access_log => http.access_log);
        set!(self.log_format => log.format);
        set!(self.log_level => log.level);
        self.store.apply(&mut c);
        Ok(c)
    }
}

fn init_logging(config: &Config) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_new(&config.log.level)
        .with_context(|| format!("invalid log level `{}`", config.log.level))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match config.log.format {
        LogFormat::Human => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder.json().init(),
    }
    Ok(())
}

/// Raises the soft open-files limit to the hard one: every connection is a descriptor, and the
/// usual soft default (1024) would cap a server, a load run or the lab at about a thousand
/// connections.
pub(crate) fn raise_nofile_limit() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit with a pointer to a live rlimit.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::warn!("cannot raise the open-files limit: {}", std::io::Error::last_os_error());
            }
        }
    }
}

/// Makes glibc return large blocks to the kernel when they are freed. By default its mmap
/// threshold rises to the size of the largest block freed (up to 32 MiB), after which such blocks
/// come from per-thread arenas and stay resident: after ten 10 MB `cpu-heavy` sieves on the
/// threads engine, two at a time, the peak resident size had grown by 79 MB, one sieve's worth per
/// thread that had run one. A fixed 1 MiB threshold keeps that at what runs at once.
fn return_large_blocks() {
    // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
    unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20) };
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    return_large_blocks();
    let args_engine = args.engine;
    let config = args.into_config()?;
    init_logging(&config)?;
    raise_nofile_limit();
    let shutdown = Shutdown::new()?;
    let signals = {
        use signal_hook::consts::{SIGINT, SIGTERM};
        let mut signals =
            signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).context("installing signal handlers")?;
        let shutdown = shutdown.clone();
        std::thread::Builder::new().name("sluice-signals".into()).spawn(move || {
            if let Some(sig) = signals.forever().next() {
                tracing::info!(signal = sig, "shutting down: finishing in-flight responses");
                shutdown.trigger();
            }
        })?
    };
    // Asking for uring on the command line is a demand: if the kernel refuses io_uring, say why
    // and stop. Asking in the configuration file is a preference that falls back to epoll.
    let demanded = args_engine == Some(EngineKind::Uring);
    let server = Server::bind(config, demanded)?;
    server.run(&shutdown)?;
    drop(signals);
    Ok(())
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Serve(args) => serve(*args),
        Command::Load(args) => load_cmd::run(args),
        Command::Upload(args) => upload_cmd::run(*args),
        Command::Lab(args) => {
            raise_nofile_limit();
            lab_cmd::run(args)
        }
    }
}
