//! Experiments as data: each is a TOML file in `experiments/` (compiled in) declaring the server
//! configurations, the load, the sweeps of parameters, and how the report shows the result
//! (tables, charts, findings, the published numbers). This module owns the experiment, its load
//! and sweeps and their points: it parses those files and expands an experiment into the steps
//! the runner executes; it runs nothing. The server configurations (`server_spec`) and what the
//! report declares (`report_spec`) are their own modules, re-exported here.
//!
//! One run of an experiment is every server × every point of every sweep, where a point is one
//! combination of the sweep's parameter lists (chunk size, virtual users, workers, profile, RTSP
//! clients and transport). An RTSP sweep may go on past its declared points while a server still
//! sends perfectly (`extend_step`, `max_clients`); the runner decides that, row by row.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use sluice_load::rtsp::RtspTransport;

use crate::content::ContentSpec;
use crate::error::LabError;

pub use crate::report_spec::{ChartSpec, ClaimKind, ClaimSpec, FindingSpec, PublishedTable, TableSpec};
pub use crate::server_spec::{EdgeRole, NginxMode, ServerKind, ServerSpec};

/// The experiments sluice ships, in order.
const BUILTIN: [&str; 7] = [
    include_str!("../experiments/e1-zero-copy.toml"),
    include_str!("../experiments/e2-concurrency.toml"),
    include_str!("../experiments/e3-io-models.toml"),
    include_str!("../experiments/e4-execution-models.toml"),
    include_str!("../experiments/e5-rtsp-fanout.toml"),
    include_str!("../experiments/e6-upload-gzip.toml"),
    include_str!("../experiments/e7-edge-cache.toml"),
];

/// The E4 load profiles (open-model scenario files shared with `sluice load http --scenario`).
const PROFILES: [(&str, &str); 3] = [
    ("hello", include_str!("../../sluice-load/scenarios/e4-hello.toml")),
    ("cpu", include_str!("../../sluice-load/scenarios/e4-cpu.toml")),
    ("latency", include_str!("../../sluice-load/scenarios/e4-latency.toml")),
];

/// The text of a built-in load profile, with the path it has in the repository.
pub fn profile(name: &str) -> Option<(&'static str, String)> {
    PROFILES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(n, text)| (*text, format!("crates/sluice-load/scenarios/e4-{n}.toml")))
}

/// Every built-in experiment.
pub fn builtin() -> Vec<Experiment> {
    BUILTIN.iter().map(|text| Experiment::parse(text).expect("built-in experiments parse")).collect()
}

/// One experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Experiment {
    /// Short id from EXPERIMENTS.md (`E1`).
    pub id: String,
    /// Name used on the command line (`zero-copy`).
    pub name: String,
    /// One-line title.
    pub title: String,
    /// The source report.
    pub seed: String,
    /// The caveat the report must print.
    pub caveat: String,
    /// Whether the run measures loopback throughput with iperf3 (one TCP stream) as a reference line.
    #[serde(default)]
    pub loopback_reference: bool,
    /// The load every row runs.
    pub load: LoadPlan,
    /// Parameter sweeps.
    pub sweep: Vec<Sweep>,
    /// Server configurations.
    pub server: Vec<ServerSpec>,
    /// Tables of the report.
    #[serde(default)]
    pub table: Vec<TableSpec>,
    /// Charts of the report.
    #[serde(default)]
    pub chart: Vec<ChartSpec>,
    /// Generated findings ("what this shows").
    #[serde(default)]
    pub finding: Vec<FindingSpec>,
    /// The source report's numbers, shown for reference.
    #[serde(default)]
    pub published: Vec<PublishedTable>,
    /// The source report's claims, each checked against this run (checked by `claims`).
    #[serde(default)]
    pub claim: Vec<ClaimSpec>,
}

/// Closed or open model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoadModel {
    /// Virtual users in a loop (k6, wrk).
    Closed,
    /// Scheduled arrivals from a profile (Gatling `injectOpen`).
    Open,
    /// RTSP viewers of one generated file, each counting the video samples it receives.
    Rtsp,
    /// Object uploads (`sluice upload`'s engine) into a local SeaweedFS behind toxiproxy,
    /// straight to S3 or through `sluice serve`.
    Upload,
    /// A library in a local SeaweedFS behind toxiproxy, read through caching edges (sluice's S3
    /// edge, two of them behind HAProxy, nginx's `proxy_cache`) and a sluice over a local root,
    /// a cold pass and then warm ones on the same server.
    Edge,
}

/// The load of an experiment.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoadPlan {
    /// Closed or open.
    pub model: LoadModel,
    /// Request path (closed model); `{chunk}` is replaced by the chunk size in bytes.
    #[serde(default)]
    pub path: Option<String>,
    /// Measured time per row (closed model).
    #[serde(default, with = "opt_duration")]
    pub duration: Option<Duration>,
    /// Measured time per row with `--quick`.
    #[serde(default, with = "opt_duration")]
    pub quick_duration: Option<Duration>,
    /// Warm-up before measuring; absent means the experiment allows none.
    #[serde(default, with = "opt_duration")]
    pub warmup: Option<Duration>,
    /// Warm-up with `--quick`.
    #[serde(default, with = "opt_duration")]
    pub quick_warmup: Option<Duration>,
    /// Each virtual user's pause between a response and its next request (closed model).
    #[serde(default, with = "opt_duration")]
    pub think: Option<Duration>,
    /// Fraction of each open-model profile's length run with `--quick`.
    #[serde(default)]
    pub quick_scale: Option<f64>,
    /// The file every RTSP viewer plays, generated with ffmpeg (RTSP).
    #[serde(default)]
    pub content: Option<ContentSpec>,
    /// The file with `--quick`.
    #[serde(default)]
    pub quick_content: Option<ContentSpec>,
    /// RTSP viewers start evenly spread over this span.
    #[serde(default, with = "opt_duration")]
    pub ramp: Option<Duration>,
    /// The ramp with `--quick`.
    #[serde(default, with = "opt_duration")]
    pub quick_ramp: Option<Duration>,
    /// A playing viewer that receives nothing for this long has reached the stream's end (RTSP).
    #[serde(default, with = "opt_duration")]
    pub idle_end: Option<Duration>,
    /// Deadline for a viewer's setup and first sample (RTSP).
    #[serde(default, with = "opt_duration")]
    pub setup_timeout: Option<Duration>,
    /// Wall time of the whole run after which no point past the declared ones starts (RTSP).
    #[serde(default, with = "opt_duration")]
    pub budget: Option<Duration>,
    /// Objects measured per row (uploads; a concurrency point uploads at least 20 per worker).
    #[serde(default)]
    pub runs: Option<usize>,
    /// The same with `--quick`.
    #[serde(default)]
    pub quick_runs: Option<usize>,
    /// Objects uploaded before measuring, not counted (uploads).
    #[serde(default)]
    pub warmup_runs: Option<usize>,
    /// The same with `--quick`.
    #[serde(default)]
    pub quick_warmup_runs: Option<usize>,
}

impl LoadPlan {
    /// Objects measured and objects of warm-up per upload row.
    pub fn upload_runs(&self, quick: bool) -> (usize, usize) {
        let pick = |full: Option<usize>, quick_n: Option<usize>| if quick { quick_n.or(full) } else { full };
        (
            pick(self.runs, self.quick_runs).unwrap_or(100),
            pick(self.warmup_runs, self.quick_warmup_runs).unwrap_or(0),
        )
    }

    /// The content of a run (the quick one with `--quick`, when declared).
    pub fn content_for(&self, quick: bool) -> Option<&ContentSpec> {
        if quick {
            self.quick_content.as_ref().or(self.content.as_ref())
        } else {
            self.content.as_ref()
        }
    }

    /// The ramp of a run.
    pub fn ramp_for(&self, quick: bool) -> Duration {
        let ramp = if quick { self.quick_ramp.or(self.ramp) } else { self.ramp };
        ramp.unwrap_or_default()
    }
}

/// One sweep: the cartesian product of its parameter lists.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Name shown in the report.
    pub name: String,
    /// Which parameter is the x axis (`chunk`, `vus`, `workers`, `profile`).
    pub x: Param,
    /// Response body sizes in bytes.
    #[serde(default)]
    pub chunk: Vec<u64>,
    /// Response body sizes with `--quick` (the full list when absent).
    #[serde(default)]
    pub quick_chunk: Vec<u64>,
    /// Virtual users (closed model connections).
    #[serde(default)]
    pub vus: Vec<usize>,
    /// Virtual users with `--quick` (the full list when absent).
    #[serde(default)]
    pub quick_vus: Vec<usize>,
    /// Server workers; 0 stands for every core.
    #[serde(default)]
    pub workers: Vec<usize>,
    /// Open-model profiles.
    #[serde(default)]
    pub profile: Vec<String>,
    /// RTSP clients.
    #[serde(default)]
    pub clients: Vec<usize>,
    /// RTSP clients with `--quick` (the full list when absent).
    #[serde(default)]
    pub quick_clients: Vec<usize>,
    /// RTP transport of every point (RTSP).
    #[serde(default)]
    pub transport: Option<RtspTransport>,
    /// Whether the viewers' UDP sockets take GSO messages whole (`sluice load rtsp --udp-gro`);
    /// `false` models players without GRO (RTSP over UDP; on when absent).
    #[serde(default)]
    pub udp_gro: Option<bool>,
    /// Past the last declared point, a server that sent perfectly gets another point with this
    /// many more clients, until some client is not perfect (RTSP).
    #[serde(default)]
    pub extend_step: Option<usize>,
    /// The most clients an extended point may have.
    #[serde(default)]
    pub max_clients: Option<usize>,
    /// The same with `--quick`; absent, a quick run does not go past its declared points.
    #[serde(default)]
    pub quick_max_clients: Option<usize>,
    /// Worker threads 1, 2, … up to the machine's cores (instead of `workers`).
    #[serde(default)]
    pub workers_up_to_cores: bool,
    /// Capacity: every server of this sweep runs under the run's CPU budget (`--server-cpu`),
    /// so that it, not the load generator, saturates.
    #[serde(default)]
    pub budget: bool,
    /// Rounds per point, servers alternating within each (default 1).
    #[serde(default)]
    pub rounds: Option<usize>,
    /// Rounds with `--quick`.
    #[serde(default)]
    pub quick_rounds: Option<usize>,
    /// The users' pause for this sweep instead of the load's (`"0s"`: unpaced, for capacity).
    #[serde(default, with = "opt_duration")]
    pub think: Option<Duration>,
    /// Measured time per row of this sweep instead of the load's (full runs only).
    #[serde(default, with = "opt_duration")]
    pub duration: Option<Duration>,
    /// Generated payloads, `KIND:SIZE` as `sluice upload --generate` takes them (uploads).
    #[serde(default)]
    pub payload: Vec<String>,
    /// Latency toxiproxy adds each way between the uploader and S3; absent: none (uploads).
    #[serde(default, with = "opt_duration")]
    pub latency_each_way: Option<Duration>,
    /// Every file of the library once, whole (the cold pass of an edge experiment).
    #[serde(default)]
    pub once: bool,
    /// Ranges of this many bytes from the middle of each file instead of whole files (edges).
    #[serde(default)]
    pub range_bytes: Option<u64>,
}

impl Sweep {
    /// Rounds per point of a run.
    pub fn rounds_for(&self, quick: bool) -> usize {
        let r = if quick { self.quick_rounds.or(self.rounds) } else { self.rounds };
        r.unwrap_or(1).max(1)
    }

    /// The client count of the point after one with `clients`, when the sweep extends that far.
    pub fn next_clients(&self, clients: usize, quick: bool) -> Option<usize> {
        let step = self.extend_step.filter(|s| *s > 0)?;
        let max = if quick { self.quick_max_clients } else { self.max_clients };
        let next = clients + step;
        (next <= max.unwrap_or(0)).then_some(next)
    }
}

/// A swept parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Param {
    /// Response body size.
    Chunk,
    /// Virtual users or connections.
    Vus,
    /// Server worker threads.
    Workers,
    /// Load profile.
    Profile,
    /// RTSP clients.
    Clients,
    /// Generated upload payload.
    Payload,
}

impl Param {
    /// Axis label.
    pub fn label(self) -> &'static str {
        match self {
            Param::Chunk => "chunk size",
            Param::Vus => "connections (virtual users)",
            Param::Workers => "server worker threads",
            Param::Profile => "profile",
            Param::Clients => "RTSP clients",
            Param::Payload => "payload",
        }
    }
}

/// One point of a sweep: the parameters of one row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// The sweep it belongs to.
    pub sweep: String,
    /// Which parameter varies along the sweep.
    pub x: Param,
    /// Response body size.
    pub chunk: Option<u64>,
    /// Virtual users.
    pub vus: Option<usize>,
    /// Server workers (resolved: never 0).
    pub workers: usize,
    /// Open-model profile.
    pub profile: Option<String>,
    /// RTSP clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clients: Option<usize>,
    /// RTP transport.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<RtspTransport>,
    /// The viewers' UDP GRO (`None`: on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_gro: Option<bool>,
    /// Generated upload payload (`email:50KB`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// Whether the server runs under the run's CPU budget (a capacity point).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget: bool,
}

impl Point {
    /// The value on the x axis, as a number where it has one.
    pub fn x_value(&self) -> Option<f64> {
        match self.x {
            Param::Chunk => self.chunk.map(|c| c as f64),
            Param::Vus => self.vus.map(|v| v as f64),
            Param::Workers => Some(self.workers as f64),
            Param::Profile => None,
            Param::Clients => self.clients.map(|c| c as f64),
            Param::Payload => None,
        }
    }

    /// The x value as text (`64 KB`, `1000`, `latency`).
    pub fn x_label(&self) -> String {
        match self.x {
            Param::Chunk => self.chunk.map(size_label).unwrap_or_default(),
            Param::Vus => self.vus.map(|v| v.to_string()).unwrap_or_default(),
            Param::Workers => self.workers.to_string(),
            Param::Profile => self.profile.clone().unwrap_or_default(),
            Param::Clients => self.clients.map(|c| c.to_string()).unwrap_or_default(),
            Param::Payload => self.payload.clone().unwrap_or_default(),
        }
    }
}

/// `65536` → `64 KB`, `1048576` → `1 MB`.
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KB", bytes >> 10)
    } else {
        format!("{bytes} B")
    }
}

impl Experiment {
    /// Parses and checks one experiment declaration.
    pub fn parse(text: &str) -> Result<Experiment, LabError> {
        let e: Experiment = toml::from_str(text)
            .map_err(|err| LabError::BadExperiment { name: "?".into(), message: err.to_string() })?;
        e.check()?;
        Ok(e)
    }

    /// Finds a built-in experiment by name or id (`zero-copy`, `E1`).
    pub fn find(name: &str) -> Result<Experiment, LabError> {
        builtin()
            .into_iter()
            .find(|e| e.name == name || e.id.eq_ignore_ascii_case(name))
            .ok_or_else(|| LabError::UnknownExperiment(name.to_string()))
    }

    fn check(&self) -> Result<(), LabError> {
        let bad = |m: String| Err(LabError::BadExperiment { name: self.name.clone(), message: m });
        if self.sweep.is_empty() || self.server.is_empty() {
            return bad("needs at least one sweep and one server".into());
        }
        for s in &self.sweep {
            let needs = match self.load.model {
                LoadModel::Closed => self.load.path.is_some() && !s.vus.is_empty(),
                LoadModel::Open => !s.profile.is_empty(),
                LoadModel::Rtsp => !s.clients.is_empty() && s.transport.is_some() && s.x == Param::Clients,
                LoadModel::Upload => !s.payload.is_empty() && (s.x == Param::Payload || !s.vus.is_empty()),
                LoadModel::Edge => !s.vus.is_empty(),
            };
            if !needs {
                return bad(format!("sweep `{}` lacks the parameters its load model needs", s.name));
            }
            if s.profile.iter().any(|p| profile(p).is_none()) {
                return bad(format!("sweep `{}` names an unknown profile", s.name));
            }
        }
        if self.load.model == LoadModel::Closed && self.load.duration.is_none() {
            return bad("a closed-model experiment needs a duration".into());
        }
        if self.load.model == LoadModel::Rtsp {
            let Some(content) = &self.load.content else {
                return bad("an RTSP experiment needs `[load.content]`".into());
            };
            for c in std::iter::once(content).chain(self.load.quick_content.as_ref()) {
                c.check().or_else(&bad)?;
            }
        }
        for s in &self.server {
            if self.load.model == LoadModel::Edge {
                if s.edge.is_none() {
                    return bad(format!(
                        "server `{}` needs `edge = \"local\"`, `\"s3\"`, `\"haproxy\"` or `\"nginx\"`",
                        s.name
                    ));
                }
                continue;
            }
            if s.kind == ServerKind::Nginx && s.nginx.is_none() {
                return bad(format!("server `{}` needs `nginx = \"static\"` or `\"return200\"`", s.name));
            }
            let model = match s.kind {
                ServerKind::Sluice => self.load.model,
                ServerKind::Gstreamer => LoadModel::Rtsp,
                ServerKind::S3 => LoadModel::Upload,
                ServerKind::Nginx if matches!(self.load.model, LoadModel::Closed | LoadModel::Open) => {
                    self.load.model
                }
                ServerKind::Nginx => LoadModel::Closed,
            };
            if model != self.load.model {
                return bad(format!("server `{}` does not serve this experiment's protocol", s.name));
            }
        }
        let known = match self.load.model {
            LoadModel::Rtsp => &crate::metrics::RTSP_METRICS[..],
            LoadModel::Upload => &crate::metrics::UPLOAD_METRICS[..],
            LoadModel::Closed | LoadModel::Open | LoadModel::Edge => &crate::metrics::METRICS[..],
        };
        let metrics =
            self.table.iter().flat_map(|t| t.metrics.iter()).chain(self.chart.iter().map(|c| &c.metric));
        for m in metrics {
            if !known.iter().any(|(name, _)| name == m) {
                return bad(format!("unknown metric `{m}`"));
            }
        }
        for c in &self.claim {
            let needs = match c.kind {
                ClaimKind::Ratio => c.a.is_some() && c.b.is_some(),
                ClaimKind::Flat | ClaimKind::Below => !c.servers.is_empty(),
                ClaimKind::NotMeasurable => c.reason.is_some(),
            };
            if !needs {
                return bad(format!("claim `{}` lacks what its kind needs", c.claim));
            }
            if let Some(m) = &c.metric {
                if !known.iter().any(|(name, _)| name == m) {
                    return bad(format!("claim `{}`: unknown metric `{m}`", c.claim));
                }
            }
        }
        for t in self
            .table
            .iter()
            .filter_map(|t| t.sweep.as_ref())
            .chain(self.chart.iter().filter_map(|c| c.sweep.as_ref()))
            .chain(self.claim.iter().filter_map(|c| c.sweep.as_ref()))
        {
            if !self.sweep.iter().any(|s| s.name == *t) {
                return bad(format!("no sweep named `{t}`"));
            }
        }
        Ok(())
    }

    /// Every point of every sweep, in run order. `cores` resolves `workers = 0`.
    pub fn points(&self, quick: bool, cores: usize) -> Vec<Point> {
        let mut out = Vec::new();
        for s in &self.sweep {
            let vus = if quick && !s.quick_vus.is_empty() { &s.quick_vus } else { &s.vus };
            let clients = if quick && !s.quick_clients.is_empty() { &s.quick_clients } else { &s.clients };
            let clients: Vec<Option<usize>> = opt_list(clients);
            let chunks: Vec<Option<u64>> =
                opt_list(if quick && !s.quick_chunk.is_empty() { &s.quick_chunk } else { &s.chunk });
            let vus: Vec<Option<usize>> = opt_list(vus);
            let profiles: Vec<Option<String>> = opt_list(&s.profile);
            let payloads: Vec<Option<String>> = opt_list(&s.payload);
            let mut workers: Vec<usize> = if s.workers_up_to_cores {
                (1..=cores.max(1)).collect()
            } else if s.workers.is_empty() {
                vec![1]
            } else {
                s.workers.clone()
            };
            for w in &mut workers {
                if *w == 0 {
                    *w = cores.max(1);
                }
            }
            workers.dedup();
            for &chunk in &chunks {
                for &v in &vus {
                    for &w in &workers {
                        for p in &profiles {
                            for (&c, payload) in
                                clients.iter().flat_map(|c| payloads.iter().map(move |p| (c, p)))
                            {
                                out.push(Point {
                                    sweep: s.name.clone(),
                                    x: s.x,
                                    chunk,
                                    vus: v,
                                    workers: w,
                                    profile: p.clone(),
                                    clients: c,
                                    transport: s.transport,
                                    udp_gro: s.udp_gro,
                                    payload: payload.clone(),
                                    budget: s.budget,
                                });
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The sweep a point belongs to.
    pub fn sweep_of(&self, point: &Point) -> &Sweep {
        self.sweep_named(Some(&point.sweep))
    }

    /// The sweep named `name`, or the first.
    pub fn sweep_named(&self, name: Option<&str>) -> &Sweep {
        name.and_then(|n| self.sweep.iter().find(|s| s.name == n)).unwrap_or(&self.sweep[0])
    }

    /// Chunk sizes any sweep uses (the files the media directory needs).
    pub fn chunk_sizes(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self.sweep.iter().flat_map(|s| s.chunk.iter().copied()).collect();
        v.sort_unstable();
        v.dedup();
        v
    }
}

fn opt_list<T: Clone>(v: &[T]) -> Vec<Option<T>> {
    if v.is_empty() {
        vec![None]
    } else {
        v.iter().cloned().map(Some).collect()
    }
}

mod opt_duration {
    use std::time::Duration;

    pub fn serialize<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&sluice_load::duration_text::format(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        let text = <Option<String> as serde::Deserialize>::deserialize(d)?;
        text.map(|t| sluice_load::duration_text::parse(&t).map_err(serde::de::Error::custom)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_experiments_parse_and_expand() {
        let all = builtin();
        assert_eq!(
            all.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            [
                "zero-copy",
                "concurrency",
                "io-models",
                "execution-models",
                "rtsp-fanout",
                "upload-gzip",
                "edge-cache"
            ]
        );
        let e1 = Experiment::find("E1").unwrap();
        assert_eq!(e1.points(false, 2).len(), 3 + 3, "paced and at the budget");
        assert_eq!(e1.chunk_sizes(), [65536, 262144, 1048576]);
        let e3 = Experiment::find("io-models").unwrap();
        let full = e3.points(false, 4);
        assert_eq!(full.len(), 6 + 4 + 6 + 4, "connections, threads 1..=4, both again at the budget");
        let threads: Vec<usize> = full.iter().filter(|p| p.sweep == "threads").map(|p| p.workers).collect();
        assert_eq!(threads, [1, 2, 3, 4], "every worker count up to the cores");
        assert_eq!(full.iter().filter(|p| p.budget).count(), 10);
        assert_eq!(e3.points(true, 1).len(), 2 + 1 + 2 + 1);
        let capacity = e3.sweep_named(Some("capacity"));
        assert_eq!((capacity.rounds_for(false), capacity.rounds_for(true)), (3, 2));
        assert_eq!(e3.sweep_named(Some("threads")).rounds_for(false), 1);
        for e in [&e1, &e3] {
            assert!(!e.claim.is_empty(), "{} checks its seed's claims", e.id);
        }
        let e4 = Experiment::find("execution-models").unwrap();
        assert_eq!(
            e4.points(true, 2).iter().map(|p| p.x_label()).collect::<Vec<_>>(),
            ["hello", "cpu", "latency"]
        );
        assert!(Experiment::find("nope").is_err());
    }

    #[test]
    fn e5_sweeps_clients_per_transport_and_extends_until_the_cap() {
        let e5 = Experiment::find("E5").unwrap();
        assert_eq!(e5.load.model, LoadModel::Rtsp);
        let full = e5.points(false, 2);
        let udp: Vec<usize> = full
            .iter()
            .filter(|p| p.transport == Some(RtspTransport::Udp) && p.udp_gro == Some(true))
            .filter_map(|p| p.clients)
            .collect();
        assert_eq!(udp, [50, 100, 150, 200, 250, 300]);
        let plain = full.iter().filter(|p| p.udp_gro == Some(false)).count();
        assert_eq!(plain, 6, "the same points to receivers without GRO");
        assert_eq!(full.len(), 18, "udp with and without GRO, and tcp");
        assert!(full.iter().all(|p| p.workers == 1 && p.x_label() == p.clients.unwrap().to_string()));
        let quick = e5.points(true, 2);
        assert!(quick.iter().all(|p| p.clients.unwrap() <= 4), "{quick:?}");
        let sweep = &e5.sweep[0];
        assert_eq!(sweep.next_clients(300, false), Some(350));
        assert_eq!(sweep.next_clients(600, false), None, "the hard upper bound");
        assert_eq!(sweep.next_clients(4, true), None, "--quick stops at its declared points");
        let content = e5.load.content_for(false).unwrap();
        assert_eq!((content.bitrate_kbps, content.fps, content.gop, content.seconds), (23_000, 30, 60, 30));
        assert_eq!(content.video_samples(), 900);
        assert!(e5.load.content_for(true).unwrap().seconds < 10);
    }

    #[test]
    fn bad_declarations_are_refused() {
        let base = include_str!("../experiments/e2-concurrency.toml");
        assert!(
            Experiment::parse(&base.replace("\"p95_ms\", \"p99_ms\"", "\"p95_ms\", \"nonsense\"")).is_err()
        );
        assert!(Experiment::parse(&base.replace("duration = \"30s\"", "")).is_err());
        assert!(
            Experiment::parse(&base.replace("kind = \"below\"", "kind = \"ratio\"")).is_err(),
            "a ratio needs a and b"
        );
        assert!(Experiment::parse(&base.replace(
            "sweep = \"virtual users\"\nmetric = \"p95_ms\"\nat = ",
            "sweep = \"nope\"\nmetric = \"p95_ms\"\nat = "
        ))
        .is_err());
        assert!(Experiment::parse("id = 1").is_err());
        let e5 = include_str!("../experiments/e5-rtsp-fanout.toml");
        assert!(
            Experiment::parse(&e5.replace("\"perfect_clients\"]", "\"p95_ms\"]")).is_err(),
            "HTTP metric"
        );
        assert!(Experiment::parse(&e5.replace("transport = \"udp\"", "")).is_err());
        // A GStreamer peer in an HTTP experiment.
        let e2 = include_str!("../experiments/e2-concurrency.toml");
        assert!(
            Experiment::parse(&format!("{e2}\n[[server]]\nname = \"g\"\nkind = \"gstreamer\"\n")).is_err()
        );
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_label(65536), "64 KB");
        assert_eq!(size_label(1 << 20), "1 MB");
        assert_eq!(size_label(1000), "1000 B");
    }
}
