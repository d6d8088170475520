//! `sluice serve` as a library: configuration, the media library, routes and pages, and the
//! assembly of a running server over any engine.
//!
//! This crate wires `sluice-proto` (what HTTP means) to `sluice-engine` (how bytes move). It owns
//! the application's decisions (which file, which page, which error) and none of the protocol
//! parsing or socket handling. Its rooms, by job: [`http`] (the routes and responders of the media
//! port), [`rtsp`] (the RTSP cores the engine's loops drive and the library they read), [`rtmp`]
//! (publishers over RTMP into the RTSP live paths), [`ops`]
//! (the admin listener, its dashboard, `/metrics`, logging, the benchmark endpoints), [`library`]
//! (files by path, local or remote, their catalogue of MP4 indexes and rendition sets), [`page`]
//! (the folder page and its vendored players), [`access`] and [`protect`] (who may read, what is
//! encrypted), [`thumbs`] (scrubbing thumbnail tiles, made by ffmpeg through [`child`], the one
//! launcher of other programs), [`config`], and [`serve`], which assembles them into a running
//! server.

#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod access;
pub mod child;
pub mod config;
pub mod http;
pub mod library;
pub mod ops;
pub mod page;
pub mod protect;
pub mod record;
pub mod rtmp;
pub mod rtsp;
pub mod serve;
#[allow(unsafe_code)]
mod sys;
pub mod thumbs;

pub use config::Config;
pub use serve::{ServeError, Server};
