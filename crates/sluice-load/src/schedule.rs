//! The open model's arrival schedule: stages (ramp users over a time, constant users per second,
//! ramp the rate from A to B, pause), scenarios that each run their own stages from their own
//! start offset, and the merged, time-ordered list of arrival offsets they produce. Pure
//! arithmetic: no clocks, no sockets, so the exact count and spacing of arrivals is unit-tested.
//! Sending the requests at those times is `open`'s job.

use std::time::Duration;

use crate::error::LoadError;
use crate::target::TargetSpec;

/// One injection stage of a scenario (the Gatling `injectOpen` steps the E4 profiles use).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Stage {
    /// `users` arrivals spread evenly over `over` (Gatling `rampUsers(n).during(d)`).
    RampUsers {
        /// Arrivals in the stage.
        users: u64,
        /// Length of the stage.
        #[serde(with = "crate::duration_text")]
        over: Duration,
    },
    /// `rate` arrivals per second for `for` (Gatling `constantUsersPerSec(r).during(d)`).
    ConstantRate {
        /// Arrivals per second.
        rate: f64,
        /// Length of the stage.
        #[serde(rename = "for", with = "crate::duration_text")]
        duration: Duration,
    },
    /// The arrival rate rises (or falls) linearly from `from` to `to` per second over `over`
    /// (Gatling `rampUsersPerSec(a).to(b).during(d)`).
    RampRate {
        /// Arrivals per second at the start.
        from: f64,
        /// Arrivals per second at the end.
        to: f64,
        /// Length of the stage.
        #[serde(with = "crate::duration_text")]
        over: Duration,
    },
    /// No arrivals for `for` (Gatling `nothingFor(d)`).
    Pause {
        /// Length of the pause.
        #[serde(rename = "for", with = "crate::duration_text")]
        duration: Duration,
    },
}

impl Stage {
    /// How long the stage lasts.
    pub fn duration(&self) -> Duration {
        match *self {
            Stage::RampUsers { over, .. } | Stage::RampRate { over, .. } => over,
            Stage::ConstantRate { duration, .. } | Stage::Pause { duration } => duration,
        }
    }

    /// How many arrivals the stage makes.
    pub fn arrivals(&self) -> u64 {
        match *self {
            Stage::RampUsers { users, .. } => users,
            Stage::ConstantRate { rate, duration } => (rate * duration.as_secs_f64()).round() as u64,
            Stage::RampRate { from, to, over } => ((from + to) / 2.0 * over.as_secs_f64()).round() as u64,
            Stage::Pause { .. } => 0,
        }
    }

    /// Offset of arrival `k` (0-based, `k < self.arrivals()`) from the stage's start.
    fn offset_of(&self, k: u64) -> Duration {
        let k = k as f64;
        let secs = match *self {
            Stage::RampUsers { users, over } => k * over.as_secs_f64() / users as f64,
            Stage::ConstantRate { rate, .. } => k / rate,
            Stage::RampRate { from, to, over } => {
                // Arrivals so far N(t) = from·t + (to−from)·t²/(2·over); solve N(t) = k in the
                // form that stays exact when to == from and when from == 0.
                let d = over.as_secs_f64();
                let slope = (to - from) / d;
                let disc = (from * from + 2.0 * slope * k).max(0.0);
                let denom = from + disc.sqrt();
                if denom > 0.0 {
                    2.0 * k / denom
                } else {
                    0.0
                }
            }
            Stage::Pause { .. } => 0.0,
        };
        Duration::from_secs_f64(secs.clamp(0.0, self.duration().as_secs_f64()))
    }

    /// Checks the numbers; `text` names the stage in the error.
    pub fn validate(&self, text: &str) -> Result<(), LoadError> {
        let bad =
            |reason: &str| LoadError::InvalidStage { text: text.to_string(), reason: reason.to_string() };
        let rate_ok = |r: f64| r.is_finite() && (0.0..=10_000_000.0).contains(&r);
        match *self {
            Stage::RampUsers { users, over } if users > 0 && over.is_zero() => {
                Err(bad("a ramp needs a length (use a length like 1ms for all at once)"))
            }
            Stage::ConstantRate { rate, .. } if !rate_ok(rate) => {
                Err(bad("the rate must be 0 to 10,000,000 per second"))
            }
            Stage::RampRate { from, to, .. } if !rate_ok(from) || !rate_ok(to) => {
                Err(bad("rates must be 0 to 10,000,000 per second"))
            }
            _ if self.duration() > Duration::from_secs(7 * 24 * 3600) => {
                Err(bad("a stage may last at most a week"))
            }
            _ => Ok(()),
        }
    }

    /// Parses the command-line form: `ramp-users:USERS:OVER`, `rate:RATE:FOR`,
    /// `ramp-rate:FROM:TO:OVER`, `pause:FOR` (underscores work as well as dashes).
    pub fn parse(text: &str) -> Result<Stage, LoadError> {
        let bad = |reason: String| LoadError::InvalidStage { text: text.to_string(), reason };
        let parts: Vec<&str> = text.split(':').map(str::trim).collect();
        let dur = |s: &str| crate::duration_text::parse(s).map_err(bad);
        let num = |s: &str| s.parse::<f64>().map_err(|_| bad(format!("`{s}` is not a number")));
        let kind = parts[0].replace('_', "-");
        let stage = match (kind.as_str(), &parts[1..]) {
            ("ramp-users", [users, over]) => Stage::RampUsers {
                users: users.parse().map_err(|_| bad(format!("`{users}` is not a whole number")))?,
                over: dur(over)?,
            },
            ("rate" | "constant-rate", [rate, d]) => {
                Stage::ConstantRate { rate: num(rate)?, duration: dur(d)? }
            }
            ("ramp-rate", [from, to, over]) => {
                Stage::RampRate { from: num(from)?, to: num(to)?, over: dur(over)? }
            }
            ("pause", [d]) => Stage::Pause { duration: dur(d)? },
            _ => {
                return Err(bad(
                    "expected ramp-users:USERS:OVER, rate:RATE:FOR, ramp-rate:FROM:TO:OVER or pause:FOR"
                        .into(),
                ))
            }
        };
        stage.validate(text)?;
        Ok(stage)
    }
}

/// A named stream of arrivals with its own targets and stages, starting `start_at` after the run.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scenario {
    /// Name shown in reports.
    pub name: String,
    /// URLs this scenario's users request, with weights.
    pub targets: Vec<TargetSpec>,
    /// Offset of the first stage from the start of the run.
    #[serde(with = "crate::duration_text")]
    pub start_at: Duration,
    /// The stages, run one after another.
    pub stages: Vec<Stage>,
}

impl Scenario {
    /// When the scenario's last stage ends, from the start of the run.
    pub fn end(&self) -> Duration {
        self.start_at + self.stages.iter().map(Stage::duration).sum::<Duration>()
    }

    /// Arrivals in the whole scenario.
    pub fn arrivals(&self) -> u64 {
        self.stages.iter().map(Stage::arrivals).sum()
    }
}

/// The arrivals of one scenario in time order.
#[derive(Debug, Clone)]
struct ScenarioCursor {
    stages: Vec<(Duration, Stage)>,
    stage: usize,
    k: u64,
}

impl ScenarioCursor {
    fn new(s: &Scenario) -> Self {
        let mut start = s.start_at;
        let stages = s
            .stages
            .iter()
            .map(|st| {
                let at = start;
                start += st.duration();
                (at, st.clone())
            })
            .collect();
        ScenarioCursor { stages, stage: 0, k: 0 }
    }

    fn peek(&mut self) -> Option<Duration> {
        while let Some((start, stage)) = self.stages.get(self.stage) {
            if self.k < stage.arrivals() {
                return Some(*start + stage.offset_of(self.k));
            }
            self.stage += 1;
            self.k = 0;
        }
        None
    }

    fn advance(&mut self) {
        self.k += 1;
    }
}

/// One arrival: when, from the start of the run, and which scenario it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Offset from the start of the run.
    pub at: Duration,
    /// Index of its scenario.
    pub scenario: usize,
}

/// Every scenario's arrivals merged in time order (ties go to the earlier scenario).
#[derive(Debug, Clone)]
pub struct Arrivals {
    cursors: Vec<ScenarioCursor>,
}

impl Arrivals {
    /// The merged schedule of `scenarios`.
    pub fn new(scenarios: &[Scenario]) -> Self {
        Arrivals { cursors: scenarios.iter().map(ScenarioCursor::new).collect() }
    }
}

impl Iterator for Arrivals {
    type Item = Arrival;

    fn next(&mut self) -> Option<Arrival> {
        let mut best: Option<(Duration, usize)> = None;
        for (i, c) in self.cursors.iter_mut().enumerate() {
            if let Some(at) = c.peek() {
                if best.is_none_or(|(b, _)| at < b) {
                    best = Some((at, i));
                }
            }
        }
        let (at, scenario) = best?;
        self.cursors[scenario].advance();
        Some(Arrival { at, scenario })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    fn scenario(start: f64, stages: Vec<Stage>) -> Scenario {
        Scenario { name: "s".into(), targets: vec![], start_at: secs(start), stages }
    }

    #[test]
    fn constant_rate_is_exact_and_evenly_spaced() {
        let s = scenario(0.0, vec![Stage::ConstantRate { rate: 200.0, duration: secs(5.0) }]);
        let all: Vec<_> = Arrivals::new(&[s]).collect();
        assert_eq!(all.len(), 1000);
        assert_eq!(all[0].at, Duration::ZERO);
        assert_eq!(all[1].at, Duration::from_millis(5));
        assert!(all[999].at < secs(5.0));
    }

    #[test]
    fn ramp_users_spreads_users_over_the_time() {
        let s = scenario(1.0, vec![Stage::RampUsers { users: 5, over: secs(5.0) }]);
        let at: Vec<_> = Arrivals::new(&[s]).map(|a| a.at).collect();
        assert_eq!(at, vec![secs(1.0), secs(2.0), secs(3.0), secs(4.0), secs(5.0)]);
    }

    #[test]
    fn ramp_rate_counts_and_accelerates() {
        let stage = Stage::RampRate { from: 100.0, to: 200.0, over: secs(10.0) };
        assert_eq!(stage.arrivals(), 1500);
        let at: Vec<_> = Arrivals::new(&[scenario(0.0, vec![stage])]).map(|a| a.at).collect();
        assert_eq!(at.len(), 1500);
        // Arrivals in the first and last second follow the rate at those times.
        let first = at.iter().filter(|t| **t < secs(1.0)).count();
        let last = at.iter().filter(|t| **t >= secs(9.0)).count();
        assert!((104..=106).contains(&first), "{first}");
        assert!((194..=196).contains(&last), "{last}");
        // From zero and downwards work too.
        let up = Stage::RampRate { from: 0.0, to: 10.0, over: secs(10.0) };
        assert_eq!(Arrivals::new(&[scenario(0.0, vec![up])]).count(), 50);
        let down = Stage::RampRate { from: 10.0, to: 0.0, over: secs(10.0) };
        let at: Vec<_> = Arrivals::new(&[scenario(0.0, vec![down])]).map(|a| a.at).collect();
        assert_eq!(at.len(), 50);
        assert!(at.windows(2).all(|w| w[0] <= w[1]));
        assert!(*at.last().unwrap() <= secs(10.0));
    }

    #[test]
    fn pauses_and_overlapping_scenarios_merge_in_time_order() {
        let warm = scenario(0.0, vec![Stage::ConstantRate { rate: 1.0, duration: secs(3.0) }]);
        let load = scenario(
            0.0,
            vec![
                Stage::Pause { duration: secs(1.5) },
                Stage::ConstantRate { rate: 2.0, duration: secs(1.0) },
            ],
        );
        let all: Vec<_> = Arrivals::new(&[warm.clone(), load.clone()]).map(|a| (a.at, a.scenario)).collect();
        assert_eq!(all, vec![(secs(0.0), 0), (secs(1.0), 0), (secs(1.5), 1), (secs(2.0), 0), (secs(2.0), 1)]);
        assert_eq!(load.end(), secs(2.5));
        assert_eq!(warm.arrivals() + load.arrivals(), 5);
    }

    #[test]
    fn command_line_stages_parse() {
        assert_eq!(Stage::parse("ramp-users:5:5s").unwrap(), Stage::RampUsers { users: 5, over: secs(5.0) });
        assert_eq!(
            Stage::parse("rate:100:30s").unwrap(),
            Stage::ConstantRate { rate: 100.0, duration: secs(30.0) }
        );
        assert_eq!(
            Stage::parse("ramp_rate:100:200:10s").unwrap(),
            Stage::RampRate { from: 100.0, to: 200.0, over: secs(10.0) }
        );
        assert_eq!(Stage::parse("pause:15s").unwrap(), Stage::Pause { duration: secs(15.0) });
        for bad in ["", "rate:x:1s", "rate:1", "ramp-users:5:0s", "rate:-1:1s", "pause:forever", "jump:1:1s"]
        {
            assert!(Stage::parse(bad).is_err(), "{bad}");
        }
    }
}
