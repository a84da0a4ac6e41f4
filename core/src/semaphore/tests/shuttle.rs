//! Randomized schedules far longer than loom can enumerate: several threads, each
//! running dozens of random operations (blocking acquires of random weight,
//! try_acquires, parks cancelled at once or after a waker swap, releases), under
//! shuttle's PCT scheduler, which finds bugs of small depth with a probability it
//! bounds.
//!
//! Run with `RUSTFLAGS="--cfg admit_shuttle" cargo test -p admit --lib` (see
//! `ci/shuttle.sh`); the crate's atomics are shuttle's then, so every one is a
//! scheduling point.
//!
//! Checked after every step of every thread:
//!
//! - units held (a ledger each holder updates after its grant and before its
//!   release) never exceed the capacity;
//!
//! and at the end, once every thread is joined: every unit is back, nobody is
//! parked, and the fast path takes the whole capacity (no stale `QUEUED`). A lost
//! wake-up shows as a deadlock, which shuttle reports.
//!
//! The lifecycle schedules add a thread that resizes the semaphore (shrinks that
//! retire held units as they return, grows, `add_units`) while the workers also
//! forget permits, and one with a drain at a random point: there the bound is the
//! largest capacity the schedule can reach, and at the end every unit not
//! forgotten is back in the capacity of the last resize, nobody is parked, and
//! the drain completed.

extern crate std;

use alloc::boxed::Box;
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use shuttle::rand::{thread_rng, Rng};
use shuttle::sync::atomic::{AtomicUsize, Ordering};
use shuttle::thread;

use crate::{AcquireError, Semaphore};

/// Units held, by the ledger: a holder adds its units after the grant and takes
/// them off before the release, so this never exceeds the units really in use.
struct Ledger {
    held: AtomicUsize,
}

impl Ledger {
    /// After a grant of `units`: checks the bound.
    fn take(&self, units: usize, capacity: usize) {
        let held = self.held.fetch_add(units, Ordering::SeqCst) + units;
        assert!(held <= capacity, "{held} units held of {capacity}");
    }

    /// Before a release.
    fn give(&self, units: usize) {
        self.held.fetch_sub(units, Ordering::SeqCst);
    }
}

fn poll_once<F: Future + ?Sized>(future: Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(waker))
}

/// One thread's random operations.
fn worker(semaphore: &Arc<Semaphore>, ledger: &Ledger, ops: usize) {
    let capacity = semaphore.capacity();
    let mut rng = thread_rng();
    for _ in 0..ops {
        let units = rng.gen_range(1..=capacity);
        match rng.gen_range(0..4) {
            // A blocking acquire, held for a moment.
            0 => {
                let permit = shuttle::future::block_on(semaphore.acquire(units)).expect("open");
                ledger.take(units, capacity);
                thread::yield_now();
                ledger.give(units);
                drop(permit);
            }
            // A try_acquire.
            1 => {
                if let Ok(permit) = semaphore.try_acquire(units) {
                    ledger.take(units, capacity);
                    ledger.give(units);
                    drop(permit);
                }
            }
            // A park dropped at once: a cancel, or the return of a grant not seen.
            2 => {
                let mut parked = Box::pin(semaphore.acquire(units));
                if let Poll::Ready(permit) = poll_once(parked.as_mut(), Waker::noop()) {
                    ledger.take(units, capacity);
                    ledger.give(units);
                    drop(permit);
                }
                drop(parked);
            }
            // A park re-polled with another waker, then dropped or seen through.
            _ => {
                let mut parked = Box::pin(semaphore.clone().acquire_owned(units));
                if let Poll::Ready(permit) = poll_once(parked.as_mut(), Waker::noop()) {
                    drop(permit);
                    continue;
                }
                thread::yield_now();
                if rng.gen_bool(0.5) {
                    drop(parked); // cancel while parked (or after an unseen grant)
                } else {
                    let permit = shuttle::future::block_on(parked).expect("open");
                    ledger.take(units, capacity);
                    ledger.give(units);
                    drop(permit);
                }
            }
        }
    }
}

fn storm(threads: usize, ops: usize, capacity: usize) {
    let semaphore = Arc::new(Semaphore::new(capacity));
    let ledger = Arc::new(Ledger {
        held: AtomicUsize::new(0),
    });
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (semaphore, ledger) = (semaphore.clone(), ledger.clone());
            thread::spawn(move || worker(&semaphore, &ledger, ops))
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    assert_eq!(ledger.held.load(Ordering::SeqCst), 0);
    assert_eq!(semaphore.available(), capacity, "units lost: {semaphore:?}");
    assert_eq!(semaphore.waiters(), 0, "a waiter stranded: {semaphore:?}");
    assert!(
        semaphore.try_acquire(capacity).is_ok(),
        "the fast path refused an idle semaphore: {semaphore:?}"
    );
}

/// The capacities the resizer sets range over `1..=LIFECYCLE_MAX`.
const LIFECYCLE_MAX: usize = 4;
/// Each resizer adds at most this many units with `add_units`.
const LIFECYCLE_ADDS: usize = 2;

/// One worker's random operations while the capacity changes under it: requests
/// may fail with `ExceedsCapacity` (a shrink below them) or `Closed` (a drain),
/// and a held unit is sometimes forgotten. Returns the units it forgot.
fn lifecycle_worker(semaphore: &Arc<Semaphore>, ledger: &Ledger, ops: usize) -> usize {
    let bound = LIFECYCLE_MAX + LIFECYCLE_ADDS;
    let mut rng = thread_rng();
    let mut forgotten = 0;
    for _ in 0..ops {
        let units = rng.gen_range(1..=LIFECYCLE_MAX);
        let result = match rng.gen_range(0..3) {
            // A blocking acquire, held for a moment; one unit of it sometimes
            // forgotten.
            0 => shuttle::future::block_on(semaphore.acquire(units)).map(|mut permit| {
                ledger.take(units, bound);
                thread::yield_now();
                ledger.give(units);
                if rng.gen_ratio(1, 8) {
                    if let Some(one) = permit.split(1) {
                        one.forget();
                        forgotten += 1;
                    }
                }
                drop(permit);
            }),
            // A park dropped at once.
            1 => {
                let mut parked = Box::pin(semaphore.acquire(units));
                match poll_once(parked.as_mut(), Waker::noop()) {
                    Poll::Ready(Ok(permit)) => {
                        ledger.take(units, bound);
                        ledger.give(units);
                        drop(permit);
                        Ok(())
                    }
                    Poll::Ready(Err(e)) => Err(e),
                    Poll::Pending => Ok(()),
                }
            }
            // An owned park, cancelled after a yield or seen through.
            _ => {
                let mut parked = Box::pin(semaphore.clone().acquire_owned(units));
                let outcome = match poll_once(parked.as_mut(), Waker::noop()) {
                    Poll::Ready(outcome) => outcome,
                    Poll::Pending => {
                        thread::yield_now();
                        if rng.gen_bool(0.5) {
                            continue; // cancelled
                        }
                        shuttle::future::block_on(parked)
                    }
                };
                outcome.map(|permit| {
                    ledger.take(units, bound);
                    ledger.give(units);
                    drop(permit);
                })
            }
        };
        match result {
            Ok(()) | Err(AcquireError::ExceedsCapacity(_)) => {}
            Err(AcquireError::Closed) => return forgotten,
        }
    }
    forgotten
}

/// Shrinks, grows and `add_units` at random points; returns the capacity the
/// last of them set.
fn resizer(semaphore: &Semaphore, resizes: usize) -> usize {
    let mut rng = thread_rng();
    let mut adds = 0;
    for _ in 0..resizes {
        for _ in 0..rng.gen_range(0..4) {
            thread::yield_now();
        }
        if adds < LIFECYCLE_ADDS && rng.gen_ratio(1, 4) {
            semaphore.add_units(1);
            adds += 1;
        } else {
            let c = rng.gen_range(1..=LIFECYCLE_MAX);
            semaphore.set_capacity(c);
        }
    }
    semaphore.capacity()
}

/// `threads` lifecycle workers of `ops` operations, a resizer of `resizes`
/// resizes, and, if `drain`, a drain at a random point. Checks the end state.
fn lifecycle_storm(threads: usize, ops: usize, resizes: usize, drain: bool) {
    let semaphore = Arc::new(Semaphore::new(2));
    let ledger = Arc::new(Ledger {
        held: AtomicUsize::new(0),
    });
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (semaphore, ledger) = (semaphore.clone(), ledger.clone());
            thread::spawn(move || lifecycle_worker(&semaphore, &ledger, ops))
        })
        .collect();
    let resizing = {
        let semaphore = semaphore.clone();
        thread::spawn(move || resizer(&semaphore, resizes))
    };
    let draining = drain.then(|| {
        let (semaphore, ledger) = (semaphore.clone(), ledger.clone());
        thread::spawn(move || {
            for _ in 0..thread_rng().gen_range(0..20) {
                thread::yield_now();
            }
            shuttle::future::block_on(semaphore.drain());
            // Every holder took its units off the ledger before releasing them.
            let held = ledger.held.load(Ordering::SeqCst);
            assert_eq!(held, 0, "the drain completed with {held} units held");
        })
    });
    let forgotten: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
    resizing.join().unwrap();
    if let Some(draining) = draining {
        draining.join().unwrap(); // a lost wake-up of the drain is a deadlock
    }
    assert_eq!(ledger.held.load(Ordering::SeqCst), 0);
    // A forget after the last resize took its unit out of that capacity.
    let capacity = semaphore.capacity();
    assert!(capacity <= LIFECYCLE_MAX + LIFECYCLE_ADDS, "{semaphore:?}");
    assert_eq!(
        semaphore.available(),
        capacity,
        "units lost or not retired ({forgotten} forgotten): {semaphore:?}"
    );
    assert_eq!(semaphore.waiters(), 0, "a waiter stranded: {semaphore:?}");
    if drain {
        assert!(semaphore.is_closed());
    } else if capacity > 0 {
        assert!(
            semaphore.try_acquire(capacity).is_ok(),
            "the fast path refused an idle semaphore: {semaphore:?}"
        );
    }
}

/// Iterations per test: `SHUTTLE_ITERATIONS`, or a CI-sized default.
pub(crate) fn iterations() -> usize {
    std::env::var("SHUTTLE_ITERATIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(2000)
}

#[test]
fn four_threads_weighted_storm() {
    shuttle::check_pct(|| storm(4, 60, 3), iterations(), 3);
}

#[test]
fn eight_threads_weighted_storm() {
    shuttle::check_pct(|| storm(8, 30, 4), iterations(), 3);
}

#[test]
fn six_threads_unit_storm_random_scheduler() {
    shuttle::check_random(|| storm(6, 50, 2), iterations());
}

/// Negative control: with joins that do not set `ARRIVED`, the random scheduler
/// finds a parker left behind a cleared `QUEUED` (a deadlock).
#[test]
#[should_panic(expected = "deadlock")]
fn without_arrived_the_storm_deadlocks() {
    let _off = crate::safeguard::switch_off(crate::safeguard::Safeguard::Arrived);
    shuttle::check_random(|| storm(6, 50, 2), iterations());
}

/// A close lands at a random point of the storm: every acquire ends, granted or
/// `Closed`, and held permits still return their units.
#[test]
fn close_during_the_storm() {
    shuttle::check_pct(
        || {
            let capacity = 3;
            let semaphore = Arc::new(Semaphore::new(capacity));
            let workers: Vec<_> = (0..4)
                .map(|_| {
                    let semaphore = semaphore.clone();
                    thread::spawn(move || {
                        let mut rng = thread_rng();
                        for _ in 0..20 {
                            let units = rng.gen_range(1..=capacity);
                            match shuttle::future::block_on(semaphore.acquire(units)) {
                                Ok(permit) => {
                                    thread::yield_now();
                                    drop(permit);
                                }
                                Err(crate::AcquireError::Closed) => return,
                                Err(e) => panic!("unexpected {e:?}"),
                            }
                        }
                    })
                })
                .collect();
            let closer = {
                let semaphore = semaphore.clone();
                thread::spawn(move || {
                    for _ in 0..thread_rng().gen_range(0..10) {
                        thread::yield_now();
                    }
                    semaphore.close();
                })
            };
            for worker in workers {
                worker.join().unwrap();
            }
            closer.join().unwrap();
            assert_eq!(semaphore.available(), capacity);
            assert_eq!(semaphore.waiters(), 0);
        },
        iterations(),
        3,
    );
}

/// Shrinks, grows and forgets race the storm: units are retired as they return,
/// parked requests the capacity no longer fits fail, and nothing is lost.
#[test]
fn resizes_during_the_storm() {
    shuttle::check_pct(|| lifecycle_storm(4, 25, 8, false), iterations(), 3);
}

/// The same with a drain at a random point: it completes once every unit not
/// forgotten is back, and the workers end with `Closed`.
#[test]
fn a_drain_during_a_resizing_storm() {
    shuttle::check_pct(|| lifecycle_storm(3, 25, 6, true), iterations(), 3);
}

/// The lifecycle storm under the random scheduler, which found what PCT did
/// not (a drain racing a shrink; the first claims racing a sweep's walk).
#[test]
fn resizes_and_a_drain_random_scheduler() {
    shuttle::check_random(|| lifecycle_storm(4, 25, 8, false), iterations());
    shuttle::check_random(|| lifecycle_storm(4, 25, 8, true), iterations());
}
