//! The tokio engine (being written).

use std::sync::Arc;

use crate::counters::Counters;
use crate::{EngineConfig, EngineError, Listeners, Service, Shutdown};

pub(crate) fn run<S: Service>(
    _config: &EngineConfig,
    _listeners: Listeners,
    _service: Arc<S>,
    _shutdown: &Shutdown,
    _counters: &Counters,
) -> Result<(), EngineError> {
    Err(EngineError::Config("the tokio engine is not built yet".into()))
}
