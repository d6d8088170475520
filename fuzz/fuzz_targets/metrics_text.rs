#![no_main]
//! Fuzz target: see `sluice_proto::metrics_text::fuzz_metrics_text` for the property it checks.
libfuzzer_sys::fuzz_target!(|data: &[u8]| sluice_proto::metrics_text::fuzz_metrics_text(data));
