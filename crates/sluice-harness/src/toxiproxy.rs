//! A local toxiproxy (Shopify's TCP fault proxy, `go install
//! github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0`, installed as `$(go env GOPATH)/bin/server`)
//! for tests and the lab: it puts a modelled round trip (latency toxics) or faults (`reset_peer`)
//! between a client and a store on 127.0.0.1. Run as a [`Process`] on a free port, driven
//! through its HTTP API, stopped by process group when dropped. It owns no store.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::process::Process;
use crate::{free_port, HarnessError};

/// A running toxiproxy server.
#[derive(Debug)]
pub struct Toxiproxy {
    process: Process,
    api: SocketAddr,
}

/// `method path` on toxiproxy's API with a JSON body: status and body text.
fn request(
    api: SocketAddr,
    method: &str,
    path: &str,
    json: Option<&str>,
) -> Result<(u16, String), HarnessError> {
    let headers = [("Accept", "application/json"), ("Content-Type", "application/json")];
    let r = crate::http::request(api, method, path, &headers, json.map(str::as_bytes))?;
    Ok((r.status, r.text()))
}

fn free(what: &str) -> Result<u16, HarnessError> {
    free_port().map_err(|e| HarnessError::io(format!("finding a free port for {what}"), e))
}

/// The toxiproxy binary: `$TOXIPROXY`, else `server` in `$(go env GOPATH)/bin`, else in
/// `~/go/bin` (Go's default GOPATH).
pub fn binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TOXIPROXY") {
        return Some(PathBuf::from(p));
    }
    let gopath = Command::new("go")
        .args(["env", "GOPATH"])
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join("go")))?;
    let path = gopath.join("bin/server");
    path.is_file().then_some(path)
}

/// Which way a toxic acts: on what the client sends or on what it receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Client to upstream.
    Upstream,
    /// Upstream to client.
    Downstream,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

impl Toxiproxy {
    /// Whether the binary is installed.
    pub fn available() -> bool {
        binary().is_some()
    }

    /// Starts the server on a free loopback port, its output in `log`, and waits (at most
    /// 10 s) for its API.
    pub fn start(log: &Path) -> Result<Toxiproxy, HarnessError> {
        let bin = binary().ok_or_else(|| HarnessError::ToolMissing {
            tool: "toxiproxy".into(),
            hint: crate::tools::install_hint("toxiproxy"),
        })?;
        let port = free("toxiproxy")?;
        let mut command = Command::new(bin);
        command.args(["-host", "127.0.0.1", "-port", &port.to_string()]);
        let api = SocketAddr::from(([127, 0, 0, 1], port));
        let mut process = Process::spawn("toxiproxy", command, log)?;
        process.wait_ready(Duration::from_secs(10), |_| {
            matches!(request(api, "GET", "/version", None), Ok((200, _)))
        })?;
        Ok(Toxiproxy { process, api })
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// Creates proxy `name` on a free loopback port in front of `upstream`; returns its address.
    pub fn proxy(&self, name: &str, upstream: SocketAddr) -> Result<SocketAddr, HarnessError> {
        let listen = SocketAddr::from(([127, 0, 0, 1], free("a proxy")?));
        let body = format!(r#"{{"name":"{name}","listen":"{listen}","upstream":"{upstream}"}}"#);
        self.call("POST", "/proxies", &body)?;
        Ok(listen)
    }

    /// Adds toxic `toxic` (its name) of `kind` (`latency`, `reset_peer`, …) to proxy `proxy` on
    /// `stream`, acting on a `toxicity` share (0..=1) of connections, with `attributes` (a JSON
    /// object, e.g. `{"latency":55}`).
    pub fn add_toxic(
        &self,
        proxy: &str,
        toxic: &str,
        kind: &str,
        stream: Stream,
        toxicity: f64,
        attributes: &str,
    ) -> Result<(), HarnessError> {
        let body = format!(
            r#"{{"name":"{toxic}","type":"{kind}","stream":"{}","toxicity":{toxicity},"attributes":{attributes}}}"#,
            stream.name()
        );
        self.call("POST", &format!("/proxies/{proxy}/toxics"), &body)
    }

    /// Removes toxic `toxic` from proxy `proxy` (no error when it is not there).
    pub fn remove_toxic(&self, proxy: &str, toxic: &str) -> Result<(), HarnessError> {
        match request(self.api, "DELETE", &format!("/proxies/{proxy}/toxics/{toxic}"), None)? {
            (204 | 404, _) => Ok(()),
            (status, body) => Err(HarnessError::Refused {
                what: format!("toxiproxy: DELETE toxic {toxic}"),
                message: format!("{status} {body}"),
            }),
        }
    }

    /// Enables or disables proxy `proxy`; disabling closes its connections and stops listening,
    /// as if the upstream had gone away at once.
    pub fn set_enabled(&self, proxy: &str, enabled: bool) -> Result<(), HarnessError> {
        self.call("POST", &format!("/proxies/{proxy}"), &format!(r#"{{"enabled":{enabled}}}"#))
    }

    /// The round trip the lab models: a latency toxic of `each_way` on both streams.
    pub fn set_latency(&self, proxy: &str, each_way: Option<Duration>) -> Result<(), HarnessError> {
        for stream in [Stream::Upstream, Stream::Downstream] {
            let toxic = format!("latency_{}", stream.name());
            self.remove_toxic(proxy, &toxic)?;
            if let Some(d) = each_way {
                self.add_toxic(
                    proxy,
                    &toxic,
                    "latency",
                    stream,
                    1.0,
                    &format!(r#"{{"latency":{}}}"#, d.as_millis()),
                )?;
            }
        }
        Ok(())
    }

    fn call(&self, method: &str, path: &str, body: &str) -> Result<(), HarnessError> {
        match request(self.api, method, path, Some(body))? {
            (200..=299, _) => Ok(()),
            (status, text) => Err(HarnessError::Refused {
                what: format!("toxiproxy: {method} {path}"),
                message: format!("{status} {text}"),
            }),
        }
    }
}
