//! Property 2, FIFO with no barging and no starvation: a parked request is granted
//! before any request that arrived after it, `try_acquire` included.

mod wakers;

use admit::{Semaphore, TryAcquireError};
use wakers::Task;

#[test]
fn parked_requests_are_granted_in_arrival_order() {
    let sem = Semaphore::new(4);
    let all = sem.try_acquire(4).unwrap();
    let mut a = Task::new(sem.acquire(3));
    let mut b = Task::new(sem.acquire(1));
    let mut c = Task::new(sem.acquire(2));
    a.pending();
    b.pending();
    c.pending();
    assert_eq!(sem.waiters(), 3);

    drop(all); // 4 free: A (3) then B (1) fit; C (2) does not.
    assert_eq!((a.wakes(), b.wakes(), c.wakes()), (1, 1, 0));
    let pa = a.ready().unwrap();
    let pb = b.ready().unwrap();
    c.pending();
    assert_eq!(sem.available(), 0);

    drop(pb); // 1 free, C needs 2: still parked, not woken.
    assert_eq!(c.wakes(), 0);
    drop(pa);
    assert_eq!(c.wakes(), 1);
    assert_eq!(c.ready().unwrap().units(), 2);
}

/// A later, smaller request that would fit does not pass a parked larger one.
#[test]
fn a_smaller_later_request_does_not_pass_the_head() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut big = Task::new(sem.acquire(2));
    let mut small = Task::new(sem.acquire(1));
    big.pending();
    small.pending();
    drop(held);
    // 2 free: big takes both; small stays parked.
    assert_eq!((big.wakes(), small.wakes()), (1, 0));
    let p = big.ready().unwrap();
    small.pending();
    drop(p);
    assert_eq!(small.wakes(), 1);
    assert_eq!(small.ready().unwrap().units(), 1);
}

#[test]
fn try_acquire_does_not_barge_past_a_parked_waiter() {
    let sem = Semaphore::new(3);
    let two = sem.try_acquire(2).unwrap();
    let mut waiter = Task::new(sem.acquire(2));
    waiter.pending();
    // One unit is free, but the waiter is ahead.
    assert_eq!(sem.available(), 1);
    assert_eq!(sem.try_acquire(1).unwrap_err(), TryAcquireError::NoUnits);
    // A new `acquire` does not barge either: it parks behind.
    let mut late = Task::new(sem.acquire(1));
    late.pending();
    drop(two);
    // 3 free: the waiter takes 2, then the late request's 1 fits, in that order.
    assert_eq!((waiter.wakes(), late.wakes()), (1, 1));
    assert_eq!(waiter.ready().unwrap().units(), 2);
    assert_eq!(late.ready().unwrap().units(), 1);
}

/// Go's `TestLargeAcquireDoesntStarve`: one-unit churners that release and come back
/// cannot keep a large request waiting once it is parked.
#[test]
fn a_large_request_is_not_starved_by_small_churners() {
    let sem = Semaphore::new(4);
    let mut churners: Vec<_> = (0..4).map(|_| sem.try_acquire(1).unwrap()).collect();
    let mut large = Task::new(sem.acquire(4));
    large.pending();
    for round in 0..4 {
        // A churner finishes and immediately wants a unit again.
        drop(churners.pop());
        assert_eq!(
            sem.try_acquire(1).unwrap_err(),
            TryAcquireError::NoUnits,
            "round {round}"
        );
        let mut again = Task::new(sem.acquire(1));
        again.pending();
        drop(again);
        assert_eq!(large.wakes(), usize::from(round == 3));
    }
    assert_eq!(large.wakes(), 1);
    assert_eq!(large.ready().unwrap().units(), 4);
}

/// On threads: a 4-unit request amid one-unit churners is granted.
#[test]
fn a_large_request_completes_amid_threaded_churn() {
    let sem = Semaphore::new(4);
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    drop(futures_lite::future::block_on(sem.acquire(1)).unwrap());
                }
            });
        }
        let rounds = if cfg!(miri) { 3 } else { 200 };
        for _ in 0..rounds {
            let all = futures_lite::future::block_on(sem.acquire(4)).unwrap();
            assert_eq!(sem.available(), 0);
            drop(all);
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    assert_eq!((sem.available(), sem.waiters()), (4, 0));
}
