//! What operators do to a running gate: drain it at shutdown, resize it, keep its
//! capacity in step with the process's memory limit; and the entry points of the
//! blocking acquire for threads (it runs in `acquire.rs`, beside the async one).

use alloc::vec::Vec;
use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;

use super::builder::resolve_capacity;
use super::inner::budget_units_of;
use crate::loom::sync::Ordering;
use crate::{Capacity, ConfigError, Drain, Gate, Observer, Source, Timer};

impl<S: Source, T: Timer, O: Observer> Gate<S, T, O> {
    /// Shuts the gate down gracefully: closes it at once, when called (parked
    /// acquires end with [`GateError::Closed`](crate::GateError::Closed), later ones
    /// fail at once; nothing is counted as a shed), and returns a future that waits
    /// until every unit is back or `grace` has passed on the gate's timer, counted
    /// from the call.
    ///
    /// # Errors
    ///
    /// [`DrainTimeout`] when `grace` passed first: what was still held, per source.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future leaves the gate closed and its queue whole.
    pub fn drain(&self, grace: Duration) -> GateDrain<'_, S, T, O> {
        let deadline = self.inner.timer.now().saturating_add(grace);
        GateDrain {
            gate: self,
            drain: self.inner.semaphore.drain(),
            sleep: self.inner.timer.sleep_until(deadline),
        }
    }

    /// Units held right now per source, in the order of `S::ALL`; sources that hold
    /// nothing are left out.
    #[must_use]
    pub fn held_by_source(&self) -> Vec<(S, usize)> {
        S::ALL
            .iter()
            .zip(self.inner.held.iter())
            .map(|(&source, held)| (source, held.load(Ordering::Acquire)))
            .filter(|&(_, held)| held != 0)
            .collect()
    }
}

impl<S, T: Timer, O: Observer> Gate<S, T, O> {
    /// Changes the gate's capacity while it runs, and returns the previous one.
    /// The wait estimate (and so `Retry-After` and the sheds at arrival) follows
    /// the new capacity at once.
    ///
    /// `capacity` is resolved as [`Gate::builder`] resolves it: a memory-derived
    /// capacity is floored at `max_units`, an explicit one must be at least
    /// `max_units`. Growing serves parked requests at once, in FIFO order;
    /// shrinking revokes no held permit — units retire as they come back, and
    /// nothing is granted beyond the new capacity meanwhile. The observer hears
    /// of a new capacity, or of the same one under another memory budget
    /// ([`Observer::on_capacity`], with [`CapacityEvent::budget_units`]).
    ///
    /// [`CapacityEvent::budget_units`]: crate::CapacityEvent::budget_units
    ///
    /// # Errors
    ///
    /// As for [`GateBuilder::build`](crate::GateBuilder::build), for the capacity:
    /// zero, above [`Semaphore::MAX_UNITS`](crate::Semaphore::MAX_UNITS), or
    /// (explicit) below `max_units`; and [`ConfigError::Closed`] once the gate is
    /// closed. The gate is left unchanged.
    pub fn resize(&self, capacity: impl Into<Capacity>) -> Result<usize, ConfigError> {
        let asked = capacity.into();
        let capacity = resolve_capacity(asked, self.inner.max_units)?;
        if self.is_closed() {
            return Err(ConfigError::Closed);
        }
        let budget = budget_units_of(asked);
        let budget_changed = self.inner.budget_units.swap(budget, Ordering::Relaxed) != budget;
        self.inner.configured.store(capacity, Ordering::Relaxed);
        let previous = self.inner.apply_capacity(budget_changed);
        Ok(previous)
    }
}

impl<S: Source, T: Timer, O: Observer> Gate<S, T, O> {
    /// Lets an idle gate leave the overloaded state: the overload rule changes
    /// state only at a wait it sees, so a gate nobody uses would stay
    /// overloaded (and say so to its observer) until the next request. Every
    /// half interval while overloaded with nobody parked, this shows the rule
    /// an empty queue, as a release with nobody parked does; after the calm
    /// intervals the gate leaves the state. Ends at its first look after the
    /// gate is dropped or closed, or at once without an overload target.
    ///
    /// A gate whose timer can spawn ([`Timer::spawn`]: the Tokio, smol and async-std
    /// adapters', and `ThreadTimer` on a thread) runs it from `build`; with another
    /// timer, spawn it.
    pub fn watch_overload(&self) -> impl Future<Output = ()> + Send + 'static {
        let inner = alloc::sync::Arc::downgrade(&self.inner);
        async move {
            loop {
                let sleep = {
                    let Some(inner) = inner.upgrade() else {
                        return;
                    };
                    let Some(overload) = &inner.overload else {
                        return;
                    };
                    if inner.semaphore.is_closed() {
                        return;
                    }
                    inner.look_idle();
                    let half = overload.interval(inner.pace.mean_hold()) / 2;
                    inner
                        .timer
                        .sleep_until(inner.timer.now().saturating_add(half))
                };
                sleep.await;
            }
        }
    }
}

#[cfg(feature = "std")]
impl<S: Source, T: Timer, O: Observer> Gate<S, T, O> {
    /// Keeps the capacity in step with the process's memory limit: every
    /// `interval` (on the gate's timer; the first read one interval after the
    /// first poll, since the gate was just sized) it reads the limit of the process's
    /// cgroup ([`process_memory_limit`](crate::process_memory_limit)) and resizes the gate to
    /// `budget(limit)` (see [`resize`](Self::resize)). A read that finds no limit,
    /// or a capacity `resize` refuses, leaves the gate as it is. The future ends
    /// once the gate is closed.
    ///
    /// Spawn it on the runtime: `admit_tokio::spawn_memory_follower` and
    /// `admit_smol::spawn_memory_follower` do.
    pub fn follow_memory_limit<B>(
        &self,
        interval: Duration,
        budget: B,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        B: Fn(u64) -> Capacity + Send + 'static,
    {
        self.follow_limit(interval, crate::process_memory_limit, budget)
    }

    /// [`follow_memory_limit`](Self::follow_memory_limit) with the limit read by
    /// `read` instead of from the cgroup files.
    pub fn follow_limit<R, B>(
        &self,
        interval: Duration,
        read: R,
        budget: B,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        R: Fn() -> Option<u64> + Send + 'static,
        B: Fn(u64) -> Capacity + Send + 'static,
    {
        let gate = self.clone();
        async move {
            let mut next = gate.inner.timer.now();
            loop {
                next = next.saturating_add(interval);
                gate.inner.timer.sleep_until(next).await;
                if gate.is_closed() {
                    return;
                }
                if let Some(limit) = read() {
                    let _ = gate.resize(budget(limit));
                }
            }
        }
    }

    /// [`acquire`](Self::acquire) for a thread: blocks until the units are granted,
    /// in the same FIFO queue as async callers, for at most the wait budget (on the
    /// system clock: the gate's timer may belong to a runtime). The outcomes and what
    /// the observer hears are those of `acquire`, but for `Cancelled`, which a
    /// blocked thread cannot produce. A gate used only from threads can take a
    /// [`ThreadTimer`](crate::ThreadTimer).
    ///
    /// # Errors
    ///
    /// [`GateError::Busy`](crate::GateError::Busy) when the wait budget expires, the
    /// queue is full, or (with an overload target) the wait is hopeless at arrival
    /// or reaches the overload cap: a shed. [`GateError::ExceedsMaxUnits`] or
    /// [`GateError::ExceedsCapacity`] at once for a request above `max_units` or
    /// `capacity`, [`GateError::Closed`](crate::GateError::Closed) after
    /// [`close`](Self::close).
    ///
    /// [`GateError::ExceedsCapacity`]: crate::GateError::ExceedsCapacity
    /// [`GateError::ExceedsMaxUnits`]: crate::GateError::ExceedsMaxUnits
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    pub fn acquire_blocking(
        &self,
        units: usize,
        source: S,
    ) -> Result<crate::GatePermit<S>, crate::GateError> {
        self.acquire(units, source).blocking()
    }

    /// [`acquire_blocking`](Self::acquire_blocking) that also gives up at
    /// `deadline`, when that comes before the wait budget ends: the blocking form
    /// of a [`ceiling`](crate::GateAcquire::ceiling). A deadline that ends the
    /// wait is a shed ([`ShedReason::Ceiling`](crate::ShedReason::Ceiling)); one
    /// already past sheds at once any request that cannot be granted at once.
    ///
    /// # Errors
    ///
    /// As for [`acquire_blocking`](Self::acquire_blocking).
    ///
    /// # Panics
    ///
    /// If `units == 0`.
    ///
    /// # Examples
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use admit::{Gate, ShedReason, ThreadTimer};
    ///
    /// admit::sources! { enum Job { Export => "export" } }
    ///
    /// let gate = Gate::builder(1).timer(ThreadTimer::new()).build()?;
    /// let held = gate.acquire_blocking(1, Job::Export).unwrap();
    /// let shed = gate
    ///     .acquire_blocking_until(1, Job::Export, Instant::now() + Duration::from_millis(5))
    ///     .unwrap_err();
    /// assert_eq!(shed.shed_reason(), Some(ShedReason::Ceiling));
    /// drop(held);
    /// assert!(gate.acquire_blocking_until(1, Job::Export, Instant::now()).is_ok());
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    pub fn acquire_blocking_until(
        &self,
        units: usize,
        source: S,
        deadline: std::time::Instant,
    ) -> Result<crate::GatePermit<S>, crate::GateError> {
        self.acquire(units, source).blocking_until(Some(deadline))
    }

    /// [`drain`](Self::drain) for a thread: closes the gate and blocks until every
    /// unit is back or `grace` has passed on the system clock.
    ///
    /// # Errors
    ///
    /// [`DrainTimeout`] when `grace` passed first: what was still held, per source.
    pub fn drain_blocking(&self, grace: Duration) -> Result<(), DrainTimeout<S>> {
        let deadline = std::time::Instant::now().checked_add(grace);
        match crate::semaphore::block_until(self.inner.semaphore.drain(), deadline) {
            Some(()) => Ok(()),
            None => Err(DrainTimeout {
                held: self.held_by_source(),
            }),
        }
    }
}

/// The future of [`Gate::drain`].
#[must_use = "futures do nothing unless polled"]
pub struct GateDrain<'a, S, T: Timer, O> {
    gate: &'a Gate<S, T, O>,
    /// Pinned (structurally).
    drain: Drain<'a>,
    /// Pinned (structurally): the end of the grace period.
    sleep: T::Sleep,
}

impl<S: Source, T: Timer, O: Observer> Future for GateDrain<'_, S, T, O> {
    type Output = Result<(), DrainTimeout<S>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: structural pinning of `drain` and `sleep`: they are reached only
        // through these projections and never moved; `GateDrain` has no `Drop` impl
        // and is not `repr(packed)`.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: as above.
        if unsafe { Pin::new_unchecked(&mut this.drain) }
            .poll(cx)
            .is_ready()
        {
            return Poll::Ready(Ok(()));
        }
        // SAFETY: as above.
        if unsafe { Pin::new_unchecked(&mut this.sleep) }
            .poll(cx)
            .is_ready()
        {
            return Poll::Ready(Err(DrainTimeout {
                held: this.gate.held_by_source(),
            }));
        }
        Poll::Pending
    }
}

impl<S, T: Timer, O: Observer> fmt::Debug for GateDrain<'_, S, T, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateDrain")
            .field("in_use", &self.gate.in_use())
            .finish_non_exhaustive()
    }
}

/// A [`Gate::drain`] whose grace period ended with units still held: what the
/// period cut short, per source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainTimeout<S> {
    held: Vec<(S, usize)>,
}

impl<S: Source> DrainTimeout<S> {
    /// Units still held per source when the grace period ended, in the order of
    /// `S::ALL`; sources holding nothing are left out.
    #[must_use]
    pub fn held(&self) -> &[(S, usize)] {
        &self.held
    }

    /// Units still held in all.
    #[must_use]
    pub fn units(&self) -> usize {
        self.held.iter().map(|&(_, units)| units).sum()
    }
}

impl<S: Source> fmt::Display for DrainTimeout<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let units = self.units();
        let plural = if units == 1 { "" } else { "s" };
        write!(f, "drain cut short with {units} unit{plural} still held")?;
        for (i, (source, units)) in self.held.iter().enumerate() {
            let sep = if i == 0 { ": " } else { ", " };
            write!(f, "{sep}{} {units}", source.label())?;
        }
        Ok(())
    }
}

impl<S: Source + fmt::Debug> core::error::Error for DrainTimeout<S> {}
