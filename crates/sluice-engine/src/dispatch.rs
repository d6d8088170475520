//! The dispatcher: [`run`] checks a configuration and hands the listeners, the service and the
//! shutdown signal to the engine it names. It owns no engine state.

use std::sync::Arc;

use crate::config::{check, EngineConfig, EngineKind};
use crate::counters::Counters;
use crate::error::EngineError;
use crate::launch::{Launch, Service};
use crate::listener::Listeners;
use crate::shutdown::Shutdown;
use crate::{epoll, threads, tokio_engine, uring};

/// Runs `service` on the configured engine, counting into `counters`, until `shutdown` is triggered and in-flight work has
/// finished (or the grace period has passed).
pub fn run<S: Service>(
    config: &EngineConfig,
    listeners: Listeners,
    service: Arc<S>,
    shutdown: &Shutdown,
    counters: &Arc<Counters>,
) -> Result<(), EngineError> {
    check(config)?;
    let launch = Launch { config, listeners, service, shutdown, counters };
    match config.kind {
        EngineKind::Uring => uring::run(launch),
        EngineKind::Epoll => epoll::run(launch),
        EngineKind::Threads => threads::run(launch),
        EngineKind::Tokio => tokio_engine::run(launch),
    }
}
