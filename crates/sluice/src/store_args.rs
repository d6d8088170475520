//! `sluice serve`'s flags for the content store and uploads, kept apart from the rest of the
//! command line; each overrides the same key of `[store]` / `[uploads]` in the configuration.

use std::path::PathBuf;

use clap::Args;
use sluice_server::Config;

/// Where uploads go and who may send them.
#[derive(Args, Debug, Default)]
pub struct StoreArgs {
    /// Bearer tokens allowed to PUT and DELETE, one a line; without any, uploads are off (403).
    #[arg(long)]
    upload_token_file: Option<PathBuf>,
    /// Largest upload in bytes (413 before the body beyond it).
    #[arg(long)]
    max_upload: Option<u64>,
    /// Where uploads are stored: a directory or s3://BUCKET/PREFIX (default: the library root).
    #[arg(long)]
    store: Option<String>,
    /// S3 endpoint URL for an s3:// store, e.g. http://127.0.0.1:8333 (SeaweedFS, MinIO).
    #[arg(long)]
    s3_endpoint: Option<String>,
    /// S3 region (default: AWS_REGION, else us-east-1).
    #[arg(long)]
    s3_region: Option<String>,
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
        if self.store.is_some() {
            c.store.location = self.store;
        }
        if self.s3_endpoint.is_some() {
            c.store.s3_endpoint = self.s3_endpoint;
        }
        if self.s3_region.is_some() {
            c.store.s3_region = self.s3_region;
        }
    }
}
