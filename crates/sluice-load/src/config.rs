//! The settings of one load run, independent of where they came from (command line, scenario
//! file, the lab): which model (closed or open), targets or scenarios, connection handling,
//! deadlines and limits. It validates that a run is bounded and well-formed; it does not resolve
//! addresses (`target`) or run anything (`run`).

use std::time::Duration;

use crate::client::{ConnectionMode, ExpectedStatus};
use crate::error::LoadError;
use crate::schedule::Scenario;
use crate::target::{Method, TargetSpec};

/// Longest run this tool accepts: a closed run's duration or an open run's schedule.
pub const MAX_RUN: Duration = Duration::from_secs(7 * 24 * 3600);

/// Closed model: a fixed number of virtual users, each sending, waiting for the whole response,
/// and sending again.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedModel {
    /// URLs with weights.
    pub targets: Vec<TargetSpec>,
    /// Virtual users.
    pub vus: usize,
    /// Stop starting requests after this long.
    pub duration: Option<Duration>,
    /// Stop after this many requests in total.
    pub requests: Option<u64>,
    /// Pause of each user after a response before its next request (k6's `sleep`; zero for a
    /// saturating loop).
    pub think: Duration,
}

/// Open model: users arrive on a schedule whatever the server does.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenModel {
    /// Arrival streams, each with its own URLs, stages and start offset.
    pub scenarios: Vec<Scenario>,
    /// Most connections open at once over the whole run (the keep-alive pool's size, or the
    /// most simultaneous one-request connections).
    pub max_connections: usize,
    /// Most arrivals waiting for a connection at once; arrivals beyond it are dropped.
    pub max_pending: usize,
    /// Stop after this many arrivals in total.
    pub requests: Option<u64>,
}

/// Which model a run uses.
#[derive(Debug, Clone, PartialEq)]
pub enum Model {
    /// Virtual users in a loop.
    Closed(ClosedModel),
    /// Scheduled arrivals.
    Open(OpenModel),
}

/// Everything a run needs.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Closed or open model.
    pub model: Model,
    /// Keep-alive or one connection per request.
    pub connections: ConnectionMode,
    /// Deadline of each request: from its start (closed) or its scheduled time (open) to its
    /// last byte. An open-model arrival still waiting for a connection at its deadline is dropped.
    pub timeout: Duration,
    /// Worker threads, each with its own single-threaded runtime.
    pub threads: usize,
    /// Statuses that count as success.
    pub expected_status: ExpectedStatus,
    /// Request method.
    pub method: Method,
    /// Extra request headers.
    pub headers: Vec<(String, String)>,
    /// Permit targets outside loopback.
    pub allow_non_loopback: bool,
    /// Ends the run early when raised (requests in flight finish); `None`: it runs its course.
    pub stop: Option<crate::StopFlag>,
}

impl LoadConfig {
    /// A closed-model run with default settings.
    pub fn closed(
        targets: Vec<TargetSpec>,
        vus: usize,
        duration: Option<Duration>,
        requests: Option<u64>,
    ) -> Self {
        LoadConfig::with_model(Model::Closed(ClosedModel {
            targets,
            vus,
            duration,
            requests,
            think: Duration::ZERO,
        }))
    }

    /// An open-model run with default settings.
    pub fn open(scenarios: Vec<Scenario>, max_connections: usize) -> Self {
        LoadConfig::with_model(Model::Open(OpenModel {
            scenarios,
            max_connections,
            max_pending: 100_000,
            requests: None,
        }))
    }

    fn with_model(model: Model) -> Self {
        LoadConfig {
            model,
            connections: ConnectionMode::KeepAlive,
            timeout: Duration::from_secs(60),
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            expected_status: ExpectedStatus::Success,
            method: Method::Get,
            headers: Vec::new(),
            allow_non_loopback: false,
            stop: None,
        }
    }

    /// Every target of the run in report order, with the scenario each belongs to.
    pub fn target_list(&self) -> Vec<(Option<&str>, &TargetSpec)> {
        match &self.model {
            Model::Closed(c) => c.targets.iter().map(|t| (None, t)).collect(),
            Model::Open(o) => o
                .scenarios
                .iter()
                .flat_map(|s| s.targets.iter().map(move |t| (Some(s.name.as_str()), t)))
                .collect(),
        }
    }

    /// How long the run is planned to last (sending only), when known.
    pub fn planned_duration(&self) -> Option<Duration> {
        match &self.model {
            Model::Closed(c) => c.duration,
            Model::Open(o) => o.scenarios.iter().map(Scenario::end).max(),
        }
    }

    /// Checks that the run is bounded and consistent.
    pub fn validate(&self) -> Result<(), LoadError> {
        let bad = |m: &str| Err(LoadError::InvalidConfig(m.to_string()));
        if self.threads == 0 || self.threads > 1024 {
            return bad("threads must be 1 to 1024");
        }
        if self.timeout.is_zero() || self.timeout > MAX_RUN {
            return bad("the request timeout must be above zero and at most a week");
        }
        match &self.model {
            Model::Closed(c) => {
                if c.targets.is_empty() {
                    return bad("give at least one target URL");
                }
                if c.vus == 0 || c.vus > 1_000_000 {
                    return bad("virtual users must be 1 to 1,000,000");
                }
                match (c.duration, c.requests) {
                    (None, None) => {
                        return bad("a closed run needs --duration or --requests (runs are always bounded)")
                    }
                    (Some(d), _) if d.is_zero() || d > MAX_RUN => {
                        return bad("the duration must be above zero and at most a week")
                    }
                    (_, Some(0)) => return bad("--requests must be at least 1"),
                    _ => {}
                }
                if c.think > MAX_RUN {
                    return bad("the think time must be at most a week");
                }
            }
            Model::Open(o) => {
                if o.scenarios.is_empty() {
                    return bad("an open run needs at least one scenario");
                }
                for s in &o.scenarios {
                    if s.targets.is_empty() {
                        return Err(LoadError::InvalidConfig(format!("scenario `{}` has no URL", s.name)));
                    }
                    if s.stages.is_empty() {
                        return Err(LoadError::InvalidConfig(format!("scenario `{}` has no stages", s.name)));
                    }
                    for st in &s.stages {
                        st.validate(&format!("{st:?} in scenario `{}`", s.name))?;
                    }
                }
                if self.planned_duration().unwrap_or_default() > MAX_RUN {
                    return bad("the schedule may last at most a week");
                }
                if o.max_connections == 0 || o.max_connections > 1_000_000 {
                    return bad("max connections must be 1 to 1,000,000");
                }
                if o.max_pending == 0 {
                    return bad("max pending must be at least 1");
                }
                if o.requests == Some(0) {
                    return bad("--requests must be at least 1");
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Stage;

    fn target() -> Vec<TargetSpec> {
        vec![TargetSpec::parse("http://127.0.0.1:1/").unwrap()]
    }

    #[test]
    fn runs_must_be_bounded() {
        assert!(LoadConfig::closed(target(), 1, None, None).validate().is_err());
        assert!(LoadConfig::closed(target(), 1, None, Some(10)).validate().is_ok());
        assert!(LoadConfig::closed(target(), 0, None, Some(10)).validate().is_err());
        assert!(LoadConfig::closed(vec![], 1, None, Some(10)).validate().is_err());
        let s = Scenario {
            name: "a".into(),
            targets: target(),
            start_at: Duration::ZERO,
            stages: vec![Stage::Pause { duration: Duration::from_secs(1) }],
        };
        let open = LoadConfig::open(vec![s.clone()], 10);
        assert!(open.validate().is_ok());
        assert_eq!(open.planned_duration(), Some(Duration::from_secs(1)));
        assert!(LoadConfig::open(vec![Scenario { stages: vec![], ..s }], 10).validate().is_err());
    }
}
