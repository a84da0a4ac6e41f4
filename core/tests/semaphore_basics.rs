//! The semaphore's API contract: capacity bounds, zero-unit panics, oversize
//! requests, close, owned permits, diagnostics.
//!
//! Runs in every build (the wait queue without `alloc` too); the owned permits'
//! tests, and the size bounds of the build with `alloc`, need `alloc`.

mod wakers;

#[cfg(feature = "alloc")]
use std::sync::Arc;

use admit::{AcquireError, ExceedsCapacity, Semaphore, TryAcquireError};
use wakers::Task;

#[test]
fn new_semaphore_is_all_free() {
    let sem = Semaphore::new(5);
    assert_eq!((sem.capacity(), sem.available(), sem.waiters()), (5, 5, 0));
    assert!(!sem.is_closed());
}

#[test]
fn max_units_is_accepted_and_usable() {
    let sem = Semaphore::new(Semaphore::MAX_UNITS);
    let all = sem.try_acquire(Semaphore::MAX_UNITS).unwrap();
    assert_eq!(sem.available(), 0);
    drop(all);
    assert_eq!(sem.available(), Semaphore::MAX_UNITS);
    assert_eq!(Semaphore::MAX_UNITS, (1 << 28) - 1);
}

#[test]
#[should_panic(expected = "MAX_UNITS")]
fn capacity_above_max_units_panics() {
    let _ = Semaphore::new(Semaphore::MAX_UNITS + 1);
}

#[test]
#[should_panic(expected = "zero units")]
fn try_acquire_zero_panics() {
    let _ = Semaphore::new(1).try_acquire(0);
}

#[test]
#[should_panic(expected = "zero units")]
fn acquire_zero_panics_at_the_call() {
    drop(Semaphore::new(1).acquire(0));
}

#[cfg(feature = "alloc")]
#[test]
#[should_panic(expected = "zero units")]
fn acquire_owned_zero_panics() {
    drop(Arc::new(Semaphore::new(1)).acquire_owned(0));
}

#[cfg(feature = "alloc")]
#[test]
#[should_panic(expected = "zero units")]
fn try_acquire_owned_zero_panics() {
    let _ = Arc::new(Semaphore::new(1)).try_acquire_owned(0);
}

#[test]
fn a_zero_capacity_refuses_every_request_until_it_is_raised() {
    // Allowed (forgotten permits reach 0 anyway); a request waits for no unit that
    // does not exist, so it fails at once rather than park.
    let sem = Semaphore::new(0);
    let refused = ExceedsCapacity {
        requested: 1,
        capacity: 0,
    };
    assert_eq!(
        sem.try_acquire(1).unwrap_err(),
        TryAcquireError::ExceedsCapacity(refused)
    );
    let mut parked = Task::new(sem.acquire(1));
    assert_eq!(
        parked.ready().unwrap_err(),
        AcquireError::ExceedsCapacity(refused)
    );
    sem.add_units(1);
    assert!(sem.try_acquire(1).is_ok());
    assert_eq!(sem.set_capacity(0), 1);
    assert!(sem.try_acquire(1).is_err());
}

#[test]
fn oversize_request_fails_at_once_and_blocks_nobody() {
    let sem = Semaphore::new(2);
    let oversize = ExceedsCapacity {
        requested: 3,
        capacity: 2,
    };
    assert_eq!(
        sem.try_acquire(3).unwrap_err(),
        TryAcquireError::ExceedsCapacity(oversize)
    );

    let holder = sem.try_acquire(2).unwrap();
    // Even with no units free, the oversize request does not park.
    let mut big = Task::new(sem.acquire(3));
    assert_eq!(
        big.ready().unwrap_err(),
        AcquireError::ExceedsCapacity(oversize)
    );
    assert_eq!(sem.waiters(), 0);
    drop(holder);
    // And it left nothing behind that would block a fitting request.
    assert!(sem.try_acquire(2).is_ok());
}

#[test]
fn release_returns_exactly_the_units_once() {
    let sem = Semaphore::new(5);
    let a = sem.try_acquire(2).unwrap();
    let b = sem.try_acquire(3).unwrap();
    assert_eq!((a.units(), b.units(), sem.available()), (2, 3, 0));
    a.release();
    assert_eq!(sem.available(), 2);
    drop(b);
    assert_eq!(sem.available(), 5);
}

#[test]
fn close_wakes_parked_waiters_with_closed_and_keeps_permits_valid() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut a = Task::new(sem.acquire(1));
    let mut b = Task::new(sem.acquire(2));
    a.pending();
    b.pending();

    sem.close();
    assert!(sem.is_closed());
    assert_eq!((a.wakes(), b.wakes(), sem.waiters()), (1, 1, 0));
    assert_eq!(a.ready().unwrap_err(), AcquireError::Closed);
    assert_eq!(b.ready().unwrap_err(), AcquireError::Closed);

    // Later acquires fail at once.
    assert_eq!(sem.try_acquire(1).unwrap_err(), TryAcquireError::Closed);
    assert_eq!(
        Task::new(sem.acquire(1)).ready().unwrap_err(),
        AcquireError::Closed
    );

    // The held permit is still valid and returns its units.
    assert_eq!(held.units(), 2);
    drop(held);
    assert_eq!(sem.available(), 2);
}

#[test]
fn a_grant_made_before_close_is_still_delivered() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut a = Task::new(sem.acquire(1));
    a.pending();
    drop(held); // grants `a`, which has not been polled since
    sem.close();
    let permit = a.ready().expect("granted before close");
    assert_eq!(sem.available(), 0);
    drop(permit);
    assert_eq!(sem.available(), 1);
}

#[cfg(feature = "alloc")]
#[test]
fn owned_permit_moves_to_another_thread() {
    let sem = Arc::new(Semaphore::new(3));
    let permit = futures_lite::future::block_on(sem.clone().acquire_owned(2)).unwrap();
    let also = sem.clone().try_acquire_owned(1).unwrap();
    assert_eq!(sem.available(), 0);
    std::thread::spawn(move || {
        assert_eq!(permit.units(), 2);
        drop(permit);
    })
    .join()
    .unwrap();
    assert_eq!(sem.available(), 2);
    assert_eq!(also.semaphore().available(), 2);
}

#[cfg(feature = "alloc")]
#[test]
fn owned_acquire_parks_and_is_granted_like_a_borrowed_one() {
    let sem = Arc::new(Semaphore::new(1));
    let held = sem.clone().try_acquire_owned(1).unwrap();
    let mut waiter = Task::new(sem.clone().acquire_owned(1));
    waiter.pending();
    assert_eq!(sem.waiters(), 1);
    drop(held);
    assert_eq!(waiter.wakes(), 1);
    let permit = waiter.ready().unwrap();
    assert_eq!((permit.units(), sem.available()), (1, 0));
}

#[test]
#[should_panic(expected = "polled after completion")]
fn polling_after_completion_panics() {
    let sem = Semaphore::new(1);
    let mut task = Task::new(sem.acquire(1));
    let _permit = task.ready().unwrap();
    let _ = task.poll();
}

#[test]
fn errors_say_what_happened() {
    let e = TryAcquireError::ExceedsCapacity(ExceedsCapacity {
        requested: 3,
        capacity: 2,
    });
    assert_eq!(
        e.to_string(),
        "request for 3 units exceeds the capacity of 2 units"
    );
    assert_eq!(
        TryAcquireError::NoUnits.to_string(),
        "not enough units are free right now"
    );
    assert_eq!(AcquireError::Closed.to_string(), "semaphore closed");
}

#[test]
fn debug_shows_the_state() {
    let sem = Semaphore::new(2);
    let _p = sem.try_acquire(1).unwrap();
    assert_eq!(
        format!("{sem:?}"),
        "Semaphore { capacity: 2, available: 1, waiters: 0, closed: false }"
    );
}

/// The contract's size bounds on 64-bit targets: an unpolled acquire future at
/// most 64 bytes, a permit 16, and the semaphore one 128-byte block.
#[test]
#[cfg(all(target_pointer_width = "64", feature = "alloc"))]
fn futures_permits_and_the_semaphore_stay_small() {
    let sem = Arc::new(Semaphore::new(1));
    assert!(size_of_val(&sem.acquire(1)) <= 64);
    assert!(size_of_val(&Arc::clone(&sem).acquire_owned(1)) <= 64);
    // What docs/benchmarks.md reports (S8): the units, the phase and a ticket of
    // one word beside the semaphore's handle.
    assert_eq!(size_of_val(&sem.acquire(1)), 32);
    assert_eq!(size_of_val(&sem.try_acquire(1).unwrap()), 16);
    assert_eq!(
        size_of_val(&Arc::clone(&sem).try_acquire_owned(1).unwrap()),
        16
    );
    assert_eq!(size_of::<Semaphore>(), 128);
    assert_eq!(align_of::<Semaphore>(), 128);
}
