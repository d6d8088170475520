//! The typed errors of this crate: everything that stops a run from starting or finishing
//! (bad targets, bad scenarios, bad thresholds, I/O while setting up or writing results). Errors of
//! individual requests are not here: they are counted by kind in `stats::ErrorKind`, because a load
//! run reports them rather than stopping on them.

use std::path::PathBuf;

/// Why a load run could not be configured, started or written out.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// A target URL that this tool cannot use.
    #[error("invalid target `{url}`: {reason}")]
    InvalidTarget {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A target that resolves outside loopback without the explicit permission flag.
    #[error(
        "target `{url}` resolves to {addr}, which is not a loopback address; \
         pass --allow-non-loopback to load anything but this machine"
    )]
    NonLoopbackTarget {
        /// The URL as given.
        url: String,
        /// The address it resolved to.
        addr: std::net::SocketAddr,
    },
    /// A stream's manifest (HLS playlist or DASH MPD) could not be fetched or understood.
    #[error("cannot play {url}: {reason}")]
    Manifest {
        /// The manifest's URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
    /// The run's settings contradict each other or leave it unbounded.
    #[error("invalid load settings: {0}")]
    InvalidConfig(String),
    /// A stage description (command line `--stage` or scenario file) that does not parse.
    #[error("invalid stage `{text}`: {reason}")]
    InvalidStage {
        /// The stage as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A scenario file that could not be read.
    #[error("cannot read scenario file {path}: {source}")]
    ScenarioRead {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A scenario file that is not valid TOML for this format.
    #[error("invalid scenario file {path}: {message}")]
    ScenarioParse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A threshold expression that does not parse.
    #[error("invalid threshold `{text}`: {reason}")]
    InvalidThreshold {
        /// The expression as given.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The worker threads or their runtimes could not be started.
    #[error("cannot start the load workers: {0}")]
    Runtime(std::io::Error),
    /// A worker thread died instead of returning its results.
    #[error("a load worker thread panicked")]
    WorkerPanicked,
    /// A JSON report that does not parse as one.
    #[error("invalid JSON report: {0}")]
    InvalidReport(String),
    /// Writing a result file failed.
    #[error("cannot write {path}: {source}")]
    Output {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
}

impl LoadError {
    /// Whether the user must change the command line or a file (exit status 2) rather than a
    /// run having failed (1).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            LoadError::InvalidTarget { .. }
                | LoadError::NonLoopbackTarget { .. }
                | LoadError::InvalidConfig(_)
                | LoadError::InvalidStage { .. }
                | LoadError::ScenarioRead { .. }
                | LoadError::ScenarioParse { .. }
                | LoadError::InvalidThreshold { .. }
        )
    }
}
