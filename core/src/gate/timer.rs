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
/// [`std::time::Instant`], and it cannot sleep in an async task.
///
/// The blocking calls ([`Gate::acquire_blocking`](crate::Gate::acquire_blocking),
/// [`acquire_blocking_until`](crate::Gate::acquire_blocking_until),
/// [`drain_blocking`](crate::Gate::drain_blocking)) park the thread themselves and
/// use the timer only for its clock (hold times, the overload rule). An async
/// acquire on such a gate needs a runtime's timer, so its [`Sleep`](Timer::Sleep)
/// panics when polled before its deadline, at the first acquire that parks,
/// rather than leave a wait without an end.
///
/// Its [`spawn`](Timer::spawn) runs each task on a thread of its own, which
/// parks until the task's sleeps are due or it is woken, and ends with the
/// task: the gate's overload watch and a lease table's driver run there.
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

    /// On a new thread, `admit-timer`; `false` if the thread cannot be made.
    #[cfg(feature = "alloc")]
    fn spawn(&self, task: alloc::boxed::Box<dyn Future<Output = ()> + Send + 'static>) -> bool {
        std::thread::Builder::new()
            .name("admit-timer".into())
            .spawn(move || run_on_this_thread(alloc::boxed::Box::into_pin(task)))
            .is_ok()
    }
}

#[cfg(feature = "std")]
std::thread_local! {
    /// On a [`ThreadTimer`]'s own thread: `Some`, holding the soonest deadline
    /// a [`ThreadSleep`] polled there waits for (`None`: none yet).
    static TIMER_THREAD_WAKE: core::cell::Cell<Option<Option<std::time::Instant>>> =
        const { core::cell::Cell::new(None) };
}

/// Runs `task` to completion on this thread, parking it until the soonest
/// sleep the task waits for is due or the task is woken.
#[cfg(feature = "std")]
fn run_on_this_thread(mut task: core::pin::Pin<alloc::boxed::Box<dyn Future<Output = ()> + Send>>) {
    let thread = crate::semaphore::ThreadWaker::new();
    loop {
        TIMER_THREAD_WAKE.set(Some(None));
        if thread.poll(task.as_mut()).is_ready() {
            TIMER_THREAD_WAKE.set(None);
            return;
        }
        // A deadline already past: poll again at once.
        let _ = thread.park(TIMER_THREAD_WAKE.get().flatten());
    }
}

/// The [`Timer::Sleep`] of a [`ThreadTimer`]: ready once its deadline has
/// passed.
///
/// # Panics
///
/// When polled before its deadline by an async task other than one the
/// `ThreadTimer` [spawned](Timer::spawn): nothing else would wake it.
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
        if let Some(at) = self.at {
            if std::time::Instant::now() >= at {
                return core::task::Poll::Ready(());
            }
        }
        if let Some(soonest) = TIMER_THREAD_WAKE.get() {
            let soonest = match (soonest, self.at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            TIMER_THREAD_WAKE.set(Some(soonest));
            return core::task::Poll::Pending;
        }
        panic!(
            "admit::ThreadTimer cannot sleep in an async task: it is for a gate's \
             blocking calls (acquire_blocking); give a gate awaited from async code a \
             runtime adapter's timer (admit_tokio::gate, admit_smol::gate)"
        );
    }
}
