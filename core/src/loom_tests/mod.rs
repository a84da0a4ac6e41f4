//! Loom models of the semaphore and the gate: unit tests of this crate, built only
//! with `RUSTFLAGS="--cfg admit_loom"` (see `ci/loom.sh`), so that loom is a
//! dev-dependency and never enters a dependent's graph (as tokio keeps its own).
//!
//! One property per module; every model is also an exhaustive leak check of the
//! wait nodes (`loom::sync::Arc`), and each mechanism the queue relies on has a
//! negative control beside the model that catches its absence (docs/testing.md).
//! The models of the build without `alloc` (`inline_nodes`) run with
//! `--no-default-features`; the rest need `alloc`.

// The models are test code that runs on std.
#![allow(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

// Each model uses a part; the build without `alloc` runs only one of them.
#[allow(dead_code)]
mod support;

#[cfg(feature = "alloc")]
mod all_or_nothing;
#[cfg(feature = "alloc")]
mod arrival_vs_serving;
#[cfg(feature = "alloc")]
mod cancel_release;
#[cfg(feature = "alloc")]
mod cells;
#[cfg(feature = "alloc")]
mod close_race;
#[cfg(feature = "alloc")]
mod deferred_release_wakeup;
#[cfg(feature = "alloc")]
mod drain;
#[cfg(feature = "alloc")]
mod fifo_handoff;
#[cfg(feature = "alloc")]
mod gate_release_order;
#[cfg(not(feature = "alloc"))]
mod inline_nodes;
#[cfg(feature = "alloc")]
mod permit_cross_thread;
#[cfg(not(feature = "alloc"))]
mod reclamation;
#[cfg(feature = "alloc")]
mod resize;
#[cfg(feature = "alloc")]
mod segments;
#[cfg(feature = "alloc")]
mod split_deadlock;
#[cfg(feature = "alloc")]
mod waker_reregistration;
#[cfg(not(feature = "alloc"))]
mod withdrawal;
