//! The gate handle: the public face of a gate (its outcomes, overload and
//! `Retry-After` documented on the type), the acquire entry points and the
//! accessors. What the handle shares with every clone and permit is in
//! `inner.rs`.

use alloc::sync::Arc;
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use super::inner::{Inner, Shared};
use super::on_drop::OnDrop;
use super::overload::Overload;
use super::permit::Admission;
use super::priority::Priority;
use super::protocol::Waited;
use super::{GateAcquire, GatePermit};
use crate::loom::sync::Ordering;
use crate::{AdmitEvent, GateError, Observer, ShedReason, Source, Timer, TryAcquireError};

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
/// | outlives the wait budget | [`GateError::Busy`] | `on_shed`, [`WaitBudget`](ShedReason::WaitBudget) |
/// | outlives its [`ceiling`](GateAcquire::ceiling), shorter than the budget | [`GateError::Busy`] | `on_shed`, [`Ceiling`](ShedReason::Ceiling) |
/// | is a [`try_acquire`](Gate::try_acquire) that finds the units taken | [`GateError::Busy`] at once | `on_shed`, [`NoWait`](ShedReason::NoWait) |
/// | would park with [`max_waiters`](crate::GateBuilder::max_waiters) parked already | [`GateError::Busy`] at once | `on_shed`, [`QueueFull`](ShedReason::QueueFull) |
/// | waits twice the overload target (less a smaller request's share) while the gate is overloaded | [`GateError::Busy`] | `on_shed`, [`Overload`](ShedReason::Overload) |
/// | could not be admitted within the most it may wait, by the estimate | [`GateError::Busy`] at once | `on_shed`, [`Hopeless`](ShedReason::Hopeless) |
/// | is parked when a request of a higher [`Priority`] needs its place | [`GateError::Busy`] | `on_shed`, [`Outranked`](ShedReason::Outranked) |
/// | sees its [`until`](GateAcquire::until) signal fire first | [`GateError::Cancelled`] | nothing |
/// | is dropped | — | nothing |
/// | asks for more than [`max_units`](crate::GateBuilder::max_units) | [`GateError::ExceedsMaxUnits`] at once | nothing |
/// | asks for more than `capacity` (lowered by forgotten permits) | [`GateError::ExceedsCapacity`] at once | nothing |
/// | runs after [`close`](Gate::close) | [`GateError::Closed`] | nothing |
///
/// The last two rows of sheds need an
/// [`overload_target`](crate::GateBuilder::overload_target).
///
/// # Overload
///
/// With a wait budget alone, a gate under sustained overload keeps a queue as long
/// as the budget: every admitted caller waits nearly all of it and every shed takes
/// all of it. With an [`overload_target`](crate::GateBuilder::overload_target):
///
/// - the gate becomes *overloaded* when the shortest wait over an interval (two
///   mean holds of a unit) stayed above the target, CoDel's rule, and stays so
///   until two intervals in a row in which its queue was seen empty; a burst that drains
///   within the interval is not a standing queue;
/// - while overloaded, nobody waits longer than twice the target
///   ([`ShedReason::Overload`]); a request smaller than
///   [`max_units`](crate::GateBuilder::max_units) is capped sooner, by the time the
///   units it asks for fewer take to come back (never below the target), so that
///   under a standing queue every size gets in as often as the largest;
/// - a request whose estimated wait ([`Gate::estimated_wait`]) is longer than the
///   most it may wait (its budget, ceiling, or the cap while overloaded) is shed at
///   arrival, in microseconds, without parking ([`ShedReason::Hopeless`]).
///
/// FIFO order, all-or-nothing grants and every other outcome stay as they are:
/// nothing admitted is revoked and nobody is served out of turn.
/// [`is_overloaded`](Gate::is_overloaded) and [`Observer::on_overload`] say when
/// the rule holds. The rule and its interval are argued in docs/design.md.
///
/// # Priority
///
/// Each acquire has a [`Priority`] class: its source's
/// ([`Source::priority`], set in [`sources!`](crate::sources) with `as`), or
/// the one [`GateAcquire::priority`] sets. Priority never reorders the queue:
/// one FIFO serves every class while nobody is shed. It decides **who is shed**
/// when the gate is about to shed someone, the lowest class first, waiters
/// already parked included:
///
/// - a request that finds [`max_waiters`](crate::GateBuilder::max_waiters)
///   parked takes the place of the oldest request of the lowest class parked
///   below its own; with nobody below it, it is shed
///   ([`QueueFull`](ShedReason::QueueFull));
/// - with an [`overload_target`](crate::GateBuilder::overload_target), a request
///   is hopeless only if it could not be admitted even with every lower class
///   shed; a request that reaches the overload cap sheds its own units' worth
///   of lower classes, once per look, and waits on (it is shed itself only
///   with nobody below it parked); and while the gate is *pressed*, a request
///   that would wait past the target (or past the most it may wait) behind
///   requests of lower classes has enough of them shed, the lowest class and
///   the oldest first, to wait the target. The gate is pressed while
///   overloaded, and for an interval after an arrival found the queue past
///   four targets or shed for one: a spike of low-priority requests fills the
///   queue long before the rule sees a standing queue, and a burst at a load
///   the gate can serve should shed nobody.
///
/// A parked request shed for a higher class ends with [`GateError::Busy`] and
/// [`ShedReason::Outranked`], counted once, when it is next polled (a client
/// that leaves first is counted nowhere). The shed loses to a grant: a request
/// the units fit is granted, and keeps them. The `Retry-After` of a shed says
/// when its class would get in: it counts the queue at and above the class. The
/// observer's events carry the class ([`AdmitEvent::priority`](crate::AdmitEvent::priority), ...).
///
/// # Retry-After
///
/// The `retry_after` of a [`GateError::Busy`] is the gate's estimate of how long
/// a request of the same units arriving at the shed would wait (its queue ahead
/// and its own units, less the free ones, over the rate at which a full gate
/// returns units: `capacity / mean hold of a unit`), within
/// [`GateBuilder::retry_after_bounds`](crate::GateBuilder::retry_after_bounds)
/// (default 1 s and 60 s; `min > 0` is enforced, so it is never zero). Before the
/// first release there is no estimate, and it is `min`. [`Gate::retry_after`]
/// returns the value a shed would carry now. No lock: the mean hold is a moving
/// average each release folds its hold into.
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
/// match gate.acquire(3, Route::Mirror).await {
///     Err(GateError::ExceedsMaxUnits { .. }) => {} // a composition fault, not a shed
///     other => panic!("{other:?}"),
/// }
/// # Ok::<(), admit::ConfigError>(())
/// # }).unwrap();
/// ```
pub struct Gate<S, T, O = ()> {
    pub(super) inner: Arc<Inner<T, O>>,
    pub(super) _source: PhantomData<fn(S) -> S>,
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
    /// (or ceiling) expires, when `max_waiters` are parked, or by the
    /// [overload rule](Gate#overload); [`GateError::Cancelled`] when the `until` signal fires
    /// first, [`GateError::ExceedsMaxUnits`] or [`GateError::ExceedsCapacity`] at
    /// once when `units` is above `max_units` or `capacity`, [`GateError::Closed`]
    /// after [`close`](Self::close).
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
    /// A caller turned away for lack of units is a shed (`on_shed` with a zero
    /// wait and [`ShedReason::NoWait`]) and gets a [`GateError::Busy`]; a grant
    /// calls `on_admit` with a zero wait.
    ///
    /// # Errors
    ///
    /// [`GateError::Busy`] when the units are not free now (counted as a shed),
    /// [`GateError::ExceedsMaxUnits`] or [`GateError::ExceedsCapacity`] when
    /// `units` is above `max_units` or `capacity`, [`GateError::Closed`] after
    /// [`close`](Self::close).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    pub fn try_acquire(&self, units: usize, source: S) -> Result<GatePermit<S>, GateError> {
        self.acquire(units, source).try_now()
    }

    /// The one `try_acquire`, of `priority`.
    pub(super) fn take_now(
        &self,
        units: usize,
        source: S,
        priority: Priority,
    ) -> Result<GatePermit<S>, GateError> {
        self.inner.check_max_units(units)?;
        if self.inner.memory.is_some() {
            // A request above the capacity is refused as such first, as
            // `acquire` refuses it before its first turn.
            self.inner.check_units(units)?;
            if self.inner.refused_for_memory(units, priority) {
                let label = source.label();
                let reason = ShedReason::Memory;
                return Err(self
                    .inner
                    .shed(label, units, priority, Duration::ZERO, reason));
            }
        }
        match Arc::clone(&self.inner.semaphore).try_acquire_owned(units) {
            Ok(permit) => Ok(self.admit(permit, source, priority, Waited::AtOnce)),
            Err(TryAcquireError::NoUnits) => Err(self.inner.shed(
                source.label(),
                units,
                priority,
                Duration::ZERO,
                ShedReason::NoWait,
            )),
            Err(TryAcquireError::ExceedsCapacity(e)) => Err(GateError::ExceedsCapacity(e)),
            // The gate reports a fault of its configuration before its close,
            // as `acquire` does (`check_units`); the semaphore, as tokio's,
            // the other way round.
            Err(TryAcquireError::Closed) => Err(self
                .inner
                .check_units(units)
                .err()
                .unwrap_or(GateError::Closed)),
        }
    }

    /// Counts granted units in for their source, tells the observer (after the
    /// grant, so a gauge kept by the observer never reads above capacity), then
    /// wraps them in a gate permit. `waited` is `None` for a grant at once, which
    /// never parked.
    ///
    /// The permit is made last: should the observer panic, the units are counted
    /// out again and return as `permit` drops, and the observer, which was told
    /// of no permit, is not called again on the unwind.
    ///
    /// # Panics
    ///
    /// If `S`'s `Source` impl disagrees with its `ALL` (before anything is
    /// counted), or if the observer panics (the units are back).
    pub(super) fn admit(
        &self,
        permit: crate::OwnedPermit,
        source: S,
        priority: Priority,
        how: Waited,
    ) -> GatePermit<S> {
        let (index, label) = super::source::position_of(source);
        let waited = how.duration();
        let admitted_at = self.inner.timer.now();
        let units = permit.units();
        if let Some(memory) = &self.inner.memory {
            memory.took(units);
        }
        let held = &self.inner.held[index];
        held.fetch_add(units, Ordering::AcqRel);
        let count_out_on_unwind = OnDrop::new(|| {
            held.fetch_sub(units, Ordering::AcqRel);
        });
        self.inner
            .observer
            .on_admit(&AdmitEvent::new(label, units, waited).with_priority(priority));
        match how {
            Waited::AtOnce => self.inner.saw_wait(waited, true),
            Waited::Parked(_) => self.inner.saw_wait(waited, false),
            Waited::Outranked(_) => {}
        }
        count_out_on_unwind.disarm();
        let shared: Arc<dyn Shared> = self.inner.clone();
        let admission = Admission {
            index,
            label,
            priority,
            at: admitted_at,
        };
        GatePermit::new(shared, permit, source, admission)
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
        self.inner.in_use()
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

    /// The `retry_after` a [`GateError::Busy`] for a request of `units` of the
    /// lowest class would carry now (a higher class waits behind fewer); see
    /// [Retry-After](Gate#retry-after).
    #[must_use]
    pub fn retry_after(&self, units: usize) -> Duration {
        self.inner.retry_after(units, Priority::Sheddable)
    }

    /// The configured `Retry-After` bounds, `(min, max)`.
    #[must_use]
    pub fn retry_after_bounds(&self) -> (Duration, Duration) {
        self.inner.retry_after_bounds
    }

    /// How long a request of `units` arriving now would wait, estimated from the
    /// units queued ahead of it and the pace at which units come back (see
    /// [Overload](Gate#overload)); `None` before the first release. Advisory: a
    /// snapshot, not a promise.
    #[must_use]
    pub fn estimated_wait(&self, units: usize) -> Option<Duration> {
        self.inner.estimated_wait(units)
    }

    /// How hard the gate is pressed for units now: requests parked, the overload
    /// state, and recent sheds, as one level from calm to pressed (see
    /// [`Pressure`](crate::Pressure)). A snapshot, for rules that scale with it: an
    /// HTTP layer's progress rule shortens its limits as it rises.
    #[must_use]
    pub fn pressure(&self) -> crate::Pressure {
        let inner = &*self.inner;
        crate::Pressure::of(
            inner.semaphore.waiters() != 0,
            self.is_overloaded(),
            inner.shed_clock.since_shed(inner.timer.now()),
            inner.memory_allowed(Priority::Sheddable) < inner.configured.load(Ordering::Relaxed),
        )
    }

    /// The overload target set with
    /// [`GateBuilder::overload_target`](crate::GateBuilder::overload_target).
    #[must_use]
    pub fn overload_target(&self) -> Option<Duration> {
        self.inner.overload.as_ref().map(Overload::target)
    }

    /// Whether the gate is overloaded now (see [Overload](Gate#overload)). Always
    /// `false` without a target. The state changes at the first wait seen after an
    /// interval ends (an admission, a shed after parking, a release with nobody
    /// parked, or a look of [`watch_overload`](Self::watch_overload) at an idle
    /// gate, which the Tokio, smol and async-std timers run from `build`).
    #[must_use]
    pub fn is_overloaded(&self) -> bool {
        self.inner
            .overload
            .as_ref()
            .is_some_and(Overload::is_overloaded)
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
