//! Replays the committed fuzz corpus (`fuzz/corpus/<target>/`) through the same property checks
//! the fuzz targets run, so every input that once mattered is checked by `cargo test`.

// A test that unwraps fails with the value it did not expect, which is what a test should do.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;

fn replay(target: &str, check: fn(&[u8])) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus").join(target);
    sluice_proto::fuzzing::replay_corpus(&dir, check);
}

#[test]
fn http_session_corpus() {
    replay("http_session", sluice_proto::fuzzing::http_session);
}

#[test]
fn request_head_corpus() {
    replay("request_head", sluice_proto::fuzzing::request_head);
}

#[test]
fn range_header_corpus() {
    replay("range_header", sluice_proto::fuzzing::range_header);
}

#[test]
fn rtsp_request_corpus() {
    replay("rtsp_request", sluice_proto::fuzzing::rtsp_request);
}

#[test]
fn rtp_roundtrip_corpus() {
    replay("rtp_roundtrip", sluice_proto::fuzzing::rtp_roundtrip);
}

#[test]
fn access_credentials_corpus() {
    replay("access_credentials", sluice_proto::fuzzing::access_credentials);
}

#[test]
fn chunked_body_corpus() {
    replay("chunked_body", sluice_proto::fuzzing::chunked_body);
}

#[test]
fn http_response_corpus() {
    replay("http_response", sluice_proto::fuzzing::http_response);
}

#[test]
fn rtsp_response_corpus() {
    replay("rtsp_response", sluice_proto::fuzzing::rtsp_response);
}
