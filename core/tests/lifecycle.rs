//! The semaphore's lifecycle: live capacity (grow, shrink), drain, and the permit
//! operations (split, merge, forget); and the blocking acquire for threads. Units
//! in use never exceed the capacity in force, and nothing is lost.
//!
//! Runs in every build, so that the wait queue without `alloc` (the nodes in the
//! futures) is tested too; owned permits need `alloc`, the blocking acquire `std`.

mod wakers;

use admit::{AcquireError, ExceedsCapacity, Semaphore, TryAcquireError};
use wakers::Task;

#[test]
fn growing_serves_parked_requests_in_fifo_order() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut two = Task::new(sem.acquire(2));
    let mut one = Task::new(sem.acquire(1));
    two.pending();
    one.pending();

    assert_eq!(sem.set_capacity(3), 2); // one new unit: not enough for the head
    assert_eq!((sem.capacity(), sem.available()), (3, 1));
    assert_eq!(
        (two.wakes(), one.wakes()),
        (0, 0),
        "FIFO: the head needs two"
    );

    sem.add_units(1); // now the head fits; the one behind waits for more
    assert_eq!((two.wakes(), one.wakes()), (1, 0));
    let two = two.ready().unwrap();
    assert_eq!((sem.capacity(), sem.available()), (4, 0));

    drop(held);
    assert_eq!(one.wakes(), 1);
    drop((one.ready().unwrap(), two));
    assert_eq!((sem.available(), sem.waiters()), (4, 0));
}

#[test]
fn shrinking_retires_free_units_at_once_and_held_ones_as_they_return() {
    let sem = Semaphore::new(5);
    let a = sem.try_acquire(2).unwrap();
    let b = sem.try_acquire(2).unwrap();
    assert_eq!(sem.set_capacity(2), 5);
    // The free unit retired; 2 more retire from what comes back.
    assert_eq!((sem.capacity(), sem.available()), (2, 0));
    assert_eq!(sem.try_acquire(1).unwrap_err(), TryAcquireError::NoUnits);

    drop(a); // both units retire: still 2 held, the new capacity
    assert_eq!(sem.available(), 0);
    assert_eq!(sem.try_acquire(1).unwrap_err(), TryAcquireError::NoUnits);

    drop(b);
    assert_eq!((sem.capacity(), sem.available()), (2, 2));
    assert!(
        sem.try_acquire(2).is_ok(),
        "retirement done: the fast path is open"
    );
}

#[test]
fn nothing_is_granted_beyond_a_lowered_capacity_while_units_are_owed() {
    let sem = Semaphore::new(4);
    let held: Vec<_> = (0..4).map(|_| sem.try_acquire(1).unwrap()).collect();
    let mut waiter = Task::new(sem.acquire(1));
    waiter.pending();
    sem.set_capacity(2); // two of the four held units retire on return
    let mut held = held.into_iter();
    drop(held.next());
    drop(held.next());
    assert_eq!(
        waiter.wakes(),
        0,
        "2 units still held: the capacity is full"
    );
    drop(held.next());
    assert_eq!(
        waiter.wakes(),
        1,
        "1 held: a unit is free under the new capacity"
    );
    let granted = waiter.ready().unwrap();
    assert_eq!(sem.available(), 0);
    drop((granted, held));
    assert_eq!((sem.capacity(), sem.available()), (2, 2));
}

/// The release that pays the last unit owed also grants the head from what is
/// left, in the same pass: the server clears `RETIRING` once it owes nothing,
/// before it grants.
#[test]
fn the_release_that_pays_the_last_unit_owed_grants_the_head_too() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut waiter = Task::new(sem.acquire(1));
    waiter.pending();
    sem.set_capacity(1); // one unit owed: nothing is free
    drop(held); // of the two back, one retires and one goes to the head
    assert_eq!(waiter.wakes(), 1, "the head fits the unit left over");
    let granted = waiter.ready().unwrap();
    assert_eq!((sem.capacity(), sem.available()), (1, 0));
    drop(granted);
    assert_eq!((sem.available(), sem.waiters()), (1, 0));
}

#[test]
fn a_shrink_fails_parked_requests_that_no_longer_fit() {
    let sem = Semaphore::new(4);
    let held = sem.try_acquire(4).unwrap();
    let mut big = Task::new(sem.acquire(3));
    let mut small = Task::new(sem.acquire(1));
    let mut big_behind = Task::new(sem.acquire(4));
    big.pending();
    small.pending();
    big_behind.pending();
    sem.set_capacity(2);
    // Both oversize requests fail at once, wherever they waited.
    assert_eq!(
        big.ready().unwrap_err(),
        AcquireError::ExceedsCapacity(ExceedsCapacity {
            requested: 3,
            capacity: 2
        })
    );
    assert!(matches!(
        big_behind.ready(),
        Err(AcquireError::ExceedsCapacity(ExceedsCapacity {
            requested: 4,
            ..
        }))
    ));
    assert_eq!(sem.waiters(), 1);
    assert!(matches!(
        sem.try_acquire(3),
        Err(TryAcquireError::ExceedsCapacity(_))
    ));
    drop(held);
    assert!(small.ready().is_ok());
}

/// More requests that no longer fit than one wake batch holds: the sweep goes
/// on until every one has failed, and leaves the others waiting in their order.
#[test]
fn a_shrink_fails_more_parked_requests_than_one_wake_batch() {
    let sem = Semaphore::new(4);
    let held = sem.try_acquire(4).unwrap();
    // Alternately 3 units (too many after the shrink) and 1.
    let mut parked: Vec<_> = (0..100)
        .map(|i| Task::new(sem.acquire(if i % 2 == 0 { 3 } else { 1 })))
        .collect();
    for task in &mut parked {
        task.pending();
    }
    sem.set_capacity(2);
    for (i, task) in parked.iter_mut().enumerate() {
        if i % 2 == 0 {
            assert!(
                matches!(task.ready(), Err(AcquireError::ExceedsCapacity(_))),
                "request {i} for 3 units still waits under a capacity of 2"
            );
        } else {
            assert!(
                task.poll().is_pending(),
                "request {i} for 1 unit was answered"
            );
        }
    }
    assert_eq!(sem.waiters(), 50);
    drop(held); // 2 of the 4 retire; 2 go to the first two that wait
    let granted: Vec<_> = parked
        .iter_mut()
        .skip(1)
        .step_by(2)
        .map(|task| match task.poll() {
            std::task::Poll::Ready(outcome) => Some(outcome.expect("1 unit fits")),
            std::task::Poll::Pending => None,
        })
        .collect();
    assert!(
        granted[0].is_some() && granted[1].is_some() && granted[2..].iter().all(Option::is_none),
        "not the first two in order"
    );
    drop(granted);
    drop(parked);
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

#[test]
fn drain_completes_when_the_last_unit_returns() {
    let sem = Semaphore::new(3);
    let a = sem.try_acquire(1).unwrap();
    let b = sem.try_acquire(2).unwrap();
    let mut parked = Task::new(sem.acquire(1));
    parked.pending();
    let mut drain = Task::new(sem.drain());
    drain.pending();
    assert_eq!(
        parked.ready().unwrap_err(),
        AcquireError::Closed,
        "drain closes first"
    );
    drop(a);
    assert_eq!(drain.wakes(), 0, "two units still out");
    drop(b);
    assert_eq!(drain.wakes(), 1);
    drain.ready();
    assert_eq!((sem.available(), sem.waiters()), (3, 0));
    Task::new(sem.drain()).ready(); // and again, at once
}

/// A close with nothing to drain leaves the queue as if empty: once the units
/// are back, a drain is ready at once.
#[test]
fn a_drain_after_a_close_is_ready_once_the_units_are_back() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut parked = Task::new(sem.acquire(1));
    parked.pending();
    sem.close();
    drop(held);
    assert_eq!(parked.ready().unwrap_err(), AcquireError::Closed);
    Task::new(sem.drain()).ready();
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

#[test]
fn drain_of_an_idle_semaphore_is_ready_at_once_and_counts_retired_units_as_back() {
    let sem = Semaphore::new(2);
    Task::new(sem.drain()).ready();

    let sem = Semaphore::new(3);
    let held = sem.try_acquire(3).unwrap();
    sem.set_capacity(1); // two of the held units are owed to the retirement
    let mut drain = Task::new(sem.drain());
    drain.pending();
    drop(held);
    drain.ready();
    assert_eq!((sem.capacity(), sem.available()), (1, 1));
}

#[test]
fn a_dropped_drain_leaves_the_queue_whole() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut first = Task::new(sem.drain());
    let mut second = Task::new(sem.drain());
    first.pending();
    second.pending();
    drop(first);
    assert_eq!(sem.waiters(), 1);
    drop(held);
    second.ready();
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn split_and_merge_move_units_between_permits_and_lose_none() {
    let sem = Semaphore::new(4);
    let mut permit = sem.try_acquire(3).unwrap();
    assert!(permit.split(3).is_none(), "a permit never holds nothing");
    let one = permit.split(1).unwrap();
    assert_eq!((permit.units(), one.units()), (2, 1));
    drop(one);
    assert_eq!(sem.available(), 2);
    let other = sem.try_acquire(1).unwrap();
    permit.merge(other);
    assert_eq!((permit.units(), sem.available()), (3, 1));
    drop(permit);
    assert_eq!(sem.available(), 4);
}

#[cfg(feature = "alloc")]
#[test]
fn owned_permits_split_merge_and_forget_too() {
    let sem = std::sync::Arc::new(Semaphore::new(4));
    let mut owned = sem.clone().try_acquire_owned(2).unwrap();
    let half = owned.split(1).unwrap();
    owned.merge(half);
    owned.merge(sem.clone().try_acquire_owned(2).unwrap());
    assert_eq!((owned.units(), sem.available()), (4, 0));
    let gone = owned.split(1).unwrap();
    let mut parked = Task::new(sem.clone().acquire_owned(4));
    parked.pending();
    gone.forget();
    assert_eq!((sem.capacity(), sem.available()), (3, 0));
    assert!(
        matches!(parked.ready(), Err(AcquireError::ExceedsCapacity(_))),
        "4 units can no longer be had"
    );
    drop(owned);
    assert_eq!(sem.available(), 3);
}

#[test]
#[should_panic(expected = "two different semaphores")]
fn merging_permits_of_two_semaphores_panics() {
    let (a, b) = (Semaphore::new(1), Semaphore::new(1));
    let mut permit = a.try_acquire(1).unwrap();
    permit.merge(b.try_acquire(1).unwrap());
}

#[test]
fn forget_takes_the_units_out_of_the_capacity_for_good() {
    let sem = Semaphore::new(4);
    let kept = sem.try_acquire(1).unwrap();
    let gone = sem.try_acquire(2).unwrap();
    let mut parked = Task::new(sem.acquire(4));
    parked.pending();
    gone.forget();
    assert_eq!((sem.capacity(), sem.available()), (2, 1));
    assert!(
        matches!(parked.ready(), Err(AcquireError::ExceedsCapacity(_))),
        "4 units can no longer be had"
    );
    kept.forget();
    assert_eq!((sem.capacity(), sem.available()), (1, 1));
    let mut drain = Task::new(sem.drain());
    drain.ready(); // every remaining unit is back
}

#[cfg(feature = "std")]
#[test]
fn blocking_acquires_queue_with_async_ones_in_fifo_order() {
    let sem = std::sync::Arc::new(Semaphore::new(1));
    let held = sem.clone().try_acquire_owned(1).unwrap();
    let mut parked_first = Task::new(sem.clone().acquire_owned(1));
    parked_first.pending();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let blocked = {
        let sem = sem.clone();
        std::thread::spawn(move || {
            ready_tx.send(()).unwrap();
            let permit = sem.acquire_blocking(1).unwrap();
            drop(permit);
        })
    };
    ready_rx.recv().unwrap();
    // Wait until the thread is parked in the queue, behind `parked_first`.
    while sem.waiters() < 2 {
        std::thread::yield_now();
    }
    drop(held);
    assert_eq!(parked_first.wakes(), 1, "the async request arrived first");
    drop(parked_first.ready().unwrap());
    blocked.join().unwrap();
    assert_eq!((sem.available(), sem.waiters()), (1, 0));
}

#[cfg(feature = "std")]
#[test]
fn a_blocking_acquire_past_its_deadline_leaves_the_queue() {
    use admit::AcquireTimeoutError;
    use std::time::{Duration, Instant};

    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let deadline = Instant::now() + Duration::from_millis(20);
    assert_eq!(
        sem.acquire_blocking_until(1, deadline).unwrap_err(),
        AcquireTimeoutError::TimedOut
    );
    assert_eq!(sem.waiters(), 0);
    drop(held);
    assert!(
        sem.acquire_blocking_until(1, deadline).is_ok(),
        "free units are taken even late"
    );
    assert!(matches!(
        sem.acquire_blocking_until(2, deadline),
        Err(AcquireTimeoutError::ExceedsCapacity(_))
    ));
    sem.close();
    assert_eq!(sem.acquire_blocking(1).unwrap_err(), AcquireError::Closed);
}
