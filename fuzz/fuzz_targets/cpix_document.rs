#![no_main]
//! Fuzz target: see `sluice_media::fuzzing::cpix_document` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_media::fuzzing::cpix_document(data));
