//! What can go wrong starting or driving a program of the harness. It does not decide what a
//! caller does about it (a test panics, the lab skips or fails a row).

use std::process::ExitStatus;
use std::time::Duration;

/// Why a harness operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// A program is not installed; `hint` says how to install it.
    #[error("{tool} not found: {hint}")]
    ToolMissing {
        /// The program looked for.
        tool: String,
        /// How to install it, e.g. `apt-get install nginx-light`.
        hint: String,
    },
    /// An I/O operation (spawning, a log file, a socket) failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A program exited before it was ready.
    #[error("{what} exited at start-up ({status}){tail}")]
    Exited {
        /// The program.
        what: String,
        /// Its exit status.
        status: ExitStatus,
        /// The last lines of its log, prefixed with `: `, or empty.
        tail: String,
    },
    /// A program did not become ready in time (it has been stopped).
    #[error("{what} was not ready within {limit:?}{tail}")]
    NotReady {
        /// The program.
        what: String,
        /// How long it was given.
        limit: Duration,
        /// The last lines of its log, prefixed with `: `, or empty.
        tail: String,
    },
    /// A program's API answered with an error.
    #[error("{what}: {message}")]
    Refused {
        /// The request.
        what: String,
        /// The answer.
        message: String,
    },
    /// [`crate::process::stop_all`] has run: no program starts any more.
    #[error("stopping: no program starts any more")]
    Stopping,
}

impl HarnessError {
    /// An [`HarnessError::Io`] for `what`.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> HarnessError {
        HarnessError::Io { what: what.into(), source }
    }
}
