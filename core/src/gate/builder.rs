//! [`GateBuilder`]: validates a gate's configuration before anything is built.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt;
use core::marker::PhantomData;
use core::time::Duration;

use super::inner::{budget_units_of, Inner};
use super::memory::{self, MemoryBound};
use super::overload::Overload;
use super::pace::Pace;
use super::pressure::ShedClock;
use crate::loom::sync::AtomicUsize;
use crate::{
    Capacity, ConfigError, Gate, MemoryWatch, Observer, Semaphore, Source, StartEvent, Timer,
};

/// The longest wait budget [`GateBuilder::build`] accepts: one hour.
pub const MAX_WAIT_BUDGET: Duration = Duration::from_secs(3600);

/// The shortest wait budget [`GateBuilder::build`] accepts: one millisecond, the
/// resolution of Tokio's timer (the coarsest an adapter brings), which would
/// silently round a shorter one up.
pub const MIN_WAIT_BUDGET: Duration = Duration::from_millis(1);

impl<S> Gate<S, NoTimer, ()> {
    /// Starts building a gate of `capacity` units: a `usize`, or a
    /// [`Capacity::from_memory_budget`].
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::{Capacity, Gate};
    /// # struct MyTimer;
    /// # impl admit::Timer for MyTimer {
    /// #     type Sleep = core::future::Pending<()>;
    /// #     fn now(&self) -> core::time::Duration { core::time::Duration::ZERO }
    /// #     fn sleep_until(&self, _: core::time::Duration) -> Self::Sleep { core::future::pending() }
    /// # }
    /// admit::sources! { enum Route { Upload => "upload" } }
    ///
    /// // 256 MiB for 64 MiB buffers: 4 units.
    /// let gate = Gate::builder(Capacity::from_memory_budget(256 << 20, 64 << 20))
    ///     .timer(MyTimer)
    ///     .build()?;
    /// # let _ = gate.acquire(1, Route::Upload);
    /// assert_eq!(gate.capacity(), 4);
    /// # Ok::<(), admit::ConfigError>(())
    /// ```
    ///
    /// A timer is required: without one, `build` does not exist.
    ///
    /// ```compile_fail
    /// admit::sources! { enum Route { Upload => "upload" } }
    /// let gate = admit::Gate::<Route, _, _>::builder(4).build();
    /// ```
    pub fn builder(capacity: impl Into<Capacity>) -> GateBuilder<S, NoTimer, ()> {
        GateBuilder {
            capacity: capacity.into(),
            wait_budget: GateBuilder::<S, NoTimer, ()>::DEFAULT_WAIT_BUDGET,
            max_units: 1,
            max_waiters: None,
            overload_target: None,
            retry_after: (
                GateBuilder::<S, NoTimer, ()>::DEFAULT_RETRY_AFTER_MIN,
                GateBuilder::<S, NoTimer, ()>::DEFAULT_RETRY_AFTER_MAX,
            ),
            memory_watch: WatchChoice::Default,
            timer: NoTimer(()),
            observer: (),
            _source: PhantomData,
        }
    }
}

/// Builder state: no [`Timer`] chosen yet. [`GateBuilder::build`] exists only once
/// [`GateBuilder::timer`] has replaced it.
#[derive(Debug)]
pub struct NoTimer(());

/// Configures a [`Gate`]; from [`Gate::builder`].
///
/// [`timer`](Self::timer) is required; everything else has a default.
#[must_use = "a builder does nothing until `build` is called"]
pub struct GateBuilder<S, T, O> {
    capacity: Capacity,
    wait_budget: Duration,
    max_units: usize,
    max_waiters: Option<usize>,
    overload_target: Option<Duration>,
    retry_after: (Duration, Duration),
    memory_watch: WatchChoice,
    timer: T,
    observer: O,
    _source: PhantomData<fn(S) -> S>,
}

/// Whether a gate gets a memory watch.
#[derive(Debug)]
enum WatchChoice {
    /// One if the capacity comes from a memory budget (with `std`).
    Default,
    Off,
    On(MemoryWatch),
}

impl<S, T, O> GateBuilder<S, T, O> {
    /// The default wait budget: 5 s.
    pub const DEFAULT_WAIT_BUDGET: Duration = Duration::from_secs(5);
    /// The default lower `Retry-After` bound: 1 s.
    pub const DEFAULT_RETRY_AFTER_MIN: Duration = Duration::from_secs(1);
    /// The default upper `Retry-After` bound: 60 s.
    pub const DEFAULT_RETRY_AFTER_MAX: Duration = Duration::from_secs(60);

    /// The longest an acquire parks before it is shed (default 5 s). Must be at
    /// least [`MIN_WAIT_BUDGET`] (a millisecond) and at most [`MAX_WAIT_BUDGET`]
    /// (an hour).
    pub fn wait_budget(mut self, budget: Duration) -> Self {
        self.wait_budget = budget;
        self
    }

    /// The largest request any call site makes (default 1). An explicit capacity
    /// below it is rejected; a memory-derived one is raised to it; a resize never
    /// goes below it. A request above it is refused at once with
    /// [`GateError::ExceedsMaxUnits`](crate::GateError::ExceedsMaxUnits), even
    /// while the capacity would fit it: it could fail after the next resize.
    ///
    /// With an [`overload_target`](Self::overload_target), smaller requests are
    /// capped as the largest would be (see [Overload](Gate#overload)): set it to
    /// the largest request made, not above, or every smaller one is capped sooner
    /// than it need be.
    pub fn max_units(mut self, max_units: usize) -> Self {
        self.max_units = max_units;
        self
    }

    /// Sheds at once, without parking, a request that would park while
    /// `max_waiters` requests are already parked (default: no bound). The shed is a
    /// [`GateError::Busy`](crate::GateError::Busy) with its `Retry-After`, counted
    /// with [`ShedReason::QueueFull`](crate::ShedReason::QueueFull), so an operator
    /// can tell it from a wait-budget expiry. `0` never parks anyone.
    ///
    /// A parked request holds its connection and buffers for up to the wait budget;
    /// under a flood this bounds that memory (HAProxy's `maxqueue`, Envoy's
    /// `max_pending_requests`).
    pub fn max_waiters(mut self, max_waiters: usize) -> Self {
        self.max_waiters = Some(max_waiters);
        self
    }

    /// Turns on overload control (default: off): `target` is the standing wait
    /// the gate tolerates. Once the shortest wait over an interval stayed above
    /// it, the gate is overloaded, until two intervals in a row in which its queue
    /// was seen empty, and meanwhile caps every wait at twice the target (less a
    /// smaller request's share, see [`max_units`](Self::max_units)); with or
    /// without overload, a request that by the gate's estimate could not be
    /// admitted within the most it may wait is shed at arrival. See
    /// [Overload](Gate#overload). Must be more than zero and below the wait budget.
    ///
    /// Pick the wait a caller may spend queued when the gate is saturated for
    /// long (e.g. a tenth of the budget); docs/operator-guide.md says how.
    pub fn overload_target(mut self, target: Duration) -> Self {
        self.overload_target = Some(target);
        self
    }

    /// The bounds of the `Retry-After` a shed carries (default 1 s to 60 s); `min`
    /// must be more than zero and at most `max`. See
    /// [Retry-After](Gate#retry-after).
    pub fn retry_after_bounds(mut self, min: Duration, max: Duration) -> Self {
        self.retry_after = (min, max);
        self
    }

    /// Follows the process's memory as the kernel counts it: the gate lowers
    /// its capacity, and sheds the classes past their marks, as the working set
    /// nears the limit (see [`MemoryWatch`]). Its readings run on the timer's
    /// [`spawn`](Timer::spawn): with a timer that cannot spawn, `build` fails
    /// with [`ConfigError::MemoryWatchNeedsSpawn`].
    ///
    /// On by default (feature `std`) for a capacity from
    /// [`Capacity::from_memory_budget`], with that capacity's bytes per unit and
    /// the default marks, where the timer can spawn; a process without a cgroup
    /// memory limit then has no signal, and the gate keeps its arithmetic.
    /// [`without_memory_watch`](Self::without_memory_watch) turns it off.
    pub fn memory_watch(mut self, watch: MemoryWatch) -> Self {
        self.memory_watch = WatchChoice::On(watch);
        self
    }

    /// No memory watch, whatever the capacity: the gate keeps the capacity its
    /// budget's arithmetic gives.
    pub fn without_memory_watch(mut self) -> Self {
        self.memory_watch = WatchChoice::Off;
        self
    }

    /// The clock the gate waits on, from a runtime adapter. Required.
    pub fn timer<T2: Timer>(self, timer: T2) -> GateBuilder<S, T2, O> {
        GateBuilder {
            capacity: self.capacity,
            wait_budget: self.wait_budget,
            max_units: self.max_units,
            max_waiters: self.max_waiters,
            overload_target: self.overload_target,
            retry_after: self.retry_after,
            memory_watch: self.memory_watch,
            timer,
            observer: self.observer,
            _source: PhantomData,
        }
    }

    /// The hooks the gate reports to (default `()`: none).
    pub fn observer<O2: Observer>(self, observer: O2) -> GateBuilder<S, T, O2> {
        GateBuilder {
            capacity: self.capacity,
            wait_budget: self.wait_budget,
            max_units: self.max_units,
            max_waiters: self.max_waiters,
            overload_target: self.overload_target,
            retry_after: self.retry_after,
            memory_watch: self.memory_watch,
            timer: self.timer,
            observer,
            _source: PhantomData,
        }
    }

    /// The capacity the gate would get, after the `max_units` floor for a
    /// memory-derived one (before validation).
    #[must_use]
    pub fn resolved_capacity(&self) -> usize {
        self.capacity.floored(self.max_units)
    }

    fn validate(&self) -> Result<usize, ConfigError> {
        if self.max_units == 0 {
            return Err(ConfigError::ZeroMaxUnits);
        }
        let capacity = resolve_capacity(self.capacity, self.max_units)?;
        if self.wait_budget.is_zero() {
            return Err(ConfigError::ZeroWaitBudget);
        }
        if self.wait_budget < MIN_WAIT_BUDGET {
            return Err(ConfigError::WaitBudgetTooShort {
                budget: self.wait_budget,
            });
        }
        if self.wait_budget > MAX_WAIT_BUDGET {
            return Err(ConfigError::WaitBudgetTooLong {
                budget: self.wait_budget,
            });
        }
        let (min, max) = self.retry_after;
        if min.is_zero() || min > max {
            return Err(ConfigError::InvalidRetryAfter { min, max });
        }
        if let Some(target) = self.overload_target {
            if target.is_zero() || target >= self.wait_budget {
                return Err(ConfigError::InvalidOverloadTarget {
                    target,
                    budget: self.wait_budget,
                });
            }
        }
        Ok(capacity)
    }
}

impl<S: Source, T: Timer, O: Observer> GateBuilder<S, T, O> {
    /// Validates the configuration and builds the gate, then calls
    /// [`Observer::on_start`] with the capacity and every label of `S`.
    ///
    /// # Errors
    ///
    /// A [`ConfigError`], checked in this order: `max_units` 0
    /// ([`ZeroMaxUnits`](ConfigError::ZeroMaxUnits)); capacity 0, above
    /// [`Semaphore::MAX_UNITS`] or (explicit) below `max_units`; a zero wait
    /// budget, one under a millisecond or one over an hour; `Retry-After` bounds with `min` zero or above `max`; an
    /// overload target of zero or not below the wait budget.
    pub fn build(self) -> Result<Gate<S, T, O>, ConfigError> {
        let capacity = self.validate()?;
        let explicit_watch = matches!(self.memory_watch, WatchChoice::On(_));
        let watch = match self.memory_watch {
            WatchChoice::Off => None,
            WatchChoice::On(watch) => Some(watch),
            #[cfg(feature = "std")]
            WatchChoice::Default => self.capacity.bytes_per_unit().map(MemoryWatch::new),
            #[cfg(not(feature = "std"))]
            WatchChoice::Default => None,
        };
        let inner = Arc::new(Inner {
            semaphore: Arc::new(Semaphore::with_shedding(capacity)),
            timer: self.timer,
            observer: self.observer,
            wait_budget: self.wait_budget,
            max_units: self.max_units,
            max_waiters: self.max_waiters,
            parked: AtomicUsize::new(0),
            queued_units: core::array::from_fn(|_| AtomicUsize::new(0)),
            held: S::ALL.iter().map(|_| AtomicUsize::new(0)).collect(),
            pace: Pace::new(),
            overload: self.overload_target.map(Overload::new),
            retry_after_bounds: self.retry_after,
            budget_units: AtomicUsize::new(budget_units_of(self.capacity)),
            shed_clock: ShedClock::new(),
            configured: AtomicUsize::new(capacity),
            memory: watch.as_ref().map(|_| MemoryBound::new()),
        });
        let labels: Vec<&'static str> = S::ALL.iter().map(|s| s.label()).collect();
        let mut start = StartEvent::new(capacity, &labels);
        if let Some(target) = self.overload_target {
            start = start.with_overload_target(target);
        }
        if self.capacity.is_memory_derived() {
            start = start.with_budget_units(self.capacity.units());
        }
        inner.observer.on_start(&start);
        let gate = Gate {
            inner,
            _source: PhantomData,
        };
        if gate.inner.overload.is_some() {
            gate.inner
                .timer
                .spawn(alloc::boxed::Box::new(gate.watch_overload()));
        }
        if let Some(watch) = watch {
            let task = alloc::boxed::Box::new(memory::watch(&gate.inner, watch));
            if !gate.inner.timer.spawn(task) && explicit_watch {
                return Err(ConfigError::MemoryWatchNeedsSpawn);
            }
        }
        Ok(gate)
    }
}

/// The capacity a gate gets from `capacity`: a memory-derived one floored at
/// `max_units`, an explicit one checked against it; either within
/// [`Semaphore::MAX_UNITS`] and above zero.
pub(super) fn resolve_capacity(capacity: Capacity, max_units: usize) -> Result<usize, ConfigError> {
    let capacity = capacity.floored(max_units);
    if capacity == 0 {
        return Err(ConfigError::ZeroCapacity);
    }
    if capacity > Semaphore::MAX_UNITS {
        return Err(ConfigError::CapacityTooLarge { capacity });
    }
    if capacity < max_units {
        return Err(ConfigError::CapacityBelowMaxUnits {
            capacity,
            max_units,
        });
    }
    Ok(capacity)
}

impl<S, T, O> fmt::Debug for GateBuilder<S, T, O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GateBuilder")
            .field("capacity", &self.capacity)
            .field("wait_budget", &self.wait_budget)
            .field("max_units", &self.max_units)
            .field("max_waiters", &self.max_waiters)
            .field("overload_target", &self.overload_target)
            .field("retry_after", &self.retry_after)
            .field("memory_watch", &self.memory_watch)
            .finish_non_exhaustive()
    }
}
