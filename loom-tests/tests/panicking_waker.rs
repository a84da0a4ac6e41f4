//! A waker that panics out of a serving loop does not end it: a release that asked
//! for service while the holder served (`PENDING`) is still served, so nobody is
//! left parked while units are free. The waker's panic reaches the thread that
//! woke it, and only that one.

use core::task::{Poll, Waker};
use std::boxed::Box;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Wake;

use admit::Semaphore;
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, poll_once, shared, try_acquire_shared, without, CountingWaker,
    Safeguard,
};

/// A waker whose `wake` panics, without the panic hook's message (loom explores
/// the model many times over).
struct PanicOnWake;

impl Wake for PanicOnWake {
    fn wake(self: Arc<Self>) {
        resume_unwind(Box::new("the waker panicked"));
    }
}

/// Two one-unit holders release at once; the head of the queue has a panicking
/// waker, the request behind it a counting one. Whichever release serves, and
/// whichever wakes the head and panics, both requests end granted.
fn two_releases_and_a_panicking_head() {
    let sem = shared(Semaphore::new(2));
    let first = try_acquire_shared(&sem, 1).unwrap();
    let second = try_acquire_shared(&sem, 1).unwrap();
    let panicky = Waker::from(Arc::new(PanicOnWake));
    let mut head = Box::pin(acquire_shared(&sem, 1));
    assert!(poll_once(head.as_mut(), &panicky).is_pending());
    let (waker, wakes) = CountingWaker::new();
    let mut behind = Box::pin(acquire_shared(&sem, 1));
    assert!(poll_once(behind.as_mut(), &waker).is_pending());

    let releaser = thread::spawn(move || catch_unwind(AssertUnwindSafe(|| drop(first))).is_err());
    let panicked_here = catch_unwind(AssertUnwindSafe(|| drop(second))).is_err();
    let panicked_there = releaser.join().unwrap();
    assert!(
        panicked_here ^ panicked_there,
        "the waker's panic reached exactly one releaser"
    );

    assert_eq!(
        wakes.wakes(),
        1,
        "the request behind the head was woken once"
    );
    assert!(
        matches!(
            poll_once(behind.as_mut(), Waker::noop()),
            Poll::Ready(Ok(_))
        ),
        "the request behind a panicking waker stranded with a unit free"
    );
    assert!(matches!(
        poll_once(head.as_mut(), Waker::noop()),
        Poll::Ready(Ok(_))
    ));
    drop((head, behind));
    assert_idle(&sem);
}

#[test]
fn a_panicking_waker_leaves_nobody_parked_with_units_free() {
    loom::model(two_releases_and_a_panicking_head);
}

/// Negative control: the loop ends with the panic, and the release that asked for
/// service meanwhile is lost.
#[test]
fn a_serving_loop_that_ends_with_the_panic_strands_the_next_request() {
    without(
        Safeguard::ServesOnUnwind,
        "the request behind the head was woken once",
        two_releases_and_a_panicking_head,
    );
}
