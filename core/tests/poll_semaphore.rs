//! `PollSemaphore`: a request parked in the handle between calls, `None` once
//! closed, the latest waker woken, a clone with no request of its own yet.
#![cfg(feature = "alloc")]

mod wakers;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use admit::{OwnedPermit, PollSemaphore, Semaphore};
use wakers::counting;

fn poll_many(handle: &mut PollSemaphore, waker: &Waker, units: usize) -> Poll<Option<OwnedPermit>> {
    handle.poll_acquire_many(&mut Context::from_waker(waker), units)
}

fn poll(handle: &mut PollSemaphore, waker: &Waker) -> Poll<Option<OwnedPermit>> {
    poll_many(handle, waker, 1)
}

#[track_caller]
fn granted(poll: Poll<Option<OwnedPermit>>) -> OwnedPermit {
    match poll {
        Poll::Ready(Some(permit)) => permit,
        other => panic!("expected a permit, got {other:?}"),
    }
}

#[test]
fn pending_until_add_units_then_ready_and_woken() {
    let mut handle = PollSemaphore::new(Arc::new(Semaphore::counting(0)));
    let (counter, waker) = counting();
    assert!(poll(&mut handle, &waker).is_pending());
    assert_eq!(counter.wakes(), 0);
    handle.add_units(1);
    assert_eq!(counter.wakes(), 1, "the grant wakes the waker of the call");
    let permit = granted(poll(&mut handle, &waker));
    assert_eq!((permit.units(), handle.available()), (1, 0));
}

#[test]
fn free_units_are_granted_on_the_first_call() {
    let mut handle = PollSemaphore::new(Arc::new(Semaphore::counting(3)));
    let permit = granted(poll_many(&mut handle, Waker::noop(), 2));
    assert_eq!((permit.units(), handle.available()), (2, 1));
}

#[test]
fn polls_again_after_a_grant() {
    // The completed future is replaced before the next call: polling it again
    // would panic.
    let sem = Arc::new(Semaphore::counting(0));
    let mut handle = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll(&mut handle, Waker::noop()).is_pending());
    sem.add_units(1);
    drop(granted(poll(&mut handle, Waker::noop())));
    drop(granted(poll(&mut handle, Waker::noop())));
    let held = granted(poll(&mut handle, Waker::noop()));
    assert!(poll(&mut handle, Waker::noop()).is_pending());
    drop(held);
    drop(granted(poll(&mut handle, Waker::noop())));
}

#[test]
fn only_the_latest_waker_is_woken() {
    let mut handle = PollSemaphore::new(Arc::new(Semaphore::counting(0)));
    let (first, first_waker) = counting();
    let (latest, latest_waker) = counting();
    assert!(poll(&mut handle, &first_waker).is_pending());
    assert!(poll(&mut handle, &latest_waker).is_pending());
    handle.add_units(1);
    assert_eq!((first.wakes(), latest.wakes()), (0, 1));
}

#[test]
fn a_pending_call_keeps_its_place_in_the_queue() {
    let sem = Arc::new(Semaphore::counting(0));
    let mut first = PollSemaphore::new(Arc::clone(&sem));
    let mut second = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll(&mut first, Waker::noop()).is_pending());
    assert!(poll(&mut second, Waker::noop()).is_pending());
    // Polled again, the first is still ahead of the second.
    assert!(poll(&mut first, Waker::noop()).is_pending());
    sem.add_units(1);
    assert!(poll(&mut second, Waker::noop()).is_pending());
    drop(granted(poll(&mut first, Waker::noop())));
}

#[test]
fn another_count_replaces_the_request_at_the_back() {
    let sem = Arc::new(Semaphore::counting(0));
    let mut first = PollSemaphore::new(Arc::clone(&sem));
    let mut second = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll_many(&mut first, Waker::noop(), 2).is_pending());
    assert!(poll(&mut second, Waker::noop()).is_pending());
    assert!(
        poll(&mut first, Waker::noop()).is_pending(),
        "now 1 unit, behind `second`"
    );
    sem.add_units(1);
    assert!(poll(&mut first, Waker::noop()).is_pending());
    drop(granted(poll(&mut second, Waker::noop())));
}

#[test]
fn none_once_closed_while_parked_and_after() {
    let sem = Arc::new(Semaphore::counting(0));
    let mut handle = PollSemaphore::new(Arc::clone(&sem));
    let (counter, waker) = counting();
    assert!(poll(&mut handle, &waker).is_pending());
    sem.close();
    assert_eq!(counter.wakes(), 1, "the close wakes the parked request");
    assert!(matches!(poll(&mut handle, &waker), Poll::Ready(None)));
    assert!(matches!(poll(&mut handle, &waker), Poll::Ready(None)));
    sem.add_units(1); // units do not reopen it
    assert!(matches!(poll(&mut handle, &waker), Poll::Ready(None)));
}

#[test]
fn none_at_once_on_a_closed_semaphore() {
    let sem = Arc::new(Semaphore::counting(1));
    sem.close();
    let mut handle = PollSemaphore::new(sem);
    assert!(matches!(
        poll(&mut handle, Waker::noop()),
        Poll::Ready(None)
    ));
}

#[test]
fn a_clone_starts_with_no_request() {
    let sem = Arc::new(Semaphore::counting(0));
    let mut original = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll(&mut original, Waker::noop()).is_pending());
    let mut clone = original.clone();
    assert!(Arc::ptr_eq(&clone.clone_inner(), &sem));
    // The clone's first call parks a request of its own, behind the original's.
    assert!(poll(&mut clone, Waker::noop()).is_pending());
    assert_eq!(sem.waiters(), 2);
    sem.add_units(1);
    assert!(poll(&mut clone, Waker::noop()).is_pending());
    drop(granted(poll(&mut original, Waker::noop())));
    drop(clone);
    assert_eq!(sem.waiters(), 0, "dropping the clone cancels its request");
}

#[test]
fn a_grant_not_yet_taken_returns_when_the_handle_drops() {
    let sem = Arc::new(Semaphore::counting(0));
    let mut handle = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll(&mut handle, Waker::noop()).is_pending());
    sem.add_units(1);
    assert_eq!(sem.available(), 0, "granted to the parked request");
    drop(handle);
    assert_eq!(sem.available(), 1);
}

#[test]
fn into_inner_cancels_the_parked_request() {
    let sem = Arc::new(Semaphore::counting(0));
    let mut handle = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll(&mut handle, Waker::noop()).is_pending());
    let inner = handle.into_inner();
    assert!(Arc::ptr_eq(&inner, &sem));
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn accessors_reach_the_semaphore() {
    let sem = Arc::new(Semaphore::counting(1));
    let handle = PollSemaphore::new(Arc::clone(&sem));
    handle.add_units(2);
    assert_eq!((handle.available(), handle.as_ref().capacity()), (3, 3));
    assert!(format!("{handle:?}").starts_with("PollSemaphore { semaphore: Semaphore {"));
}

#[test]
#[should_panic(expected = "zero units")]
fn zero_units_panics() {
    let mut handle = PollSemaphore::new(Arc::new(Semaphore::counting(1)));
    let _ = poll_many(&mut handle, Waker::noop(), 0);
}

#[test]
fn an_oversize_request_on_a_default_semaphore_panics() {
    let mut handle = PollSemaphore::new(Arc::new(Semaphore::new(1)));
    let panic = catch_unwind(AssertUnwindSafe(|| {
        poll_many(&mut handle, Waker::noop(), 2)
    }));
    let message = *panic.unwrap_err().downcast::<String>().unwrap();
    assert_eq!(
        message,
        "PollSemaphore cannot report an oversize request: \
         request for 2 units exceeds the capacity of 1 units"
    );
}

#[test]
fn a_parked_request_a_shrink_leaves_oversize_panics() {
    let sem = Arc::new(Semaphore::new(2));
    let held = sem.try_acquire(2).unwrap();
    let mut handle = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll_many(&mut handle, Waker::noop(), 2).is_pending());
    sem.set_capacity(1);
    let panic = catch_unwind(AssertUnwindSafe(|| {
        poll_many(&mut handle, Waker::noop(), 2)
    }));
    assert!(panic.is_err());
    drop(held);
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn a_counting_semaphore_waits_for_an_oversize_request() {
    let sem = Arc::new(Semaphore::counting(1));
    let mut handle = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll_many(&mut handle, Waker::noop(), 3).is_pending());
    sem.add_units(2);
    assert_eq!(granted(poll_many(&mut handle, Waker::noop(), 3)).units(), 3);
}
