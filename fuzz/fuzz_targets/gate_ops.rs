//! Operation sequences on one `Gate` with a manual clock: acquires with ceilings
//! and cancellation signals, `try_acquire`, polls, drops, signal fires, clock
//! advances, releases and close, replayed against the gate model
//! `admit_model::gate` (`model/src/gate.rs`; shed counts per source, admits,
//! releases, wakes). The first two bytes pick the capacity and the wait budget; the
//! rest decode as `GateOp`s until the bytes run out.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    admit_model::gate::replay_gate_bytes(data);
});
