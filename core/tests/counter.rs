//! A counter's semaphore (`Semaphore::counting`, tokio's semantics): a request
//! above the capacity waits for it to grow, in FIFO order, and nothing but
//! `MAX_UNITS` or a close fails it; and the precedence of errors in both modes.

mod wakers;

use admit::{AcquireError, ExceedsCapacity, Semaphore, TryAcquireError};
use wakers::Task;

/// Everything back and nobody parked.
#[track_caller]
fn assert_idle(sem: &Semaphore) {
    assert_eq!(sem.available(), sem.capacity(), "units lost: {sem:?}");
    assert_eq!(sem.waiters(), 0, "a waiter stranded: {sem:?}");
}

#[test]
fn an_empty_counter_wakes_its_parked_requests_in_arrival_order() {
    let pool = Semaphore::counting(0);
    let mut first = Task::new(pool.acquire(1));
    let mut second = Task::new(pool.acquire(1));
    let mut third = Task::new(pool.acquire(1));
    first.pending();
    second.pending();
    third.pending();
    assert_eq!(pool.waiters(), 3);

    pool.add_units(1);
    assert_eq!((first.wakes(), second.wakes(), third.wakes()), (1, 0, 0));
    let one = first.ready().unwrap();
    pool.add_units(1);
    assert_eq!((second.wakes(), third.wakes()), (1, 0));
    let two = second.ready().unwrap();
    third.pending();
    drop(one); // a returned unit goes to the next in line
    assert_eq!(third.wakes(), 1);
    let three = third.ready().unwrap();
    drop((two, three));
    assert_eq!(pool.capacity(), 2);
    assert_idle(&pool);
}

#[test]
fn a_request_above_the_capacity_parks_until_it_grows() {
    let pool = Semaphore::counting(1);
    let mut big = Task::new(pool.acquire(3));
    big.pending(); // the default semaphore fails it here (below)
    pool.add_units(1);
    assert_eq!(big.wakes(), 0, "3 units do not fit in 2");
    big.pending();
    pool.set_capacity(3);
    assert_eq!(big.wakes(), 1);
    let permit = big.ready().unwrap();
    assert_eq!((permit.units(), pool.available()), (3, 0));
    drop(permit);
    assert_idle(&pool);

    let sem = Semaphore::new(1);
    let mut big = Task::new(sem.acquire(3));
    assert_eq!(
        big.ready().unwrap_err(),
        AcquireError::ExceedsCapacity(ExceedsCapacity {
            requested: 3,
            capacity: 1
        })
    );
}

#[test]
fn a_close_fails_a_parked_oversize_request() {
    let pool = Semaphore::counting(0);
    let mut waiting = Task::new(pool.acquire(2));
    waiting.pending();
    pool.close();
    assert_eq!(waiting.wakes(), 1);
    assert_eq!(waiting.ready().unwrap_err(), AcquireError::Closed);
    assert_idle(&pool);
}

#[test]
fn a_shrink_or_a_forget_never_fails_a_parked_request() {
    let pool = Semaphore::counting(4);
    let mut held = pool.try_acquire(4).unwrap();
    let mut waiting = Task::new(pool.acquire(3));
    waiting.pending();

    pool.set_capacity(2); // below the request: it keeps waiting
    held.split(1).unwrap().forget(); // capacity 1
    assert_eq!(pool.capacity(), 1);
    assert_eq!(waiting.wakes(), 0);
    waiting.pending();

    drop(held); // 3 back, 2 of them retire for the shrink: 1 free
    assert_eq!(pool.available(), 1);
    waiting.pending();
    pool.add_units(2);
    assert_eq!(waiting.wakes(), 1);
    drop(waiting.ready().unwrap());
    assert_eq!(pool.capacity(), 3);
    assert_idle(&pool);
}

#[test]
fn the_checkout_of_a_pool_round_trips() {
    // deadpool's unmanaged pool: objects are added one by one, a checkout
    // takes a unit and forgets it, a return adds one back.
    let pool = Semaphore::counting(0);
    pool.add_units(2);
    pool.try_acquire(1).unwrap().forget();
    pool.try_acquire(1).unwrap().forget();
    assert_eq!((pool.capacity(), pool.available()), (0, 0));
    assert_eq!(pool.try_acquire(1).unwrap_err(), TryAcquireError::NoUnits);
    let mut next = Task::new(pool.acquire(1));
    next.pending();
    pool.add_units(1); // one object returned
    next.ready().unwrap().forget();
    pool.add_units(2);
    assert_eq!((pool.capacity(), pool.available()), (2, 2));
    assert_idle(&pool);
}

#[test]
fn a_cancel_at_any_point_loses_nothing() {
    let pool = Semaphore::counting(1);
    let held = pool.try_acquire(1).unwrap();

    // Before its first poll.
    drop(pool.acquire(5));
    // Parked above the capacity, at the head, blocking a request that fits.
    let mut big = Task::new(pool.acquire(5));
    let mut small = Task::new(pool.acquire(1));
    big.pending();
    small.pending();
    drop(held);
    assert_eq!(small.wakes(), 0, "the oversize head blocks it");
    drop(big);
    assert_eq!(small.wakes(), 1, "its cancel serves the one behind");
    // Granted, dropped before it saw the grant.
    pool.add_units(4);
    drop(small);
    assert_eq!(pool.capacity(), 5);
    assert_idle(&pool);

    // Granted a grow, dropped before its re-poll.
    let held = pool.try_acquire(5).unwrap();
    let mut big = Task::new(pool.acquire(7));
    big.pending();
    pool.add_units(2);
    drop(held);
    assert_eq!(big.wakes(), 1);
    drop(big);
    assert_idle(&pool);
}

#[test]
fn an_oversize_head_blocks_the_requests_behind_it() {
    // Arrival order holds for an oversize request too: documented on
    // `Semaphore::counting` as head-of-line blocking.
    let pool = Semaphore::counting(2);
    let held = pool.try_acquire(1).unwrap();
    let mut big = Task::new(pool.acquire(4));
    big.pending();
    let mut small = Task::new(pool.acquire(1));
    small.pending();
    assert_eq!(pool.available(), 1);
    assert_eq!(pool.try_acquire(1).unwrap_err(), TryAcquireError::NoUnits);
    assert_eq!(small.wakes(), 0);
    pool.add_units(2); // 4 capacity, 3 free: the head still does not fit
    assert_eq!(small.wakes(), 0);
    drop(held);
    assert_eq!((big.wakes(), small.wakes()), (1, 0));
    drop(big.ready().unwrap());
    assert_eq!(small.wakes(), 1);
    drop(small.ready().unwrap());
    assert_idle(&pool);
}

#[test]
fn only_a_request_above_max_units_fails_a_counter_at_once() {
    let pool = Semaphore::counting(3);
    assert_eq!(pool.try_acquire(4).unwrap_err(), TryAcquireError::NoUnits);
    let above = Semaphore::MAX_UNITS + 1;
    let exceeds = ExceedsCapacity {
        requested: above,
        capacity: 3,
    };
    assert_eq!(
        pool.try_acquire(above).unwrap_err(),
        TryAcquireError::ExceedsCapacity(exceeds)
    );
    assert_eq!(
        Task::new(pool.acquire(above)).ready().unwrap_err(),
        AcquireError::ExceedsCapacity(exceeds)
    );
    assert_idle(&pool);
}

#[test]
fn closed_comes_before_exceeds_capacity() {
    for sem in [Semaphore::new(1), Semaphore::counting(1)] {
        sem.close();
        let above = Semaphore::MAX_UNITS + 1;
        for units in [2, above] {
            assert_eq!(sem.try_acquire(units).unwrap_err(), TryAcquireError::Closed);
            assert_eq!(
                Task::new(sem.acquire(units)).ready().unwrap_err(),
                AcquireError::Closed
            );
        }
    }
}

#[test]
fn forget_free_takes_only_free_units_even_behind_a_parked_request() {
    let pool = Semaphore::counting(4);
    let held = pool.try_acquire(2).unwrap();
    let mut waiting = Task::new(pool.acquire(3));
    waiting.pending();
    assert_eq!(pool.forget_free(5), 2);
    assert_eq!((pool.capacity(), pool.available()), (2, 0));
    assert_eq!(pool.forget_free(1), 0);
    drop(held);
    assert_eq!(waiting.wakes(), 0, "3 units do not fit in 2");
    pool.add_units(1);
    drop(waiting.ready().unwrap());
    assert_idle(&pool);
}

#[test]
fn a_grow_past_max_units_panics_and_changes_nothing() {
    for pool in [Semaphore::counting(3), Semaphore::new(3)] {
        let held = pool.try_acquire(1).unwrap();
        let grow = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            pool.add_units(Semaphore::MAX_UNITS - 2);
        }));
        assert!(grow.is_err());
        assert_eq!((pool.capacity(), pool.available()), (3, 2));
        drop(held);
        pool.add_units(Semaphore::MAX_UNITS - 3);
        assert_eq!(pool.capacity(), Semaphore::MAX_UNITS);
        assert_idle(&pool);
    }
}
