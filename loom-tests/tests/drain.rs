//! Drain against the last releases: the drain waiter completes once every unit is
//! back, whichever release is last and whenever the drain parks.

use core::task::Waker;
use std::boxed::Box;

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{
    acquire_shared, poll_once, shared, try_acquire_shared, without, Safeguard, DEADLOCK,
};

/// The last unit comes back on another thread while the drain closes, checks,
/// parks and joins.
fn last_release_against_the_drain() {
    let sem = shared(Semaphore::new(2));
    let last = try_acquire_shared(&sem, 2).unwrap();
    let releaser = thread::spawn(move || drop(last));
    block_on(sem.drain());
    assert_eq!(sem.available(), 2, "drained with a unit still out");
    releaser.join().unwrap();
    assert!(sem.is_closed());
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn drain_completes_with_the_last_release() {
    loom::model(last_release_against_the_drain);
}

/// Negative control: if a close pass left `QUEUED` clear over a waiting drain, the
/// last release would serve nobody.
#[test]
fn without_queued_the_last_release_misses_the_drain() {
    without(
        Safeguard::DrainKeepsQueued,
        DEADLOCK,
        last_release_against_the_drain,
    );
}

/// A pass that began before the close meets the drain waiter parked after it:
/// `W` waits for the held unit; the release that grants it runs a pass while the
/// drain closes the semaphore and parks behind `W`, which then gives up (a
/// cancel, or the return of its grant). The drain waiter must not be answered by
/// that pass (it found the semaphore closed mid-way): it completes once the unit
/// is back, never with `Closed`.
fn drain_parking_during_a_pass() {
    let sem = shared(Semaphore::new(1));
    let held = try_acquire_shared(&sem, 1).unwrap();
    let mut w = Box::pin(acquire_shared(&sem, 1));
    assert!(poll_once(w.as_mut(), Waker::noop()).is_pending());
    let releaser = thread::spawn(move || drop(held));
    let mut drain = Box::pin(sem.drain());
    // While `W` is alive the unit is out (held, or granted to `W`) unless the
    // close failed `W`: a drain done by now must find it back.
    let drained_early = poll_once(drain.as_mut(), Waker::noop()).is_ready()
        || poll_once(drain.as_mut(), Waker::noop()).is_ready();
    assert!(
        !drained_early || sem.available() == 1,
        "the drain completed with a unit still out"
    );
    drop(w);
    if !drained_early {
        block_on(drain);
    }
    assert_eq!(sem.available(), 1, "drained with a unit still out");
    releaser.join().unwrap();
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn a_drain_parked_during_a_pass_waits_for_the_units() {
    loom::model(drain_parking_during_a_pass);
}

/// Negative control: a pass that closes the head itself when it finds the
/// semaphore closed mid-way answers the drain waiter with `Closed`, and the drain
/// completes while `W` holds the unit. With debug assertions the drain's own
/// check reports it first.
#[test]
fn a_pass_closing_mid_way_answers_the_drain() {
    without(
        Safeguard::ClosedMidPassWaits,
        if cfg!(debug_assertions) {
            "a drain waiter ended Err(Closed)"
        } else {
            "the drain completed with a unit still out"
        },
        drain_parking_during_a_pass,
    );
}

/// Capacity 2, one unit held; a drain races a shrink to 1, which moves the
/// capacity first and posts the unit it owes after. The drain must not count the
/// free unit as every unit back against the lowered capacity: it completes only
/// once the held unit has come back (and retired).
fn drain_against_a_shrink() {
    let sem = shared(Semaphore::new(2));
    let held = try_acquire_shared(&sem, 1).unwrap();
    let shrinker = {
        let sem = sem.clone();
        thread::spawn(move || {
            sem.set_capacity(1);
        })
    };
    let mut drain = Box::pin(sem.drain());
    let first = poll_once(drain.as_mut(), Waker::noop());
    shrinker.join().unwrap();
    assert!(
        first.is_pending() && poll_once(drain.as_mut(), Waker::noop()).is_pending(),
        "the drain completed with a unit held"
    );
    drop(held);
    block_on(drain);
    assert_eq!((sem.capacity(), sem.available()), (1, 1));
}

#[test]
fn a_drain_racing_a_shrink_waits_for_the_held_unit() {
    loom::model(drain_against_a_shrink);
}

/// Negative control: a check that reads the capacity and the units while the
/// shrink is between its two changes sees the lowered capacity all free.
#[test]
fn without_the_resize_seqlock_the_drain_ends_with_a_unit_held() {
    without(
        Safeguard::ResizeSeqlock,
        "the drain completed with a unit held",
        drain_against_a_shrink,
    );
}

/// Capacity 1, nothing held; a drain races a grow to 2. Whether the drain's
/// checks meet the grow in flight or not, the drain completes: a check that
/// failed on the grow is made again when the grow ends, even though nothing
/// was queued when the grow released its unit.
fn drain_against_a_grow() {
    let sem = shared(Semaphore::new(1));
    let grower = {
        let sem = sem.clone();
        thread::spawn(move || {
            sem.add_units(1);
        })
    };
    block_on(sem.drain());
    grower.join().unwrap();
    assert_eq!((sem.capacity(), sem.available()), (2, 2));
}

#[test]
fn a_drain_racing_a_grow_completes() {
    loom::model(drain_against_a_grow);
}

/// Negative control: if the end of the grow does not serve for the check it
/// made fail, the drain waits for ever.
#[test]
fn without_the_deferred_serve_the_drain_misses_the_grow() {
    without(
        Safeguard::DeferredCheckServes,
        DEADLOCK,
        drain_against_a_grow,
    );
}

/// A counter's forget makes no serving pass unless the semaphore is closed, and
/// lowers the capacity outside the resize seqlock: a pool's checkout, racing a
/// drain that closes, checks and parks. The drain's check reads the capacity by
/// a read-modify-write: either it reads the forget's lowering, or the forget
/// reads it and then sees the drain's join (and serves it).
fn counter_forget_against_the_drain() {
    let sem = shared(Semaphore::counting(1));
    let held = try_acquire_shared(&sem, 1).unwrap();
    let forgetter = thread::spawn(move || held.forget());
    block_on(sem.drain());
    forgetter.join().unwrap();
    assert_eq!((sem.capacity(), sem.available()), (0, 0));
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn a_drain_completes_when_a_counters_last_permit_is_forgotten() {
    loom::model(counter_forget_against_the_drain);
}

/// Negative control: the check reads the capacity with a plain load, which
/// can miss the forget while the forget's read of the state word misses the
/// drain's join.
#[test]
fn without_the_checks_rmw_the_drain_misses_the_counters_forget() {
    without(
        Safeguard::CheckReadsCapacityByRmw,
        DEADLOCK,
        counter_forget_against_the_drain,
    );
}

/// A counter's grow, outside the seqlock, racing a drain and the return of
/// the last unit held: the grow raises the capacity before it adds the units,
/// so a check between the two says "not yet", and the grow's release then
/// serves the parked drain.
fn counter_grow_against_the_drain() {
    let sem = shared(Semaphore::counting(1));
    let held = try_acquire_shared(&sem, 1).unwrap();
    let grower = {
        let sem = sem.clone();
        thread::spawn(move || sem.add_units(1))
    };
    drop(held);
    block_on(sem.drain());
    grower.join().unwrap();
    assert_eq!((sem.capacity(), sem.available()), (2, 2));
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn a_drain_racing_a_counters_grow_completes() {
    loom::model(counter_grow_against_the_drain);
}
