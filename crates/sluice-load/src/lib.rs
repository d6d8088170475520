//! sluice's HTTP load generator (`sluice load http`) as a library: a closed model (virtual users
//! that send, wait for the whole response, and send again) and an open model (arrivals on a
//! staged schedule, timed from their scheduled send time so queueing is never hidden), a minimal
//! HTTP/1.1 client over tokio with a sans-I/O response reader, HDR histograms, errors by kind, a
//! per-second series, thresholds, and the summary/JSON/CSV outputs; and RTSP viewers
//! (`sluice load rtsp`, module [`rtsp`]) that count the video samples each of N clients receives;
//! and stream players (`sluice load http --hls/--dash`, module [`player`]) that play HLS or DASH
//! as viewers would, counting stalls and rendition switches.
//!
//! It owns generating load and describing the result. It does not own the command line (the
//! `sluice` binary parses flags into a [`LoadConfig`]) nor any server.
//!
//! ```no_run
//! use sluice_load::{run, LoadConfig, NoObserver, TargetSpec};
//! let target = TargetSpec::parse("http://127.0.0.1:8080/bench/hello").unwrap();
//! let config = LoadConfig::closed(vec![target], 10, Some(std::time::Duration::from_secs(5)), None);
//! let report = run(&config, &mut NoObserver).unwrap();
//! println!("{} ok, p99 {} µs", report.requests.ok, report.latency.p99_us);
//! ```

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod args;
pub mod board;
pub mod client;
mod closed;
pub mod config;
pub use sluice_proto::duration_text;
pub mod error;
pub mod limits;
mod open;
pub mod output;
pub mod payload;
pub mod player;
pub mod progress;
pub mod report;
pub mod rtsp;
pub mod run;
pub mod scenario_file;
pub mod schedule;
pub mod stats;
mod stop_flag;
#[allow(unsafe_code)]
mod sys;
pub mod target;
pub mod threshold;
mod timer;
pub mod upload;
pub(crate) mod viewer_report;
mod worker;

pub use client::{ConnectionMode, ExpectedStatus};
pub use config::{ClosedModel, LoadConfig, Model, OpenModel};
pub use error::LoadError;
pub use output::{write_file, CsvSeries, JsonReport, ReportWriter, TextSummary};
pub use progress::{LiveProgress, ViewerObserver};
pub use report::Report;
pub use report::ThresholdResult;
pub use run::{run, NoObserver, Observer, RunProgress};
pub use schedule::{Scenario, Stage};
pub use stats::{ErrorKind, LatencySummary, SecondSample};
pub use stop_flag::StopFlag;
pub use target::{Method, TargetSpec};
pub use threshold::Threshold;
