#![no_main]
//! Fuzz target: see `sluice_rtsp::fuzzing::rtsp_session` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_rtsp::fuzzing::rtsp_session(data));
