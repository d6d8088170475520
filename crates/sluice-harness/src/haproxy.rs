//! HAProxy in front of two sluice edges, running deploy/haproxy.cfg as shipped (embedded here,
//! written to the caller's work directory): every address the file reads from the environment
//! is given a free loopback port. It reads HAProxy's stats page to tell whether an edge is up.
//! It does not start the edges.

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::process::Process;
use crate::{free_port, HarnessError};

/// The repository's deploy/haproxy.cfg.
pub const CONFIG: &str = include_str!("../../../deploy/haproxy.cfg");

/// What HAProxy needs of one edge.
#[derive(Debug, Clone, Copy)]
pub struct Edge {
    /// Its HTTP listener.
    pub http: SocketAddr,
    /// Its RTSP listener (a free port no one answers on when the edge serves no RTSP).
    pub rtsp: SocketAddr,
    /// Its admin listener's port (HAProxy's health checks).
    pub admin_port: u16,
}

/// A running HAProxy.
#[derive(Debug)]
pub struct Haproxy {
    process: Process,
    /// Its HTTP frontend.
    pub http: SocketAddr,
    /// Its RTSP frontend.
    pub rtsp: SocketAddr,
    /// Its stats page (`/stats;csv`).
    pub stats: SocketAddr,
}

/// A free loopback address.
pub fn free_addr() -> Result<SocketAddr, HarnessError> {
    let port = free_port().map_err(|e| HarnessError::io("finding a free port", e))?;
    Ok(SocketAddr::from(([127, 0, 0, 1], port)))
}

impl Haproxy {
    /// Starts HAProxy in front of edges `a` and `b`, its configuration and log in `work`, with
    /// `prepare` adjusting the command first (CPU pinning, say); waits until it accepts.
    pub fn start(
        a: Edge,
        b: Edge,
        work: &Path,
        prepare: impl FnOnce(&mut Command),
    ) -> Result<Haproxy, HarnessError> {
        let program = crate::find_tool("haproxy")?;
        let cfg = crate::write_into(work, "haproxy.cfg", CONFIG)?;
        let (http, rtsp, stats) = (free_addr()?, free_addr()?, free_addr()?);
        let mut command = Command::new(program);
        command
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .env("SLUICE_HTTP_BIND", http.to_string())
            .env("SLUICE_RTSP_BIND", rtsp.to_string())
            .env("SLUICE_STATS_BIND", stats.to_string());
        for (name, edge) in [("A", a), ("B", b)] {
            command
                .env(format!("EDGE_{name}_HTTP"), edge.http.to_string())
                .env(format!("EDGE_{name}_RTSP"), edge.rtsp.to_string())
                .env(format!("EDGE_{name}_ADMIN_PORT"), edge.admin_port.to_string());
        }
        prepare(&mut command);
        let mut process = Process::spawn("HAProxy", command, &work.join("haproxy.log"))?;
        process.wait_ready(Duration::from_secs(15), |_| std::net::TcpStream::connect(http).is_ok())?;
        Ok(Haproxy { process, http, rtsp, stats })
    }

    /// A server's status on the stats page (`UP`, `DOWN`, ...), empty when unreachable.
    pub fn status(&self, backend: &str, server: &str) -> String {
        let Ok(r) = crate::http::get(self.stats, "/stats;csv") else { return String::new() };
        stats_status(&r.text(), backend, server).unwrap_or_default()
    }

    /// Waits at most `limit` until every `(backend, server)` is `UP`; the error lists each one's
    /// status and HAProxy's log.
    pub fn wait_up(&self, servers: &[(&str, &str)], limit: Duration) -> Result<(), HarnessError> {
        let deadline = Instant::now() + limit;
        loop {
            if servers.iter().all(|(b, s)| self.status(b, s) == "UP") {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let states: Vec<String> =
                    servers.iter().map(|(b, s)| format!("{b}/{s}: {}", self.status(b, s))).collect();
                return Err(HarnessError::NotReady {
                    what: format!("HAProxy's edges ({})", states.join(", ")),
                    limit,
                    tail: self.process.log_tail(10),
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Everything HAProxy logged so far.
    pub fn log_text(&self) -> String {
        self.process.log_text()
    }

    /// Its process (to stop it, read its CPU time, or keep it as a plain process).
    pub fn into_process(self) -> Process {
        self.process
    }
}

/// The `status` column of `backend`/`server` in HAProxy's CSV stats.
fn stats_status(csv: &str, backend: &str, server: &str) -> Option<String> {
    let header = csv.lines().find(|l| l.starts_with("# pxname"))?;
    let column = header.trim_start_matches("# ").split(',').position(|c| c == "status")?;
    csv.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.len() > column && f[0] == backend && f[1] == server)
        .map(|f| f[column].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_config_reads_its_addresses_from_the_environment() {
        for var in ["SLUICE_HTTP_BIND", "SLUICE_STATS_BIND", "EDGE_A_HTTP", "EDGE_B_ADMIN_PORT"] {
            assert!(CONFIG.contains(var), "deploy/haproxy.cfg uses {var}");
        }
    }

    #[test]
    fn a_servers_status_is_read_from_the_stats_csv() {
        let csv = "# pxname,svname,qcur,status\nedges_http,edge-a,0,UP\nedges_http,edge-b,0,DOWN\n";
        assert_eq!(stats_status(csv, "edges_http", "edge-b").as_deref(), Some("DOWN"));
        assert_eq!(stats_status(csv, "edges_rtsp", "edge-a"), None);
    }
}
