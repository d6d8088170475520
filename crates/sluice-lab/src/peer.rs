//! The processes a row runs against: `sluice serve` with the row's arguments (and an RTSP port
//! when the row streams), nginx with a generated configuration, GStreamer's RTSP server
//! (scripts/gst-rtsp-server.py, compiled into the binary and run by a python3 that has
//! GStreamer's bindings), and iperf3 for a loopback reference. Each starts in its own process
//! group, pinned to the server's CPUs, with its output in a log file of the row's work directory;
//! it is stopped by that group id, never by name. Every port is picked free on 127.0.0.1 for the
//! row, so no server ever takes a default one. This module also reads what a server reports about
//! itself (sluice's `/metrics`). It generates no load (`runner`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::budget::ServerCgroup;
use crate::experiment::{NginxMode, Point, ServerKind, ServerSpec};
use crate::machine::{group_cpu_seconds, CpuSet};
use crate::results::RtspServerCounters;

/// GStreamer's RTSP launcher (the same file the `sluice load rtsp` tests run).
const GST_RTSP_SERVER: &str = include_str!("../../../scripts/gst-rtsp-server.py");

/// The environment variable naming the python3 to run GStreamer's RTSP server with (default: the
/// system's `/usr/bin/python3`, then `python3` on `PATH`).
pub const PYTHON_ENV: &str = "SLUICE_LAB_PYTHON";

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
    child: Child,
    /// Its port on 127.0.0.1 (HTTP; the RTSP port for GStreamer).
    pub port: u16,
    /// Its RTSP port on 127.0.0.1, when the row streams.
    pub rtsp_port: Option<u16>,
    /// sluice's admin port on 127.0.0.1 (`/metrics`); `None` for peers.
    pub admin_port: Option<u16>,
    /// Its command line.
    pub command_line: String,
    kind: ServerKind,
    log: PathBuf,
}

/// A free TCP port on 127.0.0.1 (free when asked; the server binds it right after).
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// Whether `program` is on `PATH` (or is a path that exists).
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Path::new(program).exists().then(|| PathBuf::from(program));
    }
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}

/// Process groups of the servers running now. They are not in the terminal's foreground group,
/// so a Ctrl-C reaches only the lab; [`stop_all`] is how the lab takes them down with it.
static LIVE_GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

fn live_groups() -> std::sync::MutexGuard<'static, Vec<u32>> {
    LIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Set (under [`LIVE_GROUPS`]' lock) once [`stop_all`] has run: no server may start after it,
/// or one started while the lab exits would outlive it.
static STOPPING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Kills every server process group the lab has running and lets no other start (for the
/// binary's signal handler).
pub fn stop_all() {
    let mut groups = live_groups();
    STOPPING.store(true, std::sync::atomic::Ordering::SeqCst);
    for pgid in groups.drain(..) {
        // SAFETY: signalling process groups this process created and has not reaped.
        unsafe { libc::kill(-(pgid as libc::pid_t), libc::SIGKILL) };
    }
}

/// Starts `program args` in its own process group on `cpus` (and in the CPU cgroup whose
/// `cgroup.procs` is `cgroup`, when given), output to `log`.
fn spawn(
    program: &Path,
    args: &[String],
    cpus: &[usize],
    cgroup: Option<&ServerCgroup>,
    log: &Path,
) -> std::io::Result<Child> {
    spawn_with(program, args, &[], cpus, cgroup, log)
}

/// [`spawn`] with `env` added to the environment.
fn spawn_with(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    cpus: &[usize],
    cgroup: Option<&ServerCgroup>,
    log: &Path,
) -> std::io::Result<Child> {
    let out = std::fs::File::create(log)?;
    let mut cmd = Command::new(program);
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    cmd.args(args).stdin(Stdio::null()).stdout(out.try_clone()?).stderr(out).process_group(0);
    let set = (!cpus.is_empty()).then(|| CpuSet::new(cpus));
    let procs = cgroup.map(ServerCgroup::procs_fd);
    if set.is_some() || procs.is_some() {
        // SAFETY: the closure runs between fork and exec and only makes two system calls, on a
        // set built and a descriptor opened before the fork.
        unsafe {
            cmd.pre_exec(move || {
                if let Some(set) = &set {
                    set.apply()?;
                }
                if let Some(fd) = procs {
                    crate::budget::join(fd)?;
                }
                Ok(())
            });
        }
    }
    // Spawned and registered under one lock, so a signal's `stop_all` sees every server that
    // started, and none starts after it.
    let mut groups = live_groups();
    if STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(std::io::Error::other("the lab is stopping"));
    }
    let child = cmd.spawn()?;
    groups.push(child.id());
    Ok(child)
}

fn command_line(program: &Path, args: &[String], cpus: &[usize]) -> String {
    let mut s = String::new();
    if !cpus.is_empty() {
        let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
        let _ = write!(s, "taskset -c {} ", list.join(","));
    }
    s.push_str(&program.display().to_string());
    for a in args {
        s.push(' ');
        s.push_str(a);
    }
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
        let port = free_port().map_err(|e| failed("finding a free port", e))?;
        let rtsp_port = match (&ctx.rtsp_file, spec.kind) {
            (None, _) => None,
            (Some(_), ServerKind::Gstreamer) => Some(port),
            (Some(_), _) => Some(free_port().map_err(|e| failed("finding a free RTSP port", e))?),
        };
        let admin_port = match spec.kind {
            ServerKind::Sluice => Some(free_port().map_err(|e| failed("finding a free admin port", e))?),
            _ => None,
        };
        let (program, args) = match spec.kind {
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
                (ctx.sluice_exe.clone(), args)
            }
            ServerKind::S3 => {
                return Err(StartError::Failed("uploads straight to S3 run no server".into()));
            }
            ServerKind::Gstreamer => {
                let python =
                    gstreamer_python().as_ref().map_err(|e| StartError::Missing(e.clone()))?.0.clone();
                let file = ctx.rtsp_file.as_ref().ok_or_else(|| {
                    StartError::Failed("GStreamer's RTSP server needs a file to stream".into())
                })?;
                let script = work.join("gst-rtsp-server.py");
                std::fs::write(&script, GST_RTSP_SERVER).map_err(|e| failed("writing the launcher", e))?;
                let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                let mut args = vec![script.display().to_string(), file.display().to_string()];
                // Unshared media: every viewer's PLAY starts its own pipeline at the first frame
                // (shared media seeks the one pipeline back for every PLAY with a Range; see the script).
                args.extend(["--port".into(), port.to_string(), "--name".into(), name, "--no-shared".into()]);
                args.extend(spec.args.iter().cloned());
                (python, args)
            }
            ServerKind::Nginx => {
                let program = find_program("nginx").ok_or_else(|| {
                    StartError::Missing("nginx is not installed (scripts/test installs nginx-light)".into())
                })?;
                let conf = work.join("nginx.conf");
                std::fs::write(&conf, nginx_config(spec, point, &ctx.media_root, work, port))
                    .map_err(|e| failed("writing nginx.conf", e))?;
                let args = vec![
                    "-p".into(),
                    work.display().to_string(),
                    "-c".into(),
                    conf.display().to_string(),
                    "-e".into(),
                    work.join("error.log").display().to_string(),
                ];
                (program, args)
            }
        };
        let log = work.join("server.log");
        let child =
            spawn(&program, &args, cpus, cgroup, &log).map_err(|e| failed("starting the server", e))?;
        let server = RunningServer {
            child,
            port,
            rtsp_port,
            admin_port,
            command_line: command_line(&program, &args, cpus),
            kind: spec.kind,
            log,
        };
        server.ready()
    }

    /// The server once it answers, or why it did not within 15 s (stopped, with its log's tail).
    fn ready(mut self) -> Result<RunningServer, StartError> {
        if let Err(reason) = self.wait_ready(Duration::from_secs(15)) {
            let tail = self.log_tail();
            self.stop();
            return Err(StartError::Failed(format!("{reason}{tail}")));
        }
        Ok(self)
    }

    /// Waits until the server accepts on its port (and, for sluice, answers `/metrics`).
    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let end = Instant::now() + limit;
        while Instant::now() < end {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("the server exited at start-up ({status})"));
            }
            let rtsp_up =
                || self.rtsp_port.is_none_or(|p| TcpStream::connect((Ipv4Addr::LOCALHOST, p)).is_ok());
            let answered = match self.kind {
                ServerKind::Sluice => self.metrics().is_some() && rtsp_up(),
                ServerKind::Nginx | ServerKind::Gstreamer | ServerKind::S3 => {
                    TcpStream::connect(self.addr()).is_ok()
                }
            };
            if answered {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err(format!("the server did not answer on port {} within {limit:?}", self.port))
    }

    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().rev().take(5).collect();
        if lines.is_empty() {
            String::new()
        } else {
            format!(": {}", lines.into_iter().rev().collect::<Vec<_>>().join(" | "))
        }
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
        if self.kind != ServerKind::Sluice {
            return None;
        }
        let text = http_get(self.admin_addr()?, "/metrics").ok()?;
        Some(RtspServerCounters::parse(&text))
    }

    /// The server's process id (its process group's leader).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// CPU seconds of the server's whole process group so far.
    pub fn cpu_seconds(&self) -> f64 {
        group_cpu_seconds(self.child.id())
    }

    /// sluice's system-call counters by kind from `/metrics`; `None` for peers or when it does
    /// not answer.
    pub fn metrics(&self) -> Option<BTreeMap<String, f64>> {
        if self.kind != ServerKind::Sluice {
            return None;
        }
        let text = http_get(self.admin_addr()?, "/metrics").ok()?;
        Some(syscall_counters(&text))
    }

    /// sluice's whole `/metrics` text; `None` for peers or when it does not answer.
    pub fn metrics_text(&self) -> Option<String> {
        if self.kind != ServerKind::Sluice {
            return None;
        }
        http_get(self.admin_addr()?, "/metrics").ok()
    }

    /// A peer of an edge row (HAProxy, nginx as a caching proxy): `program args` with `env` in
    /// its own process group, output to `work/server.log`, ready once it accepts on `port`.
    pub fn start_program(
        program: &Path,
        args: &[String],
        env: &[(String, String)],
        port: u16,
        work: &Path,
    ) -> Result<RunningServer, StartError> {
        let failed = |what: &str, e: std::io::Error| StartError::Failed(format!("{what}: {e}"));
        std::fs::create_dir_all(work).map_err(|e| failed("creating the work directory", e))?;
        let log = work.join("server.log");
        let child = spawn_with(program, args, env, &[], None, &log).map_err(|e| failed("starting it", e))?;
        let server = RunningServer {
            child,
            port,
            rtsp_port: None,
            admin_port: None,
            command_line: command_line(program, args, &[]),
            kind: ServerKind::Nginx,
            log,
        };
        server.ready()
    }

    /// Stops the server's process group: SIGTERM, then SIGKILL after 5 s.
    pub fn stop(&mut self) {
        stop_group(&mut self.child, Duration::from_secs(5));
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Signals `child`'s process group to stop and reaps it; SIGKILL once `grace` has passed.
fn stop_group(child: &mut Child, grace: Duration) {
    live_groups().retain(|&g| g != child.id());
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    let pgid = child.id() as libc::pid_t;
    // SAFETY: signalling a process group we created (process_group(0) made the child its leader).
    unsafe { libc::kill(-pgid, libc::SIGTERM) };
    let end = Instant::now() + grace;
    while Instant::now() < end {
        if matches!(child.try_wait(), Ok(Some(_))) {
            // nginx's workers leave with their master; make sure nothing of the group lingers.
            // SAFETY: as above.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // SAFETY: as above.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
    let _ = child.wait();
}

/// `sluice_syscalls_total{kind="read"} 12` lines as `read → 12`.
pub fn syscall_counters(metrics: &str) -> BTreeMap<String, f64> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("sluice_syscalls_total{kind=\""))
        .filter_map(|l| {
            let (kind, rest) = l.split_once("\"}")?;
            Some((kind.to_string(), rest.trim().parse().ok()?))
        })
        .collect()
}

/// The python3 that can run GStreamer's RTSP server, and GStreamer's version; or why there is
/// none (the row is then skipped). Looked up once per process.
pub fn gstreamer_python() -> &'static Result<(PathBuf, String), String> {
    static FOUND: OnceLock<Result<(PathBuf, String), String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let candidates: Vec<PathBuf> = match std::env::var_os(PYTHON_ENV) {
            Some(p) => vec![PathBuf::from(p)],
            None => ["/usr/bin/python3", "python3"].iter().filter_map(|p| find_program(p)).collect(),
        };
        const CHECK: &str = "import gi\ngi.require_version('Gst', '1.0')\ngi.require_version('GstPbutils', '1.0')\ngi.require_version('GstRtspServer', '1.0')\nfrom gi.repository import Gst, GstPbutils, GstRtspServer\nGst.init(None)\nmissing = [e for e in ('qtdemux', 'h264parse', 'rtph264pay', 'aacparse', 'rtpmp4gpay') if Gst.ElementFactory.find(e) is None]\nif missing: raise SystemExit('missing GStreamer elements: ' + ', '.join(missing))\nprint(Gst.version_string())\n";
        let mut why = Vec::new();
        for python in candidates {
            match Command::new(&python).args(["-c", CHECK]).stdin(Stdio::null()).output() {
                Ok(out) if out.status.success() => {
                    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
                    return Ok((python, version));
                }
                Ok(out) => {
                    let err = String::from_utf8_lossy(&out.stderr);
                    why.push(format!("{}: {}", python.display(), err.trim().lines().last().unwrap_or("failed")));
                }
                Err(e) => why.push(format!("{}: {e}", python.display())),
            }
        }
        let why = if why.is_empty() { "no python3 found".to_string() } else { why.join("; ") };
        Err(format!(
            "GStreamer's Python bindings are missing ({why}); scripts/test installs python3-gi, gir1.2-gst-rtsp-server-1.0 and gstreamer1.0-plugins-base/-good/-bad"
        ))
    })
}

/// A one-off `GET` with `Connection: close`; returns the body.
pub fn http_get(addr: SocketAddr, path: &str) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !head.starts_with("HTTP/1.1 200") {
        return Err(std::io::Error::other(format!("{path}: {}", head.lines().next().unwrap_or(""))));
    }
    Ok(body.to_string())
}

/// nginx's configuration for a row: as many workers as sluice gets, access log off, long
/// keep-alive, a backlog as deep as sluice's, temporary files in the row's work directory.
fn nginx_config(spec: &ServerSpec, point: &Point, media_root: &Path, work: &Path, port: u16) -> String {
    let work = work.display();
    // SAFETY: geteuid has no preconditions.
    let user = if unsafe { libc::geteuid() } == 0 { "user root;\n" } else { "" };
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
    let program = find_program("iperf3")
        .ok_or_else(|| StartError::Missing("iperf3 is not installed (scripts/test installs it)".into()))?;
    let failed = |m: String| StartError::Failed(m);
    std::fs::create_dir_all(work).map_err(|e| failed(format!("creating {}: {e}", work.display())))?;
    let port = free_port().map_err(|e| failed(format!("finding a free port: {e}")))?;
    let server_args: Vec<String> =
        vec!["-s".into(), "-B".into(), "127.0.0.1".into(), "-p".into(), port.to_string()];
    let mut server = spawn(&program, &server_args, server_cpus, None, &work.join("iperf3-server.log"))
        .map_err(|e| failed(format!("starting iperf3 -s: {e}")))?;
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
    let command = format!(
        "{} & {}",
        command_line(&program, &server_args, server_cpus),
        command_line(&program, &client_args, client_cpus)
    );
    // The client starts once the server listens: a probe connection would count as the
    // server's test, so the kernel's socket table is read instead (a busy machine can take
    // seconds to get iperf3 -s that far). A run that still ends in an error (iperf3 can exit 0
    // with `"error"` in its JSON, e.g. "unable to connect") is retried.
    let listen_deadline = Instant::now() + Duration::from_secs(10);
    while !tcp_listening(port) && Instant::now() < listen_deadline {
        if matches!(server.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut result = Err(failed("iperf3 did not run".into()));
    for _ in 0..20 {
        let log = work.join("iperf3-client.json");
        let status = spawn(&program, &client_args, client_cpus, None, &log).and_then(|mut c| {
            let status = c.wait();
            live_groups().retain(|&g| g != c.id());
            status
        });
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let excerpt = || text.chars().take(200).collect::<String>();
        result = match (&status, iperf3_outcome(&text)) {
            (Ok(s), Ok(mb)) if s.success() => Ok((mb, command.clone())),
            (Ok(s), Err(why)) if s.success() => {
                Err(failed(format!("iperf3 printed no throughput ({why}): {}", excerpt())))
            }
            (other, _) => Err(failed(format!("iperf3 client: {other:?} {}", excerpt()))),
        };
        if result.is_ok() {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    stop_group(&mut server, Duration::from_secs(2));
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
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
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
        assert!(find_program("definitely-not-a-program-here").is_none());
    }
}
