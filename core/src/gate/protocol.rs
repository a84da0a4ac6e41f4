//! The acquire protocol: what one acquire of a gate decides, and in what order,
//! whichever way it waits. [`GateAcquire`](super::GateAcquire) is polled by a
//! runtime and waits on the gate's timer; its blocking form parks a thread and
//! waits on the system clock. Both drive a [`Wait`] through the same steps, so a
//! rule changed here changes both:
//!
//! 1. **At once** ([`Wait::check`]): a request above `max_units` or the capacity
//!    is refused before anything else.
//! 2. **A turn** ([`Wait::turn`]), at every poll: a parked request has looked at
//!    its wait first ([`Wait::look`]: past its limit, or past the overload cap),
//!    and then the semaphore is polled, so that a grant ready at the same time
//!    wins. Granted, closed, above a capacity lowered meanwhile, or shed for a
//!    higher class: it ends. Before its first poll, a request whose class is
//!    past its memory mark (`memory.rs`) is shed, and never polls.
//! 3. **Arrival** ([`Wait::park`]), when the first turn finds no units: it takes
//!    a place among the parked, or is shed at arrival, in this order: the queue
//!    is full (`max_waiters`) with nobody of a lower class parked; its own limit
//!    is zero (a zero ceiling); with an overload target, it is hopeless by the
//!    estimate even with every lower class shed. Lower classes are shed for it
//!    when the queue is full, and while the gate is pressed
//!    ([Priority](crate::Gate#priority)). Then its clock starts and it looks at
//!    once.
//! 4. **Still parked** ([`Wait::still_parked`]): a look that found it expired
//!    sheds it; otherwise the lower classes its look owes at the overload cap are
//!    shed now, and it waits for its next look or a wake-up.
//! 5. **The end** ([`Wait::end`]): the semaphore's acquire goes (returning any
//!    units granted meanwhile), then its place among the parked, then the
//!    observer hears, so that a shed's estimate and `Retry-After` are a
//!    newcomer's.
//!
//! The caller keeps what differs: the clock a wait is counted on, how it waits
//! for its next look, its own cancellation, and where the semaphore's acquire is
//! pinned (a future's field, a blocked thread's stack).
//!
//! # Invariants
//!
//! - An acquire ends once, through [`Wait::end`]: admitted (`on_admit`), shed
//!   (`on_shed` once, with one [`ShedReason`]), or refused with nothing told
//!   (cancelled, closed, above `max_units` or the capacity).
//! - A request counts among the parked (against `max_waiters`, and in the units
//!   queued per class that the estimate reads) exactly while it holds a
//!   [`ParkedPlace`].
//! - The overload rule sees a wait only from a request that parked: a shed at
//!   arrival shows it nothing, nor does an admission whose wait was shortened by
//!   shedding lower classes ([`Waited::Outranked`]).
//! - A request sheds lower classes at the overload cap at most once per look, and
//!   only once the semaphore has left it parked: one granted meanwhile sheds
//!   nobody.

use alloc::sync::Arc;
use core::pin::Pin;
use core::task::Poll;
use core::time::Duration;

use super::inner::Inner;
use super::overload::WaitLimits;
use super::priority::Priority;
use crate::loom::sync::{AtomicUsize, Ordering};
use crate::semaphore::{RankedAcquire, Refusal};
use crate::{
    AcquireError, Gate, GateError, GatePermit, Observer, OwnedPermit, ShedReason, Source, Timer,
};

/// One acquire of a gate, from its first turn to its end: what it asks for, and
/// its place among the parked once it has one.
///
/// The semaphore's acquire is the caller's to pin; the protocol makes, polls and
/// drops it through the `Pin<&mut Option<RankedAcquire>>` each step is given.
pub(crate) struct Wait<'a, S, T, O> {
    pub(super) gate: &'a Gate<S, T, O>,
    pub(super) units: usize,
    pub(super) source: S,
    pub(super) priority: Priority,
    /// Caps the wait below the budget.
    pub(super) ceiling: Option<Duration>,
    /// Its place among the parked, from its arrival to its end.
    place: Option<ParkedPlace<'a>>,
}

/// What a look at a parked wait found.
pub(crate) enum Look {
    /// The wait must end, shed for this reason (a grant at the same turn wins).
    Expired(ShedReason),
    /// No limit binds yet: the next look is due at this wait, counted from
    /// parking.
    Until(Duration),
}

/// What an acquire does after a turn.
pub(crate) enum Step {
    /// It ends so: the caller lets go of its own waiting, then calls
    /// [`Wait::end`].
    End(Ending),
    /// It parked at this turn: its clock starts, and it looks at once; the first
    /// look is due at `first_look`.
    Parked { first_look: Duration },
    /// Still parked: it waits until its next look, due at this wait, or a
    /// wake-up.
    // Read by the blocking acquire only: the future armed its look already.
    Waiting(#[cfg_attr(not(feature = "std"), allow(dead_code))] Duration),
}

/// How an acquire ends.
pub(crate) enum Ending {
    Granted(OwnedPermit),
    /// Not a shed: nobody is told.
    Refused(GateError),
    Shed(ShedReason),
}

impl<'a, S: Source, T: Timer, O: Observer> Wait<'a, S, T, O> {
    pub(super) fn new(gate: &'a Gate<S, T, O>, units: usize, source: S) -> Self {
        Self {
            gate,
            units,
            source,
            priority: source.priority(),
            ceiling: None,
            place: None,
        }
    }

    fn inner(&self) -> &'a Inner<T, O> {
        let gate: &'a Gate<S, T, O> = self.gate;
        &gate.inner
    }

    /// The limits on this wait now: the budget or the ceiling, and with an
    /// overload target the cap, which follows the pace.
    pub(super) fn limits(&self) -> WaitLimits<'a> {
        self.inner().wait_limits(self.units, self.ceiling)
    }

    /// Refuses, at once, a request the gate can never promise to serve.
    pub(super) fn check(&self) -> Result<(), GateError> {
        self.inner().check_units(self.units)
    }

    /// Whether it has taken a place among the parked (and not ended).
    #[cfg(feature = "std")]
    pub(super) fn is_parked(&self) -> bool {
        self.place.is_some()
    }

    /// A turn: polls the semaphore's acquire (made at the first turn) with
    /// `poll`, after `look`, the look a parked request has made at this turn
    /// (`None` before it parked).
    pub(super) fn turn(
        &mut self,
        mut acquire: Pin<&mut Option<RankedAcquire>>,
        poll: impl FnOnce(Pin<&mut RankedAcquire>) -> Poll<Result<OwnedPermit, Refusal>>,
        look: Option<Look>,
    ) -> Step {
        debug_assert_eq!(look.is_some(), self.place.is_some());
        if acquire.is_none() {
            if self.inner().refused_for_memory(self.units, self.priority) {
                return Step::End(Ending::Shed(ShedReason::Memory));
            }
            let semaphore = Arc::clone(&self.inner().semaphore);
            acquire.set(Some(
                semaphore.acquire_ranked(self.units, self.priority.rank()),
            ));
        }
        let acquire = acquire.as_pin_mut().expect("made above");
        let ending = match poll(acquire) {
            Poll::Ready(Ok(permit)) => Ending::Granted(permit),
            Poll::Ready(Err(Refusal::Error(AcquireError::Closed))) => {
                Ending::Refused(GateError::Closed)
            }
            // At the first turn, or later when the capacity was lowered below
            // the request: not a shed.
            Poll::Ready(Err(Refusal::Error(AcquireError::ExceedsCapacity(e)))) => {
                Ending::Refused(GateError::ExceedsCapacity(e))
            }
            // Shed for a request of a higher class: while parked, or at the
            // first turn, when a shed posted for its class finds it in the
            // semaphore's queue before it is in the gate's books (it then ends
            // as a shed at arrival does, its wait unseen).
            Poll::Ready(Err(Refusal::Shed)) => Ending::Shed(ShedReason::Outranked),
            Poll::Pending => {
                let parked = match look {
                    None => self.park().map(|first_look| Step::Parked { first_look }),
                    Some(look) => self.still_parked(look).map(Step::Waiting),
                };
                match parked {
                    Ok(step) => return step,
                    Err(ending) => ending,
                }
            }
        };
        Step::End(ending)
    }

    /// The first turn found no units: takes a place among the parked and
    /// returns when its first look is due, or says why it is shed at arrival
    /// (the order is the module's, step 3). On a shed its place is given back
    /// before the caller ends it, so the shed's estimate is a newcomer's.
    pub(super) fn park(&mut self) -> Result<Duration, Ending> {
        let inner = self.inner();
        let mut place = self.take_place().map_err(Ending::Shed)?;
        let limits = self.limits();
        // The caller's own limit first: named for it, not for the estimate.
        if let Some(reason) = limits.expired(Duration::ZERO) {
            return Err(Ending::Shed(reason));
        }
        if let Some(overload) = &inner.overload {
            // Its own units are counted among the queued already.
            let longest = limits.longest_now();
            if inner
                .estimated_wait_of(0, self.priority)
                .is_some_and(|wait| wait > longest)
            {
                // Shedding every class below would not bring it in.
                return Err(Ending::Shed(ShedReason::Hopeless));
            }
            // Behind the lower classes past the target (or past the most it may
            // wait), while the gate is pressed: shed the lowest of them first,
            // enough to be within it.
            let capacity = inner.semaphore.capacity();
            let within = |wait| inner.pace.units_within(wait, capacity);
            if let (Some(goal), Some(mark)) = (
                within(overload.target().min(longest)),
                within(overload.press_mark(longest)),
            ) {
                let behind_all = inner.deficit(0, Priority::Sheddable);
                let now = inner.timer.now();
                let interval = overload.interval(inner.pace.mean_hold());
                if overload.pressed(behind_all > mark, now, interval) && behind_all > goal {
                    place.outranked_others = inner.shed_below(self.priority, behind_all - goal);
                    if place.outranked_others {
                        overload.press(now, interval);
                    }
                }
            }
        }
        self.place = Some(place);
        Ok(limits.next_look(Duration::ZERO))
    }

    /// Takes a place among the parked, if `max_waiters` leaves one (always,
    /// without a bound). A full queue sheds the oldest request of the lowest
    /// class parked below this one's, and this one takes its place (for as long
    /// as that request's owner takes to see it, the queue holds one more); with
    /// nobody below, it is `QueueFull`.
    fn take_place(&self) -> Result<ParkedPlace<'a>, ShedReason> {
        let inner = self.inner();
        let counted = match inner.max_waiters {
            None => None,
            Some(max) => {
                let free = inner
                    .parked
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                        (n < max).then_some(n + 1)
                    })
                    .is_ok();
                if !free {
                    let lowest = (0..usize::from(self.priority.rank()))
                        .find(|&rank| inner.parked_of(rank) != 0)
                        .ok_or(ShedReason::QueueFull)?;
                    inner.semaphore.shed(lowest as u8, 1);
                    inner.parked.fetch_add(1, Ordering::AcqRel);
                }
                Some(&inner.parked)
            }
        };
        let queued = &inner.queued_units[usize::from(self.priority.rank())];
        queued.fetch_add(self.units, Ordering::Relaxed);
        Ok(ParkedPlace {
            counted,
            queued_units: queued,
            units: self.units,
            outranked_others: false,
            outranks_again_at: Duration::ZERO,
            outrank_owed: false,
        })
    }

    /// A parked request's look after `waited` (counted from parking): whether
    /// its wait must end now and why, or when to look next.
    ///
    /// At the overload cap, lower classes go first: with any of them parked,
    /// the request owes their shed ([`still_parked`](Self::still_parked)) and
    /// waits on, once per look (a request polled more often than its look falls
    /// due sheds no more); it is shed itself only at a look that finds none of
    /// them. The look sheds nobody itself, so a request the semaphore grants at
    /// the same turn sheds nobody.
    pub(super) fn look(&mut self, waited: Duration) -> Look {
        let inner = self.inner();
        let limits = self.limits();
        let place = self.place.as_mut().expect("only a parked request looks");
        let Some(reason) = limits.expired(waited) else {
            return Look::Until(limits.next_look(waited));
        };
        if reason == ShedReason::Overload {
            if waited < place.outranks_again_at {
                return Look::Until(limits.next_look(waited));
            }
            if (0..usize::from(self.priority.rank())).any(|rank| inner.parked_of(rank) != 0) {
                place.outranks_again_at = waited.saturating_add(limits.recheck);
                place.outrank_owed = true;
                return Look::Until(limits.next_look(waited));
            }
        }
        Look::Expired(reason)
    }

    /// A parked request the semaphore did not grant at this turn, after `look`:
    /// shed if the look found it expired; otherwise it sheds its own units'
    /// worth of the lower classes its look owes at the cap (the lowest first),
    /// and the next look is due at the wait returned.
    pub(super) fn still_parked(&mut self, look: Look) -> Result<Duration, Ending> {
        let next = match look {
            Look::Expired(reason) => return Err(Ending::Shed(reason)),
            Look::Until(next) => next,
        };
        let inner = self.inner();
        let place = self.place.as_mut().expect("a parked request has a place");
        if core::mem::take(&mut place.outrank_owed) && inner.shed_below(self.priority, place.units)
        {
            place.outranked_others = true;
        }
        Ok(next)
    }

    /// Ends the acquire as `ending` says, once the caller has let go of its own
    /// waiting: lets go of the semaphore's acquire and of its place among the
    /// parked, then tells the observer of an admission or a shed. `waited` reads
    /// the wait so far on the caller's clock; it is read only if the request
    /// parked.
    pub(super) fn end(
        &mut self,
        mut acquire: Pin<&mut Option<RankedAcquire>>,
        ending: Ending,
        waited: impl FnOnce() -> Duration,
    ) -> Result<GatePermit<S>, GateError> {
        let inner = self.inner();
        match ending {
            Ending::Granted(permit) => {
                let how = self
                    .place
                    .as_ref()
                    .map_or(Waited::AtOnce, |place| Waited::of(waited(), place));
                self.leave(acquire.as_mut());
                Ok(self.gate.admit(permit, self.source, self.priority, how))
            }
            Ending::Refused(error) => {
                self.leave(acquire.as_mut());
                Err(error)
            }
            Ending::Shed(reason) => {
                let parked = self.leave(acquire.as_mut());
                let label = self.source.label();
                if !parked {
                    // It never waited, so the overload rule sees no wait.
                    let zero = Duration::ZERO;
                    return Err(inner.shed(label, self.units, self.priority, zero, reason));
                }
                // A request shed for a higher class gives its wait too: it stood
                // in the queue that long, and while higher classes get in by
                // shedding lower ones, the lower classes' waits are what shows
                // the rule the queue (measured: without them, the 3.5x priority
                // mix of docs/overload.md shed critical requests on 2 seeds of 10).
                let waited = waited();
                let error = inner.shed(label, self.units, self.priority, waited, reason);
                inner.saw_wait(waited, false);
                Err(error)
            }
        }
    }

    /// Lets go of the semaphore's acquire (returning any units granted
    /// meanwhile), then of the place among the parked; whether it had one.
    fn leave(&mut self, mut acquire: Pin<&mut Option<RankedAcquire>>) -> bool {
        acquire.set(None);
        self.place.take().is_some()
    }
}

/// A place among a gate's parked acquires, given back when dropped.
pub(crate) struct ParkedPlace<'a> {
    /// The count of parked acquires, with `max_waiters`.
    counted: Option<&'a AtomicUsize>,
    queued_units: &'a AtomicUsize,
    units: usize,
    /// Lower classes were shed for it at arrival or at the cap: its wait,
    /// shortened so, says nothing of how long the queue stands
    /// ([`Waited::Outranked`]).
    outranked_others: bool,
    /// The wait before which it sheds no lower class at the cap again: its
    /// next look, after it last did.
    outranks_again_at: Duration,
    /// Its last look found it at the cap with lower classes parked: shed them
    /// if it is still parked ([`Wait::still_parked`]).
    outrank_owed: bool,
}

impl Drop for ParkedPlace<'_> {
    fn drop(&mut self) {
        self.queued_units.fetch_sub(self.units, Ordering::Relaxed);
        if let Some(parked) = self.counted {
            parked.fetch_sub(1, Ordering::AcqRel);
        }
    }
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

    /// A parked request's wait of `waited`, as `place` says it was got.
    fn of(waited: Duration, place: &ParkedPlace<'_>) -> Waited {
        if place.outranked_others {
            Waited::Outranked(waited)
        } else {
            Waited::Parked(waited)
        }
    }
}
