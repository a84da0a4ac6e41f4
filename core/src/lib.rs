#![doc = include_str!("../README.md")]
#![no_std]
#![warn(
    clippy::std_instead_of_core,
    clippy::std_instead_of_alloc,
    clippy::alloc_instead_of_core
)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "alloc")]
extern crate alloc;
// The crate's own tests (loom, shuttle) and the loom build run on std whatever
// the features.
#[cfg(any(feature = "std", test, admit_loom))]
extern crate std;

/// A markdown link definition for `[`$label`]` naming an item that exists only with
/// `alloc`: the item itself there, its page on docs.rs (`$page`, relative to the
/// crate's root) in a build without it, so the docs of a `no_std` build keep their
/// links. Used as `#[doc = alloc_item_link!(..)]` after an item's doc comment.
#[cfg(feature = "alloc")]
macro_rules! alloc_item_link {
    ($label:literal, $path:literal, $page:literal) => {
        concat!("\n\n[`", $label, "`]: crate::", $path)
    };
}
#[cfg(not(feature = "alloc"))]
macro_rules! alloc_item_link {
    ($label:literal, $path:literal, $page:literal) => {
        concat!(
            "\n\n[`",
            $label,
            "`]: https://docs.rs/admit/latest/admit/",
            $page
        )
    };
}

#[cfg(all(admit_loom, not(any(test, feature = "__loom"))))]
compile_error!(
    "`--cfg admit_loom` builds admit on loom: it needs the test-only `__loom` feature \
     (the `loom-tests` crate enables it), or the crate's own unit tests"
);

#[cfg(not(any(feature = "alloc", feature = "critical-section")))]
compile_error!(
    "admit without `alloc` needs its `critical-section` feature (the wait queue's lock), \
     and an implementation of `critical-section` for the target"
);

#[cfg(feature = "tokio-compat")]
#[cfg_attr(docsrs, doc(cfg(feature = "tokio-compat")))]
pub mod compat;
mod gate;
mod loom;
mod safeguard;
mod semaphore;

/// The safeguard switches of the loom build and the negative controls' runner,
/// for the models of the `loom-tests`
/// crate: test-only, not part of the API, outside semver, and absent without
/// `--cfg admit_loom`.
#[cfg(admit_loom)]
#[doc(hidden)]
pub mod __loom {
    pub use crate::safeguard::{expect_failure, switch_off, Safeguard, SwitchedOff};
}

/// The gate's constants, for the reference models of the `admit-model` crate:
/// test-only, not part of the API, outside semver.
#[cfg(feature = "__model")]
#[doc(hidden)]
pub mod __model {
    pub use crate::gate::model_constants::*;
}

#[doc(hidden)]
pub use gate::{__label_count, __label_is_snake_case};
#[cfg(feature = "std")]
pub use gate::{
    memory_limit_in, memory_limit_of, memory_use_of, process_memory_limit, process_memory_use,
};
pub use gate::{
    whole_seconds_up, AdmitEvent, Capacity, CapacityEvent, ConfigError, CutEvent, CutReason,
    GateError, LeaseEnd, LeaseEndEvent, LeaseStartEvent, MemoryEvent, MemoryUse, Observer,
    OverloadEvent, Priority, ReleaseEvent, ShedEvent, ShedReason, Source, StartEvent, Timer,
};
#[cfg(feature = "alloc")]
pub use gate::{
    DrainTimeout, Gate, GateAcquire, GateBuilder, GateDrain, GatePermit, MemoryWatch, NoTimer,
    Pressure, MAX_WAIT_BUDGET, MIN_WAIT_BUDGET,
};
#[cfg(feature = "std")]
pub use gate::{Expire, Lease, LeaseError, Leases, LeasesDrain, ThreadSleep, ThreadTimer};
#[cfg(feature = "std")]
pub use semaphore::AcquireTimeoutError;
pub use semaphore::{
    Acquire, AcquireError, Drain, ExceedsCapacity, Permit, Semaphore, TryAcquireError,
};
#[cfg(feature = "alloc")]
pub use semaphore::{AcquireOwned, OwnedPermit, PollSemaphore};

// Every public type is `Send + Sync`, checked at compile time.
const _: fn() = || {
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
    check::<Priority>();
    check::<StartEvent<'_>>();
    check::<AdmitEvent>();
    check::<ReleaseEvent>();
    check::<ShedEvent>();
    check::<CapacityEvent>();
    check::<OverloadEvent>();
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
        check::<PollSemaphore>();
        #[cfg(feature = "tokio-compat")]
        {
            check::<compat::Semaphore>();
            check::<compat::SemaphorePermit<'_>>();
            check::<compat::OwnedSemaphorePermit>();
            check::<compat::PollSemaphore>();
            check::<compat::AcquireError>();
            check::<compat::TryAcquireError>();
        }
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
};
