//! Loom models of shedding parked requests by rank (`shedding.rs`), through the
//! crate's own API: a shed racing the request's cancel, and racing its grant.
//! One resolution either way, no unit lost or granted twice, and the books of
//! what is on its way out back at zero once the owner has seen its outcome.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

use loom::thread;

use crate::safeguard::{expect_failure, Safeguard};
use crate::semaphore::{Refusal, Semaphore};

/// A count that went below zero reads as this much or more.
const WRAPPED: usize = 1 << 40;

fn poll<F: Future>(future: Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// A parked request of rank 0 behind a held unit; a shed of it races its
/// owner's cancel. Whoever wins, nothing is left on its way out, and every unit
/// comes back.
fn shed_against_cancel() {
    let sem = Arc::new(Semaphore::with_shedding(1));
    let held = Arc::clone(&sem).try_acquire_owned(1).unwrap();
    let mut parked = Box::pin(Arc::clone(&sem).acquire_ranked(1, 0));
    assert!(poll(parked.as_mut()).is_pending());
    let shedder = {
        let sem = Arc::clone(&sem);
        thread::spawn(move || sem.shed(0, 1))
    };
    drop(parked);
    shedder.join().unwrap();
    assert_eq!(sem.shed_pending(0), 0, "a shed left on the books");
    assert_eq!(sem.waiters(), 0);
    drop(held);
    assert_eq!(sem.available(), 1, "a unit lost");
}

#[test]
fn a_shed_racing_a_cancel_resolves_the_request_once() {
    loom::model(shed_against_cancel);
}

/// The same request, and a release racing the shed: granted (the shed lost, or
/// came after) or shed (it came first, while the unit was held). Once the owner
/// has seen which, nothing is on its way out and every unit is back.
fn shed_against_grant() {
    let sem = Arc::new(Semaphore::with_shedding(1));
    let held = Arc::clone(&sem).try_acquire_owned(1).unwrap();
    let mut parked = Box::pin(Arc::clone(&sem).acquire_ranked(1, 0));
    assert!(poll(parked.as_mut()).is_pending());
    let releaser = thread::spawn(move || drop(held));
    sem.shed(0, 1);
    releaser.join().unwrap();
    match poll(parked.as_mut()) {
        Poll::Ready(Ok(permit)) => drop(permit),
        Poll::Ready(Err(Refusal::Shed)) => {
            let pending = sem.shed_pending(0);
            assert!(pending < WRAPPED, "the doomed count went below zero");
            assert_eq!(pending, 0, "a seen shed left on the books");
        }
        other => panic!("a parked request ended {other:?}"),
    }
    drop(parked);
    assert_eq!((sem.available(), sem.waiters()), (1, 0));
}

#[test]
fn a_shed_racing_a_grant_resolves_the_request_once() {
    loom::model(shed_against_grant);
}

/// A request shed while its owner looks: the owner that reads `SHED` at once
/// counts it out, which must find it counted in.
fn shed_seen_at_once() {
    let sem = Arc::new(Semaphore::with_shedding(1));
    let _held = Arc::clone(&sem).try_acquire_owned(1).unwrap();
    let mut parked = Box::pin(Arc::clone(&sem).acquire_ranked(1, 0));
    assert!(poll(parked.as_mut()).is_pending());
    let shedder = {
        let sem = Arc::clone(&sem);
        thread::spawn(move || sem.shed(0, 1))
    };
    // Lets the shedder run first, so that some executions poll after its CAS.
    thread::yield_now();
    if let Poll::Ready(outcome) = poll(parked.as_mut()) {
        assert!(matches!(outcome, Err(Refusal::Shed)));
        assert!(
            sem.shed_pending(0) < WRAPPED,
            "the doomed count went below zero"
        );
    }
    shedder.join().unwrap();
}

#[test]
fn an_owner_that_sees_its_shed_at_once_finds_it_counted() {
    loom::model(shed_seen_at_once);
}

/// Negative control: counted doomed after the CAS, the owner can count it out
/// first.
#[test]
fn a_shed_counted_after_its_cas_can_go_below_zero() {
    expect_failure(
        Some(Safeguard::DoomBeforeShed),
        "the doomed count went below zero",
        || loom::model(shed_seen_at_once),
    );
}

/// Negative control: a shed that sets the phase by a blind store races the
/// owner's cancel for the waker.
#[test]
fn a_shed_by_a_blind_store_races_the_cancel() {
    expect_failure(Some(Safeguard::PhaseCas), "Causality violation", || {
        loom::model(shed_against_cancel);
    });
}
