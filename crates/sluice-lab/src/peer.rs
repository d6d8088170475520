//! The processes a row runs against: `sluice serve` with the row's arguments (and an RTSP port
//! when the row streams), nginx with a generated configuration, GStreamer's RTSP server, and
//! iperf3 for a loopback reference. Each is a harness process (sluice-harness: its own process
//! group, stopped by that group id, never by name), pinned to the server's CPUs, with its output
//! in a log file of the row's work directory. Every port is picked free on 127.0.0.1 for the
//! row, so no server ever takes a default one. This module also reads what a server reports about
//! itself (sluice's `/metrics`). It generates no load (`runner`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub use sluice_harness::gstreamer::python as gstreamer_python;
/// Kills every server the lab has running and lets no other start (for a signal handler).
pub use sluice_harness::process::stop_all;
use sluice_harness::{HarnessError, Process};
use sluice_proto::metrics_text::{names, Scrape};

use crate::budget::ServerCgroup;
use crate::experiment::{NginxMode, Point, ServerKind, ServerSpec};
use crate::machine::{group_cpu_seconds, CpuSet};
use crate::results::RtspServerCounters;

/// What every server of a run shares.
#[derive(Debug, Clone)]
pub struct ServerContext {
    /// The `sluice` binary to start.
    pub sluice_exe: PathBuf,
    /// The directory of files the static rows serve.
    pub media_root: PathBuf,
    /// Where each row gets its own work directory (configs, logs).
    pub work_dir: PathBuf,
    /// The file RTSP rows stream (a file of `media_root`); `None` for HTTP experiments.
    pub rtsp_file: Option<PathBuf>,
}

/// Why a server did not come up.
#[derive(Debug, Clone, PartialEq)]
pub enum StartError {
    /// Its program is not installed: the row is skipped.
    Missing(String),
    /// It is installed but did not start or answer: the row failed.
    Failed(String),
}

/// A server process serving on loopback.
#[derive(Debug)]
pub struct RunningServer {
    process: Process,
    /// Its port on 127.0.0.1 (HTTP; the RTSP port for GStreamer).
    pub port: u16,
    /// Its RTSP port on 127.0.0.1, when the row streams.
    pub rtsp_port: Option<u16>,
    /// sluice's admin port on 127.0.0.1 (`/metrics`); `None` for peers.
    pub admin_port: Option<u16>,
    /// Its command line.
    pub command_line: String,
    kind: ServerKind,
}

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it right after).
pub use sluice_harness::{free_port, free_ports};

impl From<HarnessError> for StartError {
    fn from(e: HarnessError) -> StartError {
        match e {
            HarnessError::ToolMissing { .. } => StartError::Missing(e.to_string()),
            _ => StartError::Failed(e.to_string()),
        }
    }
}

/// Pins `command` to `cpus` and puts it in the CPU cgroup whose `cgroup.procs` is `cgroup`,
/// when given (between fork and exec).
fn place(command: &mut Command, cpus: &[usize], cgroup: Option<&ServerCgroup>) {
    let set = (!cpus.is_empty()).then(|| CpuSet::new(cpus));
    let procs = cgroup.map(ServerCgroup::procs_fd);
    if set.is_some() || procs.is_some() {
        crate::sys::place_at_exec(command, set, procs);
    }
}

/// Starts `program args` as a harness process on `cpus` (and in `cgroup`), output to `log`.
fn spawn(
    program: &Path,
    args: &[String],
    cpus: &[usize],
    cgroup: Option<&ServerCgroup>,
    log: &Path,
) -> Result<Process, HarnessError> {
    let mut command = Command::new(program);
    command.args(args);
    place(&mut command, cpus, cgroup);
    let name = program
        .file_name()
        .map_or_else(|| program.display().to_string(), |n| n.to_string_lossy().into_owned());
    Process::spawn(&name, command, log)
}

/// A process's command line as a shell would run it on `cpus`.
fn pinned_command_line(command_line: &str, cpus: &[usize]) -> String {
    let mut s = String::new();
    if !cpus.is_empty() {
        let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
        let _ = write!(s, "taskset -c {} ", list.join(","));
    }
    s.push_str(command_line);
    s
}

impl RunningServer {
    /// Starts the server of `spec` for `point` in `work` (a fresh directory of its own), on
    /// `cpus` and in `cgroup` (its CPU budget) when given, and waits until it answers.
    pub fn start(
        spec: &ServerSpec,
        point: &Point,
        ctx: &ServerContext,
        work: &Path,
        cpus: &[usize],
        cgroup: Option<&ServerCgroup>,
    ) -> Result<RunningServer, StartError> {
        let failed = |what: &str, e: std::io::Error| StartError::Failed(format!("{what}: {e}"));
        std::fs::create_dir_all(work).map_err(|e| failed("creating the work directory", e))?;
        // Chosen together, so the HTTP, RTSP and admin listeners never get the same port.
        let [port, rtsp, admin] = free_ports::<3>().map_err(|e| failed("finding free ports", e))?;
        let rtsp_port = match (&ctx.rtsp_file, spec.kind) {
            (None, _) => None,
            (Some(_), ServerKind::Gstreamer) => Some(port),
            (Some(_), _) => Some(rtsp),
        };
        let admin_port = (spec.kind == ServerKind::Sluice).then_some(admin);
        let peer = |process: Process| RunningServer {
            command_line: pinned_command_line(process.command_line(), cpus),
            process,
            port,
            rtsp_port,
            admin_port,
            kind: spec.kind,
        };
        match spec.kind {
            ServerKind::Sluice => {
                // The lab measures /bench/ endpoints and reads counters from the admin listener.
                let admin = format!("127.0.0.1:{}", admin_port.unwrap_or(0));
                let mut args: Vec<String> = vec![
                    "serve".into(),
                    "--listen".into(),
                    format!("127.0.0.1:{port}"),
                    "--root".into(),
                    ctx.media_root.display().to_string(),
                    "--workers".into(),
                    point.workers.to_string(),
                    "--access-log".into(),
                    "false".into(),
                    "--log-level".into(),
                    "warn".into(),
                    "--bench".into(),
                    "--admin-listen".into(),
                    admin,
                ];
                // Never the default RTSP port, which would collide between servers started side
                // by side: a free port of the row's own when it streams (E5), else no RTSP at all
                // (E1–E4 measure HTTP).
                match rtsp_port {
                    Some(rtsp) => args.extend(["--rtsp-listen".into(), format!("127.0.0.1:{rtsp}")]),
                    None => args.push("--no-rtsp".into()),
                }
                args.extend(spec.args.iter().cloned());
                let process = spawn(&ctx.sluice_exe, &args, cpus, cgroup, &work.join("server.log"))?;
                peer(process).ready()
            }
            ServerKind::S3 => Err(StartError::Failed("uploads straight to S3 run no server".into())),
            ServerKind::Gstreamer => {
                let file = ctx.rtsp_file.as_ref().ok_or_else(|| {
                    StartError::Failed("GStreamer's RTSP server needs a file to stream".into())
                })?;
                let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                // Unshared media: every viewer's PLAY starts its own pipeline at the first frame
                // (shared media seeks the one pipeline back for every PLAY with a Range; see the script).
                let mut extra = vec!["--no-shared".to_string()];
                extra.extend(spec.args.iter().cloned());
                let gst =
                    sluice_harness::gstreamer::GstRtspServer::start(file, &name, port, &extra, work, |c| {
                        place(c, cpus, cgroup)
                    })?;
                Ok(peer(gst.into_process()))
            }
            ServerKind::Nginx => {
                let config = nginx_config(spec, point, &ctx.media_root, work, port);
                let nginx =
                    sluice_harness::nginx::Nginx::start(&config, port, work, |c| place(c, cpus, cgroup))?;
                Ok(peer(nginx.into_process()))
            }
        }
    }

    /// A peer of an edge row (HAProxy, nginx as a caching proxy) the harness started and found
    /// ready, serving on `port`.
    pub fn adopt(process: Process, port: u16) -> RunningServer {
        RunningServer {
            command_line: process.command_line().to_string(),
            process,
            port,
            rtsp_port: None,
            admin_port: None,
            kind: ServerKind::Nginx,
        }
    }

    /// The server once it answers, or why it did not within 15 s (stopped, with its log's tail).
    fn ready(mut self) -> Result<RunningServer, StartError> {
        let (addr, rtsp_port, admin) = (self.addr(), self.rtsp_port, self.admin_addr());
        let answered = |_: &Process| {
            let rtsp_up = rtsp_port.is_none_or(|p| TcpStream::connect((Ipv4Addr::LOCALHOST, p)).is_ok());
            match admin {
                Some(admin) => sluice_harness::http::get_ok_text(admin, "/metrics").is_ok() && rtsp_up,
                None => TcpStream::connect(addr).is_ok(),
            }
        };
        self.process.wait_ready(Duration::from_secs(15), answered)?;
        Ok(self)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// sluice's admin address (`/metrics`); `None` for peers.
    fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_port.map(|p| SocketAddr::from((Ipv4Addr::LOCALHOST, p)))
    }

    /// The server's base URL.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The URL of `file_name` on its RTSP port.
    pub fn rtsp_url(&self, file_name: &str) -> Option<String> {
        self.rtsp_port.map(|p| format!("rtsp://127.0.0.1:{p}/{file_name}"))
    }

    /// sluice's RTSP counters from `/metrics`; `None` for peers or when it does not answer.
    pub fn rtsp_counters(&self) -> Option<RtspServerCounters> {
        Some(RtspServerCounters::parse(&self.metrics_text()?))
    }

    /// The server's process id (its process group's leader).
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// CPU seconds of the server's whole process group so far.
    pub fn cpu_seconds(&self) -> f64 {
        group_cpu_seconds(self.process.pid())
    }

    /// sluice's system-call counters by kind from `/metrics`; `None` for peers or when it does
    /// not answer.
    pub fn metrics(&self) -> Option<BTreeMap<String, f64>> {
        Some(syscall_counters(&self.metrics_text()?))
    }

    /// sluice's whole `/metrics` text; `None` for peers or when it does not answer.
    pub fn metrics_text(&self) -> Option<String> {
        if self.kind != ServerKind::Sluice {
            return None;
        }
        sluice_harness::http::get_ok_text(self.admin_addr()?, "/metrics").ok()
    }

    /// Stops the server's process group: SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self) {
        self.process.stop(Duration::from_secs(5));
    }
}

/// `sluice_syscalls_total{kind="read"} 12` lines as `read → 12`.
pub fn syscall_counters(metrics: &str) -> BTreeMap<String, f64> {
    Scrape::parse(metrics).by_label(names::SYSCALLS_TOTAL, "kind").into_iter().collect()
}

/// nginx's configuration for a row: as many workers as sluice gets, access log off, long
/// keep-alive, a backlog as deep as sluice's, temporary files in the row's work directory.
fn nginx_config(spec: &ServerSpec, point: &Point, media_root: &Path, work: &Path, port: u16) -> String {
    let work = work.display();
    // SAFETY: geteuid has no preconditions.
    let user = if crate::sys::is_root() { "user root;\n" } else { "" };
    let sendfile = if spec.sendfile.unwrap_or(true) { "on" } else { "off" };
    let content = match spec.nginx.unwrap_or(NginxMode::Static) {
        NginxMode::Static => format!("        root {};\n", media_root.display()),
        NginxMode::Return200 => {
            "        location = /bench/hello {\n            default_type text/plain;\n            return 200 \"Hello, World!\";\n        }\n"
                .to_string()
        }
    };
    format!(
        "{user}daemon off;
worker_processes {workers};
worker_rlimit_nofile 65536;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 65536; }}
http {{
    access_log off;
    default_type application/octet-stream;
    sendfile {sendfile};
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    client_body_temp_path {work}/body;
    proxy_temp_path {work}/proxy;
    fastcgi_temp_path {work}/fastcgi;
    uwsgi_temp_path {work}/uwsgi;
    scgi_temp_path {work}/scgi;
    server {{
        listen 127.0.0.1:{port} reuseport backlog=4096;
{content}    }}
}}
",
        workers = point.workers,
    )
}

/// iperf3's loopback throughput in MB/s (10^6 bytes) over `duration`, server on `server_cpus`
/// and client on `client_cpus`.
pub fn iperf3_loopback(
    work: &Path,
    duration: Duration,
    server_cpus: &[usize],
    client_cpus: &[usize],
) -> Result<(f64, String), StartError> {
    let program = sluice_harness::find_tool("iperf3")?;
    let failed = |m: String| StartError::Failed(m);
    std::fs::create_dir_all(work).map_err(|e| failed(format!("creating {}: {e}", work.display())))?;
    let port = free_port().map_err(|e| failed(format!("finding a free port: {e}")))?;
    let server_args: Vec<String> =
        vec!["-s".into(), "-B".into(), "127.0.0.1".into(), "-p".into(), port.to_string()];
    let mut server = spawn(&program, &server_args, server_cpus, None, &work.join("iperf3-server.log"))?;
    let secs = duration.as_secs().max(1);
    let client_args: Vec<String> = vec![
        "-c".into(),
        "127.0.0.1".into(),
        "-p".into(),
        port.to_string(),
        "-t".into(),
        secs.to_string(),
        "-J".into(),
    ];
    let client_line = |p: &Process| pinned_command_line(p.command_line(), client_cpus);
    let server_line = pinned_command_line(server.command_line(), server_cpus);
    // The client starts once the server listens: a probe connection would count as the
    // server's test, so the kernel's socket table is read instead (a busy machine can take
    // seconds to get iperf3 -s that far). A run that still ends in an error (iperf3 can exit 0
    // with `"error"` in its JSON, e.g. "unable to connect") is retried.
    let listen_deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_listening(port) && Instant::now() < listen_deadline {
        if server.exit_status().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut result = Err(failed("iperf3 did not run".into()));
    for _ in 0..20 {
        let log = work.join("iperf3-client.json");
        let run = spawn(&program, &client_args, client_cpus, None, &log).map(|mut c| {
            let status = c.wait_exit(Duration::from_secs(secs + 30));
            (status, client_line(&c))
        });
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let excerpt = || text.chars().take(200).collect::<String>();
        result = match (&run, iperf3_outcome(&text)) {
            (Ok((Some(s), client)), Ok(mb)) if s.success() => Ok((mb, format!("{server_line} & {client}"))),
            (Ok((Some(s), _)), Err(why)) if s.success() => {
                Err(failed(format!("iperf3 printed no throughput ({why}): {}", excerpt())))
            }
            (Ok((status, _)), _) => Err(failed(format!("iperf3 client: {status:?} {}", excerpt()))),
            (Err(e), _) => Err(failed(format!("iperf3 client: {e} {}", excerpt()))),
        };
        if result.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    server.stop(Duration::from_secs(2));
    result
}

/// The throughput of an iperf3 client's JSON in MB/s, or why it has none (its `"error"`, or no
/// figure at all).
fn iperf3_outcome(json: &str) -> Result<f64, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    if let Some(error) = v.get("error") {
        return Err(format!("error: {error}"));
    }
    match v.pointer("/end/sum_received/bits_per_second").and_then(|b| b.as_f64()) {
        Some(bps) if bps > 0.0 => Ok(bps / 8.0 / 1e6),
        _ => Err("no end.sum_received.bits_per_second".into()),
    }
}

/// Whether some socket listens on TCP `port` of this network namespace (`/proc/net/tcp`,
/// `/proc/net/tcp6`: state `0A`), found without connecting to it.
fn tcp_listening(port: u16) -> bool {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .any(|f| std::fs::read_to_string(f).is_ok_and(|t| listening_in(&t, port)))
}

fn listening_in(table: &str, port: u16) -> bool {
    let suffix = format!(":{port:04X}");
    table.lines().skip(1).any(|l| {
        let mut fields = l.split_whitespace();
        let local = fields.nth(1).unwrap_or("");
        let state = fields.nth(1).unwrap_or("");
        local.ends_with(&suffix) && state == "0A"
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_counters_are_read_from_metrics_text() {
        let text = "# HELP x\nsluice_syscalls_total{kind=\"read\"} 12\nsluice_syscalls_total{kind=\"io_uring_enter\"} 3\nsluice_requests_total 5\n";
        let m = syscall_counters(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m["read"], 12.0);
        assert_eq!(m["io_uring_enter"], 3.0);
    }

    #[test]
    fn iperf3_json_gives_megabytes_per_second_or_its_error() {
        assert_eq!(iperf3_outcome(r#"{"end":{"sum_received":{"bits_per_second":8e9}}}"#), Ok(1000.0));
        // iperf3 can exit 0 with an error and an empty result beside it.
        let err = iperf3_outcome(
            r#"{"start":{},"end":{"sum_received":{"bits_per_second":0}},"error":"unable to connect"}"#,
        )
        .unwrap_err();
        assert!(err.contains("unable to connect"), "{err}");
        assert!(iperf3_outcome("").is_err());
    }

    #[test]
    fn a_listening_port_is_found_in_the_socket_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000\n   1: 0100007F:1F91 0100007F:9C40 01 00000000:00000000\n";
        assert!(listening_in(table, 8080));
        assert!(!listening_in(table, 8081), "established, not listening");
        let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        assert!(tcp_listening(l.local_addr().unwrap().port()));
    }

    #[test]
    fn nginx_config_follows_the_row() {
        let spec = ServerSpec {
            name: "n".into(),
            kind: ServerKind::Nginx,
            args: vec![],
            nginx: Some(NginxMode::Static),
            sendfile: Some(false),
            gzip: None,
            edge: None,
        };
        let point = Point {
            sweep: "s".into(),
            x: crate::experiment::Param::Chunk,
            chunk: Some(1),
            vus: Some(1),
            workers: 2,
            profile: None,
            clients: None,
            transport: None,
            udp_gro: None,
            payload: None,
            budget: false,
        };
        let c = nginx_config(&spec, &point, Path::new("/m"), Path::new("/w"), 8080);
        assert!(c.contains("sendfile off;") && c.contains("worker_processes 2;") && c.contains("root /m;"));
        assert!(c.contains("listen 127.0.0.1:8080"));
    }
}
