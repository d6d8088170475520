//! `sluice upload`: the command-line face of `sluice_load::upload` (the batch uploader). Parses
//! flags, shows a progress line (objects, bytes, objects/s), prints the summary or `--json`, and
//! exits non-zero when any object failed.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::Args;
use sluice_load::payload::PayloadKind;
use sluice_load::upload::{run_upload, Destination, Source, UploadConfig, UploadProgress};
use sluice_store::gzip::{GzipMode, GzipPolicy};
use sluice_store::S3Config;

/// Exit code when the run finished but some objects failed.
pub const UPLOADS_FAILED: i32 = 1;

/// Upload files, a tree, or generated payloads to a sluice server or an S3 bucket.
#[derive(Args, Debug)]
pub struct UploadArgs {
    /// Destination: http://HOST:PORT/PREFIX (a sluice server) or s3://BUCKET/PREFIX.
    target: String,
    /// Files and directories to upload (directories recursively, keyed by relative path).
    paths: Vec<PathBuf>,
    /// Generated payloads instead of files: KIND:SIZE, KIND one of email, sms, random; SIZE in
    /// bytes with an optional KB/MB suffix (1000-based), e.g. email:50KB.
    #[arg(long, conflicts_with = "paths")]
    generate: Option<String>,
    /// How many payloads to generate.
    #[arg(long, default_value_t = 100)]
    count: usize,
    /// Parallel uploads, each over its own kept-alive connection.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Bearer token for a sluice server (the first line of this file).
    #[arg(long)]
    token_file: Option<PathBuf>,
    /// S3 endpoint URL for s3:// destinations (SeaweedFS, MinIO); credentials from AWS_*.
    #[arg(long)]
    endpoint: Option<String>,
    /// Which objects to store gzipped when writing straight to S3 (a sluice server applies its own).
    #[arg(long, default_value = "auto")]
    gzip: String,
    /// Retries per object on 5xx, resets and timeouts.
    #[arg(long, default_value_t = 3)]
    retries: u32,
    /// Longest wait for any single read or write, in seconds.
    #[arg(long, default_value_t = 30)]
    timeout: u64,
    /// Write the report as JSON to this file (`-` for standard output).
    #[arg(long)]
    json: Option<String>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

fn parse_size(text: &str) -> anyhow::Result<usize> {
    let t = text.trim().to_ascii_uppercase();
    let (digits, unit) = match t.find(|c: char| !c.is_ascii_digit()) {
        Some(i) => t.split_at(i),
        None => (t.as_str(), ""),
    };
    let n: usize = digits.parse().with_context(|| format!("size `{text}`"))?;
    let unit = match unit.trim() {
        "" | "B" => 1,
        "KB" | "K" => 1000,
        "MB" | "M" => 1_000_000,
        "KIB" => 1024,
        "MIB" => 1 << 20,
        other => bail!("unknown size unit `{other}`"),
    };
    Ok(n * unit)
}

/// Runs `sluice upload`.
pub fn run(args: UploadArgs) -> anyhow::Result<()> {
    let source = match &args.generate {
        Some(spec) => {
            let (kind, size) = spec.split_once(':').ok_or_else(|| anyhow!("--generate wants KIND:SIZE"))?;
            let kind = PayloadKind::parse(kind).ok_or_else(|| anyhow!("unknown payload kind `{kind}`"))?;
            Source::Generate { kind, size: parse_size(size)?, count: args.count }
        }
        None if args.paths.is_empty() => bail!("nothing to upload: give paths or --generate"),
        None => Source::Paths(args.paths.clone()),
    };
    let token = match &args.token_file {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading {}", p.display()))?
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .ok_or_else(|| anyhow!("{} holds no token", p.display()))?
                .to_string(),
        ),
        None => None,
    };
    let mode: GzipMode = args.gzip.parse().map_err(|e: String| anyhow!(e))?;
    let s3 = S3Config { endpoint: args.endpoint.clone(), ..S3Config::default() };
    let destination =
        Destination::parse(&args.target, token, s3, GzipPolicy { mode, ..GzipPolicy::default() })
            .map_err(|e| anyhow!(e))?;
    let config = UploadConfig {
        destination,
        source,
        concurrency: args.concurrency,
        retries: args.retries,
        timeout: Duration::from_secs(args.timeout),
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
    if report.failed() {
        std::process::exit(UPLOADS_FAILED);
    }
    Ok(())
}
