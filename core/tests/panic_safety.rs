//! Property 7, panic safety: a panicking holder returns its units on unwind; a
//! panicking waker neither corrupts the queue nor keeps the rest of its batch asleep;
//! a panicking waker clone leaves nothing behind.

mod wakers;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Wake, Waker};

use admit::Semaphore;
use wakers::Task;

#[test]
fn a_panicking_holder_returns_its_units() {
    let sem = Semaphore::new(3);
    let result = catch_unwind(AssertUnwindSafe(|| {
        let _permit = sem.try_acquire(2).unwrap();
        panic!("handler failed");
    }));
    assert!(result.is_err());
    assert_eq!(sem.available(), 3);
}

struct PanicOnWake;

impl Wake for PanicOnWake {
    fn wake(self: Arc<Self>) {
        panic!("waker panicked");
    }
}

fn drive(fut: std::pin::Pin<&mut admit::Acquire<'_>>, waker: &Waker) -> bool {
    matches!(
        fut.poll(&mut Context::from_waker(waker)),
        Poll::Ready(Ok(_))
    )
}

#[test]
fn a_panicking_waker_does_not_strand_the_rest_of_its_batch() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut before = Task::new(sem.acquire(1));
    before.pending();
    let panicky = Waker::from(Arc::new(PanicOnWake));
    let mut bad = Box::pin(sem.acquire(1));
    assert!(bad
        .as_mut()
        .poll(&mut Context::from_waker(&panicky))
        .is_pending());
    let mut after = Task::new(sem.acquire(1));
    after.pending();

    // The release grants `before` and `bad`; waking `bad` panics out of the drop.
    let result = catch_unwind(AssertUnwindSafe(|| drop(held)));
    assert!(result.is_err());
    assert_eq!(before.wakes(), 1, "the rest of the batch is still woken");
    assert_eq!(after.wakes(), 0);

    // The queue is intact: both grants are delivered and `after` is served next.
    assert!(drive(bad.as_mut(), Waker::noop()));
    let p = before.ready().unwrap();
    drop(p);
    assert_eq!(after.wakes(), 1);
    drop(after.ready().unwrap());
    drop(bad);
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

#[test]
fn a_panicking_waker_in_a_full_batch_strands_nobody_behind_it() {
    // More waiters than one wake batch holds (32): the serving loop must go on to
    // the next batch although a waker of the first panicked out of it.
    const WAITERS: usize = 40;
    let sem = Semaphore::new(WAITERS);
    let held = sem.try_acquire(WAITERS).unwrap();
    let panicky = Waker::from(Arc::new(PanicOnWake));
    let mut first = Box::pin(sem.acquire(1));
    assert!(first
        .as_mut()
        .poll(&mut Context::from_waker(&panicky))
        .is_pending());
    let mut rest: Vec<_> = (1..WAITERS).map(|_| Task::new(sem.acquire(1))).collect();
    for task in &mut rest {
        task.pending();
    }

    let result = catch_unwind(AssertUnwindSafe(|| drop(held)));
    assert!(result.is_err(), "the waker's panic reaches the releaser");
    assert_eq!(sem.waiters(), 0, "every waiter was served: {sem:?}");
    assert!(
        rest.iter().all(|task| task.wakes() == 1),
        "each was woken once"
    );
    let permits: Vec<_> = rest.iter_mut().map(|task| task.ready().unwrap()).collect();
    assert_eq!((permits.len(), sem.available()), (WAITERS - 1, 0));
    assert!(drive(first.as_mut(), Waker::noop()), "granted, and dropped");
    drop(permits);
    assert_eq!((sem.available(), sem.waiters()), (WAITERS, 0));
}

#[test]
fn a_panicking_waker_clone_leaves_nothing_behind() {
    fn clone(_: *const ()) -> RawWaker {
        panic!("clone panicked")
    }
    fn noop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable never touches the null data pointer; `clone` diverges.
    let waker = unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) };

    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let mut fut = std::pin::pin!(sem.acquire(1));
        drive(fut.as_mut(), &waker)
    }));
    assert!(result.is_err());
    assert_eq!(sem.waiters(), 0);
    drop(held);
    assert_eq!(sem.available(), 1);
    assert!(sem.try_acquire(1).is_ok());
}
