//! sluice's lab as a library: the published I/O experiments (EXPERIMENTS.md E1–E5) declared as
//! data, a runner that starts each server configuration as its own process (sluice with each
//! engine, send strategy and execution model; nginx with a generated configuration; GStreamer's
//! RTSP server; iperf3 for the loopback reference), drives it with `sluice-load` (HTTP users or
//! RTSP viewers of a file it generates with ffmpeg), reads its CPU time from `/proc` and its
//! counters from `/metrics`, and a report writer that turns the rows into `results.json`, CSVs and
//! one self-contained HTML page. Capacity rows run each server under one CPU budget (a cgroup
//! quota, `budget`) and several alternating rounds, and each report checks the source reports'
//! claims against its rows (`claims`).
//!
//! It owns experiments, peers, the runner and reports. It does not own load generation
//! (`sluice-load`), the server (`sluice-server`, started as a process) or the command line (the
//! `sluice` binary).

#![deny(missing_docs)]
#![deny(unsafe_code)]

// Dependencies point one way, from the bottom up (no module imports one from a later layer):
// definitions (`error`, `metrics`, `content`, `server_spec`, `report_spec`, `experiment`), the
// machine (`machine`, `budget`), what a run found (`figures`, `rtsp_figures`, `results`), what
// reads it (`claims`, `findings`, `csv`, `method`, `pivot`, `markdown`, `charts`, `row_tables`,
// `report`, `output`), and running (`ceiling`, `peer`, `stop`, `progress`, `runner`).
pub mod budget;
pub mod ceiling;
pub mod charts;
pub mod claims;
pub mod content;
pub mod csv;
pub mod error;
pub mod experiment;
pub mod figures;
pub mod findings;
pub mod machine;
pub mod markdown;
pub mod method;
pub mod metrics;
pub mod output;
pub mod peer;
pub mod pivot;
pub mod progress;
pub mod report;
pub mod report_spec;
pub mod results;
pub mod row_tables;
pub mod rtsp_figures;
pub mod runner;
pub mod server_spec;
pub mod stop;
#[allow(unsafe_code)]
mod sys;

pub use error::LabError;
pub use experiment::{builtin, Experiment};
pub use results::{ExperimentResults, Measurement, Row, RowOutcome};
pub use runner::{run_experiment, RunOptions};
