#![no_main]
//! Fuzz target: see `sluice_proto::fuzzing::request_head` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_proto::fuzzing::request_head(data));
