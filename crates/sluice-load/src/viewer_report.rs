//! What the reports of viewer runs (`sluice load http --hls/--dash`'s players and `sluice load
//! rtsp`'s viewers) share: reading their JSON back (the lab; `crate::output` writes it) and the
//! lines of the text summary that read alike (the run's head, failures
//! by kind, the first failed viewer), and the live counts every viewer run keeps ([`ViewerCounts`]). Each report owns its own figures and the lines only it has;
//! this module measures nothing.

use std::io::{self, Write};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::LoadError;

/// What every viewer run counts as its viewers go, for the live display (relaxed atomics: a
/// display, not a measurement); each run's live counters add their own figures beside these.
#[derive(Debug, Default)]
pub(crate) struct ViewerCounts {
    pub started: AtomicU64,
    pub playing: AtomicU64,
    pub ended: AtomicU64,
    pub failed: AtomicU64,
}

impl ViewerCounts {
    /// (started, playing, ended, failed) now.
    pub(crate) fn now(&self) -> (u64, u64, u64, u64) {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        (get(&self.started), get(&self.playing), get(&self.ended), get(&self.failed))
    }
}

/// Reads a report `crate::output::JsonReport` wrote.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, LoadError> {
    serde_json::from_str(text).map_err(|e| LoadError::InvalidReport(e.to_string()))
}

/// The run's head: `sluice load <command>: N viewer(s)<how>, ramp, threads, duration`, then the
/// URL.
#[allow(clippy::too_many_arguments)] // one line of a report, each argument a figure on it
pub(crate) fn write_head(
    out: &mut dyn Write,
    command: &str,
    viewers: usize,
    how: &str,
    ramp_ms: u64,
    threads: usize,
    duration_s: f64,
    url: &str,
) -> io::Result<()> {
    writeln!(
        out,
        "\n  sluice load {command}: {viewers} viewer(s){how}, ramp {:.1}s, {threads} thread(s), {duration_s:.1}s",
        ramp_ms as f64 / 1000.0,
    )?;
    writeln!(out, "    {url}")
}

/// `lead` and then every kind counted more than zero as ` name=count`, on one line.
pub(crate) fn write_counts(
    out: &mut dyn Write,
    lead: &str,
    counts: impl IntoIterator<Item = (&'static str, u64)>,
) -> io::Result<()> {
    write!(out, "{lead}")?;
    for (name, n) in counts {
        if n > 0 {
            write!(out, " {name}={n}")?;
        }
    }
    writeln!(out)
}

/// The first failed viewer's error, after `lead`, when a viewer failed.
pub(crate) fn write_first_error<'a>(
    out: &mut dyn Write,
    lead: &str,
    viewers: impl IntoIterator<Item = (usize, Option<&'a str>)>,
) -> io::Result<()> {
    match viewers.into_iter().find_map(|(index, error)| Some((index, error?))) {
        Some((index, error)) => writeln!(out, "{lead}viewer {index}: {error}"),
        None => Ok(()),
    }
}
