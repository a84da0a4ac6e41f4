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

use crate::Semaphore;

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

/// Iterations per test: `SHUTTLE_ITERATIONS`, or a CI-sized default.
pub(super) fn iterations() -> usize {
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
    let _off = crate::mechanism::switch_off(crate::mechanism::Mechanism::Arrived);
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
