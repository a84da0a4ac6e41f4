//! The clock a [`Gate`](crate::Gate) waits on, supplied by a runtime adapter.
//!
//! The core knows no runtime: an adapter (Tokio, smol/async-io, async-std) or a
//! test's manual clock implements [`Timer`].

use core::future::Future;
use core::time::Duration;

/// A monotonic clock with sleeps.
///
/// Times are [`Duration`]s since an origin of the timer's choosing (fixed for the
/// timer's life), so the core needs no `Instant` type.
pub trait Timer: Send + Sync + 'static {
    /// The future of [`sleep_until`](Self::sleep_until).
    type Sleep: Future<Output = ()> + Send;

    /// Time elapsed since the timer's origin. Never decreases.
    fn now(&self) -> Duration;

    /// A future that completes once [`now`](Self::now) `>= deadline` (at once if it
    /// already is).
    fn sleep_until(&self, deadline: Duration) -> Self::Sleep;
}
