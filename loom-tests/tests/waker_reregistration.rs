//! A re-poll that swaps the waker racing the grant: whichever comes first, the
//! future ends `Ready` or the waker it last registered is the one woken, once, and
//! the one it replaced is not. A re-poll with the same waker (which registers
//! nothing with `alloc`) racing the grant: `Ready` (the waker woken at most once,
//! by a grant before the re-poll), or that waker woken once.

use core::task::Poll;
use std::boxed::Box;

use admit::Semaphore;
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, poll_once, shared, try_acquire_shared, without, CountingWaker,
    Safeguard,
};

fn repoll_racing_the_grant() {
    repoll_with_a_waker_racing_the_grant(false);
}

fn repoll_with_a_waker_racing_the_grant(same_waker: bool) {
    let semaphore = shared(Semaphore::new(1));
    let held = try_acquire_shared(&semaphore, 1).unwrap();
    let (first_waker, first_wakes) = CountingWaker::new();
    let mut fut = Box::pin(acquire_shared(&semaphore, 1));
    assert!(poll_once(fut.as_mut(), &first_waker).is_pending());

    let releaser = thread::spawn(move || drop(held));
    // The task moved (a new waker), or it is polled again where it was.
    let (second_waker, second_wakes) = if same_waker {
        (first_waker.clone(), first_wakes.clone())
    } else {
        CountingWaker::new()
    };
    let repoll = poll_once(fut.as_mut(), &second_waker);
    releaser.join().unwrap();

    let permit = match repoll {
        Poll::Ready(permit) => {
            if same_waker {
                // A grant before the re-poll woke the waker the park registered,
                // which is this one: once at most.
                assert!(first_wakes.wakes() <= 1, "the waker woken twice");
            } else {
                assert_eq!(second_wakes.wakes(), 0, "woken after returning Ready");
            }
            permit
        }
        Poll::Pending => {
            if same_waker {
                assert_eq!(first_wakes.wakes(), 1, "the waker must be woken, once");
            } else {
                assert_eq!(
                    (first_wakes.wakes(), second_wakes.wakes()),
                    (0, 1),
                    "after a Pending re-poll only the new waker may be woken, once"
                );
            }
            match poll_once(fut.as_mut(), &second_waker) {
                Poll::Ready(permit) => permit,
                Poll::Pending => panic!("woken but not granted"),
            }
        }
    };
    drop(permit.expect("not closed"));
    drop(fut);
    assert_idle(&semaphore);
}

#[test]
fn the_last_registered_waker_is_woken() {
    loom::model(repoll_racing_the_grant);
}

#[test]
fn a_repoll_with_the_same_waker_is_woken() {
    loom::model(|| repoll_with_a_waker_racing_the_grant(true));
}

/// Negative control: a re-poll that loses its cell to a grant and still reports
/// `Pending` waits for a wake-up the server never sends (it left the waker to the
/// re-poll).
#[test]
fn without_the_registering_hand_over_a_wake_up_is_lost() {
    without(
        Safeguard::Registering,
        "only the new waker may be woken",
        repoll_racing_the_grant,
    );
}
