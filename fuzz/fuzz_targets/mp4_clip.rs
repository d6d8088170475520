#![no_main]
//! Fuzz target: see `sluice_media::fuzzing::mp4_clip` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_media::fuzzing::mp4_clip(data));
