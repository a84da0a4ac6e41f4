//! The admission gate: a [`Semaphore`](crate::Semaphore) with a wait budget, an
//! [`Observer`] and a closed set of call-site labels ([`Source`]).
//!
//! # Invariants
//!
//! - An acquire ends in exactly one of: a [`GatePermit`] (the observer hears
//!   `on_admit` *after* the grant), [`GateError::Busy`] (`on_shed`, once, with
//!   the [`ShedReason`]),
//!   [`GateError::Cancelled`], [`GateError::ExceedsMaxUnits`],
//!   [`GateError::ExceedsCapacity`] or
//!   [`GateError::Closed`] (the observer hears nothing), or a drop (nothing).
//! - A permit tells the observer `on_release` *before* its units return to the
//!   semaphore, so a gauge kept from the two hooks never reads above the capacity
//!   (but while a shrink below the units in use settles).
//! - Labels come from a [`Source`] type: a closed set known at compile time, so
//!   per-source metrics have bounded cardinality.
//!
//! The parts: [`Capacity`] (units, or derived from a memory budget), [`Timer`] (the
//! clock a runtime adapter supplies), [`Observer`] (the hooks), [`Source`] (labels),
//! [`GateError`] / [`ConfigError`], and, with `alloc`, the [`Gate`] itself, its
//! builder, acquire future, permit, the pace that estimates a wait and sets
//! `Retry-After`, and overload control.

#[cfg(feature = "alloc")]
mod acquire;
#[cfg(feature = "alloc")]
mod builder;
mod capacity;
#[cfg(feature = "std")]
mod cgroup;
mod error;
#[cfg(feature = "alloc")]
mod handle;
#[cfg(feature = "alloc")]
mod inner;
#[cfg(feature = "std")]
mod lease;
#[cfg(feature = "alloc")]
mod lifecycle;
#[cfg(feature = "alloc")]
mod memory;
mod observer;
#[cfg(feature = "alloc")]
mod on_drop;
#[cfg(feature = "alloc")]
mod overload;
#[cfg(feature = "alloc")]
mod pace;
#[cfg(feature = "alloc")]
mod pressure;
#[cfg(feature = "alloc")]
mod protocol;

/// The constants [`crate::__model`] gives the reference models.
#[cfg(feature = "__model")]
pub(crate) mod model_constants {
    use core::time::Duration;

    /// The shortest overload interval.
    pub const MIN_INTERVAL: Duration = super::overload::MIN_INTERVAL;
    /// The longest.
    pub const MAX_INTERVAL: Duration = super::overload::MAX_INTERVAL;
    /// Intervals in a row that saw the queue empty to leave the overloaded state.
    pub const CALM_INTERVALS: u32 = super::overload::CALM_INTERVALS;
    /// Mean holds of a unit per interval.
    pub const INTERVAL_HOLDS: u32 = super::overload::INTERVAL_HOLDS;
    /// Targets an overloaded gate lets a request wait.
    pub const CAP_TARGETS: u32 = super::overload::CAP_TARGETS;
    /// Targets of queue that press the gate.
    pub const PRESS_MARK: u32 = super::overload::PRESS_MARK;
    /// The mean hold's window, fewest units.
    pub const MIN_WINDOW: u32 = super::pace::MIN_WINDOW;
    /// Most units.
    pub const MAX_WINDOW: u32 = super::pace::MAX_WINDOW;
}
#[cfg(feature = "alloc")]
mod permit;
mod priority;
mod source;
mod timer;

#[cfg(feature = "alloc")]
pub use acquire::GateAcquire;
#[cfg(feature = "alloc")]
pub use builder::{GateBuilder, NoTimer, MAX_WAIT_BUDGET, MIN_WAIT_BUDGET};
pub use capacity::Capacity;
#[cfg(feature = "std")]
pub use cgroup::{
    memory_limit_in, memory_limit_of, memory_use_of, process_memory_limit, process_memory_use,
};
pub use error::{whole_seconds_up, ConfigError, GateError};
#[cfg(feature = "alloc")]
pub use handle::Gate;
#[cfg(feature = "std")]
pub use lease::{Expire, Lease, LeaseError, Leases, LeasesDrain};
#[cfg(feature = "alloc")]
pub use lifecycle::{DrainTimeout, GateDrain};
#[cfg(feature = "alloc")]
pub use memory::MemoryWatch;
pub use observer::{
    AdmitEvent, CapacityEvent, CutEvent, CutReason, LeaseEnd, LeaseEndEvent, LeaseStartEvent,
    MemoryEvent, MemoryUse, Observer, OverloadEvent, ReleaseEvent, ShedEvent, ShedReason,
    StartEvent,
};
#[cfg(feature = "alloc")]
pub use permit::GatePermit;
#[cfg(feature = "alloc")]
pub use pressure::Pressure;
pub use priority::Priority;
pub use source::Source;
#[doc(hidden)]
pub use source::{__label_count, __label_is_snake_case};
pub use timer::Timer;
#[cfg(feature = "std")]
pub use timer::{ThreadSleep, ThreadTimer};
