//! Shared helpers for sluice's integration tests, one module a concern, on top of sluice-harness
//! (processes, ports, peers): the `sluice serve` process ([`server`]), the temporary media
//! library ([`fixture`]), a raw HTTP/1.1 client ([`http`]) and range checks ([`ranges`]),
//! external tools and bounded waits ([`tools`]), the RTSP client ([`rtsp`]) with the header
//! parsing both clients share ([`headers`]), and here the engine matrix macro.
//!
//! Everything here talks to 127.0.0.1 only, and every wait is bounded: a hung server fails the
//! test that hit it instead of hanging the suite.

#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Longest any single socket operation or process wait may take.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Generates one module per engine configuration, each holding one `#[test]` per listed test
/// function. Every test function takes the engine arguments (`&[&str]`), so a failure is named
/// `epoll_copy::ranges_single` and says which configuration broke.
macro_rules! engine_matrix {
    ($($test:ident),+ $(,)?) => {
        engine_matrix!(@module uring_splice,
            ["--engine", "uring", "--workers", "2", "--send", "splice"]; $($test),+);
        engine_matrix!(@module uring_copy,
            ["--engine", "uring", "--workers", "2", "--send", "copy"]; $($test),+);
        engine_matrix!(@module epoll_sendfile,
            ["--engine", "epoll", "--workers", "2", "--send", "sendfile"]; $($test),+);
        engine_matrix!(@module epoll_splice,
            ["--engine", "epoll", "--workers", "2", "--send", "splice"]; $($test),+);
        engine_matrix!(@module epoll_copy,
            ["--engine", "epoll", "--workers", "2", "--send", "copy"]; $($test),+);
        engine_matrix!(@module tokio_sendfile,
            ["--engine", "tokio", "--workers", "2", "--send", "sendfile"]; $($test),+);
        engine_matrix!(@module tokio_splice,
            ["--engine", "tokio", "--workers", "2", "--send", "splice"]; $($test),+);
        engine_matrix!(@module tokio_copy,
            ["--engine", "tokio", "--workers", "2", "--send", "copy"]; $($test),+);
        engine_matrix!(@module threads_pool_sendfile,
            ["--engine", "threads", "--threads-mode", "pool", "--pool-size", "16", "--send", "sendfile"];
            $($test),+);
        engine_matrix!(@module threads_pool_splice,
            ["--engine", "threads", "--threads-mode", "pool", "--pool-size", "16", "--send", "splice"];
            $($test),+);
        engine_matrix!(@module threads_pool_copy,
            ["--engine", "threads", "--threads-mode", "pool", "--pool-size", "16", "--send", "copy"];
            $($test),+);
        engine_matrix!(@module threads_per_connection_sendfile,
            ["--engine", "threads", "--threads-mode", "per-connection", "--send", "sendfile"];
            $($test),+);
        engine_matrix!(@module threads_per_connection_copy,
            ["--engine", "threads", "--threads-mode", "per-connection", "--send", "copy"];
            $($test),+);
    };
    (@module $name:ident, [$($arg:expr),* $(,)?]; $($test:ident),+) => {
        mod $name {
            const ENGINE: &[&str] = &[$($arg),*];
            $(
                #[test]
                fn $test() {
                    super::$test(ENGINE)
                }
            )+
        }
    };
}

/// One module per engine for the RTSP tests; each holds one `#[test]` per listed function, which
/// takes the engine's arguments. Send strategies do not apply to RTSP (its loop is io_uring on
/// `uring`, epoll on the others).
#[allow(unused_macros)] // used by the RTSP test files only
macro_rules! rtsp_matrix {
    ($($test:ident),+ $(,)?) => {
        engine_matrix!(@module uring, ["--engine", "uring", "--workers", "1"]; $($test),+);
        engine_matrix!(@module epoll, ["--engine", "epoll", "--workers", "2"]; $($test),+);
        engine_matrix!(@module threads, ["--engine", "threads"]; $($test),+);
        engine_matrix!(@module tokio, ["--engine", "tokio", "--workers", "2"]; $($test),+);
    };
}

pub mod browser;
pub mod codec_clips;
pub mod edge;
mod fixture;
mod headers;
mod http;
#[allow(clippy::unwrap_used)]
pub mod protect;
pub mod publisher;
mod ranges;
pub mod rtsp;
mod server;
mod store;
mod tools;

// Each test crate uses a part of the harness; what one does not use is not an error.
#[allow(unused_imports)]
pub use fixture::*;
#[allow(unused_imports)]
pub use headers::*;
#[allow(unused_imports)]
pub use http::*;
#[allow(unused_imports)]
pub use ranges::*;
#[allow(unused_imports)]
pub use server::*;
#[allow(unused_imports)]
pub use store::*;
#[allow(unused_imports)]
pub use tools::*;
