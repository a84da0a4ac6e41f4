//! What the loom models of `tests/` share. The models and what each checks are
//! listed in this crate's README.
//!
//! Built only with `RUSTFLAGS="--cfg admit_loom"` (`ci/loom.sh`); without it the
//! crate is empty, so `cargo test --workspace` does not build loom.
//!
//! # Shape of a model
//!
//! Two or three loom threads, each running a small actor (`loom::future::block_on`
//! or a hand-driven `poll_once`), one property per file, and the resting
//! invariant (`assert_idle`) checked once every thread is joined.
//!
//! Every model is also checked for leaks and double frees: with `alloc` the wait
//! queue's segments come from loom's tracked allocator, which fails a model whose
//! execution ends with one not freed (or freed twice).
//!
//! # Both builds
//!
//! A model that shares its semaphore with a thread through `Shared` and takes
//! its `'static` futures and permits from `acquire_shared` and
//! `try_acquire_shared` runs in both builds of admit: with `alloc` (an `Arc` and
//! the owned futures) and without (a semaphore leaked for the model, which has no
//! owned permits). `tests/models.rs` says which files run in which build.
//!
//! # Negative controls
//!
//! Each mechanism the wait queue relies on has a name in `Safeguard` (admit's
//! doc-hidden `__loom` module, there only under `--cfg admit_loom`); a negative
//! control runs a model with one switched off and expects loom to find the
//! failure (`without`). A control that stops failing means its model no longer
//! covers the mechanism.
#![cfg(admit_loom)]

use core::future::Future;
use core::pin::Pin;
use core::sync::atomic::{AtomicUsize, Ordering};
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::task::Wake;

pub use admit::__loom::Safeguard;
use admit::{Semaphore, TryAcquireError};

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
    if !semaphore.is_closed() {
        // Nobody waits, so nothing may refuse the fast path (a stale `QUEUED`).
        let all = semaphore.try_acquire(semaphore.capacity());
        assert!(
            all.is_ok(),
            "the fast path refused an idle semaphore: {semaphore:?}"
        );
    }
}

/// A semaphore the model's threads share, whose futures and permits may move to
/// another thread: with `alloc`, an `Arc`.
#[cfg(feature = "alloc")]
pub type Shared = Arc<Semaphore>;
/// A semaphore the model's threads share, whose futures and permits may move to
/// another thread: without `alloc` there are no owned permits, so one that lives
/// for ever (its memory is the model's only leak, and nothing in it is tracked:
/// this build's wait nodes live in the futures). Cloned as an `Arc` is.
#[cfg(not(feature = "alloc"))]
#[derive(Debug, Clone)]
pub struct Shared(&'static Semaphore);

#[cfg(not(feature = "alloc"))]
impl core::ops::Deref for Shared {
    type Target = Semaphore;

    fn deref(&self) -> &Semaphore {
        self.0
    }
}

/// A [`Shared`] semaphore.
#[must_use]
pub fn shared(semaphore: Semaphore) -> Shared {
    #[cfg(feature = "alloc")]
    return Arc::new(semaphore);
    #[cfg(not(feature = "alloc"))]
    return Shared(std::boxed::Box::leak(std::boxed::Box::new(semaphore)));
}

/// What [`acquire_shared`] returns.
#[cfg(feature = "alloc")]
pub type SharedAcquire = admit::AcquireOwned;
/// What [`acquire_shared`] returns.
#[cfg(not(feature = "alloc"))]
pub type SharedAcquire = admit::Acquire<'static>;

/// What a [`SharedAcquire`] and [`try_acquire_shared`] grant.
#[cfg(feature = "alloc")]
pub type SharedPermit = admit::OwnedPermit;
/// What a [`SharedAcquire`] and [`try_acquire_shared`] grant.
#[cfg(not(feature = "alloc"))]
pub type SharedPermit = admit::Permit<'static>;

/// An acquire of `units` that may move to another thread: `acquire_owned` with
/// `alloc`, `acquire` on the semaphore that lives for ever without.
pub fn acquire_shared(semaphore: &Shared, units: usize) -> SharedAcquire {
    #[cfg(feature = "alloc")]
    return semaphore.clone().acquire_owned(units);
    #[cfg(not(feature = "alloc"))]
    return semaphore.0.acquire(units);
}

/// A `try_acquire` whose permit may move to another thread, as [`acquire_shared`].
///
/// # Errors
///
/// As `try_acquire`'s.
pub fn try_acquire_shared(
    semaphore: &Shared,
    units: usize,
) -> Result<SharedPermit, TryAcquireError> {
    #[cfg(feature = "alloc")]
    return semaphore.clone().try_acquire_owned(units);
    #[cfg(not(feature = "alloc"))]
    return semaphore.0.try_acquire(units);
}

/// What loom reports when every thread of a model is blocked: a lost wake-up.
pub const DEADLOCK: &str = "deadlock; threads = ";

/// What loom reports for two accesses to a tracked cell that nothing orders: a
/// data race (a use of memory another thread may be letting go of).
pub const RACE: &str = "Causality violation";

/// A negative control: runs `model` under loom with `mechanism` switched off and
/// asserts that loom finds a failure whose report contains `expected` (a
/// deadlock, a data race, a failed assertion, a leak).
///
/// The model runs in a child process (this test binary again, filtered to the
/// calling test): a model that fails may leave loom's runtime unwinding through
/// loom objects, which aborts the process instead of failing one test.
///
/// # Panics
///
/// If the model passes with the mechanism off (it does not cover the mechanism),
/// or fails some other way than `expected`.
pub fn without(mechanism: Safeguard, expected: &str, model: impl Fn() + Sync + Send + 'static) {
    admit::__loom::expect_failure(Some(mechanism), expected, || loom::model(model));
}

/// Runs `model` under loom, with every mechanism on, and asserts that loom finds
/// a failure whose report contains `expected`: for a model that shows what the
/// crate exists to prevent. In a child process, as [`without`] does.
pub fn fails_with(expected: &str, model: impl Fn() + Sync + Send + 'static) {
    admit::__loom::expect_failure(None, expected, || loom::model(model));
}

/// [`without`] for a model run by [`heavy`].
pub fn without_heavy(
    mechanism: Safeguard,
    expected: &str,
    model: impl Fn() + Sync + Send + 'static,
) {
    admit::__loom::expect_failure(Some(mechanism), expected, || heavy(model));
}

/// Runs a model too large to explore at `LOOM_MAX_PREEMPTIONS=3` within CI's
/// time (three threads each running a whole serving pass: about six minutes) at
/// the bound `LOOM_HEAVY_MAX_PREEMPTIONS` instead, 2 unless set. `ci/loom.sh`
/// runs them at 2; docs/testing.md records the runs at 3, made by hand.
pub fn heavy(model: impl Fn() + Sync + Send + 'static) {
    let bound = std::env::var("LOOM_HEAVY_MAX_PREEMPTIONS")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(2);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(bound);
    builder.check(model);
}

/// A gate's clock that stands still: no wait expires, so only grants and the
/// queue's own rules end a wait.
#[cfg(feature = "alloc")]
#[derive(Debug)]
pub struct Frozen;

#[cfg(feature = "alloc")]
impl admit::Timer for Frozen {
    type Sleep = core::future::Pending<()>;
    fn now(&self) -> core::time::Duration {
        core::time::Duration::ZERO
    }
    fn sleep_until(&self, _: core::time::Duration) -> Self::Sleep {
        core::future::pending()
    }
}
