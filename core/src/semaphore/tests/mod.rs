//! The semaphore's own tests of private parts: the serving counts (`serving.rs`),
//! the state word's count of parked requests (`state.rs`) and the shuttle schedules (`shuttle.rs`, built only with `--cfg admit_shuttle`).
//! The behaviour seen through the public API is tested in `core/tests/`, and
//! under loom in `loom-tests/`.

#[cfg(all(not(admit_loom), not(admit_shuttle)))]
mod serving;
#[cfg(all(admit_loom, feature = "alloc"))]
mod shedding;
#[cfg(admit_shuttle)]
pub(crate) mod shuttle;
#[cfg(all(not(admit_loom), not(admit_shuttle)))]
mod state;
