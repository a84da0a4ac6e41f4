//! A parker's join racing the server: the join lands while a server is emptying
//! its list and clearing `QUEUED`, or just after the units it was refused came
//! back. Either way the parker is granted; nobody is left behind a cleared
//! `QUEUED` or with its units free and nobody serving.

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, shared, try_acquire_shared, without, Safeguard, DEADLOCK,
};

/// Two parkers and one release: the release's server grants the first and finds
/// its list empty just as the second, refused by `QUEUED`, pushes its node and
/// joins. The second's join must stop the server from clearing `QUEUED` (or be
/// absorbed), or it waits for ever: the first's later release sees no `QUEUED`.
fn join_while_the_server_clears() {
    let semaphore = shared(Semaphore::new(1));
    let held = try_acquire_shared(&semaphore, 1).unwrap();
    let parker = || {
        let semaphore = semaphore.clone();
        thread::spawn(move || drop(block_on(semaphore.acquire(1)).expect("not closed")))
    };
    let (first, second) = (parker(), parker());
    drop(held);
    first.join().unwrap();
    second.join().unwrap();
    assert_idle(&semaphore);
}

#[test]
fn a_join_during_the_servers_clear_is_seen() {
    loom::model(join_while_the_server_clears);
}

/// Negative control: a join that does not set `ARRIVED` lets the server clear
/// `QUEUED` over a parker it has not absorbed.
#[test]
fn without_arrived_a_join_is_lost() {
    without(Safeguard::Arrived, DEADLOCK, join_while_the_server_clears);
}

/// The waiter's fast path is refused while the unit is held; the release lands
/// before its join (so it sees no `QUEUED` and serves nobody). The join, finding
/// the unit back and nobody queued, must ask for service itself.
fn units_back_before_the_join() {
    let semaphore = shared(Semaphore::new(1));
    let held = try_acquire_shared(&semaphore, 1).unwrap();
    let releaser = thread::spawn(move || drop(held));
    drop(block_on(semaphore.acquire(1)).expect("not closed"));
    releaser.join().unwrap();
    assert_idle(&semaphore);
}

#[test]
fn a_join_finding_the_units_back_is_served() {
    loom::model(units_back_before_the_join);
}

/// Negative control: a join that finds the units back and leaves it at that
/// waits for a release that already happened.
#[test]
fn without_serving_on_units_back_the_waiter_is_stranded() {
    without(
        Safeguard::JoinServesUnitsBack,
        DEADLOCK,
        units_back_before_the_join,
    );
}

/// The first waiter is parked; the second pushes its node while the release's
/// server takes the arrivals, so the server grants the second before its join.
/// That join then sets `QUEUED` again over nobody: it must ask for service so
/// the flag is cleared, or the fast path stays refused with a unit free.
fn granted_before_its_join() {
    let semaphore = shared(Semaphore::new(4));
    let held = try_acquire_shared(&semaphore, 4).unwrap();
    let mut first = std::boxed::Box::pin(acquire_shared(&semaphore, 1));
    let first_poll = loom_tests::poll_once(first.as_mut(), core::task::Waker::noop());
    assert!(first_poll.is_pending());
    let second = {
        let semaphore = semaphore.clone();
        thread::spawn(move || block_on(acquire_shared(&semaphore, 2)).expect("not closed"))
    };
    drop(held);
    let second = second.join().unwrap();
    let first = block_on(first).expect("not closed");
    // One unit free, nobody waiting: the fast path must take it.
    assert_eq!(semaphore.waiters(), 0);
    let third = semaphore.try_acquire(1);
    assert!(
        third.is_ok(),
        "a stale QUEUED refused the fast path: {semaphore:?}"
    );
    drop((first, second, third));
    assert_idle(&semaphore);
}

#[test]
fn a_join_after_its_own_grant_leaves_no_stale_queued() {
    loom::model(granted_before_its_join);
}

/// Negative control: the join that finds its node granted does not ask for
/// service, and `QUEUED` stays set over an empty queue.
#[test]
fn without_serving_a_resolved_join_queued_goes_stale() {
    without(
        Safeguard::JoinServesResolved,
        "a stale QUEUED refused the fast path",
        granted_before_its_join,
    );
}

/// A counter's request above the capacity (`Semaphore::counting(0)`, two units)
/// races the `add_units` that makes room for it: the units come before its
/// fast path, between its refusal and its join, or after it parked. It parks
/// rather than failing, and is granted in each case: by its join that finds
/// the units back, or by the pass the grow's release asks for.
fn counter_grows_under_a_parker() {
    let semaphore = shared(Semaphore::counting(0));
    let adder = {
        let semaphore = semaphore.clone();
        thread::spawn(move || semaphore.add_units(2))
    };
    let permit = block_on(acquire_shared(&semaphore, 2))
        .expect("a counter's request above the capacity waits for it");
    drop(permit);
    adder.join().unwrap();
    assert_eq!(semaphore.capacity(), 2);
    assert_idle(&semaphore);
}

#[test]
fn a_counter_parks_above_the_capacity_until_it_grows() {
    loom::model(counter_grows_under_a_parker);
}

/// Negative control: the grow's units land between the refusal and the join,
/// and the join leaves them be.
#[test]
fn without_serving_on_units_back_the_counters_parker_is_stranded() {
    without(
        Safeguard::JoinServesUnitsBack,
        DEADLOCK,
        counter_grows_under_a_parker,
    );
}

/// Negative control: the counter treats a request above the capacity as the
/// default semaphore does, and it fails.
#[test]
fn without_the_counters_wait_an_oversize_request_fails() {
    without(
        Safeguard::CounterWaitsOversize,
        "a counter's request above the capacity waits for it",
        counter_grows_under_a_parker,
    );
}
