//! sluice's I/O engines: the code that owns sockets and executes what protocol sessions ask for.
//!
//! An engine accepts connections, reads bytes into a [`Session`](sluice_proto::Session), writes the
//! session's `Outbox` with the configured [`SendStrategy`], and enforces
//! deadlines. Engines never parse: the same protocol code runs on each of them. The engine is chosen
//! by the [`EngineKind`] enum and each is monomorphised over the [`Service`], so the hot path has no
//! dynamic dispatch. This crate does not know HTTP, routes or files beyond "send this slice".
//!
//! This file only declares modules and re-exports: what an engine is told is in `config`, which
//! engine runs is chosen in `dispatch`, what each starts with is in `launch`, the error in
//! `error`, and every system call (the crate's every `unsafe`) in `sys`.

#![deny(missing_docs)]
#![deny(unsafe_code)]

mod clock;
mod config;
mod connection;
pub mod counters;
mod dispatch;
mod epoll;
mod error;
mod launch;
mod listener;
mod mailbox;
mod pool;
mod reclaim;
pub mod rtsp;
mod send;
mod shutdown;
#[allow(unsafe_code)]
mod sys;
mod threads;
pub mod tls;
mod tokio_engine;
pub mod udp_gso;
mod uring;
mod worker;

pub use config::{check, EngineConfig, EngineKind, SendStrategy, ThreadsMode};
pub use counters::Counters;
pub use dispatch::run;
pub use error::EngineError;
pub use launch::Service;
pub use listener::Listeners;
pub use pool::{CpuPool, PoolFull, PoolStats};
pub use shutdown::Shutdown;
pub use uring::probe::resolve_engine;
