//! A [`Timer`] for [`admit`] gates on async-std's runtime.
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
//! async-std's own `task::sleep` is built on [`async_io::Timer`]; this adapter uses
//! that type directly, so [`Timer::Sleep`] is a nameable, unboxed future driven by the
//! same async-io reactor that async-std's runtime runs. Moving to smol later changes
//! only the timer type.

use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};
use core::time::Duration;
use std::time::Instant;

use admit::{Capacity, Gate, GateBuilder, Timer};

/// [`Gate::builder`] with a [`AsyncStdTimer`] (origin: now) already set: configure the rest
/// and [`build`](GateBuilder::build).
///
/// `S` is the gate's [`Source`](admit::Source) type, usually inferred from the gate's
/// use or given as `gate::<Route>(..)`.
pub fn gate<S>(capacity: impl Into<Capacity>) -> GateBuilder<S, AsyncStdTimer, ()> {
    Gate::builder(capacity).timer(AsyncStdTimer::new())
}

/// A [`Timer`] whose clock is [`std::time::Instant`] and whose sleeps are the
/// [`async_io::Timer`]s async-std sleeps with.
///
/// Its origin is the `Instant` at construction; [`Timer::now`] is the time elapsed
/// since then.
///
/// # Examples
///
/// ```
/// use admit::Timer;
/// use admit_async_std::AsyncStdTimer;
/// use std::time::Duration;
///
/// async_std::task::block_on(async {
///     let timer = AsyncStdTimer::new(); // origin: now
///     timer.sleep_until(Duration::from_millis(5)).await;
///     assert!(timer.now() >= Duration::from_millis(5));
/// });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncStdTimer {
    origin: Instant,
}

impl AsyncStdTimer {
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

impl Default for AsyncStdTimer {
    fn default() -> Self {
        Self::new()
    }
}

impl Timer for AsyncStdTimer {
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
}

/// The future of [`AsyncStdTimer::sleep_until`]: completes once [`Timer::now`] has
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

/// Every public type is `Send + Sync`, checked at compile time.
#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<AsyncStdTimer>();
    check::<Sleep>();
}
