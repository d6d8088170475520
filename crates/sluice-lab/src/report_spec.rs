//! What an experiment declares about its report: its tables, charts, generated findings, the
//! source report's published numbers and its claims with how each is checked (see `claims` for
//! the kinds). Declarations only: building tables and charts is `report`'s, checking claims is
//! `claims`'.

use serde::{Deserialize, Serialize};

/// A table of the report: servers down, the sweep's points across, each with `metrics`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TableSpec {
    /// Caption.
    pub caption: String,
    /// Which sweep (the first when absent).
    #[serde(default)]
    pub sweep: Option<String>,
    /// Metric names (see `metrics`).
    pub metrics: Vec<String>,
    /// Add the change from the first point to the last, in %.
    #[serde(default)]
    pub change: bool,
}

/// A chart of the report: one line per server, the sweep's parameter on x.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChartSpec {
    /// Title.
    pub title: String,
    /// Metric on y.
    pub metric: String,
    /// Which sweep (the first when absent).
    #[serde(default)]
    pub sweep: Option<String>,
    /// Logarithmic x axis.
    #[serde(default)]
    pub log_x: bool,
}

/// A generated finding.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FindingSpec {
    /// `best`, `flat`, `ratio`, `success` or `latency_overhead` (see `findings`).
    pub kind: String,
    /// The metric compared.
    #[serde(default)]
    pub metric: Option<String>,
    /// First server (`ratio`).
    #[serde(default)]
    pub a: Option<String>,
    /// Second server (`ratio`).
    #[serde(default)]
    pub b: Option<String>,
    /// Only points with at least this many virtual users (`ratio`).
    #[serde(default)]
    pub min_vus: Option<usize>,
}

/// Numbers from the source report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedTable {
    /// Caption.
    pub caption: String,
    /// Column headings.
    pub columns: Vec<String>,
    /// Cells.
    pub rows: Vec<Vec<String>>,
}

/// How a claim is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    /// One server against another.
    Ratio,
    /// A metric that should not grow along the sweep.
    Flat,
    /// A metric under a bound.
    Below,
    /// Not measurable on this machine.
    NotMeasurable,
}

/// One published claim and how this run checks it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimSpec {
    /// The claim in words.
    pub claim: String,
    /// The published figure behind it.
    pub published: String,
    /// How it is checked.
    pub kind: ClaimKind,
    /// The sweep whose rows count (the first when absent).
    #[serde(default)]
    pub sweep: Option<String>,
    /// The metric (`req_per_s` when absent).
    #[serde(default)]
    pub metric: Option<String>,
    /// First server (`ratio`).
    #[serde(default)]
    pub a: Option<String>,
    /// Second server (`ratio`).
    #[serde(default)]
    pub b: Option<String>,
    /// The point (its x label: `1000`, `1 MB`); absent: every point.
    #[serde(default)]
    pub at: Option<String>,
    /// First point of a `flat` claim.
    #[serde(default)]
    pub from: Option<String>,
    /// Last point of a `flat` claim.
    #[serde(default)]
    pub to: Option<String>,
    /// Servers a `flat` or `below` claim is checked for, one verdict each.
    #[serde(default)]
    pub servers: Vec<String>,
    /// The ratio that reproduces a `ratio` claim at least.
    #[serde(default)]
    pub at_least: Option<f64>,
    /// The ratio (or for `below`, the value) that reproduces the claim at most.
    #[serde(default)]
    pub at_most: Option<f64>,
    /// Why a `not_measurable` claim is.
    #[serde(default)]
    pub reason: Option<String>,
}
