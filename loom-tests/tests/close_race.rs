//! Close racing with a parked acquire and a release: the acquire ends `Ok` or
//! `Err(Closed)` and never hangs (close itself wakes it when no release can),
//! held permits still return their units, and later acquires fail at once.

use core::sync::atomic::{AtomicBool, Ordering};
use core::task::{Poll, Waker};
use std::boxed::Box;

use admit::{AcquireError, Semaphore, TryAcquireError};
use loom::future::block_on;
use loom::thread;
use loom_tests::{
    acquire_shared, assert_idle, poll_once, shared, try_acquire_shared, without, Safeguard,
    DEADLOCK,
};

/// Which outcomes of the acquire some interleaving produced, across all of them.
static GRANTED_SEEN: AtomicBool = AtomicBool::new(false);
static CLOSED_SEEN: AtomicBool = AtomicBool::new(false);

#[test]
fn close_races_parked_acquire_and_release() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();

        let waiter = {
            let semaphore = semaphore.clone();
            thread::spawn(move || match block_on(semaphore.acquire(1)) {
                Ok(permit) => {
                    GRANTED_SEEN.store(true, Ordering::Relaxed);
                    assert_eq!(semaphore.available(), 0);
                    drop(permit);
                }
                Err(AcquireError::Closed) => CLOSED_SEEN.store(true, Ordering::Relaxed),
                Err(e) => panic!("unexpected {e:?}"),
            })
        };
        let closer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || semaphore.close())
        };
        // A held permit outlives the close and still returns its unit.
        drop(held);

        waiter.join().unwrap();
        closer.join().unwrap();

        assert!(semaphore.is_closed());
        assert_eq!(
            semaphore.try_acquire(1).unwrap_err(),
            TryAcquireError::Closed
        );
        let mut late = Box::pin(semaphore.acquire(1));
        assert!(matches!(
            poll_once(late.as_mut(), Waker::noop()),
            Poll::Ready(Err(AcquireError::Closed))
        ));
        drop(late);
        assert_idle(&semaphore);
    });
    // The model is only worth something if both endings were explored.
    assert!(
        GRANTED_SEEN.load(Ordering::Relaxed),
        "no interleaving granted the acquire"
    );
    assert!(
        CLOSED_SEEN.load(Ordering::Relaxed),
        "no interleaving closed the acquire"
    );
}

/// The waiter cannot be granted (one unit stays held throughout), so only the close
/// can end it, whether it lands before the waiter parks, while it parks, or after;
/// a release racing with both must not swallow that wake-up.
#[test]
fn close_alone_wakes_a_waiter_that_cannot_be_granted() {
    loom::model(close_alone_ends_the_wait);
}

/// Negative control: a parker whose join finds the semaphore closed (the close
/// came after its refused fast path, when nobody was queued, so it served
/// nobody) must ask for service; otherwise it waits for ever.
#[test]
fn a_join_after_the_close_must_serve() {
    without(
        Safeguard::JoinServesClosed,
        DEADLOCK,
        close_alone_ends_the_wait,
    );
}

fn close_alone_ends_the_wait() {
    let semaphore = shared(Semaphore::new(2));
    let kept = semaphore.try_acquire(1).unwrap();
    let released = try_acquire_shared(&semaphore, 1).unwrap();

    let closer = {
        let semaphore = semaphore.clone();
        thread::spawn(move || semaphore.close())
    };
    let releaser = thread::spawn(move || drop(released));
    assert_eq!(
        block_on(semaphore.acquire(2)).unwrap_err(),
        AcquireError::Closed
    );

    closer.join().unwrap();
    releaser.join().unwrap();
    assert_eq!(semaphore.available(), 1);
    // Held across the close, the permit still returns its unit.
    drop(kept);
    assert_idle(&semaphore);
}

/// A close whose pass meets a parker between its claim and its publish (a cell
/// still `EMPTY` at the cursor): the close breaks the cell and moves on rather
/// than wait for a thread that may not run, and the parker, whose publish then
/// fails, claims again, joins, finds the semaphore closed and ends
/// `Err(Closed)` like the request ahead of it. (The mutation testing of the
/// `unsafe fn`s found no model reaching that break.)
#[test]
fn a_close_passes_a_parker_that_has_not_published() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();
        // Parked first: `QUEUED` is set, so the close serves.
        let mut first = Box::pin(semaphore.acquire(1));
        assert!(poll_once(first.as_mut(), Waker::noop()).is_pending());

        let second = {
            let semaphore = semaphore.clone();
            thread::spawn(move || block_on(semaphore.acquire(1)).map(drop))
        };
        let closer = {
            let semaphore = semaphore.clone();
            thread::spawn(move || semaphore.close())
        };
        closer.join().unwrap();
        assert_eq!(second.join().unwrap(), Err(AcquireError::Closed));
        assert!(matches!(
            poll_once(first.as_mut(), Waker::noop()),
            Poll::Ready(Err(AcquireError::Closed))
        ));
        drop(first);
        drop(held);
        assert_idle(&semaphore);
    });
}

/// A close resolves a parked request while its owner drops it on another thread:
/// whichever wins, nothing comes back that was not taken (a close takes no units,
/// so a close that lost to the cancel gives nothing back, and a cancel that lost
/// to the close releases nothing), and the request is let go of once.
#[test]
fn a_close_racing_a_drop_gives_back_nothing() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(1));
        let held = semaphore.try_acquire(1).unwrap();
        let mut x = Box::pin(acquire_shared(&semaphore, 1));
        assert!(poll_once(x.as_mut(), Waker::noop()).is_pending());
        let dropper = thread::spawn(move || drop(x));
        semaphore.close();
        dropper.join().unwrap();
        drop(held);
        assert_idle(&semaphore);
    });
}
