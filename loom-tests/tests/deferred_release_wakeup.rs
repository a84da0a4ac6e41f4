//! No lost wake-up: two one-unit releases racing with a two-unit waiter that is
//! parking both reach it. Regression model: before `lock_or_defer` always wrote the
//! lock word, the second releaser could see `PENDING` already set and leave, while
//! the lock holder's unlock and re-serve missed its `fetch_add` (store buffering):
//! the waiter stayed parked with both units free. Loom finds that at 3 preemptions.
#![cfg(admit_loom)]

extern crate alloc;

use alloc::sync::Arc;

use admit::Semaphore;
use admit_loom_tests::assert_idle;
use loom::future::block_on;
use loom::thread;

#[test]
fn two_releases_racing_a_parking_waiter_both_reach_it() {
    loom::model(|| {
        let sem = Arc::new(Semaphore::new(2));
        let first = sem.clone().try_acquire_owned(1).unwrap();
        let second = sem.clone().try_acquire_owned(1).unwrap();
        let waiter = {
            let sem = sem.clone();
            // Needs both units: only the later of the two releases can grant it.
            thread::spawn(move || drop(block_on(sem.acquire(2)).unwrap()))
        };
        let releaser = thread::spawn(move || drop(first));
        drop(second);
        releaser.join().unwrap();
        waiter.join().unwrap();
        assert_idle(&sem);
    });
}
