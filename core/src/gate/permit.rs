//! The permit a gate hands out.

use alloc::sync::Arc;
use core::fmt;
use core::time::Duration;

use super::inner::Shared;
use super::on_drop::OnDrop;
use super::priority::Priority;
use crate::{OwnedPermit, Source};

/// Units held from a [`Gate`](crate::Gate): owned, `'static`, `Send + Sync`, so it
/// can move into a spawned task or a response body. Names only its source type: the
/// gate's timer and observer are erased.
///
/// Dropping it (or [`release`](Self::release)) reports the release to the gate's
/// observer with the hold time, *then* returns the units, so a gauge kept by the
/// observer never reads more units in use than the capacity. A panic in the
/// holder's code returns the units on unwind, like any drop; so does a panic in
/// the observer's `on_release`, after counting them out of the gate.
///
/// [`split`](Self::split), [`merge`](Self::merge) and [`forget`](Self::forget)
/// work as on [`Permit`](crate::Permit); the observer hears of every unit exactly
/// once, when it is released or forgotten.
#[must_use = "dropping a permit returns its units at once"]
pub struct GatePermit<S: Source> {
    shared: Arc<dyn Shared>,
    /// Dropped after `Drop::drop` has told the observer: that is what returns the
    /// units. `None` once merged into another permit.
    permit: Option<OwnedPermit>,
    source: S,
    admission: Admission,
}

/// What a permit tells the gate of its units at release: read at admission, so
/// a release calls no `Source` code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admission {
    /// The source's index in `S::ALL`, checked against its label.
    pub(crate) index: usize,
    pub(crate) label: &'static str,
    pub(crate) priority: Priority,
    /// On the gate's timer.
    pub(crate) at: Duration,
}

impl<S: Source> GatePermit<S> {
    pub(crate) fn new(
        shared: Arc<dyn Shared>,
        permit: OwnedPermit,
        source: S,
        admission: Admission,
    ) -> Self {
        Self {
            shared,
            permit: Some(permit),
            source,
            admission,
        }
    }

    fn inner(&mut self) -> &mut OwnedPermit {
        self.permit.as_mut().expect("a live permit holds its units")
    }

    /// The units this permit holds.
    #[must_use]
    pub fn units(&self) -> usize {
        self.permit.as_ref().map_or(0, OwnedPermit::units)
    }

    /// The call site the units were acquired for.
    #[must_use]
    pub fn source(&self) -> S {
        self.source
    }

    /// The priority class it was admitted with.
    #[must_use]
    pub fn priority(&self) -> Priority {
        self.admission.priority
    }

    /// How long the units have been held so far, by the gate's timer.
    #[must_use]
    pub fn held_for(&self) -> Duration {
        self.shared.now().saturating_sub(self.admission.at)
    }

    /// Returns the units now; the same as dropping the permit.
    pub fn release(self) {}

    /// Moves `units` of this permit's units into a new permit of the same source
    /// and admission time, or returns `None` if this permit holds `units` or fewer.
    /// Nothing is reported: each part reports its own units when released.
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    #[must_use = "dropping the split-off permit returns its units at once"]
    pub fn split(&mut self, units: usize) -> Option<GatePermit<S>> {
        let split = self.inner().split(units)?;
        Some(GatePermit::new(
            Arc::clone(&self.shared),
            split,
            self.source,
            self.admission,
        ))
    }

    /// Takes `other`'s units into this permit: they are then reported with this
    /// permit's source and hold time.
    ///
    /// # Panics
    ///
    /// If `other` is from another gate.
    pub fn merge(&mut self, mut other: GatePermit<S>) {
        assert!(
            Arc::ptr_eq(&self.shared, &other.shared),
            "merged permits of two different gates"
        );
        let theirs = other.permit.take().expect("a live permit holds its units");
        self.shared
            .move_held(other.admission.index, self.admission.index, theirs.units());
        self.inner().merge(theirs);
    }

    /// Keeps the units out of the gate for good: its capacity shrinks by them (a
    /// deliberate leak). The observer hears them released (they leave use), then
    /// the new capacity. Should the observer panic, the units are forgotten all
    /// the same, and the new capacity goes unreported.
    pub fn forget(mut self) {
        let permit = self.permit.take().expect("a live permit holds its units");
        let units = permit.units();
        // After the observer, and on the unwind if it panics: a forget never
        // turns into a release.
        let forget = OnDrop::new(move || permit.forget());
        self.shared.on_release(self.admission, units);
        drop(forget);
        self.shared.on_forget(units);
    }
}

impl<S: Source> Drop for GatePermit<S> {
    fn drop(&mut self) {
        if let Some(permit) = &self.permit {
            // Before the units return: `self.permit` is dropped after this returns
            // (or on unwind, should the observer panic).
            self.shared.on_release(self.admission, permit.units());
        }
    }
}

impl<S: Source> fmt::Debug for GatePermit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GatePermit")
            .field("units", &self.units())
            .field("source", &self.admission.label)
            .field("held_for", &self.held_for())
            .finish()
    }
}
