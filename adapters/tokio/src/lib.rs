#![doc = include_str!("../README.md")]

use core::time::Duration;

use admit::{Capacity, GateBuilder, Observer, Source, Timer};
use tokio::time::Instant;

/// A gate on Tokio's clock: [`admit::Gate`] with its timer set to [`TokioTimer`], so that
/// application state names the two parameters that vary, the source type and the
/// observer: `admit_tokio::Gate<Route, MetricsObserver>` for a gate built with
/// `.observer(MetricsObserver::new(..))`, `admit_tokio::Gate<Route, ()>` for one without.
///
/// The observer has no default on purpose: with one, `Gate<Route>` would silently
/// name a gate that observes nothing, and state holding the gate the application
/// built (with metrics) would fail to type-check far from the cause.
///
/// # Examples
///
/// ```
/// admit::sources! { pub enum Route { Upload => "upload" } }
///
/// /// What the handlers share.
/// struct AppState {
///     gate: admit_tokio::Gate<Route, ()>, // no observer, said out loud
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), admit::ConfigError> {
/// let state = AppState { gate: admit_tokio::gate(4).build()? };
/// assert_eq!(state.gate.capacity(), 4);
/// # Ok(())
/// # }
/// ```
pub type Gate<S, O> = admit::Gate<S, TokioTimer, O>;

/// [`admit::Gate::builder`] with a [`TokioTimer`] (origin: now) already set: configure the rest
/// and [`build`](GateBuilder::build).
///
/// `S` is the gate's [`Source`] type, usually inferred from the gate's
/// use or given as `gate::<Route>(..)`. Call it inside the runtime whose clock the
/// gate should follow (see [`TokioTimer`]).
///
/// A capacity from [`Capacity::from_memory_budget`] gets the memory watch, spawned
/// on this runtime: in a process with a cgroup memory limit the gate follows the
/// working set against it ([`admit::MemoryWatch`]);
/// [`without_memory_watch`](GateBuilder::without_memory_watch) turns it off.
///
/// # Panics
///
/// Outside a Tokio runtime: the gate's waits sleep on Tokio's timer, and would
/// panic at the first acquire that parks, far from the cause. Under smol or
/// async-std, use `admit_smol::gate` or `admit_async_std::gate`.
pub fn gate<S>(capacity: impl Into<Capacity>) -> GateBuilder<S, TokioTimer, ()> {
    assert!(
        tokio::runtime::Handle::try_current().is_ok(),
        "admit_tokio::gate called outside a Tokio runtime: its waits sleep on Tokio's \
         timer; build the gate inside the runtime (or use admit_smol::gate under smol)"
    );
    admit::Gate::builder(capacity).timer(TokioTimer::new())
}

/// A [`Timer`] whose clock is [`tokio::time::Instant`] and whose sleeps are
/// [`tokio::time::Sleep`].
///
/// Its origin is the `tokio::time::Instant` at construction; [`Timer::now`] is the
/// time elapsed since then. Under Tokio's `test-util` paused clock that is virtual
/// time, so a test can advance past a wait budget without waiting for it.
///
/// Construct it inside the runtime whose clock it should follow: outside a runtime,
/// `tokio::time::Instant::now()` reads the real clock.
///
/// # Examples
///
/// ```
/// use admit::Timer;
/// use admit_tokio::TokioTimer;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let timer = TokioTimer::new(); // origin: now
/// timer.sleep_until(Duration::from_secs(5)).await;
/// assert_eq!(timer.now(), Duration::from_secs(5)); // virtual time: exact
/// # }
/// ```
///
/// # Panics
///
/// The future returned by [`Timer::sleep_until`] panics when polled outside a Tokio
/// runtime with the time driver enabled, like every `tokio::time` sleep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TokioTimer {
    origin: Instant,
}

impl TokioTimer {
    /// A timer whose origin is [`tokio::time::Instant::now()`].
    #[must_use]
    pub fn new() -> Self {
        Self::with_origin(Instant::now())
    }

    /// A timer whose origin is `origin`.
    #[must_use]
    pub const fn with_origin(origin: Instant) -> Self {
        Self { origin }
    }

    /// The instant [`Timer::now`] counts from.
    #[must_use]
    pub const fn origin(&self) -> Instant {
        self.origin
    }
}

impl Default for TokioTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer for TokioTimer {
    type Sleep = tokio::time::Sleep;

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    fn sleep_until(&self, deadline: Duration) -> Self::Sleep {
        match self.origin.checked_add(deadline) {
            Some(at) => tokio::time::sleep_until(at),
            // Beyond what `Instant` can represent: Tokio clamps this to "far future".
            None => tokio::time::sleep(Duration::MAX),
        }
    }

    /// On the current runtime, if there is one.
    fn spawn(&self, task: Box<dyn core::future::Future<Output = ()> + Send + 'static>) -> bool {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return false;
        };
        drop(runtime.spawn(Box::into_pin(task)));
        true
    }
}

/// Spawns, on the current Tokio runtime, a task that keeps `gate`'s capacity in step
/// with the process's memory limit: [`admit::Gate::follow_memory_limit`]. Every
/// `interval` (on the gate's clock) it reads the memory limit of the
/// process's cgroup ([`admit::process_memory_limit`]) and resizes the gate to `budget(limit)`, as
/// [`admit::Gate::resize`] does: a memory-derived capacity is floored at the gate's
/// `max_units`; growing serves parked requests at once, shrinking revokes no held
/// permit. A read that finds no limit, or a capacity `resize` refuses, leaves the
/// gate as it is. The observer hears each change
/// ([`on_capacity`](admit::Observer::on_capacity): `admit-metrics` moves its
/// `capacity_units` gauge).
///
/// Opt-in: nothing follows the limit unless this is called. The task ends by itself
/// at the first tick after the gate is closed (e.g. by [`admit::Gate::drain`]); the
/// handle can also [`abort`](tokio::task::JoinHandle::abort) it. Dropping the
/// handle detaches the task, as for any Tokio task.
///
/// To follow a limit from elsewhere (a configuration service, a test), spawn
/// [`admit::Gate::follow_limit`] with its own reader.
///
/// # Panics
///
/// Outside a Tokio runtime, as [`tokio::spawn`]; and the task panics if the runtime
/// has no time driver.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit::Capacity;
///
/// admit::sources! { pub enum Route { Upload => "upload", Mirror => "mirror" } }
///
/// const SESSION_BUFFER: u64 = 8 << 20;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), admit::ConfigError> {
/// // Half of the container's limit for session buffers (1 GiB without a limit).
/// let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, SESSION_BUFFER);
/// let limit = admit::process_memory_limit().unwrap_or(2 << 30);
/// let gate = admit_tokio::gate::<Route>(budget(limit)).max_units(2).build()?;
///
/// // Re-read the limit every 30 s and resize from it.
/// let _follower = admit_tokio::spawn_memory_follower(&gate, Duration::from_secs(30), budget);
///
/// // At shutdown: the drain closes the gate, and the follower ends at its next tick.
/// let _ = gate.drain(Duration::from_secs(10)).await;
/// # Ok(())
/// # }
/// ```
pub fn spawn_memory_follower<S, O, B>(
    gate: &Gate<S, O>,
    interval: Duration,
    budget: B,
) -> tokio::task::JoinHandle<()>
where
    S: Source,
    O: Observer,
    B: Fn(u64) -> Capacity + Send + 'static,
{
    tokio::spawn(gate.follow_memory_limit(interval, budget))
}

/// A lease table on Tokio's clock: [`admit::Leases`] with its timer set to
/// [`TokioTimer`].
pub type Leases<K, V, S, O> = admit::Leases<K, V, S, TokioTimer, O>;

/// A lease table on `gate` whose leases end after `idle_limit` idle, with its
/// expiry driven by a task spawned on the current runtime ([`tokio::spawn`]):
/// an idle lease ends at its deadline with no request arriving. The task ends
/// once every handle to the table is dropped. See [`admit::Leases`].
///
/// # Panics
///
/// Outside a Tokio runtime, as [`tokio::spawn`]; if `idle_limit` is zero.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// admit::sources! { pub enum Route { Upload => "upload" } }
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), admit::ConfigError> {
/// let gate = admit_tokio::gate::<Route>(4).build()?;
/// let uploads = admit_tokio::leases(&gate, Duration::from_secs(30));
///
/// let permit = gate.try_acquire(1, Route::Upload).unwrap();
/// uploads.insert("3f9c".to_owned(), permit, Vec::<u8>::new()).unwrap();
///
/// // Its client went away: the session ends 30 s after its last request.
/// tokio::time::sleep(Duration::from_secs(31)).await;
/// assert_eq!(gate.in_use(), 0);
/// # Ok(())
/// # }
/// ```
pub fn leases<K, V, S, O>(gate: &Gate<S, O>, idle_limit: Duration) -> Leases<K, V, S, O>
where
    K: core::hash::Hash + Eq + Clone + Send + 'static,
    V: Send + 'static,
    S: Source,
    O: Observer,
{
    admit::Leases::new(gate, idle_limit)
}

// Every public type is `Send + Sync`, checked at compile time.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    admit::sources! { enum Route { R => "r" } }
    check::<TokioTimer>();
    check::<Gate<Route, ()>>();
};
