#![no_main]
//! Fuzz target: see `sluice_load::rtsp::fuzz_viewer_input` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_load::rtsp::fuzz_viewer_input(data));
