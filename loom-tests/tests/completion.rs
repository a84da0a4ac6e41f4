//! A granted acquire lets go of its request only once the server is done with it:
//! an acquire granted by a release on another thread is completed and dropped at
//! once, while the granting server may still be taking its waker out of the
//! request. With `alloc` the request is a cell of a segment the server may still
//! read (the segment is freed only after); without, a node inside the future
//! itself, whose memory goes with the future.

use core::task::Waker;
use std::boxed::Box;

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{assert_idle, poll_once, shared, try_acquire_shared};
#[cfg(not(feature = "alloc"))]
use loom_tests::{without, Safeguard, RACE};

/// The waiter is parked when the release begins; its owner drops the permit and
/// the future as soon as the grant is seen.
fn granted_and_dropped_at_once() {
    let semaphore = shared(Semaphore::new(1));
    let held = try_acquire_shared(&semaphore, 1).unwrap();
    let mut waiter = Box::pin(semaphore.acquire(1));
    assert!(poll_once(waiter.as_mut(), Waker::noop()).is_pending());
    let releaser = thread::spawn(move || drop(held));
    drop(block_on(waiter).expect("not closed"));
    releaser.join().unwrap();
    assert_idle(&semaphore);
}

#[test]
fn a_granted_acquire_dropped_at_once_outlives_the_server() {
    loom::model(granted_and_dropped_at_once);
}

/// Negative control, without `alloc`: an owner that lets go of its node without
/// entering the critical section once drops the waker cell while the server,
/// which published the grant first, may still be taking the waker out of it.
#[cfg(not(feature = "alloc"))]
#[test]
fn a_finish_outside_the_section_races_the_server() {
    without(
        Safeguard::FinishEntersCriticalSection,
        RACE,
        granted_and_dropped_at_once,
    );
}
