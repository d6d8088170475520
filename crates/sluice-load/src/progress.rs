//! The live one-line progress display on a terminal: an [`Observer`] that redraws one line per
//! second (elapsed/planned, requests, ok, failed, dropped, active users, that second's p50/p99).
//! It draws only when stderr is a terminal, so logs and CI output stay clean. The run itself is
//! `run`'s; this only shows it.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::run::{Observer, RunProgress};
use crate::stats::SecondSample;
use crate::threshold::format_us;

/// Draws the progress line on stderr.
pub struct LiveProgress {
    bar: ProgressBar,
}

impl Default for LiveProgress {
    fn default() -> Self {
        LiveProgress::new()
    }
}

impl LiveProgress {
    /// A progress line on stderr, hidden when stderr is not a terminal.
    pub fn new() -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message("starting");
        LiveProgress { bar }
    }
}

impl LiveProgress {
    /// Redraws the line with `message`.
    pub(crate) fn show(&self, message: String) {
        self.bar.set_message(message);
        self.bar.tick();
    }

    /// Removes the line.
    pub(crate) fn clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// The text of the line for one second.
pub fn progress_line(s: &SecondSample, p: &RunProgress) -> String {
    let planned = p.planned.map(|d| format!("/{:.0}s", d.as_secs_f64())).unwrap_or_default();
    format!(
        "{}s{planned}  sent {}  ok {}  failed {}  dropped {}  active {}  {} req/s  p50 {}  p99 {}",
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
        self.bar.set_message(progress_line(sample, progress));
        self.bar.tick();
    }

    fn on_finish(&mut self) {
        self.bar.finish_and_clear();
    }
}
