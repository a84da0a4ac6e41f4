//! A [`Timer`](admit::Timer) for [`admit`] gates on async-std's runtime.
//!
//! ```
//! use std::time::Duration;
//! use admit::{GateError, Timer};
//!
//! admit::sources! {
//!     /// Where an upload session is opened.
//!     pub enum Route { NpmPublish => "npm_publish" }
//! }
//!
//! async_std::task::block_on(async {
//!     let gate = admit_async_std::gate(1)
//!         .wait_budget(Duration::from_millis(10))
//!         .build()?;
//!     let permit = gate.acquire(1, Route::NpmPublish).await.unwrap();
//!
//!     // The gate is full: the next caller waits the budget, then is shed.
//!     let parked_at = gate.timer().now();
//!     let err = gate.acquire(1, Route::NpmPublish).await.unwrap_err();
//!     assert!(matches!(err, GateError::Busy { .. }));
//!     assert!(gate.timer().now() >= parked_at + Duration::from_millis(10));
//!     drop(permit);
//!     Ok::<(), admit::ConfigError>(())
//! })?;
//! # Ok::<(), admit::ConfigError>(())
//! ```
//!
//! # async-std is discontinued
//!
//! async-std has been discontinued in favour of [smol](https://docs.rs/smol); new code
//! should use the `admit-smol` adapter. This crate stays for users who have not moved
//! yet.
//!
//! async-std's own `task::sleep` is built on `async_io::Timer`, and so is
//! [`admit_smol::SmolTimer`]: this crate re-exports that timer under the name
//! [`AsyncStdTimer`], so its sleeps are nameable, unboxed futures driven by the same
//! async-io reactor async-std's runtime runs. Moving to smol later changes only the
//! crate name.
//!
//! # Following the memory limit
//!
//! [`admit::Gate::follow_memory_limit`] is a plain `Send + 'static` future: spawn it
//! on async-std's runtime to keep the gate's capacity in step with the container's
//! memory limit (`admit-smol`'s `spawn_memory_follower` would put it on smol's
//! executor instead, so this crate does not re-export it):
//!
//! ```
//! use std::time::Duration;
//! use admit::Capacity;
//!
//! admit::sources! { pub enum Route { Upload => "upload" } }
//!
//! async_std::task::block_on(async {
//!     let budget = |limit: u64| Capacity::from_memory_budget(limit / 2, 8 << 20);
//!     let gate = admit_async_std::gate::<Route>(4).build()?;
//!     // Re-read the limit every 30 s (a dropped async-std handle detaches the task).
//!     async_std::task::spawn(gate.follow_memory_limit(Duration::from_secs(30), budget));
//!     // At shutdown: the drain closes the gate; the follower ends at its next tick.
//!     let _ = gate.drain(Duration::from_secs(10)).await;
//!     Ok::<(), admit::ConfigError>(())
//! })?;
//! # Ok::<(), admit::ConfigError>(())
//! ```

use admit::{Capacity, GateBuilder};

/// The [`admit::Timer`] for async-std: [`admit_smol::SmolTimer`], whose clock is
/// [`std::time::Instant`] and whose sleeps are the `async_io::Timer`s async-std
/// sleeps with.
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
pub type AsyncStdTimer = admit_smol::SmolTimer;

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
pub fn gate<S>(capacity: impl Into<Capacity>) -> GateBuilder<S, AsyncStdTimer, ()> {
    admit_smol::gate(capacity)
}
