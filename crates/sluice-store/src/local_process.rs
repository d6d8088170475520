//! What the local helpers (SeaweedFS, toxiproxy) share about their processes: free loopback
//! ports, and a spawn that ties the child's life to this process. It does not know what runs.

use std::io;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::mpsc;

/// A port free on 127.0.0.1 now.
pub(crate) fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Spawns `command` with `PR_SET_DEATHSIG` = SIGKILL, from a thread that lives as long as the
/// process (the death signal follows the spawning thread), so a test binary that ends without
/// dropping the handle cannot leave the child running.
pub(crate) fn spawn_tied(mut command: Command) -> io::Result<Child> {
    // SAFETY: prctl is async-signal-safe; it only sets this child's parent-death signal.
    unsafe {
        command.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(command.spawn());
        loop {
            std::thread::park();
        }
    });
    rx.recv().map_err(|_| io::Error::other("spawner thread died"))?
}
