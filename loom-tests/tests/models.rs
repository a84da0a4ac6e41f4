//! The loom models of admit's public API, one property per module (a file beside
//! this one), each with the negative controls of the mechanisms it covers. The
//! README lists them all.
//!
//! Built only with `RUSTFLAGS="--cfg admit_loom"` (`ci/loom.sh`). Run in both
//! builds of admit: with `alloc` (this crate's default feature) every module; without
//! (`--no-default-features`) those whose properties the build has (no gate, no
//! owned permits) and whose code paths differ between the two wait queues.
#![cfg(admit_loom)]

mod all_or_nothing;
mod arrival_vs_serving;
mod cancel_release;
#[cfg(feature = "alloc")]
mod cells;
mod close_race;
mod completion;
#[cfg(feature = "alloc")]
mod deferred_release_wakeup;
mod drain;
mod fifo_handoff;
#[cfg(feature = "alloc")]
mod first_poll_shed;
#[cfg(feature = "alloc")]
mod gate_release_order;
mod panicking_waker;
#[cfg(feature = "alloc")]
mod permit_cross_thread;
mod resize;
mod split_deadlock;
mod waker_reregistration;
