//! The engine's one error type: why an engine could not start or run. Errors of single
//! connections are not here; the engines count them and close the connection.

use std::net::SocketAddr;

/// Why an engine could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Binding or configuring the listening socket failed.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A system call the engine needs at start-up failed.
    #[error("{what}: {source}")]
    Setup {
        /// What was being set up.
        what: &'static str,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The configuration cannot work (e.g. zero workers).
    #[error("invalid engine configuration: {0}")]
    Config(String),
}
