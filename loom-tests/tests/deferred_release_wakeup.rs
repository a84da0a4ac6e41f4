//! No lost wake-up: two one-unit releases racing with a two-unit waiter that is
//! parking both reach it. Regression model: if asking for service did not always
//! write the role word, the second releaser could see `PENDING` already set and
//! leave, while the holder's release of the role and its re-serve missed that
//! releaser's `fetch_add` (store buffering): the waiter stayed parked with both
//! units free. The negative control below skips that write and loom finds the
//! lost wake-up.

use core::task::Waker;
use std::boxed::Box;

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, heavy, poll_once, shared, try_acquire_shared, without_heavy,
    Safeguard, DEADLOCK,
};

#[test]
fn two_releases_racing_a_parking_waiter_both_reach_it() {
    loom::model(two_releases_and_a_waiter);
}

fn two_releases_and_a_waiter() {
    let sem = shared(Semaphore::new(2));
    let first = try_acquire_shared(&sem, 1).unwrap();
    let second = try_acquire_shared(&sem, 1).unwrap();
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
}

/// Three one-unit releases reach a parked three-unit waiter: one serves, and while
/// it holds the role the second asks for service (`PENDING`) and the third finds
/// `PENDING` already set. The third's request must still be a write, or the
/// holder's re-serve may miss its units.
fn three_releases_and_a_parked_waiter() {
    let sem = shared(Semaphore::new(3));
    let held = [(); 3].map(|()| try_acquire_shared(&sem, 1).unwrap());
    let mut waiter = Box::pin(acquire_shared(&sem, 3));
    assert!(poll_once(waiter.as_mut(), Waker::noop()).is_pending());
    let [first, second, third] = held;
    let releasers = [first, second].map(|permit| thread::spawn(move || drop(permit)));
    drop(third);
    drop(block_on(waiter).unwrap());
    for releaser in releasers {
        releaser.join().unwrap();
    }
    assert_idle(&sem);
}

#[test]
fn three_releases_reach_a_parked_waiter() {
    heavy(three_releases_and_a_parked_waiter);
}

/// Negative control: asking for service reads `PENDING` set and leaves without a
/// write.
#[test]
fn a_request_for_service_that_only_reads_is_lost() {
    without_heavy(
        Safeguard::RoleAlwaysWrites,
        DEADLOCK,
        three_releases_and_a_parked_waiter,
    );
}
