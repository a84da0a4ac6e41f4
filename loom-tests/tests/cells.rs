//! The cell queue's own hazard: a parker that has claimed a ticket but not yet
//! published its cell when the server reaches it. With units free the server
//! breaks the cell and moves on (the parker, which had not joined, claims again);
//! with none free it stops there (the parker's join, or a release after it,
//! serves). Under loom a segment holds two cells, so three parkers cross a
//! segment boundary.

use core::task::{Poll, Waker};
use std::boxed::Box;
use std::sync::Arc;

use admit::{AcquireError, Semaphore};
use loom::future::block_on;
use loom::thread;
use loom_tests::{assert_idle, poll_once, without, Safeguard, DEADLOCK};

/// The unit is held; `A` and `B` park on their own threads, in either order and
/// with the release anywhere around their claims, publishes and joins. Both are
/// granted, one after the other.
fn parkers_racing_the_release() {
    let semaphore = Arc::new(Semaphore::new(1));
    let held = semaphore.try_acquire(1).unwrap();
    let parkers: std::vec::Vec<_> = (0..2)
        .map(|_| {
            let semaphore = semaphore.clone();
            thread::spawn(move || drop(block_on(semaphore.acquire(1)).expect("not closed")))
        })
        .collect();
    drop(held);
    for parker in parkers {
        parker.join().unwrap();
    }
    assert_idle(&semaphore);
}

#[test]
fn an_unpublished_cell_does_not_hold_up_the_queue() {
    loom::model(parkers_racing_the_release);
}

/// Negative control: a server that waits at an unpublished cell while units are
/// free. Its owner publishes and joins behind a `QUEUED` the other parker set,
/// so its join does not serve: both wait for ever with the unit free.
#[test]
fn waiting_at_an_unpublished_cell_strands_the_queue() {
    without(
        Safeguard::BreakUnpublished,
        DEADLOCK,
        parkers_racing_the_release,
    );
}

/// A sweep walks the cells past the cursor while cancels remove the segment it
/// is walking. Five requests park (a segment holds two cells under loom): `A`
/// for one unit at the cursor, `B` for two, then `C` and `D` for one (the second
/// segment), `E` for two. A shrink to one unit sweeps from the cursor to the end
/// for requests that no longer fit, while another thread drops `C` and `D`,
/// whose cancels complete the second segment and splice it out. `B` and `E` fail
/// with `ExceedsCapacity` wherever the removal caught the sweep, `A` is granted
/// once the units come back, and every segment is freed once.
fn sweep_racing_a_removal() {
    let semaphore = Arc::new(Semaphore::new(2));
    let held = semaphore.try_acquire(2).unwrap();
    let mut parked: std::vec::Vec<_> = [1, 2, 1, 1, 2]
        .into_iter()
        .map(|units| {
            let mut request = Box::pin(semaphore.clone().acquire_owned(units));
            assert!(poll_once(request.as_mut(), Waker::noop()).is_pending());
            request
        })
        .collect();
    let e = parked.pop().unwrap();
    let (d, c) = (parked.pop().unwrap(), parked.pop().unwrap());
    let canceller = thread::spawn(move || drop((c, d)));
    semaphore.set_capacity(1);
    canceller.join().unwrap();
    let (mut a, mut b, mut e) = (parked.remove(0), parked.remove(0), e);
    for oversize in [&mut b, &mut e] {
        let outcome = poll_once(oversize.as_mut(), Waker::noop());
        assert!(
            matches!(outcome, Poll::Ready(Err(AcquireError::ExceedsCapacity(_)))),
            "a request over the new capacity was not failed: {outcome:?}"
        );
    }
    assert!(poll_once(a.as_mut(), Waker::noop()).is_pending());
    drop(held);
    drop(block_on(a).expect("not closed"));
    drop((b, e));
    assert_idle(&semaphore);
}

#[test]
fn a_sweep_walks_on_past_a_segment_removed_under_it() {
    loom::model(sweep_racing_a_removal);
}

/// Negative control: a walk that stops where its segment was removed under it
/// leaves `E` waiting for units it can never have.
#[test]
fn a_sweep_that_stops_at_a_removed_segment_misses_the_rest() {
    without(
        Safeguard::ScanFindsItsWay,
        "a request over the new capacity was not failed",
        sweep_racing_a_removal,
    );
}
