#![no_main]
//! Fuzz target: see `sluice_proto::fuzzing::rtsp_response` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_proto::fuzzing::rtsp_response(data));
