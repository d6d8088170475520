//! Framing strictness (RFC 9112 §6, issue 11 item 4) on every engine: each case is answered with
//! its status, the connection closes after it, and a request pipelined behind it is never served.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

#[macro_use]
mod common;

use std::time::Duration;

use common::*;

engine_matrix!(
    a_400_for_a_parsed_head_closes_the_connection,
    transfer_codings_other_than_a_lone_chunked_are_501,
    two_content_length_fields_are_400_even_equal,
    a_malformed_chunked_body_on_get_is_400_not_200,
    a_space_in_the_target_is_400_not_505,
);

/// Sends `raw` followed by a pipelined `GET /t1.html`; checks the status, that the response says
/// close, that the connection closes and that the pipelined request was not answered.
fn refused_and_closed(server: &Server, raw: &str, status: u16, what: &str) {
    let mut c = Conn::open(server.addr());
    let _ = c.try_send(format!("{raw}GET /t1.html HTTP/1.1\r\nHost: localhost\r\n\r\n"));
    let r = c.read_response(false).unwrap_or_else(|e| panic!("{what}: no response: {e}"));
    r.expect_status(status, what);
    assert!(r.says_close(), "{what}: the {status} says Connection: close\n{r:?}");
    let closed = c.wait_close(Duration::from_secs(5));
    assert!(closed.closed, "{what}: the connection stayed open after {status}");
    assert!(
        !contains(&closed.extra, b"HTTP/1.1"),
        "{what}: the pipelined request was answered: {:?}",
        lossy_prefix(&closed.extra, 200)
    );
}

fn a_400_for_a_parsed_head_closes_the_connection(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    refused_and_closed(&server, "GET x:80 HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "authority-form GET");
    refused_and_closed(&server, "GET /a%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad percent-encoding");
}

fn transfer_codings_other_than_a_lone_chunked_are_501(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    for te in ["identity, chunked", "gzip, chunked", "gzip"] {
        let raw =
            format!("POST /t1.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: {te}\r\n\r\n0\r\n\r\n");
        refused_and_closed(&server, &raw, 501, &format!("Transfer-Encoding: {te}"));
    }
    let raw = "POST /t1.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    refused_and_closed(&server, raw, 501, "two Transfer-Encoding: chunked fields");
}

fn two_content_length_fields_are_400_even_equal(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let raw =
        "GET /t1.html HTTP/1.1\r\nHost: localhost\r\nContent-Length: 4\r\nContent-Length: 4\r\n\r\nabcd";
    refused_and_closed(&server, raw, 400, "two equal Content-Length fields");
}

fn a_malformed_chunked_body_on_get_is_400_not_200(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    let raw =
        "GET /t1.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nxx\r\n0\r\n\r\n";
    refused_and_closed(&server, raw, 400, "GET with a malformed chunked body");
    // A well-formed body on GET is read past and the GET (and what follows) answered.
    let mut c = Conn::open(server.addr());
    c.send("GET /t1.html HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nGET /sub/inner.txt HTTP/1.1\r\nHost: localhost\r\n\r\n");
    c.response().expect_status(200, "GET with a valid chunked body");
    let r = c.response();
    r.expect_status(200, "the request after it");
    assert_eq!(r.body, b"inner file\n");
}

fn a_space_in_the_target_is_400_not_505(engine: &[&str]) {
    let fx = Fixture::new();
    let server = Server::serve(engine, &fx, &[]);
    refused_and_closed(
        &server,
        "GET /a b.txt HTTP/1.1\r\nHost: localhost\r\n\r\n",
        400,
        "a space in the target",
    );
    // A well-formed line with another version is still 505.
    let mut c = Conn::open(server.addr());
    let _ = c.try_send("GET /t1.html HTTP/2.0\r\nHost: localhost\r\n\r\n");
    c.read_response(false).unwrap().expect_status(505, "HTTP/2.0 request line");
}
