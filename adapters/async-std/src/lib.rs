#![doc = include_str!("../README.md")]

use admit::{Capacity, GateBuilder};

/// The [`admit::Timer`] for async-std: its clock is [`std::time::Instant`], its
/// sleeps are the `async_io::Timer`s async-std sleeps with (those of
/// [`admit_smol::SmolTimer`]), and it spawns on async-std's executor, so a gate
/// with an overload target leaves the overloaded state once idle
/// ([`admit::Gate::watch_overload`]) with nobody spawning anything.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit::Timer;
/// use admit_async_std::AsyncStdTimer;
///
/// async_std::task::block_on(async {
///     let timer = AsyncStdTimer::new(); // origin: now
///     timer.sleep_until(Duration::from_millis(1)).await;
///     assert!(timer.now() >= Duration::from_millis(1));
/// });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AsyncStdTimer(admit_smol::SmolTimer);

impl AsyncStdTimer {
    /// A timer whose origin is [`Instant::now()`](std::time::Instant::now).
    #[must_use]
    pub fn new() -> Self {
        Self(admit_smol::SmolTimer::new())
    }

    /// A timer whose origin is `origin`.
    #[must_use]
    pub const fn with_origin(origin: std::time::Instant) -> Self {
        Self(admit_smol::SmolTimer::with_origin(origin))
    }

    /// The instant [`Timer::now`](admit::Timer::now) counts from.
    #[must_use]
    pub const fn origin(&self) -> std::time::Instant {
        self.0.origin()
    }
}

impl admit::Timer for AsyncStdTimer {
    type Sleep = Sleep;

    fn now(&self) -> core::time::Duration {
        self.0.now()
    }

    fn sleep_until(&self, deadline: core::time::Duration) -> Sleep {
        self.0.sleep_until(deadline)
    }

    /// On async-std's executor ([`async_std::task::spawn`]).
    fn spawn(&self, task: Box<dyn core::future::Future<Output = ()> + Send + 'static>) -> bool {
        drop(async_std::task::spawn(Box::into_pin(task)));
        true
    }
}

/// The future of [`AsyncStdTimer`]'s `sleep_until`.
pub use admit_smol::Sleep;

/// A gate on async-std (async-io's clock): [`admit::Gate`] with its timer set to [`AsyncStdTimer`], so that
/// application state names the two parameters that vary, the source type and the
/// observer: `admit_async_std::Gate<Route, MetricsObserver>` for a gate built with
/// `.observer(MetricsObserver::new(..))`, `admit_async_std::Gate<Route, ()>` for one without.
///
/// The observer has no default on purpose: with one, `Gate<Route>` would silently
/// name a gate that observes nothing, and state holding the gate the application
/// built (with metrics) would fail to type-check far from the cause.
pub type Gate<S, O> = admit::Gate<S, AsyncStdTimer, O>;

/// [`admit::Gate::builder`] with an [`AsyncStdTimer`] (origin: now) already set:
/// configure the rest and [`build`](GateBuilder::build).
///
/// A capacity from [`Capacity::from_memory_budget`] gets the memory watch, spawned
/// on async-std: in a process with a cgroup memory limit the gate follows the
/// working set against it ([`admit::MemoryWatch`]); `without_memory_watch` turns it
/// off.
pub fn gate<S>(capacity: impl Into<Capacity>) -> GateBuilder<S, AsyncStdTimer, ()> {
    admit::Gate::builder(capacity).timer(AsyncStdTimer::new())
}

/// A lease table on async-std's clock: [`admit::Leases`] with its timer set to
/// [`AsyncStdTimer`].
pub type Leases<K, V, S, O> = admit::Leases<K, V, S, AsyncStdTimer, O>;

/// A lease table on `gate` whose leases end after `idle_limit` idle, with its
/// expiry driven by a task spawned on async-std's executor
/// ([`async_std::task::spawn`]): an idle lease ends at its deadline with no
/// request arriving. The task ends once every handle to the table is dropped.
/// See [`admit::Leases`].
///
/// # Panics
///
/// If `idle_limit` is zero.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
///
/// admit::sources! { pub enum Route { Upload => "upload" } }
///
/// # #[async_std::main]
/// # async fn main() -> Result<(), admit::ConfigError> {
/// let gate = admit_async_std::gate::<Route>(4).build()?;
/// let uploads = admit_async_std::leases(&gate, Duration::from_millis(50));
///
/// let permit = gate.try_acquire(1, Route::Upload).unwrap();
/// uploads.insert("3f9c".to_owned(), permit, Vec::<u8>::new()).unwrap();
///
/// // Its client went away: the session ends 50 ms after its last request.
/// while gate.in_use() != 0 {
///     async_std::task::sleep(Duration::from_millis(10)).await;
/// }
/// # Ok(())
/// # }
/// ```
pub fn leases<K, V, S, O>(gate: &Gate<S, O>, idle_limit: core::time::Duration) -> Leases<K, V, S, O>
where
    K: core::hash::Hash + Eq + Clone + Send + 'static,
    V: Send + 'static,
    S: admit::Source,
    O: admit::Observer,
{
    admit::Leases::new(gate, idle_limit)
}

// Every public type is `Send + Sync`, checked at compile time.
const _: fn() = || {
    fn check<T: Send + Sync>() {}
    admit::sources! { enum Route { R => "r" } }
    check::<AsyncStdTimer>();
    check::<Sleep>();
    check::<Gate<Route, ()>>();
};
