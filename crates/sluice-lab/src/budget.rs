//! The server's CPU budget: a CPU cgroup of its own per capacity row, with a quota below the
//! generator's core, so that the server, not the load generator, saturates (EXPERIMENTS.md,
//! "Capacity"). It finds a writable CPU controller (cgroup v2 `cpu.max` where the unified
//! hierarchy has the `cpu` controller, else cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`),
//! creates the group, reads back what the kernel holds and its throttling counters (`cpu.stat`),
//! and removes the group. The group nests in the cgroup the lab itself runs in, so a lab run placed
//! in a group of its own (say one with a large `cpu.shares`, to keep other work on the machine from
//! taking the generator's core) keeps its budgeted servers inside it. Where neither is writable it
//! says why, and the row is skipped with that reason. It starts no process: the runner's spawn puts the server in the group between fork
//! and exec (see [`ServerCgroup::procs_fd`]).

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The directory of this process's own group in the hierarchy mounted at `mount` that holds
/// `controller`, from `/proc/self/cgroup`'s text (`ID:CONTROLLERS:PATH` lines); `None` for the root
/// group or when no line names the controller.
fn own_group(proc_self_cgroup: &str, mount: &Path, controller: &str) -> Option<PathBuf> {
    let path = proc_self_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers.split(',').any(|c| c == controller).then_some(path)
    })?;
    let relative = path.trim_start_matches('/');
    (!relative.is_empty() && !relative.split('/').any(|c| c == "..")).then(|| mount.join(relative))
}

/// The environment variable naming the cgroup file system's mount point (default
/// `/sys/fs/cgroup`); tests point it elsewhere to see a machine without a writable one.
pub const CGROUP_ROOT_ENV: &str = "SLUICE_LAB_CGROUP_ROOT";

/// The default scheduling period: short enough that a throttled server waits at most a few
/// milliseconds (with the kernel's default 100 ms, a server at half a core could stall 50 ms at
/// a time and every p99 would be the period).
pub const DEFAULT_PERIOD: Duration = Duration::from_millis(10);

/// How much CPU a budgeted server gets.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CpuBudget {
    /// Cores per server worker thread (`--server-cpu 0.5`: half a core for one worker).
    pub cpus_per_worker: f64,
    /// The cgroup's scheduling period, µs.
    pub period_us: u64,
}

impl CpuBudget {
    /// A budget of `cpus_per_worker` cores per worker over `period`.
    pub fn new(cpus_per_worker: f64, period: Duration) -> CpuBudget {
        CpuBudget { cpus_per_worker, period_us: (period.as_micros() as u64).max(1000) }
    }

    /// The quota of a server with `workers` worker threads, µs per period (at least 1 ms, the
    /// kernel's minimum).
    pub fn quota_us(&self, workers: usize) -> u64 {
        ((self.cpus_per_worker * workers.max(1) as f64 * self.period_us as f64).round() as u64).max(1000)
    }

    /// `0.5 core per worker thread (5 ms every 10 ms)`.
    pub fn describe(&self) -> String {
        format!(
            "{} core per worker thread ({} µs every {} µs)",
            self.cpus_per_worker,
            self.quota_us(1),
            self.period_us
        )
    }
}

/// Which cgroup interface holds the quota.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CgroupVersion {
    /// cgroup v1's `cpu` controller: `cpu.cfs_quota_us` and `cpu.cfs_period_us`.
    V1,
    /// cgroup v2: `cpu.max`.
    V2,
}

/// The throttling counters of a group (`cpu.stat`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuStat {
    /// Periods in which the group had runnable tasks.
    pub nr_periods: u64,
    /// Periods in which it ran out of quota.
    pub nr_throttled: u64,
    /// Time its tasks waited for the next period, seconds.
    pub throttled_s: f64,
}

impl CpuStat {
    /// `self − before`, counter by counter.
    pub fn since(&self, before: &CpuStat) -> CpuStat {
        CpuStat {
            nr_periods: self.nr_periods.saturating_sub(before.nr_periods),
            nr_throttled: self.nr_throttled.saturating_sub(before.nr_throttled),
            throttled_s: (self.throttled_s - before.throttled_s).max(0.0),
        }
    }

    fn parse(text: &str, version: CgroupVersion) -> CpuStat {
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let throttled_s = match version {
            CgroupVersion::V1 => get("throttled_time") as f64 / 1e9,
            CgroupVersion::V2 => get("throttled_usec") as f64 / 1e6,
        };
        CpuStat { nr_periods: get("nr_periods"), nr_throttled: get("nr_throttled"), throttled_s }
    }
}

/// A CPU cgroup holding one server, removed when dropped.
#[derive(Debug)]
pub struct ServerCgroup {
    dir: PathBuf,
    version: CgroupVersion,
    /// `cgroup.procs`, opened before the server is forked: the child writes `0` to it.
    procs: File,
    /// The quota written, µs per period.
    pub quota_us: u64,
    /// The period written, µs.
    pub period_us: u64,
}

static GROUPS: AtomicUsize = AtomicUsize::new(0);

/// The directories of the groups alive now, so that an exit that skips their drop (a second
/// signal) still removes them ([`remove_live_groups`]).
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn live() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Removes `dir`, giving the last threads of a stopped server a moment to leave it; whether it
/// is gone.
fn remove_group(dir: &Path) -> bool {
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Removes every group this process made that is still there (their servers stopped first: the
/// lab's stop kills them); for an exit that does not unwind.
pub fn remove_live_groups() {
    for dir in live().drain(..) {
        remove_group(&dir);
    }
}

fn root() -> PathBuf {
    std::env::var_os(CGROUP_ROOT_ENV).map_or_else(|| PathBuf::from("/sys/fs/cgroup"), PathBuf::from)
}

impl ServerCgroup {
    /// Creates a group with `quota_us` every `period_us`; `Err` says why there is none (the row is
    /// then skipped with that reason).
    pub fn create(quota_us: u64, period_us: u64) -> Result<ServerCgroup, String> {
        Self::create_under(&root(), quota_us, period_us)
    }

    /// [`ServerCgroup::create`] with the cgroup file system mounted at `root`.
    pub fn create_under(root: &Path, quota_us: u64, period_us: u64) -> Result<ServerCgroup, String> {
        let name = format!("sluice-lab-{}-{}", std::process::id(), GROUPS.fetch_add(1, Ordering::Relaxed));
        let mut why = Vec::new();
        // cgroup v2, where the unified hierarchy has the cpu controller (a v1 `cpu` mount takes
        // it away from v2 on hybrid machines such as this project's).
        let v2_has_cpu = std::fs::read_to_string(root.join("cgroup.controllers"))
            .is_ok_and(|c| c.split_whitespace().any(|w| w == "cpu"));
        if v2_has_cpu {
            match Self::create_in(root, &name, CgroupVersion::V2, quota_us, period_us) {
                Ok(g) => return Ok(g),
                Err(e) => why.push(format!("cgroup v2 {}: {e}", root.display())),
            }
        }
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        for mount in ["cpu", "cpu,cpuacct", "cpuacct,cpu"] {
            let mount_dir = root.join(mount);
            if !mount_dir.join("cpu.cfs_quota_us").exists() {
                continue;
            }
            let dir = own_group(&own, &mount_dir, "cpu")
                .filter(|d| d.join("cpu.cfs_quota_us").exists())
                .unwrap_or(mount_dir);
            match Self::create_in(&dir, &name, CgroupVersion::V1, quota_us, period_us) {
                Ok(g) => return Ok(g),
                Err(e) => why.push(format!("cgroup v1 {}: {e}", dir.display())),
            }
        }
        if why.is_empty() {
            why.push(format!(
                "no CPU controller under {} (neither cgroup v2 cpu.max nor v1 cpu/cpu.cfs_quota_us)",
                root.display()
            ));
        }
        Err(format!("no CPU budget could be applied: {}", why.join("; ")))
    }

    fn create_in(
        parent: &Path,
        name: &str,
        version: CgroupVersion,
        quota_us: u64,
        period_us: u64,
    ) -> std::io::Result<ServerCgroup> {
        let write = |path: PathBuf, text: &str| -> std::io::Result<()> {
            std::fs::write(&path, text)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
        };
        if version == CgroupVersion::V2 {
            write(parent.join("cgroup.subtree_control"), "+cpu")?;
        }
        let dir = parent.join(name);
        std::fs::create_dir(&dir)
            .map_err(|e| std::io::Error::new(e.kind(), format!("creating {}: {e}", dir.display())))?;
        let set = || -> std::io::Result<File> {
            match version {
                CgroupVersion::V2 => write(dir.join("cpu.max"), &format!("{quota_us} {period_us}"))?,
                CgroupVersion::V1 => {
                    // The period first: a quota is checked against the period in force.
                    write(dir.join("cpu.cfs_period_us"), &period_us.to_string())?;
                    write(dir.join("cpu.cfs_quota_us"), &quota_us.to_string())?;
                }
            }
            let procs = dir.join("cgroup.procs");
            std::fs::OpenOptions::new()
                .write(true)
                .open(&procs)
                .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", procs.display())))
        };
        match set() {
            Ok(procs) => {
                live().push(dir.clone());
                Ok(ServerCgroup { dir, version, procs, quota_us, period_us })
            }
            Err(e) => {
                let _ = std::fs::remove_dir(&dir);
                Err(e)
            }
        }
    }

    /// The descriptor of the group's `cgroup.procs`: a process that writes `0` to it joins the
    /// group (the spawned server does so between fork and exec, so everything it starts, nginx's
    /// workers or io_uring's kernel workers, is in the group from its first instruction).
    pub fn procs_fd(&self) -> RawFd {
        self.procs.as_raw_fd()
    }

    /// The group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which interface holds the quota.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The quota and period the kernel holds now, µs (read back from the group's files).
    pub fn read_limit(&self) -> Option<(u64, u64)> {
        let read = |f: &str| std::fs::read_to_string(self.dir.join(f)).ok();
        match self.version {
            CgroupVersion::V2 => {
                let text = read("cpu.max")?;
                let (q, p) = text.trim().split_once(' ')?;
                Some((q.parse().ok()?, p.parse().ok()?))
            }
            CgroupVersion::V1 => Some((
                read("cpu.cfs_quota_us")?.trim().parse().ok()?,
                read("cpu.cfs_period_us")?.trim().parse().ok()?,
            )),
        }
    }

    /// Whether process `pid` is in the group now.
    pub fn holds(&self, pid: u32) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .is_ok_and(|t| t.lines().any(|l| l.trim().parse() == Ok(pid)))
    }

    /// The group's throttling counters now.
    pub fn stat(&self) -> CpuStat {
        let text = std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default();
        CpuStat::parse(&text, self.version)
    }

    /// The files that hold the limit, as a reader would check them.
    pub fn mechanism(&self) -> String {
        match self.version {
            CgroupVersion::V2 => format!("cgroup v2 {}/cpu.max", self.dir.display()),
            CgroupVersion::V1 => {
                format!("cgroup v1 {}/cpu.cfs_quota_us and cpu.cfs_period_us", self.dir.display())
            }
        }
    }
}

impl Drop for ServerCgroup {
    fn drop(&mut self) {
        // The server was stopped and reaped before; its last threads may take a moment to leave.
        remove_group(&self.dir);
        live().retain(|d| *d != self.dir);
    }
}

/// Joins the group whose `cgroup.procs` is `fd`: one `write` system call and no allocation, so it
/// is safe between fork and exec.
pub fn join(fd: RawFd) -> std::io::Result<()> {
    crate::sys::write_zero(fd)
}

/// What a capacity row's budget was and what it did, as the report states it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RowBudget {
    /// Cores the server was allowed (quota / period).
    pub cpus: f64,
    /// Quota read back from the group, µs per period.
    pub quota_us: u64,
    /// Period read back, µs.
    pub period_us: u64,
    /// Which files hold it.
    pub mechanism: String,
    /// Whether the server's process was found in the group during the row.
    pub server_in_group: bool,
    /// Throttling over the measured run.
    pub throttling: CpuStat,
    /// The server's CPU time over the measured run divided by its wall time, in % of one core.
    pub server_cpu_pct: f64,
}

impl RowBudget {
    /// Whether the server used at least 90% of its budget over the row: then the budget, not
    /// the load generator or the machine's other work, set the row's pace.
    pub fn server_bound(&self) -> bool {
        self.server_cpu_pct >= 0.9 * self.cpus * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotas_scale_with_workers_and_never_fall_under_the_kernels_minimum() {
        let b = CpuBudget::new(0.5, Duration::from_millis(10));
        assert_eq!((b.quota_us(1), b.quota_us(2), b.period_us), (5000, 10_000, 10_000));
        assert_eq!(CpuBudget::new(0.01, Duration::from_millis(10)).quota_us(1), 1000);
        assert!(b.describe().contains("5000 µs every 10000 µs"));
    }

    #[test]
    fn cpu_stat_reads_both_versions() {
        let v1 = "nr_periods 120\nnr_throttled 30\nthrottled_time 1500000000\n";
        assert_eq!(
            CpuStat::parse(v1, CgroupVersion::V1),
            CpuStat { nr_periods: 120, nr_throttled: 30, throttled_s: 1.5 }
        );
        let v2 = "usage_usec 10\nnr_periods 4\nnr_throttled 2\nthrottled_usec 250000\n";
        let s = CpuStat::parse(v2, CgroupVersion::V2);
        assert_eq!((s.nr_periods, s.nr_throttled, s.throttled_s), (4, 2, 0.25));
        let d = s.since(&CpuStat { nr_periods: 1, nr_throttled: 1, throttled_s: 0.05 });
        assert_eq!((d.nr_periods, d.nr_throttled), (3, 1));
    }

    #[test]
    fn the_servers_group_nests_in_the_labs_own() {
        let text = "4:memory:/x\n1:cpu:/lab/run\n0::/\n";
        let mount = Path::new("/sys/fs/cgroup/cpu");
        assert_eq!(own_group(text, mount, "cpu"), Some(mount.join("lab/run")));
        assert_eq!(own_group("1:cpu,cpuacct:/\n", mount, "cpu"), None, "the root group");
        assert_eq!(own_group("1:cpuacct:/a\n", mount, "cpu"), None, "cpuacct is not cpu");
        assert_eq!(own_group("1:cpu:/../etc\n", mount, "cpu"), None);
    }

    #[test]
    fn a_machine_without_a_cpu_controller_gets_a_reason() {
        let dir = tempfile::tempdir().unwrap();
        let err = ServerCgroup::create_under(dir.path(), 5000, 10_000).unwrap_err();
        assert!(err.contains("no CPU controller under"), "{err}");
    }
}
