//! Live capacity against releases and a parked head: once a shrink has returned,
//! nothing is granted beyond the new capacity — not by a fast path that meets a
//! returned unit first, not by a server that meets one mid-pass — and a grow
//! serves the parked head.

use core::future::Future;
use core::pin::Pin;
use core::task::{Poll, Waker};
use std::boxed::Box;
use std::sync::Arc;

use admit::{AcquireError, Semaphore};
use loom::future::block_on;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, poll_once, shared, try_acquire_shared, without, Safeguard,
    SharedPermit,
};

/// Capacity 2 shrinks to 1 while both units are held; then one comes back. A
/// `try_acquire` racing that release must fail: the returned unit retires.
fn fast_path_after_a_shrink() {
    let sem = shared(Semaphore::new(2));
    let first = try_acquire_shared(&sem, 1).unwrap();
    let second = try_acquire_shared(&sem, 1).unwrap();
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
        Safeguard::RetiringBlocksFastPath,
        "granted past the lowered capacity",
        fast_path_after_a_shrink,
    );
}

/// Capacity 3, all held, a waiter parked for one unit. Once the shrink to 1 has
/// returned, two units come back on two threads, whose serving passes race; the
/// third stays held, so the capacity is full and the waiter must stay parked.
fn server_pass_after_a_shrink() {
    let sem = shared(Semaphore::new(3));
    let held = [(); 3].map(|()| try_acquire_shared(&sem, 1).unwrap());
    let mut waiter = Box::pin(acquire_shared(&sem, 1));
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

/// Negative control: a take for the head that ignores `RETIRING` (set while
/// units are owed) hands a returned unit to the waiter.
#[test]
fn without_paying_first_a_server_grants_a_unit_owed() {
    without(
        Safeguard::RetiringStopsGrants,
        "granted past the lowered capacity",
        server_pass_after_a_shrink,
    );
}

/// Capacity 2, both units held, two requests parked (2 units, then 1). The
/// holder lets go, and its serving pass races a shrink to 1 and a grow back to 2
/// on another thread. However they meet, at most 2 units are granted: a pass
/// that settled before the shrink posted must not hand out the units the shrink
/// owes (the shrink's free ones, or the grow's) as if nothing were owed.
fn a_pass_in_flight_meets_a_shrink_and_a_grow() {
    let sem = shared(Semaphore::new(2));
    let held = try_acquire_shared(&sem, 2).unwrap();
    let mut first = Box::pin(acquire_shared(&sem, 2));
    let mut second = Box::pin(acquire_shared(&sem, 1));
    assert!(poll_once(first.as_mut(), Waker::noop()).is_pending());
    assert!(poll_once(second.as_mut(), Waker::noop()).is_pending());
    let resizer = {
        let sem = sem.clone();
        thread::spawn(move || {
            sem.set_capacity(1);
            sem.set_capacity(2);
        })
    };
    drop(held);
    resizer.join().unwrap();
    // Both polled before either permit goes back.
    let first = poll_once(first.as_mut(), Waker::noop());
    let second = poll_once(second.as_mut(), Waker::noop());
    let units = |granted: &Poll<Result<SharedPermit, _>>| match granted {
        Poll::Ready(Ok(permit)) => permit.units(),
        // The shrink to 1 fails the request for 2.
        Poll::Ready(Err(AcquireError::ExceedsCapacity(_))) | Poll::Pending => 0,
        Poll::Ready(Err(e)) => panic!("unexpected {e:?}"),
    };
    let granted = units(&first) + units(&second);
    assert!(
        granted <= 2,
        "granted past the capacity: {granted} units of 2"
    );
}

#[test]
fn a_pass_in_flight_grants_nothing_a_shrink_owes() {
    loom::model(a_pass_in_flight_meets_a_shrink_and_a_grow);
}

/// Negative control: a take for the head that ignores `RETIRING` grants the
/// units of the grow (or the shrink's free one) to both requests.
#[test]
fn without_retiring_stopping_grants_a_pass_in_flight_grants_units_owed() {
    without(
        Safeguard::RetiringStopsGrants,
        "granted past the capacity",
        a_pass_in_flight_meets_a_shrink_and_a_grow,
    );
}

/// A request whose first poll returned `first`, and which no release will
/// serve, has failed with `ExceedsCapacity` by the time its racers returned:
/// at its first poll, or parked and then swept.
fn assert_failed_over_the_capacity(
    request: Pin<&mut impl Future<Output = Result<SharedPermit, AcquireError>>>,
    first: Poll<Result<SharedPermit, AcquireError>>,
) {
    let outcome = match first {
        Poll::Ready(outcome) => outcome,
        Poll::Pending => match poll_once(request, Waker::noop()) {
            Poll::Ready(outcome) => outcome,
            Poll::Pending => panic!("a request over the new capacity is still parked"),
        },
    };
    assert!(
        matches!(outcome, Err(AcquireError::ExceedsCapacity(_))),
        "{outcome:?}"
    );
}

/// Capacity 2, one unit held for good: a request for 2 checks the capacity and
/// parks while a shrink to 1 races it. Once both have returned the request has
/// failed with `ExceedsCapacity`, however they met: no release will come to
/// serve it, so the shrink's sweep or the parker itself must see it.
fn a_request_checked_before_a_shrink() {
    let sem = shared(Semaphore::new(2));
    let held = try_acquire_shared(&sem, 1).unwrap();
    let shrinker = {
        let sem = sem.clone();
        thread::spawn(move || {
            sem.set_capacity(1);
        })
    };
    let mut request = Box::pin(acquire_shared(&sem, 2));
    let first = poll_once(request.as_mut(), Waker::noop());
    shrinker.join().unwrap();
    assert_failed_over_the_capacity(request.as_mut(), first);
    drop(held);
    assert_idle(&sem);
}

#[test]
fn a_request_over_a_capacity_lowered_while_it_parks_fails() {
    loom::model(a_request_checked_before_a_shrink);
}

/// Negative control: a parker that does not check the capacity after its join
/// stays parked when the shrink's sweep ran before it was published.
#[test]
fn without_the_check_after_the_join_the_request_stays_parked() {
    without(
        Safeguard::JoinSweepsOversize,
        "a request over the new capacity is still parked",
        a_request_checked_before_a_shrink,
    );
}

/// Capacity 3, two units held, a request for 2 parked (one unit free, and the
/// head's arrival taken in by a pass); one of the held units is forgotten (the
/// capacity falls to 2) while a request for 3 parks behind the first. Once both have returned, the request for 3 has
/// failed: the head waits for a unit that will not come back in the model, so
/// only the forget's sweep or the parker's own check can answer it.
fn a_request_parking_behind_a_head_as_a_forget_lowers_the_capacity() {
    let sem = shared(Semaphore::new(3));
    let forgotten = try_acquire_shared(&sem, 1).unwrap();
    let kept = try_acquire_shared(&sem, 1).unwrap();
    let returned = try_acquire_shared(&sem, 1).unwrap();
    let mut head = Box::pin(acquire_shared(&sem, 2));
    assert!(poll_once(head.as_mut(), Waker::noop()).is_pending());
    // A pass (the release's) takes the head's arrival in: `ARRIVED` is clear
    // again when the race begins.
    drop(returned);
    let forgetter = thread::spawn(move || forgotten.forget());
    let mut request = Box::pin(acquire_shared(&sem, 3));
    let first = poll_once(request.as_mut(), Waker::noop());
    forgetter.join().unwrap();
    assert_failed_over_the_capacity(request.as_mut(), first);
    drop(kept);
    drop(block_on(head).expect("not closed"));
    assert_eq!(sem.capacity(), 2);
    assert_idle(&sem);
}

#[test]
fn a_request_over_a_capacity_a_forget_lowered_fails_behind_the_head() {
    loom::model(a_request_parking_behind_a_head_as_a_forget_lowers_the_capacity);
}

/// Negative control, with `alloc`: a forget that marks the capacity lowered
/// without ordering itself against the joins lets a parker and the sweep miss
/// each other. (Without `alloc` the model passes with the mechanism off: the
/// parker links its node and the sweep walks the list inside the critical
/// section, so a walk that missed the node came before the link, which then sees
/// the lowered capacity.)
#[cfg(feature = "alloc")]
#[test]
fn without_ordering_the_forget_a_request_behind_the_head_stays_parked() {
    without(
        Safeguard::ForgetOrdersAfterJoins,
        "a request over the new capacity is still parked",
        a_request_parking_behind_a_head_as_a_forget_lowers_the_capacity,
    );
}

/// A grow racing a release and a parked head that needs both the grown unit and
/// the released one: the head is granted, whichever comes first.
#[test]
fn a_grow_serves_the_parked_head() {
    loom::model(|| {
        let sem = shared(Semaphore::new(1));
        let held = try_acquire_shared(&sem, 1).unwrap();
        let mut head = Box::pin(acquire_shared(&sem, 2));
        // More than the capacity: fails at once; grow first, then park.
        sem.add_units(1);
        let other = try_acquire_shared(&sem, 1).unwrap();
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
        let sem = shared(Semaphore::new(3));
        let held = try_acquire_shared(&sem, 2).unwrap();
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
        let sem = shared(Semaphore::new(4));
        let held = try_acquire_shared(&sem, 3).unwrap();
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

/// Negative control: a lowering marked by a plain store can be ordered before
/// a pass's `swap(false)` that read an earlier mark, which then consumes it
/// without seeing the request that made it. (With `alloc` only, as the control
/// above.)
#[cfg(feature = "alloc")]
#[test]
fn without_an_rmw_mark_a_parkers_sweep_is_lost() {
    without(
        Safeguard::LoweredMarkIsRmw,
        "a request over the new capacity is still parked",
        a_request_parking_behind_a_head_as_a_forget_lowers_the_capacity,
    );
}
