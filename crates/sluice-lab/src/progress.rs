//! What a lab run says while it runs: on a terminal, a progress bar (rows done, time left, what
//! the current row is doing each second); elsewhere (a pipe, a log file), one line per finished
//! row on stderr, so stdout keeps only the run's summary. `--no-progress` silences both. It
//! measures and records nothing.

use std::io::IsTerminal as _;

use indicatif::{ProgressBar, ProgressStyle};
use sluice_load::rtsp::RtspProgress;
use sluice_load::ViewerObserver;
use sluice_load::{Observer, RunProgress, SecondSample};

/// A run's progress: the bar (hidden off a terminal) and, off a terminal, a line per row.
pub struct Progress {
    /// The bar every row tells what it is doing (drawn on a terminal only).
    pub bar: ProgressBar,
    /// Print a line per finished row on stderr (not a terminal).
    lines: bool,
    /// `E3 io-models`.
    prefix: String,
}

impl Progress {
    /// Progress of `len` rows of the experiment `prefix` names; `show`: `false` for
    /// `--no-progress`.
    pub fn new(show: bool, len: u64, prefix: &str) -> Progress {
        let terminal = std::io::stderr().is_terminal();
        let bar = if show && terminal { bar(len, prefix) } else { ProgressBar::hidden() };
        // A hidden bar still counts the rows (the lines and the partial run's total read it).
        bar.set_length(len);
        Progress { bar, lines: show && !terminal, prefix: prefix.to_string() }
    }

    /// Another row is on record: `label`, with its status.
    pub fn row_done(&self, rows_done: usize, rows_planned: u64, label: &str, status: &str) {
        if self.lines {
            eprintln!("{}: row {rows_done}/{rows_planned} {status}: {label}", self.prefix);
        }
    }
}

fn bar(len: u64, prefix: &str) -> ProgressBar {
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} {elapsed_precise}, about {eta} left\n  {wide_msg}",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    bar.set_prefix(prefix.to_string());
    bar
}

/// Tells the bar each second of an HTTP row.
pub struct BarObserver<'a> {
    /// The run's bar.
    pub bar: &'a ProgressBar,
    /// The row's name.
    pub label: String,
}

impl Observer for BarObserver<'_> {
    fn on_second(&mut self, _sample: &SecondSample, p: &RunProgress) {
        let planned = p.planned.map(|d| format!("/{}s", d.as_secs())).unwrap_or_default();
        self.bar.set_message(format!(
            "{}: {}s{planned}, {} ok, {} failed",
            self.label,
            p.elapsed.as_secs(),
            p.ok,
            p.failed + p.dropped
        ));
    }
}

/// Tells the bar each second of an RTSP row.
pub struct RtspBarObserver<'a> {
    /// The run's bar.
    pub bar: &'a ProgressBar,
    /// The row's name.
    pub label: String,
}

impl ViewerObserver<RtspProgress> for RtspBarObserver<'_> {
    fn on_second(&mut self, p: &RtspProgress) {
        self.bar.set_message(format!("{}: {p}", self.label));
    }
}
