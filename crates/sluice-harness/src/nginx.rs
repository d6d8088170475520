//! nginx run on a configuration its caller writes (the lab's static rows and caching proxy):
//! `nginx -p WORK -c WORK/nginx.conf -e WORK/error.log` as a [`Process`], ready once it
//! accepts on its port. The configuration's content is the caller's.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::process::Process;
use crate::HarnessError;

/// A running nginx.
#[derive(Debug)]
pub struct Nginx {
    process: Process,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

/// Whether `nginx -V` lists the slice module (`proxy_cache` with `slice`).
pub fn has_slice_module() -> bool {
    crate::find_tool("nginx").is_ok_and(|program| {
        Command::new(program)
            .arg("-V")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stderr).contains("--with-http_slice_module"))
    })
}

impl Nginx {
    /// Writes `config` (which must listen on 127.0.0.1:`port` and keep nginx in the foreground:
    /// `daemon off;`) to `work/nginx.conf` and starts nginx on it, its output in
    /// `work/server.log`, with `prepare` adjusting the command first; waits until it accepts.
    pub fn start(
        config: &str,
        port: u16,
        work: &Path,
        prepare: impl FnOnce(&mut Command),
    ) -> Result<Nginx, HarnessError> {
        let program = crate::find_tool("nginx")?;
        let conf = crate::write_into(work, "nginx.conf", config)?;
        let mut command = Command::new(program);
        command.arg("-p").arg(work).arg("-c").arg(&conf).arg("-e").arg(work.join("error.log"));
        prepare(&mut command);
        let mut process = Process::spawn("nginx", command, &work.join("server.log"))?;
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        process.wait_ready(Duration::from_secs(15), |_| TcpStream::connect(addr).is_ok())?;
        Ok(Nginx { process, port })
    }

    /// Its process.
    pub fn into_process(self) -> Process {
        self.process
    }
}
