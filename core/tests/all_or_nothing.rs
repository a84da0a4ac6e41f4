//! Property 1, all-or-nothing: a request takes all its units together or none, and
//! a parked request holds no part of its request where anyone can see it.

mod wakers;

use admit::{Semaphore, TryAcquireError};
use wakers::Task;

#[test]
fn try_acquire_that_does_not_fit_takes_nothing() {
    let sem = Semaphore::new(3);
    let _two = sem.try_acquire(2).unwrap();
    assert_eq!(sem.try_acquire(2).unwrap_err(), TryAcquireError::NoUnits);
    assert_eq!(sem.available(), 1);
}

#[test]
fn a_parked_request_holds_no_partial_units() {
    let sem = Semaphore::new(3);
    let two = sem.try_acquire(2).unwrap();
    let mut waiter = Task::new(sem.acquire(2));
    waiter.pending();
    // One unit is free and the waiter needs two: it has not taken the one.
    assert_eq!(sem.available(), 1);
    drop(two);
    let permit = waiter.ready().unwrap();
    assert_eq!((permit.units(), sem.available()), (2, 1));
}

/// Two operations that each need two units at capacity 2 both complete: the second
/// parks holding nothing, and the first one's release hands it both units.
#[test]
fn two_double_unit_operations_at_capacity_two_both_complete() {
    let sem = Semaphore::new(2);
    let mut first = Task::new(sem.acquire(2));
    let mut second = Task::new(sem.acquire(2));
    let p1 = first.ready().unwrap();
    second.pending();
    assert_eq!(sem.available(), 0);
    drop(p1);
    let p2 = second.ready().unwrap();
    assert_eq!(p2.units(), 2);
    drop(p2);
    assert_eq!(sem.available(), 2);
}

/// The same on real threads, many rounds: no round can deadlock.
#[test]
fn double_unit_operations_on_threads_never_deadlock() {
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let sem = Semaphore::new(2);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..rounds {
                    let permit = futures_lite::future::block_on(sem.acquire(2)).unwrap();
                    assert_eq!(sem.available(), 0);
                    drop(permit);
                }
            });
        }
    });
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}
