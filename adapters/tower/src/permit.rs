//! The permit's shared slot: held by the response body, reachable by the handler.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use admit::{GatePermit, Source};

use crate::progress::Watch;

/// The units an admitted request holds, reachable from the handler through a
/// request extension (`Extension<AdmitPermit<Route>>` in axum,
/// `request.extensions().get::<AdmitPermit<Route>>()` elsewhere).
///
/// The layer puts the [`GatePermit`] in a slot shared by this handle and the
/// response body: whichever lets go first returns the units. By default that is the
/// body, when it has yielded its last frame or is dropped (the connection closed).
/// A handler that is done with the expensive part early calls
/// [`release`](Self::release), and the body then holds nothing; one that must hold
/// the units past the response (background work) [`take`](Self::take)s the permit.
///
/// Cloning the handle does not clone the units: every clone reaches the same slot.
///
/// Only an admitted request has one: a [`Decision::Bypass`](crate::Decision::Bypass)
/// route's request has none, and a handler taking `Extension<AdmitPermit<S>>` fails
/// it with axum's `500` "Missing request extension". On a route that may be
/// bypassed, take `Option<Extension<AdmitPermit<S>>>` (axum 0.8): `None` there.
///
/// # Examples
///
/// ```
/// use admit_tower::AdmitPermit;
/// use axum::Extension;
///
/// admit::sources! { pub enum Route { Upload => "upload" } }
///
/// async fn upload(Extension(permit): Extension<AdmitPermit<Route>>) -> &'static str {
///     // ... stage the upload, holding the units ...
///     permit.release(); // the slow, cheap part (sending the answer) holds nothing
///     "stored\n"
/// }
///
/// // On a route the layer may bypass: `None` there, instead of a 500.
/// async fn report(permit: Option<Extension<AdmitPermit<Route>>>) -> String {
///     match permit {
///         Some(Extension(permit)) => format!("{} unit(s) for {:?}\n", permit.units(), permit.source()),
///         None => "bypassed\n".to_owned(),
///     }
/// }
/// # let _ = (upload, report);
/// ```
pub struct AdmitPermit<S: Source> {
    slot: Arc<Slot<S>>,
}

/// One request's units and its progress rule's state: what the handler's
/// [`AdmitPermit`], the request body, the response future and the response body
/// share.
pub(crate) struct Slot<S: Source> {
    permit: Mutex<Option<GatePermit<S>>>,
    units: usize,
    source: S,
    /// The progress rule's state, if the request is watched.
    watch: Option<Watch>,
}

impl<S: Source> Slot<S> {
    pub(crate) fn new(permit: GatePermit<S>, watch: Option<Watch>) -> Arc<Self> {
        Arc::new(Self {
            units: permit.units(),
            source: permit.source(),
            permit: Mutex::new(Some(permit)),
            watch,
        })
    }

    /// A slot with no units, for a request watched on units held elsewhere.
    pub(crate) fn watch_only(source: S, watch: Watch) -> Arc<Self> {
        Arc::new(Self {
            units: 0,
            source,
            permit: Mutex::new(None),
            watch: Some(watch),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Option<GatePermit<S>>> {
        // A panic while the lock was held cannot leave the `Option` half-written.
        self.permit.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn take(&self) -> Option<GatePermit<S>> {
        self.lock().take()
    }
}

/// The release side of a slot with its source type erased, so the response body
/// is not generic over it.
pub(crate) trait Release: Send + Sync {
    /// Returns the units if they are still in the slot.
    fn release(&self);

    /// Whether the slot still holds the units.
    fn is_held(&self) -> bool;

    /// The progress rule's state, if the request is watched.
    fn watch(&self) -> Option<&Watch>;
}

impl<S: Source> Release for Slot<S> {
    fn release(&self) {
        // Taken under the lock, dropped outside it: the drop runs the observer.
        drop(self.take());
    }

    fn is_held(&self) -> bool {
        self.lock().is_some()
    }

    fn watch(&self) -> Option<&Watch> {
        self.watch.as_ref()
    }
}

/// Owns one reference to a slot and releases it when dropped, unless the slot is
/// empty by then. Moves from the response future into the response body.
pub(crate) struct Hold(Option<Arc<dyn Release>>);

impl Hold {
    pub(crate) fn new(slot: Arc<dyn Release>) -> Self {
        Self(Some(slot))
    }

    pub(crate) const fn none() -> Self {
        Self(None)
    }

    /// The slot it refers to, until released.
    pub(crate) fn slot(&self) -> Option<&Arc<dyn Release>> {
        self.0.as_ref()
    }

    /// The progress rule's state of its request, if watched (until released).
    pub(crate) fn watch(&self) -> Option<&Watch> {
        self.0.as_ref().and_then(|slot| slot.watch())
    }

    /// Whether the slot it refers to still holds units.
    pub(crate) fn is_held(&self) -> bool {
        self.0.as_ref().is_some_and(|slot| slot.is_held())
    }

    /// Releases now (idempotent), and tells the progress rule's watch of the
    /// response, if any, that the response is over.
    pub(crate) fn release(&mut self) {
        if let Some(slot) = self.0.take() {
            if let Some(watch) = slot.watch() {
                watch.response_over();
            }
            slot.release();
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
    }
}

impl fmt::Debug for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Hold").field(&self.0.is_some()).finish()
    }
}

impl<S: Source> AdmitPermit<S> {
    pub(crate) fn new(slot: Arc<Slot<S>>) -> Self {
        Self { slot }
    }

    /// Returns the units now, if the slot still holds them. Returns whether this
    /// call released them (`false` if they were already released or taken).
    pub fn release(&self) -> bool {
        match self.slot.take() {
            Some(permit) => {
                drop(permit);
                true
            }
            None => false,
        }
    }

    /// Takes the permit out of the slot, so that the response body no longer holds
    /// it: the caller now decides when the units return (by dropping it). `None` if
    /// it was already released or taken.
    #[must_use = "dropping the taken permit returns its units at once"]
    pub fn take(&self) -> Option<GatePermit<S>> {
        self.slot.take()
    }

    /// Whether the slot still holds the units.
    #[must_use]
    pub fn is_held(&self) -> bool {
        self.slot.lock().is_some()
    }

    /// The units the request was admitted with (also after release).
    #[must_use]
    pub fn units(&self) -> usize {
        self.slot.units
    }

    /// The call site the request was admitted for.
    #[must_use]
    pub fn source(&self) -> S {
        self.slot.source
    }

    /// How long the units have been held so far, by the gate's timer; `None` once
    /// released or taken.
    #[must_use]
    pub fn held_for(&self) -> Option<Duration> {
        self.slot.lock().as_ref().map(GatePermit::held_for)
    }
}

impl<S: Source> Clone for AdmitPermit<S> {
    fn clone(&self) -> Self {
        Self {
            slot: Arc::clone(&self.slot),
        }
    }
}

impl<S: Source> fmt::Debug for AdmitPermit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdmitPermit")
            .field("units", &self.slot.units)
            .field("source", &self.slot.source.label())
            .field("held", &self.is_held())
            .finish()
    }
}
