//! The rows of an upload experiment (E6): it starts a local SeaweedFS and toxiproxy in front of
//! its S3 API once per run, sets each sweep's modelled round trip (a latency toxic each way, or
//! none), and for every point runs `sluice upload`'s engine in this process, straight to the
//! bucket (`kind = "s3"`, with the server's gzip policy) or through a `sluice serve` whose uploads
//! go to the same bucket through the same proxy. It owns no figures' arithmetic beyond the
//! sequential multiple, and renders nothing.

use std::path::Path;
use std::time::Duration;

use sluice_harness::seaweedfs::SeaweedFs;
use sluice_harness::toxiproxy::Toxiproxy;
use sluice_load::payload::PayloadKind;
use sluice_load::upload::{run_upload, Destination, Source, UploadConfig, UploadProgress};
use sluice_store::gzip::{GzipMode, GzipPolicy};
use sluice_store::S3Config;

use super::{empty_row, Run};
use crate::experiment::{Point, ServerKind, ServerSpec};
use crate::machine::Placement;
use crate::peer::{RunningServer, StartError};
use crate::results::{Measurement, Row, RowOutcome, UploadFigures};

/// The bucket the run uploads into.
const BUCKET: &str = "e6-uploads";
/// The proxy's name in toxiproxy.
const PROXY: &str = "s3";
/// The token `sluice serve` accepts.
const TOKEN: &str = "lab-e6-token";
/// Objects per worker at least, on a concurrency point, so every worker uploads a fair share
/// (full runs; a quick run gives each worker two).
const PER_WORKER: usize = 20;

/// The store and the proxy in front of it, or why there are none (E6's and E7's).
pub(super) struct Store {
    pub(super) weed: Result<SeaweedFs, String>,
    toxiproxy: Result<(Toxiproxy, String), String>,
}

impl Store {
    /// SeaweedFS with `bucket` in `work`, and toxiproxy in front of its S3 API; its credentials
    /// in this process's environment, which the uploader here and every `sluice serve` read.
    pub(super) fn start(work: &Path, bucket: &str) -> Store {
        let _ = std::fs::create_dir_all(work);
        std::env::set_var("AWS_ACCESS_KEY_ID", sluice_harness::seaweedfs::ACCESS_KEY);
        std::env::set_var("AWS_SECRET_ACCESS_KEY", sluice_harness::seaweedfs::SECRET_KEY);
        let weed = if SeaweedFs::available() {
            let dir = work.join("weed");
            let _ = std::fs::create_dir_all(&dir);
            SeaweedFs::start(&dir, bucket).map_err(|e| format!("SeaweedFS did not start: {e}"))
        } else {
            Err(format!("weed not found: {}", sluice_harness::tools::install_hint("weed")))
        };
        let toxiproxy = match &weed {
            Err(e) => Err(e.clone()),
            Ok(_) if !Toxiproxy::available() => {
                Err(format!("toxiproxy not found: {}", sluice_harness::tools::install_hint("toxiproxy")))
            }
            Ok(weed) => start_proxy(work, &weed.s3_endpoint),
        };
        Store { weed, toxiproxy }
    }

    /// A second proxy `name` in front of `upstream` with `latency` each way: its address.
    pub(super) fn proxy(
        &self,
        name: &str,
        upstream: std::net::SocketAddr,
        latency: Option<Duration>,
    ) -> Result<std::net::SocketAddr, String> {
        let (proxy, _) = self.toxiproxy.as_ref().map_err(Clone::clone)?;
        let listen = proxy.proxy(name, upstream).map_err(|e| format!("toxiproxy: {e}"))?;
        proxy.set_latency(name, latency).map_err(|e| format!("toxiproxy: {e}"))?;
        Ok(listen)
    }

    /// The S3 endpoint of a sweep with `latency` each way (set on the proxy), or why there is none.
    pub(super) fn endpoint(&self, latency: Option<Duration>) -> Result<String, String> {
        let weed = self.weed.as_ref().map_err(Clone::clone)?;
        match (&self.toxiproxy, latency) {
            (Ok((proxy, endpoint)), _) => {
                proxy.set_latency(PROXY, latency).map_err(|e| format!("toxiproxy: {e}"))?;
                Ok(endpoint.clone())
            }
            // Without toxiproxy the rows without a round trip still run, straight to SeaweedFS.
            (Err(_), None) => Ok(weed.s3_endpoint.clone()),
            (Err(reason), Some(_)) => Err(reason.clone()),
        }
    }
}

fn start_proxy(work: &Path, s3_endpoint: &str) -> Result<(Toxiproxy, String), String> {
    let upstream = s3_endpoint
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| format!("SeaweedFS's endpoint {s3_endpoint}: {e}"))?;
    let proxy = Toxiproxy::start(&work.join("toxiproxy.log")).map_err(|e| format!("toxiproxy: {e}"))?;
    let listen = proxy.proxy(PROXY, upstream).map_err(|e| format!("toxiproxy: {e}"))?;
    Ok((proxy, format!("http://{listen}")))
}

impl Run<'_> {
    /// Every upload sweep's points for every server, the store started once for the run.
    pub(super) fn upload_sweeps(&self, points: &[Point], servers: &[&ServerSpec], rows: &mut Vec<Row>) {
        let store = Store::start(&self.ctx.work_dir.join("store"), BUCKET);
        let first = rows.len();
        for sweep in &self.experiment.sweep {
            let endpoint = store.endpoint(sweep.latency_each_way);
            for point in points.iter().filter(|p| p.sweep == sweep.name) {
                for server in servers {
                    self.bar.set_message(super::row_label(server, point, None));
                    let index = rows.len();
                    self.record(rows, self.upload_row(server, point, index, endpoint.as_deref()));
                }
            }
        }
        sequential_multiples(&mut rows[first..]);
    }

    fn upload_row(
        &self,
        server: &ServerSpec,
        point: &Point,
        index: usize,
        endpoint: Result<&str, &String>,
    ) -> Row {
        let mut row = empty_row(server, point, &Placement { server: vec![], load: vec![] });
        let endpoint = match endpoint {
            Ok(e) => e,
            Err(reason) => {
                row.outcome = RowOutcome::Skipped { reason: reason.clone() };
                return row;
            }
        };
        let (runs, warmup) = self.experiment.load.upload_runs(self.options.quick);
        let concurrency = point.vus.unwrap_or(1).max(1);
        let per_worker = if self.options.quick { 2 } else { PER_WORKER };
        let count = if point.vus.is_some() { runs.max(per_worker * concurrency) } else { runs };
        let payload = point.payload.clone().unwrap_or_default();
        let Some((kind, size)) = parse_payload(&payload) else {
            row.outcome = RowOutcome::Failed { reason: format!("payload `{payload}`: want KIND:SIZE") };
            return row;
        };
        let work = self.ctx.work_dir.join(format!("{index:03}"));
        let _ = std::fs::create_dir_all(&work);
        let prefix = format!("row-{index:03}");
        // `sluice serve` through the same proxy, or nothing in the way.
        let (running, target) = match server.kind {
            ServerKind::S3 => (None, format!("s3://{BUCKET}/{prefix}")),
            _ => match self.start_serve(server, point, endpoint, &work) {
                Ok(s) => {
                    let target = format!("http://{}/{prefix}", s.addr());
                    (Some(s), target)
                }
                Err(e) => {
                    row.outcome = super::not_started(e);
                    return row;
                }
            },
        };
        let gzip = server.gzip.as_deref().unwrap_or("auto");
        let mode: GzipMode = match gzip.parse() {
            Ok(m) => m,
            Err(e) => {
                row.outcome = RowOutcome::Failed { reason: e };
                return row;
            }
        };
        let s3 = S3Config { endpoint: Some(endpoint.to_string()), ..S3Config::default() };
        let destination = |target: &str| {
            Destination::parse(
                target,
                Some(TOKEN.into()),
                s3.clone(),
                GzipPolicy { mode, ..GzipPolicy::default() },
            )
        };
        let config = |target: &str, count: usize| -> Result<UploadConfig, String> {
            Ok(UploadConfig {
                destination: destination(target)?,
                source: Source::Generate { kind, size, count },
                concurrency,
                retries: 3,
                timeout: Duration::from_secs(30),
                stop: Some(crate::stop::flag()),
            })
        };
        row.server_command = running.as_ref().map(|s| s.command_line.clone()).unwrap_or_default();
        let token = if running.is_some() { " --token-file TOKENS" } else { "" };
        let s3_flags = if running.is_some() {
            String::new()
        } else {
            format!(" --s3-endpoint {endpoint} --gzip {gzip}")
        };
        row.load_command = format!(
            "sluice upload {target} --generate {payload} --count {count} --concurrency {concurrency}{s3_flags}{token} \
             (after {warmup} not counted)"
        );
        let measured = (|| {
            if warmup > 0 {
                run_upload(&config(&format!("{target}-warmup"), warmup)?, &UploadProgress::default())?;
            }
            run_upload(&config(&target, count)?, &UploadProgress::default())
        })();
        drop(running);
        row.outcome = match measured {
            Ok(report) => RowOutcome::Measured {
                measurement: Measurement::Upload {
                    upload: Box::new(UploadFigures { report, sequential_multiple: None }),
                },
            },
            Err(reason) => RowOutcome::Failed { reason },
        };
        row
    }

    /// `sluice serve` with uploads into the bucket through `endpoint`.
    fn start_serve(
        &self,
        server: &ServerSpec,
        point: &Point,
        endpoint: &str,
        work: &Path,
    ) -> Result<RunningServer, StartError> {
        let tokens = work.join("tokens");
        std::fs::write(&tokens, format!("{TOKEN}\n"))
            .map_err(|e| StartError::Failed(format!("writing the token file: {e}")))?;
        let mut spec = server.clone();
        spec.args.extend([
            "--upload-token-file".into(),
            tokens.display().to_string(),
            "--store".into(),
            format!("s3://{BUCKET}/serve"),
            "--s3-endpoint".into(),
            endpoint.to_string(),
        ]);
        RunningServer::start(&spec, point, self.ctx, work, &[], None)
    }
}

/// `email:50KB` → (email, 50 000): the one payload-spec parser (`PayloadKind::parse_spec`).
fn parse_payload(text: &str) -> Option<(PayloadKind, usize)> {
    PayloadKind::parse_spec(text).ok()
}

/// objects/s over the same server's at concurrency 1 of the same sweep.
fn sequential_multiples(rows: &mut [Row]) {
    let base: Vec<(String, String, f64)> = rows
        .iter()
        .filter(|r| r.point.vus == Some(1))
        .filter_map(|r| Some((r.server.clone(), r.point.sweep.clone(), r.metric("objects_per_s")?)))
        .collect();
    for row in rows.iter_mut().filter(|r| r.point.vus.is_some()) {
        let one = base.iter().find(|(s, w, _)| *s == row.server && *w == row.point.sweep).map(|b| b.2);
        if let (Some(one), RowOutcome::Measured { measurement: Measurement::Upload { upload } }) =
            (one, &mut row.outcome)
        {
            upload.sequential_multiple = (one > 0.0).then(|| upload.report.objects_per_s / one);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_read_as_the_uploader_takes_them() {
        assert_eq!(parse_payload("email:50KB"), Some((PayloadKind::Email, 50_000)));
        assert_eq!(parse_payload("sms:80"), Some((PayloadKind::Sms, 80)));
        assert_eq!(parse_payload("sms:80B"), Some((PayloadKind::Sms, 80)));
        assert_eq!(parse_payload("email"), None);
        assert_eq!(parse_payload("video:1KB"), None);
    }
}
