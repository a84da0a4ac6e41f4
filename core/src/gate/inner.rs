//! What every clone of a gate and every permit share: the gate's policy (the
//! estimate and `Retry-After`, the limits on a wait, parking and shedding, the
//! overload rule's view of waits) and its books (units held per source, requests
//! parked), and the release side a permit reaches with the timer and observer
//! types erased.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::time::Duration;

use super::on_drop::OnDrop;
use super::overload::{Overload, WaitLimits};
use super::pace::Pace;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::{
    CapacityEvent, GateError, Observer, OverloadEvent, ReleaseEvent, Semaphore, ShedEvent,
    ShedReason, Timer,
};

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
    /// Units asked for by the acquires of this gate parked right now: the queue
    /// ahead of a newcomer, for the estimate (advisory, see `pace`).
    pub(crate) queued_units: AtomicUsize,
    /// Units held by permits, per source index: what a drain reports as cut.
    pub(crate) held: Box<[AtomicUsize]>,
    pub(crate) pace: Pace,
    /// With an overload target: the standing-queue rule.
    pub(crate) overload: Option<Overload>,
    pub(crate) retry_after_bounds: (Duration, Duration),
}

impl<T: Timer, O: Observer> Inner<T, O> {
    /// How long a request of `units` arriving now would wait: until the units
    /// queued now and its own, less the free ones, have come back at the pace (see
    /// [the estimate](super::pace)); `None` before the first release.
    pub(crate) fn estimated_wait(&self, units: usize) -> Option<Duration> {
        let deficit = self
            .queued_units
            .load(Ordering::Relaxed)
            .saturating_add(units)
            .saturating_sub(self.semaphore.available());
        self.pace.time_for(deficit, self.semaphore.capacity())
    }

    /// The `Retry-After` for a request of `units` shed now: its estimated wait
    /// within the bounds, the lower bound before any estimate.
    fn retry_after_for(&self, estimate: Option<Duration>) -> Duration {
        let (min, max) = self.retry_after_bounds;
        estimate.map_or(min, |wait| wait.clamp(min, max))
    }

    /// The `Retry-After` a shed of `units` would carry now.
    pub(crate) fn retry_after(&self, units: usize) -> Duration {
        self.retry_after_for(self.estimated_wait(units))
    }

    /// Tells the observer of a shed and returns the error the caller gets. Called
    /// once the caller has left the queue, so the estimate is a newcomer's.
    pub(crate) fn shed(
        &self,
        source: &'static str,
        units: usize,
        waited: Duration,
        reason: ShedReason,
    ) -> GateError {
        let estimate = self.estimated_wait(units);
        let retry_after = self.retry_after_for(estimate);
        let mut event = ShedEvent::new(source, units, waited, reason, retry_after);
        if let Some(estimate) = estimate {
            event = event.with_estimated_wait(estimate);
        }
        // Before the observer, which may panic: the rule sees every shed.
        if let Some(overload) = &self.overload {
            overload.saw_shed();
        }
        self.observer.on_shed(&event);
        GateError::Busy {
            retry_after,
            reason,
        }
    }

    /// Refuses, at once, a request the gate can never promise to serve: above
    /// `max_units`, or above the capacity now.
    pub(crate) fn check_units(&self, units: usize) -> Result<(), GateError> {
        self.check_max_units(units)?;
        self.semaphore
            .check_fits(units)
            .map_err(GateError::ExceedsCapacity)
    }

    /// Refuses a request above `max_units` (the capacity is the semaphore's to
    /// check, where it is checked anyway).
    pub(crate) fn check_max_units(&self, units: usize) -> Result<(), GateError> {
        if units > self.max_units {
            return Err(GateError::ExceedsMaxUnits {
                requested: units,
                max_units: self.max_units,
            });
        }
        Ok(())
    }

    /// The limits on a wait for `units` of at most the wait budget, or
    /// `ceiling` if that is shorter.
    pub(crate) fn wait_limits(&self, units: usize, ceiling: Option<Duration>) -> WaitLimits<'_> {
        let (limit, limit_reason) = match ceiling {
            Some(ceiling) if ceiling < self.wait_budget => (ceiling, ShedReason::Ceiling),
            _ => (self.wait_budget, ShedReason::WaitBudget),
        };
        let (recheck, size_deduction) = match &self.overload {
            None => (limit, Duration::ZERO),
            Some(overload) => (
                overload.target().max(limit / 16),
                self.pace
                    .time_for(
                        self.max_units.saturating_sub(units),
                        self.semaphore.capacity(),
                    )
                    .unwrap_or_default(),
            ),
        };
        WaitLimits {
            limit,
            limit_reason,
            overload: self.overload.as_ref(),
            size_deduction,
            recheck,
        }
    }

    /// With an overload target, whether a request that has just parked (its units
    /// counted among the queued) cannot be admitted within the most it may wait.
    fn is_hopeless(&self, limits: &WaitLimits<'_>) -> bool {
        self.overload.is_some()
            && self
                .estimated_wait(0)
                .is_some_and(|wait| wait > limits.longest_now())
    }

    /// A request of `units` the semaphore could not grant at once parks: it
    /// takes a place among the parked and its limits, or is told why it is shed
    /// at arrival, in this order: the queue is full (`max_waiters`), its own
    /// limit is zero (a zero ceiling), or it is hopeless by the estimate. On a
    /// shed its place is given back first, so the shed's estimate is a
    /// newcomer's. The one protocol of the async and the blocking acquire.
    pub(crate) fn park(
        &self,
        units: usize,
        ceiling: Option<Duration>,
    ) -> Result<(ParkedSlot<'_>, WaitLimits<'_>), ShedReason> {
        let slot = self.take_parked_slot(units).ok_or(ShedReason::QueueFull)?;
        let limits = self.wait_limits(units, ceiling);
        // The caller's own limit first: named for it, not for the estimate.
        if let Some(reason) = limits.expired(Duration::ZERO) {
            return Err(reason);
        }
        if self.is_hopeless(&limits) {
            return Err(ShedReason::Hopeless);
        }
        Ok((slot, limits))
    }

    /// Sheds a request that parked for `waited`, once it has left the queue:
    /// the shed, then the wait for the overload rule.
    pub(crate) fn shed_parked(
        &self,
        source: &'static str,
        units: usize,
        waited: Duration,
        reason: ShedReason,
    ) -> GateError {
        let error = self.shed(source, units, waited, reason);
        self.saw_wait(waited, false);
        error
    }

    /// A wait seen by the overload rule: an admission's, or a parked shed's;
    /// `empty` if it showed the queue empty.
    pub(crate) fn saw_wait(&self, waited: Duration, empty: bool) {
        let Some(overload) = &self.overload else {
            return;
        };
        let interval = overload.interval(self.pace.mean_hold());
        if let Some(event) = overload.observe(waited, empty, self.timer.now(), interval) {
            self.observer.on_overload(&event);
            // A change that raced this one may have reached the observer first:
            // the last word is the state in force.
            let now = overload.is_overloaded();
            if now != event.overloaded {
                self.observer.on_overload(&OverloadEvent::new(
                    now,
                    event.shortest_wait,
                    event.interval,
                    event.target,
                ));
            }
        }
    }

    /// Takes a place among the parked for a request of `units`, if `max_waiters`
    /// leaves one (always, without a bound). `None`: the queue is full.
    fn take_parked_slot(&self, units: usize) -> Option<ParkedSlot<'_>> {
        let counted = match self.max_waiters {
            None => None,
            Some(max) => {
                self.parked
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        (n < max).then_some(n + 1)
                    })
                    .ok()?;
                Some(&self.parked)
            }
        };
        self.queued_units.fetch_add(units, Ordering::Relaxed);
        Some(ParkedSlot {
            counted,
            queued_units: &self.queued_units,
            units,
        })
    }
}

/// A place among a gate's parked acquires, given back when dropped.
pub(crate) struct ParkedSlot<'a> {
    /// The count of parked acquires, with `max_waiters`.
    counted: Option<&'a AtomicUsize>,
    queued_units: &'a AtomicUsize,
    units: usize,
}

impl Drop for ParkedSlot<'_> {
    fn drop(&mut self) {
        self.queued_units.fetch_sub(self.units, Ordering::Relaxed);
        if let Some(parked) = self.counted {
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
    /// semaphore (or leave it): records the hold time, tells the observer and
    /// counts the units out of their source, that last even if the observer
    /// panics.
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
        // After the observer, so that inside `on_release` the units still count;
        // on the unwind if it (or the timer) panics.
        let _count_out = OnDrop::new(|| {
            self.held[index].fetch_sub(units, Ordering::AcqRel);
        });
        let held = self.timer.now().saturating_sub(admitted_at);
        self.pace.record(units, held, self.semaphore.capacity());
        self.observer
            .on_release(&ReleaseEvent::new(source, units, held));
        if self.overload.is_some() && self.queued_units.load(Ordering::Relaxed) == 0 {
            // Nobody parked: the overload rule sees an empty queue.
            self.saw_wait(Duration::ZERO, true);
        }
    }

    fn on_forget(&self) {
        self.observer
            .on_capacity(&CapacityEvent::new(self.semaphore.capacity()));
    }

    fn move_held(&self, from: usize, to: usize, units: usize) {
        self.held[to].fetch_add(units, Ordering::AcqRel);
        self.held[from].fetch_sub(units, Ordering::AcqRel);
    }
}
