#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| gatehouse::fuzzing::chat_request(data));
