//! sluice's development harness, shared by the integration tests and the lab (`sluice-lab`), and
//! linked into neither `sluice serve` nor any other part of the `sluice` binary.
//!
//! It owns the one way a test or the lab runs another program ([`process::Process`]: its own
//! process group, tied to its parent's life, stopped by group, output in a log file), free
//! loopback ports ([`port`]), a small HTTP client for loopback control APIs ([`http`]), finding
//! tools with install hints ([`tools`]), and launchers for the real peers built on the process
//! type: SeaweedFS, toxiproxy, HAProxy, nginx and GStreamer's RTSP server. It knows nothing of
//! `sluice serve`'s flags (the tests and the lab start sluice themselves) and generates no load.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod error;
pub mod gstreamer;
pub mod haproxy;
pub mod http;
pub mod nginx;
pub mod port;
pub mod process;
pub mod seaweedfs;
#[allow(unsafe_code)]
mod sys;
pub mod tools;
pub mod toxiproxy;

pub use error::HarnessError;
pub use port::{free_port, free_ports};
pub use process::Process;
pub use tools::find_tool;

/// Writes `text` to `dir/name` (making `dir` first): a launcher's configuration or script.
fn write_into(dir: &std::path::Path, name: &str, text: &str) -> Result<std::path::PathBuf, HarnessError> {
    std::fs::create_dir_all(dir).map_err(|e| HarnessError::io(format!("creating {}", dir.display()), e))?;
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| HarnessError::io(format!("writing {}", path.display()), e))?;
    Ok(path)
}
