//! Data integrity under aborted downloads, on every engine × send strategy: a response never
//! carries bytes that are not its own, whatever the connections before it on the same worker did.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::TcpStream;

use common::*;
use sha2::{Digest, Sha256};

engine_matrix!(aborted_downloads_never_corrupt_the_next_ones);

/// Follow-up downloads compared by SHA-256 (the evidence).
const FOLLOW_UPS: usize = 50;
/// Aborting clients before each follow-up: with two workers, several make it all but certain that
/// the follow-up lands on a worker that has just seen a reset mid-response.
const ABORTS_PER_ROUND: usize = 3;
/// Larger than one pipe (1 MiB) and than loopback's socket buffers, so the aborted responses are
/// mid-send (a splice or copy chain in flight) when their clients reset.
const FILE_LEN: usize = 4 * 1024 * 1024;

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Client 1 reads 64 KB of a big download and resets the connection (`SO_LINGER {1,0}`);
/// client 2, at once, downloads the whole file with `Connection: close`. Every follow-up must
/// arrive whole and byte-exact: a pipe or buffer of a dead response must never be reused with
/// its bytes still in it.
fn aborted_downloads_never_corrupt_the_next_ones(engine: &[&str]) {
    let fx = Fixture::new();
    let content = pseudo_random(FILE_LEN, 8);
    fx.write("big.bin", &content);
    let expected = sha256_hex(&content);
    let server = Server::serve(engine, &fx, &[]);
    let mut bad = Vec::new();
    for round in 0..FOLLOW_UPS {
        let mut aborted = Vec::new();
        for i in 0..ABORTS_PER_ROUND {
            let mut s = TcpStream::connect(server.addr()).expect("connect");
            s.set_read_timeout(Some(IO_TIMEOUT)).unwrap();
            s.write_all(&get("/big.bin", &[])).expect("send the aborted request");
            // The aborted downloads' own first bytes must be intact too.
            let mut first = vec![0u8; 64 * 1024];
            match s.read_exact(&mut first) {
                Ok(()) => {
                    let head_end = find(&first, b"\r\n\r\n").map_or(first.len(), |i| i + 4);
                    let body = &first[head_end..];
                    if body != &content[..body.len()] {
                        bad.push(format!("round {round}: aborted download {i} began with foreign bytes"));
                    }
                }
                Err(e) => bad.push(format!("round {round}: aborted download {i} cut before 64 KB: {e}")),
            }
            aborted.push(s);
        }
        for s in aborted {
            set_linger_zero(&s);
            drop(s);
        }
        let mut c = Conn::open(server.addr());
        c.send(get("/big.bin", &[("Connection", "close")]));
        match c.read_response(false) {
            Ok(r) => {
                let got = sha256_hex(&r.body);
                if r.status != 200 || got != expected {
                    bad.push(format!(
                        "round {round}: status {}, {} of {FILE_LEN} body bytes, sha256 {got}",
                        r.status,
                        r.body.len()
                    ));
                }
            }
            Err(e) => bad.push(format!("round {round}: {}", lossy_prefix(e.as_bytes(), 200))),
        }
    }
    record_figure(
        "aborted downloads, then a SHA-256-checked download",
        engine,
        format!("{} of {FOLLOW_UPS} rounds with a corrupted or cut response", bad.len()),
    );
    assert!(
        bad.is_empty(),
        "{} failures in {FOLLOW_UPS} rounds of aborted downloads and a follow-up (sha256 {expected}):\n{}",
        bad.len(),
        bad.join("\n")
    );
    // The server is still whole and still serving.
    fetch_get(server.addr(), "/t1.html", &[("Connection", "close")])
        .expect_status(200, "GET after the aborts");
}
