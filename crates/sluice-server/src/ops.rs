//! Operating a running server: the admin listener ([`admin`]) with its live [`dashboard`],
//! `/metrics` ([`metrics`]), log output ([`logging`]) and the benchmark endpoints ([`bench`]).
//!
//! Owns what an operator reads and the endpoints that measure the engines. It serves no media:
//! the media port's routes are [`crate::http`]'s.

pub mod admin;
pub mod bench;
pub mod dashboard;
pub mod logging;
pub mod metrics;
