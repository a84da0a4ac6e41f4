//! Live capacity against releases and a parked head: once a shrink has returned,
//! nothing is granted beyond the new capacity — not by a fast path that meets a
//! returned unit first, not by a server that meets one mid-pass — and a grow
//! serves the parked head.

use core::task::Waker;
use std::boxed::Box;
use std::sync::Arc;

use super::support::{assert_idle, poll_once, without};
use crate::mechanism::Mechanism;
use crate::Semaphore;
use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;

/// Capacity 2 shrinks to 1 while both units are held; then one comes back. A
/// `try_acquire` racing that release must fail: the returned unit retires.
fn fast_path_after_a_shrink() {
    let sem = Arc::new(Semaphore::new(2));
    let first = sem.clone().try_acquire_owned(1).unwrap();
    let second = sem.clone().try_acquire_owned(1).unwrap();
    let shrinker = {
        let sem = sem.clone();
        thread::spawn(move || {
            sem.set_capacity(1);
            drop(first); // after the shrink: this unit retires
        })
    };
    let taken = sem.try_acquire(1);
    assert!(taken.is_err(), "granted past the lowered capacity");
    shrinker.join().unwrap();
    drop(second);
    assert_eq!(sem.capacity(), 1);
    assert_idle(&sem);
}

#[test]
fn a_unit_returned_after_a_shrink_retires() {
    loom::model(fast_path_after_a_shrink);
}

/// Negative control: with fast paths open while units are owed, the returned unit
/// goes to the `try_acquire`.
#[test]
fn without_retiring_the_fast_path_takes_a_unit_owed() {
    without(
        Mechanism::RetiringBlocksFastPath,
        "granted past the lowered capacity",
        fast_path_after_a_shrink,
    );
}

/// Capacity 3, all held, a waiter parked for one unit. Once the shrink to 1 has
/// returned, two units come back on two threads, whose serving passes race; the
/// third stays held, so the capacity is full and the waiter must stay parked.
fn server_pass_after_a_shrink() {
    let sem = Arc::new(Semaphore::new(3));
    let held = [(); 3].map(|()| sem.clone().try_acquire_owned(1).unwrap());
    let mut waiter = Box::pin(sem.clone().acquire_owned(1));
    assert!(poll_once(waiter.as_mut(), Waker::noop()).is_pending());
    let shrunk = Arc::new(AtomicBool::new(false));
    let [first, second, third] = held;
    let shrinker = {
        let (sem, shrunk) = (sem.clone(), shrunk.clone());
        thread::spawn(move || {
            sem.set_capacity(1);
            shrunk.store(true, Ordering::Release);
            drop(first);
        })
    };
    let releaser = {
        let shrunk = shrunk.clone();
        thread::spawn(move || {
            while !shrunk.load(Ordering::Acquire) {
                thread::yield_now();
            }
            drop(second);
        })
    };
    shrinker.join().unwrap();
    releaser.join().unwrap();
    assert!(
        poll_once(waiter.as_mut(), Waker::noop()).is_pending(),
        "granted past the lowered capacity"
    );
    drop(third);
    drop(block_on(waiter).expect("not closed"));
    assert_eq!(sem.capacity(), 1);
    assert_idle(&sem);
}

#[test]
fn a_serving_pass_pays_the_retirement_before_granting() {
    loom::model(server_pass_after_a_shrink);
}

/// Negative control: a server that grants while units are still owed hands a
/// returned unit to the waiter.
#[test]
fn without_paying_first_a_server_grants_a_unit_owed() {
    without(
        Mechanism::DebtBeforeGrants,
        "granted past the lowered capacity",
        server_pass_after_a_shrink,
    );
}

/// A grow racing a release and a parked head that needs both the grown unit and
/// the released one: the head is granted, whichever comes first.
#[test]
fn a_grow_serves_the_parked_head() {
    loom::model(|| {
        let sem = Arc::new(Semaphore::new(1));
        let held = sem.clone().try_acquire_owned(1).unwrap();
        let mut head = Box::pin(sem.clone().acquire_owned(2));
        // More than the capacity: fails at once; grow first, then park.
        sem.add_units(1);
        let other = sem.clone().try_acquire_owned(1).unwrap();
        assert!(poll_once(head.as_mut(), Waker::noop()).is_pending());
        let grower = {
            let sem = sem.clone();
            thread::spawn(move || sem.set_capacity(3))
        };
        drop(held);
        let permit = block_on(head).expect("not closed");
        assert_eq!(permit.units(), 2);
        grower.join().unwrap();
        drop((permit, other));
        assert_eq!(sem.capacity(), 3);
        assert_idle(&sem);
    });
}

/// A forget of units held above the capacity racing the shrink that put them there:
/// however the forget's settlement and the shrink's retirement meet, nothing is
/// owed at the end, no unit is left over, and the capacity is what both asked.
#[test]
fn a_forget_racing_a_shrink_settles_exactly() {
    loom::model(|| {
        let sem = Arc::new(Semaphore::new(3));
        let held = sem.clone().try_acquire_owned(2).unwrap();
        let shrinker = {
            let sem = sem.clone();
            thread::spawn(move || {
                sem.set_capacity(1);
            })
        };
        held.forget();
        shrinker.join().unwrap();
        // Forget first: 3 - 2 = 1, then the shrink to 1 changes nothing. Shrink
        // first: 1, with 2 units owed (1 retired from the free one); the forget's
        // 2 units take the capacity to 0 and settle the last unit owed.
        let capacity = sem.capacity();
        assert!(capacity <= 1, "capacity {capacity}");
        assert_eq!(sem.available(), capacity, "units left over or owed");
        // Nothing is still owed: a grow is free in full (a debt left over, or one
        // wrapped below zero, would retire the grown units).
        sem.set_capacity(2);
        assert_eq!(sem.available(), 2, "a debt outlived the settlement");
        block_on(sem.drain());
    });
}

/// Two shrinks and a forget: after the first shrink one unit is still owed; the
/// forget of units held above the capacity races the second shrink, so its
/// settlement may exceed a debt that is still partly owed (the second shrink not
/// yet posted). What it gives back is the excess over that debt, no more: at the
/// end nothing is free beyond the capacity, and nothing is still owed.
#[test]
fn a_forget_settles_a_debt_still_partly_owed() {
    loom::model(|| {
        let sem = Arc::new(Semaphore::new(4));
        let held = sem.clone().try_acquire_owned(3).unwrap();
        sem.set_capacity(2); // the free unit retires; one more is owed
        assert_eq!(sem.available(), 0);
        let shrinker = {
            let sem = sem.clone();
            thread::spawn(move || {
                sem.set_capacity(0);
            })
        };
        held.forget();
        shrinker.join().unwrap();
        assert_eq!(sem.capacity(), 0);
        assert_eq!(sem.available(), 0, "units left over or owed");
        sem.set_capacity(2);
        assert_eq!(sem.available(), 2, "a debt outlived the settlement");
        block_on(sem.drain());
    });
}
