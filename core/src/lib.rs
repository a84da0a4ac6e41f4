//! An admission gate for async Rust: a lock-free, FIFO-fair, weighted semaphore whose
//! multi-unit acquire is all-or-nothing.
//!
//! A request for two units takes both or none, so two operations that each need two
//! units can never each strand one and wait on the other. Parked requests are served
//! strictly in arrival order. The crate is `no_std`, needs no 64-bit atomics, and
//! knows no runtime: it uses only [`core::task::Waker`]. With `alloc` no operation
//! ever waits for another thread, not even a cancel.
//!
//! ```
//! use admit::Semaphore;
//!
//! # futures_lite::future::block_on(async {
//! let sessions = Semaphore::new(4);
//! let permit = sessions.acquire(2).await?; // both units or none
//! assert_eq!(permit.units(), 2);
//! assert_eq!(sessions.available(), 2);
//! drop(permit); // the units return
//! # Ok::<(), admit::AcquireError>(())
//! # }).unwrap();
//! ```
//!
//! # Features
//!
//! | Feature | Default | Explanation |
//! |---|---|---|
//! | `std` | yes | blocking acquires for threads, `From<GateError> for std::io::Error`, the process's memory limit (cgroup); implies `alloc` |
//! | `alloc` | via `std` | the [`Gate`]; [`Semaphore::acquire_owned`] / [`OwnedPermit`] on `Arc<Semaphore>`; wait nodes on the heap, so nothing ever waits for another thread (without it, nodes live in the futures and a dropped parked future waits for the serving thread to let go of its node) |
//!
//! On top of the semaphore, [`Gate`] (feature `alloc`) parks a caller for at most a
//! wait budget, then sheds it with [`GateError::Busy`] and a `Retry-After`, telling
//! an [`Observer`] what it does; [`Capacity`] sizes it from a memory budget.
//!
//! The algorithm, its invariants and memory orderings are described at the top of
//! `src/semaphore/mod.rs` and in `docs/design.md`.
#![no_std]
#![warn(
    clippy::std_instead_of_core,
    clippy::std_instead_of_alloc,
    clippy::alloc_instead_of_core
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
// The crate's own tests (loom, shuttle) run on std whatever the features.
#[cfg(any(feature = "std", test))]
extern crate std;

mod gate;
mod loom;
#[cfg(all(test, admit_loom))]
mod loom_tests;
mod mechanism;
mod semaphore;

#[cfg(feature = "std")]
pub use gate::{memory_limit_in, process_memory_limit};
pub use gate::{
    whole_seconds_up, Capacity, ConfigError, GateError, Observer, ShedReason, Source, Timer,
};
#[cfg(feature = "alloc")]
pub use gate::{
    DrainTimeout, Gate, GateAcquire, GateBuilder, GateDrain, GatePermit, NoTimer, MAX_WAIT_BUDGET,
};
#[cfg(feature = "std")]
pub use semaphore::AcquireTimeoutError;
pub use semaphore::{
    Acquire, AcquireError, Drain, ExceedsCapacity, Permit, Semaphore, TryAcquireError,
};
#[cfg(feature = "alloc")]
pub use semaphore::{AcquireOwned, OwnedPermit};

/// Every public type is `Send + Sync`, checked at compile time.
#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<Semaphore>();
    check::<Permit<'_>>();
    check::<Acquire<'_>>();
    check::<Drain<'_>>();
    check::<AcquireError>();
    check::<TryAcquireError>();
    check::<ExceedsCapacity>();
    check::<GateError>();
    check::<ConfigError>();
    check::<ShedReason>();
    check::<Capacity>();
    #[cfg(feature = "std")]
    check::<AcquireTimeoutError>();
    #[cfg(feature = "alloc")]
    {
        gate::<Src>();
    }
    #[cfg(feature = "alloc")]
    fn gate<S: Source>() {
        struct T;
        impl Timer for T {
            type Sleep = core::future::Pending<()>;
            fn now(&self) -> core::time::Duration {
                core::time::Duration::ZERO
            }
            fn sleep_until(&self, _: core::time::Duration) -> Self::Sleep {
                core::future::pending()
            }
        }
        check::<OwnedPermit>();
        check::<AcquireOwned>();
        check::<Gate<S, T, ()>>();
        check::<GateBuilder<S, T, ()>>();
        check::<GateAcquire<'_, S, T, ()>>();
        check::<GateDrain<'_, S, T, ()>>();
        check::<GatePermit<S>>();
        check::<DrainTimeout<S>>();
    }
    #[cfg(feature = "alloc")]
    sources! {
        enum Src { Only => "only" }
    }
}
