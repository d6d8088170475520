//! The lab's errors: what went wrong and with which experiment, file or process. A peer that is
//! missing is not an error (it becomes a skipped row); these are the failures that stop a run.

use std::path::PathBuf;

/// Why the lab could not go on.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// No experiment has that name.
    #[error("no experiment named `{0}` (try `sluice lab list`)")]
    UnknownExperiment(String),
    /// An experiment's declaration is malformed.
    #[error("experiment `{name}`: {message}")]
    BadExperiment {
        /// The experiment.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The load generator refused a configuration.
    #[error("load generator: {0}")]
    Load(#[from] sluice_load::LoadError),
    /// Load options that do not make a run.
    #[error("load generator: {0}")]
    LoadArgs(#[from] sluice_load::args::ArgsError),
    /// Results could not be encoded.
    #[error("encoding results: {0}")]
    Encode(#[from] serde_json::Error),
}

impl LabError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        LabError::Io { path: path.into(), source }
    }
}
