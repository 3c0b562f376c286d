//! Shared code of the fuzz targets that need the guest crates (the host's
//! own targets live in `gatehouse::fuzzing`). `adapters.rs` is also compiled
//! into the corpus replay test (`tests/tests/fuzz_corpora.rs`).

pub mod adapters;
