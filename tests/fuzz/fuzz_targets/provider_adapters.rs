#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse_fuzz::adapters::provider_adapters(data));
