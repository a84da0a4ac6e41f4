//! Operation sequences on one `Semaphore`, replayed against the reference model
//! of `core/tests/model/mod.rs` (the same replay `cargo test --test fuzz_corpus`
//! runs on the committed corpus). The first byte picks the capacity; the rest
//! decode as `Op`s until the bytes run out.
#![no_main]

#[path = "../../core/tests/model/mod.rs"]
mod model;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    model::replay_bytes(data);
});
