//! The `sluice serve` process a test starts: free ports for every listener, its log in a file,
//! stopped by its own pid (never by name). The process itself is sluice-harness's (own process
//! group, dies with the test binary); what is sluice's here is its flags and its log lines.

#![allow(dead_code)]

use super::*;

use sluice_harness::Process;

/// A running `sluice serve`, stopped (SIGTERM, then SIGKILL) and reaped on drop.
pub struct Server {
    process: Process,
    pid: i32,
    addr: SocketAddr,
}

impl Server {
    /// Starts `sluice serve --listen 127.0.0.1:0 --log-level info` plus `engine` and `extra`
    /// arguments, and waits (at most 10 s) for its start-up line.
    pub fn start(engine: &[&str], extra: &[&str]) -> Server {
        Server::start_with(engine, extra, |_| {})
    }

    /// [`Server::start`], letting `configure` adjust the command first (resource limits, say).
    pub fn start_with(engine: &[&str], extra: &[&str], configure: impl FnOnce(&mut Command)) -> Server {
        let mut args: Vec<&str> = vec!["serve", "--listen", "127.0.0.1:0"];
        // Tests run side by side: RTSP gets a free port too, unless the test decides.
        let rtsp_flags = ["--rtsp-listen", "--no-rtsp"];
        if !engine.iter().chain(extra).any(|a| rtsp_flags.contains(a)) {
            args.extend(["--rtsp-listen", "127.0.0.1:0"]);
        }
        if !engine.contains(&"--log-level") && !extra.contains(&"--log-level") {
            args.extend(["--log-level", "info"]);
        }
        // The admin listener gets a free port too; /bench/ is on unless the test says otherwise.
        let admin_flags = ["--admin-listen", "--no-admin"];
        if !engine.iter().chain(extra).any(|a| admin_flags.contains(a)) {
            args.extend(["--admin-listen", "127.0.0.1:0"]);
        }
        if !engine.iter().chain(extra).any(|a| *a == "--no-bench" || *a == "--bench") {
            args.push("--bench");
        }
        args.extend_from_slice(engine);
        args.extend_from_slice(extra);
        let mut command = Command::new(env!("CARGO_BIN_EXE_sluice"));
        command.args(&args).env_remove("SLUICE_CONFIG").env_remove("RUST_LOG");
        configure(&mut command);
        let process = Process::spawn_with_temp_log("sluice", command)
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", env!("CARGO_BIN_EXE_sluice")));
        let pid = process.pid() as i32;
        let mut server = Server { process, pid, addr: SocketAddr::from(([127, 0, 0, 1], 0)) };
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            // The media listener's line (`engine=...`): http://, or https:// when it serves HTTPS only.
            let main = |l: &String| {
                parse_listen_line(l)
                    .or_else(|| l.contains(" engine=").then(|| parse_scheme_line(l, "https")).flatten())
            };
            if let Some(addr) = server.logs().iter().find_map(main) {
                server.addr = addr;
                return server;
            }
            if let Some(status) = server.process.exit_status() {
                panic!(
                    "sluice {args:?} exited with {status} before listening; its log:\n{}",
                    server.log_text()
                );
            }
            if Instant::now() >= deadline {
                panic!(
                    "sluice {args:?} did not print its `listening on` line within {IO_TIMEOUT:?}; its log so far:\n{}",
                    server.log_text()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Starts a server on `engine` serving `fixture`, plus `extra` arguments.
    pub fn serve(engine: &[&str], fixture: &Fixture, extra: &[&str]) -> Server {
        let root = fixture.root_arg();
        let mut all: Vec<&str> = vec!["--root", &root];
        all.extend_from_slice(extra);
        Server::start(engine, &all)
    }

    /// The admin listener's address (panics when the server runs without one).
    pub fn admin_addr(&self) -> SocketAddr {
        self.logs()
            .iter()
            .find_map(|l| parse_marker_line(l, "admin endpoints at http://"))
            .unwrap_or_else(|| panic!("no admin listener line in:\n{}", self.log_text()))
    }

    /// Scrapes `/metrics` from the admin listener, checking it is Prometheus text.
    pub fn scrape(&self) -> String {
        metrics(&mut Conn::open(self.admin_addr()))
    }

    /// Runs `read` (a real-time RTSP viewer's count) until a try in which the server dropped no
    /// frame or packet for a slow viewer, at most three times. RTSP drops whole frames for a
    /// viewer that falls behind, as it must for live viewers; on a machine busy on both cores a
    /// decoding ffprobe can fall behind, which the server's drop counters show. A try with drops
    /// is made again; after three, the last is returned with what each try lost.
    pub fn without_rtsp_drops<T: std::fmt::Debug>(&self, mut read: impl FnMut() -> T) -> (T, Vec<String>) {
        let dropped = || {
            let text = self.scrape();
            metric(&text, "sluice_rtp_frames_dropped_total")
                + metric(&text, "sluice_rtp_packets_dropped_total")
        };
        let mut tries = Vec::new();
        loop {
            let before = dropped();
            let value = read();
            let lost = dropped() - before;
            if lost == 0 || tries.len() == 2 {
                return (value, tries);
            }
            tries.push(format!("{value:?} with {lost} frames and packets dropped for a slow viewer"));
        }
    }

    /// `GET /streams` from the admin listener: its body, after checking it is a 200.
    pub fn streams(&self) -> String {
        let mut c = Conn::open(self.admin_addr());
        c.send(get("/streams", &[]));
        let r = c.response();
        r.expect_status(200, "/streams");
        r.body_text()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The RTSP control address (its start-up line); panics when RTSP is off.
    pub fn rtsp_addr(&self) -> SocketAddr {
        self.logs()
            .iter()
            .find_map(|l| parse_scheme_line(l, "rtsp"))
            .unwrap_or_else(|| panic!("sluice announced no rtsp listener; its log:\n{}", self.log_text()))
    }

    /// The server's process id.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Open file descriptors of the server process.
    pub fn fd_count(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid))
            .unwrap_or_else(|e| panic!("cannot list /proc/{}/fd: {e}", self.pid))
            .count()
    }

    /// Every log line so far.
    pub fn logs(&self) -> Vec<String> {
        self.log_text().lines().map(str::to_string).collect()
    }

    /// The log as one string, for failure messages.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Sends a signal to the server (by its pid).
    pub fn signal(&self, sig: libc::c_int) {
        self.process.signal(sig);
    }

    /// Waits at most `timeout` for the server to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        self.process.wait_exit(timeout)
    }

    /// Whether the process is still running.
    pub fn running(&mut self) -> bool {
        self.process.exit_status().is_none()
    }

    /// SIGTERM, then waits at most 10 s for the exit; panics (after SIGKILL) if it does not come.
    /// Once this returns, every line the server wrote is in [`Server::logs`].
    pub fn terminate(&mut self) -> ExitStatus {
        self.signal(libc::SIGTERM);
        match self.wait_exit(IO_TIMEOUT) {
            Some(s) => s,
            None => {
                self.process.stop(Duration::ZERO);
                panic!("sluice did not exit within {IO_TIMEOUT:?} of SIGTERM; its log:\n{}", self.log_text());
            }
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.process.stop(Duration::from_secs(3));
        if std::thread::panicking() {
            let logs = self.logs();
            let skip = logs.len().saturating_sub(60);
            eprintln!("---- sluice (pid {}) log, last {} lines ----", self.pid, logs.len() - skip);
            for l in &logs[skip..] {
                eprintln!("{l}");
            }
            eprintln!("---- end of sluice log ----");
        }
    }
}

/// The address in a `listening on http://ADDR ...` line, human or JSON.
pub fn parse_listen_line(line: &str) -> Option<SocketAddr> {
    parse_scheme_line(line, "http")
}

/// The address in a `listening on SCHEME://ADDR` line.
pub fn parse_scheme_line(line: &str, scheme: &str) -> Option<SocketAddr> {
    parse_marker_line(line, &format!("listening on {scheme}://"))
}

/// The address right after `marker` in a log line.
pub fn parse_marker_line(line: &str, marker: &str) -> Option<SocketAddr> {
    let rest = &line[line.find(marker)? + marker.len()..];
    let end = rest.find(|c: char| c.is_whitespace() || c == '"' || c == '/').unwrap_or(rest.len());
    rest[..end].parse().ok()
}
