//! The rows of an edge-cache experiment (E7): it starts a local SeaweedFS and toxiproxy in front
//! of it once per run (a round trip on every origin request), generates a library of files and
//! uploads it to the bucket, then for every server starts its processes once (one sluice S3
//! edge; two behind HAProxy running deploy/haproxy.cfg; nginx's `proxy_cache` with `slice 1m`
//! and `proxy_cache_lock` in front of SeaweedFS's filer; a sluice over the files on local disk)
//! and runs the sweeps in order against it, so the first (every file once) meets a cold cache
//! and the later ones a warm one. Origin requests come from SeaweedFS's own counters, the same
//! source for every row; cache hits, misses and origin bytes from sluice's `/metrics`. It owns
//! no figures' arithmetic (`results`) and renders nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_harness::haproxy::{free_addr, Edge, Haproxy};
use sluice_harness::nginx::Nginx;
use sluice_harness::seaweedfs::SeaweedFs;
use sluice_load::args::HttpArgs;
use sluice_load::upload::{run_upload, Destination, Source, UploadConfig, UploadProgress};
use sluice_load::{ConnectionMode, LoadConfig};
use sluice_proto::metrics_text::{names, samples, series, Scrape};
use sluice_store::gzip::{GzipMode, GzipPolicy};
use sluice_store::S3Config;

use super::upload_rows::Store;
use super::{empty_row, measured, not_started, Run};
use crate::experiment::{EdgeRole, Point, ServerSpec, Sweep};
use crate::machine::{group_cpu_seconds, Placement};
use crate::peer::{free_port, RunningServer, StartError};
use crate::results::{Measurement, OriginFigures, Row, RowOutcome};

/// The bucket the library lives in, and its prefix there.
const BUCKET: &str = "e7-edge";
const PREFIX: &str = "lib";
/// toxiproxy's latency each way between every cache and the origin when no sweep sets one.
const DEFAULT_LATENCY: Duration = Duration::from_millis(10);

/// The library: `count` files of `size` bytes (full runs; `--quick` a small one).
fn library_shape(quick: bool) -> (usize, u64) {
    if quick {
        (4, 1 << 20)
    } else {
        (12, 4 << 20)
    }
}

/// The generated library on disk.
struct Library {
    dir: PathBuf,
    names: Vec<String>,
    file_size: u64,
}

impl Library {
    /// `count` incompressible files of `size` bytes named `fNN.mp4` in `dir` (kept when present).
    fn generate(dir: &Path, count: usize, size: u64) -> Result<Library, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut names = Vec::with_capacity(count);
        for i in 1..=count {
            let name = format!("f{i:02}.mp4");
            let path = dir.join(&name);
            if !std::fs::metadata(&path).is_ok_and(|m| m.len() == size) {
                std::fs::write(&path, super::incompressible(i as u64, size))
                    .map_err(|e| format!("{}: {e}", path.display()))?;
            }
            names.push(name);
        }
        Ok(Library { dir: dir.to_path_buf(), names, file_size: size })
    }

    fn bytes(&self) -> u64 {
        self.file_size * self.names.len() as u64
    }
}

/// The processes of one row: the sluice servers whose counters it reads, and what clients
/// reach (HAProxy or nginx) when that is another process.
struct Rig {
    sluices: Vec<RunningServer>,
    front: Option<RunningServer>,
}

impl Rig {
    fn base_url(&self) -> String {
        self.front.as_ref().or(self.sluices.first()).map(RunningServer::base_url).unwrap_or_default()
    }

    fn command_line(&self) -> String {
        let all = self.sluices.iter().chain(self.front.as_ref());
        all.map(|s| s.command_line.as_str()).collect::<Vec<_>>().join(" ; ")
    }

    /// CPU seconds of every process of the row.
    fn cpu_seconds(&self) -> f64 {
        self.sluices.iter().chain(self.front.as_ref()).map(|s| group_cpu_seconds(s.pid())).sum()
    }

    /// sluice's cache counters summed over its servers: (hits, misses, origin bytes).
    fn cache_counters(&self) -> Option<(f64, f64, f64)> {
        let mut sum = (0.0, 0.0, 0.0);
        for s in &self.sluices {
            let text = s.metrics_text()?;
            let scrape = Scrape::parse(&text);
            let counter = |series: &str| scrape.get(series).unwrap_or(0.0);
            sum.0 += counter(names::CACHE_HITS_TOTAL);
            sum.1 += counter(names::CACHE_MISSES_TOTAL);
            sum.2 += counter(&series(names::CACHE_BYTES_TOTAL, &[("source", "origin")]));
        }
        Some(sum)
    }

    fn stop(&mut self) {
        if let Some(f) = self.front.as_mut() {
            f.stop();
        }
        for s in &mut self.sluices {
            s.stop();
        }
    }
}

/// Requests SeaweedFS answered for the library: its S3 API's requests on the bucket and its
/// filer's reads (nginx's origin); the S3 API reads through the filer's gRPC, not its HTTP, so
/// no read is counted twice.
fn origin_requests(weed_metrics: &str) -> f64 {
    samples(weed_metrics)
        .filter(|s| {
            (s.name == "SeaweedFS_s3_request_total" && s.label("bucket").as_deref() == Some(BUCKET))
                || (s.name == "SeaweedFS_filer_request_total" && s.label("type").as_deref() == Some("GET"))
        })
        .map(|s| s.value)
        .sum()
}

/// SeaweedFS's origin requests once its counters have stopped moving: it counts a request a
/// moment after answering it, and an edge's fetches ahead may still be landing when a row's load
/// ends, so a reading taken at once can charge one row's last requests to the next (a local
/// root's row read 2 origin requests that way).
fn settled_origin_requests(weed: &SeaweedFs) -> Option<f64> {
    let read = || weed.metrics_text().ok().map(|t| origin_requests(&t));
    let deadline = Instant::now() + SETTLE_LIMIT;
    let mut last = read()?;
    loop {
        std::thread::sleep(SETTLE_STEP);
        let now = read()?;
        if now == last || Instant::now() > deadline {
            return Some(now);
        }
        last = now;
    }
}

/// How long SeaweedFS's counters must stay still to count as settled, and the longest wait.
const SETTLE_STEP: Duration = Duration::from_millis(500);
const SETTLE_LIMIT: Duration = Duration::from_secs(5);

/// Counters read at a row's start and end.
struct Snapshot {
    cpu: f64,
    origin: Option<f64>,
    cache: Option<(f64, f64, f64)>,
}

impl Run<'_> {
    /// Every server's sweeps in order on one set of its processes, the store started once.
    pub(super) fn edge_sweeps(&self, points: &[Point], servers: &[&ServerSpec], rows: &mut Vec<Row>) {
        let latency =
            self.experiment.sweep.iter().find_map(|s| s.latency_each_way).unwrap_or(DEFAULT_LATENCY);
        let store = Store::start(&self.ctx.work_dir.join("store"), BUCKET);
        let (count, size) = library_shape(self.options.quick);
        let prepared = (|| {
            let library = Library::generate(&self.ctx.media_root.join("e7-library"), count, size)?;
            let weed = store.weed.as_ref().map_err(Clone::clone)?;
            upload_library(&library, &weed.s3_endpoint)?;
            let s3 = store.endpoint(Some(latency))?;
            let filer = store.proxy("filer", weed.filer_addr(), Some(latency));
            Ok::<_, String>((library, s3, filer))
        })();
        for server in servers {
            let mine: Vec<&Point> = points.iter().collect();
            let rig = match &prepared {
                Err(reason) => Err(StartError::Missing(reason.clone())),
                Ok((library, s3, filer)) => self.start_rig(server, library, s3, filer, rows.len()),
            };
            let mut rig = match rig {
                Ok(r) => r,
                Err(e) => {
                    let outcome = not_started(e);
                    for point in mine {
                        let mut row = empty_row(server, point, &Placement { server: vec![], load: vec![] });
                        row.outcome = outcome.clone();
                        self.record(rows, row);
                    }
                    continue;
                }
            };
            let Ok((library, _, _)) = &prepared else { unreachable!("a rig needs the library") };
            for point in mine {
                self.bar.set_message(super::row_label(server, point, None));
                self.record(rows, self.edge_row(server, point, &rig, library, &store));
            }
            rig.stop();
        }
    }

    fn start_rig(
        &self,
        server: &ServerSpec,
        library: &Library,
        s3: &str,
        filer: &Result<std::net::SocketAddr, String>,
        index: usize,
    ) -> Result<Rig, StartError> {
        let work = self.ctx.work_dir.join(format!("{index:03}"));
        let point = self.experiment.points(self.options.quick, 1).remove(0);
        let edge = |name: &str| -> Result<RunningServer, StartError> {
            let mut spec = (*server).clone();
            let cache = work.join(format!("cache-{name}"));
            // An edge reuses the slices it finds: the first sweep must meet a cold cache, also
            // when the lab runs again into the same output directory.
            let _ = std::fs::remove_dir_all(&cache);
            spec.args.extend([
                "--store".into(),
                format!("s3://{BUCKET}/{PREFIX}"),
                "--s3-endpoint".into(),
                s3.to_string(),
                "--cache-dir".into(),
                cache.display().to_string(),
                "--cache-size".into(),
                (2 * library.bytes()).to_string(),
            ]);
            RunningServer::start(&spec, &point, self.ctx, &work.join(name), &[], None)
        };
        match server.edge.unwrap_or(EdgeRole::S3) {
            EdgeRole::Local => {
                let ctx = crate::peer::ServerContext { media_root: library.dir.clone(), ..self.ctx.clone() };
                let s = RunningServer::start(server, &point, &ctx, &work.join("local"), &[], None)?;
                Ok(Rig { sluices: vec![s], front: None })
            }
            EdgeRole::S3 => Ok(Rig { sluices: vec![edge("edge")?], front: None }),
            EdgeRole::Haproxy => {
                sluice_harness::find_tool("haproxy")?;
                let sluices = vec![edge("edge-a")?, edge("edge-b")?];
                let front = start_haproxy(&sluices, &work.join("haproxy"))?;
                Ok(Rig { sluices, front: Some(front) })
            }
            EdgeRole::Nginx => {
                sluice_harness::find_tool("nginx")?;
                let filer = filer.as_ref().map_err(|e| StartError::Missing(e.clone()))?;
                let front = start_nginx_cache(*filer, library, &work.join("nginx"))?;
                Ok(Rig { sluices: vec![], front: Some(front) })
            }
        }
    }

    fn edge_row(
        &self,
        server: &ServerSpec,
        point: &Point,
        rig: &Rig,
        library: &Library,
        store: &Store,
    ) -> Row {
        let mut row = empty_row(server, point, &Placement { server: vec![], load: vec![] });
        row.server_command = rig.command_line();
        let sweep = self.experiment.sweep_of(point);
        let (config, command) =
            match edge_load(sweep, point, &rig.base_url(), library, self.load_duration(point)) {
                Ok(c) => c,
                Err(e) => {
                    row.outcome = RowOutcome::Failed { reason: e };
                    return row;
                }
            };
        row.load_command = command;
        let weed = store.weed.as_ref().ok();
        let snapshot = || Snapshot {
            cpu: rig.cpu_seconds(),
            origin: weed.and_then(settled_origin_requests),
            cache: rig.cache_counters(),
        };
        let before = snapshot();
        let report = sluice_load::run(&config, &mut sluice_load::NoObserver);
        let after = snapshot();
        let cpu = after.cpu - before.cpu;
        row.outcome = match report {
            Ok(report) => measured(report, None, cpu, None),
            Err(e) => RowOutcome::Failed { reason: format!("load: {e}") },
        };
        if let RowOutcome::Measured { measurement: Measurement::Http { figures, .. } } = &mut row.outcome {
            let cache = match (before.cache, after.cache) {
                (Some(b), Some(a)) if !rig.sluices.is_empty() => Some((a.0 - b.0, a.1 - b.1, a.2 - b.2)),
                _ => None,
            };
            figures.origin = match (before.origin, after.origin) {
                (Some(b), Some(a)) => Some(OriginFigures {
                    requests: a - b,
                    bytes: cache.map(|c| c.2),
                    hits: cache.map(|c| c.0),
                    misses: cache.map(|c| c.1),
                }),
                _ => None,
            };
        }
        row
    }

    fn load_duration(&self, point: &Point) -> Duration {
        super::point_duration(self.experiment, Some(point), self.options.quick)
    }
}

/// The load of one edge row: every file once (a cold pass) or the row's duration of whole files
/// or mid-file ranges, round robin over the library; and the `sluice load` command doing it.
fn edge_load(
    sweep: &Sweep,
    point: &Point,
    base_url: &str,
    library: &Library,
    duration: Duration,
) -> Result<(LoadConfig, String), String> {
    let vus = point.vus.unwrap_or(1);
    let mut args = HttpArgs {
        urls: library.names.iter().map(|n| format!("{base_url}/{n}")).collect(),
        vus: Some(vus),
        expect_status: Some(200),
        timeout: Some(Duration::from_secs(30)),
        connections: Some(ConnectionMode::KeepAlive),
        ..HttpArgs::default()
    };
    if sweep.once {
        args.requests = Some(library.names.len() as u64);
        // Each generator thread goes round the targets on its own: one thread, so the pass
        // reads every file once rather than the first files once per thread.
        args.threads = Some(1);
    } else {
        args.duration = Some(duration);
    }
    if let Some(len) = sweep.range_bytes {
        let start = (library.file_size / 2).min(library.file_size.saturating_sub(len));
        args.headers = vec![format!("Range: bytes={start}-{}", start + len.min(library.file_size) - 1)];
        args.expect_status = Some(206);
    }
    let mut c = args.load_config(None).map_err(|e| e.to_string())?;
    c.stop = Some(crate::stop::flag());
    // The library's URLs shown as the first and the last.
    let last = args.urls.last().cloned().unwrap_or_default();
    let first = std::mem::take(&mut args.urls).into_iter().next().unwrap_or_default();
    let command = format!("{} {first} … {last}", args.command_line());
    Ok((c, command))
}

/// `sluice upload` of the library's directory into the bucket, straight to SeaweedFS.
fn upload_library(library: &Library, endpoint: &str) -> Result<(), String> {
    let s3 = S3Config { endpoint: Some(endpoint.to_string()), ..S3Config::default() };
    let destination = Destination::parse(
        &format!("s3://{BUCKET}/{PREFIX}"),
        None,
        s3,
        GzipPolicy { mode: GzipMode::Never, ..GzipPolicy::default() },
    )?;
    let config = UploadConfig {
        destination,
        source: Source::Paths(vec![library.dir.clone()]),
        concurrency: 4,
        retries: 3,
        timeout: Duration::from_secs(15),
        stop: Some(crate::stop::flag()),
    };
    // A SeaweedFS just started may refuse writes until its volumes are allocated: a few tries.
    let mut last = String::new();
    for _ in 0..3 {
        let report = run_upload(&config, &UploadProgress::default())?;
        if report.objects_ok as usize == library.names.len() {
            return Ok(());
        }
        last = format!(
            "{} of {} objects, failures {:?}",
            report.objects_ok,
            library.names.len(),
            report.failures
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    Err(format!("uploading the library: {last}"))
}

/// HAProxy running deploy/haproxy.cfg as shipped in front of `edges` (two), once it sees both
/// edges' HTTP up.
fn start_haproxy(edges: &[RunningServer], work: &Path) -> Result<RunningServer, StartError> {
    // RTSP is not served here; its frontend still needs addresses, free ones no one answers on.
    let edge = |s: &RunningServer| -> Result<Edge, StartError> {
        Ok(Edge { http: s.addr(), rtsp: free_addr()?, admin_port: s.admin_port.unwrap_or(0) })
    };
    let front = Haproxy::start(edge(&edges[0])?, edge(&edges[1])?, work, |_| {})?;
    front.wait_up(&[("edges_http", "edge-a"), ("edges_http", "edge-b")], Duration::from_secs(10))?;
    let port = front.http.port();
    Ok(RunningServer::adopt(front.into_process(), port))
}

/// nginx as a caching proxy in front of SeaweedFS's filer (through toxiproxy): `proxy_cache`
/// with `slice 1m` and `proxy_cache_lock`, a cache twice the library.
fn start_nginx_cache(
    origin: std::net::SocketAddr,
    library: &Library,
    work: &Path,
) -> Result<RunningServer, StartError> {
    let failed = |what: &str, e: std::io::Error| StartError::Failed(format!("{what}: {e}"));
    if !sluice_harness::nginx::has_slice_module() {
        return Err(StartError::Missing("this nginx has no slice module (--with-http_slice_module)".into()));
    }
    std::fs::create_dir_all(work.join("cache")).map_err(|e| failed("creating the cache directory", e))?;
    let port = free_port().map_err(|e| failed("finding a free port", e))?;
    let conf = nginx_cache_config(port, origin, &work.join("cache"), 2 * library.bytes());
    let nginx = Nginx::start(&conf, port, work, |_| {})?;
    Ok(RunningServer::adopt(nginx.into_process(), port))
}

fn nginx_cache_config(port: u16, origin: std::net::SocketAddr, cache: &Path, max_size: u64) -> String {
    format!(
        "worker_processes 1;\ndaemon off;\npid nginx.pid;\nevents {{ worker_connections 4096; }}\n\
http {{\n  access_log off;\n  sendfile on;\n  keepalive_requests 100000;\n\
  proxy_cache_path {cache} levels=1:2 keys_zone=edge:16m max_size={max_size} inactive=1h use_temp_path=off;\n\
  upstream origin {{ server {origin}; keepalive 32; }}\n\
  server {{\n    listen 127.0.0.1:{port};\n    location / {{\n\
      slice 1m;\n      proxy_cache edge;\n      proxy_cache_key $uri$slice_range;\n\
      proxy_set_header Range $slice_range;\n      proxy_cache_valid 200 206 1h;\n\
      proxy_cache_lock on;\n      proxy_cache_lock_timeout 30s;\n\
      proxy_http_version 1.1;\n      proxy_set_header Connection \"\";\n\
      proxy_pass http://origin/buckets/{BUCKET}/{PREFIX}/;\n    }}\n  }}\n}}\n",
        cache = cache.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_requests_count_the_bucket_and_filer_reads() {
        let text = "SeaweedFS_s3_request_total{bucket=\"e7-edge\",code=\"206\",type=\"GET\"} 3\n\
SeaweedFS_s3_request_total{bucket=\"other\",code=\"206\",type=\"GET\"} 7\n\
SeaweedFS_filer_request_total{type=\"GET\"} 2\n\
SeaweedFS_filer_request_total{type=\"POST\"} 9\n";
        assert_eq!(origin_requests(text), 5.0);
        let counter = |text: &str, series: &str| Scrape::parse(text).get(series).unwrap_or(0.0);
        assert_eq!(counter("a 1\nb{x=\"y\"} 2.5\n", "b{x=\"y\"}"), 2.5);
        assert_eq!(counter("a 1\n", "b"), 0.0);
    }

    #[test]
    fn the_cache_config_slices_and_locks() {
        let c = nginx_cache_config(8080, "127.0.0.1:9".parse().unwrap(), Path::new("/tmp/c"), 1 << 20);
        for want in ["slice 1m;", "proxy_cache_lock on;", "$uri$slice_range", "listen 127.0.0.1:8080;"] {
            assert!(c.contains(want), "{want} in {c}");
        }
    }
}
