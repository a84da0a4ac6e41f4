//! What every clone of a gate and every permit share: the gate's policy (the
//! estimate and `Retry-After`, the limits on a wait, the shed and what it tells,
//! the overload rule's view of waits) and its books (units held per source,
//! requests parked), and the release side a permit reaches with the timer and
//! observer types erased. How one acquire takes its place in the books, waits
//! and leaves them is the acquire protocol's (`protocol.rs`).

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::time::Duration;

use super::memory::{MemoryBound, UNBOUND};
use super::on_drop::OnDrop;
use super::overload::{Overload, WaitLimits};
use super::pace::Pace;
use super::permit::Admission;
use super::pressure::ShedClock;
use super::priority::Priority;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::semaphore::shedding::RANKS;
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
    /// Units asked for by the acquires of this gate parked right now, per
    /// priority rank ([`Priority::rank`]): the queue ahead of a newcomer, for
    /// the estimate (advisory, see `pace`), and what a higher class may shed.
    pub(crate) queued_units: [AtomicUsize; RANKS],
    /// Units held by permits, per source index: what a drain reports as cut.
    pub(crate) held: Box<[AtomicUsize]>,
    pub(crate) pace: Pace,
    /// With an overload target: the standing-queue rule.
    pub(crate) overload: Option<Overload>,
    pub(crate) retry_after_bounds: (Duration, Duration),
    /// The units the memory budget in force allows, or [`NO_BUDGET`] for an
    /// explicit capacity: what capacity events report beside the capacity.
    pub(crate) budget_units: AtomicUsize,
    /// The last shed's time: a signal of the gate's pressure.
    pub(crate) shed_clock: ShedClock,
    /// The capacity configured (built, or last resized to), before the memory
    /// watch lowers it.
    pub(crate) configured: AtomicUsize,
    /// With a memory watch: the units each class may hold by its last reading.
    pub(crate) memory: Option<MemoryBound>,
}

/// [`Inner::budget_units`] of an explicit capacity.
pub(crate) const NO_BUDGET: usize = usize::MAX;

/// What [`Inner::budget_units`] holds for `capacity`.
pub(crate) const fn budget_units_of(capacity: crate::Capacity) -> usize {
    if capacity.is_memory_derived() {
        capacity.units()
    } else {
        NO_BUDGET
    }
}

impl<T: Timer, O: Observer> Inner<T, O> {
    /// Units held right now by permits.
    pub(crate) fn in_use(&self) -> usize {
        self.held
            .iter()
            .map(|held| held.load(Ordering::Acquire))
            .sum()
    }

    /// The units `priority` may hold by the memory watch's last reading;
    /// [`UNBOUND`] without a watch or a reading.
    pub(crate) fn memory_allowed(&self, priority: Priority) -> usize {
        self.memory
            .as_ref()
            .map_or(UNBOUND, |memory| memory.allowed(priority))
    }

    /// Whether a request of `units` and `priority` arriving now is shed for
    /// memory: its class is allowed less than the capacity in force and its
    /// units with those in use would pass that, or fewer than `units` of the
    /// admissions the memory watch allows before its next reading are left
    /// (an admission takes them: `Gate::admit`).
    pub(crate) fn refused_for_memory(&self, units: usize, priority: Priority) -> bool {
        let Some(memory) = &self.memory else {
            return false;
        };
        // A closed gate refuses as closed, not as full.
        if self.semaphore.is_closed() {
            return false;
        }
        let allowed = memory.allowed(priority);
        if allowed < self.semaphore.capacity() && self.in_use().saturating_add(units) > allowed {
            return true;
        }
        !memory.admits(units)
    }

    /// The capacity in force (see [`apply_capacity`](Self::apply_capacity)).
    pub(crate) fn capacity_in_force(&self) -> usize {
        let configured = self.configured.load(Ordering::Relaxed);
        configured
            .min(self.memory_allowed(Priority::CriticalPlus))
            .max(self.max_units.min(configured))
    }

    /// Sets the semaphore's capacity to the one in force: the configured one,
    /// lowered to what the memory watch allows the highest class, never below
    /// `max_units` (but for units forgotten below it, which stay out); tells
    /// the observer if it changed or `tell` (a new budget). Returns the
    /// previous capacity.
    pub(crate) fn apply_capacity(&self, tell: bool) -> usize {
        let capacity = self.capacity_in_force();
        let previous = self.semaphore.set_capacity(capacity);
        if previous != capacity || tell {
            // The capacity now, not the one asked for: of two changes that
            // race, the observer's last word is then the capacity in force.
            self.observer.on_capacity(&self.capacity_event());
        }
        previous
    }

    /// The capacity in force, with the memory budget's units if it has one.
    pub(crate) fn capacity_event(&self) -> CapacityEvent {
        let event = CapacityEvent::new(self.semaphore.capacity());
        match self.budget_units.load(Ordering::Relaxed) {
            NO_BUDGET => event,
            units => event.with_budget_units(units),
        }
    }

    /// Units parked of `rank`, less those on their way out (shed for a higher
    /// class, or asked to be).
    pub(super) fn parked_of(&self, rank: usize) -> usize {
        self.queued_units[rank]
            .load(Ordering::Relaxed)
            .saturating_sub(self.semaphore.shed_pending(rank as u8))
    }

    /// Units parked of `priority` and every class above it: what a request of
    /// that class waits behind, once the classes below are shed for it.
    fn parked_at_or_above(&self, priority: Priority) -> usize {
        (usize::from(priority.rank())..RANKS)
            .map(|rank| self.parked_of(rank))
            .sum()
    }

    /// The units a request of `units` and `priority` arriving now waits for
    /// beyond the free ones: the queue it waits behind and its own.
    pub(super) fn deficit(&self, units: usize, priority: Priority) -> usize {
        self.parked_at_or_above(priority)
            .saturating_add(units)
            .saturating_sub(self.semaphore.available())
    }

    /// How long a request of `units` arriving now would wait behind every
    /// class: until the units queued now and its own, less the free ones, have
    /// come back at the pace (see [the estimate](super::pace)); `None` before
    /// the first release.
    pub(crate) fn estimated_wait(&self, units: usize) -> Option<Duration> {
        self.estimated_wait_of(units, Priority::Sheddable)
    }

    /// As [`estimated_wait`](Self::estimated_wait), for a request of `priority`,
    /// which waits behind its own class and those above it.
    pub(super) fn estimated_wait_of(&self, units: usize, priority: Priority) -> Option<Duration> {
        self.pace
            .time_for(self.deficit(units, priority), self.semaphore.capacity())
    }

    /// The `Retry-After` for a request shed now whose estimated wait is
    /// `estimate`: within the bounds, the lower bound before any estimate.
    fn retry_after_for(&self, estimate: Option<Duration>) -> Duration {
        let (min, max) = self.retry_after_bounds;
        estimate.map_or(min, |wait| wait.clamp(min, max))
    }

    /// The `Retry-After` a shed of `units` of `priority` would carry now: when
    /// its class would get in.
    pub(crate) fn retry_after(&self, units: usize, priority: Priority) -> Duration {
        self.retry_after_for(self.estimated_wait_of(units, priority))
    }

    /// Tells the observer of a shed and returns the error the caller gets. Called
    /// once the caller has left the queue, so the estimate is a newcomer's of
    /// its class.
    pub(crate) fn shed(
        &self,
        source: &'static str,
        units: usize,
        priority: Priority,
        waited: Duration,
        reason: ShedReason,
    ) -> GateError {
        let estimate = self.estimated_wait_of(units, priority);
        let retry_after = self.retry_after_for(estimate);
        let mut event =
            ShedEvent::new(source, units, waited, reason, retry_after).with_priority(priority);
        if let Some(estimate) = estimate {
            event = event.with_estimated_wait(estimate);
        }
        // Before the observer, which may panic: the rule and the pressure see
        // every shed.
        if let Some(overload) = &self.overload {
            overload.saw_shed();
        }
        self.shed_clock.saw_shed(self.timer.now());
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

    /// Asks the semaphore to shed up to `units` of parked requests of classes
    /// below `priority`, the lowest class first, of what is parked there and
    /// not on its way out already.
    /// Returns whether it asked for any.
    pub(super) fn shed_below(&self, priority: Priority, units: usize) -> bool {
        let mut left = units;
        for rank in 0..usize::from(priority.rank()) {
            if left == 0 {
                break;
            }
            let take = left.min(self.parked_of(rank));
            if take != 0 {
                self.semaphore.shed(rank as u8, take);
                left -= take;
            }
        }
        left != units
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

    /// A look at a gate that may be idle ([`Gate::watch_overload`]): while
    /// overloaded with nobody parked, the rule sees the queue empty now.
    ///
    /// [`Gate::watch_overload`]: crate::Gate::watch_overload
    pub(crate) fn look_idle(&self) {
        if self.overload.as_ref().is_some_and(Overload::is_overloaded) && !self.anyone_parked() {
            self.saw_wait(Duration::ZERO, true);
        }
    }

    /// Whether any acquire of this gate is parked.
    fn anyone_parked(&self) -> bool {
        self.queued_units
            .iter()
            .any(|queued| queued.load(Ordering::Relaxed) != 0)
    }
}

/// The release side of a gate, with the timer and observer types erased, so a
/// [`GatePermit`](crate::GatePermit) names only its source type.
pub(crate) trait Shared: Send + Sync + 'static {
    /// The timer's `now()`.
    fn now(&self) -> Duration;

    /// Called by a permit's drop (or `forget`), *before* its units return to the
    /// semaphore (or leave it): records the hold time, tells the observer and
    /// counts the units out of their source, that last even if the observer
    /// panics.
    fn on_release(&self, admission: Admission, units: usize);

    /// After a permit's units left the semaphore for good: tells the observer the
    /// capacity now.
    fn on_forget(&self, units: usize);

    /// A merge moved `units` from one source's permit into another's.
    fn move_held(&self, from: usize, to: usize, units: usize);
}

impl<T: Timer, O: Observer> Shared for Inner<T, O> {
    fn now(&self) -> Duration {
        self.timer.now()
    }

    fn on_release(&self, admission: Admission, units: usize) {
        // After the observer, so that inside `on_release` the units still count;
        // on the unwind if it (or the timer) panics.
        let _count_out = OnDrop::new(|| {
            self.held[admission.index].fetch_sub(units, Ordering::AcqRel);
        });
        let held = self.timer.now().saturating_sub(admission.at);
        self.pace.record(units, held, self.semaphore.capacity());
        self.observer.on_release(
            &ReleaseEvent::new(admission.label, units, held).with_priority(admission.priority),
        );
        if self.overload.is_some() && !self.anyone_parked() {
            // Nobody parked: the overload rule sees an empty queue.
            self.saw_wait(Duration::ZERO, true);
        }
    }

    fn on_forget(&self, units: usize) {
        // Out of the configuration for good: a memory reading or a resize
        // that re-applies the capacity must not bring them back.
        let _ = self
            .configured
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |configured| {
                Some(configured.saturating_sub(units))
            });
        self.observer.on_capacity(&self.capacity_event());
    }

    fn move_held(&self, from: usize, to: usize, units: usize) {
        self.held[to].fetch_add(units, Ordering::AcqRel);
        self.held[from].fetch_sub(units, Ordering::AcqRel);
    }
}
