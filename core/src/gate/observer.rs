//! Event hooks a [`Gate`](crate::Gate) calls, so a metrics adapter can report what it
//! does without the core knowing any metrics crate.
//!
//! # Ordering guarantees
//!
//! - [`Observer::on_admit`] is called *after* the units were granted, and
//!   [`Observer::on_release`] *before* they return to the semaphore. A gauge of units
//!   in use kept by these two hooks therefore never reads above the capacity.
//! - Exactly one of `on_admit` or `on_shed` is called per acquire that ends in a
//!   grant or a wait-budget expiry; cancellations, oversize requests and closes call
//!   neither.

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

    /// A caller from `source` asking for `units` was shed after waiting `waited`:
    /// its wait budget (or ceiling) expired while it was still there.
    fn on_shed(&self, source: &'static str, units: usize, waited: Duration) {
        let _ = (source, units, waited);
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
    fn on_shed(&self, source: &'static str, units: usize, waited: Duration) {
        (**self).on_shed(source, units, waited);
    }
}
