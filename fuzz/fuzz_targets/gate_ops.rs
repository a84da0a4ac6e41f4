//! Operation sequences on one `Gate` with a manual clock: acquires of the four
//! priority classes with ceilings and cancellation signals, `try_acquire`, polls,
//! drops, signal fires, clock advances, releases, close, resizes, splits, merges
//! and forgets, replayed against the gate model `admit_model::gate`
//! (`model/src/gate.rs`; shed counts per source, reason and class, admits,
//! releases, wakes, estimates, and who is shed for a higher class). The first two
//! bytes pick the capacity, `max_units` and overload target, and the wait budget
//! and `max_waiters`; the rest decode as `GateOp`s until the bytes run out.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    admit_model::gate::replay_gate_bytes(data);
});
