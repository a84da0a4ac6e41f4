// Ported from tokio's semaphore tests (tokio/tests/sync_semaphore.rs, sync_semaphore_owned.rs, src/sync/tests/semaphore_batch.rs, tokio-util/tests/poll_semaphore.rs; MIT, the Tokio contributors).
//! tokio's own semaphore tests, and tokio-util's `PollSemaphore` ones, on
//! `admit::compat`: the counter's semantics a port relies on. Tasks are driven by hand, in the order tokio's runtime would
//! reach them; tokio's internal `release(n)` is a dropped permit or
//! `add_permits`. Where admit differs (a parked request holds no permits), the
//! test says so.
#![cfg(feature = "tokio-compat")]

mod wakers;

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::pin;
use std::sync::Arc;
use std::sync::Mutex;
use std::task::{Context, Poll, Wake, Waker};

use admit::compat::{
    AcquireError, OwnedSemaphorePermit, PollSemaphore, Semaphore, TryAcquireError,
};
use futures_lite::future::block_on;
use wakers::{counting, Task};

const MAX: usize = Semaphore::MAX_PERMITS;

#[test]
fn max_permits_is_admits_max_units() {
    assert_eq!(MAX, admit::Semaphore::MAX_UNITS);
}

#[test]
fn a_semaphore_with_no_permits_waits_for_add_permits() {
    let sem = Semaphore::new(0);
    assert_eq!(sem.try_acquire().err(), Some(TryAcquireError::NoPermits));
    let mut acquire = Task::new(sem.acquire());
    acquire.pending();
    sem.add_permits(1);
    assert_eq!(acquire.wakes(), 1);
    assert_eq!(acquire.ready().unwrap().num_permits(), 1);
}

#[test]
fn const_new_makes_a_static() {
    static SEM: Semaphore = Semaphore::const_new(2);
    let two = SEM.try_acquire_many(2).unwrap();
    assert!(SEM.try_acquire().is_err());
    drop(two);
    assert_eq!(SEM.available_permits(), 2);
}

#[test]
fn try_acquire_takes_what_is_free() {
    let sem = Semaphore::new(1);
    {
        let _first = sem.try_acquire().unwrap();
        assert!(sem.try_acquire().is_err());
    }
    assert!(sem.try_acquire().is_ok());

    let sem = Semaphore::new(100);
    let _one = sem.try_acquire().unwrap();
    let _five = sem.try_acquire_many(5).unwrap();
    assert_eq!(sem.available_permits(), 94);
}

#[test]
fn try_acquire_many_owned_takes_all_or_nothing() {
    let sem = Arc::new(Semaphore::new(42));
    {
        let _all = Arc::clone(&sem).try_acquire_many_owned(42).unwrap();
        assert!(Arc::clone(&sem).try_acquire_owned().is_err());
    }
    let _p32 = Arc::clone(&sem).try_acquire_many_owned(32).unwrap();
    assert!(Arc::clone(&sem).try_acquire_many_owned(11).is_err());
    let _p10 = Arc::clone(&sem).try_acquire_many_owned(10).unwrap();
    assert!(sem.try_acquire_owned().is_err());
}

#[test]
fn free_permits_are_granted_on_the_first_poll() {
    let sem = Semaphore::new(100);
    let one = Task::new(sem.acquire()).ready().unwrap();
    let five = Task::new(sem.acquire_many(5)).ready().unwrap();
    assert_eq!((one.num_permits(), five.num_permits()), (1, 5));
    assert_eq!(sem.available_permits(), 94);
}

#[test]
fn a_dropped_permit_wakes_the_waiter() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire().unwrap();
    let mut acquire = Task::new(sem.acquire());
    acquire.pending();
    drop(held);
    assert_eq!(acquire.wakes(), 1);
    let permit = acquire.ready().unwrap();
    assert_eq!(sem.available_permits(), 0);
    drop(permit);
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn owned_acquire_waits_for_a_dropped_permit() {
    let sem = Arc::new(Semaphore::new(1));
    let held = Arc::clone(&sem).try_acquire_owned().unwrap();
    let mut acquire = Task::new(Arc::clone(&sem).acquire_owned());
    acquire.pending();
    drop(held);
    assert_eq!(acquire.wakes(), 1);
    let permit = acquire.ready().unwrap();
    assert!(Arc::ptr_eq(permit.semaphore(), &sem));
}

#[test]
fn add_permits_wakes_the_waiter() {
    let sem = Arc::new(Semaphore::new(0));
    let mut borrowed = Task::new(sem.acquire());
    let mut owned = Task::new(Arc::clone(&sem).acquire_owned());
    borrowed.pending();
    owned.pending();
    sem.add_permits(1);
    assert_eq!((borrowed.wakes(), owned.wakes()), (1, 0));
    sem.add_permits(1);
    assert_eq!(owned.wakes(), 1);
    drop(borrowed.ready().unwrap());
    drop(owned.ready().unwrap());
}

#[test]
fn acquire_many_owned_waits_for_its_turn() {
    // A task takes 10 of the 10 free, then waits for 32 held elsewhere.
    let sem = Arc::new(Semaphore::new(42));
    let p32 = Arc::clone(&sem).try_acquire_many_owned(32).unwrap();
    let task = {
        let sem = Arc::clone(&sem);
        async move {
            let _p10 = Arc::clone(&sem).acquire_many_owned(10).await.unwrap();
            let _p32 = sem.acquire_many_owned(32).await.unwrap();
        }
    };
    let mut task = Task::new(task);
    task.pending();
    assert_eq!(sem.available_permits(), 0);
    drop(p32);
    assert_eq!(task.wakes(), 1);
    task.ready();
    assert_eq!(sem.available_permits(), 42);
}

#[test]
fn acquire_many_is_fifo_and_all_or_nothing() {
    let sem = Semaphore::new(5);
    let one = sem.try_acquire().unwrap();
    let mut five = Task::new(sem.acquire_many(5));
    let mut three = Task::new(sem.acquire_many(3));
    five.pending();
    three.pending();
    // tokio's parked head takes the 4 free and shows 0; admit's takes none
    // until it can take all, but the 4 are no one else's either.
    assert_eq!(sem.available_permits(), 4);
    assert!(sem.try_acquire().is_err());

    drop(one);
    assert_eq!((five.wakes(), three.wakes()), (1, 0));
    let mut five = five.ready().unwrap();
    assert_eq!(sem.available_permits(), 0);

    drop(five.split(1).unwrap());
    assert_eq!(three.wakes(), 0, "1 free, 3 asked");
    drop(five.split(1).unwrap());
    assert_eq!(three.wakes(), 0, "2 free, 3 asked");
    drop(five.split(1).unwrap());
    assert_eq!(three.wakes(), 1);
    assert_eq!(three.ready().unwrap().num_permits(), 3);
}

#[test]
fn a_large_head_blocks_smaller_requests_behind_it() {
    let sem = Semaphore::new(0);
    let mut three = Task::new(sem.acquire_many(3));
    let mut one = Task::new(sem.acquire());
    three.pending();
    one.pending();
    sem.add_permits(1);
    assert_eq!(
        (three.wakes(), one.wakes()),
        (0, 0),
        "head-of-line blocking"
    );
    sem.add_permits(2);
    assert_eq!((three.wakes(), one.wakes()), (1, 0));
    drop(three.ready().unwrap());
    assert_eq!(one.wakes(), 1);
}

#[test]
fn try_acquire_fails_while_permits_are_held() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire().unwrap();
    assert_eq!(sem.try_acquire().err(), Some(TryAcquireError::NoPermits));
    drop(held);
    assert_eq!(sem.available_permits(), 1);
    assert!(sem.try_acquire().is_ok());

    let sem = Semaphore::new(5);
    let one = sem.try_acquire().unwrap();
    assert!(sem.try_acquire_many(5).is_err());
    drop(one);
    assert!(sem.try_acquire_many(5).is_ok());
}

#[test]
fn a_request_above_the_permits_waits_for_them() {
    let sem = Semaphore::new(5);
    let mut seven = Task::new(sem.acquire_many(7));
    seven.pending();
    sem.add_permits(5);
    assert_eq!(seven.wakes(), 1);
    let seven = seven.ready().unwrap();
    assert_eq!(sem.available_permits(), 3);
    assert_eq!(sem.forget_permits(3), 3);
    assert_eq!(sem.available_permits(), 0);
    drop(seven);
    assert_eq!(sem.available_permits(), 7);
}

#[test]
fn forgetting_permits_never_fails_a_parked_request() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire().unwrap();
    let mut three = Task::new(sem.acquire_many(3));
    three.pending();
    assert_eq!(sem.forget_permits(1), 1);
    three.pending();
    held.forget();
    three.pending();
    sem.add_permits(2);
    three.pending();
    sem.add_permits(1);
    assert_eq!(three.ready().unwrap().num_permits(), 3);
}

#[test]
fn forget_permits_takes_at_most_the_free_ones() {
    let sem = Semaphore::new(10);
    assert_eq!(sem.forget_permits(4), 4);
    assert_eq!(sem.available_permits(), 6);
    let held = sem.try_acquire_many(2).unwrap();
    assert_eq!(sem.forget_permits(10), 4);
    assert_eq!(sem.available_permits(), 0);
    drop(held);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn a_forgotten_permit_never_comes_back() {
    let sem = Arc::new(Semaphore::new(2));
    sem.try_acquire().unwrap().forget();
    Arc::clone(&sem).try_acquire_owned().unwrap().forget();
    assert_eq!(sem.available_permits(), 0);
    assert!(sem.try_acquire().is_err());
    sem.add_permits(1);
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn merged_permits_return_together() {
    let sem = Arc::new(Semaphore::new(3));
    {
        let mut one = sem.try_acquire().unwrap();
        let two = sem.try_acquire_many(2).unwrap();
        one.merge(two);
        assert_eq!((one.num_permits(), sem.available_permits()), (3, 0));
    }
    assert_eq!(sem.available_permits(), 3);
    {
        let mut one = Arc::clone(&sem).try_acquire_owned().unwrap();
        let two = Arc::clone(&sem).try_acquire_many_owned(2).unwrap();
        one.merge(two);
        assert_eq!((one.num_permits(), sem.available_permits()), (3, 0));
    }
    assert_eq!(sem.available_permits(), 3);
}

#[test]
#[should_panic(expected = "merging permits from different semaphore instances")]
fn merging_permits_of_two_semaphores_panics() {
    let (a, b) = (Semaphore::new(1), Semaphore::new(1));
    let mut p = a.try_acquire().unwrap();
    p.merge(b.try_acquire().unwrap());
}

#[test]
#[should_panic(expected = "merging permits from different semaphore instances")]
fn merging_owned_permits_of_two_semaphores_panics() {
    let (a, b) = (Arc::new(Semaphore::new(1)), Arc::new(Semaphore::new(1)));
    let mut p = a.try_acquire_owned().unwrap();
    p.merge(b.try_acquire_owned().unwrap());
}

#[test]
fn split_moves_permits_into_a_new_permit() {
    let sem = Arc::new(Semaphore::new(3));
    let mut three = sem.try_acquire_many(3).unwrap();
    assert!(three.split(4).is_none());
    let one = three.split(1).unwrap();
    assert_eq!((three.num_permits(), one.num_permits()), (2, 1));
    drop(one);
    assert_eq!(sem.available_permits(), 1);
    let two = three.split(2).unwrap();
    assert_eq!(three.num_permits(), 0, "split may leave a permit with none");
    drop(three);
    assert_eq!(sem.available_permits(), 1);
    drop(two);

    let mut owned = Arc::clone(&sem).try_acquire_many_owned(3).unwrap();
    assert!(owned.split(4).is_none());
    let one = owned.split(1).unwrap();
    assert!(Arc::ptr_eq(one.semaphore(), &sem));
    assert_eq!((owned.num_permits(), one.num_permits()), (2, 1));
    drop(owned);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn zero_permits_are_granted_at_once_unless_closed() {
    let sem = Arc::new(Semaphore::new(0));
    let mut parked = Task::new(sem.acquire());
    parked.pending();
    // Granted though nothing is free and a request is parked ahead.
    let zero = Task::new(sem.acquire_many(0)).ready().unwrap();
    let try_zero = sem.try_acquire_many(0).unwrap();
    let owned_zero = Task::new(Arc::clone(&sem).acquire_many_owned(0))
        .ready()
        .unwrap();
    let try_owned_zero = Arc::clone(&sem).try_acquire_many_owned(0).unwrap();
    assert_eq!(zero.num_permits() + try_zero.num_permits(), 0);
    drop((zero, try_zero, owned_zero, try_owned_zero));
    assert_eq!(
        parked.wakes(),
        0,
        "dropping a zero permit gives nothing back"
    );
    assert_eq!(sem.available_permits(), 0);

    sem.close();
    assert!(Task::new(sem.acquire_many(0)).ready().is_err());
    assert_eq!(sem.try_acquire_many(0).err(), Some(TryAcquireError::Closed));
    assert!(Task::new(Arc::clone(&sem).acquire_many_owned(0))
        .ready()
        .is_err());
    assert!(Arc::clone(&sem).try_acquire_many_owned(0).is_err());
}

#[test]
fn zero_permits_merge_split_and_forget_as_no_permits() {
    let sem = Semaphore::new(2);
    let mut zero = sem.try_acquire_many(0).unwrap();
    zero.merge(sem.try_acquire().unwrap());
    assert_eq!(zero.num_permits(), 1);
    let mut none = zero.split(0).unwrap();
    assert_eq!(none.num_permits(), 0);
    none.merge(sem.try_acquire_many(0).unwrap());
    none.forget();
    assert_eq!(
        sem.available_permits(),
        1,
        "forgetting nothing forgets nothing"
    );
    drop(zero);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn close_fails_later_acquires_and_keeps_the_permits() {
    let sem = Semaphore::new(5);
    sem.close();
    assert!(sem.is_closed());
    assert_eq!(sem.available_permits(), 5);
    assert!(Task::new(sem.acquire()).ready().is_err());
    assert!(Task::new(sem.acquire()).ready().is_err());
    assert_eq!(sem.available_permits(), 5);
}

#[test]
fn closed_comes_before_no_permits() {
    let sem = Semaphore::new(0);
    sem.close();
    assert_eq!(sem.try_acquire().err(), Some(TryAcquireError::Closed));
}

#[test]
fn close_wakes_every_waiter() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire_many(2).unwrap();
    let mut a = Task::new(sem.acquire());
    let mut b = Task::new(sem.acquire_many(5));
    a.pending();
    b.pending();
    sem.close();
    assert_eq!((a.wakes(), b.wakes()), (1, 1));
    assert!(a.ready().is_err());
    assert!(b.ready().is_err());
    assert_eq!(sem.available_permits(), 0);
    // Permits held stay valid and come back; the semaphore stays closed.
    drop(held);
    assert_eq!(sem.available_permits(), 2);
    assert!(Task::new(sem.acquire()).ready().is_err());
}

#[test]
fn close_wakes_an_owned_waiter() {
    let sem = Arc::new(Semaphore::new(0));
    let mut owned = Task::new(Arc::clone(&sem).acquire_many_owned(2));
    owned.pending();
    sem.close();
    assert_eq!(owned.wakes(), 1);
    assert!(owned.ready().is_err());
}

#[test]
fn a_cancelled_acquire_gives_its_place_up() {
    let sem = Semaphore::new(10);
    let _four = sem.try_acquire_many(4).unwrap();
    let mut eight = Task::new(sem.acquire_many(8));
    eight.pending();
    // tokio's parked request has taken the 6 free (it shows 0); admit's holds
    // none, and they are still no one else's.
    assert_eq!(sem.available_permits(), 6);
    assert!(sem.try_acquire().is_err());
    drop(eight);
    assert_eq!(sem.available_permits(), 6);
    assert!(sem.try_acquire_many(6).is_ok());
}

#[test]
fn a_cancelled_acquire_gives_back_a_grant_it_never_saw() {
    let sem = Arc::new(Semaphore::new(0));
    let mut borrowed = Task::new(sem.acquire());
    let mut owned = Task::new(Arc::clone(&sem).acquire_many_owned(2));
    borrowed.pending();
    owned.pending();
    sem.add_permits(3);
    assert_eq!((borrowed.wakes(), owned.wakes()), (1, 1));
    assert_eq!(sem.available_permits(), 0, "granted, not yet polled");
    drop(borrowed);
    drop(owned);
    assert_eq!(sem.available_permits(), 3);
}

#[test]
fn forget_permits_takes_what_a_parked_request_has_not() {
    // tokio's parked request would hold the 3 free, and forget 0 of them.
    let sem = Semaphore::new(3);
    let mut five = Task::new(sem.acquire_many(5));
    five.pending();
    assert_eq!(sem.forget_permits(2), 2);
    assert_eq!(sem.available_permits(), 1);
    sem.add_permits(3);
    five.pending();
    sem.add_permits(1);
    assert_eq!(five.ready().unwrap().num_permits(), 5);
}

/// A waker holding a permit: replacing it releases the permit from inside a poll.
struct HoldsPermit(#[allow(dead_code)] Option<OwnedSemaphorePermit>);

impl Wake for HoldsPermit {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn a_permit_released_by_a_dropped_waker_does_not_deadlock() {
    let sem = Arc::new(Semaphore::new(1));
    let mut acquire = pin!(async {
        let _permit = sem.acquire().await.unwrap();
    });
    let mut done = false;
    for _ in 0..2 {
        // The first waker holds the only permit; the second poll replaces it,
        // and the permit comes back from inside that poll.
        let waker = Waker::from(Arc::new(HoldsPermit(
            Arc::clone(&sem).try_acquire_owned().ok(),
        )));
        assert!(!done, "the first waker holds the permit");
        done = acquire
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready();
    }
    assert!(
        done || acquire
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_ready()
    );
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn add_permits_up_to_max_permits() {
    let sem = Semaphore::new(0);
    sem.add_permits(MAX);
    assert_eq!(sem.available_permits(), MAX);
    let _ = Semaphore::new(MAX);
    Semaphore::new(MAX - 1).add_permits(1);
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn add_permits_past_max_permits_panics() {
    Semaphore::new(1).add_permits(MAX);
}

#[test]
fn add_permits_past_max_permits_panics_on_the_one_past() {
    let sem = Semaphore::new(MAX - 1);
    sem.add_permits(1);
    assert_eq!(panic_at(|| sem.add_permits(1)).1, TOO_MANY);
    assert_eq!(sem.available_permits(), MAX, "nothing added");
    // admit counts held permits too (tokio only the free ones).
    let sem = Semaphore::new(MAX);
    let held = sem.try_acquire().unwrap();
    assert_eq!(panic_at(|| sem.add_permits(1)).1, TOO_MANY);
    drop(held);
    assert_eq!(sem.available_permits(), MAX, "nothing added");
}

/// tokio's panic message above `MAX_PERMITS`.
const TOO_MANY: &str = "a semaphore may not have more than MAX_PERMITS permits";

/// Runs `f`, which must panic, and returns the file the panic reports and its
/// message. The panic hook is the process's: calls are serialized, and a
/// panic on another thread meanwhile goes to the hook there was before.
fn panic_at(f: impl FnOnce()) -> (String, String) {
    static SERIAL: Mutex<()> = Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::thread::current().id();
    let seen = Arc::new(Mutex::new(None));
    let previous = Arc::new(std::panic::take_hook());
    std::panic::set_hook({
        let (seen, previous) = (Arc::clone(&seen), Arc::clone(&previous));
        Box::new(move |info| {
            if std::thread::current().id() == me {
                *seen.lock().unwrap() = info.location().map(|l| l.file().to_owned());
            } else {
                previous(info);
            }
        })
    });
    let payload = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    std::panic::set_hook(Box::new(move |info| previous(info)));
    let message = match payload.downcast::<String>() {
        Ok(message) => *message,
        Err(payload) => (*payload.downcast::<&str>().unwrap()).to_owned(),
    };
    let file = seen.lock().unwrap().take().expect("the hook saw the panic");
    (file, message)
}

#[test]
fn the_panics_point_at_the_caller_with_tokios_message() {
    let here = || (file!().to_owned(), TOO_MANY.to_owned());
    assert_eq!(panic_at(|| drop(Semaphore::new(MAX + 1))), here(), "new");
    assert_eq!(
        panic_at(|| drop(Semaphore::const_new(MAX + 1))),
        here(),
        "const_new"
    );
    let sem = Arc::new(Semaphore::new(1));
    assert_eq!(panic_at(|| sem.add_permits(MAX)), here(), "add_permits");
    assert_eq!(
        panic_at(|| drop(sem.try_acquire_many(u32::MAX))),
        here(),
        "try_acquire_many"
    );
    assert_eq!(
        panic_at(|| drop(Arc::clone(&sem).try_acquire_many_owned(u32::MAX))),
        here(),
        "try_acquire_many_owned"
    );
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    assert_eq!(
        panic_at(|| drop(
            poll.poll_acquire_many(&mut Context::from_waker(Waker::noop()), u32::MAX)
        )),
        here(),
        "PollSemaphore::poll_acquire_many"
    );
    assert_eq!(
        panic_at(|| poll.add_permits(MAX)),
        here(),
        "PollSemaphore::add_permits"
    );
    assert_eq!(sem.available_permits(), 1, "no panic changed anything");
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn new_past_max_permits_panics() {
    let _ = Semaphore::new(MAX + 1);
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn try_acquire_past_max_permits_panics() {
    let sem = Semaphore::new(0);
    let _ = sem.try_acquire_many(MAX as u32 + 1);
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn acquire_past_max_permits_panics() {
    let sem = Semaphore::new(0);
    let _ = Task::new(sem.acquire_many(u32::MAX)).poll();
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn owned_acquire_past_max_permits_panics() {
    let sem = Arc::new(Semaphore::new(0));
    let _ = Task::new(sem.acquire_many_owned(MAX as u32 + 1)).poll();
}

#[test]
fn many_threads_leave_every_permit_free() {
    let sem = Arc::new(Semaphore::new(5));
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for i in 0..125 {
                    if i % 2 == 0 {
                        drop(block_on(sem.acquire()).unwrap());
                    } else {
                        drop(block_on(Arc::clone(&sem).acquire_owned()).unwrap());
                    }
                }
            });
        }
    });
    let five = sem.try_acquire_many(5).unwrap();
    assert!(sem.try_acquire().is_err());
    drop(five);
    assert_eq!(sem.available_permits(), 5);
}

#[test]
fn errors_say_what_happened() {
    let closed = TryAcquireError::Closed;
    let none = TryAcquireError::NoPermits;
    assert!(closed.is_closed() && !closed.is_no_permits());
    assert!(none.is_no_permits() && !none.is_closed());
    assert_eq!(closed.to_string(), "semaphore closed");
    assert_eq!(none.to_string(), "no permits available");
    assert_eq!(
        AcquireError::closed_for_test().to_string(),
        "semaphore closed"
    );
    let _: &dyn std::error::Error = &closed;
    let _: &dyn std::error::Error = &AcquireError::closed_for_test();
}

#[test]
fn the_futures_are_send() {
    fn send<T: Send>(_: &T) {}
    let sem = Arc::new(Semaphore::new(1));
    send(&sem.acquire());
    send(&sem.acquire_many(1));
    send(&Arc::clone(&sem).acquire_owned());
    send(&Arc::clone(&sem).acquire_many_owned(1));
}

#[test]
fn debug_shows_the_permits() {
    let sem = Semaphore::new(2);
    let permit = sem.try_acquire().unwrap();
    assert_eq!(format!("{permit:?}"), "SemaphorePermit { permits: 1, .. }");
    assert!(format!("{sem:?}").contains("available: 1"));
}

trait ClosedForTest {
    fn closed_for_test() -> Self;
}

/// `AcquireError` has no public constructor, as in tokio: take one from a
/// closed semaphore.
impl ClosedForTest for AcquireError {
    fn closed_for_test() -> Self {
        let sem = Semaphore::new(0);
        sem.close();
        block_on(sem.acquire()).unwrap_err()
    }
}

#[test]
fn a_borrowed_permit_names_its_semaphore() {
    let (a, b) = (Semaphore::new(2), Semaphore::new(2));
    let mut from_a = a.try_acquire_many(2).unwrap();
    let from_b = b.try_acquire().unwrap();
    assert!(std::ptr::eq(from_a.semaphore(), &a));
    assert!(std::ptr::eq(from_b.semaphore(), &b));
    let split = from_a.split(1).unwrap();
    assert!(std::ptr::eq(split.semaphore(), &a));
    // As a port uses it: the permit's semaphore, reached through the permit.
    from_a.forget();
    split.semaphore().add_permits(1);
    assert_eq!(a.available_permits(), 1);
}

// tokio-util's `PollSemaphore` (tokio-util/tests/poll_semaphore.rs), and what
// its port relies on. A call is made under a counting waker.

/// One `poll_acquire_many` call, woken through `waker`.
fn poll_many(
    poll: &mut PollSemaphore,
    waker: &Waker,
    n: u32,
) -> Poll<Option<OwnedSemaphorePermit>> {
    poll.poll_acquire_many(&mut Context::from_waker(waker), n)
}

/// One `poll_acquire` call, woken through `waker`.
fn poll_one(poll: &mut PollSemaphore, waker: &Waker) -> Poll<Option<OwnedSemaphorePermit>> {
    poll.poll_acquire(&mut Context::from_waker(waker))
}

#[test]
fn poll_semaphore_it_works() {
    let sem = Arc::new(Semaphore::new(1));
    let mut poll_sem = PollSemaphore::new(Arc::clone(&sem));
    let (woken, waker) = counting();

    let permit = Task::new(sem.acquire()).ready().unwrap();
    assert!(poll_one(&mut poll_sem, &waker).is_pending());
    drop(permit);
    assert_eq!(woken.wakes(), 1);
    assert!(matches!(
        poll_one(&mut poll_sem, &waker),
        Poll::Ready(Some(_))
    ));

    sem.close();
    assert!(matches!(poll_one(&mut poll_sem, &waker), Poll::Ready(None)));
    // Fused.
    assert!(matches!(poll_one(&mut poll_sem, &waker), Poll::Ready(None)));
    assert!(matches!(poll_one(&mut poll_sem, &waker), Poll::Ready(None)));
}

#[test]
fn poll_semaphore_can_acquire_many_permits() {
    let sem = Arc::new(Semaphore::new(4));
    let mut poll_sem = PollSemaphore::new(Arc::clone(&sem));
    let (woken, waker) = counting();

    let permit1 = poll_one(&mut poll_sem, &waker);
    assert!(matches!(permit1, Poll::Ready(Some(_))));
    let permit2 = poll_many(&mut poll_sem, &waker, 2);
    assert!(matches!(&permit2, Poll::Ready(Some(p)) if p.num_permits() == 2));
    assert_eq!(sem.available_permits(), 1);
    drop(permit2);

    assert!(poll_many(&mut poll_sem, &waker, 4).is_pending());
    drop(permit1);
    assert_eq!(woken.wakes(), 1);
    let permit4 = poll_many(&mut poll_sem, &waker, 4);
    assert!(matches!(&permit4, Poll::Ready(Some(p)) if p.num_permits() == 4));
    assert_eq!(sem.available_permits(), 0);
}

#[test]
fn poll_semaphore_can_poll_different_amounts_of_permits() {
    let sem = Arc::new(Semaphore::new(4));
    let mut poll_sem = PollSemaphore::new(Arc::clone(&sem));
    let waker = Waker::noop();
    assert!(poll_many(&mut poll_sem, waker, 5).is_pending());
    assert!(poll_many(&mut poll_sem, waker, 4).is_ready());

    let permit = Task::new(sem.acquire_many(4)).ready().unwrap();
    assert!(poll_many(&mut poll_sem, waker, 5).is_pending());
    assert!(poll_many(&mut poll_sem, waker, 4).is_pending());
    drop(permit);
    assert!(poll_many(&mut poll_sem, waker, 5).is_pending());
    assert!(poll_many(&mut poll_sem, waker, 4).is_ready());
}

#[test]
fn a_poll_semaphore_keeps_its_place_among_acquire_owned_callers() {
    // tower's `ConcurrencyLimit::with_semaphore`: one semaphore, shared.
    let sem = Arc::new(Semaphore::new(1));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    let (woken, waker) = counting();
    let held = Arc::clone(&sem).try_acquire_owned().unwrap();
    let mut first = Task::new(Arc::clone(&sem).acquire_owned());
    first.pending();
    assert!(poll_one(&mut poll, &waker).is_pending());
    let mut third = Task::new(Arc::clone(&sem).acquire_owned());
    third.pending();

    drop(held);
    assert_eq!((first.wakes(), woken.wakes(), third.wakes()), (1, 0, 0));
    assert!(poll_one(&mut poll, &waker).is_pending(), "still second");
    drop(first.ready().unwrap());
    assert_eq!((woken.wakes(), third.wakes()), (1, 0));
    let permit = match poll_one(&mut poll, &waker) {
        Poll::Ready(Some(permit)) => permit,
        other => panic!("expected a permit, got {other:?}"),
    };
    assert!(Arc::ptr_eq(permit.semaphore(), &sem));
    drop(permit);
    assert_eq!(third.wakes(), 1);
    drop(third.ready().unwrap());
    assert_eq!(sem.available_permits(), 1);
}

#[test]
fn a_poll_semaphore_wakes_only_the_latest_waker() {
    let sem = Arc::new(Semaphore::new(0));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    let (old, old_waker) = counting();
    let (new, new_waker) = counting();
    assert!(poll_one(&mut poll, &old_waker).is_pending());
    assert!(poll_one(&mut poll, &new_waker).is_pending());
    poll.add_permits(1);
    assert_eq!((old.wakes(), new.wakes()), (0, 1));
    assert!(matches!(
        poll_one(&mut poll, &new_waker),
        Poll::Ready(Some(_))
    ));
}

#[test]
fn a_different_count_requeues_the_request_at_the_back() {
    let sem = Arc::new(Semaphore::new(0));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    let (woken, waker) = counting();
    assert!(poll_many(&mut poll, &waker, 2).is_pending());
    let mut other = Task::new(Arc::clone(&sem).acquire_owned());
    other.pending();
    // The 2 is given up; the 1 queues behind `other`.
    assert!(poll_many(&mut poll, &waker, 1).is_pending());
    sem.add_permits(1);
    assert_eq!((other.wakes(), woken.wakes()), (1, 0));
    let other = other.ready().unwrap();
    sem.add_permits(1);
    assert_eq!(woken.wakes(), 1);
    match poll_many(&mut poll, &waker, 1) {
        Poll::Ready(Some(permit)) => assert_eq!(permit.num_permits(), 1),
        other => panic!("expected a permit, got {other:?}"),
    }
    drop(other);
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn a_different_count_gives_back_what_was_granted() {
    let sem = Arc::new(Semaphore::new(0));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll_many(&mut poll, Waker::noop(), 2).is_pending());
    sem.add_permits(2);
    assert_eq!(sem.available_permits(), 0, "granted, not yet polled");
    match poll_many(&mut poll, Waker::noop(), 3) {
        Poll::Pending => {}
        other => panic!("3 of 2: expected pending, got {other:?}"),
    }
    assert_eq!(sem.available_permits(), 2);
}

#[test]
fn a_cloned_poll_semaphore_has_no_request_in_flight() {
    let sem = Arc::new(Semaphore::new(0));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    let (woken, waker) = counting();
    assert!(poll_one(&mut poll, &waker).is_pending());
    let mut clone = poll.clone();
    assert!(Arc::ptr_eq(&clone.clone_inner(), &sem));
    let (clone_woken, clone_waker) = counting();
    // Its own request, behind the original's.
    assert!(poll_one(&mut clone, &clone_waker).is_pending());
    sem.add_permits(1);
    assert_eq!((woken.wakes(), clone_woken.wakes()), (1, 0));
    // Dropping the original gives its grant to the clone's request.
    drop(poll);
    assert_eq!(clone_woken.wakes(), 1);
    assert!(matches!(
        poll_one(&mut clone, &clone_waker),
        Poll::Ready(Some(_))
    ));
}

#[test]
fn dropping_a_poll_semaphore_gives_back_its_grant() {
    let sem = Arc::new(Semaphore::new(0));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll_one(&mut poll, Waker::noop()).is_pending());
    sem.add_permits(1);
    assert_eq!(sem.available_permits(), 0, "granted, held in the handle");
    drop(poll);
    assert_eq!(sem.available_permits(), 1);

    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    assert!(poll_many(&mut poll, Waker::noop(), 2).is_pending());
    sem.add_permits(1);
    assert_eq!(sem.available_permits(), 0, "granted, held in the handle");
    let inner = poll.into_inner();
    assert!(Arc::ptr_eq(&inner, &sem));
    assert_eq!(sem.available_permits(), 2, "into_inner cancels");
}

#[test]
fn a_grant_leaves_no_request_in_flight() {
    let sem = Arc::new(Semaphore::new(0));
    let mut poll = PollSemaphore::new(Arc::clone(&sem));
    let (woken, waker) = counting();
    assert!(poll_one(&mut poll, &waker).is_pending());
    sem.add_permits(1);
    drop(poll_one(&mut poll, &waker));
    // Nothing parked: another caller takes the permit, and the handle's
    // waker is never woken for it.
    let mut other = Task::new(Arc::clone(&sem).acquire_owned());
    drop(other.ready().unwrap());
    assert!(sem.try_acquire().is_ok());
    assert_eq!(woken.wakes(), 1);
}

#[test]
fn poll_semaphore_passes_through_to_the_semaphore() {
    let sem = Arc::new(Semaphore::new(1));
    let poll = PollSemaphore::new(Arc::clone(&sem));
    assert!(std::ptr::eq(poll.as_ref(), &*sem));
    assert_eq!(poll.available_permits(), 1);
    poll.add_permits(2);
    assert_eq!((poll.available_permits(), sem.available_permits()), (3, 3));
    assert!(format!("{poll:?}").starts_with("PollSemaphore { semaphore: "));
    poll.close();
    assert!(sem.is_closed());
}

#[test]
#[should_panic(expected = "a semaphore may not have more than MAX_PERMITS permits")]
fn poll_acquire_past_max_permits_panics() {
    let mut poll = PollSemaphore::new(Arc::new(Semaphore::new(0)));
    let _ = poll_many(&mut poll, Waker::noop(), MAX as u32 + 1);
}

#[test]
fn a_poll_semaphore_is_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PollSemaphore>();
}
