//! The server configurations an experiment declares (`[[server]]`): sluice with its arguments, or
//! a peer (nginx, GStreamer's RTSP server, S3 straight), and what serves an edge row. It owns
//! their declaration only: starting them is the runner's (`peer`).

use serde::{Deserialize, Serialize};

/// What kind of server a row runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerKind {
    /// `sluice serve` with the row's arguments.
    #[default]
    Sluice,
    /// nginx with a generated configuration.
    Nginx,
    /// GStreamer's RTSP server (scripts/gst-rtsp-server.py, run by a python3 with PyGObject).
    Gstreamer,
    /// No server: uploads go straight to the S3 bucket (SeaweedFS), with the spec's `gzip`.
    S3,
}

/// What the nginx peer serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NginxMode {
    /// The experiment's media directory.
    Static,
    /// `return 200 "Hello, World!"` at `/bench/hello`.
    Return200,
}

/// One server configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSpec {
    /// Name in tables and charts.
    pub name: String,
    /// sluice or a peer.
    #[serde(default)]
    pub kind: ServerKind,
    /// Extra `sluice serve` arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// What nginx serves.
    #[serde(default)]
    pub nginx: Option<NginxMode>,
    /// nginx `sendfile on|off`.
    #[serde(default)]
    pub sendfile: Option<bool>,
    /// The uploader's gzip policy straight to S3: `never`, `always` or `auto` (uploads).
    #[serde(default)]
    pub gzip: Option<String>,
    /// What an edge experiment's row puts in front of the library (edges).
    #[serde(default)]
    pub edge: Option<EdgeRole>,
}

/// What serves an edge experiment's row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EdgeRole {
    /// `sluice serve --root` over the library's files on local disk (the reference).
    Local,
    /// One `sluice serve --store s3://…` with a cache holding the library.
    S3,
    /// Two such edges behind HAProxy running deploy/haproxy.cfg.
    Haproxy,
    /// nginx `proxy_cache` (with `slice 1m` and `proxy_cache_lock`) in front of the store.
    Nginx,
}

impl ServerSpec {
    /// Whether this row is a peer rather than sluice.
    pub fn is_peer(&self) -> bool {
        self.kind != ServerKind::Sluice
    }
}
