#![no_main]
//! Fuzz target: see `sluice_media::fuzzing::flv_body` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_media::fuzzing::flv_body(data));
