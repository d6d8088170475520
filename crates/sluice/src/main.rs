//! The `sluice` command: parses the command line and hands each subcommand to its module
//! (`serve_cmd`, `load_cmd`, `upload_cmd`, `sign_cmd`, `lab_cmd`), which sets up what it needs and
//! calls the library crates; here are only the exit status and the error line. No server logic
//! lives here.

#![deny(unsafe_code)]

use std::process::ExitCode;

use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use sluice_server::config::ConfigError;
use sluice_server::ServeError;

mod lab_cmd;
mod load_cmd;
mod serve_cmd;
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
    Serve(Box<serve_cmd::ServeArgs>),
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

/// Raises the soft open-files limit to the hard one (see `sluice_load::limits`).
pub(crate) fn raise_nofile_limit() {
    if let Err(e) = sluice_load::limits::raise_nofile_limit() {
        tracing::warn!("cannot raise the open-files limit: {e}");
    }
}

/// Writes one line to stderr; a closed or broken stderr is not worth a panic.
pub(crate) fn eprintln_safe(line: &str) {
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
    let matches = Cli::command().mut_subcommand("serve", serve_cmd::with_setting_flags).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.command {
        Command::Serve(args) => {
            serve_cmd::run(*args, matches.subcommand_matches("serve").unwrap_or(&ArgMatches::default()))
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
