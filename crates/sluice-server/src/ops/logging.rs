//! Log output that can never take the server down.
//!
//! Owns where log lines go (stderr, or a file reopened on request for logrotate) and the rule
//! that a log write never fails, never panics and never blocks a loop: every line is handed to a
//! bounded queue with `try_send`, and one writer thread writes the queue out. A full queue (a
//! blocked pipe, a slow disk) or a failed write (a closed pipe, a full disk) drops the line and
//! counts it ([`dropped_lines`], exported at `/metrics`). It does not own the format or the
//! filter (`tracing-subscriber`, set up by the binary).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Duration;

/// Lines queued for the writer before new ones are dropped: a few seconds of a busy access log.
const QUEUE_LINES: usize = 16 * 1024;

static DROPPED: AtomicU64 = AtomicU64::new(0);

/// Log lines dropped since start: the queue was full, or the write failed.
pub fn dropped_lines() -> u64 {
    DROPPED.load(Ordering::Relaxed)
}

enum Message {
    Line(Vec<u8>),
    /// Answered once every line queued before it has been written (or dropped).
    Flush(SyncSender<()>),
}

/// Where lines go: clone it into `tracing_subscriber::fmt().with_writer(..)`.
#[derive(Clone)]
pub struct LogSink {
    queue: SyncSender<Message>,
    reopen: Arc<AtomicBool>,
}

impl std::fmt::Debug for LogSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogSink").finish_non_exhaustive()
    }
}

impl LogSink {
    /// Starts the writer thread, writing to `file` (appended to, created if missing) or stderr.
    pub fn start(file: Option<PathBuf>) -> io::Result<LogSink> {
        let target = match &file {
            Some(path) => Target::File(open_log(path)?, path.clone()),
            None => Target::Stderr,
        };
        let (queue, lines) = mpsc::sync_channel(QUEUE_LINES);
        let reopen = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&reopen);
        std::thread::Builder::new()
            .name("sluice-log".into())
            .spawn(move || write_out(lines, target, &flag))?;
        Ok(LogSink { queue, reopen })
    }

    /// Asks the writer to reopen the log file before its next line (SIGUSR1, after logrotate has
    /// moved it). Does nothing for stderr.
    pub fn reopen(&self) {
        self.reopen.store(true, Ordering::Relaxed);
    }

    /// Waits at most `limit` for the lines queued so far to be written, so that the last lines
    /// before exit are not lost.
    pub fn flush(&self, limit: Duration) {
        let (done, wait) = mpsc::sync_channel(1);
        if self.queue.try_send(Message::Flush(done)).is_ok() {
            let _ = wait.recv_timeout(limit);
        }
    }

    fn send(&self, line: Vec<u8>) {
        match self.queue.try_send(Message::Line(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                DROPPED.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

enum Target {
    Stderr,
    File(File, PathBuf),
}

fn open_log(path: &std::path::Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

fn write_out(lines: Receiver<Message>, mut target: Target, reopen: &AtomicBool) {
    while let Ok(message) = lines.recv() {
        let line = match message {
            Message::Line(line) => line,
            Message::Flush(done) => {
                let _ = done.try_send(());
                continue;
            }
        };
        if reopen.swap(false, Ordering::Relaxed) {
            if let Target::File(file, path) = &mut target {
                // A file that cannot be reopened keeps the old descriptor: lines still go
                // somewhere rather than nowhere.
                if let Ok(fresh) = open_log(path) {
                    *file = fresh;
                }
            }
        }
        let written = match &mut target {
            Target::Stderr => io::stderr().lock().write_all(&line),
            Target::File(file, _) => file.write_all(&line),
        };
        if written.is_err() {
            DROPPED.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Starts the writer and installs the global `tracing` subscriber the `[log]` settings describe.
pub fn init(log: &crate::config::LogSection) -> Result<LogSink, crate::config::ConfigError> {
    use crate::config::{ConfigError, LogFormat};
    let filter = tracing_subscriber::EnvFilter::try_new(&log.level).map_err(|e| {
        ConfigError::Invalid(format!(
            "log.level `{}`: {e} (expected a filter such as info, debug or \"info,sluice::access=off\")",
            log.level
        ))
    })?;
    let sink = LogSink::start(log.file.clone())
        .map_err(|source| ConfigError::Read { path: log.file.clone().unwrap_or_default(), source })?;
    let ansi = log.file.is_none() && std::io::IsTerminal::is_terminal(&std::io::stderr());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(sink.clone());
    // A second init (tests calling twice) keeps the first subscriber.
    let _ = match log.format {
        LogFormat::Human => builder.with_ansi(ansi).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    Ok(sink)
}

/// One event's bytes, queued as one line when the formatter is done with it.
pub struct LineWriter<'a> {
    sink: &'a LogSink,
    line: Vec<u8>,
}

impl Write for LineWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter<'_> {
    fn drop(&mut self) {
        if !self.line.is_empty() {
            self.sink.send(std::mem::take(&mut self.line));
        }
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogSink {
    type Writer = LineWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter { sink: self, line: Vec::with_capacity(256) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::fmt::MakeWriter;

    #[test]
    fn lines_reach_the_file_and_a_reopen_follows_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sluice.log");
        let sink = LogSink::start(Some(path.clone())).unwrap();
        writeln!(sink.make_writer(), "one").unwrap();
        sink.flush(Duration::from_secs(5));
        std::fs::rename(&path, dir.path().join("sluice.log.1")).unwrap();
        sink.reopen();
        writeln!(sink.make_writer(), "two").unwrap();
        sink.flush(Duration::from_secs(5));
        assert_eq!(std::fs::read_to_string(dir.path().join("sluice.log.1")).unwrap(), "one\n");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two\n");
    }
}
