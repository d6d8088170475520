#![no_main]
//! Fuzz target: see `sluice_load::player::manifest::fuzz_manifest` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_load::player::manifest::fuzz_manifest(data));
