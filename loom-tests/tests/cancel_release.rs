//! Cancel safety: dropping an acquire future at any point — before its first poll,
//! while parked (at the head), after a grant it was not polled again to see — racing
//! with a release loses no unit and strands no waiter behind it.

use core::task::Waker;
use std::boxed::Box;

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, poll_once, shared, try_acquire_shared, without, CountingWaker,
    Safeguard, DEADLOCK, RACE,
};

/// A future dropped before its first poll took nothing and is in nobody's way.
#[test]
fn drop_before_first_poll() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(1));
        let held = try_acquire_shared(&semaphore, 1).unwrap();
        let never_polled = acquire_shared(&semaphore, 1);

        let canceller = thread::spawn(move || drop(never_polled));
        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || drop(block_on(semaphore.acquire(1)).expect("not closed")))
        };
        drop(held);

        canceller.join().unwrap();
        waiter.join().unwrap();
        assert_idle(&semaphore);
    });
}

/// Go's canceled-waiter-at-the-front bug: X (three units) parks at the head and can
/// never be served while one unit stays held; Y (one unit) parks behind it although
/// a unit is free. X is re-polled and then dropped while another unit is released
/// and Y polls: Y must be granted whichever comes first (if the release finds X
/// still at the head, only the drop can hand Y its unit), and X, which could never
/// be served, is never woken.
#[test]
fn drop_parked_head_serves_the_waiter_behind() {
    loom::model(parked_head_dropped);
}

/// Negative control: a cancel that does not ask for service leaves Y parked
/// behind the departed head with its unit free.
#[test]
fn drop_parked_head_without_serving_strands_the_waiter_behind() {
    without(Safeguard::CancelServes, DEADLOCK, parked_head_dropped);
}

fn parked_head_dropped() {
    let semaphore = shared(Semaphore::new(3));
    let kept = semaphore.try_acquire(1).unwrap();
    let released = semaphore.try_acquire(1).unwrap();

    let (x_waker, x_wakes) = CountingWaker::new();
    let mut x = Box::pin(acquire_shared(&semaphore, 3));
    assert!(poll_once(x.as_mut(), &x_waker).is_pending());
    let mut y = Box::pin(semaphore.acquire(1));
    assert!(poll_once(y.as_mut(), Waker::noop()).is_pending());
    assert_eq!(semaphore.waiters(), 2);

    let (repoll_waker, repoll_wakes) = CountingWaker::new();
    let canceller = thread::spawn(move || {
        // Parked: the re-poll only swaps the waker, then the future goes.
        assert!(poll_once(x.as_mut(), &repoll_waker).is_pending());
        drop(x);
    });
    drop(released);
    let permit = block_on(y).expect("not closed");
    assert_eq!(permit.units(), 1);
    drop(permit);

    canceller.join().unwrap();
    assert_eq!(
        x_wakes.wakes() + repoll_wakes.wakes(),
        0,
        "X woken needlessly"
    );
    drop(kept);
    assert_idle(&semaphore);
}

/// X parks at the head for every unit, Y behind it. The release that can grant X
/// races with X's drop: the drop may unlink a parked X, meet X mid-grant, or find X
/// granted and not yet polled; in each case Y is granted and the units come back.
#[test]
fn drop_racing_the_grant() {
    loom::model(grant_racing_drop);
}

/// Negative control: a grant published by a blind store instead of the phase CAS
/// overwrites a won cancel: server and canceller then both take the waker, a race
/// on the node's cell that loom reports.
#[test]
fn drop_racing_a_blind_grant_loses_units() {
    without(Safeguard::PhaseCas, RACE, grant_racing_drop);
}

/// Negative control: a cancel that finds its node granted and does not release
/// the units loses them, and Y waits for them for ever.
#[test]
fn drop_finding_a_grant_must_release_it() {
    without(Safeguard::CancelReleasesGrant, DEADLOCK, grant_racing_drop);
}

/// Negative control, with `alloc`: a grant that lost to the cancel and keeps the
/// units it took loses them, and Y waits for them for ever. (Without `alloc` a
/// grant takes its units inside the section that resolves the request, which a
/// cancel cannot interleave: no grant loses to a cancel.)
#[cfg(feature = "alloc")]
#[test]
fn grant_losing_to_the_drop_must_give_the_units_back() {
    without(Safeguard::GrantGivesBack, DEADLOCK, grant_racing_drop);
}

fn grant_racing_drop() {
    let semaphore = shared(Semaphore::new(2));
    let held = semaphore.try_acquire(2).unwrap();

    let (x_waker, x_wakes) = CountingWaker::new();
    let mut x = Box::pin(acquire_shared(&semaphore, 2));
    assert!(poll_once(x.as_mut(), &x_waker).is_pending());
    let mut y = Box::pin(semaphore.acquire(1));
    assert!(poll_once(y.as_mut(), Waker::noop()).is_pending());

    let canceller = thread::spawn(move || drop(x));
    drop(held);
    drop(block_on(y).expect("not closed"));

    canceller.join().unwrap();
    assert!(x_wakes.wakes() <= 1, "X woken more than once");
    assert_idle(&semaphore);
}

/// Deterministically granted but never polled again: the drop returns X's units
/// and they reach Y, which is parked behind and polling on another thread.
#[test]
fn drop_after_grant_before_repoll() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(2));
        let held = semaphore.try_acquire(2).unwrap();

        let (x_waker, x_wakes) = CountingWaker::new();
        let mut x = Box::pin(acquire_shared(&semaphore, 2));
        assert!(poll_once(x.as_mut(), &x_waker).is_pending());
        let mut y = Box::pin(acquire_shared(&semaphore, 1));
        assert!(poll_once(y.as_mut(), Waker::noop()).is_pending());

        drop(held);
        // X holds both units now, in its node; Y still waits behind.
        assert_eq!(x_wakes.wakes(), 1);
        assert_eq!(semaphore.available(), 0);
        assert_eq!(semaphore.waiters(), 1);

        let canceller = thread::spawn(move || drop(x));
        let permit = block_on(y).expect("not closed");
        assert_eq!(permit.units(), 1);
        drop(permit);

        canceller.join().unwrap();
        assert_idle(&semaphore);
    });
}

/// X parks at the head for both units (both held), Y behind it for one. X is
/// dropped while one unit comes back. The cancel finds no unit free and does not
/// serve, or finds the unit and serves; the release's server finds X gone, or
/// still there (and stops at it). Y must be granted either way: the cancel's
/// look at the free units cannot miss a release whose server missed the cancel.
fn cancelled_head_with_no_unit_free() {
    let semaphore = shared(Semaphore::new(2));
    let first = semaphore.try_acquire(1).unwrap();
    let second = semaphore.try_acquire(1).unwrap();
    let mut x = Box::pin(acquire_shared(&semaphore, 2));
    assert!(poll_once(x.as_mut(), Waker::noop()).is_pending());
    let mut y = Box::pin(semaphore.acquire(1));
    assert!(poll_once(y.as_mut(), Waker::noop()).is_pending());

    let canceller = thread::spawn(move || drop(x));
    drop(first);
    drop(block_on(y).expect("not closed"));
    canceller.join().unwrap();
    drop(second);
    assert_idle(&semaphore);
}

#[test]
fn a_cancel_with_no_unit_free_loses_no_wake_up() {
    loom::model(cancelled_head_with_no_unit_free);
}

/// Negative control, with `alloc`: a cancel that counts itself out with a relaxed
/// write and reads the state word with a load can miss the server that stops at
/// X (store buffering): Y waits for ever with its unit free. (Without `alloc` the
/// server reads the units inside the section, which the cancel enters after.)
#[cfg(feature = "alloc")]
#[test]
fn a_cancel_read_by_a_load_misses_the_stopped_server() {
    without(
        Safeguard::CancelReadsByRmw,
        DEADLOCK,
        cancelled_head_with_no_unit_free,
    );
}
