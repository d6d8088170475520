//! The machine a run happens on and the process facts the runner needs from `/proc`: cores,
//! CPU model, kernel, tool versions, CPU affinity, and the CPU time of a process group (a server
//! and everything it forked, e.g. nginx's workers, or sluice's io_uring kernel workers, which are
//! threads of its process). It starts and stops nothing.

use std::collections::BTreeMap;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// What a report says about the machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Online CPUs.
    pub cores: usize,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// Memory in GiB.
    pub memory_gib: f64,
    /// `uname -r`.
    pub kernel: String,
    /// `PRETTY_NAME` from `/etc/os-release`.
    pub os: String,
    /// Tool versions (sluice, nginx, iperf3), "not installed" where missing.
    pub versions: BTreeMap<String, String>,
}

impl Machine {
    /// Looks at this machine. `sluice_version` is the running binary's.
    pub fn detect(sluice_version: &str) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')).map(|(_, v)| v.trim()))
            .unwrap_or("unknown")
            .to_string();
        let memory_gib = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            })
            .map_or(0.0, |kb| kb / (1024.0 * 1024.0));
        let kernel =
            std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim().to_string();
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME=").map(|v| v.trim_matches('"').to_string()))
            })
            .unwrap_or_default();
        let mut versions = BTreeMap::new();
        versions.insert("sluice".to_string(), sluice_version.to_string());
        versions.insert("nginx".to_string(), tool_version("nginx", &["-v"]));
        versions.insert("iperf3".to_string(), tool_version("iperf3", &["--version"]));
        Machine { cores: cores(), cpu_model, memory_gib, kernel, os, versions }
    }

    /// One line: `2 cores (AMD EPYC ...), 24 GiB, Linux 6.1, Debian 12`.
    pub fn summary(&self) -> String {
        format!(
            "{} cores ({}), {:.0} GiB, Linux {}, {}",
            self.cores, self.cpu_model, self.memory_gib, self.kernel, self.os
        )
    }
}

/// First line a tool prints about its version (nginx prints it on stderr).
fn tool_version(tool: &str, args: &[&str]) -> String {
    match Command::new(tool).args(args).output() {
        Ok(out) => {
            let text = if out.stdout.is_empty() { out.stderr } else { out.stdout };
            let line = String::from_utf8_lossy(&text).lines().next().unwrap_or("").trim().to_string();
            // `nginx version: nginx/1.22.1` → `nginx/1.22.1`; `iperf 3.12 (cJSON 1.7.15)` stays.
            line.strip_prefix("nginx version: ").map_or(line.clone(), str::to_string)
        }
        Err(_) => "not installed".to_string(),
    }
}

/// CPUs of the machine. Not `available_parallelism`: that follows this thread's affinity, which
/// the runner itself narrows to the load generator's cores.
pub fn cores() -> usize {
    all_cpus().len()
}

/// Where the server and the load generator run: different cores when there are at least two
/// (the generator gets CPU 0, the server the rest); nothing pinned on one core.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The server's CPUs (empty: not pinned).
    pub server: Vec<usize>,
    /// The load generator's CPUs (empty: not pinned).
    pub load: Vec<usize>,
}

impl Placement {
    /// The placement for a server with `workers` threads on a machine with `cores` CPUs. A server
    /// that asks for more workers than it would get cores runs on every core, sharing one with the
    /// generator, rather than stacking its workers on fewer cores than it was told to use.
    pub fn for_workers(cores: usize, workers: usize) -> Placement {
        if cores < 2 {
            return Placement { server: Vec::new(), load: Vec::new() };
        }
        let server = if workers > cores - 1 { (0..cores).collect() } else { (1..cores).collect() };
        Placement { server, load: vec![0] }
    }
}

pub use crate::sys::CpuSet;

/// Pins the calling thread (and the threads it starts afterwards) to `cpus`; empty is a no-op.
pub fn pin(cpus: &[usize]) -> std::io::Result<()> {
    if cpus.is_empty() {
        return Ok(());
    }
    CpuSet::new(cpus).apply()
}

/// Every CPU of the machine (to undo [`pin`]).
pub fn all_cpus() -> Vec<usize> {
    (0..crate::sys::online_cpus()).collect()
}

/// User + system CPU seconds of every live process in process group `pgid` (threads included;
/// children that already exited and were reaped count through their parent's `cutime`/`cstime`).
pub fn group_cpu_seconds(pgid: u32) -> f64 {
    sluice_cputime::group_seconds(pgid)
}

/// User + system CPU seconds of this process so far (every thread; not its children). The lab's
/// load generator runs in this process, so this is its CPU time.
pub fn process_cpu_seconds() -> f64 {
    sluice_cputime::process_seconds()
}

/// CPU seconds the whole machine has been busy (user, nice, system, irq, softirq and steal of
/// `/proc/stat`'s `cpu` line): with the lab's and its server's own time taken out, what the rest
/// of the machine (other processes, deferred softirq work, the hypervisor's steal) took from a
/// row.
pub fn machine_busy_seconds() -> f64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    text.lines().next().map_or(0.0, parse_machine_busy) / sluice_cputime::clock_ticks()
}

/// Busy ticks of a `/proc/stat` `cpu` line.
fn parse_machine_busy(line: &str) -> f64 {
    let fields: Vec<f64> = line.split_whitespace().skip(1).map(|v| v.parse().unwrap_or(0.0)).collect();
    // user nice system idle iowait irq softirq steal
    [0, 1, 2, 5, 6, 7].iter().filter_map(|&i| fields.get(i)).sum()
}

/// UDP datagrams this network namespace dropped because a socket's receive buffer was full
/// (`RcvbufErrors` of `/proc/net/snmp`); `None` when the kernel does not say.
pub fn udp_rcvbuf_errors() -> Option<u64> {
    parse_udp_rcvbuf_errors(&std::fs::read_to_string("/proc/net/snmp").ok()?)
}

fn parse_udp_rcvbuf_errors(snmp: &str) -> Option<u64> {
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp: "));
    let (names, values) = (udp.next()?, udp.next()?);
    let i = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_busy_counts_everything_but_idle_and_iowait() {
        assert_eq!(parse_machine_busy("cpu  100 5 50 1000 20 1 4 3 0 0"), 163.0);
        assert_eq!(parse_machine_busy("cpu"), 0.0);
    }

    #[test]
    fn stat_lines_with_odd_names_parse() {
        let line = "1234 (nginx: worker (x)) S 1 1200 1200 0 -1 4194560 100 0 0 0 250 50 3 4 20 0 1 0";
        assert_eq!(sluice_cputime::parse_proc_stat(line), Some((1200, 250 + 50 + 3 + 4)));
        assert_eq!(sluice_cputime::parse_proc_stat("garbage"), None);
    }

    #[test]
    fn placement_separates_server_and_generator() {
        assert_eq!(Placement::for_workers(1, 1), Placement { server: vec![], load: vec![] });
        assert_eq!(Placement::for_workers(2, 1), Placement { server: vec![1], load: vec![0] });
        assert_eq!(Placement::for_workers(2, 2), Placement { server: vec![0, 1], load: vec![0] });
        assert_eq!(Placement::for_workers(8, 4), Placement { server: (1..8).collect(), load: vec![0] });
    }

    #[test]
    fn this_process_uses_cpu() {
        let pgid = crate::sys::process_group();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < std::time::Duration::from_millis(50) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        assert!(x > 0);
        assert!(group_cpu_seconds(pgid) > 0.0);
        assert!(process_cpu_seconds() > 0.0);
    }

    #[test]
    fn udp_receive_buffer_drops_come_from_snmp() {
        let snmp = "Tcp: RtoAlgorithm\nTcp: 1\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors\nUdp: 10 1 7 12 5 0\nUdpLite: InDatagrams\nUdpLite: 0\n";
        assert_eq!(parse_udp_rcvbuf_errors(snmp), Some(5));
        assert_eq!(parse_udp_rcvbuf_errors("Tcp: x\n"), None);
    }
}
