//! The semaphore as an embedded user builds it, without `alloc`: the wait node is
//! part of the acquire future, and a dropped future waits (briefly) until the queue
//! has let go of its node. Written against the API both builds share, so it runs
//! in both; CI runs it without default features, and under miri.
//!
//! ```text
//! cargo test -p admit --no-default-features --test inline_nodes
//! ```

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use admit::{AcquireError, Semaphore};

#[derive(Default)]
struct Counter(AtomicUsize);

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting() -> (Arc<Counter>, Waker) {
    let counter = Arc::new(Counter::default());
    (counter.clone(), Waker::from(counter))
}

fn poll<F: Future>(future: std::pin::Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(waker))
}

#[test]
fn parks_is_granted_in_fifo_order_and_is_woken_once() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let (big_wakes, big_waker) = counting();
    let (small_wakes, small_waker) = counting();
    let mut big = pin!(sem.acquire(2));
    let mut small = pin!(sem.acquire(1));
    assert!(poll(big.as_mut(), &big_waker).is_pending());
    assert!(poll(small.as_mut(), &small_waker).is_pending());
    assert!(
        sem.try_acquire(1).is_err(),
        "no barging past parked waiters"
    );
    assert_eq!(sem.waiters(), 2);

    drop(held);
    assert_eq!(big_wakes.0.load(Ordering::SeqCst), 1);
    assert_eq!(
        small_wakes.0.load(Ordering::SeqCst),
        0,
        "the head takes both"
    );
    let Poll::Ready(Ok(both)) = poll(big.as_mut(), &big_waker) else {
        panic!("the head was granted");
    };
    drop(both);
    assert_eq!(small_wakes.0.load(Ordering::SeqCst), 1);
    assert!(matches!(
        poll(small.as_mut(), &small_waker),
        Poll::Ready(Ok(_))
    ));
}

#[test]
fn a_cancelled_head_lets_the_waiter_behind_in() {
    let sem = Semaphore::new(3);
    let kept = sem.try_acquire(1).unwrap();
    let released = sem.try_acquire(1).unwrap();
    let (behind_wakes, behind_waker) = counting();
    let mut behind = pin!(sem.acquire(1));
    {
        let mut head = pin!(sem.acquire(3));
        assert!(poll(head.as_mut(), Waker::noop()).is_pending());
        assert!(poll(behind.as_mut(), &behind_waker).is_pending());
        drop(released);
        assert_eq!(
            behind_wakes.0.load(Ordering::SeqCst),
            0,
            "FIFO: behind the head"
        );
    } // the head is cancelled here
    assert_eq!(behind_wakes.0.load(Ordering::SeqCst), 1);
    assert!(matches!(
        poll(behind.as_mut(), &behind_waker),
        Poll::Ready(Ok(_))
    ));
    drop(kept);
}

#[test]
fn a_grant_not_seen_before_the_drop_comes_back() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    {
        let mut granted = pin!(sem.acquire(1));
        assert!(poll(granted.as_mut(), Waker::noop()).is_pending());
        drop(held);
        assert_eq!(sem.available(), 0, "granted to the parked future");
    }
    assert_eq!((sem.available(), sem.waiters()), (1, 0));
    assert!(sem.try_acquire(1).is_ok());
}

#[test]
fn close_ends_a_parked_acquire() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut parked = pin!(sem.acquire(1));
    assert!(poll(parked.as_mut(), Waker::noop()).is_pending());
    sem.close();
    assert!(matches!(
        poll(parked.as_mut(), Waker::noop()),
        Poll::Ready(Err(AcquireError::Closed))
    ));
    drop(held);
    assert_eq!(sem.available(), 1);
}

/// Threads park, cancel and hold at once; the drop's wait for the queue to let go
/// of its node is exercised whenever a cancel meets another thread serving.
#[test]
fn threads_park_and_cancel_without_losing_units() {
    let sem = Arc::new(Semaphore::new(2));
    let rounds = if cfg!(miri) { 20 } else { 2_000 };
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let sem = sem.clone();
            std::thread::spawn(move || {
                for i in 0..rounds {
                    let units = 1 + (t + i) % 2;
                    let mut acquire = pin!(sem.acquire(units));
                    match poll(acquire.as_mut(), Waker::noop()) {
                        Poll::Ready(permit) => drop(permit),
                        Poll::Pending if i % 3 == 0 => {} // cancelled below
                        Poll::Pending => drop(futures_lite::future::block_on(acquire)),
                    }
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
    assert!(sem.try_acquire(2).is_ok());
}

/// A shrink fails every parked request for more than the new capacity, wherever
/// it waits and however many there are (more than one wake batch), and leaves the
/// others waiting in their order.
#[test]
fn a_shrink_fails_every_parked_request_that_no_longer_fits() {
    let sem = Semaphore::new(4);
    let held = sem.try_acquire(4).unwrap();
    // Alternately 3 units (too many after the shrink) and 1.
    let mut parked: Vec<_> = (0..100)
        .map(|i| Box::pin(sem.acquire(if i % 2 == 0 { 3 } else { 1 })))
        .collect();
    for acquire in &mut parked {
        assert!(poll(acquire.as_mut(), Waker::noop()).is_pending());
    }
    assert_eq!(sem.set_capacity(2), 4);
    for (i, acquire) in parked.iter_mut().enumerate() {
        let outcome = poll(acquire.as_mut(), Waker::noop());
        if i % 2 == 0 {
            assert!(
                matches!(outcome, Poll::Ready(Err(AcquireError::ExceedsCapacity(_)))),
                "request {i} for 3 units still waits under a capacity of 2"
            );
        } else {
            assert!(outcome.is_pending(), "request {i} for 1 unit was answered");
        }
    }
    assert_eq!(sem.waiters(), 50);
    drop(held); // 2 of the 4 retire; 2 go to the first two that wait
    let granted: Vec<_> = parked
        .iter_mut()
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, acquire)| poll(acquire.as_mut(), Waker::noop()))
        .map(|outcome| match outcome {
            Poll::Ready(Ok(permit)) => Some(permit),
            Poll::Ready(Err(e)) => panic!("a request for 1 unit failed: {e:?}"),
            Poll::Pending => None,
        })
        .collect();
    assert!(
        granted[0].is_some() && granted[1].is_some() && granted[2..].iter().all(Option::is_none),
        "not the first two in order"
    );
    drop(granted);
    drop(parked);
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

/// A drain closes the semaphore: a parked request ends `Closed` while the drain
/// waits for the units out, and completes with the last of them. A drain after
/// that, with nothing out, is ready at once.
#[test]
fn a_drain_closes_parked_requests_and_waits_for_the_last_unit() {
    let sem = Semaphore::new(2);
    let first = sem.try_acquire(1).unwrap();
    let last = sem.try_acquire(1).unwrap();
    let mut parked = pin!(sem.acquire(1));
    assert!(poll(parked.as_mut(), Waker::noop()).is_pending());
    let (drain_wakes, drain_waker) = counting();
    let mut drain = pin!(sem.drain());
    assert!(poll(drain.as_mut(), &drain_waker).is_pending());
    assert!(matches!(
        poll(parked.as_mut(), Waker::noop()),
        Poll::Ready(Err(AcquireError::Closed))
    ));
    drop(first);
    assert_eq!(
        drain_wakes.0.load(Ordering::SeqCst),
        0,
        "a unit is still out"
    );
    assert!(poll(drain.as_mut(), &drain_waker).is_pending());
    drop(last);
    assert_eq!(drain_wakes.0.load(Ordering::SeqCst), 1);
    assert!(poll(drain.as_mut(), &drain_waker).is_ready());
    let mut again = pin!(sem.drain());
    assert!(poll(again.as_mut(), Waker::noop()).is_ready());
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

/// A close with nothing to drain leaves the queue as if empty: after the units
/// return, a drain is ready at once.
#[test]
fn a_close_with_units_out_then_a_drain_once_they_are_back() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut parked = pin!(sem.acquire(1));
    assert!(poll(parked.as_mut(), Waker::noop()).is_pending());
    sem.close();
    drop(held);
    assert!(matches!(
        poll(parked.as_mut(), Waker::noop()),
        Poll::Ready(Err(AcquireError::Closed))
    ));
    let mut drain = pin!(sem.drain());
    assert!(poll(drain.as_mut(), Waker::noop()).is_ready());
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}
