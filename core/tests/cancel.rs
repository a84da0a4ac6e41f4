//! Property 3, cancel safety: dropping an acquire future at any point loses no unit
//! and strands no waiter.

mod wakers;

use admit::Semaphore;
use wakers::Task;

#[test]
fn drop_before_first_poll_changes_nothing() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    drop(sem.acquire(1));
    assert_eq!((sem.available(), sem.waiters()), (0, 0));
    drop(held);
    assert_eq!(sem.available(), 2);
}

/// Go's canceled-waiter-at-the-front bug: the head waiter is cancelled while the one
/// behind it would fit; the one behind must be re-examined and granted.
#[test]
fn cancelling_the_head_serves_the_waiters_behind_it() {
    let sem = Semaphore::new(2);
    let one = sem.try_acquire(1).unwrap();
    let mut head = Task::new(sem.acquire(2));
    let mut behind = Task::new(sem.acquire(1));
    head.pending();
    behind.pending();
    assert_eq!(sem.available(), 1);

    drop(head);
    assert_eq!(behind.wakes(), 1);
    let p = behind.ready().unwrap();
    assert_eq!((sem.available(), sem.waiters()), (0, 0));
    drop((one, p));
    assert_eq!(sem.available(), 2);
}

#[test]
fn cancelling_a_middle_waiter_keeps_the_order_of_the_rest() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut a = Task::new(sem.acquire(1));
    let mut b = Task::new(sem.acquire(1));
    let mut c = Task::new(sem.acquire(1));
    a.pending();
    b.pending();
    c.pending();
    drop(b);
    assert_eq!((sem.waiters(), a.wakes(), c.wakes()), (2, 0, 0));
    drop(held);
    assert_eq!((a.wakes(), c.wakes()), (1, 0));
    drop(a.ready().unwrap());
    assert_eq!(c.wakes(), 1);
    drop(c.ready().unwrap());
    assert_eq!(sem.available(), 1);
}

#[test]
fn cancelling_the_tail_leaves_a_working_queue() {
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let mut a = Task::new(sem.acquire(1));
    let mut b = Task::new(sem.acquire(1));
    a.pending();
    b.pending();
    drop(b);
    let mut c = Task::new(sem.acquire(1));
    c.pending();
    drop(held);
    drop(a.ready().unwrap());
    drop(c.ready().unwrap());
    assert_eq!((sem.available(), sem.waiters()), (1, 0));
}

/// Granted by a release but dropped before it was polled again: the units go back,
/// and to the next waiter if one fits.
#[test]
fn dropping_a_granted_unpolled_future_returns_its_units() {
    let sem = Semaphore::new(2);
    let held = sem.try_acquire(2).unwrap();
    let mut granted = Task::new(sem.acquire(2));
    let mut next = Task::new(sem.acquire(2));
    granted.pending();
    next.pending();
    drop(held);
    assert_eq!((granted.wakes(), sem.available()), (1, 0));
    drop(granted);
    assert_eq!(next.wakes(), 1);
    drop(next.ready().unwrap());
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

#[test]
fn dropping_the_only_waiter_lets_try_acquire_in_again() {
    let sem = Semaphore::new(2);
    let one = sem.try_acquire(1).unwrap();
    let mut w = Task::new(sem.acquire(2));
    w.pending();
    assert!(sem.try_acquire(1).is_err(), "no barging while parked");
    drop(w);
    assert!(
        sem.try_acquire(1).is_ok(),
        "the queue mark is cleared with the last waiter"
    );
    drop(one);
}

/// On threads: futures dropped after 0, 1 or 2 polls while others release.
#[test]
fn threaded_cancellation_loses_nothing() {
    let rounds = if cfg!(miri) { 30 } else { 5_000 };
    let sem = Semaphore::new(3);
    std::thread::scope(|s| {
        for t in 0..2usize {
            let sem = &sem;
            s.spawn(move || {
                for i in 0..rounds {
                    let units = 1 + (i + t) % 3;
                    let mut task = Task::new(sem.acquire(units));
                    let polls = (i / 3 + t) % 3;
                    let mut permit = None;
                    for _ in 0..polls {
                        if let std::task::Poll::Ready(p) = task.poll() {
                            permit = Some(p.unwrap());
                            break;
                        }
                    }
                    drop(task);
                    drop(permit);
                }
            });
        }
    });
    assert_eq!((sem.available(), sem.waiters()), (3, 0));
}
