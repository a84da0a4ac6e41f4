//! The future of [`Gate::acquire`].

use alloc::sync::Arc;
use core::fmt;
use core::future::{Future, Pending};
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::inner::{ParkedSlot, Waited};
use crate::semaphore::{RankedAcquire, Refusal};
use crate::{
    AcquireError, Gate, GateError, GatePermit, Observer, Priority, ShedReason, Source, Timer,
};

/// The future of [`Gate::acquire`]: a [`GatePermit`], or why not.
///
/// `F` is the caller's cancellation signal set with [`until`](Self::until) (none by
/// default).
///
/// The first poll refuses, before anything else, a request above `max_units`
/// (`ExceedsMaxUnits`) or the capacity (`ExceedsCapacity`). Each poll then looks,
/// in this order, at: the `until` signal (fired: `Cancelled`); the semaphore
/// (granted: the permit; closed: `Closed`); the deadline (passed: `Busy`). At
/// the first poll that parks, a zero ceiling sheds at once, then (with an
/// overload target) a hopeless request. The deadline is checked before the
/// semaphore within a poll, so when the grant and the deadline are both ready the
/// grant wins. With an overload target the deadline is looked at again at the
/// overload cap, and past it (while the gate is not overloaded) once per recheck
/// (the target, or a sixteenth of the wait's limit if longer), so that a wait
/// parked before the gate became overloaded is capped too.
///
/// # Cancel safety
///
/// Dropping it at any point loses no unit, leaves the wait queue whole (the waiters
/// behind it are re-examined) and counts nothing.
#[must_use = "futures do nothing unless polled"]
pub struct GateAcquire<'a, S, T: Timer, O, F = Pending<()>> {
    gate: &'a Gate<S, T, O>,
    units: usize,
    source: S,
    priority: Priority,
    ceiling: Option<Duration>,
    state: State,
    /// Pinned (structurally): the semaphore's acquire, once polled.
    acquire: Option<RankedAcquire>,
    /// Pinned (structurally): the next look at the deadline, once parked.
    sleep: Option<T::Sleep>,
    /// The wait, counted from parking, at which `sleep` fires.
    look_at: Duration,
    /// Pinned (structurally): the caller's cancellation signal.
    signal: F,
    /// Its place among the parked, with `max_waiters`; given back when it ends.
    slot: Option<ParkedSlot<'a>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not polled yet.
    Idle,
    /// Parked since `start` (timer time).
    Parked { start: Duration },
    /// Returned its output.
    Done,
}

impl<'a, S: Source, T: Timer, O: Observer> GateAcquire<'a, S, T, O> {
    pub(crate) fn new(gate: &'a Gate<S, T, O>, units: usize, source: S) -> Self {
        Self {
            gate,
            units,
            source,
            priority: source.priority(),
            ceiling: None,
            state: State::Idle,
            acquire: None,
            sleep: None,
            look_at: Duration::ZERO,
            signal: core::future::pending(),
            slot: None,
        }
    }
}

impl<'a, S: Source, T: Timer, O: Observer, F: Future> GateAcquire<'a, S, T, O, F> {
    /// Caps this call's wait at `ceiling` when that is shorter than the wait budget,
    /// e.g. at the time left before a response can no longer be written. When the
    /// ceiling is what ends the wait, the result is still [`GateError::Busy`] and
    /// counted as a shed: the caller is there and must be told.
    pub fn ceiling(mut self, ceiling: Duration) -> Self {
        self.ceiling = Some(self.ceiling.map_or(ceiling, |c| c.min(ceiling)));
        self
    }

    /// Ends the wait with [`GateError::Cancelled`] when `signal` completes first
    /// (e.g. the client disconnected). Not a shed: nothing is counted. The signal's
    /// output is ignored; a signal already complete at the first poll wins over a
    /// free unit (not over a refusal at once: `ExceedsMaxUnits`, `ExceedsCapacity`).
    pub fn until<G: Future>(self, signal: G) -> GateAcquire<'a, S, T, O, G> {
        GateAcquire {
            gate: self.gate,
            units: self.units,
            source: self.source,
            priority: self.priority,
            ceiling: self.ceiling,
            state: self.state,
            acquire: self.acquire,
            sleep: self.sleep,
            look_at: self.look_at,
            signal,
            slot: self.slot,
        }
    }

    /// Sets the request's priority class (the source's
    /// [`priority`](Source::priority) by default): when the gate must shed
    /// someone, it sheds the lowest class first. See [Priority](Gate#priority).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// The units asked for.
    #[must_use]
    pub fn units(&self) -> usize {
        self.units
    }

    /// The priority class asked for.
    #[must_use]
    pub fn priority_class(&self) -> Priority {
        self.priority
    }

    /// The call site.
    #[must_use]
    pub fn source(&self) -> S {
        self.source
    }

    /// How long this call may wait: the wait budget, or the ceiling if shorter.
    #[must_use]
    pub fn max_wait(&self) -> Duration {
        self.gate.inner.wait_limits(self.units, self.ceiling).limit
    }
}

impl<S: Source, T: Timer, O: Observer> GateAcquire<'_, S, T, O> {
    /// Takes the units now if they are free and nobody is parked ahead; never
    /// waits: [`Gate::try_acquire`] with this acquire's priority (a ceiling
    /// has nothing to cap).
    ///
    /// # Errors
    ///
    /// As for [`Gate::try_acquire`].
    pub fn try_now(self) -> Result<GatePermit<S>, GateError> {
        self.gate.take_now(self.units, self.source, self.priority)
    }

    /// Blocks the thread until the units are granted, in the same FIFO queue as
    /// async callers, for at most the wait budget or this acquire's ceiling (on
    /// the system clock): [`Gate::acquire_blocking`] with this acquire's
    /// priority and ceiling.
    ///
    /// # Errors
    ///
    /// As for [`Gate::acquire_blocking`].
    #[cfg(feature = "std")]
    pub fn blocking(self) -> Result<GatePermit<S>, GateError> {
        let deadline = self
            .ceiling
            .and_then(|ceiling| std::time::Instant::now().checked_add(ceiling));
        self.gate
            .block(self.units, self.source, self.priority, deadline)
    }
}

impl<S: Source, T: Timer, O: Observer, F: Future> Future for GateAcquire<'_, S, T, O, F> {
    type Output = Result<GatePermit<S>, GateError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `acquire`, `sleep` and `signal`: they are
        // only ever reached through the `Pin::new_unchecked` projections below and
        // are never moved out while pinned; replacing `acquire`/`sleep` with `None`
        // drops the old value in place. `GateAcquire` has no `Drop` impl, is not
        // `repr(packed)`, and is `Unpin` only if all three fields are (auto trait).
        // `until`, which moves them, takes `self` by value, so it is only callable
        // before the future is pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let gate = this.gate;
        let inner = &gate.inner;
        let start = match this.state {
            State::Done => panic!("`GateAcquire` polled after completion"),
            State::Idle => {
                if let Err(e) = inner.check_units(this.units) {
                    this.state = State::Done;
                    return Poll::Ready(Err(e));
                }
                None
            }
            State::Parked { start } => Some(start),
        };

        // 1. The caller's own signal: gone callers are not counted.
        // SAFETY: structural pinning, see above.
        let signal = unsafe { Pin::new_unchecked(&mut this.signal) };
        if signal.poll(cx).is_ready() {
            this.finish(); // returns any units granted meanwhile
            return Poll::Ready(Err(GateError::Cancelled));
        }

        // 2. The deadline, looked at before the grant so that a grant wins a tie.
        let expired = match start {
            None => None,
            Some(start) => this.look(start, cx),
        };

        // 3. The semaphore.
        let acquire = this.acquire.get_or_insert_with(|| {
            Arc::clone(&inner.semaphore).acquire_ranked(this.units, this.priority.rank())
        });
        // SAFETY: structural pinning, see above.
        let polled = unsafe { Pin::new_unchecked(acquire) }.poll(cx);
        match polled {
            Poll::Ready(Ok(permit)) => {
                let how = match start {
                    None => Waited::AtOnce,
                    Some(s) => Waited::of(inner.timer.now().saturating_sub(s), this.slot.as_ref()),
                };
                this.finish();
                Poll::Ready(Ok(gate.admit(permit, this.source, this.priority, how)))
            }
            Poll::Ready(Err(Refusal::Error(AcquireError::Closed))) => {
                this.finish();
                Poll::Ready(Err(GateError::Closed))
            }
            Poll::Ready(Err(Refusal::Error(AcquireError::ExceedsCapacity(e)))) => {
                // At the first poll, or later when the capacity was lowered below
                // the request: not a shed.
                this.finish();
                Poll::Ready(Err(GateError::ExceedsCapacity(e)))
            }
            // Shed while parked, for a request of a higher class.
            Poll::Ready(Err(Refusal::Shed)) => {
                let start = start.expect("only a parked request is shed");
                Poll::Ready(Err(this.shed(start, ShedReason::Outranked)))
            }
            Poll::Pending => match start {
                None => this.park(cx),
                Some(start) => match expired {
                    Some(reason) => Poll::Ready(Err(this.shed(start, reason))),
                    None => {
                        // Still parked: what its look owes lower classes is shed now.
                        let slot = this
                            .slot
                            .as_mut()
                            .expect("a parked `GateAcquire` has a place");
                        inner.outrank(slot, this.priority);
                        Poll::Pending
                    }
                },
            },
        }
    }
}

impl<S: Source, T: Timer, O: Observer, F> GateAcquire<'_, S, T, O, F> {
    /// Out of the queue and done: the semaphore's acquire (returning any units
    /// granted meanwhile), the look at the deadline and the place among the
    /// parked are let go of.
    fn finish(&mut self) {
        self.acquire = None;
        self.sleep = None;
        self.slot = None;
        self.state = State::Done;
    }

    /// The first poll found no units: take a place among the parked (or be shed
    /// at arrival, [`Inner::park`](super::inner::Inner::park)), start the clock
    /// and arm the first look at the deadline.
    fn park(&mut self, cx: &mut Context<'_>) -> Poll<Result<GatePermit<S>, GateError>> {
        let inner = &self.gate.inner;
        let limits = match inner.park(self.units, self.priority, self.ceiling) {
            Ok((slot, limits)) => {
                self.slot = Some(slot);
                limits
            }
            // It never waited, so the overload rule sees no wait.
            Err(reason) => {
                self.finish();
                return Poll::Ready(Err(inner.shed(
                    self.source.label(),
                    self.units,
                    self.priority,
                    Duration::ZERO,
                    reason,
                )));
            }
        };
        let now = inner.timer.now();
        self.state = State::Parked { start: now };
        self.arm(now, Duration::ZERO, limits.next_look(Duration::ZERO));
        match self.look(now, cx) {
            Some(reason) => Poll::Ready(Err(self.shed(now, reason))),
            None => Poll::Pending,
        }
    }

    /// Arms the next look at the deadline, `look_at` into the wait that started
    /// at `start`; `waited` is the wait now.
    fn arm(&mut self, start: Duration, waited: Duration, look_at: Duration) {
        debug_assert!(look_at > waited);
        self.look_at = look_at;
        self.sleep = Some(
            self.gate
                .inner
                .timer
                .sleep_until(start.saturating_add(look_at)),
        );
    }

    /// Whether the wait that started at `start` must end now, and why; if not,
    /// the next look is armed with `cx`'s waker.
    fn look(&mut self, start: Duration, cx: &mut Context<'_>) -> Option<ShedReason> {
        loop {
            let inner = &self.gate.inner;
            let sleep = self
                .sleep
                .as_mut()
                .expect("a parked `GateAcquire` has a deadline");
            // SAFETY: structural pinning, see `poll`.
            let fired = unsafe { Pin::new_unchecked(sleep) }.poll(cx).is_ready();
            let waited = inner.timer.now().saturating_sub(start);
            let limits = inner.wait_limits(self.units, self.ceiling);
            let slot = self
                .slot
                .as_mut()
                .expect("a parked `GateAcquire` has a place");
            if let Some(reason) = inner.expired(&limits, slot, self.priority, waited) {
                return Some(reason);
            }
            if !fired && waited < self.look_at {
                return None;
            }
            // Looked, and no limit binds yet: arm the next look and poll it.
            let next = limits.next_look(waited);
            self.arm(start, waited, next);
        }
    }

    /// The wait ended with the caller still here: leave the queue (so the
    /// estimate excludes us), then count one shed and say when to retry.
    fn shed(&mut self, start: Duration, reason: ShedReason) -> GateError {
        self.finish();
        let inner = &self.gate.inner;
        let waited = inner.timer.now().saturating_sub(start);
        inner.shed_parked(
            self.source.label(),
            self.units,
            self.priority,
            waited,
            reason,
        )
    }
}

impl<S: Source, T: Timer, O, F> fmt::Debug for GateAcquire<'_, S, T, O, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateAcquire")
            .field("units", &self.units)
            .field("source", &self.source.label())
            .field("ceiling", &self.ceiling)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
