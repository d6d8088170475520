//! `sluice serve`: every flag it takes, and running it.
//!
//! Owns the command line of `serve`: the flags that are not settings ([`ServeArgs`]: `--config`,
//! `--check`, `--connect`, `--print-config`), and one flag per setting of the server's settings
//! table, `sluice_server::config::table`, where each setting's entry writes its flag as
//! `flag "--listen" "help text"` (search for the flag to find its entry): [`with_setting_flags`]
//! turns [`SETTINGS`] into clap arguments with the table's `--help` text and default, checked as
//! the table's format reads it, and [`apply`] lays the given ones over the configuration file (a
//! flag beats the file, which beats the default). Then [`run`] prints, checks or starts the
//! server, with its signals. It owns no setting and no server logic (`sluice_server` does).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::builder::PossibleValuesParser;
use clap::{Arg, ArgAction, ArgMatches, Args};
use sluice_engine::Shutdown;
use sluice_server::config::{Config, ConfigError, SETTINGS};
use sluice_server::{ServeError, Server};

/// The flags of `serve` that are not settings; every setting has its flag from the settings
/// table ([`with_setting_flags`]), which overrides the same setting in the configuration file.
#[derive(Args, Debug, Default)]
pub struct ServeArgs {
    /// Configuration file (see sluice.toml in the repository for every key).
    #[arg(long = "config", short = 'c', env = "SLUICE_CONFIG")]
    config: Option<PathBuf>,
    /// Check the configuration with the checks `serve` makes before binding (values, addresses,
    /// the root, token files, the store's location), print the effective settings as sluice.toml
    /// text, and exit (0 when it is usable, 2 when not, with the message `serve` would give).
    #[arg(long = "check")]
    check: bool,
    /// With --check: also ask an s3:// store whether its bucket answers.
    #[arg(long = "connect", requires = "check")]
    connect: bool,
    /// Print sluice.toml with every setting, its default and what it does, and exit.
    #[arg(long = "print-config")]
    print_config: bool,
}

impl ServeArgs {
    /// The file's settings (or the defaults) with every given flag applied on top.
    fn into_config(self, matches: &ArgMatches) -> Result<Config, ConfigError> {
        let mut c = match &self.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        apply(matches, &mut c)?;
        Ok(c)
    }
}

/// `sluice serve --check`: the effective settings on stdout, a note on stderr.
fn check(config: &Config, demanded: bool, connect: bool) -> Result<(), ServeError> {
    use std::io::Write;
    let (effective, fallback) = sluice_server::serve::check(config, demanded, connect)?;
    if let Some(reason) = fallback {
        crate::eprintln_safe(&format!("sluice: note: {reason}"));
    }
    // `sluice serve --check | head` must not panic on a closed stdout.
    let _ = std::io::stdout().write_all(effective.effective_toml().as_bytes());
    if effective.tls.enabled() {
        crate::eprintln_safe(&format!("sluice: {}", sluice_server::serve::ktls_note(effective.tls.kernel)));
    }
    if let Some(note) = sluice_server::serve::certificate_note(&effective)? {
        crate::eprintln_safe(&format!("sluice: {note}"));
    }
    crate::eprintln_safe("sluice: the configuration is valid");
    crate::eprintln_safe(&format!("sluice: {}", sluice_server::serve::thumbnails_note(&effective)));
    Ok(())
}

/// `sluice serve`: the configuration from the file and the flags, then `--print-config`,
/// `--check` or a server running until a signal stops it.
pub fn run(args: ServeArgs, matches: &ArgMatches) -> anyhow::Result<()> {
    if args.print_config {
        use std::io::Write;
        let _ = std::io::stdout().write_all(sluice_server::config::render::example().as_bytes());
        return Ok(());
    }
    return_large_blocks();
    // Asking for uring on the command line is a demand: if the kernel refuses io_uring, say why
    // and stop. Asking in the configuration file is a preference that falls back to epoll.
    let demanded = uring_demanded(matches);
    let (only_check, connect) = (args.check, args.connect);
    let config = args.into_config(matches).map_err(ServeError::from)?;
    if only_check {
        return Ok(check(&config, demanded, connect)?);
    }
    let log = sluice_server::ops::logging::init(&config.log).map_err(ServeError::from)?;
    crate::raise_nofile_limit();
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
                            Ok(()) => {
                                tracing::info!("SIGHUP: certificate {} reloaded", c.cert_path().display());
                                sluice_server::serve::log_certificate_expiry(c);
                            }
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

/// Makes glibc return large blocks to the kernel when they are freed. By default its mmap
/// threshold rises to the size of the largest block freed (up to 32 MiB), after which such blocks
/// come from per-thread arenas and stay resident: after ten 10 MB `cpu-heavy` sieves on the
/// threads engine, two at a time, the peak resident size had grown by 79 MB, one sieve's worth per
/// thread that had run one. A fixed 1 MiB threshold keeps that at what runs at once.
fn return_large_blocks() {
    crate::sys::set_mmap_threshold(1 << 20);
}

/// `serve` with a flag for every setting that has one.
pub fn with_setting_flags(mut serve: clap::Command) -> clap::Command {
    let defaults = Config::default();
    for s in SETTINGS {
        if let Some(flag) = s.flag {
            // Without its final period, as clap writes a one-line doc comment.
            let text = s.help.strip_suffix('.').unwrap_or(s.help);
            let help = match s.help_default(&defaults) {
                Some(default) => format!("{text} [default: {default}]"),
                None => text.to_string(),
            };
            let mut arg = Arg::new(flag).long(flag).help(help).conflicts_with_all(s.extra.conflicts);
            for required in s.extra.requires {
                arg = arg.requires(*required);
            }
            arg = if s.extra.switch {
                arg.action(ArgAction::SetTrue)
            } else if let Some(names) = (s.possible_values)() {
                arg.value_name(s.value_name()).value_parser(PossibleValuesParser::new(names))
            } else {
                let parse = s.parse;
                arg.value_name(s.value_name())
                    .value_parser(move |text: &str| parse(text).map(|()| text.to_string()))
            };
            if let (true, Some((off, _))) = (s.extra.switch, s.extra.off) {
                arg = arg.conflicts_with(off);
            }
            serve = serve.arg(arg);
        }
        if let Some((off, help)) = s.extra.off {
            let help = help.strip_suffix('.').unwrap_or(help);
            serve = serve.arg(Arg::new(off).long(off).help(help).action(ArgAction::SetTrue));
        }
    }
    serve
}

/// Whether `--engine uring` was given: asked for on the command line, uring is a demand (no
/// fallback to epoll).
pub fn uring_demanded(matches: &ArgMatches) -> bool {
    matches.get_one::<String>("engine").is_some_and(|e| e == "uring")
}

/// Applies every setting flag given on top of `c`.
pub fn apply(matches: &ArgMatches, c: &mut Config) -> Result<(), ConfigError> {
    for s in SETTINGS {
        let bad = |why: String| ConfigError::Invalid(format!("{} {why}", s.named()));
        if let Some(flag) = s.flag {
            let given = if s.extra.switch {
                matches.get_flag(flag).then_some("true")
            } else {
                matches.get_one::<String>(flag).map(String::as_str)
            };
            if let Some(text) = given {
                (s.set)(c, text).map_err(bad)?;
                if let Some(then) = s.extra.then {
                    then(c);
                }
            }
        }
        if let Some((off, _)) = s.extra.off {
            if matches.get_flag(off) {
                (s.set)(c, "false").map_err(bad)?;
            }
        }
    }
    Ok(())
}
