#![no_main]
//! Fuzz target: see `sluice_proto::fuzzing::http_response` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_proto::fuzzing::http_response(data));
