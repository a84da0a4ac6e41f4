//! Event hooks a [`Gate`](crate::Gate) calls, so a metrics adapter can report what it
//! does without the core knowing any metrics crate.
//!
//! # Ordering guarantees
//!
//! - [`Observer::on_admit`] is called *after* the units were granted, and
//!   [`Observer::on_release`] *before* they return to the semaphore. A gauge of units
//!   in use kept by these two hooks therefore never reads above the capacity.
//! - Exactly one of `on_admit` or `on_shed` is called per acquire that ends in a
//!   grant or a shed (wait budget expired, or queue full); cancellations, oversize
//!   requests and closes call neither.
//! - Every admitted unit is reported released exactly once: by its permit's
//!   release, or by a [`forget`](crate::GatePermit::forget) (then `on_capacity`
//!   follows); splitting and merging permits report nothing.

use core::time::Duration;

/// Hooks for a gate's events. Every method has a no-op default; `()` is the
/// observer that observes nothing.
pub trait Observer: Send + Sync + 'static {
    /// Once, when the gate is built: its capacity and every label its [`Source`]
    /// type can produce, so per-source series can be registered at zero.
    ///
    /// [`Source`]: crate::Source
    fn on_start(&self, capacity: usize, sources: &[&'static str]) {
        let _ = (capacity, sources);
    }

    /// A caller from `source` was granted `units` after waiting `waited`.
    fn on_admit(&self, source: &'static str, units: usize, waited: Duration) {
        let _ = (source, units, waited);
    }

    /// A permit for `units` from `source` is being released after `held`; the units
    /// return to the semaphore right after this returns.
    fn on_release(&self, source: &'static str, units: usize, held: Duration) {
        let _ = (source, units, held);
    }

    /// A caller from `source` asking for `units` was shed after waiting `waited`,
    /// for `reason`: its wait budget (or ceiling) expired while it was still there,
    /// or the queue was full.
    fn on_shed(&self, source: &'static str, units: usize, waited: Duration, reason: ShedReason) {
        let _ = (source, units, waited, reason);
    }

    /// The gate's capacity changed to `capacity` (a resize, or a forgotten permit).
    fn on_capacity(&self, capacity: usize) {
        let _ = capacity;
    }
}

/// Why a caller was shed: the limit that turned it away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShedReason {
    /// Its wait budget (or ceiling) expired while it waited; also a
    /// [`try_acquire`] that found no unit free (a budget of zero).
    #[doc = alloc_item_link!("try_acquire", "Gate::try_acquire", "struct.Gate.html#method.try_acquire")]
    WaitBudget,
    /// [`max_waiters`] requests were already parked: shed at once, without parking.
    #[doc = alloc_item_link!("max_waiters", "GateBuilder::max_waiters", "struct.GateBuilder.html#method.max_waiters")]
    QueueFull,
}

impl ShedReason {
    /// Every reason, for registering per-reason series up front.
    pub const ALL: [ShedReason; 2] = [ShedReason::WaitBudget, ShedReason::QueueFull];

    /// A stable `snake_case` label: `"wait_budget"` or `"queue_full"`.
    #[must_use]
    pub fn label(self) -> &'static str {
        match self {
            Self::WaitBudget => "wait_budget",
            Self::QueueFull => "queue_full",
        }
    }
}

impl Observer for () {}

#[cfg(feature = "alloc")]
impl<O: Observer + ?Sized> Observer for alloc::sync::Arc<O> {
    fn on_start(&self, capacity: usize, sources: &[&'static str]) {
        (**self).on_start(capacity, sources);
    }
    fn on_admit(&self, source: &'static str, units: usize, waited: Duration) {
        (**self).on_admit(source, units, waited);
    }
    fn on_release(&self, source: &'static str, units: usize, held: Duration) {
        (**self).on_release(source, units, held);
    }
    fn on_shed(&self, source: &'static str, units: usize, waited: Duration, reason: ShedReason) {
        (**self).on_shed(source, units, waited, reason);
    }
    fn on_capacity(&self, capacity: usize) {
        (**self).on_capacity(capacity);
    }
}
