//! A local toxiproxy (Shopify's TCP fault proxy, `go install
//! github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0`, installed as `$(go env GOPATH)/bin/server`)
//! for tests and the lab: it puts a modelled round trip (latency toxics) or faults (`reset_peer`)
//! between a client and a store on 127.0.0.1. Started on a free port, driven through its HTTP API,
//! killed by pid when dropped. It owns no store and is not used by `sluice serve`.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::local_process::{free_port, spawn_tied};
use crate::loopback_http::request;

/// A running toxiproxy server.
#[derive(Debug)]
pub struct Toxiproxy {
    child: Child,
    api: SocketAddr,
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

    /// Starts the server on a free loopback port and waits (at most 10 s) for its API.
    pub fn start(log: &Path) -> io::Result<Toxiproxy> {
        let bin = binary().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "toxiproxy missing: go install github.com/Shopify/toxiproxy/v2/cmd/server@v2.5.0",
            )
        })?;
        let port = free_port()?;
        let log = std::fs::File::create(log)?;
        let mut command = Command::new(bin);
        command
            .args(["-host", "127.0.0.1", "-port", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        let proxy = Toxiproxy { child: spawn_tied(command)?, api: SocketAddr::from(([127, 0, 0, 1], port)) };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !matches!(request(proxy.api, "GET", "/version", None), Ok((200, _))) {
            if Instant::now() > deadline {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "toxiproxy did not start in 10 s"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(proxy)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Creates proxy `name` on a free loopback port in front of `upstream`; returns its address.
    pub fn proxy(&self, name: &str, upstream: SocketAddr) -> io::Result<SocketAddr> {
        let listen = SocketAddr::from(([127, 0, 0, 1], free_port()?));
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
    ) -> io::Result<()> {
        let body = format!(
            r#"{{"name":"{toxic}","type":"{kind}","stream":"{}","toxicity":{toxicity},"attributes":{attributes}}}"#,
            stream.name()
        );
        self.call("POST", &format!("/proxies/{proxy}/toxics"), &body)
    }

    /// Removes toxic `toxic` from proxy `proxy` (no error when it is not there).
    pub fn remove_toxic(&self, proxy: &str, toxic: &str) -> io::Result<()> {
        match request(self.api, "DELETE", &format!("/proxies/{proxy}/toxics/{toxic}"), None)? {
            (204 | 404, _) => Ok(()),
            (status, body) => {
                Err(io::Error::other(format!("toxiproxy: DELETE toxic {toxic}: {status} {body}")))
            }
        }
    }

    /// Enables or disables proxy `proxy`; disabling closes its connections and stops listening,
    /// as if the upstream had gone away at once.
    pub fn set_enabled(&self, proxy: &str, enabled: bool) -> io::Result<()> {
        self.call("POST", &format!("/proxies/{proxy}"), &format!(r#"{{"enabled":{enabled}}}"#))
    }

    /// The round trip the lab models: a latency toxic of `each_way` on both streams.
    pub fn set_latency(&self, proxy: &str, each_way: Option<Duration>) -> io::Result<()> {
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

    fn call(&self, method: &str, path: &str, body: &str) -> io::Result<()> {
        match request(self.api, method, path, Some(body))? {
            (200..=299, _) => Ok(()),
            (status, text) => Err(io::Error::other(format!("toxiproxy: {method} {path}: {status} {text}"))),
        }
    }
}

impl Drop for Toxiproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
