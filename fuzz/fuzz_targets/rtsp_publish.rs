#![no_main]
//! Fuzz target: see `sluice_rtsp::fuzzing::rtsp_publish` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_rtsp::fuzzing::rtsp_publish(data));
