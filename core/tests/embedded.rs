//! The semaphore as an embedded user builds it, without `alloc`: the wait node is
//! part of the acquire future, on a list guarded by a critical section. Written
//! against the API both builds share, so it runs in both; CI runs it without
//! `alloc`, and under miri.
//!
//! ```text
//! cargo test -p admit --no-default-features --features critical-section --test embedded
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

/// Threads park, cancel and hold at once: cancels and finishes meet other
/// threads serving.
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
