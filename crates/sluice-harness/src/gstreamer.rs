//! GStreamer's RTSP server (scripts/gst-rtsp-server.py, embedded here so a built lab needs no
//! checkout), run as a [`Process`] by a python3 that has GStreamer's bindings: the RTSP peer of
//! the lab's E5 and of the `sluice load rtsp` tests. Ready once the script prints its
//! `ready rtsp://...` line. It does not choose what to stream.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::process::Process;
use crate::HarnessError;

/// The repository's scripts/gst-rtsp-server.py.
pub const SCRIPT: &str = include_str!("../../../scripts/gst-rtsp-server.py");

/// The environment variable naming the python3 to run GStreamer's RTSP server with (default: the
/// system's `/usr/bin/python3`, then `python3` on `PATH`).
pub const PYTHON_ENV: &str = "SLUICE_LAB_PYTHON";

/// What a python3 needs for the script: GStreamer's bindings and the elements it links.
const CHECK: &str = "import gi\ngi.require_version('Gst', '1.0')\ngi.require_version('GstPbutils', '1.0')\ngi.require_version('GstRtspServer', '1.0')\nfrom gi.repository import Gst, GstPbutils, GstRtspServer\nGst.init(None)\nmissing = [e for e in ('qtdemux', 'h264parse', 'rtph264pay', 'aacparse', 'rtpmp4gpay') if Gst.ElementFactory.find(e) is None]\nif missing: raise SystemExit('missing GStreamer elements: ' + ', '.join(missing))\nprint(Gst.version_string())\n";

/// The python3 that can run GStreamer's RTSP server, and GStreamer's version; or why there is
/// none. Looked up once per process.
pub fn python() -> &'static Result<(PathBuf, String), String> {
    static FOUND: OnceLock<Result<(PathBuf, String), String>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let candidates: Vec<PathBuf> = match std::env::var_os(PYTHON_ENV) {
            Some(p) => vec![PathBuf::from(p)],
            None => ["/usr/bin/python3", "python3"].iter().filter_map(|p| crate::find_tool(p).ok()).collect(),
        };
        let mut why = Vec::new();
        for python in candidates {
            match Command::new(&python).args(["-c", CHECK]).stdin(Stdio::null()).output() {
                Ok(out) if out.status.success() => {
                    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
                    return Ok((python, version));
                }
                Ok(out) => {
                    let err = String::from_utf8_lossy(&out.stderr);
                    why.push(format!("{}: {}", python.display(), err.trim().lines().last().unwrap_or("failed")));
                }
                Err(e) => why.push(format!("{}: {e}", python.display())),
            }
        }
        let why = if why.is_empty() { "no python3 found".to_string() } else { why.join("; ") };
        Err(format!(
            "GStreamer's Python bindings are missing ({why}); scripts/test installs python3-gi, gir1.2-gst-rtsp-server-1.0 and gstreamer1.0-plugins-base/-good/-bad"
        ))
    })
}

/// A running GStreamer RTSP server.
#[derive(Debug)]
pub struct GstRtspServer {
    process: Process,
    /// Where it serves the file, `rtsp://127.0.0.1:PORT/NAME`.
    pub url: String,
}

impl GstRtspServer {
    /// Serves `file` as `name` on 127.0.0.1:`port` (0: a port of its choosing) with the
    /// script's `extra` flags (`--no-shared`, ...); the script and its log `server.log` go to
    /// `work`; `prepare` adjusts the command first. Waits (at most 20 s) for its `ready` line.
    pub fn start(
        file: &Path,
        name: &str,
        port: u16,
        extra: &[String],
        work: &Path,
        prepare: impl FnOnce(&mut Command),
    ) -> Result<GstRtspServer, HarnessError> {
        let python = python()
            .as_ref()
            .map_err(|why| HarnessError::ToolMissing {
                tool: "GStreamer's RTSP server".into(),
                hint: why.clone(),
            })?
            .0
            .clone();
        let script = crate::write_into(work, "gst-rtsp-server.py", SCRIPT)?;
        let mut command = Command::new(python);
        command.arg(&script).arg(file).args(["--port", &port.to_string(), "--name", name]).args(extra);
        prepare(&mut command);
        let mut process = Process::spawn("GStreamer's RTSP server", command, &work.join("server.log"))?;
        process.wait_ready(Duration::from_secs(20), |p| ready_url(&p.log_text()).is_some())?;
        let url = ready_url(&process.log_text()).unwrap_or_default();
        Ok(GstRtspServer { process, url })
    }

    /// Its process.
    pub fn into_process(self) -> Process {
        self.process
    }

    /// Stops its process group (SIGTERM, then SIGKILL after 5 s).
    pub fn stop(&mut self) {
        self.process.stop(crate::process::DROP_GRACE);
    }
}

/// The URL of the script's `ready rtsp://...` line.
fn ready_url(log: &str) -> Option<String> {
    log.lines().find_map(|l| l.strip_prefix("ready ")).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ready_line_gives_the_url() {
        assert_eq!(
            ready_url("warming up\nready rtsp://127.0.0.1:5/a.mp4\n").as_deref(),
            Some("rtsp://127.0.0.1:5/a.mp4")
        );
        assert_eq!(ready_url("ready"), None);
    }
}
