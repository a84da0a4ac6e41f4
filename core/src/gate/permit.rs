//! The permit a gate hands out.

use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;

use super::handle::Shared;
use crate::{OwnedPermit, Source};

/// Units held from a [`Gate`](crate::Gate): owned, `'static`, `Send + Sync`, so it
/// can move into a spawned task or a response body. Names only its source type: the
/// gate's timer and observer are erased.
///
/// Dropping it (or [`release`](Self::release)) reports the release to the gate's
/// observer with the hold time, *then* returns the units, so a gauge kept by the
/// observer never reads more units in use than the capacity. A panic in the
/// holder's code returns the units on unwind, like any drop.
#[must_use = "dropping a permit returns its units at once"]
pub struct GatePermit<S: Source> {
    shared: Arc<dyn Shared>,
    /// Dropped after `Drop::drop` has told the observer: that is what returns the
    /// units.
    permit: OwnedPermit,
    source: S,
    admitted_at: Duration,
}

impl<S: Source> GatePermit<S> {
    pub(crate) fn new(
        shared: Arc<dyn Shared>,
        permit: OwnedPermit,
        source: S,
        admitted_at: Duration,
    ) -> Self {
        Self {
            shared,
            permit,
            source,
            admitted_at,
        }
    }

    /// The units this permit holds.
    #[must_use]
    pub fn units(&self) -> usize {
        self.permit.units()
    }

    /// The call site the units were acquired for.
    #[must_use]
    pub fn source(&self) -> S {
        self.source
    }

    /// How long the units have been held so far, by the gate's timer.
    #[must_use]
    pub fn held_for(&self) -> Duration {
        self.shared.now().saturating_sub(self.admitted_at)
    }

    /// Returns the units now; the same as dropping the permit.
    pub fn release(self) {}
}

impl<S: Source> Drop for GatePermit<S> {
    fn drop(&mut self) {
        // Before the units return: `self.permit` is dropped after this returns
        // (or on unwind, should the observer panic).
        self.shared
            .on_release(self.source.label(), self.permit.units(), self.admitted_at);
    }
}

impl<S: Source> fmt::Debug for GatePermit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatePermit")
            .field("units", &self.units())
            .field("source", &self.source.label())
            .field("held_for", &self.held_for())
            .finish()
    }
}
