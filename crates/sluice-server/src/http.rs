//! The media port's HTTP side: the routes and what answers them.
//!
//! Owns the mapping from a request to a response ([`app`]) and the responders it hands requests
//! to: files and their gzip forms, HLS and DASH packaging, clips, trick play, MPEG-TS, scrubbing thumbnails, uploads, and
//! the per-address limits applied to connections. It does not parse HTTP (`sluice-proto`), move
//! bytes (`sluice-engine`), find files ([`crate::library`]) or write the folder page
//! ([`crate::page`]).

pub mod app;
pub mod clip;
pub mod derived;
pub mod gzip_static;
pub mod hls;
pub mod limits;
pub mod live;
pub mod rec;
pub mod thumbs;
pub mod trick;
pub mod ts;
pub mod upload;
