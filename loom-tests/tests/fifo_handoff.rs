//! FIFO hand-off: a release grants the parked head before anyone who arrived after
//! it, even when the later, smaller request would fit first, and neither a
//! `try_acquire` nor a new `acquire` can barge past a parked waiter.

use core::future::{poll_fn, Future};
use core::task::{Poll, Waker};
use std::boxed::Box;
use std::vec::Vec;

use admit::{Semaphore, TryAcquireError};
use loom::future::block_on;
use loom::thread;
use loom_tests::{acquire_shared, assert_idle, poll_once, shared};

#[test]
fn release_grants_head_before_later_arrivals() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(2));

        // The holder has every unit, as two one-unit permits.
        let first = semaphore.try_acquire(1).unwrap();
        let second = semaphore.try_acquire(1).unwrap();

        // Arrival order fixed by hand: A (two units) parks, then B (one unit).
        let mut a = Some(Box::pin(acquire_shared(&semaphore, 2)));
        assert!(poll_once(a.as_mut().unwrap().as_mut(), Waker::noop()).is_pending());
        let mut b = Some(Box::pin(acquire_shared(&semaphore, 1)));
        assert!(poll_once(b.as_mut().unwrap().as_mut(), Waker::noop()).is_pending());
        assert_eq!(semaphore.waiters(), 2);

        // One actor drives both waiters (a single thread that may spin on the queue
        // lock: see the crate docs) and logs each grant as it sees it. A holds every
        // unit while granted, so B cannot be granted before A's permit is dropped.
        let waiters = thread::spawn(move || {
            let mut log = Vec::new();
            block_on(poll_fn(|cx| {
                if let Some(future) = a.as_mut() {
                    if let Poll::Ready(permit) = future.as_mut().poll(cx) {
                        assert_eq!(permit.expect("not closed").units(), 2);
                        log.push('A');
                        a = None;
                    }
                }
                if let Some(future) = b.as_mut() {
                    if let Poll::Ready(permit) = future.as_mut().poll(cx) {
                        assert!(a.is_none(), "B was granted while A waits");
                        assert_eq!(permit.expect("not closed").units(), 1);
                        log.push('B');
                        b = None;
                    }
                }
                if a.is_none() && b.is_none() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }));
            log
        });

        // The releaser: one unit back is enough for B but not for A. B must keep
        // waiting behind A, and no newcomer may take the unit either.
        drop(first);
        assert_eq!(semaphore.available(), 1, "a unit went to B while A waits");
        assert_eq!(
            semaphore.try_acquire(1).unwrap_err(),
            TryAcquireError::NoUnits
        );
        let mut newcomer = Box::pin(semaphore.acquire(1));
        assert!(poll_once(newcomer.as_mut(), Waker::noop()).is_pending());
        drop(newcomer);
        assert_eq!(semaphore.available(), 1, "a unit went to B while A waits");

        // The second unit completes A's request: A first, then B once A releases.
        drop(second);

        assert_eq!(waiters.join().unwrap(), ['A', 'B']);
        assert_idle(&semaphore);
    });
}
