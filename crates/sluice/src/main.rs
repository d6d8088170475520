//! The `sluice` command: parses the command line, sets up logging and signals, and hands over to
//! the library crates. No server logic lives here.

#![deny(unsafe_code)]

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use sluice_engine::Shutdown;
use sluice_server::config::{Config, ConfigError};
use sluice_server::{ServeError, Server};

mod lab_cmd;
mod load_cmd;
mod serve_args;
mod sign_cmd;
#[allow(unsafe_code)]
mod sys;
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

/// The flags of `serve` that are not settings; every setting has its flag from the settings
/// table ([`serve_args`]), which overrides the same setting in the configuration file.
#[derive(Args, Debug, Default)]
struct ServeArgs {
    /// Configuration file (see sluice.toml in the repository for every key).
    #[arg(long, short, env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// Check the configuration with the checks `serve` makes before binding (values, addresses,
    /// the root, token files, the store's location), print the effective settings as sluice.toml
    /// text, and exit (0 when it is usable, 2 when not, with the message `serve` would give).
    #[arg(long)]
    check: bool,
    /// With --check: also ask an s3:// store whether its bucket answers.
    #[arg(long, requires = "check")]
    connect: bool,
    /// Print sluice.toml with every setting, its default and what it does, and exit.
    #[arg(long)]
    print_config: bool,
}

impl ServeArgs {
    /// The file's settings (or the defaults) with every given flag applied on top.
    fn into_config(self, matches: &ArgMatches) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        serve_args::apply(matches, &mut c)?;
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
    sys::set_mmap_threshold(1 << 20);
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

fn serve(args: ServeArgs, matches: &ArgMatches) -> anyhow::Result<()> {
    if args.print_config {
        use std::io::Write;
        let _ = std::io::stdout().write_all(sluice_server::config::render::example().as_bytes());
        return Ok(());
    }
    return_large_blocks();
    // Asking for uring on the command line is a demand: if the kernel refuses io_uring, say why
    // and stop. Asking in the configuration file is a preference that falls back to epoll.
    let demanded = serve_args::uring_demanded(matches);
    let (only_check, connect) = (args.check, args.connect);
    let config = args.into_config(matches).map_err(ServeError::from)?;
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
        let protection = server.protection();
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
                    // Segments encrypted with a new key get new entity tags from the next request.
                    if !protection.is_empty() {
                        match protection.reload() {
                            Ok(()) => tracing::info!("SIGHUP: [[protect]] keys reloaded"),
                            Err(e) => tracing::warn!("SIGHUP: {e}; still using the previous keys"),
                        }
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
    let matches = Cli::command().mut_subcommand("serve", serve_args::with_setting_flags).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Serve(args) => {
            serve(*args, matches.subcommand_matches("serve").unwrap_or(&ArgMatches::default()))
        }
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
