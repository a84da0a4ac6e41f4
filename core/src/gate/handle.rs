//! The gate handle: the shared state every clone and permit point at, and the
//! acquire entry points.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use super::retry_after::RetryAfter;
use super::{GateAcquire, GatePermit};
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::{GateError, Observer, Semaphore, ShedReason, Source, Timer, TryAcquireError};

/// An admission gate: at most `capacity` units in use, callers beyond that parked
/// for at most a wait budget and then shed with a distinguishable error.
///
/// Built with [`Gate::builder`]; cloning is cheap (an `Arc`), and every clone is the
/// same gate. Generic over the call-site label type `S`, the [`Timer`] a runtime
/// adapter supplies, and an [`Observer`] (`()` observes nothing).
///
/// | an acquire that… | returns | observer |
/// |---|---|---|
/// | is granted | a [`GatePermit`] | `on_admit` after the grant |
/// | outlives the wait budget (or its [`ceiling`](GateAcquire::ceiling)) | [`GateError::Busy`] | `on_shed` once: a shed |
/// | sees its [`until`](GateAcquire::until) signal fire first | [`GateError::Cancelled`] | nothing |
/// | is dropped | — | nothing |
/// | asks for more than `capacity` | [`GateError::ExceedsCapacity`] at once | nothing |
/// | runs after [`close`](Gate::close) | [`GateError::Closed`] | nothing |
///
/// # Retry-After
///
/// The `retry_after` of a [`GateError::Busy`] is derived from what the gate has
/// seen, without a lock:
///
/// - Each release folds the permit's hold time (the [`Timer`]'s `now()` at release
///   minus at admission, in whole milliseconds) into an exponentially weighted
///   moving average, `avg += (sample − avg) / 8`; the first release sets `avg`.
/// - At a shed, with `waiters` the requests still parked (after the shed caller
///   left the queue) and `capacity` the gate's capacity:
///
///   `retry_after = clamp(avg × (capacity + waiters) / capacity, min, max)`
///
///   that is, one typical hold for the current holders to turn over, plus one more
///   for every full gate's worth of callers still queued ahead of a newcomer.
/// - Before the first release there is no average, and `retry_after = min`.
/// - `min` and `max` are [`GateBuilder::retry_after_bounds`](crate::GateBuilder::retry_after_bounds) (default 1 s and
///   60 s); `min > 0` is enforced, so `retry_after` is never zero.
///
/// [`Gate::retry_after`] returns the value a shed would carry now.
///
/// # Examples
///
/// ```
/// use core::time::Duration;
/// use admit::{Gate, GateError};
/// # struct MyTimer;
/// # impl admit::Timer for MyTimer {
/// #     type Sleep = core::future::Pending<()>;
/// #     fn now(&self) -> Duration { Duration::ZERO }
/// #     fn sleep_until(&self, _: Duration) -> Self::Sleep { core::future::pending() }
/// # }
///
/// admit::sources! {
///     /// Where an upload session is opened.
///     pub enum Route { NpmPublish => "npm_publish", Mirror => "mirror" }
/// }
///
/// # futures_lite::future::block_on(async {
/// let gate = Gate::builder(4)
///     .wait_budget(Duration::from_secs(5))
///     .max_units(2)
///     .timer(MyTimer) // an adapter's timer, e.g. Tokio's
///     .build()?;
///
/// let permit = gate.acquire(2, Route::NpmPublish).await.unwrap();
/// assert_eq!(gate.in_use(), 2);
/// drop(permit);
///
/// match gate.acquire(5, Route::Mirror).await {
///     Err(GateError::ExceedsCapacity(_)) => {} // a configuration fault, not a shed
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), admit::ConfigError>(())
/// # }).unwrap();
/// ```
pub struct Gate<S, T, O = ()> {
    pub(super) inner: Arc<Inner<T, O>>,
    pub(super) _source: PhantomData<fn(S) -> S>,
}

/// What every clone of a gate and every permit share.
pub(crate) struct Inner<T, O> {
    pub(crate) semaphore: Arc<Semaphore>,
    pub(crate) timer: T,
    pub(crate) observer: O,
    pub(crate) wait_budget: Duration,
    pub(crate) max_units: usize,
    /// The bound on parked acquires, if any.
    pub(crate) max_waiters: Option<usize>,
    /// Acquires of this gate parked right now (counted only with `max_waiters`).
    pub(crate) parked: AtomicUsize,
    /// Units held by permits, per source index: what a drain reports as cut.
    pub(crate) held: Box<[AtomicUsize]>,
    pub(crate) retry_after: RetryAfter,
}

impl<T: Timer, O: Observer> Inner<T, O> {
    /// The `Retry-After` a shed would carry now.
    pub(crate) fn retry_after(&self) -> Duration {
        self.retry_after
            .suggest(self.semaphore.waiters(), self.semaphore.capacity())
    }

    /// Tells the observer of a shed and returns the error the caller gets.
    pub(crate) fn shed(
        &self,
        source: &'static str,
        units: usize,
        waited: Duration,
        reason: ShedReason,
    ) -> GateError {
        let retry_after = self.retry_after();
        self.observer.on_shed(source, units, waited, reason);
        GateError::Busy { retry_after }
    }

    /// Takes a place among the parked, if `max_waiters` leaves one (always, without
    /// a bound). `None`: the queue is full.
    pub(crate) fn take_parked_slot(&self) -> Option<ParkedSlot<'_>> {
        let Some(max) = self.max_waiters else {
            return Some(ParkedSlot(None));
        };
        self.parked
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| ParkedSlot(Some(&self.parked)))
    }
}

/// A place among a bounded gate's parked acquires, given back when dropped.
pub(crate) struct ParkedSlot<'a>(Option<&'a AtomicUsize>);

impl Drop for ParkedSlot<'_> {
    fn drop(&mut self) {
        if let Some(parked) = self.0 {
            parked.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// The release side of a gate, with the timer and observer types erased, so a
/// [`GatePermit`] names only its source type.
pub(crate) trait Shared: Send + Sync + 'static {
    /// The timer's `now()`.
    fn now(&self) -> Duration;

    /// Called by a permit's drop (or `forget`), *before* its units return to the
    /// semaphore (or leave it): counts them out of their source, records the hold
    /// time and tells the observer.
    fn on_release(&self, source: &'static str, index: usize, units: usize, admitted_at: Duration);

    /// After a permit's units left the semaphore for good: tells the observer the
    /// capacity now.
    fn on_forget(&self);

    /// A merge moved `units` from one source's permit into another's.
    fn move_held(&self, from: usize, to: usize, units: usize);
}

impl<T: Timer, O: Observer> Shared for Inner<T, O> {
    fn now(&self) -> Duration {
        self.timer.now()
    }

    fn on_release(&self, source: &'static str, index: usize, units: usize, admitted_at: Duration) {
        let held = self.timer.now().saturating_sub(admitted_at);
        self.retry_after.record_hold(held);
        self.observer.on_release(source, units, held);
        // After the observer, so that inside `on_release` the units still count.
        self.held[index].fetch_sub(units, Ordering::AcqRel);
    }

    fn on_forget(&self) {
        self.observer.on_capacity(self.semaphore.capacity());
    }

    fn move_held(&self, from: usize, to: usize, units: usize) {
        self.held[to].fetch_add(units, Ordering::AcqRel);
        self.held[from].fetch_sub(units, Ordering::AcqRel);
    }
}

impl<S: Source, T: Timer, O: Observer> Gate<S, T, O> {
    /// Waits up to the wait budget for `units` units, on behalf of `source`.
    ///
    /// The returned future can be narrowed before it is first awaited:
    /// [`ceiling`](GateAcquire::ceiling) caps the wait below the budget, and
    /// [`until`](GateAcquire::until) adds the caller's own cancellation signal.
    ///
    /// # Errors
    ///
    /// As the table in the [`Gate`] docs: [`GateError::Busy`] when the wait budget
    /// (or ceiling) expires, [`GateError::Cancelled`] when the `until` signal fires
    /// first, [`GateError::ExceedsCapacity`] at once when `units > capacity`,
    /// [`GateError::Closed`] after [`close`](Self::close).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future at any point loses no unit, leaves the wait queue whole
    /// and counts nothing.
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    pub fn acquire(&self, units: usize, source: S) -> GateAcquire<'_, S, T, O> {
        crate::semaphore::assert_nonzero(units);
        GateAcquire::new(self, units, source)
    }

    /// Takes `units` units now if they are free and nobody is parked ahead; never
    /// waits.
    ///
    /// A caller turned away for lack of units is a shed like a budget expiry
    /// (`on_shed` with a zero wait) and gets a [`GateError::Busy`]; a grant calls
    /// `on_admit` with a zero wait.
    ///
    /// # Errors
    ///
    /// [`GateError::Busy`] when the units are not free now (counted as a shed),
    /// [`GateError::ExceedsCapacity`] when `units > capacity`,
    /// [`GateError::Closed`] after [`close`](Self::close).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    pub fn try_acquire(&self, units: usize, source: S) -> Result<GatePermit<S>, GateError> {
        match Arc::clone(&self.inner.semaphore).try_acquire_owned(units) {
            Ok(permit) => Ok(self.admit(permit, source, Duration::ZERO)),
            Err(TryAcquireError::NoUnits) => Err(self.inner.shed(
                source.label(),
                units,
                Duration::ZERO,
                ShedReason::WaitBudget,
            )),
            Err(TryAcquireError::ExceedsCapacity(e)) => Err(GateError::ExceedsCapacity(e)),
            Err(TryAcquireError::Closed) => Err(GateError::Closed),
        }
    }

    /// Wraps granted units in a gate permit, then tells the observer (after the
    /// grant, so a gauge kept by the observer never reads above capacity).
    pub(super) fn admit(
        &self,
        permit: crate::OwnedPermit,
        source: S,
        waited: Duration,
    ) -> GatePermit<S> {
        let admitted_at = self.inner.timer.now();
        let units = permit.units();
        self.inner.held[source.index()].fetch_add(units, Ordering::AcqRel);
        let shared: Arc<dyn Shared> = self.inner.clone();
        let permit = GatePermit::new(shared, permit, source, admitted_at);
        self.inner.observer.on_admit(source.label(), units, waited);
        permit
    }
}

impl<S, T: Timer, O: Observer> Gate<S, T, O> {
    /// The gate's capacity in units.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.inner.semaphore.capacity()
    }

    /// Units held right now by permits: what an observer's gauge kept from
    /// `on_admit` and `on_release` counts. A unit granted to a waiter that has not
    /// yet polled is counted once its permit exists. A snapshot for diagnostics;
    /// after a shrink below the units in use it reads above the capacity until
    /// they come back.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.inner
            .held
            .iter()
            .map(|held| held.load(Ordering::Acquire))
            .sum()
    }

    /// Requests parked right now. A snapshot for diagnostics.
    #[must_use]
    pub fn waiters(&self) -> usize {
        self.inner.semaphore.waiters()
    }

    /// The wait budget: the longest an acquire parks.
    #[must_use]
    pub fn wait_budget(&self) -> Duration {
        self.inner.wait_budget
    }

    /// The largest request a call site makes, as declared to the builder.
    #[must_use]
    pub fn max_units(&self) -> usize {
        self.inner.max_units
    }

    /// The `retry_after` a [`GateError::Busy`] would carry now; see
    /// [Retry-After](Gate#retry-after).
    #[must_use]
    pub fn retry_after(&self) -> Duration {
        self.inner.retry_after()
    }

    /// The configured `Retry-After` bounds, `(min, max)`.
    #[must_use]
    pub fn retry_after_bounds(&self) -> (Duration, Duration) {
        self.inner.retry_after.bounds()
    }

    /// Closes the gate (e.g. at shutdown): parked acquires end with
    /// [`GateError::Closed`], later ones fail at once. Permits already held stay
    /// valid and release as usual. Never blocks.
    pub fn close(&self) {
        self.inner.semaphore.close();
    }

    /// Whether [`close`](Self::close) was called.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.inner.semaphore.is_closed()
    }

    /// The timer the gate waits on.
    #[must_use]
    pub fn timer(&self) -> &T {
        &self.inner.timer
    }

    /// The observer the gate reports to.
    #[must_use]
    pub fn observer(&self) -> &O {
        &self.inner.observer
    }
}

impl<S, T, O> Clone for Gate<S, T, O> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
            _source: PhantomData,
        }
    }
}

impl<S, T: Timer, O: Observer> fmt::Debug for Gate<S, T, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Gate")
            .field("capacity", &self.capacity())
            .field("in_use", &self.in_use())
            .field("waiters", &self.waiters())
            .field("wait_budget", &self.inner.wait_budget)
            .field("closed", &self.is_closed())
            .finish_non_exhaustive()
    }
}
