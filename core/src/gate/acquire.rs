//! The two acquires of a gate that wait: the future of [`Gate::acquire`], on the
//! gate's timer, and its blocking form, on a parked thread. Each drives the
//! acquire protocol (`protocol.rs`) and keeps only its own way of waiting.

use core::fmt;
use core::future::{Future, Pending};
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::protocol::{Ending, Look, Step, Wait};
use crate::semaphore::RankedAcquire;
use crate::{Gate, GateError, GatePermit, Observer, Priority, Source, Timer};

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
    state: State,
    /// Pinned (structurally): the semaphore's acquire, once polled.
    acquire: Option<RankedAcquire>,
    /// Pinned (structurally): the next look at the deadline, once parked.
    sleep: Option<T::Sleep>,
    /// The wait, counted from parking, at which `sleep` fires.
    look_at: Duration,
    /// Pinned (structurally): the caller's cancellation signal.
    signal: F,
    /// What it asks for, and its place among the parked: the protocol's part.
    /// Last, so that a future dropped while parked leaves the semaphore's queue
    /// before the gate's books, as [`Wait::end`] does.
    wait: Wait<'a, S, T, O>,
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
            state: State::Idle,
            acquire: None,
            sleep: None,
            look_at: Duration::ZERO,
            signal: core::future::pending(),
            wait: Wait::new(gate, units, source),
        }
    }
}

impl<'a, S: Source, T: Timer, O: Observer, F: Future> GateAcquire<'a, S, T, O, F> {
    /// Caps this call's wait at `ceiling` when that is shorter than the wait budget,
    /// e.g. at the time left before a response can no longer be written. When the
    /// ceiling is what ends the wait, the result is still [`GateError::Busy`] and
    /// counted as a shed: the caller is there and must be told.
    pub fn ceiling(mut self, ceiling: Duration) -> Self {
        self.wait.ceiling = Some(self.wait.ceiling.map_or(ceiling, |c| c.min(ceiling)));
        self
    }

    /// Ends the wait with [`GateError::Cancelled`] when `signal` completes first
    /// (e.g. the client disconnected). Not a shed: nothing is counted. The signal's
    /// output is ignored; a signal already complete at the first poll wins over a
    /// free unit (not over a refusal at once: `ExceedsMaxUnits`, `ExceedsCapacity`).
    pub fn until<G: Future>(self, signal: G) -> GateAcquire<'a, S, T, O, G> {
        GateAcquire {
            state: self.state,
            acquire: self.acquire,
            sleep: self.sleep,
            look_at: self.look_at,
            signal,
            wait: self.wait,
        }
    }

    /// Sets the request's priority class (the source's
    /// [`priority`](Source::priority) by default): when the gate must shed
    /// someone, it sheds the lowest class first. See [Priority](Gate#priority).
    pub fn priority(mut self, priority: Priority) -> Self {
        self.wait.priority = priority;
        self
    }

    /// The units asked for.
    #[must_use]
    pub fn units(&self) -> usize {
        self.wait.units
    }

    /// The priority class asked for.
    #[must_use]
    pub fn priority_class(&self) -> Priority {
        self.wait.priority
    }

    /// The call site.
    #[must_use]
    pub fn source(&self) -> S {
        self.wait.source
    }

    /// How long this call may wait: the wait budget, or the ceiling if shorter.
    #[must_use]
    pub fn max_wait(&self) -> Duration {
        self.wait.limits().limit
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
        let wait = self.wait;
        wait.gate.take_now(wait.units, wait.source, wait.priority)
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
            .wait
            .ceiling
            .and_then(|ceiling| std::time::Instant::now().checked_add(ceiling));
        self.blocking_until(deadline)
    }

    /// The one blocking acquire: the protocol's turns on this thread, parked
    /// between them. Its wait is counted on the system clock from before its
    /// first turn, and ends by `deadline` if that comes before the budget ends.
    #[cfg(feature = "std")]
    pub(super) fn blocking_until(
        self,
        deadline: Option<std::time::Instant>,
    ) -> Result<GatePermit<S>, GateError> {
        let mut wait = self.wait;
        wait.check()?;
        let started = std::time::Instant::now();
        let waited = || started.elapsed();
        wait.ceiling = deadline.map(|deadline| deadline.saturating_duration_since(started));
        let thread = crate::semaphore::ThreadWaker::new();
        let mut acquire = core::pin::pin!(None);
        loop {
            // A parked request looks first, so that a grant ready too wins.
            let look = wait.is_parked().then(|| wait.look(waited()));
            let next = match wait.turn(acquire.as_mut(), |a| thread.poll(a), look) {
                Step::End(ending) => Err(ending),
                Step::Waiting(next) => Ok(next),
                // Its clock runs already: it looks at once.
                Step::Parked { .. } => {
                    let look = wait.look(waited());
                    wait.still_parked(look)
                }
            };
            match next {
                Ok(next) => {
                    thread.park(Some(started + next));
                }
                Err(ending) => return wait.end(acquire, ending, waited),
            }
        }
    }
}

impl<S: Source, T: Timer, O: Observer, F: Future> Future for GateAcquire<'_, S, T, O, F> {
    type Output = Result<GatePermit<S>, GateError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `acquire`, `sleep` and `signal`: they are
        // only ever reached through the `Pin::new_unchecked` projections below and
        // in the methods `poll` calls, and are never moved out while pinned;
        // replacing `acquire`/`sleep` with `None` drops the old value in place.
        // `GateAcquire` has no `Drop` impl, is not `repr(packed)`, and is `Unpin`
        // only if all three fields are (auto trait). `until`, which moves them,
        // takes `self` by value, so it is only callable before the future is
        // pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let start = match this.state {
            State::Done => panic!("`GateAcquire` polled after completion"),
            State::Idle => {
                if let Err(e) = this.wait.check() {
                    return Poll::Ready(this.end(Ending::Refused(e)));
                }
                None
            }
            State::Parked { start } => Some(start),
        };

        // 1. The caller's own signal: gone callers are not counted.
        // SAFETY: structural pinning, see above.
        let signal = unsafe { Pin::new_unchecked(&mut this.signal) };
        if signal.poll(cx).is_ready() {
            // Returns any units granted meanwhile.
            return Poll::Ready(this.end(Ending::Refused(GateError::Cancelled)));
        }

        // 2. The turn: the deadline, looked at before the grant so that a grant
        // wins a tie, then the semaphore.
        let look = start.map(|start| this.look(start, cx));
        // SAFETY: structural pinning, see above.
        let acquire = unsafe { Pin::new_unchecked(&mut this.acquire) };
        let first_look = match this.wait.turn(acquire, |a| a.poll(cx), look) {
            Step::End(ending) => return Poll::Ready(this.end(ending)),
            Step::Waiting(_) => return Poll::Pending,
            Step::Parked { first_look } => first_look,
        };

        // 3. Parked at this poll: start the clock, arm the first look and make it.
        let now = this.wait.gate.inner.timer.now();
        this.state = State::Parked { start: now };
        this.arm(now, Duration::ZERO, first_look);
        let look = this.look(now, cx);
        match this.wait.still_parked(look) {
            Ok(_) => Poll::Pending,
            Err(ending) => Poll::Ready(this.end(ending)),
        }
    }
}

impl<S: Source, T: Timer, O: Observer, F> GateAcquire<'_, S, T, O, F> {
    /// Ends the acquire as `ending` says: done, its look at the deadline let go
    /// of, then the protocol's end ([`Wait::end`]).
    fn end(&mut self, ending: Ending) -> Result<GatePermit<S>, GateError> {
        let start = match self.state {
            State::Parked { start } => start,
            State::Idle | State::Done => Duration::ZERO,
        };
        self.state = State::Done;
        self.sleep = None;
        let gate = self.wait.gate;
        let timer = &gate.inner.timer;
        // SAFETY: structural pinning, see `poll`.
        let acquire = unsafe { Pin::new_unchecked(&mut self.acquire) };
        self.wait
            .end(acquire, ending, || timer.now().saturating_sub(start))
    }

    /// Arms the next look at the deadline, `look_at` into the wait that started
    /// at `start`; `waited` is the wait now.
    fn arm(&mut self, start: Duration, waited: Duration, look_at: Duration) {
        debug_assert!(look_at > waited);
        self.look_at = look_at;
        self.sleep = Some(
            self.wait
                .gate
                .inner
                .timer
                .sleep_until(start.saturating_add(look_at)),
        );
    }

    /// The protocol's look at the wait that started at `start`; if no limit
    /// binds, the next look is armed with `cx`'s waker.
    fn look(&mut self, start: Duration, cx: &mut Context<'_>) -> Look {
        loop {
            let sleep = self
                .sleep
                .as_mut()
                .expect("a parked `GateAcquire` has a deadline");
            // SAFETY: structural pinning, see `poll`.
            let fired = unsafe { Pin::new_unchecked(sleep) }.poll(cx).is_ready();
            let waited = self.wait.gate.inner.timer.now().saturating_sub(start);
            match self.wait.look(waited) {
                Look::Until(_) if !fired && waited < self.look_at => {
                    return Look::Until(self.look_at);
                }
                // Looked, and no limit binds yet: arm the next look and poll it.
                Look::Until(next) => self.arm(start, waited, next),
                expired @ Look::Expired(_) => return expired,
            }
        }
    }
}

impl<S: Source, T: Timer, O, F> fmt::Debug for GateAcquire<'_, S, T, O, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateAcquire")
            .field("units", &self.wait.units)
            .field("source", &self.wait.source.label())
            .field("ceiling", &self.wait.ceiling)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}
