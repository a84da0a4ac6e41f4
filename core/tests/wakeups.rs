//! Property 4, no lost and no needless wake-ups: when units come back every waiter
//! that can now be served is woken, once, and no other.
//!
//! Runs in every build, so the wait queue without `alloc` is held to it too.

mod wakers;

use std::future::Future;
use std::task::{Context, Poll, Waker};

use admit::Semaphore;
use wakers::{counting, Task};

#[test]
fn a_release_wakes_exactly_the_waiters_it_serves() {
    let sem = Semaphore::new(3);
    let all = sem.try_acquire(3).unwrap();
    let mut a = Task::new(sem.acquire(1));
    let mut b = Task::new(sem.acquire(1));
    let mut c = Task::new(sem.acquire(2));
    a.pending();
    b.pending();
    c.pending();
    drop(all);
    // 3 free: a (1) and b (1) are served; c (2) does not fit in the 1 left.
    assert_eq!((a.wakes(), b.wakes(), c.wakes()), (1, 1, 0));
    a.ready().unwrap().release();
    assert_eq!(c.wakes(), 1, "a's release makes 2 free: c fits");
    assert_eq!(b.wakes(), 1, "woken once per grant");
}

#[test]
fn a_release_that_serves_nobody_wakes_nobody() {
    let sem = Semaphore::new(2);
    let one = sem.try_acquire(1).unwrap();
    let other = sem.try_acquire(1).unwrap();
    let mut w = Task::new(sem.acquire(2));
    w.pending();
    drop(one);
    assert_eq!(w.wakes(), 0);
    drop(other);
    assert_eq!(w.wakes(), 1);
}

#[test]
fn the_latest_waker_is_the_one_woken() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut fut = Box::pin(sem.acquire(1));
    let (first, first_waker) = counting();
    let (second, second_waker) = counting();
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&first_waker))
        .is_pending());
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&second_waker))
        .is_pending());
    drop(held);
    assert_eq!((first.wakes(), second.wakes()), (0, 1));
    assert!(matches!(
        fut.as_mut().poll(&mut Context::from_waker(&second_waker)),
        Poll::Ready(Ok(_))
    ));
}

#[test]
fn repolling_a_parked_waiter_does_not_lose_its_place() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut a = Task::new(sem.acquire(1));
    let mut b = Task::new(sem.acquire(1));
    a.pending();
    b.pending();
    for _ in 0..3 {
        b.pending();
        a.pending();
    }
    drop(held);
    assert_eq!((a.wakes(), b.wakes()), (1, 0));
}

/// More waiters than one wake batch: all are served by one release.
#[test]
fn a_release_serves_more_waiters_than_one_wake_batch() {
    let n = 100;
    let sem = Semaphore::new(n);
    let all = sem.try_acquire(n).unwrap();
    let mut tasks: Vec<_> = (0..n).map(|_| Task::new(sem.acquire(1))).collect();
    for t in &mut tasks {
        t.pending();
    }
    drop(all);
    assert!(tasks.iter().all(|t| t.wakes() == 1));
    assert_eq!((sem.available(), sem.waiters()), (0, 0));
}

/// Threads: a waiter parked on one thread is woken by a release on another.
#[test]
fn a_release_on_another_thread_wakes_the_parked_waiter() {
    let rounds = if cfg!(miri) { 10 } else { 2_000 };
    let sem = Semaphore::new(1);
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..rounds {
                    let p = futures_lite::future::block_on(sem.acquire(1)).unwrap();
                    std::hint::black_box(&p);
                }
            });
        }
    });
    assert_eq!((sem.available(), sem.waiters()), (1, 0));
}

/// A waker's `clone` is user code, run after the fast path failed and before the
/// queue lock is taken. Units it releases must not be missed: the first poll is
/// granted on the slow path instead of parking.
#[test]
fn units_released_by_a_waker_clone_are_granted_on_the_first_poll() {
    use std::sync::Mutex;
    use std::task::{RawWaker, RawWakerVTable};

    static SEM: Semaphore = Semaphore::new(3);
    static HELD: Mutex<Option<admit::Permit<'static>>> = Mutex::new(None);
    fn clone(_: *const ()) -> RawWaker {
        drop(HELD.lock().unwrap().take()); // the release lands mid-poll
        RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);

    let sem = &SEM;
    *HELD.lock().unwrap() = Some(sem.try_acquire(2).unwrap());
    // SAFETY: the vtable never touches the null data pointer.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };
    let mut fut = Box::pin(sem.acquire(3));
    match fut.as_mut().poll(&mut Context::from_waker(&waker)) {
        Poll::Ready(Ok(permit)) => assert_eq!(permit.units(), 3),
        other => panic!("expected a grant on the first poll, got {other:?}"),
    }
    assert_eq!((sem.available(), sem.waiters()), (3, 0));
}

/// A waker that counts its clones (`std::task::Wake` wakers clone an `Arc`,
/// which no test can see at rest: the clone replaces the one it drops).
#[cfg(feature = "alloc")]
mod clone_counting {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{RawWaker, RawWakerVTable, Waker};

    #[derive(Default)]
    pub struct Counts {
        pub clones: AtomicUsize,
        pub wakes: AtomicUsize,
    }

    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake_by_ref, drop);

    // Every data pointer of this vtable is an `Arc<Counts>` made by
    // `Arc::into_raw`, one strong count per waker.
    fn clone(data: *const ()) -> RawWaker {
        // SAFETY: the waker being cloned holds a count.
        unsafe { Arc::increment_strong_count(data.cast::<Counts>()) };
        // SAFETY: as above.
        let counts = unsafe { &*data.cast::<Counts>() };
        counts.clones.fetch_add(1, Ordering::SeqCst);
        RawWaker::new(data, &VTABLE)
    }
    fn wake(data: *const ()) {
        wake_by_ref(data);
        drop(data);
    }
    fn wake_by_ref(data: *const ()) {
        // SAFETY: the waker woken holds a count.
        let counts = unsafe { &*data.cast::<Counts>() };
        counts.wakes.fetch_add(1, Ordering::SeqCst);
    }
    fn drop(data: *const ()) {
        // SAFETY: the waker dropped gives its count back.
        std::mem::drop(unsafe { Arc::from_raw(data.cast::<Counts>()) });
    }

    /// A waker and its counts.
    pub fn waker() -> (Waker, Arc<Counts>) {
        let counts = Arc::new(Counts::default());
        let data = Arc::into_raw(Arc::clone(&counts)).cast::<()>();
        // SAFETY: `data` is an `Arc<Counts>`'s count, as the vtable expects.
        (
            unsafe { Waker::from_raw(RawWaker::new(data, &VTABLE)) },
            counts,
        )
    }
}

/// A re-poll by the task that registered the waker (the usual case: woken
/// spuriously, or by a `select!` sibling) clones nothing and writes nothing;
/// a re-poll by another waker still registers it, and so does the first one
/// coming back after that. (The cell queue's shortcut: without `alloc` the node
/// queue registers the waker again on every re-poll.)
#[cfg(feature = "alloc")]
#[test]
fn a_repoll_with_the_registered_waker_clones_nothing() {
    use std::sync::atomic::Ordering;
    use std::sync::Arc;

    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let (a, a_counts) = clone_counting::waker();
    let (b, b_counts) = clone_counting::waker();
    let mut fut = Box::pin(sem.acquire(1));
    let mut poll = |waker: &Waker| fut.as_mut().poll(&mut Context::from_waker(waker));
    assert!(poll(&a).is_pending());
    let clones = |counts: &clone_counting::Counts| counts.clones.load(Ordering::SeqCst);
    assert_eq!(clones(&a_counts), 1, "parking registers a clone");
    for _ in 0..3 {
        assert!(poll(&a).is_pending());
    }
    assert_eq!(clones(&a_counts), 1, "the same waker again: no clone");
    assert!(poll(&b).is_pending());
    assert!(poll(&a).is_pending());
    assert_eq!((clones(&a_counts), clones(&b_counts)), (2, 1));
    drop(held);
    let wakes = |counts: &clone_counting::Counts| counts.wakes.load(Ordering::SeqCst);
    assert_eq!(
        (wakes(&a_counts), wakes(&b_counts)),
        (1, 0),
        "a registered last"
    );
    assert!(matches!(poll(&a), Poll::Ready(Ok(_))));
    drop(fut);
    // Each counts: the test's handle and its waker; every clone given back.
    assert_eq!(
        (Arc::strong_count(&a_counts), Arc::strong_count(&b_counts)),
        (2, 2)
    );
}
