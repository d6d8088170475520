//! Health checks are never locked out of the admin listener: with 200 dashboards that never read
//! `/events` and 300 idle keep-alive connections held open, `/healthz`, `/readyz` and `/metrics`
//! still answer on fresh connections, a refused event stream is closed rather than kept alive,
//! and an idle admin connection is closed long before the media listener's keep-alive. The admin
//! listener runs on the threads engine whatever `--engine` says; each engine is run anyway, as
//! the media listener beside it is that engine's.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::*;

rtsp_matrix!(health_and_metrics_answer_whatever_other_admin_clients_hold);

/// The behaviour bound: a load balancer or Kubernetes probe gives up after about a second.
const ANSWER_WITHIN: Duration = Duration::from_secs(1);
const STALLED_READERS: usize = 200;
const IDLE_KEEP_ALIVES: usize = 300;
/// Rounds of probes, each after more idle connections arrive.
const ROUNDS: usize = 5;

/// One GET of `path` on a fresh connection: its status and how long it took, or why no answer
/// came within [`ANSWER_WITHIN`].
fn probe(admin: SocketAddr, path: &str) -> Result<(u16, Duration), String> {
    let start = Instant::now();
    let deadline = start + ANSWER_WITHIN;
    let stream = TcpStream::connect_timeout(&admin, ANSWER_WITHIN).map_err(|e| format!("connect: {e}"))?;
    let mut c = Conn::from_stream(stream);
    c.try_send(get(path, &[])).map_err(|e| format!("send: {e}"))?;
    c.set_read_timeout(deadline.saturating_duration_since(Instant::now()));
    let r = c.read_response(false)?;
    if Instant::now() > deadline {
        return Err(format!("answered {} only after {ANSWER_WITHIN:?}", r.status));
    }
    Ok((r.status, start.elapsed()))
}

/// An admin connection that fetched `/healthz` once and then sits idle (kept alive); `None` when
/// the server closed it first (a newcomer took its place).
fn idle_keep_alive(admin: SocketAddr) -> Option<TcpStream> {
    let mut s = TcpStream::connect_timeout(&admin, IO_TIMEOUT).ok()?;
    s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
    s.write_all(&get("/healthz", &[])).ok()?;
    let mut buf = [0u8; 1024];
    let n = s.read(&mut buf).ok()?;
    (n > 0).then_some(s)
}

fn health_and_metrics_answer_whatever_other_admin_clients_hold(engine: &[&str]) {
    let mut server = Server::start(engine, &[]);
    let admin = server.admin_addr();

    // Dashboards that never read, with the smallest receive window: 64 get a stream that
    // stalls, the rest a 503.
    let mut stalled = Vec::with_capacity(STALLED_READERS);
    for _ in 0..STALLED_READERS {
        let mut s = connect_small_rcvbuf(admin, 1);
        if s.write_all(&get("/events", &[])).is_ok() {
            stalled.push(s);
        }
    }
    // One more is refused, says why, and is closed rather than kept alive holding a place.
    let mut refused = Conn::open(admin);
    refused.send(get("/events", &[]));
    let r = refused.response();
    assert_eq!(r.status, 503, "with 64 dashboards following, another is refused: {r:?}");
    assert_eq!(r.header("connection"), Some("close"), "a refused stream is not kept alive: {r:?}");
    assert!(refused.wait_close(IO_TIMEOUT).closed, "the refused stream's connection is closed");

    let mut idle: Vec<TcpStream> = (0..IDLE_KEEP_ALIVES).filter_map(|_| idle_keep_alive(admin)).collect();
    let load = "200 dashboards that never read /events and 300 idle keep-alive connections";
    let mut slowest = Duration::ZERO;
    for round in 0..ROUNDS {
        for path in ["/healthz", "/readyz", "/metrics"] {
            match probe(admin, path) {
                Ok((status, took)) => {
                    assert_eq!(status, 200, "{path} in round {round}, beside {load}");
                    slowest = slowest.max(took);
                }
                Err(e) => panic!(
                    "{path} in round {round} got no answer within {ANSWER_WITHIN:?} beside {load}: {e}"
                ),
            }
        }
        // More idle clients arrive between rounds, so the listener stays at its cap.
        idle.extend((0..IDLE_KEEP_ALIVES / ROUNDS).filter_map(|_| idle_keep_alive(admin)));
    }
    record_figure(
        "health checks beside held admin connections: slowest answer",
        engine,
        format!("{slowest:?}"),
    );
    assert!(server.running(), "the server lives; its log:\n{}", server.log_text());
    drop((stalled, idle));
    assert_eq!(probe(admin, "/healthz").map(|(status, _)| status), Ok(200), "and answers once they are gone");
}

#[test]
fn an_idle_admin_connection_is_closed_long_before_the_media_keep_alive() {
    let server = Server::start(&[], &[]);
    let mut c = Conn::open(server.admin_addr());
    c.send(get("/healthz", &[]));
    assert_eq!(c.response().status, 200);
    // The media listener keeps an idle connection 75 s; the admin listener a few seconds.
    let closed = c.wait_close(Duration::from_secs(30));
    assert!(closed.closed && !closed.reset, "an idle admin connection is closed: {closed:?}");
    // Within the same bound, the media listener still holds its own idle connection.
    let mut media = Conn::open(server.addr());
    media.send(get("/healthz-is-not-here", &[]));
    assert_eq!(media.response().status, 404);
    assert!(
        !media.wait_close(closed.after + Duration::from_secs(2)).closed,
        "the media listener keeps its 75 s"
    );
}
