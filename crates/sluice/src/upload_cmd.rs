//! `sluice upload`: the command-line face of `sluice_load::upload` (the batch uploader). Parses
//! flags, shows a progress line (objects, bytes, objects/s), prints the summary or `--json`, names
//! each failed object on stderr with the server's reason, and exits 1 when any object failed, 2
//! for a usage error (as `serve` and `load` do).

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, Context};
use clap::Args;
use sluice_load::payload::PayloadKind;
use sluice_load::upload::{run_upload, Destination, Source, UploadConfig, UploadProgress};
use sluice_store::gzip::{GzipMode, GzipPolicy};
use sluice_store::S3Config;

use crate::load_cmd::UsageError;

/// Exit code when the run finished but some objects failed.
pub const UPLOADS_FAILED: i32 = 1;

/// Upload files, a tree, or generated payloads to a sluice server or an S3 bucket.
///
/// Exit status: 0 when every object was stored, 1 when any failed (each named on stderr with the
/// server's reason), 2 for a usage error.
#[derive(Args, Debug)]
pub struct UploadArgs {
    /// Destination: http://HOST:PORT/PREFIX (a sluice server) or s3://BUCKET/PREFIX.
    target: String,
    /// Files and directories to upload. A file goes to PREFIX/NAME; a directory's contents go
    /// under PREFIX, recursively, keyed by their path inside it (`sluice upload URL films/` stores
    /// films/a/b.mp4 as PREFIX/a/b.mp4, not PREFIX/films/a/b.mp4). Names are stored as given,
    /// UTF-8 and all. A path that is not there is a usage error (exit 2), before any upload.
    paths: Vec<PathBuf>,
    /// Generated payloads instead of files: KIND:SIZE, KIND one of email, sms, random, e.g.
    /// email:50KB. SIZE: bytes, or K/M/G/T, KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB
    /// (powers of 1000); a decimal must come to whole bytes (random:1.5MB).
    #[arg(long, conflicts_with = "paths", value_parser = PayloadKind::parse_spec, value_name = "KIND:SIZE")]
    generate: Option<(PayloadKind, usize)>,
    /// How many payloads to generate.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Parallel uploads, each over its own kept-alive connection.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Bearer token for a sluice server (the first line of this file that is not a `#` comment).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// S3 endpoint URL for s3:// destinations (SeaweedFS, MinIO); credentials from AWS_*.
    #[arg(long, alias = "endpoint", value_name = "URL")]
    s3_endpoint: Option<String>,
    /// Which objects to store gzipped when writing straight to S3 (a sluice server applies its own).
    #[arg(long, default_value = "auto")]
    gzip: String,
    /// Retries per object on 5xx, resets and timeouts (a 4xx is final, never retried).
    #[arg(long, default_value_t = 3)]
    retries: u32,
    /// Longest wait for any single read or write, e.g. 30s, 500ms, 2m.
    #[arg(long, default_value = "30s", value_parser = sluice_load::duration_text::parse, value_name = "DURATION")]
    timeout: Duration,
    /// Write the report as JSON to this file (`-` for standard output).
    #[arg(long)]
    json: Option<String>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// An error the user must fix on the command line: exit status 2.
fn usage(message: String) -> anyhow::Error {
    anyhow!(message).context(UsageError)
}

/// The token: the first line of `path` that is neither blank nor a `#` comment.
fn read_token(path: &std::path::Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read the token file {}: {e}", path.display())))?;
    let token = text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#'));
    token
        .map(str::to_string)
        .ok_or_else(|| usage(format!("the token file {} holds no token", path.display())))
}

/// Runs `sluice upload`.
pub fn run(args: UploadArgs) -> anyhow::Result<()> {
    let source = match args.generate {
        Some((kind, size)) => Source::Generate { kind, size, count: args.count },
        None if args.paths.is_empty() => {
            return Err(usage("nothing to upload: give files or directories, or --generate KIND:SIZE".into()))
        }
        None => {
            // Checked before any request: a mistyped path is the command line's fault, not a
            // failed upload.
            for path in &args.paths {
                if let Err(e) = std::fs::metadata(path) {
                    return Err(usage(format!("cannot upload {}: {e}", path.display())));
                }
            }
            Source::Paths(args.paths.clone())
        }
    };
    let token = args.token_file.as_deref().map(read_token).transpose()?;
    let mode: GzipMode = args.gzip.parse().map_err(|e: String| usage(format!("--gzip: {e}")))?;
    let s3 = S3Config { endpoint: args.s3_endpoint.clone(), ..S3Config::default() };
    let destination =
        Destination::parse(&args.target, token, s3, GzipPolicy { mode, ..GzipPolicy::default() })
            .map_err(usage)?;
    let config = UploadConfig {
        destination,
        source,
        concurrency: args.concurrency,
        retries: args.retries,
        timeout: args.timeout,
        stop: None,
    };
    let progress = UploadProgress::default();
    let done = std::sync::atomic::AtomicBool::new(false);
    let bar = (!args.quiet).then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} objects {msg} {per_sec}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let report = std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                if let Some(bar) = &bar {
                    bar.set_length(progress.total.load(Ordering::Relaxed));
                    bar.set_position(progress.objects.load(Ordering::Relaxed));
                    bar.set_message(format!("{} bytes", progress.bytes.load(Ordering::Relaxed)));
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        let report = run_upload(&config, &progress);
        done.store(true, Ordering::Relaxed);
        report
    });
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let report = report.map_err(|e| anyhow!(e))?;
    match args.json.as_deref() {
        Some("-") => println!("{}", serde_json::to_string_pretty(&report)?),
        Some(path) => {
            std::fs::write(path, serde_json::to_string_pretty(&report)?)
                .with_context(|| format!("writing {path}"))?;
            print!("{}", report.render());
        }
        None => print!("{}", report.render()),
    }
    for failed in &report.failed_objects {
        let from = failed.path.as_ref().map(|p| format!(" (from {})", p.display())).unwrap_or_default();
        crate::eprintln_safe(&format!("sluice: failed: {}{from}: {}", failed.key, failed.reason));
    }
    let listed = report.failed_objects.len() as u64;
    let failed: u64 = report.failures.values().sum();
    if failed > listed {
        crate::eprintln_safe(&format!("sluice: ... and {} more failed (counts above)", failed - listed));
    }
    let s3 = args.target.starts_with("s3://");
    if let Some(stop) = &report.stopped {
        crate::eprintln_safe(&format!(
            "sluice: stopped: the {} refused the credentials ({}); check {}{}",
            if s3 { "store" } else { "server" },
            stop.reason,
            if s3 { "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY" } else { "--token-file" },
            if report.skipped > 0 {
                format!(" ({} object(s) not tried)", report.skipped)
            } else {
                String::new()
            }
        ));
    }
    if report.failed() {
        use std::io::Write;
        let _ = std::io::stdout().flush();
        std::process::exit(UPLOADS_FAILED);
    }
    Ok(())
}
