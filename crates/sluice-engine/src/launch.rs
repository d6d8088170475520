//! What every engine starts with: the [`Service`] it runs, the [`Launch`] it is handed, and the
//! thread per listening socket the loop engines start ([`per_listener`]). Choosing the engine is
//! `crate::dispatch`'s; what each engine does with a connection is its own module's.

use std::net::SocketAddr;
use std::sync::Arc;

use sluice_proto::{Clock, Session};

use crate::config::EngineConfig;
use crate::counters::Counters;
use crate::error::EngineError;
use crate::listener::Listeners;
use crate::shutdown::Shutdown;

/// What an engine serves: a factory of sessions, shared by every worker.
pub trait Service: Send + Sync + 'static {
    /// One connection's protocol state.
    type Session: Session + Send + 'static;

    /// A session for a connection just accepted from `peer`.
    fn session(&self, peer: SocketAddr, clock: &Clock) -> Self::Session;
}

/// What [`crate::dispatch::run`] hands the engine it chose.
pub(crate) struct Launch<'a, S> {
    pub config: &'a EngineConfig,
    pub listeners: Listeners,
    pub service: Arc<S>,
    pub shutdown: &'a Shutdown,
    pub counters: &'a Arc<Counters>,
}

/// Runs `worker` once per listening socket, each on a thread of its own (one loop per core),
/// and waits for all of them; the first error, or a panic, is the engine's result.
pub(crate) fn per_listener<F>(engine: &str, listeners: Listeners, worker: F) -> Result<(), EngineError>
where
    F: Fn(usize, std::net::TcpListener) -> Result<(), EngineError> + Sync,
{
    std::thread::scope(|scope| {
        let threads: Vec<_> = listeners
            .into_sockets()
            .into_iter()
            .enumerate()
            .map(|(index, listener)| {
                let worker = &worker;
                std::thread::Builder::new()
                    .name(format!("sluice-{engine}-{index}"))
                    .spawn_scoped(scope, move || worker(index, listener))
                    .map_err(|source| EngineError::Setup { what: "spawn worker", source })
            })
            .collect::<Result<_, _>>()?;
        for t in threads {
            t.join().unwrap_or_else(|_| Err(EngineError::Config(format!("an {engine} worker panicked"))))?;
        }
        Ok(())
    })
}
