//! The RTSP server cores the engine's loops drive: for each loop, one `sluice-rtsp`
//! [`RtspServer`] over the server's [`RtspMedia`], with its own session table (sharing the
//! `--rtsp-max-viewers` places with the other loops' tables) on the loop's UDP ports, reporting
//! what the loop counts to the engine and the rest (the RTSP access log, sessions started and
//! ended, files it cannot stream) to the server's log, beside HTTP's access log.
//!
//! Owns that wiring only: what the core does is `sluice-rtsp`'s (whether a viewer is admitted or
//! refused, and why, is `sluice_rtsp::admission`), the loops are the engine's.

use std::sync::Arc;

use sluice_engine::rtsp::{LoopNote, LoopSetup, RtspCore};
use sluice_rtsp::{Note, Observer, RtspConfig, RtspServer, SessionTable, ViewerBudget};

use crate::rtsp::media::RtspMedia;

/// What the engine asks for an RTSP core for each loop.
pub struct Cores {
    config: RtspConfig,
    media: Arc<RtspMedia>,
    budget: Arc<ViewerBudget>,
}

impl Cores {
    /// Cores with `config`, serving `media`.
    pub fn new(config: RtspConfig, media: Arc<RtspMedia>) -> Cores {
        let budget = ViewerBudget::new(config.max_viewers);
        Cores { config, media, budget }
    }
}

impl sluice_engine::rtsp::RtspCores for Cores {
    fn core<'a, T: 'a>(
        &'a self,
        setup: LoopSetup,
        counters: &'a dyn Fn(LoopNote<'_>),
    ) -> Box<dyn RtspCore<T> + 'a> {
        let mut config = self.config.clone();
        config.udp_server_ports = Some(setup.udp_ports);
        let table = SessionTable::with_entropy(config, os_entropy).sharing(Arc::clone(&self.budget));
        Box::new(RtspServer::new(table, &*self.media, LoopLog { counters }, setup.now))
    }
}

/// A core's reports: counted by the loop, and logged here.
struct LoopLog<'a> {
    counters: &'a dyn Fn(LoopNote<'_>),
}

impl Observer for LoopLog<'_> {
    fn note(&self, note: Note<'_>) {
        if let Some(counted) = note.counted() {
            (self.counters)(counted);
        }
        crate::http::app::log_rtsp(&note);
    }
}

/// Random numbers for the core's session ids and RTP identities, from the OS.
fn os_entropy() -> u64 {
    // getrandom fails only when the OS has no entropy source at all; a server cannot issue
    // unguessable ids then, and must not pretend to.
    getrandom::u64().expect("the OS random number generator is unavailable")
}

#[cfg(test)]
mod tests {
    #[test]
    fn os_entropy_differs_call_to_call() {
        let draws: std::collections::HashSet<u64> = (0..64).map(|_| super::os_entropy()).collect();
        assert_eq!(draws.len(), 64);
    }
}
