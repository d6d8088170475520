//! The one way the tests and the lab run another program: [`Process`]. Each runs in a process
//! group of its own (a terminal's Ctrl-C reaches only the caller, and nginx's or a shell's
//! children are stopped with their leader), dies with its parent (`PR_SET_PDEATHSIG`), writes
//! stdout and stderr to a log file whose tail errors quote, and is stopped by signalling its
//! group, waiting with a deadline, then SIGKILL: never by name.
//!
//! It also keeps the groups running now, so [`stop_all`] (a signal handler's last act) can take
//! them all down and let no other start. What a program is and when it is ready is the
//! caller's (the launchers in this crate, the tests, the lab).

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::sys;
use crate::HarnessError;

/// How long [`Process`]'s `Drop` lets the group stop after SIGTERM before SIGKILL.
pub const DROP_GRACE: Duration = Duration::from_secs(5);

/// A running program in its own process group, stopped (group SIGTERM, then SIGKILL) on drop.
#[derive(Debug)]
pub struct Process {
    child: Child,
    name: String,
    command_line: String,
    log: PathBuf,
    /// The log's temporary file when the caller named none (removed with the process).
    _temp_log: Option<tempfile::TempPath>,
    status: Option<ExitStatus>,
}

/// Process groups running now.
static LIVE_GROUPS: Mutex<Vec<u32>> = Mutex::new(Vec::new());

/// Set (under [`LIVE_GROUPS`]' lock) once [`stop_all`] has run: no program may start after it,
/// or one started while the caller exits would outlive it.
static STOPPING: AtomicBool = AtomicBool::new(false);

fn live_groups() -> MutexGuard<'static, Vec<u32>> {
    LIVE_GROUPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills every process group started here and still running, and lets no other start (for a
/// binary's signal handler).
pub fn stop_all() {
    let mut groups = live_groups();
    STOPPING.store(true, Ordering::SeqCst);
    for pgid in groups.drain(..) {
        sys::signal_group(pgid, libc::SIGKILL);
    }
}

type SpawnRequest = (Command, mpsc::Sender<io::Result<Child>>);

/// Spawns on the one thread that lives as long as the process: the parent-death signal follows
/// the thread that forked, so a child spawned from a short-lived thread would die with it.
fn spawn_on_lasting_thread(command: Command) -> io::Result<Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        let started = std::thread::Builder::new().name("harness-spawner".into()).spawn(move || {
            for (mut command, reply) in rx {
                let _ = reply.send(command.spawn());
            }
        });
        if let Err(e) = started {
            // Without the thread every request fails with the reply channel closed.
            eprintln!("harness: cannot start the spawner thread: {e}");
        }
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    spawner
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply_tx))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    reply_rx.recv().map_err(|_| io::Error::other("the spawner thread is gone"))?
}

impl Process {
    /// Starts `command` in its own process group, tied to this process's life, output to `log`
    /// (created or truncated). `name` names it in errors. Whatever the command already holds
    /// (arguments, environment, `pre_exec` hooks such as CPU pinning) is kept; its stdin is null.
    pub fn spawn(name: &str, command: Command, log: &Path) -> Result<Process, HarnessError> {
        let file =
            File::create(log).map_err(|e| HarnessError::io(format!("creating {}", log.display()), e))?;
        Process::spawn_into(name, command, file, log.to_path_buf(), None)
    }

    /// [`Process::spawn`] with the log in a temporary file removed when the process is dropped.
    pub fn spawn_with_temp_log(name: &str, command: Command) -> Result<Process, HarnessError> {
        let temp = tempfile::NamedTempFile::new().map_err(|e| HarnessError::io("creating a log file", e))?;
        let (file, path) = temp.into_parts();
        Process::spawn_into(name, command, file, path.to_path_buf(), Some(path))
    }

    fn spawn_into(
        name: &str,
        mut command: Command,
        file: File,
        log: PathBuf,
        temp_log: Option<tempfile::TempPath>,
    ) -> Result<Process, HarnessError> {
        let failed = |e| HarnessError::io(format!("starting {name}"), e);
        let command_line = std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ");
        let out = file.try_clone().map_err(failed)?;
        command.stdin(Stdio::null()).stdout(out).stderr(file).process_group(0);
        let parent = std::process::id();
        sys::die_with_parent(&mut command, parent);
        // Spawned and registered under one lock, so `stop_all` sees every group that started
        // and none starts after it.
        let mut groups = live_groups();
        if STOPPING.load(Ordering::SeqCst) {
            return Err(HarnessError::Stopping);
        }
        let child = spawn_on_lasting_thread(command).map_err(failed)?;
        groups.push(child.id());
        Ok(Process { child, name: name.to_string(), command_line, log, _temp_log: temp_log, status: None })
    }

    /// The process id (its group's id too).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the process is called in errors.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its program and arguments, space-separated (for reports and errors).
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    /// Its log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything in its log so far.
    pub fn log_text(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(&self.log).unwrap_or_default()).into_owned()
    }

    /// The last `lines` lines of its log as `: a | b | c`, or empty: the end of an error message.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let tail: Vec<&str> = text.lines().rev().take(lines).collect();
        if tail.is_empty() {
            String::new()
        } else {
            format!(": {}", tail.into_iter().rev().collect::<Vec<_>>().join(" | "))
        }
    }

    /// Sends `signal` to the process itself (not its group).
    pub fn signal(&self, signal: libc::c_int) {
        if self.status.is_none() {
            sys::signal_process(self.child.id() as i32, signal);
        }
    }

    /// Its exit status, once it has exited (reaping it); `None` while it runs.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() && self.leader_exited() {
            self.reap();
        }
        self.status
    }

    /// Whether the leader has exited, without reaping it: while it is a zombie its pid, and so
    /// its group id, cannot be reused, so signalling the group still reaches only ours.
    fn leader_exited(&mut self) -> bool {
        match sys::child_exited_unreaped(self.child.id()) {
            Some(exited) => exited,
            // Not waitable any more (reaped elsewhere): let the standard library tell.
            None => matches!(self.child.try_wait(), Ok(Some(_)) | Err(_)),
        }
    }

    /// Kills what is left of the group (the leader has exited or is being killed), then reaps
    /// the leader.
    fn reap(&mut self) {
        // nginx's workers leave with their master, a shell's children may not: nothing of the
        // group lingers. The leader is not reaped yet, so the group id is still ours.
        sys::signal_group(self.child.id(), libc::SIGKILL);
        if let Ok(status) = self.child.wait() {
            self.status = Some(status);
        }
        self.forget_group();
    }

    /// Waits at most `limit` for the process to exit; its status, or `None` if it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.exit_status() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Polls `ready` every 20 ms for at most `limit`. When the process exits first, or `limit`
    /// passes, it is stopped and the error quotes its log's tail.
    pub fn wait_ready(
        &mut self,
        limit: Duration,
        mut ready: impl FnMut(&Process) -> bool,
    ) -> Result<(), HarnessError> {
        let deadline = Instant::now() + limit;
        loop {
            if ready(self) {
                return Ok(());
            }
            if let Some(status) = self.exit_status() {
                return Err(HarnessError::Exited { what: self.name.clone(), status, tail: self.log_tail(5) });
            }
            if Instant::now() >= deadline {
                self.stop(Duration::from_secs(2));
                return Err(HarnessError::NotReady {
                    what: self.name.clone(),
                    limit,
                    tail: self.log_tail(5),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the process group: SIGTERM, up to `grace` for the leader to exit, then SIGKILL to
    /// whatever of the group is left. Returns the leader's exit status.
    pub fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if self.status.is_none() {
            sys::signal_group(self.child.id(), libc::SIGTERM);
            let deadline = Instant::now() + grace;
            while !self.leader_exited() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            self.reap();
        }
        self.status
    }

    fn forget_group(&self) {
        let id = self.child.id();
        live_groups().retain(|&g| g != id);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop(DROP_GRACE);
    }
}

/// Runs `command` to its end with a time limit, its stdout and stderr captured (stdin null):
/// its status and both outputs. One that overruns `limit` is asked to stop (SIGTERM, so a program
/// that cleans up on it, such as the lab, stops what it started), killed (by its pid) if it is
/// still there [`INTERRUPT_GRACE`] later, and reaped; that is the error, with the last lines
/// it wrote. SIGTERM rather than SIGINT: a program started in the background by a shell has
/// SIGINT ignored from the start, and a shell script cannot even trap it then. For short tools
/// (ffprobe, ffmpeg, a CLI under test) and bounded runs, not servers.
pub fn run_bounded(command: &mut Command, limit: Duration) -> Result<std::process::Output, HarnessError> {
    use std::io::Read;
    let what = format!("{:?}", command.get_program());
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| HarnessError::io(format!("running {what}"), e))?;
    // Both pipes are drained while it runs, so it never blocks on a full one; what they held so
    // far is there to tell an overrun's story.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&bytes);
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            if let Some(mut pipe) = pipe {
                loop {
                    match pipe.read(&mut buf) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => into.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(&buf[..n]),
                    }
                }
            }
        });
        (bytes, thread)
    };
    let (out, out_thread) = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let (err, err_thread) = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let taken =
        |bytes: &Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *bytes.lock().unwrap_or_else(|e| e.into_inner()));
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                // Not reaped yet, so the pid is still this child's.
                sys::signal_process(child.id() as i32, libc::SIGTERM);
                let grace = Instant::now() + INTERRUPT_GRACE;
                while matches!(child.try_wait(), Ok(None)) && Instant::now() < grace {
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = child.kill();
                let _ = child.wait();
                // Its last words may still be in the pipes (or held open by what it started).
                let read_up = Instant::now() + Duration::from_secs(1);
                while !(out_thread.is_finished() && err_thread.is_finished()) && Instant::now() < read_up {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let (out, err) = (taken(&out), taken(&err));
                let text = format!("{}{}", String::from_utf8_lossy(&out), String::from_utf8_lossy(&err));
                let lines: Vec<&str> = text.lines().collect();
                // The last lines it wrote: where a run that never ended had got to.
                let tail = lines[lines.len().saturating_sub(20)..].join(" | ");
                return Err(HarnessError::NotReady {
                    what: format!("{what} to finish"),
                    limit,
                    tail: if tail.is_empty() { tail } else { format!(": {tail}") },
                });
            }
            Err(e) => return Err(HarnessError::io(format!("waiting for {what}"), e)),
        }
    };
    let _ = (out_thread.join(), err_thread.join());
    Ok(std::process::Output { status, stdout: taken(&out), stderr: taken(&err) })
}

/// How long a program that overran its limit has to stop after SIGTERM before it is killed.
pub const INTERRUPT_GRACE: Duration = Duration::from_secs(15);

#[cfg(test)]
mod tests {
    use super::*;

    fn shell(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn a_bounded_run_captures_both_outputs_and_an_overrun_is_an_error() {
        let out =
            run_bounded(&mut shell("echo out; echo err >&2; exit 4"), Duration::from_secs(10)).expect("runs");
        assert_eq!(
            (out.status.code(), &out.stdout[..], &out.stderr[..]),
            (Some(4), &b"out\n"[..], &b"err\n"[..])
        );
        // An overrun is asked to stop first (a program that cleans up on SIGTERM gets to), and
        // the error tells where it had got to.
        let script = "trap 'echo cleaned up >&2; exit 3' TERM; echo started; while :; do sleep 0.05; done";
        let began = Instant::now();
        let err = run_bounded(&mut shell(script), Duration::from_millis(300)).expect_err("overruns");
        let text = err.to_string();
        assert!(text.contains("to finish") && text.contains("started"), "{text}");
        assert!(text.contains("cleaned up"), "asked to stop before it was killed: {text}");
        assert!(began.elapsed() < INTERRUPT_GRACE, "it stopped when asked, not on the kill");
    }

    #[test]
    fn output_goes_to_the_log_and_the_exit_is_seen() {
        let mut p = Process::spawn_with_temp_log("echo", shell("echo out; echo err >&2")).expect("spawns");
        assert!(p.wait_exit(Duration::from_secs(10)).is_some_and(|s| s.success()));
        let log = p.log_text();
        assert!(log.contains("out") && log.contains("err"), "{log}");
        assert_eq!(p.log_tail(1), ": err");
    }

    #[test]
    fn stop_takes_down_the_whole_group_even_when_the_leader_ignores_sigterm() {
        // The leader ignores SIGTERM and leaves a child behind in the group.
        let mut p = Process::spawn_with_temp_log("stubborn", shell("trap '' TERM; sleep 60 & echo $!; wait"))
            .expect("spawns");
        assert!(p.wait_ready(Duration::from_secs(10), |p| !p.log_text().is_empty()).is_ok());
        let child: i32 = p.log_text().trim().parse().expect("the child's pid");
        let started = Instant::now();
        p.stop(Duration::from_millis(300));
        assert!(started.elapsed() < Duration::from_secs(5));
        let gone = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            !crate::sys::signal_process(child, 0)
        });
        assert!(gone, "the group's other member is gone");
    }

    #[test]
    fn a_program_that_exits_early_fails_its_readiness_with_its_log() {
        let mut p = Process::spawn_with_temp_log("quitter", shell("echo no config; exit 3")).expect("spawns");
        let err = p.wait_ready(Duration::from_secs(10), |_| false).expect_err("never ready");
        let text = err.to_string();
        assert!(text.contains("quitter exited") && text.contains("no config"), "{text}");
    }
}
