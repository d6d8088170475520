//! The `sluice` command: parses the command line, sets up logging and signals, and hands over to
//! the library crates. No server logic lives here.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use sluice_engine::{EngineKind, SendStrategy, Shutdown, ThreadsMode};
use sluice_server::config::{parse_duration, parse_listen, Config, ConfigError, LogFormat};
use sluice_server::{ServeError, Server};

mod lab_cmd;
mod load_cmd;
mod sign_cmd;
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
    /// Print a signed URL for a path guarded by a `mode = "signed"` access policy.
    Sign(sign_cmd::SignArgs),
}

/// A clap parser accepting exactly `names` (listed in `--help`), read with `T`'s `FromStr`.
fn named<T>(names: Vec<&'static str>) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    PossibleValuesParser::new(names).try_map(|s| s.parse::<T>())
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
    /// HTTP address: 127.0.0.1:8080, localhost:8080, 0.0.0.0:8080 (every interface), or a port
    /// alone (on 127.0.0.1); port 0 picks a free port.
    #[arg(long, value_parser = parse_listen, value_name = "ADDR")]
    listen: Option<SocketAddr>,
    /// RTSP address, as --listen; every MP4 of the library is at rtsp://ADDR/<path>.
    #[arg(long, conflicts_with = "no_rtsp", value_parser = parse_listen, value_name = "ADDR")]
    rtsp_listen: Option<SocketAddr>,
    /// Do not serve RTSP.
    #[arg(long)]
    no_rtsp: bool,
    /// Address of the admin listener (/metrics, /healthz, /readyz, /streams), as --listen.
    #[arg(long, conflicts_with = "no_admin", value_parser = parse_listen, value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,
    /// Do not serve the admin endpoints.
    #[arg(long)]
    no_admin: bool,
    /// Serve HTTPS with this certificate chain (PEM; read again on SIGHUP).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM; read again on SIGHUP).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// HTTPS address, as --listen, with HTTP staying on --listen; without it --listen serves
    /// HTTPS only.
    #[arg(long, value_parser = parse_listen, value_name = "ADDR")]
    tls_listen: Option<SocketAddr>,
    /// An RTSP session with no request or RTCP report for this long is released.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    rtsp_session_timeout: Option<Duration>,
    /// RTSP viewers served at once at most; one more is answered 453 Not Enough Bandwidth.
    #[arg(long, value_name = "N")]
    rtsp_max_viewers: Option<usize>,
    /// Open HTTP connections per client address; one more is answered 429 and closed (0: no limit).
    #[arg(long, value_name = "N")]
    max_connections_per_ip: Option<u32>,
    /// Requests per second per client address, on average; beyond it 429 with Retry-After
    /// (0: no limit).
    #[arg(long, value_name = "RATE")]
    requests_per_second: Option<f64>,
    /// Requests a client address may make at once before --requests-per-second applies.
    #[arg(long, value_name = "N")]
    burst: Option<u32>,
    /// RTSP sessions per client address, over all its connections; one more SETUP is answered
    /// 503 (0: no limit).
    #[arg(long, value_name = "N")]
    rtsp_sessions_per_ip: Option<usize>,
    /// When the RTSP loop's headroom runs out: refuse newcomers with 453 (the viewers playing stay
    /// perfect), or degrade (admit them; late viewers drop frames up to the next keyframe).
    #[arg(long, value_name = "POLICY")]
    rtsp_overload: Option<sluice_server::config::RtspOverload>,
    /// RTSP loops (threads), each with its own RTP/RTCP UDP ports; clients are spread over them by
    /// their address, so one client's connections, sessions and RTCP meet on one loop.
    #[arg(long, value_name = "N")]
    rtsp_loops: Option<usize>,
    /// UDP ports RTP and RTCP may use, for firewalls (e.g. 30000-30100): each RTSP loop takes an
    /// even port and the next odd one from the range [default: any free pair].
    #[arg(long, value_name = "FIRST-LAST")]
    rtsp_rtp_ports: Option<String>,
    /// I/O engine (RTSP runs on io_uring with uring, on epoll with every other engine).
    #[arg(long, value_parser = named::<EngineKind>(EngineKind::ALL.map(EngineKind::name).to_vec()))]
    engine: Option<EngineKind>,
    /// How file bytes reach the socket (uring cannot use sendfile).
    #[arg(long, value_parser = named::<SendStrategy>(SendStrategy::ALL.map(SendStrategy::name).to_vec()))]
    send: Option<SendStrategy>,
    /// Event loops (epoll engine); default one per core.
    #[arg(long)]
    workers: Option<usize>,
    /// Threads engine: a fixed pool, or a thread per connection.
    #[arg(long, value_parser = named::<ThreadsMode>(ThreadsMode::ALL.map(ThreadsMode::name).to_vec()))]
    threads_mode: Option<ThreadsMode>,
    /// Threads in the pool (threads engine, pool mode).
    #[arg(long)]
    pool_size: Option<usize>,
    /// Most connections open at once: HTTP connections and RTSP control connections together.
    #[arg(long)]
    max_connections: Option<usize>,
    /// Threads for CPU-bound requests on the event-loop engines.
    #[arg(long)]
    cpu_workers: Option<usize>,
    /// Most CPU-bound requests queued or running at once (503 beyond).
    #[arg(long)]
    cpu_queue: Option<usize>,
    /// Serve the benchmark endpoints under /bench/ (hello, json, cpu, latency, ...) on the media
    /// port; off by default, so that a library folder named bench/ is served.
    #[arg(long, conflicts_with = "no_bench")]
    bench: bool,
    /// Do not serve the benchmark endpoints (the default; overrides `bench = true` in the file).
    #[arg(long)]
    no_bench: bool,
    /// Time allowed for a request head (e.g. 10s).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    header_timeout: Option<Duration>,
    /// Idle time allowed between requests on a kept-alive connection.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    keepalive_timeout: Option<Duration>,
    /// Longest pause between reads of a request body.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    body_timeout: Option<Duration>,
    /// Longest time without send progress before a client is dropped.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    send_timeout: Option<Duration>,
    /// Time in-flight responses get to finish on SIGTERM/SIGINT (a second signal exits at once;
    /// responses cut off when it runs out make the exit status 1).
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    shutdown_grace: Option<Duration>,
    /// Most byte ranges honoured per request (0 turns ranges off).
    #[arg(long)]
    max_ranges: Option<usize>,
    /// Target duration of an HLS segment (`/FILE.mp4/master.m3u8`): cut at the first keyframe
    /// at least this long after the segment's start.
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    hls_segment: Option<Duration>,
    /// Log a line per HTTP response when it ends (bytes sent, duration, whether it was cut short)
    /// and per RTSP request (method, URL, status, session, transport).
    #[arg(long, value_name = "BOOL")]
    access_log: Option<bool>,
    /// Log format (json: one object per line, each field a JSON field).
    #[arg(long, value_parser = named::<LogFormat>(LogFormat::ALL.map(LogFormat::name).to_vec()))]
    log_format: Option<LogFormat>,
    /// Log filter, e.g. info, debug, "info,sluice::access=off".
    #[arg(long, value_name = "FILTER")]
    log_level: Option<String>,
    #[command(flatten)]
    store: store_args::StoreArgs,
    /// Append logs to this file instead of stderr; SIGUSR1 reopens it (after logrotate moved it).
    #[arg(long, value_name = "PATH")]
    log_file: Option<PathBuf>,
    /// Check the configuration with the checks `serve` makes before binding (values, addresses,
    /// the root, token files, the store's location), print the effective settings as sluice.toml
    /// text, and exit (0 when it is usable, 2 when not, with the message `serve` would give).
    #[arg(long)]
    check: bool,
    /// With --check: also ask an s3:// store whether its bucket answers.
    #[arg(long, requires = "check")]
    connect: bool,
}

/// Appends each setting's default, from `Config::default()`, to its flag's help.
fn with_defaults(cmd: clap::Command) -> clap::Command {
    let c = Config::default();
    let e = c.engine_config();
    let d = |d: Duration| sluice_server::config::format_duration(d);
    let defaults: Vec<(&str, String)> = vec![
        ("listen", c.http.listen.to_string()),
        ("rtsp_listen", c.rtsp.listen.to_string()),
        ("admin_listen", c.admin.listen.to_string()),
        ("rtsp_session_timeout", d(c.rtsp.session_timeout)),
        ("rtsp_max_viewers", c.rtsp.max_viewers.to_string()),
        ("max_connections_per_ip", c.clients.max_connections_per_ip.to_string()),
        ("requests_per_second", c.clients.requests_per_second.to_string()),
        ("burst", c.clients.burst.to_string()),
        ("rtsp_sessions_per_ip", c.clients.rtsp_sessions_per_ip.to_string()),
        ("rtsp_overload", c.rtsp.overload.name().into()),
        ("rtsp_loops", format!("1 on 2 cores or fewer, else one per worker; here {}", c.rtsp_loops())),
        ("engine", c.engine.kind.name().into()),
        ("send", "splice on uring, sendfile on the others".into()),
        ("workers", format!("one per core, {}", e.workers)),
        ("threads_mode", c.engine.threads_mode.name().into()),
        ("pool_size", c.engine.pool_size.to_string()),
        ("max_connections", c.engine.max_connections.to_string()),
        ("cpu_workers", format!("one per core, {}", e.cpu_workers)),
        ("cpu_queue", c.engine.cpu_queue.to_string()),
        ("header_timeout", d(c.limits.header_timeout)),
        ("keepalive_timeout", d(c.limits.keepalive_timeout)),
        ("body_timeout", d(c.limits.body_timeout)),
        ("send_timeout", d(c.limits.send_timeout)),
        ("shutdown_grace", d(c.limits.shutdown_grace)),
        ("max_ranges", c.library.max_ranges.to_string()),
        ("hls_segment", d(c.library.hls_segment)),
        ("access_log", c.http.access_log.to_string()),
        ("log_format", c.log.format.name().into()),
        ("log_level", c.log.level.clone()),
    ];
    cmd.mut_subcommand("serve", |mut serve| {
        for (id, default) in defaults {
            serve = serve.mut_arg(id, |a| {
                let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                a.help(format!("{help} [default: {default}]"))
            });
        }
        serve
    })
}

impl ServeArgs {
    /// The file's settings (or the defaults) with every given flag applied on top.
    fn into_config(self) -> Result<Config, ConfigError> {
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
        if self.bench {
            c.http.bench = true;
        }
        if self.no_bench {
            c.http.bench = false;
        }
        set!(self.listen => http.listen);
        if self.admin_listen.is_some() {
            c.admin.enabled = true;
        }
        if self.no_admin {
            c.admin.enabled = false;
        }
        set!(self.admin_listen => admin.listen);
        if self.tls_cert.is_some() {
            c.tls.cert = self.tls_cert;
            c.tls.key = self.tls_key;
        }
        if self.tls_listen.is_some() {
            c.tls.listen = self.tls_listen;
        }
        if self.log_file.is_some() {
            c.log.file = self.log_file;
        }
        if self.rtsp_listen.is_some() {
            c.rtsp.enabled = true;
        }
        if self.no_rtsp {
            c.rtsp.enabled = false;
        }
        set!(self.rtsp_listen => rtsp.listen);
        set!(self.rtsp_session_timeout => rtsp.session_timeout);
        set!(self.rtsp_max_viewers => rtsp.max_viewers);
        set!(self.max_connections_per_ip => clients.max_connections_per_ip);
        set!(self.requests_per_second => clients.requests_per_second);
        set!(self.burst => clients.burst);
        set!(self.rtsp_sessions_per_ip => clients.rtsp_sessions_per_ip);
        set!(self.rtsp_overload => rtsp.overload);
        if let Some(n) = self.rtsp_loops {
            c.rtsp.loops = Some(n);
        }
        if let Some(ports) = &self.rtsp_rtp_ports {
            c.rtsp.rtp_ports = Some(ports.clone());
        }
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
        set!(self.hls_segment => library.hls_segment);
        set!(self.access_log => http.access_log);
        set!(self.log_format => log.format);
        set!(self.log_level => log.level);
        self.store.apply(&mut c);
        Ok(c)
    }
}

/// Raises the soft open-files limit to the hard one (see `sluice_load::limits`).
pub(crate) fn raise_nofile_limit() {
    if let Err(e) = sluice_load::limits::raise_nofile_limit() {
        tracing::warn!("cannot raise the open-files limit: {e}");
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

/// `sluice serve --check`: the effective settings on stdout, a note on stderr.
fn check(config: &Config, demanded: bool, connect: bool) -> Result<(), ServeError> {
    use std::io::Write;
    let (effective, fallback) = sluice_server::serve::check(config, demanded, connect)?;
    if let Some(reason) = fallback {
        eprintln_safe(&format!("sluice: note: {reason}"));
    }
    // `sluice serve --check | head` must not panic on a closed stdout.
    let _ = std::io::stdout().write_all(effective.effective_toml().as_bytes());
    if effective.tls.enabled() {
        eprintln_safe(&format!("sluice: {}", sluice_server::serve::ktls_note()));
    }
    eprintln_safe("sluice: the configuration is valid");
    Ok(())
}

fn serve(args: ServeArgs) -> anyhow::Result<()> {
    return_large_blocks();
    // Asking for uring on the command line is a demand: if the kernel refuses io_uring, say why
    // and stop. Asking in the configuration file is a preference that falls back to epoll.
    let demanded = args.engine == Some(EngineKind::Uring);
    let (only_check, connect) = (args.check, args.connect);
    let config = args.into_config().map_err(ServeError::from)?;
    if only_check {
        return Ok(check(&config, demanded, connect)?);
    }
    let log = sluice_server::logging::init(&config.log).map_err(ServeError::from)?;
    raise_nofile_limit();
    let shutdown = Shutdown::new().map_err(ServeError::from)?;
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    // Installed before binding, so that a signal during start-up is not lost.
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGUSR1, SIGHUP])
        .map_err(|source| sluice_engine::EngineError::Setup { what: "installing signal handlers", source })
        .map_err(ServeError::from)?;
    let server = match Server::bind(config, demanded) {
        Ok(server) => server,
        Err(e) => {
            log.flush(Duration::from_secs(1));
            return Err(e.into());
        }
    };
    let signal_thread = {
        let (shutdown, log, counters) = (shutdown.clone(), log.clone(), Arc::clone(server.counters()));
        let certificate = server.tls_certificate();
        let handle = signals.handle();
        std::thread::Builder::new().name("sluice-signals".into()).spawn(move || {
            for sig in signals.forever() {
                let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
                if sig == SIGUSR1 {
                    log.reopen();
                    tracing::info!("SIGUSR1: log file reopened");
                } else if sig == SIGHUP {
                    // New connections get the files' certificate; open ones keep theirs.
                    match &certificate {
                        Some(c) => match c.reload() {
                            Ok(()) => tracing::info!("SIGHUP: certificate {} reloaded", c.cert_path().display()),
                            Err(e) => tracing::warn!("SIGHUP: {e}; still serving the previous certificate"),
                        },
                        None => tracing::info!("SIGHUP: no certificate to reload (HTTPS is off)"),
                    }
                } else if !shutdown.is_triggered() {
                    tracing::info!(
                        connections = counters.open_connections(),
                        rtsp_sessions = counters.rtsp_sessions(),
                        "{name}: shutting down; finishing {} connection(s) and {} RTSP session(s) in flight (a second signal exits at once)",
                        counters.open_connections(),
                        counters.rtsp_sessions(),
                    );
                    shutdown.trigger();
                } else {
                    tracing::warn!(
                        connections = counters.open_connections(),
                        "{name} again: exiting at once, cutting off {} connection(s)",
                        counters.open_connections()
                    );
                    log.flush(Duration::from_millis(500));
                    std::process::exit(1);
                }
            }
        })
        .map_err(|source| sluice_engine::EngineError::Setup { what: "spawn signal thread", source })
        .map_err(ServeError::from)?;
        handle
    };
    let result = server.run(&shutdown);
    signal_thread.close();
    log.flush(Duration::from_secs(2));
    Ok(result?)
}

/// Writes one line to stderr; a closed or broken stderr is not worth a panic.
fn eprintln_safe(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// The exit status an error calls for: 2 for what the user must change, 1 for the rest.
fn exit_code(e: &anyhow::Error) -> u8 {
    if e.downcast_ref::<load_cmd::UsageError>().is_some() {
        return 2;
    }
    for cause in e.chain() {
        if let Some(serve) = cause.downcast_ref::<ServeError>() {
            return serve.exit_code();
        }
        if cause.is::<ConfigError>() {
            return 2;
        }
        if let Some(load) = cause.downcast_ref::<sluice_load::LoadError>() {
            return if load.is_usage() { 2 } else { 1 };
        }
    }
    1
}

/// The error and its causes on one line, without repeating a cause its parent already quotes.
fn one_line(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    // The marker says only how to exit; the message is its cause's.
    line.strip_prefix("invalid arguments: ").map(str::to_string).unwrap_or(line).replace('\n', " ")
}

fn main() -> ExitCode {
    let matches = with_defaults(Cli::command()).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Serve(args) => serve(*args),
        Command::Load(args) => load_cmd::run(args),
        Command::Upload(args) => upload_cmd::run(*args),
        Command::Sign(args) => sign_cmd::run(args),
        Command::Lab(args) => {
            raise_nofile_limit();
            lab_cmd::run(args)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln_safe(&format!("sluice: {}", one_line(&e)));
            ExitCode::from(exit_code(&e))
        }
    }
}
