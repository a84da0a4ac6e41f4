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

    /// Runs `task` in the background on the timer's runtime, if it can, and
    /// says whether it did. A gate with an overload target gives it
    /// [`Gate::watch_overload`](crate::Gate::watch_overload) when built, so an
    /// idle gate leaves the overloaded state with nobody spawning anything.
    /// The default spawns nothing.
    #[cfg(feature = "alloc")]
    fn spawn(&self, task: alloc::boxed::Box<dyn Future<Output = ()> + Send + 'static>) -> bool {
        let _ = task;
        false
    }
}

/// A [`Timer`] for a gate used only from threads: its clock is
/// [`std::time::Instant`], and it cannot sleep.
///
/// The blocking calls ([`Gate::acquire_blocking`](crate::Gate::acquire_blocking),
/// [`acquire_blocking_until`](crate::Gate::acquire_blocking_until),
/// [`drain_blocking`](crate::Gate::drain_blocking)) park the thread themselves and
/// use the timer only for its clock (hold times, the overload rule). An async
/// acquire on such a gate needs a runtime's timer, so its [`Sleep`](Timer::Sleep)
/// panics when polled before its deadline, at the first acquire that parks,
/// rather than leave a wait without an end.
///
/// # Examples
///
/// ```
/// use admit::{Gate, ThreadTimer};
///
/// admit::sources! { enum Job { Export => "export" } }
///
/// let gate = Gate::builder(2).timer(ThreadTimer::new()).build()?;
/// let worker = {
///     let gate = gate.clone();
///     std::thread::spawn(move || gate.acquire_blocking(2, Job::Export).map(drop))
/// };
/// # let _ = worker.join().unwrap();
/// # Ok::<(), admit::ConfigError>(())
/// ```
#[cfg(feature = "std")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThreadTimer {
    origin: std::time::Instant,
}

#[cfg(feature = "std")]
impl ThreadTimer {
    /// A timer whose origin is now.
    #[must_use]
    pub fn new() -> Self {
        Self {
            origin: std::time::Instant::now(),
        }
    }
}

#[cfg(feature = "std")]
impl Default for ThreadTimer {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "std")]
impl Timer for ThreadTimer {
    type Sleep = ThreadSleep;

    fn now(&self) -> Duration {
        self.origin.elapsed()
    }

    fn sleep_until(&self, deadline: Duration) -> ThreadSleep {
        ThreadSleep {
            at: self.origin.checked_add(deadline),
        }
    }
}

/// The [`Timer::Sleep`] of a [`ThreadTimer`]: ready once its deadline has
/// passed.
///
/// # Panics
///
/// When polled before its deadline: a `ThreadTimer` cannot wake a task.
#[cfg(feature = "std")]
#[derive(Debug)]
#[must_use = "futures do nothing unless polled"]
pub struct ThreadSleep {
    /// `None`: beyond what an `Instant` can say, never.
    at: Option<std::time::Instant>,
}

#[cfg(feature = "std")]
impl Future for ThreadSleep {
    type Output = ();

    fn poll(
        self: core::pin::Pin<&mut Self>,
        _: &mut core::task::Context<'_>,
    ) -> core::task::Poll<()> {
        match self.at {
            Some(at) if std::time::Instant::now() >= at => core::task::Poll::Ready(()),
            _ => panic!(
                "admit::ThreadTimer cannot sleep in an async task: it is for a gate's \
                 blocking calls (acquire_blocking); give a gate awaited from async code a \
                 runtime adapter's timer (admit_tokio::gate, admit_smol::gate)"
            ),
        }
    }
}
