//! The TOML scenario file of the open model: optional `[settings]` (base URL, connection mode,
//! pool size, timeout, expected status), then `[[scenario]]` entries, each with `url` or `urls`
//! (optionally weighted `"3=/path"`; paths are joined to the base URL), a `start_at` offset and
//! `[[scenario.stage]]` entries of kind `ramp_users {users, over}`, `constant_rate {rate, for}`,
//! `ramp_rate {from, to, over}` or `pause {for}`. This module turns the text into [`Scenario`]s
//! and settings; command-line flags override the settings in the binary.
//!
//! ```toml
//! [settings]
//! base_url = "http://127.0.0.1:8080"
//! max_connections = 200
//!
//! [[scenario]]
//! name = "load"
//! url = "/bench/hello"
//! start_at = "15s"
//! [[scenario.stage]]
//! kind = "constant_rate"
//! rate = 100
//! for = "30s"
//! ```

use std::path::Path;
use std::time::Duration;

use crate::client::{ConnectionMode, ExpectedStatus};
use crate::error::LoadError;
use crate::schedule::{Scenario, Stage};
use crate::target::TargetSpec;

/// The `[settings]` table.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSettings {
    base_url: Option<String>,
    connections: Option<ConnectionMode>,
    max_connections: Option<usize>,
    max_pending: Option<usize>,
    timeout: Option<String>,
    expect_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: Option<String>,
    url: Option<String>,
    urls: Option<Vec<String>>,
    start_at: Option<String>,
    #[serde(default)]
    stage: Vec<Stage>,
}

#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    settings: RawSettings,
    #[serde(default)]
    scenario: Vec<RawScenario>,
}

/// Settings a scenario file may carry (each `None` when the file leaves it to the defaults or
/// the command line).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileSettings {
    /// Base URL that scenario paths starting with `/` are joined to.
    pub base_url: Option<String>,
    /// Keep-alive pool or a new connection per request.
    pub connections: Option<ConnectionMode>,
    /// Pool cap.
    pub max_connections: Option<usize>,
    /// Most arrivals waiting for a connection.
    pub max_pending: Option<usize>,
    /// Request deadline.
    pub timeout: Option<Duration>,
    /// Expected status (any 2xx when absent).
    pub expect_status: Option<ExpectedStatus>,
}

/// A parsed scenario file.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioFile {
    /// Its settings.
    pub settings: FileSettings,
    /// Its scenarios, in file order.
    pub scenarios: Vec<Scenario>,
}

/// Reads and parses `path`; `base_url` (from the command line) replaces the file's.
pub fn load(path: &Path, base_url: Option<&str>) -> Result<ScenarioFile, LoadError> {
    let text = std::fs::read_to_string(path)
        .map_err(|source| LoadError::ScenarioRead { path: path.to_path_buf(), source })?;
    parse(&text, path, base_url)
}

/// Parses scenario-file text; `path` only names the file in errors.
pub fn parse(text: &str, path: &Path, base_url: Option<&str>) -> Result<ScenarioFile, LoadError> {
    let err = |message: String| LoadError::ScenarioParse { path: path.to_path_buf(), message };
    let raw: RawFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
    let base = base_url.map(str::to_string).or(raw.settings.base_url.clone());
    let duration =
        |what: &str, s: &str| crate::duration_text::parse(s).map_err(|e| err(format!("{what}: {e}")));
    let settings = FileSettings {
        base_url: base.clone(),
        connections: raw.settings.connections,
        max_connections: raw.settings.max_connections,
        max_pending: raw.settings.max_pending,
        timeout: raw.settings.timeout.as_deref().map(|t| duration("settings.timeout", t)).transpose()?,
        expect_status: raw.settings.expect_status.map(ExpectedStatus::Exactly),
    };
    if raw.scenario.is_empty() {
        return Err(err("the file has no [[scenario]]".into()));
    }
    let mut scenarios = Vec::with_capacity(raw.scenario.len());
    for (i, s) in raw.scenario.into_iter().enumerate() {
        let name = s.name.unwrap_or_else(|| format!("scenario-{}", i + 1));
        let urls: Vec<String> = match (s.url, s.urls) {
            (Some(u), None) => vec![u],
            (None, Some(us)) if !us.is_empty() => us,
            _ => return Err(err(format!("scenario `{name}` needs exactly one of `url` or `urls`"))),
        };
        let mut targets = Vec::with_capacity(urls.len());
        for u in urls {
            let mut spec = TargetSpec::parse(&u)?;
            if spec.url.starts_with('/') {
                let Some(base) = &base else {
                    return Err(err(format!(
                        "scenario `{name}` uses the path `{}`, but there is no base_url in [settings] or on the command line",
                        spec.url
                    )));
                };
                spec.url = format!("{}{}", base.trim_end_matches('/'), spec.url);
            }
            crate::target::parse_url(&spec.url)?;
            targets.push(spec);
        }
        if s.stage.is_empty() {
            return Err(err(format!("scenario `{name}` has no [[scenario.stage]]")));
        }
        for st in &s.stage {
            st.validate(&format!("{st:?} in scenario `{name}`"))?;
        }
        let start_at = match s.start_at.as_deref() {
            Some(t) => duration(&format!("scenario `{name}` start_at"), t)?,
            None => Duration::ZERO,
        };
        scenarios.push(Scenario { name, targets, start_at, stages: s.stage });
    }
    Ok(ScenarioFile { settings, scenarios })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_file_parses() {
        let text = r#"
            [settings]
            base_url = "http://127.0.0.1:8080/"
            connections = "keep-alive"
            max_connections = 300
            timeout = "10s"
            expect_status = 200

            [[scenario]]
            name = "low"
            urls = ["3=/bench/latency?ms=50", "http://127.0.0.1:9/x"]
            [[scenario.stage]]
            kind = "ramp_users"
            users = 20
            over = "5s"
            [[scenario.stage]]
            kind = "ramp_rate"
            from = 100
            to = 300
            over = "10s"

            [[scenario]]
            url = "/bench/mixed"
            start_at = "15s"
            stage = [{ kind = "pause", for = "1s" }, { kind = "constant_rate", rate = 100, for = "25s" }]
        "#;
        let f = parse(text, Path::new("t.toml"), None).unwrap();
        assert_eq!(f.settings.max_connections, Some(300));
        assert_eq!(f.settings.timeout, Some(Duration::from_secs(10)));
        assert_eq!(f.scenarios.len(), 2);
        assert_eq!(f.scenarios[0].targets[0].url, "http://127.0.0.1:8080/bench/latency?ms=50");
        assert_eq!(f.scenarios[0].targets[0].weight, 3);
        assert_eq!(f.scenarios[1].name, "scenario-2");
        assert_eq!(f.scenarios[1].start_at, Duration::from_secs(15));
        assert_eq!(f.scenarios[1].end(), Duration::from_secs(41));
        let over = parse(text, Path::new("t.toml"), Some("http://127.0.0.1:1")).unwrap();
        assert_eq!(over.scenarios[1].targets[0].url, "http://127.0.0.1:1/bench/mixed");
    }

    #[test]
    fn mistakes_are_reported_not_guessed() {
        let p = Path::new("t.toml");
        assert!(parse("", p, None).is_err());
        let no_base = "[[scenario]]\nurl = \"/a\"\nstage = [{ kind = \"pause\", for = \"1s\" }]";
        assert!(parse(no_base, p, None).is_err());
        let typo = "[[scenario]]\nurl = \"http://h/\"\nstage = [{ kind = \"pause\", fro = \"1s\" }]";
        assert!(parse(typo, p, None).is_err());
        let unknown = "[[scenario]]\nurl = \"http://h/\"\nstages = []";
        assert!(parse(unknown, p, None).is_err());
        let bad_kind = "[[scenario]]\nurl = \"http://h/\"\nstage = [{ kind = \"warp\", for = \"1s\" }]";
        assert!(parse(bad_kind, p, None).is_err());
    }

    #[test]
    fn the_shipped_e4_hello_profile_parses() {
        let text = include_str!("../scenarios/e4-hello.toml");
        let f = parse(text, Path::new("e4-hello.toml"), None).unwrap();
        assert_eq!(f.scenarios.len(), 2);
        assert_eq!(f.settings.max_connections, Some(200));
        // Warm-up: 5 + 100; load: 10 + 50 + 3000 + 1500 + 4000.
        assert_eq!(f.scenarios[0].arrivals(), 105);
        assert_eq!(f.scenarios[1].arrivals(), 8560);
        assert_eq!(f.scenarios.iter().map(Scenario::end).max(), Some(Duration::from_secs(90)));
    }
}
