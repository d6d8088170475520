//! `sluice sign`: prints a signed URL that a `mode = "signed"` access policy accepts.
//!
//! Owns the command's flags only; the signature itself (what it covers, how it is encoded) is
//! `sluice_server::access`'s, the one the server checks.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::Args;
use sluice_server::access::{manifest_prefix, normal_path, read_key, signed_url, title_folder, Scope};
use sluice_server::config::parse_duration;

/// Flags of `sluice sign`.
#[derive(Args, Debug)]
pub struct SignArgs {
    /// The URL path to sign, e.g. /films/a.mp4 or /films/a.mp4/master.m3u8. A playlist or MPD
    /// is signed with its title's prefix unless --prefix is given (see --prefix).
    path: String,
    /// How long the URL stays valid: 1h, 30m, 7d…
    #[arg(long, value_parser = parse_duration, value_name = "DURATION")]
    expires: Duration,
    /// The file holding the key (the policy's key_file, or one of its keys).
    #[arg(long, value_name = "FILE")]
    key_file: PathBuf,
    /// The key's id in the policy's `keys` table (for keys being rotated); none for key_file.
    #[arg(long, value_name = "ID")]
    kid: Option<String>,
    /// Sign a prefix rather than the path alone, so that one URL opens a title's playlists,
    /// segments and sidecars. Without a value: the folder holding the title (/films/ for
    /// /films/a.mp4/master.m3u8). Without the flag, a playlist or MPD (.m3u8, .mpd), whose
    /// signature alone would not open the URLs it lists, is signed with its title's prefix:
    /// /films/a.mp4/ for /films/a.mp4/master.m3u8, and the folder for a rendition set's
    /// (/films/ for /films/a.set/master.m3u8, whose renditions are the files beside it); any
    /// other path is signed alone.
    #[arg(long, value_name = "PREFIX", num_args = 0..=1, default_missing_value = "")]
    prefix: Option<String>,
    /// Bind the URL to this client address: from anywhere else it is refused.
    #[arg(long, value_name = "ADDR")]
    ip: Option<IpAddr>,
    /// Print a whole URL on this base (http://media.example.com, rtsp://127.0.0.1:8554);
    /// without it, the path and query.
    #[arg(long, value_name = "URL")]
    base: Option<String>,
}

/// Prints the signed URL.
pub fn run(args: SignArgs) -> anyhow::Result<()> {
    let path =
        normal_path(&args.path).with_context(|| format!("{} is not a path inside the library", args.path))?;
    let key = read_key(&args.key_file)
        .with_context(|| format!("cannot read the key {}", args.key_file.display()))?;
    let prefix = match args.prefix.as_deref() {
        None => {
            let prefix = manifest_prefix(&path);
            if let Some(prefix) = &prefix {
                eprintln!(
                    "sluice sign: signed for every path under {prefix}, so the URLs the manifest \
                     lists open too (--prefix PREFIX signs another)"
                );
            }
            prefix
        }
        Some("") => Some(title_folder(&path)),
        Some(p) if path.starts_with(p) => Some(p.to_string()),
        Some(p) => anyhow::bail!("--prefix {p} does not cover {path}"),
    };
    let scope = match &prefix {
        Some(prefix) => Scope::Prefix(prefix),
        None => Scope::Path(&path),
    };
    let expires = (SystemTime::now() + args.expires).duration_since(UNIX_EPOCH)?.as_secs();
    let url = signed_url(&key, args.kid.as_deref(), &path, scope, expires, args.ip);
    println!("{}{url}", args.base.as_deref().unwrap_or("").trim_end_matches('/'));
    Ok(())
}
