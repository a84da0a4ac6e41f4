//! No needless serving: an operation takes the serving role only when the server
//! may have work — a request that may now fit, a cancelled node to let go of, a
//! retirement, a close.
//!
//! Serving is idempotent (a pass with nothing to do takes the role, finds nothing
//! and lets go), so an extra pass breaks no other property, and the contract's
//! tests cannot see one. It costs a CAS on the semaphore's block, which every
//! other thread then misses; in the oversubscribed storm (docs/benchmarks.md, S10)
//! units are rarely free, so most cancels skip their pass. The skips are checked
//! here, by counting the role's takes, each beside the case that must serve.

use core::future::Future;
use core::pin::{pin, Pin};
use core::task::{Context, Poll, Waker};

use crate::semaphore::Semaphore;

/// How many times `f` took the serving role.
fn serves(sem: &Semaphore, f: impl FnOnce()) -> usize {
    let before = sem.role.roles_taken();
    f();
    sem.role.roles_taken() - before
}

fn poll<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// With exactly one unit free and nobody waiting: a head that does not fit, with
/// a request behind it that would, is cancelled. It may have been blocking that
/// request (Go's canceled-waiter-at-the-front), so the cancel serves, and the
/// request behind is granted.
fn a_cancelled_head_with_a_unit_free_serves(sem: &Semaphore) {
    let mut head = pin!(Some(sem.acquire(2)));
    assert!(poll(head.as_mut().as_pin_mut().unwrap()).is_pending());
    let mut behind = pin!(sem.acquire(1));
    assert!(poll(behind.as_mut()).is_pending());
    assert_eq!(
        serves(sem, || head.set(None)),
        1,
        "a cancel of the head with a unit free"
    );
    assert!(poll(behind.as_mut()).is_ready());
}

#[test]
fn a_release_serves_only_when_someone_waits() {
    let sem = Semaphore::new(2);
    let one = sem.try_acquire(1).unwrap();
    assert_eq!(serves(&sem, || drop(one)), 0);

    let both = sem.try_acquire(2).unwrap();
    let mut waiter = pin!(sem.acquire(1));
    assert!(poll(waiter.as_mut()).is_pending());
    assert_eq!(serves(&sem, || drop(both)), 1);
    assert!(poll(waiter.as_mut()).is_ready());
}

#[test]
fn a_grow_serves_only_when_someone_waits() {
    let sem = Semaphore::new(1);
    assert_eq!(serves(&sem, || sem.add_units(1)), 0);
    assert_eq!(serves(&sem, || assert_eq!(sem.set_capacity(3), 2)), 0);

    let all = sem.try_acquire(3).unwrap();
    let mut waiter = pin!(sem.acquire(1));
    assert!(poll(waiter.as_mut()).is_pending());
    assert_eq!(serves(&sem, || sem.add_units(1)), 1);
    assert!(poll(waiter.as_mut()).is_ready());
    drop(all);
}

/// A request for the whole capacity parks like any other: its join reads the
/// capacity again (for a lowering it may have missed) and finds it fits.
#[test]
fn a_park_for_the_whole_capacity_does_not_serve() {
    let sem = Semaphore::new(2);
    let all = sem.try_acquire(2).unwrap();
    let mut waiter = pin!(sem.acquire(2));
    assert_eq!(
        serves(&sem, || assert!(poll(waiter.as_mut()).is_pending())),
        0
    );
    assert_eq!(serves(&sem, || drop(all)), 1);
    assert!(poll(waiter.as_mut()).is_ready());
}

#[test]
fn an_unchanged_capacity_does_not_serve() {
    let sem = Semaphore::new(2);
    let all = sem.try_acquire(2).unwrap();
    let mut waiter = pin!(sem.acquire(1));
    assert!(poll(waiter.as_mut()).is_pending());
    assert_eq!(serves(&sem, || assert_eq!(sem.set_capacity(2), 2)), 0);
    assert_eq!(serves(&sem, || assert_eq!(sem.set_capacity(1), 2)), 1);
    assert!(poll(waiter.as_mut()).is_pending());
    drop(all);
}

#[test]
fn a_close_serves_only_when_someone_waits() {
    let idle = Semaphore::new(1);
    assert_eq!(serves(&idle, || idle.close()), 0);

    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut waiter = pin!(sem.acquire(1));
    assert!(poll(waiter.as_mut()).is_pending());
    assert_eq!(serves(&sem, || sem.close()), 1);
    assert!(poll(waiter.as_mut()).is_ready());
    drop(held);
}

/// The pass that finds the list empty and the retirement paid clears both flags
/// together, so the releases after it find nothing owed and do not serve.
#[cfg(feature = "alloc")]
#[test]
fn releases_stop_serving_once_the_queue_and_the_retirement_are_done() {
    use alloc::boxed::Box;

    let sem = Semaphore::new(2);
    let (first, second) = (sem.try_acquire(1).unwrap(), sem.try_acquire(1).unwrap());
    assert_eq!(sem.set_capacity(1), 2); // nothing free: one unit owed
    let mut parked = Box::pin(sem.acquire(1));
    assert!(poll(parked.as_mut()).is_pending());
    // No unit free: its cancel entry waits for a server.
    drop(parked);
    // This release's pass lets the cancelled node go, retires the unit and finds
    // nothing left (no free unit, no waiter, no debt): it clears `QUEUED` and
    // `RETIRING` together.
    assert_eq!(serves(&sem, || drop(first)), 1);
    assert_eq!(sem.available(), 0);
    assert_eq!(serves(&sem, || drop(second)), 0);
    assert_eq!((sem.capacity(), sem.available()), (1, 1));
}

/// With `alloc` a park serves only when its join says so, and a won cancel only
/// when a unit is free (with none, nobody behind it could fit): its cell goes
/// back to the list without a server. (Without `alloc` a cancel that could not
/// withdraw its node serves, since the future's drop waits for a server.)
#[cfg(feature = "alloc")]
#[test]
fn park_and_cancel_serve_only_when_there_is_work() {
    use alloc::boxed::Box;

    let sem = Semaphore::new(2);
    let both = sem.try_acquire(2).unwrap();
    // Nothing free: parks join and leave, and cancels (of the last request, of
    // one with others behind it, of the head) leave their cells to the list.
    let mut first = Box::pin(sem.acquire(1));
    let mut second = Box::pin(sem.acquire(1));
    assert_eq!(
        serves(&sem, || {
            assert!(poll(first.as_mut()).is_pending());
            assert!(poll(second.as_mut()).is_pending());
            let mut third = pin!(sem.acquire(1));
            assert!(poll(third.as_mut()).is_pending());
        }),
        0,
        "parks, and a cancel of the last, with no unit free"
    );
    assert_eq!(serves(&sem, || drop(first)), 0, "a cancel of the head");
    assert_eq!(serves(&sem, || drop(second)), 0, "a cancel of the last");
    assert_eq!(sem.waiters(), 0);

    drop(both);
    let one = sem.try_acquire(1).unwrap();
    a_cancelled_head_with_a_unit_free_serves(&sem);
    drop(one);
}

/// Memory follows the requests parked at once, not the callers that gave up: a
/// cancel that completes a segment removes it, with the role held elsewhere. If
/// only the role holder let go of cancelled cells, then while it is descheduled
/// every cancel would leave its cell behind (in the oversubscribed storm, S10,
/// hundreds of MiB in half a second).
#[cfg(feature = "alloc")]
#[test]
fn cancelled_requests_are_let_go_while_the_server_is_descheduled() {
    use alloc::boxed::Box;

    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    assert!(sem.role.take(), "a server, descheduled mid-pass");
    let callers = 10_000;
    let mut most_alive = 0;
    for _ in 0..callers / 2 {
        // Two callers park and give up, the first with the second behind it.
        let mut first = Box::pin(sem.acquire(1));
        assert!(poll(first.as_mut()).is_pending());
        let mut second = Box::pin(sem.acquire(1));
        assert!(poll(second.as_mut()).is_pending());
        drop(first);
        drop(second);
        most_alive = most_alive.max(sem.queue.segments.live_segments());
    }
    assert_eq!(sem.waiters(), 0);
    sem.serve_as_holder();
    drop(held);
    assert_eq!(sem.available(), 1);
    // The cursor's segment, and the one being filled.
    assert!(
        most_alive <= 2,
        "{most_alive} segments alive for {callers} callers that gave up while the server was away"
    );
}

/// Without `alloc` a park serves only when its join says so, and a won cancel
/// serves only when a unit is free, wherever its node was: as with cells.
#[cfg(not(feature = "alloc"))]
#[test]
#[allow(clippy::std_instead_of_alloc)] // this build has no `alloc` crate
fn park_and_cancel_serve_only_when_there_is_work() {
    use std::boxed::Box;

    let sem = Semaphore::new(2);
    let both = sem.try_acquire(2).unwrap();
    assert_eq!(
        serves(&sem, || {
            let mut parked = pin!(sem.acquire(1));
            assert!(poll(parked.as_mut()).is_pending());
        }),
        0,
        "park, then a cancel with no unit free"
    );
    let mut first = Box::pin(sem.acquire(1));
    let mut second = Box::pin(sem.acquire(1));
    assert_eq!(
        serves(&sem, || {
            assert!(poll(first.as_mut()).is_pending());
            assert!(poll(second.as_mut()).is_pending());
        }),
        0,
        "two parks behind a full semaphore"
    );
    assert_eq!(
        serves(&sem, || drop(first)),
        0,
        "a cancel at the head, no unit free"
    );
    assert_eq!(sem.waiters(), 1);
    drop(second);
    assert_eq!(sem.waiters(), 0);

    drop(both);
    let one = sem.try_acquire(1).unwrap();
    a_cancelled_head_with_a_unit_free_serves(&sem);
    let mut lone = Box::pin(sem.acquire(2));
    assert!(poll(lone.as_mut()).is_pending());
    assert_eq!(serves(&sem, || drop(lone)), 1, "a cancel with a unit free");
    drop(one);
}

/// A pool's checkout and return on a counter (`Semaphore::counting`) serve
/// nobody while nobody waits and the semaphore is open; after a close, a
/// forget serves, for a drain that may now be complete.
#[test]
fn a_counters_forget_and_grow_serve_only_for_a_waiter_or_a_drain() {
    let sem = Semaphore::counting(2);
    let one = sem.try_acquire(1).unwrap();
    assert_eq!(serves(&sem, || one.forget()), 0, "a checkout");
    assert_eq!(serves(&sem, || sem.add_units(1)), 0, "a return");

    let both = sem.try_acquire(2).unwrap();
    let mut waiter = pin!(sem.acquire(1));
    assert!(poll(waiter.as_mut()).is_pending());
    assert_eq!(serves(&sem, || sem.add_units(1)), 1, "a return to a waiter");
    assert!(poll(waiter.as_mut()).is_ready());

    let mut drain = pin!(sem.drain());
    assert!(poll(drain.as_mut()).is_pending());
    assert_eq!(
        serves(&sem, || both.forget()),
        1,
        "the last forget, to a drain"
    );
    assert!(poll(drain.as_mut()).is_ready());
}
