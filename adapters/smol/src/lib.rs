#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

use admit::{Capacity, GateBuilder, Timer};

/// A gate on async-io's clock (smol): [`admit::Gate`] with its timer set to [`SmolTimer`], so that
/// application state names the two parameters that vary, the source type and the
/// observer: `admit_smol::Gate<Route, MetricsObserver>` for a gate built with
/// `.observer(MetricsObserver::new(..))`, `admit_smol::Gate<Route, ()>` for one without.
///
/// The observer has no default on purpose: with one, `Gate<Route>` would silently
/// name a gate that observes nothing, and state holding the gate the application
/// built (with metrics) would fail to type-check far from the cause.
pub type Gate<S, O> = admit::Gate<S, SmolTimer, O>;

/// [`admit::Gate::builder`] with a [`SmolTimer`] (origin: now) already set: configure the rest
/// and [`build`](GateBuilder::build).
///
/// `S` is the gate's [`Source`](admit::Source) type, usually inferred from the gate's
/// use or given as `gate::<Route>(..)`.
///
/// A capacity from [`Capacity::from_memory_budget`] gets the memory watch (with
/// feature `spawn`, which runs it on smol's global executor): in a process with a
/// cgroup memory limit the gate follows the working set against it
/// ([`admit::MemoryWatch`]); `without_memory_watch` turns it off.
pub fn gate<S>(capacity: impl Into<Capacity>) -> GateBuilder<S, SmolTimer, ()> {
    admit::Gate::builder(capacity).timer(SmolTimer::new())
}

/// A [`Timer`] whose clock is [`std::time::Instant`] and whose sleeps are
/// [`async_io::Timer`]s.
///
/// Its origin is the `Instant` at construction; [`Timer::now`] is the time elapsed
/// since then. async-io drives its timers from its own reactor (on the thread that
/// runs `async_io::block_on`, or else its "async-io" thread), so the sleeps work on
/// any executor: smol's, `futures_lite::future::block_on`, or another.
///
/// # Examples
///
/// ```
/// use admit::Timer;
/// use admit_smol::SmolTimer;
/// use std::time::Duration;
///
/// smol::block_on(async {
///     let timer = SmolTimer::new(); // origin: now
///     timer.sleep_until(Duration::from_millis(5)).await;
///     assert!(timer.now() >= Duration::from_millis(5));
/// });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmolTimer {
    origin: Instant,
}

impl SmolTimer {
    /// A timer whose origin is [`Instant::now()`].
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

impl Default for SmolTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer for SmolTimer {
    type Sleep = Sleep;

    fn now(&self) -> Duration {
        Instant::now().saturating_duration_since(self.origin)
    }

    fn sleep_until(&self, deadline: Duration) -> Sleep {
        let timer = match self.origin.checked_add(deadline) {
            Some(at) => async_io::Timer::at(at),
            // Beyond what `Instant` can represent: never fires.
            None => async_io::Timer::never(),
        };
        Sleep { timer, done: false }
    }

    /// On smol's global executor, with the `spawn` feature.
    fn spawn(&self, task: Box<dyn core::future::Future<Output = ()> + Send + 'static>) -> bool {
        #[cfg(feature = "spawn")]
        {
            smol::spawn(Box::into_pin(task)).detach();
            true
        }
        #[cfg(not(feature = "spawn"))]
        {
            drop(task);
            false
        }
    }
}

/// The future of [`SmolTimer::sleep_until`]: completes once [`Timer::now`] has
/// reached the deadline, at once if it already had.
///
/// It is fused: polling it again after it completed returns `Ready` again.
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct Sleep {
    timer: async_io::Timer,
    done: bool,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.done {
            return Poll::Ready(());
        }
        // `async_io::Timer` completes only once `Instant::now() >= origin + deadline`.
        match Pin::new(&mut self.timer).poll(cx) {
            Poll::Ready(_) => {
                self.done = true;
                Poll::Ready(())
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

/// Spawns, on smol's global executor ([`smol::spawn`]), a task that keeps `gate`'s
/// capacity in step with the process's memory limit:
/// [`admit::Gate::follow_memory_limit`]. Every `interval` (on the gate's clock) it
/// reads the memory limit of the process's cgroup ([`admit::process_memory_limit`])
/// and resizes the gate to
/// `budget(limit)`, as [`admit::Gate::resize`] does: a memory-derived capacity is
/// floored at the gate's `max_units`; growing serves parked requests at once,
/// shrinking revokes no held permit. A read that finds no limit, or a capacity
/// `resize` refuses, leaves the gate as it is. The observer hears each change
/// ([`on_capacity`](admit::Observer::on_capacity): `admit-metrics` moves its
/// `capacity_units` gauge).
///
/// Opt-in: nothing follows the limit unless this is called. The task ends by itself
/// at the first tick after the gate is closed (e.g. by [`admit::Gate::drain`]).
///
/// **Keep the returned task, or [`detach`](smol::Task::detach) it: dropping a smol
/// task cancels it** (unlike a Tokio `JoinHandle`).
///
/// On an [`Executor`](smol::Executor) of your own, spawn the same future there:
/// `ex.spawn(gate.follow_memory_limit(interval, budget))`; to follow a limit from
/// elsewhere (a configuration service, a test), spawn
/// [`admit::Gate::follow_limit`] with its own reader.
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
/// smol::block_on(async {
///     // Half of the container's limit for session buffers (1 GiB without a limit).
///     let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, SESSION_BUFFER);
///     let limit = admit::process_memory_limit().unwrap_or(2 << 30);
///     let gate = admit_smol::gate::<Route>(budget(limit)).max_units(2).build()?;
///
///     // Re-read the limit every 30 s and resize from it, for the life of the process.
///     admit_smol::spawn_memory_follower(&gate, Duration::from_secs(30), budget).detach();
///
///     // At shutdown: the drain closes the gate, and the follower ends at its next tick.
///     let _ = gate.drain(Duration::from_secs(10)).await;
///     Ok::<(), admit::ConfigError>(())
/// })?;
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[cfg(feature = "spawn")]
pub fn spawn_memory_follower<S, O, B>(
    gate: &Gate<S, O>,
    interval: Duration,
    budget: B,
) -> smol::Task<()>
where
    S: admit::Source,
    O: admit::Observer,
    B: Fn(u64) -> Capacity + Send + 'static,
{
    smol::spawn(gate.follow_memory_limit(interval, budget))
}

/// A lease table on smol's clock: [`admit::Leases`] with its timer set to
/// [`SmolTimer`].
pub type Leases<K, V, S, O> = admit::Leases<K, V, S, SmolTimer, O>;

/// A lease table on `gate` whose leases end after `idle_limit` idle, with its
/// expiry driven by a task detached on smol's global executor
/// ([`smol::spawn`]): an idle lease ends at its deadline with no request
/// arriving. The task ends once every handle to the table is dropped. On an
/// [`Executor`](smol::Executor) of your own, build the table with
/// [`admit::Leases::with_driver`] and spawn its driver there. See
/// [`admit::Leases`].
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
/// smol::block_on(async {
///     let gate = admit_smol::gate::<Route>(4).build()?;
///     let uploads = admit_smol::leases(&gate, Duration::from_millis(50));
///
///     let permit = gate.try_acquire(1, Route::Upload).unwrap();
///     uploads.insert("3f9c".to_owned(), permit, Vec::<u8>::new()).unwrap();
///
///     // Its client went away: the session ends 50 ms after its last request.
///     while gate.in_use() != 0 {
///         async_io::Timer::after(Duration::from_millis(10)).await;
///     }
///     Ok::<(), admit::ConfigError>(())
/// })?;
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[cfg(feature = "spawn")]
pub fn leases<K, V, S, O>(gate: &Gate<S, O>, idle_limit: Duration) -> Leases<K, V, S, O>
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
    check::<SmolTimer>();
    check::<Sleep>();
    check::<Gate<Route, ()>>();
};
