//! Operation sequences on one `Semaphore`, replayed against the reference model
//! `admit_model::semaphore` (`model/src/semaphore.rs`; the same replay
//! `cargo test -p admit-model --test corpus` runs on the committed corpus). The
//! first byte picks the capacity; the rest decode as `Op`s until the bytes run out.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    admit_model::semaphore::replay_bytes(data);
});
