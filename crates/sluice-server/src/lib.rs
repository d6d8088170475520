//! `sluice serve` as a library: configuration, the media library, routes and pages, and the
//! assembly of a running server over any engine.
//!
//! This crate wires `sluice-proto` (what HTTP means) to `sluice-engine` (how bytes move). It owns
//! the application's decisions (which file, which page, which error) and none of the protocol
//! parsing or socket handling.

#![deny(missing_docs)]

pub mod access;
pub mod admin;
pub mod app;
pub mod bench;
pub mod catalogue;
pub mod clip;
pub mod config;
pub mod dashboard;
pub mod gzip_static;
pub mod hls;
pub mod library;
pub mod limits;
pub mod logging;
pub mod media;
pub mod metrics;
pub mod page;
pub mod protect;
pub mod renditions;
pub mod rtsp_cores;
pub mod serve;
pub mod trick;
pub mod ts;
pub mod upload;

pub use config::Config;
pub use serve::{ServeError, Server};
