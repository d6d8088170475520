//! The server's one launcher of other programs (ffmpeg, which makes thumbnail tiles): a child
//! process given its input on stdin, its output read back from stdout, within a time limit and
//! an output bound, killed by its pid past either, its stderr kept to say why it failed.
//!
//! Owns running one child to completion and finding a program on `PATH`. It does not decide
//! what to run, how many children run at once (its callers bound that) or where it runs: it
//! blocks, so it is called from a CPU-pool job, never from an event loop. (The test harness and
//! the lab launch their own processes: those are tools of the tests, not the server's.)

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Bytes of a child's stderr kept for the refusal (the tail end beyond it is dropped).
const STDERR_KEPT: usize = 4096;

/// How often a running child is checked for its exit: small against the hundreds of
/// milliseconds a thumbnail tile takes, large enough not to spin.
const POLL: Duration = Duration::from_millis(5);

/// Why a child did not give its output.
#[derive(Debug, thiserror::Error)]
pub enum ChildError {
    /// The program could not be started (not there, not executable).
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error.
        source: std::io::Error,
    },
    /// It ran past its time and was killed.
    #[error("{program} took longer than {limit:?} and was stopped")]
    TimedOut {
        /// The program.
        program: String,
        /// The limit.
        limit: Duration,
    },
    /// It wrote more than its bound and was killed.
    #[error("{program} wrote more than {limit} bytes and was stopped")]
    TooMuchOutput {
        /// The program.
        program: String,
        /// The bound.
        limit: usize,
    },
    /// It exited unsuccessfully; what it said on stderr.
    #[error("{program} failed ({status}): {stderr}")]
    Failed {
        /// The program.
        program: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its stderr (the first few KiB), trimmed.
        stderr: String,
    },
    /// Waiting for it failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// The error.
        source: std::io::Error,
    },
}

/// `program` with `args`, fed `input` on stdin; its stdout when it exits successfully within
/// `timeout` having written at most `max_output` bytes. Blocks until then.
pub fn run(
    program: &Path,
    args: &[String],
    input: Vec<u8>,
    timeout: Duration,
    max_output: usize,
) -> Result<Vec<u8>, ChildError> {
    let name = program.display().to_string();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ChildError::Spawn { program: name.clone(), source })?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        unreachable!("all three are piped");
    };
    // One thread a pipe, so that a child blocked writing one never waits on us reading another.
    // A child that stops reading early (it has what it needs) makes the write fail: not an error.
    let feeder = std::thread::spawn(move || drop(stdin.write_all(&input)));
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let read = stdout.take(max_output as u64 + 1).read_to_end(&mut out);
        read.map(|_| out)
    });
    let complainer = std::thread::spawn(move || {
        let mut text = Vec::new();
        let _ = stderr.take(STDERR_KEPT as u64).read_to_end(&mut text);
        String::from_utf8_lossy(&text).trim().to_string()
    });
    let started = Instant::now();
    let mut reader = Some(reader);
    let mut output = None;
    let status = loop {
        if reader.as_ref().is_some_and(|r| r.is_finished()) {
            let read = reader.take().map(|r| r.join().unwrap_or_else(|_| Ok(Vec::new())));
            if let Some(Ok(out)) = &read {
                if out.len() > max_output {
                    break Err(ChildError::TooMuchOutput { program: name.clone(), limit: max_output });
                }
            }
            output = read;
        }
        match child.try_wait() {
            Ok(Some(status)) => break Ok(status),
            Ok(None) if started.elapsed() >= timeout => {
                break Err(ChildError::TimedOut { program: name.clone(), limit: timeout })
            }
            Ok(None) => std::thread::sleep(POLL),
            Err(source) => break Err(ChildError::Wait { program: name.clone(), source }),
        }
    };
    if status.is_err() {
        // By its pid (`Child::kill`), which it still holds: it has not been reaped.
        let _ = child.kill();
        let _ = child.wait();
    }
    let _ = feeder.join();
    let output = match (output, reader) {
        (Some(read), _) => read,
        (None, Some(r)) => r.join().unwrap_or_else(|_| Ok(Vec::new())),
        (None, None) => Ok(Vec::new()),
    };
    let stderr = complainer.join().unwrap_or_default();
    let status = status?;
    let output = output.map_err(|source| ChildError::Wait { program: name.clone(), source })?;
    if output.len() > max_output {
        return Err(ChildError::TooMuchOutput { program: name, limit: max_output });
    }
    if !status.success() {
        return Err(ChildError::Failed { program: name, status, stderr });
    }
    Ok(output)
}

/// Where `program` is: itself when it names a path (has a `/`), else the first executable
/// file of that name on `PATH`; `None` when there is none.
pub fn find_program(program: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable =
        |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if program.contains('/') {
        let path = PathBuf::from(program);
        return executable(&path).then_some(path);
    }
    if program.is_empty() {
        return None;
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(program)).find(|p| executable(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["-c".to_string(), script.to_string()]
    }

    #[test]
    fn stdin_goes_in_and_stdout_comes_back() {
        let out = run(Path::new("/bin/sh"), &sh("cat"), b"hello".to_vec(), Duration::from_secs(10), 100);
        assert_eq!(out.unwrap(), b"hello");
    }

    #[test]
    fn a_failure_says_what_the_child_said() {
        let e = run(
            Path::new("/bin/sh"),
            &sh("echo no decoder >&2; exit 3"),
            Vec::new(),
            Duration::from_secs(10),
            100,
        )
        .unwrap_err();
        assert!(matches!(&e, ChildError::Failed { stderr, .. } if stderr == "no decoder"), "{e}");
    }

    #[test]
    fn a_child_past_its_time_is_stopped() {
        let started = Instant::now();
        let e = run(Path::new("/bin/sh"), &sh("exec sleep 30"), Vec::new(), Duration::from_millis(200), 100)
            .unwrap_err();
        assert!(matches!(e, ChildError::TimedOut { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(20), "killed, not waited for");
    }

    #[test]
    fn output_past_its_bound_is_refused() {
        let e =
            run(Path::new("/bin/sh"), &sh("head -c 1000 /dev/zero"), Vec::new(), Duration::from_secs(10), 10)
                .unwrap_err();
        assert!(matches!(e, ChildError::TooMuchOutput { .. }), "{e}");
    }

    #[test]
    fn programs_are_found_on_the_path_or_by_path() {
        assert_eq!(find_program("/bin/sh"), Some(PathBuf::from("/bin/sh")));
        assert!(find_program("sh").is_some());
        assert_eq!(find_program("no-such-program-anywhere"), None);
        assert_eq!(find_program("/no/such/program"), None);
    }
}
