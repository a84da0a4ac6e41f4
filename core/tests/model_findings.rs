//! States that the resize/split/merge/forget models of `admit-model` reach and
//! that a core can easily get wrong: each test's doc says what goes wrong, and
//! the model's replays run into these states too.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]
#![allow(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

mod support;
mod wakers;

use std::time::Duration;

use admit::{AcquireError, ExceedsCapacity, Gate, Semaphore};
use support::{ManualTimer, Src};
use wakers::Task;

/// A grow that finds nobody queued runs no serving pass, so the server never sees
/// the grown capacity. A shrink that swept only below the capacity the server last
/// saw would skip the sweep here, and a parked request for more than the new
/// capacity would stay parked: every shrink flags the sweep.
#[test]
fn a_shrink_after_an_unserved_grow_fails_parked_requests_that_no_longer_fit() {
    let sem = Semaphore::new(4);
    // Run one serving pass so the server records capacity 4.
    let held = sem.try_acquire(4).unwrap();
    let mut first = Task::new(sem.acquire(1));
    first.pending();
    drop(held);
    drop(first.ready().unwrap());

    sem.set_capacity(8); // nobody queued: no pass, the record stays at 4
    let held = sem.try_acquire(8).unwrap();
    let mut big = Task::new(sem.acquire(7));
    big.pending();
    sem.set_capacity(6);
    assert_eq!(
        big.wakes(),
        1,
        "a request for 7 can never be granted at capacity 6: it must fail at the shrink"
    );
    assert_eq!(
        big.ready().unwrap_err(),
        AcquireError::ExceedsCapacity(ExceedsCapacity {
            requested: 7,
            capacity: 6
        })
    );
    drop(held);
}

/// The same through `forget`: a forgotten permit lowers the capacity below a
/// parked request that was admitted under a grown capacity the server never saw.
#[test]
fn a_forget_after_an_unserved_grow_fails_parked_requests_that_no_longer_fit() {
    let sem = Semaphore::new(4);
    let held = sem.try_acquire(4).unwrap();
    let mut first = Task::new(sem.acquire(1));
    first.pending();
    drop(held);
    drop(first.ready().unwrap());

    sem.add_units(4); // capacity 8, no pass
    let kept = sem.try_acquire(5).unwrap();
    let gone = sem.try_acquire(3).unwrap();
    let mut head = Task::new(sem.acquire(3)); // fits the capacity, not the free units
    let mut big = Task::new(sem.acquire(7));
    head.pending();
    big.pending();
    gone.forget(); // capacity 5
    assert_eq!(sem.capacity(), 5);
    assert_eq!(big.wakes(), 1, "7 units can no longer be had at capacity 5");
    assert!(matches!(
        big.ready(),
        Err(AcquireError::ExceedsCapacity(ExceedsCapacity {
            requested: 7,
            capacity: 5
        }))
    ));
    drop(kept);
    drop(head.ready().unwrap());
}

/// Forgetting a permit whose units are owed to a retirement (held above a
/// lowered capacity) must not subtract them from a capacity smaller than they
/// are, an arithmetic overflow: units held above the capacity settle the debt.
#[test]
fn forgetting_units_held_above_a_lowered_capacity_keeps_the_accounting() {
    let sem = Semaphore::new(4);
    let held = sem.try_acquire(4).unwrap();
    let kept = {
        let mut held = held;
        let kept = held.split(1).unwrap();
        sem.set_capacity(2); // 2 units owed to the retirement
        held.forget(); // 3 units gone for good: more than the capacity of 2
        kept
    };
    assert!(sem.capacity() <= 2, "capacity {}", sem.capacity());
    drop(kept);
    assert_eq!(sem.available(), sem.capacity());
    let mut drain = Task::new(sem.drain());
    drain.ready();
}

/// `Gate::in_use` counts the units in permits, as `held_by_source` and an
/// observer's gauge do: `capacity - available` falls short, after a shrink below
/// the units in use, by the units still owed.
#[test]
fn gate_in_use_counts_units_held_above_a_lowered_capacity() {
    let gate = Gate::<Src, _, _>::builder(4)
        .wait_budget(Duration::from_secs(1))
        .max_units(2)
        .timer(ManualTimer::new())
        .build()
        .unwrap();
    let held = [(); 2].map(|()| gate.try_acquire(2, Src::Upload).unwrap());
    assert_eq!(gate.resize(2), Ok(4));
    assert_eq!(
        gate.in_use(),
        4,
        "4 units are held (held_by_source says {:?})",
        gate.held_by_source()
    );
    drop(held);
    assert_eq!(gate.in_use(), 0);
}
