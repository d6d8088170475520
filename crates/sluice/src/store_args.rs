//! `sluice serve`'s flags for the content store and uploads, kept apart from the rest of the
//! command line; each overrides the same key of `[store]` / `[uploads]` in the configuration.

use std::path::PathBuf;

use clap::Args;
use sluice_server::config::parse_size;
use sluice_server::Config;

/// Where uploads go and who may send them.
#[derive(Args, Debug, Default)]
pub struct StoreArgs {
    /// Bearer tokens allowed to PUT and DELETE, one a line ('#' comments); the file must hold at
    /// least one. Without a token file (or `tokens` in the file), uploads are off (403).
    #[arg(long, value_name = "FILE")]
    upload_token_file: Option<PathBuf>,
    /// Largest upload (413 before the body beyond it), e.g. 1M, 64MiB, 5GB (default 64GiB). SIZE:
    /// bytes, or K/M/G/T, KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of 1000).
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    max_upload: Option<u64>,
    /// Bytes each upload token may store per day (UTC); beyond it 429 with Retry-After until
    /// midnight (default 0: no limit). SIZE as --max-upload.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    upload_bytes_per_day: Option<u64>,
    /// Where uploads are stored: a directory or s3://BUCKET/PREFIX (default: the library root);
    /// an s3:// store is also the library served, through a local cache (--cache-*).
    #[arg(long)]
    store: Option<String>,
    /// S3 endpoint URL for an s3:// store, e.g. http://127.0.0.1:8333 (SeaweedFS, MinIO).
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// S3 region (default: AWS_REGION, else us-east-1).
    #[arg(long)]
    s3_region: Option<String>,
    /// Longest time one request to the S3 store may take (default 30s; a library read from it
    /// answers 504 past it).
    #[arg(long, value_parser = sluice_server::config::parse_duration, value_name = "DURATION")]
    s3_timeout: Option<std::time::Duration>,
    /// Directory of the local cache of an s3:// library (default: sluice-cache-PID under the
    /// temporary directory, removed when sluice exits; a directory given here is kept and reused).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Most bytes the cache keeps on disk, e.g. 512M, 64MiB or 20GB (default 1GiB); the SIZE
    /// syntax of --max-upload.
    #[arg(long, value_parser = parse_size, value_name = "SIZE")]
    cache_size: Option<u64>,
    /// Object metadata older than this is revalidated with the store by ETag (default 60s).
    #[arg(long, value_parser = sluice_server::config::parse_duration, value_name = "DURATION")]
    cache_revalidate: Option<std::time::Duration>,
    /// When the s3:// store does not answer at start-up (a missing bucket, refused credentials),
    /// start anyway, unready (/readyz 503 with the reason) until it answers, instead of exiting 2.
    #[arg(long)]
    store_wait: bool,
}

impl StoreArgs {
    /// Applies the given flags on top of the configuration.
    pub fn apply(self, c: &mut Config) {
        if self.upload_token_file.is_some() {
            c.uploads.token_file = self.upload_token_file;
        }
        if let Some(n) = self.max_upload {
            c.uploads.max_size = n;
        }
        if let Some(n) = self.upload_bytes_per_day {
            c.uploads.max_bytes_per_token_per_day = n;
        }
        if self.store.is_some() {
            c.store.location = self.store;
        }
        if self.s3_endpoint.is_some() {
            c.store.s3_endpoint = self.s3_endpoint;
        }
        if self.s3_region.is_some() {
            c.store.s3_region = self.s3_region;
        }
        if self.s3_timeout.is_some() {
            c.store.s3_timeout = self.s3_timeout;
        }
        if self.cache_dir.is_some() {
            c.store.cache_dir = self.cache_dir;
        }
        if let Some(n) = self.cache_size {
            c.store.cache_size = n;
        }
        if let Some(d) = self.cache_revalidate {
            c.store.cache_revalidate = d;
        }
        if self.store_wait {
            c.store.wait = true;
        }
    }
}
