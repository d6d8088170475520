//! The live progress display: an [`Observer`] that redraws one line per second on a terminal
//! (elapsed/planned, requests, ok, failed, dropped, active users, that second's p50/p99), and,
//! when stderr is not a terminal (CI, a log file), prints that line as plain text every
//! [`PLAIN_EVERY`] instead, so a long run still shows it is alive. The run itself is `run`'s;
//! this only shows it.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::run::{Observer, RunProgress};
use crate::stats::format_us;
use crate::stats::SecondSample;

/// How often the plain (non-terminal) progress line is printed.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Draws the progress line on stderr.
pub struct LiveProgress {
    bar: ProgressBar,
    /// Without a terminal: when the plain line was last printed.
    plain: Option<Instant>,
}

impl Default for LiveProgress {
    fn default() -> Self {
        LiveProgress::new()
    }
}

impl LiveProgress {
    /// A progress line on stderr, redrawn on a terminal, else printed every [`PLAIN_EVERY`].
    pub fn new() -> Self {
        let terminal = std::io::stderr().is_terminal();
        let target = if terminal { ProgressDrawTarget::stderr() } else { ProgressDrawTarget::hidden() };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message("starting");
        LiveProgress { bar, plain: (!terminal).then(Instant::now) }
    }
}

impl LiveProgress {
    /// Redraws the line with `message` (or prints it, without a terminal, when it is due).
    pub(crate) fn show(&mut self, message: String) {
        if let Some(last) = &mut self.plain {
            if last.elapsed() >= PLAIN_EVERY {
                *last = Instant::now();
                // A closed stderr is no reason to stop a run.
                let _ = writeln!(std::io::stderr(), "{message}");
            }
            return;
        }
        self.bar.set_message(message);
        self.bar.tick();
    }

    /// Removes the line.
    pub(crate) fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// Watches a run of viewers (`sluice load rtsp`'s, the players') second by second, on the thread
/// that runs it; `P` is what one second's progress says.
pub trait ViewerObserver<P> {
    /// Another second of the run has passed.
    fn on_second(&mut self, _progress: &P) {}
    /// Every viewer has stopped.
    fn on_finish(&mut self) {}
}

impl<P> ViewerObserver<P> for crate::NoObserver {}

impl<P: std::fmt::Display> ViewerObserver<P> for LiveProgress {
    fn on_second(&mut self, p: &P) {
        self.show(p.to_string());
    }

    fn on_finish(&mut self) {
        self.clear();
    }
}

/// The text of the line for one second.
pub fn progress_line(s: &SecondSample, p: &RunProgress) -> String {
    let planned = p.planned.map(|d| format!("/{:.0}s", d.as_secs_f64())).unwrap_or_default();
    format!(
        "{}s{planned}  sent {}  ok {}  failed {}  dropped {}  users in flight or arriving {}  {} req/s  p50 {}  p99 {}",
        p.elapsed.as_secs(),
        p.sent,
        p.ok,
        p.failed,
        p.dropped,
        s.active_users,
        s.ok + s.failed,
        format_us(s.p50_us as f64),
        format_us(s.p99_us as f64)
    )
}

impl Observer for LiveProgress {
    fn on_second(&mut self, sample: &SecondSample, progress: &RunProgress) {
        self.show(progress_line(sample, progress));
    }

    fn on_finish(&mut self) {
        self.bar.finish_and_clear();
    }
}

/// Awaits `tasks` in order (one that panicked yields `panicked(index)`), calling `tick` with the
/// time since `start` once a second meanwhile: the viewer runs' loop (RTSP and stream players).
pub(crate) async fn join_ticking<T: Send + 'static>(
    tasks: Vec<tokio::task::JoinHandle<T>>,
    start: tokio::time::Instant,
    panicked: impl Fn(usize) -> T,
    mut tick: impl FnMut(Duration),
) -> Vec<T> {
    let all = async {
        let mut results = Vec::with_capacity(tasks.len());
        for (index, task) in tasks.into_iter().enumerate() {
            results.push(task.await.unwrap_or_else(|_| panicked(index)));
        }
        results
    };
    tokio::pin!(all);
    let second = Duration::from_secs(1);
    let mut ticks = tokio::time::interval_at(start + second, second);
    loop {
        tokio::select! {
            results = &mut all => return results,
            now = ticks.tick() => tick(now - start),
        }
    }
}
