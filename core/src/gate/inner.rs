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
use super::permit::Admission;
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
    fn parked_of(&self, rank: usize) -> usize {
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
    fn deficit(&self, units: usize, priority: Priority) -> usize {
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
    fn estimated_wait_of(&self, units: usize, priority: Priority) -> Option<Duration> {
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

    /// A request of `units` and `priority` the semaphore could not grant at
    /// once parks: it takes a place among the parked and its limits, or is told
    /// why it is shed at arrival, in this order: the queue is full
    /// (`max_waiters`) with nobody of a lower class parked, its own limit is
    /// zero (a zero ceiling), or it is hopeless by the estimate even with every
    /// lower class shed for it. Lower classes are shed for it (the lowest
    /// first) when the queue is full, and, with an overload target, when it
    /// would wait past the target behind them ([Priority](crate::Gate#priority)).
    /// On a shed its place is given back first, so the shed's estimate is a
    /// newcomer's. The one protocol of the async and the blocking acquire.
    pub(crate) fn park(
        &self,
        units: usize,
        priority: Priority,
        ceiling: Option<Duration>,
    ) -> Result<(ParkedSlot<'_>, WaitLimits<'_>), ShedReason> {
        let slot = self.take_parked_slot(units, priority)?;
        let limits = self.wait_limits(units, ceiling);
        // The caller's own limit first: named for it, not for the estimate.
        if let Some(reason) = limits.expired(Duration::ZERO) {
            return Err(reason);
        }
        let Some(overload) = &self.overload else {
            return Ok((slot, limits));
        };
        // Its own units are counted among the queued already.
        let longest = limits.longest_now();
        if self
            .estimated_wait_of(0, priority)
            .is_some_and(|wait| wait > longest)
        {
            // Shedding every class below would not bring it in.
            return Err(ShedReason::Hopeless);
        }
        // Behind the lower classes past the target (or past the most it may
        // wait), while the gate is pressed: shed the lowest of them first,
        // enough to be within it.
        let mut slot = slot;
        let capacity = self.semaphore.capacity();
        let within = |wait| self.pace.units_within(wait, capacity);
        if let (Some(goal), Some(mark)) = (
            within(overload.target().min(longest)),
            within(overload.press_mark(longest)),
        ) {
            let behind_all = self.deficit(0, Priority::Sheddable);
            let now = self.timer.now();
            let interval = overload.interval(self.pace.mean_hold());
            if overload.pressed(behind_all > mark, now, interval) && behind_all > goal {
                slot.outranked_others = self.shed_below(priority, behind_all - goal);
                if slot.outranked_others {
                    overload.press(now, interval);
                }
            }
        }
        Ok((slot, limits))
    }

    /// Why a request parked for `waited` in `slot` must be shed now, if it
    /// must. At the overload cap, lower classes go first: with any of them
    /// parked, the slot owes their shed ([`outrank`](Self::outrank)) and the
    /// request waits on, once per look (a request polled more often than its
    /// timer fires sheds no more); it is shed itself only at a look that finds
    /// none of them. The look sheds nobody itself: the caller calls `outrank`
    /// once the semaphore has not granted it, so a request granted meanwhile
    /// sheds nobody.
    pub(crate) fn expired(
        &self,
        limits: &WaitLimits<'_>,
        slot: &mut ParkedSlot<'_>,
        priority: Priority,
        waited: Duration,
    ) -> Option<ShedReason> {
        let reason = limits.expired(waited)?;
        if reason == ShedReason::Overload {
            if waited < slot.outranks_again_at {
                return None;
            }
            if (0..usize::from(priority.rank())).any(|rank| self.parked_of(rank) != 0) {
                slot.outranks_again_at = waited.saturating_add(limits.recheck);
                slot.outrank_owed = true;
                return None;
            }
        }
        Some(reason)
    }

    /// For a request still parked in `slot` whose look found it at the
    /// overload cap ([`expired`](Self::expired)): sheds its own units' worth of
    /// lower classes, the lowest first.
    pub(crate) fn outrank(&self, slot: &mut ParkedSlot<'_>, priority: Priority) {
        if core::mem::take(&mut slot.outrank_owed) && self.shed_below(priority, slot.units) {
            slot.outranked_others = true;
        }
    }

    /// Asks the semaphore to shed up to `units` of parked requests of classes
    /// below `priority`, the lowest class first, of what is parked there and
    /// not on its way out already.
    /// Returns whether it asked for any.
    fn shed_below(&self, priority: Priority, units: usize) -> bool {
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

    /// Sheds a request that parked for `waited`, once it has left the queue:
    /// the shed, then the wait for the overload rule. A request shed for a
    /// higher class gives its wait too: it stood in the queue that long, and
    /// while higher classes get in by shedding lower ones, the lower classes'
    /// waits are what shows the rule the queue (measured: without them, the
    /// 3.5x priority mix of docs/overload.md shed critical requests on 2 seeds
    /// of 10).
    pub(crate) fn shed_parked(
        &self,
        source: &'static str,
        units: usize,
        priority: Priority,
        waited: Duration,
        reason: ShedReason,
    ) -> GateError {
        let error = self.shed(source, units, priority, waited, reason);
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

    /// Takes a place among the parked for a request of `units` and
    /// `priority`, if `max_waiters` leaves one (always, without a bound). A full
    /// queue sheds the oldest request of the lowest class parked below
    /// `priority`, and this one takes its place (for as long as that request's
    /// owner takes to see it, the queue holds one more); with nobody below, it
    /// is `QueueFull`.
    fn take_parked_slot(
        &self,
        units: usize,
        priority: Priority,
    ) -> Result<ParkedSlot<'_>, ShedReason> {
        let counted = match self.max_waiters {
            None => None,
            Some(max) => {
                let free = self
                    .parked
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        (n < max).then_some(n + 1)
                    })
                    .is_ok();
                if !free {
                    let lowest = (0..usize::from(priority.rank()))
                        .find(|&rank| self.parked_of(rank) != 0)
                        .ok_or(ShedReason::QueueFull)?;
                    self.semaphore.shed(lowest as u8, 1);
                    self.parked.fetch_add(1, Ordering::AcqRel);
                }
                Some(&self.parked)
            }
        };
        let queued = &self.queued_units[usize::from(priority.rank())];
        queued.fetch_add(units, Ordering::Relaxed);
        Ok(ParkedSlot {
            counted,
            queued_units: queued,
            units,
            outranked_others: false,
            outranks_again_at: Duration::ZERO,
            outrank_owed: false,
        })
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

/// A place among a gate's parked acquires, given back when dropped.
pub(crate) struct ParkedSlot<'a> {
    /// The count of parked acquires, with `max_waiters`.
    counted: Option<&'a AtomicUsize>,
    queued_units: &'a AtomicUsize,
    units: usize,
    /// Lower classes were shed for it at arrival: its wait, shortened so, says
    /// nothing of how long the queue stands ([`Waited::Outranked`]).
    pub(crate) outranked_others: bool,
    /// The wait before which it sheds no lower class at the cap again: its
    /// next look, after it last did.
    outranks_again_at: Duration,
    /// Its last look found it at the cap with lower classes parked: shed them
    /// if it is still parked ([`Inner::outrank`]).
    outrank_owed: bool,
}

/// How an admitted request waited: what the overload rule learns from it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Waited {
    /// Granted at once: nobody was parked ahead (no barging), so the queue was
    /// seen empty.
    AtOnce,
    /// Parked this long.
    Parked(Duration),
    /// Parked this long after lower classes were shed for it: not a sample of
    /// the queue's wait (a class that always gets in by shedding others would
    /// otherwise keep the rule from ever seeing the queue the others stand in).
    Outranked(Duration),
}

impl Waited {
    /// The wait itself.
    pub(crate) fn duration(self) -> Duration {
        match self {
            Waited::AtOnce => Duration::ZERO,
            Waited::Parked(wait) | Waited::Outranked(wait) => wait,
        }
    }

    /// A parked request's wait of `waited`, as `slot` says it was got.
    pub(crate) fn of(waited: Duration, slot: Option<&ParkedSlot<'_>>) -> Waited {
        if slot.is_some_and(|slot| slot.outranked_others) {
            Waited::Outranked(waited)
        } else {
            Waited::Parked(waited)
        }
    }
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
    fn on_release(&self, admission: Admission, units: usize);

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

    fn on_forget(&self) {
        self.observer.on_capacity(&self.capacity_event());
    }

    fn move_held(&self, from: usize, to: usize, units: usize) {
        self.held[to].fetch_add(units, Ordering::AcqRel);
        self.held[from].fetch_sub(units, Ordering::AcqRel);
    }
}
