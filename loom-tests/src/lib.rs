//! Loom models of `admit` live in `tests/`; this crate holds only the helpers they
//! share. Build and run with `RUSTFLAGS="--cfg admit_loom"` (see `ci/loom.sh`);
//! without that cfg every model compiles to nothing.
//!
//! # Shape of a model
//!
//! Two or three loom threads, each running a small actor (`loom::future::block_on`
//! or a hand-driven `poll_once`), one property per file, and the resting
//! invariant (`assert_idle`) checked once every thread is joined.
//!
//! Enqueueing, re-polling a parked future and dropping one take the semaphore's
//! short queue lock by spinning (`lock()` in `semaphore.rs`); releases and `close`
//! never spin. A model never has **two threads that may spin on that lock while a
//! third may hold it**: loom can then preempt the holder and let the two spinners
//! yield to each other for ever (a yield is a free scheduling choice), an
//! unbounded schedule it reports as "exceeded maximum number of branches". A real
//! scheduler runs the holder again; loom's bounded search cannot. So in a
//! three-thread model at most one thread polls or drops acquire futures that may
//! park, and where two threads must, the model has only those two.
#![cfg(admit_loom)]

extern crate alloc;

use alloc::sync::Arc;
use alloc::task::Wake;
use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::{Context, Poll, Waker};

use admit::Semaphore;

/// Polls `future` exactly once with `waker`, as an executor would, and returns the
/// outcome without waiting.
pub fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(waker))
}

/// A waker that only counts how often it was woken, for a thread that polls a
/// future by hand instead of blocking on it.
///
/// The count is a plain `core` atomic, not a loom one: it is read only after the
/// threads that may wake it were joined, and keeping it out of loom's model keeps
/// the explored state space to the semaphore's own accesses.
#[derive(Debug, Default)]
pub struct CountingWaker {
    wakes: AtomicUsize,
}

impl CountingWaker {
    /// A fresh waker and the handle to read its count from.
    #[must_use]
    pub fn new() -> (Waker, Arc<CountingWaker>) {
        let counter = Arc::new(CountingWaker::default());
        (Waker::from(counter.clone()), counter)
    }

    /// How many times the waker (or a clone) was woken.
    #[must_use]
    pub fn wakes(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}

/// Data guarded by the semaphore, as a lock guards it: touched only by a task that
/// holds units that exclude every other holder. It is a loom cell, so loom reports
/// any two accesses the semaphore's grant and release do not order
/// (happens-before) as a data race: the check that a new holder sees what the
/// previous one wrote, which a counter made of `SeqCst` atomics would hide by
/// synchronising the holders itself.
#[derive(Debug)]
pub struct Guarded(loom::cell::UnsafeCell<usize>);

// SAFETY: every access goes through loom's `with_mut`, which panics before the
// access unless it is ordered after every other one; and loom runs the model's
// threads on one OS thread, one at a time.
unsafe impl Sync for Guarded {}

impl Guarded {
    /// A cell holding 0.
    #[must_use]
    pub fn new() -> Self {
        Self(loom::cell::UnsafeCell::new(0))
    }

    /// Adds one and returns the new value. Call it only while holding units that
    /// exclude every other holder; loom fails the model if that exclusion does not
    /// order this access after the previous one.
    pub fn bump(&self) -> usize {
        self.0.with_mut(|value| {
            // SAFETY: `with_mut` checked the access is ordered after every other
            // (see the `Sync` impl), so nothing else touches the value now.
            unsafe {
                *value += 1;
                *value
            }
        })
    }
}

impl Default for Guarded {
    fn default() -> Self {
        Self::new()
    }
}

/// The semaphore's resting invariant, checked at the end of every model once all
/// threads are joined and every permit is dropped: all units are back and nobody
/// is parked.
#[track_caller]
pub fn assert_idle(semaphore: &Semaphore) {
    assert_eq!(
        semaphore.available(),
        semaphore.capacity(),
        "units lost or duplicated: {semaphore:?}"
    );
    assert_eq!(semaphore.waiters(), 0, "a waiter stranded: {semaphore:?}");
}
